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
The sentinel on every way a forward runs, on the CPU: `torch.compile(model)` (the eager and inductor backends, also
with `fullgraph=True`, so without a graph break), `generate` with a static cache compiled by `generate` itself, the
base model called on its own, and `model.forward` called directly, accelerate's forward wrapper and PEFT. A tiny bf16-trained GPT-2 with a planted fp16
overflow (fp32 is finite) raises in error mode and warns once in warn mode; the same GPT-2 without it stays silent.
"""

import os
import shutil
import tempfile
import unittest
from unittest import mock

from transformers import is_torch_available
from transformers.testing_utils import CaptureLogger, TestCasePlus, mockenv_context, require_peft, require_torch
from transformers.utils import logging


if is_torch_available():
    import torch

    from transformers import CompileConfig, GPT2LMHeadModel
    from transformers.trained_precision.guard import sentinel
    from transformers.trained_precision.guard.check import ENV_VAR, TrainedPrecisionRiskError, reset_warning_cache
    from transformers.trained_precision.testing_utils import plant_fp16_overflow, tiny_gpt2

SENTINEL_LOGGER = "transformers.trained_precision.guard.sentinel"
OVERFLOWED = "fp16 overflowed in this forward of"
PROMPT = 8


def input_ids(length=24):
    return torch.randint(0, 64, (2, length), generator=torch.Generator().manual_seed(1))


def overflows_late(model):
    """Positions from `PROMPT` on embed at 1e5, `inf` in fp16: a prompt is finite, the tokens after it are not."""
    with torch.no_grad():
        model.transformer.wpe.weight[PROMPT:] = 1e5
    return model


@require_torch
class SentinelCallFormsTest(TestCasePlus):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.paths = {}
        mlp = "transformer.h.1.mlp"
        for name, build in [
            ("bf16", lambda: plant_fp16_overflow(tiny_gpt2(), f"{mlp}.c_fc", f"{mlp}.c_proj")),
            ("unknown", lambda: plant_fp16_overflow(tiny_gpt2(), f"{mlp}.c_fc", f"{mlp}.c_proj")),
            ("healthy", tiny_gpt2),
            ("late", lambda: overflows_late(tiny_gpt2())),
            ("late-bf16", lambda: overflows_late(tiny_gpt2())),
        ]:
            model = build()
            model.config.trained_precision = "bf16" if name.endswith("bf16") else "unknown"
            cls.paths[name] = os.path.join(cls.tmp, name)
            model.save_pretrained(cls.paths[name])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        super().setUp()
        reset_warning_cache()
        torch._dynamo.reset()
        env = mockenv_context(ENV_VAR)  # the process-wide mode must not leak into or out of a test
        env.__enter__()
        self.addCleanup(env.__exit__, None, None, None)

    def load(self, name="bf16", **kwargs):
        return GPT2LMHeadModel.from_pretrained(self.paths[name], **kwargs)

    def under_autocast(self, call):
        """The output of `call(input_ids)` under fp16 autocast, over the fp32 weights the model was loaded in."""
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
            output = call(input_ids())
        return output[0] if isinstance(output, tuple) else output.logits if "logits" in output else output[0]

    def assert_raises_overflow(self, call, name="bf16"):
        """Raises naming the model; eagerly the base model (its output overflows first), compiled the compiled one."""
        with self.assertRaises(TrainedPrecisionRiskError) as cm:
            self.under_autocast(call)
        self.assertRegex(str(cm.exception), rf"{OVERFLOWED} '{self.paths[name]}' \((GPT2Model|GPT2LMHeadModel)\):")
        self.assertIn("under fp16 autocast", str(cm.exception))

    def assert_silent_and_finite(self, call):
        with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
            self.assertTrue(torch.isfinite(self.under_autocast(call)).all())
        self.assertEqual(cl.out, "")

    # --- torch.compile(model) ---------------------------------------------------------------------------------------

    def test_error_mode_raises_on_a_compiled_forward_without_a_graph_break(self):
        with mockenv_context(**{ENV_VAR: "error"}):
            for backend in ("eager", "aot_eager"):
                model = self.load()
                compiled = torch.compile(model, backend=backend, fullgraph=True)  # a graph break would raise
                self.assertTrue(torch.isfinite(compiled(input_ids()).logits).all())  # fp32: nothing to say
                self.assert_raises_overflow(compiled)
                self.assert_raises_overflow(compiled)  # every call, not only the one that compiled
                self.assert_silent_and_finite(torch.compile(self.load("healthy"), backend=backend, fullgraph=True))

    def test_error_mode_raises_on_a_model_compiled_by_inductor(self):
        with mockenv_context(**{ENV_VAR: "error"}):
            self.assert_raises_overflow(torch.compile(self.load()))
            self.assert_silent_and_finite(torch.compile(self.load("healthy")))

    def test_warn_mode_warns_once_on_compiled_forwards(self):
        model = self.load()
        compiled = torch.compile(model, backend="eager")
        with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
            self.assertFalse(torch.isfinite(self.under_autocast(compiled)).all())  # warn mode returns the output
            self.under_autocast(compiled)
            self.under_autocast(model.transformer)  # a sub-model of the same model: warned already
        self.assertEqual(cl.out.count("fp16 overflowed in"), 1, cl.out)
        self.assertIn(f"{OVERFLOWED} '{self.paths['bf16']}'", cl.out)

    def test_a_compiled_copy_checks_the_copy(self):
        import copy

        with mockenv_context(**{ENV_VAR: "error"}):
            clone = copy.deepcopy(self.load())
            self.assert_raises_overflow(torch.compile(clone, backend="eager", fullgraph=True))

    def test_a_model_that_carries_it_still_exports(self):
        # upstream's conftest turns TF32 off with the new API (`enable_tf32(False)`: "ieee"), after which reading the
        # legacy cuDNN flag, as torch.export does, raises (torch >= 2.9, pytorch/pytorch#179445): cuDNN conv and RNN,
        # which GPT-2 does not use, get torch's default back for the export only
        cudnn = torch.backends.cudnn
        saved = cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision
        cudnn.conv.fp32_precision = cudnn.rnn.fp32_precision = "tf32"
        try:
            with mockenv_context(**{ENV_VAR: "error"}):
                program = torch.export.export(
                    self.load(), (input_ids(),), {"use_cache": False}
                )  # no Python runs around it
        finally:
            cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision = saved
        self.assertEqual(program.module()(input_ids(), use_cache=False).logits.shape, (2, 24, 64))

    # --- generate with a static cache, compiled by generate ---------------------------------------------------------

    def generate(self, model, new_tokens, backend):
        config = CompileConfig(backend=backend, fullgraph=True, mode="default" if backend == "inductor" else None)
        config._compile_all_devices = True  # generate compiles its decoding steps on a GPU only, unless told
        prompt = input_ids(PROMPT)
        kwargs = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False, "pad_token_id": 0}
        with mock.patch.object(model, "get_compiled_call", wraps=model.get_compiled_call) as compiled_call:
            output = model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                cache_implementation="static",
                compile_config=config,
                **kwargs,
            )
        self.assertTrue(compiled_call.called)  # the decoding steps ran compiled
        return output

    def test_error_mode_raises_in_a_compiled_decoding_step_of_generate(self):
        for backend in ("eager", "inductor"):
            model = self.load("late", dtype=torch.float16, trained_precision_check="error")
            with torch.no_grad():
                self.assertTrue(torch.isfinite(model(input_ids(PROMPT)).logits).all())  # the prompt is finite
            self.generate(model, 1, backend)  # one token: the eager prefill only, which is finite
            with self.assertRaises(TrainedPrecisionRiskError) as cm:
                self.generate(model, 3, backend)  # the first compiled decoding step overflows
            self.assertIn(f"{OVERFLOWED} '{self.paths['late']}'", str(cm.exception))
            self.assertIn("its weights are fp16", str(cm.exception))
            healthy = self.load("healthy", dtype=torch.float16, trained_precision_check="error")
            self.assertEqual(self.generate(healthy, 3, backend).shape, (2, PROMPT + 3))

    def test_warn_mode_warns_once_in_compiled_generate(self):
        model = self.load("late-bf16", dtype=torch.float16)  # the load warns: the check's prediction
        with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
            self.generate(model, 3, "eager")
            self.generate(model, 3, "eager")
        self.assertEqual(cl.out.count("fp16 overflowed in"), 1, cl.out)

    # --- the base model on its own, and forward called directly ----------------------------------------------------

    def test_error_mode_raises_on_the_base_model_called_on_its_own(self):
        with mockenv_context(**{ENV_VAR: "error"}):
            model = self.load()
            self.assert_raises_overflow(model.transformer)
            self.assert_raises_overflow(torch.compile(model.transformer, backend="eager"))
            self.assert_silent_and_finite(self.load("healthy").transformer)

    def test_error_mode_raises_on_a_direct_forward_call(self):
        with mockenv_context(**{ENV_VAR: "error"}):
            # `forward` skips the model's hooks, not the check inside it
            self.assert_raises_overflow(self.load().forward)
            self.assert_silent_and_finite(self.load("healthy").forward)

    def test_error_mode_raises_under_accelerates_fp16_forward_wrapper(self):
        # accelerate's `prepare` with mixed_precision="fp16" (the Trainer's fp16=True) wraps the model's own forward in
        # fp16 autocast on a GPU, and casts its outputs to fp32: here the same wrapper, with the CPU's autocast
        from types import MethodType

        from accelerate.utils import convert_outputs_to_fp32

        def prepared(name):
            model = self.load(name, trained_precision_check="error")
            wrapped = torch.autocast("cpu", dtype=torch.float16)(model.forward.__func__)
            model._original_forward = model.forward
            model.forward = MethodType(convert_outputs_to_fp32(wrapped), model)
            return model

        with torch.no_grad():
            with self.assertRaises(TrainedPrecisionRiskError) as cm:
                prepared("bf16")(input_ids())
            healthy = prepared("healthy")(input_ids()).logits
        self.assertIn("under fp16 autocast", str(cm.exception))  # the check runs inside the wrapper's autocast
        self.assertEqual(healthy.dtype, torch.float32)
        self.assertTrue(torch.isfinite(healthy).all())

    @require_peft
    def test_error_mode_raises_through_a_peft_lora_wrapper(self):
        from peft import LoraConfig, get_peft_model

        base = self.load("unknown", dtype=torch.float16, trained_precision_check="error")
        lora = LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True, task_type="CAUSAL_LM")
        model = get_peft_model(base, lora)
        for call in (model, lambda ids: model.generate(input_ids=ids[:, :PROMPT], max_new_tokens=2, pad_token_id=0)):
            with self.assertRaisesRegex(TrainedPrecisionRiskError, f"{OVERFLOWED} '{self.paths['unknown']}'"):
                call(input_ids())

    def test_a_model_called_inside_another_models_forward_is_checked_on_its_own(self):
        with mockenv_context(**{ENV_VAR: "error"}):
            outer, inner = self.load("healthy"), self.load()
            outer.register_forward_pre_hook(lambda module, args: inner(*args))  # e.g. a reward model inside
            self.assert_raises_overflow(outer)  # the inner model's output is discarded, and still checked

    def test_each_forward_checks_its_own_outputs_once(self):
        with mockenv_context(**{ENV_VAR: "error"}):
            model = self.load("healthy")
            with mock.patch.object(sentinel, "_finite", wraps=sentinel._finite) as total:
                self.under_autocast(model)  # the head, and the base model inside it
                self.assertEqual(total.call_count, 2)
                total.reset_mock()
                with torch.no_grad():
                    model(input_ids())  # fp32, no autocast: nothing is read
                self.assertEqual(total.call_count, 0)

    def test_a_forward_that_raised_does_not_leave_the_next_one_unchecked(self):
        with mockenv_context(**{ENV_VAR: "error"}):
            model = self.load()
            with self.assertRaises(IndexError):
                model.transformer(input_ids=torch.full((1, 4), 10_000))  # fails inside the base model's forward
            self.assert_raises_overflow(model)

    def test_every_model_class_in_a_composite_model_is_checked(self):
        from transformers import EncoderDecoderModel, GPT2Config
        from transformers.modeling_utils import PreTrainedModel

        small = {"vocab_size": 64, "n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 32}
        encoder, decoder = (
            GPT2LMHeadModel(GPT2Config(**small)).transformer,
            GPT2LMHeadModel(GPT2Config(**small, add_cross_attention=True, is_decoder=True)),
        )
        model = EncoderDecoderModel(encoder=encoder, decoder=decoder)
        models = [module for module in model.modules() if isinstance(module, PreTrainedModel)]
        self.assertEqual(len(models), 4)
        self.assertTrue(all(getattr(type(m).forward, "_trained_precision_guarded", False) for m in models))
        with torch.no_grad():
            model.encoder.h[0].mlp.c_fc.weight.mul_(1e6)  # the encoder's output leaves fp16's range
        with mockenv_context(**{ENV_VAR: "error"}), torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
            with self.assertRaisesRegex(TrainedPrecisionRiskError, "GPT2Model"):
                model.get_encoder()(input_ids()[:, :8])
            with self.assertRaisesRegex(TrainedPrecisionRiskError, "GPT2Model"):
                model(input_ids=input_ids()[:, :8], decoder_input_ids=input_ids()[:, :8])


if __name__ == "__main__":
    unittest.main()
