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
`transformers precision`: what precision a checkpoint was trained in, whether a runtime dtype is safe for it, and
writing the answer into checkpoints.

`cli/transformers.py` registers [`precision`] as a leaf command (`app.command(name="precision")(precision)`), which
works with both the typer app of huggingface_hub 1.x and the click group of 2.x. `python -m
transformers.trained_precision` runs the same command without importing the rest of the `transformers` CLI (whose
`serve` command imports torch). Heavy imports stay inside the function: the report reads file headers only and never
imports torch. The command declares its own `--format` next to `--json`: the click group of huggingface_hub 2.x
strips a bare `--json` from the arguments of commands that have no `--format`. No `from __future__ import
annotations` here: the CLI frameworks read the `Annotated` hints at runtime.
"""

import json
import os
import sys
from typing import Annotated

import typer


#: Exit codes, also listed by `--help`.
EXIT_SAFE = 0
EXIT_RISKY = 1
EXIT_BAD_INPUT = 2
EXIT_UNKNOWN = 3

SET = "set"
HUB_PR = "hub-pr"
PLAN = "plan"

HELP = f"""What precision a checkpoint was trained in, and whether a runtime dtype is safe for it.

\b
Report (reads config.json and safetensors headers only; never imports torch unless --audit):
  transformers precision PATH_OR_ID [--dtype fp16] [--audit] [--json]
\b
Write the field into checkpoints (local directories, config.json files, Hub cache snapshots, repo folders or a whole
cache):
  transformers precision set PATH... --precision bf16 [--force] [--dry-run]
  transformers precision set PATH... --from-registry [--model-id HUB_ID] [--dry-run]
  transformers precision set PATH... --precision unknown --force     (removes the field)
\b
Find the modules fp16 overflows in, keep only those in fp32, validate against fp32, and store the plan (--write):
  transformers precision plan PATH_OR_ID --dtype fp16 [--write] [--texts FILE] [--headroom 2]
\b
Propose the registry's values to the Hub repos they describe (a dry run unless --push; needs a write token):
  transformers precision hub-pr [HUB_ID...] [--push] [--force]

\b
Exit codes:
  {EXIT_SAFE}  safe (or no --dtype asked; for `set`: every file written or unchanged)
  {EXIT_RISKY}  risky: the asked --dtype is risky for the trained precision (for `set`: a file could not be written;
     for `plan`: no plan makes fp16 safe)
  {EXIT_BAD_INPUT}  bad input: a missing path, a malformed file, an invalid option
  {EXIT_UNKNOWN}  unknown: the trained precision is unknown, so nothing says the asked --dtype is safe
"""


class _Output:
    """Prints results and errors as text, or as JSON on stdout with `--json`."""

    def __init__(self, json_output: bool):
        self.json = json_output

    def fail(self, message: str, code: int = EXIT_BAD_INPUT):
        # `typer.Exit` is not a click exit under huggingface_hub 2.x's click group: SystemExit works under both.
        if self.json:
            print(json.dumps({"error": message, "exit_code": code}, indent=2))
        else:
            print(f"Error: {message}", file=sys.stderr)
        raise SystemExit(code)


def _read_texts(path: str, out: _Output) -> list[str]:
    """One calibration text per non-empty paragraph (blank-line separated); a file without blank lines: per line."""
    try:
        with open(path, encoding="utf-8") as f:
            content = f.read()
    except (OSError, UnicodeDecodeError) as e:
        out.fail(f"cannot read the calibration text file {path}: {e}")
    blocks = [b.strip() for b in content.split("\n\n") if b.strip()]
    if len(blocks) == 1:
        blocks = [line.strip() for line in content.splitlines() if line.strip()]
    if not blocks:
        out.fail(f"the calibration text file {path} is empty.")
    return blocks


def precision(
    args: Annotated[
        list[str],
        typer.Argument(
            help="A checkpoint directory (with config.json) or a Hub id; or `set` followed by the paths to write.",
            show_default=False,
        ),
    ],
    dtype: Annotated[
        str | None,
        typer.Option(help="The runtime dtype you plan to use: fp32, bf16 or fp16. Exit code 1 risky, 3 unknown."),
    ] = None,
    audit: Annotated[
        bool,
        typer.Option(
            "--audit",
            help="Load the model in fp32 on the CPU, run a calibration forward and measure every module's max "
            "|activation| against fp16's 65504. Needs torch.",
        ),
    ] = False,
    download: Annotated[
        bool, typer.Option("--download", help="With --audit: let it download the weights of an uncached Hub id.")
    ] = False,
    allow_pickle: Annotated[
        bool,
        typer.Option(
            "--allow-pickle", help="With --audit: load pickled (.bin) weights, which can run code. Trusted files only."
        ),
    ] = False,
    text: Annotated[
        str | None,
        typer.Option(help="With --audit: a UTF-8 file of calibration texts (one per paragraph, or per line)."),
    ] = None,
    top: Annotated[int, typer.Option(help="With --audit: how many modules to list.")] = 10,
    output_format: Annotated[str, typer.Option("--format", help="Output format: text or json.")] = "text",
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the report (or the error) as JSON (same as --format json).")
    ] = False,
    revision: Annotated[str | None, typer.Option(help="The Hub revision, for a Hub id only.")] = None,
    cache_dir: Annotated[
        str | None,
        typer.Option(
            "--cache-dir", help="The Hub cache to find Hub ids in (default: HF_HUB_CACHE, else HF_HOME/hub)."
        ),
    ] = None,
    precision_value: Annotated[
        str | None,
        typer.Option("--precision", help="`set`: the value to write: fp32, bf16, fp16, or unknown (removes it)."),
    ] = None,
    from_registry: Annotated[
        bool, typer.Option("--from-registry", help="`set`: write the registry's value for each checkpoint's Hub id.")
    ] = False,
    model_id: Annotated[
        str | None,
        typer.Option("--model-id", help="`set --from-registry`: the Hub id of local checkpoints outside the cache."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="`set`: replace or remove a value a config holds.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="`set`: print the diffs, change nothing.")] = False,
    push: Annotated[bool, typer.Option("--push", help="`hub-pr`: open the pull requests (default: dry run).")] = False,
    write: Annotated[
        bool, typer.Option("--write", help="`plan`: store the validated plan in the checkpoint's config.json.")
    ] = False,
    texts: Annotated[
        str | None,
        typer.Option("--texts", help="`plan`: a UTF-8 file of calibration texts (one per paragraph, or per line)."),
    ] = None,
    headroom: Annotated[
        float | None,
        typer.Option(help="`plan`: keep values this many times below fp16's max 65504 (default 2)."),
    ] = None,
):
    out = _Output(json_output or output_format == "json")
    if output_format not in ("text", "json"):
        out.fail(f"--format {output_format!r} is not valid: use text or json.")
    set_options = precision_value is not None or from_registry or model_id is not None or force or dry_run
    if args and args[0] == SET and (len(args) > 1 or not os.path.exists(SET)):
        if dtype is not None or audit or download or allow_pickle or text is not None or revision is not None:
            out.fail(
                "--dtype, --audit, --download, --allow-pickle, --text and --revision apply to the report, not `set`."
            )
        _set(args[1:], precision_value, from_registry, model_id, force, dry_run, cache_dir, out)
        return
    if args and args[0] == PLAN and (len(args) > 1 or not os.path.exists(PLAN)):
        if set_options or push or audit or text is not None or revision is not None:
            out.fail(
                "`plan` takes a checkpoint, --dtype fp16, --write, --texts, --headroom, --download, --allow-pickle."
            )
        _plan(args[1:], dtype, write, texts, headroom, download, allow_pickle, cache_dir, out)
        return
    if write or texts is not None or headroom is not None:
        out.fail("--write, --texts and --headroom go with `transformers precision plan`.")
    if args and args[0] == HUB_PR and not os.path.exists(HUB_PR):
        if precision_value is not None or from_registry or model_id is not None or dry_run:
            out.fail("`hub-pr` takes Hub ids, --push and --force only; it is a dry run unless --push.")
        hub_pr(args[1:], push=push, force=force, out=out)
        return
    if push:
        out.fail("--push goes with `transformers precision hub-pr`.")
    if set_options:
        out.fail(
            "--precision, --from-registry, --model-id, --force and --dry-run go with `transformers precision set`."
        )
    if len(args) != 1:
        out.fail(f"expected one checkpoint directory or Hub id, got {len(args)}: {' '.join(args)}")
    _report(args[0], dtype, audit, download, allow_pickle, text, top, revision, cache_dir, out)


precision.__doc__ = HELP


def _report(path_or_id, dtype, audit, download, allow_pickle, text, top, revision, cache_dir, out: _Output) -> None:
    from .inspection import CheckpointInspectionError, inspect_checkpoint, runtime_name

    if dtype is not None:
        try:
            dtype = runtime_name(dtype)
        except CheckpointInspectionError as e:
            out.fail(f"--dtype: {e}")
    if text is not None and not audit:
        out.fail("--text only applies with --audit.")
    if (download or allow_pickle) and not audit:
        out.fail("--download and --allow-pickle only apply with --audit.")
    if top < 1:
        out.fail(f"--top must be a positive integer, got {top}.")
    texts = _read_texts(text, out) if text is not None else None
    try:
        report = inspect_checkpoint(
            path_or_id,
            audit=audit,
            texts=texts,
            revision=revision,
            download=download,
            allow_pickle=allow_pickle,
            cache_dir=cache_dir,
        )
    except CheckpointInspectionError as e:
        out.fail(str(e))
    if out.json:
        print(json.dumps(report.to_dict(dtype, top_k=top), indent=2, default=str))
    else:
        print(report.format(dtype, top_k=top))
    code = report.exit_code(dtype)
    if code:
        raise SystemExit(code)


def _plan(args, dtype, write, texts_file, headroom, download, allow_pickle, cache_dir, out: _Output) -> None:
    """`transformers precision plan PATH_OR_ID --dtype fp16 [--write]`: exit 0 with a validated plan, 1 without one."""
    from ..utils import CONFIG_NAME
    from .fp16_plan import DEFAULT_HEADROOM, Fp16PlanError, plan_checkpoint, write_fp16_plan
    from .hub_ids import find_cached_snapshot, parse_hub_id
    from .inspection import CheckpointInspectionError
    from .vocabulary import FP16, InvalidTrainedPrecisionError, normalize_precision

    if len(args) != 1:
        out.fail(
            f"`plan` takes one checkpoint directory or Hub id, got {len(args)}: {' '.join(args)} "
            "(transformers precision plan PATH_OR_ID --dtype fp16 [--write])"
        )
    path_or_id = args[0]
    try:
        asked = normalize_precision(dtype) if dtype is not None else FP16
    except InvalidTrainedPrecisionError:
        asked = None
    if asked != FP16:
        out.fail(f"--dtype {dtype!r}: a plan is made for fp16 only (bf16 has fp32's range): use --dtype fp16.")
    headroom = DEFAULT_HEADROOM if headroom is None else headroom
    if not headroom >= 1 or headroom == float("inf"):
        out.fail(f"--headroom must be a number >= 1, got {headroom}.")
    config_path = None
    if os.path.isdir(path_or_id):
        config_path = os.path.join(path_or_id, CONFIG_NAME)
    elif parse_hub_id(path_or_id) is not None:
        snapshot = find_cached_snapshot(path_or_id, filename=CONFIG_NAME, cache_dir=cache_dir)
        config_path = os.path.join(snapshot, CONFIG_NAME) if snapshot is not None else None
    if config_path is None and not download:
        out.fail(
            f"{path_or_id} is neither a checkpoint directory nor a Hub id in the local cache (--download fetches it)."
        )
    texts = _read_texts(texts_file, out) if texts_file is not None else None
    try:
        result = plan_checkpoint(
            path_or_id,
            texts=texts,
            headroom=headroom,
            local_files_only=not download,
            use_safetensors=not allow_pickle,
            cache_dir=cache_dir,
        )
    except (CheckpointInspectionError, Fp16PlanError, ValueError) as e:
        out.fail(str(e))
    written = None
    if result.passed and write:
        if config_path is None:
            snapshot = find_cached_snapshot(path_or_id, filename=CONFIG_NAME, cache_dir=cache_dir)
            config_path = os.path.join(snapshot, CONFIG_NAME) if snapshot is not None else None
        if config_path is None or not os.path.isfile(config_path):
            out.fail(f"cannot find the config.json of {path_or_id} to write the plan into.", EXIT_RISKY)
        try:
            write_fp16_plan(config_path, result.to_config_dict(), result.parts)
        except (OSError, ValueError) as e:
            out.fail(f"cannot write the plan into {config_path}: {e}; nothing modified.", EXIT_RISKY)
        written = config_path
    code = EXIT_SAFE if result.passed else EXIT_RISKY
    if out.json:
        print(json.dumps({"plan": result.to_dict(), "written": written, "exit_code": code}, indent=2))
    else:
        print(result.format())
        if written:
            subs = [key for key in result.parts if key]
            where = f" (and its part into the sub-configs {', '.join(subs)})" if subs else ""
            print(f"wrote the plan into {written}{where}: every fp16 load of this checkpoint now applies it")
        elif result.passed and not write:
            print("(not stored: add --write to store it in the checkpoint's config.json)")
    if code:
        raise SystemExit(code)


def _set(paths, precision_value, from_registry, model_id, force, dry_run, cache_dir, out: _Output) -> None:
    from ..utils import CONFIG_NAME
    from .hub_ids import find_cached_snapshot, parse_hub_id
    from .populate import populate_checkpoints
    from .registry import lookup
    from .vocabulary import PRECISIONS, InvalidTrainedPrecisionError, normalize_precision

    if not paths:
        out.fail("`set` needs at least one path: transformers precision set PATH... --precision bf16")
    if (precision_value is None) == (not from_registry):
        out.fail("`set` needs exactly one of --precision VALUE and --from-registry.")
    if precision_value is not None:
        try:
            precision_value = normalize_precision(precision_value)
        except InvalidTrainedPrecisionError:
            out.fail(f"--precision {precision_value!r} is not valid: use one of {', '.join(PRECISIONS)}.")
    if model_id is not None and lookup(model_id) is None:
        out.fail(f"--model-id {model_id} is not in the registry: pass --precision instead.")
    # a Hub id that is not a local path names its cached snapshot (every spelling of the id is tried)
    resolved = []
    for path in paths:
        if not os.path.exists(os.path.expanduser(path)) and parse_hub_id(path) is not None:
            snapshot = find_cached_snapshot(path, filename=CONFIG_NAME, cache_dir=cache_dir)
            if snapshot is None:
                out.fail(f"{path} is neither a local path nor a Hub id in the local cache: download it first.")
            path = snapshot
        resolved.append(path)
    paths = resolved

    def show(result):
        if not out.json:
            print(f"[{result.status}] {result.path}: {result.message}")
            if dry_run and result.diff:
                print(result.diff.rstrip("\n"))

    results = populate_checkpoints(
        paths,
        precision=precision_value,
        model_id=model_id,
        force=force,
        dry_run=dry_run,
        progress=False,
        on_result=show,
    )
    failed = any(r.failed for r in results)
    if out.json:
        print(
            json.dumps(
                {
                    "results": [
                        {
                            "path": r.path,
                            "status": r.status,
                            "message": r.message,
                            "model_id": r.model_id,
                            "precision": r.precision,
                            "diff": r.diff,
                        }
                        for r in results
                    ],
                    "exit_code": EXIT_RISKY if failed else EXIT_SAFE,
                },
                indent=2,
            )
        )
    else:
        counts = {}
        for r in results:
            counts[r.status] = counts.get(r.status, 0) + 1
        print(", ".join(f"{n} {status}" for status, n in counts.items()) or "no checkpoints found")
    if failed:
        raise SystemExit(EXIT_RISKY)


def hub_pr(ids: list[str], *, push: bool = False, force: bool = False, out: _Output | None = None, api=None) -> None:
    """`transformers precision hub-pr`: prepare (or, with `push`, open) the registry's Hub pull requests."""
    from .populate import prepare_hub_prs
    from .registry import REGISTRY

    out = out or _Output(False)
    results = prepare_hub_prs(REGISTRY, api=api, only=ids or None, push=push, force=force)
    known = {r.repo_id.lower() for r in results}
    missing = [i for i in ids if i.lower() not in known]
    if out.json:
        payload = [{"repo_id": r.repo_id, "status": r.status, "message": r.message, "diff": r.diff} for r in results]
        print(json.dumps({"results": payload, "not_in_registry": missing}, indent=2))
    else:
        for r in results:
            print(f"[{r.status}] {r.repo_id}: {r.message}")
            if not push and r.diff:
                print(r.diff.rstrip("\n"))
    if missing:
        out.fail(f"not exact-id rows of the registry: {', '.join(missing)}", EXIT_RISKY)
    if any(r.failed for r in results):
        raise SystemExit(EXIT_RISKY)


def main(argv: list[str] | None = None) -> None:
    """`python -m transformers.trained_precision`: the `transformers precision` command on its own."""
    app = typer.Typer(add_completion=False)
    app.command(help=HELP)(precision)
    app(args=argv, prog_name="transformers precision")
