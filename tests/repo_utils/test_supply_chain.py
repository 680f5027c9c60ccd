# Copyright 2026 The HuggingFace Team. All rights reserved. Licensed under the Apache License, Version 2.0.
"""
What ships and what the build trusts (tools/patchset.py, setup.py): only files git tracks reach the wheel and the
sdist, and the upstream release is checked against the sha256 pins of pyproject.toml before anything reads it.

The wheel and sdist paths run the real setup.py in a scratch git checkout of this repository, against the pinned
upstream wheel unpacked into a folder put first on the path (what pip's isolated build environment holds).
"""

import base64
import csv
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


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import patchset  # noqa: E402


CONFIG = patchset.read_config(ROOT)
UNTRACKED = (
    "src/transformers/trained_precision/.env",
    "src/transformers/notes.txt",
    "src/transformers/trained_precision/.ipynb_checkpoints/registry-checkpoint.py",
)
ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t"}
ENV["GIT_COMMITTER_EMAIL"] = "t@localhost"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **ENV}, capture_output=True, text=True, check=True
    ).stdout


def scratch_checkout(dest: Path) -> Path:
    """A git checkout at `dest` of this repository's tracked files (their working-tree content)."""
    dest.mkdir(parents=True)
    for rel in patchset.tracked_files(ROOT):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, dest / rel)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "scratch")
    return dest


def add_untracked(root: Path) -> None:
    for rel in UNTRACKED:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("HF_TOKEN=hf_not_a_real_token\n", encoding="utf-8")


def unpack_wheel(wheel: Path, dest: Path) -> Path:
    """The wheel's files as an install leaves them (what `importlib.metadata` finds in the build environment)."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(dest)
    return dest


def run_setup(root: Path, site: Path, *args: str) -> subprocess.CompletedProcess:
    # -P: neither the script's folder nor the cwd goes on sys.path, as under pip's PEP 517 backend
    env = dict(os.environ, PYTHONPATH=str(site))
    return subprocess.run(
        [sys.executable, "-P", "setup.py", "-q", *args], cwd=root, env=env, capture_output=True, text=True
    )


class SupplyChainBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="test-supply-chain-"))
        cls.wheel = patchset.cached_upstream_wheel(CONFIG.upstream_version, CONFIG.pins["wheel"])
        cls.site = unpack_wheel(cls.wheel, cls.tmp / "site")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.work = Path(tempfile.mkdtemp(prefix="case-", dir=self.tmp))


class TrackedFilesTest(SupplyChainBase):
    def test_untracked_files_stay_out_of_the_package_tree(self):
        root = scratch_checkout(self.work / "repo")
        add_untracked(root)
        out = self.work / "tree"
        result = subprocess.run(
            [sys.executable, "tools/patchset.py", "tree", str(out)], cwd=root, capture_output=True, text=True
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        built = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
        for rel in UNTRACKED:
            self.assertNotIn(rel.removeprefix("src/"), built)
        self.assertIn("transformers/trained_precision/facts/registry.py", built)
        # a file becomes part of the package once git tracks it
        git(root, "add", "-f", UNTRACKED[1])
        shutil.rmtree(out)
        subprocess.run([sys.executable, "tools/patchset.py", "tree", str(out)], cwd=root, check=True)
        self.assertTrue((out / "transformers" / "notes.txt").is_file())

    def test_sdist_holds_tracked_files_only_and_builds_from_its_list(self):
        root = scratch_checkout(self.work / "repo")
        add_untracked(root)
        result = run_setup(root, self.site, "sdist", "-d", str(self.work / "dist"))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        for rel in UNTRACKED:
            self.assertIn(f"not in the sdist (git does not track it): {rel}", result.stdout)
        [sdist] = (self.work / "dist").glob("*.tar.gz")
        with tarfile.open(sdist) as tf:
            names = {name.split("/", 1)[1] for name in tf.getnames() if "/" in name}
            tf.extractall(self.work / "unpacked", filter="data")
        for rel in UNTRACKED:
            self.assertNotIn(rel, names)
        self.assertIn("src/transformers/trained_precision/facts/registry.py", names)
        self.assertIn(patchset.TRACKED_LIST, names)

        # Building the wheel from the sdist (no git there) uses the sdist's list: a file dropped in later stays out.
        [unpacked] = (self.work / "unpacked").iterdir()
        add_untracked(unpacked)
        result = run_setup(unpacked, self.site, "build", "--build-lib", str(self.work / "lib"))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        package = self.work / "lib" / "transformers" / "trained_precision"
        self.assertTrue((package / "facts/registry.py").is_file())
        for rel in UNTRACKED:
            self.assertFalse((self.work / "lib" / rel.removeprefix("src/")).exists(), rel)

    def test_source_archive_of_a_commit_builds(self):
        # what `pip install https://github.com/<org>/<repo>/archive/<branch>.zip` unpacks: committed files only
        root = scratch_checkout(self.work / "repo")
        archive = self.work / "archive"
        archive.mkdir()
        data = subprocess.run(["git", "archive", "HEAD"], cwd=root, capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            tf.extractall(archive, filter="data")
        self.assertIn("src/transformers/trained_precision/facts/registry.py", patchset.tracked_files(archive))
        # a copied working tree is not an archive: the marker still holds git's placeholder
        copy = self.work / "copy"
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".git"))
        with self.assertRaisesRegex(patchset.PatchsetError, "nor a git archive"):
            patchset.tracked_files(copy)

    def test_neither_git_nor_sdist_is_refused(self):
        (self.work / "src" / "transformers").mkdir(parents=True)
        with self.assertRaisesRegex(patchset.PatchsetError, "neither a git checkout nor an sdist"):
            patchset.overlay_files(self.work / "src")


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


class PinTest(SupplyChainBase):
    def test_pins_match_the_published_files(self):
        self.assertEqual(
            patchset.wheel_pins(self.wheel), {"wheel": CONFIG.pins["wheel"], "record": CONFIG.pins["record"]}
        )

    def test_wheel_with_another_sha256_is_refused_before_use(self):
        forged = self.work / self.wheel.name
        data = self.wheel.read_bytes()
        forged.write_bytes(data + b"\0")  # a zip still reads with trailing bytes: only the pin catches it
        patchset.upstream_from_wheel(forged, CONFIG.upstream_version)  # self-consistent
        with self.assertRaisesRegex(patchset.PatchsetError, "is not the pinned wheel sha256"):
            patchset.upstream_from_wheel(forged, CONFIG.upstream_version, CONFIG.pins["wheel"])

    def test_check_refuses_a_cached_wheel_that_is_not_the_pinned_one(self):
        root = scratch_checkout(self.work / "repo")
        pyproject = root / "pyproject.toml"
        pyproject.write_text(
            pyproject.read_text(encoding="utf-8").replace(CONFIG.pins["wheel"], "0" * 64), encoding="utf-8"
        )
        env = dict(os.environ, PATCHSET_CACHE=str(patchset.CACHE))
        result = subprocess.run(
            [sys.executable, "tools/patchset.py", "check"], cwd=root, env=env, capture_output=True, text=True
        )
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("is not the pinned wheel sha256", result.stderr)
        self.assertIn("0" * 64, result.stderr)
        self.assertTrue(self.wheel.exists())  # nothing deleted behind the user's back

    def test_missing_pin_is_refused(self):
        root = self.work / "repo"
        root.mkdir()
        text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
        (root / "pyproject.toml").write_text(
            "\n".join(ln for ln in text.splitlines() if not ln.startswith("record-sha256")), encoding="utf-8"
        )
        with self.assertRaisesRegex(patchset.PatchsetError, "record-sha256"):
            patchset.read_config(root)

    def test_build_refuses_a_self_consistent_but_modified_upstream(self):
        # An installed upstream whose file and RECORD row were both changed passes the RECORD check alone.
        site = unpack_wheel(self.wheel, self.work / "site")
        target = "transformers/activations.py"
        (site / target).write_bytes((site / target).read_bytes() + b"\nimport os  # injected\n")
        [record] = site.glob("*.dist-info/RECORD")
        rows = list(csv.reader(io.StringIO(record.read_text(encoding="utf-8"))))
        for row in rows:
            if row and row[0] == target:
                row[1] = _digest((site / target).read_bytes())
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        record.write_text(buf.getvalue(), encoding="utf-8")

        code = (
            "import sys; sys.path.insert(0, {tools!r}); import patchset\n"
            "patchset.upstream_from_installed({version!r})\n"
            "print('record-only: ok')\n"
            "patchset.upstream_from_installed({version!r}, {pin!r})\n"
        ).format(tools=str(ROOT / "tools"), version=CONFIG.upstream_version, pin=CONFIG.pins["record"])
        env = dict(os.environ, PYTHONPATH=str(site))
        result = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True)
        self.assertIn("record-only: ok", result.stdout)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("is not the published wheel", result.stderr)

    def test_pristine_install_passes_the_record_pin(self):
        code = (
            f"import sys; sys.path.insert(0, {str(ROOT / 'tools')!r}); import patchset\n"
            f"u = patchset.upstream_from_installed({CONFIG.upstream_version!r}, {CONFIG.pins['record']!r})\n"
            "print(len(u.files))\n"
        )
        env = dict(os.environ, PYTHONPATH=str(self.site))
        result = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertGreater(int(result.stdout), 1000)


if __name__ == "__main__":
    unittest.main()
