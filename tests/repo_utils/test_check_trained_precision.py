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


vocabulary, registry, populate = ctp.load_trained_precision()
RegistryEntry = registry.RegistryEntry

MODEL_TYPES = {"llama", "gpt_neo", "gpt_neox", "opt", "t5"}


def row(model_id="org/model", precision="bf16", source="https://example.org/paper", note="mixed bf16", **kwargs):
    return RegistryEntry(model_id, precision, source, note, **kwargs)


def dump_config(data, indent=2, sort_keys=True):
    """What `PreTrainedConfig.to_json_file` writes."""
    return json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n"


CONFIG = {"architectures": ["GPTNeoForCausalLM"], "hidden_size": 2048, "model_type": "gpt_neo", "vocab_size": 50257}


class RepoRegistryTest(unittest.TestCase):
    def test_repo_registry_and_docs_pass(self):
        ctp.check_trained_precision()  # the real registry, docs page and upstream CONFIG_MAPPING

    def test_registry_contents(self):
        table = registry.REGISTRY
        self.assertGreaterEqual(len(table), 30)
        self.assertEqual((table[0].model_id, table[0].precision), ("EleutherAI/gpt-neo-1.3B", "bf16"))
        self.assertEqual((table[1].model_id, table[1].precision), ("EleutherAI/gpt-neo-2.7B", "fp32"))
        self.assertIsNone(registry.lookup("EleutherAI/gpt-neo-125M"))
        self.assertEqual(registry.lookup("EleutherAI/pythia-1b").precision, "bf16")
        self.assertEqual(registry.lookup("eleutherai/Pythia-410m").precision, "fp16")
        self.assertEqual(registry.lookup("EleutherAI/pythia-1b-deduped").precision, "fp16")
        galactica = registry.lookup("facebook/galactica-6.7b")
        self.assertEqual((galactica.precision, galactica.stored_dtype), ("bf16", "fp16"))
        llama = registry.lookup("meta-llama/Llama-2-7b-hf")
        self.assertEqual((llama.precision, llama.stored_dtype), ("bf16", "fp16"))
        self.assertTrue(all(e.source.startswith("https://") for e in table))


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
        self.assertIn("row 0 `org/opt-*`: overlaps the glob of row 1 `org/opt-1*`", problems[0])

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
        for rel in ("utils/check_trained_precision.py", "docs/source/en/trained_precision.md"):
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

    def test_stale_table_fixed_by_main(self):
        doc = Path(self.get_auto_remove_tmp_dir()) / "trained_precision.md"
        original = (REPO_ROOT / "docs/source/en/trained_precision.md").read_text()
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
    ENTRIES = (row("org/a-1b"), row("org/a-*", precision="fp16", exceptions=("org/a-1b",), note="x | y"))

    def write_doc(self, table="| stale |"):
        path = Path(self.get_auto_remove_tmp_dir()) / "trained_precision.md"
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
            "| `org/a-*` (except `org/a-1b`) | fp16 |  | x \\| y | [example.org](https://example.org/paper) |", text
        )
        self.assertEqual(ctp.check_docs_table(self.ENTRIES, doc), [])
        ctp.check_trained_precision(overwrite=True, registry=self.ENTRIES, doc_path=doc, model_types=MODEL_TYPES)
        self.assertEqual(doc.read_text(), text)

    def test_missing_markers(self):
        doc = Path(self.get_auto_remove_tmp_dir()) / "trained_precision.md"
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
