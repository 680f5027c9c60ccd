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
"""
A finished pure-fp16 Trainer run is evidence that fp16 works for the weights it ended on and the lengths it saw, and
for nothing else: its binding is checked once the weights are loaded, in error mode too.
"""

import os
import unittest

from transformers import TrainingArguments, is_torch_available
from transformers.testing_utils import (
    CaptureLogger,
    LoggingLevel,
    TestCasePlus,
    mockenv_context,
    require_accelerate,
    require_torch,
)
from transformers.trained_precision.testing_utils import random_token_dataset, tiny_gpt_neo
from transformers.utils import logging


if is_torch_available():
    import torch

    from transformers import GPTNeoForCausalLM, Trainer
    from transformers.trained_precision.facts.run_record import MIN_RUN_STEPS
    from transformers.trained_precision.guard.check import TrainedPrecisionRiskError, reset_warning_cache

STAMP_LOGGER = "transformers.trained_precision.record.stamp"


def clear_warning_caches():
    reset_warning_cache()
    logging.get_logger(STAMP_LOGGER).warning_once.cache_clear()
    logging.get_logger(STAMP_LOGGER).info_once.cache_clear()


@require_torch
@require_accelerate
class FinishedRunEvidenceTest(TestCasePlus):
    def setUp(self):
        super().setUp()
        self.output_dir = self.get_auto_remove_tmp_dir()
        clear_warning_caches()
        env = mockenv_context("ACCELERATE_MIXED_PRECISION", "TRANSFORMERS_TRAINED_PRECISION_CHECK")
        env.__enter__()
        self.addCleanup(env.__exit__, None, None, None)

    def tearDown(self):
        from accelerate.state import AcceleratorState

        AcceleratorState._reset_state(reset_partial_state=True)
        super().tearDown()

    def train(self, model, length, **kwargs):
        args = TrainingArguments(
            self.output_dir, use_cpu=True, per_device_train_batch_size=4, report_to=[], disable_tqdm=True, **kwargs
        )
        trainer = Trainer(model, args, train_dataset=random_token_dataset(16, length=length))
        trainer.train()
        trainer.save_model()
        return trainer

    def test_a_long_enough_pure_fp16_run_is_evidence_for_fp16_loads(self):
        """
        MIN_RUN_STEPS real optimizer steps with fp16 weights, on inputs of the model's whole length (32 tokens): the
        saved model, and an unchanged copy of it, load in fp16 in error mode. The same weights with one neuron edited
        after the run overflow in fp16, and error mode raises at load.
        """
        torch.manual_seed(0)
        model = tiny_gpt_neo(trained_precision="bf16").half()
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            self.train(model, optim="sgd", learning_rate=1e-3, max_steps=MIN_RUN_STEPS, save_strategy="no", length=32)
        self.assertIn(f"after {MIN_RUN_STEPS} optimizer step(s)", cl.out)
        self.assertIn("evidence that fp16 works for this model", cl.out)
        copy_dir, edited_dir = os.path.join(self.output_dir, "copy"), os.path.join(self.output_dir, "edited")
        GPTNeoForCausalLM.from_pretrained(self.output_dir, dtype=torch.float32).save_pretrained(copy_dir)
        edited = GPTNeoForCausalLM.from_pretrained(self.output_dir, dtype=torch.float32)
        with torch.no_grad():
            edited.transformer.h[0].mlp.c_fc.weight[5] *= 1e6  # one neuron, past fp16's range
        edited.save_pretrained(edited_dir)
        check_logger = logging.get_logger("transformers.trained_precision.guard.check")
        for path in (self.output_dir, copy_dir):
            clear_warning_caches()
            with LoggingLevel(logging.INFO), CaptureLogger(check_logger) as cl:
                with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="error"):
                    GPTNeoForCausalLM.from_pretrained(path, dtype=torch.float16)
            self.assertIn(f"a pure fp16 training run finished {MIN_RUN_STEPS} optimizer steps", cl.out)
            self.assertIn("on inputs of up to 32 tokens, and these are the weights it ended on", cl.out)
        # just outside the evidence: the edited weights overflow in fp16, and the load refuses them
        ids = torch.arange(32)[None] % 64
        fp16 = GPTNeoForCausalLM.from_pretrained(edited_dir, dtype=torch.float16, trained_precision_check="ignore")
        with torch.no_grad():
            self.assertFalse(torch.isfinite(fp16(input_ids=ids).logits).all())
        clear_warning_caches()
        with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="error"):
            with self.assertRaises(TrainedPrecisionRiskError) as raised:
                GPTNeoForCausalLM.from_pretrained(edited_dir, dtype=torch.float16)
        self.assertIn("The finished run in `trained_precision_run` is no evidence here", str(raised.exception))
        self.assertIn("its digest does not match these weights", str(raised.exception))

    def test_a_run_on_shorter_inputs_than_the_model_takes_is_no_evidence_beyond_them(self):
        """The same run on 8-token inputs of a model that takes 32: error mode raises, naming both lengths."""
        torch.manual_seed(0)
        model = tiny_gpt_neo(trained_precision="bf16").half()
        self.train(model, optim="sgd", learning_rate=1e-3, max_steps=MIN_RUN_STEPS, save_strategy="no", length=8)
        clear_warning_caches()
        with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="error"):
            with self.assertRaises(TrainedPrecisionRiskError) as raised:
                GPTNeoForCausalLM.from_pretrained(self.output_dir, dtype=torch.float16)
        self.assertIn("it saw inputs of up to 8 tokens, and this model takes 32", str(raised.exception))
        self.assertIn("beyond 8 tokens it is no evidence", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
