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
"""The fp16 plan: the search, its validation, storing it, and applying it at load, in casts and in fp16 fine-tuning."""

import copy
import json
import os
import tempfile
import unittest
from unittest import mock

from transformers.testing_utils import CaptureLogger, TestCasePlus, require_torch
from transformers.utils import is_torch_available, logging


if is_torch_available():
    import torch

    from transformers import (
        GPT2LMHeadModel,
        GPT2Model,
        T5Config,
        T5ForConditionalGeneration,
        Trainer,
        TrainingArguments,
    )
    from transformers.models.t5.modeling_t5 import T5PreTrainedModel
    from transformers.trained_precision.guard.check import TrainedPrecisionRiskError, reset_warning_cache
    from transformers.trained_precision.plan import fp16_plan, fp16_plan_search
    from transformers.trained_precision.plan.audit import (
        _forward_kwargs,
        audit_activations,
    )
    from transformers.trained_precision.plan.fp16_plan import (
        apply_fp16_plan,
        keep_module_in_fp32,
        resolve_plan_modules,
    )
    from transformers.trained_precision.plan.fp16_plan_search import (
        MAX_RELATIVE_ERROR,
        MIN_COSINE,
        search_fp16_plan,
        set_plan_member,
        write_fp16_plan,
    )
    from transformers.trained_precision.testing_utils import plant_fp16_overflow, random_token_dataset, tiny_gpt2
    from transformers.trained_precision.vocabulary import FP16_PLAN_FIELD


T5_FEED_FORWARD = "encoder.block.1.layer.1.DenseReluDense"
GPT2_MLP = "transformer.h.1.mlp"


class InnerOverflow(torch.nn.Module if is_torch_available() else object):
    """About |x|, through a square that passes 65504 for |x| > 0.026: in fp16, inf."""

    def forward(self, x):
        return torch.sqrt((x * 1e4) ** 2 + 1) / 1e4


def tiny_t5(**overrides):
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=64, d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=2, decoder_start_token_id=0, **overrides
    )
    return T5ForConditionalGeneration(config).eval()


def overflowing_t5():
    """A tiny T5 whose second encoder feed-forward overflows fp16 inside (`wi` up, `wo` down)."""
    return plant_fp16_overflow(tiny_t5(), f"{T5_FEED_FORWARD}.wi", f"{T5_FEED_FORWARD}.wo")


def overflowing_gpt2():
    """A tiny GPT-2 whose second MLP overflows fp16 inside (`c_fc` scaled up, `c_proj` down)."""
    return plant_fp16_overflow(tiny_gpt2(), f"{GPT2_MLP}.c_fc", f"{GPT2_MLP}.c_proj")


def plain_fp16(model):
    return torch.nn.Module.to(copy.deepcopy(model), torch.float16)


def first_output(model, ids):
    kwargs = _forward_kwargs(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    with torch.no_grad():
        output = model(**kwargs)
    return output.logits


IDS = None if not is_torch_available() else torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(1))


@require_torch
class Fp16PlanSearchTest(unittest.TestCase):
    def assert_matches_fp32(self, model, result):
        fp16 = fp16_plan_search._fp16_copy(model, result.modules)
        expected, got = first_output(model, IDS), first_output(fp16, IDS).float()
        self.assertTrue(torch.isfinite(got).all())
        self.assertLessEqual(float((got - expected).abs().max()), MAX_RELATIVE_ERROR * float(expected.abs().max()))
        cosine = torch.nn.functional.cosine_similarity(got.flatten(), expected.flatten(), dim=0)
        self.assertGreaterEqual(float(cosine), MIN_COSINE)

    def test_t5_without_keep_in_fp32_rediscovers_the_feed_forward_of_wo(self):
        with mock.patch.object(T5PreTrainedModel, "_keep_in_fp32_modules", None):
            model = overflowing_t5()
        self.assertFalse(torch.isfinite(first_output(plain_fp16(model), IDS)).all(), "plain fp16 must overflow")
        result = search_fp16_plan(model, max_length=64)
        self.assertTrue(result.passed, result.format())
        self.assertEqual(result.modules, [T5_FEED_FORWARD])  # the block of `wo` (its input overflows)
        self.assertIn(f"{T5_FEED_FORWARD}.wo", [name for name, _ in result.hot])
        self.assertLess(result.fp32_weight_share, 0.2)
        self.assertGreaterEqual(result.headroom, result.headroom_required)
        # no tokenizer: 4 short random sequences and the sweep (32 and 64 tokens), for calibration and held out alike
        self.assertEqual(result.validation["texts"], 12)
        self.assertEqual(result.validated_on["lengths"], [32, 64])
        self.assertEqual(result.validated_on["device"], "cpu")
        self.assertTrue(result.validation["passed"])
        self.assert_matches_fp32(model, result)

    def test_ready_made_inputs_are_used_as_they_are(self):
        model = overflowing_gpt2()
        ids = [
            {"input_ids": torch.randint(0, 64, (1, n), generator=torch.Generator().manual_seed(n))} for n in (8, 16)
        ]
        result = search_fp16_plan(model, texts=ids[:1], held_out_texts=ids[1:], max_length=16)
        self.assertTrue(result.passed, result.format())
        self.assertEqual(result.modules, [GPT2_MLP])
        self.assertEqual(result.validation["texts"], 2)  # the two batches given, no sweep of its own
        self.assertEqual(result.validated_on["lengths"], [8, 16])

    def test_gpt2_with_an_overflowing_mlp(self):
        model = overflowing_gpt2()
        self.assertFalse(torch.isfinite(first_output(plain_fp16(model), IDS)).all(), "plain fp16 must overflow")
        result = search_fp16_plan(model)
        self.assertTrue(result.passed, result.format())
        self.assertEqual(result.modules, [GPT2_MLP])
        self.assertAlmostEqual(
            result.fp32_weight_share,
            sum(p.numel() for p in model.transformer.h[1].mlp.parameters())
            / sum(p.numel() for p in model.parameters()),
        )
        self.assert_matches_fp32(model, result)
        stored = result.to_config_dict()
        self.assertEqual(
            sorted(stored),
            [
                "calibration_sha256",
                "dtype",
                "fingerprint",
                "fp32_weight_share",
                "headroom",
                "modules",
                "validated_on",
                "validation",
                "version",
            ],
        )
        self.assertEqual(
            sorted(stored["validation"]), ["cosine", "max_abs_error", "modules", "passed", "texts", "top1_agreement"]
        )
        self.assertEqual(stored["validated_on"]["max_tokens"], 64)  # the model's n_positions: its usable length
        self.assertEqual(stored["fingerprint"], fp16_plan.plan_fingerprint(model, stored))
        json.dumps(stored, allow_nan=False)  # valid JSON: no inf or NaN

    def test_residual_stream_past_fp16_is_refused(self):
        with mock.patch.object(T5PreTrainedModel, "_keep_in_fp32_modules", None):
            model = tiny_t5()
        with torch.no_grad():  # `wo`'s output itself is huge: it is added to the residual stream
            model.encoder.block[0].layer[1].DenseReluDense.wo.weight.mul_(1e5)
        result = search_fp16_plan(model, max_length=64)
        self.assertFalse(result.passed)
        self.assertEqual(result.modules, [])
        self.assertIn("residual stream", result.refusal)
        self.assertIn("bf16", result.refusal)
        self.assertIn("residual stream", result.format())

    def test_a_plan_that_keeps_most_weights_in_fp32_is_refused(self):
        model = tiny_gpt2()
        for block in range(3):  # every MLP overflows: together they hold most of this tiny model's weights
            plant_fp16_overflow(model, f"transformer.h.{block}.mlp.c_fc", f"transformer.h.{block}.mlp.c_proj")
        result = search_fp16_plan(model)
        self.assertFalse(result.passed)
        self.assertRegex(result.refusal, r"would keep \d+% of the weights in fp32")
        self.assertEqual(result.attempts, 0)

    def test_a_model_without_overflow_gets_an_empty_plan(self):
        model = tiny_gpt2()
        result = search_fp16_plan(model)
        self.assertTrue(result.passed, result.format())
        self.assertEqual(result.modules, [])
        self.assertEqual(result.fp32_weight_share, 0.0)
        self.assertEqual(result.hot, [])
        self.assertIn("nothing", result.format())

    def test_the_calibration_hash_names_the_texts(self):
        model = tiny_gpt2()
        a = search_fp16_plan(model).calibration_sha256
        self.assertEqual(a, search_fp16_plan(model).calibration_sha256)
        self.assertNotEqual(a, search_fp16_plan(model, seed=3).calibration_sha256)

    def test_bad_headroom_and_broken_weights_are_errors(self):
        model = tiny_gpt2()
        with self.assertRaisesRegex(ValueError, "headroom must be a number >= 1"):
            search_fp16_plan(model, headroom=0.5)
        with torch.no_grad():
            model.transformer.h[0].mlp.c_fc.weight[0, 0] = float("nan")
        with self.assertRaisesRegex(ValueError, "already gives inf/NaN in fp32"):
            search_fp16_plan(model)

    def test_validation_failure_grows_the_plan(self):
        # an overflow inside a module's own code is invisible at module boundaries: the first plan (empty) fails
        # validation with inf, and the search grows it by the first module whose fp16 output turned non-finite
        model = tiny_gpt2()
        model.transformer.h[1].mlp.act = InnerOverflow()
        self.assertEqual(audit_activations(model).first_overflow, None)
        result = search_fp16_plan(model)
        self.assertTrue(result.passed, result.format())
        self.assertEqual(result.hot, [])
        self.assertEqual(result.modules, [f"{GPT2_MLP}.act"])
        self.assertEqual(result.attempts, 2)

    def test_validation_pads_only_sequences_of_similar_length(self):
        # the sweep's longest sequence is validated apart from the short texts: padding every text to it would
        # multiply an fp16 validation's work (8x for 64-token texts beside a 512-token sequence)
        model = overflowing_gpt2()
        positions = []

        def count(module, args, kwargs):
            mask = kwargs.get("attention_mask")
            if mask is not None and mask.shape[0] > 1:  # a padded batch of the validation
                positions.append((mask.numel(), int(mask.sum())))

        model.register_forward_pre_hook(count, with_kwargs=True)
        result = search_fp16_plan(model)  # random ids: 4 of 32 tokens and the sweep's 32 and 64
        self.assertTrue(result.passed, result.format())
        self.assertTrue(positions)
        self.assertLessEqual(max(size / real for size, real in positions), fp16_plan_search.MAX_PADDING_RATIO)

    def test_a_failed_validation_without_padding_runs_each_text_alone_only_to_find_the_overflow(self):
        # the first plan (empty) gives inf: its texts ran in unpadded batches (the same computation as one at a time),
        # so the only single-text fp16 forwards are the recorder's, which finds the module to grow the plan by
        model = tiny_gpt2()
        model.transformer.h[1].mlp.act = InnerOverflow()
        alone = []

        def count(module, args, kwargs):
            ids = kwargs.get("input_ids")
            if ids is not None and ids.shape[0] == 1 and module.transformer.wte.weight.dtype == torch.float16:
                alone.append(ids.shape[-1])

        model.register_forward_pre_hook(count, with_kwargs=True)
        result = search_fp16_plan(model)
        self.assertTrue(result.passed, result.format())
        self.assertEqual(result.attempts, 2)
        self.assertEqual(len(alone), result.validation["texts"])

    def test_padded_outputs_equal_one_sequence_at_a_time_in_order(self):
        model = tiny_gpt2()
        generator = torch.Generator().manual_seed(3)
        batches = [{"input_ids": torch.randint(0, 64, (1, n), generator=generator)} for n in (24, 8, 24, 6, 64, 24)]
        padded = fp16_plan_search._run_padded(model, batches)
        one_by_one, _, _ = fp16_plan_search._run(model, batches)
        self.assertEqual([tuple(o.shape) for o in padded], [tuple(o.shape) for o in one_by_one])
        for got, expected in zip(padded, one_by_one):
            torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


@require_torch
class Fp16PlanApplyTest(TestCasePlus):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.model = overflowing_gpt2()
        cls.model.config.trained_precision = "bf16"  # fp16 is risky for it: only a verified plan clears it
        cls.plan = search_fp16_plan(cls.model).to_config_dict()
        cls.dir = os.path.join(cls.tmp, "gpt2")
        cls.model.save_pretrained(cls.dir)
        write_fp16_plan(os.path.join(cls.dir, "config.json"), cls.plan)

    @classmethod
    def tearDownClass(cls):
        import shutil

        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_the_plan_survives_save_pretrained_and_a_reload(self):
        model = GPT2LMHeadModel.from_pretrained(self.dir)
        self.assertEqual(getattr(model.config, FP16_PLAN_FIELD), self.plan)
        again = os.path.join(self.get_auto_remove_tmp_dir(), "again")
        model.save_pretrained(again)
        with open(os.path.join(again, "config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)[FP16_PLAN_FIELD], self.plan)
        reloaded = GPT2LMHeadModel.from_pretrained(again, dtype=torch.float16)
        self.assertTrue(torch.isfinite(first_output(reloaded, IDS)).all())

    def test_fp16_load_keeps_the_planned_modules_in_fp32_and_is_finite(self):
        logger = logging.get_logger("transformers.trained_precision.plan.fp16_plan")
        with CaptureLogger(logger) as cl:
            logging.set_verbosity_info()
            try:
                model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16)
            finally:
                logging.set_verbosity_warning()
        self.assertIn(f"`{GPT2_MLP}` kept in fp32", cl.out)
        for name, parameter in model.named_parameters():
            self.assertEqual(parameter.dtype, torch.float32 if name.startswith(GPT2_MLP) else torch.float16, name)
        # loaded straight from the checkpoint into fp32: the exact weights, not an fp16 round trip
        self.assertTrue(
            torch.equal(model.transformer.h[1].mlp.c_fc.weight, self.model.transformer.h[1].mlp.c_fc.weight)
        )
        logits = first_output(model, IDS)
        self.assertEqual(logits.dtype, torch.float16)
        self.assertTrue(torch.isfinite(logits).all())

    def setUp(self):
        super().setUp()
        reset_warning_cache()

    def test_use_fp16_plan_false_ignores_it_and_the_check_says_so(self):
        with self.assertRaisesRegex(TrainedPrecisionRiskError, r"switched off on this path \(`use_fp16_plan=False`\)"):
            GPT2LMHeadModel.from_pretrained(
                self.dir, dtype=torch.float16, use_fp16_plan=False, trained_precision_check="error"
            )
        model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16, use_fp16_plan=False)  # warns
        self.assertTrue(all(p.dtype == torch.float16 for p in model.parameters()))
        self.assertFalse(torch.isfinite(first_output(model, IDS)).all())
        model = GPT2LMHeadModel.from_pretrained(self.dir, use_fp16_plan=False, trained_precision_check="error")
        with self.assertRaises(TrainedPrecisionRiskError):  # later casts ignore the plan too, and raise
            model.half()
        with self.assertRaises(TrainedPrecisionRiskError):
            model.type(torch.float16)

    def test_a_verified_plan_clears_error_mode_and_the_output_is_finite(self):
        logger = logging.get_logger("transformers.trained_precision.guard.check")
        with CaptureLogger(logger) as cl:
            logging.set_verbosity_info()
            try:
                model = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16, trained_precision_check="error")
            finally:
                logging.set_verbosity_warning()
        self.assertIn("verified against these weights", cl.out)
        self.assertIn("sequences of up to 64 tokens on cpu", cl.out)
        self.assertTrue(torch.isfinite(first_output(model, IDS)).all())
        for cast in (lambda m: m.half(), lambda m: m.type(torch.float16), lambda m: m.to("cpu", torch.float16)):
            model = GPT2LMHeadModel.from_pretrained(self.dir, trained_precision_check="error")
            cast(model)  # checked in `_apply`, with the plan as evidence: no error
            self.assertEqual(model.transformer.h[1].mlp.c_fc.weight.dtype, torch.float32)
            self.assertTrue(torch.isfinite(first_output(model, IDS)).all())

    def save_variant(self, edit_config=None, edit_model=None):
        """A copy of the checkpoint with its weights or its config's plan changed; returns its directory."""
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
            edit_config(config)
            with open(config_path, "w", encoding="utf-8") as f:
                json.dump(config, f)
        return path

    def assert_no_evidence(
        self,
        path,
        message="the plan is stale: measure it again (`transformers precision plan PATH --dtype fp16 --write`)",
    ):
        """In error mode the fp16 load raises and names why the plan is no evidence."""
        with self.assertRaises(TrainedPrecisionRiskError) as raised:
            GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        self.assertIn("Its stored fp16 plan is no evidence here", str(raised.exception))
        self.assertIn(message, str(raised.exception))

    def test_a_stale_plan_is_no_evidence(self):
        def fine_tune(model):  # new weights after planning: a fine-tune moves every value of a weight
            model.transformer.wpe.weight.mul_(3.0)

        self.assert_no_evidence(self.save_variant(edit_model=fine_tune), "its digest does not match these weights")

    def test_an_edited_plan_is_no_evidence(self):
        def empty(config):
            config[FP16_PLAN_FIELD]["modules"] = []

        self.assert_no_evidence(self.save_variant(empty), "not the ones its own validation record names")

        def consistent_edit(config):  # the record edited too: the fingerprint covers the plan itself
            config[FP16_PLAN_FIELD]["modules"] = []
            config[FP16_PLAN_FIELD]["validation"]["modules"] = []

        path = self.save_variant(consistent_edit)
        self.assert_no_evidence(path, "its digest does not match these weights")
        model = GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16)  # warn mode: the edited plan runs as is
        self.assertFalse(torch.isfinite(first_output(model, IDS)).all())

    def test_another_checkpoints_plan_is_no_evidence(self):
        foreign = os.path.join(self.get_auto_remove_tmp_dir(), "foreign")
        other = plant_fp16_overflow(tiny_gpt2(seed=1), "transformer.h.0.mlp.c_fc", "transformer.h.0.mlp.c_proj")
        other.config.trained_precision = "bf16"
        other.config.fp16_plan = self.plan  # model A's plan: A's overflow sits in block 1, this one's in block 0
        other.save_pretrained(foreign)
        self.assert_no_evidence(foreign, "its digest does not match these weights")

    def test_a_fine_tune_marks_the_plan_stale(self):
        model = GPT2LMHeadModel.from_pretrained(self.dir)
        args = TrainingArguments(
            self.get_auto_remove_tmp_dir(), max_steps=1, use_cpu=True, report_to=[], save_strategy="no"
        )
        Trainer(model, args, train_dataset=random_token_dataset(4, 8, 64)).train()
        self.assertIn("before a training run", getattr(model.config, FP16_PLAN_FIELD)["stale"])
        path = os.path.join(self.get_auto_remove_tmp_dir(), "tuned")
        model.save_pretrained(path)
        self.assert_no_evidence(path, "before a training run changed the weights")

    def test_from_config_with_fresh_weights_is_no_evidence(self):
        config = GPT2LMHeadModel.from_pretrained(self.dir).config
        with self.assertRaisesRegex(TrainedPrecisionRiskError, "its digest does not match these weights"):
            GPT2LMHeadModel._from_config(config, dtype=torch.float16, trained_precision_check="error")

    def test_no_risk_warning_on_a_plan_backed_fp16_load(self):
        target = os.path.join(self.get_auto_remove_tmp_dir(), "saved-again")
        GPT2LMHeadModel.from_pretrained(self.dir).save_pretrained(target)  # the same weights: the plan still holds
        logger = logging.get_logger("transformers.trained_precision.guard.check")
        with CaptureLogger(logger) as cl:
            loaded = GPT2LMHeadModel.from_pretrained(target, dtype=torch.float16)
        self.assertEqual(cl.out, "")
        self.assertTrue(torch.isfinite(first_output(loaded, IDS)).all())

    def test_half_and_to_fp16_honour_the_plan(self):
        for cast in (lambda m: m.half(), lambda m: m.to(torch.float16), lambda m: m.to("cpu", torch.float16)):
            model = GPT2LMHeadModel.from_pretrained(self.dir)
            exact = model.transformer.h[1].mlp.c_proj.weight.detach().clone()
            cast(model)
            self.assertEqual(model.transformer.h[1].mlp.c_proj.weight.dtype, torch.float32)
            self.assertTrue(torch.equal(model.transformer.h[1].mlp.c_proj.weight, exact))
            self.assertEqual(model.transformer.h[0].mlp.c_proj.weight.dtype, torch.float16)
            self.assertTrue(torch.isfinite(first_output(model, IDS)).all())

    def test_from_config_in_fp16_honours_the_plan(self):
        config = GPT2LMHeadModel.from_pretrained(self.dir).config
        model = GPT2LMHeadModel._from_config(config, dtype=torch.float16)
        self.assertEqual(model.transformer.h[1].mlp.c_fc.weight.dtype, torch.float32)
        self.assertEqual(model.transformer.h[0].mlp.c_fc.weight.dtype, torch.float16)
        model.load_state_dict(self.model.state_dict())  # the trained weights, loaded as each module's dtype
        self.assertTrue(torch.isfinite(first_output(model, IDS)).all())

    def test_names_are_relative_to_the_model_of_the_config(self):
        base = GPT2Model.from_pretrained(self.dir, dtype=torch.float16)  # the plan says `transformer.h.1.mlp`
        self.assertEqual(base.h[1].mlp.c_fc.weight.dtype, torch.float32)
        self.assertTrue(torch.isfinite(base(IDS).last_hidden_state).all())
        self.assertEqual(resolve_plan_modules(base, [GPT2_MLP]), ["h.1.mlp"])
        self.assertIsNone(resolve_plan_modules(base, ["h.7.mlp"]))

    def test_a_plan_for_other_modules_is_not_applied_and_is_no_evidence(self):
        def other_modules(config):
            config[FP16_PLAN_FIELD]["modules"] = config[FP16_PLAN_FIELD]["validation"]["modules"] = [
                "transformer.h.9.mlp"
            ]

        path = self.save_variant(other_modules)
        self.assert_no_evidence(path, "names modules that GPT2LMHeadModel does not have (transformer.h.9.mlp)")
        model = GPT2LMHeadModel.from_pretrained(path)
        self.assertEqual(apply_fp16_plan(model, torch.float16), [])

    def test_a_quantized_fp16_load_does_not_apply_it_and_raises_in_error_mode(self):
        from transformers import BitsAndBytesConfig

        quantization = BitsAndBytesConfig(load_in_8bit=True)
        with self.assertRaisesRegex(TrainedPrecisionRiskError, "a quantized model does not apply it"):
            GPT2LMHeadModel.from_pretrained(
                self.dir, dtype=torch.float16, quantization_config=quantization, trained_precision_check="error"
            )
        quantized = GPT2LMHeadModel.from_pretrained(self.dir, dtype=torch.float16, quantization_config=quantization)
        mlp = quantized.transformer.h[1].mlp
        self.assertEqual(mlp.c_fc.weight.dtype, torch.int8)  # quantized as asked, not cast to fp32
        self.assertNotIn("forward", vars(mlp))

    def test_casts_through_wrappers_are_checked_and_get_the_plan(self):
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(target_modules=["c_attn"], r=4, fan_in_fan_out=True)
        # adapters are weights the plan was not measured on: checked, no evidence, so error mode raises first...
        model = GPT2LMHeadModel.from_pretrained(self.dir, trained_precision_check="error")
        with self.assertRaisesRegex(TrainedPrecisionRiskError, "its digest does not match these weights"):
            get_peft_model(model, lora).half()
        self.assertEqual(model.transformer.h[0].mlp.c_fc.weight.dtype, torch.float32)  # raised before the cast
        # ... and warn mode warns, and still keeps the planned modules in fp32: the output is finite
        model = GPT2LMHeadModel.from_pretrained(self.dir)
        peft_model = get_peft_model(model, lora).half()
        self.assertEqual(model.transformer.h[1].mlp.c_fc.weight.dtype, torch.float32)
        self.assertEqual(model.transformer.h[0].mlp.c_fc.weight.dtype, torch.float16)
        with torch.no_grad():
            self.assertTrue(torch.isfinite(peft_model(input_ids=IDS).logits).all())
        # a container of the unchanged model: the plan is evidence, no error, and it is applied
        holder = torch.nn.ModuleList([GPT2LMHeadModel.from_pretrained(self.dir, trained_precision_check="error")])
        holder.to(torch.float16)
        self.assertTrue(torch.isfinite(first_output(holder[0], IDS)).all())

        off = GPT2LMHeadModel.from_pretrained(self.dir, use_fp16_plan=False, trained_precision_check="error")
        with self.assertRaises(TrainedPrecisionRiskError):
            get_peft_model(off, lora).half()
        with self.assertRaises(TrainedPrecisionRiskError):
            torch.nn.ModuleList([off]).to(torch.float16)
        self.assertEqual(off.transformer.h[0].mlp.c_fc.weight.dtype, torch.float32)  # raised before the cast

    def test_a_device_move_is_not_a_cast(self):
        model = GPT2LMHeadModel.from_pretrained(self.dir, use_fp16_plan=False, trained_precision_check="error")
        model.to("cpu")
        torch.nn.ModuleList([model]).to("cpu").float()

    def test_a_plan_that_did_not_pass_is_not_applied(self):
        # a failed plan is no claim at all: no module is kept in fp32
        model = GPT2LMHeadModel.from_pretrained(self.dir)
        model.config.fp16_plan = {**self.plan, "validation": {**self.plan["validation"], "passed": False}}
        self.assertEqual(apply_fp16_plan(model, torch.float16), [])


@require_torch
class Fp16PlanInputLengthTest(TestCasePlus):
    def test_an_overflow_that_only_long_inputs_reach(self):
        # positions 80 and later carry values past fp16's range: inputs of up to 64 tokens never see them
        model = tiny_gpt2(n_positions=128)
        model.config.trained_precision = "bf16"
        with torch.no_grad():
            model.transformer.wpe.weight[80:].mul_(1e6)
        short, long = IDS[:1, :24], torch.randint(0, 64, (1, 128), generator=torch.Generator().manual_seed(2))
        self.assertTrue(torch.isfinite(first_output(plain_fp16(model), short)).all())
        self.assertFalse(torch.isfinite(first_output(plain_fp16(model), long)).all())

        # by default the search sweeps up to the model's 128 positions: there is no plan
        default = search_fp16_plan(model)
        self.assertFalse(default.passed, default.format())
        self.assertEqual(default.validated_on["max_tokens"], 128)

        # a search limited to 64 tokens passes (the out-of-range embedding rows keep `wpe` in fp32)...
        limited = search_fp16_plan(model, max_length=64)
        self.assertTrue(limited.passed, limited.format())
        self.assertIn("transformer.wpe", limited.modules)
        path = self.get_auto_remove_tmp_dir()
        model.save_pretrained(path)
        write_fp16_plan(os.path.join(path, "config.json"), limited.to_config_dict())
        # ... and is no evidence for a model that takes 128 tokens: error mode raises, warn mode warns and NaNs
        reset_warning_cache()
        with self.assertRaisesRegex(TrainedPrecisionRiskError, "it saw inputs of up to 64 tokens"):
            GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        loaded = GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16)
        self.assertTrue(torch.isfinite(first_output(loaded, short)).all())
        self.assertFalse(torch.isfinite(first_output(loaded, long)).all())


@require_torch
class Fp16PlanCompositeTest(TestCasePlus):
    def test_each_sub_config_stores_its_sub_models_part(self):
        from transformers import BertConfig, EncoderDecoderConfig, EncoderDecoderModel, GPT2Config

        torch.manual_seed(0)
        encoder = BertConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
        )
        decoder = GPT2Config(
            vocab_size=64, n_embd=32, n_layer=2, n_head=2, n_positions=64, add_cross_attention=True, is_decoder=True
        )
        config = EncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
        config.decoder_start_token_id = config.pad_token_id = 0
        model = EncoderDecoderModel(config).eval()
        plant_fp16_overflow(model, "decoder.transformer.h.1.mlp.c_fc", "decoder.transformer.h.1.mlp.c_proj")
        result = search_fp16_plan(model)
        self.assertTrue(result.passed, result.format())
        self.assertEqual(result.modules, ["decoder.transformer.h.1.mlp"])
        self.assertEqual(sorted(result.parts), ["", "decoder", "encoder"])
        self.assertEqual(result.parts["decoder"]["modules"], ["transformer.h.1.mlp"])  # relative to the decoder
        self.assertEqual(result.parts["encoder"]["modules"], [])  # the encoder fits fp16: an answer of its own

        path = self.get_auto_remove_tmp_dir()
        model.save_pretrained(path)
        write_fp16_plan(os.path.join(path, "config.json"), result.to_config_dict(), result.parts)
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            stored = json.load(f)
        self.assertEqual(stored[FP16_PLAN_FIELD], result.to_config_dict())
        self.assertEqual(stored["decoder"][FP16_PLAN_FIELD], result.parts["decoder"])
        self.assertEqual(stored["encoder"][FP16_PLAN_FIELD], result.parts["encoder"])

        loaded = EncoderDecoderModel.from_pretrained(path, dtype=torch.float16)
        self.assertEqual(loaded.decoder.transformer.h[1].mlp.c_fc.weight.dtype, torch.float32)
        self.assertEqual(loaded.decoder.transformer.h[0].mlp.c_fc.weight.dtype, torch.float16)
        self.assertEqual(getattr(loaded.decoder.config, FP16_PLAN_FIELD)["modules"], ["transformer.h.1.mlp"])
        with torch.no_grad():
            logits = loaded(input_ids=IDS, decoder_input_ids=IDS).logits
        self.assertTrue(torch.isfinite(logits).all())


@require_torch
class Fp16PlanTrainingTest(TestCasePlus):
    def test_planned_modules_run_in_fp32_under_fp16_autocast(self):
        # accelerate ignores fp16 autocast on the CPU: the mechanism is tested under torch.autocast directly
        model = overflowing_gpt2()
        model.config.fp16_plan = search_fp16_plan(model).to_config_dict()
        ids = IDS[:1]
        with torch.autocast("cpu", dtype=torch.float16):
            plain = model(ids, labels=ids)
        self.assertFalse(torch.isfinite(plain.logits).all(), "fp16 autocast must overflow without the plan")
        self.assertEqual(apply_fp16_plan(model, torch.float16, training=True), [GPT2_MLP])
        model.train()
        with torch.autocast("cpu", dtype=torch.float16):
            out = model(ids, labels=ids)
        self.assertTrue(torch.isfinite(out.logits).all())
        self.assertTrue(torch.isfinite(out.loss))
        out.loss.backward()
        for name, parameter in model.named_parameters():
            self.assertTrue(torch.isfinite(parameter.grad).all(), name)
        self.assertTrue(all(p.dtype == torch.float32 for p in model.parameters()))  # fp32 master weights

    def test_fp16_autocast_fine_tuning_steps_stay_finite_with_the_plan(self):
        losses = {}
        for planned in (False, True):
            model = overflowing_gpt2()
            if planned:
                model.config.fp16_plan = search_fp16_plan(model).to_config_dict()
                apply_fp16_plan(model, torch.float16, training=True)
            model.train()
            optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
            losses[planned] = []
            for batch in random_token_dataset(3, 16, 64):
                ids = batch["input_ids"][None]
                with torch.autocast("cpu", dtype=torch.float16):
                    loss = model(ids, labels=ids).loss
                losses[planned].append(float(loss))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        self.assertFalse(any(torch.isfinite(torch.tensor(losses[False]))), losses[False])
        self.assertTrue(all(torch.isfinite(torch.tensor(losses[True]))), losses[True])

    def test_a_peft_model_applies_its_base_models_plan(self):
        from peft import LoraConfig, get_peft_model

        model = overflowing_gpt2()
        model.config.fp16_plan = search_fp16_plan(model).to_config_dict()
        peft_model = get_peft_model(model, LoraConfig(target_modules=["c_attn"], r=4, fan_in_fan_out=True))
        self.assertEqual(apply_fp16_plan(peft_model, torch.float16, training=True), [GPT2_MLP])
        with torch.autocast("cpu", dtype=torch.float16):
            self.assertTrue(torch.isfinite(peft_model(input_ids=IDS[:1]).logits).all())

    def test_a_planned_module_without_input_casts_of_its_own(self):
        # a plain Linear whose code casts nothing: the wrapper casts its fp16 input up and its output back
        linear = torch.nn.Linear(4, 4)
        keep_module_in_fp32(linear)
        keep_module_in_fp32(linear)  # idempotent
        out = linear(torch.ones(2, 4, dtype=torch.float16))
        self.assertEqual(linear.weight.dtype, torch.float32)
        self.assertEqual(out.dtype, torch.float16)
        clone = copy.deepcopy(linear)  # the wrapper follows the copy, not the original
        with torch.no_grad():
            clone.weight.zero_()
            clone.bias.zero_()
        with torch.no_grad():
            self.assertEqual(float(clone(torch.ones(1, 4, dtype=torch.float16)).abs().max()), 0.0)
        with torch.autocast("cpu", dtype=torch.float16):
            self.assertEqual(linear(torch.ones(2, 4)).dtype, torch.float32)  # fp32 in, no autocast inside: fp32 out

    def test_trainer_with_fp16_applies_the_stored_plan(self):
        model = overflowing_gpt2()
        model.config.fp16_plan = search_fp16_plan(model).to_config_dict()
        for fp16 in (True, False):
            trained = copy.deepcopy(model)
            args = TrainingArguments(
                self.get_auto_remove_tmp_dir(),
                fp16=fp16,
                use_cpu=True,
                max_steps=2,
                per_device_train_batch_size=2,
                report_to=[],
                save_strategy="no",
            )
            Trainer(trained, args, train_dataset=random_token_dataset(8, 8, 64)).train()
            wrapped = getattr(trained.transformer.h[1].mlp.forward, "__func__", None) is fp16_plan._planned_forward
            self.assertEqual(wrapped, fp16)
            self.assertTrue(all(p.dtype == torch.float32 for p in trained.parameters()))


@require_torch
class Fp16PlanWriteTest(TestCasePlus):
    PLAN = {
        "version": 1,
        "dtype": "fp16",
        "modules": ["h.1.mlp"],
        "headroom": 3.5,
        "fp32_weight_share": 0.1,
        "calibration_sha256": "0" * 64,
        "validation": {"passed": True, "max_abs_error": 0.01, "cosine": 0.9999, "top1_agreement": 1.0, "texts": 9},
    }

    def write(self, text):
        path = os.path.join(self.get_auto_remove_tmp_dir(), "config.json")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        return path

    def read(self, path):
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()

    def test_only_the_member_changes_and_nothing_is_left_behind(self):
        text = '{\n  "a": 1,\n  "model_type": "gpt2",\n  "z": [1, 2]\n}\n'
        path = self.write(text)
        self.assertTrue(write_fp16_plan(path, self.PLAN))
        new = self.read(path)
        self.assertEqual(json.loads(new), {**json.loads(text), FP16_PLAN_FIELD: self.PLAN})
        self.assertTrue(new.startswith('{\n  "a": 1,\n  "fp16_plan": {\n    "version": 1,'))  # sorted place, indent
        self.assertTrue(new.endswith('  "z": [1, 2]\n}\n'))
        self.assertEqual(sorted(os.listdir(os.path.dirname(path))), ["config.json"])
        self.assertFalse(write_fp16_plan(path, self.PLAN))  # the same plan: unchanged
        replaced = {**self.PLAN, "modules": []}
        self.assertTrue(write_fp16_plan(path, replaced))
        self.assertEqual(json.loads(self.read(path))[FP16_PLAN_FIELD], replaced)

    def test_a_bad_file_is_not_modified(self):
        from transformers.trained_precision.record.populate import ConfigEditError

        for text in ("{not json", "[1, 2]"):
            path = self.write(text)
            with self.assertRaises(ConfigEditError):
                write_fp16_plan(path, self.PLAN)
            self.assertEqual(self.read(path), text)

    def test_empty_object_and_unsorted_keys(self):
        self.assertEqual(json.loads(set_plan_member("{}", self.PLAN)), {FP16_PLAN_FIELD: self.PLAN})
        text = '{"z": 1, "a": 2}'
        self.assertEqual(list(json.loads(set_plan_member(text, self.PLAN))), ["z", "a", FP16_PLAN_FIELD])
