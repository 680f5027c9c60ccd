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
"""A PEFT adapter's training record: written into its safetensors metadata, read back, and judged with its base."""

import os
import tempfile
import unittest

from transformers.testing_utils import CaptureLogger, require_peft, require_torch
from transformers.trained_precision.adapter import (
    ADAPTER_SAFE_WEIGHTS_NAME,
    METADATA_KEY,
    AdapterRun,
    adapter_precision_info,
    read_adapter_record,
    record_from_metadata,
    write_adapter_record,
)
from transformers.trained_precision.resolver import resolve_trained_precision
from transformers.trained_precision.run_record import MIN_RUN_STEPS
from transformers.utils import is_peft_available, is_torch_available, logging


if is_torch_available():
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file

    from transformers.trained_precision.adapter import finish_adapter_run, save_adapter_record, start_adapter_run
    from transformers.trained_precision.testing_utils import tiny_gpt2

if is_peft_available():
    from peft import LoraConfig, get_peft_model


def lora(model):
    return get_peft_model(model, LoraConfig(r=2, target_modules=["c_attn"], lora_alpha=4, lora_dropout=0.0))


@require_torch
@require_peft
class AdapterRecordFileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        base = tiny_gpt2()
        base.config.trained_precision = "bf16"
        base.config.name_or_path = "my-org/bf16-base"
        self.peft_model = lora(base)
        self.peft_model.save_pretrained(self.dir)
        self.weights = os.path.join(self.dir, ADAPTER_SAFE_WEIGHTS_NAME)

    def tearDown(self):
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    def test_an_adapter_saved_by_peft_alone_has_no_record(self):
        self.assertIsNone(read_adapter_record(self.dir))
        self.assertIsNone(read_adapter_record(os.path.join(self.dir, "missing")))

    def test_the_record_of_a_run_round_trips_through_the_weights_file(self):
        record = start_adapter_run(self.peft_model, "bf16", base=self.peft_model.get_base_model())
        # the base's lineage as it was before the run, the dtypes the run computed in
        self.assertEqual((record.base_precision, record.base_provenance), ("bf16", "config"))
        self.assertEqual((record.adapter_dtype, record.base_dtype, record.status), ("float32", "float32", "started"))
        finished = finish_adapter_run(self.peft_model, "finished", steps=12)
        self.assertEqual((finished.status, finished.steps), ("finished", 12))
        tensors = load_file(self.weights)
        self.assertEqual(save_adapter_record(self.peft_model, self.dir), [self.weights])
        self.assertEqual(read_adapter_record(self.dir), finished)
        # the tensors are byte for byte those peft wrote, and nothing else is left in the directory
        after = load_file(self.weights)
        self.assertEqual(set(after), set(tensors))
        self.assertTrue(all(torch.equal(after[k], tensors[k]) for k in tensors))
        self.assertEqual(sorted(os.listdir(self.dir)), ["README.md", "adapter_config.json", ADAPTER_SAFE_WEIGHTS_NAME])
        with safe_open(self.weights, "pt") as f:
            self.assertIn(METADATA_KEY, f.metadata())

    def test_a_model_that_was_not_stamped_writes_nothing(self):
        self.assertEqual(save_adapter_record(self.peft_model, self.dir), [])
        self.assertEqual(save_adapter_record(tiny_gpt2(), self.dir), [])
        self.assertIsNone(read_adapter_record(self.dir))

    def test_a_malformed_record_warns_once_and_reads_as_none(self):
        logger = logging.get_logger("transformers.trained_precision.adapter")
        with CaptureLogger(logger) as cl:
            self.assertIsNone(record_from_metadata({METADATA_KEY: "{not json"}, where="x"))
        self.assertIn("is malformed", cl.out)
        self.assertIsNone(record_from_metadata({"format": "pt"}))

    def test_writing_keeps_the_other_metadata(self):
        write_adapter_record(self.weights, AdapterRun("fp16", status="started"))
        write_adapter_record(self.weights, AdapterRun("fp16", status="finished", steps=3))
        with safe_open(self.weights, "pt") as f:
            self.assertEqual(f.metadata().get("format"), "pt")
        self.assertEqual(read_adapter_record(self.weights).steps, 3)


class AdapterVerdictTest(unittest.TestCase):
    base = resolve_trained_precision({"trained_precision": "bf16"})

    def test_base_and_adapter_are_judged_on_the_bases_lineage_then_the_run(self):
        run = AdapterRun("fp16", status="finished", mixed_precision="fp16", base_dtype="bfloat16", steps=MIN_RUN_STEPS)
        info = adapter_precision_info(self.base, run)
        self.assertEqual(info.lineage, ("bf16", "fp16"))
        # fp16 autocast over bf16 base weights kept the residual stream in bf16: no evidence for fp16 weights
        self.assertIsNotNone(info.assess("fp16").risk)
        self.assertIsNone(info.assess("bf16").risk)

    def test_a_finished_pure_run_of_enough_steps_is_evidence(self):
        run = AdapterRun("fp16", status="finished", base_dtype="float16", steps=MIN_RUN_STEPS)
        self.assertIsNone(adapter_precision_info(self.base, run).assess("fp16").risk)
        short = AdapterRun("fp16", status="finished", base_dtype="float16", steps=MIN_RUN_STEPS - 1)
        self.assertIsNotNone(adapter_precision_info(self.base, short).assess("fp16").risk)
        diverged = AdapterRun("fp16", status="diverged", base_dtype="float16", steps=MIN_RUN_STEPS)
        self.assertIsNotNone(adapter_precision_info(self.base, diverged).assess("fp16").risk)

    def test_without_a_record_the_base_decides_and_a_record_fills_an_unknown_base(self):
        self.assertIs(adapter_precision_info(self.base, None), self.base)
        unknown = resolve_trained_precision({})
        run = AdapterRun("bf16", status="started", base_precision="bf16", base_provenance="config")
        info = adapter_precision_info(unknown, run)
        self.assertEqual(info.lineage, ("bf16",))
        self.assertIsNotNone(info.assess("fp16").risk)


if __name__ == "__main__":
    unittest.main()
