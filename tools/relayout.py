#!/usr/bin/env python3
# Copyright 2026 The trained_precision fork authors. Licensed under the Apache License, Version 2.0.
"""
Moves the modules of `src/transformers/trained_precision/` into folders that name the architecture, and rewrites every
import, dotted path and file path that names a moved module. Fork-only tooling, standard library only (it runs the
repo's ruff and `tools/patchset.py`), idempotent: a second run changes nothing. Run from anywhere inside a checkout:

    python3 tools/relayout.py            # move and rewrite
    python3 tools/relayout.py --dry-run  # say what would change

Folders, each importing only the root modules and the folders before it:

    facts/     what is known about a checkpoint: Hub ids, the registry, run records, bindings, evidence, the resolver
    guard/     the one decision, the load/cast check that says it, the sentinel inside every forward
    record/    what is written: the Trainer's stamp, an adapter's record, `precision set`'s configs
    plan/      fp16 plans: applying a stored one, the audit that finds overflow sites, the search
    commands/  `transformers precision` and its inspection report

Everything is done by rules on the text, never on hunks: `git mv` by the table (each folder gets a docstring-only
`__init__.py`, so the package's `_LazyModule` still serves every name, and joins the `tools/pr_stack.toml` entry of
the folder's first file); relative imports re-derived from each file's old and new package;
`transformers.trained_precision.X`, `..trained_precision.X` and `trained_precision/X.py` renamed wherever they appear
(in patches every line but the diff headers, one for one); `from transformers.trained_precision import X` of a moved
module pointed at its folder; a module's file joined onto a path (`package / "check.py"`); a literal sequence of quoted module names (a loader's list) renamed. The rewritten Python
files are then import-sorted and formatted with the repo's ruff, and when a patch changed, the patches are rebuilt
through `fork/` (`tools/patchset.py fork`, upstream's import order restored in each commit, `tools/patchset.py export`),
so their index lines are git's own and `make fork` + `make export` changes nothing. Left as it is: a bare `check.py` in
prose, a parenthesised multi-line `from transformers.trained_precision import (...)` of modules, and a `fork/` that
already exists (it may hold work).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


PACKAGE = "src/transformers/trained_precision"
# old module -> new dotted path inside the package
MOVES = {
    "hub_ids": "facts.hub_ids",
    "registry": "facts.registry",
    "run_record": "facts.run_record",
    "binding": "facts.binding",
    "evidence": "facts.evidence",
    "resolver": "facts.resolver",
    "risk": "facts.risk",
    "storage": "facts.storage",
    "decision": "guard.decision",
    "check": "guard.check",
    "sentinel": "guard.sentinel",
    "stamp": "record.stamp",
    "adapter": "record.adapter",
    "populate": "record.populate",
    "fp16_plan": "plan.fp16_plan",
    "audit": "plan.audit",
    "fp16_plan_search": "plan.fp16_plan_search",
    "cli": "commands.cli",
    "inspection": "commands.inspection",
}
ROOT_MODULES = ("vocabulary", "configuration", "testing_utils")
FOLDERS = {
    "facts": "What is known about a checkpoint: its Hub ids, the registry of published precisions, run records, what "
    "evidence is bound to, the evidence, and the resolver that gathers them once.",
    "guard": "The one decision on the facts, the load/cast check that says it, and the sentinel inside every forward.",
    "record": "What is written: the Trainer's stamp, a PEFT adapter's training record, and `precision set`'s configs.",
    "plan": "fp16 plans: applying a stored plan, the audit that finds overflow sites, and the search that writes a plan.",
    "commands": "The command line: `transformers precision` and the report of `precision inspect`.",
}
LICENSE = """# Copyright 2026 The HuggingFace Team. All rights reserved.
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
SELF = "tools/relayout.py"
STACK = "tools/pr_stack.toml"
_MOD = "|".join(sorted(MOVES, key=len, reverse=True))
# `transformers.trained_precision.check`, `..trained_precision.check`, a bare `trained_precision.check`
DOTTED = re.compile(rf"(\btransformers\.|(?<![\w.])\.+|(?<![\w.]))trained_precision\.({_MOD})\b(?!\.py)")
PATH = re.compile(rf"\btrained_precision/({_MOD})\.py\b")
FROM_PACKAGE = re.compile(
    r"^(?P<indent>[^\S\n]*)(?P<head>(?:.*?[;\"'(]\s*)?)from (?P<base>transformers|\.+)\.?trained_precision import "
    r"(?P<names>[\w ,]+?)(?P<tail>\s*(?:#.*|[;\"'].*)?)$",
    re.M,
)
# a path joined onto the package's folder: `package / "registry.py"`, `os.path.join(package, "registry.py")`
JOINED = re.compile(rf"""((?:/|\bos\.path\.join\([^()\n]*,)\s*)(["'])({_MOD})\.py\2""")
QUOTED_LIST = re.compile(r"([(\[])((?:\s*\"\w+\",?){2,}\s*)([)\]])")
RELATIVE = re.compile(r"^(?P<head>\s*from\s+)(?P<dots>\.+)(?P<module>[\w.]*)(?P<tail>\s+import\b)", re.M)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def new_rel(rel: str) -> str:
    """The repo-relative path a tracked file has after the move (unchanged for files that do not move)."""
    prefix = PACKAGE + "/"
    if rel.startswith(prefix) and rel.count("/") == PACKAGE.count("/") + 1 and rel.endswith(".py"):
        module = rel[len(prefix) : -3]
        if module in MOVES:
            return prefix + MOVES[module].replace(".", "/") + ".py"
    return rel


def _package_of(rel: str) -> list[str]:
    """`src/transformers/trained_precision/guard/check.py` -> `["transformers", "trained_precision", "guard"]`."""
    return rel.removeprefix("src/").split("/")[:-1]


def _moved(parts: list[str]) -> list[str]:
    """An absolute dotted path (as parts) after the move."""
    if parts[:2] == ["transformers", "trained_precision"] and len(parts) > 2 and parts[2] in MOVES:
        return parts[:2] + MOVES[parts[2]].split(".") + parts[3:]
    return parts


def rewrite_relative(text: str, old: str, new: str) -> tuple[str, list[str]]:
    """Re-derives each relative import of a file under `src/transformers` from its old package and its new one."""
    old_pkg, new_pkg, problems = _package_of(old), _package_of(new), []

    def fix(match: re.Match) -> str:
        level = len(match["dots"])
        if level > len(old_pkg):
            return match[0]
        target = old_pkg[: len(old_pkg) - level + 1] + [p for p in match["module"].split(".") if p]
        moved = _moved(target)
        if moved == target and old == new:
            return match[0]
        if not match["module"] and old != new:
            problems.append(f"{new}: `{match[0].strip()} ...` names modules of the package itself; check it by hand")
        common = 0
        while common < min(len(new_pkg), len(moved)) and new_pkg[common] == moved[common]:
            common += 1
        dots = "." * (len(new_pkg) - common + 1)
        return f"{match['head']}{dots}{'.'.join(moved[common:])}{match['tail']}"

    return RELATIVE.sub(fix, text), problems


def _from_package(match: re.Match, patch: bool) -> str | None:
    """`from transformers.trained_precision import cli, populate` -> one import per folder; None if not by rule."""
    names = [n.strip() for n in match["names"].split(",") if n.strip()]
    modules = [n.split(" as ")[0].strip() for n in names]
    if not any(m in MOVES for m in modules):
        return match[0]
    groups: dict[str, list[str]] = {}
    for name, module in zip(names, modules):
        folder = MOVES[module].rsplit(".", 1)[0] if module in MOVES else ""
        leaf = MOVES[module].rsplit(".", 1)[1] if module in MOVES else module
        groups.setdefault(folder, []).append(name if leaf == module else f"{leaf} as {name}")
    base = "transformers." if match["base"] == "transformers" else match["base"]
    lines = [
        f"from {base}trained_precision{'.' + folder if folder else ''} import {', '.join(items)}"
        for folder, items in groups.items()
    ]
    if len(lines) > 1 and (patch or match["head"]):
        return None
    return "\n".join(f"{match['indent']}{match['head']}{line}{match['tail']}" for line in lines)


def rewrite_text(text: str, rel: str, patch: bool = False) -> tuple[str, list[str]]:
    """Renames dotted paths, file paths, package imports and quoted module lists that name a moved module."""
    problems = []
    text = DOTTED.sub(lambda m: f"{m[1]}trained_precision.{MOVES[m[2]]}", text)
    text = PATH.sub(lambda m: f"trained_precision/{MOVES[m[1]].replace('.', '/')}.py", text)

    def package_import(match: re.Match) -> str:
        result = _from_package(match, patch)
        if result is None:
            problems.append(
                f"{rel}: `{match[0].strip()}` imports modules of several folders on a line that cannot split"
            )
            return match[0]
        return result

    text = FROM_PACKAGE.sub(package_import, text)
    if rel.endswith(".py"):
        known = set(MOVES) | set(ROOT_MODULES)

        def quoted(match: re.Match) -> str:
            items = re.findall(r"\"(\w+)\"", match[2])
            if not set(items) <= known or not set(items) & set(MOVES):
                return match[0]
            return match[1] + re.sub(r"\"(\w+)\"", lambda m: f'"{MOVES.get(m[1], m[1])}"', match[2]) + match[3]

        text = QUOTED_LIST.sub(quoted, text)
        text = JOINED.sub(lambda m: f"{m[1]}{m[2]}{MOVES[m[3]].replace('.', '/')}.py{m[2]}", text)
    return text, problems


def rewrite_patch(text: str, rel: str) -> tuple[str, list[str]]:
    """A patch's lines one for one, its `diff --git`, `index`, `---` and `+++` headers left as they are."""
    out, problems = [], []
    for line in text.split("\n"):
        if line.startswith(("diff --git ", "index ", "--- a/", "+++ b/", "--- /dev/null", "+++ /dev/null")):
            out.append(line)
            continue
        new, found = rewrite_text(line, rel, patch=True)
        out.append(new)
        problems += found
    return "\n".join(out), problems


def folder_inits(root: Path) -> list[str]:
    """The `__init__.py` of each folder that receives a module: a docstring only, so the package stays lazy."""
    made = []
    for folder, doc in FOLDERS.items():
        if not any(dest.startswith(folder + ".") for dest in MOVES.values()):
            continue
        path = root / PACKAGE / folder / "__init__.py"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            wrapped = _wrap(doc)
            path.write_text(f'{LICENSE}"""\n{wrapped}\n"""\n', encoding="utf-8")
            made.append(str(path.relative_to(root)))
    return made


def stack_inits(root: Path, dry_run: bool) -> list[str]:
    """Each new folder's `__init__.py` goes upstream in the `tools/pr_stack.toml` entry of the folder's first file."""
    path, added = root / STACK, []
    if not path.is_file():
        return added
    text = path.read_text(encoding="utf-8")
    for folder in FOLDERS:
        init = f"{PACKAGE}/{folder}/__init__.py"
        first = re.search(rf'^([^\S\n]*)"{re.escape(PACKAGE)}/{folder}/\w+\.py",?[^\S\n]*$', text, re.M)
        if init in text or not first:
            continue
        text = text[: first.start()] + f'{first[1]}"{init}",\n' + text[first.start() :]
        added.append(init)
    if added and not dry_run:
        path.write_text(text, encoding="utf-8")
    return added


def refresh_patches(root: Path) -> list[str]:
    """Re-sorts the imports the renames unsorted in the upstream files our patches change, commit by commit, and
    re-exports the patches (`make fork`, a tree filter per commit, `make export`): the index lines and hunks are then
    git's own, and `make fork` + `make export` is a no-op on them."""
    fork = root / "fork"
    if fork.exists():
        return ["fork/ exists (it may hold work): the patches' import order and index lines are left; run again "
                "without fork/, or sort the imports in fork/ by hand, then `make export`"]  # fmt: skip
    sys.path.insert(0, str(root / "tools"))
    import patchset  # noqa: PLC0415 (the repo's own tool, found only once the checkout is known)

    config = patchset.upstream_pyproject(patchset.read_config(root))
    touched = set()
    for patch in (root / "patches").glob("*.patch"):
        touched.update(re.findall(r"^diff --git a/(\S+\.py) ", patch.read_text(encoding="utf-8"), re.M))
    ruff = f"{sys.executable} -m ruff check -q --no-cache --select I --fix --config {config}"
    script = f"for f in {' '.join(sorted(touched))}; do [ -f $f ] && {ruff} $f; done; true"
    env = {**os.environ, "FILTER_BRANCH_SQUELCH_WARNING": "1"}
    try:
        subprocess.run([sys.executable, "tools/patchset.py", "fork"], cwd=root, check=True, capture_output=True)
        version = patchset.read_config(root).upstream_version
        subprocess.run(
            ["git", "filter-branch", "-f", "--tree-filter", script, f"upstream/{version}..HEAD"],
            cwd=fork, env=env, check=True, capture_output=True,
        )  # fmt: skip
        subprocess.run([sys.executable, "tools/patchset.py", "export"], cwd=root, check=True, capture_output=True)
    except subprocess.CalledProcessError as error:
        return [
            f"re-exporting the patches failed ({' '.join(map(str, error.cmd[:3]))}): {error.stderr.decode()[-400:]}"
        ]
    finally:
        shutil.rmtree(fork, ignore_errors=True)
    return []


def tidy(root: Path, files: list[str]) -> list[str]:
    """Sorts the rewritten imports and formats the rewritten Python files with the repo's ruff, when one is there."""
    files = sorted({f for f in files if f.endswith(".py") and (root / f).is_file()})
    for ruff in ([sys.executable, "-m", "ruff"], [str(root / ".venv/bin/python"), "-m", "ruff"], ["ruff"]):
        try:
            if subprocess.run([*ruff, "--version"], cwd=root, capture_output=True).returncode:
                continue
        except OSError:
            continue
        if files:
            subprocess.run([*ruff, "check", "-q", "--select", "I", "--fix", *files], cwd=root, capture_output=True)
            subprocess.run([*ruff, "format", "-q", *files], cwd=root, capture_output=True)
        return []
    return [f"no ruff found: run `ruff check --select I --fix` and `ruff format` on {len(files)} rewritten files"]


def _wrap(text: str, width: int = 119) -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join(lines + [line])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    args = parser.parse_args(argv)
    root = Path(git(Path.cwd(), "rev-parse", "--show-toplevel").strip())
    tracked = [rel for rel in git(root, "ls-files", "-z").split("\0") if rel and rel != SELF]
    moves = {rel: new_rel(rel) for rel in tracked if new_rel(rel) != rel}
    clash = [new for new in moves.values() if (root / new).exists()]
    if clash:
        print(f"refusing: these destinations exist already: {', '.join(clash)}", file=sys.stderr)
        return 1
    changed, problems = [], []
    for rel in tracked:
        path = root / rel
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = text
        if rel.startswith("src/transformers/") and rel.endswith(".py"):
            new, found = rewrite_relative(new, rel, moves.get(rel, rel))
            problems += found
        new, found = (rewrite_patch if rel.startswith("patches/") else rewrite_text)(new, rel)
        problems += found
        if new != text:
            changed.append(rel)
            if not args.dry_run:
                path.write_text(new, encoding="utf-8")
    if not args.dry_run:
        made = folder_inits(root)
        for old, new in moves.items():
            git(root, "mv", old, new)
        if made:
            git(root, "add", *made)
        problems += tidy(root, [moves.get(rel, rel) for rel in changed] + made)
        if any(rel.startswith("patches/") for rel in changed):
            problems += refresh_patches(root)
    stacked = stack_inits(root, args.dry_run)
    for init in stacked:
        print(f"stack    {init} joins the {STACK} entry of its folder's first file")
    for old, new in moves.items():
        print(f"move     {old} -> {new}")
    for rel in sorted(set(changed)):
        print(f"rewrite  {rel}")
    for problem in problems:
        print(f"by hand  {problem}")
    if not moves and not changed and not stacked:
        print("nothing to do: the layout is in place")
    return 0


if __name__ == "__main__":
    sys.exit(main())
