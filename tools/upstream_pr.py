#!/usr/bin/env python3
# Copyright 2026 The trained_precision fork authors. Licensed under the Apache License, Version 2.0.
"""
Turn the fork into an upstream pull request, and move the fork to a new upstream release.

    pr       create a branch in a clone of huggingface/transformers holding our change as a short series of
             commits in upstream's layout (`make pr UPSTREAM=/path/to/clone [BASE=v5.23.0] [BRANCH=...]`)
    check    validate `patches/upstream/series` against its files and count what the pull request would hold
    rebase   rebuild `fork/` on a new upstream release, rebase our commits onto it, export `patches/` and bump the
             pin in pyproject.toml (`make rebase VERSION=x.y.z`)

The pull request branch holds, in this order:

1. one commit per patch of `patches/series` (applied with `git am`, messages kept, fork-only trailers dropped);
2. our new package files (`src/transformers/**`), our repo tools (`utils/**`), our tests (`tests/**`) and our docs
   (`docs/source/en/**`), one commit each, found by walking the repository at run time;
3. one commit per patch of `patches/upstream/series`: edits of upstream files that are not in the wheel (the
   config-attributes allow list, `config_common_kwargs`, the Makefile's checker list, the docs table of contents)
   and that upstream's CI needs once our change is in its repository. The build never applies them.

Fork-only files never reach the branch: the patch machinery (`tools/`, `patches/`), `setup.py`, `pyproject.toml`,
our `Makefile`, `.ci/`, `benchmarks/`, `examples/`, README/CONTRIBUTING, and the tests of the machinery (the
`FORK_ONLY` globs below, or any file whose first lines carry the `FORK_ONLY_MARKER` comment).

The clone is never left half-modified: the branch is built in a temporary `git worktree`, so the clone's checkout,
HEAD and index are never touched; on any failure the worktree and the new branch are removed. Running it again
while the branch exists is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))

import patchset as ps  # noqa: E402


ROOT = ps.ROOT
DEFAULT_BRANCH = "trained-precision"
UPSTREAM_PATCHES = "patches/upstream"
IDENTITY = ("trained_precision fork", "fork@localhost")
# Our new files that go into the pull request: (folder, commit subject, commit body).
NEW_FILE_GROUPS = (
    (
        "src/transformers",
        "Add transformers.trained_precision",
        "The package behind `PreTrainedConfig.trained_precision` (RFC #11209): the precision vocabulary, the risk\n"
        "rules, the registry of known checkpoints and the helpers the patched upstream files call.",
    ),
    (
        "utils",
        "Add the trained_precision repository check",
        "A repository-consistency check that keeps the registry of trained precisions and its docs in sync\n"
        "(`make check-repository-consistency`, `make fix-repo`).",
    ),
    ("tests", "Add tests for trained_precision", "Tests of the config field, the precision checks and the tooling."),
    ("docs/source/en", "docs: add the trained precision guide", "What `trained_precision` records and how to use it."),
)
# Files in those folders that only make sense in the fork (the patch machinery and its tests).
FORK_ONLY = (
    "tests/repo_utils/test_upstream_pr.py",
    "tests/repo_utils/test_patchset*.py",
    "tests/repo_utils/test_build*.py",
    "tests/repo_utils/test_wheel*.py",
    "tests/repo_utils/test_fork*.py",
    "tests/repo_utils/test_smoke*.py",
    "tests/fork/*",
    "utils/fork_*",
)
# A file whose first 2 kB contain this comment stays out of the pull request too.
FORK_ONLY_MARKER = "trained_precision-fork: fork-only"
# Commit-message trailers that describe the fork's patch bookkeeping; upstream does not need them.
FORK_TRAILERS = ("Notice:", "Forwarded:", "Upstream-only:", "Applied-Upstream:", "Last-Update:", "Origin:")
SKIP_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache"}
SKIP_SUFFIXES = (".pyc", ".pyo", ".orig", ".rej", ".swp", "~")
REBASE_STATE = "tp-rebase.json"


class PrError(ps.PatchsetError):
    """A failure of `pr` or `rebase`, with a message meant for the person running it."""


# ----------------------------------------------------------------------------------------------------------------
# git helpers


def _run(args: list[str], cwd: Path, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=full_env)
    if check and proc.returncode != 0:
        raise PrError(f"`git {' '.join(args)}` failed in {cwd}:\n{proc.stdout}{proc.stderr}".rstrip())
    return proc


def _fixed(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """git with the fixed committer and dates of patchset.py (deterministic commits in `fork/`)."""
    env = {
        "GIT_AUTHOR_DATE": ps.FIXED_DATE,
        "GIT_COMMITTER_DATE": ps.FIXED_DATE,
        "GIT_COMMITTER_NAME": "patchset",
        "GIT_COMMITTER_EMAIL": "patchset@localhost",
    }
    return _run(args, cwd, env=env, check=check)


def _identity_env(repo: Path) -> dict:
    """Commits are made as the clone's configured user, or as the fork's identity where none is configured."""
    env = {}
    name = _run(["config", "user.name"], repo, check=False).stdout.strip()
    email = _run(["config", "user.email"], repo, check=False).stdout.strip()
    if not name:
        env.update(GIT_AUTHOR_NAME=IDENTITY[0], GIT_COMMITTER_NAME=IDENTITY[0])
    if not email:
        env.update(GIT_AUTHOR_EMAIL=IDENTITY[1], GIT_COMMITTER_EMAIL=IDENTITY[1])
    return env


def _git_dir(repo: Path) -> Path:
    return Path(_run(["rev-parse", "--absolute-git-dir"], repo).stdout.strip())


# ----------------------------------------------------------------------------------------------------------------
# What goes into the pull request


def _is_fork_only(rel: str, path: Path) -> bool:
    if any(fnmatch.fnmatch(rel, pattern) for pattern in FORK_ONLY):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(2048)
    except OSError:
        return False
    return FORK_ONLY_MARKER.encode() in head


def new_files(root: Path = ROOT) -> dict[str, list[str]]:
    """Our files for the pull request, per folder of `NEW_FILE_GROUPS`: repo-relative paths, sorted."""
    groups: dict[str, list[str]] = {}
    for folder, _, _ in NEW_FILE_GROUPS:
        base = root / folder
        found = []
        if base.is_dir():
            for path in sorted(base.rglob("*")):
                rel = path.relative_to(root).as_posix()
                if path.is_dir() or SKIP_PARTS.intersection(path.parts) or rel.endswith(SKIP_SUFFIXES):
                    continue
                if _is_fork_only(rel, path):
                    continue
                found.append(rel)
        groups[folder] = found
    return groups


def src_patches(root: Path = ROOT) -> list[Path]:
    patches_dir = root / "patches"
    return [patches_dir / name for name in ps.check_series(patches_dir)]


def upstream_patches(root: Path = ROOT) -> list[Path]:
    """The upstream-only patches, in the order of `patches/upstream/series` (which must match the files)."""
    patches_dir = root / UPSTREAM_PATCHES
    if not patches_dir.is_dir():
        return []
    return [patches_dir / name for name in ps.check_series(patches_dir)]


def _strip_fork_trailers(data: bytes) -> bytes:
    """Drops the fork's bookkeeping trailers from a format-patch commit message (the diff is untouched)."""
    cut = data.find(b"\ndiff --git ")
    sep = data.find(b"\n---\n")
    if sep != -1 and (cut == -1 or sep < cut):
        cut = sep
    if cut == -1:
        return data
    head, rest = data[:cut], data[cut:]
    lines = [line for line in head.split(b"\n") if not line.startswith(tuple(t.encode() for t in FORK_TRAILERS))]
    while len(lines) > 1 and lines[-1] == b"":
        lines.pop()
    return b"\n".join(lines) + rest


# ----------------------------------------------------------------------------------------------------------------
# Explaining a patch that does not apply


@dataclasses.dataclass
class _Hunk:
    path: str
    number: int
    header: str
    old: list[str]


def _hunks(data: str) -> list[_Hunk]:
    """Hunks of a unified diff with their pre-image lines (enough to say which one does not match)."""
    result: list[_Hunk] = []
    path = None
    number = 0
    lines = data.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("+++ "):
            raw = line[4:].split("\t")[0].strip()
            path = raw[2:] if raw.startswith(("a/", "b/")) else raw
            number = 0
        elif line.startswith("@@") and path is not None:
            m = re.match(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", line)
            old_len = int(m.group(1) or 1) if m else 0
            new_len = int(m.group(2) or 1) if m else 0
            number += 1
            hunk = _Hunk(path, number, line.split(" @@")[0] + " @@", [])
            i += 1
            seen_old = seen_new = 0
            while i < len(lines) and (seen_old < old_len or seen_new < new_len):
                body = lines[i]
                if body.startswith("\\"):
                    i += 1
                    continue
                tag, text = body[:1], body[1:]
                if tag in (" ", ""):
                    hunk.old.append(text)
                    seen_old += 1
                    seen_new += 1
                elif tag == "-":
                    hunk.old.append(text)
                    seen_old += 1
                elif tag == "+":
                    seen_new += 1
                i += 1
            result.append(hunk)
            continue
        i += 1
    return result


def _explain_failure(patch: Path, tree: Path, git_output: str) -> str:
    """Names the file and hunk of `patch` whose context is missing from `tree` (the worktree at that point)."""
    text = patch.read_bytes().decode("utf-8", errors="replace")
    for hunk in _hunks(text):
        target = tree / hunk.path
        if not target.is_file():
            return f"{patch.name}: {hunk.path} does not exist in the clone"
        content = target.read_bytes().decode("utf-8", errors="replace").split("\n")
        width = len(hunk.old)
        if width and not any(content[k : k + width] == hunk.old for k in range(len(content) - width + 1)):
            return (
                f"{patch.name}: hunk #{hunk.number} {hunk.header} of {hunk.path} does not match the clone "
                f"(its context lines are not in the file)"
            )
    lines = [line for line in git_output.splitlines() if line.startswith(("error:", "Patch failed", "fatal:"))]
    return f"{patch.name}: git am refused it: " + ("; ".join(lines) or git_output.strip())


# ----------------------------------------------------------------------------------------------------------------
# make pr


@dataclasses.dataclass
class PrResult:
    branch: str
    base: str
    commits: list[str]
    files: list[str]


def _apply_mail(worktree: Path, patch: Path, env: dict, tmp: Path) -> None:
    cleaned = tmp / patch.name
    cleaned.write_bytes(_strip_fork_trailers(patch.read_bytes()))
    proc = _run(["am", "-q", "--keep-cr", "--whitespace=nowarn", str(cleaned)], worktree, env=env, check=False)
    if proc.returncode != 0:
        reason = _explain_failure(patch, worktree, proc.stdout + proc.stderr)
        _run(["am", "--abort"], worktree, env=env, check=False)
        raise PrError(reason)


def make_pr(
    clone: Path, base: str | None = None, branch: str = DEFAULT_BRANCH, root: Path = ROOT, log=print
) -> PrResult:
    """Creates `branch` in `clone` from `base` with our change as upstream commits. See the module docstring."""
    clone = clone.resolve()
    root = root.resolve()
    base = base or f"v{ps.read_config(root).upstream_version}"
    if not clone.is_dir():
        raise PrError(f"{clone} does not exist: pass UPSTREAM=/path/to/a/clone/of/huggingface/transformers")
    top = _run(["rev-parse", "--show-toplevel"], clone, check=False)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != clone:
        raise PrError(f"{clone} is not the top of a git checkout (clone huggingface/transformers there)")
    if root == clone or root in clone.parents:
        raise PrError(f"{clone} is inside this repository; use a separate clone of huggingface/transformers")
    if _run(["check-ref-format", "--branch", branch], clone, check=False).returncode != 0:
        raise PrError(f"{branch!r} is not a valid branch name")
    if _run(["rev-parse", "--verify", "-q", f"refs/heads/{branch}"], clone, check=False).returncode == 0:
        raise PrError(
            f"branch {branch!r} already exists in {clone}: `make pr` was already run there. Push that branch, or "
            f"delete it (`git -C {clone} branch -D {branch}`) to build it again, or pass BRANCH=another-name."
        )
    resolved = _run(["rev-parse", "--verify", "-q", f"{base}^{{commit}}"], clone, check=False)
    if resolved.returncode != 0:
        raise PrError(
            f"{base!r} is not a commit in {clone}: fetch upstream's tags (`git -C {clone} fetch --tags "
            "https://github.com/huggingface/transformers`) or pass BASE=<tag or commit>"
        )
    base_sha = resolved.stdout.strip()

    # Everything that can be checked before touching the clone is checked here.
    series = src_patches(root)
    extra = upstream_patches(root)
    groups = new_files(root)
    clashes = []
    for files in groups.values():
        for rel in files:
            if _run(["cat-file", "-e", f"{base_sha}:{rel}"], clone, check=False).returncode == 0:
                theirs = subprocess.run(
                    ["git", "show", f"{base_sha}:{rel}"], cwd=clone, capture_output=True, check=True
                ).stdout
                if theirs != (root / rel).read_bytes():
                    clashes.append(rel)
    if clashes:
        raise PrError(
            "these files of ours already exist in the clone at " + base + " with other content (rename ours, or "
            "change theirs with a patch): " + ", ".join(clashes)
        )

    env = _identity_env(clone)
    tmp = Path(tempfile.mkdtemp(prefix="upstream-pr-"))
    worktree = tmp / "worktree"
    created = False
    try:
        _run(["worktree", "add", "-q", "-b", branch, str(worktree), base_sha], clone, env=env)
        created = True
        for patch in series:
            _apply_mail(worktree, patch, env, tmp)
            log(f"upstream-pr: applied {patch.relative_to(root)}")
        for folder, subject, body in NEW_FILE_GROUPS:
            files = [rel for rel in groups[folder] if not (worktree / rel).exists()]
            if not files:
                continue
            for rel in files:
                out = worktree / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / rel, out)
            _run(["add", "-f", "--", *files], worktree, env=env)
            listing = "\n".join(f"  {rel}" for rel in files)
            if folder == "utils" and len(files) == 1:
                subject = f"Add {files[0]}"
            _run(
                ["commit", "-q", "--no-verify", "-m", f"{subject}\n\n{body}\n\nNew files:\n{listing}\n"],
                worktree,
                env=env,
            )
            log(f"upstream-pr: committed {len(files)} new files under {folder}/")
        for patch in extra:
            _apply_mail(worktree, patch, env, tmp)
            log(f"upstream-pr: applied {patch.relative_to(root)}")
        status = _run(["status", "--porcelain"], worktree).stdout
        if status.strip():
            raise PrError(f"unexpected changes left in the worktree:\n{status}")
        commits = _run(["log", "--reverse", "--format=%s", f"{base_sha}..HEAD"], worktree).stdout.splitlines()
        files = _run(["diff", "--name-only", base_sha, "HEAD"], worktree).stdout.splitlines()
    except BaseException:
        if created:
            _run(["worktree", "remove", "--force", str(worktree)], clone, check=False)
            _run(["worktree", "prune"], clone, check=False)
            _run(["branch", "-D", branch], clone, check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _run(["worktree", "remove", "--force", str(worktree)], clone, check=False)
    _run(["worktree", "prune"], clone, check=False)
    shutil.rmtree(tmp, ignore_errors=True)
    return PrResult(branch=branch, base=base, commits=commits, files=files)


# ----------------------------------------------------------------------------------------------------------------
# make rebase


def _series_header(patches_dir: Path) -> str:
    header = [line for line in (patches_dir / "series").read_text().splitlines() if line.startswith("#")]
    return "\n".join(header) + "\n" if header else ""


def _export(fork: Path, version: str, dest: Path) -> list[Path]:
    """`git format-patch` of the commits on top of `upstream/<version>`, written into `dest` (same flags as export)."""
    _run(
        ["format-patch", "-q", "--zero-commit", "--no-signature", "--no-numbered", "--full-index", "--no-stat",
         "-o", str(dest), f"upstream/{version}..HEAD"],
        fork,
    )  # fmt: skip
    return sorted(dest.glob("*.patch"))


def build_fork(fork: Path, root: Path, upstream: ps.Upstream, version: str) -> None:
    """`fork/` as `make fork` makes it (upstream commit, tag, one commit per patch, our files linked in), for `root`."""
    try:
        ps.make_fork(fork, version, upstream, root)
    except ps.PatchsetError as e:
        raise PrError(str(e)) from None


def _fork_matches_patches(fork: Path, version: str, root: Path) -> list[str]:
    """Differences between the commits in `fork/` and `patches/` (empty when they are the same series)."""
    names = ps.check_series(root / "patches")
    with tempfile.TemporaryDirectory() as tmp:
        produced = _export(fork, version, Path(tmp))
        ours = [p.name for p in produced]
        if ours != names:
            return [f"fork/ has {ours}, patches/series has {names}"]
        return [p.name for p in produced if p.read_bytes() != (root / "patches" / p.name).read_bytes()]


def _import_upstream(fork: Path, upstream: ps.Upstream, old: str, new: str) -> None:
    """Commits upstream `new` on top of `upstream/<old>` without touching fork's checkout; tags it `upstream/<new>`."""
    with tempfile.TemporaryDirectory() as tmp:
        tree_dir = Path(tmp) / "tree"
        ps.write_upstream_tree(tree_dir, upstream)
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        ps._git(["--work-tree", str(tree_dir), "add", "-A", "."], fork, env=env)
        tree = ps._git(["write-tree"], fork, env=env, capture_output=True).stdout.strip()
    commit = ps._git(
        ["-c", "user.name=patchset", "-c", "user.email=patchset@localhost", "commit-tree", tree, "-p",
         f"upstream/{old}", "-m", f"Upstream {ps.PACKAGE} {new}"],
        fork,
        env={"GIT_AUTHOR_NAME": "patchset", "GIT_AUTHOR_EMAIL": "patchset@localhost"},
        capture_output=True,
    ).stdout.strip()  # fmt: skip
    ps._git(["tag", f"upstream/{new}", commit], fork)


def _rebase_in_progress(fork: Path) -> bool:
    git_dir = _git_dir(fork)
    return (git_dir / "rebase-merge").exists() or (git_dir / "rebase-apply").exists()


def _bump_pin(pyproject: Path, old: str, new: str) -> str:
    text = pyproject.read_text()
    pattern = re.compile(rf'(["\']{ps.PACKAGE}\s*==\s*){re.escape(old)}(["\'])')
    start = text.find("[build-system]")
    end = text.find("\n[", start + 1)
    section = text[start : end if end != -1 else len(text)]
    new_section, count = pattern.subn(rf"\g<1>{new}\g<2>", section)
    if start == -1 or count != 1:
        raise PrError(f"{pyproject}: expected one `{ps.PACKAGE}=={old}` in [build-system].requires")
    return text[:start] + new_section + text[start + len(section) :]


def _write_atomic(path: Path, data: str | bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)


def rebase(
    version: str,
    root: Path = ROOT,
    fork: Path | None = None,
    upstream_wheel: Path | None = None,
    old_upstream_wheel: Path | None = None,
    log=print,
) -> list[str]:
    """Moves the fork to upstream `version`: rebase `fork/`, export `patches/`, bump the pin. Returns the series.

    `upstream_wheel` / `old_upstream_wheel` inject the upstream sources (tests); by default both wheels are taken
    from `.cache/` and downloaded there with pip when missing.
    """
    root = root.resolve()
    fork = (fork or root / "fork").resolve()
    if not re.fullmatch(r"\d+\.\d+\.\d+([.\-+]?[0-9A-Za-z.]+)?", version):
        raise PrError(f"VERSION={version!r} is not an upstream release like 5.24.0")
    config = ps.read_config(root)
    old = config.upstream_version
    state_path = None
    if (fork / ".git").exists():
        state_path = _git_dir(fork) / REBASE_STATE
    state = json.loads(state_path.read_text()) if state_path and state_path.exists() else None
    resuming = state is not None and state.get("new") == version and state.get("old") == old
    if version == old and not resuming:
        raise PrError(f"{ps.PACKAGE} {version} is already the pinned upstream (pyproject.toml)")

    new_upstream = ps.upstream_from_wheel(upstream_wheel or ps.cached_upstream_wheel(version), version)
    if resuming:
        if _rebase_in_progress(fork):
            raise PrError(
                f"the rebase in {fork} is not finished: resolve the conflicts there, `git add` the files, "
                f"`git rebase --continue`, then run `make rebase VERSION={version}` again"
            )
        log(f"upstream-pr: resuming the rebase onto {ps.PACKAGE} {version}")
    else:
        if fork.exists():
            if not (fork / ".git").exists():
                raise PrError(f"{fork} exists but is not a git checkout; move it away and run this again")
            if _run(["status", "--porcelain", "--untracked-files=no"], fork).stdout.strip():
                raise PrError(f"{fork} has uncommitted changes: commit them (one commit per patch) first")
            if _rebase_in_progress(fork):
                raise PrError(f"{fork} is in the middle of a rebase: finish or abort it first")
            if _run(["rev-parse", "--verify", "-q", f"upstream/{old}"], fork, check=False).returncode != 0:
                raise PrError(f"{fork} has no tag upstream/{old}: it was not made from the pinned upstream")
            differs = _fork_matches_patches(fork, old, root)
            if differs:
                raise PrError(
                    f"{fork} and patches/ hold different series ({', '.join(differs)}). If fork/ holds newer work, "
                    "`make export` first; if patches/ is newer, remove fork/ (it is rebuilt from patches/)."
                )
        else:
            old_upstream = ps.upstream_from_wheel(old_upstream_wheel or ps.cached_upstream_wheel(old), old)
            build_fork(fork, root, old_upstream, old)
            log(f"upstream-pr: built {fork} from patches/ on {ps.PACKAGE} {old}")
        branch = _run(["symbolic-ref", "-q", "--short", "HEAD"], fork, check=False).stdout.strip()
        if not branch:
            raise PrError(f"{fork} is not on a branch (detached HEAD): check out its `patches` branch first")
        if _run(["rev-parse", "--verify", "-q", f"upstream/{version}"], fork, check=False).returncode == 0:
            raise PrError(f"{fork} already has a tag upstream/{version}; delete it (`git tag -d`) to import again")
        names = ps.check_series(root / "patches")
        _import_upstream(fork, new_upstream, old, version)
        state = {"old": old, "new": version, "patches": names}
        state_path = _git_dir(fork) / REBASE_STATE
        state_path.write_text(json.dumps(state, indent=2) + "\n")
        proc = _fixed(["rebase", "-q", "--onto", f"upstream/{version}", f"upstream/{old}", branch], fork, check=False)
        if proc.returncode != 0:
            raise PrError(_conflict_message(fork, state, version, old, proc.stdout + proc.stderr))
    # The rebase is done: export, check exactly against the new upstream, then write patches/ and the pin.
    with tempfile.TemporaryDirectory() as tmp:
        produced = _export(fork, version, Path(tmp))
        names = [p.name for p in produced]
        ps.patched_files(new_upstream, names, Path(tmp), root / "src")
        shadows = sorted(p for p in ps.overlay_files(root / "src") if p in new_upstream.files)
        if shadows:
            raise PrError(f"{ps.PACKAGE} {version} now has files that ours would shadow: {', '.join(shadows)}")
        pyproject = _bump_pin(root / "pyproject.toml", old, version) if old != version else None
        patches_dir = root / "patches"
        header = _series_header(patches_dir)
        for stale in patches_dir.glob("*.patch"):
            if stale.name not in names:
                stale.unlink()
        for path in produced:
            _write_atomic(patches_dir / path.name, path.read_bytes())
    _write_atomic(patches_dir / "series", header + "".join(f"{n}\n" for n in names))
    if pyproject is not None:
        _write_atomic(root / "pyproject.toml", pyproject)
    if state_path is not None and state_path.exists():
        state_path.unlink()
    log(f"upstream-pr: {len(names)} patches rebased onto {ps.PACKAGE} {version}; pin bumped in pyproject.toml")
    return names


def _conflict_message(fork: Path, state: dict, version: str, old: str, output: str) -> str:
    subject = _run(["log", "-1", "--format=%s", "REBASE_HEAD"], fork, check=False).stdout.strip()
    done = _git_dir(fork) / "rebase-merge" / "done"
    patch = None
    if done.exists():
        steps = [line for line in done.read_text().splitlines() if line.strip() and not line.startswith("#")]
        if 0 < len(steps) <= len(state["patches"]):
            patch = state["patches"][len(steps) - 1]
    conflicted = _run(["diff", "--name-only", "--diff-filter=U"], fork, check=False).stdout.split()
    what = f"patches/{patch}" if patch else f"the commit {subject!r}"
    return (
        f"the rebase onto {ps.PACKAGE} {version} stopped at {what} ({subject!r}): it conflicts with upstream in "
        f"{', '.join(conflicted) or 'the files git names below'}.\n"
        "Nothing in the repository was changed yet (pin and patches/ are as before). To go on:\n"
        f"  cd {fork}\n"
        "  # edit the conflicted files (keep upstream's new code, re-apply our change), then\n"
        f"  git add {' '.join(conflicted) or '<files>'} && git rebase --continue\n"
        f"  # or, if upstream {version} already contains this change: git rebase --skip (the patch is retired)\n"
        f"  cd - && make rebase VERSION={version}   # resumes: exports patches/ and bumps the pin\n"
        f"To give up: git -C {fork} rebase --abort && git -C {fork} tag -d upstream/{version}, and remove "
        f"{fork / '.git' / REBASE_STATE}.\n"
        f"git said:\n{output.strip()}"
    )


def check(root: Path = ROOT) -> str:
    """Validates what `make pr` would use without a clone: both series match their files, every patch parses."""
    series = src_patches(root)
    extra = upstream_patches(root)
    for patch in extra:
        if not _hunks(patch.read_bytes().decode("utf-8", errors="replace")):
            raise PrError(f"{patch.relative_to(root)} holds no hunks")
    groups = new_files(root)
    count = sum(len(files) for files in groups.values())
    return (
        f"upstream-pr: {len(series)} patches, {count} new files and {len(extra)} upstream-only patches "
        f"({UPSTREAM_PATCHES}/series) would make the pull request"
    )


# ----------------------------------------------------------------------------------------------------------------
# CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    pr = sub.add_parser("pr", help="create the upstream pull request branch in a transformers clone")
    pr.add_argument("--upstream", type=Path, required=True, help="a clone of huggingface/transformers")
    pr.add_argument("--base", default=None, help="tag or commit to build on (default: v<pinned version>)")
    pr.add_argument("--branch", default=DEFAULT_BRANCH)
    sub.add_parser("check", help="validate patches/upstream/series and list what the pull request would hold")
    rb = sub.add_parser("rebase", help="move fork/ and patches/ to a new upstream release and bump the pin")
    rb.add_argument("version")
    rb.add_argument("--fork", type=Path, default=None)
    rb.add_argument("--upstream-wheel", type=Path, default=None, help="the new release's wheel (default: download)")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            print(check())
        elif args.command == "pr":
            result = make_pr(args.upstream, args.base, args.branch)
            print(f"upstream-pr: branch {result.branch!r} in {args.upstream.resolve()} on {result.base}:")
            for subject in result.commits:
                print(f"  {subject}")
            print(
                f"upstream-pr: {len(result.files)} files changed. Review with `git -C {args.upstream} log -p "
                f"{result.base}..{result.branch}`, then push it to your fork of transformers and open the PR."
            )
        else:
            rebase(args.version, fork=args.fork, upstream_wheel=args.upstream_wheel)
            print("upstream-pr: next, `make check` and `make test`, then commit pyproject.toml and patches/")
    except ps.PatchsetError as e:
        print(f"upstream-pr: error: {e}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        print(f"upstream-pr: error: {e}\n{e.stdout or ''}{e.stderr or ''}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
