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
from transformers.testing_utils import CaptureLogger, TestCasePlus, require_peft, require_torch
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

    def assert_recorded(self, output_dir, precision, card_lines):
        # the final save and every checkpoint carry the precision; the model card names the same run once
        for folder in (output_dir, os.path.join(output_dir, "checkpoint-1"), os.path.join(output_dir, "checkpoint-2")):
            with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
                self.assertEqual(json.load(f)["trained_precision"], precision, folder)
        with open(os.path.join(output_dir, "README.md"), encoding="utf-8") as f:
            card = f.read()
        keys = ("- mixed_precision_training:", "- training_regime:")
        precision_lines = [line for line in card.splitlines() if line.startswith(keys)]
        self.assertEqual(precision_lines, card_lines)

    def test_fp32_run(self):
        model = tiny_model()
        output_dir = self.train(model)
        self.assertEqual(model.config.trained_precision, "fp32")
        self.assert_recorded(output_dir, "fp32", [])

    def test_bf16_mixed_precision_run(self):
        model = tiny_model()
        output_dir = self.train(model, bf16=True)
        self.assertEqual(model.config.trained_precision, "bf16")
        self.assertEqual(next(model.parameters()).dtype, torch.float32)
        self.assert_recorded(output_dir, "bf16", ["- training_regime: bf16 mixed precision"])

    def test_pure_bf16_run(self):
        model = tiny_model().to(torch.bfloat16)
        output_dir = self.train(model)
        self.assert_recorded(output_dir, "bf16", ["- training_regime: bf16 non-mixed precision"])

    def test_fp16_run_card_names_its_precision_once(self):
        # fp16 autocast does not run on the CPU: the fp16 weights make this an fp16 run
        model = tiny_model().half()
        output_dir = self.train(model, fp16=True)
        self.assert_recorded(output_dir, "fp16", ["- mixed_precision_training: Native AMP"])

    def test_zero_steps_keep_the_trained_precision(self):
        model = tiny_model("bf16")
        trainer = self.trainer(model, max_steps=-1, num_train_epochs=0)
        trainer.train()
        self.assertEqual(trainer.state.global_step, 0)
        self.assertEqual(model.config.trained_precision, "bf16")

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
        self.train(model, max_steps=1)
        self.assertEqual(model.config.trained_precision, "fp16")

    @require_peft
    def test_lora_on_a_frozen_bf16_base_is_a_bf16_run(self):
        from peft import LoraConfig, get_peft_model

        base = tiny_model().to(torch.bfloat16)
        model = get_peft_model(base, LoraConfig(r=2, target_modules=["c_attn"]))
        self.assertEqual({p.dtype for p in model.parameters() if p.requires_grad}, {torch.float32})
        self.train(model, max_steps=1)
        self.assertEqual(base.config.trained_precision, "bf16")
        merged = model.merge_and_unload()
        self.assertEqual(merged.config.trained_precision, "bf16")
