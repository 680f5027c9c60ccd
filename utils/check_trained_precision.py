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
checkpoint: rows `[hub_id, precision, source]`, sorted by id. They are what the Hub config pull requests that
`utils/open_trained_precision_prs.py` prepares are made from. Use from the root of the repo with:

```bash
python utils/check_trained_precision.py  # used in `make check-repository-consistency`
python utils/check_trained_precision.py --fix_and_overwrite  # sorts the rows
```
"""

import argparse
import json
import re
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
# Every id is written out, as the Hub pull request that carries it names one repo
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Checks utils/trained_precisions.json.")
    parser.add_argument("--fix_and_overwrite", action="store_true", help="Whether to sort and rewrite the rows.")
    args = parser.parse_args(argv)
    try:
        check_trained_precisions(overwrite=args.fix_and_overwrite)
    except (ValueError, OSError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
