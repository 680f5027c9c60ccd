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
Whether bf16 compute is native on a device, and one warning when it is emulated.

bf16 *runs* wherever torch runs, and gives the same answers everywhere; whether it is *fast* depends on the hardware:

- CUDA: compute capability 8.0 (Ampere) and newer compute in bf16; older GPUs emulate it
  (`torch.cuda.is_bf16_supported(including_emulation=False)`).
- x86 CPUs: AVX512-BF16 (Intel Cooper Lake and Sapphire Rapids, AMD Zen 4 and newer) and AMX-BF16 compute in bf16.
  CPUs with AVX512 but without its BF16 extension go through oneDNN, which converts to fp32 with AVX512 instructions;
  how fast that is varies, so it is measured. On AVX2-only CPUs (most laptops, many cloud instances) torch
  emulates bf16: a bf16 matmul runs at 1-7% of fp32's speed, and a bf16 training step of a small GPT-Neo takes about
  8 times as long as an fp32 one (measured on an AVX2-only AMD EPYC, one thread, torch 2.13).
- Arm CPUs: the BF16 extension (Armv8.6, e.g. Neoverse V1/N2, Apple M2 and newer) computes in bf16.

[`bf16_support`] answers for a device (from `torch.cpu.get_capabilities()` or `/proc/cpuinfo`, plus a tiny measured
matmul when the flags cannot decide); [`cpu_bf16_native`] is its decision rule, on plain data;
[`warn_if_bf16_emulated`] is the `Trainer`'s one-time warning for `bf16_full_train=True`, and for `bf16=True` on the
CPU.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..utils import logging


logger = logging.get_logger(__name__)

#: The probe calls bf16 slow when one of its matmuls takes more than this many times an fp32 one.
SLOW_BF16_MATMUL_RATIO = 2.0
#: Side of the probe's square matmuls: ~4 MFLOP, about 1.5 ms in bf16 where it is emulated, 0.1 ms in fp32.
PROBE_SIZE = 128

# CPU flags (as `torch.cpu.get_capabilities()` names them) that mean bf16 arithmetic in hardware, with their names
_NATIVE_CPU_FLAGS = {
    "amx_bf16": "AMX-BF16",
    "avx512_bf16": "AVX512-BF16",
    "sve_bf16": "Arm SVE BF16",
    "bf16": "Arm BF16",
}
# Linux `/proc/cpuinfo` spellings of the same flags
_PROC_CPUINFO_FLAGS = {"amx_bf16": "amx_bf16", "avx512_bf16": "avx512_bf16", "svebf16": "sve_bf16", "bf16": "bf16"}


_ARM = ("arm64", "aarch64")
_X86 = ("x86_64", "x86", "amd64", "i386", "i686")


@dataclass(frozen=True)
class Bf16Support:
    """
    Whether bf16 compute is native on one device.

    Attributes:
        device (`str`): `"cpu"`, `"cuda:0"`, ...
        native (`bool` or `None`): `True` when the hardware computes in bf16, `False` when torch or the driver emulates
            it, `None` when unknown (a device type this module does not know).
        reason (`str`): What the decision rests on, for messages (`"AVX2, no AVX512-BF16 or AMX-BF16"`, ...).
        cpu_capability (`str`, *optional*): `torch.backends.cpu.get_cpu_capability()` (`"AVX2"`, `"AVX512"`, ...).
        matmul_slowdown (`float`, *optional*): bf16 / fp32 time of the probe's matmul, when it was measured.
    """

    device: str
    native: bool | None
    reason: str
    cpu_capability: str | None = None
    matmul_slowdown: float | None = None

    @property
    def slow_emulation(self) -> bool:
        """
        bf16 is emulated and, where the probe measured it, a bf16 matmul takes more than `SLOW_BF16_MATMUL_RATIO`
        times an fp32 one. (oneDNN's AVX512 conversion path can emulate bf16 at close to fp32 speed.)
        """
        if self.native is not False:
            return False
        return self.matmul_slowdown is None or self.matmul_slowdown > SLOW_BF16_MATMUL_RATIO

    def describe(self) -> str:
        """One line for logs and benchmark headers, e.g. `"cpu: bf16 emulated (AVX2, no AVX512-BF16 or AMX-BF16)"`."""
        state = {True: "native", False: "emulated", None: "unknown"}[self.native]
        text = f"{self.device}: bf16 {state} ({self.reason})"
        if self.matmul_slowdown is not None:
            text += f"; a {PROBE_SIZE}x{PROBE_SIZE} bf16 matmul took {self.matmul_slowdown:.1f}x the fp32 time"
        return text


def cpu_bf16_native(capabilities: Mapping[str, Any], cpu_capability: str | None = None) -> tuple[bool | None, str]:
    """
    The decision rule: is bf16 arithmetic native on a CPU with these features?

    Args:
        capabilities (`Mapping[str, Any]`): CPU feature flags as `torch.cpu.get_capabilities()` names them
            (`"avx512_bf16"`, `"amx_bf16"`, `"bf16"`, `"sve_bf16"`, `"avx512_f"`, `"avx2"`, `"architecture"`, ...);
            missing flags count as absent.
        cpu_capability (`str`, *optional*): The kernel level torch dispatches to, as
            `torch.backends.cpu.get_cpu_capability()` says it (`"AVX2"`, `"AVX512"`, `"DEFAULT"`, `"SVE256"`, ...).

    Returns:
        `(native, reason)`: `native` is `True` (a bf16 flag is present), `False` (no AVX512 and no bf16 flag: torch
        emulates bf16) or `None` (AVX512 without BF16, or an architecture without known flags: measure it).
    """
    for flag, name in _NATIVE_CPU_FLAGS.items():
        if capabilities.get(flag):
            return True, name
    capability = (cpu_capability or "").upper()
    architecture = str(capabilities.get("architecture", "")).lower()
    level = cpu_capability or architecture
    if architecture in _ARM or capability.startswith("SVE"):
        return False, f"{level}, no Arm BF16 extension"
    if capabilities.get("avx512_f") or capability.startswith("AVX512"):
        return None, "AVX512 without AVX512-BF16: oneDNN converts bf16 to fp32"
    if capabilities.get("avx2") or capability in ("AVX2", "NO AVX") or architecture in _X86:
        return False, f"{level}, no AVX512-BF16 or AMX-BF16"
    return None, f"no known bf16 flag on {level or 'this CPU'}"


def cpu_capabilities() -> dict[str, Any]:
    """
    The CPU's feature flags under `torch.cpu.get_capabilities()`'s names: from torch where it has that function
    (torch >= 2.10), else the bf16 flags of `/proc/cpuinfo` (Linux) and torch's AVX checks.
    """
    import torch

    get_capabilities = getattr(torch.cpu, "get_capabilities", None)
    if callable(get_capabilities):
        return dict(get_capabilities())
    flags: dict[str, Any] = {}
    for name, check in (("avx2", "_is_avx2_supported"), ("avx512_f", "_is_avx512_supported")):
        if callable(getattr(torch.cpu, check, None)):
            flags[name] = bool(getattr(torch.cpu, check)())
    if callable(getattr(torch.cpu, "_is_avx512_bf16_supported", None)):
        flags["avx512_bf16"] = bool(torch.cpu._is_avx512_bf16_supported())
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    words = set(value.split())
                    for spelling, name in _PROC_CPUINFO_FLAGS.items():
                        flags[name] = flags.get(name, False) or spelling in words
                    break
    except OSError:
        pass
    import platform

    flags.setdefault("architecture", platform.machine().lower())
    return flags


def measure_bf16_matmul_slowdown(device: str = "cpu", size: int = PROBE_SIZE, repeats: int = 5) -> float:
    """
    Times a `size` x `size` matmul in bf16 and in fp32 on `device` and returns bf16 time / fp32 time: below 1 where
    bf16 is native, 10 to 50 where torch emulates it. Both dtypes are warmed up first (the first fp32 matmul of a
    process also starts the BLAS thread pool), then timed alternately; the best of `repeats` counts.

    Args:
        device (`str`, *optional*, defaults to `"cpu"`): Where to measure.
        size (`int`, *optional*, defaults to 128): Side of the square matrices.
        repeats (`int`, *optional*, defaults to 5): Timed repetitions per dtype.

    Returns:
        `float`: The ratio of the best times.
    """
    import torch

    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, size, size, generator=generator)
    operands = {dtype: (a.to(device, dtype), b.to(device, dtype)) for dtype in (torch.bfloat16, torch.float32)}
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    for x, y in operands.values():
        for _ in range(2):
            x @ y
    sync()
    best = dict.fromkeys(operands, float("inf"))
    for _ in range(repeats):
        for dtype, (x, y) in operands.items():
            start = time.perf_counter()
            x @ y
            sync()
            best[dtype] = min(best[dtype], time.perf_counter() - start)
    return best[torch.bfloat16] / max(best[torch.float32], 1e-9)


@functools.cache
def bf16_support(device: str | None = None, probe: bool = True) -> Bf16Support:
    """
    Whether bf16 compute is native on `device`. Cached per device.

    Args:
        device (`str` or `torch.device`, *optional*): `"cpu"`, `"cuda"`, `"cuda:1"`, ... Defaults to the current CUDA
            device when CUDA is available, else the CPU.
        probe (`bool`, *optional*, defaults to `True`): On a CPU whose flags cannot decide (AVX512 without BF16, an
            unknown architecture), time a bf16 and an fp32 matmul ([`measure_bf16_matmul_slowdown`], about 20 ms
            where bf16 is emulated).

    Returns:
        [`Bf16Support`].
    """
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = str(device)
    device_type = device.split(":")[0]
    if device_type == "cuda":
        index = torch.device(device).index
        index = torch.cuda.current_device() if index is None else index
        major, minor = torch.cuda.get_device_capability(index)
        name = torch.cuda.get_device_name(index)
        native = major >= 8  # what torch.cuda.is_bf16_supported(including_emulation=False) checks, per device
        if torch.version.hip:
            native = bool(torch.cuda.is_bf16_supported(including_emulation=False))
        return Bf16Support(f"cuda:{index}", native, f"{name}, compute capability {major}.{minor}")
    if device_type != "cpu":
        return Bf16Support(device, None, f"no bf16 check for {device_type!r} devices")

    capability = torch.backends.cpu.get_cpu_capability()
    flags = cpu_capabilities()
    native, reason = cpu_bf16_native(flags, capability)
    cpu_name = flags.get("cpu_name")
    if cpu_name:
        reason = f"{cpu_name}: {reason}"
    slowdown = None
    if native is None and probe:
        slowdown = measure_bf16_matmul_slowdown("cpu")
        # x86 without a bf16 flag has no bf16 instructions: emulated, however fast; elsewhere the speed decides
        x86 = bool(flags.get("avx512_f") or flags.get("avx2") or str(capability).upper().startswith("AVX"))
        if x86 or slowdown > SLOW_BF16_MATMUL_RATIO:
            native = False
    return Bf16Support("cpu", native, reason, cpu_capability=capability, matmul_slowdown=slowdown)


def emulated_bf16_message(support: Bf16Support, what: str) -> str:
    """
    The warning for a run that computes in bf16 where bf16 is emulated.

    Args:
        support ([`Bf16Support`]): The device's answer.
        what (`str`): The setting that asked for bf16 (`"bf16_full_train=True"`, `"bf16=True"`).
    """
    memory = (
        "; `bf16_full_train` still saves memory (10 instead of 16 bytes of training state per parameter)"
        if "full_train" in what
        else ""
    )
    if support.device.startswith("cuda"):
        return (
            f"{what}: bf16 is emulated on {support.reason} (native from compute capability 8.0), so expect bf16 "
            f"steps to be slower than fp32 ones. The results are still correct{memory}."
        )
    if support.matmul_slowdown is not None:
        measured = f"A {PROBE_SIZE}x{PROBE_SIZE} bf16 matmul took {support.matmul_slowdown:.1f}x the fp32 time here"
    else:
        measured = "Torch computes bf16 matmuls at 1-7% of fp32's speed on such CPUs"
    return (
        f"{what}: bf16 is emulated on this CPU ({support.reason}). {measured}, so expect a bf16 "
        "training step to take several times as long as an fp32 one: about 8x for a small GPT-Neo on an AVX2-only "
        "AMD EPYC. The results are still correct (torch computes in fp32 and rounds to bf16, as bf16 hardware does); "
        "CPUs with AVX512-BF16 or AMX-BF16 run bf16 faster than fp32. For speed on this machine, train in fp32 "
        f"(`bf16=False`){memory}."
    )


def warn_if_bf16_emulated(args, device=None) -> Bf16Support | None:
    """
    Logs one warning, on the main process, when the run computes in bf16 and bf16 is emulated on its device: for
    `bf16_full_train=True` on any device, and for `bf16=True` on the CPU (where upstream does not check it).

    Args:
        args (`TrainingArguments`): The run's arguments (`bf16`, `bf16_full_train`, `process_index`).
        device (`str` or `torch.device`, *optional*): The run's device; defaults to `args.device`.

    Returns:
        The [`Bf16Support`] when it was checked (whether or not it warned), else `None`.
    """
    full_train = bool(getattr(args, "bf16_full_train", False))
    if not (full_train or getattr(args, "bf16", False)):
        return None
    if device is None:
        device = getattr(args, "device", None)
    device = str(device) if device is not None else "cpu"
    if not full_train and not device.startswith("cpu"):
        return None
    support = bf16_support(device)
    if support.slow_emulation and getattr(args, "process_index", 0) == 0:
        what = "bf16_full_train=True" if full_train else "bf16=True"
        logger.warning_once(emulated_bf16_message(support, what))
    return support
