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
"""`transformers precision set`: writing the field into checkpoints' configs."""

import contextlib
import difflib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from parameterized import parameterized

from transformers import AutoConfig
from transformers.testing_utils import TestCasePlus
from transformers.trained_precision.commands import cli
from transformers.trained_precision.record import populate


CONFIG = {"architectures": ["GPTNeoForCausalLM"], "hidden_size": 2048, "model_type": "gpt_neo", "vocab_size": 50257}


def dump_config(data, indent=2, sort_keys=True):
    return json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n"


def setUpModule():
    # `set` keeps its lock files under HF_HOME: a temporary one for these tests
    global _HF_HOME, _HF_HOME_PATCHER
    _HF_HOME = tempfile.mkdtemp(prefix="hf_home_")
    _HF_HOME_PATCHER = mock.patch("huggingface_hub.constants.HF_HOME", _HF_HOME)
    _HF_HOME_PATCHER.start()


def tearDownModule():
    _HF_HOME_PATCHER.stop()
    shutil.rmtree(_HF_HOME, ignore_errors=True)


def listdir(path):
    """The directory's entries: `set` leaves nothing beside the config (its lock file lies under HF_HOME)."""
    return sorted(os.listdir(path))


def run_set(*args):
    """`transformers precision set ARGS...` in-process; returns its exit code (stdout is the caller's)."""
    try:
        cli.main(["set", *args])
    except SystemExit as e:
        return e.code or 0
    return 0


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
        self.assertEqual(listdir(ckpt), ["config.json"])

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
        self.assertIn("--model-id", result.message)
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

    def test_existing_alias_of_the_same_value_is_written_canonically(self):
        # the config holds the four names only: "bfloat16" loads as "unknown", so `set` writes "bf16" over it
        old = dump_config({**CONFIG, "trained_precision": "bfloat16"})
        ckpt = self.checkpoint(old)
        [result] = populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        self.assertNotEqual(result.status, "unchanged")
        self.assertEqual((ckpt / "config.json").read_text(), old.replace('"bfloat16"', '"bf16"'))
        self.assertEqual(AutoConfig.from_pretrained(ckpt).trained_precision, "bf16")

    def test_dry_run_prints_diff_and_modifies_nothing(self):
        old = dump_config(CONFIG)
        ckpt = self.checkpoint(old)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = run_set(str(ckpt), "--precision", "bf16", "--dry-run")
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
            rc = run_set(str(ckpt), "--precision", "bf16")
        self.assertEqual(rc, 4)  # not done
        self.assertIn(expected, out.getvalue())
        self.assertIn("nothing modified", out.getvalue())
        self.assertEqual((ckpt / "config.json").read_text(), content)
        self.assertEqual(listdir(ckpt), ["config.json"])

    def test_missing_config(self):
        ckpt = self.checkpoint()
        [result] = populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        self.assertEqual(result.status, "error")
        self.assertIn("no config.json", result.message)
        self.assertEqual(os.listdir(ckpt), [])

    @parameterized.expand([("fp8", "Valid values are"), ("fp64", "Valid values are")])
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
        self.assertEqual(listdir(ckpt), ["config.json"])  # the temporary file is gone too

    def test_killed_between_write_and_replace(self):
        old = dump_config(CONFIG)
        ckpt = self.checkpoint(old)
        code = (
            "import os, sys; from transformers.trained_precision.record import populate; "
            "populate.os.replace = lambda *a: os._exit(3); "
            "populate.populate_checkpoints([sys.argv[1]], precision='bf16', progress=False)"
        )
        env = {**os.environ, "HF_HOME": _HF_HOME}
        result = subprocess.run([sys.executable, "-c", code, str(ckpt)], capture_output=True, env=env)
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
        self.assertEqual(listdir(ckpt), ["config.json"])


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
        self.assertEqual(listdir(repo / "snapshots" / self.REV1), ["config.json", "tokenizer.json"])
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


class SetSafetyTest(TestCasePlus):
    """`set` changes the one field and nothing else of the user's: owner, links, BOM, concurrent writers."""

    def checkpoint(self, content=None):
        ckpt = Path(self.get_auto_remove_tmp_dir()) / "ckpt"
        ckpt.mkdir()
        (ckpt / "config.json").write_text(dump_config(CONFIG) if content is None else content, encoding="utf-8")
        return ckpt

    def test_utf8_bom_is_accepted_and_kept(self):
        ckpt = self.checkpoint("\ufeff" + dump_config(CONFIG))
        [result] = populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        self.assertEqual(result.status, "written", result.message)
        text = (ckpt / "config.json").read_text(encoding="utf-8")
        self.assertTrue(text.startswith("\ufeff{"))
        self.assertEqual(json.loads(text[1:])["trained_precision"], "bf16")

    @unittest.skipUnless(hasattr(os, "geteuid") and os.geteuid() == 0, "changing a file's owner needs root")
    def test_owner_and_group_are_kept(self):
        ckpt = self.checkpoint()
        os.chown(ckpt / "config.json", 65534, 65534)  # nobody:nogroup
        [result] = populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        self.assertEqual(result.status, "written", result.message)
        st = os.stat(ckpt / "config.json")
        self.assertEqual((st.st_uid, st.st_gid), (65534, 65534))

    def test_users_symlink_inside_the_checkpoint_is_written_through(self):
        ckpt = self.checkpoint()
        (ckpt / "configs").mkdir()
        real = ckpt / "configs" / "config.json"
        shutil.move(ckpt / "config.json", real)
        os.symlink(os.path.join("configs", "config.json"), ckpt / "config.json")
        [result] = populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        self.assertEqual(result.status, "written", result.message)
        self.assertIn("through the symlink", result.message)
        self.assertTrue((ckpt / "config.json").is_symlink())  # the user's link is still a link
        self.assertEqual(json.loads(real.read_text())["trained_precision"], "bf16")

    def test_a_link_out_of_the_checkpoint_is_refused_as_the_read_is(self):
        # the report does not open a config.json that resolves outside the checkpoint; `set` does not write it,
        # `--force` or not
        ckpt = self.checkpoint()
        outside = Path(self.get_auto_remove_tmp_dir()) / "victim.json"
        shutil.move(ckpt / "config.json", outside)
        os.symlink(outside, ckpt / "config.json")
        original = outside.read_text()
        for force in (False, True):
            [result] = populate.populate_checkpoints([ckpt], precision="fp16", force=force, progress=False)
            self.assertEqual(result.status, "error", result.message)
            self.assertIn("outside the checkpoint", result.message)
            self.assertIn("nothing modified", result.message)
        self.assertEqual(outside.read_text(), original)

    def test_a_second_writer_waits_for_the_lock(self):
        import threading

        from filelock import FileLock

        ckpt = self.checkpoint()
        results = []
        with FileLock(str(populate.lock_path(ckpt / "config.json"))):
            worker = threading.Thread(
                target=lambda: results.extend(populate.populate_checkpoints([ckpt], precision="bf16", progress=False))
            )
            worker.start()
            worker.join(0.5)
            self.assertTrue(worker.is_alive())  # blocked on the lock
            self.assertNotIn("trained_precision", json.loads((ckpt / "config.json").read_text()))
        worker.join(30)
        self.assertEqual([r.status for r in results], ["written"])

    def test_read_only_file_system_is_named(self):
        ckpt = self.checkpoint()
        flags = SimpleNamespace(f_flag=os.ST_RDONLY)
        with mock.patch.object(populate.os, "statvfs", return_value=flags):
            [result] = populate.populate_checkpoints([ckpt], precision="bf16", progress=False)
        self.assertEqual(result.status, "error")
        self.assertIn("read-only file system", result.message)
        self.assertNotIn("mode", result.message)

    def test_missing_directory_says_it_does_not_exist(self):
        missing = Path(self.get_auto_remove_tmp_dir()) / "nope"
        [result] = populate.populate_checkpoints([missing], precision="bf16", progress=False)
        self.assertEqual(result.status, "error")
        self.assertIn("does not exist", result.message)

    def test_legacy_cache_folder_populates_from_the_registry(self):
        root = Path(self.get_auto_remove_tmp_dir())
        snapshot = root / "models--t5-small" / "snapshots" / ("0" * 40)
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").write_text(dump_config({"model_type": "t5"}))
        [result] = populate.populate_checkpoints([root], progress=False)
        self.assertEqual((result.status, result.model_id), ("written", "google-t5/t5-small"))
        self.assertEqual(json.loads((snapshot / "config.json").read_text())["trained_precision"], "bf16")
