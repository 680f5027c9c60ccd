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
import tempfile
import unittest

import torch
from huggingface_hub.errors import StrictDataclassClassValidationError

from transformers import AutoConfig, GPT2Config, PreTrainedConfig
from transformers.testing_utils import CaptureLogger
from transformers.utils import logging


class TrainedPrecisionConfigTest(unittest.TestCase):
    def test_default_is_unknown_and_not_saved(self):
        config = GPT2Config()
        self.assertEqual(config.trained_precision, "unknown")
        self.assertNotIn("trained_precision", config.to_diff_dict())
        with tempfile.TemporaryDirectory() as tmp:
            config.save_pretrained(tmp)
            with open(os.path.join(tmp, "config.json"), encoding="utf-8") as f:
                self.assertNotIn("trained_precision", json.load(f))

    def test_known_value_is_saved_and_loaded(self):
        for precision in ("fp32", "bf16", "fp16"):
            with tempfile.TemporaryDirectory() as tmp:
                GPT2Config(trained_precision=precision).save_pretrained(tmp)
                with open(os.path.join(tmp, "config.json"), encoding="utf-8") as f:
                    self.assertEqual(json.load(f)["trained_precision"], precision)
                self.assertEqual(AutoConfig.from_pretrained(tmp).trained_precision, precision)

    def test_torch_dtype_is_accepted(self):
        for dtype, precision in ((torch.float32, "fp32"), (torch.bfloat16, "bf16"), (torch.float16, "fp16")):
            self.assertEqual(PreTrainedConfig(trained_precision=dtype).trained_precision, precision)

    def test_invalid_value_raises_and_names_the_valid_ones(self):
        with self.assertRaises((ValueError, StrictDataclassClassValidationError)) as context:
            GPT2Config(trained_precision="fp64")
        for name in ("fp64", "fp32", "bf16", "fp16", "unknown"):
            self.assertIn(name, str(context.exception))

    def test_unrecognised_value_in_config_json_loads_as_unknown(self):
        with tempfile.TemporaryDirectory() as tmp:
            GPT2Config(trained_precision="bf16").save_pretrained(tmp)
            path = os.path.join(tmp, "config.json")
            with open(path, encoding="utf-8") as f:
                config_dict = json.load(f)
            config_dict["trained_precision"] = "bfloat17"
            with open(path, "w", encoding="utf-8") as f:
                json.dump(config_dict, f)

            logger = logging.get_logger("transformers")
            with CaptureLogger(logger) as cl:
                config = AutoConfig.from_pretrained(tmp)
        self.assertEqual(config.trained_precision, "unknown")
        self.assertIn("bfloat17", cl.out)
        self.assertIn("unknown", cl.out)
