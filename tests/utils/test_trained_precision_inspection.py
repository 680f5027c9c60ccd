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
"""`inspect_checkpoint`, the Python API behind `transformers precision`: verdicts with and without the audit."""

import functools
import json
import os
from unittest import mock

from transformers.testing_utils import TestCasePlus, require_torch
from transformers.utils import is_torch_available


if is_torch_available():
    import torch

    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.trained_precision import CheckpointInspectionError, inspect_checkpoint
    from transformers.trained_precision.guard.check import TrainedPrecisionRiskError
    from transformers.trained_precision.testing_utils import plant_fp16_overflow, tiny_gpt2, tiny_gpt_neo

    from .test_fp16_plan import overflowing_gpt2, stored_plan

#: The GPT-Neo of the command's tests: 2 layers, hidden 32, 99 tokens.
TINY = {"vocab_size": 99, "hidden_size": 32, "num_heads": 4, "max_position_embeddings": 64}


@require_torch
class InspectCheckpointTest(TestCasePlus):
    def setUp(self):
        super().setUp()
        self.tmp = self.get_auto_remove_tmp_dir()

    def save(self, name, **config_kwargs):
        directory = os.path.join(self.tmp, name)
        tiny_gpt_neo(**TINY, **config_kwargs).save_pretrained(directory)
        return directory

    def test_fp32_stamped_audit_says_which_risk_is_which(self):
        directory = self.save("fp32", trained_precision="fp32")
        report = inspect_checkpoint(directory, audit=True)
        verdict = report.verdict("fp16")
        self.assertEqual(verdict.status, "risky")
        self.assertIn("precision loss expected", verdict.summary)
        self.assertIn("the measured range fits fp16", verdict.summary)
        self.assertNotIn("overflow expected", verdict.summary)
        self.assertEqual(report.format().count("fp16: RISKY"), 1)

    def test_unknown_with_audit_is_measured(self):
        report = inspect_checkpoint(self.save("unknown_audit"), audit=True)
        self.assertEqual(report.verdict("fp16").status, "safe")
        self.assertIn("precision loss cannot be ruled out", report.verdict("fp16").summary)
        self.assertGreater(report.audit.parameters, 0)

    def test_each_audited_verdict_speaks_of_its_own_dtype(self):
        directory = os.path.join(self.tmp, "overflow")
        mlp = "transformer.h.1.mlp"
        plant_fp16_overflow(tiny_gpt2(), f"{mlp}.c_fc", f"{mlp}.c_proj").save_pretrained(directory)
        report = inspect_checkpoint(directory, audit=True)
        bf16, fp16 = report.verdict("bf16"), report.verdict("fp16")
        # unknown precision, measured: bf16 holds the range (a measurement, said as one), fp16 overflows
        self.assertEqual((bf16.status, fp16.status), ("safe", "risky"))
        self.assertTrue(bf16.summary.startswith("safe as measured: the range fits bf16 (largest activation "))
        self.assertIn("within bf16's max 3.39e+38", bf16.summary)
        self.assertNotIn("fp16", bf16.summary)
        self.assertIn("not a verdict from the trained precision", bf16.reasons[0])
        # the overflow's number is one number: first_overflow, the module table, the verdict and the JSON
        name, kind, value = report.audit.first_overflow
        module = {m.name: m for m in report.audit.modules}[name]
        self.assertEqual(value, module.max_abs if kind == "output" else module.max_input)
        self.assertIn(f"(max {value:.3g}; fp16 max 65504)", fp16.summary)
        self.assertEqual(report.to_dict()["audit"]["first_overflow"]["max_abs"], value)

    def test_audit_of_pickled_weights_needs_an_opt_in(self):
        directory = os.path.join(self.tmp, "pickled")
        model = tiny_gpt_neo(**TINY)
        model.save_pretrained(directory)
        os.remove(os.path.join(directory, "model.safetensors"))
        torch.save(model.state_dict(), os.path.join(directory, "pytorch_model.bin"))
        with self.assertRaisesRegex(CheckpointInspectionError, "--allow-pickle"):
            inspect_checkpoint(directory, audit=True)
        report = inspect_checkpoint(directory, audit=True, allow_pickle=True)
        self.assertIsNotNone(report.audit)

    def test_audit_of_an_uncached_hub_id_needs_download(self):
        from transformers.trained_precision.commands import inspection
        from transformers.trained_precision.facts.storage import StorageSummary

        remote = inspection._Resolved(None, "org/model", os.path.join(self.save("remote"), "config.json"))
        remote.remote_storage = StorageSummary(format="safetensors", bytes=3_000_000_000)
        with mock.patch.object(inspection, "_resolve", return_value=remote):
            with self.assertRaisesRegex(CheckpointInspectionError, r"download 3.00 GB .*--download"):
                inspect_checkpoint("org/model", audit=True)


def tiny_moe(model_type):
    """A tiny random bf16 MoE whose checkpoint a load converts (per-expert weights fused into one tensor each)."""
    sizes = {"hidden_size": 16, "intermediate_size": 32, "moe_intermediate_size": 16, "num_hidden_layers": 2}
    config = AutoConfig.for_model(
        model_type, vocab_size=64, num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64, **sizes
    )
    config.num_local_experts = config.num_experts = 4
    config.num_experts_per_tok, config.shared_expert_intermediate_size = 2, 16
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).to(torch.bfloat16)


@require_torch
class StoredFp16PlanReportTest(TestCasePlus):
    """The report checks a stored fp16 plan against the weights mapped from the file, with the load's decision."""

    def saved(self, model=None, modules=None):
        model = overflowing_gpt2() if model is None else model
        model.config.trained_precision = "bf16"  # fp16 is risky for it: only a verified plan clears it
        model.config.fp16_plan = stored_plan(model, *([modules] if modules else []))
        path = os.path.join(self.get_auto_remove_tmp_dir(), "planned")
        model.save_pretrained(path)
        return path

    def assert_report_agrees_with_the_load(self, path, problem=None):
        """The report's fp16 verdict on `path` is the load's: safe with a valid plan, else risky for `problem`."""
        verdict = inspect_checkpoint(path).verdict("fp16")
        load = lambda: AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")  # noqa: E731
        if problem is None:
            self.assertEqual(verdict.status, "safe", verdict.reasons)
            load()
            return
        self.assertEqual(verdict.status, "risky")
        self.assertTrue(any(f"no evidence here: {problem}" in reason for reason in verdict.reasons), verdict.reasons)
        with self.assertRaisesRegex(TrainedPrecisionRiskError, f"no evidence here: {problem}"):
            load()

    def assert_agreement_after_edits(self, save, weight, field):
        """Report and load agree on what `save()` writes: as saved, after an edit of one of the first values of the
        stored `weight`, and after an edit of the config's `field` (one that changes the forward)."""
        from safetensors.torch import load_file, save_file

        self.assert_report_agrees_with_the_load(save())
        path = save()
        weights = load_file(os.path.join(path, "model.safetensors"))
        weights[weight].view(-1)[3] += 0.5
        save_file(weights, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
        self.assert_report_agrees_with_the_load(path, "its digest does not match these weights")
        path = save()
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        config[field] = 1e-3
        with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
        self.assert_report_agrees_with_the_load(path, "its digest does not match these weights")

    def test_the_report_verifies_the_plan_as_the_load_does(self):
        # a weight the binding samples whole (a layer norm's)
        self.assert_agreement_after_edits(self.saved, "transformer.h.0.ln_1.weight", "layer_norm_epsilon")

    def test_the_report_sees_moe_weights_as_the_load_converts_them(self):
        # the file holds one weight per expert, which the load fuses into one tensor: the report binds the fused one
        experts = {"mixtral": "block_sparse_moe.experts.0.w1", "qwen2_moe": "mlp.experts.0.gate_proj"}
        for model_type, expert in experts.items():
            with self.subTest(model_type):
                save = functools.partial(self.saved, tiny_moe(model_type), ("model.layers.1.mlp",))
                self.assert_agreement_after_edits(save, f"model.layers.0.{expert}.weight", "rms_norm_eps")

    def test_a_moe_over_the_conversion_limit_is_unverified(self):
        from transformers.trained_precision.commands import inspection

        path = self.saved(tiny_moe("mixtral"), ("model.layers.1.mlp",))
        with mock.patch.object(inspection, "MAX_CONVERTED_BYTES", 1000):
            verdict = inspect_checkpoint(path).verdict("fp16")
        self.assertEqual(verdict.status, "risky")
        self.assertTrue(any("unverified here: a load fuses" in r for r in verdict.reasons), verdict.reasons)

    def test_the_report_says_when_it_cannot_verify_the_plan(self):
        path = self.saved()
        with mock.patch.dict("sys.modules", {"torch": None}):  # `import torch` fails, as without PyTorch
            verdict = inspect_checkpoint(path).verdict("fp16")
        self.assertEqual(verdict.status, "risky")
        self.assertTrue(
            any("unverified here: checking it against the weights needs PyTorch" in r for r in verdict.reasons)
        )
        # a weight the checkpoint lacks, or holds with another shape: the load cannot bind the plan either
        from safetensors.torch import load_file, save_file

        for edit, why in (("drop", "weight `transformer.h.0.ln_1.weight` is not mapped"), ("shape", "size mismatch")):
            weights = load_file(os.path.join(path, "model.safetensors"))
            if edit == "drop":
                del weights["transformer.h.0.ln_1.weight"]
            else:
                weights["transformer.h.0.ln_1.weight"] = weights["transformer.h.0.ln_1.weight"][:-1].clone()
            save_file(weights, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
            verdict = inspect_checkpoint(path).verdict("fp16")
            self.assertEqual(verdict.status, "risky")
            self.assertTrue(any("unverified here" in r and why in r for r in verdict.reasons), verdict.reasons)
            path = self.saved()


@require_torch
class CompositeFp16PlanReportTest(TestCasePlus):
    """A plan stored in a sub-config is verified by the report as a load verifies it, and said for that sub-model."""

    def saved_llava(self):
        """A tiny Llava whose model and text model are bf16-trained (its vision tower fp16), with a valid fp16 plan stored
        as `transformers precision plan --write` stores it: the whole plan in its config, the text model's part in
        `text_config`."""
        from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration
        from transformers.trained_precision.facts.resolver import plan_fingerprint, sub_models

        small = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
        text = LlamaConfig(vocab_size=64, num_key_value_heads=1, max_position_embeddings=64, **small)
        vision = CLIPVisionConfig(image_size=32, patch_size=8, projection_dim=16, trained_precision="fp16", **small)
        config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=63, trained_precision="bf16")
        config.text_config.trained_precision = "bf16"
        torch.manual_seed(0)
        model = LlavaForConditionalGeneration(config)
        model.config.fp16_plan = stored_plan(model, ())
        owner = next(owner for key, _, owner in sub_models(model) if key == "text_config")
        part = {**model.config.fp16_plan, "validation": {**model.config.fp16_plan["validation"], "modules": []}}
        model.config.text_config.fp16_plan = {**part, "fingerprint": plan_fingerprint(owner, part)}
        path = os.path.join(self.get_auto_remove_tmp_dir(), "llava")
        model.save_pretrained(path)
        return path, LlavaForConditionalGeneration

    def test_a_sub_config_plan_is_verified_as_the_load_verifies_it(self):
        from safetensors.torch import load_file, save_file

        path, model_class = self.saved_llava()
        report = inspect_checkpoint(path)
        self.assertIn("fp16_plan", report.sub_models["text_config"].verdicts["fp16"].evidence["source"])
        self.assertEqual((report.status("fp16"), report.exit_code("fp16")), ("safe", 0))
        self.assertIn("text_config (llama): trained in bf16 (config)\n  fp32: safe", report.format("fp16"))
        model_class.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")  # the load clears it

        # one of the first values of the text model's first weight: the load and the report refuse the plan
        weights = load_file(os.path.join(path, "model.safetensors"))
        first = next(name for name in weights if "language_model.model." in name)  # not the head: the text model
        weights[first].view(-1)[3] += 0.5
        save_file(weights, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
        report = inspect_checkpoint(path)
        verdict = report.sub_models["text_config"].verdicts["fp16"]
        self.assertEqual((verdict.status, report.exit_code("fp16")), ("risky", 1))
        stale = "its stored fp16 plan is no evidence here: its digest does not match these weights"
        self.assertTrue(any(stale in reason for reason in verdict.reasons), verdict.reasons)
        self.assertIn(stale, report.format("fp16").split("Sub-model text_config")[1])  # said for that sub-model
        with self.assertRaisesRegex(TrainedPrecisionRiskError, "no evidence here: its digest does not match"):
            model_class.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
