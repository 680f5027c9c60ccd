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
"""`optim="adamw_torch_8bit"` / `"adamw_torch_4bit"`: `optim_args="block_size=N"` works."""

import tempfile
import unittest

from transformers import TrainingArguments
from transformers.testing_utils import require_torch, require_torchao
from transformers.utils import is_torch_available, is_torchao_available


if is_torch_available():
    import torch

    from transformers import Trainer

if is_torch_available() and is_torchao_available():
    from torchao.optim import AdamW8bit


@require_torch
@require_torchao
class TorchaoBlockSizeTest(unittest.TestCase):
    def optimizer(self, model, optim, optim_args=None):
        with tempfile.TemporaryDirectory() as tmp:
            args = TrainingArguments(tmp, optim=optim, optim_args=optim_args, report_to=[])
        optimizer_cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args)
        return optimizer_cls(model.parameters(), **kwargs)

    def test_block_size_from_optim_args_trains(self):
        # "block_size=128" used to reach torchao as the string "128", and the first step failed with a TypeError
        torch.manual_seed(0)
        model = torch.nn.Linear(64, 64, bias=False)  # 4096 values: torchao quantizes its states
        optimizer = self.optimizer(model, "adamw_torch_8bit", "block_size=128")
        self.assertIsInstance(optimizer, AdamW8bit)
        self.assertEqual(optimizer.block_size, 128)
        before = model.weight.detach().clone()
        with torch.compiler.set_stance("force_eager"):  # the same arithmetic, without the first-step compile
            model(torch.randn(8, 64)).square().mean().backward()
            optimizer.step()
        self.assertFalse(torch.equal(before, model.weight))
        self.assertEqual(optimizer.state[model.weight]["exp_avg"].block_size, 128)
