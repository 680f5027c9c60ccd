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
The Trainer stamps the run's precision into `config.trained_precision` (and every checkpoint), warns when the run is
risky for how the model was trained, and custom loops can do the same with `stamp_trained_precision`.

This file is also the script of the distributed test: `torchrun --nproc_per_node 2 test_trainer_trained_precision_stamp.py --output_dir
DIR` trains on the CPU (gloo) and writes what each rank stamped.
"""

import glob
import json
import os
import sys
import types
from concurrent.futures import Future
from unittest import mock

from parameterized import parameterized

from transformers import TrainingArguments, is_torch_available
from transformers.testing_utils import (
    CaptureLogger,
    LoggingLevel,
    TestCasePlus,
    execute_subprocess_async,
    mockenv_context,
    require_accelerate,
    require_peft,
    require_torch,
    require_torch_gpu,
)
from transformers.trained_precision.testing_utils import free_port, tiny_gpt_neo_config
from transformers.utils import logging


if is_torch_available():
    import torch

    from transformers import GPTNeoForCausalLM, Trainer, TrainerCallback
    from transformers.trained_precision.guard.check import TrainedPrecisionRiskError
    from transformers.trained_precision.record.stamp import (
        finish_trained_precision_run,
        note_optimizer_step,
        note_training_loss,
        resolve_run_compute,
        resolve_run_precision,
        stamp_trained_precision,
    )


STAMP_LOGGER = "transformers.trained_precision.record.stamp"


def tiny_gpt_neo(dtype=None, **config_kwargs):
    torch.manual_seed(0)
    model = GPTNeoForCausalLM(tiny_gpt_neo_config(**config_kwargs))
    return model.to(dtype) if dtype is not None else model


class TinyLMDataset:
    """16 sequences of `length` (8) token ids, the labels being the inputs."""

    def __init__(self, length=8):
        self.length = length

    def __len__(self):
        return 16

    def __getitem__(self, i):
        ids = torch.arange(i, i + self.length) % 64
        return {"input_ids": ids, "labels": ids}


def tiny_args(output_dir, **kwargs):
    defaults = {
        "use_cpu": True,
        "max_steps": 2,
        "per_device_train_batch_size": 4,
        "save_steps": 2,
        "report_to": [],
        "logging_steps": 100,
        "disable_tqdm": True,
    }
    defaults.update(kwargs)
    return TrainingArguments(output_dir, **defaults)


def read_trained_precision(directory):
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        return json.load(f).get("trained_precision")


def fake_accelerator(mixed_precision="no", device="cuda", distributed_type="NO", **state):
    """An object shaped like `accelerate.Accelerator` for what the decision reads: accelerators of other devices."""
    return types.SimpleNamespace(
        mixed_precision=mixed_precision,
        device=torch.device(device),
        distributed_type=distributed_type,
        state=types.SimpleNamespace(**state),
    )


def reset_accelerate_state():
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


def clear_warning_caches():
    logging.get_logger(STAMP_LOGGER).warning_once.cache_clear()
    logging.get_logger(STAMP_LOGGER).info_once.cache_clear()


@require_torch
@require_accelerate
class ResolveRunPrecisionTest(TestCasePlus):
    """The decision alone, from resolved settings (fp16 and DeepSpeed cannot run on this CPU)."""

    def setUp(self):
        super().setUp()
        self.output_dir = self.get_auto_remove_tmp_dir()

    def tearDown(self):
        reset_accelerate_state()
        super().tearDown()

    @parameterized.expand([("fp32", {}, "fp32"), ("bf16", {"bf16": True}, "bf16"), ("fp16", {"fp16": True}, "fp16")])
    def test_from_training_arguments(self, _, flags, expected):
        with mockenv_context("ACCELERATE_MIXED_PRECISION"):
            args = tiny_args(self.output_dir, **flags)
            self.assertEqual(resolve_run_precision(tiny_gpt_neo(), args=args), expected)

    def test_fp16_on_an_accelerator_device(self):
        self.assertEqual(resolve_run_precision(tiny_gpt_neo(), accelerator=fake_accelerator("fp16")), "fp16")

    def test_fp16_on_the_cpu_is_what_the_weights_are(self):
        # accelerate runs no fp16 autocast on the CPU: the run computes in the parameters' dtype.
        cpu = fake_accelerator("fp16", device="cpu")
        self.assertEqual(resolve_run_precision(tiny_gpt_neo(), accelerator=cpu), "fp32")
        self.assertEqual(resolve_run_precision(tiny_gpt_neo(torch.float16), accelerator=cpu), "fp16")

    def test_fp8_counts_as_bf16(self):
        self.assertEqual(resolve_run_precision(tiny_gpt_neo(), accelerator=fake_accelerator("fp8")), "bf16")

    def test_accelerate_mixed_precision_environment_variable(self):
        with mockenv_context(ACCELERATE_MIXED_PRECISION="bf16"):
            self.assertEqual(resolve_run_precision(tiny_gpt_neo()), "bf16")
            self.assertEqual(resolve_run_precision(tiny_gpt_neo(), args=tiny_args(self.output_dir)), "bf16")
        with mockenv_context(ACCELERATE_MIXED_PRECISION="no"):
            self.assertEqual(resolve_run_precision(tiny_gpt_neo()), "fp32")

    @parameterized.expand(
        [
            ("bf16", {"bf16": {"enabled": True}}, "no", "bf16"),
            ("fp16", {"fp16": {"enabled": True}, "bf16": {"enabled": False}}, "no", "fp16"),
            ("legacy_bfloat16_key", {"bfloat16": {"enabled": True}}, "no", "bf16"),
            # DeepSpeed reads "enabled" as a pydantic bool: 1 and "yes" enable it too; "amp" (apex) is fp16 autocast
            ("enabled_1", {"bf16": {"enabled": 1}}, "no", "bf16"),
            ("enabled_yes", {"fp16": {"enabled": "yes"}}, "no", "fp16"),
            ("enabled_0", {"bf16": {"enabled": 0}}, "no", "fp32"),
            ("apex_amp", {"amp": {"enabled": True, "opt_level": "O1"}}, "no", "fp16"),
            ("auto_follows_the_run", {"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}, "fp16", "fp16"),
            ("auto_without_mixed_precision", {"bf16": {"enabled": "auto"}}, "no", "fp32"),
            ("no_precision_section", {"zero_optimization": {"stage": 2}}, "no", "fp32"),
            # accelerate reports DeepSpeed runs as "bf16"; the DeepSpeed config decides.
            ("config_beats_accelerate", {"fp16": {"enabled": True}}, "bf16", "fp16"),
        ]
    )
    def test_deepspeed_config(self, _, ds_config, mixed_precision, expected):
        model = tiny_gpt_neo()
        self.assertEqual(
            resolve_run_precision(model, accelerator=fake_accelerator(mixed_precision), deepspeed_config=ds_config),
            expected,
        )
        # accelerate's real plugin, built on the CPU (it needs a ZeRO section): the decision reads what it resolved
        from accelerate.utils import DeepSpeedPlugin

        plugin = DeepSpeedPlugin(hf_ds_config={"zero_optimization": {"stage": 2}, **ds_config})
        accelerator = fake_accelerator(mixed_precision, distributed_type="DEEPSPEED", deepspeed_plugin=plugin)
        self.assertEqual(resolve_run_precision(model, accelerator=accelerator), expected)

    def test_a_prepared_accelerator_gets_the_trainers_answer(self):
        # with a real accelerator, the extension asks the core's `get_training_precision`: one answer for both
        from accelerate import Accelerator

        from transformers.trainer_utils import get_training_precision

        cases = [("fp16", torch.float32, "fp32"), ("fp16", torch.float16, "fp16")]
        cases += [("bf16", torch.float32, "bf16"), ("bf16", torch.float16, "fp16"), ("no", torch.bfloat16, "bf16")]
        for mixed_precision, dtype, expected in cases:
            reset_accelerate_state()
            accelerator = Accelerator(cpu=True, mixed_precision=mixed_precision)
            model = accelerator.prepare(tiny_gpt_neo(dtype))
            self.assertEqual(resolve_run_precision(model, accelerator=accelerator), expected, mixed_precision)
            self.assertEqual(get_training_precision(model, accelerator)[0], expected, mixed_precision)
            amp = expected == "bf16" and dtype == torch.float32
            self.assertEqual(resolve_run_compute(model, accelerator=accelerator), "amp" if amp else "pure")

    def test_deepspeed_config_file_and_pure_bf16_weights(self):
        path = os.path.join(self.output_dir, "ds_config.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"zero_optimization": {"stage": 3}}, f)
        self.assertEqual(resolve_run_precision(tiny_gpt_neo(torch.bfloat16), deepspeed_config=path), "bf16")
        with self.assertRaisesRegex(TypeError, "DeepSpeed config must be a dict"):
            resolve_run_precision(tiny_gpt_neo(), deepspeed_config=3)

    @parameterized.expand(
        [
            ("bf16_policy", "MixedPrecision", "bfloat16", "no", "bf16"),
            ("fp16_policy", "MixedPrecision", "float16", "no", "fp16"),
            ("dict_policy", "dict", "bfloat16", "no", "bf16"),
            ("no_policy", None, None, "bf16", "bf16"),
        ]
    )
    def test_fsdp_mixed_precision_policy(self, _, kind, param_dtype, mixed_precision, expected):
        # accelerate's real plugin objects, built on the CPU, for FSDP1 (`MixedPrecision`) and FSDP2
        # (`MixedPrecisionPolicy`); a dict policy is converted by the plugin itself
        from accelerate.utils import FullyShardedDataParallelPlugin

        param_dtype = getattr(torch, param_dtype) if param_dtype else None
        for version in (1, 2):
            if kind == "MixedPrecision":
                from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy

                policy_cls = MixedPrecision if version == 1 else MixedPrecisionPolicy
                policy = policy_cls(param_dtype=param_dtype, reduce_dtype=torch.float32)
            elif kind == "dict":
                policy = {"param_dtype": param_dtype, "reduce_dtype": torch.float32}
                policy["buffer_dtype" if version == 1 else "output_dtype"] = torch.float32
            else:
                policy = None
            plugin = FullyShardedDataParallelPlugin(fsdp_version=version, mixed_precision_policy=policy)
            if mixed_precision != "no":
                plugin.set_mixed_precision(mixed_precision)  # what accelerate's state does for a mixed-precision run
            accelerator = fake_accelerator(mixed_precision, distributed_type="FSDP", fsdp_plugin=plugin)
            self.assertEqual(resolve_run_precision(tiny_gpt_neo(), accelerator=accelerator), expected, version)

    def test_trainable_parameters_decide(self):
        # pure half-precision training
        self.assertEqual(resolve_run_precision(tiny_gpt_neo(torch.bfloat16)), "bf16")
        self.assertEqual(resolve_run_precision(tiny_gpt_neo(torch.float16)), "fp16")
        # bf16 weights with fp32 layer norms: most trainable elements are bf16
        model = tiny_gpt_neo(torch.bfloat16)
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.float()
        self.assertEqual(resolve_run_precision(model), "bf16")
        # fp32 adapters on a frozen bf16 base compute in the base's dtype
        model = tiny_gpt_neo(torch.bfloat16)
        model.requires_grad_(False)
        model.lm_head = torch.nn.Linear(16, 64, bias=False)  # the only trainable (fp32) part, a minority
        self.assertEqual(resolve_run_precision(model), "bf16")
        # nothing to look at
        self.assertEqual(resolve_run_precision(None), "fp32")


@require_torch
@require_accelerate
class TrainerStampTestBase(TestCasePlus):
    """A temporary output dir, fresh warning caches, no precision variables from the environment, and a reset
    accelerate state afterwards."""

    def setUp(self):
        super().setUp()
        self.output_dir = self.get_auto_remove_tmp_dir()
        clear_warning_caches()
        env = mockenv_context("ACCELERATE_MIXED_PRECISION", "TRANSFORMERS_TRAINED_PRECISION_CHECK")
        env.__enter__()
        self.addCleanup(env.__exit__, None, None, None)

    def tearDown(self):
        reset_accelerate_state()
        super().tearDown()


class TrainerStampTest(TrainerStampTestBase):
    def train(self, model, resume_from_checkpoint=None, length=8, **kwargs):
        trainer = Trainer(model, tiny_args(self.output_dir, **kwargs), train_dataset=TinyLMDataset(length))
        trainer.train(resume_from_checkpoint=resume_from_checkpoint)
        trainer.save_model()
        return trainer

    def assert_saved(self, expected, checkpoints=("checkpoint-2",)):
        found = sorted(os.path.basename(d) for d in glob.glob(os.path.join(self.output_dir, "checkpoint-*")))
        self.assertEqual(found, sorted(checkpoints))
        for name in checkpoints:
            self.assertEqual(read_trained_precision(os.path.join(self.output_dir, name)), expected, name)
        self.assertEqual(read_trained_precision(self.output_dir), expected, "final save_model")

    def test_fp32_run(self):
        trainer = self.train(tiny_gpt_neo())
        self.assertEqual(trainer.model.config.trained_precision, "fp32")
        self.assert_saved("fp32")

    def test_bf16_mixed_precision_every_checkpoint(self):
        trainer = self.train(tiny_gpt_neo(), bf16=True, max_steps=4)
        self.assertEqual(trainer.model.config.trained_precision, "bf16")
        self.assert_saved("bf16", checkpoints=("checkpoint-2", "checkpoint-4"))
        with open(os.path.join(self.output_dir, "config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["dtype"], "float32")  # storage stays fp32: the two fields are independent

    @parameterized.expand([("without_bf16_flag", False), ("with_bf16_flag", True)])
    def test_pure_bf16_weights(self, _, bf16_flag):
        self.train(tiny_gpt_neo(torch.bfloat16), bf16=bf16_flag)
        self.assert_saved("bf16")

    def test_fp16_flag_on_the_cpu(self):
        # accelerate ignores fp16 on the CPU: the run is fp32, and one warning says so, the core's (the Trainer's
        # `get_training_precision`, which the extension asks too)
        logging.warning_once.cache_clear()  # once per process: another test may have said it already
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger("transformers")) as cl:
            self.train(tiny_gpt_neo(), fp16=True)
        self.assert_saved("fp32")
        self.assertEqual(cl.out.count("fp16 mixed precision does not run on the CPU"), 1, cl.out)
        self.assertNotIn("Stamped", cl.out)  # an fp32 run: the stamp logs nothing upstream does not

    def test_bf16_flag_on_the_cpu_says_nothing_about_fp16(self):
        logging.warning_once.cache_clear()
        with CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            self.train(tiny_gpt_neo(), bf16=True)
        self.assertNotIn("fp16 autocast", cl.out)

    def test_accelerate_mixed_precision_environment_variable(self):
        with mockenv_context(ACCELERATE_MIXED_PRECISION="bf16"):
            trainer = self.train(tiny_gpt_neo())
        self.assertEqual(trainer.accelerator.mixed_precision, "bf16")
        self.assert_saved("bf16")

    def test_fine_tuning_a_bf16_model_with_fp16_warns(self):
        """A run that really computes in fp16 on the CPU (fp16 weights, no autocast) warns and is stamped fp16."""
        model = tiny_gpt_neo(torch.float16, trained_precision="bf16")
        model.config._name_or_path = "my-org/bf16-pretrained"
        logger = logging.get_logger(STAMP_LOGGER)
        with CaptureLogger(logger) as cl:
            self.train(model, optim="sgd")
        self.assertEqual(cl.out.count("was trained in bf16"), 1, cl.out)
        for expected in ("my-org/bf16-pretrained", "is being trained in fp16", "65504", "`bf16=True`", "=ignore"):
            self.assertIn(expected, cl.out)
        self.assert_saved("fp16")  # the stamp records what this run computed in
        with open(os.path.join(self.output_dir, "config.json"), encoding="utf-8") as f:
            saved = json.load(f)
        self.assertEqual(saved["pretraining_precision"], "bf16")
        # fp16 weights, no autocast: a pure fp16 run; both of its optimizer steps updated the weights
        expected = {"status": "finished", "compute": "pure", "optimizer_steps": 2, "skipped_steps": 0}
        expected["fp16_plan"] = False
        binding = saved["trained_precision_run"].pop("binding")
        self.assertEqual(saved["trained_precision_run"], expected)
        # bound to what it ran on: the weights it ended on, its longest input (8 tokens) and the backend
        self.assertEqual((binding["run"], binding["max_tokens"]), ("pure", 8))
        self.assertTrue(binding["backend"].startswith("cpu "))
        self.assertEqual(len(binding["digest"]), 64)
        with open(os.path.join(self.output_dir, "checkpoint-2", "config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["trained_precision_run"]["status"], "started")  # saved before the run ended
        # two steps are a smoke test, not evidence: loading it in fp16 still warns
        clear_warning_caches()
        with CaptureLogger(logging.get_logger("transformers.trained_precision.guard.check")) as cl:
            GPTNeoForCausalLM.from_pretrained(self.output_dir, dtype=torch.float16)
        self.assertIn("but is being loaded in fp16", cl.out)

    def test_fp16_warning_modes_and_registry(self):
        with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="error"):
            with self.assertRaises(TrainedPrecisionRiskError):
                self.train(tiny_gpt_neo(torch.float16, trained_precision="bf16"), optim="sgd")
        reset_accelerate_state()
        with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="ignore"):
            with LoggingLevel(logging.WARNING), CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
                self.train(tiny_gpt_neo(torch.float16, trained_precision="bf16"), optim="sgd")
        self.assertEqual(cl.out, "")
        # registry fallback: the config says "unknown", the Hub id is a bf16-pretrained T5
        model = tiny_gpt_neo()
        model.config._name_or_path = "google-t5/t5-small"
        with CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            stamp_trained_precision(model, "fp16")
        self.assertIn("registry", cl.out)
        self.assertIn("was trained in bf16", cl.out)

    @require_torch_gpu
    def test_fp16_mixed_precision_on_a_gpu(self):
        """fp16 AMP for real: autocast on a GPU, fp32 weights; the stamp says fp16 and the run finished."""
        model = tiny_gpt_neo(trained_precision="bf16")
        with CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            trainer = Trainer(
                model, tiny_args(self.output_dir, use_cpu=False, fp16=True), train_dataset=TinyLMDataset()
            )
            trainer.train()
            trainer.save_model()
        self.assertEqual(trainer.accelerator.mixed_precision, "fp16")
        self.assertIn("is being trained in fp16 mixed precision (autocast)", cl.out)
        self.assert_saved("fp16")
        record = trainer.model.config.trained_precision_run
        self.assertEqual((record["status"], record["compute"]), ("finished", "amp"))
        # accelerate's GradScaler skips the steps whose scaled gradients overflow: they are not counted
        self.assertEqual(record["optimizer_steps"] + record["skipped_steps"], 2)
        self.assertEqual(record["optimizer_steps"], trainer.state.global_step - record["skipped_steps"])

    def test_safe_and_mild_runs_do_not_warn(self):
        with LoggingLevel(logging.WARNING), CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            self.train(tiny_gpt_neo(trained_precision="bf16"), bf16=True)
        self.assertEqual(cl.out, "")
        # precision loss under mixed precision is logged at info level only
        with LoggingLevel(logging.WARNING), CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            stamp_trained_precision(tiny_gpt_neo(trained_precision="fp32"), "bf16")
        self.assertNotIn("was trained in fp32", cl.out)
        # the stamp's change of a known value is a record, not a risk: info level too
        self.assertEqual(cl.out, "")
        clear_warning_caches()
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            stamp_trained_precision(tiny_gpt_neo(trained_precision="fp32"), "bf16")
        self.assertIn("was trained in fp32", cl.out)

    def test_precision_loss_never_raises_in_error_mode(self):
        """One level per kind: bf16 AMP over an fp32-trained model is info, so error mode does not stop it."""
        with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="error"):
            self.assertEqual(stamp_trained_precision(tiny_gpt_neo(trained_precision="fp32"), "bf16"), "bf16")
            with self.assertRaises(TrainedPrecisionRiskError):
                stamp_trained_precision(tiny_gpt_neo(trained_precision="fp32"), "fp16")

    def test_bf16_autocast_over_fp16_weights_is_stamped_fp16(self):
        """The norms and the residual stream run in the weights' fp16; only the autocast matmuls run in bf16."""
        # through the resolved settings: torch's CPU layer norm refuses fp16 weights under bf16 autocast
        model = tiny_gpt_neo(torch.float16)
        self.assertEqual(resolve_run_precision(model, args=tiny_args(self.output_dir, bf16=True)), "fp16")
        self.assertEqual(stamp_trained_precision(model, fake_accelerator("bf16", device="cpu")), "fp16")
        self.assertEqual(model.config.trained_precision, "fp16")
        # and the other way round: bf16 autocast over fp32 or bf16 weights is bf16
        self.assertEqual(resolve_run_precision(tiny_gpt_neo(), args=tiny_args(self.output_dir, bf16=True)), "bf16")
        self.assertEqual(
            resolve_run_precision(tiny_gpt_neo(torch.bfloat16), args=tiny_args(self.output_dir, bf16=True)), "bf16"
        )

    def test_a_diverged_run_is_recorded_and_is_no_evidence(self):
        """A loss that goes NaN (hidden as 0 by the Trainer's nan filter) records "diverged"; fp16 still warns."""
        with CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            trainer = self.train(tiny_gpt_neo(torch.float16, trained_precision="bf16"), optim="sgd", learning_rate=1e4)
        self.assertEqual(trainer.model.config.trained_precision_run["status"], "diverged")
        self.assertIn("diverged (a training loss or a weight became inf/NaN)", cl.out)
        check_logger = logging.get_logger("transformers.trained_precision.guard.check")
        clear_warning_caches()
        with CaptureLogger(check_logger) as cl:
            GPTNeoForCausalLM.from_pretrained(self.output_dir, dtype=torch.float16)
        self.assertIn("was trained in bf16", cl.out)

    def test_an_interrupted_run_stays_started(self):
        class Interrupt(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                raise KeyboardInterrupt

        # a pure fp16 run (fp16 weights): an fp32 run writes no record at all
        model = tiny_gpt_neo(torch.float16)
        trainer = Trainer(model, tiny_args(self.output_dir, optim="sgd"), train_dataset=TinyLMDataset())
        trainer.add_callback(Interrupt())
        with self.assertRaises(KeyboardInterrupt):
            trainer.train()
        self.assertEqual(trainer.model.config.trained_precision_run["status"], "started")

    def test_a_plain_fp32_run_writes_no_run_record_and_logs_nothing(self):
        """Nothing turned on: the config gets the RFC's stamp only, and nothing is logged that upstream does not log."""
        model = tiny_gpt_neo()
        model.config.trained_precision_run = {"status": "finished", "compute": "pure", "optimizer_steps": 100}
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            trainer = self.train(
                model, learning_rate=1e4
            )  # its losses go NaN: upstream says nothing, neither does this
        self.assertEqual(cl.out, "")
        self.assertFalse(hasattr(trainer.model.config, "trained_precision_run"))  # an earlier run's record is gone
        for path in (self.output_dir, os.path.join(self.output_dir, "checkpoint-2")):
            with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
                saved = json.load(f)
            self.assertEqual(saved["trained_precision"], "fp32")
            self.assertNotIn("trained_precision_run", saved)

    def test_fp32_fine_tuning_of_a_bf16_model_keeps_its_lineage(self):
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            trainer = self.train(tiny_gpt_neo(trained_precision="bf16"))
        self.assertIn("says `trained_precision='bf16'`, and this run trains in fp32", cl.out)
        self.assertEqual(trainer.model.config.pretraining_precision, "bf16")
        self.assert_saved("fp32")
        with open(os.path.join(self.output_dir, "config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["pretraining_precision"], "bf16")
        check_logger = logging.get_logger("transformers.trained_precision.guard.check")
        clear_warning_caches()
        with CaptureLogger(check_logger) as cl:
            GPTNeoForCausalLM.from_pretrained(self.output_dir, dtype=torch.bfloat16)
        self.assertEqual(cl.out, "")  # no false alarm: most of its training ran in bf16
        with CaptureLogger(check_logger) as cl:
            GPTNeoForCausalLM.from_pretrained(self.output_dir, dtype=torch.float16)
        self.assertIn(
            "was trained in bf16 (from its config's `pretraining_precision`; fine-tuned in fp32 since", cl.out
        )

    def test_a_short_fp32_fine_tune_of_an_unknown_model_leaves_its_risk_unknown(self):
        # the oldest stage decides: nobody recorded how the loaded model was trained, so three fp32 steps do not make
        # it "fp32-trained"; bf16 and fp16 loads stay silent, as before the fine-tune, and error mode raises nothing
        from transformers.trained_precision.guard.check import reset_warning_cache

        base = os.path.join(self.get_auto_remove_tmp_dir(), "base")
        tiny_gpt_neo().save_pretrained(base)
        trainer = self.train(GPTNeoForCausalLM.from_pretrained(base), max_steps=3)
        self.assertEqual(trainer.model.config.trained_precision, "fp32")  # the field still says what this run did
        with open(os.path.join(self.output_dir, "config.json"), encoding="utf-8") as f:
            saved = json.load(f)
        self.assertEqual((saved["trained_precision"], saved["pretraining_precision"]), ("fp32", "unknown"))
        check_logger = logging.get_logger("transformers.trained_precision.guard.check")
        for dtype in (torch.bfloat16, torch.float16):
            reset_warning_cache()
            with LoggingLevel(logging.INFO), CaptureLogger(check_logger) as cl:
                with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="error"):
                    model = GPTNeoForCausalLM.from_pretrained(self.output_dir, dtype=dtype)
            self.assertEqual(cl.out, "", dtype)
        # a second run (bf16 now) keeps the unknown oldest stage
        self.output_dir = self.get_auto_remove_tmp_dir()
        trainer = self.train(model.float(), bf16=True)
        self.assertEqual(trainer.model.config.pretraining_precision, "unknown")

    def test_the_oldest_known_stage_still_decides_after_a_short_fine_tune(self):
        # a bf16-trained checkpoint fine-tuned three fp32 steps still overflows fp16: error mode raises
        base = os.path.join(self.get_auto_remove_tmp_dir(), "base")
        tiny_gpt_neo(trained_precision="bf16").save_pretrained(base)
        self.train(GPTNeoForCausalLM.from_pretrained(base), max_steps=3)
        with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="error"):
            with self.assertRaisesRegex(TrainedPrecisionRiskError, "was trained in bf16"):
                GPTNeoForCausalLM.from_pretrained(self.output_dir, dtype=torch.float16)
        # a model trained from scratch (random weights) has no earlier stage: its run is its lineage
        self.output_dir = self.get_auto_remove_tmp_dir()
        self.train(tiny_gpt_neo(), max_steps=3)
        with open(os.path.join(self.output_dir, "config.json"), encoding="utf-8") as f:
            self.assertNotIn("pretraining_precision", json.load(f))
        with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="error"):
            with self.assertRaisesRegex(TrainedPrecisionRiskError, "was trained in fp32"):
                GPTNeoForCausalLM.from_pretrained(self.output_dir, dtype=torch.float16)

    def test_resume_keeps_the_stamp(self):
        self.train(tiny_gpt_neo(), bf16=True, max_steps=2)
        # a fresh model whose config knows nothing resumes from checkpoint-2 and trains to step 4
        trainer = self.train(tiny_gpt_neo(), resume_from_checkpoint=True, bf16=True, max_steps=4)
        self.assertEqual(trainer.state.global_step, 4)
        self.assert_saved("bf16", checkpoints=("checkpoint-2", "checkpoint-4"))

    def test_model_card_is_upstreams(self):
        # the stamp is in config.json; the card of a run that is not pure bf16 stays upstream's
        for kwargs in ({"bf16": True}, {}):
            trainer = self.train(tiny_gpt_neo(), **kwargs)
            trainer.create_model_card(model_name="tiny-gpt-neo")
            with open(os.path.join(self.output_dir, "README.md"), encoding="utf-8") as f:
                card = f.read()
            self.assertNotIn("mixed_precision_training", card)
            self.assertNotIn("trained_precision", card)

    def test_distributed_two_processes(self):
        script = os.path.abspath(__file__)
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={free_port()}",
            script,
            "--output_dir",
            self.output_dir,
        ]
        env = self.get_env()
        env["OMP_NUM_THREADS"] = "1"
        execute_subprocess_async(cmd, env=env, timeout=300)
        stamps = {}
        for rank in (0, 1):
            with open(os.path.join(self.output_dir, f"stamp-rank{rank}.json"), encoding="utf-8") as f:
                stamps[rank] = json.load(f)
        self.assertEqual(stamps[0], stamps[1])
        self.assertEqual(stamps[0]["trained_precision"], "bf16")
        self.assertEqual(stamps[0]["world_size"], 2)
        self.assert_saved("bf16", checkpoints=("checkpoint-2", "checkpoint-4"))
        # only the main process wrote config files
        with open(os.path.join(self.output_dir, "config-writes-rank0.txt"), encoding="utf-8") as f:
            self.assertGreaterEqual(len(f.read().splitlines()), 3)
        self.assertFalse(os.path.exists(os.path.join(self.output_dir, "config-writes-rank1.txt")))


@require_torch
@require_accelerate
class CustomLoopStampTest(TestCasePlus):
    def setUp(self):
        super().setUp()
        clear_warning_caches()

    def tearDown(self):
        reset_accelerate_state()
        super().tearDown()

    def test_with_an_accelerator(self):
        from accelerate import Accelerator

        accelerator = Accelerator(mixed_precision="bf16", cpu=True)
        model = tiny_gpt_neo()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model, optimizer = accelerator.prepare(model, optimizer)
        self.assertEqual(stamp_trained_precision(model, accelerator), "bf16")
        batch = TinyLMDataset()[0]
        for _ in range(2):
            with accelerator.autocast():
                loss = model(input_ids=batch["input_ids"][None], labels=batch["labels"][None]).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        output_dir = self.get_auto_remove_tmp_dir()
        accelerator.unwrap_model(model).save_pretrained(output_dir)
        self.assertEqual(read_trained_precision(output_dir), "bf16")

    @parameterized.expand([("dtype", "bfloat16", "bf16"), ("alias", "bf16-mixed", "bf16"), ("name", "fp32", "fp32")])
    def test_with_a_precision(self, _, value, expected):
        value = getattr(torch, value) if value == "bfloat16" else value
        model = tiny_gpt_neo()
        self.assertEqual(stamp_trained_precision(model, value), expected)
        self.assertEqual(model.config.trained_precision, expected)

    def test_without_a_source_reads_the_parameters(self):
        with mockenv_context("ACCELERATE_MIXED_PRECISION"):
            self.assertEqual(stamp_trained_precision(tiny_gpt_neo(torch.bfloat16)), "bf16")

    def test_invalid_precisions(self):
        with self.assertRaisesRegex(ValueError, "Valid values are"):
            stamp_trained_precision(tiny_gpt_neo(), "fp9")
        with self.assertRaisesRegex(ValueError, "'unknown'"):
            stamp_trained_precision(tiny_gpt_neo(), "unknown")

    def test_wrappers_are_unwrapped(self):
        model = tiny_gpt_neo()
        stamp_trained_precision(torch.nn.DataParallel(model), "bf16")
        self.assertEqual(model.config.trained_precision, "bf16")
        model = tiny_gpt_neo()
        stamp_trained_precision(torch.compile(model), "bf16")
        self.assertEqual(model.config.trained_precision, "bf16")

    @require_peft
    def test_peft_model(self):
        from peft import LoraConfig, get_peft_model

        base = tiny_gpt_neo(torch.bfloat16)
        peft_model = get_peft_model(base, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
        # fp32 adapters on a bf16 base: the forward computes in bf16
        self.assertEqual(stamp_trained_precision(peft_model), "bf16")
        self.assertEqual(base.config.trained_precision, "bf16")

    def test_sub_configs_are_stamped(self):
        from transformers import LlavaConfig

        model = torch.nn.Module()
        model.config = LlavaConfig()
        stamp_trained_precision(model, "bf16")
        self.assertEqual(model.config.trained_precision, "bf16")
        self.assertEqual(model.config.text_config.trained_precision, "bf16")
        self.assertEqual(model.config.vision_config.trained_precision, "bf16")

    def note_steps(self, model, losses, skipped=()):
        for i, loss in enumerate(losses):
            note_training_loss(model, loss)
            note_optimizer_step(model, skipped=i in skipped)
        return finish_trained_precision_run(model)

    def test_per_step_notes_unwrap_once_and_touch_no_config(self):
        """The per-step notes cost O(1): the wrapper is unwrapped on the first call only, the config is not read."""
        from transformers.trained_precision.record import stamp

        model = tiny_gpt_neo()
        wrapped = torch.nn.DataParallel(model)  # on the CPU, a wrapper that only forwards
        stamp_trained_precision(wrapped, "bf16")  # an fp32 run records nothing
        losses = [torch.tensor(2.0, requires_grad=True) * 1 for _ in range(20)]
        with (
            mock.patch.object(stamp, "unwrap_model_for_config", wraps=stamp.unwrap_model_for_config) as unwrap,
            mock.patch.object(stamp, "_all_configs", wraps=stamp._all_configs) as configs,
        ):
            for i, loss in enumerate(losses):
                note_training_loss(wrapped, loss)
                note_optimizer_step(wrapped, skipped=i == 3)
        self.assertLessEqual(unwrap.call_count, 1)
        self.assertEqual(configs.call_count, 0)
        self.assertFalse(stamp._RUNS[model].losses.requires_grad)  # no step's graph is kept alive
        self.assertEqual(finish_trained_precision_run(wrapped), "finished")
        record = model.config.trained_precision_run
        self.assertEqual((record["optimizer_steps"], record["skipped_steps"]), (19, 1))

    @parameterized.expand(
        [
            ("inf_then_finite", [1.0, float("inf"), 1.0], torch.float32, "diverged"),
            ("nan", [float("nan"), 1.0], torch.float32, "diverged"),
            ("minus_inf", [-float("inf")], torch.float32, "diverged"),
            # fp16 losses whose sum would overflow fp16 are still finite losses
            ("large_fp16", [60000.0] * 4, torch.float16, "finished"),
            ("bf16", [3.0e38, 3.0e38], torch.bfloat16, "finished"),
        ]
    )
    def test_losses_are_finite_only_when_every_one_is(self, _, values, dtype, expected):
        model = tiny_gpt_neo()
        stamp_trained_precision(model, "bf16", check=False)
        self.assertEqual(self.note_steps(model, [torch.tensor(v, dtype=dtype) for v in values]), expected)

    def test_non_scalar_losses(self):
        """Per-replica or per-token losses: any inf/NaN element diverges; large finite ones never add up to inf."""
        model = tiny_gpt_neo()
        stamp_trained_precision(model, "bf16", check=False)
        losses = [torch.ones(3), torch.tensor([1.0, float("nan")])]
        self.assertEqual(self.note_steps(model, losses), "diverged")
        stamp_trained_precision(model, "bf16", check=False)
        self.assertEqual(self.note_steps(model, [torch.full((4,), 3.0e38)] * 3), "finished")

    def test_a_new_stamp_starts_a_new_count(self):
        model = tiny_gpt_neo()
        wrapped = torch.nn.DataParallel(model)
        stamp_trained_precision(wrapped, "bf16", check=False)
        self.assertEqual(self.note_steps(wrapped, [torch.tensor(float("nan"))] * 3), "diverged")
        stamp_trained_precision(wrapped, "bf16", check=False)
        self.assertEqual(self.note_steps(wrapped, [torch.tensor(1.0)] * 2), "finished")
        self.assertEqual(model.config.trained_precision_run["optimizer_steps"], 2)

    def test_model_without_config_is_skipped_silently(self):
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(STAMP_LOGGER)) as cl:
            self.assertIsNone(stamp_trained_precision(torch.nn.Linear(2, 2), "bf16"))
        self.assertEqual(cl.out, "")


class FakeHubApi:
    """
    Stands in for `huggingface_hub.HfApi` as the Trainer uses it (`create_repo`, `upload_folder`): nothing leaves the
    machine; each upload records the `config.json` files the folder holds at the time of the call.
    """

    def __init__(self):
        self.repos = []
        self.uploads = []

    def create_repo(self, repo_id, **kwargs):
        self.repos.append(repo_id)
        return types.SimpleNamespace(repo_id=repo_id)

    def upload_folder(self, *, folder_path, run_as_future=False, **kwargs):
        configs = {}
        for path in glob.glob(os.path.join(folder_path, "**", "config.json"), recursive=True):
            with open(path, encoding="utf-8") as f:
                configs[os.path.relpath(path, folder_path)] = json.load(f)
        self.uploads.append({"folder_path": folder_path, "configs": configs, **kwargs})
        commit = types.SimpleNamespace(commit_url="https://huggingface.co/fake/commit")
        if not run_as_future:
            return commit
        future = Future()
        future.set_result(commit)
        return future


@require_torch
@require_accelerate
class PushToHubStampTest(TrainerStampTestBase):
    """The stamp reaches what the Trainer uploads: checkpoint pushes during training and the final `push_to_hub`."""

    def setUp(self):
        super().setUp()
        self.hub = FakeHubApi()
        patcher = mock.patch("transformers.trainer.hf_api", return_value=self.hub)
        patcher.start()
        self.addCleanup(patcher.stop)

    def assert_uploads_say(self, uploads, expected):
        for upload in uploads:
            # the model's config.json at the top of the uploaded folder (ignore_patterns leave checkpoints out)
            self.assertIn("config.json", upload["configs"], upload["folder_path"])
            self.assertEqual(upload["configs"]["config.json"].get("trained_precision"), expected, upload)

    @parameterized.expand([("bf16", True, "bf16"), ("fp32", False, "fp32")])
    def test_push_to_hub_payloads(self, _, bf16, expected):
        args = tiny_args(
            self.output_dir,
            bf16=bf16,
            max_steps=4,
            push_to_hub=True,
            hub_model_id="my-org/tiny-gpt-neo",
            hub_strategy="checkpoint",
        )
        trainer = Trainer(tiny_gpt_neo(), args, train_dataset=TinyLMDataset())
        self.assertEqual(self.hub.repos, ["my-org/tiny-gpt-neo"])
        trainer.train()
        checkpoint_uploads = list(self.hub.uploads)
        # each save (steps 2 and 4) pushes the output dir and the checkpoint as `last-checkpoint`
        self.assertEqual(len(checkpoint_uploads), 4)
        self.assertEqual(sum(u.get("path_in_repo") == "last-checkpoint" for u in checkpoint_uploads), 2)
        self.assert_uploads_say(checkpoint_uploads, expected)

        trainer.push_to_hub()
        final_upload = self.hub.uploads[-1]
        self.assertEqual(len(self.hub.uploads), 5)
        self.assertEqual(final_upload["commit_message"], "End of training")
        self.assertEqual(final_upload["folder_path"], self.output_dir)
        self.assert_uploads_say([final_upload], expected)
        with open(os.path.join(self.output_dir, "README.md"), encoding="utf-8") as f:
            self.assertNotIn("trained_precision", f.read())  # the stamp is in config.json; the card is upstream's

    def test_push_to_hub_without_push_during_training(self):
        # `push_to_hub=False` in the arguments: `trainer.push_to_hub()` creates the repo itself and uploads the stamp
        trainer = Trainer(tiny_gpt_neo(), tiny_args(self.output_dir, bf16=True), train_dataset=TinyLMDataset())
        trainer.train()
        self.assertEqual(self.hub.uploads, [])
        trainer.push_to_hub(blocking=False)
        self.assertEqual(len(self.hub.repos), 1)
        self.assertEqual(len(self.hub.uploads), 1)
        self.assert_uploads_say(self.hub.uploads, "bf16")


def _distributed_main():
    """The 2-process run of `test_distributed_two_processes` (launched by torchrun)."""
    import argparse

    from transformers import PreTrainedConfig

    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", required=True)
    output_dir = parser.parse_args().output_dir

    args = tiny_args(output_dir, bf16=True, max_steps=4)
    rank = args.process_index

    # Record which rank writes config files.
    to_json_file = PreTrainedConfig.to_json_file

    def recording_to_json_file(self, json_file_path, *a, **kw):
        with open(os.path.join(output_dir, f"config-writes-rank{rank}.txt"), "a", encoding="utf-8") as f:
            f.write(f"{json_file_path}\n")
        return to_json_file(self, json_file_path, *a, **kw)

    PreTrainedConfig.to_json_file = recording_to_json_file

    model = tiny_gpt_neo()
    trainer = Trainer(model, args, train_dataset=TinyLMDataset())
    trainer.train()
    trainer.save_model()
    with open(os.path.join(output_dir, f"stamp-rank{rank}.json"), "w", encoding="utf-8") as f:
        json.dump({"trained_precision": model.config.trained_precision, "world_size": args.world_size}, f)


if __name__ == "__main__":
    _distributed_main()
