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
Utility that checks the registry of trained precisions (`src/transformers/trained_precision/registry.py`) and the table
generated from it in `docs/source/en/trained_precision_registry.md`.

Every row is checked: a canonical precision (`fp32`, `bf16`, `fp16`), a well-formed Hub id or family glob, an https
source, a confidence from `CONFIDENCE_LEVELS` (`stated` or `inferred`), a one-line note, a publisher's reference
runtime only with a source of its own, no duplicate ids, no two rows matching the same id unless a glob lists the other
row in its `exceptions` (the message says when the two contradict each other), and a `model_type` that upstream's
`CONFIG_MAPPING` knows (where one is given).

Use from the root of the repo (or with its path, from any directory) with:

```bash
python utils/check_trained_precision.py
```

for a check that will error on a bad row or a stale docs table (used in `make check-repository-consistency`), and

```bash
python utils/check_trained_precision.py --fix_and_overwrite
```

to regenerate the docs table. Rows themselves are fixed by hand; the error names each bad row.

Writing the field into checkpoints is a user command, `transformers precision set` (see the trained precision guide).

The registry is read from this checkout's `src/transformers/trained_precision/` *by path*, not from the installed
`transformers`: the installed wheel may predate the edit being checked. The model types come from the installed
`transformers` (its `CONFIG_MAPPING`).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
import types
from pathlib import Path
from urllib.parse import urlparse


CHECKER_CONFIG = {
    "name": "trained_precision",
    "label": "Trained-precision registry and docs table",
    "cache_globs": [
        "src/transformers/trained_precision/registry.py",
        "src/transformers/trained_precision/vocabulary.py",
        "docs/source/en/trained_precision_registry.md",
        "utils/check_trained_precision.py",
    ],
    "check_args": [],
    "fix_args": ["--fix_and_overwrite"],
}

# All paths are relative to the repo root (tests patch them).
REPO_ROOT = Path(__file__).resolve().parent.parent
PATH_TO_TRAINED_PRECISION = REPO_ROOT / "src" / "transformers" / "trained_precision"
PATH_TO_DOC = REPO_ROOT / "docs" / "source" / "en" / "trained_precision_registry.md"

FIX_COMMAND = "python utils/check_trained_precision.py --fix_and_overwrite"
TABLE_START = f"<!-- BEGIN GENERATED REGISTRY TABLE: edit registry.py, then run `{FIX_COMMAND}` -->"
TABLE_END = "<!-- END GENERATED REGISTRY TABLE -->"

# A glob is a Hub repo name with "*" and "?" in it, checked by the Hub-name rule with each wildcard read as one
# letter; it must start with a literal character: "org/*" would claim a whole organisation.
_WILDCARDS = str.maketrans({"*": "x", "?": "x"})

_PACKAGE = "_trained_precision_checkout"


def load_trained_precision(path: Path | None = None):
    """
    Imports this checkout's `trained_precision` modules by path, under a private package name, and returns
    `(vocabulary, registry, hub_ids)`. The package's `__init__.py` is not run (it builds the lazy module of the
    installed `transformers`): these three modules import only each other.
    """
    path = Path(path or PATH_TO_TRAINED_PRECISION)
    name = f"{_PACKAGE}_{abs(hash(str(path.resolve())))}"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(path)]
        sys.modules[name] = package
    return tuple(importlib.import_module(f"{name}.{sub}") for sub in ("vocabulary", "registry", "hub_ids"))


def get_known_model_types() -> set[str]:
    """The model types of upstream's `CONFIG_MAPPING`, from the installed `transformers`."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except ImportError as e:
        raise ImportError(
            f"Checking the registry's model types needs transformers installed (`pip install -e .`): {e}"
        ) from e
    return set(CONFIG_MAPPING_NAMES)


# ----------------------------------------------------------------------------------------------------------------
# Row checks
# ----------------------------------------------------------------------------------------------------------------


def is_glob(model_id: str) -> bool:
    return any(ch in model_id for ch in "*?[")


def check_hub_id(model_id: object, allow_glob: bool = True) -> str | None:
    """Why `model_id` is not a well-formed Hub id (or family glob), or `None`."""
    if not isinstance(model_id, str):
        return f"the id must be a string, not {type(model_id).__name__}"
    if model_id != model_id.strip() or any(ch.isspace() for ch in model_id):
        return "the id contains whitespace"
    if model_id.count("/") != 1:
        return "the id must be `organisation/name` (exactly one `/`)"
    org, name = model_id.split("/")
    if "[" in model_id or "]" in model_id:
        return "character classes (`[...]`) are not supported in globs; use `*` or `?`"
    if is_glob(org):
        return "a glob may only use wildcards in the repo name; the organisation must be literal"
    hub_ids = load_trained_precision()[2]
    if not hub_ids.is_valid_repo_name(org):
        return f"`{org}` is not a valid Hub organisation name"
    if is_glob(name):
        if not allow_glob:
            return "a glob is not allowed here"
        if name[0] in "*?" or not hub_ids.is_valid_repo_name(name.translate(_WILDCARDS)):
            return f"`{name}` is not a valid glob: it must start with a literal character of a Hub name"
    elif not hub_ids.is_valid_repo_name(name):
        return f"`{name}` is not a valid Hub repo name"
    return None


def globs_overlap(a: str, b: str) -> bool:
    """
    Whether some string matches both fnmatch patterns `a` and `b` (made of literals, `*` and `?`; case-insensitive).

    A common match can always be chosen so that no character is produced by two `*` at once (such characters can be
    dropped), so it suffices to walk both patterns, letting a `*` of one side absorb the other side's next token.
    """
    a, b = a.lower(), b.lower()
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]
    while stack:
        i, j = stack.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] == "*":
            stack.append((i + 1, j))
            if j < len(b):
                stack.append((i, j + 1))
        if j < len(b) and b[j] == "*":
            stack.append((i, j + 1))
            if i < len(a):
                stack.append((i + 1, j))
        if i < len(a) and j < len(b) and "*" not in (a[i], b[j]):
            if a[i] == b[j] or "?" in (a[i], b[j]):
                stack.append((i + 1, j + 1))
    return False


def _excluded(entry, other_id: str) -> bool:
    """Whether the glob row `entry` steps aside for `other_id`: an exact id its exceptions cover, or a glob it lists."""
    if not entry.is_glob:
        return False
    if is_glob(other_id):
        return any(e.lower() == other_id.lower() for e in entry.exceptions)
    return not entry.matches(other_id)


def is_https_url(value: object) -> bool:
    """Whether `value` is an https URL with a host and no whitespace."""
    if not isinstance(value, str) or any(ch.isspace() for ch in value):
        return False
    parsed = urlparse(value)
    return parsed.scheme == "https" and bool(parsed.netloc)


def _quoted(values) -> str:
    return ", ".join(repr(v) for v in values)


def _reference_runtime_problems(entry, vocabulary) -> list[str]:
    """A publisher's reference runtime is evidence of its own, so it needs a canonical precision and its own source."""
    runtime, source = entry.reference_runtime, entry.reference_source
    canonical = (vocabulary.FP32, vocabulary.BF16, vocabulary.FP16)
    if runtime is None:
        if source is not None:
            return ["reference_source is given without reference_runtime; give both or neither"]
        return []
    problems = []
    if runtime not in canonical:
        problems.append(f"reference_runtime {runtime!r} must be one of {_quoted(canonical)}")
    elif runtime == entry.precision:
        problems.append(
            "reference_runtime equals precision; give it only where the publisher runs the model otherwise"
        )
    if not source:
        problems.append("reference_runtime has no reference_source; cite the page where the publisher documents it")
    elif not is_https_url(source):
        problems.append(f"reference_source {source!r} is not an https URL")
    return problems


def check_entry(entry, vocabulary, model_types: set[str] | None) -> list[str]:
    """The problems of one row, each a sentence."""
    problems = []
    # precision
    precision = entry.precision
    if precision not in (vocabulary.FP32, vocabulary.BF16, vocabulary.FP16):
        try:
            canonical = vocabulary.normalize_precision(precision)
        except vocabulary.InvalidTrainedPrecisionError:
            problems.append(
                f"precision {precision!r} is not a training precision; use one of "
                f"{vocabulary.FP32!r}, {vocabulary.BF16!r}, {vocabulary.FP16!r}"
            )
        else:
            if canonical == vocabulary.UNKNOWN:
                problems.append("precision 'unknown' says nothing: remove the row until a source states it")
            else:
                problems.append(f"precision {precision!r} is an alias; write the canonical name {canonical!r}")
    # stored dtype
    if entry.stored_dtype is not None:
        if entry.stored_dtype not in (vocabulary.FP32, vocabulary.BF16, vocabulary.FP16):
            problems.append(
                f"stored_dtype {entry.stored_dtype!r} must be one of {vocabulary.FP32!r}, {vocabulary.BF16!r}, "
                f"{vocabulary.FP16!r}"
            )
        elif entry.stored_dtype == precision:
            problems.append("stored_dtype equals precision; give stored_dtype only where the two differ")
    # id
    id_problem = check_hub_id(entry.model_id)
    if id_problem:
        problems.append(id_problem)
    # exceptions
    if entry.exceptions and not entry.is_glob:
        problems.append("only a glob row can have exceptions")
    for exception in entry.exceptions:
        bad = check_hub_id(exception)
        if bad:
            problems.append(f"exception `{exception}`: {bad}")
        elif entry.is_glob and not id_problem and not globs_overlap(entry.model_id, exception):
            problems.append(f"exception `{exception}` is not matched by the glob (a typo?)")
    # source
    if not entry.source:
        problems.append("the row has no source; cite the https page where the trainers state the precision")
    elif not is_https_url(entry.source):
        problems.append(
            f"source {entry.source!r} is not an https URL; cite the page where the trainers state the precision"
        )
    # confidence
    levels = load_trained_precision()[1].CONFIDENCE_LEVELS
    if entry.confidence is None:
        problems.append(
            f"the row has no confidence; add `confidence=` one of {_quoted(levels)} (see CONFIDENCE_LEVELS in "
            "registry.py: stated by the trainers, or inferred from what the source states)"
        )
    elif entry.confidence not in levels:
        problems.append(f"confidence {entry.confidence!r} is not one of {_quoted(levels)}")
    # reference runtime
    problems.extend(_reference_runtime_problems(entry, vocabulary))
    # note
    if not isinstance(entry.note, str) or not entry.note.strip():
        problems.append('the note is empty; say how it was trained, e.g. "mixed bf16, fp32 master weights"')
    elif "\n" in entry.note:
        problems.append("the note must be one line")
    # model type
    if entry.model_type is not None and model_types is not None and entry.model_type not in model_types:
        close = difflib.get_close_matches(entry.model_type, sorted(model_types), n=3)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        problems.append(
            f"model_type {entry.model_type!r} is not in upstream's CONFIG_MAPPING{hint}; use the `model_type` of "
            "the checkpoint's config.json, or leave it out for remote-code models"
        )
    return problems


def _contradiction(a, b) -> str:
    """How two rows that can match one id disagree (`""` when they agree on every fact a lookup returns)."""
    fields = ("precision", "stored_dtype", "reference_runtime")
    return ", ".join(
        f"{field} {getattr(a, field)!r} vs {getattr(b, field)!r}"
        for field in fields
        if getattr(a, field) != getattr(b, field)
    )


def check_registry(registry, vocabulary, model_types: set[str] | None) -> list[str]:
    """Every problem of `registry`, each naming its row: `row N `id`: problem`."""

    def name(index, entry):
        return f"row {index} `{entry.model_id}`"

    problems = []
    for index, entry in enumerate(registry):
        problems.extend(f"{name(index, entry)}: {p}" for p in check_entry(entry, vocabulary, model_types))

    valid = [
        (i, e) for i, e in enumerate(registry) if isinstance(e.model_id, str) and check_hub_id(e.model_id) is None
    ]
    # duplicates (the Hub resolves ids case-insensitively)
    first_seen = {}
    for index, entry in valid:
        key = entry.model_id.lower()
        if key in first_seen:
            other = first_seen[key]
            problems.append(
                f"{name(index, entry)}: duplicate of {name(other, registry[other])}; keep one row per checkpoint"
            )
        else:
            first_seen[key] = index
    # overlaps: two rows matching one id must be disambiguated by a glob's exceptions
    for pos, (i, a) in enumerate(valid):
        for j, b in valid[pos + 1 :]:
            if a.model_id.lower() == b.model_id.lower():
                continue
            if not (a.is_glob or b.is_glob) or not globs_overlap(a.model_id, b.model_id):
                continue
            if _excluded(a, b.model_id) or _excluded(b, a.model_id):
                continue
            clash = _contradiction(a, b)
            if a.is_glob and b.is_glob:
                verb = (
                    f"contradicts the glob of {name(j, b)} ({clash})"
                    if clash
                    else f"overlaps the glob of {name(j, b)}"
                )
                problems.append(
                    f"{name(i, a)}: {verb}; add one to the other's `exceptions` so every id has a single row"
                )
            else:
                glob_i, glob, exact = (i, a, b) if a.is_glob else (j, b, a)
                problems.append(
                    f"{name(glob_i, glob)}: also matches `{exact.model_id}`, which has a row of its own"
                    + (f" that contradicts it ({clash})" if clash else "")
                    + f"; add `{exact.model_id}` to this row's `exceptions`"
                )
    return problems


# ----------------------------------------------------------------------------------------------------------------
# The docs table
# ----------------------------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


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


def _link(url: str) -> str:
    return f"[{urlparse(url).netloc}]({url})"


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


def check_docs_table(registry, doc_path: Path, overwrite: bool = False) -> list[str]:
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


def check_trained_precision(overwrite: bool = False, registry=None, doc_path: Path | None = None, model_types=None):
    """
    Checks every registry row and the docs table; with `overwrite`, regenerates the table (only from a valid
    registry). Raises a `ValueError` listing every problem; returns `(rows checked, the docs page checked)`.
    """
    vocabulary, registry_module, _ = load_trained_precision()
    registry = registry_module.REGISTRY if registry is None else registry
    model_types = get_known_model_types() if model_types is None else model_types
    registry_file = os.path.relpath(PATH_TO_TRAINED_PRECISION / "registry.py", REPO_ROOT)

    row_problems = check_registry(registry, vocabulary, model_types)
    if row_problems:
        raise ValueError(
            f"The trained-precision registry ({registry_file}) has {len(row_problems)} problem(s):\n"
            + "\n".join(f"- {p}" for p in row_problems)
            + f"\nFix these rows in {registry_file}, then run `{FIX_COMMAND}` to regenerate the docs table."
        )
    doc_path = doc_path or PATH_TO_DOC
    doc_problems = check_docs_table(registry, doc_path, overwrite=overwrite)
    if doc_problems:
        raise ValueError("\n".join(doc_problems))
    return len(registry), os.path.relpath(doc_path, REPO_ROOT) if Path(doc_path).is_absolute() else str(doc_path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--fix_and_overwrite", action="store_true", help="Regenerate the docs table.")
    args = parser.parse_args(argv)
    rows, doc_name = check_trained_precision(overwrite=args.fix_and_overwrite)
    registry_file = os.path.relpath(PATH_TO_TRAINED_PRECISION / "registry.py", REPO_ROOT)
    table = "regenerated" if args.fix_and_overwrite else "up to date"
    print(f"{REPO_ROOT}: {rows} registry rows in {registry_file} are valid; the table in {doc_name} is {table}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
