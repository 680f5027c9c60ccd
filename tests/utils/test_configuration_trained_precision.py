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
from huggingface_hub.errors import StrictDataclassFieldValidationError

from transformers import AutoConfig, GPT2Config, LlavaConfig
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

    def test_torch_dtype_assigned_is_refused_and_the_save_is_unchanged(self):
        # the field holds the four strings only: a dtype is refused there and then, naming the field and the values
        config = GPT2Config()
        with self.assertRaises(StrictDataclassFieldValidationError) as context:
            config.trained_precision = torch.bfloat16
        self.assertIn("'trained_precision'", str(context.exception))
        for name in ("fp32", "bf16", "fp16", "unknown"):
            self.assertIn(repr(name), str(context.exception))
        self.assertEqual(config.trained_precision, "unknown")
        with tempfile.TemporaryDirectory() as tmp:
            config.save_pretrained(tmp)
            self.assertEqual(AutoConfig.from_pretrained(tmp).trained_precision, "unknown")

    def test_the_validator_is_a_type_validator(self):
        from transformers.utils.type_validators import trained_precision

        for name in ("fp32", "bf16", "fp16", "unknown"):
            trained_precision(name)
        for value in ("bfloat16", "BF16", torch.float16, None, ["bf16"]):
            with self.subTest(value=value):
                with self.assertRaises(ValueError) as context:
                    trained_precision(value)
                self.assertIn(repr(value), str(context.exception))

    def test_invalid_value_raises_and_names_the_valid_ones(self):
        def construct():
            GPT2Config(trained_precision="fp64")

        def assign():
            GPT2Config().trained_precision = "fp64"

        def override_on_load():
            with tempfile.TemporaryDirectory() as tmp:
                GPT2Config().save_pretrained(tmp)
                AutoConfig.from_pretrained(tmp, trained_precision="fp64")

        for make in (construct, assign, override_on_load):
            with self.subTest(make.__name__):
                with self.assertRaises((ValueError, StrictDataclassFieldValidationError)) as context:
                    make()
                for name in ("fp64", "fp32", "bf16", "fp16", "unknown"):
                    self.assertIn(name, str(context.exception))

    def load_edited(self, config, edit):
        """`config` saved, its config.json edited by `edit`, loaded again: (the config, what was logged)."""
        with tempfile.TemporaryDirectory() as tmp:
            config.save_pretrained(tmp)
            path = os.path.join(tmp, "config.json")
            with open(path, encoding="utf-8") as f:
                config_dict = json.load(f)
            edit(config_dict)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(config_dict, f)
            with CaptureLogger(logging.get_logger("transformers")) as cl:
                config = AutoConfig.from_pretrained(tmp)
        return config, cl.out

    def test_unrecognised_value_in_config_json_loads_as_unknown(self):
        config, out = self.load_edited(
            GPT2Config(trained_precision="bf16"), lambda config_dict: config_dict.update(trained_precision="bfloat17")
        )
        self.assertEqual(config.trained_precision, "unknown")
        self.assertIn("bfloat17", out)
        self.assertIn("unknown", out)

    def test_unrecognised_value_in_a_sub_config_loads_as_unknown(self):
        text_config = {"model_type": "llama", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}
        config = LlavaConfig(text_config=text_config, trained_precision="bf16")
        config.text_config.trained_precision = "bf16"
        config, out = self.load_edited(config, lambda d: d["text_config"].update(trained_precision="bfloat17"))
        self.assertEqual(config.text_config.trained_precision, "unknown")
        self.assertEqual(config.trained_precision, "bf16")
        self.assertEqual(out.count("text_config.trained_precision="), 1, out)

    def test_unrecognised_value_is_read_as_unknown_by_from_json_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "config.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"model_type": "gpt2", "trained_precision": "fp8-by-hand"}, f)
            with CaptureLogger(logging.get_logger("transformers")) as cl:
                config = GPT2Config.from_json_file(path)
        self.assertEqual(config.trained_precision, "unknown")
        self.assertIn("fp8-by-hand", cl.out)

    def test_a_trained_precision_key_in_other_data_is_left_as_it_is(self):
        # only the config and its sub-configs are read leniently: user data holding the same key is not a config
        params = {"summarization": {"trained_precision": "whatever"}}
        with CaptureLogger(logging.get_logger("transformers")) as cl:
            config = GPT2Config.from_dict({"task_specific_params": params, "trained_precision": "bf16"})
        self.assertEqual(config.task_specific_params, params)
        self.assertEqual(config.trained_precision, "bf16")
        self.assertNotIn("whatever", cl.out)
