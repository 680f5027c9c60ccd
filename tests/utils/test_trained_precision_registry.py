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
The runtime registry (`src/transformers/trained_precision/facts/registry.py`): every row's rules, its agreement with the
published precisions of `utils/trained_precisions.json`, its lookups, and its table in the docs.

Every row has a canonical precision (`fp32`, `bf16`, `fp16`), a well-formed Hub id or family glob, an https source, a
confidence from `CONFIDENCE_LEVELS` (`stated` or `inferred`), a one-line note, a publisher's reference runtime only with
a source of its own, no duplicate ids, no two rows matching the same id unless a glob lists the other row in its
`exceptions` (the message says when the two contradict each other), and a `model_type` that upstream's
`CONFIG_MAPPING` knows (where one is given). The `stated` rows are the published precisions, row for row (a family
glob there may be written out id by id); the table in `docs/source/en/trained_precision_registry.md` is regenerated
with `python utils/check_trained_precision_registry.py --fix_and_overwrite`.

The rows are read from the installed `transformers`; a broken copy of `registry.py` is read by path.
"""

from __future__ import annotations

import difflib
import shutil
import sys
import unittest
from pathlib import Path
from unittest import mock
from urllib.parse import urlparse

from parameterized import parameterized

from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
from transformers.testing_utils import TestCasePlus


REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO_ROOT / "utils"))

import check_trained_precision  # noqa: E402
import check_trained_precision_registry as registry_table  # noqa: E402

from transformers.trained_precision import vocabulary  # noqa: E402
from transformers.trained_precision.facts import hub_ids as HUB_IDS  # noqa: E402
from transformers.trained_precision.facts import registry  # noqa: E402


RegistryEntry = registry.RegistryEntry
MODEL_TYPES = {"llama", "gpt_neo", "gpt_neox", "opt", "t5"}
FIX_COMMAND = registry_table.FIX_COMMAND

# A glob is a Hub repo name with "*" and "?" in it, checked by the Hub-name rule with each wildcard read as one
# letter; it must start with a literal character: "org/*" would claim a whole organisation.
_WILDCARDS = str.maketrans({"*": "x", "?": "x"})


# ----------------------------------------------------------------------------------------------------------------
# The rules of a row
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
    hub_ids = HUB_IDS
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


def _precision_problems(entry, vocabulary) -> list[str]:
    """The precision is canonical; a stored dtype is canonical and differs from it."""
    problems = []
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
    if entry.stored_dtype is not None:
        if entry.stored_dtype not in (vocabulary.FP32, vocabulary.BF16, vocabulary.FP16):
            problems.append(
                f"stored_dtype {entry.stored_dtype!r} must be one of {vocabulary.FP32!r}, {vocabulary.BF16!r}, "
                f"{vocabulary.FP16!r}"
            )
        elif entry.stored_dtype == precision:
            problems.append("stored_dtype equals precision; give stored_dtype only where the two differ")
    return problems


def _id_problems(entry) -> list[str]:
    """The id (or glob) is well formed; a glob's exceptions are well formed and matched by it."""
    problems = []
    id_problem = check_hub_id(entry.model_id)
    if id_problem:
        problems.append(id_problem)
    if entry.exceptions and not entry.is_glob:
        problems.append("only a glob row can have exceptions")
    for exception in entry.exceptions:
        bad = check_hub_id(exception)
        if bad:
            problems.append(f"exception `{exception}`: {bad}")
        elif entry.is_glob and not id_problem and not globs_overlap(entry.model_id, exception):
            problems.append(f"exception `{exception}` is not matched by the glob (a typo?)")
    return problems


def _source_problems(entry, levels) -> list[str]:
    """An https source and a confidence level."""
    problems = []
    if not entry.source:
        problems.append("the row has no source; cite the https page where the trainers state the precision")
    elif not is_https_url(entry.source):
        problems.append(
            f"source {entry.source!r} is not an https URL; cite the page where the trainers state the precision"
        )
    if entry.confidence is None:
        problems.append(
            f"the row has no confidence; add `confidence=` one of {_quoted(levels)} (see CONFIDENCE_LEVELS in "
            "registry.py: stated by the trainers, or inferred from what the source states)"
        )
    elif entry.confidence not in levels:
        problems.append(f"confidence {entry.confidence!r} is not one of {_quoted(levels)}")
    return problems


def _note_and_model_type_problems(entry, model_types: set[str] | None) -> list[str]:
    """A one-line note; a `model_type` that upstream's `CONFIG_MAPPING` knows."""
    problems = []
    if not isinstance(entry.note, str) or not entry.note.strip():
        problems.append('the note is empty; say how it was trained, e.g. "mixed bf16, fp32 master weights"')
    elif "\n" in entry.note:
        problems.append("the note must be one line")
    if entry.model_type is not None and model_types is not None and entry.model_type not in model_types:
        close = difflib.get_close_matches(entry.model_type, sorted(model_types), n=3)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        problems.append(
            f"model_type {entry.model_type!r} is not in upstream's CONFIG_MAPPING{hint}; use the `model_type` of "
            "the checkpoint's config.json, or leave it out for remote-code models"
        )
    return problems


def check_entry(entry, vocabulary, model_types: set[str] | None, levels=None) -> list[str]:
    """The problems of one row, each a sentence."""
    levels = registry.CONFIDENCE_LEVELS if levels is None else levels
    return [
        *_precision_problems(entry, vocabulary),
        *_id_problems(entry),
        *_source_problems(entry, levels),
        *_reference_runtime_problems(entry, vocabulary),
        *_note_and_model_type_problems(entry, model_types),
    ]


def _contradiction(a, b) -> str:
    """How two rows that can match one id disagree (`""` when they agree on every fact a lookup returns)."""
    fields = ("precision", "stored_dtype", "reference_runtime")
    return ", ".join(
        f"{field} {getattr(a, field)!r} vs {getattr(b, field)!r}"
        for field in fields
        if getattr(a, field) != getattr(b, field)
    )


def check_registry(entries, vocabulary, model_types: set[str] | None) -> list[str]:
    """Every problem of the rows `entries`, each naming its row: `row N `id`: problem`."""

    def name(index, entry):
        return f"row {index} `{entry.model_id}`"

    problems = []
    for index, entry in enumerate(entries):
        problems.extend(f"{name(index, entry)}: {p}" for p in check_entry(entry, vocabulary, model_types))

    valid = [(i, e) for i, e in enumerate(entries) if isinstance(e.model_id, str) and check_hub_id(e.model_id) is None]
    # duplicates (the Hub resolves ids case-insensitively)
    first_seen = {}
    for index, entry in valid:
        key = entry.model_id.lower()
        if key in first_seen:
            other = first_seen[key]
            problems.append(
                f"{name(index, entry)}: duplicate of {name(other, entries[other])}; keep one row per checkpoint"
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
# Tests
# ----------------------------------------------------------------------------------------------------------------


def row(model_id="org/model", precision="bf16", source="https://example.org/paper", note="mixed bf16", **kwargs):
    kwargs.setdefault("confidence", "stated")
    return RegistryEntry(model_id, precision, source, note, **kwargs)


class RepoRegistryTest(unittest.TestCase):
    """The checkout's registry, docs page and published precisions."""

    def test_every_row_is_valid(self):
        problems = check_registry(registry.REGISTRY, vocabulary, set(CONFIG_MAPPING_NAMES))
        self.assertEqual(problems, [], "fix these rows in src/transformers/trained_precision/facts/registry.py")

    def test_docs_table_is_up_to_date(self):
        self.assertEqual(registry_table.check_docs_table(registry.REGISTRY), [])

    def test_every_stated_row_is_published(self):
        """A stated row is a row of utils/trained_precisions.json, or a glob whose ids that file lists one by one."""
        published = {
            hub_id.lower(): [hub_id, p, source] for hub_id, p, source in check_trained_precision.load_rows()[1]
        }
        for entry in (e for e in registry.REGISTRY if e.confidence == registry.STATED):
            with self.subTest(entry.model_id):
                if entry.model_id.lower() in published:
                    self.assertEqual(
                        published[entry.model_id.lower()], [entry.model_id, entry.precision, entry.source]
                    )
                    continue
                self.assertTrue(entry.is_glob, "a stated row missing from utils/trained_precisions.json")
                members = [r for r in published.values() if entry.matches(r[0])]
                self.assertNotEqual(
                    members, [], "a stated glob neither in utils/trained_precisions.json nor written out"
                )
                for hub_id, precision, source in members:
                    self.assertEqual((precision, source), (entry.precision, entry.source), hub_id)

    def test_every_published_row_is_a_stated_row(self):
        exact = {e.model_id.lower(): e for e in registry.REGISTRY}
        for hub_id, precision, source in check_trained_precision.load_rows()[1]:
            with self.subTest(hub_id):
                entry = exact.get(hub_id.lower()) or registry.lookup(hub_id)
                self.assertIsNotNone(entry, "a published precision the registry does not have")
                self.assertEqual(
                    (entry.confidence, entry.precision, entry.source), (registry.STATED, precision, source)
                )


class LookupTest(unittest.TestCase):
    """`lookup()` on the real registry: which row answers for the ids people load."""

    @parameterized.expand(
        [
            # the families users run in half precision today
            ("google/gemma-2-9b", "google/gemma-2-9b", "bf16", "inferred"),
            ("google/gemma-3-12b-it", "google/gemma-3-*", "bf16", "inferred"),
            ("google/gemma-3-1b-it", "google/gemma-3-1b-*", "bf16", "inferred"),
            ("google/gemma-4-31B-it", "google/gemma-4-*", "bf16", "stated"),
            ("tiiuae/falcon-40b", "tiiuae/falcon-40b", "bf16", "stated"),
            ("meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-1B", "bf16", "inferred"),
            ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-*", "bf16", "stated"),
            ("google/flan-t5-base", "google/flan-t5-base", "bf16", "inferred"),
            ("facebook/opt-1.3b", "facebook/opt-*", "fp16", "inferred"),
            ("HuggingFaceH4/zephyr-7b-beta", "HuggingFaceH4/zephyr-7b-beta", "bf16", "inferred"),
            # the Pythia split: a glob for the fp16 sizes, exact rows win for the others
            ("EleutherAI/pythia-410m", "EleutherAI/pythia-*", "fp16", "stated"),
            ("EleutherAI/pythia-1b", "EleutherAI/pythia-1b", "bf16", "stated"),
            ("EleutherAI/pythia-1b-deduped", "EleutherAI/pythia-1b-deduped", "fp16", "stated"),
            # ids are matched as the Hub resolves them: any case, legacy short ids under their org
            ("eleutherai/Pythia-410M", "EleutherAI/pythia-*", "fp16", "stated"),
            ("GOOGLE/Flan-T5-Base", "google/flan-t5-base", "bf16", "inferred"),
            ("t5-base", "google-t5/t5-*", "bf16", "stated"),
        ]
    )
    def test_row_for(self, model_id, row_id, precision, confidence):
        entry = registry.lookup(model_id)
        self.assertIsNotNone(entry, model_id)
        self.assertEqual((entry.model_id, entry.precision, entry.confidence), (row_id, precision, confidence))
        prefix = "stated at " if confidence == "stated" else "inferred from "
        self.assertEqual(entry.citation, prefix + entry.source)

    @parameterized.expand(
        [
            ("unsourced", "EleutherAI/gpt-neo-125M"),
            ("excluded_from_a_glob_without_a_row", "google/gemma-3-270m"),
            ("other_org", "someone/gemma-3-12b-it"),
            ("not_a_family_member", "google/gemma-3n-E4B-it"),
            ("a_local_directory", "./checkpoints/flan-t5-base"),
            ("a_diffusers_pipeline", "THUDM/CogVideoX-2b"),
            ("nothing", None),
        ]
    )
    def test_no_row(self, _, model_id):
        self.assertIsNone(registry.lookup(model_id))

    def test_publisher_reference_runtime(self):
        llama = registry.lookup("meta-llama/Llama-2-7b-hf")
        self.assertEqual((llama.precision, llama.stored_dtype, llama.reference_runtime), ("bf16", "fp16", "fp16"))
        self.assertTrue(llama.reference_source.startswith("https://"))
        self.assertIsNone(registry.lookup("meta-llama/Llama-3.2-1B").reference_runtime)

    def test_exact_row_beats_a_glob_listed_first(self):
        table = (row("org/model-*", precision="fp16", exceptions=("org/model-1b",)), row("org/model-1b"))
        self.assertIs(registry.lookup("org/model-1b", table), table[1])
        self.assertIs(registry.lookup("org/model-7b", table), table[0])

    def test_citation(self):
        self.assertEqual(row(confidence="stated").citation, "stated at https://example.org/paper")
        self.assertEqual(row(confidence="inferred").citation, "inferred from https://example.org/paper")
        self.assertEqual(row(confidence=None).citation, "from https://example.org/paper")

    def test_every_row_is_checked_and_the_table_is_large_enough(self):
        self.assertGreaterEqual(len(registry.REGISTRY), 70)
        self.assertEqual(check_registry(registry.REGISTRY, vocabulary, set(CONFIG_MAPPING_NAMES)), [])


class RegistryCheckTest(unittest.TestCase):
    @parameterized.expand(
        [
            ("invalid_precision", [row(precision="bf8")], "is not a training precision"),
            ("alias_precision", [row(precision="bfloat16")], "write the canonical name 'bf16'"),
            ("unknown_precision", [row(precision="unknown")], "says nothing"),
            ("no_org", [row("gpt2")], "exactly one `/`"),
            ("two_slashes", [row("org/sub/model")], "exactly one `/`"),
            ("whitespace", [row("org/my model")], "whitespace"),
            ("leading_dash", [row("org/-model")], "not a valid Hub repo name"),
            ("double_dash", [row("org/model--x")], "not a valid Hub repo name"),
            ("bad_org", [row("o rg/model")], "whitespace"),
            ("glob_in_org", [row("Eleuther*/pythia-1b")], "organisation must be literal"),
            ("bare_glob", [row("org/*")], "not a valid glob"),
            ("char_class", [row("org/model-[ab]")], "character classes"),
            ("http_source", [row(source="http://example.org/x")], "not an https URL"),
            ("no_source", [row(source="")], "the row has no source"),
            (
                "no_confidence",
                [row(confidence=None)],
                "has no confidence; add `confidence=` one of 'stated', 'inferred'",
            ),
            ("bad_confidence", [row(confidence="high")], "confidence 'high' is not one of 'stated', 'inferred'"),
            ("runtime_without_source", [row(reference_runtime="fp16")], "reference_runtime has no reference_source"),
            ("runtime_http_source", [row(reference_runtime="fp16", reference_source="http://x.org")], "not an https"),
            ("source_without_runtime", [row(reference_source="https://x.org")], "without reference_runtime"),
            ("runtime_equals_precision", [row(reference_runtime="bf16", reference_source="https://x.org")], "equals"),
            ("runtime_alias", [row(reference_runtime="float16", reference_source="https://x.org")], "must be one of"),
            ("no_url_source", [row(source="the paper")], "not an https URL"),
            ("empty_note", [row(note=" ")], "the note is empty"),
            ("multiline_note", [row(note="a\nb")], "one line"),
            ("unknown_model_type", [row(model_type="gpt-neo")], "did you mean 'gpt_neo'"),
            ("stored_equals_trained", [row(stored_dtype="bf16")], "stored_dtype equals precision"),
            ("bad_stored", [row(stored_dtype="float16")], "stored_dtype 'float16' must be one of"),
            ("exceptions_on_exact", [row(exceptions=("org/other",))], "only a glob row can have exceptions"),
            ("exception_not_matched", [row("org/pythia-*", exceptions=("org/pytia-1b",))], "not matched by the glob"),
        ]
    )
    def test_bad_row(self, _, entries, expected):
        problems = check_registry(entries, vocabulary, MODEL_TYPES)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn(f"row 0 `{entries[0].model_id}`", problems[0])
        self.assertIn(expected, problems[0])

    def test_duplicate_ids(self):
        problems = check_registry([row("org/Model"), row("org/other"), row("org/model")], vocabulary, MODEL_TYPES)
        self.assertEqual(problems, ["row 2 `org/model`: duplicate of row 0 `org/Model`; keep one row per checkpoint"])

    def test_overlapping_globs(self):
        problems = check_registry([row("org/opt-*"), row("org/opt-1*", precision="fp16")], vocabulary, MODEL_TYPES)
        self.assertEqual(len(problems), 1)
        self.assertIn(
            "row 0 `org/opt-*`: contradicts the glob of row 1 `org/opt-1*` (precision 'bf16' vs 'fp16')", problems[0]
        )
        self.assertIn("exceptions", problems[0])

    def test_overlapping_globs_that_agree_are_still_ambiguous(self):
        # which row (and so which source and confidence) answers would depend on the order of the table
        entries = [row("org/opt-*"), row("org/opt-1*", confidence="inferred")]
        problems = check_registry(entries, vocabulary, MODEL_TYPES)
        self.assertEqual(len(problems), 1)
        self.assertIn("row 0 `org/opt-*`: overlaps the glob of row 1 `org/opt-1*`;", problems[0])

    def test_glob_contradicting_an_exact_row(self):
        entries = [row("org/pythia-*", precision="fp16"), row("org/pythia-1b", stored_dtype="fp16")]
        problems = check_registry(entries, vocabulary, MODEL_TYPES)
        self.assertEqual(len(problems), 1)
        self.assertIn(
            "also matches `org/pythia-1b`, which has a row of its own that contradicts it (precision 'fp16' vs "
            "'bf16', stored_dtype None vs 'fp16')",
            problems[0],
        )

    def test_exact_row_under_glob_needs_exception(self):
        problems = check_registry([row("org/pythia-*"), row("org/pythia-1b")], vocabulary, MODEL_TYPES)
        self.assertEqual(len(problems), 1)
        self.assertIn("row 0 `org/pythia-*`: also matches `org/pythia-1b`", problems[0])
        self.assertIn("exceptions", problems[0])

    @parameterized.expand(
        [
            ("exact_exception", [row("org/pythia-*", exceptions=("org/pythia-1b",)), row("org/pythia-1b")]),
            ("glob_exception", [row("org/opt-*", exceptions=("org/opt-1*",)), row("org/opt-1*", precision="fp16")]),
            ("disjoint_globs", [row("org/deberta-v2-*"), row("org/deberta-v3-*")]),
            ("other_org", [row("org/t5-*"), row("other/t5-small")]),
            ("model_type_unchecked", [row(model_type=None)]),
            ("underscore_glob", [row("org/_private-*")]),
            ("reference_runtime", [row(reference_runtime="fp16", reference_source="https://example.org/docs")]),
            ("inferred", [row(confidence="inferred")]),
        ]
    )
    def test_good_rows(self, _, entries):
        self.assertEqual(check_registry(entries, vocabulary, MODEL_TYPES), [])

    @parameterized.expand(
        [
            ("org/pythia-*", "org/pythia-1b", True),
            ("org/pythia-*", "org/Pythia-1B", True),
            ("org/opt-*", "org/opt-1*", True),
            ("org/*-hf", "org/llama-*", True),
            ("org/a?c", "org/*b*", True),
            ("org/deberta-v2-*", "org/deberta-v3-*", False),
            ("org/t5-*", "org/mt5-*", False),
            ("org/a*z", "org/b*", False),
            ("org/model", "org/model-x", False),
        ]
    )
    def test_globs_overlap(self, a, b, expected):
        self.assertEqual(globs_overlap(a, b), expected)
        self.assertEqual(globs_overlap(b, a), expected)


class RegistryFileTest(TestCasePlus):
    """A broken row in a copy of the checkout's registry.py is named (the registry is read by path)."""

    def registry_with(self, old, new):
        tmp = Path(self.get_auto_remove_tmp_dir()) / "trained_precision"
        shutil.copytree(
            REPO_ROOT / "src/transformers/trained_precision", tmp, ignore=shutil.ignore_patterns("__pycache__")
        )
        text = (tmp / "facts/registry.py").read_text()
        self.assertEqual(text.count(old), 1)
        (tmp / "facts/registry.py").write_text(text.replace(old, new))
        copy_vocabulary, copy_registry, _ = registry_table.load_trained_precision(tmp)
        return check_registry(copy_registry.REGISTRY, copy_vocabulary, set(CONFIG_MAPPING_NAMES))

    @parameterized.expand(
        [
            (
                "not_https",
                "| https://github.com/EleutherAI/gpt-neo/blob/master/configs/GPT3_2-7B_pretrained.json |",
                "| github.com/gpt-neo/configs/GPT3_2-7B_pretrained.json |",
                "row 1 `EleutherAI/gpt-neo-2.7B`: source 'github.com/gpt-neo/configs/GPT3_2-7B_pretrained.json'",
            ),
            (
                "confidence",
                "EleutherAI/gpt-neo-2.7B | fp32 | stated |",
                "EleutherAI/gpt-neo-2.7B | fp32 |  |",
                "row 1 `EleutherAI/gpt-neo-2.7B`: the row has no confidence",
            ),
            (
                "source",
                "| https://github.com/EleutherAI/gpt-neo/blob/master/configs/GPT3_2-7B_pretrained.json |",
                "|  |",
                "row 1 `EleutherAI/gpt-neo-2.7B`: the row has no source",
            ),
        ]
    )
    def test_a_broken_row_is_named(self, _, old, new, expected):
        problems = self.registry_with(old, new)
        self.assertEqual(len(problems), 1, problems)
        self.assertTrue(problems[0].startswith(expected), problems)


class DocsTableTest(TestCasePlus):
    ENTRIES = (
        row(
            "org/a-1b", stored_dtype="fp16", reference_runtime="fp16", reference_source="https://docs.example.org/run"
        ),
        row("org/a-*", precision="fp16", exceptions=("org/a-1b",), note="x | y", confidence="inferred"),
    )

    def write_doc(self, table="| stale |"):
        path = Path(self.get_auto_remove_tmp_dir()) / "trained_precision_registry.md"
        text = f"# Title\n\nIntro.\n\n{registry_table.TABLE_START}\n{table}\n{registry_table.TABLE_END}\n\n## After\n\nText.\n"
        path.write_text(text)
        return path

    def test_stale_table_and_its_fix(self):
        doc = self.write_doc()
        problems = registry_table.check_docs_table(self.ENTRIES, doc)
        self.assertEqual(len(problems), 1)
        self.assertIn("out of date", problems[0])
        self.assertIn(FIX_COMMAND, problems[0])
        self.assertIn("| stale |", doc.read_text())  # a check modifies nothing

        self.assertEqual(registry_table.check_docs_table(self.ENTRIES, doc, overwrite=True), [])
        text = doc.read_text()
        self.assertTrue(text.startswith(f"# Title\n\nIntro.\n\n{registry_table.TABLE_START}\n\n| Checkpoint |"))
        self.assertTrue(text.endswith(f"\n\n{registry_table.TABLE_END}\n\n## After\n\nText.\n"))
        self.assertIn(
            "| `org/a-*` (except `org/a-1b`) | fp16 | inferred |  |  | x \\| y | [example.org](https://example.org/paper) |",
            text,
        )
        self.assertIn(
            "| `org/a-1b` | bf16 | stated | fp16 | fp16 ([docs.example.org](https://docs.example.org/run)) |", text
        )
        self.assertEqual(registry_table.check_docs_table(self.ENTRIES, doc), [])
        registry_table.check_docs_table(self.ENTRIES, doc, overwrite=True)
        self.assertEqual(doc.read_text(), text)

    def test_missing_markers(self):
        doc = Path(self.get_auto_remove_tmp_dir()) / "trained_precision_registry.md"
        doc.write_text(f"# Title\n\n{registry_table.TABLE_START}\n")
        for overwrite in (False, True):
            problems = registry_table.check_docs_table(self.ENTRIES, doc, overwrite=overwrite)
            self.assertEqual(len(problems), 1)
            self.assertIn("expected the markers", problems[0])
        self.assertEqual(doc.read_text(), f"# Title\n\n{registry_table.TABLE_START}\n")

    def test_stale_table_fixed_by_main(self):
        doc = Path(self.get_auto_remove_tmp_dir()) / "trained_precision_registry.md"
        original = (REPO_ROOT / "docs/source/en/trained_precision_registry.md").read_text()
        doc.write_text(
            original.replace("| `EleutherAI/gpt-neo-2.7B` | fp32 |", "| `EleutherAI/gpt-neo-2.7B` | bf16 |")
        )
        with mock.patch.object(registry_table, "PATH_TO_DOC", doc):
            self.assertEqual(registry_table.main([]), 1)
            self.assertEqual(registry_table.main(["--fix_and_overwrite"]), 0)
            self.assertEqual(doc.read_text(), original)
            self.assertEqual(registry_table.main([]), 0)
