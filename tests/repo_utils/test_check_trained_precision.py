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
import sys
from pathlib import Path

from transformers.testing_utils import TestCasePlus


git_repo_path = os.path.abspath(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
sys.path.append(os.path.join(git_repo_path, "utils"))

import check_trained_precision  # noqa: E402


URL = "https://example.org"
ROW = ["org/model", "bf16", f"{URL}/paper"]


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
            (["org/family-*", "bf16", URL], "'org/family-*' is not a Hub id"),
            (["org/model-x", "bf16", "http://example.org"], "source 'http://example.org' is not an https URL"),
            (["org/model-x", "bf16"], "a row is a list of three strings"),
        ]:
            with self.subTest(row=row), self.assertRaises(ValueError) as context:
                check_trained_precision.load_rows(self.write_rows([ROW, row]))
            self.assertIn(f"- row 1 {row!r}: {expected}", str(context.exception))
        duplicate = check_trained_precision.check_rows([ROW, ["org/Model", "fp16", URL]])
        self.assertEqual(duplicate, ["row 1 'org/Model': duplicate of row 0 'org/model'"])

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
