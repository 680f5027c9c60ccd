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
from parameterized import parameterized

from transformers import GPT2Config, GPT2LMHeadModel, T5Config, T5ForConditionalGeneration, Trainer, TrainingArguments
from transformers.modeling_utils import TrainedPrecisionRiskError
from transformers.testing_utils import (
    TestCasePlus,
    execute_subprocess_async,
    get_torch_dist_unique_port,
    require_deepspeed,
    require_peft,
    require_torch,
)


def tiny_model(trained_precision="unknown", t5=False):
    if t5:
        config = T5Config(vocab_size=64, d_model=16, d_ff=32, num_layers=1, num_heads=2, decoder_start_token_id=0)
    else:
        config = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, bos_token_id=0, eos_token_id=0)
    config.trained_precision = trained_precision
    return T5ForConditionalGeneration(config) if t5 else GPT2LMHeadModel(config)


DATASET = [{"input_ids": ids, "labels": ids} for ids in torch.arange(7, 135).view(8, 16) % 64]


def saved(output_dir, folder=""):
    with open(os.path.join(output_dir, folder, "config.json"), encoding="utf-8") as f:
        precision = json.load(f).get("trained_precision")
    with open(os.path.join(output_dir, "README.md"), encoding="utf-8") as f:
        return precision, [line for line in f.read().splitlines() if "regime" in line or "mixed_precision" in line]


def train(output_dir, model, **kwargs):
    kwargs = {"max_steps": 2, "save_steps": 1, "use_cpu": True, **kwargs}
    trainer = Trainer(model, TrainingArguments(output_dir, report_to=[], **kwargs), train_dataset=DATASET)
    trainer.train()
    trainer.save_model()
    trainer.create_model_card()
    return trainer


@require_torch
class TrainerTrainedPrecisionTest(TestCasePlus):
    @parameterized.expand(
        [
            ("fp32", False, torch.float32, {}, "fp32", "fp32"),
            ("bf16_mixed_precision", False, torch.float32, {"bf16": True}, "bf16", "bf16 mixed precision"),
            ("pure_bf16", False, torch.bfloat16, {}, "bf16", "bf16 non-mixed precision"),
            ("pure_bf16_and_bf16", False, torch.bfloat16, {"bf16": True}, "bf16", "bf16 non-mixed precision"),
            # no fp16 autocast runs on the CPU: the weights decide
            ("fp16_on_the_cpu", False, torch.float32, {"fp16": True}, "fp32", "fp32"),
            ("fp16_weights_and_fp16", False, torch.float16, {"fp16": True}, "fp16", "fp16 non-mixed precision"),
            # T5 keeps `wo` in fp32; bf16 autocast covers the matmuls only, the rest stays in the weights' fp16
            ("t5_in_fp16", True, torch.float16, {}, "fp16", "fp16 non-mixed precision"),
            ("t5_in_fp16_and_bf16", True, torch.float16, {"bf16": True}, "fp16", "fp16 non-mixed precision"),
        ]
    )
    def test_saves_and_card_record_the_run(self, _, t5, dtype, kwargs, precision, regime):
        path = self.get_auto_remove_tmp_dir()
        tiny_model(t5=t5).save_pretrained(path)
        model = type(tiny_model(t5=t5)).from_pretrained(path, dtype=dtype)
        output_dir = train(self.get_auto_remove_tmp_dir(), model, **kwargs).args.output_dir
        self.assertEqual(model.config.trained_precision, precision)
        for folder in ("", "checkpoint-1", "checkpoint-2"):  # the final save and every checkpoint, and the card
            self.assertEqual(saved(output_dir, folder), (precision, [f"- training_regime: {regime}"]))

    def test_zero_steps_keep_the_trained_precision_and_name_no_regime(self):
        for kwargs in ({"max_steps": -1, "num_train_epochs": 0}, {"max_steps": 0, "save_strategy": "no"}):
            trainer = train(self.get_auto_remove_tmp_dir(), tiny_model("fp16"), **kwargs)
            self.assertEqual(saved(trainer.args.output_dir), ("fp16", []))

    def test_risky_run_is_checked_before_it_starts_in_the_mode_of_the_load(self):
        # fp16 weights whose trained precision became known after the load: the run is checked in the load's mode
        path = self.get_auto_remove_tmp_dir()
        tiny_model().save_pretrained(path)
        model = GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        model.config.trained_precision = "bf16"
        with self.assertRaises(TrainedPrecisionRiskError):
            train(self.get_auto_remove_tmp_dir(), model)
        self.assertEqual(model.config.trained_precision, "bf16")

    @require_peft
    def test_lora_on_a_frozen_bf16_base_is_a_bf16_run_saved_when_merged(self):
        from peft import LoraConfig, get_peft_model

        base = tiny_model().to(torch.bfloat16)
        model = get_peft_model(base, LoraConfig(r=2, target_modules=["c_attn"]))
        output_dir = train(self.get_auto_remove_tmp_dir(), model, max_steps=1).args.output_dir
        self.assertEqual(base.config.trained_precision, "bf16")
        # the adapter's files are all that is saved: no config.json, so nothing saved claims a precision
        self.assertFalse(os.path.exists(os.path.join(output_dir, "config.json")))
        model.merge_and_unload().save_pretrained(os.path.join(output_dir, "merged"))
        self.assertEqual(saved(output_dir, "merged"), ("bf16", ["- training_regime: bf16 non-mixed precision"]))


# DeepSpeed reads `"enabled"` as a bool (`1` is true); the `Trainer` fills in `"auto"` from `bf16=True`
DEEPSPEED_ENABLED = ("auto", True, 1)


@require_torch
@require_deepspeed
class TrainerTrainedPrecisionDeepSpeedTest(TestCasePlus):
    def test_deepspeed_bf16_run_for_every_spelling_of_enabled(self):
        # one single-process launch runs them all (`deepspeed_main`); DeepSpeed casts the model to bf16 in `prepare`
        output_dir = self.get_auto_remove_tmp_dir()
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--master_port={get_torch_dist_unique_port()}"]
        env = self.get_env()
        if not torch.cuda.is_available():
            env.setdefault("DS_ACCELERATOR", "cpu")
        execute_subprocess_async([*cmd, __file__, output_dir], env=env, timeout=600)
        for enabled in DEEPSPEED_ENABLED:
            run_dir = os.path.join(output_dir, str(enabled))
            self.assertEqual(saved(run_dir), ("bf16", ["- training_regime: bf16 mixed precision"]), enabled)


def deepspeed_main(output_dir):
    from accelerate.state import AcceleratorState

    for enabled in DEEPSPEED_ENABLED:
        ds_config = {"bf16": {"enabled": enabled}, "zero_optimization": {"stage": 0}}
        ds_config.update(train_micro_batch_size_per_gpu="auto", gradient_accumulation_steps="auto")
        kwargs = {"max_steps": 1, "bf16": True, "deepspeed": ds_config, "use_cpu": not torch.cuda.is_available()}
        trainer = train(os.path.join(output_dir, str(enabled)), tiny_model(), **kwargs)
        assert {p.dtype for p in trainer.model_wrapped.module.parameters()} == {torch.bfloat16}
        AcceleratorState._reset_state(reset_partial_state=True)


if __name__ == "__main__":
    deepspeed_main(sys.argv[1])
