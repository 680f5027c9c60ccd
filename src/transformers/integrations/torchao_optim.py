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
torchao's 8-bit and 4-bit AdamW for pure-bf16 training (`optim="adamw_torch_8bit"` / `"adamw_torch_4bit"`).

With bf16 weights, torchao's `AdamW8bit(bf16_stochastic_round=True)` holds about 6 bytes of training state per
parameter: 2 (bf16 weight) + 2 (bf16 gradient) + 2 x ~1.02 (two Adam moments, one byte per value plus an fp32 scale
per block of 256 values). The update is computed in fp32 and rounded to bf16 *stochastically*: up or down with
probabilities proportional to the distance, so an update smaller than 2^-8 of a weight is kept on average instead of
being rounded away.

This module adds, on top of upstream's torchao handler in `trainer_optimizer.py` (torchao 0.18):

- with `bf16_full_train=True`, stochastic rounding turned on by itself unless `optim_args` says
  `bf16_stochastic_round=false` (then [`check_pure_half_precision_training`] warns). Without `bf16_full_train`, the
  handler builds what upstream's builds: torchao's defaults, round-to-nearest unless `optim_args` turns stochastic
  rounding on; on bf16 weights [`check_pure_half_precision_training`] then says that updates round away and how to
  turn it on;
- `optim_args` checked: an unknown key is ignored, as upstream's handler ignores it, with a warning that names the
  valid ones; a value that is not a positive integer block size or a boolean raises a `ValueError` naming the valid
  ones;
- with `bf16_full_train=True`, one stochastic-rounding random stream on every rank: torchao draws the rounding noise
  from the global torch generator, which differs between data-parallel ranks as soon as anything rank-dependent draws
  from it, and then replicas drift apart. [`synchronize_stochastic_rounding`] seeds the noise of each step from
  `(args.seed, step)` inside `torch.random.fork_rng`, with torch's public optimizer hooks on the `Trainer`'s optimizer
  (not a subclass), so every rank rounds the same way, the global generator (dropout, shuffling) is left untouched,
  and a run resumed from a checkpoint rounds exactly as the uninterrupted run did (the step counter is saved in the
  optimizer's `param_groups`). It is also public API for a run that turns stochastic rounding on by itself.

- with `bf16_full_train=True` and `optim="adamw_torch_8bit"`, [`~integrations.torchao_cpu_adam.AdamW8bit`]:
  torchao's `AdamW8bit` (same state, state dict and codes) whose CPU parameters skip torchao's binary-search quantizer,
  which inductor's CPU backend turns into scalar gathers (40 to 65 times torch's fused AdamW), for one table lookup.

torchao compiles its per-parameter update with `torch.compile(dynamic=False)` at the first step, once per tensor shape:
on a CPU most of it is inductor generating the fused kernel, about a minute for a small model. The CPU update compiles
once per dtype and weight decay, for every shape. Later processes reuse inductor's disk cache
(`TORCHINDUCTOR_CACHE_DIR`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils import logging
from .optimi import parse_optim_bool


if TYPE_CHECKING:
    import torch

logger = logging.get_logger(__name__)

#: The install hint of every "torchao is missing" error.
TORCHAO_INSTALL_HINT = "pip install torchao"

#: `optim_args` keys of upstream's torchao handler.
TORCHAO_OPTIM_ARGS = ("bf16_stochastic_round", "block_size")

#: Mixes the step into the seed (the 64-bit golden-ratio constant), so consecutive steps get unrelated streams.
_SEED_MIX = 0x9E3779B97F4A7C15
_SEED_MASK = (1 << 63) - 1


def step_seed(seed: int, step: int) -> int:
    """
    The seed of the stochastic-rounding noise of optimizer step `step` (counted from 0) in a run seeded with `seed`.

    Args:
        seed (`int`): The run's seed (`TrainingArguments.seed`), the same on every rank.
        step (`int`): The number of optimizer steps taken before this one.

    Returns:
        `int`: A non-negative 63-bit seed.
    """
    return ((int(seed) & _SEED_MASK) * _SEED_MIX + int(step) + 1) & _SEED_MASK


def _seed_devices(seed: int, devices: list[torch.device]) -> None:
    import torch

    torch.default_generator.manual_seed(seed)
    for device in devices:
        module = getattr(torch, device.type)
        with module.device(device):
            module.manual_seed(seed)


#: The attribute under which `synchronize_stochastic_rounding` keeps its hook handles (and knows it ran).
_HOOKS_ATTR = "_transformers_sr_hooks"


def _is_torchao_low_bit_optimizer(optimizer) -> bool:
    return any((cls.__module__ or "").split(".")[0] == "torchao" for cls in type(optimizer).__mro__) and hasattr(
        optimizer, "bf16_stochastic_round"
    )


def _rounding_devices(optimizer) -> list[torch.device]:
    devices = {p.device for group in optimizer.param_groups for p in group["params"] if p.grad is not None}
    return sorted((d for d in devices if d.type != "cpu"), key=str)


def synchronize_stochastic_rounding(optimizer, seed: int = 0) -> bool:
    """
    Makes the stochastic rounding of a torchao optimizer draw from a stream seeded by `(seed, step)` instead of the
    global generator: the same on every data-parallel rank and after resuming from a checkpoint.

    torchao draws its rounding noise from the global torch generator and takes no generator argument, so each
    `step()` runs between two of torch's public optimizer hooks (no subclass): the step pre-hook enters
    `torch.random.fork_rng` and seeds the generators of the parameters' devices with [`step_seed`]`(sr_seed,
    sr_step)`, the post-hook leaves it (the global stream, used by dropout and shuffling, is as before) and counts the
    step. `sr_seed` and `sr_step` live in every param group, so they travel with `state_dict()`. A step that raises
    leaves that context open until the next step's pre-hook leaves it. A `closure` passed to `step()` runs inside it
    (the `Trainer` passes none).

    Args:
        optimizer (`torch.optim.Optimizer`): `torchao.optim.AdamW8bit`, `AdamW4bit`, `AdamWFp8` or `_AdamW`, or
            accelerate's `AcceleratedOptimizer` around one. Other optimizers are left alone.
        seed (`int`, *optional*, defaults to 0): The run's seed (`TrainingArguments.seed`), the same on every rank.

    Returns:
        `bool`: Whether the hooks were registered (`False` for another optimizer, or when they already are).

    Example:

    ```python
    >>> from torchao.optim import AdamW8bit
    >>> optimizer = AdamW8bit(model.parameters(), lr=1e-4, bf16_stochastic_round=True)
    >>> synchronize_stochastic_rounding(optimizer, seed=42)
    ```
    """
    inner = getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer
    if not _is_torchao_low_bit_optimizer(inner) or hasattr(inner, _HOOKS_ATTR):
        return False
    before_step, after_step = _rounding_hooks(seed)
    for group in inner.param_groups:
        group.setdefault("sr_seed", int(seed))
        group.setdefault("sr_step", 0)
    setattr(inner, _HOOKS_ATTR, [inner.register_step_pre_hook(before_step), inner.register_step_post_hook(after_step)])
    return True


def _rounding_hooks(seed: int) -> tuple:
    """
    The step pre- and post-hooks of [`synchronize_stochastic_rounding`]: the pre-hook enters a `fork_rng` context
    seeded from `(sr_seed, sr_step)`, the post-hook leaves it and counts the step.
    """
    import torch

    open_contexts: list = []  # the `fork_rng` context of the step in flight

    def leave_rng_context():
        while open_contexts:
            open_contexts.pop().__exit__(None, None, None)

    def before_step(opt, step_args, step_kwargs):
        leave_rng_context()
        for group in opt.param_groups:  # also groups added after this call
            group.setdefault("sr_seed", int(seed))
            group.setdefault("sr_step", 0)
        if not opt.bf16_stochastic_round:
            return
        first = opt.param_groups[0]
        devices = _rounding_devices(opt)
        device_type = devices[0].type if devices else "cuda"
        indices = [d.index if d.index is not None else 0 for d in devices if d.type == device_type]
        context = torch.random.fork_rng(devices=indices, device_type=device_type)
        context.__enter__()
        open_contexts.append(context)
        _seed_devices(step_seed(first["sr_seed"], first["sr_step"]), [d for d in devices if d.type == device_type])

    def after_step(opt, step_args, step_kwargs):
        if not open_contexts:
            return
        leave_rng_context()
        for group in opt.param_groups:
            group["sr_step"] = group.get("sr_step", 0) + 1

    return before_step, after_step


#: The `optim` names of upstream's torchao handler.
TORCHAO_OPTIM_NAMES = ("adamw_torch_4bit", "adamw_torch_8bit")


def synchronize_trainer_stochastic_rounding(optimizer, args) -> bool:
    """
    The `Trainer`'s call after it creates the optimizer: with `bf16_full_train=True` and `optim="adamw_torch_8bit"` /
    `"adamw_torch_4bit"`, [`synchronize_stochastic_rounding`] with `args.seed`. Any other run keeps upstream's
    optimizer as it is (no hooks, torchao's own random stream), and so does an optimizer given to the `Trainer`.

    Returns:
        `bool`: Whether the hooks were registered.
    """
    if getattr(args.optim, "value", args.optim) not in TORCHAO_OPTIM_NAMES:
        return False
    if not getattr(args, "bf16_full_train", False):
        return False
    return synchronize_stochastic_rounding(optimizer, seed=int(getattr(args, "seed", 0) or 0))


def _parse_block_size(value: str) -> int:
    try:
        block_size = int(str(value).strip())
    except ValueError:
        block_size = 0
    if block_size <= 0:
        raise ValueError(
            f"`optim_args` block_size={value!r} is not a positive integer: use the number of values that share one "
            "quantization scale, e.g. 256 (torchao's default for 8-bit states) or 128 (4-bit)."
        )
    return block_size


def prepare_torchao_optimizer(ctx, optimizer_cls: type) -> type:
    """
    Called by upstream's torchao handler (`optim="adamw_torch_8bit"` / `"adamw_torch_4bit"`) before it reads
    `ctx.optim_args`.

    - An unknown `optim_args` key is ignored, as upstream's handler ignores it, with a warning naming the valid keys;
      an invalid value raises a `ValueError` naming the valid ones.
    - With `bf16_full_train=True`, turns `bf16_stochastic_round` on unless `optim_args` says otherwise. Without it,
      the value is upstream's: `optim_args`' or torchao's default (off). Either way, stochastic rounding that is off
      on bf16 weights is reported by `check_pure_half_precision_training` after the optimizer is created.

    The `Trainer` then calls [`synchronize_trainer_stochastic_rounding`] on the optimizer it created.

    Args:
        ctx (`OptimizerContext`): Upstream's handler context; `ctx.optim_args` is updated in place.
        optimizer_cls (`type`): The torchao class upstream's handler picked.

    Returns:
        `type`: The optimizer class to build: torchao's, or with `bf16_full_train=True` and `"adamw_torch_8bit"` its
        subclass [`~integrations.torchao_cpu_adam.AdamW8bit`] (CPU parameters take a vectorised update).
    """
    optim_name = getattr(ctx.args.optim, "value", ctx.args.optim)
    unknown = sorted(set(ctx.optim_args) - set(TORCHAO_OPTIM_ARGS))
    if unknown:
        logger.warning(
            f"`optim_args` for optim={optim_name!r}: {', '.join(unknown)} is not an option of torchao's low-bit "
            f"AdamW and is ignored. Valid keys: {', '.join(TORCHAO_OPTIM_ARGS)}."
        )
    if "block_size" in ctx.optim_args:
        ctx.optim_args["block_size"] = str(_parse_block_size(ctx.optim_args["block_size"]))

    if "bf16_stochastic_round" in ctx.optim_args:
        stochastic_round = parse_optim_bool("bf16_stochastic_round", ctx.optim_args["bf16_stochastic_round"])
        ctx.optim_args["bf16_stochastic_round"] = str(stochastic_round)
    elif getattr(ctx.args, "bf16_full_train", False):
        logger.info(
            "bf16_full_train: torchao's stochastic rounding is on (`bf16_stochastic_round=True`), so updates smaller "
            "than a bf16 step are kept on average instead of rounded away."
        )
        ctx.optim_args["bf16_stochastic_round"] = "True"
    return _cpu_update_class(ctx.args, optimizer_cls)


def _cpu_update_class(args, optimizer_cls: type) -> type:
    """With `bf16_full_train=True`, torchao's `AdamW8bit` becomes [`~integrations.torchao_cpu_adam.AdamW8bit`]:
    the same optimizer whose CPU parameters take a vectorised update (same state and codes)."""
    if not getattr(args, "bf16_full_train", False) or optimizer_cls.__name__ != "AdamW8bit":
        return optimizer_cls
    from .torchao_cpu_adam import AdamW8bit

    return AdamW8bit if issubclass(AdamW8bit, optimizer_cls) else optimizer_cls
