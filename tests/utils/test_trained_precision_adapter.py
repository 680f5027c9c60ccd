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
The training record of a PEFT adapter (`trained_precision.record.adapter`) on its own: the record's schema, its storage in
the `__metadata__` of an `adapter_model.safetensors` saved by the real peft, the record of a run kept on a `PeftModel`,
and the judgement of base + adapter. The Trainer that writes the record and the loaders that check it are tested with
the pull requests that add them.
"""

import json
import os
import struct
import unittest
from unittest import mock

from parameterized import parameterized

from transformers import is_torch_available
from transformers.testing_utils import CaptureLogger, TestCasePlus, require_peft, require_torch
from transformers.trained_precision.facts.binding import backend_of, bind
from transformers.trained_precision.facts.resolver import TrainedPrecisionInfo
from transformers.trained_precision.facts.run_record import MIN_RUN_STEPS
from transformers.trained_precision.guard.check import TrainedPrecisionRiskError, reset_warning_cache
from transformers.trained_precision.record.adapter import (
    ADAPTER_SAFE_WEIGHTS_NAME,
    METADATA_KEY,
    RECORD_VERSION,
    RUN_ATTRIBUTE,
    AdapterRun,
    adapter_precision_info,
    check_adapter_precision,
    finish_adapter_run,
    read_adapter_record,
    reset_adapter_warning_cache,
    save_adapter_record,
    start_adapter_run,
    write_adapter_record,
)
from transformers.trained_precision.testing_utils import tiny_gpt_neo
from transformers.utils import logging


if is_torch_available():
    import torch

ADAPTER_LOGGER = "transformers.trained_precision.record.adapter"
V1 = {"version": RECORD_VERSION}
LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM"}


def amp_run(**overrides):
    """The record of an fp16 mixed-precision run over bf16 base weights (what a GPU LoRA run in fp16 AMP writes)."""
    fields = {
        "precision": "fp16",
        "status": "finished",
        "mixed_precision": "fp16",
        "adapter_dtype": "float32",
        "base_dtype": "bfloat16",
        "base_name_or_path": "org/base",
        "base_precision": "bf16",
        "base_provenance": "config",
        "steps": MIN_RUN_STEPS,
    }
    return AdapterRun(**{**fields, **overrides})


def pure_fp16_run(**overrides):
    """The record of a run whose base weights were in fp16 themselves."""
    return amp_run(**{"mixed_precision": None, "base_dtype": "float16", **overrides})


class AdapterRunTest(unittest.TestCase):
    def test_json_round_trip(self):
        record = amp_run(base_quantization={"method": "bitsandbytes", "bits": 4, "quant_type": "nf4"})
        data = json.loads(record.to_json())
        self.assertEqual(data["version"], RECORD_VERSION)
        self.assertEqual(AdapterRun.from_json(record.to_json()), record)

    def test_reading_normalizes_precisions_and_ignores_unknown_members(self):
        data = {"version": RECORD_VERSION, "precision": "bfloat16", "base_precision": "FP32", "added_later": 1}
        record = AdapterRun.from_dict(data)
        self.assertEqual(
            (record.precision, record.base_precision, record.base_pretraining), ("bf16", "fp32", "unknown")
        )
        self.assertIsNone(record.status)

    @parameterized.expand(
        [
            ("other_version", {"version": 2, "precision": "fp16"}, "version"),
            ("no_version", {"precision": "fp16"}, "version"),
            ("unknown_precision", {**V1, "precision": "fp13"}, "fp13"),
            ("unknown_base_precision", {**V1, "precision": "fp16", "base_precision": "int3"}, "int3"),
            ("unknown_mixed_precision", {**V1, "precision": "fp16", "mixed_precision": "fp12"}, "fp12"),
            ("unknown_status", {**V1, "precision": "fp16", "status": "done"}, "status 'done'"),
            ("dtype_not_a_string", {**V1, "precision": "fp16", "base_dtype": 16}, "base_dtype"),
            (
                "quantization_not_an_object",
                {**V1, "precision": "fp16", "base_quantization": "nf4"},
                "base_quantization",
            ),
            ("steps_a_string", {**V1, "precision": "fp16", "steps": "100"}, "steps"),
            ("steps_a_bool", {**V1, "precision": "fp16", "steps": True}, "steps"),
        ]
    )
    def test_malformed_record_raises_naming_the_problem(self, _, data, named):
        with self.assertRaises(ValueError) as raised:
            AdapterRun.from_dict(data)
        self.assertIn(named, str(raised.exception))

    def test_not_an_object_or_not_json_raises(self):
        with self.assertRaisesRegex(ValueError, "not an object"):
            AdapterRun.from_dict(["fp16"])
        with self.assertRaisesRegex(ValueError, "not JSON"):
            AdapterRun.from_json("{fp16")

    def test_run_record_is_pure_only_over_weights_of_the_run_precision(self):
        self.assertEqual(pure_fp16_run().run_record().compute, "pure")
        self.assertEqual(amp_run().run_record().compute, "amp")
        self.assertEqual(amp_run(base_dtype=None).run_record().compute, "amp")  # unrecorded: not pure
        self.assertEqual(pure_fp16_run().run_record().optimizer_steps, MIN_RUN_STEPS)
        self.assertIsNone(amp_run(status=None).run_record())

    def test_only_a_finished_long_pure_run_is_evidence_for_its_precision(self):
        self.assertTrue(pure_fp16_run().is_evidence_for("fp16"))
        self.assertFalse(pure_fp16_run().is_evidence_for("bf16"))  # another runtime
        self.assertFalse(amp_run().is_evidence_for("fp16"))  # fp16 autocast over bf16 weights
        self.assertFalse(pure_fp16_run(steps=3).is_evidence_for("fp16"))  # a smoke test
        self.assertFalse(pure_fp16_run(steps=None).is_evidence_for("fp16"))
        self.assertFalse(pure_fp16_run(status="started").is_evidence_for("fp16"))
        self.assertFalse(pure_fp16_run(status="diverged").is_evidence_for("fp16"))

    def test_lineage_and_compute_precisions(self):
        record = amp_run(base_pretraining="bf16", base_precision="fp32")
        self.assertEqual(record.base_lineage, ("bf16", "fp32"))
        self.assertEqual(amp_run().base_lineage, ("bf16",))
        self.assertEqual(amp_run(base_precision="unknown").base_lineage, ())
        self.assertEqual(amp_run().compute_precisions, ("bf16", "fp16"))
        qlora = amp_run(base_dtype="uint8", mixed_precision=None, base_quantization={"compute_dtype": "bfloat16"})
        self.assertEqual(qlora.compute_precisions, ("bf16",))

    def test_describe(self):
        self.assertEqual(
            amp_run().describe(),
            "trained in fp16 (fp16 mixed precision over bfloat16 base weights, float32 adapter weights, run finished)",
        )
        qlora = AdapterRun(
            "bf16",
            base_quantization={"method": "bitsandbytes", "bits": 4, "quant_type": "nf4", "compute_dtype": "bfloat16"},
        )
        self.assertEqual(qlora.describe(), "trained in bf16 (a 4-bit bitsandbytes base (nf4, compute dtype bfloat16))")
        self.assertEqual(AdapterRun("fp32").describe(), "trained in fp32 (no details recorded)")


class AdapterPrecisionInfoTest(unittest.TestCase):
    def test_the_adapter_run_follows_the_base_lineage(self):
        base = TrainedPrecisionInfo("bf16", source="config")
        info = adapter_precision_info(base, amp_run(precision="fp32", mixed_precision=None, base_dtype="float32"))
        self.assertEqual(info.lineage, ("bf16", "fp32"))
        self.assertIsNotNone(info.assess("fp16").risk)  # bf16-pretrained weights overflow in fp16
        self.assertIsNone(info.assess("bf16").risk)

    def test_a_base_that_says_nothing_takes_the_lineage_the_record_kept(self):
        info = adapter_precision_info(TrainedPrecisionInfo("unknown"), amp_run())
        self.assertEqual(info.lineage, ("bf16", "fp16"))
        self.assertEqual(adapter_precision_info(None, amp_run()).lineage, ("bf16", "fp16"))
        self.assertIsNotNone(info.assess("fp16").risk)

    def test_without_a_record_the_base_answers(self):
        base = TrainedPrecisionInfo("bf16", source="config")
        self.assertIs(adapter_precision_info(base, None), base)
        self.assertFalse(adapter_precision_info(None, None).is_known)

    def test_a_pure_fp16_run_is_evidence_only_where_bound_an_amp_run_never(self):
        # a pure run clears fp16 only for the weights it ended on (its binding, checked against the loaded model: see
        # test_trained_precision_peft.BoundAdapterRunTest); a record without one, read without weights, is no evidence
        base = TrainedPrecisionInfo("bf16", source="config")
        pure = adapter_precision_info(base, pure_fp16_run()).assess("fp16")
        self.assertIsNotNone(pure.risk)
        self.assertIn("The finished run in the adapter's record is no evidence here", pure.dropped)
        self.assertIsNotNone(adapter_precision_info(base, amp_run()).assess("fp16").risk)
        self.assertIsNotNone(adapter_precision_info(base, pure_fp16_run(steps=3)).assess("fp16").risk)


@require_torch
@require_peft
class AdapterFileTest(TestCasePlus):
    """The record in adapters saved by the real peft, on a tiny GPT-Neo."""

    def setUp(self):
        super().setUp()
        reset_warning_cache()
        reset_adapter_warning_cache()

    def peft_model(self, **config):
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(0)
        return get_peft_model(tiny_gpt_neo(**config), LoraConfig(**LORA))

    def saved_adapter(self, model=None, **save_kwargs):
        path = os.path.join(self.get_auto_remove_tmp_dir(), "adapter")
        (model or self.peft_model()).save_pretrained(path, **save_kwargs)
        return path

    def test_an_adapter_saved_by_peft_has_no_record(self):
        path = self.saved_adapter()
        self.assertIsNone(read_adapter_record(path))
        self.assertIsNone(read_adapter_record(os.path.join(path, ADAPTER_SAFE_WEIGHTS_NAME)))
        self.assertIsNone(read_adapter_record(self.saved_adapter(safe_serialization=False)))  # `.bin`
        self.assertIsNone(read_adapter_record(os.path.join(path, "missing")))

    def test_write_then_read(self):
        from safetensors import safe_open

        path = self.saved_adapter()
        weights = os.path.join(path, ADAPTER_SAFE_WEIGHTS_NAME)
        with safe_open(weights, "pt") as f:
            metadata_before = f.metadata()
            tensors_before = {k: f.get_tensor(k) for k in f.keys()}
        with open(weights, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            data_before = f.read()[length:]
        files_before = sorted(os.listdir(path))
        mode_before = os.stat(weights).st_mode

        write_adapter_record(weights, amp_run())

        self.assertEqual(read_adapter_record(path), amp_run())
        self.assertEqual(read_adapter_record(weights), amp_run())
        self.assertEqual(sorted(os.listdir(path)), files_before)  # nothing left beside it
        self.assertEqual(os.stat(weights).st_mode, mode_before)
        with safe_open(weights, "pt") as f:  # still a safetensors file; peft's metadata and tensors kept
            metadata = f.metadata()
            self.assertEqual(sorted(f.keys()), sorted(tensors_before))
            for key, value in tensors_before.items():
                self.assertTrue(torch.equal(f.get_tensor(key), value))
        self.assertEqual({k: v for k, v in metadata.items() if k != METADATA_KEY}, metadata_before)
        with open(weights, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            self.assertEqual(length % 8, 0)
            self.assertEqual(f.read()[length:], data_before)  # the tensor data byte for byte

        write_adapter_record(weights, pure_fp16_run())  # a second write replaces the record
        self.assertEqual(read_adapter_record(path), pure_fp16_run())

    def test_peft_loads_an_adapter_with_a_record(self):
        from peft import PeftModel

        model = self.peft_model()
        path = self.saved_adapter(model)
        write_adapter_record(os.path.join(path, ADAPTER_SAFE_WEIGHTS_NAME), amp_run())
        torch.manual_seed(1)
        loaded = PeftModel.from_pretrained(tiny_gpt_neo(), path)
        trained = {k: v for k, v in model.state_dict().items() if "lora_" in k}
        self.assertTrue(trained)
        for key, value in trained.items():
            torch.testing.assert_close(loaded.state_dict()[key], value)

    def test_a_later_peft_save_drops_the_record(self):
        model = self.peft_model()
        path = self.saved_adapter(model)
        write_adapter_record(os.path.join(path, ADAPTER_SAFE_WEIGHTS_NAME), amp_run())
        model.save_pretrained(path)
        self.assertIsNone(read_adapter_record(path))

    def test_an_interrupted_write_leaves_the_old_file_whole(self):
        path = self.saved_adapter()
        weights = os.path.join(path, ADAPTER_SAFE_WEIGHTS_NAME)
        write_adapter_record(weights, amp_run())
        with open(weights, "rb") as f:
            before = f.read()
        files_before = sorted(os.listdir(path))
        with mock.patch("os.replace", side_effect=KeyboardInterrupt):
            with self.assertRaises(KeyboardInterrupt):
                write_adapter_record(weights, pure_fp16_run())
        with open(weights, "rb") as f:
            self.assertEqual(f.read(), before)
        self.assertEqual(sorted(os.listdir(path)), files_before)
        self.assertEqual(read_adapter_record(path), amp_run())

    def test_writing_into_a_file_that_is_not_safetensors_raises(self):
        path = self.get_auto_remove_tmp_dir()
        files = {
            "short": b"\x01",
            "header_longer_than_the_file": struct.pack("<Q", 1 << 40) + b"{}",
            "header_not_json": struct.pack("<Q", 4) + b"{no}",
            "header_not_an_object": struct.pack("<Q", 2) + b"[]",
        }
        for name, content in files.items():
            weights = os.path.join(path, name)
            with open(weights, "wb") as f:
                f.write(content)
            with self.assertRaises(ValueError):
                write_adapter_record(weights, amp_run())
            with open(weights, "rb") as f:
                self.assertEqual(f.read(), content)
        self.assertEqual(sorted(os.listdir(path)), sorted(files))  # no temporary file left

    def test_malformed_record_is_ignored_with_a_warning(self):
        from safetensors.torch import load_file, save_file

        path = self.saved_adapter()
        weights = os.path.join(path, ADAPTER_SAFE_WEIGHTS_NAME)
        save_file(load_file(weights), weights, metadata={"format": "pt", METADATA_KEY: '{"version": 9}'})
        with CaptureLogger(logging.get_logger(ADAPTER_LOGGER)) as al:
            self.assertIsNone(read_adapter_record(path))
        self.assertIn("malformed", al.out)
        self.assertIn("version", al.out)

    def test_the_run_kept_on_the_model_is_saved_into_every_adapter(self):
        from peft import LoraConfig

        model = self.peft_model(trained_precision="bf16", name_or_path="org/base")
        model.add_adapter("other", LoraConfig(**LORA))
        path = self.get_auto_remove_tmp_dir()
        model.save_pretrained(path, save_embedding_layers=False)  # no Hub look-up of "org/base"
        self.assertEqual(save_adapter_record(model, path), [])  # no run started

        started = start_adapter_run(model, "fp32", base=model.get_base_model())
        self.assertEqual((started.precision, started.status), ("fp32", "started"))
        self.assertEqual((started.base_precision, started.base_provenance), ("bf16", "config"))
        self.assertEqual((started.adapter_dtype, started.base_dtype), ("float32", "float32"))
        self.assertEqual(started.base_name_or_path, "org/base")
        self.assertIsNone(started.base_quantization)

        finished = finish_adapter_run(model, "finished", steps=2)
        self.assertEqual((finished.status, finished.steps), ("finished", 2))
        written = save_adapter_record(model, path)
        self.assertEqual(
            sorted(written),
            sorted(
                [os.path.join(path, ADAPTER_SAFE_WEIGHTS_NAME), os.path.join(path, "other", ADAPTER_SAFE_WEIGHTS_NAME)]
            ),
        )
        self.assertEqual(read_adapter_record(path), finished)
        self.assertEqual(read_adapter_record(os.path.join(path, "other")), finished)

    def test_a_second_run_keeps_the_base_lineage_of_the_first(self):
        model = self.peft_model(trained_precision="bf16")
        base = model.get_base_model()
        start_adapter_run(model, "fp32", base=base)
        base.config.trained_precision = "fp32"  # what stamping the base's config after the first start does
        second = start_adapter_run(model, "fp32", base=base)
        self.assertEqual((second.base_precision, second.base_provenance), ("bf16", "config"))
        self.assertIsNone(finish_adapter_run(self.peft_model(), "finished"))  # no run started

    def test_a_model_that_is_not_a_peft_model_saves_nothing(self):
        model = tiny_gpt_neo()
        setattr(model, RUN_ATTRIBUTE, amp_run())
        path = self.get_auto_remove_tmp_dir()
        self.assertEqual(save_adapter_record(model, path), [])
        self.assertEqual(os.listdir(path), [])


@require_torch
class CheckAdapterPrecisionTest(TestCasePlus):
    """`check_adapter_precision` on a base in memory, at a runtime dtype given to it (no cast, no load)."""

    def setUp(self):
        super().setUp()
        reset_warning_cache()
        reset_adapter_warning_cache()

    def test_a_record_knows_the_lineage_a_silent_base_does_not(self):
        model = tiny_gpt_neo()
        with self.assertRaises(TrainedPrecisionRiskError) as raised:
            check_adapter_precision(model, "org/adapter", record=amp_run(), dtype=torch.float16, mode="error")
        self.assertIn("Adapter 'org/adapter'", str(raised.exception))
        self.assertIn("as the adapter's record kept it", str(raised.exception))
        # "ignore" says nothing and still returns the risk, as `check_trained_precision` does
        with CaptureLogger(logging.get_logger(ADAPTER_LOGGER)) as al:
            silenced = check_adapter_precision(
                model, "org/adapter", record=amp_run(), dtype=torch.float16, mode="ignore"
            )
        self.assertEqual((silenced.trained, silenced.runtime, al.out), ("bf16", "fp16", ""))
        self.assertIsNone(
            check_adapter_precision(model, "org/adapter", dtype=torch.float16, mode="error")
        )  # no record

    def test_an_amp_run_in_the_runtime_is_named_once(self):
        model = tiny_gpt_neo(trained_precision="bf16")
        with CaptureLogger(logging.get_logger(ADAPTER_LOGGER)) as al:
            risk = check_adapter_precision(model, "org/adapter", record=amp_run(), dtype=torch.float16, mode="warn")
            again = check_adapter_precision(model, "org/adapter", record=amp_run(), dtype=torch.float16, mode="warn")
        self.assertIsNotNone(risk)
        self.assertEqual(again, risk)  # one meaning of "already said": the risk remains, it is not said again
        self.assertEqual(al.out.count("Adapter 'org/adapter'"), 1)
        self.assertIn("fp16 mixed precision over bfloat16 base weights", al.out)
        self.assertIn("no evidence for fp16 weights", al.out)

    def test_a_risk_of_the_base_alone_is_not_said_again(self):
        # the base's own check says it when the base is loaded or cast; a run in fp32 adds nothing about fp16
        model = tiny_gpt_neo(trained_precision="bf16")
        fp32_run = pure_fp16_run(precision="fp32", base_dtype="float32")
        with CaptureLogger(logging.get_logger(ADAPTER_LOGGER)) as al:
            risk = check_adapter_precision(model, "a", record=fp32_run, dtype=torch.float16, mode="error")
        self.assertEqual((risk.trained, risk.runtime), ("bf16", "fp16"))  # it remains; the base's check raises it
        self.assertEqual(al.out, "")

    def test_a_pure_fp16_run_overrides_the_risk_for_the_weights_it_ended_on(self):
        model = tiny_gpt_neo(trained_precision="bf16")
        bound = bind(model, "pure", 32, backend_of(torch.device("cpu")))
        self.assertIsNone(
            check_adapter_precision(model, "a", record=pure_fp16_run(binding=bound), dtype=torch.float16, mode="error")
        )
        # the record of an older version (no binding), and the same binding on weights edited since: no evidence
        for record, why in ((pure_fp16_run(), "records no binding"), (pure_fp16_run(binding=bound), "digest")):
            if why == "digest":
                with torch.no_grad():
                    model.transformer.h[0].mlp.c_fc.weight[5] *= 1e6
            with self.assertRaises(TrainedPrecisionRiskError) as raised:
                check_adapter_precision(model, "a", record=record, dtype=torch.float16, mode="error")
            self.assertIn("The finished run in the adapter's record is no evidence here", str(raised.exception))
            self.assertIn(why, str(raised.exception))

    def test_the_record_is_read_from_the_adapter_file(self):
        from safetensors.torch import save_file

        weights = os.path.join(self.get_auto_remove_tmp_dir(), ADAPTER_SAFE_WEIGHTS_NAME)
        save_file({"lora": torch.zeros(2)}, weights, metadata={"format": "pt"})
        write_adapter_record(weights, amp_run())
        with self.assertRaises(TrainedPrecisionRiskError):
            check_adapter_precision(tiny_gpt_neo(), "a", adapter_file=weights, dtype=torch.float16, mode="error")


if __name__ == "__main__":
    unittest.main()
