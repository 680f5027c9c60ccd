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

import torch
from huggingface_hub.errors import StrictDataclassFieldValidationError

from transformers import AutoConfig, GPT2Config, LlavaConfig
from transformers.testing_utils import CaptureLogger, TestCasePlus
from transformers.utils import logging
from transformers.utils.type_validators import trained_precision


logger = logging.get_logger("transformers")


class TrainedPrecisionConfigTest(TestCasePlus):
    def test_default_is_unknown_and_not_saved_and_known_values_are(self):
        tmp = self.get_auto_remove_tmp_dir()
        GPT2Config().save_pretrained(tmp)
        self.assertNotIn("trained_precision", self.read(tmp))
        self.assertEqual(AutoConfig.from_pretrained(tmp).trained_precision, "unknown")
        for precision in ("fp32", "bf16", "fp16"):
            GPT2Config(trained_precision=precision).save_pretrained(tmp)
            self.assertEqual(self.read(tmp)["trained_precision"], precision)
            self.assertEqual(AutoConfig.from_pretrained(tmp).trained_precision, precision)

    def test_invalid_values_are_refused_naming_the_field_and_the_valid_ones(self):
        tmp = self.get_auto_remove_tmp_dir()
        GPT2Config().save_pretrained(tmp)
        config = GPT2Config()
        for value in ("fp64", "bfloat16", torch.bfloat16, None):
            for make in (
                lambda value: GPT2Config(trained_precision=value),
                lambda value: setattr(config, "trained_precision", value),
                lambda value: AutoConfig.from_pretrained(tmp, trained_precision=value),
            ):
                with self.subTest(value=value), self.assertRaises(StrictDataclassFieldValidationError) as context:
                    make(value)
                for name in ("'trained_precision'", repr(value), "'fp32'", "'bf16'", "'fp16'", "'unknown'"):
                    self.assertIn(name, str(context.exception))
        self.assertEqual(config.trained_precision, "unknown")
        with self.assertRaises(ValueError):  # the validator, beside upstream's other field validators
            trained_precision("fp64")

    def read(self, directory):
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            return json.load(f)

    def load_edited(self, config, edit):
        """`config` saved, its config.json edited by `edit`, loaded again: (the config, what was logged)."""
        tmp = self.get_auto_remove_tmp_dir()
        config.save_pretrained(tmp)
        config_dict = self.read(tmp)
        edit(config_dict)
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config_dict, f)
        with CaptureLogger(logger) as cl:
            config = AutoConfig.from_pretrained(tmp)
            GPT2Config.from_json_file(os.path.join(tmp, "config.json"))
        return config, cl.out

    def test_only_the_config_and_its_sub_configs_are_read_leniently(self):
        text_config = {"model_type": "llama", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}
        config = LlavaConfig(text_config=text_config, trained_precision="bf16")
        params = {"summarization": {"trained_precision": "whatever"}}  # user data, not a config

        def edit(config_dict):
            config_dict["text_config"]["trained_precision"] = "bfloat17"
            config_dict["task_specific_params"] = params

        config, out = self.load_edited(config, edit)
        self.assertEqual(config.text_config.trained_precision, "unknown")
        self.assertEqual(config.trained_precision, "bf16")
        self.assertEqual(out.count("`text_config.trained_precision='bfloat17'`"), 1, out)
        top, top_out = self.load_edited(GPT2Config(), lambda config_dict: config_dict.update(trained_precision="bf17"))
        self.assertEqual(top.trained_precision, "unknown")
        self.assertEqual(top_out.count("`trained_precision='bf17'`"), 1, top_out)  # one warning; from_json_file loads
        self.assertEqual(config.task_specific_params, params)
        self.assertNotIn("whatever", out)
