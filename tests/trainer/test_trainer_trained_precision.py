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
import json
import os
import sys

import torch

from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    T5Config,
    T5ForConditionalGeneration,
    Trainer,
    TrainingArguments,
)
from transformers.modeling_utils import TrainedPrecisionRiskError
from transformers.testing_utils import (
    CaptureLogger,
    TestCasePlus,
    execute_subprocess_async,
    get_torch_dist_unique_port,
    require_deepspeed,
    require_peft,
    require_torch,
)
from transformers.utils import logging


def tiny_model(trained_precision="unknown"):
    config = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16, bos_token_id=0, eos_token_id=0)
    config.trained_precision = trained_precision
    return GPT2LMHeadModel(config)


def dataset():
    generator = torch.Generator().manual_seed(0)
    return [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 64, (8, 16), generator=generator)]


@require_torch
class TrainerTrainedPrecisionTest(TestCasePlus):
    def trainer(self, model, **kwargs):
        kwargs = {"max_steps": 2, "save_steps": 1, **kwargs}
        args = TrainingArguments(
            self.get_auto_remove_tmp_dir(), per_device_train_batch_size=4, report_to=[], use_cpu=True, **kwargs
        )
        return Trainer(model, args, train_dataset=dataset())

    def train(self, model, **kwargs):
        trainer = self.trainer(model, **kwargs)
        trainer.train()
        trainer.save_model()
        trainer.create_model_card()
        return trainer.args.output_dir

    def assert_recorded(self, output_dir, precision, regime, folders=("checkpoint-1", "checkpoint-2")):
        # the final save and every checkpoint carry the precision; the model card names the same run once
        for folder in (output_dir, *(os.path.join(output_dir, folder) for folder in folders)):
            with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
                self.assertEqual(json.load(f).get("trained_precision"), precision, folder)
        self.assertEqual(card_precision_lines(output_dir), [f"- training_regime: {regime}"] if regime else [])

    def test_fp32_run(self):
        model = tiny_model()
        output_dir = self.train(model)
        self.assertEqual(model.config.trained_precision, "fp32")
        self.assert_recorded(output_dir, "fp32", "fp32")

    def test_bf16_mixed_precision_run(self):
        model = tiny_model()
        output_dir = self.train(model, bf16=True)
        self.assertEqual(model.config.trained_precision, "bf16")
        self.assertEqual(next(model.parameters()).dtype, torch.float32)
        self.assert_recorded(output_dir, "bf16", "bf16 mixed precision")

    def test_pure_bf16_run(self):
        # bf16 weights are a bf16 run without fp32 master weights, with or without bf16 autocast on top
        for kwargs in ({}, {"bf16": True}):
            output_dir = self.train(tiny_model().to(torch.bfloat16), **kwargs)
            self.assert_recorded(output_dir, "bf16", "bf16 non-mixed precision")

    def test_fp16_on_the_cpu_runs_in_the_weights_precision(self):
        # accelerate runs no fp16 autocast on the CPU: fp32 weights make an fp32 run, fp16 weights an fp16 run
        output_dir = self.train(tiny_model(), fp16=True)
        self.assert_recorded(output_dir, "fp32", "fp32")
        output_dir = self.train(tiny_model().half(), fp16=True)
        self.assert_recorded(output_dir, "fp16", "fp16 non-mixed precision")

    def test_zero_steps_keep_the_trained_precision(self):
        for kwargs in ({"max_steps": -1, "num_train_epochs": 0}, {"max_steps": 0, "save_strategy": "no"}):
            model = tiny_model("fp16")
            trainer = self.trainer(model, **kwargs)
            trainer.train()
            trainer.save_model()
            trainer.create_model_card()
            # no step changed the weights: the saved precision is the model's, and the card names no regime
            self.assert_recorded(trainer.args.output_dir, "fp16", None, folders=())
            self.assertEqual(model.config.trained_precision, "fp16")

    def test_risky_run_is_checked_before_it_starts_in_the_mode_of_the_load(self):
        path = self.get_auto_remove_tmp_dir()
        tiny_model("bf16").save_pretrained(path)
        logger = logging.get_logger("transformers")
        with CaptureLogger(logger) as cl:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16, trained_precision_check="ignore")
            self.train(model, max_steps=1)
        self.assertNotIn("was trained in", cl.out)
        self.assertEqual(model.config.trained_precision, "fp16")

        # fp16 weights whose trained precision became known after the load: the run is checked in the load's mode
        path = self.get_auto_remove_tmp_dir()
        tiny_model().save_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        model.config.trained_precision = "bf16"
        trainer = self.trainer(model)
        with self.assertRaises(TrainedPrecisionRiskError):
            trainer.train()
        self.assertEqual(model.config.trained_precision, "bf16")
        self.assertEqual(trainer.state.global_step, 0)

    def test_fp16_weights_with_modules_kept_in_fp32_are_an_fp16_run(self):
        config = T5Config(
            vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, decoder_start_token_id=0
        )
        path = self.get_auto_remove_tmp_dir()
        T5ForConditionalGeneration(config).save_pretrained(path)
        model = T5ForConditionalGeneration.from_pretrained(path, dtype=torch.float16)
        self.assertEqual({p.dtype for p in model.parameters()}, {torch.float16, torch.float32})
        output_dir = self.train(model, max_steps=1)
        self.assert_recorded(output_dir, "fp16", "fp16 non-mixed precision", folders=("checkpoint-1",))
        # bf16 autocast only covers the matmuls: the fp16 weights carry the rest, so the run is still fp16
        model = T5ForConditionalGeneration.from_pretrained(path, dtype=torch.float16)
        output_dir = self.train(model, max_steps=1, bf16=True)
        self.assert_recorded(output_dir, "fp16", "fp16 non-mixed precision", folders=("checkpoint-1",))

    @require_peft
    def test_lora_on_a_frozen_bf16_base_is_a_bf16_run(self):
        from peft import LoraConfig, get_peft_model

        base = tiny_model().to(torch.bfloat16)
        model = get_peft_model(base, LoraConfig(r=2, target_modules=["c_attn"]))
        self.assertEqual({p.dtype for p in model.parameters() if p.requires_grad}, {torch.float32})
        output_dir = self.train(model, max_steps=1)
        self.assertEqual(base.config.trained_precision, "bf16")
        self.assertEqual(card_precision_lines(output_dir), ["- training_regime: bf16 non-mixed precision"])
        # the adapter's files are all that is saved: no config.json, so nothing saved claims a precision
        self.assertFalse(os.path.exists(os.path.join(output_dir, "config.json")))
        self.assertTrue(os.path.exists(os.path.join(output_dir, "adapter_config.json")))
        merged = model.merge_and_unload()
        merged.save_pretrained(os.path.join(output_dir, "merged"))
        with open(os.path.join(output_dir, "merged", "config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["trained_precision"], "bf16")


@require_torch
@require_deepspeed
class TrainerTrainedPrecisionDeepSpeedTest(TestCasePlus):
    def test_deepspeed_bf16_run_for_every_spelling_of_enabled(self):
        # one single-process launch on the CPU runs the three spellings DeepSpeed accepts (see `deepspeed_main`)
        output_dir = self.get_auto_remove_tmp_dir()
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1"]
        cmd += [f"--master_port={get_torch_dist_unique_port()}", __file__, output_dir]
        env = self.get_env()
        if not torch.cuda.is_available():
            env.setdefault("DS_ACCELERATOR", "cpu")
        execute_subprocess_async(cmd, env=env, timeout=600)
        for enabled in DEEPSPEED_ENABLED:
            run_dir = os.path.join(output_dir, str(enabled))
            with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as f:
                self.assertEqual(json.load(f)["trained_precision"], "bf16", enabled)
            self.assertEqual(card_precision_lines(run_dir), ["- training_regime: bf16 mixed precision"], enabled)
            with open(os.path.join(run_dir, "parameter_dtypes.json"), encoding="utf-8") as f:
                self.assertEqual(json.load(f), ["torch.bfloat16"], enabled)


def card_precision_lines(output_dir):
    with open(os.path.join(output_dir, "README.md"), encoding="utf-8") as f:
        card = f.read()
    return [
        line for line in card.splitlines() if line.startswith(("- mixed_precision_training:", "- training_regime:"))
    ]


# `"auto"` is filled in from `bf16=True`; DeepSpeed's config parsing reads `1` as true
DEEPSPEED_ENABLED = ("auto", True, 1)


def deepspeed_main(output_dir):
    from accelerate.state import AcceleratorState

    for enabled in DEEPSPEED_ENABLED:
        ds_config = {
            "bf16": {"enabled": enabled},
            "zero_optimization": {"stage": 0},
            "train_micro_batch_size_per_gpu": "auto",
            "gradient_accumulation_steps": "auto",
        }
        run_dir = os.path.join(output_dir, str(enabled))
        args = TrainingArguments(
            run_dir,
            max_steps=1,
            per_device_train_batch_size=4,
            report_to=[],
            bf16=True,
            deepspeed=ds_config,
            use_cpu=not torch.cuda.is_available(),
        )
        trainer = Trainer(tiny_model(), args, train_dataset=dataset())
        trainer.train()
        dtypes = sorted({str(param.dtype) for param in trainer.model_wrapped.module.parameters()})
        trainer.save_model()
        trainer.create_model_card()
        with open(os.path.join(run_dir, "parameter_dtypes.json"), "w", encoding="utf-8") as f:
            json.dump(dtypes, f)
        AcceleratorState._reset_state(reset_partial_state=True)


if __name__ == "__main__":
    deepspeed_main(sys.argv[1])
