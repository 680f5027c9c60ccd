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
Utility that checks `utils/trained_precisions.json`, the training precisions published by the people who trained a
checkpoint, and writes them into checkpoints' `config.json`. Each row is `[hub_id, precision, source]`: a Hub id
(`organization/name`, written out: no globs), `"fp32"`, `"bf16"` or `"fp16"`, and the https page where the people who
trained the model state it (their paper, model card, training config or repository). A bad row (named in the error), a
duplicate id or rows not sorted by id fail the check.

Use from the root of the repo with:

```bash
python utils/check_trained_precision.py  # used in `make check-repository-consistency`
python utils/check_trained_precision.py --fix_and_overwrite  # sorts the rows
python utils/check_trained_precision.py --write_configs path/to/gpt-neo-1.3B --model_id EleutherAI/gpt-neo-1.3B
```

`--write_configs` takes checkpoint directories (a clone of the model's Hub repo: its commit is the Hub pull request)
and their Hub id. Another trained precision in a config is only replaced with `--force`.
"""

import argparse
import json
import os
import re
import stat
import tempfile
from pathlib import Path
from urllib.parse import urlparse


CHECKER_CONFIG = {
    "name": "trained_precision",
    "label": "Published trained precisions",
    "cache_globs": ["utils/check_trained_precision.py", "utils/trained_precisions.json"],
    "check_args": [],
    "fix_args": ["--fix_and_overwrite"],
}

PATH_TO_DATA = Path(__file__).resolve().parent / "trained_precisions.json"
PRECISIONS = ("fp32", "bf16", "fp16")
# Every id is written out, as the Hub pull request that carries it names one repo: Pythia without the 14m and 31m sizes
# trained after its README's statement.
HUB_ID = re.compile(r"^\w(?:[\w.-]*\w)?/\w(?:[\w.-]*\w)?$")


def row_problems(row) -> list[str]:
    """Why `row` is not a valid `[hub_id, precision, source]` row (an empty list when it is)."""
    if not (isinstance(row, list) and len(row) == 3 and all(isinstance(value, str) for value in row)):
        return ["a row is a list of three strings: [hub_id, precision, source]"]
    hub_id, precision, source = row
    problems = []
    if not HUB_ID.match(hub_id) or "--" in hub_id or ".." in hub_id:
        problems.append(f"{hub_id!r} is not a Hub id `organization/name`")
    if precision not in PRECISIONS:
        problems.append(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if urlparse(source).scheme != "https" or not urlparse(source).netloc or any(char.isspace() for char in source):
        problems.append(f"source {source!r} is not an https URL")
    return problems


def check_rows(rows) -> list[str]:
    """Every problem of `rows`, each naming its row: bad rows, then ids given twice (in any case)."""
    problems = [f"row {i} {row!r}: {problem}" for i, row in enumerate(rows) for problem in row_problems(row)]
    if problems:
        return problems
    for i, (hub_id, _, _) in enumerate(rows):
        for j, (other, _, _) in enumerate(rows[:i]):
            if hub_id.lower() == other.lower():
                problems.append(f"row {i} {hub_id!r}: duplicate of row {j} {other!r}")
    return problems


def format_rows(rows) -> str:
    return "[\n" + ",\n".join(f"  {json.dumps(row)}" for row in rows) + "\n]\n"


def load_rows(path=PATH_TO_DATA) -> tuple[str, list]:
    """The text and the rows of the data file; raises a `ValueError` naming every bad row."""
    text = Path(path).read_text(encoding="utf-8")
    rows = json.loads(text)
    problems = check_rows(rows)
    if problems:
        raise ValueError(f"{path} has {len(problems)} problem(s):\n" + "\n".join(f"- {p}" for p in problems))
    return text, rows


def check_trained_precisions(path=PATH_TO_DATA, overwrite: bool = False):
    """Checks the data file; with `overwrite`, sorts its rows and rewrites it in its format instead of failing."""
    text, rows = load_rows(path)
    expected = format_rows(sorted(rows, key=lambda row: row[0].lower()))
    if text != expected and not overwrite:
        raise ValueError(f"{path}: the rows are not sorted by Hub id, one per line; use --fix_and_overwrite")
    if text != expected:
        Path(path).write_text(expected, encoding="utf-8")


def _members(text: str) -> list[tuple[str, int, int, int]]:
    """`(key, start, value start, value end)` of each member of the JSON object `text`, in order, read by `json`."""
    decoder, space = json.JSONDecoder(), re.compile(r"\s*")
    i = space.match(text).end()
    if text[i : i + 1] != "{":
        raise ValueError("it is not a JSON object")
    i, members = space.match(text, i + 1).end(), []
    while text[i : i + 1] == '"':
        key, j = json.decoder.scanstring(text, i + 1)
        j = space.match(text, space.match(text, j).end() + 1).end()  # past the colon
        end = decoder.raw_decode(text, j)[1]
        members.append((key, i, j, end))
        i = space.match(text, end).end()
        i = space.match(text, i + 1).end() if text[i : i + 1] == "," else i
    return members


def _with_field(text: str, precision: str) -> str:
    """`text` with the top-level `"trained_precision"` set to `precision`: only that member's line changes."""
    members, value = _members(text), json.dumps(precision)
    for key, _, start, end in members:
        if key == "trained_precision":
            return text[:start] + value + text[end:]
    line = f'"trained_precision": {value}'
    if not members:
        return "{\n  " + line + "\n}" + text[text.rindex("}") + 1 :]
    # in sorted position when the keys are sorted (as `save_pretrained` writes them), else last
    keys = [key for key, *_ in members]
    after = [m for m in members if m[0] > "trained_precision"] if keys == sorted(keys) else []
    if after:
        start = after[0][1]
        indent = text[text.rfind("\n", 0, start) + 1 : start]
        return text[:start] + line + ",\n" + indent + text[start:]
    key, start, _, end = members[-1]
    indent = text[text.rfind("\n", 0, start) + 1 : start]
    return text[:end] + ",\n" + indent + line + text[end:]


def write_config(config_file: Path, precision: str, force: bool = False) -> tuple[bool, str]:
    """
    Writes `"trained_precision": precision` into `config_file` atomically, changing only that member's line (every other
    byte is kept); another known precision only with `force`. Returns whether the file now says `precision`, and what
    was done.
    """
    text = config_file.read_text(encoding="utf-8")
    try:
        current = json.loads(text).get("trained_precision", "unknown")
        new_text = _with_field(text, precision)
    except (ValueError, AttributeError) as error:
        raise ValueError(f"{config_file} is not a valid JSON object: {error}") from None
    if current == precision:
        return True, f"already says {precision!r}"
    if current in PRECISIONS and not force:
        return False, f"left as it is: it says {current!r}, the published precision is {precision!r} (see --force)"
    fd, tmp = tempfile.mkstemp(dir=config_file.parent, prefix=".config.json.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new_text)
        os.chmod(tmp, stat.S_IMODE(config_file.stat().st_mode))
        os.replace(tmp, config_file)
    except BaseException:
        os.unlink(tmp)
        raise
    return True, f"wrote {precision!r}" + (f" over {current!r}" if current != "unknown" else "")


def write_configs(paths, model_id: str | None, force: bool = False, data=PATH_TO_DATA) -> bool:
    """
    Writes the published precision of `model_id` into the `config.json` of each checkpoint directory in `paths` (a
    clone of the model's Hub repo, whose commit becomes the Hub pull request); returns whether none was left different.
    Raises a `ValueError` with the reason (no `model_id`, no row for it, no `config.json`, not a JSON object).
    """
    if model_id is None:
        raise ValueError("give the checkpoints' Hub id with --model_id ORG/NAME")
    _, rows = load_rows(data)
    row = next((row for row in rows if row[0].lower() == model_id.lower()), None)
    if row is None:
        raise ValueError(f"{model_id} has no published precision in {data}: add its row, with its source, first")
    missing = [path for path in paths if not (Path(path) / "config.json").is_file()]
    if missing:
        raise ValueError(f"no config.json in {', '.join(map(str, missing))}")
    all_done = True
    for path in paths:
        config_file = Path(path) / "config.json"
        done, message = write_config(config_file, row[1], force=force)
        all_done = all_done and done
        print(f"{config_file}: {message} ({row[0]}, {row[2]})")
    return all_done


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Checks utils/trained_precisions.json, or writes it into configs.")
    parser.add_argument("--fix_and_overwrite", action="store_true", help="Whether to sort and rewrite the rows.")
    parser.add_argument("--write_configs", nargs="+", metavar="PATH", help="Checkpoint directories to write into.")
    parser.add_argument("--model_id", help="The Hub id of the checkpoints given to --write_configs.")
    parser.add_argument("--force", action="store_true", help="Whether to replace another trained precision.")
    args = parser.parse_args(argv)
    try:
        if args.write_configs:
            return 0 if write_configs(args.write_configs, args.model_id, force=args.force) else 1
        check_trained_precisions(overwrite=args.fix_and_overwrite)
    except (ValueError, OSError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
