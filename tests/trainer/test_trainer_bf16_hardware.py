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
"""Through the `Trainer` with `bf16_full_train=True`: the emulated-bf16 warning, once, and what a pure-bf16 run logs."""

import unittest
from unittest import mock

from transformers import TrainingArguments
from transformers.testing_utils import CaptureLogger, TestCasePlus, require_torch, require_torch_optimi
from transformers.trained_precision.testing_utils import random_token_dataset
from transformers.utils import is_torch_available, logging


if is_torch_available():
    import torch

    from transformers import GPT2Config, GPT2LMHeadModel, Trainer
    from transformers.integrations import bf16_hardware as hardware
    from transformers.integrations import optimi as tp_optimizers


HARDWARE_LOGGER = "transformers.integrations.bf16_hardware"
EMULATED = "bf16 is emulated"


def _tiny_gpt2():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)


def _args(tmp_dir, **kwargs):
    defaults = {"use_cpu": True, "report_to": [], "save_strategy": "no", "disable_tqdm": True}
    defaults.update(kwargs)
    return TrainingArguments(tmp_dir, **defaults)


def _support(native, slowdown=None):
    return hardware.Bf16Support("cpu", native, "AMD EPYC: AVX2, no AVX512-BF16 or AMX-BF16", "AVX2", slowdown)


@require_torch
@require_torch_optimi
class Bf16FullTrainHardwareTest(TestCasePlus):
    def setUp(self):
        super().setUp()
        logging.warning_once.cache_clear()
        self.addCleanup(logging.warning_once.cache_clear)

    def _support(self, native, slowdown=None):
        return _support(native, slowdown)

    def test_trainer_warns_once_for_bf16_full_train(self):
        logger = logging.get_logger(HARDWARE_LOGGER)
        with (
            mock.patch.object(hardware, "bf16_support", return_value=self._support(False)),
            CaptureLogger(logger) as cl,
        ):
            for _ in range(2):
                args = _args(self.get_auto_remove_tmp_dir(), bf16_full_train=True, max_steps=1)
                Trainer(model=_tiny_gpt2(), args=args, train_dataset=random_token_dataset(size=16))
        self.assertEqual(cl.out.count(EMULATED), 1, cl.out)
        self.assertIn("bf16_full_train=True: bf16 is emulated", cl.out)
        self.assertIn("10 instead of 16 bytes", cl.out)


@require_torch
@require_torch_optimi
class PureBf16LoggingTest(TestCasePlus):
    """At the default verbosity a pure-bf16 run says what it cast and which optimizer it uses, and nothing about a
    checkpoint it did not resume from."""

    def setUp(self):
        super().setUp()
        logging.warning_once.cache_clear()
        self.addCleanup(logging.warning_once.cache_clear)

    def test_summary_visible_at_default_verbosity(self):
        self.assertEqual(logging.get_verbosity(), logging.WARNING)
        args = _args(self.get_auto_remove_tmp_dir(), bf16_full_train=True, max_steps=1)
        logger = logging.get_logger("transformers.integrations.pure_bf16")
        with CaptureLogger(logger) as cl:
            Trainer(model=_tiny_gpt2(), args=args, train_dataset=random_token_dataset(size=16))
        self.assertRegex(
            cl.out,
            r"bf16_full_train: [\d,]+ parameters \([\d.]+%\) in bfloat16, [\d,]+ \([\d.]+%\) in float32 \(kept: .*\)\. "
            r"Optimizer: adamw_optimi \(optimi AdamW with Kahan summation\)\.",
        )
        self.assertEqual(cl.out.count("bf16_full_train: "), 1, cl.out)

    def test_fresh_run_does_not_talk_about_resuming(self):
        args = _args(self.get_auto_remove_tmp_dir(), bf16_full_train=True, max_steps=2, per_device_train_batch_size=4)
        logger = logging.get_logger("transformers.integrations.optimi")
        verbosity = logging.get_verbosity()
        logging.set_verbosity_info()
        try:
            with CaptureLogger(logger) as cl:
                Trainer(model=_tiny_gpt2(), args=args, train_dataset=random_token_dataset(size=16)).train()
        finally:
            logging.set_verbosity(verbosity)
        self.assertNotIn("checkpoint was saved", cl.out)

    def test_resume_from_another_implementation_still_says_so(self):
        cls = tp_optimizers.get_optimi_optimizer_cls("adamw_optimi")
        param = torch.nn.Parameter(torch.randn(8, dtype=torch.bfloat16))
        optimizer = cls([param], lr=1e-3, kahan_sum=True)
        param.grad = torch.randn_like(param)
        optimizer.step()
        state = optimizer.state_dict()
        state["param_groups"][0]["triton"] = True  # written on a machine where optimi chose Triton
        logger = logging.get_logger("transformers.integrations.optimi")
        verbosity = logging.get_verbosity()
        logging.set_verbosity_info()
        try:
            with CaptureLogger(logger) as cl:
                resumed = cls([torch.nn.Parameter(param.detach().clone())], lr=1e-3, kahan_sum=True)
                tp_optimizers.prepare_optimi_optimizer(resumed)
                resumed.load_state_dict(state)
        finally:
            logging.set_verbosity(verbosity)
        self.assertIn("the checkpoint was saved with triton=True", cl.out)


if __name__ == "__main__":
    unittest.main()
