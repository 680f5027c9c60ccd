#!/usr/bin/env python3
# Copyright 2026 The trained_precision fork authors. Licensed under the Apache License, Version 2.0.
"""
Turn the fork into upstream pull requests, and move the fork to a new upstream release.

    pr       create a STACK of branches in a clone of huggingface/transformers, each based on the one before and each
             a reviewable pull request (`make pr UPSTREAM=/path/to/clone [BASE=v5.25.0] [BRANCH=prefix] [STRICT=1]`)
    check    validate the stack table against the patches and files, print the planned stack with line counts, and fail
             on a stack that breaks the review rules (budgets, tests-only PRs, links and config reads of later PRs,
             region markers: the stack is cut by files and patches only)
    describe write each pull request's description (`<branch>.md`) from the table, without a clone
    lint     run ruff with upstream's own configuration (from the pinned sdist) on everything that goes upstream
    test-stack  on each branch alone (`make pr-test UPSTREAM=...`): star-import the package, run ruff with upstream's
             configuration on the files the branch changes, and run the tests it adds, so a PR that needs a later
             one fails
    rebase   rebuild `fork/` on a new upstream release, rebase our commits onto it, export `patches/`, bump the pin
             and its sha256 pins in pyproject.toml (`make rebase VERSION=x.y.z`)

What goes into which pull request is data, not code: `tools/pr_stack.toml` maps `patches/series` entries, our files
(globs) and the rule-based upstream edits (`tools/upstream_edits.py`) to stack entries. Each branch holds, in order:
one commit per patch of its entry (`git am`, in series order, fork-only trailers dropped, authored by you), one
commit with the entry's new files (each file wholly in one entry, as it is in the tree), one commit per upstream edit.

Only files git tracks are used: `make pr` refuses a repository with uncommitted changes and names the untracked
files it leaves out. Fork-only files (tools/, patches/, setup.py, pyproject.toml, the Makefile, .ci/, benchmarks/,
examples/, README/CONTRIBUTING) are never candidates; fork-only files under the upstream folders are listed in
the table's `fork-only`, or carry the `FORK_ONLY_MARKER` comment in their first lines.

The clone is never left half-modified: the branches are built in a temporary `git worktree`, so the clone's
checkout, HEAD and index are never touched; on any failure the worktree and every new branch are removed. Running it
again while one of the branches exists is refused.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import fnmatch
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))

import patchset as ps  # noqa: E402
import upstream_edits  # noqa: E402


ROOT = ps.ROOT
STACK_TABLE = "tools/pr_stack.toml"
# Our files that may go upstream live under these folders (upstream's layout); everything else is fork-only.
PR_FOLDERS = ("src/transformers/", "utils/", "tests/", "docs/source/en/")
PACKAGE_DIR = "src/transformers/trained_precision/"
# Folders whose modules of ours can import each other across PRs: the field's package, and our training glue beside
# upstream's integrations. A module is named `<folder>.<module>` (`trained_precision.facts.registry`, `integrations.optimi`).
MODULE_DIRS = (PACKAGE_DIR, "src/transformers/integrations/")
# A file whose first 2 kB contain this comment stays out of the pull request too.
FORK_ONLY_MARKER = "trained_precision-fork: fork-only"
# Commit-message trailers that describe the fork's patch bookkeeping; upstream does not need them.
FORK_TRAILERS = ("Notice:", "Forwarded:", "Upstream-only:", "Applied-Upstream:", "Last-Update:", "Origin:")
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


def user_identity(repo: Path) -> dict:
    """The pull request's commits are yours: author and committer from git's configuration as seen from `repo`
    (the clone's config, then your global one). Refused when none is configured."""
    name = _run(["config", "user.name"], repo, check=False).stdout.strip()
    email = _run(["config", "user.email"], repo, check=False).stdout.strip()
    if not name or not email:
        raise PrError(
            "the pull request's commits are authored by you, but git has no user.name/user.email here: run "
            "`git config --global user.name 'Your Name'` and `git config --global user.email you@example.com` "
            f"(or set them in {repo})"
        )
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def _git_dir(repo: Path) -> Path:
    return Path(_run(["rev-parse", "--absolute-git-dir"], repo).stdout.strip())


# ----------------------------------------------------------------------------------------------------------------
# The stack table


@dataclasses.dataclass
class EntrySpec:
    name: str
    title: str
    body: str
    max_lines: int | None
    patches: list[str]
    files: list[str]
    edits: list[str]
    feature_off: str = ""
    numbers: str = ""
    review_first: str = ""


#: No entry's budget may exceed this (a table may set a lower `max-lines-ceiling`, never a higher one).
MAX_LINES_CEILING = 2000
#: The RFC itself (`rfc-core`) fits in this many entries. By default (and at most: a table may lower them, never raise
#: them) the core's entries add up to `rfc-core-max-lines` changed lines, and the first of them to
#: `rfc-core-first-max-lines`.
RFC_CORE_MAX_ENTRIES = 5
RFC_CORE_MAX_LINES = 1000
RFC_FIRST_MAX_LINES = 250
ENTRY_KEYS = {
    "name",
    "title",
    "body",
    "max-lines",
    "patches",
    "files",
    "edits",
    "feature-off",
    "numbers",
    "review-first",
}
TABLE_KEYS = {
    "branch-prefix",
    "fork-only",
    "pr",
    "max-lines-ceiling",
    "rfc-core",
    "rfc-core-max-lines",
    "rfc-core-first-max-lines",
    "rfc-thread",
}


@dataclasses.dataclass
class Table:
    prefix: str
    fork_only: list[str]
    entries: list[EntrySpec]
    ceiling: int = MAX_LINES_CEILING
    rfc_core: list[str] = dataclasses.field(default_factory=list)
    rfc_thread: str = ""
    rfc_core_max_lines: int = RFC_CORE_MAX_LINES
    rfc_first_max_lines: int = RFC_FIRST_MAX_LINES


def _entry_spec(i: int, raw: dict) -> EntrySpec:
    """The `i`-th `[[pr]]` of the table, checked: its keys, its name, the edits it names."""
    unknown = set(raw) - ENTRY_KEYS
    if unknown or "name" not in raw or "title" not in raw:
        raise PrError(
            f"{STACK_TABLE}: [[pr]] #{i} needs `name` and `title`; unknown keys: {', '.join(sorted(unknown)) or '-'}"
        )
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", raw["name"]):
        raise PrError(f"{STACK_TABLE}: [[pr]] name {raw['name']!r} must be lowercase letters, digits and '-'")
    for edit in raw.get("edits", []):
        if edit not in upstream_edits.EDITS:
            raise PrError(
                f"{STACK_TABLE}: [[pr]] {raw['name']!r} names the unknown edit {edit!r}; the edits of "
                f"tools/upstream_edits.py are: {', '.join(upstream_edits.EDITS)}"
            )
    return EntrySpec(
        name=raw["name"],
        title=raw["title"],
        body=raw.get("body", "").strip(),
        max_lines=raw.get("max-lines"),
        patches=list(raw.get("patches", [])),
        files=list(raw.get("files", [])),
        edits=list(raw.get("edits", [])),
        feature_off=raw.get("feature-off", "").strip(),
        numbers=raw.get("numbers", "").strip(),
        review_first=raw.get("review-first", "").strip(),
    )


def _line_budget(data: dict, key: str, default: int, what: str) -> int:
    """A budget key of the table: a positive number of changed lines, at most `default` (a table may lower a budget,
    never raise it: the rules have no waiver)."""
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= default:
        raise PrError(f"{STACK_TABLE}: {key} = {value!r}: {what} is at most {default} changed lines")
    return value


def load_table(root: Path = ROOT) -> Table:
    path = root / STACK_TABLE
    if not path.is_file():
        raise PrError(f"{STACK_TABLE} is missing: it says which pull request of the stack holds each change")
    data = ps._load_toml(path)
    unknown_top = set(data) - TABLE_KEYS
    if unknown_top:
        raise PrError(f"{STACK_TABLE}: unknown top-level keys: {', '.join(sorted(unknown_top))}")
    entries = [_entry_spec(i, raw) for i, raw in enumerate(data.get("pr", []), 1)]
    if not entries:
        raise PrError(f"{STACK_TABLE} has no [[pr]] entries")
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise PrError(f"{STACK_TABLE}: entry names must be unique: {names}")
    edits = [edit for e in entries for edit in e.edits]
    if len(set(edits)) != len(edits):
        raise PrError(
            f"{STACK_TABLE}: an edit is listed in two entries: {sorted({x for x in edits if edits.count(x) > 1})}"
        )
    core = list(data.get("rfc-core", []))
    missing = [name for name in core if name not in names]
    if missing:
        raise PrError(f"{STACK_TABLE}: rfc-core names entries that do not exist: {', '.join(missing)}")
    return Table(
        prefix=data.get("branch-prefix", "trained-precision"),
        fork_only=list(data.get("fork-only", [])),
        entries=entries,
        ceiling=_line_budget(data, "max-lines-ceiling", MAX_LINES_CEILING, "a PR's budget"),
        rfc_core=core,
        rfc_thread=data.get("rfc-thread", "").strip(),
        rfc_core_max_lines=_line_budget(data, "rfc-core-max-lines", RFC_CORE_MAX_LINES, "the RFC core's budget"),
        rfc_first_max_lines=_line_budget(
            data, "rfc-core-first-max-lines", RFC_FIRST_MAX_LINES, "the RFC's first pull request's budget"
        ),
    )


def _patch_key(name: str) -> str:
    """A patch's name without its series number: `0005-modeling_utils-x.patch` -> `modeling_utils-x.patch`."""
    return re.sub(r"^\d{4}-", "", name)


def _match(name: str, patterns: list[str]) -> list[str]:
    return [p for p in patterns if fnmatch.fnmatchcase(name, p)]


# ----------------------------------------------------------------------------------------------------------------
# No region markers: the stack is cut by files and patches only

#: The string of the retired region markers (`# upstream-pr: <entry>`, issue 38). Each upstream-bound file belongs
#: wholly to one entry and each branch holds it as it is in the tree; a later entry changes what an upstream call site
#: calls through a later patch in patches/series, never by editing an earlier entry's file in place.
RETIRED_MARKER = re.compile(r"upstream-pr:", re.I)


def _marker_errors(entries: list[Entry], root: Path) -> list[str]:
    """Every line of an upstream-bound file (or an added line of a patch) that says `upstream-pr:`, as file:line."""
    found = []
    for entry in entries:
        for rel in entry.files:
            for n, line in enumerate(_text(root, rel).splitlines(), 1):
                if RETIRED_MARKER.search(line):
                    found.append(f"{rel}:{n}")
        for patch in entry.patches:
            in_diff = False
            for n, line in enumerate(patch.read_bytes().decode("utf-8", "replace").splitlines(), 1):
                in_diff = in_diff or line.startswith("diff --git ")
                if in_diff and line.startswith("+") and not line.startswith("+++") and RETIRED_MARKER.search(line):
                    found.append(f"patches/{patch.name}:{n}")
    return [
        f"{where}: says `upstream-pr:`, a region marker: the stack is cut by files and patches only (a later "
        "entry changes an earlier one's code through a later patch in patches/series); remove the marker"
        for where in found
    ]


# ----------------------------------------------------------------------------------------------------------------
# What goes upstream


def _has_marker(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return FORK_ONLY_MARKER.encode() in f.read(2048)
    except OSError:
        return False


def pr_candidates(root: Path, table: Table) -> list[str]:
    """Our tracked files under upstream's folders, less the fork-only ones: what the stack must place."""
    found = []
    for rel in ps.tracked_files(root):
        if not rel.startswith(PR_FOLDERS) or _match(rel, table.fork_only) or _has_marker(root / rel):
            continue
        found.append(rel)
    return found


def untracked_left_out(root: Path) -> list[str]:
    """Untracked, not ignored files under upstream's folders: never part of a pull request, said so."""
    out = _run(["ls-files", "--others", "--exclude-standard", "--", *PR_FOLDERS], root, check=False).stdout
    return sorted(line for line in out.splitlines() if line)


def dirty_files(root: Path) -> list[str]:
    """Tracked files with uncommitted changes (staged or not)."""
    out = _run(["status", "--porcelain", "--untracked-files=no"], root, check=False).stdout
    return [line[3:] for line in out.splitlines() if line.strip()]


def src_patches(root: Path = ROOT) -> list[Path]:
    patches_dir = root / "patches"
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


def _patch_lines(path: Path) -> tuple[int, int]:
    added = removed = 0
    in_diff = False
    for line in path.read_bytes().split(b"\n"):
        if line.startswith(b"diff --git "):
            in_diff = True
        elif in_diff and line.startswith(b"+") and not line.startswith(b"+++ "):
            added += 1
        elif in_diff and line.startswith(b"-") and not line.startswith(b"--- "):
            removed += 1
    return added, removed


def _is_binary(path: Path) -> bool:
    with open(path, "rb") as f:
        return b"\0" in f.read(8192)


def _text(root: Path, rel: str) -> str:
    """A file of ours as every branch from its entry's on holds it."""
    return (root / rel).read_bytes().decode("utf-8", errors="replace")


@dataclasses.dataclass
class Entry:
    number: int
    spec: EntrySpec
    patches: list[Path]
    files: list[str]
    branch: str = ""

    _file_lines: list[int] = dataclasses.field(default_factory=list)

    @property
    def estimated_lines(self) -> int:
        """Added + removed lines the entry's PR will show, before building it (each edit counts its `lines`)."""
        total = sum(sum(_patch_lines(p)) for p in self.patches)
        edits = sum(upstream_edits.EDITS[n].lines if n in upstream_edits.EDITS else 1 for n in self.spec.edits)
        return total + sum(self._file_lines) + edits

    @property
    def is_empty(self) -> bool:
        return not (self.patches or self.files or self.spec.edits)


@dataclasses.dataclass
class Plan:
    table: Table
    entries: list[Entry]
    warnings: list[str]  # the stack builds, but a reviewer would object (imports, untested modules, words)
    notes: list[str]  # informational (stale globs, empty entries, links that cannot be checked here)
    errors: list[str] = dataclasses.field(default_factory=list)  # the stack breaks the rules: `check` and `pr` fail


def _module_of(rel: str) -> str | None:
    """`src/transformers/trained_precision/facts/registry.py` -> `trained_precision.facts.registry`; a sub-package's file ->
    its dotted path (`trained_precision.facts.registry`), its `__init__.py` -> the sub-package;
    `src/transformers/integrations/optimi.py` -> `integrations.optimi`."""
    for prefix in MODULE_DIRS:
        if rel.startswith(prefix) and rel.endswith(".py"):
            parts = rel[len(prefix) : -3].split("/")
            if parts == ["__init__"]:
                return None
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            return ".".join([prefix.rstrip("/").rsplit("/", 1)[1], *parts])
    return None


def _ours(parts: list[str], modules: set[str]) -> str | None:
    """The longest module of ours that the dotted path `parts` (after `transformers`) names or lies in."""
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


@functools.lru_cache(maxsize=128)
def _parse(source: str) -> ast.Module:
    """`ast.parse(source)`, kept by content: `plan_stack` reads each file's tree up to five times, and runs again on the
    same files (`make pr`, `test_stack`, `check`, the tests). Callers only read the tree."""
    return ast.parse(source)


def _imported_modules(source: str, rel: str, modules: set[str]) -> set[str]:
    """Modules of ours (see `_module_of`) that `source` imports (top level or inside functions)."""
    try:
        tree = _parse(source)
    except SyntaxError:
        return set()
    # the package `rel` belongs to, as `["transformers", "integrations"]`, for relative imports
    package = rel.removeprefix("src/").split("/")[:-1] if rel.startswith("src/transformers/") else None
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if package is None or node.level > len(package):
                    continue
                base = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            else:
                base = (node.module or "").split(".")
            # `from transformers.trained_precision.facts import registry` names the module in its aliases
            targets = [base + [alias.name] for alias in node.names]
            if node.module:
                targets.append(base)
            for parts in targets:
                if len(parts) > 2 and parts[0] == "transformers":
                    found.add(_ours(parts[1:], modules))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if len(parts) > 2 and parts[0] == "transformers":
                    found.add(_ours(parts[1:], modules))
    return found & modules


_PATCH_IMPORT = re.compile(rb"^\+.*\b(trained_precision|integrations)(?:\.|\s+import\s+)([\w.]+)", re.M)


def _place_all(root: Path, table: Table, entries: list[Entry]) -> list[str]:
    """Places every patch and upstream-bound file in the one entry whose globs match it; raises PrError naming what
    is unassigned, assigned twice, or cannot go upstream (binary). Returns notes on the globs that match nothing."""
    errors: list[str] = []
    used: set[tuple[int, str, str]] = set()

    def place(item: str, key: str, kind: str) -> Entry | None:
        hits = []
        for entry in entries:
            found = _match(key, entry.spec.patches if kind == "patches" else entry.spec.files)
            used.update((entry.number, kind, p) for p in found)
            if found:
                hits.append(entry)
        if not hits:
            errors.append(f"{item} is in no entry of {STACK_TABLE}: add it to one `{kind}` list (or to fork-only)")
            return None
        if len(hits) > 1:
            errors.append(f"{item} matches several entries of {STACK_TABLE}: {', '.join(e.spec.name for e in hits)}")
            return None
        return hits[0]

    for patch in src_patches(root):
        entry = place(f"patches/{patch.name}", _patch_key(patch.name), "patches")
        if entry is not None:
            entry.patches.append(patch)
    for rel in pr_candidates(root, table):
        if _is_binary(root / rel):
            errors.append(
                f"{rel} is a binary file: upstream keeps binaries out of its repository; add it to fork-only"
            )
            continue
        entry = place(rel, rel, "files")
        if entry is not None:
            entry.files.append(rel)
    if errors:
        raise PrError("the stack table does not place every change:\n  " + "\n  ".join(errors))
    return [
        f"{STACK_TABLE}: {entry.spec.name}: {kind} glob {p!r} matches nothing"
        for entry in entries
        for kind in ("patches", "files")
        for p in getattr(entry.spec, kind)
        if (entry.number, kind, p) not in used
    ]


def plan_stack(root: Path = ROOT) -> Plan:
    """Reads the stack table and places every patch and upstream-bound file (each file wholly in one entry, as it is
    in the tree); raises PrError naming what is unassigned, assigned twice, or cannot go upstream (binary). The plan
    lists what breaks the review rules (errors) and what a reviewer would object to (warnings)."""
    table = load_table(root)
    entries = [Entry(i, spec, [], []) for i, spec in enumerate(table.entries, 1)]
    for entry in entries:
        entry.branch = f"{table.prefix}-{entry.number}-{entry.spec.name}"
    notes = _place_all(root, table, entries)
    for entry in entries:
        entry._file_lines = [len((root / rel).read_bytes().splitlines()) for rel in entry.files]
    errors = _marker_errors(entries, root)
    errors += _budget_errors(table, entries)
    errors += _shape_errors(table, entries)
    warnings = _import_warnings(root, entries) + _fork_words(root, entries) + _untested_modules(root, entries)
    link_errors, link_notes = _doc_link_problems(root, entries)
    errors += link_errors
    notes += link_notes
    attribute_errors, attribute_warnings = _attribute_problems(root, entries)
    errors += attribute_errors
    warnings += attribute_warnings
    return Plan(table, entries, warnings, notes, errors)


def _import_warnings(root: Path, entries: list[Entry]) -> list[str]:
    """Can each PR be merged without the ones after it? Our package's modules that a PR's code (its files and the
    call sites its patches add) imports must be in it or in an earlier PR."""
    owner = {}
    for entry in entries:
        for rel in entry.files:
            mod = _module_of(rel)
            if mod:
                owner[mod] = entry
    modules = set(owner)
    warnings = []
    for entry in entries:
        for rel in entry.files:
            if not rel.endswith(".py"):
                continue
            for mod in sorted(_imported_modules(_text(root, rel), rel, modules)):
                if owner[mod].number > entry.number:
                    warnings.append(
                        f"{entry.branch}: {rel} imports {mod}, which comes later "
                        f"({owner[mod].branch}): the PR cannot be merged alone"
                    )
        for patch in entry.patches:
            found = _PATCH_IMPORT.findall(patch.read_bytes())
            called = {_ours([pkg.decode(), *mod.decode().split(".")], modules) for pkg, mod in found}
            for mod in sorted(called & modules):
                if owner[mod].number > entry.number:
                    warnings.append(
                        f"{entry.branch}: patches/{patch.name} calls {mod}, which comes later ({owner[mod].branch})"
                    )
    return warnings


#: Targets upstream's own Makefile has too: a page that names them names upstream's command, not ours.
UPSTREAM_MAKE_TARGETS = frozenset(
    {"test", "test-examples", "style", "quality", "fixup", "fix-copies", "repo-consistency", "check-repo"}
)
_MAKE_RULE = re.compile(r"^(?P<targets>[A-Za-z][\w.-]*(?:[ \t]+[A-Za-z][\w.-]*)*)[ \t]*:(?!=)")


def fork_make_targets(root: Path) -> list[str]:
    """The targets of this repository's Makefile that upstream's lacks (`make check`, `make pr`, `make demo`, ...)."""
    makefile = root / "Makefile"
    if not makefile.is_file():
        return []
    targets = set()
    for line in makefile.read_text(encoding="utf-8").splitlines():
        match = _MAKE_RULE.match(line)
        if match:
            targets.update(match["targets"].split())
    return sorted(targets - UPSTREAM_MAKE_TARGETS)


def _fork_words(root: Path, entries: list[Entry]) -> list[str]:
    """
    Where an entry's files say "fork" (upstream has no fork; `fork_rng` is torch's), or name one of this repository's
    own make targets (`make check`, `make pr`): upstream's contributors have neither.
    """
    targets = fork_make_targets(root)
    command = re.compile(rf"\bmake[ \t]+({'|'.join(map(re.escape, targets))})(?![\w-])") if targets else None
    warnings = []
    for entry in entries:
        mentions, commands = [], []
        for rel in entry.files:
            for n, line in enumerate(_text(root, rel).splitlines(), 1):
                if re.search(r"\bfork(?!_rng)", line, flags=re.I):
                    mentions.append(f"{rel}:{n}")
                if command is not None:
                    commands.extend(f"`make {m[1]}` at {rel}:{n}" for m in command.finditer(line))
        if mentions:
            shown = ", ".join(mentions[:12]) + (f" and {len(mentions) - 12} more" if len(mentions) > 12 else "")
            warnings.append(f"{entry.branch}: the word 'fork' (upstream has none) at {shown}")
        if commands:
            shown = ", ".join(commands[:12]) + (f" and {len(commands) - 12} more" if len(commands) > 12 else "")
            warnings.append(
                f"{entry.branch}: a make target of this repository only (upstream's Makefile has none): {shown}; "
                "name the script it runs instead"
            )
    return warnings


# ----------------------------------------------------------------------------------------------------------------
# Reviewability rules: each PR whole, within its size


def _is_test_file(rel: str) -> bool:
    return rel.startswith("tests/")


def _estimated(entry: Entry) -> int:
    return entry.estimated_lines


def _budget_errors(table: Table, entries: list[Entry], size: Callable[[Entry], int] = _estimated) -> list[str]:
    """Each entry within its `max-lines` budget (`size`: its estimated changed lines, or those of its built branch),
    and no budget above the ceiling."""
    errors = []
    for entry in entries:
        budget = entry.spec.max_lines if entry.spec.max_lines is not None else table.ceiling
        if budget > table.ceiling:
            errors.append(
                f"{entry.branch}: max-lines = {budget} is above the ceiling of {table.ceiling} changed lines: split "
                "the entry instead of raising its budget"
            )
        elif size(entry) > budget:
            errors.append(
                f"{entry.branch}: about {size(entry)} changed lines, over its budget of {budget} (max-lines "
                f"in {STACK_TABLE}): move files to another entry or split the module"
            )
    return errors


def _core_errors(table: Table, entries: list[Entry], size: Callable[[Entry], int] = _estimated) -> list[str]:
    """The RFC core: at most `RFC_CORE_MAX_ENTRIES` entries, within `rfc-core-max-lines` together, the first within
    `rfc-core-first-max-lines` (by `size`, as `_budget_errors`, and allowed by its `max-lines`)."""
    errors = []
    core = [e for e in entries if e.spec.name in table.rfc_core]
    sizes = ", ".join(f"{e.spec.name} ~{size(e)}" for e in core)
    if len(core) > RFC_CORE_MAX_ENTRIES:
        errors.append(
            f"rfc-core holds {len(core)} entries ({sizes}): the RFC itself (the field, the load check and its error "
            f"switch, the stamp, its repo check) fits in at most {RFC_CORE_MAX_ENTRIES} pull requests"
        )
    total = sum(size(e) for e in core)
    if total > table.rfc_core_max_lines:
        errors.append(
            f"rfc-core has about {total} changed lines ({sizes}), over its budget of {table.rfc_core_max_lines} "
            f"(rfc-core-max-lines in {STACK_TABLE}): move what is not the RFC itself into extension entries"
        )
    if not core:
        return errors
    first, limit = core[0], table.rfc_first_max_lines
    if size(first) > limit:
        errors.append(
            f"{first.branch}: the RFC's first pull request ({first.spec.name}) has about {size(first)} "
            f"changed lines, over its budget of {limit} (rfc-core-first-max-lines in {STACK_TABLE})"
        )
    allowed = first.spec.max_lines or table.ceiling
    if allowed > limit:
        errors.append(
            f"{first.branch}: the RFC's first pull request ({first.spec.name}) is allowed {allowed} changed lines: it "
            f"needs max-lines <= {limit} (rfc-core-first-max-lines in {STACK_TABLE})"
        )
    return errors


def _shape_errors(table: Table, entries: list[Entry]) -> list[str]:
    """The stack's shape: the RFC core within its budgets (`_core_errors`), and no tests-only PR."""
    errors = _core_errors(table, entries)
    for entry in entries:
        if entry.files and not entry.patches and all(_is_test_file(rel) for rel in entry.files):
            errors.append(
                f"{entry.branch}: holds tests only ({', '.join(entry.files)}): a pull request ships the code it tests; "
                "move these tests into the entry of the code they test"
            )
    return errors


def _public_names(root: Path, files: list[str]) -> dict[str, str]:
    """`__all__` name -> module (`trained_precision.commands.inspection`), for `from transformers.trained_precision import X`."""
    names = {}
    for rel in files:
        mod = _module_of(rel)
        if mod is None:
            continue
        try:
            tree = _parse((root / rel).read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                if isinstance(node.value, (ast.List, ast.Tuple)):
                    for elt in node.value.elts:
                        if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                            names.setdefault(elt.value, mod)
    return names


def _reached(text: str, rel: str, modules: set[str], public: dict[str, str], scripts: dict[str, str]) -> set[str]:
    """What a file of ours imports: our modules (also through the package's public names) and `utils/` scripts."""
    found = {f"module:{m}" for m in _imported_modules(text, rel, modules)}
    try:
        tree = _parse(text)
    except SyntaxError:
        return found
    for node in ast.walk(tree):
        # a repo tool that loads our modules by path (`utils/check_*.py` reads the registry from the checkout)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".py"):
            mod = _module_of(node.value)
            if mod in modules:
                found.add(f"module:{mod}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[:2] == [
            "transformers",
            "trained_precision",
        ]:
            for alias in node.names:
                if alias.name in public:
                    found.add(f"module:{public[alias.name]}")
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        for name in names:
            if name in scripts:
                found.add(f"script:{name}")
    return found


def _untested_modules(root: Path, entries: list[Entry]) -> list[str]:
    """A module of ours that no test file of its own entry reaches (directly, or through the entry's other files)."""
    all_files = [rel for e in entries for rel in e.files]
    modules = {m for m in map(_module_of, all_files) if m}
    public = _public_names(root, all_files)
    warnings = []
    for entry in entries:
        scripts = {Path(rel).stem: rel for rel in entry.files if rel.startswith("utils/") and rel.endswith(".py")}
        code = {}
        for rel in entry.files:
            mod = _module_of(rel)
            if mod and Path(rel).name not in ("__init__.py", "__main__.py"):
                code[f"module:{mod}"] = rel
            elif rel in scripts.values():
                code[f"script:{Path(rel).stem}"] = rel
        if not code:
            continue
        edges = {
            rel: _reached(_text(root, rel), rel, modules, public, scripts)
            for rel in entry.files
            if rel.endswith(".py")
        }
        seen: set[str] = set()
        todo = [key for rel, keys in edges.items() if _is_test_file(rel) for key in keys]
        while todo:
            key = todo.pop()
            if key in seen:
                continue
            seen.add(key)
            if key in code:
                todo.extend(edges.get(code[key], ()))
        for key, rel in sorted(code.items(), key=lambda kv: kv[1]):
            if key not in seen:
                warnings.append(
                    f"{entry.branch}: {rel} is not reached by any test of this pull request (a test file of the entry "
                    "importing it, or a module of the entry that imports it): it ships code another PR tests"
                )
    return warnings


_MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _doc_links(text: str) -> list[tuple[int, str]]:
    """Relative links of a guide page, or of our docstrings (which render under docs/source/en/<section>/)."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for target in _MD_LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")) or "{" in target:
                continue  # a URL, an anchor on the same page, an absolute path, a template
            found.append((n, target))
    return found


def _patch_doc_links(patch: Path) -> list[tuple[int, str]]:
    found = []
    for n, line in enumerate(patch.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if line.startswith("+") and not line.startswith("+++"):
            for target in _MD_LINK.findall(line):
                if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith(("#", "/")):
                    found.append((n, target))
    return found


def _guide_page(rel: str, target: str) -> str | None:
    """The docs/source/en page a relative link names (`./pure_bf16_training#x`, `../trained_precision`), or `None`
    for a link that is not to a guide page (an image, a source file)."""
    path = target.split("#", 1)[0]
    if not path:
        return None
    if rel.startswith("docs/source/en/") and rel.endswith(".md"):
        base = os.path.dirname(rel)
    else:
        # a docstring renders on a page one level below docs/source/en (main_classes/, internal/, model_doc/)
        base = "docs/source/en/main_classes"
    page = os.path.normpath(os.path.join(base, path))
    if not page.startswith("docs/source/en/"):
        return None
    if page.endswith(".md"):
        return page
    return None if os.path.splitext(page)[1] else page + ".md"


def _doc_link_problems(root: Path, entries: list[Entry]) -> tuple[list[str], list[str]]:
    """Links to guide pages must resolve within the entry's branch: a page of ours in this or an earlier entry. A
    link to a page of ours that a later entry ships, or to a page that is neither ours nor upstream's by name, is an
    error; upstream's own pages cannot be checked without upstream's docs (a note)."""
    ours = {rel: e.number for e in entries for rel in e.files if rel.startswith("docs/source/en/")}
    tracked = set(ps.tracked_files(root))
    errors, notes = [], []
    for entry in entries:
        sources = [(rel, _doc_links(_text(root, rel))) for rel in entry.files if rel.endswith((".md", ".py"))]
        sources += [(f"patches/{p.name}", _patch_doc_links(p)) for p in entry.patches]
        for rel, links in sources:
            for n, target in links:
                page = _guide_page(rel, target)
                if page is None:
                    continue
                if page in ours:
                    if ours[page] > entry.number:
                        later = entries[ours[page] - 1]
                        errors.append(
                            f"{entry.branch}: {rel}:{n} links {target} ({page}), which arrives later "
                            f"({later.branch}): move the page earlier or the link later"
                        )
                elif page in tracked:
                    errors.append(f"{entry.branch}: {rel}:{n} links {target} ({page}), which no entry ships")
                elif re.match(r"docs/source/en/(trained_precision|pure_bf16)", page):
                    errors.append(f"{entry.branch}: {rel}:{n} links {target}: {page} does not exist")
                else:
                    notes.append(f"{entry.branch}: {rel}:{n} links upstream's {page} (not checked here)")
    return errors, notes


# Config attributes: what an entry reads must exist upstream or be written by the branch


#: `*_config` objects that are not transformers configs (accelerate's, PEFT's own `adapter_config.json` and its
#: config classes, DeepSpeed's): their attributes are not checked.
THIRD_PARTY_CONFIGS = (
    "parallelism_config",
    "peft_config",
    "lora_config",
    "adapter_config",
    "ds_config",
    "accelerate_config",
)


def _configish(node: ast.AST) -> bool:
    """`config`, `self.config`, `model.config`, `text_config`, `quantization_config`: an expression naming a
    transformers config (or the `fsdp_config` / quantization configs of upstream's own classes)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return bool(name) and (name == "config" or name.endswith("_config")) and name not in THIRD_PARTY_CONFIGS


def _field_constants(root: Path, files: list[str]) -> dict[str, str]:
    """Our module-level `*_FIELD = "name"` constants: the names of the config fields we introduce."""
    constants = {}
    for rel in files:
        if not rel.endswith(".py") or not rel.startswith("src/"):
            continue
        try:
            tree = _parse((root / rel).read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.endswith("_FIELD")
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                constants[node.targets[0].id] = node.value.value
    return constants


def _attribute_uses(text: str, constants: dict[str, str]) -> tuple[dict[str, int], set[str]]:
    """(reads: attribute -> first line, writes) of config attributes in Python source."""
    try:
        tree = _parse(text)
    except SyntaxError:
        return {}, set()
    reads: dict[str, int] = {}
    writes: set[str] = set()

    def name_of(node) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and node.id in constants:
            return constants[node.id]
        return None

    for node in tree.body:
        # `FIELDS = (FIELD, PRETRAINING_FIELD)`: the config fields a module declares (loaded and saved with the config)
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else node.targets[0]
            if isinstance(node, ast.Assign)
            else None
        )
        if isinstance(target, ast.Name) and target.id == "FIELDS" and isinstance(node.value, (ast.Tuple, ast.List)):
            writes.update(name for name in map(name_of, node.value.elts) if name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _configish(node.value):
            if isinstance(node.ctx, ast.Load):
                reads.setdefault(node.attr, node.lineno)
            else:
                writes.add(node.attr)
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            args = node.args
            if fname == "setattr" and len(args) >= 2 and name_of(args[1]):
                writes.add(name_of(args[1]))
            elif fname == "dumps" and args and isinstance(args[0], ast.Name) and args[0].id in constants:
                writes.add(constants[args[0].id])  # the key written into config.json's text
            elif args and _configish(args[0]):
                for arg in args[1:]:
                    if name_of(arg) and (fname in ("getattr", "hasattr") or isinstance(arg, ast.Name)):
                        reads.setdefault(name_of(arg), node.lineno)
            elif fname == "get" and isinstance(func, ast.Attribute) and _configish(func.value) and args:
                if name_of(args[0]):
                    reads.setdefault(name_of(args[0]), node.lineno)
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None and isinstance(key, ast.Name) and key.id in constants:
                    writes.add(constants[key.id])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and name_of(node.slice):
            writes.add(name_of(node.slice))
    return reads, writes


_PATCH_FIELD = re.compile(r"^\+\s+(?:self\.)?([a-z_][a-z0-9_]*)\s*(?::\s*[^=]+)?=\s*\S")
_PATCH_READ = re.compile(r"\b(?:self\.|model\.|\w*_)?config\.([a-z_][a-z0-9_]*)\b(?!\s*=[^=])")


def _patch_attribute_uses(patch: Path) -> tuple[dict[str, int], set[str]]:
    """Config attributes a patch's added code lines read (`config.x`) and, in configuration_utils.py, declare."""
    reads: dict[str, int] = {}
    writes: set[str] = set()
    current = None
    for n, line in enumerate(patch.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if line.startswith("+++ b/"):
            current = line[6:]
            continue
        if not line.startswith("+") or line.startswith("+++"):
            continue
        code = line[1:].split("#", 1)[0]
        if "`" in code or not code.strip():
            continue  # docstring prose
        if current == "src/transformers/configuration_utils.py":
            m = _PATCH_FIELD.match(line)
            if m:
                writes.add(m.group(1))
        for m in re.finditer(r"\bconfig\.([a-z_][a-z0-9_]*)\s*=[^=]", code):
            writes.add(m.group(1))
        for m in _PATCH_READ.finditer(code):
            reads.setdefault(m.group(1), n)
    return reads, writes


_UPSTREAM_CONFIG_WORDS: set[str] | None = None
#: Beside every `configuration_*.py`: the other config objects our code reads (quantization configs, the
#: `fsdp_config` / `deepspeed` dicts of the training arguments, accelerate's plugins as upstream wraps them).
UPSTREAM_CONFIG_SOURCES = (
    "transformers/utils/quantization_config.py",
    "transformers/training_args.py",
    "transformers/integrations/fsdp.py",
    "transformers/integrations/deepspeed.py",
    "transformers/integrations/accelerate.py",
)


def _upstream_config_words(root: Path) -> set[str]:
    """Every identifier of upstream's configuration modules (`configuration_utils.py`, each model's
    `configuration_*.py`) in the pinned wheel: the attributes a config can have upstream."""
    global _UPSTREAM_CONFIG_WORDS
    if _UPSTREAM_CONFIG_WORDS is None:
        import zipfile

        config = ps.read_config(root)
        wheel = ps.cached_upstream_wheel(config.upstream_version, config.pins["wheel"])
        words: set[str] = set()
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                base = name.rsplit("/", 1)[-1]
                if name.startswith("transformers/") and (
                    (base.startswith("configuration_") and base.endswith(".py")) or name in UPSTREAM_CONFIG_SOURCES
                ):
                    words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", zf.read(name).decode("utf-8", "replace")))
        _UPSTREAM_CONFIG_WORDS = words
    return _UPSTREAM_CONFIG_WORDS


def _attribute_problems(root: Path, entries: list[Entry]) -> tuple[list[str], list[str]]:
    """A config attribute an entry's code reads must be one upstream's configs have, or one the branch so far writes
    (an assignment, `setattr`, a key written into config.json, a field the vocabulary declares) or declares as a key of
    its checkpoint format (a module-level `*_FIELD = "name"` constant of the branch: a module arriving whole may read
    a record that a later pull request writes). Returns (errors, warnings)."""
    all_files = [rel for e in entries for rel in e.files]
    constants = _field_constants(root, all_files)
    uses = []
    for entry in entries:
        reads: dict[tuple[str, str], int] = {}
        writes: set[str] = set(_field_constants(root, entry.files).values())
        for rel in entry.files:
            if rel.endswith(".py") and not _is_test_file(rel):
                r, w = _attribute_uses(_text(root, rel), constants)
                writes |= w
                for attr, n in r.items():
                    reads.setdefault((rel, attr), n)
        for patch in entry.patches:
            r, w = _patch_attribute_uses(patch)
            writes |= w
            for attr, n in r.items():
                reads.setdefault((f"patches/{patch.name}", attr), n)
        uses.append((entry, reads, writes))
    upstream = None
    errors, warnings = [], []
    written: set[str] = set()
    for index, (entry, reads, writes) in enumerate(uses):
        written |= writes
        for (rel, attr), n in sorted(reads.items()):
            if attr in written or attr.startswith("__"):
                continue
            if upstream is None:
                upstream = _upstream_config_words(root)
            if attr in upstream:
                continue
            later = next((e.branch for e, _, w in uses[index + 1 :] if attr in w), None)
            where = f"first written in {later}" if later else "written by no pull request"
            message = f"{entry.branch}: {rel}:{n} reads config attribute {attr!r}, which upstream's configs do not have ({where})"
            errors.append(f"{message}: move the read to that pull request, or the write to this one")
    return errors, warnings


def format_plan(plan: Plan) -> str:
    lines = []
    for entry in plan.entries:
        budget = f" / {entry.spec.max_lines}" if entry.spec.max_lines else ""
        what = f"{len(entry.patches)} patches, {len(entry.files)} files, {len(entry.spec.edits)} edits"
        if entry.is_empty:
            what = "empty: no branch"
        lines.append(f"  {entry.number}. {entry.branch:<36} ~{entry.estimated_lines:>5}{budget} lines  ({what})")
        lines.append(f"     {entry.spec.title}")
    return "\n".join(lines)


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
class BranchResult:
    number: int
    name: str
    branch: str
    parent: str
    commits: list[str]
    files: list[str]
    added: int
    removed: int


@dataclasses.dataclass
class PrResult:
    base: str
    branches: list[BranchResult]
    left_out: list[str]  # untracked files under upstream's folders
    warnings: list[str]
    descriptions: list[Path] = dataclasses.field(default_factory=list)  # one pull request description per branch


def _apply_mail(worktree: Path, patch: Path, env: dict, tmp: Path) -> None:
    cleaned = tmp / patch.name
    cleaned.write_bytes(_strip_fork_trailers(patch.read_bytes()))
    proc = _run(["am", "-q", "--keep-cr", "--whitespace=nowarn", str(cleaned)], worktree, env=env, check=False)
    if proc.returncode != 0:
        reason = _explain_failure(patch, worktree, proc.stdout + proc.stderr)
        _run(["am", "--abort"], worktree, env=env, check=False)
        raise PrError(reason)
    # the patch file's author is the fork's bookkeeping identity; the pull request's commits are the user's
    _run(["commit", "-q", "--amend", "--no-edit", "--no-verify", "--reset-author"], worktree, env=env)


def _numstat(worktree: Path, a: str, b: str) -> tuple[int, int, list[str]]:
    added = removed = 0
    files = []
    for line in _run(["diff", "--numstat", a, b], worktree).stdout.splitlines():
        plus, minus, path = line.split("\t", 2)
        added += int(plus) if plus != "-" else 0
        removed += int(minus) if minus != "-" else 0
        files.append(path)
    return added, removed, files


def _check_sides(clone: Path, root: Path) -> None:
    """`clone` is the top of a checkout outside this repository, and this repository has nothing uncommitted."""
    if not clone.is_dir():
        raise PrError(f"{clone} does not exist: pass UPSTREAM=/path/to/a/clone/of/huggingface/transformers")
    top = _run(["rev-parse", "--show-toplevel"], clone, check=False)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != clone:
        raise PrError(f"{clone} is not the top of a git checkout (clone huggingface/transformers there)")
    if root == clone or root in clone.parents:
        raise PrError(f"{clone} is inside this repository; use a separate clone of huggingface/transformers")
    dirty = dirty_files(root)
    if dirty:
        raise PrError(
            f"{root} has uncommitted changes; the pull request is built from what git tracks, so commit or stash "
            "them first: " + ", ".join(dirty[:10]) + (f" and {len(dirty) - 10} more" if len(dirty) > 10 else "")
        )


def _base_commit(clone: Path, plan: Plan, base: str) -> str:
    """The commit `base` names in `clone`, once every branch name of the stack is valid and free there."""
    for entry in plan.entries:
        if _run(["check-ref-format", "--branch", entry.branch], clone, check=False).returncode != 0:
            raise PrError(f"{entry.branch!r} is not a valid branch name")
        if _run(["rev-parse", "--verify", "-q", f"refs/heads/{entry.branch}"], clone, check=False).returncode == 0:
            raise PrError(
                f"branch {entry.branch!r} already exists in {clone}: `make pr` was already run there. Push the "
                f"stack, or delete its branches (`git -C {clone} branch -D <branch>`) to build it again, or pass "
                "BRANCH=another-prefix."
            )
    resolved = _run(["rev-parse", "--verify", "-q", f"{base}^{{commit}}"], clone, check=False)
    if resolved.returncode != 0:
        raise PrError(
            f"{base!r} is not a commit in {clone}: fetch upstream's tags (`git -C {clone} fetch --tags "
            "https://github.com/huggingface/transformers`) or pass BASE=<tag or commit>"
        )
    return resolved.stdout.strip()


def _clashes(clone: Path, base_sha: str, plan: Plan, root: Path) -> list[str]:
    """Files of ours that the clone already has at `base_sha` with other content."""
    clashes = []
    for rel in (rel for entry in plan.entries for rel in entry.files):
        if _run(["cat-file", "-e", f"{base_sha}:{rel}"], clone, check=False).returncode == 0:
            theirs = subprocess.run(
                ["git", "show", f"{base_sha}:{rel}"], cwd=clone, capture_output=True, check=True
            ).stdout
            if theirs != (root / rel).read_bytes():
                clashes.append(rel)
    return clashes


def _build_entry(worktree: Path, entry: Entry, root: Path, env: dict, tmp: Path, log) -> None:
    """On the checked-out branch: one commit per patch, one with the entry's files as they are here, one per edit."""
    for patch in entry.patches:
        _apply_mail(worktree, patch, env, tmp)
    files = [rel for rel in entry.files if not (worktree / rel).exists()]
    if files:
        for rel in files:
            out = worktree / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes((root / rel).read_bytes())
        _run(["add", "--", *files], worktree, env=env)
        message = f"{entry.spec.title}\n\n{entry.spec.body}\n\nNew files:\n" + "\n".join(f"  {rel}" for rel in files)
        _run(["commit", "-q", "--no-verify", "-m", message + "\n"], worktree, env=env)
    for name in entry.spec.edits:
        edit = upstream_edits.EDITS[name]
        try:
            changed = upstream_edits.apply_edit(name, worktree)
        except upstream_edits.EditError as e:
            raise PrError(f"{entry.branch}: edit {name!r}: {e}") from None
        if changed:
            _run(["add", "--", edit.path], worktree, env=env)
            subject = f"{edit.path.rsplit('/', 1)[-1]}: {edit.summary}"
            _run(["commit", "-q", "--no-verify", "-m", subject], worktree, env=env)
        else:
            log(f"upstream-pr: {entry.branch}: {edit.path} already has the {name} edit")
    status = _run(["status", "--porcelain"], worktree).stdout
    if status.strip():
        raise PrError(f"unexpected changes left in the worktree:\n{status}")


def _build_stack(clone: Path, plan: Plan, root: Path, base: str, base_sha: str, env: dict, log) -> list[BranchResult]:
    """Every non-empty entry's branch, each on the one before, built in a temporary worktree of `clone`; on any
    failure the worktree and every branch made so far are removed."""
    tmp = Path(tempfile.mkdtemp(prefix="upstream-pr-"))
    worktree = tmp / "worktree"
    created: list[str] = []
    results: list[BranchResult] = []
    try:
        _run(["worktree", "add", "-q", "--detach", str(worktree), base_sha], clone, env=env)
        parent, parent_name = base_sha, base
        for entry in plan.entries:
            if entry.is_empty:
                log(f"upstream-pr: {entry.number}. {entry.spec.name}: nothing assigned, no branch")
                continue
            _run(["checkout", "-q", "-b", entry.branch], worktree, env=env)
            created.append(entry.branch)
            _build_entry(worktree, entry, root, env, tmp, log)
            commits = _run(["log", "--reverse", "--format=%s", f"{parent}..HEAD"], worktree).stdout.splitlines()
            added, removed, files = _numstat(worktree, parent, "HEAD")
            results.append(
                BranchResult(entry.number, entry.spec.name, entry.branch, parent_name, commits, files, added, removed)
            )
            parent, parent_name = entry.branch, entry.branch
    except BaseException:
        _run(["worktree", "remove", "--force", str(worktree)], clone, check=False)
        _run(["worktree", "prune"], clone, check=False)
        for branch in created:  # a branch checked out in a worktree cannot be deleted: the worktree goes first
            _run(["branch", "-D", branch], clone, check=False)
        raise
    finally:
        _run(["worktree", "remove", "--force", str(worktree)], clone, check=False)
        _run(["worktree", "prune"], clone, check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def make_pr(
    clone: Path,
    base: str | None = None,
    prefix: str | None = None,
    root: Path = ROOT,
    log=print,
    strict: bool = False,
    descriptions: Path | None = None,
) -> PrResult:
    """Creates the stack of branches in `clone` from `base`, and writes one description per branch (`<branch>.md`) in
    `descriptions` (default `.cache/pr-descriptions/`). See the module docstring."""
    clone = clone.resolve()
    root = root.resolve()
    base = base or f"v{ps.read_config(root).upstream_version}"
    _check_sides(clone, root)
    left_out = untracked_left_out(root)
    plan = plan_stack(root)
    if prefix:
        for entry in plan.entries:
            entry.branch = f"{prefix}-{entry.number}-{entry.spec.name}"
    if plan.errors:
        raise PrError("the stack breaks its rules (`make check` says the same):\n  " + "\n  ".join(plan.errors))
    if strict and plan.warnings:
        raise PrError("STRICT: the stack is not ready for review:\n  " + "\n  ".join(plan.warnings))
    base_sha = _base_commit(clone, plan, base)
    env = user_identity(clone)
    clashes = _clashes(clone, base_sha, plan, root)
    if clashes:
        raise PrError(
            "these files of ours already exist in the clone at " + base + " with other content (rename ours, or "
            "change theirs with a patch): " + ", ".join(clashes)
        )
    results = _build_stack(clone, plan, root, base, base_sha, env, log)
    built = {r.number: r.added + r.removed for r in results}
    over = _budget_errors(plan.table, plan.entries, lambda e: built.get(e.number, 0))
    over += _core_errors(plan.table, plan.entries, lambda e: built.get(e.number, 0))
    if over:
        for result in results:
            _run(["branch", "-D", result.branch], clone, check=False)
        raise PrError(
            "the branches as built break the budgets that the estimate kept (an upstream edit changed more lines "
            "than its `lines` in tools/upstream_edits.py); they were removed:\n  " + "\n  ".join(over)
        )
    out_dir = Path(descriptions) if descriptions else root / ".cache" / "pr-descriptions"
    described = write_descriptions(plan, out_dir, results, prefix)
    return PrResult(base=base, branches=results, left_out=left_out, warnings=plan.warnings, descriptions=described)


def format_stack(result: PrResult) -> str:
    lines = [f"upstream-pr: a stack of {len(result.branches)} pull requests on {result.base}:"]
    for b in result.branches:
        lines.append(
            f"  {b.number}. {b.branch:<36} +{b.added:<5} -{b.removed:<4} {len(b.files):>3} files "
            f"{len(b.commits):>2} commits  (on {b.parent})"
        )
        lines.extend(f"       {subject}" for subject in b.commits)
    total_add = sum(b.added for b in result.branches)
    total_del = sum(b.removed for b in result.branches)
    lines.append(f"  total: +{total_add} -{total_del}")
    for name in result.left_out:
        lines.append(f"upstream-pr: left out (untracked): {name}")
    for warning in result.warnings:
        lines.append(f"upstream-pr: warning: {warning}")
    for path in result.descriptions:
        lines.append(f"upstream-pr: description: {path}")
    return "\n".join(lines)


STAR_IMPORT = "from transformers.trained_precision import *"


def _ruff_findings(files: list[str], cwd: Path, upstream_config: Path) -> tuple[dict[str, list[str]], set[str]]:
    """Upstream's ruff on `files` under `cwd`: {file: rule codes found}, and the files `ruff format` would change."""
    ruff = [sys.executable, "-m", "ruff"]
    found: dict[str, list[str]] = {rel: [] for rel in files}
    check = subprocess.run(
        [*ruff, "check", "--no-cache", "--output-format", "json", "--config", str(upstream_config), *files],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    for item in json.loads(check.stdout or "[]"):
        rel = os.path.relpath(item["filename"], cwd)
        found.setdefault(rel, []).append(item.get("code") or "syntax")
    fmt = subprocess.run(
        [*ruff, "format", "--check", "--no-cache", "--config", str(upstream_config), *files],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    unformatted = {line.removeprefix("Would reformat: ").strip() for line in fmt.stdout.splitlines()}
    return found, {rel for rel in files if rel in unformatted}


def _new_ruff_failures(clone: Path, parent: str, worktree: Path, upstream_config: Path, tmp: Path) -> list[str]:
    """What upstream's ruff finds in the Python files the branch changes that it did not find before the branch: a
    file the branch adds must pass; a file it modifies must gain no finding (upstream's own files are judged by
    upstream's CI, not here)."""
    added = _run(["diff", "--name-only", "--diff-filter=A", parent, "HEAD"], worktree).stdout.split()
    modified = _run(["diff", "--name-only", "--diff-filter=M", parent, "HEAD"], worktree).stdout.split()
    added = [rel for rel in added if rel.endswith(".py")]
    modified = [rel for rel in modified if rel.endswith(".py")]
    if not added and not modified:
        return []
    found, unformatted = _ruff_findings(added + modified, worktree, upstream_config)
    before, before_unformatted = {}, set()
    if modified:
        base = tmp / "parent"
        for rel in modified:
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_bytes(
                subprocess.run(["git", "show", f"{parent}:{rel}"], cwd=clone, capture_output=True, check=True).stdout
            )
        before, before_unformatted = _ruff_findings(modified, base, upstream_config)
    failures = []
    for rel in added + modified:
        new = list(found.get(rel, []))
        for code in before.get(rel, []):
            if code in new:
                new.remove(code)
        if new:
            failures.append(f"{rel}: ruff check: {', '.join(sorted(new))}")
        if rel in unformatted and rel not in before_unformatted:
            failures.append(f"{rel}: ruff format would reformat it")
    return failures


def _import_branch(worktree: Path, env: dict) -> tuple[str, str, subprocess.CompletedProcess]:
    """The package's star import on a branch that has the package; `import transformers` on a pull request before the
    package's (a bug fix of upstream's code). Returns (what ran, the code, the process)."""
    if (worktree / PACKAGE_DIR / "__init__.py").is_file():
        what, code = "star import", STAR_IMPORT
    else:
        what, code = "import", "import transformers"
    proc = subprocess.run([sys.executable, "-c", code], cwd=worktree, env=env, capture_output=True, text=True)
    return what, code, proc


def _checkout_alone(worktree: Path, branch: str) -> None:
    """`branch` in `worktree` as a fresh checkout of it has it: its tracked files forced, every other file (what the
    branch checked before left: bytecode caches, test output, files of that branch alone) removed, and checked."""
    _run(["checkout", "-q", "-f", "--detach", branch], worktree)
    _run(["clean", "-q", "-ffdx"], worktree)
    left = _run(["status", "--porcelain", "--untracked-files=all", "--ignored"], worktree).stdout
    if left.strip():
        raise PrError(f"{branch}: the worktree is not a clean checkout of it after `git clean`:\n{left}")


def _check_branch(
    clone: Path, worktree: Path, branch: str, parent: str, tests: list[str], config: Path, log, pytest_args, run_tests
) -> int:
    """`test_stack` on one branch, checked out alone in `worktree` (a worktree of `clone`): 0 when it passes."""
    _checkout_alone(worktree, branch)
    scratch = Path(tempfile.mkdtemp(prefix="upstream-pr-parent-"))
    try:
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        env["PYTHONPATH"] = os.pathsep.join([str(worktree / "src"), *filter(None, [env.get("PYTHONPATH")])])
        failures = []
        what, code, proc = _import_branch(worktree, env)
        done = [what, "ruff"]
        if proc.returncode != 0:
            failures.append(what)
            log(f"upstream-pr: {branch}: `{code}` failed:\n{proc.stderr[-3000:]}".rstrip())
        lint_failures = _new_ruff_failures(clone, parent, worktree, config, scratch)
        if lint_failures:
            failures.append("ruff")
            log(f"upstream-pr: {branch}: upstream's ruff:\n  " + "\n  ".join(lint_failures))
        summary = ""
        if tests and run_tests:
            done.append("tests")
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
            proc = subprocess.run([*cmd, *pytest_args], cwd=worktree, env=env, capture_output=True, text=True)
            summary = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
            if proc.returncode != 0:
                failures.append("tests")
                log(f"upstream-pr: {branch}: tests failed:\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}".rstrip())
        elif run_tests:
            log(f"upstream-pr: {branch}: adds no tests")
        state = f"FAILED ({', '.join(failures)})" if failures else "passed"
        log(f"upstream-pr: {branch}: {state}: {', '.join(done)}" + (f": {summary}" if summary else ""))
        return 1 if failures else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_stack(
    clone: Path,
    prefix: str | None = None,
    root: Path = ROOT,
    log=print,
    pytest_args: tuple[str, ...] = (),
    base: str | None = None,
    run_tests: bool = True,
) -> dict[str, int]:
    """Checks each branch of a stack `make pr` built in `clone` on that branch alone (so a PR that needs code from a
    later one fails here): `from transformers.trained_precision import *` against the branch's own `src/`, upstream's
    ruff on the Python files the branch adds (they pass) or modifies (they gain no finding), and the test files it
    adds (`run_tests=False`: the first two only, in seconds). Returns {branch: exit code}, 0 when all pass.

    One temporary worktree serves every branch: each is checked out in it in turn and everything else removed
    (`_checkout_alone`), which leaves what a fresh worktree of the branch holds at a fraction of its cost."""
    clone = clone.resolve()
    root = root.resolve()
    plan = plan_stack(root)
    config = ps.read_config(root)
    base = base or f"v{config.upstream_version}"
    upstream_config = ps.upstream_pyproject(config)
    results: dict[str, int] = {}
    parent = base
    tmp = Path(tempfile.mkdtemp(prefix="upstream-pr-test-"))
    worktree = tmp / "worktree"
    try:
        for entry in plan.entries:
            branch = f"{prefix}-{entry.number}-{entry.spec.name}" if prefix else entry.branch
            if _run(["rev-parse", "--verify", "-q", f"refs/heads/{branch}"], clone, check=False).returncode != 0:
                log(f"upstream-pr: {branch}: no such branch in {clone}, skipped")
                continue
            if not worktree.exists():
                _run(["worktree", "add", "-q", "--detach", "--no-checkout", str(worktree), branch], clone)
            tests = [r for r in entry.files if r.startswith("tests/") and r.rsplit("/", 1)[-1].startswith("test_")]
            args = (tests, upstream_config, log, pytest_args, run_tests)
            results[branch] = _check_branch(clone, worktree, branch, parent, *args)
            parent = branch
    finally:
        _run(["worktree", "remove", "--force", str(worktree)], clone, check=False)
        _run(["worktree", "prune"], clone, check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    return results


# ----------------------------------------------------------------------------------------------------------------
# Upstream's lint rules


def _materialise_upstream(root: Path, config, plan: Plan, scratch: Path) -> list[str]:
    """Writes under `scratch` the upstream Python files our patches change (as patched) and those our edits change
    (from the pinned sdist, edited); returns their paths relative to `scratch`."""
    upstream = ps.load_upstream(config, "wheel")
    changed = ps.patched_files(upstream, ps.check_series(root / "patches"), root / "patches", root / "src")
    theirs = []
    for rel, data in changed.items():
        if rel.endswith(".py"):
            out = scratch / "src" / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            theirs.append(f"src/{rel}")
    # edits of files the sdist carries (setup.py, the dependency table) are linted too
    import tarfile

    sdist = ps.cached_upstream_sdist(config.upstream_version, config.pins["sdist"])
    with tarfile.open(sdist) as tf:
        for entry in plan.entries:
            for name in entry.spec.edits:
                edit = upstream_edits.EDITS[name]
                if not edit.path.endswith(".py"):
                    continue
                member = f"{ps.PACKAGE}-{config.upstream_version}/{edit.path}"
                out = scratch / edit.path
                if not out.exists():
                    try:
                        data = tf.extractfile(member).read()
                    except (KeyError, AttributeError):
                        continue
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(data)
                upstream_edits.apply_edit(name, scratch)
                if edit.path not in theirs:
                    theirs.append(edit.path)
    return theirs


def lint(root: Path = ROOT, log=print) -> int:
    """ruff with upstream's configuration (the pinned sdist's pyproject.toml) on every Python file that goes upstream:
    our files in place (each branch holds them as they are here), and the upstream files our patches and edits change,
    materialised in `.cache/pr-lint`."""
    config = ps.read_config(root)
    upstream_config = ps.upstream_pyproject(config)
    plan = plan_stack(root)
    ours = [rel for entry in plan.entries for rel in entry.files if rel.endswith(".py")]
    scratch = ps.CACHE / "pr-lint"
    if scratch.exists():
        shutil.rmtree(scratch)
    theirs = _materialise_upstream(root, config, plan, scratch)
    ruff = [sys.executable, "-m", "ruff"]
    failed = 0
    for cwd, files, where in ((root, ours, "our files"), (scratch, theirs, f"patched upstream files in {scratch}")):
        if not files:
            continue
        for args in (["check", "--no-cache", "--output-format", "concise"], ["format", "--check", "--no-cache"]):
            proc = subprocess.run(
                [*ruff, *args, "--config", str(upstream_config), *files], cwd=cwd, capture_output=True, text=True
            )
            if proc.returncode != 0:
                failed += 1
                log(
                    f"upstream-lint: `ruff {args[0]}` with upstream's rules fails on {where}:\n{proc.stdout}{proc.stderr}".rstrip()
                )
    if not failed:
        log(
            f"upstream-lint: {len(ours)} files of ours and {len(theirs)} patched upstream files pass ruff with "
            f"upstream's configuration ({upstream_config})"
        )
    return 1 if failed else 0


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


def _set_pins(text: str, pins: dict[str, str]) -> str:
    """Rewrites `<key>-sha256 = "..."` in `[tool.patchset.pin]` of pyproject.toml's text."""
    start = text.find("[tool.patchset.pin]")
    if start == -1:
        raise PrError("pyproject.toml has no [tool.patchset.pin] section")
    end = text.find("\n[", start + 1)
    end = len(text) if end == -1 else end
    section = text[start:end]
    for key in ps.PIN_KEYS:
        section, count = re.subn(
            rf'^({key}-sha256\s*=\s*)"[0-9a-f]*"', rf'\g<1>"{pins[key]}"', section, count=1, flags=re.M
        )
        if count != 1:
            raise PrError(f'pyproject.toml: expected one `{key}-sha256 = "..."` in [tool.patchset.pin]')
    return text[:start] + section + text[end:]


def _write_atomic(path: Path, data: str | bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)


def _start_rebase(fork: Path, root: Path, old: str, version: str, new_upstream, old_upstream_wheel, log) -> None:
    """Checks (or builds) `fork/`, imports upstream `version` on top of `upstream/<old>` and rebases our commits onto
    it; raises PrError with the way forward on a conflict."""
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
        if old_upstream_wheel is not None:
            old_upstream = ps.upstream_from_wheel(old_upstream_wheel, old)
        else:
            pin = ps.read_config(root).pins["wheel"]
            old_upstream = ps.upstream_from_wheel(ps.cached_upstream_wheel(old, pin), old, pin)
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
    (_git_dir(fork) / REBASE_STATE).write_text(json.dumps(state, indent=2) + "\n")
    proc = _fixed(["rebase", "-q", "--onto", f"upstream/{version}", f"upstream/{old}", branch], fork, check=False)
    if proc.returncode != 0:
        raise PrError(_conflict_message(fork, state, version, old, proc.stdout + proc.stderr))


def _write_rebased(fork: Path, root: Path, old: str, version: str, new_upstream, new_pins: dict) -> list[str]:
    """Once the rebase is done: exports it, checks it exactly against the new upstream, then writes patches/, series
    and the pins. Returns the series."""
    with tempfile.TemporaryDirectory() as tmp:
        produced = _export(fork, version, Path(tmp))
        names = [p.name for p in produced]
        ps.patched_files(new_upstream, names, Path(tmp), root / "src")
        shadows = sorted(p for p in ps.overlay_files(root / "src") if p in new_upstream.files)
        if shadows:
            raise PrError(f"{ps.PACKAGE} {version} now has files that ours would shadow: {', '.join(shadows)}")
        pyproject = _bump_pin(root / "pyproject.toml", old, version) if old != version else None
        if pyproject is not None:
            pyproject = _set_pins(pyproject, new_pins)
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
    return names


def rebase(
    version: str,
    root: Path = ROOT,
    fork: Path | None = None,
    upstream_wheel: Path | None = None,
    old_upstream_wheel: Path | None = None,
    upstream_sdist: Path | None = None,
    log=print,
) -> list[str]:
    """Moves the fork to upstream `version`: rebase `fork/`, export `patches/`, bump the pin and its sha256 pins.
    Returns the series.

    `upstream_wheel` / `old_upstream_wheel` / `upstream_sdist` inject the upstream files (tests); by default they are
    taken from `.cache/` and downloaded there with pip when missing. The old release's wheel is checked against the
    current pins; the new release's files are pinned as pip downloaded them from the index (which checks the hashes
    the index publishes).
    """
    root = root.resolve()
    fork = (fork or root / "fork").resolve()
    if not re.fullmatch(r"\d+\.\d+\.\d+([.\-+]?[0-9A-Za-z.]+)?", version):
        raise PrError(f"VERSION={version!r} is not an upstream release like 5.25.0")
    old = ps.read_config(root).upstream_version
    state_path = _git_dir(fork) / REBASE_STATE if (fork / ".git").exists() else None
    state = json.loads(state_path.read_text()) if state_path and state_path.exists() else None
    resuming = state is not None and state.get("new") == version and state.get("old") == old
    if version == old and not resuming:
        raise PrError(f"{ps.PACKAGE} {version} is already the pinned upstream (pyproject.toml)")

    new_wheel = upstream_wheel or ps.cached_upstream_wheel(version)
    new_upstream = ps.upstream_from_wheel(new_wheel, version)
    new_pins = ps.wheel_pins(new_wheel)
    new_pins["sdist"] = ps.file_sha256(upstream_sdist or ps.cached_upstream_sdist(version))
    if not resuming:
        _start_rebase(fork, root, old, version, new_upstream, old_upstream_wheel, log)
    elif _rebase_in_progress(fork):
        raise PrError(
            f"the rebase in {fork} is not finished: resolve the conflicts there, `git add` the files, "
            f"`git rebase --continue`, then run `make rebase VERSION={version}` again"
        )
    else:
        log(f"upstream-pr: resuming the rebase onto {ps.PACKAGE} {version}")
    names = _write_rebased(fork, root, old, version, new_upstream, new_pins)
    state_path = _git_dir(fork) / REBASE_STATE
    if state_path.exists():
        state_path.unlink()
    log(
        f"upstream-pr: {len(names)} patches rebased onto {ps.PACKAGE} {version}; pin and sha256 pins bumped in "
        "pyproject.toml"
    )
    if (root / STACK_TABLE).is_file():
        # the stack table names patches by their subject: say what a retired or renamed patch left behind
        try:
            plan = plan_stack(root)
        except PrError as e:
            log(f"upstream-pr: the stack table needs an update before `make pr`: {e}")
        else:
            for note in plan.notes:
                log(f"upstream-pr: note: {note}")
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


def check(root: Path = ROOT, strict: bool = False) -> str:
    """Validates what `make pr` would use without a clone: the series, the stack table placing every patch and
    upstream-bound file exactly once, no region marker (`upstream-pr:`) in an upstream-bound file, and the rules of a
    reviewable stack (each PR within its budget and whole: the RFC core within its budgets, no tests-only PR, no link
    to a later PR's page, no read of a config attribute a later PR writes); returns the planned stack with estimated
    line counts and any warnings, or raises PrError listing what breaks the rules."""
    plan = plan_stack(root)
    lines = [f"upstream-pr: the stack `make pr` would build ({STACK_TABLE}):", format_plan(plan)]
    lines.extend(f"upstream-pr: note: {note}" for note in plan.notes)
    lines.extend(f"upstream-pr: warning: {warning}" for warning in plan.warnings)
    if plan.errors:
        raise PrError("\n".join(lines) + "\nthe stack breaks its rules:\n  " + "\n  ".join(plan.errors))
    if strict and plan.warnings:
        raise PrError("\n".join(lines) + "\nSTRICT: the stack is not ready for review (the warnings above)")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# Pull request descriptions


def describe(plan: Plan, entry: Entry, result: BranchResult | None = None) -> str:
    """The description of `entry`'s pull request, in Markdown: motivation, what changes with nothing turned on, the
    measured numbers, the RFC thread's questions (for the `rfc-core` entries), what to review first, and contents."""
    spec = entry.spec
    built = [e for e in plan.entries if not e.is_empty]
    position = next((i for i, e in enumerate(built, 1) if e is entry), entry.number)
    previous = built[position - 2].branch if position > 1 else None
    size = f"+{result.added} -{result.removed}" if result else f"about {entry.estimated_lines} changed lines"
    out = [f"# {spec.title}", ""]
    stack = f"Pull request {position} of {len(built)} of a stack ({size})"
    out += [stack + (f", based on `{previous}`." if previous else ", based on the release."), ""]
    out += ["## Motivation", "", spec.body or spec.title, ""]
    out += ["## With nothing turned on", "", spec.feature_off or "Nothing changes for code that does not call it.", ""]
    out += ["## Measured", "", spec.numbers or "Nothing measured for this part: it adds no runtime path.", ""]
    if plan.table.rfc_core[:1] == [spec.name] and plan.table.rfc_thread:
        # once, in the first pull request of the RFC; the others build on it
        out += ["## The RFC thread (#11209)", "", plan.table.rfc_thread, ""]
    out += ["## What to review first", ""]
    if spec.review_first:
        out += [spec.review_first, ""]
    out += ["## Contents", ""]
    for patch in entry.patches:
        added, removed = _patch_lines(patch)
        out.append(f"- change to upstream: {_patch_subject(patch)} (+{added} -{removed})")
    for rel, n in zip(entry.files, entry._file_lines):
        kind = "test" if _is_test_file(rel) else "doc" if rel.endswith(".md") else "new file"
        out.append(f"- {kind}: `{rel}` ({n} lines)")
    for name in spec.edits:
        edit = upstream_edits.EDITS[name]
        out.append(f"- `{edit.path}`: {edit.summary}")
    tests = [rel for rel in entry.files if _is_test_file(rel)]
    out += ["", "Tests: " + (", ".join(f"`{t}`" for t in tests) if tests else "none of its own") + "."]
    return "\n".join(out).rstrip() + "\n"


def _patch_subject(patch: Path) -> str:
    import email

    header = patch.read_bytes().split(b"\ndiff --git ", 1)[0]
    subject = " ".join(str(email.message_from_bytes(header)["Subject"] or patch.name).split())
    return subject.removeprefix("[PATCH] ")


def write_descriptions(
    plan: Plan, out_dir: Path, results: list[BranchResult] | None = None, prefix: str | None = None
) -> list[Path]:
    """One `<branch>.md` per branch of the stack in `out_dir` (written atomically); returns their paths."""
    by_number = {r.number: r for r in results or []}
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for entry in plan.entries:
        if entry.is_empty:
            continue
        if results is not None and entry.number not in by_number:
            continue
        branch = f"{prefix}-{entry.number}-{entry.spec.name}" if prefix else entry.branch
        path = out_dir / f"{branch}.md"
        _write_atomic(path, describe(plan, entry, by_number.get(entry.number)))
        written.append(path)
    return written


# ----------------------------------------------------------------------------------------------------------------
# CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    pr = sub.add_parser("pr", help="create the stack of upstream pull request branches in a transformers clone")
    pr.add_argument("--upstream", type=Path, required=True, help="a clone of huggingface/transformers")
    pr.add_argument("--base", default=None, help="tag or commit to build on (default: v<pinned version>)")
    pr.add_argument("--branch", default=None, help=f"branch name prefix (default: branch-prefix in {STACK_TABLE})")
    pr.add_argument("--strict", action="store_true", help="refuse a stack with warnings (imports, tests, words)")
    pr.add_argument(
        "--descriptions", type=Path, default=None, help="where to write <branch>.md (.cache/pr-descriptions)"
    )
    ck = sub.add_parser("check", help="validate the stack table and its rules, print the planned stack")
    ck.add_argument("--strict", action="store_true", help="also fail on warnings (imports, untested modules, words)")
    ds = sub.add_parser("describe", help="write each pull request's description from the table, without a clone")
    ds.add_argument("--output", type=Path, default=ROOT / ".cache" / "pr-descriptions")
    sub.add_parser("lint", help="ruff with upstream's configuration on everything that goes upstream")
    ts = sub.add_parser("test-stack", help="run each stack branch's own tests against that branch's src/")
    ts.add_argument("--upstream", type=Path, required=True, help="the clone `make pr` built the stack in")
    ts.add_argument("--branch", default=None, help="branch name prefix, as given to `make pr`")
    ts.add_argument("--base", default=None, help="the base `make pr` built on (default: v<pinned version>)")
    rb = sub.add_parser("rebase", help="move fork/ and patches/ to a new upstream release and bump the pins")
    rb.add_argument("version")
    rb.add_argument("--fork", type=Path, default=None)
    rb.add_argument("--upstream-wheel", type=Path, default=None, help="the new release's wheel (default: download)")
    rb.add_argument("--upstream-sdist", type=Path, default=None, help="the new release's sdist (default: download)")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            print(check(strict=args.strict))
        elif args.command == "describe":
            for path in write_descriptions(plan_stack(), args.output):
                print(f"upstream-pr: description: {path}")
        elif args.command == "lint":
            return lint()
        elif args.command == "test-stack":
            results = test_stack(args.upstream, args.branch, base=args.base)
            return 0 if results and not any(results.values()) else 1
        elif args.command == "pr":
            result = make_pr(args.upstream, args.base, args.branch, strict=args.strict, descriptions=args.descriptions)
            print(format_stack(result))
            if result.branches:
                last = result.branches[-1].branch
                print(
                    f"upstream-pr: review with `git -C {args.upstream} log --stat {result.base}..{last}`; push the "
                    "branches and open one pull request per branch, each against the one before it."
                )
        else:
            rebase(
                args.version, fork=args.fork, upstream_wheel=args.upstream_wheel, upstream_sdist=args.upstream_sdist
            )
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
