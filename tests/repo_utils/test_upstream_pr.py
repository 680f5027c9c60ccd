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
Tests of `tools/upstream_pr.py` (`make pr`, `make rebase`), fork-only: they never reach the upstream pull request.

`make pr` runs against a synthetic upstream clone built here: a git repo holding the pinned wheel's files under
`src/transformers/`, plus the upstream files that `patches/upstream/` edits (Makefile, utils/, tests/utils/, docs/),
written with the same context lines as upstream's. `make rebase` runs on a copy of this repository's patch set,
onto fake "releases" made from the pinned wheel with one upstream change each.
"""

import base64
import csv
import email
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import patchset as ps  # noqa: E402
import upstream_pr  # noqa: E402


PIN = ps.read_config(REPO).upstream_version
BASE = f"v{PIN}"
FORK_ONLY_PREFIXES = ("tools/", "patches/", ".ci/", "benchmarks/", "examples/", "fork/")
FORK_ONLY_FILES = (
    "setup.py",
    "pyproject.toml",
    "README.md",
    "CONTRIBUTING.md",
    "MANIFEST.in",
    "tests/repo_utils/test_upstream_pr.py",
    "tests/repo_utils/test_patchset.py",
)
ENV = {
    "GIT_AUTHOR_NAME": "upstream",
    "GIT_AUTHOR_EMAIL": "upstream@localhost",
    "GIT_COMMITTER_NAME": "upstream",
    "GIT_COMMITTER_EMAIL": "upstream@localhost",
}


def git(cwd, *args, check=True):
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **ENV})
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


def silent(*args, **kwargs):
    pass


def pinned_wheel() -> Path:
    return ps.cached_upstream_wheel(PIN)


def patch_subject(path: Path) -> str:
    header = path.read_bytes().split(b"\ndiff --git ", 1)[0]
    subject = email.message_from_bytes(header)["Subject"]
    subject = " ".join(subject.split())
    return subject.removeprefix("[PATCH] ")


def patch_paths(path: Path) -> list[str]:
    return [line[6:] for line in path.read_text().splitlines() if line.startswith("+++ b/")]


def preimages(path: Path) -> dict[str, list[list[str]]]:
    """Per file, the lines each hunk of a patch expects to find (context and removed lines)."""
    result: dict[str, list[list[str]]] = {}
    current = None
    hunk = None
    for line in path.read_text().split("\n"):
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
    for line in path.read_text().split("\n"):
        if line.startswith("+++ b/"):
            current = line[6:]
        elif line.startswith("@@"):
            previous = None
        elif current and line[:1] == " ":
            previous = line[1:]
        elif current and line[:1] in ("+", "-") and previous is not None:
            return current, previous
    raise AssertionError(f"{path.name}: no change after a context line")


def synthetic_upstream_files() -> dict[str, str]:
    """Upstream files outside the wheel, holding exactly the anchors that `patches/upstream/` edits."""
    files: dict[str, list[str]] = {}
    for patch in upstream_pr.upstream_patches(REPO):
        for rel, hunks in preimages(patch).items():
            if rel.startswith("src/"):
                continue
            lines = files.setdefault(rel, [f"# upstream {rel} (synthetic: only the anchors our patches use)", ""])
            for hunk in hunks:
                lines.extend(hunk)
                lines.extend(["", "# ... upstream content ...", ""])
    return {rel: "\n".join(lines) + "\n" for rel, lines in files.items()}


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


class UpstreamPrTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="test-upstream-pr-"))
        origin = cls.tmp / "origin"
        origin.mkdir()
        cls.wheel = fake_release(cls.tmp / "wheel", PIN)
        with zipfile.ZipFile(cls.wheel) as zf:
            for name in zf.namelist():
                if name.startswith("transformers/") and not name.endswith("/"):
                    out = origin / "src" / name
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(zf.read(name))
        for rel, text in synthetic_upstream_files().items():
            out = origin / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
        git(origin, "init", "-q", "-b", "main")
        git(origin, "add", "-A")
        git(origin, "commit", "-q", "-m", f"Release: v{PIN}")
        git(origin, "tag", BASE)
        cls.origin = origin
        cls.counter = 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def new_clone(self) -> Path:
        type(self).counter += 1
        clone = self.tmp / f"clone{self.counter}"
        git(self.tmp, "clone", "-q", str(self.origin), str(clone))
        return clone

    def commit_drift(self, clone: Path, rel: str, old: str, new: str) -> None:
        """A commit on the clone's main branch that changes `old` into `new` in `rel` (upstream moved on)."""
        path = clone / rel
        text = path.read_text()
        self.assertIn(old, text)
        path.write_text(text.replace(old, new, 1))
        git(clone, "commit", "-q", "-am", f"upstream drift in {rel}")

    def test_pr_branch_holds_the_series(self):
        clone = self.new_clone()
        before = clone_state(clone)
        result = upstream_pr.make_pr(clone, BASE, root=REPO, log=silent)

        branch = upstream_pr.DEFAULT_BRANCH
        self.assertIn(f"refs/heads/{branch}", git(clone, "for-each-ref", "--format=%(refname)"))
        # The clone's own checkout is untouched: HEAD, index and working tree stay on main.
        after = clone_state(clone)
        self.assertEqual(after["head"], before["head"])
        self.assertEqual(after["status"], "")
        self.assertEqual(after["worktrees"], before["worktrees"])

        # git log shows the series: our src patches, our new files, then the upstream-only patches.
        src = upstream_pr.src_patches(REPO)
        extra = upstream_pr.upstream_patches(REPO)
        self.assertGreaterEqual(len(extra), 4)
        subjects = git(clone, "log", "--reverse", "--format=%s", f"{BASE}..{branch}").splitlines()
        self.assertEqual(subjects, result.commits)
        self.assertEqual(subjects[: len(src)], [patch_subject(p) for p in src])
        self.assertEqual(subjects[len(subjects) - len(extra) :], [patch_subject(p) for p in extra])
        self.assertIn("Add transformers.trained_precision", subjects)
        self.assertIn("docs: add the trained precision guide", subjects)
        messages = git(clone, "log", "--format=%B", f"{BASE}..{branch}")
        self.assertNotIn("Forwarded:", messages)
        self.assertNotIn("Upstream-only:", messages)

        changed = set(git(clone, "diff", "--name-only", BASE, branch).splitlines())
        # Every feature: our package, tests, repo tools and docs page, byte for byte.
        expected_new = [
            p.relative_to(REPO).as_posix()
            for folder in ("src/transformers", "tests/trained_precision", "docs/source/en")
            for p in (REPO / folder).rglob("*")
            if p.is_file()
            and "__pycache__" not in p.parts
            and p.suffix != ".pyc"
            and upstream_pr.FORK_ONLY_MARKER.encode() not in p.read_bytes()[:2048]
        ]
        if (REPO / "utils" / "check_trained_precision.py").exists():
            expected_new.append("utils/check_trained_precision.py")
        self.assertIn("docs/source/en/trained_precision.md", expected_new)
        for rel in expected_new:
            self.assertIn(rel, changed)
            shown = subprocess.run(["git", "show", f"{branch}:{rel}"], cwd=clone, capture_output=True, check=True)
            self.assertEqual(shown.stdout, (REPO / rel).read_bytes(), rel)
        # The patched upstream files equal what the fork's strict build makes of them.
        upstream = ps.upstream_from_wheel(self.wheel, PIN)
        names = [p.name for p in src]
        for rel, data in ps.patched_files(upstream, names, REPO / "patches", REPO / "src").items():
            self.assertIn(f"src/{rel}", changed)
            shown = subprocess.run(["git", "show", f"{branch}:src/{rel}"], cwd=clone, capture_output=True, check=True)
            self.assertEqual(shown.stdout, data, rel)
        # The upstream-only edits.
        for patch in extra:
            for rel in patch_paths(patch):
                self.assertIn(rel, changed)
        self.assertIn("trained_precision", git(clone, "show", f"{branch}:Makefile"))
        self.assertIn(
            '"trained_precision": "bf16"', git(clone, "show", f"{branch}:tests/utils/test_configuration_utils.py")
        )
        self.assertIn('"trained_precision"', git(clone, "show", f"{branch}:utils/check_config_attributes.py"))
        self.assertIn("local: trained_precision", git(clone, "show", f"{branch}:docs/source/en/_toctree.yml"))
        # Nothing fork-only.
        for rel in changed:
            self.assertFalse(rel.startswith(FORK_ONLY_PREFIXES), rel)
            self.assertNotIn(rel, FORK_ONLY_FILES)
        makefile_diff = git(clone, "diff", BASE, branch, "--", "Makefile")
        self.assertNotIn("patchset", makefile_diff)
        self.assertEqual(
            [line for line in makefile_diff.splitlines() if line.startswith("+") and not line.startswith("+++")],
            ["+\ttrained_precision, \\"],
        )

    def test_second_run_is_refused(self):
        clone = self.new_clone()
        upstream_pr.make_pr(clone, BASE, root=REPO, log=silent)
        before = clone_state(clone)
        with self.assertRaisesRegex(upstream_pr.PrError, "already exists"):
            upstream_pr.make_pr(clone, BASE, root=REPO, log=silent)
        self.assertEqual(clone_state(clone), before)

    def test_mismatching_src_patch_fails_cleanly(self):
        clone = self.new_clone()
        first = upstream_pr.src_patches(REPO)[0]
        rel, hunks = next(iter(preimages(first).items()))
        block = "\n".join(hunks[0]) + "\n"
        changed = "\n".join([hunks[0][0] + "  # upstream changed this line", *hunks[0][1:]]) + "\n"
        self.commit_drift(clone, rel, block, changed)
        before = clone_state(clone)
        with self.assertRaises(upstream_pr.PrError) as ctx:
            upstream_pr.make_pr(clone, "HEAD", root=REPO, log=silent)
        message = str(ctx.exception)
        self.assertIn(first.name, message)
        self.assertIn(rel, message)
        self.assertIn("hunk #1", message)
        self.assertEqual(clone_state(clone), before)

    def test_mismatching_upstream_only_file_fails_cleanly(self):
        # Fails after the src patches and our new files were committed: all of it must be rolled back.
        clone = self.new_clone()
        makefile_patch = next(p for p in upstream_pr.upstream_patches(REPO) if "Makefile" in patch_paths(p))
        anchor = next(line for line in preimages(makefile_patch)["Makefile"][0] if line.strip())
        self.commit_drift(clone, "Makefile", anchor + "\n", "")
        before = clone_state(clone)
        with self.assertRaises(upstream_pr.PrError) as ctx:
            upstream_pr.make_pr(clone, "HEAD", root=REPO, log=silent)
        self.assertIn(makefile_patch.name, str(ctx.exception))
        self.assertIn("Makefile", str(ctx.exception))
        self.assertEqual(clone_state(clone), before)

    def test_existing_file_with_other_content_fails_cleanly(self):
        clone = self.new_clone()
        page = clone / "docs" / "source" / "en" / "trained_precision.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("# Upstream wrote its own page\n")
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-m", "upstream page")
        before = clone_state(clone)
        with self.assertRaisesRegex(upstream_pr.PrError, "docs/source/en/trained_precision.md"):
            upstream_pr.make_pr(clone, "HEAD", root=REPO, log=silent)
        self.assertEqual(clone_state(clone), before)

    def test_fork_only_files_are_left_out(self):
        root = self.tmp / "selection-root"
        files = {
            "src/transformers/trained_precision/x.py": "x = 1\n",
            "src/transformers/trained_precision/__pycache__/x.cpython-311.pyc": "",
            "tests/trained_precision/test_x.py": "pass\n",
            "tests/trained_precision/test_demo.py": f"# {upstream_pr.FORK_ONLY_MARKER}\npass\n",
            "tests/repo_utils/test_patchset.py": "pass\n",
            "tests/repo_utils/test_upstream_pr.py": "pass\n",
            "utils/check_trained_precision.py": "pass\n",
            "docs/source/en/trained_precision.md": "# Trained precision\n",
            "tools/patchset.py": "pass\n",
            "setup.py": "pass\n",
        }
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        selected = sorted(rel for group in upstream_pr.new_files(root).values() for rel in group)
        self.assertEqual(
            selected,
            [
                "docs/source/en/trained_precision.md",
                "src/transformers/trained_precision/x.py",
                "tests/trained_precision/test_x.py",
                "utils/check_trained_precision.py",
            ],
        )

    def test_check_validates_the_upstream_series(self):
        self.assertIn(f"{len(upstream_pr.upstream_patches(REPO))} upstream-only patches", upstream_pr.check(REPO))
        root = self.tmp / "check-root"
        shutil.copytree(REPO / "patches", root / "patches")
        (root / "patches" / "upstream" / "9999-stray.patch").write_text("not listed in series\n")
        with self.assertRaisesRegex(ps.PatchsetError, "9999-stray.patch is not listed"):
            upstream_pr.check(root)

    def test_unknown_base_fails_cleanly(self):
        clone = self.new_clone()
        before = clone_state(clone)
        with self.assertRaisesRegex(upstream_pr.PrError, "v99.0.0"):
            upstream_pr.make_pr(clone, "v99.0.0", root=REPO, log=silent)
        self.assertEqual(clone_state(clone), before)


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
        shutil.copytree(REPO / "src", self.root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
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
        names = upstream_pr.rebase(
            "5.23.1", root=self.root, upstream_wheel=wheel, old_upstream_wheel=self.old_wheel, log=silent
        )

        self.assertEqual(ps.read_config(self.root).upstream_version, "5.23.1")
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
        pyproject = (self.root / "pyproject.toml").read_bytes()
        patches = {p.name: p.read_bytes() for p in (self.root / "patches").iterdir()}
        with self.assertRaises(upstream_pr.PrError) as ctx:
            upstream_pr.rebase(
                "5.23.2", root=self.root, upstream_wheel=wheel, old_upstream_wheel=self.old_wheel, log=silent
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
            upstream_pr.rebase("5.23.2", root=self.root, upstream_wheel=wheel, log=silent)

        # Following the instructions: here the patch is retired (`git rebase --skip`), then `make rebase` resumes.
        fork = self.root / "fork"
        git(fork, "rebase", "--skip")
        names = upstream_pr.rebase("5.23.2", root=self.root, upstream_wheel=wheel, log=silent)
        self.assertNotIn(self.names[0], names)
        self.assertFalse((self.root / "patches" / self.names[0]).exists())
        self.assertEqual(ps.check_series(self.root / "patches"), names)
        self.assertEqual(ps.read_config(self.root).upstream_version, "5.23.2")
        ps.patched_files(ps.upstream_from_wheel(wheel, "5.23.2"), names, self.root / "patches", self.root / "src")


if __name__ == "__main__":
    unittest.main()
