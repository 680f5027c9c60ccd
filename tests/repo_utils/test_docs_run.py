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
README.md and every guide page (docs/source/en/*.md) run as written, the way a reader runs them: top to bottom, in a
fresh working folder per page, offline (`HF_HUB_OFFLINE=1`, `HF_HOME` of the test session) and on the CPU.

- ```py / ```python blocks run in order, each in a fresh interpreter (so each must bring its own imports and objects);
  files a block saves (`./my-checkpoint`) are there for the blocks and shell lines after it.
- A block whose first line is a comment naming a file (`# train.py`, `# fsdp2.yaml`) is that file: it is written into
  the folder, not run, as a reader saves it before the command that uses it.
- In the guide pages, every line of a ```bash block runs, with the venv's `python` and `transformers` first on `PATH`,
  and must exit with the code its comment documents (`# ... exit code 1 ...`), else 0. Lines that start with
  `python utils/` or `python tools/` are the repository's own tools: they run from the repository root. Not run: lines marked
  `# needs the Hub` and `pip install` lines (they need the package index). README's shell lines (installing, `make`)
  are the fork's own workflow and are not run here.
- No block or command prints a config warning about the page's own tiny model (`QUIET`): token ids outside its
  vocabulary are the example's noise, not the reader's.

A failure names the page and the line of each failing block or command, with the end of its output.

    pytest tests/repo_utils/test_docs_run.py        # also part of `make test`
"""

import os
import re
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from parameterized import parameterized


REPO = Path(__file__).resolve().parents[2]
#: The guide: one page per topic, each shipped with what it documents.
GUIDE_PAGES = sorted(str(path.relative_to(REPO)) for path in (REPO / "docs" / "source" / "en").glob("*.md"))
#: The pages that run: README's Python blocks, and every guide page whole.
PAGES = ["README.md", *GUIDE_PAGES]
FENCE = re.compile(r"^(?P<indent> *)(?P<ticks>`{3,})(?P<info>[^`]*)$")
PYTHON_FENCES = {"py", "python", "python3"}
SHELL_FENCES = {"bash", "sh", "shell"}
#: A block that is a file to save: its first line is a comment naming it (`# train.py`, `# fsdp2.yaml`).
FILE_BLOCK = re.compile(r"^#\s*(?P<name>[\w./-]+\.(?:py|ya?ml|json|txt|cfg|toml))\s*$")
#: The mark of a shell line that needs the Hub (a download, or a cache filled from it): not run offline.
HUB_MARK = "needs the Hub"
EXIT_CODE = re.compile(r"exit code (\d+)")
#: Warnings a page's own tiny models must not print: a reader copies the config, and the noise hides what the page
#: shows (GPT-2's and GPT-Neo's default `bos_token_id`/`eos_token_id` of 50256 lie outside a small `vocab_size`).
QUIET = ("within the vocabulary",)
#: Seconds one block or command may take (the slowest train a few steps of a tiny model, or launch two processes).
BLOCK_TIMEOUT = 600


def fenced_blocks(text: str) -> list[tuple[int, str, str]]:
    """The fenced blocks of a Markdown page: (line of the opening fence, 1-based; language; code)."""
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
        blocks.append((start + 1, info, "\n".join(body) + "\n"))
        i += 1
    return blocks


def python_blocks(text: str) -> list[tuple[int, str]]:
    """The Python fenced blocks of a Markdown page that run (not those that are files): (line of the fence; code)."""
    return [(line, code) for line, info, code in fenced_blocks(text) if info in PYTHON_FENCES and not file_name(code)]


def file_name(code: str) -> str | None:
    """The file a block is (`# train.py` on its first line), or `None`."""
    match = FILE_BLOCK.match(code.split("\n", 1)[0].strip())
    return match["name"] if match else None


def shell_commands(code: str, first_line: int) -> list[tuple[int, str]]:
    """The commands of a shell block: (line, command), continuation lines (`\\`) joined, comment lines dropped."""
    commands, pending, start = [], "", None
    for offset, line in enumerate(code.splitlines(), start=first_line + 1):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        start = offset if not pending else start
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        commands.append((start, pending + stripped))
        pending = ""
    if pending:
        commands.append((start, pending.strip()))
    return commands


def comment_of(command: str) -> str:
    """The trailing comment of a shell command (what follows an unquoted `#`)."""
    quote, escaped = None, False
    for i, char in enumerate(command):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or command[i - 1].isspace()):
            return command[i + 1 :].strip()
    return ""


def classify(command: str) -> tuple[str, int | None]:
    """How the runner treats a shell command: ("hub" | "install" | "repo" | "run", the documented exit code)."""
    comment = comment_of(command)
    if HUB_MARK in comment:
        return "hub", None
    if re.search(r"(^|\s)pip3? install\s", command):
        return "install", None
    match = EXIT_CODE.search(comment)
    code = int(match[1]) if match else 0
    words = [w for w in command.split() if "=" not in w.split("/")[0]]  # past `VAR=value` prefixes
    return ("repo" if words[1:2] and words[1].startswith(("utils/", "tools/")) else "run"), code


def environment() -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        # the venv's `python`, `transformers`, `torchrun` and `accelerate` first
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }


def run_block(code: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=environment(), capture_output=True, text=True, timeout=BLOCK_TIMEOUT
    )


def run_shell(command: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=environment(), capture_output=True, text=True, timeout=BLOCK_TIMEOUT
    )


def _tail(result: subprocess.CompletedProcess) -> str:
    return "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])


def run_page(page: str, cwd: str) -> tuple[list[str], list[str]]:
    """Runs a page in `cwd`: (failures, a log line per block or command with its time)."""
    failures, log = [], []
    shell = page != "README.md"
    for line, info, code in fenced_blocks((REPO / page).read_text(encoding="utf-8")):
        name = file_name(code)
        if name is not None and info not in SHELL_FENCES:
            path = Path(cwd, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(code.split("\n", 1)[1] if info in PYTHON_FENCES else code, encoding="utf-8")
            log.append(f"{page}:{line}: wrote {name}")
            continue
        if info in PYTHON_FENCES:
            jobs = [(line, "python", code, 0)]
        elif info in SHELL_FENCES and shell:
            jobs = []
            for at, command in shell_commands(code, line):
                kind, expected = classify(command)
                jobs.append((at, kind, command, expected))
        else:
            continue
        for at, kind, code_or_command, expected in jobs:
            if kind in ("hub", "install"):
                log.append(f"{page}:{at}: not run ({'needs the Hub' if kind == 'hub' else 'pip install'})")
                continue
            start = time.monotonic()
            try:
                if kind == "python":
                    result = run_block(code_or_command, cwd)
                else:
                    result = run_shell(code_or_command, str(REPO) if kind == "repo" else cwd)
            except subprocess.TimeoutExpired:
                failures.append(f"{page}:{at}: ran over {BLOCK_TIMEOUT} s")
                continue
            what = "the block" if kind == "python" else f"`{code_or_command}`"
            log.append(f"{page}:{at}: {kind}, exit {result.returncode}, {time.monotonic() - start:.1f} s")
            if result.returncode != expected:
                failures.append(
                    f"{page}:{at}: {what} exits {result.returncode}, expected {expected}:\n{_tail(result)}"
                )
            noise = [line for line in (result.stdout + result.stderr).splitlines() if any(q in line for q in QUIET)]
            if noise:
                failures.append(f"{page}:{at}: {what} prints a warning about its own example model:\n{noise[0]}")
    return failures, log


class BlockExtractionTest(unittest.TestCase):
    def test_blocks_and_their_lines(self):
        page = "intro\n```py\nx = 1\n```\n```bash\nls\n```\n  ```python\n  print(x)\n  ```\n````py\n```\n````\n"
        self.assertEqual(python_blocks(page), [(2, "x = 1\n"), (8, "print(x)\n"), (11, "```\n")])
        self.assertEqual([info for _, info, _ in fenced_blocks(page)], ["py", "bash", "python", "py"])

    def test_files_commands_and_exit_codes(self):
        self.assertEqual(file_name("# train.py\nimport torch\n"), "train.py")
        self.assertEqual(file_name("# fsdp2.yaml\ndistributed_type: FSDP\n"), "fsdp2.yaml")
        self.assertIsNone(file_name("# a tiny model\nimport torch\n"))
        block = "# a comment\nls \\\n  -l   # exit code 2\n\necho '#not a comment' # x\n"
        self.assertEqual(shell_commands(block, 10), [(12, "ls -l   # exit code 2"), (15, "echo '#not a comment' # x")])
        self.assertEqual(classify("transformers precision ./x --dtype fp16   # exit code 1: risky"), ("run", 1))
        self.assertEqual(classify("transformers precision t5-small   # needs the Hub; exit code 1"), ("hub", None))
        self.assertEqual(classify('pip install "transformers[optimi]"'), ("install", None))
        self.assertEqual(classify("python utils/check_trained_precision.py"), ("repo", 0))
        self.assertEqual(classify("A=1 python utils/check_trained_precision.py"), ("repo", 0))
        self.assertEqual(classify("python tools/some_tool.py --fix_and_overwrite"), ("repo", 0))
        self.assertEqual(classify("echo '# exit code 3' > f.txt"), ("run", 0))

    def test_the_guide_pages_are_found_and_hold_python_blocks(self):
        self.assertIn("docs/source/en/trained_precision.md", GUIDE_PAGES)
        self.assertGreater(len(GUIDE_PAGES), 1)
        for page in ("README.md", "docs/source/en/trained_precision.md", "docs/source/en/pure_bf16_training.md"):
            self.assertTrue(python_blocks((REPO / page).read_text(encoding="utf-8")), page)


class DocsRunTest(unittest.TestCase):
    @parameterized.expand([(page.replace("/", "_").replace(".", "_"), page) for page in PAGES])
    def test_page_runs_as_written(self, _, page):
        with tempfile.TemporaryDirectory(prefix="docs_run_") as cwd:
            failures, log = run_page(page, cwd)
        if failures:
            self.fail(
                f"{len(failures)} block(s) or command(s) of {page} fail, run top to bottom in a fresh folder (a later "
                "failure may follow from an earlier one: fix the first first):\n\n"
                + "\n\n".join(failures)
                + "\n\nWhat ran:\n"
                + "\n".join(log)
            )


if __name__ == "__main__":
    unittest.main()
