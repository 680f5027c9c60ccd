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
import shutil
import tempfile
import unittest

import torch

from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    CLIPVisionConfig,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
)
from transformers.modeling_utils import TrainedPrecisionRiskError
from transformers.testing_utils import CaptureLogger
from transformers.utils import logging


logger = logging.get_logger("transformers")


class TrainedPrecisionCheckTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def checkpoint(self, trained_precision):
        # each checkpoint has its own path, and the warning names it: no test sees another one's `warning_once`
        config = GPT2Config(
            n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16, bos_token_id=0, eos_token_id=0
        )
        config.trained_precision = trained_precision
        path = tempfile.mkdtemp(dir=self.tmp.name)
        GPT2LMHeadModel(config).save_pretrained(path)
        return path

    def test_bf16_trained_model_loaded_in_fp16_warns_once_with_the_fix(self):
        path = self.checkpoint("bf16")
        with CaptureLogger(logger) as cl:
            AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16)
            AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16)
        self.assertEqual(cl.out.count(path), 1, cl.out)
        for words in ("bf16", "fp16", "torch.bfloat16", "trained_precision_check"):
            self.assertIn(words, cl.out)

    def test_error_mode_raises_before_loading(self):
        path = self.checkpoint("bf16")
        with self.assertRaises(TrainedPrecisionRiskError) as context:
            AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        self.assertNotIsInstance(context.exception, ValueError)
        self.assertIn(path, str(context.exception))

    def test_safe_unknown_and_ignored_runtimes_are_silent(self):
        cases = [("bf16", torch.bfloat16, None), ("bf16", torch.float32, "error"), ("fp16", torch.float16, "error")]
        # a precision loss without a known failure (fp32 weights run in bf16) never raises
        cases += [
            ("unknown", torch.float16, "error"),
            ("bf16", torch.float16, "ignore"),
            ("fp32", torch.bfloat16, "error"),
        ]
        for trained, dtype, mode in cases:
            path = self.checkpoint(trained)
            with CaptureLogger(logger) as cl:
                model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, trained_precision_check=mode)
            self.assertEqual(model.dtype, dtype)
            self.assertNotIn(path, cl.out)

    def test_casts_are_checked_with_the_mode_of_the_load(self):
        path = self.checkpoint("bf16")
        model = AutoModelForCausalLM.from_pretrained(path, trained_precision_check="error")
        for cast in (
            model.half,
            lambda: model.to(torch.float16),
            lambda: model.to(torch.zeros(1, dtype=torch.float16)),
            lambda: model.to(dtype=torch.float16),
            lambda: model.type(torch.float16),
        ):
            with self.assertRaises(TrainedPrecisionRiskError):
                cast()
        self.assertEqual(model.dtype, torch.float32)
        model = AutoModelForCausalLM.from_pretrained(path)
        with CaptureLogger(logger) as cl:
            model.to("cpu", torch.float16)
        self.assertIn(path, cl.out)
        self.assertEqual(model.dtype, torch.float16)

    def test_bfloat16_keeps_the_quantization_guard_of_half_and_float(self):
        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16))
        model.is_quantized = True
        for cast in (model.half, model.float, model.bfloat16):
            with self.assertRaises(ValueError) as context:
                cast()
            self.assertIn("quantized", str(context.exception))

    def test_model_built_in_python_is_named_by_its_class(self):
        config = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16, trained_precision="bf16")
        model = GPT2LMHeadModel(config)
        with CaptureLogger(logger) as cl:
            model.half()
        self.assertIn("GPT2LMHeadModel", cl.out)
        self.assertNotIn("GPT2Config", cl.out)

    def test_from_config(self):
        config = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16, trained_precision="bf16")
        with self.assertRaises(TrainedPrecisionRiskError):
            AutoModelForCausalLM.from_config(config, dtype=torch.float16, trained_precision_check="error")
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, trained_precision_check="error")
        self.assertEqual(model.dtype, torch.bfloat16)

    def test_invalid_mode_is_named(self):
        path = self.checkpoint("unknown")
        with self.assertRaises(ValueError) as context:
            AutoModelForCausalLM.from_pretrained(path, trained_precision_check="raise")
        self.assertIn("'raise'", str(context.exception))


class TrainedPrecisionCompositeModelTest(unittest.TestCase):
    """A Llava builds its vision and text models in `__init__` with `AutoModel.from_config`: they follow the call's mode."""

    def setUp(self):
        # the sub-models' warnings name their classes: another test's `warning_once` must not hide one here
        logging.warning_once.cache_clear()

    def config(self, outer, inner):
        small = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
        text_config = LlamaConfig(vocab_size=64, **small)
        vision_config = CLIPVisionConfig(image_size=8, patch_size=4, **small)
        text_config.trained_precision = vision_config.trained_precision = inner
        return LlavaConfig(
            text_config=text_config, vision_config=vision_config, image_token_index=63, trained_precision=outer
        )

    def checkpoint(self, outer, inner):
        path = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, path)
        LlavaForConditionalGeneration(self.config(outer, inner)).save_pretrained(path)
        return path

    def test_ignore_reaches_the_sub_models(self):
        path = self.checkpoint("bf16", "bf16")
        with CaptureLogger(logger) as cl:
            model = AutoModelForImageTextToText.from_pretrained(
                path, dtype=torch.float16, trained_precision_check="ignore"
            )
            model.half()
        self.assertEqual(model.dtype, torch.float16)
        self.assertNotIn("was trained in", cl.out)
        with CaptureLogger(logger) as cl:
            LlavaForConditionalGeneration._from_config(
                self.config("bf16", "bf16"), dtype=torch.float16, trained_precision_check="ignore"
            )
        self.assertNotIn("was trained in", cl.out)

    def test_error_reaches_the_sub_models(self):
        # the outer config knows nothing: the risk is only in the sub-configs, checked as the sub-models are built
        path = self.checkpoint("unknown", "bf16")
        with self.assertRaises(TrainedPrecisionRiskError):
            AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        with self.assertRaises(TrainedPrecisionRiskError):
            LlavaForConditionalGeneration._from_config(
                self.config("unknown", "bf16"), dtype=torch.float16, trained_precision_check="error"
            )
        model = AutoModelForImageTextToText.from_pretrained(
            path, dtype=torch.bfloat16, trained_precision_check="error"
        )
        self.assertEqual(model.dtype, torch.bfloat16)
