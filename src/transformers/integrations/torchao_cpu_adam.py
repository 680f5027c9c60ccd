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
values exactly on a rounding midpoint included) with one gather instead of ten. The update is one compiled function
per dtype, dynamic in the number of blocks (one compile for every tensor shape).

Stochastic rounding draws its 16 random bits per value from a counter-based hash of the element index and a seed
taken from the global torch generator once per tensor and step, so it needs no random kernel and is reproducible
under `torch.manual_seed` (and under `synchronize_stochastic_rounding`'s per-step seeding); its draws differ from
torchao's `torch.randint`: each value's 16 bits are uniform as torchao's, and values are a hash's draws, not
independent ones (a review measured correlations between neighbouring decisions of about 0.002, no bias).

Upstream, this would sit in torchao as `torchao/optim/quant_utils.py` (`build_quantize_lut`,
`quantize_8bit_with_lut`) and a CPU branch of `_AdamBase.step` in `torchao/optim/adam.py`.
"""

from __future__ import annotations

import functools

import torch
from torchao.optim import AdamW8bit as _TorchaoAdamW8bit
from torchao.optim.adam import single_param_adam
from torchao.optim.quant_utils import create_dynamic_map, quantize_8bit_with_qmap
from torchao.optim.subclass_8bit import OptimState8bit


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


_compiled_update = torch.compile(single_param_adam_8bit_cpu, fullgraph=True, dynamic=False)


_plain = torch.compile(single_param_adam, fullgraph=True, dynamic=False)


def _flat_plain_state(p: torch.Tensor, state: dict) -> bool:
    """Whether torchao keeps this CPU parameter's moments unquantized (under 4096 values), all contiguous."""
    moments = (state["exp_avg"], state["exp_avg_sq"])
    plain = all(type(m) is torch.Tensor and m.is_contiguous() for m in moments) and "max_exp_avg_sq" not in state
    return plain and p.device.type == "cpu" and p.is_contiguous() and p.grad.is_contiguous()


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
    torchao's `AdamW8bit` whose CPU parameters with 8-bit moments take [`single_param_adam_8bit_cpu`]: the same
    state, state dict and codes, in about 0.4 times torchao's step time on the CPU (still 10 to 16 times torch's
    fused fp32 AdamW: inductor emits the remaining table lookups as scalar loads).
    Every other parameter (GPU, small tensors with unquantized moments, fp16, non-contiguous, `amsgrad`) takes torchao's
    own update (`amsgrad` with 8-bit moments fails there on the CPU with torchao 0.18, as with torchao's own class).
    """

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        with torch._dynamo.utils.disable_cache_limit():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._param_step(p, group)
        return loss

    def _param_step(self, p: torch.Tensor, group: dict) -> None:
        """torchao's per-parameter body of `_AdamBase.step`, with the CPU branch."""
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
            return
        block_size = state["exp_avg"].block_size
        exp_avg, exp_avg_sq = _moment(state["exp_avg"], luts[0]), _moment(state["exp_avg_sq"], luts[1])
        weight, grad = p.detach().view(-1, block_size), p.grad.view(-1, block_size)
        for tensor in (weight, grad, exp_avg[0], exp_avg[1], exp_avg_sq[0], exp_avg_sq[1]):
            torch._dynamo.maybe_mark_dynamic(tensor, 0)
        seed = torch.randint(0, 1 << 32, (), dtype=torch.int64) if stochastic_round else None
        hparams = (group["betas"][0], group["betas"][1], group["weight_decay"], group["eps"], self.is_adamw)
        _compiled_update(weight, grad, exp_avg, exp_avg_sq, group["lr"], state["step"], hparams, seed)
