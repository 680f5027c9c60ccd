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
PEFT adapters (LoRA, QLoRA) carry the run that trained them and the base they were trained on, with the real peft:
the Trainer writes the record into every checkpoint and `save_model`, PEFT's own loading ignores it, loading judges
base and adapter together, and `transformers precision ADAPTER_DIR` reports both.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings

from transformers import is_torch_available
from transformers.testing_utils import (
    CaptureLogger,
    LoggingLevel,
    TestCasePlus,
    mockenv_context,
    require_accelerate,
    require_bitsandbytes,
    require_peft,
    require_torch,
)
from transformers.trained_precision.facts.run_record import MIN_RUN_STEPS
from transformers.trained_precision.testing_utils import random_token_dataset, tiny_gpt_neo
from transformers.utils import logging


if is_torch_available():
    import torch

    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
    from transformers.trained_precision.commands.inspection import inspect_adapter
    from transformers.trained_precision.guard.check import TrainedPrecisionRiskError, reset_warning_cache
    from transformers.trained_precision.record.adapter import (
        AdapterRun,
        read_adapter_record,
        reset_adapter_warning_cache,
        write_adapter_record,
    )

CHECK_LOGGER = "transformers.trained_precision.guard.check"
ADAPTER_LOGGER = "transformers.trained_precision.record.adapter"
LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM"}


def save_base(path, **config):
    torch.manual_seed(0)
    tiny_gpt_neo(**config).save_pretrained(path)
    return path


def train_lora(base_dir, output_dir, **args):
    """A 2-step LoRA run through the Trainer (a checkpoint per step), saved with `save_model` to `output_dir/final`."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir), LoraConfig(**LORA))
    defaults = {"max_steps": 2, "per_device_train_batch_size": 4, "save_steps": 1, "report_to": [], "use_cpu": True}
    trainer = Trainer(
        model, TrainingArguments(output_dir, **{**defaults, **args}), train_dataset=random_token_dataset(8)
    )
    trainer.train()
    trainer.save_model(os.path.join(output_dir, "final"))
    return model, os.path.join(output_dir, "final")


def precision_command(*args):
    """`transformers precision ARGS... --json` in a subprocess: (exit code, JSON document)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "transformers.trained_precision", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return result.returncode, json.loads(result.stdout)


@require_torch
@require_peft
@require_accelerate
class AdapterRecordTest(TestCasePlus):
    """One LoRA run on a base whose config says it was trained in bf16; every test reads its output."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = tempfile.mkdtemp()
        cls.base = save_base(os.path.join(cls.root, "base"), trained_precision="bf16")
        cls.model, cls.adapter = train_lora(cls.base, os.path.join(cls.root, "run"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        reset_warning_cache()
        reset_adapter_warning_cache()

    def test_every_checkpoint_and_save_model_carry_the_run(self):
        for step in (1, 2):
            record = read_adapter_record(os.path.join(self.root, "run", f"checkpoint-{step}"))
            self.assertEqual((record.precision, record.status), ("fp32", "started"))
        record = read_adapter_record(self.adapter)
        self.assertEqual(record.precision, "fp32")
        self.assertEqual(record.status, "finished")
        self.assertEqual(record.adapter_dtype, "float32")
        # the base's lineage as it was before the run stamped the base's config
        self.assertEqual((record.base_precision, record.base_provenance), ("bf16", "config"))
        self.assertEqual(record.base_name_or_path, self.base)
        self.assertIsNone(record.base_quantization)

    def test_peft_loads_the_adapter_as_without_the_record(self):
        from peft import AutoPeftModelForCausalLM, PeftModel

        bare = os.path.join(self.get_auto_remove_tmp_dir(), "bare")
        shutil.copytree(self.adapter, bare)
        self.model.save_pretrained(bare)  # PEFT's own save: the same tensors, no record
        self.assertIsNone(read_adapter_record(bare))
        loaded = {}
        for name, path in (("record", self.adapter), ("bare", bare)):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(self.base), path)
                auto = AutoPeftModelForCausalLM.from_pretrained(path)
            loaded[name] = (sorted({str(w.message) for w in caught}), model.state_dict(), auto.state_dict())
        self.assertEqual(loaded["record"][0], loaded["bare"][0])  # PEFT warns about nothing more
        for key, value in loaded["bare"][1].items():
            torch.testing.assert_close(loaded["record"][1][key], value)
        trained = {k: v for k, v in self.model.state_dict().items() if "lora_" in k}
        for key, value in trained.items():
            torch.testing.assert_close(loaded["record"][2][key], value)

    def test_report_names_the_run_and_the_base(self):
        code, report = precision_command(self.adapter, "--dtype", "fp16")
        self.assertEqual(code, 1)
        self.assertEqual(report["kind"], "adapter")
        self.assertEqual(report["adapter"]["run"]["precision"], "fp32")
        self.assertEqual(report["adapter"]["run"]["status"], "finished")
        self.assertEqual(report["base"]["name_or_path"], self.base)
        self.assertEqual(report["base"]["report"]["trained_precision"]["effective"], "bf16")
        self.assertEqual(report["trained_precision"]["lineage"], ["bf16", "fp32"])
        self.assertEqual(report["verdicts"]["fp16"]["status"], "risky")
        self.assertEqual(report["exit_code"], 1)
        code, report = precision_command(self.adapter, "--dtype", "bf16")
        self.assertEqual((code, report["status"]), (0, "safe"))

    def test_report_without_the_base_uses_the_lineage_the_record_kept(self):
        moved = os.path.join(self.get_auto_remove_tmp_dir(), "adapter")
        shutil.copytree(self.adapter, moved)
        config_path = os.path.join(moved, "adapter_config.json")
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
        config["base_model_name_or_path"] = os.path.join(self.root, "gone")
        with open(config_path, "w", encoding="utf-8") as f:
            json.dump(config, f)
        code, report = precision_command(moved, "--dtype", "fp16")
        self.assertEqual(code, 1)
        self.assertIsNone(report["base"]["report"])
        self.assertIn("does not exist", report["base"]["error"])
        self.assertEqual(report["trained_precision"]["lineage"], ["bf16", "fp32"])

    def test_report_resolves_a_hub_base_through_the_registry(self):
        moved = os.path.join(self.get_auto_remove_tmp_dir(), "adapter")
        shutil.copytree(self.adapter, moved)
        os.remove(os.path.join(moved, "adapter_model.safetensors"))  # no record: the base alone decides
        config_path = os.path.join(moved, "adapter_config.json")
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
        config["base_model_name_or_path"] = "google/gemma-2-9b"  # not cached here: the registry row answers
        with open(config_path, "w", encoding="utf-8") as f:
            json.dump(config, f)
        with mockenv_context(HF_HOME=self.get_auto_remove_tmp_dir()):
            code, report = precision_command(moved, "--dtype", "fp16")
        self.assertEqual(code, 1)
        self.assertIsNone(report["adapter"]["run"])
        self.assertIn("not in the local Hugging Face cache", report["base"]["error"])
        self.assertEqual(report["trained_precision"]["lineage"], ["bf16"])

    def test_transformers_loads_adapter_in_fp16_warns_and_raises(self):
        with CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
            AutoModelForCausalLM.from_pretrained(self.adapter, dtype=torch.float16)
        self.assertIn("was trained in bf16", cl.out)
        self.assertIn("fp16", cl.out)
        with self.assertRaises(TrainedPrecisionRiskError):
            AutoModelForCausalLM.from_pretrained(self.adapter, dtype=torch.float16, trained_precision_check="error")
        # bf16 is what the base was trained in: silent
        reset_warning_cache()
        with (
            CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl,
            CaptureLogger(logging.get_logger(ADAPTER_LOGGER)) as al,
        ):
            AutoModelForCausalLM.from_pretrained(self.adapter, dtype=torch.bfloat16)
        self.assertEqual(cl.out + al.out, "")

    def test_peft_loaders_in_fp16_warn_and_raise_through_the_base(self):
        from peft import AutoPeftModelForCausalLM, PeftModel

        with CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
            PeftModel.from_pretrained(
                AutoModelForCausalLM.from_pretrained(self.base, dtype=torch.float16), self.adapter
            )
        self.assertIn("was trained in bf16", cl.out)
        reset_warning_cache()
        with CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
            AutoPeftModelForCausalLM.from_pretrained(self.adapter, dtype=torch.float16)
        self.assertIn("was trained in bf16", cl.out)
        with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="error"):
            with self.assertRaises(TrainedPrecisionRiskError):
                AutoPeftModelForCausalLM.from_pretrained(self.adapter, dtype=torch.float16)

    def test_merged_model_names_the_base_precision_and_the_run(self):
        import copy

        merged_dir = self.get_auto_remove_tmp_dir()
        copy.deepcopy(self.model).merge_and_unload().save_pretrained(merged_dir)
        with open(os.path.join(merged_dir, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        self.assertEqual(config["trained_precision"], "fp32")
        self.assertEqual(config["pretraining_precision"], "bf16")
        self.assertNotIn("trained_precision_run", config)  # an fp32 run records nothing: it is evidence for nothing

    def saved_config(self, model):
        directory = self.get_auto_remove_tmp_dir()
        model.save_pretrained(directory)
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            return json.load(f)

    def test_merged_after_peft_loaders_keeps_the_lineage_once_stamped(self):
        from peft import AutoPeftModelForCausalLM, PeftModel

        from transformers.trained_precision.record.adapter import stamp_merged_adapter

        loaders = {
            "PeftModel.from_pretrained": lambda: PeftModel.from_pretrained(
                AutoModelForCausalLM.from_pretrained(self.base), self.adapter
            ),
            "AutoPeftModelForCausalLM": lambda: AutoPeftModelForCausalLM.from_pretrained(self.adapter),
        }
        for name, load in loaders.items():
            with self.subTest(name):
                # PEFT reads the weights without their metadata: merged as is, the config says only the base's bf16
                config = self.saved_config(load().merge_and_unload())
                self.assertEqual(config["trained_precision"], "bf16")
                self.assertNotIn("pretraining_precision", config)
                self.assertNotIn("trained_precision_run", config)
                merged = load().merge_and_unload()
                self.assertEqual(stamp_merged_adapter(merged, self.adapter), read_adapter_record(self.adapter))
                config = self.saved_config(merged)
                self.assertEqual((config["trained_precision"], config["pretraining_precision"]), ("fp32", "bf16"))
                self.assertEqual(config["trained_precision_run"]["status"], "finished")
                self.assertEqual(config["trained_precision_run"]["optimizer_steps"], 2)
                # and the lineage is what loading judges: bf16 (the base's training) silent, fp16 warns
                directory = self.get_auto_remove_tmp_dir()
                merged.save_pretrained(directory)
                reset_warning_cache()
                with CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
                    AutoModelForCausalLM.from_pretrained(directory, dtype=torch.bfloat16)
                self.assertEqual(cl.out, "")
                with self.assertRaises(TrainedPrecisionRiskError):
                    AutoModelForCausalLM.from_pretrained(
                        directory, dtype=torch.float16, trained_precision_check="error"
                    )

    def test_stamp_merged_adapter_without_a_record_changes_nothing(self):
        from transformers.trained_precision.record.adapter import stamp_merged_adapter

        bare = os.path.join(self.get_auto_remove_tmp_dir(), "bare")
        self.model.save_pretrained(bare)  # PEFT's own save: no record
        merged = AutoModelForCausalLM.from_pretrained(self.base)
        with CaptureLogger(logging.get_logger(ADAPTER_LOGGER)) as cl:
            self.assertIsNone(stamp_merged_adapter(merged, bare))
        self.assertIn("has no training record", cl.out)
        self.assertEqual(self.saved_config(merged)["trained_precision"], "bf16")


@require_torch
@require_peft
@require_accelerate
class UnknownBaseAdapterTest(TestCasePlus):
    def test_a_short_fp32_lora_run_over_an_unknown_base_stays_unknown(self):
        # the oldest stage decides: the base's precision is unknown, so the adapter's fp32 run does not make base +
        # adapter "fp32-trained" (the report says unknown, not "RISKY: overflow expected"; loading raises nothing)
        reset_warning_cache()
        reset_adapter_warning_cache()
        root = self.get_auto_remove_tmp_dir()
        base = save_base(os.path.join(root, "base"))
        _, adapter = train_lora(base, os.path.join(root, "run"))
        report = inspect_adapter(adapter)
        self.assertEqual(report.record.precision, "fp32")
        self.assertEqual(report.info.lineage, ("unknown", "fp32"))
        self.assertEqual(
            {name: report.status(name) for name in ("fp32", "bf16", "fp16")},
            {"fp32": "safe", "bf16": "unknown", "fp16": "unknown"},
        )
        self.assertNotIn("RISKY", report.format())
        self.assertIn("fine-tuned in fp32 from a model whose trained precision is unknown", report.format())
        with (
            CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl,
            CaptureLogger(logging.get_logger(ADAPTER_LOGGER)) as al,
        ):
            for dtype in (torch.bfloat16, torch.float16):
                AutoModelForCausalLM.from_pretrained(adapter, dtype=dtype, trained_precision_check="error")
        self.assertEqual(cl.out + al.out, "")


@require_torch
@require_peft
@require_accelerate
class Bf16FullTrainPeftTest(TestCasePlus):
    def test_frozen_base_and_adapter_in_bf16(self):
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(0)
        model = get_peft_model(tiny_gpt_neo(trained_precision="bf16"), LoraConfig(**LORA))
        output_dir = self.get_auto_remove_tmp_dir()
        args = TrainingArguments(
            output_dir, max_steps=1, per_device_train_batch_size=4, report_to=[], use_cpu=True, bf16_full_train=True
        )
        Trainer(model, args, train_dataset=random_token_dataset(4)).train()
        q_proj = model.base_model.model.transformer.h[0].attn.attention.q_proj
        self.assertEqual(q_proj.base_layer.weight.dtype, torch.bfloat16)  # the frozen base
        self.assertEqual(q_proj.lora_A["default"].weight.dtype, torch.bfloat16)  # the trainable adapter (Kahan)
        self.assertEqual(model.base_model.model.transformer.h[0].ln_1.weight.dtype, torch.float32)  # norms kept
        model.save_pretrained(output_dir)
        from transformers.trained_precision.record.adapter import save_adapter_record

        save_adapter_record(model, output_dir)
        record = read_adapter_record(output_dir)
        self.assertEqual((record.precision, record.status), ("bf16", "finished"))
        self.assertEqual((record.base_dtype, record.adapter_dtype), ("bfloat16", "bfloat16"))


@require_torch
@require_peft
class AdapterLoadCheckTest(TestCasePlus):
    """Records a GPU run would write (fp16 AMP, pure fp16), written with the real writer into PEFT-saved adapters."""

    def setUp(self):
        super().setUp()
        reset_warning_cache()
        reset_adapter_warning_cache()

    def adapter_with(self, base_dir, record):
        from peft import LoraConfig, get_peft_model

        path = os.path.join(self.get_auto_remove_tmp_dir(), "adapter")
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir), LoraConfig(**LORA))
        model.save_pretrained(path)
        write_adapter_record(os.path.join(path, "adapter_model.safetensors"), record)
        return path

    def amp_record(self, base_dir, **overrides):
        fields = {
            "precision": "fp16",
            "status": "finished",
            "mixed_precision": "fp16",
            "adapter_dtype": "float32",
            "base_dtype": "bfloat16",
            "base_name_or_path": base_dir,
            "base_precision": "bf16",
            "base_provenance": "registry: google/gemma-2b",
            "steps": MIN_RUN_STEPS,
        }
        return AdapterRun(**{**fields, **overrides})

    def test_fp16_amp_adapter_is_named_when_loaded_in_fp16(self):
        base = save_base(os.path.join(self.get_auto_remove_tmp_dir(), "base"), trained_precision="bf16")
        adapter = self.adapter_with(base, self.amp_record(base))
        with CaptureLogger(logging.get_logger(ADAPTER_LOGGER)) as al:
            AutoModelForCausalLM.from_pretrained(adapter, dtype=torch.float16)
        self.assertIn(f"Adapter '{adapter}'", al.out)
        self.assertIn("fp16 mixed precision over bfloat16 base weights", al.out)
        self.assertIn("no evidence for fp16 weights", al.out)

    def test_base_without_field_is_judged_by_the_record(self):
        # the base's own config says nothing; the record knows it was trained in bf16
        base = save_base(os.path.join(self.get_auto_remove_tmp_dir(), "base"))
        adapter = self.adapter_with(base, self.amp_record(base))
        with self.assertRaises(TrainedPrecisionRiskError) as raised:
            AutoModelForCausalLM.from_pretrained(adapter, dtype=torch.float16, trained_precision_check="error")
        self.assertIn(adapter, str(raised.exception))
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float16)
        with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="error"):
            with self.assertRaises(TrainedPrecisionRiskError):
                model.load_adapter(adapter)

    def test_only_a_pure_fp16_run_is_evidence(self):
        base = save_base(os.path.join(self.get_auto_remove_tmp_dir(), "base"), trained_precision="bf16")
        amp = inspect_adapter(self.adapter_with(base, self.amp_record(base)))
        self.assertEqual(amp.status("fp16"), "risky")
        # a pure fp16 run is evidence only for the weights it ended on: the report reads no weights, so it stays
        # risky there (a load checks the run's binding, see BoundAdapterRunTest)
        pure = inspect_adapter(
            self.adapter_with(base, self.amp_record(base, mixed_precision=None, base_dtype="float16"))
        )
        self.assertEqual(pure.status("fp16"), "risky")
        # the same rule as any finished run: a few optimizer steps are a smoke test, not evidence
        short = inspect_adapter(
            self.adapter_with(base, self.amp_record(base, mixed_precision=None, base_dtype="float16", steps=3))
        )
        self.assertEqual(short.status("fp16"), "risky")
        unfinished = inspect_adapter(
            self.adapter_with(
                base, self.amp_record(base, mixed_precision=None, base_dtype="float16", status="started")
            )
        )
        self.assertEqual(unfinished.status("fp16"), "risky")

    def test_a_peft_model_cast_is_checked(self):
        # reaches the check through `PreTrainedModel._apply` (the cast hook every `nn.Module` cast goes through)
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(0)
        model = get_peft_model(tiny_gpt_neo(trained_precision="bf16"), LoraConfig(**LORA))
        with CaptureLogger(logging.get_logger(CHECK_LOGGER)) as cl:
            model.half()
        self.assertIn("was trained in bf16", cl.out)
        model = get_peft_model(tiny_gpt_neo(trained_precision="bf16"), LoraConfig(**LORA))
        with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="error"):
            with self.assertRaises(TrainedPrecisionRiskError):
                model.half()


@require_torch
@require_peft
@require_accelerate
class BoundAdapterRunTest(TestCasePlus):
    """
    A real pure-fp16 LoRA run of MIN_RUN_STEPS steps on inputs of the base's whole length: the adapter's record is
    evidence for base + adapter in fp16, bound to the weights it ended on, as every finished run is.
    """

    def test_a_pure_fp16_adapter_run_clears_its_own_base_only(self):
        from peft import LoraConfig, get_peft_model

        root = self.get_auto_remove_tmp_dir()
        base = save_base(os.path.join(root, "base"), trained_precision="bf16")
        model = get_peft_model(
            AutoModelForCausalLM.from_pretrained(base, dtype=torch.float16, trained_precision_check="ignore"),
            LoraConfig(**LORA),
        ).half()
        args = TrainingArguments(
            os.path.join(root, "run"),
            max_steps=MIN_RUN_STEPS,
            per_device_train_batch_size=4,
            optim="sgd",
            learning_rate=1e-3,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
        )
        trainer = Trainer(model, args, train_dataset=random_token_dataset(8, length=32))
        with mockenv_context(TRANSFORMERS_TRAINED_PRECISION_CHECK="ignore"):
            trainer.train()
        adapter = os.path.join(root, "adapter")
        trainer.save_model(adapter)
        record = read_adapter_record(adapter)
        self.assertEqual(
            (record.status, record.binding["run"], record.binding["max_tokens"]), ("finished", "pure", 32)
        )
        # base + adapter as trained, loaded from the adapter's folder: the base alone warns (a bf16-trained base in
        # fp16), then the adapter's run clears base + adapter, at info level
        reset_warning_cache()
        reset_adapter_warning_cache()
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(ADAPTER_LOGGER)) as al:
            AutoModelForCausalLM.from_pretrained(adapter, dtype=torch.float16)
        self.assertIn("fp16 is not risky for base + adapter", al.out)
        self.assertIn(f"a pure fp16 training run finished {MIN_RUN_STEPS} optimizer steps", al.out)
        # the same adapter on its base edited after the run (one neuron past fp16's range): its run is no evidence
        edited = AutoModelForCausalLM.from_pretrained(base, trained_precision_check="ignore")
        with torch.no_grad():
            edited.transformer.h[0].mlp.c_fc.weight[5] *= 1e6
        edited_dir, moved = os.path.join(root, "edited"), os.path.join(root, "adapter-on-edited")
        edited.save_pretrained(edited_dir)
        shutil.copytree(adapter, moved)
        with open(os.path.join(moved, "adapter_config.json"), encoding="utf-8") as f:
            adapter_config = json.load(f)
        adapter_config["base_model_name_or_path"] = edited_dir
        with open(os.path.join(moved, "adapter_config.json"), "w", encoding="utf-8") as f:
            json.dump(adapter_config, f)
        reset_warning_cache()
        reset_adapter_warning_cache()
        with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger(ADAPTER_LOGGER)) as al:
            model = AutoModelForCausalLM.from_pretrained(moved, dtype=torch.float16)
        self.assertNotIn("not risky", al.out)
        self.assertIn(f"Adapter '{moved}' is being loaded on '{edited_dir}' in fp16", al.out)
        self.assertIn("The finished run in the adapter's record is no evidence here", al.out)
        self.assertIn("its digest does not match these weights", al.out)
        with torch.no_grad():  # what the warning is about
            self.assertFalse(torch.isfinite(model(input_ids=torch.arange(32)[None] % 64).logits).all())


@require_torch
@require_peft
@require_accelerate
@require_bitsandbytes
class QLoRARecordTest(TestCasePlus):
    def test_record_of_a_4bit_run_says_what_the_base_was_loaded_as(self):
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

        from transformers import BitsAndBytesConfig

        root = self.get_auto_remove_tmp_dir()
        base = save_base(os.path.join(root, "base"), trained_precision="bf16")
        quantization = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
        )
        model = AutoModelForCausalLM.from_pretrained(base, quantization_config=quantization, device_map="cpu")
        model = get_peft_model(prepare_model_for_kbit_training(model), LoraConfig(**LORA))
        args = TrainingArguments(
            os.path.join(root, "run"), max_steps=1, per_device_train_batch_size=4, report_to=[], use_cpu=True
        )
        Trainer(model, args, train_dataset=random_token_dataset(4)).train()
        model.save_pretrained(os.path.join(root, "peft-only"))  # PEFT's own save has no record
        self.assertIsNone(read_adapter_record(os.path.join(root, "peft-only")))
        from transformers.trained_precision.record.adapter import save_adapter_record

        save_adapter_record(model, os.path.join(root, "peft-only"))
        record = read_adapter_record(os.path.join(root, "peft-only"))
        self.assertEqual(
            record.base_quantization,
            {"method": "bitsandbytes", "bits": 4, "quant_type": "nf4", "compute_dtype": "bfloat16"},
        )
        self.assertEqual(record.adapter_dtype, "float32")
        self.assertIn("bf16", record.compute_precisions)
        self.assertIn("a 4-bit bitsandbytes base (nf4, compute dtype bfloat16)", record.describe())


if __name__ == "__main__":
    unittest.main()
