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
import os

import torch

from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    BitsAndBytesConfig,
    CLIPVisionConfig,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    TrainedPrecisionRiskError,
)
from transformers.testing_utils import CaptureLogger, TestCasePlus, require_bitsandbytes
from transformers.utils import logging


logger = logging.get_logger("transformers")


class TrainedPrecisionCheckModeTest(TestCasePlus):
    def checkpoint(self, trained_precision):
        small = {"n_layer": 1, "n_embd": 64, "n_head": 2, "vocab_size": 64, "n_positions": 16, "bos_token_id": 0}
        path = self.get_auto_remove_tmp_dir()
        GPT2LMHeadModel(GPT2Config(trained_precision=trained_precision, eos_token_id=0, **small)).save_pretrained(path)
        return path

    def test_error_mode_raises_before_loading(self):
        path = self.checkpoint("bf16")
        with self.assertRaises(TrainedPrecisionRiskError) as context:
            AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        self.assertNotIsInstance(context.exception, ValueError)
        self.assertIn(path, str(context.exception))

    def test_later_casts_follow_the_mode_of_the_load(self):
        path = self.checkpoint("bf16")
        model = AutoModelForCausalLM.from_pretrained(path, trained_precision_check="error")
        for cast in (
            model.half,
            lambda: model.to(torch.float16),
            lambda: model.to(torch.zeros(1, dtype=torch.float16)),
            lambda: model.type(torch.float16),
            lambda: model.type("torch.HalfTensor"),
            model.transformer.half,  # a sub-model holding the same config
        ):
            with self.assertRaises(TrainedPrecisionRiskError):
                cast()
        self.assertEqual(model.dtype, torch.float32)
        model.bfloat16().save_pretrained(path)
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            self.assertNotIn("trained_precision_check", f.read())  # the mode is the call's, never saved

    def test_ignore_is_silent_and_safe_pairs_never_raise(self):
        path = self.checkpoint("bf16")
        with CaptureLogger(logger) as cl:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16, trained_precision_check="ignore")
            model.float().half()
        self.assertEqual(model.dtype, torch.float16)
        self.assertNotIn(path, cl.out)
        for trained, dtype in (("unknown", torch.float16), ("fp16", torch.float16), ("fp32", torch.bfloat16)):
            path = self.checkpoint(trained)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, trained_precision_check="error")
            self.assertEqual(model.dtype, dtype)
        with self.assertRaisesRegex(ValueError, "'raise'"):  # an invalid mode is named, even for a safe load
            AutoModelForCausalLM.from_pretrained(path, trained_precision_check="raise")

    @require_bitsandbytes
    def test_quantized_matmuls_computing_in_fp16_raise(self):
        path = self.checkpoint("bf16")
        quantization_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float16)
        with self.assertRaises(TrainedPrecisionRiskError):
            AutoModelForCausalLM.from_pretrained(
                path, dtype=torch.bfloat16, quantization_config=quantization_config, trained_precision_check="error"
            )

    def test_the_mode_reaches_the_sub_models(self):
        # the outer config knows nothing: the risk is only in the sub-configs
        small = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
        text_config = LlamaConfig(vocab_size=64, trained_precision="bf16", **small)
        vision_config = CLIPVisionConfig(image_size=8, patch_size=4, trained_precision="bf16", **small)
        config = LlavaConfig(text_config=text_config, vision_config=vision_config, image_token_index=63)
        path = self.get_auto_remove_tmp_dir()
        LlavaForConditionalGeneration(config).save_pretrained(path)
        with self.assertRaises(TrainedPrecisionRiskError):
            AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        with self.assertRaises(TrainedPrecisionRiskError):
            LlavaForConditionalGeneration._from_config(config, dtype=torch.float16, trained_precision_check="error")
        model = AutoModelForImageTextToText.from_pretrained(path, trained_precision_check="error")
        with self.assertRaises(TrainedPrecisionRiskError):
            model.model.vision_tower.to(torch.float16)
