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
A CPU update for torchao's 8-bit AdamW: the same state (`OptimState8bit`: uint8 codes, an fp32 scale per block, the
256-entry dynamic map) and the same codes, without torchao's binary search.

torchao quantizes a moment with an 8-step branchless binary search over its map, each step an indexed load
`qmap[codes + k]`. Inductor's CPU backend emits every indexed load as a scalar gather, so the compiled update runs at
about 10 M values/s, 40 to 65 times torch's fused fp32 AdamW. Here the search is replaced by one lookup: torchao's
code is a non-decreasing step function of the input, and every interval of 2^16 float32 bit patterns that share
their top 16 bits (a bf16 value) holds at most one of its steps. A 65536-entry int32 table, built once from torchao's
own `quantize_8bit_with_qmap`, holds for each interval the code below the step, the code above it and the step's low
16 bits, so `quantize_8bit_with_lut` returns torchao's code for every float32 input (NaN, inf, subnormals and
values exactly on a rounding midpoint included) with one gather instead of ten.

Inductor still emits those gathers as scalar loads, so the update runs as two registered torch ops in
`torchao_cpu_adam.cpp` (shipped in the package): `adam_8bit_` (8-bit moments: three passes over each block that the
compiler vectorises, gathers included) and `adam_` (tensors under 4096 values, whose moments torchao keeps
unquantized), each taking a param group's tensors as lists in one call, its blocks split over torch's intra-op threads
(`at::parallel_for`), its arguments checked at the C++ boundary. They are built at first use by
`torch.utils.cpp_extension.load` (ninja, about 10 s here) in torch's per-user extension folder, in a sub-folder only
the user can write to (checked) and named by a digest of the source, flags, compiler, torch and CPU; a truncated
library is linked again. About 2 times torch's fused fp32 AdamW on large tensors (the compiled lookup: 5 to 16). They
do the compiled update's fp32 arithmetic in the same order (no fused multiply-add, torch's `lerp` with its formula
switch at weight 0.5), so weights, codes and scales are bit-identical to it and to torchao's compiled update. Where
the ops cannot be built (no compiler, no ninja, a failed build), the same update runs compiled (one compile per dtype,
dynamic in the number of blocks) and small tensors take torchao's compiled update, with a warning naming the cause.

Stochastic rounding draws its 16 random bits per value from a counter-based hash of the element's index in the call
and a seed taken from the global torch generator once per call, so it needs no random kernel and is reproducible
under `torch.manual_seed` (and under `synchronize_stochastic_rounding`'s per-step seeding); its draws differ from
torchao's `torch.randint`: each value's 16 bits are uniform as torchao's, and values are a hash's draws, not
independent ones (a review measured correlations between neighbouring decisions of about 0.002, no bias).

Proposed to torchao: `build_quantize_lut` and `quantize_8bit_with_lut` go to `torchao/optim/quant_utils.py`; the
.cpp goes to `torchao/csrc/cpu/aten_kernels/` unchanged except for its namespace (built with
`-DTORCHAO_CPU_ADAM_NAMESPACE=torchao`, or that default changed; here `transformers_torchao`, so that a later torchao op
of the same name cannot collide), compiled by torchao's `setup.py` with its CPU flags plus `-ffp-contract=off`;
`torch.ops.torchao.adam_8bit_` / `adam_` are then called from a CPU branch of `_AdamBase.step` in
`torchao/optim/adam.py`, and the loader here (`_cpu_ops`) goes away.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform
import shutil
import struct
import subprocess
import sys
import sysconfig

import torch
import torch.utils.cpp_extension
from torch.utils.cpp_extension import get_cxx_compiler
from torchao.optim import AdamW8bit as _TorchaoAdamW8bit
from torchao.optim.adam import single_param_adam
from torchao.optim.quant_utils import create_dynamic_map, quantize_8bit_with_qmap
from torchao.optim.subclass_8bit import OptimState8bit

from ..utils import logging


logger = logging.get_logger(__name__)


_M32 = 0xFFFFFFFF


def _bucket_values(keys: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """The float32 at `position` (0 = smallest value, 65535 = largest) among the bit patterns whose top 16 bits are
    `keys`: a positive bucket grows with its low bits, a negative one shrinks."""
    low = torch.where(keys >= 0x8000, 0xFFFF - position, position)
    bits = (keys << 16) | low
    return (bits - (bits >= 1 << 31).long() * (1 << 32)).to(torch.int32).view(torch.float32)


def build_quantize_lut(qmap: torch.Tensor) -> torch.Tensor:
    """
    The lookup table of [`quantize_8bit_with_lut`] for a sorted 256-entry `qmap` (torchao's dynamic map).

    Entry `k` describes the float32 values whose top 16 bits are `k`: bits 16-23 hold torchao's code for the
    smallest of them, bits 24-31 the code for the largest, bits 0-15 the low bits of the smallest value that gets
    the larger code. Built with torchao's own `quantize_8bit_with_qmap` (a binary search per bucket), so the table
    reproduces it exactly, provided no bucket holds two steps, which is checked.

    Returns:
        `torch.Tensor`: 65536 int32 entries, on the CPU.
    """
    qmap = qmap.detach().to("cpu", torch.float32)
    keys = torch.arange(1 << 16, dtype=torch.int64)

    def reference(position):
        return quantize_8bit_with_qmap(_bucket_values(keys, position), qmap).long()

    low_code, high_code = reference(torch.zeros_like(keys)), reference(torch.full_like(keys, 0xFFFF))
    lo, hi = torch.zeros_like(keys), torch.full_like(keys, 0xFFFF)  # first position with the high code
    for _ in range(17):
        mid = (lo + hi) // 2
        high = reference(mid) == high_code
        lo, hi = torch.where(high, lo, mid + 1), torch.where(high, mid, hi)
    step_low = torch.where(keys >= 0x8000, 0xFFFF - hi, hi)
    # exponent all ones: +inf takes the top code and NaN torchao's 0 (every comparison with NaN is false)
    special = (keys & 0x7F80) == 0x7F80
    low_code, step_low = low_code.masked_fill(special, 0), step_low.masked_fill(special, 0)
    inf_code = quantize_8bit_with_qmap(torch.tensor([float("inf")]), qmap).long()
    high_code = torch.where(special, torch.where(keys == 0x7F80, inf_code, 0), high_code)
    if not bool((special | (high_code - low_code >= 0) & (high_code - low_code <= 1)).all()):
        raise ValueError("this quantization map has two code steps in one bf16 interval: use the binary search")
    table = step_low | (low_code << 16) | (high_code << 24)
    return (table - (table >= 1 << 31).long() * (1 << 32)).to(torch.int32)


def quantize_8bit_with_lut(input: torch.Tensor, lut: torch.Tensor) -> torch.Tensor:
    """torchao's `quantize_8bit_with_qmap(input, qmap)` for a float32 `input`, with `lut = build_quantize_lut(qmap)`:
    one table lookup and one comparison per value."""
    key = (input.view(torch.int32) >> 16) & 0xFFFF
    entry = lut[key]
    step = ((key << 16) | (entry & 0xFFFF)).view(torch.float32)
    return torch.where(input >= step, (entry >> 24) & 0xFF, (entry >> 16) & 0xFF).to(torch.uint8)


@functools.cache
def _standard_luts() -> dict[bool, tuple[torch.Tensor, torch.Tensor]]:
    """torchao's signed and unsigned maps (`OptimState8bit.zeros`) with their tables, by `signed`."""
    luts = {}
    for signed in (True, False):
        qmap = torch.tensor(create_dynamic_map(signed=signed), dtype=torch.float32)
        luts[signed] = (qmap, build_quantize_lut(qmap))
    return luts


def _random_16bit(shape, seed: torch.Tensor, offset=0) -> torch.Tensor:
    """16 uniform random bits per element: a 32-bit integer hash (lowbias32's shifts) of the element's index XOR a hash
    of `seed` (so that another seed is not the same stream shifted by a few elements), computed in int64 lanes so that
    no product overflows."""
    numel = 1
    for size in shape:
        numel *= size
    key = seed & _M32
    for multiplier in (0x7FEB352D, 0x46CA68B5):
        key = ((key ^ (key >> 16)) * multiplier) & _M32
    x = ((torch.arange(numel, dtype=torch.int64) + offset) & _M32) ^ (key ^ (key >> 16))
    x = ((x ^ (x >> 16)) * 0x7FEB352D) & _M32
    x = ((x ^ (x >> 15)) * 0x46CA68B5) & _M32
    return ((x ^ (x >> 16)) & 0xFFFF).to(torch.int32).view(shape)


def fp32_to_bf16_sr_hashed(x: torch.Tensor, seed: torch.Tensor, offset=0) -> torch.Tensor:
    """torchao's `_fp32_to_bf16_sr` (away from zero with probability equal to the dropped 16 bits / 2^16) with
    [`_random_16bit`] noise instead of `torch.randint`, element `i` hashing `offset + i`."""
    bits = x.view(torch.int32)
    truncated = bits & -65536  # 0xFFFF0000
    rounded = torch.where(_random_16bit(x.shape, seed, offset) < (bits & 0xFFFF), truncated + 0x10000, truncated)
    return rounded.view(torch.float32).bfloat16()


def _requantize(x: torch.Tensor, codes: torch.Tensor, scale: torch.Tensor, lut: torch.Tensor) -> None:
    """torchao's `OptimState8bit.copy_` from a float tensor (`scale_tensor` then the quantizer), per row."""
    new_scale = x.abs().amax(-1).clip(1e-12)
    codes.copy_(quantize_8bit_with_lut(x / new_scale.view(-1, 1), lut))
    scale.copy_(new_scale)


def single_param_adam_8bit_cpu(p, grad, exp_avg, exp_avg_sq, lr, step, hparams, sr_seed):
    """
    torchao's `single_param_adam` for 8-bit moments, rows of one block each (`(num_blocks, block_size)` views).

    Args:
        p, grad (`torch.Tensor`): The weight (updated in place) and its gradient, bf16 or fp32.
        exp_avg, exp_avg_sq (`tuple`): `(codes, scale, qmap, lut)` of each moment; codes and scale updated in place.
        lr, step (`torch.Tensor`): 0-d learning rate and step (already counted).
        hparams (`tuple`): `(beta1, beta2, weight_decay, eps, is_adamw)`.
        sr_seed (`tuple` or `None`): Stochastic rounding to bf16's `(seed, offset)` (0-d int64 tensors: element `i`
            hashes `offset + i`); `None` rounds to nearest.
    """
    beta1, beta2, weight_decay, eps, is_adamw = hparams
    p_f32, grad_f32 = p.float(), grad.float()
    if is_adamw:
        p_f32 = p_f32 - lr * weight_decay * p_f32
    else:
        grad_f32 = grad_f32 + weight_decay * p_f32
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step

    codes, scale, qmap, lut = exp_avg
    exp_avg_f32 = (qmap[codes.int()] * scale.view(-1, 1)).lerp(grad_f32, 1 - beta1)
    _requantize(exp_avg_f32, codes, scale, lut)
    codes, scale, qmap, lut = exp_avg_sq
    exp_avg_sq_f32 = (qmap[codes.int()] * scale.view(-1, 1)).lerp(grad_f32.square(), 1 - beta2)
    _requantize(exp_avg_sq_f32, codes, scale, lut)

    denom = (exp_avg_sq_f32.sqrt() / bias_correction2.sqrt()) + eps
    p_f32 = p_f32 - lr * (exp_avg_f32 / bias_correction1) / denom
    p.copy_(p_f32 if sr_seed is None else fp32_to_bf16_sr_hashed(p_f32, *sr_seed))


_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchao_cpu_adam.cpp")
_OP_NAMESPACE = "transformers_torchao"  # the .cpp's TORCHAO_CPU_ADAM_NAMESPACE


def _target_flags() -> tuple[str, ...]:
    """The instruction set of torch's own CPU dispatch (`ATEN_CPU_CAPABILITY` lowers it) on x86, else the machine's."""
    capability = torch.backends.cpu.get_cpu_capability()
    if platform.machine().lower() in ("x86_64", "amd64") and capability != "AVX512":
        return ("-march=haswell",) if capability == "AVX2" else ()
    return ("-march=native",)


def _build_flags() -> list[str]:
    """No fused multiply-add (the compiled update has none); OpenMP, torch's thread pool, where GCC builds it."""
    flags = ["-O3", "-ffp-contract=off", "-fno-math-errno", *_target_flags()]
    return flags + ["-fopenmp"] if sys.platform.startswith("linux") else flags


def _cpu_identity() -> str:
    """What `-march=native` builds for: the CPU's model and flags where Linux names them, else the processor."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = [line for line in f if line.startswith(("model name", "flags"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor()


def _extension_folder(flags: list[str]) -> str:
    """The build's folder in torch's extension folder (`TORCH_EXTENSIONS_DIR`, else torch's per-user cache), named
    by a digest of the source, flags, compiler, torch and CPU, so that each build keeps its own."""
    with open(_SOURCE, "rb") as f:
        tag = (
            f.read() + f"{flags}{get_cxx_compiler()}{torch.__version__}{platform.machine()}{_cpu_identity()}".encode()
        )
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or torch.utils.cpp_extension.get_default_build_root()
    return os.path.join(root, "torchao_cpu_adam_" + hashlib.sha256(tag).hexdigest()[:16])


def _private_folder(directory: str) -> str:
    """`directory`, created if needed, checked to be writable by this user only: a library that another user could
    replace would run as this one."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    info = os.stat(directory)
    if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o022):
        raise OSError(f"{directory} is not a folder that only this user can write to: remove it")
    return directory


def _whole_library(library: str) -> bool:
    """Whether a built ELF library is whole: its section table, which the linker writes last, ends within the file.
    A truncated one (a full disk, a killed copy) would crash the process that loads it."""
    with open(library, "rb") as f:
        header = f.read(64)
    if header[:4] != b"\x7fELF" or len(header) < 64:
        return not sys.platform.startswith("linux")
    order = "<" if header[5] == 1 else ">"
    if header[4] == 2:  # 64-bit
        offset, entry_size, count = (
            struct.unpack_from(order + "Q", header, 0x28)[0],
            *struct.unpack_from(order + "2H", header, 0x3A),
        )
    else:
        offset, entry_size, count = (
            struct.unpack_from(order + "I", header, 0x20)[0],
            *struct.unpack_from(order + "2H", header, 0x2E),
        )
    return os.path.getsize(library) >= offset + entry_size * count


@contextlib.contextmanager
def _ninja_of_this_environment():
    """torch runs `ninja` from `PATH`; the `ninja` package of the `torchao` extra lands beside this interpreter, which
    an unactivated virtual environment leaves off `PATH`: add that folder while building."""
    path, scripts = os.environ.get("PATH"), sysconfig.get_path("scripts")
    if shutil.which("ninja") is None and shutil.which("ninja", path=scripts):
        os.environ["PATH"] = os.pathsep.join(filter(None, (scripts, path)))
    try:
        yield
    finally:
        if path is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = path


@functools.cache
def _cpu_ops():
    """The ops of `torchao_cpu_adam.cpp` (`adam_8bit_`, `adam_`), built at first use by torch's extension machinery
    (ninja, a file lock, a rebuild when the source or flags change) and loaded; `None`, logged once, where they
    cannot be (no ninja, no compiler, a failed build or load): the compiled updates run instead."""
    flags = _build_flags()
    try:
        directory = _private_folder(_extension_folder(flags))
        name = os.path.basename(directory)
        library = os.path.join(directory, name + ".so")
        if os.path.exists(library) and not _whole_library(library):
            os.remove(library)  # ninja links it again
        with _ninja_of_this_environment(), _build_lock(directory):
            torch.utils.cpp_extension.verify_ninja_availability()
            if not os.path.exists(library):
                logger.info("torchao_cpu_adam: building the C++ update once for this machine (about 10-30 s)")
            torch.utils.cpp_extension.load(
                name, [_SOURCE], extra_cflags=flags, extra_ldflags=[f for f in flags if f == "-fopenmp"],
                build_directory=directory, is_python_module=False, verbose=False,
            )  # fmt: skip
    except (OSError, RuntimeError, ImportError, subprocess.SubprocessError) as error:
        logger.warning(
            f"torchao_cpu_adam: the C++ update could not be built or loaded ({_build_error(error)}); the compiled "
            "torch update runs instead, several times slower, and it needs a C++ compiler too: install one (g++) or "
            "set `CXX` to a compiler's path, and `pip install ninja`"
        )
        return None
    return getattr(torch.ops, _OP_NAMESPACE)


@contextlib.contextmanager
def _build_lock(directory: str):
    """
    Held around torch's build: an `flock`, which the system releases when its process dies, whereas torch's own
    `lock` file stays behind a build that was killed and makes every later build wait forever (pytorch#189245). Under
    this lock, torch's `lock` file can only be such a leftover, and is removed.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: torch's lock alone
        yield
        return
    with open(os.path.join(directory, "build.flock"), "w", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(directory, "lock"))
        yield


def _build_error(error: BaseException) -> str:
    """The lines of a failed build that say why (the compiler's errors), not ninja's command lines."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    told = [line for line in lines if "error:" in line.lower() or "not found" in line.lower()]
    return " / ".join((told or lines)[-4:])[-600:]


def _op_scalars(lr, step, hparams, seed) -> dict:
    """The ops' keyword arguments: the compiled update's fp32 scalars (bias corrections computed as it does)."""
    beta1, beta2, weight_decay, eps, is_adamw = hparams
    return {
        "lr": float(lr), "beta1": beta1, "beta2": beta2, "weight_decay": weight_decay, "eps": eps,
        "is_adamw": is_adamw, "bias_correction1": float(1 - beta1**step),
        "bias_correction2_sqrt": float((1 - beta2**step).sqrt()), "seed": None if seed is None else int(seed),
    }  # fmt: skip


def native_adam_8bit_cpu(params, grads, exp_avgs, exp_avg_sqs, lr, step, hparams, seed):
    """
    [`single_param_adam_8bit_cpu`] for every tensor of `params` in one call of the C++ op, which must have been
    built: the same fp32 arithmetic in the same order, so weights, codes and scales are the compiled update's bit for
    bit. With `seed`, each tensor rounds as the compiled update with `(seed, offset)`, `offset` being the number of
    values before it in `params`.

    Args:
        params, grads (`list[torch.Tensor]`): Contiguous CPU weights (updated in place) and gradients, one dtype.
        exp_avgs, exp_avg_sqs (`list[OptimState8bit]`): torchao's signed and unsigned standard maps, one block size.
        lr, step, hparams: As in [`single_param_adam_8bit_cpu`]; one `step` for all the tensors.
        seed (`torch.Tensor` or `None`): Stochastic rounding's seed; `None` rounds to nearest.
    """
    luts = _standard_luts()
    _cpu_ops().adam_8bit_(
        params, grads, [m.codes for m in exp_avgs], [m.scale for m in exp_avgs], [v.codes for v in exp_avg_sqs],
        [v.scale for v in exp_avg_sqs], [luts[True][0], luts[False][0]], [luts[True][1], luts[False][1]],
        exp_avgs[0].block_size, **_op_scalars(lr, step, hparams, seed),
    )  # fmt: skip


def native_adam_plain_cpu(params, grads, exp_avgs, exp_avg_sqs, lr, step, hparams, sr_seed):
    """
    torchao's compiled `single_param_adam` for contiguous CPU tensors with unquantized moments (their weight's dtype,
    all bf16 or all fp32), every tensor in one call of the C++ op, which must have been built. Rounding to nearest
    gives the compiled update's weights and moments bit for bit; stochastic rounding (`sr_seed`, as in
    [`native_adam_8bit_cpu`]) hashes the element's index counted across all the tensors.

    Args:
        params, grads, exp_avgs, exp_avg_sqs (`list[torch.Tensor]`): Updated in place (not `grads`).
        lr, step, hparams, sr_seed: As in [`native_adam_8bit_cpu`].
    """
    _cpu_ops().adam_(params, grads, exp_avgs, exp_avg_sqs, **_op_scalars(lr, step, hparams, sr_seed))


_compiled_update = torch.compile(single_param_adam_8bit_cpu, fullgraph=True, dynamic=False)


_plain = torch.compile(single_param_adam, fullgraph=True, dynamic=False)


def _flat_plain_state(p: torch.Tensor, state: dict) -> bool:
    """Whether torchao keeps this CPU parameter's moments unquantized (under 4096 values), all contiguous."""
    moments = (state["exp_avg"], state["exp_avg_sq"])
    plain = all(type(m) is torch.Tensor and m.is_contiguous() for m in moments) and "max_exp_avg_sq" not in state
    return plain and p.device.type == "cpu" and p.is_contiguous() and p.grad.is_contiguous()


def _takes_native_plain(p: torch.Tensor, state: dict) -> bool:
    """Whether this parameter's unquantized moments take the C++ kernel's batched update: contiguous CPU bf16 or fp32
    tensors, gradient and moments in the weight's dtype, no `amsgrad`, the kernel built."""
    if not _flat_plain_state(p, state) or p.dtype not in (torch.bfloat16, torch.float32):
        return False
    if any(t.dtype != p.dtype for t in (p.grad, state["exp_avg"], state["exp_avg_sq"])):
        return False
    return _cpu_ops() is not None


def _moment(state: OptimState8bit, lut: torch.Tensor) -> tuple:
    return (state.codes.view(-1, state.block_size), state.scale, state.qmap, lut)


def _takes_8bit_cpu(p: torch.Tensor, state: dict, amsgrad: bool) -> bool:
    """Whether this parameter takes the CPU update of 8-bit moments: contiguous bf16 or fp32 on the CPU, torchao's
    standard maps, no `amsgrad`."""
    exp_avg, exp_avg_sq = state.get("exp_avg"), state.get("exp_avg_sq")
    if amsgrad or p.device.type != "cpu" or p.dtype not in (torch.bfloat16, torch.float32):
        return False
    if not (isinstance(exp_avg, OptimState8bit) and isinstance(exp_avg_sq, OptimState8bit)):
        return False
    if not (p.is_contiguous() and p.grad.is_contiguous() and exp_avg.codes.is_contiguous()):
        return False
    if not (exp_avg_sq.codes.is_contiguous() and exp_avg.block_size == exp_avg_sq.block_size):
        return False
    luts = _standard_luts()
    return all(
        moment.signed == signed and torch.equal(moment.qmap, luts[signed][0])
        for moment, signed in ((exp_avg, True), (exp_avg_sq, False))
    )


class AdamW8bit(_TorchaoAdamW8bit):
    """
    torchao's `AdamW8bit` whose CPU parameters take the C++ ops of `torchao_cpu_adam.cpp`, one call per param group
    (and dtype and step count): tensors with 8-bit moments [`native_adam_8bit_cpu`], tensors under 4096 values, whose
    moments torchao keeps unquantized (bf16 or fp32), [`native_adam_plain_cpu`]. The same state, state dict and
    codes, in about 2 times torch's fused fp32 AdamW's step time on the CPU for large tensors (torchao's own: 13 to
    65). Where the ops cannot be built, 8-bit moments take [`single_param_adam_8bit_cpu`] compiled and small tensors
    torchao's compiled update. Every other parameter (GPU, fp16, non-contiguous, `amsgrad`) takes torchao's own
    update (`amsgrad` with 8-bit moments fails there on the CPU with torchao 0.18, as with torchao's own class). The
    first step logs (`logger.info`) how many parameters take each update.
    """

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        paths = {}
        with torch._dynamo.utils.disable_cache_limit():
            for group in self.param_groups:
                batches = {}  # (update, dtype, step count, block size) -> the parameters of one call
                for p in group["params"]:
                    if p.grad is not None:
                        path = self._param_step(p, group, batches)
                        paths[path] = paths.get(path, 0) + 1
                for key, batch in batches.items():
                    self._batch_step(key, batch, group)
        if paths and not getattr(self, "_paths_logged", False):
            self._paths_logged = True  # the class has torchao's name: say once which update each parameter takes
            counts = ", ".join(f"{n} with {path}" for path, n in paths.items())
            logger.info(f"torchao_cpu_adam.AdamW8bit updates its parameters (tensors): {counts}")
        return loss

    def _batch_step(self, key: tuple, params: list, group: dict) -> None:
        """One op call for `params` (`key` from [`_param_step`]); one seed for the call, from the global generator."""
        update, dtype, _, _ = key
        states = [self.state[p] for p in params]
        stochastic_round = self.bf16_stochastic_round and dtype is torch.bfloat16
        seed = torch.randint(0, 1 << 32, (), dtype=torch.int64) if stochastic_round else None
        hparams = (group["betas"][0], group["betas"][1], group["weight_decay"], group["eps"], self.is_adamw)
        weights, grads = [p.detach() for p in params], [p.grad for p in params]
        exp_avgs, exp_avg_sqs = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
        if update == "plain":
            native_adam_plain_cpu(weights, grads, exp_avgs, exp_avg_sqs, group["lr"], states[0]["step"], hparams, seed)
        elif _cpu_ops() is not None:
            native_adam_8bit_cpu(weights, grads, exp_avgs, exp_avg_sqs, group["lr"], states[0]["step"], hparams, seed)
        else:  # the compiled update, tensor by tensor, with the op's stochastic rounding (one seed, running offset)
            offset = 0
            for p, state in zip(params, states):
                sr_seed = None if seed is None else (seed, torch.tensor(offset))
                self._compiled_8bit_step(p, state, group, sr_seed)
                offset += p.numel()

    def _compiled_8bit_step(self, p: torch.Tensor, state: dict, group: dict, sr_seed) -> None:
        """[`single_param_adam_8bit_cpu`] compiled, dynamic in the number of blocks."""
        luts = _standard_luts()
        block_size = state["exp_avg"].block_size
        exp_avg, exp_avg_sq = _moment(state["exp_avg"], luts[True][1]), _moment(state["exp_avg_sq"], luts[False][1])
        weight, grad = p.detach().view(-1, block_size), p.grad.view(-1, block_size)
        for tensor in (weight, grad, exp_avg[0], exp_avg[1], exp_avg_sq[0], exp_avg_sq[1]):
            torch._dynamo.maybe_mark_dynamic(tensor, 0)
        hparams = (group["betas"][0], group["betas"][1], group["weight_decay"], group["eps"], self.is_adamw)
        _compiled_update(weight, grad, exp_avg, exp_avg_sq, group["lr"], state["step"], hparams, sr_seed)

    def _param_step(self, p: torch.Tensor, group: dict, batches: dict) -> str:
        """torchao's per-parameter body of `_AdamBase.step`, with the CPU branches; a parameter for a batched update
        is appended to `batches` instead. Returns the update it takes."""
        if p.grad.is_sparse:
            raise RuntimeError("Sparse gradient is not supported")
        state = self.state[p]
        if len(state) == 0:
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = self._new_buffer(p, True)
            state["exp_avg_sq"] = self._new_buffer(p, False)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = self._new_buffer(p, False)
        state["step"] += 1
        if not isinstance(group["lr"], torch.Tensor):
            raise RuntimeError(
                "lr was changed to a non-Tensor object. If you want to update lr, please use "
                "optim.param_groups[0]['lr'].fill_(new_lr)"
            )
        if _takes_native_plain(p, state):
            batches.setdefault(("plain", p.dtype, float(state["step"]), 0), []).append(p)
            return "the small-tensor CPU update (C++ kernel)"
        stochastic_round = self.bf16_stochastic_round and p.dtype is torch.bfloat16
        if not _takes_8bit_cpu(p, state, group["amsgrad"]):
            self._torchao_step(p, state, group, stochastic_round)
            return "torchao's own update"
        if p.grad.dtype == p.dtype:
            key = ("8bit", p.dtype, float(state["step"]), state["exp_avg"].block_size)
            batches.setdefault(key, []).append(p)
            return "the CPU update (C++ kernel)" if _cpu_ops() is not None else "the CPU update (compiled torch)"
        seed = torch.randint(0, 1 << 32, (), dtype=torch.int64) if stochastic_round else None
        self._compiled_8bit_step(p, state, group, None if seed is None else (seed, torch.tensor(0)))
        return "the CPU update (compiled torch)"

    def _torchao_step(self, p: torch.Tensor, state: dict, group: dict, stochastic_round: bool) -> None:
        """torchao's own update; small CPU tensors compile once for all sizes."""
        weight, grad, moments, update = p.detach(), p.grad, (state["exp_avg"], state["exp_avg_sq"]), None
        if _flat_plain_state(p, state):
            weight, grad, moments, update = weight.view(-1), grad.view(-1), [m.view(-1) for m in moments], _plain
            for tensor in (weight, grad, *moments):
                torch._dynamo.maybe_mark_dynamic(tensor, 0)
        (update or torch.compile(single_param_adam, fullgraph=True, dynamic=False))(
            weight, grad, state["step"], *moments, state.get("max_exp_avg_sq"), group["lr"],
            group["betas"][0], group["betas"][1], group["weight_decay"], group["eps"], self.is_adamw,
            stochastic_round,
        )  # fmt: skip
