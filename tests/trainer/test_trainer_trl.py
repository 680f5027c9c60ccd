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
TRL's trainers are `Trainer`s: `SFTTrainer` and `DPOTrainer` runs are stamped (full models and LoRA adapters alike),
`bf16_full_train=True` works through `SFTConfig`, and a `peft_config` run's adapter carries its record. With the real
trl, peft and datasets packages, a tiny GPT-Neo and a word-level tokenizer built here.
"""

import importlib.util
import json
import os
import unittest

from transformers import is_torch_available
from transformers.testing_utils import TestCasePlus, require_accelerate, require_peft, require_torch
from transformers.trained_precision.testing_utils import tiny_gpt_neo


if is_torch_available():
    import torch

    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
    from transformers.trained_precision.commands.inspection import inspect_adapter
    from transformers.trained_precision.record.adapter import read_adapter_record

require_trl = unittest.skipUnless(
    importlib.util.find_spec("trl") is not None and importlib.util.find_spec("datasets") is not None,
    "test requires trl and datasets",
)

WORDS = "the a cat dog sat ran on mat fast slow red blue big small".split()
TEXTS = ["the cat sat on the mat", "a dog ran fast", "the big red dog", "a small blue cat"] * 2


def word_tokenizer():
    """A word-level tokenizer of `WORDS` with pad, bos and eos tokens (ids 1, 2, 3)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "[PAD]": 1, "<s>": 2, "</s>": 3, **{w: i + 4 for i, w in enumerate(WORDS)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", bos_token="<s>", eos_token="</s>"
    )


def saved_base(path, **config):
    """A tiny GPT-Neo trained (as its config says) in bf16, saved to `path` and loaded back: it has a name."""
    torch.manual_seed(0)
    tiny_gpt_neo(trained_precision="bf16", bos_token_id=2, eos_token_id=3, pad_token_id=1, **config).save_pretrained(
        path
    )
    return AutoModelForCausalLM.from_pretrained(path)


def run_args(output_dir, **kwargs):
    defaults = {
        "max_steps": 2,
        "per_device_train_batch_size": 4,
        "report_to": [],
        "use_cpu": True,
        "max_length": 16,
        "bf16": False,  # TRL turns bf16 on by default: these CPUs emulate it
        "save_steps": 1,
    }
    return {**defaults, **kwargs}


def lora_config():
    from peft import LoraConfig

    return LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")


@require_torch
@require_accelerate
@require_trl
class SFTTrainerPrecisionTest(TestCasePlus):
    def sft(self, model, output_dir, peft_config=None, **args):
        from datasets import Dataset
        from trl import SFTConfig, SFTTrainer

        trainer = SFTTrainer(
            model=model,
            args=SFTConfig(output_dir, **run_args(output_dir, **args)),
            train_dataset=Dataset.from_dict({"text": TEXTS}),
            processing_class=word_tokenizer(),
            peft_config=peft_config,
        )
        trainer.train()
        trainer.save_model(os.path.join(output_dir, "final"))
        return trainer

    def test_sft_stamps_every_checkpoint_and_the_final_save(self):
        root = self.get_auto_remove_tmp_dir()
        self.sft(saved_base(os.path.join(root, "base")), os.path.join(root, "run"))
        for name in ("checkpoint-1", "checkpoint-2", "final"):
            with open(os.path.join(root, "run", name, "config.json"), encoding="utf-8") as f:
                config = json.load(f)
            self.assertEqual(config["trained_precision"], "fp32", name)
            self.assertEqual(config["pretraining_precision"], "bf16", name)
            self.assertNotIn("trained_precision_run", config, name)  # an fp32 run records nothing

    def test_sft_with_bf16_full_train(self):
        root = self.get_auto_remove_tmp_dir()
        trainer = self.sft(
            saved_base(os.path.join(root, "base")), os.path.join(root, "run"), bf16_full_train=True, save_steps=10
        )
        self.assertEqual(trainer.model.config.trained_precision, "bf16")
        self.assertEqual(trainer.model.config.trained_precision_run["status"], "finished")
        self.assertEqual(trainer.model.transformer.h[0].attn.attention.q_proj.weight.dtype, torch.bfloat16)
        with open(os.path.join(root, "run", "final", "config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["trained_precision"], "bf16")

    @require_peft
    def test_sft_with_a_lora_config_writes_the_adapter_record(self):
        root = self.get_auto_remove_tmp_dir()
        base_dir = os.path.join(root, "base")
        self.sft(saved_base(base_dir), os.path.join(root, "run"), peft_config=lora_config())
        self.assertEqual(read_adapter_record(os.path.join(root, "run", "checkpoint-1")).status, "started")
        record = read_adapter_record(os.path.join(root, "run", "final"))
        self.assertEqual((record.precision, record.status), ("fp32", "finished"))
        self.assertEqual((record.base_name_or_path, record.base_precision), (base_dir, "bf16"))
        report = inspect_adapter(os.path.join(root, "run", "final"))
        self.assertEqual(report.status("fp16"), "risky")
        self.assertEqual(report.status("bf16"), "safe")

    @require_peft
    def test_sft_with_a_lora_config_and_bf16_full_train(self):
        root = self.get_auto_remove_tmp_dir()
        trainer = self.sft(
            saved_base(os.path.join(root, "base")),
            os.path.join(root, "run"),
            peft_config=lora_config(),
            bf16_full_train=True,
            save_steps=10,
        )
        record = read_adapter_record(os.path.join(root, "run", "final"))
        self.assertEqual((record.precision, record.status), ("bf16", "finished"))
        self.assertEqual((record.base_dtype, record.adapter_dtype), ("bfloat16", "bfloat16"))
        self.assertEqual(record.base_precision, "bf16")
        self.assertEqual(trainer.model.get_base_model().config.trained_precision, "bf16")


@require_torch
@require_accelerate
@require_peft
@require_trl
class DPOTrainerPrecisionTest(TestCasePlus):
    def test_dpo_with_a_lora_config_writes_the_adapter_record(self):
        from datasets import Dataset
        from trl import DPOConfig, DPOTrainer

        root = self.get_auto_remove_tmp_dir()
        base_dir = os.path.join(root, "base")
        pairs = {
            "prompt": ["the cat", "a dog"] * 2,
            "chosen": [" sat on the mat", " ran fast"] * 2,
            "rejected": [" red blue", " big small"] * 2,
        }
        output_dir = os.path.join(root, "run")
        trainer = DPOTrainer(
            model=saved_base(base_dir),
            args=DPOConfig(output_dir, **run_args(output_dir, per_device_train_batch_size=2)),
            train_dataset=Dataset.from_dict(pairs),
            processing_class=word_tokenizer(),
            peft_config=lora_config(),
        )
        trainer.train()
        trainer.save_model(os.path.join(output_dir, "final"))
        self.assertEqual(read_adapter_record(os.path.join(output_dir, "checkpoint-1")).status, "started")
        record = read_adapter_record(os.path.join(output_dir, "final"))
        self.assertEqual((record.precision, record.status), ("fp32", "finished"))
        self.assertEqual((record.base_name_or_path, record.base_precision), (base_dir, "bf16"))


if __name__ == "__main__":
    unittest.main()
