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
"""`optim="stable_adamw"`: the boolean `optim_args` (`kahan_sum`, `decouple_lr`) mean what they say."""

import tempfile
import unittest

from parameterized import parameterized

from transformers import TrainingArguments
from transformers.testing_utils import require_torch, require_torch_optimi
from transformers.utils import is_torch_available


if is_torch_available():
    import torch

    from transformers import Trainer


@require_torch
@require_torch_optimi
class StableAdamWOptimArgsTest(unittest.TestCase):
    def optimizer(self, optim_args):
        with tempfile.TemporaryDirectory() as tmp:
            args = TrainingArguments(tmp, optim="stable_adamw", optim_args=optim_args, report_to=[])
        optimizer_cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args)
        return optimizer_cls(torch.nn.Linear(4, 4).parameters(), **kwargs)

    @parameterized.expand(
        [
            ("False", False),
            ("false", False),
            ("0", False),
            ("True", True),
            ("true", True),
            ("1", True),
        ]
    )
    def test_boolean_optim_args(self, value, expected):
        # every optim_args value is a string: bool("False") is True, so "False" used to turn the option on
        optimizer = self.optimizer(f"kahan_sum={value},decouple_lr={value}")
        self.assertIs(optimizer.param_groups[0]["kahan_sum"], expected)
        self.assertIs(optimizer.param_groups[0]["decouple_lr"], expected)

    def test_defaults_are_unchanged(self):
        optimizer = self.optimizer(None)
        self.assertIsNone(optimizer.param_groups[0]["kahan_sum"])  # optimi decides from the parameters' dtype
        self.assertIs(optimizer.param_groups[0]["decouple_lr"], False)
