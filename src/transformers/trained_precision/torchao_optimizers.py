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

- stochastic rounding turned on by itself when the model has bf16 trainable parameters (or `bf16_full_train` is set),
  unless `optim_args` says `bf16_stochastic_round=false` (then [`check_pure_half_precision_training`] warns);
- `optim_args` validated: unknown keys and values that are not a positive integer block size or a boolean raise a
  `ValueError` naming the valid ones;
- one stochastic-rounding random stream on every rank: torchao draws the rounding noise from the global torch
  generator, which differs between data-parallel ranks as soon as anything rank-dependent draws from it, and then
  replicas drift apart. The optimizer class returned here seeds the noise of each step from `(args.seed, step)` inside
  `torch.random.fork_rng`, so every rank rounds the same way, the global generator (dropout, shuffling) is left
  untouched, and a run resumed from a checkpoint rounds exactly as the uninterrupted run did (the step counter is
  saved in the optimizer's `param_groups`).

torchao compiles its per-parameter update with `torch.compile` at the first step (about 30 to 100 seconds on a CPU, once
per tensor shape; later processes reuse inductor's disk cache).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..utils import logging
from .optimizers import parse_optim_bool


if TYPE_CHECKING:
    import torch

logger = logging.get_logger(__name__)

#: The install hint of every "torchao is missing" error.
TORCHAO_INSTALL_HINT = 'pip install "transformers[torchao]"'

#: `optim_args` keys of upstream's torchao handler.
TORCHAO_OPTIM_ARGS = ("bf16_stochastic_round", "block_size")

#: Mixes the step into the seed (the 64-bit golden-ratio constant), so consecutive steps get unrelated streams.
_SEED_MIX = 0x9E3779B97F4A7C15
_SEED_MASK = (1 << 63) - 1


def _has_bf16_trainable_params(model) -> bool:
    import torch

    if model is None:
        return False
    return any(p.requires_grad and p.dtype == torch.bfloat16 for p in model.parameters())


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


class _SynchronizedStochasticRounding:
    """
    Mixed into torchao's `AdamW8bit` / `AdamW4bit` by [`synchronized_stochastic_rounding`].

    With `bf16_stochastic_round=True`, each `step()` runs under `torch.random.fork_rng` with the generators of the
    parameters' devices seeded from [`step_seed`]`(sr_seed, sr_step)`. `sr_seed` and `sr_step` live in every param
    group, so they travel with `state_dict()`.
    """

    #: `check_pure_half_precision_training`: decoupled weight decay is computed in fp32, then rounded stochastically.
    _compensate_weight_decay = True
    #: The fix named by `check_pure_half_precision_training` when stochastic rounding is off.
    _rounding_hint = (
        "Keep torchao's stochastic rounding on (drop `bf16_stochastic_round=false` from `optim_args`; it is the "
        "default for bf16 weights), or use `optim='adamw_optimi'` (Kahan summation, +2 bytes/parameter)."
    )

    def __init__(self, params, *args, sr_seed: int = 0, **kwargs):
        self._sr_seed = int(sr_seed)
        super().__init__(params, *args, **kwargs)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        param_group.setdefault("sr_seed", self._sr_seed)
        param_group.setdefault("sr_step", 0)
        super().add_param_group(param_group)

    def _rounding_devices(self) -> list[torch.device]:
        devices = {p.device for group in self.param_groups for p in group["params"] if p.grad is not None}
        return sorted((d for d in devices if d.type != "cpu"), key=str)

    def step(self, closure: Callable | None = None):
        if not self.bf16_stochastic_round:
            return super().step(closure)
        import torch

        loss = None
        if closure is not None:  # outside `fork_rng`: the closure's dropout draws from the global stream
            with torch.enable_grad():
                loss = closure()
        first = self.param_groups[0]
        seed = step_seed(first.get("sr_seed", self._sr_seed), first.get("sr_step", 0))
        devices = self._rounding_devices()
        device_type = devices[0].type if devices else "cuda"
        indices = [d.index if d.index is not None else 0 for d in devices if d.type == device_type]
        with torch.random.fork_rng(devices=indices, device_type=device_type):
            _seed_devices(seed, [d for d in devices if d.type == device_type])
            super().step()
        for group in self.param_groups:
            group["sr_step"] = group.get("sr_step", 0) + 1
        return loss


_CLASS_CACHE: dict[type, type] = {}


def synchronized_stochastic_rounding(optimizer_cls: type) -> type:
    """
    A subclass of a torchao optimizer class whose stochastic rounding draws from a stream seeded by `(sr_seed, step)`
    instead of the global generator: the same on every data-parallel rank and after resuming from a checkpoint.

    Args:
        optimizer_cls (`type`): `torchao.optim.AdamW8bit`, `AdamW4bit`, `AdamWFp8` or `_AdamW`.

    Returns:
        `type`: The subclass (so `isinstance(optimizer, optimizer_cls)` holds). It takes one more keyword argument,
        `sr_seed` (`int`, defaults to 0).

    Example:

    ```python
    >>> from torchao.optim import AdamW8bit
    >>> AdamW8bitSR = synchronized_stochastic_rounding(AdamW8bit)
    >>> optimizer = AdamW8bitSR(model.parameters(), lr=1e-4, bf16_stochastic_round=True, sr_seed=42)
    ```
    """
    if issubclass(optimizer_cls, _SynchronizedStochasticRounding):
        return optimizer_cls
    if optimizer_cls not in _CLASS_CACHE:
        attrs = {"__module__": __name__, "__doc__": optimizer_cls.__doc__}
        _CLASS_CACHE[optimizer_cls] = type(
            optimizer_cls.__name__, (_SynchronizedStochasticRounding, optimizer_cls), attrs
        )
    return _CLASS_CACHE[optimizer_cls]


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

    - Rejects unknown `optim_args` keys and invalid values, naming the valid ones.
    - Turns `bf16_stochastic_round` on when the model has bf16 trainable parameters or `bf16_full_train` is set and
      `optim_args` does not say otherwise. Turned off explicitly, it is left off: `check_pure_half_precision_training`
      warns after the optimizer is created.
    - Adds `sr_seed=args.seed` to `ctx.optimizer_kwargs` and returns [`synchronized_stochastic_rounding`]`(cls)`.

    Args:
        ctx (`OptimizerContext`): Upstream's handler context; `ctx.optim_args` and `ctx.optimizer_kwargs` are updated
            in place.
        optimizer_cls (`type`): The torchao class upstream's handler picked.

    Returns:
        `type`: The optimizer class to build.
    """
    unknown = sorted(set(ctx.optim_args) - set(TORCHAO_OPTIM_ARGS))
    if unknown:
        optim_name = getattr(ctx.args.optim, "value", ctx.args.optim)
        raise ValueError(
            f"`optim_args` for optim={optim_name!r} got unknown key(s) {', '.join(unknown)}. "
            f"Valid keys: {', '.join(TORCHAO_OPTIM_ARGS)}."
        )
    if "block_size" in ctx.optim_args:
        ctx.optim_args["block_size"] = str(_parse_block_size(ctx.optim_args["block_size"]))

    bf16_weights = _has_bf16_trainable_params(ctx.model) or bool(getattr(ctx.args, "bf16_full_train", False))
    if "bf16_stochastic_round" in ctx.optim_args:
        stochastic_round = parse_optim_bool("bf16_stochastic_round", ctx.optim_args["bf16_stochastic_round"])
    else:
        stochastic_round = bf16_weights
        if bf16_weights:
            logger.info(
                "bf16 trainable parameters: torchao's stochastic rounding is on (`bf16_stochastic_round=True`), so "
                "updates smaller than a bf16 step are kept on average instead of rounded away."
            )
    ctx.optim_args["bf16_stochastic_round"] = str(stochastic_round)
    ctx.optimizer_kwargs["sr_seed"] = int(getattr(ctx.args, "seed", 0) or 0)
    return synchronized_stochastic_rounding(optimizer_cls)
