# Copyright 2026 The HuggingFace Team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""
Maintainer utility that proposes the published trained precisions (`utils/trained_precisions.json`, checked by
`utils/check_trained_precision.py`) to the Hub repos they describe: for each exact-id row, a pull request that adds
`trained_precision` to the repo's `config.json`, whose description cites the row's source. Glob rows name families,
not repos, and are left out.

Use from the root of the repo, with this checkout installed (`pip install -e .`), with:

```bash
python utils/open_trained_precision_prs.py [HUB_ID ...]
```

for a dry run: it downloads each repo's current `config.json` and prints the change, opening nothing. Then

```bash
python utils/open_trained_precision_prs.py [HUB_ID ...] --push
```

opens the pull requests (a token with write access: `hf auth login` or `HF_TOKEN`). Without ids it covers every
exact-id row. A repo that already holds the value, or has any earlier pull request with the same title (open, merged
or closed: a closed one is a maintainer's answer), is skipped unless `--force`. With `--json`, stdout is one JSON
document holding `"exit_code"`.

To make the change in local clones instead (their commit is the pull request), for one row:

```bash
python utils/open_trained_precision_prs.py EleutherAI/gpt-neo-1.3B --write_configs path/to/gpt-neo-1.3B
```

Exit codes: 0 when everything asked was done or already so (a dry run included), 2 for a usage error, 4 when an id is
not an exact-id row of `utils/trained_precisions.json` or a pull request could not be prepared or opened.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

from transformers.trained_precision.commands.inspection import EXIT_BAD_INPUT, EXIT_NOT_DONE, EXIT_SAFE
from transformers.trained_precision.record.populate import (
    ERROR,
    SKIPPED,
    UNCHANGED,
    WOULD_WRITE,
    WRITTEN,
    ConfigEditError,
    atomic_write_text,
    set_config_field,
    unified_diff,
)
from transformers.trained_precision.vocabulary import FIELD
from transformers.utils import CONFIG_NAME


RFC_URL = "https://github.com/huggingface/transformers/issues/11209"
PR_TITLE = "Add `trained_precision` to config.json"
# `dtype` (`torch_dtype` before 4.56) as config.json stores it, in the field's names
STORED_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _load_checker():
    """utils/check_trained_precision.py, imported by path: it holds the published precisions and checks them."""
    path = Path(__file__).resolve().parent / "check_trained_precision.py"
    spec = importlib.util.spec_from_file_location("check_trained_precision", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_trained_precision = _load_checker()


@dataclasses.dataclass
class HubPullRequest:
    """
    The commit that adds the field to one Hub repo, as `HfApi.create_commit(..., create_pr=True)` receives it.

    Args:
        repo_id (`str`): the Hub repo.
        status (`str`): `"would write"` (prepared), `"written"` (opened), `"unchanged"`, `"skipped"` or `"error"`.
        message (`str`): one sentence for the maintainer.
        operations (`list`): the `CommitOperationAdd` list.
        commit_description (`str`): the PR description.
        parent_commit (`str`, *optional*): the revision the PR is based on.
        diff (`str`): the change to `config.json`.
        pr_url (`str`, *optional*): the opened PR.
    """

    repo_id: str
    status: str
    message: str
    operations: list = dataclasses.field(default_factory=list)
    commit_description: str = ""
    parent_commit: str | None = None
    diff: str = ""
    pr_url: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == ERROR


def stored_precision(config_text: str) -> str | None:
    """The precision the repo's weights are stored in, as its config.json says (`dtype` or `torch_dtype`)."""
    config = json.loads(config_text)
    return STORED_DTYPES.get(str(config.get("dtype") or config.get("torch_dtype")))


def pr_description(row, stored: str | None = None) -> str:
    """The PR description: the value, the source where its trainers state it, and what the field means."""
    _, precision, source = row
    stored_note = ""
    if stored and stored != precision:
        stored_note = (
            f"\n\nThe weights in this repo are stored in {stored}; that is unchanged. `{FIELD}` records how the model "
            "was trained, which is what decides whether running it in a half-precision format is safe."
        )
    return (
        f'This PR adds `"{FIELD}": "{precision}"` to `{CONFIG_NAME}`.\n\n'
        f"Source: stated at {source}{stored_note}\n\n"
        f"`{FIELD}` ({RFC_URL}) says in which precision a checkpoint was trained (`fp32`, `bf16` or `fp16`). "
        "Libraries that read it can warn before the model is run in a precision it overflows in, e.g. a "
        "bf16-trained model in fp16. Loaders that do not know the field ignore it; nothing else in the file changes."
    )


def earlier_pr(api, repo_id: str):
    """Any earlier PR of this utility on `repo_id`, open, merged or closed (a closed one is a maintainer's answer)."""
    discussions = api.get_repo_discussions(repo_id, discussion_type="pull_request", discussion_status=None)
    return next((d for d in discussions if d.title == PR_TITLE), None)


def prepare_pr(api, row, push: bool = False, force: bool = False) -> HubPullRequest:
    """
    Prepares (and with `push=True` opens) the pull request that adds the field to the repo of `row` (`[hub_id,
    precision, source]`). A network or auth failure is an `"error"` result, so that one repo does not stop the others.
    """
    from huggingface_hub import CommitOperationAdd

    repo_id, precision, source = row
    try:
        sha = api.model_info(repo_id).sha
        earlier = earlier_pr(api, repo_id)
        if earlier is not None and not force:
            status = getattr(earlier, "status", "unknown status")
            return HubPullRequest(
                repo_id,
                SKIPPED,
                f"an earlier PR already proposed it (#{earlier.num}, {status}); pass --force to open another.",
            )
        with open(api.hf_hub_download(repo_id, CONFIG_NAME, revision=sha), encoding="utf-8", newline="") as f:
            text = f.read()
        new_text = set_config_field(text, precision, force=force, source=source)
        if new_text == text:
            return HubPullRequest(repo_id, UNCHANGED, f"already says {FIELD}={precision!r}.")
        result = HubPullRequest(
            repo_id,
            WOULD_WRITE,
            f"would open a PR setting {FIELD}={precision!r} (dry run; pass --push to open it).",
            [CommitOperationAdd(path_in_repo=CONFIG_NAME, path_or_fileobj=new_text.encode())],
            pr_description(row, stored_precision(text)),
            sha,
            unified_diff(text, new_text, f"{repo_id}/{CONFIG_NAME}"),
        )
        if push:
            info = api.create_commit(
                repo_id,
                result.operations,
                commit_message=PR_TITLE,
                commit_description=result.commit_description,
                create_pr=True,
                parent_commit=sha,
            )
            result.status, result.pr_url = WRITTEN, getattr(info, "pr_url", None)
            result.message = f"opened {result.pr_url or 'a pull request'}."
        return result
    except ConfigEditError as e:
        return HubPullRequest(repo_id, ERROR, f"{CONFIG_NAME}: {e}.")
    except Exception as e:  # one repo's network/auth failure must not stop the others
        return HubPullRequest(repo_id, ERROR, f"{type(e).__name__}: {e}")


def open_prs(ids=(), push: bool = False, force: bool = False, rows=None, api=None) -> tuple[list, list[str]]:
    """
    The results for the exact-id rows of `rows` (by default those of utils/trained_precisions.json; those of `ids`
    only, when given; case-insensitive, as the Hub resolves ids), and the ids that are no exact-id row.
    """
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    if rows is None:
        rows = check_trained_precision.load_rows()[1]
    wanted = {i.lower() for i in ids}
    rows = [row for row in rows if "*" not in row[0] and (not wanted or row[0].lower() in wanted)]
    known = {row[0].lower() for row in rows}
    missing = [i for i in ids if i.lower() not in known]
    return [prepare_pr(api, row, push=push, force=force) for row in rows], missing


def write_configs(paths, model_id: str, force: bool = False, rows=None) -> bool:
    """
    Writes the published precision of `model_id` into the `config.json` of each checkpoint directory in `paths` (a
    clone of its Hub repo, whose commit is the pull request), with the edit `prepare_pr` proposes: only the field's
    lines change, atomically. Returns whether every config now says it. Raises a `ValueError` with the reason (no row
    for `model_id`, no `config.json`); a config that is not a JSON object, or states another value without `force`,
    is left as it is, with a message.
    """
    rows = check_trained_precision.load_rows()[1] if rows is None else rows
    row = next((row for row in rows if row[0].lower() == model_id.lower()), None)
    if row is None:
        raise ValueError(f"{model_id} has no published precision in utils/trained_precisions.json: add its row first")
    missing = [str(path) for path in paths if not (Path(path) / CONFIG_NAME).is_file()]
    if missing:
        raise ValueError(f"no {CONFIG_NAME} in {', '.join(missing)}")
    done = True
    for path in paths:
        config_file = Path(path) / CONFIG_NAME
        with open(config_file, encoding="utf-8", newline="") as f:
            text = f.read()
        try:
            new_text = set_config_field(text, row[1], force=force, source=row[2])
        except ConfigEditError as e:
            done, message = False, f"left as it is: {e}"
        else:
            if new_text != text:
                atomic_write_text(config_file, new_text)
            message = f"wrote {row[1]!r}" if new_text != text else f"already says {row[1]!r}"
        print(f"{config_file}: {message} ({row[0]}, {row[2]})")
    return done


def report(results, missing: list[str], push: bool, json_output: bool) -> int:
    """Prints the results (text, or one JSON document) and returns the exit code."""
    code = EXIT_NOT_DONE if missing or any(r.failed for r in results) else EXIT_SAFE
    error = f"not exact-id rows of utils/trained_precisions.json: {', '.join(missing)}" if missing else None
    if json_output:
        document = {
            "results": [
                {"repo_id": r.repo_id, "status": r.status, "message": r.message, "diff": r.diff, "pr_url": r.pr_url}
                for r in results
            ],
            "not_in_registry": missing,
            "exit_code": code,
        }
        if error:
            document["error"] = error
        print(json.dumps(document, indent=2))
        return code
    for r in results:
        print(f"[{r.status}] {r.repo_id}: {r.message}")
        if not push and r.diff:
            print(r.diff.rstrip("\n"))
    if error:
        print(f"Error: {error}", file=sys.stderr)
    return code


class _ArgumentParser(argparse.ArgumentParser):
    """Under `--json`, a usage error is one JSON document too (exit 2)."""

    def __init__(self, argv, **kwargs):
        super().__init__(**kwargs)
        self.json_output = "--json" in (sys.argv[1:] if argv is None else argv)

    def error(self, message):
        if self.json_output:
            print(json.dumps({"error": message, "exit_code": EXIT_BAD_INPUT}, indent=2))
            sys.exit(EXIT_BAD_INPUT)
        super().error(message)


def main(argv=None, api=None) -> int:
    """The command line; `api` is the Hub client (`huggingface_hub.HfApi()` by default)."""
    parser = _ArgumentParser(argv, description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("hub_ids", nargs="*", metavar="HUB_ID", help="Exact-id rows (default: all of them).")
    parser.add_argument("--push", action="store_true", help="Open the pull requests (default: a dry run).")
    parser.add_argument("--force", action="store_true", help="Propose even over another value or an earlier PR.")
    parser.add_argument("--json", action="store_true", help="Print one JSON document holding `exit_code`.")
    parser.add_argument("--write_configs", nargs="+", metavar="PATH", help="Write into these clones instead (one id).")
    args = parser.parse_args(argv)
    if args.write_configs:
        if len(args.hub_ids) != 1:
            parser.error("--write_configs writes the published precision of one HUB_ID: give exactly one")
        try:
            return EXIT_SAFE if write_configs(args.write_configs, args.hub_ids[0], force=args.force) else EXIT_NOT_DONE
        except (ValueError, OSError) as e:
            parser.error(str(e))
    results, missing = open_prs(args.hub_ids, push=args.push, force=args.force, api=api)
    return report(results, missing, push=args.push, json_output=args.json)


if __name__ == "__main__":
    sys.exit(main())
