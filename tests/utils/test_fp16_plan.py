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
"""Applying a stored fp16 plan: at load, in casts and in fp16 fine-tuning, and when it is evidence that fp16 is safe."""

import copy
import json
import math
import os
import tempfile
import unittest
from unittest import mock

from transformers.testing_utils import CaptureLogger, TestCasePlus, require_torch
from transformers.utils import is_torch_available, logging


if is_torch_available():
    import torch

    from transformers import GPT2LMHeadModel, Trainer, TrainingArguments
    from transformers.trained_precision.guard.check import TrainedPrecisionRiskError, reset_warning_cache
    from transformers.trained_precision.plan import fp16_plan
    from transformers.trained_precision.plan.fp16_plan import plan_fingerprint, usable_length
    from transformers.trained_precision.testing_utils import plant_fp16_overflow, random_token_dataset, tiny_gpt2
    from transformers.trained_precision.vocabulary import FP16_PLAN_FIELD


GPT2_MLP = "transformer.h.1.mlp"


def overflowing_gpt2():
    """A tiny GPT-2 whose second MLP overflows fp16 inside (`c_fc` scaled up, `c_proj` down)."""
    return plant_fp16_overflow(tiny_gpt2(), f"{GPT2_MLP}.c_fc", f"{GPT2_MLP}.c_proj")


def stored_plan(model, modules=(GPT2_MLP,)):
    """
    A plan for `model` as the search stores it (schema version 5), keeping `modules` in fp32, bound to `model`'s
    weights and validated on inputs of the model's whole length limit.
    """
    length = usable_length(model.config)
    plan = {
        "version": 5,
        "dtype": "fp16",
        "modules": list(modules),
        "headroom": 2.0,
        "fp32_weight_share": 0.1,
        "calibration_sha256": "0" * 64,
        "validation": {
            "passed": True,
            "max_abs_error": 0.01,
            "cosine": 0.9999,
            "top1_agreement": 1.0,
            "texts": 4,
            "modules": list(modules),
        },
        "validated_on": {
            "sequences": 4,
            "lengths": [length],
            "max_tokens": length,
            "device": "cpu",
            "backend": "cpu X",
        },
    }
    plan["fingerprint"] = plan_fingerprint(model, plan)
    return plan


def logits(model):
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(input_ids=ids).logits


@require_torch
class Fp16PlanRuntimeTest(TestCasePlus):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.model = overflowing_gpt2()
        cls.model.config.trained_precision = "bf16"  # fp16 is risky for it: only a verified plan clears it
        cls.model.config.fp16_plan = stored_plan(cls.model)
        cls.dir = os.path.join(cls.tmp, "gpt2")
        cls.model.save_pretrained(cls.dir)

    @classmethod
    def tearDownClass(cls):
        import shutil

        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        super().setUp()
        reset_warning_cache()

    def test_plain_fp16_overflows(self):
        model = copy.deepcopy(self.model)
        model.config.fp16_plan = None
        model.config.trained_precision = "unknown"
        model.half()  # no plan: the overflow the plan prevents
        self.assertFalse(torch.isfinite(logits(model)).all())

    def test_an_fp16_load_keeps_the_planned_modules_in_fp32_and_clears_error_mode(self):
        model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16, trained_precision_check="error")
        for name, parameter in model.named_parameters():
            self.assertEqual(parameter.dtype, torch.float32 if name.startswith(GPT2_MLP) else torch.float16, name)
        out = logits(model)
        self.assertEqual(out.dtype, torch.float16)
        self.assertTrue(torch.isfinite(out).all())

    def test_casts_honour_the_plan(self):
        for cast in (lambda m: m.half(), lambda m: m.to(torch.float16), lambda m: m.type(torch.float16)):
            model = GPT2LMHeadModel.from_pretrained(self.dir, trained_precision_check="error")
            cast(model)  # checked in `_apply`, with the plan as evidence: no error
            self.assertEqual(model.transformer.h[1].mlp.c_fc.weight.dtype, torch.float32)
            self.assertEqual(model.transformer.h[0].mlp.c_fc.weight.dtype, torch.float16)
            self.assertTrue(torch.isfinite(logits(model)).all())

    def test_a_second_fp16_cast_keeps_the_plan(self):
        # the cast's target comes from the cast, not from the model's first weight: an fp16-loaded model cast to fp16
        # again (`model.half().to(device)`, the Trainer's `fp16_full_eval`) keeps its planned modules in fp32
        casts = {
            ".half()": lambda m: m.half(),
            ".to(torch.float16)": lambda m: m.to(torch.float16),
            '.to("cpu", torch.float16)': lambda m: m.to("cpu", torch.float16),
        }
        for label, cast in casts.items():
            for load_dtype in (torch.float16, torch.float32):
                model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=load_dtype, trained_precision_check="error")
                cast(model)
                cast(model)
                self.assertEqual(model.transformer.h[1].mlp.c_fc.weight.dtype, torch.float32, (label, load_dtype))
                self.assertEqual(model.transformer.h[0].mlp.c_fc.weight.dtype, torch.float16, (label, load_dtype))
                self.assertTrue(torch.isfinite(logits(model)).all(), (label, load_dtype))
        # the same second cast without a plan is checked too: error mode raises instead of returning NaN
        model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16, use_fp16_plan=False)
        with self.assertRaisesRegex(TrainedPrecisionRiskError, "switched off on this path"):
            with mock.patch.dict(os.environ, {"TRANSFORMERS_TRAINED_PRECISION_CHECK": "error"}):
                model.half()

    def test_fp16_full_eval_keeps_the_plan(self):
        model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16, trained_precision_check="error")
        args = TrainingArguments(
            self.get_auto_remove_tmp_dir(),
            fp16_full_eval=True,
            use_cpu=True,
            per_device_eval_batch_size=4,
            report_to=[],
        )
        metrics = Trainer(model, args, eval_dataset=random_token_dataset(8, 24, 64)).evaluate()
        self.assertTrue(math.isfinite(metrics["eval_loss"]), metrics)
        self.assertEqual(model.transformer.h[1].mlp.c_fc.weight.dtype, torch.float32)

    def test_a_cast_that_replaces_the_parameters_keeps_the_planned_weights(self):
        # `set_overwrite_module_params_on_conversion(True)`: `.half()` makes new Parameter objects; the planned ones
        # get their exact fp32 values back (a value past 65504 would otherwise be inf)
        model = GPT2LMHeadModel.from_pretrained(self.dir, trained_precision_check="error")
        original = model.transformer.h[1].mlp.c_fc.weight.detach().clone()
        torch.__future__.set_overwrite_module_params_on_conversion(True)
        try:
            model.half()
        finally:
            torch.__future__.set_overwrite_module_params_on_conversion(False)
        self.assertTrue(torch.equal(model.transformer.h[1].mlp.c_fc.weight, original))
        self.assertTrue(torch.isfinite(logits(model)).all())

    def test_an_info_message_does_not_silence_a_later_warning(self):
        logger = logging.get_logger("transformers.trained_precision.guard.check")
        logging.set_verbosity_info()
        try:
            with CaptureLogger(logger) as cl:
                GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16)
            self.assertIn("fp16 is not risky for it", cl.out)
            with CaptureLogger(logger) as cl:
                model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16, use_fp16_plan=False)
        finally:
            logging.set_verbosity_warning()
        self.assertIn("switched off on this path", cl.out)
        self.assertFalse(torch.isfinite(logits(model)).all())

    def test_use_fp16_plan_false_applies_nothing_and_the_check_says_so(self):
        with self.assertRaisesRegex(TrainedPrecisionRiskError, r"switched off on this path \(`use_fp16_plan=False`\)"):
            GPT2LMHeadModel.from_pretrained(
                self.dir, dtype=torch.float16, use_fp16_plan=False, trained_precision_check="error"
            )
        model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16, use_fp16_plan=False)  # warns
        self.assertTrue(all(p.dtype == torch.float16 for p in model.parameters()))
        self.assertFalse(torch.isfinite(logits(model)).all())

    def variant(self, edit_config=None, edit_model=None):
        """A copy of the checkpoint with its weights or its stored plan changed; returns its directory."""
        model = GPT2LMHeadModel.from_pretrained(self.dir)
        if edit_model is not None:
            with torch.no_grad():
                edit_model(model)
        path = os.path.join(self.get_auto_remove_tmp_dir(), "variant")
        model.save_pretrained(path)
        if edit_config is not None:
            config_path = os.path.join(path, "config.json")
            with open(config_path, encoding="utf-8") as f:
                config = json.load(f)
            edit_config(config[FP16_PLAN_FIELD])
            with open(config_path, "w", encoding="utf-8") as f:
                json.dump(config, f)
        return path

    def assert_no_evidence(self, path, reason, fix="the plan is stale: measure it again (`transformers precision"):
        with self.assertRaises(TrainedPrecisionRiskError) as raised:
            GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        self.assertIn("Its stored fp16 plan is no evidence here", str(raised.exception))
        self.assertIn(reason, str(raised.exception))
        self.assertIn(fix, str(raised.exception))

    def test_a_plan_bound_to_other_weights_is_no_evidence(self):
        def fine_tune(model):  # a fine-tune moves every value of a weight (the binding samples its first values)
            model.transformer.wpe.weight.mul_(3.0)

        self.assert_no_evidence(self.variant(edit_model=fine_tune), "its digest does not match these weights")

    def test_a_cast_with_a_broken_plan_still_raises_in_error_mode(self):
        # the cast decides the stored plan with the other facts: a broken binding clears nothing, and error mode
        # refuses the cast before it changes the model (a valid plan: `test_casts_honour_the_plan`)
        def fine_tune(model):  # a fine-tune moves every value of a weight
            model.transformer.wpe.weight.mul_(3.0)

        path = self.variant(edit_model=fine_tune)
        for cast in (lambda m: m.half(), lambda m: m.to(torch.float16)):
            model = GPT2LMHeadModel.from_pretrained(path, trained_precision_check="error")
            with self.assertRaisesRegex(TrainedPrecisionRiskError, "no evidence here: its digest does not match"):
                cast(model)
            self.assertTrue(all(p.dtype == torch.float32 for p in model.parameters()))

    def test_an_edited_plan_is_no_evidence(self):
        def empty(plan):
            plan["modules"] = []

        self.assert_no_evidence(self.variant(edit_config=empty), "not the ones its own validation record names")

        def more_headroom(plan):
            plan["headroom"] = 4.0

        self.assert_no_evidence(self.variant(edit_config=more_headroom), "its digest does not match these weights")

    def test_a_plan_validated_on_shorter_inputs_than_the_model_takes_is_no_evidence(self):
        model = copy.deepcopy(self.model)
        plan = stored_plan(model)
        plan["validated_on"] = {**plan["validated_on"], "lengths": [32], "max_tokens": 32}
        plan["fingerprint"] = plan_fingerprint(model, plan)  # a plan measured so, not edited afterwards
        model.config.fp16_plan = plan
        path = os.path.join(self.get_auto_remove_tmp_dir(), "short")
        model.save_pretrained(path)
        self.assert_no_evidence(
            path,
            f"it saw inputs of up to 32 tokens, and this model takes {usable_length(model.config)}: beyond 32 tokens",
            f"measure it again (`transformers precision plan PATH --dtype fp16 --max-length {usable_length(model.config)} "
            "--write`)",
        )

    def test_a_one_value_edit_of_a_sampled_value_is_no_evidence(self):
        # review finding 9: one value of `c_fc` far past fp16's range. The binding samples each weight (reading every
        # value costs seconds and the whole file at 7B): an edit of a sampled value breaks it; one outside the sample
        # is caught where the model runs, by the forward's check (`test_fp16_plan_sentinel.py`)
        name = "transformer.h.0.mlp.c_fc.weight"
        sampled = 0  # a value the binding samples (each weight's first values)

        def edit(model):
            model.get_parameter(name).view(-1)[sampled] = 1e6

        self.assert_no_evidence(self.variant(edit_model=edit), "its digest does not match these weights")

    def test_a_plan_of_an_older_version_is_applied_and_is_no_evidence(self):
        def older(plan):
            plan["version"] = 3  # bound to every value of the weights, not to the config

        path = self.variant(edit_config=older)
        self.assert_no_evidence(path, "it was made by an older version and is not bound to these weights and config")
        model = GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16)  # warns
        self.assertEqual(model.get_submodule(f"{GPT2_MLP}.c_fc").weight.dtype, torch.float32)  # still applied

    def test_a_plan_bound_by_the_previous_sample_is_no_evidence(self):
        def previous(plan):
            plan["version"] = 4  # its fingerprint: a binding of version 2 (runs at offsets that moved per weight)

        path = self.variant(edit_config=previous)
        self.assert_no_evidence(path, "it was made by an older version and is not bound to these weights and config")

    def test_a_plan_is_evidence_only_up_to_the_model_s_own_length_limit(self):
        # a model that takes 4096 tokens: the default search sweeps up to 2048, so its plan stops there
        model = tiny_gpt2(n_positions=4096)
        model.config.trained_precision = "bf16"
        model.config.fp16_plan = stored_plan(model, modules=())
        self.assertEqual(model.config.fp16_plan["validated_on"]["max_tokens"], 2048)
        path = os.path.join(self.get_auto_remove_tmp_dir(), "long")
        model.save_pretrained(path)
        self.assert_no_evidence(
            path,
            "it saw inputs of up to 2048 tokens, and this model takes 4096",
            "no evidence; measure it again (`transformers precision plan PATH --dtype fp16 --max-length 4096 --write`)",
        )

    def test_a_plan_that_did_not_pass_is_not_applied(self):
        def failed(plan):
            plan["validation"]["passed"] = False

        model = GPT2LMHeadModel.from_pretrained(self.variant(edit_config=failed), dtype=torch.float16)  # warns
        self.assertTrue(all(p.dtype == torch.float16 for p in model.parameters()))

    def test_fp16_fine_tuning_keeps_the_planned_modules_in_fp32_and_marks_the_plan_stale(self):
        model = copy.deepcopy(self.model)
        args = TrainingArguments(
            self.get_auto_remove_tmp_dir(),
            fp16=True,
            use_cpu=True,
            max_steps=2,
            per_device_train_batch_size=2,
            report_to=[],
            save_strategy="no",
        )
        Trainer(model, args, train_dataset=random_token_dataset(8, 8, 64)).train()
        self.assertIs(getattr(model.transformer.h[1].mlp.forward, "__func__", None), fp16_plan._planned_forward)
        self.assertIsNot(getattr(model.transformer.h[0].mlp.forward, "__func__", None), fp16_plan._planned_forward)
        # the weights changed: the plan no longer proves anything about them
        self.assertIn("before a training run", model.config.fp16_plan["stale"])


if __name__ == "__main__":
    unittest.main()
