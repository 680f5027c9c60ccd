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
"""Tests for `transformers precision plan PATH_OR_ID --dtype fp16 [--write]`."""

import json
import os
import shutil
import tempfile
import unittest
from unittest import mock

from transformers.testing_utils import TestCasePlus, require_torch
from transformers.utils import is_torch_available


if is_torch_available():
    import torch

    from transformers import GPT2LMHeadModel
    from transformers.trained_precision.guard.check import TrainedPrecisionRiskError
    from transformers.trained_precision.testing_utils import plant_fp16_overflow, tiny_gpt2


MLP = "transformer.h.1.mlp"


@require_torch
class PrecisionPlanCommandTest(TestCasePlus):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.sources = {}
        overflow = plant_fp16_overflow(tiny_gpt2(), f"{MLP}.c_fc", f"{MLP}.c_proj")
        residual = tiny_gpt2()
        with torch.no_grad():  # the block's own output passes fp16's range: the residual stream overflows
            residual.transformer.h[0].mlp.c_proj.weight.mul_(1e7)
        for name, model in (("overflow", overflow), ("residual", residual), ("clean", tiny_gpt2())):
            cls.sources[name] = os.path.join(cls.tmp, name)
            model.save_pretrained(cls.sources[name])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def checkpoint(self, name):
        target = os.path.join(self.get_auto_remove_tmp_dir(), name)
        shutil.copytree(self.sources[name], target)
        return target

    def run_cli(self, *args):
        import typer
        from click.testing import CliRunner

        from transformers.cli.transformers import app

        command = typer.main.get_command(app) if isinstance(app, typer.Typer) else app
        return CliRunner().invoke(command, ["precision", "plan", *args])

    def write_config(self, path, config):
        with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)

    def read_config(self, path):
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            return f.read()

    def test_write_stores_a_validated_plan_that_the_fp16_load_applies(self):
        path = self.checkpoint("overflow")
        result = self.run_cli(path, "--dtype", "fp16", "--write")
        self.assertEqual(result.exit_code, 0, result.output)
        self.assertIn(MLP, result.output)
        self.assertIn("validation vs fp32", result.output)
        self.assertIn("wrote the plan", result.output)
        plan = json.loads(self.read_config(path))["fp16_plan"]
        self.assertEqual(plan["modules"], [MLP])
        self.assertTrue(plan["validation"]["passed"])
        self.assertEqual(
            sorted(os.listdir(path)),
            ["config.json", "generation_config.json", "model.safetensors"],
        )
        model = GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16)
        self.assertEqual(model.transformer.h[1].mlp.c_fc.weight.dtype, torch.float32)
        ids = torch.arange(20).unsqueeze(0)
        self.assertTrue(torch.isfinite(model(ids).logits).all())

    def test_a_plan_measured_on_a_gpu_is_reported_for_that_device(self):
        """Review 62b H2: the report cannot know the runtime: a plan measured on a GPU is verified for that kind of
        device, and its verdict says so; a load on the CPU still refuses it."""
        from transformers.trained_precision.commands.inspection import SAFE, inspect_checkpoint
        from transformers.trained_precision.plan.fp16_plan import plan_fingerprint

        gpu, path = "cuda NVIDIA H100 80GB HBM3", self.checkpoint("overflow")
        config = json.loads(self.read_config(path))
        config["trained_precision"] = "bf16"
        self.write_config(path, config)
        self.assertEqual(self.run_cli(path, "--dtype", "fp16", "--write").exit_code, 0)
        config = json.loads(self.read_config(path))
        plan = config["fp16_plan"]
        plan["validated_on"].update(device="cuda", backend=gpu)
        plan["fingerprint"] = plan_fingerprint(GPT2LMHeadModel.from_pretrained(path), plan)  # as measured there
        self.write_config(path, config)
        verdict = inspect_checkpoint(path).verdicts["fp16"]
        self.assertEqual(verdict.status, SAFE, verdict.reasons)
        self.assertTrue(verdict.summary.startswith(f"safe on cuda ({gpu}): "), verdict.summary)
        self.assertIn(f"the fp16 plan is verified for {gpu}, the kind of device it was measured", verdict.reasons[-1])
        with self.assertRaises(TrainedPrecisionRiskError) as raised:  # the load, on this CPU: unchanged
            GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        self.assertIn("the plan holds there only; on cpu", str(raised.exception))  # (the device, not stale)
        self.assertNotIn("stale", str(raised.exception))

    def test_max_length_sets_how_far_the_plan_is_evidence(self):
        """A plan validated on 32 tokens of a bf16-trained model that takes 64 clears fp16 up to 32 tokens only."""
        path = self.checkpoint("overflow")
        config = json.loads(self.read_config(path))
        config["trained_precision"] = "bf16"
        with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
        result = self.run_cli(path, "--dtype", "fp16", "--write", "--max-length", "32", "--json")
        self.assertEqual(result.exit_code, 0, result.output)
        self.assertEqual(json.loads(self.read_config(path))["fp16_plan"]["validated_on"]["max_tokens"], 32)
        with self.assertRaises(TrainedPrecisionRiskError) as raised:
            GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        self.assertIn("it saw inputs of up to 32 tokens, and this model takes 64", str(raised.exception))
        self.assertIn("precision plan PATH --dtype fp16 --max-length 64 --write`", str(raised.exception))
        # planned again on the model's whole length, as the message says: cleared
        result = self.run_cli(path, "--dtype", "fp16", "--write", "--force", "--max-length", "64")
        self.assertEqual(result.exit_code, 0, result.output)
        model = GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16, trained_precision_check="error")
        self.assertTrue(torch.isfinite(model(torch.arange(64).unsqueeze(0) % 64).logits).all())

    def test_without_write_nothing_changes(self):
        path = self.checkpoint("overflow")
        before = self.read_config(path)
        result = self.run_cli(path, "--dtype", "fp16")
        self.assertEqual(result.exit_code, 0, result.output)
        self.assertIn("add --write", result.output)
        self.assertEqual(self.read_config(path), before)

    def test_residual_stream_overflow_exits_1_and_writes_nothing(self):
        path = self.checkpoint("residual")
        before = self.read_config(path)
        result = self.run_cli(path, "--dtype", "fp16", "--write")
        self.assertEqual(result.exit_code, 1, result.output)
        self.assertIn("residual stream", result.output)
        self.assertIn("bf16", result.output)
        self.assertEqual(self.read_config(path), before)

    def test_no_overflow_gives_an_empty_plan(self):
        path = self.checkpoint("clean")
        result = self.run_cli(path, "--dtype", "fp16", "--write", "--json")
        self.assertEqual(result.exit_code, 0, result.output)
        document = json.loads(result.stdout)
        self.assertEqual(document["plan"]["modules"], [])
        self.assertEqual(document["exit_code"], 0)
        self.assertEqual(document["written"], os.path.join(path, "config.json"))
        self.assertEqual(json.loads(self.read_config(path))["fp16_plan"]["modules"], [])

    def test_texts_file_calibrates_and_a_quarter_is_held_out(self):
        import hashlib

        from tokenizers import Tokenizer, models, pre_tokenizers

        from transformers import PreTrainedTokenizerFast

        texts = [f"Sentence number {i} talks about {topic}." for i, topic in enumerate("abcdefgh")]
        # a word-level tokenizer over the texts' own words, built here: the command loads it from the checkpoint
        words = sorted({word for text in texts for word in text.replace(".", " .").split()})
        vocab = {"[UNK]": 0, **{word: i + 1 for i, word in enumerate(words)}}
        backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[UNK]")
        path = os.path.join(self.get_auto_remove_tmp_dir(), "with-tokenizer")
        tiny_gpt2(vocab_size=len(vocab)).save_pretrained(path)
        tokenizer.save_pretrained(path)
        texts_file = os.path.join(self.get_auto_remove_tmp_dir(), "texts.txt")
        with open(texts_file, "w", encoding="utf-8") as f:
            f.write("\n".join(texts))
        result = self.run_cli(path, "--dtype", "fp16", "--texts", texts_file, "--json")
        self.assertEqual(result.exit_code, 0, result.output)
        plan = json.loads(result.stdout)["plan"]
        calibration = texts[:6]  # 8 texts: 6 calibrate, 2 are held out for validation only
        expected = hashlib.sha256(b"".join(t.encode("utf-8") + b"\0" for t in calibration)).hexdigest()
        self.assertEqual(plan["calibration_sha256"], expected)
        # 6 texts and the length sweep (32 and the model's 64 positions) calibrate; 2 texts and the sweep of the
        # held-out texts validate
        self.assertEqual(plan["validation"]["texts"], 12)
        self.assertEqual(plan["validated_on"]["lengths"][-1], 64)

    def test_write_into_a_hub_cache_snapshot_needs_force(self):
        root = os.path.join(self.get_auto_remove_tmp_dir(), "models--someone--tiny-gpt2")
        snapshot = os.path.join(root, "snapshots", "0" * 40)
        shutil.copytree(self.sources["overflow"], snapshot)
        blob = os.path.join(root, "blobs", "config")
        os.makedirs(os.path.dirname(blob))
        shutil.move(os.path.join(snapshot, "config.json"), blob)
        os.symlink(os.path.relpath(blob, snapshot), os.path.join(snapshot, "config.json"))
        with open(blob, encoding="utf-8") as f:
            original = f.read()

        # refused before the model is loaded and searched, not after
        searched = mock.patch(
            "transformers.trained_precision.plan.fp16_plan_search.plan_checkpoint",
            side_effect=AssertionError("searched"),
        )
        with searched:
            result = self.run_cli(snapshot, "--dtype", "fp16", "--write")
        self.assertEqual(result.exit_code, 4, result.output)
        self.assertIn("is a Hub cache snapshot", result.output)
        self.assertIn("--force", result.output)
        self.assertTrue(os.path.islink(os.path.join(snapshot, "config.json")))  # nothing modified

        result = self.run_cli(snapshot, "--dtype", "fp16", "--write", "--force")
        self.assertEqual(result.exit_code, 0, result.output)
        self.assertFalse(os.path.islink(os.path.join(snapshot, "config.json")))
        self.assertEqual(json.loads(self.read_config(snapshot))["fp16_plan"]["modules"], [MLP])
        with open(blob, encoding="utf-8") as f:
            self.assertEqual(f.read(), original)  # the shared blob is untouched

    def test_write_through_a_link_out_of_the_checkpoint_is_refused(self):
        # the report refuses to read a config.json that links out of the checkpoint; `--write` refuses to write it,
        # `--force` or not, before any search
        path = self.checkpoint("overflow")
        outside = os.path.join(self.get_auto_remove_tmp_dir(), "victim.json")
        shutil.move(os.path.join(path, "config.json"), outside)
        os.symlink(outside, os.path.join(path, "config.json"))
        with open(outside, encoding="utf-8") as f:
            original = f.read()
        searched = mock.patch(
            "transformers.trained_precision.plan.fp16_plan_search.plan_checkpoint",
            side_effect=AssertionError("searched"),
        )
        for force in ((), ("--force",)):
            with searched:
                result = self.run_cli(path, "--dtype", "fp16", "--write", *force)
            self.assertEqual(result.exit_code, 4, result.output)
            self.assertIn("outside the checkpoint", result.output)
        with open(outside, encoding="utf-8") as f:
            self.assertEqual(f.read(), original)

    def test_bad_input_exits_2(self):
        path = self.checkpoint("clean")
        texts = os.path.join(self.get_auto_remove_tmp_dir(), "texts.txt")
        with open(texts, "w", encoding="utf-8") as f:
            f.write("one text\nanother text\n")
        for args, message in (
            ((path, "--dtype", "bf16"), "fp16 only"),
            ((path, "--dtype", "fp8"), "fp16 only"),
            ((path, "--headroom", "0.5"), "--headroom must be a number >= 1"),
            ((path, "--max-length", "1"), "--max-length must be an integer >= 2"),
            ((os.path.join(path, "missing"),), "neither a checkpoint directory"),
            ((path, "--texts", texts), "need a tokenizer"),
            ((path, "--precision", "bf16"), "--precision goes with `transformers precision set`: not with `plan`"),
            ((), "`plan` takes one checkpoint directory or Hub id, got 0"),
            ((path, path), "got 2"),
        ):
            with self.subTest(args=args):
                result = self.run_cli(*args)
                self.assertEqual(result.exit_code, 2, result.output)
                self.assertIn(message, result.output)
        self.assertNotIn("fp16_plan", self.read_config(path))

    def test_a_truncated_file_fails_before_the_model_is_built_with_the_reports_message(self):
        from transformers.trained_precision.facts.storage import CheckpointInspectionError
        from transformers.trained_precision.plan.audit import audit_checkpoint

        path = self.checkpoint("clean")
        weights = os.path.join(path, "model.safetensors")
        os.truncate(weights, os.path.getsize(weights) // 2)
        report = self.report(path, "--json")
        self.assertEqual(report.exit_code, 2, report.output)
        message = json.loads(report.stdout)["error"]
        self.assertIn("is truncated: tensor", message)
        self.assertIn("of the data section", message)
        with mock.patch.object(GPT2LMHeadModel, "from_pretrained") as load:
            for args in ((path, "--dtype", "fp16", "--json"), (path, "--audit", "--json")):
                result = self.run_cli(*args) if args[1] == "--dtype" else self.report(*args)
                self.assertEqual((result.exit_code, json.loads(result.stdout)["error"]), (2, message), args)
            with self.assertRaises(CheckpointInspectionError) as raised:  # the Python entry point of the audit
                audit_checkpoint(path)
            self.assertEqual(str(raised.exception), message)
        load.assert_not_called()
        self.assertNotIn("fp16_plan", self.read_config(path))

    def test_plan_options_belong_to_plan(self):
        import typer
        from click.testing import CliRunner

        from transformers.cli.transformers import app

        command = typer.main.get_command(app) if isinstance(app, typer.Typer) else app
        result = CliRunner().invoke(command, ["precision", self.checkpoint("clean"), "--write"])
        self.assertEqual(result.exit_code, 2, result.output)
        self.assertIn("--write goes with `transformers precision plan`: not with the report", result.output)

    def report(self, *args):
        import typer
        from click.testing import CliRunner

        from transformers.cli.transformers import app

        command = typer.main.get_command(app) if isinstance(app, typer.Typer) else app
        return CliRunner().invoke(command, ["precision", *args])

    def test_a_written_plan_is_verified_by_the_report_as_by_a_load(self):
        # the report checks the plan's fingerprint on the weights mapped from the file (a stale or copied plan would
        # otherwise make it say "safe"); this model's precision is unknown, so fp16 stays "unknown" either way. Where
        # it cannot check (no PyTorch), the plan clears nothing and the verdict says how to verify it
        path = self.checkpoint("clean")
        self.assertEqual(self.report(path, "--dtype", "fp16").exit_code, 3)
        self.assertEqual(self.run_cli(path, "--dtype", "fp16", "--write").exit_code, 0)
        result = self.report(path, "--dtype", "fp16", "--json")
        self.assertEqual(result.exit_code, 3, result.output)
        verdict = json.loads(result.stdout)["verdicts"]["fp16"]
        self.assertEqual(verdict["status"], "unknown")
        self.assertFalse(any("fp16 plan" in reason for reason in verdict["reasons"]), verdict)
        with mock.patch.dict("sys.modules", {"torch": None}):
            result = self.report(path, "--dtype", "fp16", "--json")
        verdict = json.loads(result.stdout)["verdicts"]["fp16"]
        self.assertEqual((result.exit_code, verdict["status"]), (3, "unknown"), result.output)
        self.assertTrue(any("stored fp16 plan is unverified" in reason for reason in verdict["reasons"]), verdict)

    def test_texts_has_one_spelling_in_plan_and_audit(self):
        help_text = self.report("--help").output
        self.assertIn("--texts", help_text)
        self.assertNotIn("--text ", help_text)  # the former audit spelling is a hidden alias
        path = self.checkpoint("clean")
        texts = os.path.join(self.get_auto_remove_tmp_dir(), "texts.txt")
        with open(texts, "w", encoding="utf-8") as f:
            f.write("one text\nanother text\n")
        for args in (
            ("plan", path, "--texts", texts),
            ("plan", path, "--text", texts),
            (path, "--audit", "--texts", texts),
        ):
            with self.subTest(args=args):
                result = self.report(*args)
                self.assertEqual(result.exit_code, 2, result.output)
                self.assertIn("need a tokenizer", result.output)
        result = self.report(path, "--audit", "--texts", texts, "--text", path)
        self.assertEqual(result.exit_code, 2, result.output)
        self.assertIn("another name of --texts", result.output)

    def test_download_of_an_uncached_id_fails_at_once_where_the_hub_cannot_be_reached(self):
        def no_download(*args, **kwargs):
            raise AssertionError("the command tried to download")

        with (
            mock.patch.dict(os.environ, {"HF_HUB_OFFLINE": "0"}),
            mock.patch("huggingface_hub.constants.HF_HUB_OFFLINE", False),
            mock.patch("transformers.trained_precision.commands.inspection._hub_unreachable", return_value="no route"),
            mock.patch("huggingface_hub.hf_hub_download", no_download),
            mock.patch("huggingface_hub.snapshot_download", no_download),
        ):
            result = self.run_cli("google/flan-t5-small", "--dtype", "fp16", "--download")
        self.assertEqual(result.exit_code, 2, result.output)
        self.assertIn("the Hub cannot be reached (no route)", result.output)
        # offline, the same at once, naming HF_HUB_OFFLINE
        with mock.patch("huggingface_hub.constants.HF_HUB_OFFLINE", True):
            result = self.run_cli("google/flan-t5-small", "--dtype", "fp16", "--download")
        self.assertEqual(result.exit_code, 2, result.output)
        self.assertIn("HF_HUB_OFFLINE is set", result.output)


if __name__ == "__main__":
    unittest.main()
