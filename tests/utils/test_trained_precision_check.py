# Copyright 2026 The HuggingFace Team. All rights reserved. Licensed under the Apache License, Version 2.0.
"""
The loading and casting check: `from_pretrained`, `from_config` and the casts warn (once), raise or stay silent
according to `config.trained_precision`, the registry and the mode.
"""

import contextlib
import contextvars
import inspect
import json
import os
import shutil
import tempfile
import unittest

import torch
from parameterized import parameterized

from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    BertConfig,
    EncoderDecoderConfig,
    EncoderDecoderModel,
    GPTNeoConfig,
    GPTNeoForCausalLM,
    LlavaConfig,
    PreTrainedTokenizerFast,
    pipeline,
)
from transformers.testing_utils import CaptureLogger, mockenv_context, require_torch
from transformers.trained_precision.facts.hub_ids import hub_id_for
from transformers.trained_precision.facts.registry import lookup
from transformers.trained_precision.facts.resolver import resolve_trained_precision
from transformers.trained_precision.facts.risk import assess_risk
from transformers.trained_precision.guard import check as tp_check
from transformers.trained_precision.guard.check import (
    ENV_VAR,
    TrainedPrecisionRiskError,
    reset_warning_cache,
    resolve_check_mode,
)
from transformers.trained_precision.testing_utils import tiny_gpt_neo_config
from transformers.utils import logging


TRAINED = ["fp32", "bf16", "fp16", "unknown"]
RUNTIME = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# DESIGN §3: fp32 runtime is always safe, the same precision is safe, unknown is silent. A known failure (an fp16
# overflow) warns; a loss of precision with no public failure case is an info note, never a warning or an error.
RISKY = {("fp32", "fp16"), ("bf16", "fp16")}
NOTES = {("fp32", "bf16"), ("fp16", "bf16")}
PATHS = ["from_pretrained", "from_config", "cast_method", "cast_to_dtype", "cast_to_device_dtype", "cast_to_kwarg"]
MATRIX = [(t, r, p) for t in TRAINED for r in RUNTIME for p in PATHS]

HUB_ID = "EleutherAI/gpt-neo-1.3B"  # a bf16 row of the registry
REVISION = "0123456789abcdef0123456789abcdef01234567"

LOGGER = logging.get_logger(tp_check.__name__)


def tiny_config(trained_precision="unknown", **kwargs):
    return tiny_gpt_neo_config(trained_precision=trained_precision, **kwargs)


def save_tiny_model(directory, trained_precision="unknown", storage_dtype=torch.float32):
    model = GPTNeoForCausalLM(tiny_config(trained_precision))
    with mockenv_context(**{ENV_VAR: "ignore"}):
        model.to(storage_dtype)
    model.save_pretrained(directory)
    return directory


def save_hub_cache_snapshot(cache_dir, repo_id, trained_precision="unknown"):
    """Lays out a `huggingface_hub` cache as `snapshot_download(repo_id, cache_dir=cache_dir)` leaves it."""
    repo_dir = os.path.join(cache_dir, "models--" + repo_id.replace("/", "--"))
    snapshot = os.path.join(repo_dir, "snapshots", REVISION)
    save_tiny_model(snapshot, trained_precision)
    os.makedirs(os.path.join(repo_dir, "refs"), exist_ok=True)
    with open(os.path.join(repo_dir, "refs", "main"), "w", encoding="utf-8") as f:
        f.write(REVISION)
    return snapshot


def count_warnings(text):
    return text.count("was trained in")


class _CheckTestBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.dirs = {t: save_tiny_model(os.path.join(cls.tmp, f"trained-{t}"), t) for t in TRAINED}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        reset_warning_cache()
        env = mockenv_context(ENV_VAR)  # the process-wide setting must not leak into or out of a test
        env.__enter__()
        self.addCleanup(env.__exit__, None, None, None)

    def capture(self):
        return CaptureLogger(LOGGER)

    @contextlib.contextmanager
    def capture_info(self):
        """Also the info-level notes."""
        level = logging.get_verbosity()
        logging.set_verbosity_info()
        try:
            with CaptureLogger(LOGGER) as cl:
                yield cl
        finally:
            logging.set_verbosity(level)

    def load(self, trained, dtype, **kwargs):
        return AutoModelForCausalLM.from_pretrained(self.dirs[trained], dtype=dtype, **kwargs)


@require_torch
class LoadingCheckMatrixTest(_CheckTestBase):
    def run_path(self, path, trained, runtime):
        """Runs one way of reaching `runtime` and returns (model, the model name the message should carry)."""
        dtype = RUNTIME[runtime]
        if path == "from_pretrained":
            return self.load(trained, dtype), self.dirs[trained]
        if path == "from_config":
            return AutoModelForCausalLM.from_config(
                tiny_config(trained), dtype=dtype
            ), "GPTNeoForCausalLM"  # named by its class, as the core names it
        model = GPTNeoForCausalLM(tiny_config(trained))  # fp32, built without a check
        if path == "cast_method":
            {"fp32": model.float, "bf16": model.bfloat16, "fp16": model.half}[runtime]()
        elif path == "cast_to_dtype":
            model.to(dtype)
        elif path == "cast_to_device_dtype":
            model.to("cpu", dtype)
        elif path == "cast_to_kwarg":
            model.to(device="cpu", dtype=dtype)
        return model, "GPTNeoForCausalLM"

    @parameterized.expand(MATRIX)
    def test_matrix(self, trained, runtime, path):
        with self.capture() as cl:
            model, name = self.run_path(path, trained, runtime)
        self.assertEqual(model.dtype, RUNTIME[runtime])
        if (trained, runtime) not in RISKY:
            self.assertEqual(cl.out, "")  # notes are info-level, see test_precision_loss_is_a_note_never_an_error
            return
        self.assertEqual(count_warnings(cl.out), 1, cl.out)
        risk = assess_risk(trained, runtime)
        self.assertIn(f"Model '{name}' was trained in {trained}", cl.out)
        self.assertIn("from its config's `trained_precision`", cl.out)
        self.assertIn(f"{runtime} (`torch.{str(RUNTIME[runtime]).split('.')[-1]}`)", cl.out)
        self.assertIn(risk.reason, cl.out)
        if risk.kind == "overflow":
            self.assertIn("65504", cl.out)
        # the fix: the dtypes that are safe, and how to silence it
        if path.startswith("cast"):
            self.assertIn("is being cast to", cl.out)
            self.assertIn("`.float()`", cl.out)
            if trained == "bf16":
                self.assertIn("`.to(torch.bfloat16)`", cl.out)
            self.assertIn(f"set {ENV_VAR}=ignore", cl.out)
        else:
            self.assertIn("`dtype=torch.float32`", cl.out)
            self.assertIn(
                f"`dtype=torch.{ {'fp32': 'float32', 'bf16': 'bfloat16', 'fp16': 'float16'}[trained] }`", cl.out
            )
            self.assertIn('`trained_precision_check="ignore"`', cl.out)

    def test_done_when(self):
        """The issue's acceptance: a saved bf16-trained GPT-Neo loaded in fp16 warns exactly once, naming the fix."""
        with self.capture() as cl:
            model = self.load("bf16", torch.float16)
        self.assertEqual(model.dtype, torch.float16)
        self.assertEqual(count_warnings(cl.out), 1)
        self.assertIn("Load it with `dtype=torch.bfloat16` or `dtype=torch.float32` instead", cl.out)
        with self.assertRaises(TrainedPrecisionRiskError):
            self.load("bf16", torch.float16, trained_precision_check="error")

    def test_float_never_warns(self):
        with mockenv_context(**{ENV_VAR: "error"}), self.capture() as cl:
            for trained in TRAINED:
                model = GPTNeoForCausalLM(tiny_config(trained)).to(torch.float64)  # float64 has no rule
                model.float()
                model.to(torch.float32)
                model.to("cpu")
                model.to(torch.zeros(1))  # a float32 tensor
        self.assertEqual(cl.out, "")

    def test_to_with_a_tensor_is_a_cast(self):
        model = GPTNeoForCausalLM(tiny_config("bf16"))
        with self.capture() as cl:
            model.to(torch.zeros(1, dtype=torch.float16))
        self.assertEqual(count_warnings(cl.out), 1)

    def test_device_moves_do_not_check(self):
        model = GPTNeoForCausalLM(tiny_config("bf16"))
        with mockenv_context(**{ENV_VAR: "not-a-mode"}), self.capture() as cl:
            model.to("cpu")
            model.to(torch.device("cpu"))
        self.assertEqual(cl.out, "")


@require_torch
class LoadingCheckModeTest(_CheckTestBase):
    def test_error_mode_is_not_caught_as_a_value_error(self):
        """Callers that try the next model class on a `ValueError` (`transformers serve`) must not swallow it."""
        with self.assertRaises(TrainedPrecisionRiskError) as ctx:
            try:
                self.load("bf16", torch.float16, trained_precision_check="error")
            except ValueError:
                self.fail("the risk error was caught as a ValueError")
        error = ctx.exception
        self.assertNotIsInstance(error, ValueError)
        self.assertEqual((error.risk.trained, error.risk.runtime), ("bf16", "fp16"))
        self.assertEqual(error.source, "config")
        self.assertEqual(error.model_name, self.dirs["bf16"])
        self.assertIn("to silence this error", str(error))

    def test_error_mode_raises_every_time(self):
        for _ in range(2):
            with self.assertRaises(TrainedPrecisionRiskError):
                self.load("fp32", torch.float16, trained_precision_check="error")

    def test_precision_loss_is_a_note_never_an_error(self):
        for trained, runtime in sorted(NOTES):
            with self.capture_info() as cl:
                model = self.load(trained, RUNTIME[runtime], trained_precision_check="error")
            self.assertEqual(model.dtype, RUNTIME[runtime])
            self.assertEqual(count_warnings(cl.out), 1, cl.out)
            self.assertIn(assess_risk(trained, runtime).reason, cl.out)
            self.assertNotIn("this error", cl.out)

    def test_error_mode_allows_safe_loads(self):
        model = self.load("bf16", torch.bfloat16, trained_precision_check="error")
        self.assertEqual(model.dtype, torch.bfloat16)

    def test_ignore_mode_is_silent(self):
        with self.capture() as cl:
            model = self.load("bf16", torch.float16, trained_precision_check="ignore")
        self.assertEqual(cl.out, "")
        self.assertEqual(model.dtype, torch.float16)

    def test_the_kwarg_never_reaches_the_model_or_config(self):
        for trained in TRAINED:
            model = self.load(trained, torch.float32, trained_precision_check="warn")
            self.assertFalse(hasattr(model.config, "trained_precision_check"))
            self.assertNotIn("trained_precision_check", model.config.to_dict())

    @parameterized.expand([("warn", 1, False), ("error", 0, True), ("ignore", 0, False), (" Error ", 0, True)])
    def test_env_var(self, value, warnings, raises):
        with mockenv_context(**{ENV_VAR: value}), self.capture() as cl:
            if raises:
                with self.assertRaises(TrainedPrecisionRiskError):
                    self.load("bf16", torch.float16)
            else:
                self.load("bf16", torch.float16)
        self.assertEqual(count_warnings(cl.out), warnings)

    @parameterized.expand([("error", "warn"), ("error", "ignore"), ("ignore", "warn"), ("ignore", "error")])
    def test_per_call_beats_env(self, env_mode, call_mode):
        with mockenv_context(**{ENV_VAR: env_mode}), self.capture() as cl:
            if call_mode == "error":
                with self.assertRaises(TrainedPrecisionRiskError):
                    self.load("bf16", torch.float16, trained_precision_check=call_mode)
            else:
                self.load("bf16", torch.float16, trained_precision_check=call_mode)
        self.assertEqual(count_warnings(cl.out), 1 if call_mode == "warn" else 0)

    def test_invalid_per_call_value(self):
        # raised even when nothing is risky, so a typo is found at once
        with self.assertRaises(ValueError) as ctx:
            self.load("unknown", torch.float32, trained_precision_check="raise")
        self.assertNotIsInstance(ctx.exception, TrainedPrecisionRiskError)
        message = str(ctx.exception)
        self.assertIn("'raise'", message)
        self.assertIn("trained_precision_check", message)
        self.assertIn("'warn', 'error', 'ignore'", message)

    def test_invalid_env_value(self):
        """A typo in the variable fails as a typo in the keyword does: never the default "warn" instead of "error"."""
        for value in ("errror", "raise", "1", "true"):
            with mockenv_context(**{ENV_VAR: value}):
                for trained, dtype in (("bf16", torch.float16), ("unknown", torch.float32)):
                    with self.subTest(value=value, trained=trained), self.assertRaises(ValueError) as ctx:
                        self.load(trained, dtype)
                    self.assertNotIsInstance(ctx.exception, TrainedPrecisionRiskError)
                    for words in (repr(value), ENV_VAR, "'warn', 'error', 'ignore'"):
                        self.assertIn(words, str(ctx.exception))
                with self.assertRaises(ValueError):
                    resolve_check_mode()
                # a per-call mode does not read the variable
                model = self.load("bf16", torch.float16, trained_precision_check="ignore")
                self.assertEqual(model.dtype, torch.float16)

    def test_resolve_check_mode(self):
        self.assertEqual(resolve_check_mode(), "warn")
        self.assertEqual(resolve_check_mode("IGNORE"), "ignore")
        with mockenv_context(**{ENV_VAR: "error"}):
            self.assertEqual(resolve_check_mode(), "error")
            self.assertEqual(resolve_check_mode("warn"), "warn")
        with mockenv_context(**{ENV_VAR: ""}):
            self.assertEqual(resolve_check_mode(), "warn")
        for bad in ("", "on", 1, True):
            with self.assertRaises(ValueError):
                resolve_check_mode(bad)

    def test_from_config_modes(self):
        config = tiny_config("bf16")
        with self.assertRaises(TrainedPrecisionRiskError):
            AutoModelForCausalLM.from_config(config, dtype=torch.float16, trained_precision_check="error")
        with self.capture() as cl:
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float16, trained_precision_check="ignore")
        self.assertEqual(cl.out, "")
        self.assertEqual(model.dtype, torch.float16)

    def test_casts_follow_the_env_var(self):
        model = GPTNeoForCausalLM(tiny_config("bf16"))
        with mockenv_context(**{ENV_VAR: "error"}):
            for cast in (model.half, lambda: model.to(torch.float16), lambda: model.to("cpu", torch.float16)):
                with self.assertRaises(TrainedPrecisionRiskError):
                    cast()
                self.assertEqual(model.dtype, torch.float32)  # raised before casting
            model.bfloat16()
        with mockenv_context(**{ENV_VAR: "ignore"}), self.capture() as cl:
            model.half()
        self.assertEqual(cl.out, "")
        self.assertEqual(model.dtype, torch.float16)


@require_torch
class LoadingCheckOnceTest(_CheckTestBase):
    def test_once_per_model_and_dtype(self):
        with self.capture() as cl:
            model = self.load("bf16", torch.float16)
            self.load("bf16", torch.float16)
            with mockenv_context(**{ENV_VAR: "warn"}):
                self.load("bf16", torch.float16)
        self.assertEqual(count_warnings(cl.out), 1)

        with self.capture() as cl:  # a later cast of the same model to the same precision: already said
            model.float().half()
        self.assertEqual(cl.out, "")

        reset_warning_cache()
        with self.capture() as cl:
            self.load("bf16", torch.float16)
        self.assertEqual(count_warnings(cl.out), 1)

    def test_other_dtype_or_model_warns_again(self):
        other = save_tiny_model(os.path.join(self.tmp, "other-fp32"), "fp32")
        with self.capture() as cl:
            self.load("fp32", torch.float16)
            self.load("bf16", torch.float16)
            AutoModelForCausalLM.from_pretrained(other, dtype=torch.float16)
            self.load("fp32", torch.float16)
            self.load("fp32", torch.bfloat16)  # a note, not a warning
        self.assertEqual(count_warnings(cl.out), 3, cl.out)


@require_torch
class LoadingCheckRegistryTest(_CheckTestBase):
    def assert_registry_warning(self, out, hub_id, trained):
        entry = lookup(hub_id)
        self.assertEqual(count_warnings(out), 1, out)
        self.assertIn(f"was trained in {trained} (registry: {entry.model_id}, {entry.citation})", out)

    def test_registry_fallback_from_config(self):
        config = tiny_config("unknown", name_or_path=HUB_ID)
        with self.capture() as cl:
            AutoModelForCausalLM.from_config(config, dtype=torch.float16)
        self.assertIn(f"Model '{HUB_ID}'", cl.out)
        self.assert_registry_warning(cl.out, HUB_ID, "bf16")

    def test_registry_fallback_on_cast(self):
        model = GPTNeoForCausalLM(tiny_config("unknown", name_or_path="facebook/opt-125m"))  # an fp16 glob row
        with self.capture_info() as cl:
            model.bfloat16()
        self.assert_registry_warning(cl.out, "facebook/opt-125m", "fp16")
        self.assertIn("(weak public evidence)", cl.out)

    def test_registry_fallback_from_pretrained_hub_id(self):
        """`from_pretrained("<org>/<name>")` served from the local Hub cache, as it is offline."""
        cache = tempfile.mkdtemp(dir=self.tmp)
        save_hub_cache_snapshot(cache, HUB_ID)
        with self.capture() as cl:
            model = AutoModelForCausalLM.from_pretrained(HUB_ID, cache_dir=cache, dtype=torch.float16)
        self.assertEqual(model.config.name_or_path, HUB_ID)
        self.assertIn(f"Model '{HUB_ID}'", cl.out)
        self.assert_registry_warning(cl.out, HUB_ID, "bf16")
        with self.assertRaises(TrainedPrecisionRiskError) as ctx:
            AutoModelForCausalLM.from_pretrained(
                HUB_ID, cache_dir=cache, dtype=torch.float16, trained_precision_check="error"
            )
        self.assertEqual(ctx.exception.source, "registry")

    def test_registry_fallback_hub_cache_snapshot_path(self):
        """A local path that is a Hub cache snapshot (what `snapshot_download` returns) names its Hub id."""
        snapshot = save_hub_cache_snapshot(tempfile.mkdtemp(dir=self.tmp), HUB_ID)
        with self.capture() as cl:
            AutoModelForCausalLM.from_pretrained(snapshot, dtype=torch.float16)
        self.assert_registry_warning(cl.out, HUB_ID, "bf16")

    def test_config_beats_registry(self):
        config = tiny_config("fp16", name_or_path=HUB_ID)  # the registry says bf16
        with self.capture() as cl:
            AutoModelForCausalLM.from_config(config, dtype=torch.float16)
        self.assertEqual(cl.out, "")
        with self.capture_info() as cl:
            AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        self.assertIn("was trained in fp16 (from its config's `trained_precision`)", cl.out)

        cache = tempfile.mkdtemp(dir=self.tmp)
        save_hub_cache_snapshot(cache, HUB_ID, trained_precision="fp32")
        reset_warning_cache()
        with self.capture_info() as cl:
            AutoModelForCausalLM.from_pretrained(HUB_ID, cache_dir=cache, dtype=torch.bfloat16)
        self.assertIn("was trained in fp32 (from its config's `trained_precision`)", cl.out)
        self.assertNotIn("registry", cl.out)

    def test_local_directory_is_never_guessed(self):
        """A plain directory, even one laid out as `<org>/<name>` with a registered name, has no Hub id."""
        root = tempfile.mkdtemp(dir=self.tmp)
        local = save_tiny_model(os.path.join(root, *HUB_ID.split("/")))
        cwd = os.getcwd()
        os.chdir(root)
        try:
            with self.capture() as cl:
                AutoModelForCausalLM.from_pretrained(HUB_ID, dtype=torch.float16)  # resolves to ./EleutherAI/...
                AutoModelForCausalLM.from_pretrained(local, dtype=torch.float16)
                AutoModelForCausalLM.from_pretrained(save_tiny_model("gpt-neo-1.3B"), dtype=torch.float16)
        finally:
            os.chdir(cwd)
        self.assertEqual(cl.out, "")

    def test_hub_id_for(self):
        root = tempfile.mkdtemp(dir=self.tmp)
        snapshot = os.path.join(root, "models--EleutherAI--gpt-neo-1.3B", "snapshots", REVISION)
        os.makedirs(os.path.join(snapshot, "subfolder"))
        self.assertEqual(hub_id_for(HUB_ID), HUB_ID)
        self.assertEqual(hub_id_for(snapshot), HUB_ID)
        self.assertEqual(hub_id_for(os.path.join(snapshot, "subfolder")), HUB_ID)
        self.assertEqual(hub_id_for("gpt2"), "openai-community/gpt2")  # a legacy id: the Hub redirects it
        for not_an_id in (None, "", root, "./a/b", "/a/b", "~/a/b", "a/b/c", os.path.join(root, "x--y")):
            self.assertIsNone(hub_id_for(not_an_id), not_an_id)
        bad_cache = os.path.join(root, "models--a--b--c", "snapshots", REVISION)
        os.makedirs(bad_cache)
        self.assertIsNone(hub_id_for(bad_cache))


@require_torch
class UncheckedCastTest(_CheckTestBase):
    """A cast with nothing to judge takes a short path; whatever it keeps between casts must never hide a verdict."""

    def test_a_config_edited_after_a_silent_cast_is_judged_at_the_next_one(self):
        model = GPTNeoForCausalLM(tiny_config("unknown"))
        with self.capture() as cl:
            model.half()
            model.float()
        self.assertEqual(cl.out, "")
        model.config.trained_precision = "bf16"
        with self.capture() as cl:
            model.half()
        self.assertEqual(count_warnings(cl.out), 1, cl.out)
        self.assertIn("was trained in bf16 (from its config's `trained_precision`)", cl.out)

    def test_a_relative_path_names_the_snapshot_of_the_working_directory(self):
        """The same name is judged again after `os.chdir`: `"."` inside a Hub cache snapshot has its Hub id."""
        snapshot = save_hub_cache_snapshot(tempfile.mkdtemp(dir=self.tmp), HUB_ID)
        model = GPTNeoForCausalLM(tiny_config("unknown", name_or_path="."))
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.tmp)
        with self.capture() as cl:
            model.half()
            model.float()
        self.assertEqual(cl.out, "")
        os.chdir(snapshot)
        with self.capture() as cl:
            model.half()
        self.assertEqual(count_warnings(cl.out), 1, cl.out)
        self.assertIn(f"was trained in bf16 (registry: {lookup(HUB_ID).model_id}", cl.out)


class CheckApiTest(unittest.TestCase):
    def test_public_names(self):
        import transformers.trained_precision as tp

        for name in ("TrainedPrecisionRiskError", "check_trained_precision", "check_model"):
            self.assertIs(getattr(tp, name), getattr(tp_check, name))
        self.assertFalse(issubclass(tp.TrainedPrecisionRiskError, ValueError))

    def test_entry_points(self):
        # one small entry point per call site: the load check judges the dtype `from_pretrained` resolved and recorded
        # on the config, the `_from_config` check is handed its dtype and names an unnamed model by its class
        for entry in (tp_check.check_trained_precision, tp_check.check_trained_precision_from_config):
            self.assertLessEqual(len(inspect.signature(entry).parameters), 5, entry.__name__)

        def run():  # in a copy of the context: the load check leaves its registry answer for the construction scope
            config = tiny_config("bf16")
            config.dtype = torch.float16
            with self.assertRaisesRegex(TrainedPrecisionRiskError, "was trained in bf16"):
                tp_check.check_trained_precision(config, mode="error")
            config.dtype = torch.bfloat16
            self.assertIsNone(tp_check.check_trained_precision(config, mode="error"))
            self.assertIsNone(
                tp_check.check_trained_precision(tiny_config("bf16", dtype=torch.float16), deferred=True)
            )
            with self.assertRaisesRegex(
                TrainedPrecisionRiskError, "^Model 'MyModel' was trained in bf16 .*instantiated in fp16"
            ):
                tp_check.check_trained_precision_from_config(
                    tiny_config("bf16"), torch.float16, mode="error", display_name="MyModel"
                )

        reset_warning_cache()
        contextvars.copy_context().run(run)

    def test_risk_message(self):
        # the one decision carries the message its error raises with, whatever path gathered the facts
        from transformers.trained_precision.guard.decision import PrecisionFacts, decide

        info = resolve_trained_precision(tiny_config("fp16"))
        risk = assess_risk("fp16", "bf16")
        facts = PrecisionFacts(info, ((info.assess("bf16"), None),), "org/model", action="cast", mode="error")
        decision = decide(facts)
        self.assertEqual((decision.status, decision.basis), ("risky", "rule"))
        self.assertEqual(decision.risk, risk)
        # a precision loss is a note at info level, never an error; its text keeps the error's fix
        self.assertEqual(decision.level, "info")
        self.assertEqual(
            decision.message,
            "Model 'org/model' was trained in fp16 (from its config's `trained_precision`) but is being cast to bf16 "
            f"(`torch.bfloat16`): {risk.reason}. Cast it with `.to(torch.float16)` or `.float()` instead, or set "
            f"{ENV_VAR}=ignore to silence this warning.",
        )
        info = resolve_trained_precision(tiny_config("bf16"))
        facts = PrecisionFacts(info, ((info.assess("fp16"), None),), "org/model", action="cast", mode="error")
        decision = decide(facts)
        self.assertEqual(decision.level, "error")
        self.assertTrue(decision.message.endswith(f"set {ENV_VAR}=ignore to silence this error."))
        with self.assertRaises(TrainedPrecisionRiskError):
            tp_check.say(decision)
        with self.assertRaises(ValueError) as ctx:
            decide(PrecisionFacts(info, ((info.assess("fp16"), None),), "x", action="train"))
        self.assertIn("'load', 'from_config', 'cast'", str(ctx.exception))

    def test_resolve_trained_precision(self):
        info = resolve_trained_precision(tiny_config("bf16"))
        self.assertEqual((info.precision, info.source), ("bf16", "config"))
        info = resolve_trained_precision(tiny_config(), name_or_path=HUB_ID)
        self.assertEqual((info.precision, info.source, info.hub_id), ("bf16", "registry", HUB_ID))
        self.assertIs(info.entry, lookup(HUB_ID))
        info = resolve_trained_precision(tiny_config(), name_or_path="someone/unregistered-model")
        self.assertEqual((info.precision, info.source), ("unknown", None))


@require_torch
class LoadingCheckSpecialCasesTest(_CheckTestBase):
    @parameterized.expand(
        [("stored_fp16", torch.float16, 1), ("stored_bf16", torch.bfloat16, 0), ("stored_fp32", torch.float32, 0)]
    )
    def test_dtype_auto(self, name, storage_dtype, warnings):
        """`dtype="auto"` (the default) is checked against what it resolves to: the stored dtype."""
        directory = save_tiny_model(os.path.join(self.tmp, f"bf16-{name}"), "bf16", storage_dtype)
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["dtype"], str(storage_dtype).split(".")[-1])
        for kwargs in ({}, {"dtype": "auto"}):
            reset_warning_cache()
            with self.capture() as cl:
                model = AutoModelForCausalLM.from_pretrained(directory, **kwargs)
            self.assertEqual(model.dtype, storage_dtype)
            self.assertEqual(count_warnings(cl.out), warnings, (kwargs, cl.out))
            if warnings:
                self.assertIn("is being loaded in fp16", cl.out)

    def test_pipeline(self):
        from tokenizers import Tokenizer, models, pre_tokenizers

        directory = save_tiny_model(os.path.join(self.tmp, "pipeline-bf16"), "bf16")
        vocab = {"<unk>": 0, **{f"w{i}": i + 1 for i in range(20)}}
        backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
        PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<unk>").save_pretrained(
            directory
        )
        with self.capture() as cl:
            generator = pipeline("text-generation", model=directory, dtype=torch.float16)
        self.assertEqual(generator.model.dtype, torch.float16)
        self.assertEqual(count_warnings(cl.out), 1, cl.out)
        self.assertIn(f"Model '{directory}' was trained in bf16", cl.out)
        with self.assertRaises(TrainedPrecisionRiskError):
            pipeline(
                "text-generation",
                model=directory,
                dtype=torch.float16,
                model_kwargs={"trained_precision_check": "error"},
            )

    def composite_dir(self, top, encoder):
        def bert(**kwargs):
            return BertConfig(
                num_hidden_layers=1,
                hidden_size=16,
                num_attention_heads=2,
                intermediate_size=32,
                vocab_size=64,
                **kwargs,
            )

        config = EncoderDecoderConfig.from_encoder_decoder_configs(
            bert(trained_precision=encoder), bert(is_decoder=True, add_cross_attention=True)
        )
        config.trained_precision = top
        directory = os.path.join(self.tmp, f"encdec-{top}-{encoder}")
        EncoderDecoderModel(config=config).save_pretrained(directory)
        return directory

    def test_composite_model_sub_configs(self):
        """A sub-model built in `__init__` is checked as part of the outer call: its mode, once, its name."""
        directory = self.composite_dir("unknown", "bf16")
        with self.capture() as cl:
            EncoderDecoderModel.from_pretrained(directory, dtype=torch.float16)
        self.assertEqual(count_warnings(cl.out), 1, cl.out)
        self.assertIn(f"Model '{directory}' (its bert sub-model) was trained in bf16", cl.out)
        with self.assertRaises(TrainedPrecisionRiskError):
            EncoderDecoderModel.from_pretrained(directory, dtype=torch.float16, trained_precision_check="error")
        reset_warning_cache()
        with self.capture() as cl:
            EncoderDecoderModel.from_pretrained(directory, dtype=torch.float16, trained_precision_check="ignore")
        self.assertEqual(cl.out, "")

        directory = self.composite_dir("bf16", "bf16")
        with self.capture() as cl:
            EncoderDecoderModel.from_pretrained(directory, dtype=torch.float16)
        self.assertEqual(count_warnings(cl.out), 1, cl.out)


@require_torch
class LoadingCheckModeStickTest(_CheckTestBase):
    """The per-call mode of `from_pretrained` / `from_config` is remembered for the model's later casts."""

    def casts(self, model):
        return {
            "half": model.half,
            "to_dtype": lambda: model.to(torch.float16),
            "to_device_dtype": lambda: model.to("cpu", torch.float16),
            "to_kwarg": lambda: model.to(dtype=torch.float16),
        }

    def test_loaded_with_error_then_casts_raise(self):
        model = self.load("bf16", torch.float32, trained_precision_check="error")
        for name, cast in self.casts(model).items():
            with self.assertRaises(TrainedPrecisionRiskError, msg=name) as ctx:
                cast()
            self.assertEqual(model.dtype, torch.float32)  # raised before casting
            self.assertIn('load the model with `trained_precision_check="ignore"`', str(ctx.exception))
        # the variable cannot loosen what the call asked for
        with mockenv_context(**{ENV_VAR: "ignore"}), self.assertRaises(TrainedPrecisionRiskError):
            model.half()
        model.bfloat16()  # safe casts still pass
        self.assertEqual(model.dtype, torch.bfloat16)
        with self.assertRaises(TrainedPrecisionRiskError):  # and the bf16 -> fp16 cast raises every time
            model.half()

    def test_loaded_with_ignore_then_casts_are_silent_despite_the_env_var(self):
        model = self.load("bf16", torch.float32, trained_precision_check="ignore")
        with mockenv_context(**{ENV_VAR: "error"}), self.capture() as cl:
            for cast in self.casts(model).values():
                model.float()
                cast()
                self.assertEqual(model.dtype, torch.float16)
        self.assertEqual(cl.out, "")

    def test_loaded_with_warn_then_casts_warn_despite_the_env_var(self):
        model = self.load("bf16", torch.float32, trained_precision_check="warn")
        with mockenv_context(**{ENV_VAR: "error"}), self.capture() as cl:
            model.half()
        self.assertEqual(count_warnings(cl.out), 1, cl.out)
        self.assertEqual(model.dtype, torch.float16)

    def test_from_config_mode_sticks(self):
        model = AutoModelForCausalLM.from_config(tiny_config("bf16"), trained_precision_check="error")
        with self.assertRaises(TrainedPrecisionRiskError):
            model.half()
        model = AutoModelForCausalLM.from_config(tiny_config("bf16"), trained_precision_check="ignore")
        with mockenv_context(**{ENV_VAR: "error"}), self.capture() as cl:
            model.half()
        self.assertEqual(cl.out, "")

    def test_sub_models_of_a_composite_model_remember_the_mode(self):
        directory = LoadingCheckSpecialCasesTest.composite_dir(self, "unknown", "bf16")  # a bf16-trained encoder
        model = EncoderDecoderModel.from_pretrained(directory, trained_precision_check="error")
        self.assertEqual(model.encoder.dtype, torch.float32)
        with self.assertRaises(TrainedPrecisionRiskError):
            model.encoder.half()
        model = EncoderDecoderModel.from_pretrained(directory, trained_precision_check="ignore")
        with mockenv_context(**{ENV_VAR: "error"}), self.capture() as cl:
            model.encoder.half()
        self.assertEqual(cl.out, "")

    def test_default_is_unchanged(self):
        # no per-call mode: nothing is recorded and casts follow the variable, then the default
        model = self.load("bf16", torch.float32)
        self.assertNotIn(tp_check.MODE_ATTRIBUTE, vars(model))
        with mockenv_context(**{ENV_VAR: "error"}):
            with self.assertRaises(TrainedPrecisionRiskError) as ctx:
                model.half()
            self.assertIn(f"set {ENV_VAR}=ignore", str(ctx.exception))
        with self.capture() as cl:
            model.half()
        self.assertEqual(count_warnings(cl.out), 1, cl.out)
        with mockenv_context(**{ENV_VAR: "ignore"}), self.capture() as cl:
            model.float()
            model.half()
        self.assertEqual(cl.out, "")

    def test_the_mode_is_not_recorded_on_other_models_or_saved(self):
        model = self.load("bf16", torch.float32, trained_precision_check="ignore")
        other = GPTNeoForCausalLM(tiny_config("bf16"))  # built after the call: follows the variable
        self.assertNotIn(tp_check.MODE_ATTRIBUTE, vars(other))
        directory = os.path.join(self.tmp, "resaved")
        model.save_pretrained(directory)
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            self.assertNotIn("trained_precision_check", json.load(f))
        reloaded = AutoModelForCausalLM.from_pretrained(directory)
        with mockenv_context(**{ENV_VAR: "error"}), self.assertRaises(TrainedPrecisionRiskError):
            reloaded.half()


if __name__ == "__main__":
    unittest.main()


@require_torch
class TypeCastAndStorageDtypeTest(unittest.TestCase):
    def setUp(self):
        reset_warning_cache()

    @parameterized.expand([("dtype", torch.float16), ("tensor_type", "torch.HalfTensor")])
    def test_type_cast_is_checked(self, _, dst_type):
        model = GPTNeoForCausalLM(tiny_config("bf16"))
        with CaptureLogger(LOGGER) as cl:
            model.type(dst_type)
        self.assertIn("is being cast to fp16", cl.out)
        self.assertEqual(next(model.parameters()).dtype, torch.float16)

    def test_type_cast_to_safe_dtype_is_silent(self):
        model = GPTNeoForCausalLM(tiny_config("bf16"))
        with CaptureLogger(LOGGER) as cl:
            model.type(torch.bfloat16)
            model.type("torch.FloatTensor")
            model.type(torch.float64)
        self.assertEqual(cl.out, "")

    @parameterized.expand([("dtype", torch.float16), ("tensor_type", "torch.HalfTensor")])
    def test_type_cast_error_mode(self, _, dst_type):
        model = GPTNeoForCausalLM(tiny_config("bf16"))
        with mockenv_context(**{ENV_VAR: "error"}), self.assertRaises(TrainedPrecisionRiskError):
            model.type(dst_type)
        self.assertEqual(next(model.parameters()).dtype, torch.float32)  # raised before anything was cast


@require_torch
class RegistryPersistenceTest(unittest.TestCase):
    def setUp(self):
        reset_warning_cache()
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def test_registry_answer_is_written_by_save_pretrained(self):
        root = os.path.join(self.tmp, "models--EleutherAI--gpt-neo-1.3B")
        snapshot = os.path.join(root, "snapshots", REVISION)
        GPTNeoForCausalLM(tiny_config()).save_pretrained(snapshot)
        with open(os.path.join(snapshot, "config.json"), encoding="utf-8") as f:
            self.assertNotIn("trained_precision", json.load(f))
        model = AutoModelForCausalLM.from_pretrained(snapshot)  # fp32: no warning, but the answer is kept
        self.assertEqual(model.config.trained_precision, "bf16")
        copy = os.path.join(self.tmp, "copy")
        model.save_pretrained(copy)
        with open(os.path.join(copy, "config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["trained_precision"], "bf16")
        with CaptureLogger(LOGGER) as cl:
            AutoModelForCausalLM.from_pretrained(copy, dtype=torch.float16)
        self.assertIn("was trained in bf16", cl.out)

    def test_config_value_is_never_replaced(self):
        snapshot = os.path.join(self.tmp, "models--EleutherAI--gpt-neo-1.3B", "snapshots", REVISION)
        GPTNeoForCausalLM(tiny_config("fp32")).save_pretrained(snapshot)
        model = AutoModelForCausalLM.from_pretrained(snapshot)
        self.assertEqual(model.config.trained_precision, "fp32")


class PretrainingPrecisionFieldTest(unittest.TestCase):
    """`pretraining_precision` is validated by the field's own validator, naming itself, and read like the field."""

    @parameterized.expand([("string", "float8"), ("alias", "bf16-mixed"), ("none", None), ("list", ["bf16"])])
    def test_assignment_and_init_raise_naming_the_field(self, _, value):
        config = GPTNeoConfig()
        for make in (
            lambda: setattr(config, "pretraining_precision", value),
            lambda: GPTNeoConfig(pretraining_precision=value),
        ):
            with self.assertRaises(ValueError) as ctx:
                make()
            self.assertIn("`pretraining_precision`", str(ctx.exception))
            self.assertNotIn("`trained_precision`", str(ctx.exception))
            self.assertIn(repr(value), str(ctx.exception))
        self.assertNotIn("pretraining_precision", vars(config))

    def test_config_json_with_bad_values_loads_as_unknown(self):
        logger = logging.get_logger("transformers.configuration_utils")
        logger.warning_once.cache_clear()
        with tempfile.TemporaryDirectory() as tmp:
            LlavaConfig().save_pretrained(tmp)
            with open(os.path.join(tmp, "config.json"), encoding="utf-8") as f:
                data = json.load(f)
            data["pretraining_precision"] = "pretrained-by-hand"
            data["text_config"]["pretraining_precision"] = "bf16"
            data["text_config"]["trained_precision"] = "fp8"
            with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
                json.dump(data, f)
            with CaptureLogger(logger) as cl:
                config = AutoConfig.from_pretrained(tmp)
        self.assertEqual(config.pretraining_precision, "unknown")
        self.assertEqual(config.text_config.pretraining_precision, "bf16")
        self.assertEqual(config.text_config.trained_precision, "unknown")
        self.assertIn("`pretraining_precision='pretrained-by-hand'`", cl.out)
        self.assertIn("`text_config.trained_precision='fp8'`", cl.out)
