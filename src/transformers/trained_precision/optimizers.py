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
torch-optimi optimizers for the `Trainer` (`optim="adamw_optimi"`, `"lion_optimi"`, ...).

optimi's optimizers train bf16/fp16 weights with Kahan summation: the low bits that a half-precision weight cannot
hold are kept in a compensation buffer of the weight's dtype (+2 bytes per parameter in bf16) and added back at the
next step, so updates smaller than 2^-8 of a weight are not rounded away.

This module adds, on top of optimi 0.3.3:

- one handler that maps `TrainingArguments` and `optim_args` onto each optimi optimizer, parsing booleans as booleans
  and rejecting unknown keys with the list of valid ones;
- Kahan summation passed explicitly when the model has half-precision trainable parameters (optimi's `Adan` defaults
  it off);
- decoupled weight decay applied *inside* the compensated update for half-precision parameters. optimi multiplies the
  bf16 weight by `1 - lr * weight_decay`, which rounds back to the weight whenever `lr * weight_decay < 2^-9`, so
  typical fine-tuning decay is silently lost;
- `load_state_dict` that re-resolves the Triton/foreach/for-loop implementation for this machine, so a checkpoint
  written with one implementation resumes where it is unavailable;
- the for-loop implementation on FSDP2-sharded (DTensor) parameters, where foreach and Triton do not run (see
  `trained_precision.distributed`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..utils import is_torch_optimi_available, logging, strtobool


if TYPE_CHECKING:
    import torch

logger = logging.get_logger(__name__)

#: The install hint of every "optimi is missing" error.
OPTIMI_INSTALL_HINT = 'pip install "transformers[optimi]"'

#: `optim` name -> optimi class name. `stable_adamw` stays upstream's handler (it predates these).
OPTIMI_OPTIMIZERS: dict[str, str] = {
    "adamw_optimi": "AdamW",
    "adam_optimi": "Adam",
    "lion_optimi": "Lion",
    "sgd_optimi": "SGD",
    "radam_optimi": "RAdam",
    "ranger_optimi": "Ranger",
    "adan_optimi": "Adan",
}

# `optim_args` keys each optimizer accepts, with their parsers. `kahan_sum`, `foreach`, `triton` are common to all.
_COMMON_ARGS = ("kahan_sum", "foreach", "triton", "decouple_lr", "max_lr", "compensate_weight_decay")
_EXTRA_ARGS: dict[str, tuple[str, ...]] = {
    "AdamW": (),
    "Adam": ("decouple_wd",),
    "Lion": (),
    "SGD": ("momentum", "dampening", "decouple_wd", "torch_init"),
    "RAdam": ("decouple_wd",),
    "Ranger": ("decouple_wd", "k", "alpha"),
    "Adan": ("beta1", "beta2", "beta3", "adam_wd"),
}
_BOOL_ARGS = {
    "kahan_sum",
    "foreach",
    "triton",
    "decouple_lr",
    "decouple_wd",
    "dampening",
    "torch_init",
    "adam_wd",
    "compensate_weight_decay",
}
_INT_ARGS = {"k"}
# everything else is a float: max_lr, momentum, alpha, beta1, beta2, beta3

#: Optimizers whose `betas` map cleanly onto `adam_beta1`/`adam_beta2` (Lion as upstream's bitsandbytes Lion does).
_ADAM_BETAS = {"AdamW", "Adam", "RAdam", "Ranger", "Lion"}
_USES_EPS = {"AdamW", "Adam", "RAdam", "Ranger", "Adan"}


def parse_optim_bool(key: str, value: str | bool) -> bool:
    """
    Parses one boolean `optim_args` value.

    Upstream's `stable_adamw` handler used `bool(value)`, which turns the string `"False"` into `True`.

    Args:
        key (`str`): The `optim_args` key, for the error message.
        value (`str` or `bool`): `"true"`/`"false"`, `"1"`/`"0"`, `"yes"`/`"no"`, `"on"`/`"off"` (any case).

    Returns:
        `bool`: The parsed value.
    """
    if isinstance(value, bool):
        return value
    try:
        return bool(strtobool(str(value).strip()))
    except ValueError:
        raise ValueError(
            f"`optim_args` {key}={value!r} is not a boolean: use one of true/false, 1/0, yes/no, on/off."
        ) from None


def _parse_value(key: str, value: str) -> Any:
    if key in _BOOL_ARGS:
        return parse_optim_bool(key, value)
    try:
        return int(value) if key in _INT_ARGS else float(value)
    except ValueError:
        kind = "an integer" if key in _INT_ARGS else "a number"
        raise ValueError(f"`optim_args` {key}={value!r} is not {kind}.") from None


def _require_optimi():
    if not is_torch_optimi_available():
        raise ImportError(
            "The optimi optimizers (`optim='adamw_optimi'`, ..., and `bf16_full_train=True`) need torch-optimi. "
            f"Install it with `{OPTIMI_INSTALL_HINT}`."
        )
    import optimi

    return optimi


def _is_half(param: torch.Tensor) -> bool:
    import torch

    return param.dtype in (torch.bfloat16, torch.float16)


def has_half_precision_trainable_params(model) -> bool:
    """Whether any trainable parameter of `model` is stored in bf16 or fp16."""
    if model is None:
        return False
    return any(p.requires_grad and _is_half(p) for p in model.parameters())


# ---------------------------------------------------------------------------------------------------------------------
# The optimizer classes
# ---------------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------------
# What this module relies on in torch-optimi: one adapter per internal, checked by `check_optimi_contract`
# ---------------------------------------------------------------------------------------------------------------------

#: The torch-optimi releases these adapters are tested with; the `optimi` extra pins the same range.
OPTIMI_TESTED_VERSIONS = ">=0.3.3,<0.4"

#: The optimizer-state key under which optimi keeps a parameter's Kahan compensation buffer.
KAHAN_STATE_KEY = "kahan_comp"


def kahan_buffer(optimizer, param: torch.Tensor) -> torch.Tensor | None:
    """optimi's Kahan compensation buffer of `param` (same shape and dtype), or `None` before the first step."""
    return optimizer.state[param].get(KAHAN_STATE_KEY)


def optimi_default_implementation(params: list[torch.Tensor]) -> tuple[bool | None, bool]:
    """
    The implementation optimi picks by itself for `params` on this machine, as `(triton, triton_available)`.

    optimi decides with its private `optimi.utils._default_to_triton`; when a later release renames it, `triton` is
    `None` and optimi decides again at the next step (`check_optimi_contract` reports the rename).
    """
    try:
        from optimi.utils import HAS_TRITON, _default_to_triton
    except ImportError:
        return None, False
    return bool(_default_to_triton(params)), bool(HAS_TRITON)


def check_optimi_contract() -> list[str]:
    """
    What the adapters of this module need from the installed torch-optimi and do not find: an empty list when all is
    there. Covers the optimizer classes, the private implementation chooser and the Kahan state key.
    """
    import torch

    optimi = _require_optimi()
    problems = [f"optimi.{name} is missing" for name in sorted(_EXTRA_ARGS) if not hasattr(optimi, name)]
    try:
        from optimi.utils import HAS_TRITON, _default_to_triton  # noqa: F401
    except ImportError as e:
        problems.append(f"optimi.utils no longer has HAS_TRITON/_default_to_triton ({e})")
    param = torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16))
    param.grad = torch.ones_like(param)
    optimizer = optimi.AdamW([param], lr=1e-3, kahan_sum=True, foreach=False, triton=False)
    optimizer.step()
    buffer = kahan_buffer(optimizer, param)
    if buffer is None or buffer.shape != param.shape:
        problems.append(f"optimi keeps no {KAHAN_STATE_KEY!r} state for a bf16 parameter with kahan_sum=True")
    return problems


# ---------------------------------------------------------------------------------------------------------------------
# The optimizer classes: optimi's, with one mixin per concern
# ---------------------------------------------------------------------------------------------------------------------


def _compensated_add_(param: torch.Tensor, comp: torch.Tensor, delta) -> None:
    """
    `param += delta` with Kahan summation, computed in fp32: the part of the sum that `param`'s dtype cannot hold is
    carried in `comp` (the optimizer's Kahan buffer, same dtype as `param`).
    """
    old = param.float()
    total = comp.float().add_(delta)
    new = (old + total).to(param.dtype)
    comp.copy_(total.sub_(new.float().sub_(old)))
    param.copy_(new)


class _CompensatedWeightDecay:
    """
    Decoupled weight decay of half-precision parameters applied inside the compensated update (exact in fp32, then
    Kahan-rounded), instead of `param *= 1 - lr * wd` on the bf16 tensor, which is a no-op once `lr * wd < 2^-9`. The
    group's `weight_decay` is held at zero during optimi's step and applied right after it instead of right before;
    the difference is of order `lr^2 * wd`.
    """

    #: Adan's decoupled decay divides by `1 + lr * wd` (unless `adam_wd=True`); the others multiply by `1 - lr * wd`.
    _decay_divides: bool = False
    _compensate_weight_decay: bool = True

    def _uses_decoupled_decay(self, group: dict[str, Any]) -> bool:
        return bool(group.get("decouple_wd", True) or group.get("decouple_lr", False))

    def step(self, closure: Callable | None = None, param: torch.Tensor | None = None):
        if param is not None or not self._compensate_weight_decay:
            return super().step(closure, param)

        held = []
        for group in self.param_groups:
            if (
                group["weight_decay"] != 0
                and group.get("kahan_sum") is not False
                and self._uses_decoupled_decay(group)
                and any(p.grad is not None and _is_half(p) for p in group["params"])
            ):
                # read `adam_wd` now: optimi's step resets it in a group whose weight decay is zero
                divides = self._decay_divides and not group.get("adam_wd", False)
                held.append((group, group["weight_decay"], group.get("adam_wd"), divides))
                group["weight_decay"] = 0.0
        try:
            loss = super().step(closure)
        finally:
            for group, weight_decay, adam_wd, _ in held:
                group["weight_decay"] = weight_decay
                if adam_wd is not None:
                    group["adam_wd"] = adam_wd

        import torch

        with torch.no_grad():
            for group, weight_decay, _, divides in held:
                rate = weight_decay * (group["lr"] / group["max_lr"] if group.get("decouple_lr") else group["lr"])
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    comp = kahan_buffer(self, p)
                    if _is_half(p) and comp is not None and comp.shape == p.shape:
                        factor = -rate / (1 + rate) if divides else -rate
                        _compensated_add_(p, comp, p.float().mul_(factor))
                    elif divides:
                        p.div_(1 + rate)
                    else:
                        p.mul_(1 - rate)
        return loss


class _PortableImplementation:
    """
    The implementation (Triton, foreach, for-loop) fits the machine and the parameters, whatever a checkpoint says:
    `load_state_dict` re-resolves it instead of trusting the saved choice, and FSDP2-sharded (DTensor) parameters,
    which may replace the originals after `__init__`, get the for-loop implementation at the first step.
    """

    def step(self, closure: Callable | None = None, param: torch.Tensor | None = None):
        if not getattr(self, "_dtensor_checked", False):
            from .distributed import make_optimi_dtensor_safe

            make_optimi_dtensor_safe(self)
            self._dtensor_checked = True
        return super().step(closure, param)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            requested_triton, requested_foreach = self.defaults.get("triton"), self.defaults.get("foreach")
            saved = (group.get("triton"), group.get("foreach"))
            triton, triton_available = optimi_default_implementation(list(group["params"]))
            if requested_triton is None and requested_foreach is None:
                group["triton"], group["foreach"] = triton, None
            else:
                group["triton"] = bool(requested_triton) and triton_available
                group["foreach"] = requested_foreach
            from .distributed import make_optimi_dtensor_safe

            make_optimi_dtensor_safe(self)
            # accelerate reloads every fresh optimizer's (empty) state to place it on the device: only a real
            # checkpoint, with per-parameter state and an explicit saved choice, is worth a line
            resumed = bool(state_dict.get("state")) and saved != (None, None)
            if resumed and saved != (group["triton"], group["foreach"]):
                logger.info(
                    f"optimi: the checkpoint was saved with triton={saved[0]}, foreach={saved[1]}; resuming with "
                    f"triton={group['triton']}, foreach={group['foreach']} on this machine."
                )


_CLASS_CACHE: dict[str, type] = {}


def get_optimi_optimizer_cls(name: str) -> type:
    """
    The optimizer class used for an optimi optimizer name.

    Args:
        name (`str`): An optimi class name (`"AdamW"`, `"Lion"`, ...) or an `optim` name (`"adamw_optimi"`, ...).

    Returns:
        A subclass of the optimi class (so `isinstance(opt, optimi.AdamW)` holds) with compensated weight decay and
        portable resume; see `_CompensatedWeightDecay` and `_PortableImplementation`.
    """
    optimi = _require_optimi()
    class_name = OPTIMI_OPTIMIZERS.get(str(name), str(name))
    if class_name not in _EXTRA_ARGS:
        valid = ", ".join(sorted(OPTIMI_OPTIMIZERS))
        raise ValueError(f"{name!r} is not an optimi optimizer. Valid names: {valid}.")
    if class_name not in _CLASS_CACHE:
        base = getattr(optimi, class_name)
        attrs = {"__module__": __name__, "__doc__": base.__doc__, "_decay_divides": class_name == "Adan"}
        # one subclass per optimi class, built on first use: optimi is an optional dependency
        _CLASS_CACHE[class_name] = type(class_name, (_CompensatedWeightDecay, _PortableImplementation, base), attrs)
    return _CLASS_CACHE[class_name]


# ---------------------------------------------------------------------------------------------------------------------
# The Trainer handler
# ---------------------------------------------------------------------------------------------------------------------


def get_optimi_optimizer(ctx) -> tuple[Any, dict[str, Any]]:
    """
    `Trainer` handler for the `*_optimi` optimizer names (registered in `trainer_optimizer._OPTIMIZER_HANDLERS`).

    Maps `learning_rate`, `weight_decay`, `adam_beta1`/`adam_beta2` (Adam-family and Lion), `adam_epsilon`
    (Adam-family and Adan) and the `optim_args` that the optimizer accepts. Kahan summation is passed explicitly:
    `True` when the model has half-precision trainable parameters or `bf16_full_train` is set, unless
    `optim_args` says `kahan_sum=false`.

    Args:
        ctx (`OptimizerContext`): Upstream's handler context (`args`, `model`, `optimizer_kwargs`, `adam_kwargs`,
            `optim_args` as strings).

    Returns:
        `(optimizer_cls, optimizer_kwargs)`.
    """
    optim_name = getattr(ctx.args.optim, "value", ctx.args.optim)
    if optim_name not in OPTIMI_OPTIMIZERS:
        raise ValueError(f"{optim_name!r} is not an optimi optimizer. Valid names: {', '.join(OPTIMI_OPTIMIZERS)}.")
    class_name = OPTIMI_OPTIMIZERS[optim_name]
    optimizer_cls = get_optimi_optimizer_cls(class_name)

    valid_keys = _COMMON_ARGS + _EXTRA_ARGS[class_name]
    unknown = sorted(set(ctx.optim_args) - set(valid_keys))
    if "gradient_release" in unknown:
        raise ValueError(
            "`optim_args` gradient_release is not supported by the Trainer: optimi's gradient release needs model "
            "hooks, breaks LR schedules after resume and is incompatible with gradient clipping and accumulation."
        )
    if unknown:
        raise ValueError(
            f"`optim_args` for optim={optim_name!r} got unknown key(s) {', '.join(unknown)}. "
            f"Valid keys: {', '.join(sorted(valid_keys))}."
        )
    parsed = {key: _parse_value(key, value) for key, value in ctx.optim_args.items()}

    kwargs: dict[str, Any] = dict(ctx.optimizer_kwargs)  # {"lr": ...}
    kwargs["weight_decay"] = ctx.args.weight_decay
    if class_name in _ADAM_BETAS:
        kwargs["betas"] = (ctx.args.adam_beta1, ctx.args.adam_beta2)
    if class_name in _USES_EPS:
        kwargs["eps"] = ctx.args.adam_epsilon
    if class_name == "Adan":
        defaults = (0.98, 0.92, 0.99)  # optimi's; Adan's betas do not mean what Adam's do
        kwargs["betas"] = tuple(parsed.pop(f"beta{i + 1}", defaults[i]) for i in range(3))

    half_params = has_half_precision_trainable_params(ctx.model) or bool(getattr(ctx.args, "bf16_full_train", False))
    kahan_sum = parsed.pop("kahan_sum", True if half_params else None)
    kwargs["kahan_sum"] = kahan_sum

    compensate = parsed.pop("compensate_weight_decay", True)
    kwargs.update(parsed)
    # FSDP2-sharded (DTensor) parameters: the for-loop implementation; an explicit foreach/triton=true raises
    from .distributed import check_optimi_args_for_sharded_params, has_dtensor_params, requested_fsdp_version

    sharded = requested_fsdp_version(ctx.args) == 2 or (ctx.model is not None and has_dtensor_params(ctx.model))
    kwargs.update(check_optimi_args_for_sharded_params(parsed, sharded))
    if compensate is False:
        optimizer_cls = type(optimizer_cls.__name__, (optimizer_cls,), {"_compensate_weight_decay": False})
    return optimizer_cls, kwargs


def is_compensated_optimizer(optimizer) -> bool | None:
    """
    Whether `optimizer` compensates the rounding of half-precision weight updates.

    Compensated: optimi with Kahan summation on (`kahan_sum` not `False`; Adan's default is `False`), torchao's
    `bf16_stochastic_round=True`, torchdistx `AnyPrecisionAdamW(use_kahan_summation=True)`.

    Returns:
        `True`, `False`, or `None` when unknown (a wrapped or custom optimizer).
    """
    optimizer = getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer
    if getattr(optimizer, "bf16_stochastic_round", False):
        return True
    groups = getattr(optimizer, "param_groups", None) or []
    module = type(optimizer).__module__ or ""
    mro_modules = {(cls.__module__ or "").split(".")[0] for cls in type(optimizer).__mro__}
    if "optimi" in mro_modules:
        return all(group.get("kahan_sum") is not False for group in groups)
    if any("use_kahan_summation" in group for group in groups):
        return all(group.get("use_kahan_summation") for group in groups)
    if module.startswith(("torch.optim", "transformers", "bitsandbytes", "torchao")):
        return False
    return None
