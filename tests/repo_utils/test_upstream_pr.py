# Copyright 2026 The HuggingFace Team. All rights reserved. Licensed under the Apache License, Version 2.0.
"""
Tests of `tools/upstream_pr.py` (`make pr`, `make rebase`), fork-only: they never reach the upstream pull requests.

`make pr` runs against a synthetic upstream clone: the pinned sdist (upstream's `src/`, `setup.py`, `pyproject.toml`)
plus hand-written upstream-shaped stand-ins for the files the sdist lacks (tests/repo_utils/upstream_fixtures.py),
never files derived from our own edits. Our side is a scratch git checkout of this repository's tracked files.
`make rebase` runs on a copy of this repository's patch set, onto fake "releases" made from the pinned wheel.
"""

import base64
import csv
import dataclasses
import email
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile
from pathlib import Path
from unittest import mock


HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(HERE))

import patchset as ps  # noqa: E402
import upstream_edits  # noqa: E402
import upstream_fixtures  # noqa: E402
import upstream_pr  # noqa: E402


CONFIG = ps.read_config(REPO)
PIN = CONFIG.upstream_version
BASE = f"v{PIN}"
FORK_ONLY_PREFIXES = ("tools/", "patches/", ".ci/", "benchmarks/", "examples/", "fork/")
FORK_ONLY_FILES = ("pyproject.toml", "README.md", "CONTRIBUTING.md", "MANIFEST.in", "LICENSE")  # setup.py: upstream's
ENV = {
    "GIT_AUTHOR_NAME": "upstream",
    "GIT_AUTHOR_EMAIL": "upstream@localhost",
    "GIT_COMMITTER_NAME": "upstream",
    "GIT_COMMITTER_EMAIL": "upstream@localhost",
}
USER = ("Ada Lovelace", "ada@example.com")


def git(cwd, *args, check=True):
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **ENV})
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


def silent(*args, **kwargs):
    pass


def pinned_wheel() -> Path:
    return ps.cached_upstream_wheel(PIN, CONFIG.pins["wheel"])


def patch_subject(path: Path) -> str:
    header = path.read_bytes().split(b"\ndiff --git ", 1)[0]
    subject = email.message_from_bytes(header)["Subject"]
    subject = " ".join(subject.split())
    return subject.removeprefix("[PATCH] ")


def patch_paths(path: Path) -> list[str]:
    return [line[6:] for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("+++ b/")]


def preimages(path: Path) -> dict[str, list[list[str]]]:
    """Per file, the lines each hunk of a patch expects to find (context and removed lines)."""
    result: dict[str, list[list[str]]] = {}
    current = None
    hunk = None
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("diff --git "):
            current, hunk = None, None
        elif line.startswith("+++ b/"):
            current = line[6:]
            result[current] = []
        elif line.startswith("@@") and current is not None:
            hunk = []
            result[current].append(hunk)
        elif hunk is not None and line[:1] in (" ", "-"):
            hunk.append(line[1:])
    return result


def first_change_anchor(path: Path) -> tuple[str, str]:
    """The file of a patch's first hunk and the context line right before that hunk's first change."""
    current = None
    previous = None
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("+++ b/"):
            current = line[6:]
        elif line.startswith("@@"):
            previous = None
        elif current and line[:1] == " ":
            previous = line[1:]
        elif current and line[:1] in ("+", "-") and previous is not None:
            return current, previous
    raise AssertionError(f"{path.name}: no change after a context line")


def clone_state(clone: Path) -> dict:
    """Everything `make pr` must leave as it was when it fails."""
    return {
        "head": git(clone, "rev-parse", "HEAD"),
        "symbolic": git(clone, "symbolic-ref", "-q", "HEAD", check=False),
        "refs": git(clone, "for-each-ref", "--format=%(refname) %(objectname)"),
        "status": git(clone, "status", "--porcelain", "--untracked-files=all", "--ignored"),
        "worktrees": git(clone, "worktree", "list", "--porcelain"),
        "stash": git(clone, "stash", "list"),
    }


def snapshot_repo(dest: Path) -> Path:
    """A git checkout at `dest` of this repository's tracked files (working-tree content), committed."""
    dest.mkdir(parents=True)
    for rel in ps.tracked_files(REPO):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, dest / rel)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "snapshot")
    return dest


def synthetic_upstream(dest: Path) -> Path:
    """Upstream at the pin: the pinned sdist's files plus the hand-written stand-ins, committed and tagged."""
    sdist = ps.cached_upstream_sdist(PIN, CONFIG.pins["sdist"])
    top = f"transformers-{PIN}/"
    dest.mkdir(parents=True)
    with tarfile.open(sdist) as tf:
        for member in tf.getmembers():
            if not member.isfile() or not member.name.startswith(top):
                continue
            rel = member.name[len(top) :]
            if rel == "PKG-INFO" or rel.startswith("src/transformers.egg-info/") or rel == "setup.cfg":
                continue
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(tf.extractfile(member).read())
    for rel, text in upstream_fixtures.CURRENT.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text, encoding="utf-8")
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", f"Release: v{PIN}")
    git(dest, "tag", BASE)
    return dest


def series_files() -> set[str]:
    """The wheel paths (`transformers/...`) that `patches/series` modifies."""
    return {
        rel.removeprefix("src/")
        for name in ps.check_series(REPO / "patches")
        for rel in patch_paths(REPO / "patches" / name)
    }


def fake_release(dest_dir: Path, version: str, edit=None) -> Path:
    """A wheel made from the pinned wheel: renamed to `version`, files changed by `edit(name, data)`.

    To keep the tests fast it holds only the package's top-level modules and the files the series patches (all the
    build machinery reads), not the whole 2,800-file package.
    """
    keep = series_files()
    with zipfile.ZipFile(pinned_wheel()) as zf:
        old_info = next(n.split("/")[0] for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        new_info = f"transformers-{version}.dist-info"
        entries = {}
        for name in zf.namelist():
            if name.endswith("/") or name.endswith("/RECORD"):
                continue
            if name.startswith("transformers/") and name.count("/") > 1 and name not in keep:
                continue
            data = zf.read(name)
            if name == f"{old_info}/METADATA":
                data = data.replace(f"Version: {PIN}\n".encode(), f"Version: {version}\n".encode(), 1)
            elif name.startswith("transformers/") and edit is not None:
                data = edit(name, data)
            entries[name.replace(old_info, new_info, 1)] = data
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    for name, data in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([name, f"sha256={digest}", len(data)])
    writer.writerow([f"{new_info}/RECORD", "", ""])
    dest_dir.mkdir(parents=True, exist_ok=True)
    wheel = dest_dir / f"transformers-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
        zf.writestr(f"{new_info}/RECORD", rows.getvalue())
    return wheel


def fake_sdist(dest_dir: Path, version: str) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    path = dest_dir / f"transformers-{version}.tar.gz"
    data = f"[project]\nname = 'transformers'\nversion = '{version}'\n".encode()
    with tarfile.open(path, "w:gz") as tf:
        info = tarfile.TarInfo(f"transformers-{version}/pyproject.toml")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return path


_SHARED: dict = {}


def shared_fixtures() -> tuple[Path, Path]:
    """The synthetic upstream and the snapshot of our repository, built once for the module (both read-only)."""
    if "tmp" not in _SHARED:
        tmp = Path(tempfile.mkdtemp(prefix="test-upstream-pr-shared-"))
        _SHARED.update(tmp=tmp, origin=synthetic_upstream(tmp / "origin"), root=snapshot_repo(tmp / "ours"))
    return _SHARED["origin"], _SHARED["root"]


def user_clone(dest: Path) -> Path:
    """A clone of the synthetic upstream with the user's git identity."""
    git(dest.parent, "clone", "-q", str(shared_fixtures()[0]), str(dest))
    git(dest, "config", "user.name", USER[0])
    git(dest, "config", "user.email", USER[1])
    return dest


def shared_plan() -> "upstream_pr.Plan":
    """`plan_stack` of the snapshot, once for the module (tests only read it)."""
    if "plan" not in _SHARED:
        _SHARED["plan"] = upstream_pr.plan_stack(shared_fixtures()[1])
    return _SHARED["plan"]


def shared_stack() -> tuple[Path, dict, "upstream_pr.PrResult"]:
    """A clone in which `make pr` built the real stack from the snapshot, once for the module: the clone, its state
    before `make pr`, and the result. Tests read it; one that changes it copies it."""
    if "stack" not in _SHARED:
        clone = user_clone(shared_fixtures()[0].parent / "stack-clone")
        before = clone_state(clone)
        result = upstream_pr.make_pr(clone, BASE, root=shared_fixtures()[1], log=silent)
        _SHARED["stack"] = (clone, before, result)
    return _SHARED["stack"]


def refusing_clone() -> Path:
    """A clone shared by the tests whose `make pr` is refused before any branch exists: each of them checks that the
    clone is left as it was."""
    if "refusing" not in _SHARED:
        _SHARED["refusing"] = user_clone(shared_fixtures()[0].parent / "refusing-clone")
    return _SHARED["refusing"]


def tearDownModule():
    if _SHARED:
        shutil.rmtree(_SHARED["tmp"], ignore_errors=True)


# the marker the stack refuses, spelled so that this file does not carry it
MARKER_LOWER = "upstream" + "-pr:"
MARKER_TITLE = "Upstream" + "-PR:"
MARKER_UPPER = "UPSTREAM" + "-PR:"


class StackTestBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="test-upstream-pr-"))
        cls.origin, cls.root = shared_fixtures()
        cls.plan = shared_plan()
        cls.counter = 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def new_clone(self) -> Path:
        type(self).counter += 1
        return user_clone(self.tmp / f"clone{self.counter}")

    def own_root(self) -> Path:
        """A snapshot of our repository this test may change."""
        type(self).counter += 1
        root = self.tmp / f"ours{self.counter}"
        git(self.tmp, "clone", "-q", str(self.root), str(root))
        return root

    def commit_drift(self, clone: Path, rel: str, old: str, new: str) -> None:
        """A commit on the clone's main branch that changes `old` into `new` in `rel` (upstream moved on)."""
        path = clone / rel
        text = path.read_text(encoding="utf-8")
        self.assertIn(old, text)
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        git(clone, "commit", "-q", "-am", f"upstream drift in {rel}")

    def make_pr(self, clone: Path, base: str = BASE, root: Path | None = None, **kwargs):
        return upstream_pr.make_pr(clone, base, root=root or self.root, log=silent, **kwargs)


class StackTest(StackTestBase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.clone, cls.before, cls.result = shared_stack()
        cls.branches = {b.name: b for b in cls.result.branches}

    def diff_names(self, a: str, b: str) -> set[str]:
        return set(git(self.clone, "diff", "--name-only", a, b).splitlines())

    def show(self, ref: str, rel: str) -> bytes:
        return subprocess.run(["git", "show", f"{ref}:{rel}"], cwd=self.clone, capture_output=True, check=True).stdout

    def test_one_branch_per_non_empty_entry_each_on_the_one_before(self):
        entries = [e for e in self.plan.entries if not e.is_empty]
        self.assertEqual([b.branch for b in self.result.branches], [e.branch for e in entries])
        self.assertGreaterEqual(len(entries), 4)
        parent = git(self.clone, "rev-parse", BASE).strip()
        for b in self.result.branches:
            tip = git(self.clone, "rev-parse", b.branch).strip()
            self.assertEqual(git(self.clone, "merge-base", parent, tip).strip(), parent, b.branch)
            added, removed = 0, 0
            for line in git(self.clone, "diff", "--numstat", parent, tip).splitlines():
                plus, minus, _ = line.split("\t", 2)
                added, removed = added + int(plus), removed + int(minus)
            self.assertEqual((b.added, b.removed), (added, removed), b.branch)
            parent = tip
        # the clone's own checkout is untouched
        after = clone_state(self.clone)
        self.assertEqual(after["head"], self.before["head"])
        self.assertEqual(after["status"], "")
        self.assertEqual(after["worktrees"], self.before["worktrees"])
        printed = upstream_pr.format_stack(self.result)
        for b in self.result.branches:
            self.assertIn(b.branch, printed)
            self.assertIn(f"+{b.added}", printed)

    def test_each_branch_holds_its_entry(self):
        parent = BASE
        for entry in self.plan.entries:
            if entry.branch not in [b.branch for b in self.result.branches]:
                continue
            changed = self.diff_names(parent, entry.branch)
            last = self.result.branches[-1].branch
            for rel in entry.files:
                # each file wholly in its entry's branch, as it is here, and unchanged by every later branch
                self.assertIn(rel, changed, entry.branch)
                self.assertEqual(self.show(entry.branch, rel), (self.root / rel).read_bytes(), rel)
                self.assertEqual(self.show(last, rel), (self.root / rel).read_bytes(), rel)
            for patch in entry.patches:
                for rel in patch_paths(patch):
                    self.assertIn(rel, changed, f"{entry.branch}: {patch.name}")
            for name in entry.spec.edits:
                self.assertIn(upstream_edits.EDITS[name].path, changed, f"{entry.branch}: {name}")
            subjects = git(self.clone, "log", "--reverse", "--format=%s", f"{parent}..{entry.branch}").splitlines()
            self.assertEqual(subjects[: len(entry.patches)], [patch_subject(p) for p in entry.patches])
            parent = entry.branch

    def test_every_branch_imports_alone_and_passes_upstream_ruff(self):
        # each PR of the real stack on its own: the package star-imports from the branch's src/ (a module that needs
        # a later PR's fails here) and upstream's ruff passes on what it adds; `make pr-test` runs the branches' tests
        log = []
        results = upstream_pr.test_stack(self.clone, root=self.root, log=log.append, run_tests=False)
        self.assertEqual(list(results), [b.branch for b in self.result.branches])
        self.assertEqual([branch for branch, rc in results.items() if rc], [], "\n".join(log))

    def test_patched_upstream_files_equal_the_strict_build(self):
        last = self.result.branches[-1].branch
        upstream = ps.upstream_from_wheel(pinned_wheel(), PIN, CONFIG.pins["wheel"])
        names = ps.check_series(self.root / "patches")
        for rel, data in ps.patched_files(upstream, names, self.root / "patches", self.root / "src").items():
            self.assertEqual(self.show(last, f"src/{rel}"), data, rel)

    def branch(self, name: str) -> str:
        return next(b.branch for b in self.result.branches if b.name == name)

    def test_upstream_edits_land_in_their_pull_request(self):
        first, last = self.branch("config"), self.result.branches[-1].branch
        self.assertIn('"trained_precision",', self.show(first, "utils/check_config_attributes.py").decode())
        self.assertIn(
            '"trained_precision": "bf16",', self.show(first, "tests/utils/test_configuration_utils.py").decode()
        )
        # the guide's first page, and its toctree entry, come right after the package's stamp (the lineage extension)
        guide = next(b.branch for b in self.result.branches if b.branch.endswith("-audit"))
        self.assertNotIn("trained_precision", self.show(first, "docs/source/en/_toctree.yml").decode())
        self.assertIn("- local: trained_precision", self.show(guide, "docs/source/en/_toctree.yml").decode())
        # every other page comes with the PR that ships what it documents, and the last branch lists them in order
        registry = next(b.branch for b in self.result.branches if b.branch.endswith("-registry"))
        toc = self.show(registry, "docs/source/en/_toctree.yml").decode()
        self.assertIn("- local: trained_precision_registry\n", toc)
        self.assertNotIn("- local: trained_precision\n", toc)
        toc = self.show(last, "docs/source/en/_toctree.yml").decode()
        pages = [page for page, _ in upstream_edits.TOC_PAGES]
        listed = [line.split(":", 1)[1].strip() for line in toc.splitlines() if line.strip().startswith("- local:")]
        self.assertEqual([page for page in listed if page in pages], pages)
        for page in pages:
            self.assertTrue(self.show(last, f"docs/source/en/{page}.md"), page)
        self.assertNotIn("trained_precision", self.show(first, "Makefile").decode())
        makefile_diff = git(self.clone, "diff", BASE, last, "--", "Makefile")
        self.assertEqual(
            [ln for ln in makefile_diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")],
            ["+\ttrained_precision, \\"],
        )
        # upstream's dependency style: no extra, no `_deps` entry, no dependency table row for any integration
        self.assertNotIn("setup.py", self.diff_names(BASE, last))
        self.assertNotIn("src/transformers/dependency_versions_table.py", self.diff_names(BASE, last))

    def test_the_bug_fixes_come_first_each_alone_with_its_test(self):
        fixes = self.result.branches[:3]
        self.assertEqual(
            [b.name for b in fixes], ["fix-stable-adamw", "fix-torchao-block-size", "torchao-4bit-default"]
        )
        self.assertEqual(
            self.diff_names(BASE, fixes[0].branch),
            {"src/transformers/trainer_optimizer.py", "tests/trainer/test_trainer_optimizer_stable_adamw.py"},
        )
        self.assertEqual(
            self.diff_names(fixes[0].branch, fixes[1].branch),
            {"src/transformers/trainer_optimizer.py", "tests/trainer/test_trainer_optimizer_torchao.py"},
        )
        # each one alone on the release: the second fix's diff is the same whether or not the first is merged
        alone = git(
            self.clone, "diff", fixes[0].branch, fixes[1].branch, "--", "src/transformers/trainer_optimizer.py"
        )
        self.assertIn('+            "block_size": int(ctx.optim_args.get("block_size", 256)),', alone)
        self.assertNotIn("strtobool(kahan_sum)", alone)
        # the 4-bit default, which changes what existing runs compute, is its own pull request
        self.assertEqual(
            self.diff_names(fixes[1].branch, fixes[2].branch),
            {"src/transformers/trainer_optimizer.py", "tests/trainer/test_trainer_optimizer_torchao_defaults.py"},
        )
        fix = git(self.clone, "diff", BASE, fixes[0].branch, "--", "src/transformers/trainer_optimizer.py")
        self.assertIn("+        kahan_sum = bool(strtobool(kahan_sum))", fix)

    def test_descriptions_are_written_per_branch(self):
        self.assertEqual(len(self.result.descriptions), len(self.result.branches))
        for b, path in zip(self.result.branches, self.result.descriptions):
            self.assertEqual(path.name, f"{b.branch}.md")
            text = path.read_text(encoding="utf-8")
            for section in ("## Motivation", "## With nothing turned on", "## Measured", "## What to review first"):
                self.assertIn(section, text, path)
            self.assertIn(f"+{b.added} -{b.removed}", text)
            self.assertNotRegex(text, r"\bfork\b")
        names = [b.name for b in self.result.branches]
        core = self.result.descriptions[names.index("config")].read_text()
        self.assertIn("The RFC thread's questions", core)
        self.assertIn('trained_precision_check="ignore"', core)
        self.assertIn('trained_precision_check="error"', core)
        self.assertNotIn("TRANSFORMERS_TRAINED_PRECISION_CHECK", core)  # the core's opt-in error is one keyword
        # once: the later core pull requests do not repeat the thread's block
        for name in ("check", "stamp", "published-precisions"):
            self.assertNotIn("The RFC thread's questions", self.result.descriptions[names.index(name)].read_text())
        fix = self.result.descriptions[0].read_text()
        self.assertNotIn("model card", fix)

    def test_first_pull_request_has_no_cli_registry_or_pure_bf16_code(self):
        first = self.branch("config")
        changed = self.diff_names(self.branch("torchao-4bit-default"), first)
        for rel in changed:
            self.assertNotRegex(
                rel, r"(registry|check_trained_precision|populate|cli|inspection|audit|optimizers|pure_bf16)\.py$"
            )
        self.assertNotIn("src/transformers/cli/transformers.py", changed)
        self.assertNotIn("src/transformers/trainer_optimizer.py", changed)

    def test_nothing_fork_only_and_no_binary(self):
        changed = self.diff_names(BASE, self.result.branches[-1].branch)
        for rel in changed:
            self.assertFalse(rel.startswith(FORK_ONLY_PREFIXES), rel)
            self.assertNotIn(rel, FORK_ONLY_FILES)
            self.assertNotIn(rel, ("tests/repo_utils/test_upstream_pr.py", "tests/repo_utils/upstream_fixtures.py"))
            self.assertFalse(rel.endswith((".png", ".jpg")), rel)
        self.assertNotIn(b"patchset", self.show(self.result.branches[-1].branch, "setup.py"))  # upstream's, edited
        numstat = git(self.clone, "diff", "--numstat", BASE, self.result.branches[-1].branch)
        self.assertNotIn("-\t-\t", numstat)  # git's mark of a binary file

    def test_commits_are_the_users(self):
        log = git(self.clone, "log", "--format=%an <%ae>|%cn <%ce>", f"{BASE}..{self.result.branches[-1].branch}")
        self.assertEqual(set(log.splitlines()), {f"{USER[0]} <{USER[1]}>|{USER[0]} <{USER[1]}>"})
        messages = git(self.clone, "log", "--format=%B", f"{BASE}..{self.result.branches[-1].branch}")
        for trailer in ("Forwarded:", "Upstream-only:", "Notice:"):
            self.assertNotIn(trailer, messages)


class StackFailureTest(StackTestBase):
    def test_second_run_is_refused(self):
        # a copy of the clone `make pr` built the module's stack in (StackTest checks that stack)
        clone = self.tmp / "second-run-clone"
        subprocess.run(["cp", "-a", str(shared_stack()[0]), str(clone)], check=True)
        before = clone_state(clone)
        self.assertIn(f"refs/heads/{shared_stack()[2].branches[0].branch} ", before["refs"])
        with self.assertRaisesRegex(upstream_pr.PrError, "already exists"):
            self.make_pr(clone)
        self.assertEqual(clone_state(clone), before)

    def test_upstream_drift_around_the_anchors_is_followed(self):
        # New entries next to every anchor: a line-number patch would need an offset (or fail); the rules do not.
        clone = self.new_clone()
        self.commit_drift(clone, "Makefile", "\tconfig_attributes, \\\n", "\tnew_check, \\\n\tconfig_attributes, \\\n")
        self.commit_drift(
            clone,
            "utils/check_config_attributes.py",
            '    "transformers_version",\n',
            '    "new_base_attr",\n    "transformers_version",\n',
        )
        self.commit_drift(
            clone,
            "tests/utils/test_configuration_utils.py",
            '    "return_dict": False,\n',
            '    "new_kwarg": 1,\n    "return_dict": False,\n',
        )
        self.commit_drift(
            clone,
            "docs/source/en/_toctree.yml",
            "    - local: models\n",
            "    - local: new_page\n      title: New\n    - local: models\n",
        )
        result = self.make_pr(clone, "HEAD")
        first = result.branches[0].branch
        guide = next(b.branch for b in result.branches if b.branch.endswith("-audit"))
        toc = git(clone, "show", f"{guide}:docs/source/en/_toctree.yml")
        self.assertIn("    - local: models\n      title: Loading models\n    - local: trained_precision\n", toc)
        self.assertIn('    "new_kwarg": 1,', git(clone, "show", f"{first}:tests/utils/test_configuration_utils.py"))

    def test_missing_anchor_fails_cleanly_naming_it(self):
        # Fails in the second pull request, after the first branch was built: everything is rolled back.
        clone = self.new_clone()
        (clone / "Makefile").write_text(upstream_fixtures.MAKEFILE_NO_ANCHOR, encoding="utf-8")
        git(clone, "commit", "-q", "-am", "upstream rewrote its Makefile")
        before = clone_state(clone)
        with self.assertRaises(upstream_pr.PrError) as ctx:
            self.make_pr(clone, "HEAD")
        message = str(ctx.exception)
        self.assertIn("makefile-checker", message)
        self.assertIn("Makefile: anchor not found", message)
        self.assertIn("REPO_CONSISTENCY_CHECKERS", message)
        self.assertEqual(clone_state(clone), before)

    def test_mismatching_src_patch_fails_cleanly(self):
        clone = self.new_clone()
        first = upstream_pr.src_patches(self.root)[0]
        rel, hunks = next(iter(preimages(first).items()))
        block = "\n".join(hunks[0]) + "\n"
        changed = "\n".join([hunks[0][0] + "  # upstream changed this line", *hunks[0][1:]]) + "\n"
        self.commit_drift(clone, rel, block, changed)
        before = clone_state(clone)
        with self.assertRaises(upstream_pr.PrError) as ctx:
            self.make_pr(clone, "HEAD")
        message = str(ctx.exception)
        self.assertIn(first.name, message)
        self.assertIn(rel, message)
        self.assertIn("hunk #1", message)
        self.assertEqual(clone_state(clone), before)

    def test_existing_file_with_other_content_fails_cleanly(self):
        clone = self.new_clone()
        page = clone / "docs" / "source" / "en" / "trained_precision.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("# Upstream wrote its own page\n", encoding="utf-8")
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-m", "upstream page")
        before = clone_state(clone)
        with self.assertRaisesRegex(upstream_pr.PrError, "docs/source/en/trained_precision.md"):
            self.make_pr(clone, "HEAD")
        self.assertEqual(clone_state(clone), before)

    def test_unknown_base_fails_cleanly(self):
        clone = refusing_clone()
        before = clone_state(clone)
        with self.assertRaisesRegex(upstream_pr.PrError, "v99.0.0"):
            self.make_pr(clone, "v99.0.0")
        self.assertEqual(clone_state(clone), before)

    def test_no_git_identity_is_refused(self):
        clone = self.tmp / "anonymous-clone"
        git(self.tmp, "clone", "-q", str(self.origin), str(clone))
        home = self.tmp / "empty-home"
        home.mkdir(exist_ok=True)
        before = clone_state(clone)
        env = {"HOME": str(home), "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        with mock.patch.dict(os.environ, env):
            for key in ENV:
                os.environ.pop(key, None)
            with self.assertRaisesRegex(upstream_pr.PrError, "user.name/user.email"):
                self.make_pr(clone)
        self.assertEqual(clone_state(clone), before)

    def test_strict_refuses_a_stack_with_warnings(self):
        # a module no test of its PR reaches: refused with STRICT=1 before any branch exists, built without it
        root = tiny_root(self.tmp / "strict", TINY_TABLE, {f"{PKG}/__init__.py": "", f"{PKG}/a.py": "a = 1\nb = 2\n"})
        clone = self.new_clone()
        before = clone_state(clone)
        with self.assertRaisesRegex(upstream_pr.PrError, "(?s)STRICT.*a.py is not reached by any test"):
            self.make_pr(clone, root=root, strict=True)
        self.assertEqual(clone_state(clone), before)
        self.assertEqual([b.number for b in self.make_pr(clone, root=root).branches], [1])

    def test_a_stack_over_budget_is_refused_without_strict(self):
        table = TINY_TABLE.replace('title = "One"', 'title = "One"\nmax-lines = 1')
        root = tiny_root(self.tmp / "budget", table, {f"{PKG}/__init__.py": "", f"{PKG}/a.py": "a = 1\nb = 2\n"})
        clone = refusing_clone()
        before = clone_state(clone)
        with self.assertRaisesRegex(upstream_pr.PrError, "(?s)breaks its rules.*over its budget of 1"):
            self.make_pr(clone, root=root)
        self.assertEqual(clone_state(clone), before)

    def test_a_stack_over_budget_as_built_is_refused_and_its_branches_removed(self):
        # an edit that changes more lines than it declares (here the Trainer guide's paragraph, 7, declared as 1)
        # passes the estimate; the branch as built is over its budget
        table = TINY_TABLE.replace('title = "One"', 'title = "One"\nmax-lines = 3\nedits = ["trainer-docs"]')
        root = tiny_root(self.tmp / "built", table, {f"{PKG}/__init__.py": "", f"{PKG}/a.py": "a = 1\nb = 2\n"})
        understated = dataclasses.replace(upstream_edits.EDITS["trainer-docs"], lines=1)
        clone = refusing_clone()
        before = clone_state(clone)
        with mock.patch.dict(upstream_edits.EDITS, {"trainer-docs": understated}):
            self.assertEqual(upstream_pr.plan_stack(root).errors, [])
            with self.assertRaisesRegex(upstream_pr.PrError, "(?s)branches as built break.*about 9 changed lines"):
                self.make_pr(clone, root=root)
        self.assertEqual(clone_state(clone), before)
        self.assertRegex("\n".join(upstream_pr.plan_stack(root).errors), "about 9 changed lines, over its budget of 3")

    def test_a_region_marker_is_refused_before_any_branch_exists(self):
        files = {f"{PKG}/__init__.py": "", f"{PKG}/a.py": f"a = 1  # {MARKER_LOWER} two\n"}
        root = tiny_root(self.tmp / "marker", TINY_TABLE, files)
        clone = refusing_clone()
        before = clone_state(clone)
        with self.assertRaisesRegex(upstream_pr.PrError, f"(?s)breaks its rules.*{PKG}/a.py:1: says `{MARKER_LOWER}`"):
            self.make_pr(clone, root=root)
        self.assertEqual(clone_state(clone), before)

    def test_the_real_stack_is_ready_for_review(self):
        # no error and no warning: every entry within its budget, whole (no tests-only PR, no link, import or config
        # read of a later PR, every module reached by its own PR's tests); what STRICT=1 sends
        self.assertEqual(self.plan.errors, [])
        self.assertEqual(self.plan.warnings, [])
        # the RFC itself is small: at most five entries, within their budgets together and the first on its own
        core = [e for e in self.plan.entries if e.spec.name in self.plan.table.rfc_core]
        self.assertLessEqual(len(core), upstream_pr.RFC_CORE_MAX_ENTRIES)
        self.assertLessEqual(sum(e.estimated_lines for e in core), self.plan.table.rfc_core_max_lines)
        self.assertLessEqual(core[0].estimated_lines, self.plan.table.rfc_first_max_lines)
        upstream_pr.check(self.root)  # raises on any error


class TrackedOnlyTest(StackTestBase):
    def test_dirty_tree_is_refused(self):
        root = self.own_root()
        target = root / "src" / "transformers" / "trained_precision" / "vocabulary.py"
        target.write_text(target.read_text(encoding="utf-8") + "# local edit\n", encoding="utf-8")
        clone = refusing_clone()
        before = clone_state(clone)
        with self.assertRaisesRegex(
            upstream_pr.PrError, "uncommitted changes.*src/transformers/trained_precision/vocabulary.py"
        ):
            self.make_pr(clone, root=root)
        self.assertEqual(clone_state(clone), before)

    def test_untracked_files_are_left_out_and_named(self):
        # a small stack (the tool is the same for any): were untracked files candidates, `tests/*` of its second entry
        # would take notes.txt, and .env would be in no entry
        root = tiny_root(self.tmp / "untracked", TINY_TABLE, {f"{PKG}/__init__.py": "", f"{PKG}/a.py": "A = 1\n"})
        secrets = ["src/transformers/trained_precision/.env", "tests/utils/notes.txt"]
        for rel in secrets:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text("HF_TOKEN=hf_not_a_real_token\n", encoding="utf-8")
        clone = self.new_clone()
        result = self.make_pr(clone, root=root)
        self.assertEqual([b.branch for b in result.branches], ["trained-precision-1-one"])
        self.assertEqual(result.left_out, sorted(secrets))
        printed = upstream_pr.format_stack(result)
        for rel in secrets:
            self.assertIn(f"left out (untracked): {rel}", printed)
        changed = git(clone, "diff", "--name-only", BASE, result.branches[-1].branch).splitlines()
        for rel in secrets:
            self.assertNotIn(rel, changed)


def tiny_root(dest: Path, table: str, files: dict[str, str]) -> Path:
    """A repository with no patches, the given stack table and files, committed."""
    (dest / "patches").mkdir(parents=True)
    (dest / "patches" / "series").write_text("", encoding="utf-8")
    (dest / "tools").mkdir()
    (dest / "tools" / "pr_stack.toml").write_text(table, encoding="utf-8")
    shutil.copyfile(REPO / "pyproject.toml", dest / "pyproject.toml")
    for rel, text in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text, encoding="utf-8")
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "tiny")
    return dest


PKG = "src/transformers/trained_precision"
TINY_TABLE = """
fork-only = ["tests/repo_utils/test_tooling.py"]
[[pr]]
name = "one"
title = "One"
files = ["{pkg}/__init__.py", "{pkg}/a.py"]
[[pr]]
name = "two"
title = "Two"
files = ["{pkg}/b*.py", "tests/*"]
""".replace("{pkg}", PKG)


class TableTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="test-stack-table-"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_unassigned_file_is_an_error_naming_it(self):
        files = {f"{PKG}/__init__.py": "", f"{PKG}/a.py": "", f"{PKG}/c.py": "x = 1\n"}
        root = tiny_root(self.tmp / "r", TINY_TABLE, files)
        with self.assertRaisesRegex(upstream_pr.PrError, rf"{PKG}/c.py is in no entry of tools/pr_stack.toml"):
            upstream_pr.plan_stack(root)

    def test_file_in_two_entries_is_an_error(self):
        table = TINY_TABLE.replace(f'"{PKG}/b*.py"', f'"{PKG}/b*.py", "{PKG}/a.py"')
        root = tiny_root(self.tmp / "r", table, {f"{PKG}/__init__.py": "", f"{PKG}/a.py": ""})
        with self.assertRaisesRegex(upstream_pr.PrError, rf"{PKG}/a.py matches several entries .*: one, two"):
            upstream_pr.plan_stack(root)

    def test_unknown_edit_is_an_error(self):
        table = TINY_TABLE + 'edits = ["toc"]\n'
        root = tiny_root(self.tmp / "r", table, {f"{PKG}/__init__.py": "", f"{PKG}/a.py": ""})
        with self.assertRaisesRegex(upstream_pr.PrError, "unknown edit 'toc'.*toctree"):
            upstream_pr.plan_stack(root)

    def test_binary_file_is_an_error(self):
        root = self.tmp / "r"
        tiny_root(root, TINY_TABLE, {f"{PKG}/__init__.py": "", f"{PKG}/a.py": ""})
        (root / "docs/source/en/imgs").mkdir(parents=True)
        (root / "docs/source/en/imgs/plot.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "png")
        with self.assertRaisesRegex(upstream_pr.PrError, "docs/source/en/imgs/plot.png is a binary file"):
            upstream_pr.plan_stack(root)

    def test_fork_only_and_marker_files_are_not_candidates(self):
        files = {
            f"{PKG}/__init__.py": "",
            f"{PKG}/a.py": "",
            "tests/repo_utils/test_tooling.py": "",
            "tests/test_demo.py": f"# {upstream_pr.FORK_ONLY_MARKER}\n",
            "tests/test_b.py": "",
            "README.md": "",
            "tools/x.py": "",
        }
        root = tiny_root(self.tmp / "r", TINY_TABLE, files)
        plan = upstream_pr.plan_stack(root)
        self.assertEqual([e.files for e in plan.entries], [[f"{PKG}/__init__.py", f"{PKG}/a.py"], ["tests/test_b.py"]])

    def test_import_of_a_later_entry_is_reported(self):
        files = {
            f"{PKG}/__init__.py": "",
            f"{PKG}/a.py": "def f():\n    from .b import g\n    return g()\n",
            f"{PKG}/b.py": "def g():\n    return 1\n",
            "tests/test_b.py": "from transformers.trained_precision.b import g\n",
        }
        root = tiny_root(self.tmp / "r", TINY_TABLE, files)
        later = [w for w in upstream_pr.plan_stack(root).warnings if "comes later" in w]
        self.assertEqual(len(later), 1, later)
        self.assertIn(f"{PKG}/a.py imports trained_precision.b, which comes later (trained-precision-2-two)", later[0])

    def test_modules_of_a_sub_package_are_named_by_their_dotted_path(self):
        # a folder of the package holds modules of several entries: each file is its own module
        table = TINY_TABLE.replace(
            '"{pkg}/a.py"]'.replace("{pkg}", PKG), f'"{PKG}/a.py", "{PKG}/f/__init__.py", "{PKG}/f/c.py"]'
        )
        table = table.replace(f'"{PKG}/b*.py"', f'"{PKG}/b*.py", "{PKG}/f/d.py"')
        files = {
            f"{PKG}/__init__.py": "",
            f"{PKG}/a.py": "",
            f"{PKG}/f/__init__.py": "",
            f"{PKG}/f/c.py": "from ..a import x\nfrom . import d\n",
            f"{PKG}/f/d.py": "from .c import y\n",
            f"{PKG}/b.py": "from .f.c import y\n",
            "tests/test_b.py": "from transformers.trained_precision.f.c import y\n",
        }
        later = [w for w in upstream_pr.plan_stack(tiny_root(self.tmp / "r", table, files)).warnings if "later" in w]
        self.assertEqual(len(later), 1, later)
        self.assertIn(
            f"{PKG}/f/c.py imports trained_precision.f.d, which comes later (trained-precision-2-two)", later[0]
        )

    def test_import_of_a_later_integration_module_is_reported(self):
        # our training glue beside upstream's integrations: `a` (PR one) reaches `integrations/b_glue.py` (PR two)
        table = TINY_TABLE.replace('"tests/*"]', '"tests/*", "src/transformers/integrations/b_glue.py"]')
        files = {
            f"{PKG}/__init__.py": "",
            f"{PKG}/a.py": "def f():\n    from ..integrations.b_glue import g\n    return g()\n",
            "src/transformers/integrations/b_glue.py": "from ..trained_precision.a import f\n",
        }
        plan = upstream_pr.plan_stack(tiny_root(self.tmp / "r", table, files))
        later = [w for w in plan.warnings if "comes later" in w]
        self.assertEqual(len(later), 1, later)
        self.assertIn(f"{PKG}/a.py imports integrations.b_glue, which comes later", later[0])

    def test_over_budget_is_an_error_and_fork_words_a_warning(self):
        table = TINY_TABLE.replace('title = "One"', 'title = "One"\nmax-lines = 3')
        files = {f"{PKG}/__init__.py": "# Copyright the fork authors\n", f"{PKG}/a.py": "a = 1\nb = 2\nc = 3\n"}
        root = tiny_root(self.tmp / "r", table, files)
        plan = upstream_pr.plan_stack(root)
        self.assertTrue(any("about 4 changed lines, over its budget of 3" in e for e in plan.errors), plan.errors)
        self.assertTrue(any(f"'fork' (upstream has none) at {PKG}/__init__.py:1" in w for w in plan.warnings))
        with self.assertRaisesRegex(upstream_pr.PrError, "(?s)the stack breaks its rules.*over its budget of 3"):
            upstream_pr.check(root)

    def test_a_make_target_of_this_repository_is_a_warning(self):
        """Upstream's contributors have no `make check` or `make pr`: an upstream-bound file names the script instead."""
        files = {
            f"{PKG}/__init__.py": "",
            f"{PKG}/a.py": "# `make check` runs it, as `make test` and `make check-repo` do upstream\n",
            f"{PKG}/b.py": "# make pr-test, then make demo\n",
            "Makefile": "X := 1\n.PHONY: check pr-test demo\ncheck: venv\n\ttrue\npr-test demo: X = 2\ntest:\n\ttrue\n",
        }
        plan = upstream_pr.plan_stack(tiny_root(self.tmp / "r", TINY_TABLE, files))
        self.assertEqual(upstream_pr.fork_make_targets(self.tmp / "r"), ["check", "demo", "pr-test"])
        found = [w for w in plan.warnings if "make target of this repository only" in w]
        self.assertEqual(len(found), 2, plan.warnings)
        self.assertIn(
            f"one: a make target of this repository only (upstream's Makefile has "
            f"none): `make check` at {PKG}/a.py:1;",
            found[0],
        )
        self.assertIn(f"`make pr-test` at {PKG}/b.py:1, `make demo` at {PKG}/b.py:1", found[1])
        with self.assertRaisesRegex(upstream_pr.PrError, "(?s)make target of this repository only.*STRICT"):
            upstream_pr.check(self.tmp / "r", strict=True)

    def test_no_upstream_bound_file_names_a_make_target_of_this_repository(self):
        """The pages and files that go upstream (every docs/source/en page is in a pull request) name no `make check`."""
        self.assertIn("check", upstream_pr.fork_make_targets(REPO))
        self.assertIn("pr", upstream_pr.fork_make_targets(REPO))
        self.assertNotIn("test", upstream_pr.fork_make_targets(REPO))  # upstream's Makefile has `make test` too
        entries = [
            upstream_pr.Entry(i, spec, [], []) for i, spec in enumerate(upstream_pr.load_table(REPO).entries, 1)
        ]
        for entry in entries:
            entry.branch = entry.spec.name
        upstream_pr._place_all(REPO, upstream_pr.load_table(REPO), entries)
        pages = {rel for entry in entries for rel in entry.files if rel.startswith("docs/source/en/")}
        self.assertTrue(pages)
        found = [w for w in upstream_pr._fork_words(REPO, entries) if "make target of this repository only" in w]
        self.assertEqual(found, [])

    def test_no_waiver_of_a_budget_or_of_a_forward_read(self):
        # the rules have no exceptions: a table that asks for one is refused, naming the key
        for key in ('over-budget = "split next"', 'forward-reads = ["my_flag"]'):
            table = TINY_TABLE.replace('title = "One"', f'title = "One"\n{key}')
            root = tiny_root(self.tmp / f"r{len(key)}", table, {f"{PKG}/__init__.py": "", f"{PKG}/a.py": ""})
            with self.assertRaisesRegex(upstream_pr.PrError, f"unknown keys: {key.split(' ')[0]}"):
                upstream_pr.plan_stack(root)

    def test_check_strict_fails_on_a_warning(self):
        root = tiny_root(self.tmp / "r", TINY_TABLE, {f"{PKG}/__init__.py": "", f"{PKG}/a.py": "a = 1\n"})
        self.assertIn("a.py is not reached by any test", upstream_pr.check(root))  # a warning: check passes
        with self.assertRaisesRegex(upstream_pr.PrError, "(?s)a.py is not reached by any test.*STRICT"):
            upstream_pr.check(root, strict=True)

    def test_no_budget_above_the_ceiling(self):
        table = TINY_TABLE.replace('title = "One"', 'title = "One"\nmax-lines = 2500')
        plan = upstream_pr.plan_stack(tiny_root(self.tmp / "r", table, {f"{PKG}/__init__.py": "", f"{PKG}/a.py": ""}))
        self.assertTrue(any("max-lines = 2500 is above the ceiling of 2000" in e for e in plan.errors), plan.errors)
        with self.assertRaisesRegex(upstream_pr.PrError, "max-lines-ceiling = 3000"):
            upstream_pr.plan_stack(tiny_root(self.tmp / "r2", "max-lines-ceiling = 3000\n" + TINY_TABLE, {}))

    def core_plan(self, name: str, top: str, sizes: list[int], first_budget: int | None = 250):
        """A stack of `len(sizes)` entries p0, p1, ... each holding one module of that many lines, under `top`."""
        entries = "".join(
            f'[[pr]]\nname = "p{i}"\ntitle = "P{i}"\nfiles = ["{PKG}/m{i}.py"]\n' for i in range(len(sizes))
        )
        if first_budget is not None:
            entries = entries.replace('title = "P0"', f'title = "P0"\nmax-lines = {first_budget}')
        files = {f"{PKG}/m{i}.py": "x = 1\n" * n for i, n in enumerate(sizes)}
        return upstream_pr.plan_stack(tiny_root(self.tmp / name, top + entries, files))

    def test_rfc_core_in_at_most_five_entries(self):
        plan = self.core_plan("r", 'rfc-core = ["p0", "p1", "p2", "p3", "p4", "p5"]\n', [1, 1, 1, 1, 1, 1])
        self.assertEqual(
            [e for e in plan.errors if "rfc-core holds" in e],
            [
                "rfc-core holds 6 entries (p0 ~1, p1 ~1, p2 ~1, p3 ~1, p4 ~1, p5 ~1): the RFC itself (the field, the "
                "load check and its error switch, the stamp, its repo check) fits in at most 5 pull requests"
            ],
        )
        plan = self.core_plan("r2", 'rfc-core = ["p0", "p1", "p2", "p3", "p4"]\n', [1, 1, 1, 1, 1])
        self.assertEqual(plan.errors, [])
        with self.assertRaisesRegex(upstream_pr.PrError, "rfc-core names entries that do not exist: nope"):
            self.core_plan("r3", 'rfc-core = ["nope"]\n', [1])

    def test_rfc_core_within_1000_lines_together(self):
        # entries outside the core (p3) do not count
        plan = self.core_plan("r", 'rfc-core = ["p0", "p1", "p2"]\n', [200, 400, 401, 1500])
        self.assertEqual(
            plan.errors,
            [
                "rfc-core has about 1001 changed lines (p0 ~200, p1 ~400, p2 ~401), over its budget of 1000 "
                "(rfc-core-max-lines in tools/pr_stack.toml): move what is not the RFC itself into extension entries"
            ],
        )
        self.assertEqual(self.core_plan("r2", 'rfc-core = ["p0", "p1", "p2"]\n', [200, 400, 400, 1500]).errors, [])
        # the table may lower the budget
        plan = self.core_plan("r3", 'rfc-core = ["p0", "p1"]\nrfc-core-max-lines = 500\n', [200, 301])
        self.assertEqual(len(plan.errors), 1, plan.errors)
        self.assertIn(
            "rfc-core has about 501 changed lines (p0 ~200, p1 ~301), over its budget of 500", plan.errors[0]
        )

    def test_rfc_core_first_entry_within_250_lines(self):
        plan = self.core_plan("r", 'rfc-core = ["p1", "p0"]\n', [251, 1])
        self.assertEqual(
            [e for e in plan.errors if "RFC" in e],
            [
                "trained-precision-1-p0: the RFC's first pull request (p0) has about 251 changed lines, over its budget "
                "of 250 (rfc-core-first-max-lines in tools/pr_stack.toml)"
            ],
        )
        # the first entry's own budget may not allow more either (the ceiling, when it sets none)
        for name, budget, allowed in (("r2", 300, 300), ("r3", None, 2000)):
            plan = self.core_plan(name, 'rfc-core = ["p0"]\n', [10], first_budget=budget)
            self.assertEqual(
                plan.errors,
                [
                    f"trained-precision-1-p0: the RFC's first pull request (p0) is allowed {allowed} changed lines: it "
                    "needs max-lines <= 250 (rfc-core-first-max-lines in tools/pr_stack.toml)"
                ],
            )
        # the table may lower the budget (the entry's own max-lines too, or it is allowed more than the core's first)
        plan = self.core_plan("r4", 'rfc-core = ["p0"]\nrfc-core-first-max-lines = 100\n', [101], first_budget=100)
        core = [e for e in plan.errors if "RFC" in e]
        self.assertEqual(len(core), 1, plan.errors)
        self.assertIn("(p0) has about 101 changed lines, over its budget of 100", core[0])

    def test_rfc_core_budgets_may_be_lowered_never_raised(self):
        for key, default in (("rfc-core-max-lines", 1000), ("rfc-core-first-max-lines", 250)):
            for value in (default + 1, 0, '"500"'):
                with self.assertRaisesRegex(upstream_pr.PrError, rf"{key} = .*at most {default} changed lines"):
                    self.core_plan(f"r-{key}-{value}".replace('"', ""), f"{key} = {value}\n", [1])

    def test_a_tests_only_entry_is_an_error(self):
        files = {f"{PKG}/__init__.py": "", f"{PKG}/a.py": "", "tests/test_b.py": "import unittest\n"}
        plan = upstream_pr.plan_stack(tiny_root(self.tmp / "r", TINY_TABLE, files))
        self.assertEqual(
            [e for e in plan.errors if "tests only" in e],
            [
                "trained-precision-2-two: holds tests only (tests/test_b.py): a pull request ships the code it tests; "
                "move these tests into the entry of the code they test"
            ],
        )

    def test_a_module_no_test_of_its_entry_reaches_is_reported(self):
        # b.py is tested directly, c.py only through b.py (reached), d.py by nothing in its entry
        table = TINY_TABLE.replace('"{pkg}/b*.py", "tests/*"'.replace("{pkg}", PKG), f'"{PKG}/[bcd].py", "tests/*"')
        files = {
            f"{PKG}/__init__.py": "",
            f"{PKG}/a.py": "",
            f"{PKG}/b.py": "from .c import C\n",
            f"{PKG}/c.py": "C = 1\n",
            f"{PKG}/d.py": "D = 1\n",
            "tests/test_b.py": "from transformers.trained_precision.b import C\n",
        }
        plan = upstream_pr.plan_stack(tiny_root(self.tmp / "r", table, files))
        untested = [w for w in plan.warnings if "is not reached by any test" in w]
        self.assertEqual(len(untested), 2, untested)  # a.py (entry one has no test) and d.py
        self.assertTrue(any(f"{PKG}/a.py" in w for w in untested) and any(f"{PKG}/d.py" in w for w in untested))

    def test_doc_links_must_resolve_within_the_branch(self):
        table = TINY_TABLE.replace(
            f'files = ["{PKG}/__init__.py", "{PKG}/a.py"]',
            f'files = ["{PKG}/__init__.py", "{PKG}/a.py", "docs/source/en/trained_precision_one.md"]',
        ).replace('"tests/*"]', '"tests/*", "docs/source/en/trained_precision_two.md"]')
        files = {
            f"{PKG}/__init__.py": "",
            # a docstring renders one level below docs/source/en: `../page` is a guide page
            f"{PKG}/a.py": '"""See [the guide](../trained_precision_two#usage) and [one](../trained_precision_one)."""\n',
            "docs/source/en/trained_precision_one.md": (
                "[two](./trained_precision_two) [missing](./trained_precision_nope) [trainer](./main_classes/trainer)"
                " [web](https://huggingface.co/docs) [here](#usage)\n"
            ),
            "docs/source/en/trained_precision_two.md": "[one](./trained_precision_one.md#top)\n",
        }
        plan = upstream_pr.plan_stack(tiny_root(self.tmp / "r", table, files))
        links = sorted(e for e in plan.errors if " links " in e)
        self.assertEqual(len(links), 3, plan.errors)
        self.assertIn(
            f"trained-precision-1-one: {PKG}/a.py:1 links ../trained_precision_two#usage "
            "(docs/source/en/trained_precision_two.md), which arrives later (trained-precision-2-two)",
            "\n".join(links),
        )
        self.assertIn("docs/source/en/trained_precision_one.md:1 links ./trained_precision_two (", "\n".join(links))
        self.assertIn(
            "./trained_precision_nope: docs/source/en/trained_precision_nope.md does not exist", "\n".join(links)
        )
        self.assertTrue(any("upstream's docs/source/en/main_classes/trainer.md" in n for n in plan.notes))

    def test_config_attributes_read_must_exist_upstream_or_in_the_branch(self):
        files = {
            f"{PKG}/__init__.py": "",
            f"{PKG}/a.py": (
                'PLAN_FIELD = "my_plan"\n\n\ndef f(config):\n'
                "    return config.hidden_size, config.my_flag, getattr(config, PLAN_FIELD, None), config.my_value\n\n\n"
                "def g(model):\n    model.config.my_value = 1\n"
            ),
            f"{PKG}/b.py": "def h(config):\n    setattr(config, 'my_flag', True)\n",
        }
        plan = upstream_pr.plan_stack(tiny_root(self.tmp / "r", TINY_TABLE, files))
        reads = sorted(e for e in plan.errors if "reads config attribute" in e)
        # hidden_size is upstream's, my_value is written in the branch, my_plan is a key the branch declares
        self.assertEqual(len(reads), 1, plan.errors)
        self.assertIn(f"{PKG}/a.py:5 reads config attribute 'my_flag', which upstream's configs do not have (first "
                      "written in trained-precision-2-two)", reads[0])  # fmt: skip

    def test_region_markers_are_refused_naming_file_and_line(self):
        # the stack is cut by files and patches only: a marker anywhere upstream-bound fails `check`, whatever its case
        table = TINY_TABLE.replace('"tests/*"]', '"tests/*", "docs/source/en/trained_precision.md"]')
        files = {
            f"{PKG}/__init__.py": "",
            f"{PKG}/a.py": f"A = 1\n# {MARKER_LOWER} two\nB = 2\n# {MARKER_LOWER} end\n",
            f"{PKG}/b.py": f"from .a import A  # {MARKER_TITLE} two\n",
            "tests/test_b.py": "from transformers.trained_precision.b import A\n",
            "docs/source/en/trained_precision.md": f"# Guide\n\n<!-- {MARKER_UPPER} two -->\n",
            # fork-only files are never upstream-bound
            "tests/repo_utils/test_tooling.py": f"MARKER = '# {MARKER_LOWER} two'\n",
            "tools/notes.py": f"# {MARKER_LOWER} two\n",
        }
        root = tiny_root(self.tmp / "r", table, files)
        plan = upstream_pr.plan_stack(root)
        refused = [e for e in plan.errors if f"{MARKER_LOWER}" in e]
        self.assertEqual(
            [e.split(": says", 1)[0] for e in refused],
            [f"{PKG}/a.py:2", f"{PKG}/a.py:4", "docs/source/en/trained_precision.md:3", f"{PKG}/b.py:1"],
            plan.errors,
        )
        for error in refused:
            self.assertIn("the stack is cut by files and patches only", error)
        with self.assertRaisesRegex(
            upstream_pr.PrError, rf"(?s)breaks its rules.*{PKG}/a.py:2: says `{MARKER_LOWER}`"
        ):
            upstream_pr.check(root)

    def test_a_region_marker_added_by_a_patch_is_refused(self):
        root = self.tmp / "r"
        tiny_root(
            root,
            TINY_TABLE.replace('title = "One"', 'title = "One"\npatches = ["x-*"]'),
            {f"{PKG}/__init__.py": "", f"{PKG}/a.py": ""},
        )
        patch = (
            "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n"
            f"{MARKER_LOWER} in the message is not in a file\n---\n"
            "diff --git a/src/transformers/trainer.py b/src/transformers/trainer.py\n"
            "--- a/src/transformers/trainer.py\n+++ b/src/transformers/trainer.py\n"
            f"@@ -1,1 +1,2 @@\n import os\n+import sys  # {MARKER_LOWER} two\n"
        )
        (root / "patches" / "0001-x-marker.patch").write_text(patch, encoding="utf-8")
        (root / "patches" / "series").write_text("0001-x-marker.patch\n", encoding="utf-8")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "patch")
        refused = [e for e in upstream_pr.plan_stack(root).errors if f"{MARKER_LOWER}" in e]
        self.assertEqual([e.split(": says", 1)[0] for e in refused], ["patches/0001-x-marker.patch:11"])


STACK_TEST_TABLE = """
[[pr]]
name = "one"
title = "One"
files = ["{pkg}/__init__.py", "{pkg}/a.py", "tests/trained_precision/test_a.py"]
[[pr]]
name = "two"
title = "Two"
files = ["{pkg}/b.py", "tests/trained_precision/test_b.py"]
""".replace("{pkg}", PKG)


class StackTestsTest(StackTestBase):
    def test_each_branch_runs_its_own_tests_on_its_own_source(self):
        # a.py (first PR) imports b.py (second PR): the first branch's tests fail on their own, the second's pass
        files = {
            f"{PKG}/__init__.py": "",
            f"{PKG}/a.py": "from .b import VALUE\n\n\nDOUBLE = 2 * VALUE\n",
            f"{PKG}/b.py": "VALUE = 21\n",
            "tests/trained_precision/test_a.py": (
                "import unittest\n\nfrom transformers.trained_precision.a import DOUBLE\n\n\n"
                "class A(unittest.TestCase):\n    def test_double(self):\n        self.assertEqual(DOUBLE, 42)\n"
            ),
            "tests/trained_precision/test_b.py": (
                "import unittest\n\nimport transformers\nfrom transformers.trained_precision.b import VALUE\n\n\n"
                "class B(unittest.TestCase):\n    def test_value(self):\n        self.assertEqual(VALUE, 21)\n\n"
                '    def test_runs_on_the_branch(self):\n        self.assertIn("worktree", transformers.__file__)\n'
            ),
        }
        root = tiny_root(self.tmp / "tiny-stack", STACK_TEST_TABLE, files)
        clone = self.new_clone()
        result = self.make_pr(clone, root=root)
        self.assertEqual([b.branch for b in result.branches], ["trained-precision-1-one", "trained-precision-2-two"])
        log = []
        results = upstream_pr.test_stack(clone, root=root, log=log.append)
        self.assertEqual(list(results), ["trained-precision-1-one", "trained-precision-2-two"])
        self.assertNotEqual(results["trained-precision-1-one"], 0, "\n".join(log))
        self.assertEqual(results["trained-precision-2-two"], 0, "\n".join(log))
        self.assertIn("No module named 'transformers.trained_precision.b'", "\n".join(log))

    def test_each_branch_star_imports_the_package_and_passes_upstream_ruff(self):
        # the first PR's lazy __init__ names a module of the second: its star import fails; the second PR's b.py
        # breaks one of upstream's ruff rules (PLW1514, open without an encoding) that ours do not enforce
        lazy_init = (
            "import importlib\n\n\n_LAZY = {'read': 'b'}\n\n\ndef __getattr__(name):\n"
            "    return getattr(importlib.import_module(f'.{_LAZY[name]}', __name__), name)\n\n\n__all__ = [*_LAZY]\n"
        ).replace("'", '"')
        files = {
            f"{PKG}/__init__.py": lazy_init,
            f"{PKG}/a.py": "VALUE = 21\n",
            f"{PKG}/b.py": "def read(path):\n    with open(path) as f:\n        return f.read()\n",
        }
        table = STACK_TEST_TABLE.replace(', "tests/trained_precision/test_a.py"', "").replace(
            ', "tests/trained_precision/test_b.py"', ""
        )
        root = tiny_root(self.tmp / "tiny-star", table, files)
        clone = self.new_clone()
        self.make_pr(clone, root=root)
        log = []
        results = upstream_pr.test_stack(clone, root=root, log=log.append)
        text = "\n".join(log)
        self.assertEqual(results, {"trained-precision-1-one": 1, "trained-precision-2-two": 1}, text)
        self.assertIn("trained-precision-1-one: FAILED (star import): star import, ruff", text)
        self.assertIn("No module named 'transformers.trained_precision.b'", text)
        self.assertIn("trained-precision-2-two: FAILED (ruff)", text)
        self.assertIn("PLW1514", text)


class UpstreamLintTest(unittest.TestCase):
    """`upstream_pr.py lint`: ruff with the pinned sdist's configuration, not ours."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="test-upstream-lint-"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def lint(self, source: str) -> tuple[int, str]:
        root = tiny_root(
            self.tmp / f"r{len(list(self.tmp.iterdir()))}",
            TINY_TABLE,
            {f"{PKG}/__init__.py": "", f"{PKG}/a.py": source},
        )
        out = []
        return upstream_pr.lint(root, log=out.append), "\n".join(out)

    def test_upstream_rules_apply(self):
        # PLW1514 (preview rule, on in upstream's config) and C416 are not in our own rule set
        code, out = self.lint("def f(path):\n    with open(path) as f:\n        return [x for x in f]\n")
        self.assertEqual(code, 1, out)
        self.assertIn("PLW1514", out)
        self.assertIn("C416", out)
        code, out = self.lint('def f(path):\n    with open(path, encoding="utf-8") as f:\n        return list(f)\n')
        self.assertEqual(code, 0, out)
        self.assertIn("pass ruff with upstream's configuration", out)

    def test_everything_that_goes_upstream_passes_upstream_ruff(self):
        # every branch of the stack holds a subset of these files, so each passes when this passes
        out = []
        self.assertEqual(upstream_pr.lint(REPO, log=out.append), 0, "\n".join(out))


class RebaseTest(unittest.TestCase):
    """`make rebase` on a copy of this repository's patch set, onto fake releases built from the pinned wheel."""

    @classmethod
    def setUpClass(cls):
        cls.wheels = Path(tempfile.mkdtemp(prefix="test-rebase-wheels-"))
        cls.old_wheel = fake_release(cls.wheels / "old", PIN)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.wheels, ignore_errors=True)

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="test-rebase-"))
        self.root = self.tmp / "repo"
        (self.root / "patches").mkdir(parents=True)
        shutil.copyfile(REPO / "pyproject.toml", self.root / "pyproject.toml")
        for path in [REPO / "patches" / "series", *(REPO / "patches").glob("*.patch")]:
            shutil.copyfile(path, self.root / "patches" / path.name)
        for rel in ps.tracked_files(REPO):
            if rel.startswith("src/") or rel == upstream_pr.STACK_TABLE:
                (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(REPO / rel, self.root / rel)
        git(self.root, "init", "-q")
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", "scratch")
        self.names = ps.check_series(self.root / "patches")
        first = self.root / "patches" / self.names[0]
        self.patched_rel, hunks = next(iter(preimages(first).items()))
        self.first_hunk = hunks[0]
        self.first_patch = first.read_bytes()

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_rebase_onto_release_with_unrelated_change(self):
        # The new release adds one comment line at the top of a file the series patches: every hunk moves by one.
        target = self.patched_rel.removeprefix("src/")

        def edit(name, data):
            return b"# A line added upstream in the new release.\n" + data if name == target else data

        wheel = fake_release(self.tmp, "5.23.1", edit)
        sdist = fake_sdist(self.tmp, "5.23.1")
        names = upstream_pr.rebase(
            "5.23.1",
            root=self.root,
            upstream_wheel=wheel,
            old_upstream_wheel=self.old_wheel,
            upstream_sdist=sdist,
            log=silent,
        )

        config = ps.read_config(self.root)
        self.assertEqual(config.upstream_version, "5.23.1")
        # the sha256 pins now name the new release's files, and are checked on use
        self.assertEqual(config.pins, {**ps.wheel_pins(wheel), "sdist": ps.file_sha256(sdist)})
        self.assertNotEqual(config.pins["wheel"], CONFIG.pins["wheel"])
        ps.upstream_from_wheel(wheel, "5.23.1", config.pins["wheel"])
        with self.assertRaisesRegex(ps.PatchsetError, "is not the pinned wheel sha256"):
            ps.upstream_from_wheel(self.old_wheel, PIN, config.pins["wheel"])
        # the stack still places every patch after the rebase
        plan = upstream_pr.plan_stack(self.root)
        self.assertEqual(sorted(p.name for e in plan.entries for p in e.patches), sorted(names))
        self.assertEqual(ps.check_series(self.root / "patches"), names)
        self.assertEqual(len(names), len(self.names))
        # The exported patches apply exactly (the build's strict rule) to the new release, not to the old one.
        new_upstream = ps.upstream_from_wheel(wheel, "5.23.1")
        ps.patched_files(new_upstream, names, self.root / "patches", self.root / "src")
        with self.assertRaises(ps.PatchsetError):
            ps.patched_files(
                ps.upstream_from_wheel(self.old_wheel, PIN), names, self.root / "patches", self.root / "src"
            )
        # Same change, hunk headers one line later.
        old_lines = self.first_patch.decode().splitlines()
        new_lines = (self.root / "patches" / names[0]).read_text().splitlines()
        self.assertEqual(len(old_lines), len(new_lines))
        moved = [(a, b) for a, b in zip(old_lines, new_lines) if a != b]
        self.assertTrue(moved)
        for a, b in moved:
            self.assertTrue(a.startswith(("@@", "index ")), (a, b))
        # fork/ was rebuilt on the new upstream with one commit per patch.
        fork = self.root / "fork"
        self.assertEqual(len(git(fork, "rev-list", "upstream/5.23.1..patches").split()), len(names))
        self.assertEqual(git(fork, "rev-parse", "upstream/5.23.1^"), git(fork, "rev-parse", f"upstream/{PIN}"))
        self.assertEqual(git(fork, "status", "--porcelain", "--untracked-files=no"), "")

    def test_conflict_stops_naming_the_patch(self):
        # The new release inserts its own line where the first patch inserts ours: git cannot merge the two.
        # Only the first patch, so that retiring it below cannot make later patches conflict too.
        for name in self.names[1:]:
            (self.root / "patches" / name).unlink()
        (self.root / "patches" / "series").write_text(f"{self.names[0]}\n")
        rel, anchor = first_change_anchor(self.root / "patches" / self.names[0])
        target = rel.removeprefix("src/")

        def edit(name, data):
            if name != target:
                return data
            return data.replace((anchor + "\n").encode(), (anchor + "\n# upstream's own new line\n").encode(), 1)

        wheel = fake_release(self.tmp, "5.23.2", edit)
        sdist = fake_sdist(self.tmp, "5.23.2")
        pyproject = (self.root / "pyproject.toml").read_bytes()
        patches = {p.name: p.read_bytes() for p in (self.root / "patches").iterdir()}
        with self.assertRaises(upstream_pr.PrError) as ctx:
            upstream_pr.rebase(
                "5.23.2",
                root=self.root,
                upstream_wheel=wheel,
                old_upstream_wheel=self.old_wheel,
                upstream_sdist=sdist,
                log=silent,
            )
        message = str(ctx.exception)
        self.assertIn(f"patches/{self.names[0]}", message)
        self.assertIn(self.patched_rel, message)
        self.assertIn("git rebase --continue", message)
        self.assertIn("make rebase VERSION=5.23.2", message)
        # Nothing in the repository changed; fork/ waits in the middle of the rebase.
        self.assertEqual((self.root / "pyproject.toml").read_bytes(), pyproject)
        self.assertEqual({p.name: p.read_bytes() for p in (self.root / "patches").iterdir()}, patches)
        self.assertIn(self.patched_rel, git(self.root / "fork", "diff", "--name-only", "--diff-filter=U"))
        # Running it again before the conflict is resolved is refused with the same instructions.
        with self.assertRaisesRegex(upstream_pr.PrError, "not finished"):
            upstream_pr.rebase("5.23.2", root=self.root, upstream_wheel=wheel, upstream_sdist=sdist, log=silent)

        # Following the instructions: here the patch is retired (`git rebase --skip`), then `make rebase` resumes.
        fork = self.root / "fork"
        git(fork, "rebase", "--skip")
        log = []
        names = upstream_pr.rebase(
            "5.23.2", root=self.root, upstream_wheel=wheel, upstream_sdist=sdist, log=log.append
        )
        self.assertNotIn(self.names[0], names)
        # the retired patch's line in the stack table is pointed out, not silently kept
        self.assertTrue(any("matches nothing" in line for line in log), log)
        self.assertFalse((self.root / "patches" / self.names[0]).exists())
        self.assertEqual(ps.check_series(self.root / "patches"), names)
        self.assertEqual(ps.read_config(self.root).upstream_version, "5.23.2")
        ps.patched_files(ps.upstream_from_wheel(wheel, "5.23.2"), names, self.root / "patches", self.root / "src")


if __name__ == "__main__":
    unittest.main()
