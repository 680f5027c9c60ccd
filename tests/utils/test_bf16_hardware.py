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
"""Whether bf16 is native on the device, and the one-time warning where it is emulated."""

import unittest
from unittest import mock

from parameterized import parameterized

from transformers import TrainingArguments
from transformers.testing_utils import CaptureLogger, TestCasePlus, require_torch
from transformers.utils import is_torch_available, logging


if is_torch_available():
    import torch

    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.integrations import bf16_hardware as hardware


HARDWARE_LOGGER = "transformers.integrations.bf16_hardware"
EMULATED = "bf16 is emulated"


def _tiny_gpt2():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)


def _args(tmp_dir, **kwargs):
    defaults = {"use_cpu": True, "report_to": [], "save_strategy": "no", "disable_tqdm": True}
    defaults.update(kwargs)
    return TrainingArguments(tmp_dir, **defaults)


# capability mappings as `torch.cpu.get_capabilities()` gives them, and `torch.backends.cpu.get_cpu_capability()`
CPU_CASES = [
    (
        "sapphire_rapids_amx",
        {"architecture": "x86_64", "avx2": True, "avx512_f": True, "amx_bf16": True},
        "AVX512",
        True,
    ),
    (
        "zen4_avx512_bf16",
        {"architecture": "x86_64", "avx2": True, "avx512_f": True, "avx512_bf16": True},
        "AVX512",
        True,
    ),
    (
        "epyc_avx2_only",
        {"architecture": "x86_64", "avx2": True, "avx512_f": False, "avx512_bf16": False},
        "AVX2",
        False,
    ),
    ("old_torch_no_flags_avx2", {}, "AVX2", False),
    ("x86_without_avx", {"architecture": "x86_64"}, "NO AVX", False),
    ("skylake_avx512_no_bf16", {"architecture": "x86_64", "avx2": True, "avx512_f": True}, "AVX512", None),
    ("neoverse_v1_bf16", {"architecture": "aarch64", "bf16": True, "sve_bf16": True}, "SVE256", True),
    ("graviton2_no_bf16", {"architecture": "aarch64", "bf16": False}, "DEFAULT", False),
    ("unknown_architecture", {"architecture": "riscv64"}, "DEFAULT", None),
]


@require_torch
class CpuBf16DecisionTest(unittest.TestCase):
    @parameterized.expand(CPU_CASES)
    def test_decision_rule(self, _, capabilities, capability, expected):
        native, reason = hardware.cpu_bf16_native(capabilities, capability)
        self.assertIs(native, expected, reason)
        self.assertTrue(reason)

    def test_avx2_decides_without_the_probe(self):
        flags = {"architecture": "x86_64", "avx2": True, "cpu_name": "AMD EPYC"}
        with (
            mock.patch.object(hardware, "cpu_capabilities", return_value=flags),
            mock.patch.object(torch.backends.cpu, "get_cpu_capability", return_value="AVX2"),
            mock.patch.object(hardware, "measure_bf16_matmul_slowdown", side_effect=AssertionError("probed")),
        ):
            hardware.bf16_support.cache_clear()
            support = hardware.bf16_support("cpu")
        hardware.bf16_support.cache_clear()
        self.assertIs(support.native, False)
        self.assertTrue(support.slow_emulation)
        self.assertEqual(support.cpu_capability, "AVX2")
        self.assertEqual(support.describe(), "cpu: bf16 emulated (AMD EPYC: AVX2, no AVX512-BF16 or AMX-BF16)")

    @parameterized.expand([("fast_onednn_conversion", 1.3, False), ("slow", 25.0, True)])
    def test_avx512_without_bf16_is_measured(self, _, slowdown, slow):
        flags = {"architecture": "x86_64", "avx2": True, "avx512_f": True}
        with (
            mock.patch.object(hardware, "cpu_capabilities", return_value=flags),
            mock.patch.object(torch.backends.cpu, "get_cpu_capability", return_value="AVX512"),
            mock.patch.object(hardware, "measure_bf16_matmul_slowdown", return_value=slowdown) as probe,
        ):
            hardware.bf16_support.cache_clear()
            support = hardware.bf16_support("cpu")
        hardware.bf16_support.cache_clear()
        probe.assert_called_once()
        self.assertIs(support.native, False)
        self.assertEqual(support.matmul_slowdown, slowdown)
        self.assertIs(support.slow_emulation, slow)

    def test_unknown_architecture_decided_by_the_probe(self):
        for slowdown, native in ((0.8, None), (30.0, False)):
            with (
                mock.patch.object(hardware, "cpu_capabilities", return_value={"architecture": "riscv64"}),
                mock.patch.object(torch.backends.cpu, "get_cpu_capability", return_value="DEFAULT"),
                mock.patch.object(hardware, "measure_bf16_matmul_slowdown", return_value=slowdown),
            ):
                hardware.bf16_support.cache_clear()
                self.assertIs(hardware.bf16_support("cpu").native, native)
        hardware.bf16_support.cache_clear()

    @parameterized.expand([("v100", (7, 0), False), ("a100", (8, 0), True), ("h100", (9, 0), True)])
    def test_cuda_decision(self, name, capability, native):
        with (
            mock.patch.object(torch.cuda, "get_device_capability", return_value=capability),
            mock.patch.object(torch.cuda, "get_device_name", return_value=name.upper()),
            mock.patch.object(torch.version, "hip", None),
        ):
            hardware.bf16_support.cache_clear()
            support = hardware.bf16_support("cuda:1")
        hardware.bf16_support.cache_clear()
        self.assertIs(support.native, native)
        self.assertEqual(support.device, "cuda:1")
        self.assertIn(f"compute capability {capability[0]}.{capability[1]}", support.reason)
        message = hardware.emulated_bf16_message(support, "bf16_full_train=True")
        self.assertIn(f"bf16 is emulated on {name.upper()}, compute capability", message)

    def test_probe_measures_a_ratio(self):
        ratio = hardware.measure_bf16_matmul_slowdown("cpu", size=32, repeats=2)
        self.assertGreater(ratio, 0)

    def test_this_machine(self):
        # whatever the CPU, the answer is consistent with torch's own flag check
        support = hardware.bf16_support("cpu")
        flags = hardware.cpu_capabilities()
        if flags.get("avx512_bf16") or flags.get("amx_bf16"):
            self.assertIs(support.native, True)
        elif flags.get("avx2") and not flags.get("avx512_f"):
            self.assertIs(support.native, False)
        self.assertTrue(support.describe().startswith("cpu: bf16 "))


@require_torch
class EmulatedBf16WarningTest(TestCasePlus):
    def setUp(self):
        super().setUp()
        logging.warning_once.cache_clear()
        self.addCleanup(logging.warning_once.cache_clear)

    def _support(self, native, slowdown=None):
        return hardware.Bf16Support("cpu", native, "AMD EPYC: AVX2, no AVX512-BF16 or AMX-BF16", "AVX2", slowdown)

    def test_warns_once_for_bf16_on_cpu(self):
        args = _args(self.get_auto_remove_tmp_dir(), bf16=True)
        logger = logging.get_logger(HARDWARE_LOGGER)
        with (
            mock.patch.object(hardware, "bf16_support", return_value=self._support(False)),
            CaptureLogger(logger) as cl,
        ):
            for _ in range(3):
                support = hardware.warn_if_bf16_emulated(args, "cpu")
        self.assertIs(support.native, False)
        self.assertEqual(cl.out.count(EMULATED), 1, cl.out)
        self.assertIn("bf16=True: bf16 is emulated on this CPU (AMD EPYC: AVX2", cl.out)
        self.assertIn("about 8x", cl.out)
        self.assertIn("results are still correct", cl.out)
        self.assertNotIn("bf16_full_train", cl.out)

    def test_measured_slowdown_is_quoted(self):
        message = hardware.emulated_bf16_message(self._support(False, 23.4), "bf16_full_train=True")
        self.assertIn("A 128x128 bf16 matmul took 23.4x the fp32 time here", message)
        self.assertIn("10 instead of 16 bytes", message)

    def test_silent_where_native_fp32_or_not_main_process(self):
        tmp = self.get_auto_remove_tmp_dir()
        logger = logging.get_logger(HARDWARE_LOGGER)
        with CaptureLogger(logger) as cl:
            with mock.patch.object(hardware, "bf16_support", return_value=self._support(True)):
                self.assertIs(hardware.warn_if_bf16_emulated(_args(tmp, bf16=True), "cpu").native, True)
            with mock.patch.object(hardware, "bf16_support", side_effect=AssertionError("checked")):
                self.assertIsNone(hardware.warn_if_bf16_emulated(_args(tmp), "cpu"))
                # plain `bf16=True` on a GPU: upstream's own checks apply
                self.assertIsNone(hardware.warn_if_bf16_emulated(_args(tmp, bf16=True), "cuda:0"))
            with mock.patch.object(hardware, "bf16_support", return_value=self._support(False)):
                with mock.patch.object(TrainingArguments, "process_index", 1):
                    hardware.warn_if_bf16_emulated(_args(tmp, bf16=True), "cpu")
        self.assertEqual(cl.out, "")


if __name__ == "__main__":
    unittest.main()
