# Copyright 2026 The HuggingFace Team. All rights reserved. Licensed under the Apache License, Version 2.0.
"""
The built wheel (`dist/transformers-*.whl`, made by `make install`/`make test`) is upstream's, plus ours: same
requirements, extras and entry points with our extras added, every upstream file present, our files added, and the
installed package is this wheel.
"""

import email.parser
import re
import subprocess
import sys
import unittest
import zipfile
from pathlib import Path

from packaging.requirements import Requirement


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import patchset  # noqa: E402


def built_wheel() -> Path:
    wheels = sorted((ROOT / "dist").glob("transformers-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(ROOT / "dist"), str(ROOT)], check=True
        )
        wheels = sorted((ROOT / "dist").glob("transformers-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in dist/, found {wheels}"
    return wheels[0]


class WheelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.config = patchset.read_config()
        cls.upstream = patchset.upstream_from_wheel(
            patchset.cached_upstream_wheel(cls.config.upstream_version), cls.config.upstream_version
        )
        cls.wheel = built_wheel()
        with zipfile.ZipFile(cls.wheel) as zf:
            cls.names = set(zf.namelist())
            dist_info = next(n.split("/")[0] for n in cls.names if n.endswith(".dist-info/METADATA"))
            cls.metadata = email.parser.Parser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
            cls.entry_points = zf.read(f"{dist_info}/entry_points.txt").decode()
        cls.upstream_metadata = email.parser.Parser().parsestr(cls.upstream.metadata)

    def test_name_and_version(self):
        self.assertEqual(self.metadata["Name"], "transformers")
        pin = re.escape(self.config.upstream_version)
        self.assertRegex(self.metadata["Version"], rf"^{pin}\+trainedprecision\.\d+(\.g[0-9a-f]{{10}})?$")

    def test_requirements_are_upstreams_plus_our_extras(self):
        ours = {f'{req}; extra == "{name}"' for name, reqs in self.config.extras.items() for req in reqs}
        normalise = lambda reqs: {str(Requirement(r)) for r in reqs}  # noqa: E731
        self.assertEqual(
            normalise(self.metadata.get_all("Requires-Dist")),
            normalise(self.upstream_metadata.get_all("Requires-Dist")) | normalise(ours),
        )
        self.assertEqual(
            set(self.metadata.get_all("Provides-Extra")),
            set(self.upstream_metadata.get_all("Provides-Extra")) | set(self.config.extras),
        )
        self.assertEqual(self.metadata["Requires-Python"], self.upstream_metadata["Requires-Python"])
        self.assertEqual(self.metadata.get_all("Classifier"), self.upstream_metadata.get_all("Classifier"))

    def test_entry_points_are_upstreams(self):
        self.assertEqual(self.entry_points.split(), self.upstream.entry_points.split())

    def test_files_are_upstream_plus_ours(self):
        package = {n for n in self.names if n.startswith("transformers/")}
        ours = set(patchset.overlay_files())
        self.assertEqual(package, set(self.upstream.files) | ours | {"transformers/_fork_patchset.py"})

    def test_installed_package_is_the_fork(self):
        import transformers
        from transformers import _fork_patchset

        self.assertEqual(transformers.__version__, _fork_patchset.FORK_INFO["version"])
        self.assertEqual(list(_fork_patchset.FORK_INFO["patches"]), patchset.read_series())
