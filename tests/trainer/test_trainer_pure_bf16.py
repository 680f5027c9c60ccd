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
"""Pure-bf16 training: the optimi optimizers, `bf16_full_train`, its warnings, resume and the stamp."""

import json
import os
import unittest
from types import SimpleNamespace
from unittest import mock

from parameterized import parameterized

from transformers import TrainingArguments
from transformers.testing_utils import (
    CaptureLogger,
    TestCasePlus,
    require_accelerate,
    require_torch,
    require_torch_optimi,
)
from transformers.trained_precision.testing_utils import random_token_dataset, tiny_gpt_neo_config
from transformers.utils import is_torch_available, logging


if is_torch_available():
    import torch
    from torch import nn

    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        GPTNeoForCausalLM,
        T5Config,
        T5ForConditionalGeneration,
        Trainer,
    )
    from transformers.integrations import optimi as tp_optimizers
    from transformers.integrations import pure_bf16


def _args(tmp_dir, **kwargs):
    defaults = {"use_cpu": True, "report_to": [], "save_strategy": "no", "disable_tqdm": True}
    defaults.update(kwargs)
    return TrainingArguments(tmp_dir, **defaults)


def _tiny_gpt2(tie=True, seed=0):
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2, tie_word_embeddings=tie)
    return GPT2LMHeadModel(config)


def _backward(model):
    with torch.autocast("cpu", dtype=torch.bfloat16):  # as `bf16=True` does: fp32 embeddings meet bf16 weights
        model(input_ids=torch.arange(8)[None], labels=torch.arange(8)[None]).loss.backward()


class _Regression(nn.Module if is_torch_available() else object):
    """`y = x @ w_true`, started from weights near 1 (bf16 spacing 2^-7 there): small updates are the whole job."""

    def __init__(self, n=64):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n) + torch.linspace(-0.05, 0.05, n))
        self.register_buffer("target", torch.ones(n) * 1.01 + torch.linspace(-0.05, 0.05, n) * 1.5)

    def forward(self, x, labels=None):
        pred = (x * self.weight.float()).sum(-1)
        truth = (x * self.target).sum(-1)
        return {"loss": ((pred - truth) ** 2).mean()}


class _RegressionData(torch.utils.data.Dataset if is_torch_available() else object):
    def __init__(self, n=64, size=256):
        self.x = torch.randn(size, n, generator=torch.Generator().manual_seed(0))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i]}


# ---------------------------------------------------------------------------------------------------------------------
# Optimizers
# ---------------------------------------------------------------------------------------------------------------------

OPTIMI_CASES = [
    ("adamw_optimi", "AdamW", {"betas": (0.9, 0.98), "eps": 1e-7}),
    ("adam_optimi", "Adam", {"betas": (0.9, 0.98), "eps": 1e-7}),
    ("lion_optimi", "Lion", {"betas": (0.9, 0.98)}),
    ("sgd_optimi", "SGD", {}),
    ("radam_optimi", "RAdam", {"betas": (0.9, 0.98), "eps": 1e-7}),
    ("ranger_optimi", "Ranger", {"betas": (0.9, 0.98), "eps": 1e-7}),
    ("adan_optimi", "Adan", {"betas": (0.98, 0.92, 0.99), "eps": 1e-7}),
]


@require_torch
@require_torch_optimi
@require_accelerate
class OptimiOptimizerTest(TestCasePlus):
    @parameterized.expand(OPTIMI_CASES)
    def test_optim_name_builds_class_and_kwargs(self, optim, class_name, expected):
        import optimi

        tmp = self.get_auto_remove_tmp_dir()
        args = _args(tmp, optim=optim, learning_rate=3e-4, weight_decay=0.05, adam_beta2=0.98, adam_epsilon=1e-7)
        model = _tiny_gpt2()
        pure_bf16.cast_model_for_bf16_full_train(model)
        cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
        self.assertTrue(issubclass(cls, getattr(optimi, class_name)))
        self.assertEqual(kwargs["lr"], 3e-4)
        self.assertEqual(kwargs["weight_decay"], 0.05)
        self.assertIs(kwargs["kahan_sum"], True)  # passed explicitly for bf16 params (Adan defaults it off)
        for key, value in expected.items():
            self.assertEqual(kwargs[key], value, key)
        if "betas" not in expected:
            self.assertNotIn("betas", kwargs)

        optimizer = cls(model.parameters(), **kwargs)
        _backward(model)
        optimizer.step()
        bf16 = next(p for p in model.parameters() if p.dtype == torch.bfloat16)
        self.assertEqual(optimizer.state[bf16]["kahan_comp"].dtype, torch.bfloat16)

    def test_fp32_model_leaves_kahan_automatic(self):
        args = _args(self.get_auto_remove_tmp_dir(), optim="adamw_optimi")
        _, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, _tiny_gpt2())
        self.assertIsNone(kwargs["kahan_sum"])

    def test_optim_args_parsed_as_booleans_and_numbers(self):
        args = _args(
            self.get_auto_remove_tmp_dir(),
            optim="adamw_optimi",
            optim_args="kahan_sum=False, decouple_lr=true, max_lr=1e-3",
        )
        cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, _tiny_gpt2())
        self.assertIs(kwargs["kahan_sum"], False)
        self.assertIs(kwargs["decouple_lr"], True)
        self.assertEqual(kwargs["max_lr"], 1e-3)

        args = _args(self.get_auto_remove_tmp_dir(), optim="ranger_optimi", optim_args="k=5,alpha=0.4")
        _, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, None)
        self.assertEqual((kwargs["k"], kwargs["alpha"]), (5, 0.4))

    def test_stable_adamw_optim_args_false_is_false(self):
        # upstream parsed these with bool("False") == True
        args = _args(
            self.get_auto_remove_tmp_dir(), optim="stable_adamw", optim_args="kahan_sum=False,decouple_lr=False"
        )
        _, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, None)
        self.assertIs(kwargs["kahan_sum"], False)
        self.assertIs(kwargs["decouple_lr"], False)
        args = _args(self.get_auto_remove_tmp_dir(), optim="stable_adamw", optim_args="kahan_sum=1,decouple_lr=yes")
        _, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, None)
        self.assertIs(kwargs["kahan_sum"], True)
        self.assertIs(kwargs["decouple_lr"], True)

    def test_invalid_optim_args_name_the_valid_ones(self):
        tmp = self.get_auto_remove_tmp_dir()
        with self.assertRaisesRegex(ValueError, "not a boolean.*true/false"):
            Trainer.get_optimizer_cls_and_kwargs(_args(tmp, optim="adamw_optimi", optim_args="kahan_sum=maybe"))
        with self.assertRaisesRegex(ValueError, "unknown key.*momentum.*Valid keys:.*kahan_sum"):
            Trainer.get_optimizer_cls_and_kwargs(_args(tmp, optim="adamw_optimi", optim_args="momentum=0.9"))
        with self.assertRaisesRegex(ValueError, "gradient_release"):
            Trainer.get_optimizer_cls_and_kwargs(_args(tmp, optim="lion_optimi", optim_args="gradient_release=1"))

    def test_missing_optimi_names_the_package(self):
        args = _args(self.get_auto_remove_tmp_dir(), optim="adamw_optimi")
        with mock.patch.object(tp_optimizers, "is_torch_optimi_available", return_value=False):
            with self.assertRaisesRegex(ImportError, r"pip install torch-optimi"):
                Trainer.get_optimizer_cls_and_kwargs(args, None)

    @parameterized.expand([("adamw_optimi", 1 - 1e-5), ("lion_optimi", 1 - 1e-5), ("adan_optimi", 1 / (1 + 1e-5))])
    def test_weight_decay_is_not_lost_on_bf16_weights(self, optim, per_step):
        # lr * wd = 1e-5 < 2^-9: `w * (1 - 1e-5)` rounds back to w in bf16
        steps = 300
        results = {}
        for compensate in (True, False):
            args = _args(
                self.get_auto_remove_tmp_dir(),
                optim=optim,
                learning_rate=1e-3,
                weight_decay=1e-2,
                optim_args=f"compensate_weight_decay={compensate}",
            )
            param = nn.Parameter(torch.ones(256, dtype=torch.bfloat16))
            cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, None)
            optimizer = cls([param], **kwargs)
            tp_optimizers.prepare_optimi_optimizer(optimizer, args)  # what `Trainer.create_optimizer` adds
            for _ in range(steps):
                param.grad = torch.zeros_like(param)  # only the decay moves the weight
                optimizer.step()
            comp = optimizer.state[param]["kahan_comp"]
            results[compensate] = (param.float() + comp.float()).mean().item()
        self.assertEqual(results[False], 1.0)  # optimi alone: decay rounded away
        # with it, weight + compensation decays by at least 3/4 of the exact amount (the bf16 compensation buffer
        # itself rounds: its spacing near 2^-9 is 2^-16, comparable to a per-step decay of 1e-5)
        expected = 1 - per_step**steps
        self.assertGreater(1 - results[True], 0.75 * expected)
        self.assertLess(1 - results[True], 1.25 * expected)

    @parameterized.expand([("adan_decay", False, 1 / 1.5), ("adam_decay", True, 0.5)])
    def test_adan_decay_form(self, _, adam_wd, expected):
        # Adan divides by 1 + lr * wd; with adam_wd=True it multiplies by 1 - lr * wd, as Adam does
        cls = tp_optimizers.get_optimi_optimizer_cls("adan_optimi")
        param = nn.Parameter(torch.ones(8, dtype=torch.bfloat16))
        optimizer = cls([param], lr=0.5, weight_decay=1.0, kahan_sum=True, adam_wd=adam_wd)
        tp_optimizers.prepare_optimi_optimizer(optimizer)
        param.grad = torch.zeros_like(param)  # only the decay moves the weight
        optimizer.step()
        total = param.float() + optimizer.state[param]["kahan_comp"].float()
        torch.testing.assert_close(total, torch.full((8,), expected), atol=1e-3, rtol=0)

    def test_a_step_that_raises_does_not_lose_the_weight_decay(self):
        cls = tp_optimizers.get_optimi_optimizer_cls("adamw_optimi")
        param = nn.Parameter(torch.ones(8, dtype=torch.bfloat16))
        optimizer = cls([param], lr=1e-3, weight_decay=1e-2, kahan_sum=True)
        tp_optimizers.prepare_optimi_optimizer(optimizer)
        param.grad = torch.zeros_like(param)  # only the decay moves the weight

        def closure():  # runs inside optimi's step, after the pre-hook held the decay
            raise ZeroDivisionError

        with self.assertRaises(ZeroDivisionError):
            optimizer.step(closure)
        self.assertEqual(optimizer.param_groups[0]["weight_decay"], 0.0)  # held by the step that raised
        optimizer.step()  # the next step restores the held decay first, then applies it
        self.assertEqual(optimizer.param_groups[0]["weight_decay"], 1e-2)
        total = param.float() + optimizer.state[param]["kahan_comp"].float()
        torch.testing.assert_close(total, torch.full((8,), 1 - 1e-5), atol=1e-6, rtol=0)

    def test_resume_from_other_implementation(self):
        # a checkpoint written where optimi chose Triton resumes on a machine without it (here: the CPU)
        cls = tp_optimizers.get_optimi_optimizer_cls("adamw_optimi")
        param = nn.Parameter(torch.randn(32, dtype=torch.bfloat16))
        optimizer = cls([param], lr=1e-3, kahan_sum=True)
        param.grad = torch.randn_like(param)
        optimizer.step()
        state = optimizer.state_dict()
        state["param_groups"][0]["triton"] = True
        state["param_groups"][0]["foreach"] = False

        param2 = nn.Parameter(param.detach().clone())
        resumed = cls([param2], lr=1e-3, kahan_sum=True)
        tp_optimizers.prepare_optimi_optimizer(resumed)
        resumed.load_state_dict(state)
        self.assertIs(resumed.param_groups[0]["triton"], False)
        param2.grad = torch.randn_like(param2)
        resumed.step()  # upstream optimi: NameError `_triton_adam` without Triton
        self.assertEqual(resumed.state[param2]["kahan_comp"].dtype, torch.bfloat16)

    def _trainer_optimizer(self, **kwargs):
        """A bf16 GPT-2 on the CPU and the optimi AdamW that `Trainer.create_optimizer` builds for it."""
        model = _tiny_gpt2().to(torch.bfloat16)
        args = _args(self.get_auto_remove_tmp_dir(), optim="adamw_optimi", bf16_full_train=True, **kwargs)
        trainer = Trainer(model=model, args=args)
        return model, trainer.create_optimizer()

    @parameterized.expand([("empty_groups", True), ("no_gradients", False)])
    def test_cpu_parameters_never_take_triton(self, _, empty_groups):
        # A group's first step can have nothing to update: ZeRO-3 steps the optimizer once per flat partition, with
        # every other group's params set to []; or no parameter has a gradient yet. optimi then resolves `triton`
        # over no parameters, `True` wherever the `triton` package imports (the CUDA build of torch), and the next,
        # real step on CPU parameters raised `RuntimeError: 0 active drivers ([]). There should only be one.`
        model, optimizer = self._trainer_optimizer()
        held = [group["params"] for group in optimizer.param_groups]
        if empty_groups:
            for group in optimizer.param_groups:
                group["params"] = []
        optimizer.step()
        for group, params in zip(optimizer.param_groups, held):
            group["params"] = params
        self.assertEqual([group["triton"] for group in optimizer.param_groups], [False] * len(optimizer.param_groups))
        weight = model.transformer.h[0].mlp.c_fc.weight  # bf16 (the embeddings stay fp32)
        before = weight.detach().clone()
        _backward(model)
        optimizer.step()
        self.assertFalse(torch.equal(weight, before))
        self.assertEqual(optimizer.state[weight]["kahan_comp"].dtype, torch.bfloat16)

    def test_an_explicit_triton_wins(self):
        import optimi.utils

        if not optimi.utils.HAS_TRITON:
            self.skipTest("needs the triton package, which the CUDA build of torch installs")
        model, optimizer = self._trainer_optimizer(optim_args="triton=true")
        _backward(model)
        with self.assertRaises((RuntimeError, ValueError)):  # Triton's kernels do not take CPU tensors
            optimizer.step()
        self.assertEqual([group["triton"] for group in optimizer.param_groups], [True] * len(optimizer.param_groups))


# ---------------------------------------------------------------------------------------------------------------------
# The switch
# ---------------------------------------------------------------------------------------------------------------------


@require_torch
@require_torch_optimi
@require_accelerate
class Bf16FullTrainArgsTest(TestCasePlus):
    def test_defaults(self):
        tmp = self.get_auto_remove_tmp_dir()
        args = _args(tmp, bf16_full_train=True)
        self.assertEqual(args.optim, "adamw_optimi")
        self.assertTrue(args.bf16)
        self.assertEqual(args.mixed_precision, "bf16")
        self.assertEqual(_args(tmp, bf16_full_train=True, optim="adamw_torch").optim, "adamw_torch")
        self.assertEqual(_args(tmp).optim, TrainingArguments.default_optim)
        self.assertFalse(_args(tmp).bf16)

    def test_cli(self):
        from transformers import HfArgumentParser

        parser = HfArgumentParser(TrainingArguments)
        (args,) = parser.parse_args_into_dataclasses(["--output_dir", "x", "--use_cpu", "--bf16_full_train"])
        self.assertEqual((args.optim, args.bf16), ("adamw_optimi", True))
        (args,) = parser.parse_args_into_dataclasses(["--output_dir", "x", "--optim", "lion_optimi"])
        self.assertEqual(args.optim, "lion_optimi")

    def test_refusals(self):
        tmp = self.get_auto_remove_tmp_dir()
        with self.assertRaisesRegex(ValueError, "fp16"):
            _args(tmp, bf16_full_train=True, fp16=True)
        # FSDP2 (TrainingArguments' default FSDP version) is supported; FSDP1 is refused with the reason
        self.assertTrue(_args(tmp, bf16_full_train=True, fsdp=True).bf16_full_train)
        with self.assertRaisesRegex(ValueError, "needs FSDP2.*single dtype"):
            _args(tmp, bf16_full_train=True, fsdp=True, fsdp_config={"version": 1})
        with mock.patch.dict(os.environ, {"ACCELERATE_USE_FSDP": "true"}):  # accelerate's default is FSDP1
            with self.assertRaisesRegex(ValueError, "FSDP version 1"):
                _args(tmp, bf16_full_train=True)
            with mock.patch.dict(os.environ, {"FSDP_VERSION": "2"}):
                self.assertTrue(_args(tmp, bf16_full_train=True).bf16_full_train)

    @require_accelerate
    def test_refusals_from_resolved_accelerator_state(self):
        # accelerate's real plugin objects, built on the CPU, in an object shaped like a resolved `Accelerator`
        from accelerate.utils import DeepSpeedPlugin, FullyShardedDataParallelPlugin

        def accelerator(fsdp_plugin=None, deepspeed_plugin=None):
            state = SimpleNamespace(fsdp_plugin=fsdp_plugin, deepspeed_plugin=deepspeed_plugin)
            return SimpleNamespace(state=state, mixed_precision="bf16", is_main_process=True)

        args = SimpleNamespace(bf16_full_train=True)
        fsdp1 = accelerator(FullyShardedDataParallelPlugin(fsdp_version=1))
        with self.assertRaisesRegex(ValueError, "needs FSDP2"):
            pure_bf16.check_bf16_full_train_accelerator(args, fsdp1)
        fsdp2 = accelerator(FullyShardedDataParallelPlugin(fsdp_version=2))
        pure_bf16.check_bf16_full_train_accelerator(args, fsdp2)  # supported
        deepspeed = accelerator(  # ZeRO-2 runs pure bf16; DeepSpeed's own optimizer is refused
            deepspeed_plugin=DeepSpeedPlugin(
                hf_ds_config={
                    "bf16": {"enabled": True},
                    "zero_optimization": {"stage": 2},
                    "optimizer": {"type": "Adam"},
                }
            )
        )
        with self.assertRaisesRegex(ValueError, "DeepSpeed"):
            pure_bf16.check_bf16_full_train_accelerator(args, deepspeed)
        # without the switch, a bf16 model under FSDP mixed precision is trained in fp32: say so
        model = _tiny_gpt2().to(torch.bfloat16)
        logger = logging.get_logger("transformers.integrations.pure_bf16")
        with CaptureLogger(logger) as cl:
            pure_bf16.check_bf16_full_train_accelerator(SimpleNamespace(bf16_full_train=False), fsdp2, model)
        self.assertIn("upcasts them to fp32", cl.out)


@require_torch
@require_torch_optimi
@require_accelerate
class Bf16CastTest(TestCasePlus):
    def test_gpt2_conv1d_cast_by_parameter(self):
        model = _tiny_gpt2()
        summary = pure_bf16.cast_model_for_bf16_full_train(model)
        dtypes = {name: p.dtype for name, p in model.named_parameters()}
        for name in ("transformer.h.0.attn.c_attn.weight", "transformer.h.1.mlp.c_proj.weight"):  # Conv1D
            self.assertEqual(dtypes[name], torch.bfloat16, name)
        self.assertEqual(dtypes["transformer.h.0.attn.c_attn.bias"], torch.bfloat16)
        for name in ("transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight"):
            self.assertEqual(dtypes[name], torch.float32, name)
        # tied: lm_head is the token embedding, decided once
        self.assertIs(model.lm_head.weight, model.transformer.wte.weight)
        self.assertIn("lm_head.weight", summary.tied["transformer.wte.weight"])
        unique = {id(p): p for p in model.parameters()}.values()
        self.assertEqual(summary.total, sum(p.numel() for p in unique))
        self.assertEqual(summary.bf16_params, sum(p.numel() for p in unique if p.dtype == torch.bfloat16))
        self.assertGreater(summary.bf16_params / summary.total, 0.8)
        self.assertIn("in bfloat16", str(summary))

    def test_cast_all_keeps_tie(self):
        model = _tiny_gpt2()
        pure_bf16.cast_model_for_bf16_full_train(model, cast_all=True)
        self.assertIs(model.lm_head.weight, model.transformer.wte.weight)
        self.assertTrue(all(p.dtype == torch.bfloat16 for p in model.parameters()))

    def test_keep_in_fp32_modules(self):
        torch.manual_seed(0)
        config = T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2)
        model = T5ForConditionalGeneration(config)
        self.assertIn("wo", model._keep_in_fp32_modules)
        summary = pure_bf16.cast_model_for_bf16_full_train(model)
        dtypes = {name: p.dtype for name, p in model.named_parameters()}
        self.assertEqual(dtypes["encoder.block.0.layer.1.DenseReluDense.wo.weight"], torch.float32)
        self.assertEqual(dtypes["encoder.block.0.layer.1.DenseReluDense.wi.weight"], torch.bfloat16)
        self.assertIn("_keep_in_fp32_modules", summary.kept_fp32.values())

        # strict entries stay fp32 even when casting everything
        model = T5ForConditionalGeneration(config)
        model._keep_in_fp32_modules_strict = ["wi"]
        pure_bf16.cast_model_for_bf16_full_train(model, cast_all=True)
        dtypes = {name: p.dtype for name, p in model.named_parameters()}
        self.assertEqual(dtypes["encoder.block.0.layer.1.DenseReluDense.wi.weight"], torch.float32)
        self.assertEqual(dtypes["encoder.block.0.layer.1.DenseReluDense.wo.weight"], torch.bfloat16)

    def test_fused_moe_experts(self):
        from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

        config = Qwen3MoeConfig(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            moe_intermediate_size=8,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
            num_experts=4,
            num_experts_per_tok=2,
        )
        model = Qwen3MoeForCausalLM(config)
        pure_bf16.cast_model_for_bf16_full_train(model)
        experts = [(n, p) for n, p in model.named_parameters() if "experts" in n]
        self.assertTrue(experts)
        for name, param in experts:
            self.assertEqual(param.dtype, torch.bfloat16, name)

    def test_model_init_is_cast(self):
        args = _args(self.get_auto_remove_tmp_dir(), bf16_full_train=True)
        trainer = Trainer(model_init=lambda: _tiny_gpt2(), args=args, train_dataset=random_token_dataset())
        self.assertEqual(trainer.model.transformer.h[0].mlp.c_fc.weight.dtype, torch.bfloat16)
        self.assertEqual(trainer.model.transformer.wte.weight.dtype, torch.float32)

    def test_storage_dtype_is_the_trained_weights_dtype(self):
        model = _tiny_gpt2()
        self.assertEqual(pure_bf16.storage_dtype(model), torch.float32)
        pure_bf16.cast_model_for_bf16_full_train(model)
        self.assertEqual(model.dtype, torch.float32)  # first parameter: the fp32 embedding
        self.assertEqual(pure_bf16.storage_dtype(model), torch.bfloat16)
        tmp = self.get_auto_remove_tmp_dir()
        model.save_pretrained(tmp)
        with open(os.path.join(tmp, "config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["dtype"], "bfloat16")

    def test_storage_dtype_is_bf16_where_fp32_embeddings_hold_most_parameters(self):
        # a tiny model with a large vocabulary: most values are the fp32-kept embeddings, the trained weights are bf16
        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=2000, n_positions=64))
        summary = pure_bf16.cast_model_for_bf16_full_train(model)
        self.assertGreater(summary.fp32_params, summary.bf16_params)
        tmp = self.get_auto_remove_tmp_dir()
        model.save_pretrained(tmp)
        with open(os.path.join(tmp, "config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["dtype"], "bfloat16")
        # a model the switch did not cast keeps upstream's `model.dtype`, mixed or not
        plain = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=2000, n_positions=64))
        plain.transformer.h[0].to(torch.bfloat16)
        self.assertEqual(pure_bf16.storage_dtype(plain), torch.float32)


# ---------------------------------------------------------------------------------------------------------------------
# Memory, warnings, training
# ---------------------------------------------------------------------------------------------------------------------


@require_torch
@require_torch_optimi
@require_accelerate
class PureBf16TrainingTest(TestCasePlus):
    def setUp(self):
        super().setUp()
        logging.warning_once.cache_clear()  # each test sees its own warnings

    def _step(self, model, optimizer):
        _backward(model)
        optimizer.step()

    def test_training_state_bytes_per_param(self):
        import optimi

        cases = {
            "fp32 AdamW": (False, torch.optim.AdamW, {}, 16.0),
            "bf16 AdamW": (True, torch.optim.AdamW, {}, 8.0),
            "bf16 optimi Kahan": (True, optimi.AdamW, {"kahan_sum": True}, 10.0),
        }
        for label, (cast, cls, kwargs, expected) in cases.items():
            model = _tiny_gpt2()
            if cast:
                pure_bf16.cast_model_for_bf16_full_train(model, cast_all=True)
            optimizer = cls(model.parameters(), lr=1e-3, **kwargs)
            self._step(model, optimizer)
            measured = pure_bf16.training_state_bytes(model, optimizer)
            self.assertAlmostEqual(measured["total"], expected, places=6, msg=label)

    def _warnings(self, model, optimizer, **arg_kwargs):
        args = SimpleNamespace(learning_rate=1e-4, process_index=0, **{"bf16_full_train": True, **arg_kwargs})
        return pure_bf16.check_pure_half_precision_training(model, optimizer, args)

    def test_warnings(self):
        model = _tiny_gpt2()
        pure_bf16.cast_model_for_bf16_full_train(model)

        def groups():  # optimizers write their defaults into the group dicts: a fresh list each time
            return [{"params": list(model.parameters()), "weight_decay": 0.01}]

        torch_adamw = torch.optim.AdamW(groups(), lr=1e-4, betas=(0.9, 0.999))
        logger = logging.get_logger("transformers.integrations.pure_bf16")
        with CaptureLogger(logger) as cl:
            messages = self._warnings(model, torch_adamw)
        self.assertEqual(len(messages), 3, messages)
        self.assertRegex(messages[0], r"of [\d,]+ trainable parameters .* are bfloat16 .* AdamW does not compensate")
        self.assertIn("2^-8", messages[0])
        self.assertIn("learning_rate * weight_decay = 0.0001 * 0.01 = 1e-06 is below 2^-9", messages[1])
        self.assertIn("adam_beta2 = 0.999 > 0.99", messages[2])
        for message in messages:
            self.assertIn(message[:60], cl.out)

        self.assertIn("2^-8 (~0.39%)", messages[0])

        # fp16 weights: fp16's own numbers (11 significant bits), not bf16's
        fp16_model = _tiny_gpt2().to(torch.float16)
        fp16_groups = [{"params": list(fp16_model.parameters()), "weight_decay": 1e-3}]
        fp16_messages = self._warnings(fp16_model, torch.optim.AdamW(fp16_groups, lr=1e-4, betas=(0.9, 0.99)))
        self.assertEqual(len(fp16_messages), 2, fp16_messages)
        self.assertIn("are float16", fp16_messages[0])
        self.assertIn("2^-11 (~0.049%)", fp16_messages[0])
        self.assertNotIn("2^-8", fp16_messages[0])
        self.assertIn("1e-07 is below 2^-12", fp16_messages[1])

        # optimi with Kahan summation, compensated decay and beta2 = 0.99: nothing to say
        cls = tp_optimizers.get_optimi_optimizer_cls("adamw_optimi")
        optimi_adamw = cls(groups(), lr=1e-4, betas=(0.9, 0.99), kahan_sum=True)
        tp_optimizers.prepare_optimi_optimizer(optimi_adamw)
        self.assertEqual(self._warnings(model, optimi_adamw), [])
        # optimi's own decay is lost at this lr * wd; Adan without Kahan does not compensate at all
        adan = tp_optimizers.get_optimi_optimizer_cls("adan_optimi")(groups(), lr=1e-4, kahan_sum=False)
        messages = self._warnings(model, adan)
        self.assertIn("does not compensate", messages[0])
        # fp32 model: silent
        self.assertEqual(self._warnings(_tiny_gpt2(), torch.optim.AdamW(_tiny_gpt2().parameters())), [])

    def test_without_the_switch_nothing_is_said(self):
        # feature off: a bf16 model with torch's AdamW and beta2 = 0.999 gets what upstream's Trainer says, nothing
        model = _tiny_gpt2().to(torch.bfloat16)
        groups = [{"params": list(model.parameters()), "weight_decay": 0.01}]
        logger = logging.get_logger("transformers.integrations.pure_bf16")
        with CaptureLogger(logger) as cl:
            messages = self._warnings(model, torch.optim.AdamW(groups, lr=1e-4), bf16_full_train=False)
        self.assertEqual(messages, [])
        self.assertEqual(cl.out, "")
        # and through the Trainer's `create_optimizer`, where the call site is
        trainer = Trainer(model=model, args=_args(self.get_auto_remove_tmp_dir(), weight_decay=0.01))
        with CaptureLogger(logger) as cl:
            trainer.create_optimizer()
        self.assertEqual(cl.out, "")

    def test_the_switch_picks_beta2_with_the_optimizer(self):
        # bf16_full_train picks optimi AdamW and its beta2 (0.99) when both are left at their defaults; a beta2 the
        # user gave, or an optimizer the user picked, keeps its beta2 (and the warning says what to change)
        tmp = self.get_auto_remove_tmp_dir()
        self.assertEqual(_args(tmp, bf16_full_train=True).adam_beta2, 0.99)
        self.assertEqual(_args(tmp, bf16_full_train=True, adam_beta2=0.98).adam_beta2, 0.98)
        self.assertEqual(_args(tmp, bf16_full_train=True, optim="adamw_torch").adam_beta2, 0.999)
        self.assertEqual(_args(tmp).adam_beta2, 0.999)

    def test_warnings_only_on_main_process(self):
        model = _tiny_gpt2().to(torch.bfloat16)
        args = SimpleNamespace(learning_rate=1e-4, process_index=1, bf16_full_train=True)
        logger = logging.get_logger("transformers.integrations.pure_bf16")
        with CaptureLogger(logger) as cl:
            messages = pure_bf16.check_pure_half_precision_training(
                model, torch.optim.SGD(model.parameters(), lr=0.1), args
            )
        self.assertTrue(messages)
        self.assertEqual(cl.out, "")

    def _train(self, tmp, steps=120, lr=1e-3, **kwargs):
        torch.manual_seed(0)
        model = _Regression()
        args = _args(
            tmp,
            bf16_full_train=True,
            bf16_full_train_cast_all=True,
            max_steps=steps,
            per_device_train_batch_size=32,
            learning_rate=lr,
            lr_scheduler_type="constant",
            adam_beta2=0.99,
            seed=0,
            **kwargs,
        )
        trainer = Trainer(model=model, args=args, train_dataset=_RegressionData())
        trainer.train()
        x = _RegressionData().x
        with torch.no_grad():
            return model(x)["loss"].item(), trainer

    def test_kahan_beats_plain_bf16(self):
        # the weights sit near 1.0, where bf16's spacing is 2^-7; Adam's per-step move is ~lr = 1e-3
        plain, _ = self._train(self.get_auto_remove_tmp_dir(), optim="adamw_torch")
        kahan, trainer = self._train(self.get_auto_remove_tmp_dir())
        optimizer = trainer.optimizer.optimizer
        self.assertIs(type(optimizer), tp_optimizers.get_optimi_optimizer_cls("AdamW"))  # optimi's own class
        self.assertTrue(optimizer._compensate_weight_decay)  # the Trainer registered the hooks
        self.assertEqual(trainer.model.weight.dtype, torch.bfloat16)
        self.assertLess(kahan * 5, plain, f"kahan {kahan:.3g} vs plain bf16 {plain:.3g}")

    def test_trainer_switch_logs_summary_and_stamps_bf16(self):
        from transformers.trained_precision.record.stamp import stamp_trained_precision

        tmp = self.get_auto_remove_tmp_dir()
        model = _tiny_gpt2()
        args = _args(tmp, bf16_full_train=True, max_steps=2, per_device_train_batch_size=4)
        logger = logging.get_logger("transformers.integrations.pure_bf16")
        with LoggingLevelInfo(), CaptureLogger(logger) as cl:
            trainer = Trainer(model=model, args=args, train_dataset=random_token_dataset())
        self.assertRegex(cl.out, r"bf16_full_train: [\d,]+ parameters \([\d.]+%\) in bfloat16")
        self.assertEqual(model.transformer.h[0].attn.c_attn.weight.dtype, torch.bfloat16)
        trainer.train()
        self.assertEqual(stamp_trained_precision(model, trainer.accelerator), "bf16")
        trainer.save_model(os.path.join(tmp, "final"))
        with open(os.path.join(tmp, "final", "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        self.assertEqual(config["trained_precision"], "bf16")
        self.assertEqual(config["dtype"], "bfloat16")

    def test_one_precision_policy_for_the_cast_the_autocast_and_the_stamp(self):
        from transformers.trained_precision.record.stamp import resolve_run_precision
        from transformers.trained_precision.vocabulary import PRECISION_POLICY_ATTR

        tmp = self.get_auto_remove_tmp_dir()
        self.assertIsNone(pure_bf16.precision_policy(_args(tmp)))  # without the switch: no policy, nothing changes
        args = _args(tmp, bf16_full_train=True, bf16_full_train_cast_all=True, max_steps=1)
        model = _tiny_gpt2()
        trainer = Trainer(model=model, args=args, train_dataset=random_token_dataset())
        policy = getattr(model, PRECISION_POLICY_ATTR)  # left there by the cast
        self.assertEqual(policy, pure_bf16.precision_policy(args))
        self.assertTrue(policy.cast_all)
        self.assertEqual(trainer.accelerator.mixed_precision, policy.mixed_precision)  # the autocast
        self.assertEqual({p.dtype for p in model.parameters()}, {policy.param_dtype})  # the cast (cast_all)
        self.assertEqual(resolve_run_precision(model), policy.name)  # the name the stamp writes
        with policy.forward_context("cpu"):
            self.assertEqual((torch.ones(2, 2) @ torch.ones(2, 2)).dtype, policy.compute_dtype)

    def test_resume_is_bit_identical(self):
        tmp = self.get_auto_remove_tmp_dir()

        def trainer_for(output_dir):
            torch.manual_seed(0)
            model = _tiny_gpt2()
            args = _args(
                output_dir,
                bf16_full_train=True,
                max_steps=6,
                per_device_train_batch_size=4,
                weight_decay=0.01,
                save_strategy="steps",
                save_steps=3,
                seed=3,
            )
            return Trainer(model=model, args=args, train_dataset=random_token_dataset()), model

        trainer, full = trainer_for(os.path.join(tmp, "full"))
        trainer.train()
        trainer, resumed = trainer_for(os.path.join(tmp, "resumed"))
        trainer.train(resume_from_checkpoint=os.path.join(tmp, "full", "checkpoint-3"))
        for (name, a), b in zip(full.named_parameters(), resumed.parameters()):
            self.assertTrue(torch.equal(a, b), name)
        state = trainer.optimizer.optimizer.state
        self.assertTrue(any(s.get("kahan_comp") is not None for s in state.values()))


class LoggingLevelInfo:
    """Lets info-level records through to `CaptureLogger` for the block."""

    def __enter__(self):
        self.level = logging.get_verbosity()
        logging.set_verbosity_info()

    def __exit__(self, *exc):
        logging.set_verbosity(self.level)


@require_torch
class StorageDtypeTest(unittest.TestCase):
    def test_float8_models_keep_upstreams_config_dtype(self):
        model = GPTNeoForCausalLM(tiny_gpt_neo_config())
        pure_bf16.cast_model_for_bf16_full_train(model)  # wte, the first parameter, stays fp32
        self.assertEqual(pure_bf16.storage_dtype(model), torch.bfloat16)  # the trained weights' dtype
        model.transformer.h[0].mlp.c_fc.weight.data = model.transformer.h[0].mlp.c_fc.weight.data.to(
            torch.float8_e4m3fn
        )
        self.assertEqual(pure_bf16.storage_dtype(model), model.dtype)  # float8 present: upstream's choice, unchanged


@require_torch
@require_torch_optimi
class OptimiContractTest(unittest.TestCase):
    """Fails loudly when a torch-optimi release renames what `integrations/optimi.py` relies on."""

    def test_installed_optimi_has_what_the_adapters_use(self):
        self.assertEqual(tp_optimizers.check_optimi_contract(), [])

    def test_a_rename_is_reported(self):
        import optimi.utils

        with mock.patch.object(tp_optimizers, "KAHAN_STATE_KEY", "renamed_comp"):
            problems = tp_optimizers.check_optimi_contract()
        self.assertEqual(len(problems), 1)
        self.assertIn("'renamed_comp'", problems[0])
        saved = optimi.utils.HAS_TRITON
        del optimi.utils.HAS_TRITON
        try:
            problems = tp_optimizers.check_optimi_contract()
            runs_here = tp_optimizers._triton_runs_here([])
        finally:
            optimi.utils.HAS_TRITON = saved
        self.assertTrue(any("HAS_TRITON" in p for p in problems), problems)
        self.assertFalse(runs_here)  # a resumed run falls back to foreach / for-loop: slower, never wrong


def _saved_dtype(model, directory):
    model.save_pretrained(directory)
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        return json.load(f)["dtype"]


@require_torch
@require_torch_optimi
@require_accelerate
class UpstreamBehaviourWithoutTheSwitchTest(TestCasePlus):
    """Without `bf16_full_train`, `save_pretrained`, `TrainingArguments.optim` and the model card are upstream's."""

    def test_save_pretrained_dtype(self):
        tmp = self.get_auto_remove_tmp_dir()
        model = GPTNeoForCausalLM(tiny_gpt_neo_config())
        self.assertEqual(_saved_dtype(model, os.path.join(tmp, "fp32")), "float32")
        model.to(torch.bfloat16)
        self.assertEqual(_saved_dtype(model, os.path.join(tmp, "bf16")), "bfloat16")
        # mixed by hand, as `_keep_in_fp32_modules` or a user does: upstream's choice, the first parameter's dtype
        model.transformer.wte.to(torch.float32)
        self.assertEqual(_saved_dtype(model, os.path.join(tmp, "by-hand")), "float32")
        # mixed by the switch (fp32 embeddings and norms): the dtype of the trained weights
        model = GPTNeoForCausalLM(tiny_gpt_neo_config())
        pure_bf16.cast_model_for_bf16_full_train(model)
        self.assertEqual(model.dtype, torch.float32)
        self.assertEqual(_saved_dtype(model, os.path.join(tmp, "switch")), "bfloat16")
        model.to(torch.float32)  # cast back afterwards: one dtype again, upstream's answer
        self.assertEqual(_saved_dtype(model, os.path.join(tmp, "cast-back")), "float32")

    def test_optim_default(self):
        import dataclasses

        from transformers import HfArgumentParser

        field = {f.name: f for f in dataclasses.fields(TrainingArguments)}["optim"]
        self.assertEqual(field.default, TrainingArguments.default_optim)  # what upstream declares
        parser = HfArgumentParser(TrainingArguments)
        self.assertEqual(parser._option_string_actions["--optim"].default, TrainingArguments.default_optim)  # --help
        tmp = self.get_auto_remove_tmp_dir()
        self.assertEqual(_args(tmp).optim, TrainingArguments.default_optim)
        self.assertEqual(_args(tmp, optim="lion_optimi").optim, "lion_optimi")
        # with the switch: the default becomes optimi AdamW, a chosen optimizer is kept
        self.assertEqual(_args(tmp, bf16_full_train=True).optim, "adamw_optimi")
        self.assertEqual(_args(tmp, bf16_full_train=True, optim="adamw_torch").optim, "adamw_torch")

    def test_model_card(self):
        # the card names the run once, in the stamp's words: bf16 weights, no fp32 master weights
        from transformers.modelcard import extract_hyperparameters_from_trainer

        tmp = self.get_auto_remove_tmp_dir()
        model = _tiny_gpt2()
        args = _args(tmp, bf16_full_train=True, max_steps=1, per_device_train_batch_size=2)
        trainer = Trainer(model=model, args=args, train_dataset=random_token_dataset())
        trainer.train()
        hyperparameters = extract_hyperparameters_from_trainer(trainer)
        self.assertEqual(model.config.trained_precision, "bf16")
        self.assertEqual(hyperparameters["training_regime"], "bf16 non-mixed precision")
        self.assertNotIn("training_precision", hyperparameters)
        self.assertNotIn("mixed_precision_training", hyperparameters)


if __name__ == "__main__":
    unittest.main()
