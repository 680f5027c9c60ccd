# Copyright 2026 The trained_precision fork authors. Licensed under the Apache License, Version 2.0.
"""
Builds the `transformers` wheel of this fork: upstream's pinned release (a build requirement, never imported here)
with our new files overlaid and `patches/series` applied strictly. All logic is in tools/patchset.py.

`pip install -e .` exposes `fork/src` (made by `make fork`) instead, so edits there are live.
"""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tools"))  # setuptools.build_meta does not put the project on sys.path

import patchset  # noqa: E402


config = patchset.read_config()
upstream = patchset.load_upstream(config, source="installed")
EDITABLE = "editable_wheel" in sys.argv
FORK_SRC = os.path.join(patchset.DEFAULT_FORK, "src")


class BuildPatchedTree(build_py):
    """Writes upstream + our files + patches into build_lib instead of copying a source package."""

    def run(self):
        if self.editable_mode or EDITABLE:
            return super().run()
        try:
            patchset.build_tree(patchset.Path(self.build_lib), config, upstream, patchset.fork_version(config))
        except patchset.PatchsetError as e:
            raise SystemExit(f"patchset: error: {e}") from None


class TrackedFilesSdist(sdist):
    """An sdist of the files git tracks only (MANIFEST.in grafts folders; an untracked `.env` there stays out), plus
    the list of those files, which a build from the sdist then uses instead of git."""

    def make_release_tree(self, base_dir, files):
        try:
            kept, left_out = patchset.sdist_files(files, patchset.ROOT)
            tracked = patchset.tracked_files(patchset.ROOT)
        except patchset.PatchsetError as e:
            raise SystemExit(f"patchset: error: {e}") from None
        for name in left_out:
            print(f"patchset: not in the sdist (git does not track it): {name}")
        super().make_release_tree(base_dir, kept)
        listed = [name for name in tracked if name in {os.path.normpath(f).replace(os.sep, "/") for f in kept}]
        with open(os.path.join(base_dir, patchset.TRACKED_LIST), "w", encoding="utf-8") as f:
            f.write("".join(f"{name}\n" for name in listed))


if EDITABLE:
    if not os.path.isdir(os.path.join(FORK_SRC, "transformers")):
        raise SystemExit("patchset: error: an editable install needs fork/: run `make fork` first")
    package_kwargs = {"packages": ["transformers"], "package_dir": {"": os.path.relpath(FORK_SRC, HERE)}}
else:
    # build_py must run (it only runs for distributions that declare packages); our run() replaces its copying
    package_kwargs = {"packages": ["transformers"], "package_dir": {"transformers": "src/transformers"}}

setup(
    version=patchset.fork_version(config),
    cmdclass={"build_py": BuildPatchedTree, "sdist": TrackedFilesSdist},
    zip_safe=False,
    **package_kwargs,
    **patchset.setup_kwargs(upstream, config),
)
