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
"""Tests of `utils/check_trained_precision.py`: registry checks and the docs table."""

import json
import os
import shutil
import subprocess
import sys
import unittest
from pathlib import Path
from unittest import mock

from parameterized import parameterized

from transformers.testing_utils import TestCasePlus


REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO_ROOT / "utils"))

import check_trained_precision as ctp  # noqa: E402


vocabulary, registry, _ = ctp.load_trained_precision()
RegistryEntry = registry.RegistryEntry

MODEL_TYPES = {"llama", "gpt_neo", "gpt_neox", "opt", "t5"}


def row(model_id="org/model", precision="bf16", source="https://example.org/paper", note="mixed bf16", **kwargs):
    kwargs.setdefault("confidence", "stated")
    return RegistryEntry(model_id, precision, source, note, **kwargs)


def dump_config(data, indent=2, sort_keys=True):
    """What `PreTrainedConfig.to_json_file` writes."""
    return json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n"


CONFIG = {"architectures": ["GPTNeoForCausalLM"], "hidden_size": 2048, "model_type": "gpt_neo", "vocab_size": 50257}


class RepoRegistryTest(unittest.TestCase):
    def test_repo_registry_and_docs_pass(self):
        ctp.check_trained_precision()  # the real registry, docs page and upstream CONFIG_MAPPING

    def test_the_check_does_not_import_the_hub_client(self):
        # `make check` runs this script; opening Hub pull requests is utils/open_trained_precision_prs.py's business
        script = "import sys, check_trained_precision; print('huggingface_hub' in sys.modules)"
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "utils")}
        result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        self.assertEqual(result.stdout.strip(), "False")


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
        self.assertEqual(ctp.check_registry(registry.REGISTRY, vocabulary, ctp.get_known_model_types()), [])


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
        problems = ctp.check_registry(entries, vocabulary, MODEL_TYPES)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn(f"row 0 `{entries[0].model_id}`", problems[0])
        self.assertIn(expected, problems[0])

    def test_duplicate_ids(self):
        problems = ctp.check_registry([row("org/Model"), row("org/other"), row("org/model")], vocabulary, MODEL_TYPES)
        self.assertEqual(problems, ["row 2 `org/model`: duplicate of row 0 `org/Model`; keep one row per checkpoint"])

    def test_overlapping_globs(self):
        problems = ctp.check_registry([row("org/opt-*"), row("org/opt-1*", precision="fp16")], vocabulary, MODEL_TYPES)
        self.assertEqual(len(problems), 1)
        self.assertIn(
            "row 0 `org/opt-*`: contradicts the glob of row 1 `org/opt-1*` (precision 'bf16' vs 'fp16')", problems[0]
        )
        self.assertIn("exceptions", problems[0])

    def test_overlapping_globs_that_agree_are_still_ambiguous(self):
        # which row (and so which source and confidence) answers would depend on the order of the table
        entries = [row("org/opt-*"), row("org/opt-1*", confidence="inferred")]
        problems = ctp.check_registry(entries, vocabulary, MODEL_TYPES)
        self.assertEqual(len(problems), 1)
        self.assertIn("row 0 `org/opt-*`: overlaps the glob of row 1 `org/opt-1*`;", problems[0])

    def test_glob_contradicting_an_exact_row(self):
        entries = [row("org/pythia-*", precision="fp16"), row("org/pythia-1b", stored_dtype="fp16")]
        problems = ctp.check_registry(entries, vocabulary, MODEL_TYPES)
        self.assertEqual(len(problems), 1)
        self.assertIn(
            "also matches `org/pythia-1b`, which has a row of its own that contradicts it (precision 'fp16' vs "
            "'bf16', stored_dtype None vs 'fp16')",
            problems[0],
        )

    def test_exact_row_under_glob_needs_exception(self):
        problems = ctp.check_registry([row("org/pythia-*"), row("org/pythia-1b")], vocabulary, MODEL_TYPES)
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
        self.assertEqual(ctp.check_registry(entries, vocabulary, MODEL_TYPES), [])

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
        self.assertEqual(ctp.globs_overlap(a, b), expected)
        self.assertEqual(ctp.globs_overlap(b, a), expected)

    def test_check_raises_naming_the_row_and_the_fix(self):
        entries = (row(), row("org/broken", source="http://example.org"))
        with self.assertRaises(ValueError) as cm:
            ctp.check_trained_precision(registry=entries, model_types=MODEL_TYPES)
        message = str(cm.exception)
        self.assertIn("row 1 `org/broken`", message)
        self.assertNotIn("row 0", message)
        self.assertIn(ctp.FIX_COMMAND, message)


class ScriptTest(TestCasePlus):
    """The script as `make check` runs it, on a copy of the repo's files."""

    def copy_repo(self):
        tmp = Path(self.get_auto_remove_tmp_dir())
        for rel in ("utils/check_trained_precision.py", "docs/source/en/trained_precision_registry.md"):
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO_ROOT / rel, tmp / rel)
        shutil.copytree(
            REPO_ROOT / "src/transformers/trained_precision",
            tmp / "src/transformers/trained_precision",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        return tmp

    def run_script(self, cwd, *args):
        return subprocess.run(
            [sys.executable, "utils/check_trained_precision.py", *args], cwd=cwd, capture_output=True, text=True
        )

    def test_passes_then_fails_naming_the_broken_row(self):
        tmp = self.copy_repo()
        result = self.run_script(tmp)
        self.assertEqual(result.returncode, 0, result.stderr)

        registry_file = tmp / "src/transformers/trained_precision/registry.py"
        text = registry_file.read_text()
        broken = text.replace('"https://github.com/EleutherAI/gpt-neo/issues/207"', '"github.com/gpt-neo/issues/207"')
        self.assertNotEqual(broken, text)
        registry_file.write_text(broken)
        result = self.run_script(tmp)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("row 1 `EleutherAI/gpt-neo-2.7B`: source 'github.com/gpt-neo/issues/207'", result.stderr)
        self.assertIn(ctp.FIX_COMMAND, result.stderr)

    @parameterized.expand(
        [
            (
                "confidence",
                '        "gpt_neo",\n        confidence=INFERRED,\n',
                '        "gpt_neo",\n',
                "row 1 `EleutherAI/gpt-neo-2.7B`: the row has no confidence",
            ),
            (
                "source",
                '"https://github.com/EleutherAI/gpt-neo/issues/207"',
                '""',
                "row 1 `EleutherAI/gpt-neo-2.7B`: the row has no source",
            ),
        ]
    )
    def test_row_without_a_source_or_confidence_fails_naming_the_fix(self, _, old, new, expected):
        tmp = self.copy_repo()
        registry_file = tmp / "src/transformers/trained_precision/registry.py"
        text = registry_file.read_text()
        self.assertEqual(text.count(old), 1)
        registry_file.write_text(text.replace(old, new))
        result = self.run_script(tmp)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(expected, result.stderr)
        self.assertIn(ctp.FIX_COMMAND, result.stderr)
        self.assertEqual(result.stderr.count("\n- row "), 1, result.stderr)

    def test_stale_table_fixed_by_main(self):
        doc = Path(self.get_auto_remove_tmp_dir()) / "trained_precision_registry.md"
        original = (REPO_ROOT / "docs/source/en/trained_precision_registry.md").read_text()
        doc.write_text(
            original.replace("| `EleutherAI/gpt-neo-2.7B` | fp32 |", "| `EleutherAI/gpt-neo-2.7B` | bf16 |")
        )
        with mock.patch.object(ctp, "PATH_TO_DOC", doc):
            with self.assertRaises(ValueError) as cm:
                ctp.main([])
            self.assertIn("the registry table is out of date", str(cm.exception))
            self.assertEqual(ctp.main(["--fix_and_overwrite"]), 0)
            self.assertEqual(doc.read_text(), original)
            self.assertEqual(ctp.main([]), 0)


class DocsTableTest(TestCasePlus):
    ENTRIES = (
        row(
            "org/a-1b", stored_dtype="fp16", reference_runtime="fp16", reference_source="https://docs.example.org/run"
        ),
        row("org/a-*", precision="fp16", exceptions=("org/a-1b",), note="x | y", confidence="inferred"),
    )

    def write_doc(self, table="| stale |"):
        path = Path(self.get_auto_remove_tmp_dir()) / "trained_precision_registry.md"
        path.write_text(f"# Title\n\nIntro.\n\n{ctp.TABLE_START}\n{table}\n{ctp.TABLE_END}\n\n## After\n\nText.\n")
        return path

    def test_stale_table_and_its_fix(self):
        doc = self.write_doc()
        problems = ctp.check_docs_table(self.ENTRIES, doc)
        self.assertEqual(len(problems), 1)
        self.assertIn("out of date", problems[0])
        self.assertIn(ctp.FIX_COMMAND, problems[0])
        self.assertIn("| stale |", doc.read_text())  # a check modifies nothing

        ctp.check_trained_precision(overwrite=True, registry=self.ENTRIES, doc_path=doc, model_types=MODEL_TYPES)
        text = doc.read_text()
        self.assertTrue(text.startswith(f"# Title\n\nIntro.\n\n{ctp.TABLE_START}\n\n| Checkpoint |"))
        self.assertTrue(text.endswith(f"\n\n{ctp.TABLE_END}\n\n## After\n\nText.\n"))
        self.assertIn(
            "| `org/a-*` (except `org/a-1b`) | fp16 | inferred |  |  | x \\| y | [example.org](https://example.org/paper) |",
            text,
        )
        self.assertIn(
            "| `org/a-1b` | bf16 | stated | fp16 | fp16 ([docs.example.org](https://docs.example.org/run)) |", text
        )
        self.assertEqual(ctp.check_docs_table(self.ENTRIES, doc), [])
        ctp.check_trained_precision(overwrite=True, registry=self.ENTRIES, doc_path=doc, model_types=MODEL_TYPES)
        self.assertEqual(doc.read_text(), text)

    def test_missing_markers(self):
        doc = Path(self.get_auto_remove_tmp_dir()) / "trained_precision_registry.md"
        doc.write_text(f"# Title\n\n{ctp.TABLE_START}\n")
        for overwrite in (False, True):
            problems = ctp.check_docs_table(self.ENTRIES, doc, overwrite=overwrite)
            self.assertEqual(len(problems), 1)
            self.assertIn("expected the markers", problems[0])
        self.assertEqual(doc.read_text(), f"# Title\n\n{ctp.TABLE_START}\n")

    def test_no_table_from_a_broken_registry(self):
        doc = self.write_doc()
        with self.assertRaises(ValueError):
            ctp.check_trained_precision(
                overwrite=True, registry=(row(precision="bf8"),), doc_path=doc, model_types=MODEL_TYPES
            )
        self.assertIn("| stale |", doc.read_text())
