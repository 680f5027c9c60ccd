# Copyright 2026 The trained_precision fork authors. All rights reserved.
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
Writing `trained_precision` into existing `config.json` files: local checkpoints, Hugging Face cache snapshots, and
pull requests on the Hub.

The edit is textual: one `"trained_precision": "..."` member is inserted (at its sorted place when the keys are
sorted, else last), with the file's own indentation and separators, so that nothing else in the file changes. Files are
replaced atomically (a temporary file in the same directory, then `os.replace`) with the original's permission bits.

A cache snapshot's `config.json` is a symlink into `blobs/`, and a blob is named after the Hub's hash of its content
and may be shared by several revisions. The blob is therefore never modified: the snapshot's link is replaced by a
regular file (the layout `huggingface_hub` itself uses where symlinks are unavailable). Other revisions, and a later
re-download, keep the blob as the Hub serves it.

This module only needs the standard library; `tqdm` and `huggingface_hub` are imported where they are used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from .registry import REGISTRY, RegistryEntry, lookup
from .vocabulary import UNKNOWN, InvalidTrainedPrecisionError, normalize_precision


FIELD = "trained_precision"
CONFIG_NAME = "config.json"
RFC_URL = "https://github.com/huggingface/transformers/issues/11209"
HUB_PR_TITLE = "Add `trained_precision` to config.json"

# Result statuses.
WRITTEN = "written"
WOULD_WRITE = "would write"
UNCHANGED = "unchanged"
SKIPPED = "skipped"
ERROR = "error"


class ConfigEditError(ValueError):
    """A `config.json` cannot be edited; the message says why and that nothing was modified."""


@dataclasses.dataclass
class PopulateResult:
    """
    What happened to one checkpoint.

    Args:
        path (`str`): the `config.json` (or the path the user gave when no `config.json` was found).
        status (`str`): one of `"written"`, `"would write"`, `"unchanged"`, `"skipped"`, `"error"`.
        message (`str`): one sentence for the user.
        model_id (`str`, *optional*): the Hub id the precision was looked up for.
        precision (`str`, *optional*): the value written (or that would be written).
        diff (`str`): the unified diff of the change (empty when nothing changes).
    """

    path: str
    status: str
    message: str
    model_id: str | None = None
    precision: str | None = None
    diff: str = ""

    @property
    def failed(self) -> bool:
        return self.status == ERROR


@dataclasses.dataclass(frozen=True)
class CheckpointTarget:
    """A `config.json` to populate, and the Hub id it belongs to when the layout tells (HF cache) or the user did."""

    config_path: Path
    model_id: str | None = None
    in_cache: bool = False


# ----------------------------------------------------------------------------------------------------------------
# Editing the JSON text
# ----------------------------------------------------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")


@dataclasses.dataclass(frozen=True)
class _Member:
    key: str
    key_start: int
    value_start: int
    value_end: int
    leading: str  # whitespace between the previous "," (or "{") and the key
    colon: str  # the text between the key and the value, e.g. ": "


def _top_level_members(text: str) -> tuple[list[_Member], int, int]:
    """The members of the top-level object of valid JSON `text`, with their exact spans; and the braces' offsets."""
    decoder = json.JSONDecoder()
    pos = _WS.match(text, 0).end()
    open_brace = pos
    pos += 1
    members = []
    while True:
        leading_start = pos
        pos = _WS.match(text, pos).end()
        if text[pos] == "}":
            return members, open_brace, pos
        key_start = pos
        key, pos = json.decoder.scanstring(text, pos + 1)
        key_end = pos
        pos = _WS.match(text, pos).end() + 1  # the ":"
        pos = _WS.match(text, pos).end()
        value_start = pos
        _, value_end = decoder.raw_decode(text, pos)
        members.append(
            _Member(key, key_start, value_start, value_end, text[leading_start:key_start], text[key_end:value_start])
        )
        pos = _WS.match(text, value_end).end()
        if text[pos] == "}":
            return members, open_brace, pos
        pos += 1  # the ","


def set_config_field(text: str, value: str, *, force: bool = False, source: str | None = None) -> str:
    """
    Returns `text` (a `config.json`) with `"trained_precision": value`, changing nothing else.

    Args:
        text (`str`): the file's content.
        value (`str`): a canonical precision (`"fp32"`, `"bf16"` or `"fp16"`).
        force (`bool`, *optional*, defaults to `False`): replace a different value the file already holds.
        source (`str`, *optional*): where `value` comes from, quoted in the conflict message.

    Returns:
        `str`: the new text; `text` itself when the file already says `value` (in any accepted spelling).

    Raises:
        [`ConfigEditError`]: malformed JSON, a top level that is not an object, or a different value without `force`.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigEditError(f"malformed JSON ({e.msg} at line {e.lineno}, column {e.colno})") from e
    if not isinstance(data, dict):
        raise ConfigEditError(f"the top level is a JSON {type(data).__name__}, not an object")

    key_json, value_json = json.dumps(FIELD), json.dumps(value)
    members, open_brace, close_brace = _top_level_members(text)
    existing = [m for m in members if m.key == FIELD]
    if existing:
        current = data[FIELD]
        try:
            same = normalize_precision(current) == value
        except InvalidTrainedPrecisionError:
            same = False
        if same:
            return text
        if not force:
            origin = f" ({source})" if source else ""
            raise ConfigEditError(
                f"it already says {FIELD}={current!r}, not {value!r}{origin}; a config's own value is not "
                "overwritten: pass --force to replace it"
            )
        last = existing[-1]  # json.loads keeps the last duplicate; replace exactly that one
        new_text = text[: last.value_start] + value_json + text[last.value_end :]
        expected = list(data)
    elif not members:
        new_text = f"{text[: open_brace + 1]}\n  {key_json}: {value_json}\n{text[close_brace:]}"
        expected = [FIELD]
    else:
        keys = [m.key for m in members]
        later = [m for m in members if m.key > FIELD] if keys == sorted(keys) else []
        if later:
            m = later[0]
            new_text = text[: m.key_start] + key_json + m.colon + value_json + "," + m.leading + text[m.key_start :]
        else:
            m = members[-1]
            new_text = text[: m.value_end] + "," + m.leading + key_json + m.colon + value_json + text[m.value_end :]
        if later:
            expected = [k for k in data if k < FIELD] + [FIELD] + [k for k in data if k > FIELD]
        else:
            expected = [*data, FIELD]

    # The edit must be exactly "the same object plus the field".
    new_data = json.loads(new_text)
    if list(new_data) != expected or {k: v for k, v in new_data.items() if k != FIELD} != {
        k: v for k, v in data.items() if k != FIELD
    }:
        raise ConfigEditError("internal error: the edited JSON does not round-trip; nothing modified")
    return new_text


def unified_diff(old: str, new: str, path: str) -> str:
    """The unified diff of a file's edit, as `--dry-run` prints it."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), path, path))


def atomic_write_text(path: str | os.PathLike, text: str, mode: int | None = None) -> None:
    """
    Replaces `path` with `text` atomically: a temporary file in the same directory, fsynced, then `os.replace`. If
    anything fails (or the process is interrupted) before the replace, `path` is untouched and the temporary file is
    removed. A symlink at `path` is replaced by a regular file; its target is not written.

    Args:
        path (`str` or `os.PathLike`): the file to replace.
        text (`str`): the new content, written as UTF-8 with its newlines unchanged.
        mode (`int`, *optional*): permission bits for the new file; by default those of the current `path`.
    """
    path = Path(path)
    if mode is None:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


# ----------------------------------------------------------------------------------------------------------------
# Local checkpoints and cache snapshots
# ----------------------------------------------------------------------------------------------------------------


def _cache_repo_id(repo_dir: Path) -> str | None:
    """`models--EleutherAI--gpt-neo-1.3B` -> `EleutherAI/gpt-neo-1.3B` (Hub names never contain `--`)."""
    name = repo_dir.name
    if not name.startswith("models--"):
        return None
    return name[len("models--") :].replace("--", "/")


def _snapshots(repo_dir: Path, model_id: str) -> list[CheckpointTarget]:
    snapshots = repo_dir / "snapshots"
    if not snapshots.is_dir():
        return []
    return [
        CheckpointTarget(snap / CONFIG_NAME, model_id, in_cache=True)
        for snap in sorted(snapshots.iterdir())
        if snap.is_dir()
    ]


def find_checkpoints(paths: Iterable[str | os.PathLike], model_id: str | None = None) -> list[CheckpointTarget]:
    """
    Expands user paths into the `config.json` files to populate.

    Each path may be a checkpoint directory, a `config.json`, a cache snapshot (`.../snapshots/<revision>`), a cache
    repo folder (`models--org--name`, every snapshot), or a cache root holding `models--*` folders (`~/.cache/huggingface/hub`, or its parent).
    Cache layouts tell the Hub id; for other paths it is `model_id` or unknown. A path that does not exist yields a
    target whose `config.json` is missing, reported by [`populate_config`].
    """
    targets: list[CheckpointTarget] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.name == CONFIG_NAME and not path.is_dir():
            path = path.parent
        if path.is_dir() and not (path / CONFIG_NAME).exists() and any(path.glob("hub/models--*/snapshots")):
            path = path / "hub"  # ~/.cache/huggingface rather than ~/.cache/huggingface/hub
        snapshot_repo = path.parent.parent if path.parent.name == "snapshots" else None
        if snapshot_repo is not None and _cache_repo_id(snapshot_repo):
            targets.append(CheckpointTarget(path / CONFIG_NAME, _cache_repo_id(snapshot_repo), in_cache=True))
        elif path.is_dir() and _cache_repo_id(path) and (path / "snapshots").is_dir():
            targets.extend(_snapshots(path, _cache_repo_id(path)))
        elif path.is_dir() and not (path / CONFIG_NAME).exists() and any(path.glob("models--*/snapshots")):
            for repo_dir in sorted(path.glob("models--*")):
                targets.extend(_snapshots(repo_dir, _cache_repo_id(repo_dir)))
        else:
            targets.append(CheckpointTarget(path / CONFIG_NAME, model_id))
    return targets


def _is_read_only(path: Path) -> bool:
    # os.access alone is not enough: it says yes to root even for a 0o444 file, whose owner meant "do not edit".
    return not (os.stat(path).st_mode & 0o222) or not os.access(path, os.W_OK)


def populate_config(
    config_path: str | os.PathLike,
    precision: str,
    *,
    force: bool = False,
    dry_run: bool = False,
    source: str | None = None,
    model_id: str | None = None,
) -> PopulateResult:
    """
    Writes `trained_precision` into one `config.json`. Never raises for a bad file: the result says what happened,
    and when it is an error nothing was modified.

    Args:
        config_path (`str` or `os.PathLike`): the `config.json` (a regular file or a cache symlink to a blob).
        precision (`str`): the value; any spelling [`normalize_precision`] accepts except `"unknown"`.
        force (`bool`, *optional*, defaults to `False`): replace a different value the file already holds.
        dry_run (`bool`, *optional*, defaults to `False`): only compute the diff.
        source (`str`, *optional*): where the value comes from (quoted in messages).
        model_id (`str`, *optional*): the Hub id, for the result.
    """
    path = Path(config_path)
    shown = str(path)

    def result(status, message, diff=""):
        return PopulateResult(shown, status, message, model_id, precision, diff)

    try:
        precision = normalize_precision(precision)
    except InvalidTrainedPrecisionError as e:
        return result(ERROR, f"{e} Nothing modified.")
    if precision == UNKNOWN:
        return result(ERROR, f"'{UNKNOWN}' is the default and is never written; nothing modified.")

    if not os.path.lexists(path):
        return result(ERROR, f"no {CONFIG_NAME} in {path.parent}; nothing modified.")
    if path.is_symlink() and not path.exists():
        return result(ERROR, f"{CONFIG_NAME} is a broken symlink (to {os.readlink(path)}); nothing modified.")
    if not path.is_file():
        return result(ERROR, f"{path} is not a regular file; nothing modified.")
    if _is_read_only(path):
        mode = stat.S_IMODE(os.stat(path).st_mode)
        return result(ERROR, f"read-only (mode {mode:#o}); nothing modified. Make it writable to populate it.")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return result(ERROR, f"its directory {path.parent} is not writable; nothing modified.")

    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        return result(ERROR, f"not UTF-8 text ({e.reason}); nothing modified.")
    except OSError as e:
        return result(ERROR, f"cannot be read ({e.strerror}); nothing modified.")
    try:
        new_text = set_config_field(text, precision, force=force, source=source)
    except ConfigEditError as e:
        return result(ERROR, f"{e}; nothing modified.")
    if new_text == text:
        return result(UNCHANGED, f"already says {FIELD}={precision!r}.")

    diff = unified_diff(text, new_text, shown)
    if dry_run:
        return result(WOULD_WRITE, f"would set {FIELD}={precision!r} (dry run, nothing modified).", diff)
    how = ""
    if path.is_symlink():
        how = f" (the symlink to {os.readlink(path)} is now a regular file; the blob is untouched)"
    try:
        atomic_write_text(path, new_text, stat.S_IMODE(os.stat(path).st_mode))
    except OSError as e:
        return result(ERROR, f"cannot be replaced ({e.strerror}); nothing modified.")
    return result(WRITTEN, f"set {FIELD}={precision!r}{how}.", diff)


def populate_checkpoints(
    paths: Iterable[str | os.PathLike],
    *,
    precision: str | None = None,
    model_id: str | None = None,
    force: bool = False,
    dry_run: bool = False,
    registry: tuple[RegistryEntry, ...] = REGISTRY,
    progress: bool = True,
    on_result: Callable[[PopulateResult], None] | None = None,
) -> list[PopulateResult]:
    """
    Writes `trained_precision` into the `config.json` of every checkpoint under `paths` (see [`find_checkpoints`]).

    The value is `precision` when given; otherwise the registry row of the checkpoint's Hub id (known from the cache
    layout, or `model_id` for a local directory). Checkpoints without a value are skipped, not guessed: a local
    directory's name is not a Hub id.

    Args:
        paths (`Iterable[str | os.PathLike]`): checkpoint directories, `config.json` files or cache folders.
        precision (`str`, *optional*): the value for every checkpoint, instead of the registry's.
        model_id (`str`, *optional*): the Hub id of local checkpoints (cache snapshots know their own).
        force (`bool`, *optional*, defaults to `False`): replace a different value a config already holds.
        dry_run (`bool`, *optional*, defaults to `False`): compute diffs, modify nothing.
        registry (`tuple[RegistryEntry, ...]`, *optional*): the table to look ids up in.
        progress (`bool`, *optional*, defaults to `True`): show a `tqdm` progress bar (on a terminal).
        on_result (`Callable`, *optional*): called with each result as it is produced.
    """
    targets = find_checkpoints(paths, model_id)
    results = []
    iterator: Iterable[CheckpointTarget] = targets
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(targets, desc="Populating trained_precision", unit="checkpoint", disable=None)
    for target in iterator:
        value, source, target_id = precision, None, target.model_id
        if value is None:
            entry = lookup(target_id, registry) if target_id else None
            if entry is None:
                if target_id is None:
                    why = "no Hub id is known for a local directory: pass --model_id (a registry id) or --precision"
                else:
                    why = f"{target_id} is not in the registry: pass --precision to set it anyway"
                results.append(
                    PopulateResult(str(target.config_path), SKIPPED, f"{why}; nothing modified.", target_id)
                )
                if on_result:
                    on_result(results[-1])
                continue
            value, source = entry.precision, entry.source
        results.append(
            populate_config(target.config_path, value, force=force, dry_run=dry_run, source=source, model_id=target_id)
        )
        if on_result:
            on_result(results[-1])
    return results


# ----------------------------------------------------------------------------------------------------------------
# Pull requests on the Hub
# ----------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class HubPullRequest:
    """
    The commit that adds the field to one Hub repo, as `HfApi.create_commit(..., create_pr=True)` receives it.

    Args:
        repo_id (`str`): the Hub repo.
        status (`str`): `"would write"` (prepared), `"written"` (PR opened), `"unchanged"`, `"skipped"` or `"error"`.
        message (`str`): one sentence for the user.
        operations (`list`): the `CommitOperationAdd` list.
        commit_message (`str`), commit_description (`str`): the PR title and description.
        parent_commit (`str`, *optional*): the revision the PR is based on.
        diff (`str`): the change to `config.json`.
        pr_url (`str`, *optional*): the opened PR.
    """

    repo_id: str
    status: str
    message: str
    operations: list = dataclasses.field(default_factory=list)
    commit_message: str = HUB_PR_TITLE
    commit_description: str = ""
    parent_commit: str | None = None
    diff: str = ""
    pr_url: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == ERROR


def hub_pr_description(entry: RegistryEntry) -> str:
    """The PR description: the value, the source it comes from, and what the field means."""
    stored = ""
    if entry.stored_dtype:
        stored = (
            f"\n\nThe weights in this repo are stored in {entry.stored_dtype}; that is unchanged. `trained_precision` "
            "records how the model was trained, which is what decides whether running it in a half-precision format "
            "is safe."
        )
    return (
        f'This PR adds `"{FIELD}": "{entry.precision}"` to `config.json`.\n\n'
        f"Source: {entry.source}\n"
        f"Note: {entry.note}{stored}\n\n"
        f"`{FIELD}` ({RFC_URL}) says in which precision a checkpoint was trained (`fp32`, `bf16` or `fp16`). "
        "Libraries that read it can warn before the model is run in a precision it overflows in, e.g. a "
        "bf16-trained model in fp16. Loaders that do not know the field ignore it; nothing else in the file changes."
    )


def prepare_hub_prs(
    registry: Sequence[RegistryEntry] = REGISTRY,
    *,
    api: Any = None,
    only: Iterable[str] | None = None,
    push: bool = False,
    force: bool = False,
    on_result: Callable[[HubPullRequest], None] | None = None,
) -> list[HubPullRequest]:
    """
    For each exact-id registry row, prepares (and with `push=True` opens) the Hub pull request that adds
    `trained_precision` to the repo's `config.json`. Glob rows are not repos and are skipped.

    Network access and a token with write access (`hf auth login` or `HF_TOKEN`) are needed to read the current
    `config.json` and, with `push=True`, to open the PRs. Repos that already hold the value, or have an open PR with
    the same title, are skipped.

    Args:
        registry (`Sequence[RegistryEntry]`, *optional*): the rows.
        api (`huggingface_hub.HfApi`, *optional*): the client (tests pass a fake one).
        only (`Iterable[str]`, *optional*): restrict to these Hub ids.
        push (`bool`, *optional*, defaults to `False`): open the PRs; otherwise only prepare them (dry run).
        force (`bool`, *optional*, defaults to `False`): propose a change even where the config says something else.
        on_result (`Callable`, *optional*): called with each result as it is produced.
    """
    from huggingface_hub import CommitOperationAdd

    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    wanted = {i.lower() for i in only} if only else None
    results = []
    for entry in registry:
        if entry.is_glob or (wanted is not None and entry.model_id.lower() not in wanted):
            continue
        repo_id = entry.model_id
        try:
            sha = api.model_info(repo_id).sha
            open_prs = [
                d
                for d in api.get_repo_discussions(repo_id, discussion_type="pull_request", discussion_status="open")
                if d.title == HUB_PR_TITLE
            ]
            if open_prs:
                result = HubPullRequest(repo_id, SKIPPED, f"an open PR already proposes it (#{open_prs[0].num}).")
            else:
                local = api.hf_hub_download(repo_id, CONFIG_NAME, revision=sha)
                with open(local, encoding="utf-8", newline="") as f:
                    text = f.read()
                new_text = set_config_field(text, entry.precision, force=force, source=entry.source)
                if new_text == text:
                    result = HubPullRequest(repo_id, UNCHANGED, f"already says {FIELD}={entry.precision!r}.")
                else:
                    operations = [CommitOperationAdd(path_in_repo=CONFIG_NAME, path_or_fileobj=new_text.encode())]
                    result = HubPullRequest(
                        repo_id,
                        WOULD_WRITE,
                        f"would open a PR setting {FIELD}={entry.precision!r} (dry run; pass --push to open it).",
                        operations,
                        HUB_PR_TITLE,
                        hub_pr_description(entry),
                        sha,
                        unified_diff(text, new_text, f"{repo_id}/{CONFIG_NAME}"),
                    )
                    if push:
                        info = api.create_commit(
                            repo_id,
                            operations,
                            commit_message=result.commit_message,
                            commit_description=result.commit_description,
                            create_pr=True,
                            parent_commit=sha,
                        )
                        result.status, result.pr_url = WRITTEN, getattr(info, "pr_url", None)
                        result.message = f"opened {result.pr_url or 'a pull request'}."
        except ConfigEditError as e:
            result = HubPullRequest(repo_id, ERROR, f"{CONFIG_NAME}: {e}.")
        except Exception as e:  # one repo's network/auth failure must not stop the others
            result = HubPullRequest(repo_id, ERROR, f"{type(e).__name__}: {e}")
        results.append(result)
        if on_result:
            on_result(result)
    return results
