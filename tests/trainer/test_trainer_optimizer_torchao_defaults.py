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
"""`optim="adamw_torch_8bit"` / `"adamw_torch_4bit"` without a `block_size`: torchao's own default block sizes."""

import tempfile
import unittest

from transformers import TrainingArguments
from transformers.testing_utils import require_torch, require_torchao
from transformers.utils import is_torch_available, is_torchao_available


if is_torch_available():
    import torch

    from transformers import Trainer

if is_torch_available() and is_torchao_available():
    from torchao.optim import AdamW4bit, AdamW8bit


@require_torch
@require_torchao
class TorchaoDefaultBlockSizeTest(unittest.TestCase):
    def optimizer(self, model, optim, optim_args=None):
        with tempfile.TemporaryDirectory() as tmp:
            args = TrainingArguments(tmp, optim=optim, optim_args=optim_args, report_to=[])
        optimizer_cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args)
        return optimizer_cls(model.parameters(), **kwargs)

    def test_default_block_sizes_are_torchaos(self):
        model = torch.nn.Linear(64, 64)
        self.assertIsInstance(self.optimizer(model, "adamw_torch_4bit"), AdamW4bit)
        self.assertEqual(self.optimizer(model, "adamw_torch_4bit").block_size, 128)
        self.assertEqual(self.optimizer(model, "adamw_torch_8bit").block_size, 256)
        self.assertEqual(
            self.optimizer(model, "adamw_torch_8bit").block_size, AdamW8bit(model.parameters()).block_size
        )
        self.assertEqual(
            self.optimizer(model, "adamw_torch_4bit").block_size, AdamW4bit(model.parameters()).block_size
        )
