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
One table of real-world cases, asserted on every path that answers "is this runtime risky for this checkpoint?": the
loader (`from_pretrained`, warn and error mode), the casts, the Trainer's check, and `transformers precision` (exit
code and `--json`). Quantized loads use the real bitsandbytes on the CPU; fine-tunes are real Trainer runs.
"""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

from parameterized import parameterized

from transformers.testing_utils import CaptureLogger, LoggingLevel, TestCasePlus, require_torch
from transformers.trained_precision.commands import cli
from transformers.trained_precision.configuration import sub_config_items
from transformers.trained_precision.facts.binding import (
    BINDING_VERSION,
    SAMPLED_VALUES,
    bind,
    binding_digest,
    config_digest,
    weights_subject,
)
from transformers.trained_precision.facts.evidence import (
    FINISHED_RUN,
    FP16_PLAN,
    REFERENCE_RUNTIME,
    find_evidence,
    fp16_plan_problem,
    read_fp16_plan,
)
from transformers.trained_precision.facts.registry import REGISTRY, lookup
from transformers.trained_precision.facts.resolver import resolve_trained_precision
from transformers.trained_precision.facts.risk import assess_lineage_risk
from transformers.trained_precision.facts.run_record import MIN_RUN_STEPS, RunRecord, read_run_record
from transformers.trained_precision.record.populate import set_config_field
from transformers.trained_precision.vocabulary import FP16_PLAN_FIELD, REFERENCE_FIELD, RUN_FIELD
from transformers.utils import is_bitsandbytes_available, is_torch_available, logging


if is_torch_available():
    import torch

    from transformers import (
        AutoModelForCausalLM,
        BertConfig,
        BitsAndBytesConfig,
        EncoderDecoderConfig,
        EncoderDecoderModel,
        LlamaConfig,
        LlamaForCausalLM,
        OPTConfig,
        OPTForCausalLM,
        T5Config,
        T5ForConditionalGeneration,
        Trainer,
        TrainingArguments,
    )
    from transformers.trained_precision.guard.check import TrainedPrecisionRiskError, reset_warning_cache
    from transformers.trained_precision.guard.sentinel import cleared_by
    from transformers.trained_precision.plan.fp16_plan_search import search_fp16_plan
    from transformers.trained_precision.record.stamp import (
        check_run_precision,
        finish_trained_precision_run,
        note_optimizer_step,
        note_training_loss,
        stamp_trained_precision,
    )
    from transformers.trained_precision.testing_utils import random_token_dataset, tiny_gpt_neo


REVISION = "0123456789abcdef0123456789abcdef01234567"
LLAMA2 = "meta-llama/Llama-2-7b-hf"
GALACTICA = "facebook/galactica-125m"
CHECK_LOGGER = "transformers.trained_precision.guard.check"
STAMP_LOGGER = "transformers.trained_precision.record.stamp"

VALID_PLAN = {
    "version": 1,
    "dtype": "fp16",
    "modules": ["encoder.block.0.layer.1.DenseReluDense.wo"],
    "headroom": 4.0,
    "fp32_weight_share": 0.05,
    "calibration_sha256": "0" * 64,
    "validation": {"passed": True, "max_abs_error": 0.01, "cosine": 0.9999, "top1_agreement": 1.0, "texts": 8},
}

DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
# what the messages say of a bf16-pretrained model whose config records an fp16 fine-tune
FINE_TUNED_IN_FP16 = (
    "was trained in bf16 (from its config's `pretraining_precision`; fine-tuned in fp16 since, by its "
    "`trained_precision`)"
)


QUANTIZED = ("t5_4bit_default_compute_at_fp16", "t5_8bit_at_fp16", "t5_4bit_bf16_fp16_compute", "t5_4bit_bf16")
CASES = [
    ("t5_4bit_default_compute_at_fp16",),
    ("t5_8bit_at_fp16",),
    ("t5_4bit_bf16_fp16_compute",),
    ("t5_4bit_bf16",),
    ("t5_with_a_validated_fp16_plan",),
    ("llama2_default_load",),
    ("llama2_at_fp16",),
    ("llama2_at_bf16",),
    ("bf16_pretrain_finished_fp16_fine_tune",),
    ("bf16_pretrain_short_fp16_fine_tune",),
    ("bf16_pretrain_diverged_fp16_fine_tune",),
    ("bf16_pretrain_finished_fp16_autocast_fine_tune",),
    ("llama2_saved_copy_default_load",),
    ("llama2_saved_copy_at_fp16",),
    ("llama2_bf16_copy_at_fp16",),
    ("llama2_fine_tuned_copy_at_fp16",),
    ("galactica_default_load",),
]


def tiny_t5_config(**kwargs):
    # 64 wide: bitsandbytes quantizes in blocks of 64 values
    return T5Config(
        vocab_size=64, d_model=64, d_kv=16, d_ff=128, num_layers=1, num_heads=2, decoder_start_token_id=0, **kwargs
    )


def tiny_encoder_decoder():
    def bert(**kwargs):
        return BertConfig(
            num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32, vocab_size=64, **kwargs
        )

    config = EncoderDecoderConfig.from_encoder_decoder_configs(bert(), bert(is_decoder=True, add_cross_attention=True))
    return EncoderDecoderModel(config=config)


def fine_tune_in_fp16(output_dir, learning_rate, max_steps=MIN_RUN_STEPS):
    """
    A bf16-pretrained GPT-Neo fine-tuned with fp16 weights: a run that really computes in fp16 on the CPU, on inputs
    of the model's whole length (32 tokens), so that a finished run covers every input the model takes.
    """
    torch.manual_seed(0)
    model = tiny_gpt_neo(trained_precision="bf16").to(torch.float16)
    fine_tune(model, output_dir, learning_rate, max_steps, length=32)


def fine_tune(model, output_dir, learning_rate=1e-3, max_steps=3, length=16):
    """A real Trainer run of `model` on random tokens (`length` of them per sequence), saved to `output_dir`."""
    args = TrainingArguments(
        output_dir,
        use_cpu=True,
        max_steps=max_steps,
        per_device_train_batch_size=4,
        learning_rate=learning_rate,
        optim="sgd",
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(model, args, train_dataset=random_token_dataset(size=16, length=length))
    trainer.train()
    trainer.save_model()
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


def fine_tune_with_fp16_autocast(output_dir, steps=MIN_RUN_STEPS, init_scale=2.0**16):
    """
    A bf16-pretrained GPT-Neo fine-tuned with fp16 AMP, the way `fp16=True` trains on a GPU: fp32 weights,
    `torch.autocast` in fp16 and a `GradScaler` (accelerate applies neither on the CPU, so this is a custom loop with
    the stamp's hooks). An `init_scale` far too large makes the scaler skip its first steps, as on a GPU.
    """
    torch.manual_seed(0)
    model = tiny_gpt_neo(trained_precision="bf16")
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    stamp_trained_precision(model, "fp16", check=False)  # fp32 weights: an autocast run
    data = random_token_dataset(size=16, length=32)  # the model's whole length
    for step in range(steps):
        batch = {key: value[None] for key, value in data[step % len(data)].items()}
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(**batch).loss
        note_training_loss(model, loss, batch)
        scaler.scale(loss).backward()
        scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        note_optimizer_step(model, skipped=scaler.get_scale() < scale)
    finish_trained_precision_run(model)
    model.save_pretrained(output_dir)


@require_torch
class RealWorldCasesTest(TestCasePlus):
    """
    Each case: how to load the checkpoint at its runtime, the runtime, whether it is risky, and what the messages say.
    The cast path loads in fp32 and casts to the runtime; a quantized model cannot be cast (upstream refuses it).
    """

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix="precision_evidence_")
        cls.cache = os.path.join(cls.tmp, "hub")
        torch.manual_seed(0)

        T5ForConditionalGeneration(tiny_t5_config(trained_precision="bf16")).save_pretrained(cls.path("t5"))
        # a measured plan, bound to these weights (t5-small's config states `n_positions`, the length it covers)
        planned = T5ForConditionalGeneration(tiny_t5_config(trained_precision="bf16", n_positions=64)).eval()
        result = search_fp16_plan(planned)
        assert result.passed, result.format()
        setattr(planned.config, FP16_PLAN_FIELD, result.to_config_dict())
        planned.save_pretrained(cls.path("t5_planned"))

        # a cache snapshot of Llama 2 as Meta publishes it: bf16-trained (the registry says so), stored in fp16
        repo = os.path.join(cls.cache, "models--meta-llama--Llama-2-7b-hf")
        os.makedirs(os.path.join(repo, "refs"))
        with open(os.path.join(repo, "refs", "main"), "w", encoding="utf-8") as f:
            f.write(REVISION)
        llama = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=64,
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=1,
                num_attention_heads=2,
                num_key_value_heads=2,
                max_position_embeddings=32,
            )
        )
        llama.to(torch.float16).save_pretrained(os.path.join(repo, "snapshots", REVISION))
        # Galactica as Meta publishes it: bf16-trained, stored in fp16 (an OPT)
        cls.snapshot(
            GALACTICA,
            OPTForCausalLM(
                OPTConfig(
                    vocab_size=64,
                    hidden_size=16,
                    word_embed_proj_dim=16,
                    ffn_dim=32,
                    num_hidden_layers=1,
                    num_attention_heads=2,
                    max_position_embeddings=32,
                )
            ).to(torch.float16),
        )

        encdec = tiny_encoder_decoder()
        stamp_trained_precision(encdec, "bf16", check=False)  # what a bf16 Trainer run leaves on every sub-config
        encdec.save_pretrained(cls.path("encdec"))

        with LoggingLevel(logging.ERROR):
            fine_tune_in_fp16(cls.path("finished"), learning_rate=1e-3)
            fine_tune_in_fp16(cls.path("short"), learning_rate=1e-3, max_steps=3)
            fine_tune_in_fp16(cls.path("diverged"), learning_rate=1e4, max_steps=3)
            fine_tune_with_fp16_autocast(cls.path("amp"))
            fine_tune_with_fp16_autocast(cls.path("amp_skipped"), init_scale=2.0**40)
            # `save_pretrained` copies of the Llama 2 snapshot: unchanged, rounded to bf16, fine-tuned
            AutoModelForCausalLM.from_pretrained(LLAMA2, cache_dir=cls.cache).save_pretrained(cls.path("llama_copy"))
            AutoModelForCausalLM.from_pretrained(LLAMA2, cache_dir=cls.cache, dtype=torch.bfloat16).save_pretrained(
                cls.path("llama_bf16_copy")
            )
            fine_tune(
                AutoModelForCausalLM.from_pretrained(cls.path("llama_copy"), dtype=torch.float32),
                cls.path("llama_fine_tuned"),
            )

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp, name)

    @classmethod
    def snapshot(cls, model_id, model):
        """Saves `model` as the cache snapshot of `model_id` (what `from_pretrained(model_id)` finds offline)."""
        repo = os.path.join(cls.cache, "models--" + model_id.replace("/", "--"))
        os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
        with open(os.path.join(repo, "refs", "main"), "w", encoding="utf-8") as f:
            f.write(REVISION)
        model.save_pretrained(os.path.join(repo, "snapshots", REVISION))

    def setUp(self):
        super().setUp()
        reset_warning_cache()
        logging.get_logger(STAMP_LOGGER).warning_once.cache_clear()
        logging.get_logger(STAMP_LOGGER).info_once.cache_clear()

    # ---------------------------------------------------------------------------------------------------------------
    # the table

    def case(self, name):
        t5 = {"cls": T5ForConditionalGeneration, "checkpoint": self.path("t5")}
        return {
            "t5_4bit_default_compute_at_fp16": {
                **t5,
                "kwargs": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True), "dtype": torch.float16},
                "runtime": "fp16",
                "risky": True,
                "says": ["upstream keeps `wo` in fp32"],
                "load_says": ["bitsandbytes-quantized with compute dtype fp32, so the embeddings, norms and residual"],
            },
            "t5_8bit_at_fp16": {
                **t5,
                "kwargs": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True), "dtype": torch.float16},
                "runtime": "fp16",
                "risky": True,
                "says": ["was trained in bf16"],
                "load_says": ["bitsandbytes-quantized, its activations run in this dtype"],
            },
            "t5_4bit_bf16_fp16_compute": {  # the load dtype is safe, the quantized matmuls are not
                **t5,
                "kwargs": {
                    "quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float16),
                    "dtype": torch.bfloat16,
                },
                "load_dtype": "bf16",
                "runtime": "fp16",
                "risky": True,
                "says": ["was trained in bf16"],
                "load_says": ["(`torch.float16`; the compute dtype of the bitsandbytes-quantized matmuls)"],
            },
            "t5_4bit_bf16": {  # QLoRA as a bf16-trained model wants it
                **t5,
                "kwargs": {
                    "quantization_config": BitsAndBytesConfig(
                        load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16
                    ),
                    "dtype": torch.bfloat16,
                },
                "runtime": "bf16",
                "risky": False,
                "says": [],
            },
            "t5_with_a_validated_fp16_plan": {
                "cls": T5ForConditionalGeneration,
                "checkpoint": self.path("t5_planned"),
                "kwargs": {"dtype": torch.float16},
                "runtime": "fp16",
                "risky": False,
                "says": ["a measured fp16 plan, verified against these weights"],
                # the report verifies the plan on the mapped weights as the load does; a training run changes the
                # weights it was measured on: it keeps the prior
                "trainer_risky": True,
            },
            "llama2_default_load": {
                "cls": AutoModelForCausalLM,
                "checkpoint": LLAMA2,
                "kwargs": {},  # dtype="auto": the stored fp16
                "runtime": "fp16",
                "risky": False,
                "says": [f"its publisher runs '{LLAMA2}' in fp16", lookup(LLAMA2).reference_source],
            },
            "llama2_at_fp16": {
                "cls": AutoModelForCausalLM,
                "checkpoint": LLAMA2,
                "kwargs": {"dtype": torch.float16},
                "runtime": "fp16",
                "risky": False,
                "says": [f"its publisher runs '{LLAMA2}' in fp16", lookup(LLAMA2).reference_source],
            },
            "llama2_at_bf16": {
                "cls": AutoModelForCausalLM,
                "checkpoint": LLAMA2,
                "kwargs": {"dtype": torch.bfloat16},
                "runtime": "bf16",
                "risky": False,
                "says": [],
            },
            "bf16_pretrain_finished_fp16_fine_tune": {  # fp16 weights: pure fp16, MIN_RUN_STEPS real steps
                "cls": AutoModelForCausalLM,
                "checkpoint": self.path("finished"),
                "kwargs": {"dtype": torch.float16},
                "runtime": "fp16",
                "risky": False,
                "says": [f"a pure fp16 training run finished {MIN_RUN_STEPS} optimizer steps with finite losses"],
            },
            "bf16_pretrain_short_fp16_fine_tune": {  # 3 steps: a smoke test, not evidence
                "cls": AutoModelForCausalLM,
                "checkpoint": self.path("short"),
                "kwargs": {"dtype": torch.float16},
                "runtime": "fp16",
                "risky": True,
                "says": [FINE_TUNED_IN_FP16],
            },
            "bf16_pretrain_diverged_fp16_fine_tune": {
                "cls": AutoModelForCausalLM,
                "checkpoint": self.path("diverged"),
                "kwargs": {"dtype": torch.float16},
                "runtime": "fp16",
                "risky": True,
                "says": [FINE_TUNED_IN_FP16],
            },
            "bf16_pretrain_finished_fp16_autocast_fine_tune": {  # AMP proves AMP training, not fp16 weights
                "cls": AutoModelForCausalLM,
                "checkpoint": self.path("amp"),
                "kwargs": {"dtype": torch.float16},
                "runtime": "fp16",
                "risky": True,
                "says": [FINE_TUNED_IN_FP16],
            },
            "llama2_saved_copy_default_load": {  # the publisher's weights, saved again: its evidence stays
                "cls": AutoModelForCausalLM,
                "checkpoint": self.path("llama_copy"),
                "kwargs": {},
                "runtime": "fp16",
                "risky": False,
                "says": [f"its publisher runs '{LLAMA2}' in fp16, and this is an unchanged copy of '{LLAMA2}'"],
            },
            "llama2_saved_copy_at_fp16": {
                "cls": AutoModelForCausalLM,
                "checkpoint": self.path("llama_copy"),
                "kwargs": {"dtype": torch.float16},
                "runtime": "fp16",
                "risky": False,
                "says": [f"its publisher runs '{LLAMA2}' in fp16", lookup(LLAMA2).reference_source],
            },
            "llama2_bf16_copy_at_fp16": {  # rounded to bf16: no longer the publisher's fp16 weights
                "cls": AutoModelForCausalLM,
                "checkpoint": self.path("llama_bf16_copy"),
                "kwargs": {"dtype": torch.float16},
                "runtime": "fp16",
                "risky": True,
                "says": ["was trained in bf16 (from its config's `trained_precision`)"],
            },
            "llama2_fine_tuned_copy_at_fp16": {  # a fine-tune is a new run: judged as one (3 fp32 steps)
                "cls": AutoModelForCausalLM,
                "checkpoint": self.path("llama_fine_tuned"),
                "kwargs": {"dtype": torch.float16},
                "runtime": "fp16",
                "risky": True,
                "says": ["was trained in bf16 (from its config's `pretraining_precision`; fine-tuned in fp32 since"],
            },
            "galactica_default_load": {
                "cls": AutoModelForCausalLM,
                "checkpoint": GALACTICA,
                "kwargs": {},  # dtype="auto": the stored fp16
                "runtime": "fp16",
                "risky": False,
                "says": [f"its publisher runs '{GALACTICA}' in fp16", lookup(GALACTICA).reference_source],
            },
        }[name]

    # ---------------------------------------------------------------------------------------------------------------
    # the paths

    def load(self, case, **kwargs):
        """`from_pretrained` with the case's arguments: (model, warnings, info lines)."""
        if "quantization_config" in case["kwargs"] and not is_bitsandbytes_available():
            self.fail("bitsandbytes is part of the testing extra: install it to run the quantized cases")
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
            model = case["cls"].from_pretrained(case["checkpoint"], cache_dir=self.cache, **case["kwargs"], **kwargs)
        return model, cl.out

    def cli(self, *args):
        out = io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            try:
                cli.main([*args, "--cache-dir", self.cache])
            except SystemExit as e:
                code = e.code or 0
        return code, out.getvalue()

    def assert_says(self, out, case):
        for text in case["says"]:
            self.assertIn(text, out)

    @parameterized.expand(CASES)
    def test_loader(self, name):
        case = self.case(name)
        model, out = self.load(case)
        self.assertEqual(str(model.dtype).split(".")[-1], DTYPES[case.get("load_dtype", case["runtime"])])
        self.assertEqual("but is being loaded in" in out, case["risky"], out)
        self.assertEqual(out.count("was trained in"), 1 if case["risky"] or case["says"] else 0, out)
        self.assert_says(out, case)
        for text in case.get("load_says", ()):
            self.assertIn(text, out)
        reset_warning_cache()
        if case["risky"]:
            with self.assertRaises(TrainedPrecisionRiskError):
                self.load(case, trained_precision_check="error")
        else:
            self.load(case, trained_precision_check="error")

    @parameterized.expand([c for c in CASES if c[0] not in QUANTIZED])
    def test_cast(self, name):
        case = self.case(name)
        model = case["cls"].from_pretrained(case["checkpoint"], cache_dir=self.cache, dtype=torch.float32)
        reset_warning_cache()
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
            model.to(getattr(torch, DTYPES[case["runtime"]]))
        self.assertEqual("but is being cast to" in cl.out, case["risky"], cl.out)
        self.assert_says(cl.out, case)

    @parameterized.expand(QUANTIZED)
    def test_a_quantized_model_is_not_cast(self, name):
        """Upstream refuses to cast a bitsandbytes model; the check says nothing about a cast that cannot happen."""
        model, _ = self.load(self.case(name), trained_precision_check="ignore")
        reset_warning_cache()
        with CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl, self.assertRaises(ValueError):
            model.to(torch.bfloat16)
        self.assertEqual(cl.out, "")

    @parameterized.expand(CASES)
    def test_trainer_check(self, name):
        case = self.case(name)
        model, _ = self.load(case)  # the run is checked in the mode of the load: the default one
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            risk = check_run_precision(model, case["runtime"])
        self.assertEqual(risk is not None, case.get("trainer_risky", case["risky"]), cl.out)
        if not case.get("trainer_risky"):
            self.assert_says(cl.out, case)

    @parameterized.expand(CASES)
    def test_cli(self, name):
        case = self.case(name)
        code, out = self.cli(case["checkpoint"], "--dtype", case["runtime"], "--json")
        report = json.loads(out)
        risky = case["risky"]  # the report checks bound evidence on the mapped weights, as the load does
        self.assertEqual(code, 1 if risky else 0, out)
        self.assertEqual(report["status"], "risky" if risky else "safe")
        self.assertEqual(report["exit_code"], code)
        verdict = report["verdicts"][case["runtime"]]
        if case["says"] and not risky:
            self.assertIsNotNone(verdict["evidence"])
            self.assert_says(verdict["summary"], case)

    def run_record(self, name):
        with open(os.path.join(self.path(name), "config.json"), encoding="utf-8") as f:
            return json.load(f)[RUN_FIELD]

    def test_an_autocast_run_clears_autocast_training_only(self):
        """An fp16 AMP run that finished is evidence for another fp16 AMP run, in error mode too, not for fp16 weights."""
        record = self.run_record("amp")
        binding = record.pop("binding")
        self.assertEqual((binding["run"], binding["max_tokens"]), ("amp", 32))  # bound to its kind and lengths
        self.assertEqual(
            record,
            {
                "status": "finished",
                "compute": "amp",
                "optimizer_steps": MIN_RUN_STEPS,
                "skipped_steps": 0,
                "fp16_plan": False,
            },
        )
        model = AutoModelForCausalLM.from_pretrained(self.path("amp"))  # the run's check follows the environment
        with mock.patch.dict(os.environ, {"TRANSFORMERS_TRAINED_PRECISION_CHECK": "error"}):
            with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
                self.assertIsNone(check_run_precision(model, "fp16", compute="amp"))
            self.assertIn(f"a mixed-precision (autocast) fp16 training run finished {MIN_RUN_STEPS}", cl.out)
            with self.assertRaises(TrainedPrecisionRiskError) as raised:
                check_run_precision(model, "fp16")  # fp16 weights
        self.assertIn(FINE_TUNED_IN_FP16, str(raised.exception))

    def test_steps_the_scaler_skipped_do_not_count(self):
        record = self.run_record("amp_skipped")
        self.assertGreater(record["skipped_steps"], 0)
        self.assertEqual(record["optimizer_steps"] + record["skipped_steps"], MIN_RUN_STEPS)
        model = AutoModelForCausalLM.from_pretrained(
            self.path("amp_skipped")
        )  # the run's check follows the environment
        with mock.patch.dict(os.environ, {"TRANSFORMERS_TRAINED_PRECISION_CHECK": "error"}):
            with self.assertRaises(TrainedPrecisionRiskError):
                check_run_precision(model, "fp16", compute="amp")

    def test_a_saved_copy_keeps_the_publisher_reference_and_a_fine_tune_drops_it(self):
        with open(os.path.join(self.path("llama_copy"), "config.json"), encoding="utf-8") as f:
            copy = json.load(f)
        self.assertEqual(copy["trained_precision"], "bf16")
        binding = copy[REFERENCE_FIELD].pop("binding")  # the digest of the publisher's weights, as loaded
        self.assertEqual(
            (binding["run"], binding["max_tokens"], binding["version"], len(binding["digest"])),
            ("publisher", None, BINDING_VERSION, 64),
        )
        self.assertEqual(copy[REFERENCE_FIELD], {"model_id": LLAMA2, "runtime": "fp16", "stored_dtype": "fp16"})
        with open(os.path.join(self.path("llama_fine_tuned"), "config.json"), encoding="utf-8") as f:
            tuned = json.load(f)
        self.assertNotIn(REFERENCE_FIELD, tuned)
        self.assertEqual((tuned["trained_precision"], tuned["pretraining_precision"]), ("fp32", "bf16"))
        # the copy in error mode, through the environment variable too: no warning, no error, the evidence at info
        reset_warning_cache()
        with mock.patch.dict(os.environ, {"TRANSFORMERS_TRAINED_PRECISION_CHECK": "error"}):
            with LoggingLevel(logging.WARNING), CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
                model = AutoModelForCausalLM.from_pretrained(self.path("llama_copy"))
        self.assertEqual((model.dtype, cl.out), (torch.float16, ""))

    def test_a_copy_edited_outside_the_trainer_loses_the_publisher_evidence(self):
        """
        Review finding 2: the Llama 2 copy with one neuron changed in a plain PyTorch edit (no Trainer; a neuron the
        binding's sample reads, see the next test for one it does not) overflows in fp16; its config still names the
        publisher, and the load in error mode raises, saying why the evidence went.
        """
        edited = AutoModelForCausalLM.from_pretrained(self.path("llama_copy"), dtype=torch.float32)
        weight = edited.model.layers[0].mlp.up_proj.weight
        [name for name, _ in edited.named_parameters()]
        with torch.no_grad():
            weight[0] *= 1e6  # a neuron whose weights the binding samples (each weight's first values)
        path = os.path.join(self.tmp, "llama_edited")
        edited.save_pretrained(path)
        ids = torch.arange(32)[None] % 64
        fp16 = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16, trained_precision_check="ignore")
        with torch.no_grad():
            self.assertFalse(torch.isfinite(fp16(input_ids=ids).logits).all())
        reset_warning_cache()
        with self.assertRaises(TrainedPrecisionRiskError) as raised:
            AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        message = str(raised.exception)
        self.assertIn(f"The publisher reference in `{REFERENCE_FIELD}` ('{LLAMA2}') is no evidence here", message)
        self.assertIn("its digest does not match these weights", message)
        code, out = self.cli(path, "--dtype", "fp16")
        self.assertEqual(code, 1, out)  # the report checks the reference on the mapped weights, as the load does
        self.assertIn(f"The publisher reference in `{REFERENCE_FIELD}` ('{LLAMA2}') is no evidence here", out)

    def test_an_edit_the_sampled_reference_misses_is_caught_where_the_copy_runs(self):
        """
        Evidence is bound by a sample of each weight (every value would tax every load: seconds and the whole file
        read at 7B): one value edited between two sampled ones keeps the copy's evidence at load, and error mode then
        raises at the first non-finite fp16 forward instead (the sentinel), never returning the NaN logits.
        """
        edited = AutoModelForCausalLM.from_pretrained(self.path("llama_copy"), dtype=torch.float32)
        [name for name, _ in edited.named_parameters()]
        weight = edited.model.layers[0].mlp.up_proj.weight
        start, length = 0, min(weight.numel(), SAMPLED_VALUES)  # each weight's first values
        self.assertLess(length, weight.numel())  # else every value is sampled and the edit below cannot be missed
        before = binding_digest(edited)
        with torch.no_grad():
            weight.view(-1)[start + length] = 1e6  # the value right after a sampled run
        self.assertEqual(binding_digest(edited), before)
        kept = weight.view(-1)[start].item()
        with torch.no_grad():
            weight.view(-1)[start] = 1e6  # a sampled value
        self.assertNotEqual(binding_digest(edited), before)
        with torch.no_grad():
            weight.view(-1)[start] = kept

        path = os.path.join(self.tmp, "llama_edited_unsampled")
        edited.save_pretrained(path)
        reset_warning_cache()
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        ids = torch.arange(32)[None] % 64
        with torch.no_grad(), self.assertRaises(TrainedPrecisionRiskError) as raised:
            model(input_ids=ids)
        self.assertIn("fp16", str(raised.exception))

    def edited_copy(self, name, edit):
        """A copy of the checkpoint `name` with `edit` applied to its `config.json`; returns its directory."""
        path = os.path.join(self.tmp, f"{name}_config_edited")
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(self.path(name), path)
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        edit(config)
        with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
        return path

    @parameterized.expand(
        [
            ("plan", T5ForConditionalGeneration, "t5_planned", "layer_norm_epsilon", "Its stored fp16 plan"),
            ("run", AutoModelForCausalLM, "finished", "layer_norm_epsilon", "The finished run in"),
            ("reference", AutoModelForCausalLM, "llama_copy", "rms_norm_eps", "The publisher reference in"),
        ]
        if is_torch_available()
        else []
    )
    def test_evidence_made_before_a_config_edit_stops_clearing_fp16(self, _, cls, name, field, what):
        """A plan, a run, a publisher reference: bound to the config too, so an edit of the forward's numbers warns."""

        def bookkeeping(config):
            config.update(transformers_version="0.0.1", _name_or_path="elsewhere", use_cache=False)

        reset_warning_cache()
        with LoggingLevel(logging.WARNING), CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
            cls.from_pretrained(
                self.edited_copy(name, bookkeeping), dtype=torch.float16, trained_precision_check="error"
            )
        self.assertEqual(cl.out, "")  # still evidence: nothing the forward computes changed

        def forward_field(config):
            config[field] = config[field] * 100

        reset_warning_cache()
        with self.assertRaises(TrainedPrecisionRiskError) as raised:
            cls.from_pretrained(
                self.edited_copy(name, forward_field), dtype=torch.float16, trained_precision_check="error"
            )
        message = str(raised.exception)
        self.assertIn(what, message)
        self.assertIn("no evidence here", message)
        self.assertIn("its digest does not match these weights and config", message)
        reset_warning_cache()
        with LoggingLevel(logging.WARNING), CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
            cls.from_pretrained(self.edited_copy(name, forward_field), dtype=torch.float16)
        self.assertIn("does not match these weights and config", cl.out)  # the warning is back, with the reason

    @parameterized.expand(
        [
            ("run", AutoModelForCausalLM, "finished", "trained_precision_run", "train it again with this version"),
            (
                "reference",
                AutoModelForCausalLM,
                "llama_copy",
                "trained_precision_reference",
                "itself and save it again",
            ),
        ]
        if is_torch_available()
        else []
    )
    def test_a_binding_of_an_older_version_is_no_evidence(self, _, cls, name, field, rerun):
        """A binding without `version` (version 1: the full or sampled weights' digest, no config): rerun what made it."""

        def older(config):
            binding = config[field]["binding"]
            del binding["version"]
            if field == REFERENCE_FIELD:
                binding["sampled"] = True

        reset_warning_cache()
        with self.assertRaises(TrainedPrecisionRiskError) as raised:
            cls.from_pretrained(self.edited_copy(name, older), dtype=torch.float16, trained_precision_check="error")
        message = str(raised.exception)
        self.assertIn("it records no binding to the weights and config it was made on (an older version", message)
        self.assertIn(rerun, message)

    def test_every_case_agrees_on_every_path(self):
        """The table's answers, seen together: what users meet is the same answer everywhere."""
        for (name,) in CASES:
            case = self.case(name)
            reset_warning_cache()
            _, out = self.load(case, trained_precision_check="warn")
            code, _ = self.cli(case["checkpoint"], "--dtype", case["runtime"])
            self.assertEqual("but is being loaded in" in out, code == 1, name)

    # ---------------------------------------------------------------------------------------------------------------
    # a composite model, before and after `transformers precision set`

    def composite_answers(self, directory):
        """(loader warnings at fp16, CLI exit code at fp16, its JSON report)."""
        reset_warning_cache()
        with CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
            EncoderDecoderModel.from_pretrained(directory, dtype=torch.float16)
        code, out = self.cli(directory, "--dtype", "fp16", "--json")
        return cl.out, code, json.loads(out)

    def test_encoder_decoder_cli_and_loader_agree(self):
        directory = os.path.join(self.tmp, "encdec_set")
        shutil.copytree(self.path("encdec"), directory)

        warnings, code, report = self.composite_answers(directory)
        self.assertEqual(code, 1)
        self.assertEqual(warnings.count("was trained in bf16"), 1, warnings)
        self.assertEqual(sorted(report["sub_models"]), ["decoder", "encoder"])
        text = self.cli(directory, "--dtype", "fp16")[1]
        for key in ("encoder", "decoder"):
            self.assertIn(f"Sub-model {key} (bert): trained in bf16 (config)", text)
        self.assertIn("Whole model at fp16: risky", text)
        for sub in report["sub_models"].values():
            self.assertEqual(sub["model_type"], "bert")
            self.assertEqual(sub["trained_precision"]["effective"], "bf16")
            self.assertEqual(sub["verdicts"]["fp16"]["status"], "risky")

        self.assertEqual(self.cli("set", directory, "--precision", "unknown", "--force")[0], 0)
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            saved = json.load(f)
        self.assertNotIn("trained_precision", saved)
        self.assertNotIn("trained_precision", saved["encoder"])
        self.assertNotIn("trained_precision", saved["decoder"])
        warnings, code, report = self.composite_answers(directory)
        self.assertEqual((code, report["status"]), (3, "unknown"))
        self.assertEqual(warnings, "")
        # the loader agrees that nothing is known: error mode has nothing to stop
        EncoderDecoderModel.from_pretrained(directory, dtype=torch.float16, trained_precision_check="error")

        self.assertEqual(self.cli("set", directory, "--precision", "fp32", "--force")[0], 0)
        warnings, code, report = self.composite_answers(directory)
        self.assertEqual(code, 1)
        self.assertEqual(warnings.count("was trained in"), 1, warnings)  # one model, one precision, one warning
        self.assertIn("was trained in fp32", warnings)
        self.assertEqual({sub["trained_precision"]["effective"] for sub in report["sub_models"].values()}, {"fp32"})

    def test_set_refuses_a_sub_config_conflict_naming_it(self):
        directory = os.path.join(self.tmp, "encdec_conflict")
        shutil.copytree(self.path("encdec"), directory)
        config_path = os.path.join(directory, "config.json")
        with open(config_path, encoding="utf-8") as f:
            data = json.load(f)
        del data["trained_precision"]
        data["decoder"]["trained_precision"] = "fp32"
        with open(config_path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
        with open(config_path, encoding="utf-8") as f:
            before = f.read()
        code, out = self.cli("set", directory, "--precision", "bf16")
        self.assertNotEqual(code, 0)
        self.assertIn("sub-config `decoder`", out)
        with open(config_path, encoding="utf-8") as f:
            self.assertEqual(f.read(), before)  # nothing written, not even the top level
        code, _ = self.cli("set", directory, "--precision", "bf16", "--force")
        self.assertEqual(code, 0)
        with open(config_path, encoding="utf-8") as f:
            data = json.load(f)
        self.assertEqual([data[k].get("trained_precision") for k in ("encoder", "decoder")], ["bf16", "bf16"])
        self.assertEqual(data["trained_precision"], "bf16")

    def test_set_changes_one_line_per_config_and_nothing_else(self):
        model = tiny_encoder_decoder()
        text = model.config.to_json_string()
        new = set_config_field(text, "bf16")
        added = [line for line in new.splitlines() if line not in text.splitlines()]
        self.assertEqual([line.strip() for line in added], ['"trained_precision": "bf16",'] * 3)
        data = json.loads(new)
        self.assertEqual([data[k]["trained_precision"] for k in ("encoder", "decoder")], ["bf16", "bf16"])
        indents = sorted(len(line) - len(line.lstrip()) for line in added)
        self.assertEqual(indents, [2, 4, 4])  # each at its object's own indentation
        self.assertEqual(set_config_field(new, "bf16"), new)  # running it again changes nothing
        self.assertEqual(set_config_field(new, "unknown", force=True), text)

    def test_json_sub_configs_are_the_ones_the_stamp_writes(self):
        model = tiny_encoder_decoder()
        from_config = [key for key, _ in sub_config_items(model.config)]
        from_json = [key for key, _ in sub_config_items(model.config.to_dict())]
        self.assertEqual(sorted(from_config), ["decoder", "encoder"])
        self.assertEqual(sorted(from_json), sorted(from_config))

    def test_the_report_imports_no_model_class(self):
        """The report stays torch-free: upstream's mitigation is read from the class only with `--audit`."""
        script = (
            "import sys; from transformers.trained_precision.commands.inspection import inspect_checkpoint; "
            f"verdict = inspect_checkpoint({self.path('t5')!r}).verdict('fp16'); "
            "print(verdict.status, verdict.mitigation, 'torch' in sys.modules)"
        )
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
        self.assertEqual(result.stdout.split(), ["risky", "None", "False"])

    # ---------------------------------------------------------------------------------------------------------------
    # provenance

    def test_the_sentinel_names_the_evidence_that_cleared_the_load(self):
        # the Hub id's reference is judged with the config before the weights exist; a copy's once they are loaded
        for name in ("llama2_at_fp16", "llama2_saved_copy_at_fp16", "llama2_bf16_copy_at_fp16"):
            with self.subTest(name):
                model, _ = self.load(self.case(name))
                if self.case(name)["risky"]:
                    self.assertIsNone(cleared_by(model))
                else:
                    self.assertIn(f"its publisher runs '{LLAMA2}' in fp16", cleared_by(model))

    def test_a_cast_after_a_registry_load_still_names_the_registry(self):
        model, out = self.load(self.case("llama2_at_bf16"))
        self.assertEqual(model.config.trained_precision, "bf16")  # persisted, so a save keeps it
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
            model.float().to(torch.float16)
        self.assertIn(f"registry: {LLAMA2}, {lookup(LLAMA2).citation}", cl.out)
        self.assertNotIn("from its config", cl.out)


class MalformedConfigTest(TestCasePlus):
    def test_a_config_nested_too_deeply_is_bad_input(self):
        """`json` recurses once per level: 100,000 nested arrays are a malformed file (exit 2), not a bug (exit 70)."""
        directory = self.get_auto_remove_tmp_dir()
        text = '{"model_type": "gpt2", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
        with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
            f.write(text)

        def run(*args):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                try:
                    code = cli.main(list(args))
                except SystemExit as e:
                    code = e.code
            return code or 0, out.getvalue()

        for args in ([directory], [directory, "--dtype", "fp16"], [directory, "--json"]):
            code, out = run(*args)
            self.assertEqual(code, 2, out)
            self.assertIn("nested too deeply", out)
        code, out = run("set", directory, "--precision", "bf16")
        self.assertEqual(code, 4, out)  # `set` skips a malformed file, as for any malformed JSON
        self.assertIn("nested too deeply", out)
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            self.assertEqual(f.read(), text)  # nothing modified


@require_torch
class BindingTest(unittest.TestCase):
    """The one binding of every kind of evidence: the weights' names, shapes, dtypes and a sample of values, the config."""

    def llama(self, **kwargs):
        torch.manual_seed(0)
        values = {"vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1}
        return LlamaForCausalLM(LlamaConfig(**{**values, "num_attention_heads": 2, **kwargs}))

    def test_a_finished_run_says_what_its_binding_samples(self):  # review 62b L4
        binding = {"digest": "x", "max_tokens": 1024, "backend": "cpu", "run": "pure", "version": BINDING_VERSION}
        text = RunRecord("finished", "pure", 200, binding=binding).describe("bf16")
        self.assertIn("a digest of their names, shapes and a sample of each one's first values", text)
        self.assertNotIn("every value", text)

    def test_the_config_fields_the_forward_computes_with_are_bound(self):
        from transformers import GraniteConfig

        for config, field, value in (
            (LlamaConfig(), "rms_norm_eps", 1e-3),
            (GraniteConfig(), "logits_scaling", 8.0),
            (GraniteConfig(), "embedding_multiplier", 2.0),
        ):
            before = config_digest(config)
            setattr(config, field, value)
            self.assertNotEqual(config_digest(config), before, field)

    def test_the_precision_record_and_evidence_fields_are_not_bound(self):
        config = LlamaConfig()
        before = config_digest(config)
        config.trained_precision, config.pretraining_precision = "bf16", "fp32"
        setattr(config, FP16_PLAN_FIELD, {"version": 4})
        setattr(config, RUN_FIELD, {"status": "finished"})
        setattr(config, REFERENCE_FIELD, {"model_id": LLAMA2})
        config.dtype, config.name_or_path, config.transformers_version = "float16", "elsewhere", "0.0.1"
        self.assertEqual(config_digest(config), before)
        composite = tiny_encoder_decoder().config
        before = config_digest(composite)
        composite.decoder.trained_precision = "bf16"
        self.assertEqual(config_digest(composite), before)
        composite.decoder.layer_norm_eps = 1e-3  # a sub-config's forward field
        self.assertNotEqual(config_digest(composite), before)

    def test_a_changed_name_shape_dtype_or_sampled_value_breaks_the_binding(self):
        model = self.llama()
        before = binding_digest(model)
        self.assertEqual(binding_digest(self.llama()), before)  # the same weights and config
        self.assertEqual(binding_digest(self.llama().to(torch.float16)), before)  # values count as fp16
        mixed = self.llama().to(torch.float16)
        mixed.model.layers[0].mlp.float()  # stored in fp32 (as `_keep_in_fp32_modules` loads), counted as fp16
        self.assertEqual(binding_digest(mixed), before)
        self.assertNotEqual(binding_digest(self.llama(vocab_size=65)), before)  # a shape
        self.assertNotEqual(binding_digest(model, ["model.layers.0.mlp"]), before)  # fp32 in an fp16 plan
        mlp = self.llama().model.layers[0].mlp
        mlp.renamed = mlp.up_proj  # a name
        del mlp.up_proj
        self.assertNotEqual(binding_digest(mlp), binding_digest(self.llama().model.layers[0].mlp))
        quantized = self.llama()
        weight = quantized.model.layers[0].mlp.up_proj.weight
        weight.requires_grad_(False)
        weight.data = weight.data.to(torch.int8)  # a dtype
        self.assertNotEqual(binding_digest(quantized), before)
        with torch.no_grad():
            [name for name, _ in model.named_parameters()]
            first = 0  # the binding samples each weight's first values
            model.model.layers[0].mlp.up_proj.weight.view(-1)[first] += 1.0  # a sampled value
        self.assertNotEqual(binding_digest(model), before)

    def test_a_subject_digests_once_and_a_new_check_sees_an_edit_through_data(self):
        from transformers.trained_precision.facts import binding

        model = self.llama()
        subject = weights_subject(model)
        with mock.patch.object(binding, "_weights_digest", wraps=binding._weights_digest) as digest:
            first = subject.digest()
            self.assertEqual(subject.digest(), first)
            self.assertEqual(digest.call_count, 1)  # one load or cast digests once
        # an edit through `.data` (what PEFT's merge does) moves no version counter: the next check must still see it
        [name for name, _ in model.named_parameters()]
        start = 0  # the binding samples each weight's first values
        model.lm_head.weight.data.view(-1)[start] += 1.0
        self.assertNotEqual(weights_subject(model).digest(), first)
        self.assertNotEqual(binding_digest(model), first)


@require_torch
class EvidenceRulesTest(unittest.TestCase):
    """The record rules, on records bound to a real tiny model (what the Trainer writes), checked against it."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model = tiny_gpt_neo()
        cls.subject = weights_subject(cls.model)

    def resolve(self, config):
        """`config` with its run record bound to the tiny model, resolved against that model."""
        record = config.get(RUN_FIELD)
        if isinstance(record, dict):
            binding = bind(self.model, record.get("compute", "pure"), 32, self.subject.backend)
            config = {**config, RUN_FIELD: {**record, "binding": binding}}
        return resolve_trained_precision(config, subject=self.subject)

    def test_lineage_prior_is_the_oldest_stage(self):
        self.assertIsNotNone(assess_lineage_risk(("bf16", "fp16"), "fp16"))
        self.assertIsNone(assess_lineage_risk(("bf16", "fp32"), "bf16"))
        self.assertIsNotNone(assess_lineage_risk(("bf16", "fp32"), "fp16"))
        self.assertIsNone(assess_lineage_risk(("unknown",), "fp16"))

    @parameterized.expand(
        [
            ("finished", {}, False),
            ("diverged", {}, True),
            ("started", {}, True),
            ("finished", {"optimizer_steps": MIN_RUN_STEPS - 1}, True),
            ("finished", {"compute": "amp"}, True),  # an AMP run says nothing about fp16 weights
            ("finished", {"fp16_plan": True}, True),  # it rested on a plan the config no longer holds
        ]
    )
    def test_a_run_record_counts_only_when_finished_long_enough_and_of_the_kind(self, status, changes, risky):
        record = {"status": status, "compute": "pure", "optimizer_steps": MIN_RUN_STEPS, "fp16_plan": False}
        config = {"trained_precision": "fp16", "pretraining_precision": "bf16", RUN_FIELD: {**record, **changes}}
        info = self.resolve(config)
        self.assertEqual(info.risk("fp16") is not None, risky)
        self.assertIsNotNone(info.assess("fp16").prior)

    def test_an_amp_run_is_evidence_for_amp_training_only(self):
        record = {"status": "finished", "compute": "amp", "optimizer_steps": MIN_RUN_STEPS, "fp16_plan": False}
        info = self.resolve({"trained_precision": "fp16", "pretraining_precision": "bf16", RUN_FIELD: record})
        self.assertIsNone(info.assess("fp16", compute="amp").risk)
        self.assertIsNotNone(info.assess("fp16").risk)  # loads and casts run pure fp16 weights
        pure = {**record, "compute": "pure"}
        info = self.resolve({"trained_precision": "fp16", "pretraining_precision": "bf16", RUN_FIELD: pure})
        self.assertIsNone(info.assess("fp16", compute="amp").risk)  # a pure run covers AMP training too

    def test_a_record_without_kind_or_steps_is_no_evidence(self):
        """A bare `"finished"` (written before the run's kind and steps were recorded) proves nothing."""
        config = {"trained_precision": "fp16", "pretraining_precision": "bf16", RUN_FIELD: "finished"}
        self.assertEqual(read_run_record(config), RunRecord("finished"))
        self.assertIsNotNone(self.resolve(config).risk("fp16"))

    def test_a_record_with_a_member_this_version_does_not_know_is_no_evidence(self):
        record = {"status": "finished", "compute": "pure", "optimizer_steps": MIN_RUN_STEPS, "skipped_steps": 0}
        config = {"trained_precision": "fp16", "pretraining_precision": "bf16", RUN_FIELD: record}
        self.assertIsNone(self.resolve(config).risk("fp16"))
        config[RUN_FIELD] = {**record, "kept_in_fp32_by": "something newer"}
        self.assertEqual(read_run_record(config), RunRecord("finished"))
        self.assertIsNotNone(self.resolve(config).risk("fp16"))

    def test_a_run_on_a_plan_lasts_as_long_as_the_plan(self):
        run = RunRecord("finished", "pure", MIN_RUN_STEPS, 0, fp16_plan=True)
        self.assertIsNone(find_evidence("fp16", trained="fp16", run=run))
        self.assertEqual(find_evidence("fp16", trained="fp16", run=run, plan=VALID_PLAN).kind, FP16_PLAN)
        self.assertEqual(find_evidence("bf16", trained="bf16", run=run).kind, FINISHED_RUN)  # a plan is fp16's only

    def test_the_evidence_order(self):
        entry = lookup(LLAMA2)
        run = RunRecord("finished", "pure", MIN_RUN_STEPS)
        found = find_evidence("fp16", entry=entry, plan=VALID_PLAN, trained="fp16", run=run)
        self.assertEqual(found.kind, REFERENCE_RUNTIME)
        self.assertEqual(find_evidence("fp16", plan=VALID_PLAN, trained="fp16", run=run).kind, FP16_PLAN)
        self.assertEqual(find_evidence("fp16", trained="fp16", run=run).kind, FINISHED_RUN)
        self.assertIsNone(find_evidence("bf16", entry=entry))  # the reference runtime covers its own precision only
        self.assertIsNone(find_evidence("fp16"))

    def test_a_stored_dtype_is_no_evidence(self):
        stored_only = [e for e in REGISTRY if e.stored_dtype and e.reference_runtime is None]
        self.assertTrue(stored_only)
        for entry in stored_only:
            self.assertIsNone(find_evidence(entry.stored_dtype, entry=entry), entry.model_id)

    def test_read_fp16_plan(self):
        self.assertEqual(read_fp16_plan({FP16_PLAN_FIELD: VALID_PLAN}), VALID_PLAN)
        failed = {**VALID_PLAN, "validation": {**VALID_PLAN["validation"], "passed": False}}
        self.assertIsNone(read_fp16_plan({FP16_PLAN_FIELD: failed}))
        self.assertIsNone(read_fp16_plan({}))

    @parameterized.expand(
        [
            ("not_an_object", ["wo"]),
            ("missing_member", {k: v for k, v in VALID_PLAN.items() if k != "headroom"}),
            ("wrong_version", {**VALID_PLAN, "version": 2}),
            ("wrong_dtype", {**VALID_PLAN, "dtype": "bf16"}),
            ("bool_as_number", {**VALID_PLAN, "headroom": True}),
            ("bad_module_name", {**VALID_PLAN, "modules": [""]}),
            ("bad_validation", {**VALID_PLAN, "validation": {**VALID_PLAN["validation"], "passed": "yes"}}),
        ]
    )
    def test_a_malformed_plan_warns_once_and_is_absent(self, _, plan):
        self.assertIsNotNone(fp16_plan_problem(plan))
        config = {FP16_PLAN_FIELD: plan, "_name_or_path": f"malformed-{_}"}
        with CaptureLogger(logging.get_logger("transformers.trained_precision.facts.evidence")) as cl:
            self.assertIsNone(read_fp16_plan(config))
            self.assertIsNone(read_fp16_plan(config))
        self.assertEqual(cl.out.count("is malformed"), 1, cl.out)
