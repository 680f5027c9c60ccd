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
The forward's fp16 check: error mode is checked where the model runs. A tiny GPT-2 whose fp16 forward overflows (its second MLP
is scaled past fp16's range inside) gives the verdict a user gets on every path to fp16, on the CPU: a plain fp16
forward, `generate`, a pipeline, fp16 autocast over fp32 weights, a second cast, a real PEFT LoRA wrapper, the
Trainer's evaluation and training loops, and a model a stored fp16 plan cleared whose weights changed since.
"""

import copy
import io
import os
import shutil
import tempfile
import unittest

from transformers import is_torch_available
from transformers.testing_utils import CaptureLogger, TestCasePlus, mockenv_context, require_torch
from transformers.utils import logging


if is_torch_available():
    import torch

    from transformers import GPT2LMHeadModel, Trainer, TrainingArguments
    from transformers.trained_precision.guard.check import ENV_VAR, TrainedPrecisionRiskError, reset_warning_cache
    from transformers.trained_precision.guard.sentinel import has_fp16_weights, sentinel_paused
    from transformers.trained_precision.testing_utils import plant_fp16_overflow, random_token_dataset, tiny_gpt2

SENTINEL_LOGGER = "transformers.trained_precision.guard.sentinel"
OVERFLOWED = "fp16 overflowed in this forward of"
GPT2_MLP = "transformer.h.1.mlp"


def overflowing_gpt2():
    """The tiny GPT-2 whose second MLP overflows fp16 inside (`c_fc` scaled up, `c_proj` down)."""
    return plant_fp16_overflow(tiny_gpt2(), f"{GPT2_MLP}.c_fc", f"{GPT2_MLP}.c_proj")


def input_ids(length=24):
    return torch.randint(0, 64, (2, length), generator=torch.Generator().manual_seed(1))


def forward(model, **kwargs):
    with torch.no_grad():
        return model(input_ids=input_ids(), **kwargs).logits


def generate(model):
    return model.generate(input_ids(8), max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0)


@require_torch
class SentinelTest(TestCasePlus):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.paths = {}
        for name, precision, overflowing in [
            ("unknown", "unknown", True),
            ("bf16", "bf16", True),
            ("fp16", "fp16", True),
            ("healthy", "fp16", False),
        ]:
            model = overflowing_gpt2() if overflowing else tiny_gpt2()
            model.config.trained_precision = precision
            cls.paths[name] = os.path.join(cls.tmp, name)
            model.save_pretrained(cls.paths[name])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        super().setUp()
        reset_warning_cache()
        env = mockenv_context(ENV_VAR)  # the process-wide mode must not leak into or out of a test
        env.__enter__()
        self.addCleanup(env.__exit__, None, None, None)

    def load(self, name="unknown", **kwargs):
        return GPT2LMHeadModel.from_pretrained(self.paths[name], **kwargs)

    def assert_raises_overflow(self, name="unknown"):
        """A context manager: the block raises the sentinel's error, which names the model, the fix and the audit."""
        test = self

        class _Raises:
            def __enter__(self):
                self.cm = test.assertRaises(TrainedPrecisionRiskError)
                return self.cm.__enter__()

            def __exit__(self, *exc):
                handled = self.cm.__exit__(*exc)
                message = str(self.cm.exception)
                test.assertIn(f"{OVERFLOWED} '{test.paths[name]}'", message)
                test.assertIn("`dtype=torch.bfloat16` or `dtype=torch.float32`", message)
                test.assertIn(f"transformers precision {test.paths[name]} --audit", message)
                test.assertIn("DebugUnderflowOverflow", message)
                return handled

        return _Raises()

    # --- error mode: every path to fp16 raises instead of returning NaN ---------------------------------------------

    def test_the_planted_model_overflows_in_fp16_and_not_in_fp32(self):
        self.assertTrue(torch.isfinite(forward(self.load())).all())
        model = self.load(dtype=torch.float16, trained_precision_check="ignore")
        self.assertFalse(torch.isfinite(forward(model)).all())

    def test_error_mode_raises_on_a_plain_fp16_forward(self):
        model = self.load(
            dtype=torch.float16, trained_precision_check="error"
        )  # unknown precision: the load is silent
        with self.assert_raises_overflow():
            forward(model)

    def test_the_environment_variable_sets_error_mode_too(self):
        with mockenv_context(**{ENV_VAR: "error"}):
            model = self.load(dtype=torch.float16)
            with self.assert_raises_overflow():
                forward(model)

    def test_error_mode_raises_in_generate_and_in_a_pipeline(self):
        from tokenizers import Tokenizer, models, pre_tokenizers

        from transformers import PreTrainedTokenizerFast, pipeline

        model = self.load(dtype=torch.float16, trained_precision_check="error")
        with self.assert_raises_overflow():
            generate(model)
        backend = Tokenizer(models.WordLevel({"<unk>": 0, **{f"w{i}": i + 1 for i in range(20)}}, unk_token="<unk>"))
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<unk>")
        generator = pipeline("text-generation", model=model, tokenizer=tokenizer)
        with self.assert_raises_overflow():
            generator(" ".join(f"w{i}" for i in range(12)), max_new_tokens=2, do_sample=False)

    def test_error_mode_raises_under_fp16_autocast_of_an_fp32_model(self):
        model = self.load(trained_precision_check="error")
        self.assertTrue(torch.isfinite(forward(model)).all())  # fp32: nothing to say
        with torch.autocast("cpu", dtype=torch.float16), self.assert_raises_overflow() as cm:
            forward(model)
        self.assertIn("under fp16 autocast", str(cm.exception))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            self.assertTrue(torch.isfinite(forward(model)).all())  # bf16 autocast is not fp16: not checked, and fine

    def test_error_mode_raises_after_a_second_half_cast(self):
        for first in (torch.float16, torch.float32):
            model = self.load(dtype=first, trained_precision_check="error")
            model.half()
            model.half()  # no change of dtype: the cast check says nothing
            with self.assert_raises_overflow():
                forward(model)
            model.to(torch.float16)
            with self.assert_raises_overflow():
                forward(model)

    def test_a_cast_to_fp32_or_bf16_stops_the_check_and_a_cast_back_resumes_it(self):
        model = self.load(dtype=torch.float16, trained_precision_check="error")
        model.float()
        self.assertTrue(torch.isfinite(forward(model)).all())
        model.bfloat16()
        forward(model)  # bf16 computes in fp32's range: never checked
        model.half()
        with self.assert_raises_overflow():
            forward(model)

    def test_error_mode_set_after_the_load_holds_without_a_cast(self):
        model = self.load()  # unknown precision, default mode
        with mockenv_context(**{ENV_VAR: "error"}):
            with torch.autocast("cpu", dtype=torch.float16), self.assert_raises_overflow():
                forward(model)
            model.half()
            with self.assert_raises_overflow():
                forward(model)
        built = tiny_gpt2(trained_precision="fp16")  # built directly: the record of fp16 weights follows its casts
        self.assertFalse(has_fp16_weights(built))
        built.to(torch.float16)
        self.assertTrue(has_fp16_weights(built))
        built.to("cpu")  # a device move keeps it
        self.assertTrue(has_fp16_weights(built) and has_fp16_weights(built.transformer))
        built.float()
        self.assertFalse(has_fp16_weights(built) or has_fp16_weights(built.transformer))

    def test_the_environment_variable_is_read_at_every_cast_also_from_a_replaced_environ(self):
        # the cast path reads `os.environ`'s own data where it has one: a variable set, changed or removed after the
        # model was built is seen, and so is one in a plain dict that replaced `os.environ`
        model = self.load(dtype=torch.float16)
        with mockenv_context(**{ENV_VAR: "warn"}):
            model.float()
            os.environ[ENV_VAR] = "error"
            model.half()
            with self.assert_raises_overflow():
                forward(model)
        other = self.load()
        with unittest.mock.patch.object(os, "environ", {**os.environ, ENV_VAR: "error"}):
            other.half()
            with self.assert_raises_overflow():
                forward(other)
        quiet = self.load()
        with unittest.mock.patch.object(os, "environ", {k: v for k, v in os.environ.items() if k != ENV_VAR}):
            quiet.half()
            with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
                self.assertFalse(torch.isfinite(forward(quiet)).all())  # unknown precision, warn mode: upstream's
        self.assertEqual(cl.out, "")

    def test_a_parent_module_cast_is_covered(self):
        model = self.load(trained_precision_check="error")
        torch.nn.ModuleList([model]).to(torch.float16)
        with self.assert_raises_overflow():
            forward(model)

    def trainer(self, model, **kwargs):
        args = TrainingArguments(
            self.get_auto_remove_tmp_dir(),
            use_cpu=True,
            per_device_eval_batch_size=4,
            per_device_train_batch_size=4,
            max_steps=2,
            report_to=[],
            disable_tqdm=True,
            **kwargs,
        )
        data = random_token_dataset(size=8, length=16)
        return Trainer(model=model, args=args, train_dataset=data, eval_dataset=data)

    def test_error_mode_raises_in_trainer_evaluate_with_an_fp16_model(self):
        model = self.load(dtype=torch.float16, trained_precision_check="error")
        with self.assert_raises_overflow():
            self.trainer(model).evaluate()

    def test_error_mode_raises_in_the_trainer_training_loop(self):
        model = self.load(dtype=torch.float16, trained_precision_check="error")
        with self.assert_raises_overflow():
            self.trainer(model).train()

    # --- warn, ignore, healthy, unknown ----------------------------------------------------------------------------

    def test_warn_mode_warns_once_per_model_and_names_it(self):
        model = self.load("bf16", dtype=torch.float16)  # the load warns: the check's prediction
        with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
            self.assertFalse(torch.isfinite(forward(model)).all())  # warn mode returns the output
            forward(model)
            generate(model)
        self.assertEqual(cl.out.count(OVERFLOWED), 1, cl.out)
        self.assertIn(f"{OVERFLOWED} '{self.paths['bf16']}'", cl.out)
        self.assertIn("trained in bf16 (from its config's `trained_precision`)", cl.out)
        self.assertIn(f"set {ENV_VAR}=ignore", cl.out)
        other = self.load("bf16", dtype=torch.float16)  # another model: its own warning
        with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
            forward(other)
        self.assertEqual(cl.out.count(OVERFLOWED), 1, cl.out)

    def test_a_model_judged_safe_in_fp16_that_overflows_warns(self):
        model = self.load("fp16", dtype=torch.float16)  # fp16-trained: the load says nothing
        with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
            forward(model)
        self.assertIn(f"{OVERFLOWED} '{self.paths['fp16']}'", cl.out)

    def test_ignore_mode_is_silent(self):
        model = self.load("bf16", dtype=torch.float16, trained_precision_check="ignore")
        with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
            self.assertFalse(torch.isfinite(forward(model)).all())
            generate(model)
        self.assertEqual(cl.out, "")
        with mockenv_context(**{ENV_VAR: "ignore"}), CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
            forward(self.load("bf16", dtype=torch.float16))
        self.assertEqual(cl.out, "")

    def test_a_healthy_model_in_error_mode_gives_finite_output(self):
        model = self.load("healthy", dtype=torch.float16, trained_precision_check="error")
        self.assertTrue(torch.isfinite(forward(model)).all())
        generate(model)
        model = self.load("healthy", trained_precision_check="error")
        with torch.autocast("cpu", dtype=torch.float16):
            self.assertTrue(torch.isfinite(forward(model)).all())

    def test_a_model_of_unknown_precision_in_the_default_mode_runs_as_upstream_runs_it(self):
        built = GPT2LMHeadModel(self.load().config).eval()
        built.load_state_dict(self.load().state_dict())
        for model in (self.load(dtype=torch.float16), built.half(), self.load().half()):
            self.assertEqual(len(model._forward_hooks), 0)
            with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
                self.assertFalse(torch.isfinite(forward(model)).all())  # upstream's behaviour
            self.assertEqual(cl.out, "")

    def test_a_model_of_known_precision_is_checked_in_warn_mode(self):
        model = self.load("bf16")
        with CaptureLogger(logging.get_logger(SENTINEL_LOGGER)) as cl:
            with torch.autocast("cpu", dtype=torch.float16):
                forward(model)
        self.assertIn(f"{OVERFLOWED} '{self.paths['bf16']}'", cl.out)
        with self.assertRaises(TrainedPrecisionRiskError):  # the cast check itself (bf16 -> fp16 is risky)
            GPT2LMHeadModel.from_pretrained(self.paths["bf16"], trained_precision_check="error").half()

    # --- what the check keeps on a model ----------------------------------------------------------------------------

    def test_nothing_attached_nothing_serialized_and_copies_are_checked(self):
        model = self.load(dtype=torch.float16, trained_precision_check="error")
        keys = set(model.state_dict())
        self.assertEqual((len(model._forward_hooks), len(model._forward_pre_hooks)), (0, 0))
        with self.assert_raises_overflow():
            forward(model)
        self.assertEqual(set(model.state_dict()), keys)
        clone = copy.deepcopy(model)
        with self.assert_raises_overflow():
            forward(clone)
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        loaded = torch.load(buffer, weights_only=False)
        with self.assert_raises_overflow():
            forward(loaded)
        saved = self.get_auto_remove_tmp_dir()
        model.save_pretrained(saved)
        with open(os.path.join(saved, "config.json"), encoding="utf-8") as file:
            self.assertNotIn("trained_precision_", file.read().replace("trained_precision_check", ""))

    def test_a_tool_that_measures_overflow_pauses_it(self):
        model = self.load(dtype=torch.float16, trained_precision_check="error")
        with sentinel_paused():  # the fp16 plan search runs its fp16 candidates so
            self.assertFalse(torch.isfinite(forward(model)).all())
        with self.assert_raises_overflow():
            forward(model)


if __name__ == "__main__":
    unittest.main()
