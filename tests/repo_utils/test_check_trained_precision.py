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
"""Tests of `utils/check_trained_precision.py`: registry checks, the docs table, populate and Hub PRs."""

import argparse
import contextlib
import difflib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import unittest
from pathlib import Path
from types import SimpleNamespace
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


class PopulateTest(TestCasePlus):
    def checkpoint(self, content=None, mode=None):
        path = Path(self.get_auto_remove_tmp_dir()) / "ckpt"
        path.mkdir()
        if content is not None:
            (path / "config.json").write_text(content)
            if mode is not None:
                os.chmod(path / "config.json", mode)
        return path

    def assertOnlyFieldAdded(self, old_text, new_text, value):
        old, new = json.loads(old_text), json.loads(new_text)
        self.assertEqual(new.pop("trained_precision"), value)
        self.assertEqual(new, old)
        added = set(new_text.splitlines()) - set(old_text.splitlines())
        self.assertEqual(len(new_text.splitlines()), len(old_text.splitlines()) + 1)
        self.assertEqual(len(added), 1, added)

    def test_local_checkpoint_with_precision(self):
        old = dump_config(CONFIG)
        ckpt = self.checkpoint(old, mode=0o640)
        [result] = populate.populate_checkpoints([ckpt], precision="bfloat16", progress=False)
        self.assertEqual(result.status, "written", result.message)
        new = (ckpt / "config.json").read_text()
        self.assertOnlyFieldAdded(old, new, "bf16")
        self.assertEqual(list(json.loads(new)), sorted(json.loads(new)))  # sorted keys stay sorted
        self.assertEqual(new, dump_config({**CONFIG, "trained_precision": "bf16"}))
        self.assertEqual(stat.S_IMODE(os.stat(ckpt / "config.json").st_mode), 0o640)
        self.assertEqual(os.listdir(ckpt), ["config.json"])

    def test_local_checkpoint_with_registry_id(self):
        ckpt = self.checkpoint(dump_config(CONFIG))
        [result] = populate.populate_checkpoints([ckpt / "config.json"], model_id="EleutherAI/gpt-neo-2.7B")
        self.assertEqual(result.status, "written")
        self.assertEqual(json.loads((ckpt / "config.json").read_text())["trained_precision"], "fp32")

    def test_local_checkpoint_without_id_is_skipped(self):
        old = dump_config(CONFIG)
        ckpt = self.checkpoint(old)
        [result] = populate.populate_checkpoints([ckpt], progress=False)
        self.assertEqual(result.status, "skipped")
        self.assertIn("--model_id", result.message)
        self.assertEqual((ckpt / "config.json").read_text(), old)

    @parameterized.expand(
        [
            ("indent4_unsorted", json.dumps({"z": 1, "a": [1, 2]}, indent=4), '    "trained_precision": "fp16"\n}'),
            ("compact", '{"a":1,"b":{"c":2}}', '"b":{"c":2},"trained_precision":"fp16"}'),
            (
                "crlf_tabs",
                '{\r\n\t"a": 1,\r\n\t"z": 2\r\n}\r\n',
                '\t"trained_precision": "fp16",\r\n\t"z": 2\r\n}\r\n',
            ),
            ("unicode_floats", '{\n  "name": "caf\\u00e9 \u00e9",\n  "eps": 1e-05\n}', '"eps": 1e-05,\n  "trained'),
            ("empty", "{}", '{\n  "trained_precision": "fp16"\n}'),
        ]
    )
    def test_formatting_kept(self, _, old, expected_fragment):
        ckpt = self.checkpoint(old)
        with open(ckpt / "config.json", "w", encoding="utf-8", newline="") as f:
            f.write(old)
        [result] = populate.populate_checkpoints([ckpt], precision="fp16", progress=False)
        self.assertEqual(result.status, "written", result.message)
        with open(ckpt / "config.json", encoding="utf-8", newline="") as f:
            new = f.read()
        self.assertIn(expected_fragment, new)
        old_data, new_data = json.loads(old), json.loads(new)
        self.assertEqual(new_data.pop("trained_precision"), "fp16")
        self.assertEqual(new_data, old_data)
        self.assertEqual(list(new_data), list(old_data))
        # the edit only inserts text: every character of the original is kept, in order
        opcodes = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
        self.assertEqual({tag for tag, *_ in opcodes} - {"equal"}, {"insert"})

    def test_idempotent(self):
        ckpt = self.checkpoint(dump_config(CONFIG))
        populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        text, inode = (ckpt / "config.json").read_text(), os.stat(ckpt / "config.json").st_ino
        [result] = populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        self.assertEqual(result.status, "unchanged")
        self.assertEqual((ckpt / "config.json").read_text(), text)
        self.assertEqual(os.stat(ckpt / "config.json").st_ino, inode)  # not even rewritten

    def test_existing_alias_of_the_same_value_is_unchanged(self):
        old = dump_config({**CONFIG, "trained_precision": "bfloat16"})
        ckpt = self.checkpoint(old)
        [result] = populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        self.assertEqual(result.status, "unchanged")
        self.assertEqual((ckpt / "config.json").read_text(), old)

    def test_dry_run_prints_diff_and_modifies_nothing(self):
        old = dump_config(CONFIG)
        ckpt = self.checkpoint(old)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = ctp.main(["--populate", str(ckpt), "--precision", "bf16", "--dry-run", "--no-progress"])
        self.assertEqual(rc, 0)
        self.assertIn('+  "trained_precision": "bf16",', out.getvalue())
        self.assertIn("[would write]", out.getvalue())
        self.assertEqual((ckpt / "config.json").read_text(), old)

    @parameterized.expand(
        [
            ("malformed_json", '{"a": 1,,}', None, "malformed JSON"),
            ("not_an_object", "[1, 2]", None, "not an object"),
            ("read_only", dump_config(CONFIG), 0o444, "read-only (mode 0o444)"),
            ("conflict", dump_config({**CONFIG, "trained_precision": "fp16"}), None, "pass --force"),
            ("invalid_existing", dump_config({**CONFIG, "trained_precision": "fp8"}), None, "pass --force"),
        ]
    )
    def test_refused_and_untouched(self, _, content, mode, expected):
        ckpt = self.checkpoint(content, mode)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = ctp.main(["--populate", str(ckpt), "--precision", "bf16", "--no-progress"])
        self.assertEqual(rc, 1)
        self.assertIn(expected, out.getvalue())
        self.assertIn("nothing modified", out.getvalue())
        self.assertEqual((ckpt / "config.json").read_text(), content)
        self.assertEqual(os.listdir(ckpt), ["config.json"])

    def test_missing_config(self):
        ckpt = self.checkpoint()
        [result] = populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        self.assertEqual(result.status, "error")
        self.assertIn("no config.json", result.message)
        self.assertEqual(os.listdir(ckpt), [])

    @parameterized.expand([("unknown", "never written"), ("fp8", "Valid values are")])
    def test_bad_precision(self, precision, expected):
        old = dump_config(CONFIG)
        ckpt = self.checkpoint(old)
        [result] = populate.populate_checkpoints([ckpt], precision=precision, progress=False)
        self.assertEqual(result.status, "error")
        self.assertIn(expected, result.message)
        self.assertEqual((ckpt / "config.json").read_text(), old)

    def test_force_replaces_only_the_value(self):
        old = dump_config({**CONFIG, "trained_precision": "fp16"})
        ckpt = self.checkpoint(old)
        [result] = populate.populate_checkpoints([ckpt], precision="bf16", force=True, progress=False)
        self.assertEqual(result.status, "written")
        self.assertEqual((ckpt / "config.json").read_text(), old.replace('"fp16"', '"bf16"'))

    def test_interrupted_between_write_and_replace(self):
        old = dump_config(CONFIG)
        ckpt = self.checkpoint(old)
        with mock.patch.object(populate.os, "replace", side_effect=KeyboardInterrupt):
            with self.assertRaises(KeyboardInterrupt):
                populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        self.assertEqual((ckpt / "config.json").read_text(), old)
        self.assertEqual(os.listdir(ckpt), ["config.json"])  # the temporary file is gone too

    def test_killed_between_write_and_replace(self):
        old = dump_config(CONFIG)
        ckpt = self.checkpoint(old)
        code = (
            "import os, sys; sys.path.append(sys.argv[1]); import check_trained_precision as ctp; "
            "_, _, populate = ctp.load_trained_precision(); populate.os.replace = lambda *a: os._exit(3); "
            "populate.populate_checkpoints([sys.argv[2]], precision='bf16', progress=False)"
        )
        result = subprocess.run([sys.executable, "-c", code, str(REPO_ROOT / "utils"), str(ckpt)], capture_output=True)
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertEqual((ckpt / "config.json").read_text(), old)
        # a killed process cannot clean up: its complete temporary file stays, hidden, next to the original
        leftovers = [name for name in os.listdir(ckpt) if name != "config.json"]
        self.assertEqual(len(leftovers), 1)
        self.assertTrue(leftovers[0].startswith(".config.json.") and leftovers[0].endswith(".tmp"))

    def test_failed_write_leaves_original(self):
        old = dump_config(CONFIG)
        ckpt = self.checkpoint(old)
        with mock.patch.object(populate.os, "fsync", side_effect=OSError(28, "No space left on device")):
            [result] = populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        self.assertEqual(result.status, "error")
        self.assertIn("No space left on device", result.message)
        self.assertEqual((ckpt / "config.json").read_text(), old)
        self.assertEqual(os.listdir(ckpt), ["config.json"])


class CachePopulateTest(TestCasePlus):
    """A fake Hugging Face cache: snapshots hold relative symlinks into blobs/, shared between revisions."""

    REPO = "models--EleutherAI--gpt-neo-1.3B"
    CONFIG_BLOB = "b1" * 20
    TOKENIZER_BLOB = "c2" * 32
    REV1, REV2 = "1" * 40, "2" * 40

    def make_cache(self):
        hub = Path(self.get_auto_remove_tmp_dir()) / "hub"
        repo = hub / self.REPO
        (repo / "blobs").mkdir(parents=True)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(self.REV2)
        (repo / "blobs" / self.CONFIG_BLOB).write_text(dump_config(CONFIG))
        (repo / "blobs" / self.TOKENIZER_BLOB).write_text("{}")
        for rev in (self.REV1, self.REV2):
            snap = repo / "snapshots" / rev
            snap.mkdir(parents=True)
            os.symlink(f"../../blobs/{self.CONFIG_BLOB}", snap / "config.json")
            os.symlink(f"../../blobs/{self.TOKENIZER_BLOB}", snap / "tokenizer.json")
        other = hub / "models--someone--unlisted" / "snapshots" / "rev"
        other.mkdir(parents=True)
        (other / "config.json").write_text(dump_config(CONFIG))
        (hub / "datasets--someone--data" / "snapshots" / "rev").mkdir(parents=True)
        return hub

    def test_populating_a_copy_of_a_snapshot_writes_the_field_and_nothing_else(self):
        original = self.make_cache()
        hub = original.parent / "copy"
        shutil.copytree(original, hub, symlinks=True)
        repo = hub / self.REPO
        blob_before = (repo / "blobs" / self.CONFIG_BLOB).read_text()

        [result] = populate.populate_checkpoints([repo / "snapshots" / self.REV1], progress=False)
        self.assertEqual(result.status, "written", result.message)
        self.assertEqual(result.model_id, "EleutherAI/gpt-neo-1.3B")
        self.assertIn("the blob is untouched", result.message)

        config = repo / "snapshots" / self.REV1 / "config.json"
        self.assertFalse(config.is_symlink())
        self.assertOnlyField(blob_before, config.read_text(), "bf16")
        # the blob, the other revision and the other files of the snapshot are unchanged
        self.assertEqual((repo / "blobs" / self.CONFIG_BLOB).read_text(), blob_before)
        self.assertTrue((repo / "snapshots" / self.REV2 / "config.json").is_symlink())
        self.assertEqual((repo / "snapshots" / self.REV2 / "config.json").read_text(), blob_before)
        self.assertEqual(
            os.readlink(repo / "snapshots" / self.REV1 / "tokenizer.json"), f"../../blobs/{self.TOKENIZER_BLOB}"
        )
        self.assertEqual(sorted(os.listdir(repo / "snapshots" / self.REV1)), ["config.json", "tokenizer.json"])
        self.assertEqual(sorted(os.listdir(repo / "blobs")), sorted([self.CONFIG_BLOB, self.TOKENIZER_BLOB]))
        # the original cache was not touched through the copy
        self.assertTrue((original / self.REPO / "snapshots" / self.REV1 / "config.json").is_symlink())

        # huggingface_hub still reads the cache, and the config loads from it by Hub id
        import huggingface_hub

        self.assertEqual(huggingface_hub.scan_cache_dir(hub).warnings, [])
        path = huggingface_hub.hf_hub_download(
            "EleutherAI/gpt-neo-1.3B", "config.json", revision=self.REV1, cache_dir=hub, local_files_only=True
        )
        self.assertEqual(Path(path), config)
        from transformers import AutoConfig

        loaded = AutoConfig.from_pretrained("EleutherAI/gpt-neo-1.3B", revision=self.REV1, cache_dir=hub)
        self.assertEqual(loaded.hidden_size, 2048)
        self.assertEqual(loaded.trained_precision, "bf16")

    def assertOnlyField(self, old_text, new_text, value):
        old, new = json.loads(old_text), json.loads(new_text)
        self.assertEqual(new.pop("trained_precision"), value)
        self.assertEqual(new, old)
        self.assertEqual(len(new_text.splitlines()), len(old_text.splitlines()) + 1)

    def test_whole_cache_with_progress_bar(self):
        hub = self.make_cache()
        unlisted = hub / "models--someone--unlisted" / "snapshots" / "rev" / "config.json"
        unlisted_before = unlisted.read_text()
        with mock.patch("tqdm.auto.tqdm", side_effect=lambda it, **kwargs: it) as bar:
            results = populate.populate_checkpoints([hub])
        bar.assert_called_once()
        self.assertEqual(bar.call_args.kwargs["unit"], "checkpoint")
        by_status = sorted((r.status, r.model_id) for r in results)
        self.assertEqual(
            by_status,
            [
                ("skipped", "someone/unlisted"),
                ("written", "EleutherAI/gpt-neo-1.3B"),
                ("written", "EleutherAI/gpt-neo-1.3B"),
            ],
        )
        self.assertEqual(unlisted.read_text(), unlisted_before)
        # a repo folder also expands to its snapshots, and a second run changes nothing
        results = populate.populate_checkpoints([hub / self.REPO], progress=False)
        self.assertEqual([r.status for r in results], ["unchanged", "unchanged"])
        # the folder above the cache (~/.cache/huggingface) finds it too
        results = populate.populate_checkpoints([hub.parent], progress=False)
        self.assertEqual(sorted(r.status for r in results), ["skipped", "unchanged", "unchanged"])

    def test_broken_symlink(self):
        hub = self.make_cache()
        repo = hub / self.REPO
        os.unlink(repo / "blobs" / self.CONFIG_BLOB)
        [result] = populate.populate_checkpoints([repo / "snapshots" / self.REV1], progress=False)
        self.assertEqual(result.status, "error")
        self.assertIn("broken symlink", result.message)
        self.assertTrue((repo / "snapshots" / self.REV1 / "config.json").is_symlink())

    def test_read_only_blob(self):
        hub = self.make_cache()
        repo = hub / self.REPO
        os.chmod(repo / "blobs" / self.CONFIG_BLOB, 0o444)
        [result] = populate.populate_checkpoints([repo / "snapshots" / self.REV1], progress=False)
        self.assertEqual(result.status, "error")
        self.assertIn("read-only", result.message)
        self.assertTrue((repo / "snapshots" / self.REV1 / "config.json").is_symlink())


class FakeHubApi:
    """Records what would be sent to the Hub; serves config.json files from a dict."""

    def __init__(self, tmp, configs, open_pr_titles=(), failing=()):
        self.tmp, self.configs, self.open_pr_titles, self.failing = Path(tmp), configs, open_pr_titles, failing
        self.commits = []

    def model_info(self, repo_id):
        if repo_id in self.failing:
            raise OSError(f"cannot reach {repo_id}")
        return SimpleNamespace(sha=f"{abs(hash(repo_id)):040d}"[:40])

    def get_repo_discussions(self, repo_id, discussion_type=None, discussion_status=None):
        assert (discussion_type, discussion_status) == ("pull_request", "open")
        return iter([SimpleNamespace(title=t, num=7) for t in self.open_pr_titles])

    def hf_hub_download(self, repo_id, filename, revision=None):
        assert filename == "config.json" and revision == self.model_info(repo_id).sha
        path = self.tmp / repo_id.replace("/", "--") / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.configs.get(repo_id, dump_config(CONFIG)))
        return str(path)

    def create_commit(self, repo_id, operations, **kwargs):
        self.commits.append((repo_id, list(operations), kwargs))
        return SimpleNamespace(pr_url=f"https://huggingface.co/{repo_id}/discussions/1")


class HubPullRequestTest(TestCasePlus):
    def test_dry_run_prepares_operations_for_exact_rows(self):
        api = FakeHubApi(self.get_auto_remove_tmp_dir(), {})
        results = populate.prepare_hub_prs(registry.REGISTRY, api=api)
        exact = [e for e in registry.REGISTRY if not e.is_glob]
        self.assertEqual([r.repo_id for r in results], [e.model_id for e in exact])
        self.assertEqual(api.commits, [])  # a dry run sends nothing
        for entry, result in zip(exact, results):
            self.assertEqual(result.status, "would write")
            [op] = result.operations
            self.assertEqual(op.path_in_repo, "config.json")
            self.assertEqual(
                op.path_or_fileobj, dump_config({**CONFIG, "trained_precision": entry.precision}).encode()
            )
            self.assertIn(entry.source, result.commit_description)
            self.assertEqual(result.parent_commit, api.model_info(entry.model_id).sha)

    def test_push_opens_a_pull_request(self):
        api = FakeHubApi(self.get_auto_remove_tmp_dir(), {})
        [result] = populate.prepare_hub_prs(registry.REGISTRY, api=api, only=["meta-llama/llama-2-7b-hf"], push=True)
        self.assertEqual(result.status, "written")
        self.assertEqual(result.pr_url, "https://huggingface.co/meta-llama/Llama-2-7b-hf/discussions/1")
        [(repo_id, operations, kwargs)] = api.commits
        self.assertEqual(repo_id, "meta-llama/Llama-2-7b-hf")
        self.assertTrue(kwargs["create_pr"])
        self.assertEqual(kwargs["parent_commit"], api.model_info(repo_id).sha)
        self.assertEqual(kwargs["commit_message"], populate.HUB_PR_TITLE)
        self.assertIn("https://github.com/huggingface/transformers/pull/25794", kwargs["commit_description"])
        self.assertIn("stored in fp16", kwargs["commit_description"])
        self.assertEqual(json.loads(operations[0].path_or_fileobj)["trained_precision"], "bf16")

    def test_skips_and_errors(self):
        ids = ["EleutherAI/gpt-neo-1.3B", "EleutherAI/gpt-neo-2.7B", "bigscience/bloom"]
        configs = {
            "EleutherAI/gpt-neo-1.3B": dump_config({**CONFIG, "trained_precision": "bf16"}),
            "EleutherAI/gpt-neo-2.7B": dump_config({**CONFIG, "trained_precision": "bf16"}),
        }
        api = FakeHubApi(self.get_auto_remove_tmp_dir(), configs, failing=("bigscience/bloom",))
        results = populate.prepare_hub_prs(registry.REGISTRY, api=api, only=ids, push=True)
        self.assertEqual([r.status for r in results], ["unchanged", "error", "error"])
        self.assertIn("pass --force", results[1].message)
        self.assertIn("cannot reach bigscience/bloom", results[2].message)
        self.assertEqual(api.commits, [])

        api = FakeHubApi(self.get_auto_remove_tmp_dir(), {}, open_pr_titles=[populate.HUB_PR_TITLE])
        [result] = populate.prepare_hub_prs(registry.REGISTRY, api=api, only=ids[:1], push=True)
        self.assertEqual(result.status, "skipped")
        self.assertIn("#7", result.message)
        self.assertEqual(api.commits, [])

    def test_cli_dry_run_is_the_default(self):
        api = FakeHubApi(self.get_auto_remove_tmp_dir(), {})
        args = argparse.Namespace(hub_pr=["EleutherAI/gpt-neo-1.3B"], push=False, force=False)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(ctp.run_hub_pr(args, api=api), 0)
        self.assertIn('+  "trained_precision": "bf16",', out.getvalue())
        self.assertEqual(api.commits, [])
        args = argparse.Namespace(hub_pr=["EleutherAI/pythia-*"], push=False, force=False)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(ctp.run_hub_pr(args, api=api), 1)
        self.assertIn("Not exact-id rows", err.getvalue())
