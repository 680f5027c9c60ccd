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
The contracts scripts and CI read from `transformers precision`: exit codes (1 means risky and nothing else), one
JSON document per invocation, nothing left behind in a checkpoint, nothing read outside it, no network for a cached
model. No torch needed: checkpoints are written as JSON and raw safetensors bytes.
"""

import contextlib
import io
import json
import os
import struct
import tempfile
import unittest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformers.testing_utils import TestCasePlus
from transformers.trained_precision import cli


def run_main(*args):
    """`transformers precision ARGS...` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main([os.fspath(a) for a in args])
        except SystemExit as e:
            code = e.code or 0
    return code, out.getvalue(), err.getvalue()


def safetensors_bytes(header, data=b"", declared_length=None):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    length = len(raw) if declared_length is None else declared_length
    return struct.pack("<Q", length) + raw + data


def write_checkpoint(directory, config, files=()):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "wb") as f:
        f.write(config if isinstance(config, bytes) else json.dumps(config).encode())
    for name, content in files:
        with open(os.path.join(directory, name), "wb") as f:
            f.write(content)
    return directory


# ----------------------------------------------------------------------------------------------------------------
# strategies: arbitrary config.json content and arbitrary files, biased towards the keys the report reads
# ----------------------------------------------------------------------------------------------------------------

_json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
_json_values = st.recursive(
    _json_scalars | st.sampled_from(["bf16", "fp16", "fp32", "float16", "bfloat16", "unknown", "GPTNeoForCausalLM"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
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
        safetensors_bytes,
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


class ExitCodeContractTest(TestCasePlus):
    @settings(
        max_examples=60,
        derandomize=True,  # seeded: the same examples on every run
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(config=_configs, files=_files, dtype=st.sampled_from(["fp16", "bf16", "fp32"]))
    def test_exit_code_is_risky_only_for_a_risky_verdict(self, config, files, dtype):
        with tempfile.TemporaryDirectory() as tmp:
            directory = write_checkpoint(os.path.join(tmp, "ckpt"), config, files)
            code, out, err = run_main(directory, "--dtype", dtype, "--json")
            document = json.loads(out)  # always exactly one JSON document
            self.assertEqual(document["exit_code"], code)
            self.assertIn(code, (0, 1, 2, 3), document)
            self.assertEqual(code == 1, document.get("status") == "risky", document)
            if "error" in document:
                self.assertEqual(code, 2, document)
            text_code, text_out, text_err = run_main(directory, "--dtype", dtype)
            self.assertEqual(text_code, code)
            self.assertNotIn("Traceback", text_out + text_err)


if __name__ == "__main__":
    unittest.main()
