# Copyright 2026 The HuggingFace Team. All rights reserved.
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
The Python blocks of README.md and the guide run as written, the way a reader runs them: in order, each block in a
fresh interpreter (so each must bring its own imports and objects), all blocks of one page in one empty working folder
(files a block saves, such as `./my-checkpoint`, are there for the next), offline (`HF_HUB_OFFLINE=1`) and on the CPU.
Blocks are the ```py and ```python fences. A failure names the page and the line of each failing block's fence, with
the end of its output.

    pytest tests/repo_utils/test_docs_run.py        # also part of `make test`
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from parameterized import parameterized


REPO = Path(__file__).resolve().parents[2]
#: The guide: one page per topic, each shipped with what it documents.
GUIDE_PAGES = sorted(str(path.relative_to(REPO)) for path in (REPO / "docs" / "source" / "en").glob("*.md"))
#: The pages whose Python blocks must run.
PAGES = ["README.md", *GUIDE_PAGES]
FENCE = re.compile(r"^(?P<indent> *)(?P<ticks>`{3,})(?P<info>[^`]*)$")
PYTHON_FENCES = {"py", "python", "python3"}
#: Seconds one block may take (the slowest train a few steps of a tiny model).
BLOCK_TIMEOUT = 600


def python_blocks(text: str) -> list[tuple[int, str]]:
    """The Python fenced blocks of a Markdown page: (line of the opening fence, 1-based; code)."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        ticks, info, start = match["ticks"], match["info"].strip().split(" ")[0].lower(), i
        body = []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(ticks) and lines[i].strip().strip("`") == ""):
            body.append(lines[i][len(match["indent"]) :])
            i += 1
        if info in PYTHON_FENCES:
            blocks.append((start + 1, "\n".join(body) + "\n"))
        i += 1
    return blocks


def run_block(code: str, cwd: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "TOKENIZERS_PARALLELISM": "false",
    }
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT
    )


class PythonBlockExtractionTest(unittest.TestCase):
    def test_blocks_and_their_lines(self):
        page = "intro\n```py\nx = 1\n```\n```bash\nls\n```\n  ```python\n  print(x)\n  ```\n````py\n```\n````\n"
        self.assertEqual(python_blocks(page), [(2, "x = 1\n"), (8, "print(x)\n"), (11, "```\n")])

    def test_the_guide_pages_are_found_and_hold_python_blocks(self):
        self.assertIn("docs/source/en/trained_precision.md", GUIDE_PAGES)
        self.assertGreater(len(GUIDE_PAGES), 1)
        for page in ("README.md", "docs/source/en/trained_precision.md", "docs/source/en/pure_bf16_training.md"):
            self.assertTrue(python_blocks((REPO / page).read_text(encoding="utf-8")), page)


class DocsRunTest(unittest.TestCase):
    @parameterized.expand([(page.replace("/", "_").replace(".", "_"), page) for page in PAGES])
    def test_python_blocks_run_as_written(self, _, page):
        blocks = python_blocks((REPO / page).read_text(encoding="utf-8"))
        failures = []
        with tempfile.TemporaryDirectory(prefix="docs_run_") as cwd:
            for line, code in blocks:
                try:
                    result = run_block(code, cwd)
                except subprocess.TimeoutExpired:
                    failures.append(f"{page}:{line}: the block ran over {BLOCK_TIMEOUT} s")
                    continue
                if result.returncode != 0:
                    tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
                    failures.append(f"{page}:{line}: the block exits {result.returncode}:\n{tail}")
        if failures:
            self.fail(
                f"{len(failures)} of {len(blocks)} Python blocks of {page} fail (a later failure may follow from an "
                "earlier one: fix the first first):\n\n" + "\n\n".join(failures)
            )


if __name__ == "__main__":
    unittest.main()
