# Copyright 2026 The HuggingFace Team. All rights reserved. Licensed under the Apache License, Version 2.0.
"""`PreTrainedConfig.trained_precision`: default, serialisation, round trips, aliases and bad values."""

import inspect
import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch
from huggingface_hub.errors import StrictDataclassFieldValidationError
from parameterized import parameterized

from transformers import (
    AutoConfig,
    BertConfig,
    EncoderDecoderConfig,
    GPT2Config,
    GPTNeoConfig,
    LlavaConfig,
    PreTrainedConfig,
    T5Config,
)
from transformers.trained_precision import (
    PRECISION_ALIASES,
    PRECISIONS,
    InvalidTrainedPrecisionError,
    normalize_precision,
)
from transformers.trained_precision.configuration import validate_config_value
from transformers.trained_precision.testing_utils import tiny_gpt_neo_config


def tiny_configs():
    return {
        "gpt_neo": tiny_gpt_neo_config(),
        "gpt2": GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=64),
        "t5": T5Config(num_layers=2, d_model=16, d_ff=32, num_heads=2, d_kv=8, vocab_size=64),
        "bert": BertConfig(num_hidden_layers=2, hidden_size=16, num_attention_heads=2, intermediate_size=32),
        "encoder_decoder": EncoderDecoderConfig(
            encoder=BertConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2).to_dict(),
            decoder=BertConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2, is_decoder=True).to_dict(),
        ),
        "llava": LlavaConfig(),
    }


MODELS = sorted(tiny_configs())
BAD_VALUES = [("string", "float8"), ("int", 16), ("float", 32.0), ("none", None), ("list", ["bf16"]), ("dict", {})]

# The whole alias table of the issue, written out so a change to the vocabulary shows up here.
EXPECTED_ALIASES = {
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "tf32": "fp32", "32": "fp32", "32-true": "fp32",
    "torch.float32": "fp32",
    "bf16": "bf16", "bfloat16": "bf16", "bf16-mixed": "bf16", "bf16-true": "bf16", "amp_bf16": "bf16",
    "torch.bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "16": "fp16", "16-mixed": "fp16", "16-true": "fp16",
    "amp_fp16": "fp16", "torch.float16": "fp16",
    "unknown": "unknown",
}  # fmt: skip


def read_json(directory):
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        return json.load(f)


def write_json(directory, data):
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(data, f)


class TrainedPrecisionFieldTest(unittest.TestCase):
    def test_default_is_unknown(self):
        self.assertEqual(PreTrainedConfig().trained_precision, "unknown")
        for name, config in tiny_configs().items():
            self.assertEqual(config.trained_precision, "unknown", name)

    @parameterized.expand(MODELS)
    def test_unknown_is_not_written(self, name):
        config = tiny_configs()[name]
        with tempfile.TemporaryDirectory() as tmp:
            config.save_pretrained(tmp)
            with open(os.path.join(tmp, "config.json"), encoding="utf-8") as f:
                self.assertNotIn("trained_precision", f.read())
            self.assertEqual(AutoConfig.from_pretrained(tmp).trained_precision, "unknown")

    @parameterized.expand([(name, precision) for name in MODELS for precision in ("fp32", "bf16", "fp16")])
    def test_round_trip(self, name, precision):
        config = tiny_configs()[name]
        config.trained_precision = precision
        with tempfile.TemporaryDirectory() as tmp:
            config.save_pretrained(tmp)
            self.assertEqual(read_json(tmp)["trained_precision"], precision)
            reloaded = AutoConfig.from_pretrained(tmp)
            self.assertEqual(type(reloaded), type(config))
            self.assertEqual(reloaded.trained_precision, precision)

    @parameterized.expand(["encoder_decoder", "llava"])
    def test_sub_configs_follow_the_same_rules(self, name):
        config = tiny_configs()[name]
        sub_name = next(iter(config.sub_configs))
        getattr(config, sub_name).trained_precision = "bf16"
        with tempfile.TemporaryDirectory() as tmp:
            config.save_pretrained(tmp)
            data = read_json(tmp)
            self.assertNotIn("trained_precision", data)  # the top level is still unknown
            self.assertEqual(data[sub_name]["trained_precision"], "bf16")
            other = [s for s in config.sub_configs if s != sub_name]
            for s in other:
                self.assertNotIn("trained_precision", data.get(s) or {})
            reloaded = AutoConfig.from_pretrained(tmp)
            self.assertEqual(getattr(reloaded, sub_name).trained_precision, "bf16")

    def test_from_pretrained_kwarg_overrides(self):
        config = tiny_configs()["gpt_neo"]
        config.trained_precision = "fp32"
        with tempfile.TemporaryDirectory() as tmp:
            config.save_pretrained(tmp)
            self.assertEqual(AutoConfig.from_pretrained(tmp, trained_precision="bf16").trained_precision, "bf16")
            # a value given in code is validated as an assignment is, also when loading
            for value in ("fp8", torch.float16):
                with self.assertRaises(StrictDataclassFieldValidationError):
                    AutoConfig.from_pretrained(tmp, trained_precision=value)

    def test_init_kwarg_and_update(self):
        self.assertEqual(GPTNeoConfig(trained_precision="bf16").trained_precision, "bf16")
        config = BertConfig()
        config.update({"trained_precision": "fp16"})
        self.assertEqual(config.trained_precision, "fp16")
        self.assertEqual(config.to_dict()["trained_precision"], "fp16")


class AliasTest(unittest.TestCase):
    def test_alias_table_is_the_documented_one(self):
        self.assertEqual(PRECISION_ALIASES, EXPECTED_ALIASES)
        self.assertEqual(PRECISIONS, ("fp32", "bf16", "fp16", "unknown"))

    @parameterized.expand(sorted(EXPECTED_ALIASES.items()))
    def test_alias_is_normalised(self, alias, expected):
        for spelling in (alias, alias.upper(), f"  {alias} "):
            self.assertEqual(normalize_precision(spelling), expected, spelling)

    @parameterized.expand(sorted(alias for alias, name in EXPECTED_ALIASES.items() if alias != name))
    def test_the_config_holds_canonical_names_only(self, alias):
        # one answer with or without this package: the config field refuses an alias as it does upstream, and a
        # config.json holding one loads as "unknown"; tools normalise with `normalize_precision` before writing
        with self.assertRaises(StrictDataclassFieldValidationError):
            GPT2Config(trained_precision=alias)
        self.assertEqual(GPT2Config.from_dict({"trained_precision": alias}).trained_precision, "unknown")

    @parameterized.expand([(torch.float32, "fp32"), (torch.bfloat16, "bf16"), (torch.float16, "fp16")])
    def test_torch_dtypes(self, dtype, expected):
        self.assertEqual(normalize_precision(dtype), expected)
        config = T5Config()
        with self.assertRaises(StrictDataclassFieldValidationError):
            config.trained_precision = dtype
        self.assertEqual(config.trained_precision, "unknown")


class BadValueTest(unittest.TestCase):
    @parameterized.expand(BAD_VALUES + [("float64", torch.float64), ("int8", torch.int8)])
    def test_assignment_raises_naming_the_field_and_the_valid_values(self, _, value):
        config = GPTNeoConfig()
        with self.assertRaises(StrictDataclassFieldValidationError) as ctx:
            config.trained_precision = value
        for valid in PRECISIONS:
            self.assertIn(repr(valid), str(ctx.exception))
        self.assertIn(repr(value), str(ctx.exception))
        self.assertEqual(config.trained_precision, "unknown")  # unchanged

    def test_validate_config_value_names_the_field(self):
        validate_config_value("pretraining_precision", "bf16")
        with self.assertRaises(InvalidTrainedPrecisionError) as ctx:
            validate_config_value("pretraining_precision", "garbage")
        self.assertIn("`pretraining_precision`", str(ctx.exception))
        self.assertIn("'garbage'", str(ctx.exception))


class DtypeIsSeparateTest(unittest.TestCase):
    def test_dtype_and_trained_precision_are_independent(self):
        config = GPTNeoConfig(dtype="float16", trained_precision="bf16")
        with tempfile.TemporaryDirectory() as tmp:
            config.save_pretrained(tmp)
            data = read_json(tmp)
        self.assertEqual(data["dtype"], "float16")
        self.assertEqual(data["trained_precision"], "bf16")


class PackageTest(unittest.TestCase):
    def test_star_import_names_exactly_the_present_modules(self):
        import transformers.trained_precision as package

        namespace = {}
        exec("from transformers.trained_precision import *", namespace)
        for name in ("FP32", "BF16", "FP16", "UNKNOWN", "normalize_precision", "InvalidTrainedPrecisionError"):
            self.assertIn(name, namespace)
        directory = os.path.dirname(package.__file__)
        # dotted paths inside the package (`vocabulary`, `facts.binding`; a folder's `__init__.py` as the folder)
        present = {
            os.path.relpath(os.path.join(folder, name), directory)[:-3].replace(os.sep, ".").removesuffix(".__init__")
            for folder, _, names in os.walk(directory)
            for name in names
            if name.endswith(".py")
        }
        for name, value in namespace.items():
            if name.startswith("__"):
                continue
            module = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
            if module and module.startswith("transformers.trained_precision."):
                with self.subTest(name=name):
                    self.assertIn(module.removeprefix("transformers.trained_precision."), present)
        self.assertNotIn("tiny_gpt_neo", namespace, "test helpers stay in testing_utils")

    def test_the_vocabulary_imports_without_torch(self):
        code = (
            "import sys\n"
            "from transformers.trained_precision import normalize_precision\n"
            "import transformers\n"
            "assert normalize_precision('bfloat16') == 'bf16'\n"
            "print('torch' in sys.modules)\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        self.assertEqual(proc.stdout.strip(), "False")
