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
"""Tests for `transformers precision` and the inspection/audit API behind it."""

import contextlib
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from types import SimpleNamespace
from unittest import mock

from parameterized import parameterized

from transformers.testing_utils import TestCasePlus, require_torch
from transformers.trained_precision.testing_utils import tiny_gpt_neo_config
from transformers.utils import is_torch_available


if is_torch_available():
    import torch

    from transformers import (
        BertConfig,
        BertModel,
        BertTokenizer,
        GPTNeoForCausalLM,
        T5Config,
        T5ForConditionalGeneration,
    )
    from transformers.trained_precision import (
        CheckpointInspectionError,
        SafetensorsHeaderError,
        inspect_checkpoint,
        read_safetensors_header,
    )
    from transformers.trained_precision.plan.audit import DEFAULT_TEXTS


SCALED_MODULE = "encoder.block.1.layer.1.DenseReluDense.wo"


def tiny_t5():
    config = T5Config(
        vocab_size=99,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        decoder_start_token_id=0,
    )
    return T5ForConditionalGeneration(config)


def tiny_gpt_neo(**kwargs):
    config = tiny_gpt_neo_config(vocab_size=99, hidden_size=32, num_heads=4, max_position_embeddings=64, **kwargs)
    return GPTNeoForCausalLM(config)


def tiny_bert_with_tokenizer():
    words = sorted({w for text in DEFAULT_TEXTS for w in re.findall(r"\w+|[^\w\s]", text.lower())})
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    tokenizer = BertTokenizer(vocab=vocab)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    return BertModel(config), tokenizer


def cli_command():
    """The `transformers` console script next to this interpreter, else the same `main` through `python -c`."""
    script = os.path.join(os.path.dirname(sys.executable), "transformers")
    if os.path.isfile(script) and os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-c", "from transformers.cli.transformers import main; main()"]


def write_header_file(path, header_bytes, declared_length=None, data=b""):
    length = len(header_bytes) if declared_length is None else declared_length
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", length) + header_bytes + data)


@require_torch
class PrecisionCommandTest(TestCasePlus):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix="precision_cli_")
        torch.manual_seed(0)

        t5 = tiny_t5()
        cls.t5_dir = cls.path("t5")
        t5.save_pretrained(cls.t5_dir)
        cls.t5_parameters = sum(p.numel() for p in t5.parameters())
        with torch.no_grad():
            t5.get_submodule(SCALED_MODULE).weight.mul_(1e6)  # its outputs now pass 65504 by far
        cls.t5_scaled_dir = cls.path("t5_scaled")
        t5.save_pretrained(cls.t5_scaled_dir)

        neo = tiny_gpt_neo(trained_precision="bf16")
        cls.neo_parameters = sum(p.numel() for p in neo.parameters())
        cls.neo_dir = cls.path("neo")
        neo.save_pretrained(cls.neo_dir)
        cls.neo_sharded_dir = cls.path("neo_sharded_bf16")
        neo.to(torch.bfloat16).save_pretrained(cls.neo_sharded_dir, max_shard_size="20KB")

        bert, tokenizer = tiny_bert_with_tokenizer()
        cls.bert_dir = cls.path("bert")
        bert.save_pretrained(cls.bert_dir)
        tokenizer.save_pretrained(cls.bert_dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp, name)

    def copy_of(self, source, name):
        target = os.path.join(self.get_auto_remove_tmp_dir(), name)
        shutil.copytree(source, target)
        return target

    def run_cli(self, *args):
        """Runs the registered command in-process through the same app the console script runs."""
        import typer
        from click.testing import CliRunner

        from transformers.cli.transformers import app

        command = typer.main.get_command(app) if isinstance(app, typer.Typer) else app
        return CliRunner().invoke(command, ["precision", *args])

    # ------------------------------------------------------------------------------------------------------------
    # inspection without loading
    # ------------------------------------------------------------------------------------------------------------

    def test_local_t5_unknown_precision(self):
        report = inspect_checkpoint(self.t5_dir)
        self.assertEqual(report.declared, "unknown")
        self.assertIsNone(report.declared_raw)
        self.assertIsNone(report.registry)
        self.assertIsNone(report.hub_id)
        self.assertEqual(report.effective, "unknown")
        self.assertEqual(report.model_type, "t5")
        self.assertEqual(report.architectures, ["T5ForConditionalGeneration"])
        self.assertEqual(report.storage.format, "safetensors")
        self.assertEqual(report.storage.dtypes, {"float32": self.t5_parameters})
        self.assertEqual(report.storage.parameters, self.t5_parameters)
        self.assertEqual(report.storage.bytes, 4 * self.t5_parameters)
        # unknown is not safe: only fp32 is
        self.assertEqual(
            {name: v.status for name, v in report.verdicts.items()},
            {"fp32": "safe", "bf16": "unknown", "fp16": "unknown"},
        )
        self.assertIsNone(report.audit)
        self.assertEqual([report.exit_code(d) for d in (None, "fp32", "bf16", "fp16")], [0, 0, 3, 3])

    def test_declared_bf16_verdicts(self):
        report = inspect_checkpoint(self.neo_dir)
        self.assertEqual((report.declared, report.effective, report.effective_from), ("bf16", "bf16", "config"))
        self.assertEqual(report.verdict("fp16").status, "risky")
        self.assertEqual(report.verdict("fp16").kind, "overflow")
        self.assertIn("torch.bfloat16", report.verdict("fp16").fix)
        self.assertEqual(report.verdict(torch.bfloat16).status, "safe")
        self.assertEqual(report.verdict("float32").status, "safe")
        self.assertEqual([report.exit_code(d) for d in (None, "fp32", "bf16", "fp16")], [0, 0, 0, 1])

    def test_sharded_bf16_checkpoint(self):
        self.assertTrue(os.path.isfile(os.path.join(self.neo_sharded_dir, "model.safetensors.index.json")))
        report = inspect_checkpoint(self.neo_sharded_dir)
        self.assertTrue(report.storage.sharded)
        self.assertGreater(len(report.storage.files), 1)
        self.assertEqual(report.storage.dtypes, {"bfloat16": self.neo_parameters})
        self.assertEqual(report.storage.parameters, self.neo_parameters)
        self.assertEqual(report.storage.bytes, 2 * self.neo_parameters)
        self.assertIn(f"{self.neo_parameters:,} stored values", report.format())
        self.assertIn(f"in {len(report.storage.files)} shards", report.format())

    def test_missing_shard(self):
        directory = self.copy_of(self.neo_sharded_dir, "missing_shard")
        with open(os.path.join(directory, "model.safetensors.index.json"), encoding="utf-8") as f:
            shard = sorted(set(json.load(f)["weight_map"].values()))[-1]
        os.remove(os.path.join(directory, shard))
        with self.assertRaisesRegex(CheckpointInspectionError, f"missing .*{re.escape(shard)}"):
            inspect_checkpoint(directory)
        result = self.run_cli(directory)
        self.assertEqual(result.exit_code, 2)
        self.assertIn(shard, result.stderr)

    def test_pickled_weights_are_never_opened(self):
        directory = os.path.join(self.get_auto_remove_tmp_dir(), "pickled")
        os.makedirs(directory)
        shutil.copy(os.path.join(self.t5_dir, "config.json"), directory)
        with open(os.path.join(directory, "pytorch_model.bin"), "wb") as f:
            f.write(b"not a pickle: unpickling this would fail")
        report = inspect_checkpoint(directory)
        self.assertEqual(report.storage.format, "pickle")
        self.assertEqual(report.storage.parameters, 0)
        self.assertIn("not opened", report.format())

    # ------------------------------------------------------------------------------------------------------------
    # broken safetensors files
    # ------------------------------------------------------------------------------------------------------------

    def test_truncated_safetensors(self):
        directory = self.copy_of(self.t5_dir, "truncated")
        weights = os.path.join(directory, "model.safetensors")
        with open(weights, "r+b") as f:
            f.truncate(os.path.getsize(weights) // 2)
        with self.assertRaisesRegex(SafetensorsHeaderError, "truncated"):
            read_safetensors_header(weights)
        result = self.run_cli(directory)
        self.assertEqual(result.exit_code, 2)
        self.assertIn("truncated", result.stderr)

    @parameterized.expand(
        [
            ("garbage_json", b"{not json", None, "malformed"),
            ("not_an_object", b"[1, 2, 3]", None, "malformed"),
            ("bad_entry", json.dumps({"w": {"dtype": "F32", "shape": [2]}}).encode(), None, "malformed"),
            ("oversized", b"{}", 2**40, "limit"),
            ("header_past_end", b"{}", 4096, "truncated"),
            ("too_short", None, None, "fewer than the 8-byte"),
        ]
    )
    def test_malformed_safetensors(self, _, header, declared_length, message):
        directory = os.path.join(self.get_auto_remove_tmp_dir(), "malformed")
        os.makedirs(directory)
        shutil.copy(os.path.join(self.t5_dir, "config.json"), directory)
        weights = os.path.join(directory, "model.safetensors")
        if header is None:
            with open(weights, "wb") as f:
                f.write(b"\x01\x02")
        else:
            write_header_file(weights, header, declared_length)
        with self.assertRaisesRegex(SafetensorsHeaderError, message):
            read_safetensors_header(weights)
        result = self.run_cli(directory, "--dtype", "fp16")
        self.assertEqual(result.exit_code, 2)
        self.assertIn(message, result.stderr)
        self.assertIn("model.safetensors", result.stderr)

    def test_header_read_is_bounded(self):
        directory = os.path.join(self.get_auto_remove_tmp_dir(), "bounded")
        os.makedirs(directory)
        weights = os.path.join(directory, "model.safetensors")
        header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
        write_header_file(weights, header, data=b"\x00" * 4)
        self.assertEqual(read_safetensors_header(weights)["w"]["shape"], [1])
        with self.assertRaisesRegex(SafetensorsHeaderError, "limit"):
            read_safetensors_header(weights, max_header_bytes=len(header) - 1)

    # ------------------------------------------------------------------------------------------------------------
    # bad input and Hub ids
    # ------------------------------------------------------------------------------------------------------------

    def test_missing_path(self):
        missing = os.path.join(self.tmp, "does", "not", "exist")
        result = self.run_cli(missing)
        self.assertEqual(result.exit_code, 2)
        self.assertIn("does not exist, and it is not a Hub model id", result.stderr)

    def test_missing_config(self):
        directory = self.copy_of(self.t5_dir, "no_config")
        os.remove(os.path.join(directory, "config.json"))
        result = self.run_cli(directory)
        self.assertEqual(result.exit_code, 2)
        self.assertIn("no config.json in", result.stderr)

    def test_uncached_hub_id_offline(self):
        with (
            mock.patch.dict(os.environ, {"HF_HUB_OFFLINE": "1"}),
            mock.patch("huggingface_hub.constants.HF_HUB_CACHE", self.get_auto_remove_tmp_dir()),
        ):
            result = self.run_cli("trained-precision-tests/not-cached", "--dtype", "fp16")
        self.assertEqual(result.exit_code, 2)
        self.assertIn("not in the local Hugging Face cache", result.stderr)

    @parameterized.expand([("invalid", "fp8"), ("unknown", "unknown")])
    def test_invalid_dtype(self, _, value):
        result = self.run_cli(self.t5_dir, "--dtype", value)
        self.assertEqual(result.exit_code, 2)
        self.assertIn("fp32, bf16, fp16", result.stderr)

    def test_text_without_audit(self):
        result = self.run_cli(self.t5_dir, "--texts", __file__)
        self.assertEqual(result.exit_code, 2)
        self.assertIn("--audit", result.stderr)

    def make_cached_snapshot(self, cache, repo_id, source):
        repo = os.path.join(cache, "models--" + repo_id.replace("/", "--"))
        commit = "0" * 40
        os.makedirs(os.path.join(repo, "refs"))
        with open(os.path.join(repo, "refs", "main"), "w", encoding="utf-8") as f:
            f.write(commit)
        shutil.copytree(source, os.path.join(repo, "snapshots", commit))
        return os.path.join(repo, "snapshots", commit)

    def test_cached_hub_id_uses_the_registry(self):
        cache = self.get_auto_remove_tmp_dir()
        snapshot = self.make_cached_snapshot(cache, "google-t5/t5-small", self.t5_dir)
        with (
            mock.patch.dict(os.environ, {"HF_HUB_OFFLINE": "1"}),
            mock.patch("huggingface_hub.constants.HF_HUB_CACHE", cache),
        ):
            report = inspect_checkpoint("google-t5/t5-small")
            result = self.run_cli("google-t5/t5-small", "--dtype", "fp16", "--json")
            text = self.run_cli("google-t5/t5-small").stdout
        self.assertIn(f"; {report.registry.citation})", text)
        self.assertEqual(report.hub_id, "google-t5/t5-small")
        self.assertEqual(os.path.realpath(report.directory), os.path.realpath(snapshot))
        self.assertEqual(report.declared, "unknown")
        self.assertEqual(report.registry.precision, "bf16")
        self.assertEqual((report.effective, report.effective_from), ("bf16", "registry"))
        self.assertEqual(report.verdict("fp16").status, "risky")
        self.assertEqual(result.exit_code, 1)
        payload = json.loads(result.stdout)
        self.assertEqual(payload["trained_precision"]["registry"]["model_id"], "google-t5/t5-*")
        self.assertTrue(payload["trained_precision"]["registry"]["source"].startswith("https://"))
        self.assertIn(payload["trained_precision"]["registry"]["confidence"], ("stated", "inferred"))

    def test_uncached_hub_id_online_reads_only_headers(self):
        """Online and uncached: config.json is fetched and the headers come from HTTP range requests (mocked)."""
        tensor = SimpleNamespace(dtype="BF16", shape=[2, 3], data_offsets=(0, 12))
        metadata = SimpleNamespace(
            sharded=False, files_metadata={"model.safetensors": SimpleNamespace(tensors={"w": tensor})}
        )
        config_path = os.path.join(self.t5_dir, "config.json")
        with (
            mock.patch.dict(os.environ, {"HF_HUB_OFFLINE": "0"}),
            mock.patch("huggingface_hub.constants.HF_HUB_OFFLINE", False),
            mock.patch("huggingface_hub.constants.HF_HUB_CACHE", self.get_auto_remove_tmp_dir()),
            mock.patch("transformers.trained_precision.commands.inspection._hub_unreachable", return_value=None),
            mock.patch("huggingface_hub.hf_hub_download", return_value=config_path) as download,
            mock.patch("huggingface_hub.get_safetensors_metadata", return_value=metadata),
        ):
            report = inspect_checkpoint("google-t5/t5-base")
        self.assertEqual([c.args[1] for c in download.call_args_list], ["config.json"])
        self.assertIsNone(report.directory)
        self.assertEqual(report.storage.dtypes, {"bfloat16": 6})
        self.assertEqual(report.storage.bytes, 12)
        self.assertEqual(report.effective_from, "registry")

    def test_local_directory_named_like_a_hub_id_is_not_looked_up(self):
        root = self.get_auto_remove_tmp_dir()
        shutil.copytree(self.t5_dir, os.path.join(root, "google-t5", "t5-small"))
        with mock.patch.dict(os.environ, {"HF_HUB_OFFLINE": "1"}):
            cwd = os.getcwd()
            os.chdir(root)
            try:
                report = inspect_checkpoint("google-t5/t5-small")
            finally:
                os.chdir(cwd)
        self.assertIsNone(report.hub_id)
        self.assertIsNone(report.registry)
        self.assertEqual(report.effective, "unknown")
        self.assertIn("not consulted: a directory outside the Hub cache has no Hub id", report.format())

    # ------------------------------------------------------------------------------------------------------------
    # exit codes and JSON
    # ------------------------------------------------------------------------------------------------------------

    @parameterized.expand(
        [
            ("none", (), 0),
            ("fp32", ("--dtype", "fp32"), 0),
            ("bf16", ("--dtype", "bf16"), 0),
            ("fp16", ("--dtype", "fp16"), 1),
            ("alias", ("--dtype", "float16"), 1),
        ]
    )
    def test_exit_codes(self, _, args, code):
        result = self.run_cli(self.neo_dir, *args)
        self.assertEqual(result.exit_code, code, result.output)
        self.assertIn("Trained precision (config): bf16", result.stdout)

    @parameterized.expand([("json_flag", "--json"), ("format_option", "--format=json")])
    def test_json_schema(self, _, flag):
        result = self.run_cli(self.neo_sharded_dir, "--dtype", "fp16", flag)
        self.assertEqual(result.exit_code, 1)
        payload = json.loads(result.stdout)
        self.assertEqual(
            set(payload),
            {
                "schema_version",
                "checkpoint",
                "directory",
                "hub_id",
                "model_type",
                "architectures",
                "trained_precision",
                "storage",
                "verdicts",
                "audit",
                "sub_models",
                "asked_dtype",
                "status",
                "basis",
                "exit_code",
            },
        )
        self.assertEqual(payload["schema_version"], 4)
        self.assertEqual(payload["sub_models"], {})
        self.assertEqual((payload["status"], payload["basis"]), ("risky", "rule"))
        self.assertEqual((payload["asked_dtype"], payload["exit_code"], payload["audit"]), ("fp16", 1, None))
        self.assertEqual(payload["model_type"], "gpt_neo")
        self.assertEqual(
            payload["trained_precision"],
            {
                "declared": "bf16",
                "declared_raw": "bf16",
                "registry": None,
                "effective": "bf16",
                "effective_from": "config",
                "provenance": "config",
                "pretraining": "unknown",
            },
        )
        self.assertEqual(set(payload["storage"]), {"format", "files", "sharded", "dtypes", "parameters", "bytes"})
        self.assertEqual(payload["storage"]["dtypes"], {"bfloat16": self.neo_parameters})
        self.assertEqual(list(payload["verdicts"]), ["fp32", "bf16", "fp16"])
        for verdict in payload["verdicts"].values():
            self.assertEqual(
                set(verdict),
                {
                    "runtime",
                    "status",
                    "summary",
                    "reasons",
                    "fix",
                    "kind",
                    "severity",
                    "evidence",
                    "mitigation",
                    "basis",
                },
            )
            self.assertEqual(verdict["basis"], "rule")
        self.assertEqual(payload["verdicts"]["fp16"]["status"], "risky")
        self.assertEqual(payload["verdicts"]["bf16"]["status"], "safe")

    def test_json_basis_tells_a_measured_safe_from_a_rules_safe(self):
        """Both are "safe" with exit code 0; `basis` tells a script which one it got."""
        by_rule = json.loads(self.run_cli(self.neo_dir, "--dtype", "bf16", "--json").stdout)
        measured = self.run_cli(self.t5_dir, "--audit", "--dtype", "fp16", "--json")
        self.assertEqual(measured.exit_code, 0, measured.output)
        measured = json.loads(measured.stdout)
        self.assertEqual((by_rule["status"], by_rule["basis"], by_rule["exit_code"]), ("safe", "rule", 0))
        self.assertEqual((measured["status"], measured["basis"], measured["exit_code"]), ("safe", "measured", 0))
        self.assertEqual(
            {name: (v["status"], v["basis"]) for name, v in measured["verdicts"].items()},
            {"fp32": ("safe", "rule"), "bf16": ("safe", "measured"), "fp16": ("safe", "measured")},
        )

    def test_typer_app_registration(self):
        """huggingface_hub 1.x builds the CLI as a `typer.Typer`: the same leaf command must work there."""
        import typer
        from typer.testing import CliRunner

        from transformers.trained_precision.commands.cli import PRECISION_COMMAND_SETTINGS, precision

        app = typer.Typer()
        app.command(name="precision", **PRECISION_COMMAND_SETTINGS)(precision)
        app.command(name="noop")(lambda: None)  # with a second command typer keeps `precision` as a sub-command
        runner = CliRunner()
        self.assertEqual(runner.invoke(app, ["precision", self.neo_dir, "--dtype", "fp16"]).exit_code, 1)
        self.assertEqual(runner.invoke(app, ["precision", self.neo_dir, "--dtype", "bf16"]).exit_code, 0)
        self.assertEqual(runner.invoke(app, ["precision", os.path.join(self.tmp, "nope")]).exit_code, 2)
        result = runner.invoke(app, ["precision", self.neo_dir, "--json", "--bogus"])
        self.assertEqual((result.exit_code, json.loads(result.stdout)["exit_code"]), (2, 2))

    # ------------------------------------------------------------------------------------------------------------
    # the audit
    # ------------------------------------------------------------------------------------------------------------

    def test_audit_flags_scaled_t5_and_names_the_module(self):
        result = self.run_cli(self.t5_scaled_dir, "--audit", "--dtype", "fp16", "--json")
        self.assertEqual(result.exit_code, 1, result.output)
        payload = json.loads(result.stdout)
        audit = payload["audit"]
        self.assertTrue(audit["overflows_fp16"])
        self.assertEqual(audit["first_overflow"]["module"], SCALED_MODULE)
        self.assertEqual(audit["first_overflow"]["where"], "output")
        self.assertGreater(audit["first_overflow"]["max_abs"], 65504)
        self.assertIn(f"overflows fp16 at `{SCALED_MODULE}`", audit["verdict"])
        top = {m["name"]: m for m in audit["top_modules"]}
        self.assertTrue(top[SCALED_MODULE]["overflows_fp16"])  # its parents carry the overflow on: listed too
        self.assertLess(top[SCALED_MODULE]["headroom"], 1)
        self.assertFalse(any(m["overflows_fp16"] for m in audit["top_modules"] if m["name"].startswith("decoder.")))
        self.assertEqual(audit["input_source"], "random")  # a model saved without a tokenizer
        self.assertEqual(payload["verdicts"]["fp16"]["status"], "risky")
        self.assertEqual(payload["verdicts"]["fp16"]["kind"], "measured_overflow")
        self.assertEqual((payload["basis"], payload["verdicts"]["fp16"]["basis"]), ("measured", "measured"))
        self.assertEqual((payload["verdicts"]["bf16"]["status"], payload["verdicts"]["fp32"]["status"]), ("safe",) * 2)

        # bf16 holds the same activations: exit 0
        self.assertEqual(self.run_cli(self.t5_scaled_dir, "--audit", "--dtype", "bf16").exit_code, 0)

    def test_audit_unscaled_t5_fits(self):
        result = self.run_cli(self.t5_dir, "--audit", "--dtype", "fp16", "--top", "3")
        self.assertEqual(result.exit_code, 0, result.output)
        self.assertIn("verdict: fits fp16", result.stdout)
        table = result.stdout.split("fp16 headroom")[1].strip().splitlines()
        self.assertEqual(len(table), 3 + 1)  # three modules, then the verdict

    def test_audit_with_tokenizer_and_text_file(self):
        report = inspect_checkpoint(self.bert_dir, audit=True)
        self.assertEqual(report.audit.input_source, "tokenizer")
        self.assertEqual(report.audit.samples, len(DEFAULT_TEXTS))
        self.assertFalse(report.audit.overflows_fp16)
        self.assertGreater(report.audit.max_abs, 0)

        text_file = os.path.join(self.get_auto_remove_tmp_dir(), "calibration.txt")
        with open(text_file, "w", encoding="utf-8") as f:
            f.write("the quick brown fox\n\njumps over the lazy dog\n\nthe committee reviews the budget\n")
        result = self.run_cli(self.bert_dir, "--audit", "--text", text_file, "--json")
        self.assertEqual(result.exit_code, 0, result.output)
        audit = json.loads(result.stdout)["audit"]
        self.assertEqual((audit["input_source"], audit["samples"]), ("texts", 3))

    def test_text_file_needs_a_tokenizer(self):
        text_file = os.path.join(self.get_auto_remove_tmp_dir(), "calibration.txt")
        with open(text_file, "w", encoding="utf-8") as f:
            f.write("some text\n")
        result = self.run_cli(self.t5_dir, "--audit", "--texts", text_file)
        self.assertEqual(result.exit_code, 2)
        self.assertIn("tokenizer", result.stderr)

    def test_audit_of_a_model_without_token_inputs(self):
        from transformers import ViTConfig, ViTModel

        directory = os.path.join(self.get_auto_remove_tmp_dir(), "vit")
        config = ViTConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=37,
            image_size=8,
            patch_size=4,
        )
        ViTModel(config).save_pretrained(directory)
        self.assertEqual(self.run_cli(directory, "--dtype", "fp16").exit_code, 3)  # inspection works: unknown
        result = self.run_cli(directory, "--audit")
        self.assertEqual(result.exit_code, 2)
        self.assertIn("text models only", result.stderr)

    # ------------------------------------------------------------------------------------------------------------
    # the installed entry point (the "done when" check)
    # ------------------------------------------------------------------------------------------------------------

    def test_entry_point_done_when(self):
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
        scaled = subprocess.run(
            [*cli_command(), "precision", self.t5_scaled_dir, "--audit", "--dtype", "fp16"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        self.assertEqual(scaled.returncode, 1, scaled.stdout + scaled.stderr)
        self.assertIn(f"overflows fp16 at `{SCALED_MODULE}`", scaled.stdout)
        plain = subprocess.run(
            [*cli_command(), "precision", self.t5_dir, "--audit", "--dtype", "fp16"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        self.assertEqual(plain.returncode, 0, plain.stdout + plain.stderr)
        self.assertIn("fits fp16", plain.stdout)


if __name__ == "__main__":
    unittest.main()


@require_torch
class PrecisionCommandSafetyTest(TestCasePlus):
    """Unknown is not safe, one coherent verdict per runtime, and nothing outside a checkpoint is opened."""

    def setUp(self):
        super().setUp()
        self.tmp = self.get_auto_remove_tmp_dir()

    def save(self, name, **config_kwargs):
        directory = os.path.join(self.tmp, name)
        tiny_gpt_neo(**config_kwargs).save_pretrained(directory)
        return directory

    def run_main(self, *args):
        from transformers.trained_precision.commands import cli

        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main(list(args))
            except SystemExit as e:
                code = e.code or 0
        return code, out.getvalue(), err.getvalue()

    def test_unknown_verdict_and_exit_code(self):
        directory = self.save("unknown")
        report = inspect_checkpoint(directory)
        self.assertEqual(report.verdict("fp16").status, "unknown")
        self.assertFalse(report.verdict("fp16").is_safe)
        self.assertEqual(report.verdict("fp32").status, "safe")
        code, out, _ = self.run_main(directory, "--dtype", "fp16", "--json")
        self.assertEqual((code, json.loads(out)["status"]), (3, "unknown"))

    @parameterized.expand(
        [("parent", "../../../etc/passwd"), ("absolute", "/etc/passwd"), ("subdir", "a/b.safetensors")]
    )
    def test_shard_names_must_stay_inside(self, _, shard):
        directory = self.save("bad_index")
        with open(os.path.join(directory, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
            json.dump({"metadata": {}, "weight_map": {"w": shard}}, f)
        opened = []
        real_open = open

        def spy(path, *args, **kwargs):
            opened.append(os.path.abspath(os.fspath(path)))
            return real_open(path, *args, **kwargs)

        with mock.patch("builtins.open", spy), self.assertRaisesRegex(CheckpointInspectionError, "plain file names"):
            inspect_checkpoint(directory)
        self.assertTrue(all(p.startswith(os.path.abspath(directory)) for p in opened), opened)
        code, _, err = self.run_main(directory)
        self.assertEqual(code, 2)
        self.assertIn("plain file names", err)

    def test_audit_without_torch_says_how_to_install_it(self):
        directory = self.save("no_torch")
        with mock.patch.dict(sys.modules, {"torch": None}):
            code, _, err = self.run_main(directory, "--audit")
        self.assertEqual(code, 2)
        self.assertIn("pip install torch", err)
        self.assertNotIn("Traceback", err)

    def test_help_lists_exit_codes_and_bad_dtype_lists_runtime_dtypes(self):
        code, out, _ = self.run_main("--help")
        self.assertEqual(code, 0)
        for line in ("0  safe", "1  risky", "2  bad input", "3  unknown"):
            self.assertIn(line, out)
        code, _, err = self.run_main(self.save("d"), "--dtype", "unknown")
        self.assertEqual(code, 2)
        self.assertIn("use one of fp32, bf16, fp16", err)
        self.assertNotIn("'unknown'", err.split("use one of")[1])

    def test_errors_are_json_with_json(self):
        code, out, err = self.run_main(os.path.join(self.tmp, "missing"), "--json")
        self.assertEqual(code, 2)
        self.assertEqual(json.loads(out)["exit_code"], 2)
        self.assertIn("does not exist", json.loads(out)["error"])
        self.assertEqual(err, "")

    def test_set_precision_then_remove_it(self):
        directory = self.save("set_remove")
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            original = f.read()
        code, out, _ = self.run_main("set", directory, "--precision", "bfloat16")
        self.assertEqual(code, 0, out)
        self.assertEqual(inspect_checkpoint(directory).declared, "bf16")
        code, out, _ = self.run_main("set", directory, "--precision", "unknown")
        self.assertEqual(code, 4)  # not done: 1 means risky and nothing else
        self.assertIn("needs --force", out)
        code, out, _ = self.run_main("set", directory, "--precision", "unknown", "--force")
        self.assertEqual(code, 0, out)
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            self.assertEqual(f.read(), original)

    def test_set_needs_one_source(self):
        directory = self.save("set_bad")
        for args in ((), ("--precision", "bf16", "--from-registry"), ("--precision", "fp8")):
            code, _, err = self.run_main("set", directory, *args)
            self.assertEqual(code, 2, args)
        self.assertIn("fp32, bf16, fp16, unknown", err)
        code, _, err = self.run_main(directory, "--precision", "bf16")
        self.assertEqual(code, 2)
        self.assertIn("transformers precision set", err)
