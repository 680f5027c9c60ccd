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
One answer on every path for every way of naming a model: a fake Hub cache holds tiny checkpoints under legacy and
canonical ids, and the same table of id forms drives the loader, `transformers precision` (report and `set`) and a
saved copy. A model loaded by its Hub id keeps its publisher's runtime only while its weights are the ones it loaded.
"""

import contextlib
import io
import json
import os
import shutil
import unittest
from unittest import mock

from parameterized import parameterized

from transformers.testing_utils import CaptureLogger, TestCasePlus, require_peft, require_torch
from transformers.trained_precision.commands import cli
from transformers.trained_precision.facts.hub_ids import (
    LEGACY_HUB_IDS,
    cache_snapshot_of,
    canonical_hub_id,
    hub_id_for,
    hub_id_spellings,
    parse_hub_id,
)
from transformers.trained_precision.facts.registry import lookup
from transformers.trained_precision.facts.resolver import resolve_trained_precision
from transformers.trained_precision.facts.risk import assess_lineage_risk
from transformers.trained_precision.vocabulary import REFERENCE_FIELD
from transformers.utils import is_torch_available, logging


if is_torch_available():
    import torch

    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        AutoModelForSeq2SeqLM,
        LlamaConfig,
        LlamaForCausalLM,
        T5Config,
        T5ForConditionalGeneration,
    )
    from transformers.trained_precision.guard.check import TrainedPrecisionRiskError, reset_warning_cache
    from transformers.trained_precision.guard.sentinel import cleared_by
    from transformers.trained_precision.record.stamp import stamp_trained_precision

REVISION = "0123456789abcdef0123456789abcdef01234567"

# (name, cache folder the model lies in, how the user names it); "{root}" is the cache root. Every form resolves to a
# bf16 registry row: google-t5/t5-* (T5 was trained with bf16 activations).
ID_FORMS = [
    ("legacy_id", "t5-small", "t5-small"),
    ("canonical_id", "google-t5/t5-base", "google-t5/t5-base"),
    ("legacy_snapshot_path", "t5-small", "{root}/models--t5-small/snapshots/" + REVISION),
    ("canonical_snapshot_path", "google-t5/t5-base", "{root}/models--google-t5--t5-base/snapshots/" + REVISION),
    ("snapshot_subfolder_path", "google-t5/t5-base", "{root}/models--google-t5--t5-base/snapshots/" + REVISION),
]
# Forms only the report and `set` accept: the model is cached under another spelling than the one asked for.
CROSS_SPELLINGS = [
    ("canonical_id_of_legacy_cache", "google-t5/t5-small"),
    ("legacy_id_of_canonical_cache", "t5-base"),
    ("other_case", "Google-T5/T5-Base"),
]


class HubIdsTest(unittest.TestCase):
    @parameterized.expand(
        [
            ("t5-base", "google-t5/t5-base"),
            ("T5-Base", "google-t5/t5-base"),
            (" gpt2 ", "openai-community/gpt2"),
            ("bert-base-uncased", "google-bert/bert-base-uncased"),
            ("roberta-base", "FacebookAI/roberta-base"),
            ("google-t5/t5-base", "google-t5/t5-base"),
            ("EleutherAI/gpt-neo-1.3B", "EleutherAI/gpt-neo-1.3B"),
            ("my-model", "my-model"),
        ]
    )
    def test_canonical_hub_id(self, value, expected):
        self.assertEqual(canonical_hub_id(value), expected)

    @parameterized.expand([(v,) for v in (None, "", "./a", "/a/b", "~/a", "a/b/c", "a--b/c", "a/b..c", "a/b.json", 3)])
    def test_not_a_hub_id(self, value):
        self.assertIsNone(parse_hub_id(value))
        self.assertIsNone(canonical_hub_id(value))

    def test_every_legacy_row_is_consistent(self):
        for key, row in LEGACY_HUB_IDS.items():
            self.assertEqual(key, row.legacy.lower())
            self.assertEqual(row.canonical.split("/")[1], row.legacy)
            self.assertTrue(row.source.startswith("https://"), row)

    def test_registry_sees_the_canonical_id(self):
        for legacy in ("t5-small", "T5-LARGE", "bert-base-uncased", "roberta-base"):
            self.assertIs(lookup(legacy), lookup(canonical_hub_id(legacy)))
            self.assertIsNotNone(lookup(legacy), legacy)
        self.assertEqual(lookup("t5-11b").precision, "bf16")

    def test_spellings(self):
        self.assertEqual(hub_id_spellings("google-t5/t5-base"), ["google-t5/t5-base", "t5-base"])
        self.assertEqual(hub_id_spellings("t5-base"), ["t5-base", "google-t5/t5-base"])

    def test_cache_snapshot_of_any_root(self):
        for root in ("/data/hf", "/home/u/.cache/huggingface/hub", "relative/cache"):
            snapshot = cache_snapshot_of(f"{root}/models--t5-small/snapshots/{REVISION}/sub")
            self.assertEqual(
                (snapshot.hub_id, snapshot.cached_as, snapshot.revision), ("google-t5/t5-small", "t5-small", REVISION)
            )
        self.assertIsNone(cache_snapshot_of(f"/x/models--a--b--c/snapshots/{REVISION}"))
        self.assertIsNone(cache_snapshot_of("/x/models--a--b/refs/main"))


class LineageTest(unittest.TestCase):
    def test_bf16_pretrained_fp32_finetuned(self):
        # no false alarm in bf16, still a warning in fp16
        self.assertIsNone(assess_lineage_risk(("bf16", "fp32"), "bf16"))
        self.assertEqual(assess_lineage_risk(("bf16", "fp32"), "fp16").trained, "bf16")
        self.assertIsNone(assess_lineage_risk(("unknown", "unknown"), "fp16"))
        self.assertIsNone(assess_lineage_risk((), "fp16"))

    def test_resolver_reads_both_fields(self):
        config = {"trained_precision": "fp32", "pretraining_precision": "bf16"}
        info = resolve_trained_precision(config, "google-t5/t5-small")
        self.assertEqual((info.precision, info.pretraining, info.lineage), ("fp32", "bf16", ("bf16", "fp32")))
        self.assertIsNone(info.risk("bf16"))
        self.assertEqual(info.risk("fp16").kind, "overflow")
        self.assertEqual(info.provenance, "config")

    def test_an_unknown_oldest_stage_leaves_the_risk_unknown(self):
        # what the stamp writes for a fine-tune of a model of unknown precision: the oldest stage decides, and it is
        # unknown, whatever the fine-tune ran in; without the field, the run is the model's whole lineage
        self.assertIsNone(assess_lineage_risk(("unknown", "fp32"), "fp16"))
        for tuned in ("fp32", "fp16", "bf16"):
            info = resolve_trained_precision({"trained_precision": tuned, "pretraining_precision": "unknown"}, None)
            self.assertEqual((info.lineage, info.lineage_known), (("unknown", tuned), False))
            for runtime in ("bf16", "fp16"):
                self.assertIsNone(info.assess(runtime).prior, (tuned, runtime))
        info = resolve_trained_precision({"trained_precision": "fp32"}, None)
        self.assertEqual((info.lineage, info.lineage_known), (("fp32",), True))
        self.assertEqual(info.risk("fp16").trained, "fp32")
        # a later known value does not replace the unknown oldest stage, a known one does not become unknown
        info = resolve_trained_precision({"trained_precision": "fp32", "pretraining_precision": "bf16"}, None)
        self.assertEqual(info.lineage, ("bf16", "fp32"))

    def test_registry_provenance(self):
        info = resolve_trained_precision({}, "t5-small")
        self.assertEqual((info.precision, info.source, info.hub_id), ("bf16", "registry", "google-t5/t5-small"))
        self.assertEqual(info.provenance, "registry: google-t5/t5-*")
        info = resolve_trained_precision({"trained_precision": "not-a-precision"}, None)
        self.assertEqual((info.precision, info.provenance), ("unknown", "unknown"))


def tiny_t5():
    config = T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2, decoder_start_token_id=0)
    return T5ForConditionalGeneration(config)


@require_torch
class IdFormsTest(TestCasePlus):
    """Every id form of `ID_FORMS` on every path: the loader, the report, `set`, and a saved copy."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        import tempfile

        cls.root = tempfile.mkdtemp(prefix="hub_cache_")
        model = tiny_t5()
        for hub_id in ("t5-small", "google-t5/t5-base"):
            repo = os.path.join(cls.root, "models--" + hub_id.replace("/", "--"))
            os.makedirs(os.path.join(repo, "refs"))
            with open(os.path.join(repo, "refs", "main"), "w", encoding="utf-8") as f:
                f.write(REVISION)
            model.save_pretrained(os.path.join(repo, "snapshots", REVISION))
        os.makedirs(os.path.join(cls.root, "models--google-t5--t5-base", "snapshots", REVISION, "sub"), exist_ok=True)

    @classmethod
    def tearDownClass(cls):
        import shutil

        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        from transformers.trained_precision.guard import check

        check.reset_warning_cache()

    def form(self, name_or_path):
        return name_or_path.format(root=self.root)

    def cli(self, *args):
        """`transformers precision ARGS --cache-dir ROOT` in-process: (exit code, stdout)."""
        out = io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            try:
                cli.main([*args, "--cache-dir", self.root])
            except SystemExit as e:
                code = e.code or 0
        return code, out.getvalue()

    def load(self, name_or_path, dtype):
        logger = logging.get_logger("transformers.trained_precision.guard.check")
        with CaptureLogger(logger) as cl:
            model = AutoModelForSeq2SeqLM.from_pretrained(name_or_path, cache_dir=self.root, dtype=dtype)
        return model, cl.out

    @parameterized.expand(ID_FORMS)
    def test_loader_warns(self, _, cached_as, name_or_path):
        _, out = self.load(self.form(name_or_path), torch.float16)
        self.assertIn("was trained in bf16", out)
        self.assertIn("registry: google-t5/t5-*, stated at", out)

    @parameterized.expand(ID_FORMS + [(n, None, f) for n, f in CROSS_SPELLINGS])
    def test_report_exits_risky(self, _, cached_as, name_or_path):
        code, out = self.cli(self.form(name_or_path), "--dtype", "fp16", "--json")
        self.assertEqual(code, 1, out)
        payload = json.loads(out)
        self.assertEqual(payload["status"], "risky")
        self.assertEqual(payload["trained_precision"]["effective"], "bf16")
        self.assertTrue(payload["trained_precision"]["provenance"].startswith("registry: google-t5/t5-*"))
        self.assertEqual(self.cli(self.form(name_or_path), "--dtype", "bf16")[0], 0)

    @parameterized.expand(ID_FORMS + [(n, None, f) for n, f in CROSS_SPELLINGS])
    def test_set_from_registry_writes_bf16(self, _, cached_as, name_or_path):
        code, out = self.cli("set", self.form(name_or_path), "--from-registry", "--dry-run")
        self.assertEqual(code, 0, out)
        self.assertIn('+  "trained_precision": "bf16",', out)
        self.assertIn("[would write]", out)

    @parameterized.expand(ID_FORMS)
    def test_saved_copy_keeps_the_registry_answer(self, _, cached_as, name_or_path):
        model, _ = self.load(self.form(name_or_path), torch.float32)
        self.assertEqual(model.config.trained_precision, "bf16")  # persisted from the registry row
        copy = self.get_auto_remove_tmp_dir()
        model.save_pretrained(copy)
        with open(os.path.join(copy, "config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["trained_precision"], "bf16")
        _, out = self.load(copy, torch.float16)
        self.assertIn("was trained in bf16", out)
        self.assertIn("from its config's `trained_precision`", out)

    def test_report_and_loader_agree_on_a_snapshot_path(self):
        path = os.path.join(self.root, "models--t5-small", "snapshots", REVISION)
        self.assertEqual(hub_id_for(path), "google-t5/t5-small")
        code, out = self.cli(path, "--dtype", "fp16")
        self.assertEqual(code, 1)
        self.assertIn("registry", out)
        self.assertNotIn("not consulted", out)

    def test_revision_on_a_local_directory_is_an_error(self):
        path = os.path.join(self.root, "models--t5-small", "snapshots", REVISION)
        code, out = self.cli(path, "--revision", "main", "--json")
        self.assertEqual(code, 2)
        self.assertIn("--revision applies to Hub ids", json.loads(out)["error"])

    def test_hub_cache_environment(self):
        from huggingface_hub import constants

        with mock.patch.object(constants, "HF_HUB_CACHE", self.root):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), self.assertRaises(SystemExit) as ctx:
                cli.main(["t5-small", "--dtype", "fp16"])
        self.assertEqual(ctx.exception.code, 1)
        self.assertIn("fp16: RISKY", out.getvalue())


LLAMA2 = "meta-llama/Llama-2-7b-hf"  # a registry row: trained in bf16, stored in fp16, its publisher runs it in fp16


@require_torch
class PublisherReferenceTest(TestCasePlus):
    """
    Review 62c H2: a registry model loaded by its Hub id, then changed in memory (a fine-tune, a bf16 round trip), is
    no longer the publisher's: its cast to fp16 is judged by its training, as a `save_pretrained` copy of it is.
    """

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        import tempfile

        cls.root = tempfile.mkdtemp(prefix="hub_cache_")
        repo = os.path.join(cls.root, "models--meta-llama--Llama-2-7b-hf")
        os.makedirs(os.path.join(repo, "refs"))
        with open(os.path.join(repo, "refs", "main"), "w", encoding="utf-8") as f:
            f.write(REVISION)
        torch.manual_seed(0)
        config = LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=32,
        )
        LlamaForCausalLM(config).half().save_pretrained(os.path.join(repo, "snapshots", REVISION))

    @classmethod
    def tearDownClass(cls):
        import shutil

        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def load(self, dtype=None):
        """The snapshot loaded by its Hub id in error mode, in fp32 unless `dtype` says otherwise."""
        return AutoModelForCausalLM.from_pretrained(
            LLAMA2, cache_dir=self.root, dtype=dtype or torch.float32, trained_precision_check="error"
        )

    def assert_fp16_cast_raises(self, model, why):
        """`.half()` raises before casting, saying why the publisher's runtime is no evidence and what to do."""
        reset_warning_cache()
        before = model.dtype
        with self.assertRaises(TrainedPrecisionRiskError) as raised:
            model.half()
        self.assertEqual(model.dtype, before)
        message = str(raised.exception)
        self.assertIn(
            f"The publisher reference in `{REFERENCE_FIELD}` ('{LLAMA2}') is no evidence here: {why}", message
        )
        self.assertIn(f"load '{LLAMA2}' again", message)
        self.assertIn("Cast it with `.to(torch.bfloat16)` or `.float()` instead", message)

    def test_unchanged_weights_keep_the_publisher_runtime(self):
        for dtype in (torch.float16, torch.float32):
            with self.subTest(dtype=dtype):
                model = self.load(dtype)  # no error at the load
                reset_warning_cache()
                model.float().half()  # nor at its casts: these are the weights the load bound
                self.assertEqual(model.dtype, torch.float16)
                self.assertIn(f"its publisher runs '{LLAMA2}' in fp16", cleared_by(model))

    def test_weights_changed_in_memory_are_judged_by_their_training(self):
        model = self.load()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.01)  # every weight moves, as in a fine-tune
        self.assert_fp16_cast_raises(model, "its digest does not match these weights")

    def test_weights_rounded_or_trained_stay_judged_by_their_training(self):
        # the reference the load persisted is dropped with the rounding (at a cast or at the load) or by a training
        # run's stamp: the name alone no longer stands for the publisher's weights, however the model is cast afterwards
        def trained():
            model = self.load()
            stamp_trained_precision(model, "bf16", check=False)  # what a bf16 Trainer run leaves
            return model

        changes = {"cast": lambda: self.load().bfloat16(), "load": lambda: self.load(torch.bfloat16), "run": trained}
        for name, changed in changes.items():
            with self.subTest(name):
                model = changed()
                self.assertIsNone(vars(model.config).get(REFERENCE_FIELD))
                self.assert_fp16_cast_raises(
                    model, "it was dropped when the weights were rounded, quantized or trained"
                )
                model.float()
                self.assert_fp16_cast_raises(model, "it was dropped")

    def test_a_model_built_from_its_config_is_not_the_publishers(self):
        # random weights named by the Hub id: no load of it bound them, so the name alone clears nothing
        config = AutoConfig.from_pretrained(LLAMA2, cache_dir=self.root)  # its dtype: fp16, as the checkpoint's
        reset_warning_cache()
        with self.assertRaises(TrainedPrecisionRiskError):  # built in fp16
            AutoModelForCausalLM.from_config(config, trained_precision_check="error")
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, trained_precision_check="error")
        self.assertIsNone(vars(model.config).get(REFERENCE_FIELD))
        reset_warning_cache()
        with self.assertRaises(TrainedPrecisionRiskError) as raised:
            model.half()
        self.assertEqual(model.dtype, torch.float32)
        message = str(raised.exception)
        self.assertIn(f"The publisher reference of the registry ('{LLAMA2}') is no evidence here", message)
        self.assertIn("no load of it bound these weights (built from its config, or trained since)", message)
        self.assertIn(f"load '{LLAMA2}' again", message)

    def test_a_config_that_states_its_precision_binds_the_publisher_reference(self):
        # the checkpoint's own config.json states `trained_precision`: its load still binds the publisher reference
        snapshot = os.path.join(self.root, "models--meta-llama--Llama-2-7b-hf", "snapshots", REVISION)
        stated = os.path.join(self.root, "stated")
        shutil.copytree(snapshot, stated)
        with open(os.path.join(snapshot, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        try:
            with open(os.path.join(snapshot, "config.json"), "w", encoding="utf-8") as f:
                json.dump({**config, "trained_precision": "bf16"}, f)
            for dtype in (torch.float16, torch.float32):
                with self.subTest(dtype=dtype):
                    model = self.load(dtype)
                    self.assertIn("binding", vars(model.config)[REFERENCE_FIELD])
                    reset_warning_cache()
                    model.float().half()  # unchanged: cleared
                    self.assertIn(f"its publisher runs '{LLAMA2}' in fp16", cleared_by(model))
            model = self.load()
            with torch.no_grad():
                model.model.layers[0].mlp.up_proj.weight.add_(1.0)
            self.assert_fp16_cast_raises(model, "its digest does not match these weights")
        finally:
            shutil.rmtree(snapshot)
            shutil.move(stated, snapshot)

    @require_peft
    def test_a_peft_adapter_keeps_the_evidence_of_unchanged_base_weights(self):
        from peft import LoraConfig, get_peft_model

        for changed in (False, True):
            with self.subTest(base_changed=changed):
                model = self.load()
                if changed:
                    with torch.no_grad():
                        model.model.layers[0].mlp.up_proj.weight.add_(1.0)
                get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))  # wraps them in place
                if changed:
                    self.assert_fp16_cast_raises(model, "its digest does not match these weights")
                else:
                    reset_warning_cache()
                    model.half()
                    self.assertIn(f"its publisher runs '{LLAMA2}' in fp16", cleared_by(model))
