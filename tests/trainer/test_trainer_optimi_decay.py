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
The compensated weight decay that `prepare_optimi_optimizer` adds to optimi's optimizers: applied once per step,
through optimi's own Kahan update after the first step, from the weight before the step.
"""

from parameterized import parameterized

from transformers.testing_utils import TestCasePlus, require_torch, require_torch_optimi
from transformers.utils import is_torch_available


if is_torch_available():
    import torch
    from torch import nn

    from transformers.integrations import optimi as tp_optimizers


@require_torch
@require_torch_optimi
class CompensatedDecayTest(TestCasePlus):
    @parameterized.expand(
        [("adamw", "adamw_optimi", 0.5), ("lion", "lion_optimi", 0.5), ("adan", "adan_optimi", 1 / 1.5)]
    )
    def test_decay_is_applied_once_per_step(self, _, optim, per_step):
        # lr * wd = 0.5 and zero gradients: only the decay moves the weight, by a factor far from bf16's rounding
        cls = tp_optimizers.get_optimi_optimizer_cls(optim)
        param = nn.Parameter(torch.ones(8, dtype=torch.bfloat16))
        optimizer = cls([param], lr=0.5, weight_decay=1.0, kahan_sum=True)
        tp_optimizers.prepare_optimi_optimizer(optimizer)
        for step in range(1, 5):  # the first step decays after optimi's update, the next ones inside it
            param.grad = torch.zeros_like(param)
            optimizer.step()
            total = param.float() + optimizer.state[param]["kahan_comp"].float()
            torch.testing.assert_close(total, torch.full((8,), per_step**step), atol=2e-3, rtol=0)
            self.assertEqual(optimizer.param_groups[0]["weight_decay"], 1.0)  # restored after every step

    def test_decay_uses_the_weight_before_the_update(self):
        # lr * wd = 0.5: optimi's own `param *= 1 - lr * wd` is exact in bf16 (a halving), so optimi alone is the
        # reference. Decaying after the update instead of before would differ by lr * wd * lr * update = 0.25 * update.
        cls = tp_optimizers.get_optimi_optimizer_cls("adamw_optimi")
        torch.manual_seed(0)
        start = torch.randn(64).to(torch.bfloat16)
        grads = [torch.zeros(64)] + [torch.randn(64) for _ in range(4)]  # step 1 decays only, in both
        totals = {}
        for compensate in (True, False):
            param = nn.Parameter(start.clone())
            optimizer = cls([param], lr=0.5, weight_decay=1.0, kahan_sum=True)
            tp_optimizers.prepare_optimi_optimizer(optimizer, compensate_weight_decay=compensate)
            for grad in grads:
                param.grad = grad.to(torch.bfloat16)
                optimizer.step()
            totals[compensate] = param.float() + optimizer.state[param]["kahan_comp"].float()
        torch.testing.assert_close(totals[True], totals[False], atol=2e-2, rtol=0)

    def test_fp32_parameters_in_a_half_precision_group_decay_as_optimi_decays_them(self):
        cls = tp_optimizers.get_optimi_optimizer_cls("adamw_optimi")
        half = nn.Parameter(torch.ones(8, dtype=torch.bfloat16))
        full = nn.Parameter(torch.ones(8))
        optimizer = cls([half, full], lr=0.5, weight_decay=1.0, kahan_sum=True)
        tp_optimizers.prepare_optimi_optimizer(optimizer)
        for step in range(1, 4):
            half.grad, full.grad = torch.zeros_like(half), torch.zeros_like(full)
            optimizer.step()
            torch.testing.assert_close(full.detach(), torch.full((8,), 0.5**step))
            self.assertIsNone(optimizer.state[full].get("kahan_comp"))

    def test_without_compensation_optimi_decays_itself(self):
        cls = tp_optimizers.get_optimi_optimizer_cls("adamw_optimi")
        param = nn.Parameter(torch.ones(8, dtype=torch.bfloat16))
        optimizer = cls([param], lr=0.5, weight_decay=1.0, kahan_sum=True)
        tp_optimizers.prepare_optimi_optimizer(optimizer, compensate_weight_decay=False)
        for step in range(1, 4):
            param.grad = torch.zeros_like(param)
            optimizer.step()
            # optimi's own `param *= 1 - lr * wd`, exact at this rate; the buffer stays empty
            torch.testing.assert_close(param.float(), torch.full((8,), 0.5**step))
            self.assertEqual(optimizer.state[param]["kahan_comp"].abs().max().item(), 0.0)
