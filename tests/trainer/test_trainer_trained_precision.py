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
from unittest import mock

import torch

from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from transformers.modeling_utils import TrainedPrecisionRiskError
from transformers.testing_utils import TestCasePlus, require_torch


def tiny_model():
    config = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)


def dataset():
    generator = torch.Generator().manual_seed(0)
    return [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 64, (8, 16), generator=generator)]


@require_torch
class TrainerTrainedPrecisionTest(TestCasePlus):
    def train(self, model, **kwargs):
        output_dir = self.get_auto_remove_tmp_dir()
        args = TrainingArguments(
            output_dir, max_steps=2, per_device_train_batch_size=4, report_to=[], use_cpu=True, save_steps=1, **kwargs
        )
        trainer = Trainer(model, args, train_dataset=dataset())
        trainer.train()
        trainer.save_model()
        trainer.create_model_card()
        return output_dir

    def assert_recorded(self, output_dir, precision, regime):
        # the final save and every checkpoint carry the precision; the model card names the same run
        for folder in (output_dir, os.path.join(output_dir, "checkpoint-1"), os.path.join(output_dir, "checkpoint-2")):
            with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
                self.assertEqual(json.load(f)["trained_precision"], precision, folder)
        with open(os.path.join(output_dir, "README.md"), encoding="utf-8") as f:
            self.assertIn(f"- training_regime: {regime}\n", f.read())

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
        model = tiny_model().to(torch.bfloat16)
        output_dir = self.train(model)
        self.assert_recorded(output_dir, "bf16", "bf16 non-mixed precision")

    def test_risky_run_is_checked_before_it_starts(self):
        model = tiny_model().half()
        model.config.trained_precision = "bf16"
        with mock.patch.dict(os.environ, {"TRANSFORMERS_TRAINED_PRECISION_CHECK": "error"}):
            with self.assertRaises(TrainedPrecisionRiskError):
                self.train(model)
        self.assertEqual(model.config.trained_precision, "bf16")
