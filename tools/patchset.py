#!/usr/bin/env python3
# Copyright 2026 The trained_precision fork authors. Licensed under the Apache License, Version 2.0.
"""
The patch-set machinery of this fork: build a patched `transformers` from the pinned upstream release, and keep
`patches/` in sync with a git working copy.

The repository holds no upstream code. Upstream reaches the build as the build requirement pinned in
`pyproject.toml` (`transformers==X.Y.Z`); this module copies its files, overlays ours (`src/transformers/**`) and
applies `patches/series` strictly: every hunk must match at exactly its stated line with exactly its context, or
the build stops naming the patch, the file and the hunk.

Commands (run `python tools/patchset.py --help`):

    check     series and patch files match one to one, every patch applies exactly to the pristine upstream
    tree      write the patched package tree into a folder (what the wheel contains)
    fork      make `fork/`: a git repo with upstream as its first commit and one commit per patch
    export    regenerate `patches/` from the commits in `fork/`
    version   print the version the build would give the wheel

Nothing here imports `transformers`: upstream is located through `importlib.metadata` (an installed, unmodified
distribution whose RECORD hashes are checked) or through its wheel file.
"""

from __future__ import annotations

import argparse
import base64
import csv
import dataclasses
import email.parser
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
PATCHES_DIR = ROOT / "patches"
SERIES = PATCHES_DIR / "series"
OVERLAY = ROOT / "src"
PACKAGE = "transformers"
PATCH_PREFIX = "src/"  # patches use upstream's repo layout: a/src/transformers/...
CACHE = Path(os.environ.get("PATCHSET_CACHE", ROOT / ".cache"))  # where the upstream wheel is kept
DEFAULT_FORK = ROOT / "fork"
FIXED_DATE = "2000-01-01T00:00:00+0000"
NOTICE_MARKER = "# Modified by the trained_precision fork"
PIN_KEYS = ("wheel", "sdist", "record")
TRACKED_LIST = "tracked-files.txt"  # written into the sdist: the git-tracked files it was made from


class PatchsetError(Exception):
    """A build or check failure with a message meant for the person running it."""


# ----------------------------------------------------------------------------------------------------------------
# Configuration


@dataclasses.dataclass
class Config:
    upstream_version: str
    release: int
    extras: dict[str, list[str]]
    # sha256 pins of the upstream release as published (`[tool.patchset.pin]`): "wheel", "sdist" (hex digests of
    # the files) and "record" (`record_digest` of the wheel's RECORD rows for the package, what an install keeps)
    pins: dict[str, str] = dataclasses.field(default_factory=dict)


def _load_toml(path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python < 3.11
        import tomli as tomllib
    with open(path, "rb") as f:
        return tomllib.load(f)


def read_config(root: Path = ROOT) -> Config:
    """Reads the pin (from `[build-system].requires`), the fork release number and our extras from pyproject.toml."""
    data = _load_toml(root / "pyproject.toml")
    pins = [r for r in data["build-system"]["requires"] if re.match(rf"^{PACKAGE}\s*==", r)]
    if len(pins) != 1:
        raise PatchsetError(f"pyproject.toml: [build-system].requires needs exactly one `{PACKAGE}==X.Y.Z` pin")
    version = pins[0].split("==", 1)[1].strip()
    tool = data.get("tool", {}).get("patchset", {})
    pins = {k.removesuffix("-sha256"): str(v) for k, v in tool.get("pin", {}).items()}
    missing = [k for k in PIN_KEYS if not re.fullmatch(r"[0-9a-f]{64}", pins.get(k, ""))]
    if missing:
        raise PatchsetError(
            "pyproject.toml: [tool.patchset.pin] needs the sha256 of the pinned upstream release ("
            + ", ".join(f"{k}-sha256" for k in missing)
            + "): 64 lowercase hex digits each; `make rebase` writes them"
        )
    return Config(
        upstream_version=version,
        release=int(tool.get("release", 1)),
        extras=tool.get("extras", {}),
        pins={k: pins[k] for k in PIN_KEYS},
    )


def git_sha(root: Path = ROOT) -> str | None:
    """The short commit of a git checkout at `root`, or None outside git."""
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=10", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def fork_version(config: Config, root: Path = ROOT) -> str:
    """`X.Y.Z+trainedprecision.N`, plus `.g<sha>` from git (so pip reinstalls a moved branch), or the version of an sdist's PKG-INFO."""
    pkg_info = root / "PKG-INFO"
    if pkg_info.exists() and not (root / ".git").exists():
        return email.parser.Parser().parsestr(pkg_info.read_text())["Version"]
    version = f"{config.upstream_version}+trainedprecision.{config.release}"
    sha = git_sha(root)
    return f"{version}.g{sha}" if sha else version


# ----------------------------------------------------------------------------------------------------------------
# Upstream sources


class Upstream:
    """The pristine upstream package: a mapping `transformers/...` -> bytes, plus its METADATA and entry points."""

    def __init__(self, files: dict[str, Path | bytes], metadata: str, entry_points: str, version: str):
        self.files = files
        self.metadata = metadata
        self.entry_points = entry_points
        self.version = version

    def read(self, relpath: str) -> bytes:
        item = self.files[relpath]
        return item if isinstance(item, bytes) else item.read_bytes()


def _record_digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _check_version(found: str, expected: str, where: str) -> None:
    if found != expected:
        raise PatchsetError(
            f"found {PACKAGE} {found} in {where}, need the pristine {expected} pinned in pyproject.toml. "
            f"Build with isolation (the default), or install `{PACKAGE}=={expected}` in the build environment."
        )


def _upstream_file(name: str) -> bool:
    return name.startswith(f"{PACKAGE}/") and "__pycache__" not in name and not name.endswith(".pyc")


def record_digest(rows: dict[str, str]) -> str:
    """sha256 over the sorted `name,hash` RECORD rows of the package's files: the same for the wheel and its install.

    pip keeps a wheel's RECORD rows for the files it copies, so this digest of the installed distribution equals
    the digest of the wheel it came from; pinned in pyproject.toml, it ties the build environment's upstream to the
    published wheel, not only to its own RECORD.
    """
    lines = [f"{name},{rows[name]}\n" for name in sorted(rows) if _upstream_file(name) and not name.endswith("/")]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_file_pin(path: Path, expected: str | None, what: str) -> None:
    """Refuses a downloaded upstream file whose sha256 is not the one pinned in pyproject.toml."""
    if expected is None:
        return
    found = file_sha256(path)
    if found != expected:
        raise PatchsetError(
            f"{path}: sha256 {found} is not the pinned {what} sha256 {expected} ([tool.patchset.pin] in "
            "pyproject.toml). The file is not the published release: delete it and run again to download it anew; "
            "if upstream re-published the release, check why before changing the pin."
        )


def upstream_from_installed(expected_version: str, record_sha256: str | None = None) -> Upstream:
    """Locates the installed upstream distribution without importing it, and checks its version and RECORD hashes.

    With `record_sha256`, the RECORD rows must also be the pinned ones (`record_digest`), so the files are those of
    the published wheel, not only consistent with whatever RECORD came with them.
    """
    from importlib import metadata

    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise PatchsetError(
            f"{PACKAGE}=={expected_version} is not installed in the build environment; it is the build requirement "
            "that provides upstream's code (see pyproject.toml)."
        ) from None
    _check_version(dist.version, expected_version, "the build environment")
    files: dict[str, Path | bytes] = {}
    bad = []
    rows = {}
    for entry in dist.files or []:
        if entry.hash is not None:
            rows[entry.as_posix()] = f"{entry.hash.mode}={entry.hash.value}"
        name = entry.as_posix()
        if not _upstream_file(name):
            continue
        path = Path(entry.locate())
        if entry.hash is None:
            bad.append(f"{name} (no hash in RECORD)")
            continue
        data = path.read_bytes()
        if _record_digest(data) != f"{entry.hash.mode}={entry.hash.value}":
            bad.append(name)
        files[name] = path
    if bad:
        raise PatchsetError(
            f"the installed {PACKAGE} {dist.version} differs from its RECORD (modified install?): "
            + ", ".join(bad[:5])
            + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        )
    if not files:
        raise PatchsetError(f"the installed {PACKAGE} {dist.version} lists no files in its RECORD")
    if record_sha256 is not None and record_digest(rows) != record_sha256:
        raise PatchsetError(
            f"the installed {PACKAGE} {dist.version} is not the published wheel: the digest of its RECORD is "
            f"{record_digest(rows)}, the pin in pyproject.toml ([tool.patchset.pin] record-sha256) is {record_sha256}. "
            "Build with isolation from PyPI (the default), or check where that distribution came from."
        )
    return Upstream(files, dist.read_text("METADATA") or "", dist.read_text("entry_points.txt") or "", dist.version)


def upstream_from_wheel(wheel: Path, expected_version: str, sha256: str | None = None) -> Upstream:
    """Reads upstream from its wheel file, checking its pinned sha256 (when given), the version and every RECORD hash."""
    check_file_pin(wheel, sha256, "wheel")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        dist_info = next((n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD")), None)
        if dist_info is None:
            raise PatchsetError(f"{wheel}: not a wheel (no RECORD)")
        metadata = zf.read(f"{dist_info}/METADATA").decode()
        version = email.parser.Parser().parsestr(metadata)["Version"]
        _check_version(version, expected_version, str(wheel))
        record = {row[0]: row[1] for row in csv.reader(io.StringIO(zf.read(f"{dist_info}/RECORD").decode())) if row}
        files: dict[str, Path | bytes] = {}
        for name in names:
            if not _upstream_file(name) or name.endswith("/"):
                continue
            data = zf.read(name)
            if record.get(name) != _record_digest(data):
                raise PatchsetError(f"{wheel}: {name} does not match its RECORD hash")
            files[name] = data
        ep_name = f"{dist_info}/entry_points.txt"
        entry_points = zf.read(ep_name).decode() if ep_name in names else ""
    return Upstream(files, metadata, entry_points, version)


def _download(version: str, kind: str, name: str, sha256: str | None) -> Path:
    CACHE.mkdir(exist_ok=True)
    path = CACHE / name
    if not path.exists():
        # pip writes into a private folder and the file is moved into place in one step, so processes that share
        # `.cache/` (the test suite's parallel workers, a `make check` beside `make test`) never read a partial file
        flags = ["--only-binary", ":all:"] if kind == "wheel" else ["--no-binary", ":all:"]
        with tempfile.TemporaryDirectory(dir=CACHE, prefix=".download-") as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *flags, f"{PACKAGE}=={version}",
                 "-d", tmp],
                check=True,
            )  # fmt: skip
            if (Path(tmp) / name).exists():
                os.replace(Path(tmp) / name, path)
    if not path.exists():
        raise PatchsetError(f"pip did not produce {path.name}")
    check_file_pin(path, sha256, kind)
    return path


def cached_upstream_wheel(version: str, sha256: str | None = None) -> Path:
    """The upstream wheel in `.cache/`, downloaded once with pip (honours pip's configured index); with `sha256`,
    checked against it before every use."""
    return _download(version, "wheel", f"{PACKAGE}-{version}-py3-none-any.whl", sha256)


def cached_upstream_sdist(version: str, sha256: str | None = None) -> Path:
    """The upstream sdist in `.cache/` (for upstream's `pyproject.toml`), downloaded and checked like the wheel."""
    return _download(version, "sdist", f"{PACKAGE}-{version}.tar.gz", sha256)


def upstream_pyproject(config: Config) -> Path:
    """Upstream's `pyproject.toml` (its ruff configuration) from the pinned sdist, extracted under `.cache/`."""
    sdist = cached_upstream_sdist(config.upstream_version, config.pins.get("sdist"))
    dest = CACHE / f"upstream-{config.upstream_version}" / "pyproject.toml"
    if dest.exists() and dest.stat().st_mtime >= sdist.stat().st_mtime:
        return dest
    import tarfile

    member = f"{PACKAGE}-{config.upstream_version}/pyproject.toml"
    with tarfile.open(sdist) as tf:
        try:
            data = tf.extractfile(member).read()
        except (KeyError, AttributeError):
            raise PatchsetError(f"{sdist} holds no {member}") from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".pyproject-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, dest)
    return dest


def wheel_pins(wheel: Path) -> dict[str, str]:
    """The `wheel` and `record` pins of a wheel file (what `make rebase` writes for a new release)."""
    with zipfile.ZipFile(wheel) as zf:
        record = next((n for n in zf.namelist() if n.endswith(".dist-info/RECORD")), None)
        if record is None:
            raise PatchsetError(f"{wheel}: not a wheel (no RECORD)")
        rows = {row[0]: row[1] for row in csv.reader(io.StringIO(zf.read(record).decode())) if row and row[1]}
    return {"wheel": file_sha256(wheel), "record": record_digest(rows)}


def load_upstream(config: Config, source: str = "auto") -> Upstream:
    """`installed` (the build), `wheel` (developer tools), or `auto`: installed when it is the pristine pin.

    Either way upstream is checked against the sha256 pins of pyproject.toml before anything reads it.
    """
    if source == "installed":
        return upstream_from_installed(config.upstream_version, config.pins.get("record"))
    if source == "auto":
        try:
            return upstream_from_installed(config.upstream_version, config.pins.get("record"))
        except PatchsetError:
            pass
    wheel = cached_upstream_wheel(config.upstream_version, config.pins.get("wheel"))
    return upstream_from_wheel(wheel, config.upstream_version, config.pins.get("wheel"))


# ----------------------------------------------------------------------------------------------------------------
# Series and patch parsing


def read_series(patches_dir: Path = PATCHES_DIR) -> list[str]:
    """Patch file names from `series` (quilt syntax: one per line, `#` comments and blank lines allowed)."""
    series = patches_dir / "series"
    if not series.exists():
        raise PatchsetError(f"{series} is missing")
    names = []
    for line in series.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


def check_series(patches_dir: Path = PATCHES_DIR) -> list[str]:
    """Checks that `series` and the `*.patch` files match one to one; returns the series."""
    names = read_series(patches_dir)
    errors = []
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        errors.append(f"listed twice in series: {', '.join(dupes)}")
    for name in names:
        if not (patches_dir / name).is_file():
            errors.append(f"series lists {name}, but {patches_dir / name} does not exist")
    on_disk = sorted(p.name for p in patches_dir.glob("*.patch"))
    for name in on_disk:
        if name not in names:
            errors.append(f"{name} is not listed in {patches_dir / 'series'}: add it or delete the file")
    if errors:
        raise PatchsetError("patch series is inconsistent:\n  " + "\n  ".join(errors))
    return names


@dataclasses.dataclass
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: list[bytes]  # each starts with b" ", b"-" or b"+"; no trailing newline
    header: str
    line_no: int  # line of the @@ header in the patch file
    no_newline_old: bool = False
    no_newline_new: bool = False

    @property
    def old_lines(self) -> list[bytes]:
        return [line[1:] for line in self.lines if line[:1] in (b" ", b"-")]

    @property
    def new_lines(self) -> list[bytes]:
        return [line[1:] for line in self.lines if line[:1] in (b" ", b"+")]


@dataclasses.dataclass
class FilePatch:
    path: str  # package-relative, e.g. transformers/configuration_utils.py
    hunks: list[Hunk]


_HUNK_RE = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _strip_path(raw: bytes, patch_name: str) -> str | None:
    path = raw.split(b"\t", 1)[0].strip().decode()
    if path == "/dev/null":
        return None
    if not (path.startswith("a/") or path.startswith("b/")):
        raise PatchsetError(f"{patch_name}: path {path!r} lacks the a/ or b/ prefix (use git format-patch)")
    path = path[2:]
    if not path.startswith(PATCH_PREFIX + PACKAGE + "/"):
        raise PatchsetError(f"{patch_name}: {path} is outside {PATCH_PREFIX}{PACKAGE}/")
    return path[len(PATCH_PREFIX) :]


def parse_patch(data: bytes, patch_name: str) -> list[FilePatch]:
    """Parses a unified or `git format-patch` diff. Only modifications of existing files are allowed."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    result: list[FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(b"diff --git "):
            j = i + 1
            while j < len(lines) and not lines[j].startswith((b"--- ", b"diff --git ")):
                header = lines[j]
                if header.startswith((b"new file mode", b"deleted file mode", b"rename ", b"copy ", b"old mode")):
                    raise PatchsetError(
                        f"{patch_name}:{j + 1}: {header.decode(errors='replace')!r}: patches may only modify "
                        "existing upstream files; put new files under src/transformers/"
                    )
                if header.startswith(b"Binary files") or header.startswith(b"GIT binary patch"):
                    raise PatchsetError(f"{patch_name}:{j + 1}: binary patches are not supported")
                j += 1
            i = j
            continue
        if line.startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ "):
            old = _strip_path(line[4:], patch_name)
            new = _strip_path(lines[i + 1][4:], patch_name)
            if old is None or new is None or old != new:
                raise PatchsetError(
                    f"{patch_name}:{i + 1}: only modifications of existing files are allowed ({old} -> {new})"
                )
            fp = FilePatch(new, [])
            result.append(fp)
            i += 2
            while i < len(lines) and lines[i].startswith(b"@@"):
                m = _HUNK_RE.match(lines[i])
                if not m:
                    raise PatchsetError(f"{patch_name}:{i + 1}: malformed hunk header")
                old_start, old_len, new_start, new_len = (
                    int(m.group(1)),
                    int(m.group(2) if m.group(2) is not None else 1),
                    int(m.group(3)),
                    int(m.group(4) if m.group(4) is not None else 1),
                )
                hunk = Hunk(old_start, old_len, new_start, new_len, [], lines[i].decode(errors="replace"), i + 1)
                i += 1
                seen_old = seen_new = 0
                while i < len(lines) and (seen_old < old_len or seen_new < new_len or lines[i].startswith(b"\\")):
                    body = lines[i]
                    tag = body[:1]
                    if tag == b"\\":
                        if hunk.lines and hunk.lines[-1][:1] in (b" ", b"-"):
                            hunk.no_newline_old = True
                        if hunk.lines and hunk.lines[-1][:1] in (b" ", b"+"):
                            hunk.no_newline_new = True
                    elif tag in (b" ", b"-", b"+") or body == b"":
                        body = body if body else b" "
                        hunk.lines.append(body)
                        seen_old += body[:1] in (b" ", b"-")
                        seen_new += body[:1] in (b" ", b"+")
                    else:
                        break
                    i += 1
                if seen_old != old_len or seen_new != new_len:
                    raise PatchsetError(
                        f"{patch_name}:{hunk.line_no}: hunk {hunk.header.split(' @@')[0]} @@ in {fp.path} is "
                        f"truncated or miscounted ({seen_old}/{old_len} old, {seen_new}/{new_len} new lines)"
                    )
                fp.hunks.append(hunk)
            if not fp.hunks:
                raise PatchsetError(f"{patch_name}: no hunks for {fp.path}")
            continue
        i += 1
    if not result:
        raise PatchsetError(f"{patch_name}: contains no diff")
    return result


def _find_nearby(lines: list[bytes], needle: list[bytes], pos: int, radius: int = 200) -> int | None:
    for delta in sorted(range(-radius, radius + 1), key=abs):
        start = pos + delta
        if delta and 0 <= start <= len(lines) - len(needle) and lines[start : start + len(needle)] == needle:
            return delta
    return None


def apply_file_patch(content: bytes, fp: FilePatch, patch_name: str) -> bytes:
    """Applies the hunks of `fp` to `content`, each at exactly its stated line; raises a PatchsetError otherwise."""
    lines = content.split(b"\n")
    had_final_newline = lines[-1] == b""
    if had_final_newline:
        lines.pop()
    shift = 0  # lines added minus removed by earlier hunks of this file
    for number, hunk in enumerate(fp.hunks, 1):
        old = hunk.old_lines
        start = hunk.old_start - 1 if hunk.old_len else hunk.old_start
        if hunk.new_start - hunk.old_start != shift:
            raise PatchsetError(
                f"{patch_name}: hunk #{number} {hunk.header.split(' @@')[0]} @@ of {fp.path} is inconsistent with "
                "the hunks before it (new start does not follow): regenerate the patch"
            )
        at = start + shift
        if lines[at : at + len(old)] != old:
            where = f"hunk #{number} {hunk.header.split(' @@')[0]} @@ (patch line {hunk.line_no})"
            delta = _find_nearby(lines, old, at)
            if delta is not None:
                hint = f"its context is found {delta:+d} lines away: upstream moved, refresh the patch"
            else:
                mismatch = next(
                    (k for k, (a, b) in enumerate(zip(lines[at : at + len(old)], old)) if a != b), len(old) - 1
                )
                got = lines[at + mismatch] if at + mismatch < len(lines) else b"<end of file>"
                hint = (
                    f"line {at + mismatch + 1} is {got.decode(errors='replace')!r}, the patch expects "
                    f"{old[mismatch].decode(errors='replace')!r}"
                )
            raise PatchsetError(f"{patch_name}: {where} does not apply exactly to {fp.path}: {hint}")
        lines[at : at + len(old)] = hunk.new_lines
        shift += len(hunk.new_lines) - len(old)
    final_newline = had_final_newline
    if fp.hunks and fp.hunks[-1].no_newline_new:
        final_newline = False
    return b"\n".join(lines) + (b"\n" if final_newline else b"")


# ----------------------------------------------------------------------------------------------------------------
# The package tree


def tracked_files(root: Path = ROOT) -> list[str]:
    """The files of this repository that may ship: repo-relative POSIX paths, sorted.

    In a git checkout these are the files git tracks (`git ls-files`), so an untracked `.env`, a notebook checkpoint
    or `notes.txt` next to our sources never reaches the wheel, the sdist or the upstream pull request. An sdist has
    no git: it carries the list it was made from (`tracked-files.txt`, written by setup.py's sdist command). A source
    archive of a commit (`git archive`, GitHub's archive URLs) holds committed files only, which its
    `tools/archive-commit.txt` proves (git writes the commit into it).
    """
    root = Path(root)
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True)
    if top.returncode == 0 and Path(top.stdout.strip()).resolve() == root.resolve():
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
        return sorted(name for name in out.decode().split("\0") if name and (root / name).is_file())
    listing = root / TRACKED_LIST
    if listing.is_file():
        names = [line for line in listing.read_text(encoding="utf-8").splitlines() if line.strip()]
        return sorted(name for name in names if (root / name).is_file())
    if _is_git_archive(root):
        # `git archive` holds committed files only: every file here was tracked (less what Python writes later)
        return sorted(
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
        )
    raise PatchsetError(
        f"{root} is neither a git checkout nor an sdist made by setup.py ({TRACKED_LIST} is missing) nor a git "
        "archive: the files to build from are the ones git tracks. Build from a clone of the repository, its sdist "
        "or a source archive of a commit."
    )


ARCHIVE_MARKER = "tools/archive-commit.txt"  # `$Format:%H$`, replaced by the commit in `git archive` (export-subst)


def _is_git_archive(root: Path) -> bool:
    marker = root / ARCHIVE_MARKER
    if not marker.is_file():
        return False
    return re.fullmatch(r"[0-9a-f]{40,64}", marker.read_text(encoding="utf-8").strip()) is not None


def sdist_files(files: list[str], root: Path = ROOT) -> tuple[list[str], list[str]]:
    """Splits the files setuptools would put in the sdist into (kept, left out): only tracked files and the
    metadata setuptools generates (`*.egg-info/`, `PKG-INFO`, `setup.cfg`) are kept."""
    tracked = set(tracked_files(root))
    kept, left_out = [], []
    for name in files:
        rel = Path(name).as_posix()
        generated = rel.split("/", 1)[0].endswith(".egg-info") or rel in ("PKG-INFO", "setup.cfg")
        (kept if rel in tracked or generated else left_out).append(name)
    return kept, left_out


def overlay_files(overlay: Path = OVERLAY) -> dict[str, Path]:
    """Our new files: `transformers/...` -> path, only files git tracks (see `tracked_files`)."""
    prefix = f"{overlay.name}/{PACKAGE}/"
    found = {}
    for rel in tracked_files(overlay.parent):
        if rel.startswith(prefix):
            found[rel[len(overlay.name) + 1 :]] = overlay.parent / rel
    return found


def patched_files(
    upstream: Upstream, names: list[str], patches_dir: Path = PATCHES_DIR, overlay: Path = OVERLAY
) -> dict[str, bytes]:
    """Applies the series to the upstream files it touches; returns only the changed files' new contents."""
    ours = overlay_files(overlay)
    changed: dict[str, bytes] = {}
    for name in names:
        for fp in parse_patch((patches_dir / name).read_bytes(), name):
            if fp.path in ours:
                raise PatchsetError(f"{name}: patches {fp.path}, which is one of our files: edit it directly")
            if fp.path not in upstream.files:
                raise PatchsetError(f"{name}: {fp.path} does not exist in upstream {PACKAGE} {upstream.version}")
            current = changed.get(fp.path)
            if current is None:
                current = upstream.read(fp.path)
            changed[fp.path] = apply_file_patch(current, fp, name)
    return changed


def _notice(names: list[str]) -> bytes:
    return (f"{NOTICE_MARKER} (patches: {', '.join(names)}); see transformers/_fork_patchset.py.\n").encode()


def _add_notice(path: str, content: bytes, patch_names: list[str]) -> bytes:
    """Apache-2.0 §4(b): a modified file says so. The notice is a comment on the file's first line."""
    if not path.endswith(".py"):
        return content
    return _notice(patch_names) + content


def _set_version(init: bytes, upstream_version: str, version: str) -> bytes:
    pattern = rb'^__version__ = "' + re.escape(upstream_version.encode()) + rb'"$'
    new, count = re.subn(pattern, b'__version__ = "' + version.encode() + b'"', init, flags=re.M)
    if count != 1:
        raise PatchsetError(f'expected one `__version__ = "{upstream_version}"` in transformers/__init__.py')
    return new


def build_tree(dest: Path, config: Config, upstream: Upstream, version: str) -> dict:
    """Writes the patched package into `dest/transformers`; returns a summary."""
    names = check_series()
    ours = overlay_files()
    shadows = sorted(p for p in ours if p in upstream.files)
    if shadows:
        raise PatchsetError(
            "these files of ours would shadow upstream files (change upstream files with a patch instead): "
            + ", ".join(f"src/{p}" for p in shadows)
        )
    changed = patched_files(upstream, names)
    touched_by: dict[str, list[str]] = {}
    for name in names:
        for fp in parse_patch((PATCHES_DIR / name).read_bytes(), name):
            touched_by.setdefault(fp.path, [])
            if name not in touched_by[fp.path]:
                touched_by[fp.path].append(name)

    pkg = dest / PACKAGE
    if pkg.exists():
        shutil.rmtree(pkg)  # in-tree builds reuse build/lib: never ship stale files
    for rel in upstream.files:
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        data = changed.get(rel)
        if data is None:
            data = upstream.read(rel)
        else:
            data = _add_notice(rel, data, touched_by[rel])
        if rel == f"{PACKAGE}/__init__.py":
            data = _set_version(data, config.upstream_version, version)
        out.write_bytes(data)
    for rel, path in ours.items():
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out)
    info = {
        "upstream_version": config.upstream_version,
        "version": version,
        "patches": {n: hashlib.sha256((PATCHES_DIR / n).read_bytes()).hexdigest() for n in names},
        "modified_files": {k: v for k, v in sorted(touched_by.items())},
        "new_files": sorted(ours),
    }
    (pkg / "_fork_patchset.py").write_text(
        '"""Generated at build time: what this fork changed in upstream transformers (Apache-2.0 §4(b) notice)."""\n\n'
        f"FORK_INFO = {info!r}\n"
    )
    return info


# ----------------------------------------------------------------------------------------------------------------
# Wheel metadata


def setup_kwargs(upstream: Upstream, config: Config) -> dict:
    """Upstream's METADATA as setuptools keywords, plus our extras."""
    msg = email.parser.Parser().parsestr(upstream.metadata)
    install_requires: list[str] = []
    extras: dict[str, list[str]] = {name: [] for name in msg.get_all("Provides-Extra") or []}
    for req in msg.get_all("Requires-Dist") or []:
        if ";" not in req:
            install_requires.append(req)
            continue
        spec, marker = (s.strip() for s in req.split(";", 1))
        m = re.fullmatch(r'extra\s*==\s*"([^"]+)"', marker)
        if m:
            extras.setdefault(m.group(1), []).append(spec)
        elif "extra" in marker:
            raise PatchsetError(f"cannot express upstream requirement {req!r} as a setuptools extra")
        else:
            install_requires.append(req)
    for name, reqs in config.extras.items():
        if name in extras:
            raise PatchsetError(f"our extra {name!r} clashes with upstream's extra of the same name")
        extras[name] = list(reqs)
    entry_points: dict[str, list[str]] = {}
    section = None
    for line in upstream.entry_points.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            entry_points[section] = []
        elif line and section:
            entry_points[section].append(line)
    description = msg.get_payload() or ""
    return {
        "name": PACKAGE,
        "description": msg["Summary"],
        "long_description": description,
        "long_description_content_type": msg.get("Description-Content-Type", "text/markdown"),
        "author": msg.get("Author"),
        "author_email": msg.get("Author-email"),
        "url": msg.get("Home-page"),
        "license": msg.get("License"),
        "keywords": msg.get("Keywords"),
        "classifiers": msg.get_all("Classifier") or [],
        "python_requires": msg.get("Requires-Python"),
        "install_requires": install_requires,
        "extras_require": extras,
        "entry_points": entry_points,
    }


# ----------------------------------------------------------------------------------------------------------------
# Developer workflow: fork / export


def _git(args: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(
        GIT_AUTHOR_DATE=FIXED_DATE,
        GIT_COMMITTER_DATE=FIXED_DATE,
        GIT_COMMITTER_NAME="patchset",
        GIT_COMMITTER_EMAIL="patchset@localhost",
    )
    env.update(kwargs.pop("env", {}))
    return subprocess.run(["git", *args], cwd=cwd, check=True, text=True, env=env, **kwargs)


def write_upstream_tree(dest: Path, upstream: Upstream) -> None:
    """Writes upstream's package files into `dest` in upstream's repo layout (`src/transformers/...`)."""
    for rel in upstream.files:
        out = dest / PATCH_PREFIX / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(upstream.read(rel))


def _fork_links(ours: Path, upstream_dir: Path, rel: str = "") -> list[tuple[Path, str]]:
    """
    What `make_fork` links from `ours` into the upstream tree `upstream_dir`, as `(our path, relative path)`: a
    folder of ours that upstream does not have is linked whole (`trained_precision/`); in a folder upstream has
    (`integrations/`), our files are linked one by one. A file of ours that upstream has raises.
    """
    links = []
    for entry in sorted(ours.iterdir()) if ours.is_dir() else []:
        if entry.name == "__pycache__":
            continue
        name = f"{rel}{entry.name}"
        target = upstream_dir / entry.name
        if target.is_dir() and not target.is_symlink() and entry.is_dir():
            links.extend(_fork_links(entry, target, f"{name}/"))
        elif target.exists():
            raise PatchsetError(f"src/{PACKAGE}/{name} would shadow an upstream file")
        else:
            links.append((entry, name))
    return links


def make_fork(fork: Path, version: str, upstream: Upstream, root: Path = ROOT) -> None:
    """
    Creates `fork/`: upstream as one commit (tag `upstream/<version>`), then one commit per patch of `root/patches`
    (`git am`), with the entries of `root/src/transformers` linked in and git-excluded.
    """
    if fork.exists():
        raise PatchsetError(f"{fork} exists; it may hold work. Export it first, then remove it to recreate.")
    patches_dir = root / "patches"
    names = check_series(patches_dir)
    fork.mkdir(parents=True)
    try:
        _git(["init", "-q", "-b", "patches"], fork)
        write_upstream_tree(fork, upstream)
        _git(["add", "-A"], fork)
        _git(
            ["-c", "user.name=patchset", "-c", "user.email=patchset@localhost", "commit", "-q", "-m",
             f"Upstream {PACKAGE} {version}", "--author", "patchset <patchset@localhost>"],
            fork,
        )  # fmt: skip
        _git(["tag", f"upstream/{version}"], fork)
        for name in names:
            # keep the author date of each patch (stable export); the committer is fixed by _git's environment
            _git(["am", "-q", "--keep-cr", str(patches_dir / name)], fork)
        lines = ["# our new files are linked from ../src; they are never part of a patch", "__pycache__/", "*.pyc"]
        base = root / "src" / PACKAGE
        for entry, rel in _fork_links(base, fork / PATCH_PREFIX / PACKAGE):
            link = fork / PATCH_PREFIX / PACKAGE / rel
            link.symlink_to(os.path.relpath(entry, link.parent))
            lines.append(f"/{PATCH_PREFIX}{PACKAGE}/{rel}")
        with open(fork / ".git" / "info" / "exclude", "a") as f:
            f.write("\n".join(lines) + "\n")
    except BaseException:
        shutil.rmtree(fork, ignore_errors=True)
        raise


def export_fork(fork: Path, config: Config) -> list[str]:
    """Regenerates `patches/*.patch` and `series` from the commits on top of `upstream/X.Y.Z` in `fork/`."""
    if not (fork / ".git").exists():
        raise PatchsetError(f"{fork} is not a fork checkout: run `make fork` first")
    status = _git(["status", "--porcelain"], fork, capture_output=True).stdout
    if status.strip():
        raise PatchsetError(f"{fork} has uncommitted changes: commit them (one commit per patch) before exporting")
    with tempfile.TemporaryDirectory() as tmp:
        _git(
            ["format-patch", "-q", "--zero-commit", "--no-signature", "--no-numbered", "--full-index", "--no-stat",
             "-o", tmp, f"upstream/{config.upstream_version}..HEAD"],
            fork,
        )  # fmt: skip
        produced = sorted(Path(tmp).glob("*.patch"))
        for old in PATCHES_DIR.glob("*.patch"):
            old.unlink()
        names = []
        for path in produced:
            shutil.copyfile(path, PATCHES_DIR / path.name)
            names.append(path.name)
    header = "# Applied in this order to the pinned upstream; regenerate with `make export`.\n"
    SERIES.write_text(header + "".join(f"{n}\n" for n in names))
    return names


# ----------------------------------------------------------------------------------------------------------------
# CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="series <-> files, and every patch applies exactly to pristine upstream")
    tree = sub.add_parser("tree", help="write the patched package into a folder")
    tree.add_argument("dest", type=Path)
    fork = sub.add_parser("fork", help="create the git fork checkout")
    fork.add_argument("--dir", type=Path, default=DEFAULT_FORK)
    export = sub.add_parser("export", help="regenerate patches/ from the fork checkout")
    export.add_argument("--dir", type=Path, default=DEFAULT_FORK)
    sub.add_parser("version", help="print the wheel version")
    sub.add_parser("pin", help="print the pinned upstream version")
    args = parser.parse_args(argv)
    try:
        config = read_config()
        if args.command == "version":
            print(fork_version(config))
        elif args.command == "pin":
            print(config.upstream_version)
        elif args.command == "check":
            names = check_series()
            upstream = load_upstream(config, "wheel")
            changed = patched_files(upstream, names)
            shadows = sorted(p for p in overlay_files() if p in upstream.files)
            if shadows:
                raise PatchsetError("files of ours shadow upstream files: " + ", ".join(shadows))
            print(f"patchset: {len(names)} patches apply exactly to {PACKAGE} {config.upstream_version}; "
                  f"{len(changed)} upstream files modified, {len(overlay_files())} new files")  # fmt: skip
        elif args.command == "tree":
            info = build_tree(args.dest, config, load_upstream(config, "wheel"), fork_version(config))
            print(f"patchset: wrote {args.dest / PACKAGE} ({info['version']})")
        elif args.command == "fork":
            make_fork(args.dir.resolve(), config.upstream_version, load_upstream(config, "wheel"))
            print(f"patchset: {args.dir} ready (branch `patches` on tag upstream/{config.upstream_version})")
        elif args.command == "export":
            names = export_fork(args.dir.resolve(), config)
            print(f"patchset: exported {len(names)} patches to {PATCHES_DIR}")
    except PatchsetError as e:
        print(f"patchset: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
