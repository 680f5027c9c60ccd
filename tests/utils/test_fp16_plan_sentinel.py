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
The sentinel where evidence cleared fp16: a stored fp16 plan (built by hand, as `test_fp16_plan.py` builds it) clears
fp16 for the weights it was measured on, and the planned model gives finite output; outside that evidence (weights
edited after the load, a second cast) the forward overflows, and error mode raises naming the plan.
"""

import os
import shutil
import tempfile
import unittest

from transformers import is_torch_available
from transformers.testing_utils import TestCasePlus, require_torch


if is_torch_available():
    import torch

    from transformers import GPT2LMHeadModel
    from transformers.trained_precision.facts.binding import SAMPLED_VALUES
    from transformers.trained_precision.guard.check import TrainedPrecisionRiskError, reset_warning_cache
    from transformers.trained_precision.guard.sentinel import cleared_by
    from transformers.trained_precision.testing_utils import plant_fp16_overflow

    # the fp16 plan tests build a stored plan by hand: reused here
    from .test_fp16_plan import GPT2_MLP, overflowing_gpt2, stored_plan

OVERFLOWED = "fp16 overflowed in this forward of"


def input_ids(length=24):
    return torch.randint(0, 64, (2, length), generator=torch.Generator().manual_seed(1))


def forward(model):
    with torch.no_grad():
        return model(input_ids=input_ids()).logits


@require_torch
class SentinelEvidenceTest(TestCasePlus):
    """A stored fp16 plan clears fp16 for its weights; outside them, the sentinel raises and names the plan."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        model = overflowing_gpt2()
        model.config.trained_precision = "bf16"  # fp16 is risky for it: only the verified plan clears it
        model.config.fp16_plan = stored_plan(model)
        cls.dir = os.path.join(cls.tmp, "planned")
        model.save_pretrained(cls.dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        super().setUp()
        reset_warning_cache()

    def test_the_plan_applied_gives_finite_output_and_the_sentinel_knows_what_cleared_it(self):
        model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16, trained_precision_check="error")
        self.assertTrue(torch.isfinite(forward(model)).all())
        model.generate(input_ids(8), max_new_tokens=4, do_sample=False, pad_token_id=0)
        self.assertIn("a measured fp16 plan", cleared_by(model))

    def test_a_cast_hands_the_sentinel_what_its_check_found(self):
        # the cast's check gathers the evidence once; the sentinel keeps that answer, and a cast away from fp16 drops it
        model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float32, trained_precision_check="error")
        self.assertIsNone(cleared_by(model))
        model.half()
        self.assertIn("a measured fp16 plan", cleared_by(model))
        model.float()
        self.assertIsNone(cleared_by(model))

    def test_weights_edited_after_the_load_overflow_and_the_sentinel_names_the_plan(self):
        model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16, trained_precision_check="error")
        plant_fp16_overflow(model, "transformer.h.0.mlp.c_fc", "transformer.h.0.mlp.c_proj")  # outside the plan
        with self.assertRaises(TrainedPrecisionRiskError) as cm:
            forward(model)
        message = str(cm.exception)
        self.assertIn(f"{OVERFLOWED} '{self.dir}'", message)
        self.assertIn("fp16 had been cleared for it by evidence: a measured fp16 plan", message)
        self.assertIn("outside what that evidence covers", message)

    def test_a_one_value_edit_outside_the_binding_s_sample_is_caught_by_the_forward(self):
        # review finding 9: the binding samples each weight, so an edit of one value it does not read loads as
        # evidence (an edit of a sampled one: `test_fp16_plan.py`); the forward's check catches it in error mode
        name = "transformer.h.0.mlp.c_fc.weight"
        model = GPT2LMHeadModel.from_pretrained(self.dir)
        numel = model.get_parameter(name).numel()
        sampled, length = 0, min(numel, SAMPLED_VALUES)  # each weight's first values
        self.assertLess(length, numel)  # else every value is sampled
        with torch.no_grad():
            model.get_parameter(name).view(-1)[sampled + length] = 1e6  # right after a sampled run
        path = os.path.join(self.get_auto_remove_tmp_dir(), "edited")
        model.save_pretrained(path)
        model = GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        with self.assertRaises(TrainedPrecisionRiskError) as cm:
            forward(model)
        self.assertIn("fp16 had been cleared for it by evidence: a measured fp16 plan", str(cm.exception))

    def test_a_planned_model_cast_to_fp16_again_never_gives_nan_silently(self):
        for first in (torch.float16, torch.float32):
            model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=first, trained_precision_check="error")
            model.half()
            model.half()
            try:
                out = forward(model)
            except TrainedPrecisionRiskError as error:  # the second cast undid the plan: the sentinel says so
                self.assertIn("a measured fp16 plan", str(error))
            else:  # the plan was kept: the output is finite
                self.assertTrue(torch.isfinite(out).all())
                self.assertEqual(model.get_submodule(f"{GPT2_MLP}.c_fc").weight.dtype, torch.float32)


@require_torch
class SentinelPublisherEvidenceTest(TestCasePlus):
    """A model built from a config named by a Hub id whose publisher runs it in fp16 has random weights: that runtime
    clears neither its construction nor a cast, so the sentinel names no evidence (issue 62)."""

    def test_from_config_and_a_cast_are_not_cleared_by_the_publishers_name(self):
        from transformers import AutoModelForCausalLM, LlamaConfig

        config = LlamaConfig(
            vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
        )
        config.name_or_path = "meta-llama/Llama-2-7b-hf"  # a registry row: trained in bf16, its publisher runs fp16
        reset_warning_cache()
        with self.assertRaises(TrainedPrecisionRiskError):
            AutoModelForCausalLM.from_config(config, dtype=torch.float16, trained_precision_check="error")
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float16)  # warn mode: built, and warned
        self.assertIsNone(cleared_by(model))
        model.float()
        reset_warning_cache()
        with self.assertRaises(TrainedPrecisionRiskError):
            AutoModelForCausalLM.from_config(config, dtype=torch.float32, trained_precision_check="error").half()
        model.half()  # judged by the cast's check: not the publisher's weights either
        self.assertIsNone(cleared_by(model))


if __name__ == "__main__":
    unittest.main()
