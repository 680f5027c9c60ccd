# Copyright 2026 The HuggingFace Team. All rights reserved. Licensed under the Apache License, Version 2.0.
"""
The patch-set machinery (tools/patchset.py): the series is consistent, patches apply strictly (no offset, no fuzz),
our files never shadow upstream's, the built tree is upstream + ours + patches, and fork/export round-trips.

Each failure case runs the real command line on a scratch copy of the repo's build inputs.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import patchset  # noqa: E402


CONFIG_PATCH = sorted((ROOT / "patches").glob("*-configuration_utils-add-PreTrainedConfig*.patch"))[0]


def git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@localhost", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@localhost")  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def scratch_checkout(dest: Path, prefixes: tuple[str, ...]) -> None:
    """A git checkout at `dest` holding this repository's tracked files under `prefixes` (working-tree content)."""
    dest.mkdir(parents=True)
    for rel in patchset.tracked_files(ROOT):
        if rel.startswith(prefixes):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / rel, dest / rel)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "scratch")


def run_patchset(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATCHSET_CACHE=str(patchset.CACHE))
    return subprocess.run(
        [sys.executable, str(repo / "tools" / "patchset.py"), *args], cwd=repo, capture_output=True, text=True, env=env
    )


class PatchsetTestBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        patchset.cached_upstream_wheel(patchset.read_config().upstream_version)

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        self.repo = self.tmp / "repo"
        scratch_checkout(self.repo, ("tools/", "patches/", "src/", "pyproject.toml"))

    def git_add(self, *paths: str) -> None:
        git(self.repo, "add", "--", *paths)
        git(self.repo, "commit", "-q", "-m", "test change")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def patch_path(self) -> Path:
        return self.repo / "patches" / CONFIG_PATCH.name

    def edit_patch(self, old: str, new: str, count: int = 1) -> None:
        path = self.patch_path()
        text = path.read_text()
        self.assertIn(old, text)
        path.write_text(text.replace(old, new, count))

    def assert_fails(self, *needles: str, command: str = "check") -> str:
        result = run_patchset(self.repo, command, *([str(self.tmp / "out")] if command == "tree" else []))
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        for needle in needles:
            self.assertIn(needle, result.stderr)
        return result.stderr


class StrictApplyTest(PatchsetTestBase):
    def test_repo_series_applies(self):
        result = run_patchset(self.repo, "check")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("apply exactly", result.stdout)

    def test_offset_hunk_fails_with_patch_file_and_hunk(self):
        # move the first hunk's stated position by one line: git apply and GNU patch would accept this silently
        text = self.patch_path().read_text()
        first = re.search(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@", text, flags=re.M)
        a, b, c, d = (int(x) for x in first.groups())
        self.edit_patch(first.group(0), f"@@ -{a + 1},{b} +{c + 1},{d} @@")
        first_file = re.search(r"^\+\+\+ b/src/(\S+)", text, flags=re.M).group(1)  # the file of the first hunk
        stderr = self.assert_fails(CONFIG_PATCH.name, first_file, "hunk #1", f"-{a + 1}")
        self.assertIn("found -1 lines away", stderr)

    def test_wrong_context_line_fails(self):
        self.edit_patch(
            " # type hinting: specifying the type of config class", " # type hints: the type of config class"
        )
        stderr = self.assert_fails(CONFIG_PATCH.name, "does not apply exactly")
        self.assertRegex(stderr, r"hunk #\d+ @@ -59,")  # the hunk whose context holds that line
        self.assertIn("# type hinting: specifying the type of config class", stderr)

    def test_shadowing_file_fails(self):
        (self.repo / "src" / "transformers" / "activations.py").write_text("# ours\n")
        self.git_add("src/transformers/activations.py")
        self.assert_fails("src/transformers/activations.py", "shadow", command="tree")

    def test_patch_missing_from_series_fails(self):
        shutil.copy(self.patch_path(), self.repo / "patches" / "0099-extra.patch")
        self.assert_fails("0099-extra.patch is not listed in")

    def test_series_entry_without_file_fails(self):
        with open(self.repo / "patches" / "series", "a", encoding="utf-8") as f:
            f.write("0042-gone.patch\n")
        self.assert_fails("series lists 0042-gone.patch", "does not exist")

    def test_patch_creating_a_file_is_refused(self):
        (self.repo / "patches" / "0002-new-file.patch").write_text(
            "diff --git a/src/transformers/brand_new.py b/src/transformers/brand_new.py\n"
            "new file mode 100644\n--- /dev/null\n+++ b/src/transformers/brand_new.py\n@@ -0,0 +1 @@\n+x = 1\n"
        )
        with open(self.repo / "patches" / "series", "a", encoding="utf-8") as f:
            f.write("0002-new-file.patch\n")
        self.assert_fails("0002-new-file.patch", "only modify existing upstream files")

    def test_unknown_upstream_file_fails(self):
        self.edit_patch("src/transformers/configuration_utils.py", "src/transformers/configuration_utilz.py", count=-1)
        self.assert_fails("configuration_utilz.py does not exist in upstream")


class ApplierUnitTest(unittest.TestCase):
    ORIGINAL = b"a\nb\nc\nd\ne\nf\n"

    def patch(self, body: str) -> list:
        text = f"--- a/src/transformers/x.py\n+++ b/src/transformers/x.py\n{body}"
        return patchset.parse_patch(text.encode(), "t.patch")

    def test_exact_hunk_applies(self):
        [fp] = self.patch("@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n")
        self.assertEqual(patchset.apply_file_patch(self.ORIGINAL, fp, "t.patch"), b"a\nb\nC\nd\ne\nf\n")

    def test_second_hunk_position_accounts_for_first(self):
        [fp] = self.patch("@@ -1,2 +1,3 @@\n a\n+a2\n b\n@@ -5,2 +6,2 @@\n e\n-f\n+F\n")
        self.assertEqual(patchset.apply_file_patch(self.ORIGINAL, fp, "t.patch"), b"a\na2\nb\nc\nd\ne\nF\n")

    def test_offset_is_refused(self):
        [fp] = self.patch("@@ -3,3 +3,3 @@\n b\n-c\n+C\n d\n")
        with self.assertRaisesRegex(patchset.PatchsetError, r"found -1 lines away"):
            patchset.apply_file_patch(self.ORIGINAL, fp, "t.patch")

    def test_miscounted_hunk_is_refused(self):
        with self.assertRaisesRegex(patchset.PatchsetError, "truncated or miscounted"):
            self.patch("@@ -2,4 +2,4 @@\n b\n-c\n+C\n d\n")

    def test_form_feed_is_not_a_line_break(self):
        original = b"a\x0cb\nc\n"
        [fp] = self.patch("@@ -1,2 +1,2 @@\n a\x0cb\n-c\n+C\n")
        self.assertEqual(patchset.apply_file_patch(original, fp, "t.patch"), b"a\x0cb\nC\n")


class TreeTest(PatchsetTestBase):
    def test_tree_is_upstream_plus_ours_plus_patches(self):
        out = self.tmp / "out"
        result = run_patchset(self.repo, "tree", str(out))
        self.assertEqual(result.returncode, 0, result.stderr)
        config = patchset.read_config(self.repo)
        upstream = patchset.upstream_from_wheel(
            patchset.cached_upstream_wheel(config.upstream_version), config.upstream_version
        )
        built = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
        ours = {f"transformers/{p.relative_to(self.repo / 'src' / 'transformers').as_posix()}"
                for p in (self.repo / "src" / "transformers").rglob("*") if p.suffix in (".py", ".cpp")}  # fmt: skip
        self.assertEqual(built, set(upstream.files) | ours | {"transformers/_fork_patchset.py"})
        changed = {rel for rel in upstream.files if (out / rel).read_bytes() != upstream.read(rel)}
        patched = set(patchset.patched_files(upstream, patchset.read_series(self.repo / "patches"),
                                             self.repo / "patches", self.repo / "src"))  # fmt: skip
        self.assertEqual(changed, patched | {"transformers/__init__.py"})
        for rel in patched:
            self.assertTrue((out / rel).read_text().startswith(patchset.NOTICE_MARKER), rel)
        init = (out / "transformers" / "__init__.py").read_text()
        pin = re.escape(config.upstream_version)
        self.assertRegex(init, rf'__version__ = "{pin}\+trainedprecision\.\d+(\.g[0-9a-f]+)?"')

    def test_version_is_numeric_local_label(self):
        config = patchset.read_config(self.repo)
        version = patchset.fork_version(config, self.repo)
        sha = git(self.repo, "rev-parse", "--short=10", "HEAD").strip()
        self.assertRegex(version, rf"^{re.escape(config.upstream_version)}\+trainedprecision\.\d+\.g{sha}$")
        from packaging.version import Version

        self.assertGreater(Version("5.23.0+trainedprecision.10"), Version("5.23.0+trainedprecision.9"))


class SetupMetadataTest(unittest.TestCase):
    def test_upstream_requirements_and_our_extras(self):
        config = patchset.read_config()
        upstream = patchset.upstream_from_wheel(
            patchset.cached_upstream_wheel(config.upstream_version), config.upstream_version
        )
        kwargs = patchset.setup_kwargs(upstream, config)
        self.assertIn("testing", kwargs["extras_require"])  # upstream's own extras survive
        # what `bf16_full_train` needs to run in the Trainer: the optimizer and accelerate
        self.assertEqual(kwargs["extras_require"]["optimi"], ["torch-optimi>=0.3.3,<0.4", "accelerate>=1.1.0"])
        self.assertIn("trained-precision-testing", kwargs["extras_require"])
        self.assertEqual(
            kwargs["entry_points"]["console_scripts"], ["transformers = transformers.cli.transformers:main"]
        )
        self.assertTrue(any(r.startswith("huggingface-hub") for r in kwargs["install_requires"]))

    def test_clashing_extra_is_refused(self):
        config = patchset.read_config()
        upstream = patchset.upstream_from_wheel(
            patchset.cached_upstream_wheel(config.upstream_version), config.upstream_version
        )
        config.extras = {"testing": ["pytest"]}
        with self.assertRaisesRegex(patchset.PatchsetError, "clashes"):
            patchset.setup_kwargs(upstream, config)

    def test_wrong_upstream_version_is_refused(self):
        with self.assertRaisesRegex(patchset.PatchsetError, "need the pristine 9.9.9"):
            pin = patchset.read_config().upstream_version
            patchset.upstream_from_wheel(patchset.cached_upstream_wheel(pin), "9.9.9")


@unittest.skipUnless(shutil.which("git"), "needs git")
class ForkExportTest(PatchsetTestBase):
    def test_fork_then_export_is_byte_identical(self):
        before = {p.name: p.read_bytes() for p in (self.repo / "patches").iterdir() if p.is_file()}
        fork = self.tmp / "fork"
        result = run_patchset(self.repo, "fork", "--dir", str(fork))
        self.assertEqual(result.returncode, 0, result.stderr)
        log = subprocess.run(["git", "log", "--format=%s"], cwd=fork, capture_output=True, text=True).stdout
        self.assertEqual(len(log.splitlines()), 1 + len(patchset.read_series(self.repo / "patches")))
        self.assertTrue((fork / "src" / "transformers" / "trained_precision").is_symlink())
        # in a folder upstream has, our files are linked one by one beside upstream's
        integrations = fork / "src" / "transformers" / "integrations"
        self.assertFalse(integrations.is_symlink())
        self.assertTrue((integrations / "optimi.py").is_symlink())
        self.assertTrue((integrations / "torchao.py").is_file() and not (integrations / "torchao.py").is_symlink())
        result = run_patchset(self.repo, "export", "--dir", str(fork))
        self.assertEqual(result.returncode, 0, result.stderr)
        after = {p.name: p.read_bytes() for p in (self.repo / "patches").iterdir() if p.is_file()}
        self.assertEqual(before, after)

    def test_export_refuses_uncommitted_changes(self):
        fork = self.tmp / "fork"
        self.assertEqual(run_patchset(self.repo, "fork", "--dir", str(fork)).returncode, 0)
        with open(fork / "src" / "transformers" / "activations.py", "a", encoding="utf-8") as f:
            f.write("# edit\n")
        result = run_patchset(self.repo, "export", "--dir", str(fork))
        self.assertEqual(result.returncode, 1)
        self.assertIn("uncommitted changes", result.stderr)

    def test_fork_refuses_to_overwrite(self):
        fork = self.tmp / "fork"
        fork.mkdir()
        result = run_patchset(self.repo, "fork", "--dir", str(fork))
        self.assertEqual(result.returncode, 1)
        self.assertIn("exists", result.stderr)
