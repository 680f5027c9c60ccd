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

import torch

from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    BitsAndBytesConfig,
    CLIPVisionConfig,
    GPT2Config,
    GPT2ForSequenceClassification,
    GPT2LMHeadModel,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
)
from transformers.testing_utils import CaptureLogger, TestCasePlus, require_bitsandbytes
from transformers.utils import logging


logger = logging.get_logger("transformers")


def tiny_gpt2_config(trained_precision="unknown"):
    small = {"n_layer": 1, "n_embd": 64, "n_head": 2, "vocab_size": 64, "n_positions": 16}
    return GPT2Config(bos_token_id=0, eos_token_id=0, trained_precision=trained_precision, **small)


def tiny_llava_config(outer, inner):
    small = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    text_config = LlamaConfig(vocab_size=64, trained_precision=inner, **small)
    vision_config = CLIPVisionConfig(image_size=8, patch_size=4, trained_precision=inner, **small)
    return LlavaConfig(
        text_config=text_config, vision_config=vision_config, image_token_index=63, trained_precision=outer
    )


class TrainedPrecisionCheckTest(TestCasePlus):
    def checkpoint(self, trained_precision, model_class=GPT2LMHeadModel, config=None):
        # each checkpoint has its own path, and the warning names it: no test sees another one's `warning_once`
        path = self.get_auto_remove_tmp_dir()
        model_class(config or tiny_gpt2_config(trained_precision)).save_pretrained(path)
        return path

    def test_bf16_trained_model_loaded_in_fp16_warns_once_with_the_fix(self):
        path = self.checkpoint("bf16")
        with CaptureLogger(logger) as cl:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16)
            AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16)
        self.assertEqual(model.dtype, torch.float16)
        self.assertEqual(cl.out.count(path), 1, cl.out)
        for words in ("bf16", "fp16", "torch.bfloat16"):
            self.assertIn(words, cl.out)

    def test_safe_and_unknown_runtimes_are_silent(self):
        pairs = [
            ("bf16", torch.bfloat16),
            ("bf16", torch.float32),
            ("fp16", torch.float16),
            ("unknown", torch.float16),
        ]
        for trained, dtype in pairs + [("fp32", torch.bfloat16)]:
            path = self.checkpoint(trained)
            with CaptureLogger(logger) as cl:
                model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
            self.assertEqual(model.dtype, dtype)
            self.assertNotIn(path, cl.out)

    def test_every_cast_into_fp16_warns(self):
        casts = {
            "half": lambda model: model.half(),
            "to_dtype": lambda model: model.to(torch.float16),
            "to_tensor": lambda model: model.to(torch.zeros(1, dtype=torch.float16)),
            "type_dtype": lambda model: model.type(torch.float16),
            "type_name": lambda model: model.type("torch.HalfTensor"),
            "sub_model_half": lambda model: model.transformer.half(),
        }
        for name, cast in casts.items():
            with self.subTest(name):
                path = self.checkpoint("bf16")
                model = AutoModelForCausalLM.from_pretrained(path)
                with CaptureLogger(logger) as cl:
                    cast(model)
                    model.to("cpu")  # a device move is not a cast
                self.assertEqual(cl.out.count(path), 1, cl.out)
                self.assertEqual(next(model.transformer.parameters()).dtype, torch.float16)

    def test_a_model_without_a_path_is_named_by_its_class(self):
        with CaptureLogger(logger) as cl:
            model = AutoModelForCausalLM.from_config(tiny_gpt2_config("bf16"), dtype=torch.float16)
            GPT2ForSequenceClassification(tiny_gpt2_config("bf16")).half()
        self.assertEqual(model.dtype, torch.float16)
        self.assertIn("GPT2LMHeadModel", cl.out)
        self.assertIn("GPT2ForSequenceClassification", cl.out)

    def test_a_composite_model_is_one_message_per_load(self):
        # a Llava checks its sub-configs too, and the sub-models it builds in `__init__` are not checked again
        path = self.checkpoint("bf16", LlavaForConditionalGeneration, tiny_llava_config("bf16", "bf16"))
        with CaptureLogger(logger) as cl:
            model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float16)
        self.assertEqual(model.dtype, torch.float16)
        self.assertEqual(len([line for line in cl.out.splitlines() if "fp16" in line]), 1, cl.out)
        self.assertEqual(cl.out.count(path), 1, cl.out)
        path = self.checkpoint("bf16", LlavaForConditionalGeneration, tiny_llava_config("unknown", "bf16"))
        with CaptureLogger(logger) as cl:  # the risk may be in the sub-configs only
            AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float16)
        self.assertEqual(cl.out.count(path), 1, cl.out)

    @require_bitsandbytes
    def test_quantized_matmuls_computing_in_fp16_warn(self):
        # QLoRA's usual load of a bf16-trained model: bf16 weights, 4-bit matmuls computing in fp16
        for compute_dtype, warns in ((torch.float16, True), (torch.bfloat16, False)):
            path = self.checkpoint("bf16")
            quantization_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=compute_dtype)
            with CaptureLogger(logger) as cl:
                model = AutoModelForCausalLM.from_pretrained(
                    path, dtype=torch.bfloat16, quantization_config=quantization_config
                )
            self.assertTrue(model.is_quantized)
            self.assertEqual(cl.out.count(path), int(warns), cl.out)
