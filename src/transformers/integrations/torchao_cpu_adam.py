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

Inductor still emits those gathers as scalar loads, so the update runs as a small C++ kernel ([`_KERNEL_SOURCE`],
three passes over each block that the compiler vectorises, gathers included), built once per machine with the C++
compiler torch uses, kept in a folder only the user can write to (torch's extension folder) with a digest that is
checked before each load, and loaded with `ctypes`: about 2 times torch's fused fp32 AdamW on large tensors
(the compiled lookup: 5 to 16).
It does the compiled update's fp32 arithmetic in the same order (no fused multiply-add), so weights, codes and
scales are bit-identical to it and to torchao's compiled update. Where the kernel cannot be built, the same update
runs compiled (one compile per dtype, dynamic in the number of blocks), with a warning.

Tensors under 4096 values, whose moments torchao keeps unquantized, take a plain Adam(W) update in the same
library, every such tensor of a param group in one call (torchao's compiled update per tensor costs a dynamo-guarded
call each), with the compiled update's arithmetic: bit-identical to torchao's compiled `single_param_adam` when
rounding to nearest.

Stochastic rounding draws its 16 random bits per value from a counter-based hash of the element index and a seed
taken from the global torch generator once per tensor and step, so it needs no random kernel and is reproducible
under `torch.manual_seed` (and under `synchronize_stochastic_rounding`'s per-step seeding); its draws differ from
torchao's `torch.randint`: each value's 16 bits are uniform as torchao's, and values are a hash's draws, not
independent ones (a review measured correlations between neighbouring decisions of about 0.002, no bias).

Upstream, this would sit in torchao as `torchao/optim/quant_utils.py` (`build_quantize_lut`,
`quantize_8bit_with_lut`), the kernel in torchao's C++ extension (`torchao/csrc/cpu`) and a CPU branch of
`_AdamBase.step` in `torchao/optim/adam.py`.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import subprocess
import tempfile

import torch
import torch.utils.cpp_extension
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


def _random_16bit(shape, seed: torch.Tensor) -> torch.Tensor:
    """16 uniform random bits per element: a 32-bit integer hash (lowbias32's shifts) of the element's index XOR a hash
    of `seed` (so that another seed is not the same stream shifted by a few elements), computed in int64 lanes so that
    no product overflows."""
    numel = 1
    for size in shape:
        numel *= size
    key = seed & _M32
    for multiplier in (0x7FEB352D, 0x46CA68B5):
        key = ((key ^ (key >> 16)) * multiplier) & _M32
    x = torch.arange(numel, dtype=torch.int64) ^ (key ^ (key >> 16))
    x = ((x ^ (x >> 16)) * 0x7FEB352D) & _M32
    x = ((x ^ (x >> 15)) * 0x46CA68B5) & _M32
    return ((x ^ (x >> 16)) & 0xFFFF).to(torch.int32).view(shape)


def fp32_to_bf16_sr_hashed(x: torch.Tensor, seed: torch.Tensor) -> torch.Tensor:
    """torchao's `_fp32_to_bf16_sr` (away from zero with probability equal to the dropped 16 bits / 2^16) with
    [`_random_16bit`] noise instead of `torch.randint`."""
    bits = x.view(torch.int32)
    truncated = bits & -65536  # 0xFFFF0000
    rounded = torch.where(_random_16bit(x.shape, seed) < (bits & 0xFFFF), truncated + 0x10000, truncated)
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
        sr_seed (`torch.Tensor` or `None`): The seed of stochastic rounding to bf16; `None` rounds to nearest.
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
    p.copy_(p_f32 if sr_seed is None else fp32_to_bf16_sr_hashed(p_f32, sr_seed))


_KERNEL_SOURCE = r"""
// torchao's 8-bit AdamW update for one CPU tensor (see torchao_cpu_adam.py): the fp32 arithmetic of the compiled
// torch update in the same order, block by block, in three vectorisable passes over each block.
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace {

inline float as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t as_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float load(const uint16_t* p, int64_t i) { return as_float(uint32_t(p[i]) << 16); }
inline float load(const float* p, int64_t i) { return p[i]; }

struct Scalars {
  float lr, lr_wd, wd, w1, w2, bc1, sqrt_bc2, eps;
  int32_t is_adamw, stochastic_round;
  uint32_t seed_key;
};

// weight decay, dequantisation and both moments' lerp; returns the blocks' maximum |m| and |v| bit patterns
template <typename P>
void moments(const P* __restrict p, const P* __restrict g, const uint8_t* __restrict c1, float scale1,
             const float* __restrict q1, const uint8_t* __restrict c2, float scale2, const float* __restrict q2,
             float* __restrict m, float* __restrict v, float* __restrict w, int64_t n, const Scalars& k,
             uint32_t* max1_out, uint32_t* max2_out) {
  uint32_t max1 = 0, max2 = 0;
  const float lr_wd = k.is_adamw ? k.lr_wd : 0.0f, wd = k.is_adamw ? 0.0f : k.wd;
  for (int64_t i = 0; i < n; ++i) {
    float pf = load(p, i), gf = load(g, i);
    pf = k.is_adamw ? pf - lr_wd * pf : pf;
    gf = k.is_adamw ? gf : gf + wd * pf;
    float mi = q1[c1[i]] * scale1, vi = q2[c2[i]] * scale2;
    mi = mi + (gf - mi) * k.w1;
    vi = vi + (gf * gf - vi) * k.w2;
    m[i] = mi; v[i] = vi; w[i] = pf;
    uint32_t a1 = as_bits(mi) & 0x7FFFFFFFu, a2 = as_bits(vi) & 0x7FFFFFFFu;
    max1 = a1 > max1 ? a1 : max1;
    max2 = a2 > max2 ? a2 : max2;
  }
  *max1_out = max1; *max2_out = max2;
}

// amax(|x|).clip(1e-12) from the largest bit pattern of |x| (NaN's patterns lie above inf's, so NaN propagates)
inline float block_scale(uint32_t max_bits) {
  float amax = as_float(max_bits);
  return amax != amax ? amax : (amax > 1e-12f ? amax : 1e-12f);
}

// quantize_8bit_with_lut(x / scale, lut): one lookup and one comparison
void quantize(const float* __restrict x, float scale, const int32_t* __restrict lut, uint8_t* __restrict codes,
              int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float y = x[i] / scale;
    uint32_t key = as_bits(y) >> 16, entry = uint32_t(lut[key]);
    float step = as_float((key << 16) | (entry & 0xFFFFu));
    codes[i] = uint8_t(y >= step ? entry >> 24 : (entry >> 16) & 0xFFu);
  }
}

inline float adam(float w, float m, float v, const Scalars& k) {
  return w - k.lr * (m / k.bc1) / (std::sqrt(v) / k.sqrt_bc2 + k.eps);
}

void store(float* __restrict p, const float* __restrict m, const float* __restrict v, float* __restrict w,
           int64_t, int64_t n, const Scalars& k) {
  for (int64_t i = 0; i < n; ++i) p[i] = adam(w[i], m[i], v[i], k);
}

// c10::BFloat16's rounding (nearest even, NaN to 0x7FC0), or fp32_to_bf16_sr_hashed with _random_16bit's hash
void store_rounded(uint16_t* __restrict p, const float* __restrict values, int64_t offset, int64_t n,
                   const Scalars& k) {
  if (k.stochastic_round) {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t x = uint32_t(offset + i) ^ k.seed_key;
      x = (x ^ (x >> 16)) * 0x7FEB352Du;
      x = (x ^ (x >> 15)) * 0x46CA68B5u;
      uint32_t bits = as_bits(values[i]), truncated = bits & 0xFFFF0000u;
      uint32_t rounded = ((x ^ (x >> 16)) & 0xFFFFu) < (bits & 0xFFFFu) ? truncated + 0x10000u : truncated;
      p[i] = (rounded & 0x7FFFFFFFu) > 0x7F800000u ? uint16_t(0x7FC0) : uint16_t(rounded >> 16);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      float f = values[i];
      uint32_t u = as_bits(f);
      uint16_t rounded = uint16_t((u + (((u >> 16) & 1u) + 0x7FFFu)) >> 16);
      p[i] = f != f ? uint16_t(0x7FC0) : rounded;
    }
  }
}

// the Adam step into `w` (in place), then rounded to bf16
void store(uint16_t* __restrict p, const float* __restrict m, const float* __restrict v, float* __restrict w,
           int64_t offset, int64_t n, const Scalars& k) {
  for (int64_t i = 0; i < n; ++i) w[i] = adam(w[i], m[i], v[i], k);
  store_rounded(p, w, offset, n, k);
}

template <typename P>
void update(P* p, const P* g, uint8_t* c1, float* s1, const float* q1, const int32_t* l1, uint8_t* c2, float* s2,
            const float* q2, const int32_t* l2, int64_t begin, int64_t end, int64_t block, const Scalars& k) {
  std::vector<float> buffer(3 * block);
  float *m = buffer.data(), *v = m + block, *w = v + block;
  for (int64_t b = begin; b < end; ++b) {
    const int64_t o = b * block;
    uint32_t max1, max2;
    moments(p + o, g + o, c1 + o, s1[b], q1, c2 + o, s2[b], q2, m, v, w, block, k, &max1, &max2);
    s1[b] = block_scale(max1);
    s2[b] = block_scale(max2);
    quantize(m, s1[b], l1, c1 + o, block);
    quantize(v, s2[b], l2, c2 + o, block);
    store(p + o, m, v, w, o, block, k);
  }
}

// blocks split evenly between `threads` threads (each block's result does not depend on the split)
template <typename P>
void update_parallel(P* p, const P* g, uint8_t* c1, float* s1, const float* q1, const int32_t* l1, uint8_t* c2,
                     float* s2, const float* q2, const int32_t* l2, int64_t num_blocks, int64_t block,
                     const Scalars& k, int64_t threads) {
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t)
    workers.emplace_back(update<P>, p, g, c1, s1, q1, l1, c2, s2, q2, l2, num_blocks * t / threads,
                         num_blocks * (t + 1) / threads, block, std::cref(k));
  update(p, g, c1, s1, q1, l1, c2, s2, q2, l2, 0, num_blocks / threads, block, k);
  for (auto& worker : workers) worker.join();
}

}  // namespace

extern "C" void adam8bit_update(int32_t bf16, void* p, const void* g, uint8_t* c1, float* s1, const float* q1,
                                const int32_t* l1, uint8_t* c2, float* s2, const float* q2, const int32_t* l2,
                                int64_t num_blocks, int64_t block, const float* f, const int32_t* flags) {
  Scalars k{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], flags[0], flags[1], uint32_t(flags[2])};
  int64_t threads = std::max<int64_t>(1, std::min<int64_t>(flags[3], num_blocks * block >> 16));
  if (bf16)
    update_parallel(static_cast<uint16_t*>(p), static_cast<const uint16_t*>(g), c1, s1, q1, l1, c2, s2, q2, l2,
                    num_blocks, block, k, threads);
  else
    update_parallel(static_cast<float*>(p), static_cast<const float*>(g), c1, s1, q1, l1, c2, s2, q2, l2, num_blocks,
                    block, k, threads);
}

namespace {

// c10::BFloat16's rounding to nearest even (NaN to 0x7FC0)
inline uint16_t round_bf16(float f) {
  uint32_t u = as_bits(f);
  return f != f ? uint16_t(0x7FC0) : uint16_t((u + (((u >> 16) & 1u) + 0x7FFFu)) >> 16);
}
inline void put(float* p, int64_t i, float f) { p[i] = f; }
inline void put(uint16_t* p, int64_t i, float f) { p[i] = round_bf16(f); }

// torchao's single_param_adam with unquantized moments (in the weight's dtype), in the compiled update's order
template <typename P>
void plain(P* __restrict p, const P* __restrict g, P* __restrict m, P* __restrict v, float* __restrict w, int64_t n,
           const Scalars& k) {
  const float lr_wd = k.is_adamw ? k.lr_wd : 0.0f, wd = k.is_adamw ? 0.0f : k.wd;
  for (int64_t i = 0; i < n; ++i) {
    float pf = load(p, i), gf = load(g, i), mi = load(m, i), vi = load(v, i);
    pf = k.is_adamw ? pf - lr_wd * pf : pf;
    gf = k.is_adamw ? gf : gf + wd * pf;
    mi = mi + (gf - mi) * k.w1;
    vi = vi + (gf * gf - vi) * k.w2;
    put(m, i, mi); put(v, i, vi);
    w[i] = adam(pf, mi, vi, k);
  }
}

}  // namespace

// every tensor of `count` with unquantized moments, in one call; stochastic rounding's element index runs on across
// the tensors
extern "C" void adam_plain_update(int32_t bf16, int64_t count, void* const* p, void* const* g, void* const* m,
                                  void* const* v, const int64_t* sizes, const float* f, const int32_t* flags) {
  Scalars k{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], flags[0], flags[1], uint32_t(flags[2])};
  std::vector<float> w;
  int64_t offset = 0;
  for (int64_t t = 0; t < count; ++t) {
    const int64_t n = sizes[t];
    w.resize(n);
    if (bf16) {
      auto* pt = static_cast<uint16_t*>(p[t]);
      plain(pt, static_cast<const uint16_t*>(g[t]), static_cast<uint16_t*>(m[t]), static_cast<uint16_t*>(v[t]),
            w.data(), n, k);
      store_rounded(pt, w.data(), offset, n, k);
    } else {
      plain(static_cast<float*>(p[t]), static_cast<const float*>(g[t]), static_cast<float*>(m[t]),
            static_cast<float*>(v[t]), w.data(), n, k);
      std::memcpy(p[t], w.data(), n * sizeof(float));
    }
    offset += n;
  }
}
"""
_KERNEL_FLAGS = ("-O3", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC", "-pthread")


def _target_flags() -> tuple[str, ...]:
    """The instruction set of torch's own CPU dispatch (`ATEN_CPU_CAPABILITY` lowers it) on x86, else the machine's."""
    capability = torch.backends.cpu.get_cpu_capability()
    if platform.machine().lower() in ("x86_64", "amd64") and capability != "AVX512":
        return ("-march=haswell",) if capability == "AVX2" else ()
    return ("-march=native",)


def _kernel_directory() -> str:
    """The folder the built kernel is kept in: torch's extension folder (`TORCH_EXTENSIONS_DIR`, else
    `~/.cache/torch_extensions`), in a sub-folder that only this user may write to, which is checked: a library that
    another user could replace would run as this one."""
    base = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "torch_extensions"
    )
    directory = os.path.join(base, "torchao_cpu_adam")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    info = os.stat(directory)
    if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o022):
        raise OSError(f"{directory} is not a folder that only this user can write to: remove it")
    return directory


def _cpu_identity() -> str:
    """What `-march=native` builds for: the CPU's model and flags where Linux names them, else the processor."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = [line for line in f if line.startswith(("model name", "flags"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor()


def _build_kernel(compiler: str, flags: tuple[str, ...], library: str) -> None:
    """Builds [`_KERNEL_SOURCE`] into `library` and writes its SHA-256 beside it, each moved into place whole."""
    with tempfile.TemporaryDirectory(dir=os.path.dirname(library)) as build:
        source, output, digest = (os.path.join(build, name) for name in ("kernel.cpp", "kernel.so", "sha256"))
        with open(source, "w", encoding="utf-8") as f:
            f.write(_KERNEL_SOURCE)
        subprocess.run(
            [*shlex.split(compiler), *flags, source, "-o", output], check=True, capture_output=True, timeout=600
        )
        with open(output, "rb") as f, open(digest, "w", encoding="utf-8") as g:
            g.write(hashlib.sha256(f.read()).hexdigest())
        os.replace(output, library)
        os.replace(digest, library + ".sha256")


def _verified(library: str) -> bool:
    """Whether `library` is whole: its bytes hash to the digest written when it was built."""
    try:
        with open(library, "rb") as f, open(library + ".sha256", encoding="utf-8") as g:
            return hashlib.sha256(f.read()).hexdigest() == g.read().strip()
    except OSError:
        return False


@functools.cache
def _native_kernel():
    """[`_KERNEL_SOURCE`] built once per machine and source with the C++ compiler torch uses (`$CXX`, else `c++`),
    as a `ctypes` library (`adam8bit_update`, `adam_plain_update`); `None`, logged once, where it cannot be built or
    loaded (the compiled updates then run). A cached library whose bytes do not match its digest is built again."""
    compiler, flags = torch.utils.cpp_extension.get_cxx_compiler(), (*_KERNEL_FLAGS, *_target_flags())
    tag = f"{_KERNEL_SOURCE}{flags}{compiler}{platform.machine()}{_cpu_identity()}"
    try:
        library = os.path.join(_kernel_directory(), hashlib.sha256(tag.encode()).hexdigest()[:16] + ".so")
        if not _verified(library):
            _build_kernel(compiler, flags, library)
        kernel = ctypes.CDLL(library)
        pointer, size = ctypes.c_void_p, ctypes.c_int64
        kernel.adam8bit_update.restype = kernel.adam_plain_update.restype = None
    except (OSError, AttributeError, ValueError, subprocess.SubprocessError) as error:
        detail = (getattr(error, "stderr", None) or b"").decode(errors="replace")[-500:]
        logger.warning(
            f"torchao_cpu_adam: the C++ update could not be built or loaded ({error} {detail}); the compiled torch "
            "update runs instead, several times slower"
        )
        return None
    kernel.adam8bit_update.argtypes = [ctypes.c_int32] + [pointer] * 10 + [size] * 2 + [pointer] * 2
    kernel.adam_plain_update.argtypes = [ctypes.c_int32, size] + [pointer] * 7
    return kernel


def _hashed_seed_key(seed: int) -> int:
    """`_random_16bit`'s hash of the seed, as the signed int32 that the kernel XORs with each element's index."""
    key = seed & _M32
    for multiplier in (0x7FEB352D, 0x46CA68B5):
        key = ((key ^ (key >> 16)) * multiplier) & _M32
    key ^= key >> 16
    return key - (1 << 32) if key >= 1 << 31 else key


def _kernel_floats(lr, step, hparams) -> torch.Tensor:
    """The kernel's float32 scalars, rounded as in the compiled update."""
    beta1, beta2, weight_decay, eps, _ = hparams
    bias_correction1 = 1 - beta1**step
    sqrt_bias_correction2 = (1 - beta2**step).sqrt()
    return torch.stack([lr, lr * weight_decay, torch.tensor(weight_decay), torch.tensor(1 - beta1),
                        torch.tensor(1 - beta2), bias_correction1, sqrt_bias_correction2, torch.tensor(eps)])  # fmt: skip


def _kernel_flags(is_adamw: bool, sr_seed) -> torch.Tensor:
    seed_key = 0 if sr_seed is None else _hashed_seed_key(int(sr_seed))
    return torch.tensor(
        [int(is_adamw), int(sr_seed is not None), seed_key, torch.get_num_threads()], dtype=torch.int32
    )


def _kernel_scalars(lr, step, hparams, sr_seed) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's float32 scalars and int32 flags."""
    return _kernel_floats(lr, step, hparams), _kernel_flags(hparams[4], sr_seed)


def _call_8bit(p, grad, exp_avg, exp_avg_sq, scalars, flags) -> None:
    (codes1, scale1, qmap1, lut1), (codes2, scale2, qmap2, lut2) = exp_avg, exp_avg_sq
    tensors = (p, grad, codes1, scale1, qmap1, lut1, codes2, scale2, qmap2, lut2)
    pointers = [t.data_ptr() for t in tensors]
    _native_kernel().adam8bit_update(
        int(p.dtype is torch.bfloat16), *pointers, *codes1.shape, scalars.data_ptr(), flags.data_ptr()
    )


def native_adam_8bit_cpu(p, grad, exp_avg, exp_avg_sq, lr, step, hparams, sr_seed):
    """[`single_param_adam_8bit_cpu`] (same arguments) in the C++ kernel, which must have been built, with the same fp32
    arithmetic in the same order, so weights, codes and scales are the compiled update's bit for bit."""
    _call_8bit(p, grad, exp_avg, exp_avg_sq, *_kernel_scalars(lr, step, hparams, sr_seed))


def native_adam_plain_cpu(params, grads, exp_avgs, exp_avg_sqs, lr, step, hparams, sr_seed):
    """
    torchao's compiled `single_param_adam` for contiguous CPU tensors with unquantized moments (their weight's dtype,
    all bf16 or all fp32), every tensor in one call of the C++ kernel, which must have been built. Rounding to nearest
    gives the compiled update's weights and moments bit for bit; stochastic rounding (`sr_seed`, as in
    [`native_adam_8bit_cpu`]) hashes the element's index counted across all the tensors.

    Args:
        params, grads, exp_avgs, exp_avg_sqs (`list[torch.Tensor]`): Updated in place (not `grads`).
        lr, step, hparams, sr_seed: As in [`single_param_adam_8bit_cpu`]; one `step` for all the tensors.
    """
    scalars, flags = _kernel_scalars(lr, step, hparams, sr_seed)
    count = len(params)
    arrays = [(ctypes.c_void_p * count)(*(t.data_ptr() for t in ts)) for ts in (params, grads, exp_avgs, exp_avg_sqs)]
    sizes = (ctypes.c_int64 * count)(*(t.numel() for t in params))
    _native_kernel().adam_plain_update(
        int(params[0].dtype is torch.bfloat16), count, *arrays, sizes, scalars.data_ptr(), flags.data_ptr()
    )


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
    return _native_kernel() is not None


def _moment(state: OptimState8bit, lut: torch.Tensor) -> tuple:
    return (state.codes.view(-1, state.block_size), state.scale, state.qmap, lut)


def _cpu_lut(p: torch.Tensor, state: dict, amsgrad: bool) -> tuple | None:
    """The tables of both moments when this parameter takes the CPU update, else `None`."""
    exp_avg, exp_avg_sq = state.get("exp_avg"), state.get("exp_avg_sq")
    if amsgrad or p.device.type != "cpu" or p.dtype not in (torch.bfloat16, torch.float32):
        return None
    if not (isinstance(exp_avg, OptimState8bit) and isinstance(exp_avg_sq, OptimState8bit)):
        return None
    if not (p.is_contiguous() and p.grad.is_contiguous() and exp_avg.codes.is_contiguous()):
        return None
    luts = _standard_luts()
    for moment, signed in ((exp_avg, True), (exp_avg_sq, False)):
        if moment.signed != signed or not torch.equal(moment.qmap, luts[signed][0]):
            return None
    return luts[True][1], luts[False][1]


class AdamW8bit(_TorchaoAdamW8bit):
    """
    torchao's `AdamW8bit` whose CPU parameters with 8-bit moments take the C++ kernel ([`native_adam_8bit_cpu`], else
    [`single_param_adam_8bit_cpu`] compiled): the same state, state dict and codes, in about 2 times torch's fused
    fp32 AdamW's step time on the CPU for large tensors (torchao's own: 13 to 65). Small CPU tensors with unquantized
    bf16 or fp32 moments (under 4096 values) take the kernel's batched update ([`native_adam_plain_cpu`], one call per
    param group), torchao's compiled update where the kernel cannot be built. Every other parameter (GPU, fp16,
    non-contiguous, `amsgrad`) takes torchao's own update (`amsgrad` with 8-bit moments fails there on the CPU with
    torchao 0.18, as with torchao's own class). The first step logs (`logger.info`) how
    many parameters take each update.
    """

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        paths, self._floats = {}, {}
        with torch._dynamo.utils.disable_cache_limit():
            for group in self.param_groups:
                small = []  # parameters left to the batched update of unquantized moments
                for p in group["params"]:
                    if p.grad is not None:
                        path = self._param_step(p, group, small)
                        paths[path] = paths.get(path, 0) + 1
                self._small_step(small, group)
        if paths and not getattr(self, "_paths_logged", False):
            self._paths_logged = True  # the class has torchao's name: say once which update each parameter takes
            counts = ", ".join(f"{n} with {path}" for path, n in paths.items())
            logger.info(f"torchao_cpu_adam.AdamW8bit updates its parameters (tensors): {counts}")
        return loss

    def _small_step(self, params: list, group: dict) -> None:
        """[`native_adam_plain_cpu`] on `params`, one call per dtype and step count (bias corrections differ)."""
        batches = {}
        for p in params:
            batches.setdefault((p.dtype, float(self.state[p]["step"])), []).append(p)
        hparams = (group["betas"][0], group["betas"][1], group["weight_decay"], group["eps"], self.is_adamw)
        for (dtype, _), batch in batches.items():
            states = [self.state[p] for p in batch]
            stochastic_round = self.bf16_stochastic_round and dtype is torch.bfloat16
            seed = torch.randint(0, 1 << 32, (), dtype=torch.int64) if stochastic_round else None
            native_adam_plain_cpu(
                [p.detach() for p in batch], [p.grad for p in batch], [s["exp_avg"] for s in states],
                [s["exp_avg_sq"] for s in states], group["lr"], states[0]["step"], hparams, seed,
            )  # fmt: skip

    def _param_step(self, p: torch.Tensor, group: dict, small: list) -> str:
        """torchao's per-parameter body of `_AdamBase.step`, with the CPU branches; a parameter for the batched update
        of unquantized moments is appended to `small` instead. Returns the update it takes."""
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
            small.append(p)
            return "the small-tensor CPU update (C++ kernel)"
        stochastic_round = self.bf16_stochastic_round and p.dtype is torch.bfloat16
        luts = _cpu_lut(p, state, group["amsgrad"])
        if luts is None:
            weight, grad, moments, update = p.detach(), p.grad, (state["exp_avg"], state["exp_avg_sq"]), None
            if _flat_plain_state(p, state):  # small CPU tensors: torchao's own update, one compile for all sizes
                weight, grad, moments, update = weight.view(-1), grad.view(-1), [m.view(-1) for m in moments], _plain
                for tensor in (weight, grad, *moments):
                    torch._dynamo.maybe_mark_dynamic(tensor, 0)
            (update or torch.compile(single_param_adam, fullgraph=True, dynamic=False))(
                weight, grad, state["step"], *moments, state.get("max_exp_avg_sq", None), group["lr"],
                group["betas"][0], group["betas"][1], group["weight_decay"], group["eps"], self.is_adamw,
                stochastic_round,
            )  # fmt: skip
            return "torchao's own update"
        block_size = state["exp_avg"].block_size
        exp_avg, exp_avg_sq = _moment(state["exp_avg"], luts[0]), _moment(state["exp_avg_sq"], luts[1])
        weight, grad = p.detach().view(-1, block_size), p.grad.view(-1, block_size)
        for tensor in (weight, grad, exp_avg[0], exp_avg[1], exp_avg_sq[0], exp_avg_sq[1]):
            torch._dynamo.maybe_mark_dynamic(tensor, 0)
        seed = torch.randint(0, 1 << 32, (), dtype=torch.int64) if stochastic_round else None
        hparams = (group["betas"][0], group["betas"][1], group["weight_decay"], group["eps"], self.is_adamw)
        if p.grad.dtype == p.dtype and _native_kernel() is not None:
            key = (id(group), float(state["step"]))  # the scalars once per group and step count within this step
            if key not in self._floats:
                self._floats[key] = _kernel_floats(group["lr"], state["step"], hparams)
            _call_8bit(weight, grad, exp_avg, exp_avg_sq, self._floats[key], _kernel_flags(self.is_adamw, seed))
            return "the CPU update (C++ kernel)"
        _compiled_update(weight, grad, exp_avg, exp_avg_sq, group["lr"], state["step"], hparams, seed)
        return "the CPU update (compiled torch)"
