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
`transformers precision`: inspect a checkpoint's trained precision, and optionally audit its activation ranges.

Usage:
    transformers precision ./my-checkpoint
    transformers precision google-t5/t5-small --dtype fp16
    transformers precision ./my-t5 --audit --dtype fp16 --json

Exit codes: 0 when the asked `--dtype` is safe (or none was asked), 1 when it is risky, 2 on bad input.

`cli/transformers.py` registers [`precision`] as a leaf command (`app.command(name="precision")(precision)`), which
works with both the typer app of huggingface_hub 1.x and the click group of 2.x. Heavy imports stay inside the
function so that `transformers --help` stays fast. The command declares its own `--format` next to `--json`: the
click group of huggingface_hub 2.x strips a bare `--json` from the arguments of commands that have no `--format`. No `from __future__ import annotations` here: the CLI frameworks
read the `Annotated` hints at runtime.
"""

import json
import sys
from typing import Annotated

import typer


#: Exit codes.
EXIT_SAFE = 0
EXIT_RISKY = 1
EXIT_BAD_INPUT = 2


def _fail(message: str) -> None:
    # `typer.Exit` is not a click exit under huggingface_hub 2.x's click group: SystemExit works under both.
    print(f"Error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_INPUT)


def _read_texts(path: str) -> list[str]:
    """One calibration text per non-empty paragraph (blank-line separated); a file without blank lines: per line."""
    try:
        with open(path, encoding="utf-8") as f:
            content = f.read()
    except (OSError, UnicodeDecodeError) as e:
        _fail(f"cannot read the calibration text file {path}: {e}")
    blocks = [b.strip() for b in content.split("\n\n") if b.strip()]
    if len(blocks) == 1:
        blocks = [line.strip() for line in content.splitlines() if line.strip()]
    if not blocks:
        _fail(f"the calibration text file {path} is empty.")
    return blocks


def precision(
    path_or_id: Annotated[
        str, typer.Argument(help="A checkpoint directory (with config.json), or a Hub id from the local cache.")
    ],
    dtype: Annotated[
        str | None,
        typer.Option(help="The runtime dtype you plan to use: fp16, bf16 or fp32. Exit code 1 when it is risky."),
    ] = None,
    audit: Annotated[
        bool,
        typer.Option(
            "--audit",
            help="Load the model in fp32 on the CPU, run a calibration forward and measure every module's max "
            "|activation| against fp16's 65504.",
        ),
    ] = False,
    text: Annotated[
        str | None,
        typer.Option(help="With --audit: a UTF-8 file of calibration texts (one per paragraph, or per line)."),
    ] = None,
    top: Annotated[int, typer.Option(help="With --audit: how many modules to list.")] = 10,
    output_format: Annotated[str, typer.Option("--format", help="Output format: text or json.")] = "text",
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON (same as --format json).")
    ] = False,
    revision: Annotated[str | None, typer.Option(help="The Hub revision, for a Hub id.")] = None,
):
    """Inspect a checkpoint's trained precision; with --audit, measure its activation ranges."""
    from .inspection import RUNTIME_PRECISIONS, CheckpointInspectionError, _runtime_name, inspect_checkpoint

    if dtype is not None:
        try:
            dtype = _runtime_name(dtype)
        except CheckpointInspectionError as e:
            _fail(f"--dtype {dtype!r} is not valid: use one of {', '.join(RUNTIME_PRECISIONS)}. ({e})")
    if output_format not in ("text", "json"):
        _fail(f"--format {output_format!r} is not valid: use text or json.")
    json_output = json_output or output_format == "json"
    if text is not None and not audit:
        _fail("--text only applies with --audit.")
    if top < 1:
        _fail(f"--top must be a positive integer, got {top}.")
    texts = _read_texts(text) if text is not None else None
    try:
        report = inspect_checkpoint(path_or_id, audit=audit, texts=texts, revision=revision)
    except CheckpointInspectionError as e:
        _fail(str(e))
    if json_output:
        print(json.dumps(report.to_dict(dtype, top_k=top), indent=2, default=str))
    else:
        print(report.format(dtype, top_k=top))
    code = report.exit_code(dtype)
    if code:
        raise SystemExit(code)
