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
"""The activation audit's Python API: `audit_activations` and the `ActivationRecorder` it runs on."""

import unittest

from parameterized import parameterized

from transformers.testing_utils import require_torch
from transformers.utils import is_torch_available


if is_torch_available():
    import torch

    from transformers.trained_precision import ActivationRecorder, audit_activations
    from transformers.trained_precision.testing_utils import tiny_gpt_neo


@require_torch
class ActivationAuditTest(unittest.TestCase):
    def test_audit_api_removes_hooks_and_restores_mode(self):
        model = tiny_gpt_neo(vocab_size=99, hidden_size=32, num_heads=4, max_position_embeddings=64)
        model.train()
        audit = audit_activations(model)
        self.assertEqual(audit.input_source, "random")
        self.assertTrue(model.training)
        for module in model.modules():
            self.assertEqual(len(module._forward_hooks), 0)
            self.assertEqual(len(module._forward_hooks_with_kwargs), 0)
        names = {m.name for m in audit.modules}
        self.assertIn("(model)", names)
        self.assertIn("transformer.h.1.mlp.c_proj", names)
        self.assertEqual([m.max_abs for m in audit.modules], sorted((m.max_abs for m in audit.modules), reverse=True))

    def test_first_overflow_is_the_modules_largest_value_over_every_sample(self):
        # the first value to pass fp16's max (on the first sample) is smaller than the module's largest over every
        # sample: `first_overflow`, the verdict, the JSON and the table all give the largest, one number
        class Parent(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.child = torch.nn.Identity()

            def forward(self, x):
                return self.child(x)

        audit = audit_activations(Parent(), inputs=[{"x": torch.full((1, 2), 7e4)}, {"x": torch.full((1, 2), 3e6)}])
        self.assertEqual(audit.first_overflow, ("child", "input", 3e6))
        self.assertEqual({m.name: m.max_input for m in audit.modules}["child"], 3e6)
        self.assertIn("the input of `child` (max 3e+06; fp16 max 65504)", audit.verdict)
        self.assertEqual(audit.to_dict()["first_overflow"], {"module": "child", "where": "input", "max_abs": 3e6})
        # each dtype in its own terms: the range fits bf16 and fp32, overflows fp16
        self.assertEqual(audit.range_for("fp16"), audit.verdict)
        self.assertEqual(audit.range_for("bf16"), "largest activation 3e+06 at `child`, within bf16's max 3.39e+38")
        self.assertIn("within fp32's max", audit.range_for("fp32"))

    def test_recorder_sees_keyword_inputs(self):
        class Child(torch.nn.Module):
            def forward(self, hidden_states=None):
                return hidden_states.sum(-1)

        class Parent(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.child = Child()

            def forward(self, x):
                return self.child(hidden_states=x * 1e5)  # the overflow happens here, outside any submodule

        model = Parent()
        audit = audit_activations(model, inputs=[{"x": torch.ones(1, 2)}])
        self.assertEqual(audit.first_overflow[:2], ("child", "input"))
        self.assertAlmostEqual(audit.first_overflow[2], 1e5)
        self.assertIn("the input of `child`", audit.verdict)
        with ActivationRecorder(model) as recorder:
            model(torch.full((1, 2), 2.0))
        self.assertEqual(recorder.input_max["child"], 2e5)
        self.assertEqual(recorder.output_max["child"], 4e5)
        self.assertEqual(recorder.calls, {"(model)": 1, "child": 1})

    def test_attention_masks_are_not_activations(self):
        class Scores(torch.nn.Module):
            def forward(self, scores, bias, attention_mask=None):
                return scores + attention_mask  # `bias` (a positional mask) is only an input here

        class Parent(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.scores = Scores()

            def forward(self, x):
                lowest = torch.finfo(x.dtype).min
                mask = torch.tensor([[0.0, lowest]])
                return self.scores(x, mask, attention_mask=mask)  # positional and keyword masks

        audit = audit_activations(Parent(), inputs=[{"x": torch.tensor([[2.0, -7.0]])}])
        self.assertIsNone(audit.first_overflow)
        ranges = {m.name: m for m in audit.modules}
        self.assertEqual(ranges["scores"].max_input, 7.0)  # the sentinel is left out, the real values are kept
        self.assertEqual(ranges["scores"].max_abs, 2.0)  # [2, lowest - 7 rounds to lowest]: the sentinel again
        inf = audit_activations(Parent(), inputs=[{"x": torch.tensor([[float("inf"), 1.0]])}])
        self.assertEqual(inf.nonfinite, ["scores", "(model)"])  # a real inf is not mistaken for a mask

    @parameterized.expand([("no_grad", "no_grad"), ("inference_mode", "inference_mode")])
    def test_recorder_remeasures_tensors_changed_in_place(self, _, mode):
        class Parent(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.first = torch.nn.Identity()
                self.second = torch.nn.Identity()

            def forward(self, x):
                h = self.first(x)  # Identity returns `x` itself: measured once, as first's input and output
                h.mul_(1e5)  # changed in place: second must see the new values
                return self.second(h)

        model = Parent()
        with ActivationRecorder(model) as recorder, getattr(torch, mode)():
            model(torch.full((1, 2), 3.0))
        self.assertEqual((recorder.input_max["first"], recorder.output_max["first"]), (3.0, 3.0))
        self.assertEqual((recorder.input_max["second"], recorder.output_max["second"]), (3e5, 3e5))
