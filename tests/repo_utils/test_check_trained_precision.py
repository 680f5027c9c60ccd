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

import json
import os
import stat
import sys
from pathlib import Path

from transformers.testing_utils import CaptureStdout, TestCasePlus


git_repo_path = os.path.abspath(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
sys.path.append(os.path.join(git_repo_path, "utils"))

import check_trained_precision  # noqa: E402


URL = "https://example.org"
ROW = ["org/model", "bf16", f"{URL}/paper"]
CONFIG = {"architectures": ["GPTNeoForCausalLM"], "model_type": "gpt_neo", "vocab_size": 50257}
WRITE = ["--model_id", "EleutherAI/gpt-neo-1.3B", "--write_configs"]  # a stated bf16 row of the repo's data
SOURCE = "https://github.com/EleutherAI/gpt-neo/blob/master/configs/GPT3_XL_pretrained.json"


def dump(config):  # as `PreTrainedConfig.to_json_file` writes it
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


BF16_CONFIG = dump({**CONFIG, "trained_precision": "bf16"})


def run(*args):
    """The script's command line: its exit code and what it printed."""
    with CaptureStdout() as cs:
        code = check_trained_precision.main(list(args))
    return code, cs.out


class CheckTrainedPrecisionTest(TestCasePlus):
    def write_rows(self, rows):
        path = Path(self.get_auto_remove_tmp_dir()) / "trained_precisions.json"
        path.write_text(check_trained_precision.format_rows(rows), encoding="utf-8")
        return path

    def test_repo_data_is_valid(self):
        check_trained_precision.check_trained_precisions()

    def test_bad_row_is_named(self):
        for row, expected in [
            (["org/model-x", "float16", URL], "precision 'float16' is not one of fp32, bf16, fp16"),
            (["gpt2", "bf16", URL], "'gpt2' is not a Hub id"),
            (["org/*", "bf16", URL], "'org/*' is not a Hub id"),
            (["org/family-*", "bf16", URL], "'org/family-*' is not a Hub id"),
            (["org/model--x", "bf16", URL], "'org/model--x' is not a Hub id"),
            (["org/model-x", "bf16", "http://example.org"], "source 'http://example.org' is not an https URL"),
            (["org/model-x", "bf16"], "a row is a list of three strings"),
        ]:
            with self.subTest(row=row), self.assertRaises(ValueError) as context:
                check_trained_precision.load_rows(self.write_rows([ROW, row]))
            self.assertIn(f"- row 1 {row!r}: {expected}", str(context.exception))
            self.assertNotIn("row 0", str(context.exception))

    def test_duplicates(self):
        rows = [ROW, ["org/Model", "fp16", URL], ["org/family-1b", "fp16", URL]]
        self.assertEqual(
            check_trained_precision.check_rows(rows), ["row 1 'org/Model': duplicate of row 0 'org/model'"]
        )

    def test_rows_are_sorted_by_fix_and_overwrite(self):
        path = self.write_rows([["Org/other", "fp32", URL], ROW])
        with self.assertRaisesRegex(ValueError, "not sorted by Hub id"):
            check_trained_precision.check_trained_precisions(path)
        check_trained_precision.check_trained_precisions(path, overwrite=True)
        expected = ["org/model", "Org/other"]  # case does not matter, as on the Hub
        self.assertEqual([row[0] for row in json.loads(path.read_text(encoding="utf-8"))], expected)
        check_trained_precision.check_trained_precisions(path)

    def test_write_into_a_checkpoint_directory(self):
        config_file = Path(self.get_auto_remove_tmp_dir()) / "config.json"
        config_file.write_text(json.dumps({"vocab_size": 8, "model_type": "gpt_neo"}, indent=4), encoding="utf-8")
        config_file.chmod(0o644)
        with self.assertRaisesRegex(ValueError, "--model_id ORG/NAME"):
            run("--write_configs", str(config_file.parent))
        written = f"{config_file}: wrote 'bf16' ({WRITE[1]}, {SOURCE})\n"
        self.assertEqual(run(*WRITE, str(config_file.parent)), (0, written))
        expected = {"vocab_size": 8, "model_type": "gpt_neo", "trained_precision": "bf16"}  # same order and indent
        self.assertEqual(config_file.read_text(encoding="utf-8"), json.dumps(expected, indent=4))
        self.assertEqual(os.listdir(config_file.parent), ["config.json"])  # the temporary file was moved
        self.assertEqual(stat.S_IMODE(config_file.stat().st_mode), 0o644)

    def test_write_needs_a_published_id_and_a_checkpoint(self):
        checkpoint = self.get_auto_remove_tmp_dir()
        with self.assertRaisesRegex(ValueError, "has no published precision for org/x"):
            run("--model_id", "org/x", "--write_configs", checkpoint)
        with self.assertRaisesRegex(ValueError, "holds no config.json"):
            run(*WRITE, checkpoint)

    def test_another_precision_is_only_replaced_with_force(self):
        config_file = Path(self.get_auto_remove_tmp_dir()) / "config.json"
        config_file.write_text(dump({**CONFIG, "trained_precision": "fp16"}), encoding="utf-8")
        code, out = run(*WRITE, str(config_file.parent))
        self.assertEqual(code, 1)
        self.assertIn("left as it is: it says 'fp16', the published precision is 'bf16'", out)
        self.assertEqual(config_file.read_text(encoding="utf-8"), dump({**CONFIG, "trained_precision": "fp16"}))
        written = f"{config_file}: wrote 'bf16' over 'fp16' ({WRITE[1]}, {SOURCE})\n"
        self.assertEqual(run(*WRITE, str(config_file.parent), "--force"), (0, written))
        self.assertEqual(config_file.read_text(encoding="utf-8"), BF16_CONFIG)
        self.assertEqual(os.listdir(config_file.parent), ["config.json"])
