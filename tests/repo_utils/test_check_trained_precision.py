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

from transformers.testing_utils import CaptureStd, CaptureStdout, TestCasePlus


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
# EleutherAI/gpt-neo-1.3B's config.json in its layout (keys sorted, the attention patterns as inline arrays), cut short
GPT_NEO_CONFIG = """{
  "activation_function": "gelu_new",
  "architectures": [
    "GPTNeoForCausalLM"
  ],
  "attention_layers": ["global", "local", "global", "local"],
  "attention_types": [[["global", "local"], 12]],
  "hidden_size": 2048,
  "model_type": "gpt_neo",
  "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50, "temperature": 0.9}},
  "tokenizer_class": "GPT2Tokenizer",
  "transformers_version": "4.9.0.dev0",
  "vocab_size": 50257,
  "window_size": 256
}
"""


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

    def test_gpt_neo_sizes_with_a_published_precision(self):
        rows = {hub_id: precision for hub_id, precision, _ in check_trained_precision.load_rows()[1]}
        self.assertEqual(rows["EleutherAI/gpt-neo-1.3B"], "bf16")
        self.assertEqual(rows["EleutherAI/gpt-neo-2.7B"], "fp32")
        self.assertNotIn("EleutherAI/gpt-neo-125M", rows)  # nobody who trained it said

    def test_write_changes_only_the_fields_line(self):
        config_file = Path(self.get_auto_remove_tmp_dir()) / "config.json"
        config_file.write_text(GPT_NEO_CONFIG, encoding="utf-8")
        config_file.chmod(0o644)
        written = f"{config_file}: wrote 'bf16' ({WRITE[1]}, {SOURCE})\n"
        self.assertEqual(run(*WRITE, str(config_file.parent)), (0, written))
        new = config_file.read_text(encoding="utf-8").splitlines(keepends=True)
        self.assertEqual([line for line in new if line not in GPT_NEO_CONFIG], ['  "trained_precision": "bf16",\n'])
        self.assertEqual("".join(line for line in new if "trained_precision" not in line), GPT_NEO_CONFIG)
        self.assertEqual(os.listdir(config_file.parent), ["config.json"])  # the temporary file was moved
        self.assertEqual(stat.S_IMODE(config_file.stat().st_mode), 0o644)
        # replacing a value changes that line only, and keeps the other keys' order and indentation
        config_file.write_text(
            '{\n    "vocab_size": 8, "trained_precision": "fp16",\n    "a": [1, 2]\n}', encoding="utf-8"
        )
        self.assertEqual(run(*WRITE, str(config_file.parent), "--force")[0], 0)
        expected = '{\n    "vocab_size": 8, "trained_precision": "bf16",\n    "a": [1, 2]\n}'
        self.assertEqual(config_file.read_text(encoding="utf-8"), expected)

    def test_bad_input_is_a_message_not_a_traceback(self):
        checkpoint = Path(self.get_auto_remove_tmp_dir())
        (checkpoint / "bad" / "config.json").parent.mkdir()
        (checkpoint / "bad" / "config.json").write_text('{"vocab_size": 8,}', encoding="utf-8")
        for args, expected in [
            (["--write_configs", str(checkpoint)], "--model_id ORG/NAME"),
            (["--model_id", "EleutherAI/gpt-neo-125M", "--write_configs", str(checkpoint)], "no published precision"),
            ([*WRITE, str(checkpoint / "missing")], f"no config.json in {checkpoint / 'missing'}"),
            ([*WRITE, str(checkpoint / "bad")], "is not a valid JSON object"),
        ]:
            with self.subTest(expected), CaptureStd(out=False) as cs, self.assertRaises(SystemExit) as context:
                check_trained_precision.main(args)
            self.assertEqual(context.exception.code, 2)
            self.assertIn(expected, cs.err)
            self.assertNotIn("Traceback", cs.err)
        self.assertEqual((checkpoint / "bad" / "config.json").read_text(encoding="utf-8"), '{"vocab_size": 8,}')
        self.assertEqual(sorted(os.listdir(checkpoint / "bad")), ["config.json"])

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
