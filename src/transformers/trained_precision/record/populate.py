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
Writing `trained_precision` into existing `config.json` files: local checkpoints and Hugging Face cache snapshots.

[`set_config_field`] is the one edit: one member inserted in the file's own layout, nothing else changed. Files are
replaced atomically; a cache snapshot's link to a shared blob becomes a regular file.
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
from collections.abc import Callable, Iterable
from pathlib import Path

from ...utils import CONFIG_NAME
from ..configuration import sub_config_items
from ..facts.hub_ids import cache_folder_hub_id, cache_snapshot_of, canonical_hub_id
from ..facts.registry import REGISTRY, RegistryEntry, lookup
from ..vocabulary import FIELD, UNKNOWN, InvalidTrainedPrecisionError, normalize_precision


# Result statuses.
WRITTEN, WOULD_WRITE, UNCHANGED, SKIPPED, ERROR = "written", "would write", "unchanged", "skipped", "error"


class ConfigEditError(ValueError):
    """A `config.json` cannot be edited; the message says why and that nothing was modified."""


@dataclasses.dataclass
class PopulateResult:
    """One checkpoint's outcome: its `config.json`, a status, a sentence, the Hub id, the value and the diff."""

    path: str
    status: str
    message: str
    model_id: str | None = None
    precision: str | None = None
    diff: str = ""

    @property
    def failed(self) -> bool:
        return self.status == ERROR

    @property
    def skipped(self) -> bool:
        return self.status == SKIPPED


@dataclasses.dataclass(frozen=True)
class CheckpointTarget:
    """A `config.json` to populate, and the Hub id it belongs to when the layout tells (HF cache) or the user did."""

    config_path: Path
    model_id: str | None = None
    in_cache: bool = False


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
    open_brace = _WS.match(text, 0).end()
    pos = open_brace + 1
    members = []
    while True:
        leading_start = pos
        pos = _WS.match(text, pos).end()
        if text[pos] == "}":  # `{}` only: JSON allows no trailing comma
            return members, open_brace, pos
        key_start = pos
        key, key_end = json.decoder.scanstring(text, pos + 1)
        value_start = _WS.match(text, _WS.match(text, key_end).end() + 1).end()  # past the ":"
        _, value_end = decoder.raw_decode(text, value_start)
        members.append(
            _Member(key, key_start, value_start, value_end, text[leading_start:key_start], text[key_end:value_start])
        )
        pos = _WS.match(text, value_end).end() + 1  # past the "," or the "}"
        if text[pos - 1] == "}":
            return members, open_brace, pos - 1


def set_config_field(text: str, value: str, *, force: bool = False, source: str | None = None) -> str:
    """
    `text` (a `config.json`) with `"trained_precision": value` (a canonical precision; `"unknown"` removes it) in the
    config and every sub-config, changing nothing else; another spelling of `value` is rewritten. `force` replaces a
    different value; `source` is quoted in a conflict's message. A [`ConfigEditError`] for malformed JSON, a top level
    that is not an object, or a different value without `force`.
    """
    _parse_object(text)
    return _set_everywhere(text, value, force=force, source=source, where="")


def _parse_object(text: str) -> dict:
    """The JSON object `text` holds; [`ConfigEditError`] for malformed JSON or another top-level type."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigEditError(f"malformed JSON ({e.msg} at line {e.lineno}, column {e.colno})") from e
    except RecursionError as e:  # `json` recurses once per nesting level
        raise ConfigEditError("malformed JSON (nested too deeply to read)") from e
    if not isinstance(data, dict):
        raise ConfigEditError(f"the top level is a JSON {type(data).__name__}, not an object")
    return data


def _set_everywhere(text: str, value: str, *, force: bool, source: str | None, where: str) -> str:
    # the direct sub-configs (objects with a `model_type`, as loading sees them), last first: earlier offsets hold
    subs = {key for key, _ in sub_config_items(json.loads(text)) if "." not in key}
    for member in reversed([m for m in _top_level_members(text)[0] if m.key in subs]):
        path = f"{where}{member.key}"
        sub_text = text[member.value_start : member.value_end]
        new_sub = _set_everywhere(sub_text, value, force=force, source=source, where=f"{path}.")
        text = text[: member.value_start] + new_sub + text[member.value_end :]
    try:
        return _set_one(text, value, force=force, source=source)
    except ConfigEditError as e:
        if not where:
            raise
        raise ConfigEditError(f"its sub-config `{where[:-1]}`: {e}") from e


def _set_one(text: str, value: str, *, force: bool = False, source: str | None = None) -> str:
    """[`set_config_field`] for one JSON object (a config or a sub-config), not its sub-configs."""
    data = _parse_object(text)
    key_json, value_json = json.dumps(FIELD), json.dumps(value)
    members, open_brace, close_brace = _top_level_members(text)
    if value == UNKNOWN:
        return _remove_field(text, data, members, open_brace, close_brace, force=force)
    existing = [m for m in members if m.key == FIELD]
    if existing:
        current = data[FIELD]
        if current == value:
            return text
        try:  # another spelling of `value` loads as "unknown" (the config holds the four names only): write `value`
            same = normalize_precision(current) == value
        except InvalidTrainedPrecisionError:
            same = False
        if not (same or force):
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
        new_text, expected = _insert_field(text, data, members, key_json, value_json)
    return _round_tripped(new_text, data, expected)


def _round_tripped(new_text: str, data: dict, keys: list[str]) -> str:
    """`new_text`, once it parses to `data` but for the field, with exactly `keys` in order."""
    new_data = json.loads(new_text)
    if list(new_data) != keys or {k: v for k, v in new_data.items() if k != FIELD} != {
        k: v for k, v in data.items() if k != FIELD
    }:
        raise ConfigEditError("internal error: the edited JSON does not round-trip; nothing modified")
    return new_text


def _insert_field(text: str, data: dict, members: list[_Member], key_json: str, value_json: str) -> tuple[str, list]:
    """`text` with the field added (in key order when the keys are sorted, else last), and its keys in order."""
    keys = [m.key for m in members]
    later = [m for m in members if m.key > FIELD] if keys == sorted(keys) else []
    if later:
        m = later[0]
        new_text = text[: m.key_start] + key_json + m.colon + value_json + "," + m.leading + text[m.key_start :]
        return new_text, [k for k in data if k < FIELD] + [FIELD] + [k for k in data if k > FIELD]
    m = members[-1]
    new_text = text[: m.value_end] + "," + m.leading + key_json + m.colon + value_json + text[m.value_end :]
    return new_text, [*data, FIELD]


def _remove_field(
    text: str, data: dict, members: list[_Member], open_brace: int, close_brace: int, force: bool
) -> str:
    """`text` without its `trained_precision` member(s): what `--precision unknown --force` writes."""
    if FIELD not in data:
        return text
    if not force:
        raise ConfigEditError(
            f"it says {FIELD}={data[FIELD]!r}; removing a config's own value needs --force (`force=True`)"
        )
    while any(m.key == FIELD for m in members):
        i = next(i for i, m in enumerate(members) if m.key == FIELD)
        m = members[i]
        if i > 0:  # drop `, "trained_precision": "bf16"` after the previous member
            text = text[: members[i - 1].value_end] + text[m.value_end :]
        elif len(members) > 1:  # the first member: drop it up to the next key
            text = text[: m.key_start] + text[members[1].key_start :]
        else:
            text = text[: open_brace + 1] + text[close_brace:]
        members, open_brace, close_brace = _top_level_members(text)
    return _round_tripped(text, data, [k for k in data if k != FIELD])


def unified_diff(old: str, new: str, path: str) -> str:
    """The unified diff of a file's edit, as `--dry-run` prints it."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), path, path))


def atomic_write_text(path: str | os.PathLike, text: str, mode: int | None = None) -> None:
    """
    Replaces `path` (a symlink too, not its target) with `text` atomically: a fsynced temporary file, then `os.replace`;
    on any failure `path` is untouched. The new file gets `mode` (default: the old one's) and the old owner and group.
    """
    path = Path(path)
    old = os.stat(path)
    if mode is None:
        mode = stat.S_IMODE(old.st_mode)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if hasattr(os, "chown") and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
            with contextlib.suppress(PermissionError):  # only root (or the owner, for its groups) may
                os.chown(tmp, old.st_uid, old.st_gid)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _snapshots(repo_dir: Path, model_id: str | None) -> list[CheckpointTarget]:
    snapshots = repo_dir / "snapshots"
    found = sorted(snapshots.iterdir()) if snapshots.is_dir() else []
    return [CheckpointTarget(snap / CONFIG_NAME, model_id, in_cache=True) for snap in found if snap.is_dir()]


def _is_cache_root(path: Path) -> bool:
    return path.is_dir() and not (path / CONFIG_NAME).exists() and any(path.glob("models--*/snapshots"))


def find_checkpoints(paths: Iterable[str | os.PathLike], model_id: str | None = None) -> list[CheckpointTarget]:
    """
    The `config.json` files under user paths (a checkpoint directory, a `config.json`, a cache snapshot, repo folder or
    root), with the Hub id the cache layout tells, else `model_id`. A missing path yields a target with no config.
    """
    targets: list[CheckpointTarget] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.name == CONFIG_NAME and not path.is_dir():
            path = path.parent
        if _is_cache_root(path / "hub"):
            path = path / "hub"  # ~/.cache/huggingface rather than ~/.cache/huggingface/hub
        snapshot = cache_snapshot_of(path) if path.is_dir() else None
        repo_id = cache_folder_hub_id(path.name)
        if snapshot is not None and os.path.normpath(snapshot.snapshot_dir) == os.path.normpath(path.absolute()):
            targets.append(CheckpointTarget(path / CONFIG_NAME, snapshot.hub_id, in_cache=True))
        elif path.is_dir() and repo_id and (path / "snapshots").is_dir():
            targets.extend(_snapshots(path, canonical_hub_id(repo_id)))
        elif _is_cache_root(path):
            for repo_dir in sorted(path.glob("models--*")):
                repo_id = cache_folder_hub_id(repo_dir.name)
                targets.extend(_snapshots(repo_dir, canonical_hub_id(repo_id) if repo_id else None))
        else:
            targets.append(CheckpointTarget(path / CONFIG_NAME, canonical_hub_id(model_id) if model_id else None))
    return targets


def lock_path(path: str | os.PathLike) -> Path:
    """The lock file of the config at `path`, in `HF_HOME` (one beside it would be uploaded), named by its real path."""
    import hashlib

    from huggingface_hub import constants

    path = Path(path)
    key = os.path.join(os.path.realpath(path.parent), path.name)
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()
    return Path(constants.HF_HOME) / "trained_precision" / "locks" / f"{digest}.lock"


def config_lock(path: str | os.PathLike, timeout: float):
    """A `filelock.FileLock` on [`lock_path`] for the config at `path` (its folder is created if needed)."""
    from filelock import FileLock

    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(lock), timeout=timeout)


def populate_config(
    config_path: str | os.PathLike,
    precision: str,
    *,
    force: bool = False,
    dry_run: bool = False,
    source: str | None = None,
    model_id: str | None = None,
    in_cache: bool | None = None,
) -> PopulateResult:
    """
    Writes `trained_precision` into one `config.json` ([`set_config_field`]) atomically, under [`lock_path`]'s lock.
    A cache snapshot's link becomes a regular file. Never raises for a bad file: on an error nothing changed.
    """
    path = Path(config_path)

    def result(status, message, diff=""):
        return PopulateResult(str(path), status, message, model_id, precision, diff)

    try:
        precision = normalize_precision(precision)
    except InvalidTrainedPrecisionError as e:
        return result(ERROR, f"{e} Nothing modified.")

    target, problem = _writable_target(path, in_cache)
    if problem is not None:
        return result(ERROR, f"{problem}; nothing modified.")

    from filelock import Timeout

    try:
        lock = config_lock(target, timeout=30) if not dry_run else contextlib.nullcontext()
    except OSError as e:
        return result(ERROR, f"cannot create the lock file {lock_path(target)} ({e.strerror}); nothing modified.")
    try:
        with lock:
            return _edit_locked(path, target, precision, force, dry_run, source, result)
    except Timeout:
        return result(ERROR, f"another process holds {lock_path(target)} (waited 30 s); nothing modified.")


def _writable_target(path: Path, in_cache: bool | None) -> tuple[Path, str | None]:
    """The file that writing `path` replaces, and why it cannot be written (`None` when it can)."""
    if not path.parent.exists():
        return path, f"{path.parent} does not exist"
    if not os.path.lexists(path):
        return path, f"no {CONFIG_NAME} in {path.parent}"
    if path.is_symlink() and not path.exists():
        return path, f"{CONFIG_NAME} is a broken symlink (to {os.readlink(path)})"
    if not path.is_file():
        return path, f"{path} is not a regular file"
    if in_cache is None:
        in_cache = cache_snapshot_of(path.parent) is not None
    outside = None if in_cache else link_outside_checkpoint(path)
    if outside is not None:
        return path, outside
    # the file to replace: the cache's link itself, or the target of a user's own link
    target = path if in_cache or not path.is_symlink() else Path(os.path.realpath(path))
    with contextlib.suppress(AttributeError, OSError):
        if os.statvfs(target.parent).f_flag & os.ST_RDONLY:
            return target, "on a read-only file system"
    mode = stat.S_IMODE(os.stat(target).st_mode)
    # os.access alone is not enough: it says yes to root even for a 0o444 file, whose owner meant "do not edit".
    if not (mode & 0o222) or not os.access(target, os.W_OK):
        return target, f"read-only (mode {mode:#o}); make it writable to change it"
    if not os.access(target.parent, os.W_OK | os.X_OK):
        return target, f"its directory {target.parent} is not writable"
    return target, None


def link_outside_checkpoint(path: str | os.PathLike) -> str | None:
    """Why `set` and `plan --write` refuse a file even with `--force` (a link out of the checkpoint), else `None`."""
    from ..facts.storage import checkpoint_root

    path = Path(path)
    if not path.is_symlink():
        return None
    root = os.path.realpath(checkpoint_root(path.parent))
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) == root:
        return None
    return (
        f"{path} is a link to {real}, outside the checkpoint ({root}): it is not written, as it is not read; copy "
        "the file into the checkpoint instead of linking to it"
    )


def _edit_locked(path: Path, target: Path, precision: str, force: bool, dry_run: bool, source, result):
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        return result(ERROR, f"not UTF-8 text ({e.reason}); nothing modified.")
    except OSError as e:
        return result(ERROR, f"cannot be read ({e.strerror}); nothing modified.")
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom) :]
    try:
        new_body = set_config_field(body, precision, force=force, source=source)
    except ConfigEditError as e:
        return result(ERROR, f"{e}; nothing modified.")
    if new_body == body:
        message = f"has no {FIELD} to remove." if precision == UNKNOWN else f"already says {FIELD}={precision!r}."
        return result(UNCHANGED, message)
    new_text = bom + new_body

    diff = unified_diff(text, new_text, str(path))
    what = f"remove {FIELD}" if precision == UNKNOWN else f"set {FIELD}={precision!r}"
    if dry_run:
        return result(WOULD_WRITE, f"would {what} (dry run, nothing modified).", diff)
    how = ""
    if target != path:
        how = f" (through the symlink, in {target})"
    elif path.is_symlink():
        how = f" (the cache's symlink to {os.readlink(path)} is now a regular file; the blob is untouched)"
    try:
        atomic_write_text(target, new_text, stat.S_IMODE(os.stat(target).st_mode))
    except OSError as e:
        return result(ERROR, f"cannot be replaced ({e.strerror}); nothing modified.")
    done = f"removed {FIELD}" if precision == UNKNOWN else f"set {FIELD}={precision!r}"
    subs = [key for key, _ in sub_config_items(json.loads(new_body))]  # nested ones too: `encoder.text_config`
    if subs:
        done += f" in the config and its sub-configs {', '.join(subs)}"
    return result(WRITTEN, f"{done}{how}.", diff)


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
    [`populate_config`] for every checkpoint under `paths` with `precision`, else the `registry` row of its Hub id; one
    without a value is skipped, not guessed. `on_result` is called with each result.
    """
    targets = find_checkpoints(paths, model_id)
    if progress:
        from tqdm.auto import tqdm

        targets = tqdm(targets, desc="Populating trained_precision", unit="checkpoint", disable=None)
    results = []
    for target in targets:
        entry = lookup(target.model_id, registry) if precision is None and target.model_id else None
        if precision is None and entry is None:
            why = (
                "no Hub id is known for a local directory: pass --model-id (a registry id) or --precision"
                if target.model_id is None
                else f"{target.model_id} is not in the registry: pass --precision to set it anyway"
            )
            result = PopulateResult(str(target.config_path), SKIPPED, f"{why}; nothing modified.", target.model_id)
        else:
            value, source = (precision, None) if entry is None else (entry.precision, entry.source)
            result = populate_config(
                target.config_path,
                value,
                force=force,
                dry_run=dry_run,
                source=source,
                model_id=target.model_id,
                in_cache=target.in_cache or None,
            )
        results.append(result)
        if on_result:
            on_result(result)
    return results
