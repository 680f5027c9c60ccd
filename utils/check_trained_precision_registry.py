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
The table of the runtime registry (`src/transformers/trained_precision/facts/registry.py`) in
`docs/source/en/trained_precision_registry.md`, between its BEGIN/END GENERATED markers. Run from the repository root:

```bash
python utils/check_trained_precision_registry.py                      # fails on a stale table
python utils/check_trained_precision_registry.py --fix_and_overwrite  # regenerates it
```

The rows themselves are checked by `tests/utils/test_trained_precision_registry.py` (precision, id or glob, source,
confidence, reference runtime, duplicates and overlaps, model type, and agreement of the stated rows with the
published precisions of `utils/trained_precisions.json`). The registry is read from this checkout's
`src/transformers/trained_precision/` by path, not from the installed `transformers`, which may be another tree.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import types
from pathlib import Path
from urllib.parse import urlparse


REPO_ROOT = Path(__file__).resolve().parent.parent
PATH_TO_TRAINED_PRECISION = REPO_ROOT / "src" / "transformers" / "trained_precision"
PATH_TO_DOC = REPO_ROOT / "docs" / "source" / "en" / "trained_precision_registry.md"

FIX_COMMAND = "python utils/check_trained_precision_registry.py --fix_and_overwrite"
TABLE_START = f"<!-- BEGIN GENERATED REGISTRY TABLE: edit registry.py, then run `{FIX_COMMAND}` -->"
TABLE_END = "<!-- END GENERATED REGISTRY TABLE -->"

_PACKAGE = "_trained_precision_checkout"


def load_trained_precision(path: Path | None = None):
    """
    Imports the `trained_precision` modules of a checkout by path, under a private package name, and returns
    `(vocabulary, registry, hub_ids)`. The package's `__init__.py` is not run (it builds the lazy module of the
    installed `transformers`): these three modules import only each other.
    """
    path = Path(path or PATH_TO_TRAINED_PRECISION)
    name = f"{_PACKAGE}_{abs(hash(str(path.resolve())))}"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(path)]
        sys.modules[name] = package
    return tuple(importlib.import_module(f"{name}.{sub}") for sub in ("vocabulary", "facts.registry", "facts.hub_ids"))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _link(url: str) -> str:
    return f"[{urlparse(url).netloc}]({url})"


def render_table(registry) -> str:
    """The Markdown table of `registry`, in registry order."""
    lines = [
        "| Checkpoint | Trained precision | Confidence | Stored as | Reference runtime | Note | Source |",
        "|---|---|---|---|---|---|---|",
    ]
    for entry in registry:
        checkpoint = f"`{entry.model_id}`"
        if entry.exceptions:
            checkpoint += " (except " + ", ".join(f"`{e}`" for e in entry.exceptions) + ")"
        stored = entry.stored_dtype or ""
        runtime = f"{entry.reference_runtime} ({_link(entry.reference_source)})" if entry.reference_runtime else ""
        lines.append(
            f"| {checkpoint} | {entry.precision} | {entry.confidence or ''} | {stored} | {runtime} | "
            f"{_cell(entry.note)} | {_link(entry.source)} |"
        )
    return "\n".join(lines)


def _split_doc(text: str, doc_name: str) -> tuple[str, str, str]:
    """`(before, table region, after)` of the doc, or a `ValueError` when the markers are missing or misplaced."""
    starts, ends = text.count(TABLE_START), text.count(TABLE_END)
    if starts != 1 or ends != 1 or text.index(TABLE_START) > text.index(TABLE_END):
        raise ValueError(
            f"{doc_name}: expected the markers\n  {TABLE_START}\n  {TABLE_END}\nonce each, in this order "
            f"(found {starts} and {ends}). Put them back where the registry table belongs, then run `{FIX_COMMAND}`."
        )
    head, rest = text.split(TABLE_START)
    region, tail = rest.split(TABLE_END)
    return head + TABLE_START, region, TABLE_END + tail


def check_docs_table(registry, doc_path: Path = PATH_TO_DOC, overwrite: bool = False) -> list[str]:
    """Problems with the generated table in `doc_path`; with `overwrite`, rewrites a stale table instead."""
    doc_path = Path(doc_path)
    doc_name = os.path.relpath(doc_path, REPO_ROOT) if doc_path.is_absolute() else str(doc_path)
    if not doc_path.is_file():
        return [f"{doc_name} does not exist"]
    with open(doc_path, encoding="utf-8", newline="") as f:
        text = f.read()
    try:
        head, region, tail = _split_doc(text, doc_name)
    except ValueError as e:
        return [str(e)]
    expected = "\n\n" + render_table(registry) + "\n\n"
    if region == expected:
        return []
    if overwrite:
        with open(doc_path, "w", encoding="utf-8", newline="") as f:
            f.write(head + expected + tail)
        return []
    return [f"{doc_name}: the registry table is out of date; run `{FIX_COMMAND}` to regenerate it"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fix_and_overwrite", action="store_true", help="Regenerate the docs table.")
    args = parser.parse_args(argv)
    registry = load_trained_precision()[1].REGISTRY
    problems = check_docs_table(registry, PATH_TO_DOC, overwrite=args.fix_and_overwrite)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    table = "regenerated" if args.fix_and_overwrite else "up to date"
    print(f"The table of {len(registry)} registry rows in {os.path.relpath(PATH_TO_DOC, REPO_ROOT)} is {table}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
