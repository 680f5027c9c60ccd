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
Property-based tests of everything that reads a user's files: config values, safetensors headers, index files and
`set`. Invariants: no exception but the documented error classes, bounded reads, no file outside the checkpoint
opened, no write outside the target file. Seeded (`derandomize=True`) and bounded, so `make test` stays repeatable.

They need `hypothesis` (`pip install hypothesis`), which the testing extra does not install: without it this module is
skipped at collection.
"""

import builtins
import contextlib
import io
import json
import os
import shutil
import struct
import tempfile
import unittest
from unittest import mock

import pytest


pytest.importorskip("hypothesis", reason="the property-based tests need `pip install hypothesis`")

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from transformers import GPTNeoConfig  # noqa: E402
from transformers.trained_precision.commands import cli  # noqa: E402
from transformers.trained_precision.commands.inspection import inspect_checkpoint  # noqa: E402
from transformers.trained_precision.facts.resolver import resolve_trained_precision  # noqa: E402
from transformers.trained_precision.facts.storage import (  # noqa: E402
    CheckpointInspectionError,
    SafetensorsHeaderError,
    read_safetensors_header,
    read_storage,
)
from transformers.trained_precision.record import populate  # noqa: E402
from transformers.trained_precision.vocabulary import PRECISIONS  # noqa: E402


FUZZ = settings(
    max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
MAX_HEADER = 4096


def has_dtype_key(value) -> bool:
    """Whether a `"dtype"` key sits anywhere in `value`: upstream's `to_dict` converts every one it finds, and fails on some."""
    if isinstance(value, dict):
        return "dtype" in value or any(has_dtype_key(item) for item in value.values())
    return isinstance(value, list) and any(has_dtype_key(item) for item in value)


class FileSpy:
    """Records every path opened and the largest single read from a file object opened in binary mode."""

    def __init__(self):
        self.opened, self.largest_read = [], 0
        self._open = builtins.open

    def __call__(self, path, mode="r", *args, **kwargs):
        self.opened.append(os.path.abspath(os.fspath(path)))
        handle = self._open(path, mode, *args, **kwargs)
        if "b" in mode:
            spy, read = self, handle.read

            def bounded_read(size=-1):
                data = read(size)
                spy.largest_read = max(spy.largest_read, len(data))
                return data

            handle.read = bounded_read
        return handle


class FuzzTestBase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        # `set` keeps its lock files under HF_HOME: a temporary one here
        patcher = mock.patch("huggingface_hub.constants.HF_HOME", os.path.join(self.tmp, "hf_home"))
        patcher.start()
        self.addCleanup(patcher.stop)

    def fresh_dir(self, name="ckpt"):
        directory = tempfile.mkdtemp(dir=self.tmp, prefix=name)
        return directory


class ConfigValueFuzzTest(FuzzTestBase):
    @FUZZ
    @given(value=JSON, nested=JSON)
    def test_any_json_value_loads(self, value, nested):
        # user data under another key is left as it is, and upstream's `repr` of a config fails on a nested
        # `{"dtype": []}` with or without `trained_precision`: not what this test is about
        assume(not has_dtype_key(nested) and not has_dtype_key(value))
        config_dict = {
            "model_type": "gpt_neo",
            "trained_precision": value,
            "pretraining_precision": nested,
            "extra": {"trained_precision": nested, "inner": {"trained_precision": value}},
        }
        config = GPTNeoConfig.from_dict(config_dict)
        self.assertIn(config.trained_precision, PRECISIONS)
        info = resolve_trained_precision(config_dict, "t5-small")
        self.assertIn(info.precision, PRECISIONS)
        self.assertIn(info.pretraining, PRECISIONS)

    @FUZZ
    @given(value=JSON)
    def test_report_on_any_config_value(self, value):
        directory = self.fresh_dir()
        with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
            json.dump({"model_type": "gpt_neo", "trained_precision": value}, f)
        report = inspect_checkpoint(directory)
        self.assertIn(report.effective, PRECISIONS)
        self.assertIn(report.verdict("fp16").status, ("safe", "risky", "unknown"))


def valid_header():
    return {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
        "b": {"dtype": "F32", "shape": [3], "data_offsets": [12, 24]},
    }


class SafetensorsHeaderFuzzTest(FuzzTestBase):
    def write(self, directory, raw_header: bytes, declared=None, data=b"\0" * 24):
        path = os.path.join(directory, "model.safetensors")
        length = len(raw_header) if declared is None else declared
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", length % 2**64) + raw_header + data)
        return path

    def check_read(self, path):
        spy = FileSpy()
        with mock.patch("builtins.open", spy):
            try:
                header = read_safetensors_header(path, max_header_bytes=MAX_HEADER)
            except SafetensorsHeaderError:
                header = None
        self.assertLessEqual(spy.largest_read, MAX_HEADER)
        self.assertEqual(set(spy.opened), {os.path.abspath(path)})
        return header

    @FUZZ
    @given(raw=st.binary(max_size=64), declared=st.none() | st.integers(min_value=0, max_value=2**64 - 1))
    def test_random_bytes(self, raw, declared):
        self.check_read(self.write(self.fresh_dir(), raw, declared))

    @FUZZ
    @given(
        name=st.sampled_from(["a", "b"]),
        key=st.sampled_from(["dtype", "shape", "data_offsets"]),
        value=JSON,
        declared_delta=st.integers(min_value=-8, max_value=8),
    )
    def test_mutated_valid_headers(self, name, key, value, declared_delta):
        header = valid_header()
        header[name][key] = value
        raw = json.dumps(header).encode()
        path = self.write(self.fresh_dir(), raw, max(0, len(raw) + declared_delta))
        parsed = self.check_read(path)
        if parsed is not None:  # what passed the checks can be summed without an error
            read_storage(os.path.dirname(path), max_header_bytes=MAX_HEADER)


class IndexFuzzTest(FuzzTestBase):
    @FUZZ
    @given(index=JSON | st.fixed_dictionaries({"weight_map": st.dictionaries(st.text(max_size=6), JSON, max_size=4)}))
    def test_any_index_opens_nothing_outside(self, index):
        directory = self.fresh_dir()
        with open(os.path.join(directory, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
            json.dump(index, f)
        spy = FileSpy()
        with mock.patch("builtins.open", spy):
            try:
                read_storage(directory, max_header_bytes=MAX_HEADER)
            except CheckpointInspectionError:
                pass
        inside = os.path.abspath(directory) + os.sep
        self.assertTrue(all(p.startswith(inside) for p in spy.opened), spy.opened)


class SetFuzzTest(FuzzTestBase):
    @FUZZ
    @given(document=JSON, precision=st.sampled_from(["bf16", "fp32", "unknown", "fp8"]), force=st.booleans())
    def test_set_writes_only_the_target(self, document, precision, force):
        directory = self.fresh_dir()
        path = os.path.join(directory, "config.json")
        text = json.dumps(document, indent=2)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        result = populate.populate_config(path, precision, force=force)
        self.assertIn(result.status, ("written", "unchanged", "error"))
        self.assertEqual(os.listdir(directory), ["config.json"])  # nothing left behind, the lock file included
        with open(path, encoding="utf-8") as f:
            new_text = f.read()
        if result.status != "written":
            self.assertEqual(new_text, text)
            return
        new = json.loads(new_text)
        old = document
        self.assertEqual(
            {k: v for k, v in new.items() if k != "trained_precision"},
            {k: v for k, v in old.items() if k != "trained_precision"},
        )
        if precision == "unknown":
            self.assertNotIn("trained_precision", new)
        else:
            self.assertEqual(new["trained_precision"], precision)


def _safetensors_bytes(header, data):
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def run_command(*args):
    """`transformers precision ARGS...` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(list(args))
        except SystemExit as e:
            code = e.code or 0
    return code, out.getvalue(), err.getvalue()


# ----------------------------------------------------------------------------------------------------------------
# strategies: arbitrary config.json content and arbitrary files, biased towards the keys the report reads
# ----------------------------------------------------------------------------------------------------------------

_json_values = JSON | st.sampled_from(["bf16", "fp16", "fp32", "float16", "bfloat16", "unknown", "GPTNeoForCausalLM"])
_config_keys = st.sampled_from(
    [
        "architectures",
        "model_type",
        "trained_precision",
        "pretraining_precision",
        "torch_dtype",
        "dtype",
        "_name_or_path",
        "text_config",
        "quantization_config",
        "fp16_plan",
    ]
)
_configs = st.one_of(
    st.dictionaries(_config_keys, _json_values, max_size=5).map(lambda c: json.dumps(c).encode()),
    _json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=40),
)
_tensor_entries = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["BF16", "F16", "F32", "I64", "X"]) | _json_values,
        "shape": st.lists(st.integers(-1, 4), max_size=2) | _json_values,
        "data_offsets": st.lists(st.integers(-2, 64), max_size=3) | _json_values,
    }
)
_file_contents = st.one_of(
    st.binary(max_size=64),
    st.builds(
        _safetensors_bytes,
        st.dictionaries(st.text(min_size=1, max_size=6), _tensor_entries | _json_values, max_size=3),
        st.binary(max_size=64),
    ),
    st.builds(lambda m: json.dumps({"weight_map": m}).encode(), _json_values),
)
_files = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "model.safetensors",
                "x.safetensors",
                "model-00001-of-00002.safetensors",
                "model.safetensors.index.json",
                "pytorch_model.bin",
                "tokenizer.json",
            ]
        ),
        _file_contents,
    ),
    max_size=3,
    unique_by=lambda f: f[0],
)


class CommandFuzzTest(FuzzTestBase):
    """`transformers precision` on arbitrary checkpoints: exit 1 means risky and nothing else; `--json` parses."""

    @settings(FUZZ, max_examples=60)  # each example runs the command twice
    @given(config=_configs, files=_files, dtype=st.sampled_from(["fp16", "bf16", "fp32"]))
    def test_exit_code_is_risky_only_for_a_risky_verdict(self, config, files, dtype):
        directory = self.fresh_dir()
        with open(os.path.join(directory, "config.json"), "wb") as f:
            f.write(config)
        for name, content in files:
            with open(os.path.join(directory, name), "wb") as f:
                f.write(content)
        code, out, err = run_command(directory, "--dtype", dtype, "--json")
        document = json.loads(out)  # always exactly one JSON document
        self.assertEqual(document["exit_code"], code)
        self.assertIn(code, (0, 1, 2, 3), document)  # never 70: no input makes the command crash
        self.assertEqual(code == 1, document.get("status") == "risky", document)
        if "error" in document:
            self.assertEqual(code, 2, document)
        text_code, text_out, text_err = run_command(directory, "--dtype", dtype)
        self.assertEqual(text_code, code)
        self.assertNotIn("Traceback", text_out + text_err)
        # `set` on the same folder: done (0) or not (4, nothing written), one document, nothing left behind
        before = sorted(os.listdir(directory))
        code, out, _ = run_command("set", directory, "--precision", dtype, "--json")
        document = json.loads(out)
        self.assertIn((code, document["exit_code"]), [(0, 0), (4, 4)], document)
        self.assertEqual(sorted(os.listdir(directory)), before)
