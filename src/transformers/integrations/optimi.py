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

[`get_optimi_optimizer`], the `Trainer`'s handler (as upstream's `stable_adamw` one), returns optimi's own classes
with the `TrainingArguments` mapped onto them: booleans in `optim_args` parsed as booleans, unknown keys rejected with
the valid ones, and Kahan summation passed explicitly when the model has half-precision trainable parameters (optimi's
`Adan` defaults it off).

[`prepare_optimi_optimizer`] then adds, on the optimizer the `Trainer` created, with torch's public optimizer hooks
rather than a subclass of optimi's classes:

- decoupled weight decay applied *inside* the compensated update for half-precision parameters. optimi multiplies the
  bf16 weight by `1 - lr * weight_decay`, which rounds back to the weight whenever `lr * weight_decay < 2^-9`, so
  typical fine-tuning decay is silently lost. The decay term is added to the Kahan buffer just before optimi's step,
  whose update then carries it: the step costs what optimi's own does, plus one multiply-add per parameter;
- optimi's Triton implementation only for parameters on a GPU: CPU parameters never take it, also where the
  `triton` package is installed (the CUDA build of torch) and ZeRO-3's first step, over an empty partition, would
  make optimi pick it;
- after `load_state_dict`, a Triton/foreach/for-loop implementation that runs on this machine, so a checkpoint
  written with Triton resumes where Triton is unavailable;
- the for-loop implementation on FSDP2-sharded (DTensor) parameters, where foreach and Triton do not run (see
  `integrations.pure_bf16_distributed`).

Both would be one option and one line inside torch-optimi itself: a compensated decoupled decay for half-precision
parameters, and `load_state_dict` re-resolving the implementation instead of keeping the saved one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..utils import is_torch_optimi_available, logging, strtobool


if TYPE_CHECKING:
    import torch

logger = logging.get_logger(__name__)

#: The install hint of every "optimi is missing" error.
OPTIMI_INSTALL_HINT = "pip install torch-optimi"

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
# What this module relies on in torch-optimi, checked by `check_optimi_contract`
# ---------------------------------------------------------------------------------------------------------------------

#: The torch-optimi releases this glue is tested with; the `optimi` extra pins the same range.
OPTIMI_TESTED_VERSIONS = ">=0.3.3,<0.4"

#: The optimizer-state key under which optimi keeps a parameter's Kahan compensation buffer.
KAHAN_STATE_KEY = "kahan_comp"

#: Device types optimi's Triton kernels run on.
_TRITON_DEVICE_TYPES = ("cuda", "xpu")

#: The attribute under which `prepare_optimi_optimizer` keeps its hook handles (and knows it ran).
_HOOKS_ATTR = "_transformers_optimi_hooks"


def kahan_buffer(optimizer, param: torch.Tensor) -> torch.Tensor | None:
    """optimi's Kahan compensation buffer of `param` (same shape and dtype), or `None` before the first step."""
    return optimizer.state[param].get(KAHAN_STATE_KEY)


def _triton_device_present() -> bool:
    """Whether this machine has a device optimi's Triton kernels run on (a CUDA/ROCm or XPU GPU)."""
    import torch

    xpu = getattr(torch, "xpu", None)
    return torch.cuda.is_available() or bool(xpu is not None and xpu.is_available())


def _triton_runs_here(params: list[torch.Tensor]) -> bool:
    """
    Whether optimi's Triton implementation can run on `params` here: Triton importable (optimi's public
    `optimi.utils.HAS_TRITON`; `False` if a release renames it, which only costs speed) and every parameter on a
    device its kernels support. Without parameters (an empty ZeRO-3 partition), whether this machine has such a
    device: the `triton` package alone (the CUDA build of torch installs it) is not enough.
    """
    import optimi.utils

    if not getattr(optimi.utils, "HAS_TRITON", False):
        return False
    if not params:
        return _triton_device_present()
    return all(p.device.type in _TRITON_DEVICE_TYPES for p in params)


def _triton_runs_on_group(group: dict[str, Any]) -> bool:
    """[`_triton_runs_here`] on the parameters a step of `group` updates (those with a gradient), else on all of them."""
    params = list(group["params"])
    return _triton_runs_here([p for p in params if p.grad is not None] or params)


def _keep_triton_where_it_runs(optimizer) -> None:
    """
    Before each step: `triton=False` in every param group whose parameters live where optimi's Triton kernels do not
    run, unless this optimizer was given an explicit `triton` (`optim_args`), which wins.

    optimi resolves `triton` once, at a group's first step, as `all(...)` over the parameters that have a gradient:
    `True` for none when Triton imports. Under DeepSpeed ZeRO-3 that first step can have nothing to update (an empty
    partition), so on a machine with the `triton` package (the CUDA build of torch) and no GPU it picked Triton for
    CPU parameters, and the next step raised `RuntimeError: 0 active drivers`. Here CPU parameters never take Triton,
    installed or not; a group with no parameter takes it only on a machine with a GPU; groups whose parameters are on
    a GPU keep optimi's own choice (`None` until their first step).
    """
    if optimizer.defaults.get("triton") is not None:
        return
    for group in optimizer.param_groups:
        if group.get("triton") is not False and not _triton_runs_on_group(group):
            group["triton"] = False


def check_optimi_contract() -> list[str]:
    """
    What this module needs from the installed torch-optimi and does not find: an empty list when all is there.
    Covers the optimizer classes, the `triton`/`foreach` keys of their param groups, `HAS_TRITON` and the Kahan state
    key.
    """
    import torch

    optimi = _require_optimi()
    problems = [f"optimi.{name} is missing" for name in sorted(_EXTRA_ARGS) if not hasattr(optimi, name)]
    import optimi.utils

    if not hasattr(optimi.utils, "HAS_TRITON"):
        problems.append("optimi.utils no longer has HAS_TRITON: a resumed run never uses Triton")
    param = torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16))
    param.grad = torch.ones_like(param)
    optimizer = optimi.AdamW([param], lr=1e-3, kahan_sum=True, foreach=False, triton=False)
    missing = [key for key in ("triton", "foreach") if key not in optimizer.param_groups[0]]
    if missing:
        problems.append(f"optimi's param groups have no {'/'.join(missing)} key")
    optimizer.step()
    buffer = kahan_buffer(optimizer, param)
    if buffer is None or buffer.shape != param.shape:
        problems.append(f"optimi keeps no {KAHAN_STATE_KEY!r} state for a bf16 parameter with kahan_sum=True")
    return problems


# ---------------------------------------------------------------------------------------------------------------------
# What the Trainer adds to optimi's optimizers, through torch's public optimizer hooks (no subclass)
# ---------------------------------------------------------------------------------------------------------------------


def _uses_decoupled_decay(group: dict[str, Any]) -> bool:
    return bool(group.get("decouple_wd", True) or group.get("decouple_lr", False))


def _hold_half_precision_decay(optimizer, decay_divides: bool) -> list[tuple]:
    """
    Sets `weight_decay` to zero in the groups whose half-precision parameters get the compensated decay, and returns
    what is needed to restore and apply it: `(group, weight_decay, adam_wd, divides)` per group.
    """
    held = []
    for group in optimizer.param_groups:
        if (
            group["weight_decay"] != 0
            and group.get("kahan_sum") is not False
            and _uses_decoupled_decay(group)
            and any(p.grad is not None and _is_half(p) for p in group["params"])
        ):
            # read `adam_wd` now: optimi's step resets it in a group whose weight decay is zero
            divides = decay_divides and not group.get("adam_wd", False)
            held.append((group, group["weight_decay"], group.get("adam_wd"), divides))
            group["weight_decay"] = 0.0
    return held


def _restore_decay(held: list[tuple]) -> None:
    while held:
        group, weight_decay, adam_wd, _ = held.pop()
        group["weight_decay"] = weight_decay
        if adam_wd is not None:
            group["adam_wd"] = adam_wd


def _decay_rate(group: dict[str, Any], weight_decay: float) -> float:
    return weight_decay * (group["lr"] / group["max_lr"] if group.get("decouple_lr") else group["lr"])


def _fold_decay_into_compensation(optimizer, held: list[tuple]) -> list[torch.Tensor]:
    """
    Before optimi's step: the decoupled decay of the held groups, in the same pass optimi's update makes.

    optimi's compensated update adds the step to the Kahan buffer, then the buffer to the weight, and keeps what the
    weight's dtype could not hold (`comp += update; param += comp; comp += old - param`). Adding `-lr * wd * param`
    to the buffer first makes that one rounding carry both the decay and the update, from the weight before the step
    as optimi and torch decay it, at the cost of one multiply-add per parameter. Parameters that are not half
    precision are decayed in place, as optimi would. Returns the half-precision parameters that have no buffer yet
    (optimi creates them at their first step): [`_apply_compensated_decay`] decays those after the step.
    """
    import torch

    pending = []
    with torch.no_grad():
        for group, weight_decay, _, divides in held:
            rate = _decay_rate(group, weight_decay)
            factor = -rate / (1 + rate) if divides else -rate
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not _is_half(p):
                    if divides:
                        p.div_(1 + rate)
                    else:
                        p.mul_(1 - rate)
                    continue
                comp = kahan_buffer(optimizer, p)
                if comp is not None and comp.shape == p.shape:
                    comp.add_(p, alpha=factor)
                else:
                    pending.append(p)
    return pending


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


def _apply_compensated_decay(optimizer, held: list[tuple], pending: list[torch.Tensor]) -> None:
    """
    After optimi's step: the decoupled decay of the `pending` half-precision parameters of the held groups (their
    first step, when optimi has just created their Kahan buffer), inside the Kahan update; without a buffer
    (`kahan_sum` off for that parameter), in place.
    """
    import torch

    pending_ids = {id(p) for p in pending}
    with torch.no_grad():
        for group, weight_decay, _, divides in held:
            rate = _decay_rate(group, weight_decay)
            for p in group["params"]:
                if id(p) not in pending_ids:
                    continue
                comp = kahan_buffer(optimizer, p)
                if comp is not None and comp.shape == p.shape:
                    factor = -rate / (1 + rate) if divides else -rate
                    _compensated_add_(p, comp, p.float().mul_(factor))
                elif divides:
                    p.div_(1 + rate)
                else:
                    p.mul_(1 - rate)


def _fit_implementation_to_machine(optimizer) -> None:
    """
    After `load_state_dict`: the Triton/foreach choice saved in each group (optimi resolves it once, at the first
    step, and saves it) is kept where it runs here. A saved `triton=True` where Triton cannot run (no Triton, or a
    parameter off CUDA/XPU) becomes `False`; explicit `triton`/`foreach` arguments of this optimizer win; groups with
    DTensor parameters get the for-loop implementation.
    """
    from .pure_bf16_distributed import make_optimi_dtensor_safe

    requested_triton, requested_foreach = optimizer.defaults.get("triton"), optimizer.defaults.get("foreach")
    for group in optimizer.param_groups:
        saved = (group.get("triton"), group.get("foreach"))
        if requested_triton is not None:
            group["triton"] = requested_triton
        elif group.get("triton") and not _triton_runs_on_group(group):
            group["triton"] = False
        if requested_foreach is not None:
            group["foreach"] = requested_foreach
        if saved != (group.get("triton"), group.get("foreach")):
            logger.info(
                f"optimi: the checkpoint was saved with triton={saved[0]}, foreach={saved[1]}; resuming with "
                f"triton={group.get('triton')}, foreach={group.get('foreach')} on this machine."
            )
    make_optimi_dtensor_safe(optimizer)


#: The optimizer-state key under which a flat partition keeps its own step count (see `_hold_partition_steps`).
PARTITION_STEP_KEY = "partition_step"


def _hold_partition_steps(optimizer) -> list[tuple]:
    """
    Before a step under DeepSpeed ZeRO-3: each param group's step counter set to that of the partition being stepped.

    optimi counts steps per param group (`group["step"]`, which drives its bias correction) and advances every group's
    counter at every `step()` call. ZeRO-3 calls `step()` once per sub-group of flat partitions, with only that
    sub-group's parameters in its group and the other groups empty: a run with a decay and a no-decay group (or a group
    split into several sub-groups) would advance each counter several times per training step, and the bias
    correction of every later sub-group would be wrong from the first step. Here each flat partition keeps its own
    count in its optimizer state (saved and restored with the checkpoint), and a group with nothing to step keeps its
    counter. Returns what [`_release_partition_steps`] needs after the step.
    """
    import torch

    held = []
    for group in optimizer.param_groups:
        step = group.get("step")
        stepped = [p for p in group["params"] if p.grad is not None]
        if not stepped:
            # optimi sets up and advances even an empty group's counter; a group that never stepped stays at 0
            held.append((group, None, step.clone() if step is not None else torch.zeros((), dtype=torch.int32)))
            continue
        owner = stepped[0]
        count = optimizer.state[owner].get(PARTITION_STEP_KEY) if owner in optimizer.state else None
        if count is not None and step is not None:
            step.copy_(count)
        elif count is not None:
            group["step"] = count.clone()
        held.append((group, owner, None))
    return held


def _release_partition_steps(optimizer, held: list[tuple]) -> None:
    """After the step: each stepped partition records its count; groups with nothing to step get theirs back."""
    while held:
        group, owner, saved = held.pop()
        if owner is None:
            if group.get("step") is None:
                group["step"] = saved
            else:
                group["step"].copy_(saved)
        elif group.get("step") is not None:
            optimizer.state[owner][PARTITION_STEP_KEY] = group["step"].clone()


def compensate_weight_decay_requested(optim_args: dict[str, str] | None) -> bool:
    """`optim_args`' `compensate_weight_decay` (parsed, default `True`)."""
    value = (optim_args or {}).get("compensate_weight_decay", True)
    return parse_optim_bool("compensate_weight_decay", value)


def _resolve_hook_options(args, compensate_weight_decay: bool | None, partition_steps: bool | None) -> tuple:
    """`compensate_weight_decay` (default: `optim_args`, else `True`) and `partition_steps` (default: DeepSpeed)."""
    if compensate_weight_decay is None:
        from ..trainer_optimizer import _parse_optim_args

        optim_args = _parse_optim_args(getattr(args, "optim_args", None)) if args is not None else {}
        compensate_weight_decay = compensate_weight_decay_requested(optim_args)
    if partition_steps is None:
        from .pure_bf16_distributed import deepspeed_requested

        partition_steps = args is not None and deepspeed_requested(args)
    return compensate_weight_decay, partition_steps


def _step_hooks(compensate_weight_decay: bool, partition_steps: bool, decay_divides: bool) -> tuple:
    """
    The step pre- and post-hooks of [`prepare_optimi_optimizer`], sharing what one step holds: the groups' decay
    (zero during optimi's step), the parameters whose Kahan buffer the step creates, and the partitions' step counts.
    """
    held: list[tuple] = []
    held_steps: list[tuple] = []
    pending: list = []  # half-precision parameters whose Kahan buffer optimi creates in this step
    first_step = [True]

    def before_step(opt, step_args, step_kwargs):
        from .pure_bf16_distributed import make_optimi_dtensor_safe

        _restore_decay(held)  # a step that raised left its groups' decay at zero
        pending.clear()
        if first_step[0]:
            make_optimi_dtensor_safe(opt)
            first_step[0] = False
        _keep_triton_where_it_runs(opt)
        # `step_args` is `(optimizer, closure, param)` as given; a `param` is optimi's per-parameter gradient release
        single_param = step_kwargs.get("param") is not None or (len(step_args) > 2 and step_args[2] is not None)
        if compensate_weight_decay and not single_param:
            held.extend(_hold_half_precision_decay(opt, decay_divides))
            pending[:] = _fold_decay_into_compensation(opt, held)
        if partition_steps and not single_param:
            held_steps[:] = _hold_partition_steps(opt)

    def after_step(opt, step_args, step_kwargs):
        if held_steps:
            _release_partition_steps(opt, held_steps)
        if held:
            applied = list(held)
            _restore_decay(held)
            if pending:
                _apply_compensated_decay(opt, applied, pending)
                pending.clear()

    return before_step, after_step


def prepare_optimi_optimizer(
    optimizer, args=None, compensate_weight_decay: bool | None = None, partition_steps: bool | None = None
) -> bool:
    """
    Adds what the `Trainer` needs on top of an optimi optimizer, with torch's public optimizer hooks
    (`register_step_pre_hook`, `register_step_post_hook`, `register_load_state_dict_post_hook`) on the instance: the
    optimizer stays optimi's own class.

    - Decoupled weight decay of half-precision parameters is applied inside the compensated update instead of
      `param *= 1 - lr * wd` on the bf16 tensor, which is a no-op once `lr * wd < 2^-9`. The groups' `weight_decay`
      is zero during optimi's step; right before it, `-lr * wd * param` is added to each parameter's Kahan buffer, so
      optimi's own compensated update carries the decay in the same pass (one multiply-add per parameter, from the
      weight before the step, as optimi and torch decay it). At a parameter's first step, before optimi has created
      its buffer, the decay is applied right after the step instead (a difference of order `lr^2 * wd`).
    - Before each step, groups whose parameters are not on a GPU get `triton=False` (optimi decides from the first
      step's parameters, which under ZeRO-3 can be none; see `_keep_triton_where_it_runs`). An explicit `triton`
      wins; groups on a GPU keep optimi's default.
    - After `load_state_dict`, the Triton/foreach/for-loop implementation fits this machine, whatever the checkpoint
      says (see `_fit_implementation_to_machine`).
    - DTensor (FSDP2-sharded) parameters, which may replace the originals after the optimizer is created, get the
      for-loop implementation at the first step.
    - Under DeepSpeed, each of ZeRO's flat partitions keeps its own step count, since ZeRO-3 steps the optimizer once
      per sub-group of partitions (see `_hold_partition_steps`).

    Args:
        optimizer (`torch.optim.Optimizer`): An optimi optimizer, or accelerate's `AcceleratedOptimizer` around one.
            Other optimizers are left alone.
        args (`TrainingArguments`, *optional*): When given, only a run with an optimi `optim` name
            (`"adamw_optimi"`, ...) is prepared, and `optim_args`' `compensate_weight_decay` is read.
        compensate_weight_decay (`bool`, *optional*): Overrides `optim_args`; defaults to `True`.
        partition_steps (`bool`, *optional*): Keep a step count per parameter (ZeRO's flat partitions) instead of per
            group; defaults to whether `args` runs under DeepSpeed.

    Returns:
        `bool`: Whether the hooks were registered (`False` for another optimizer, or when they already are).
    """
    if args is not None and getattr(args.optim, "value", args.optim) not in OPTIMI_OPTIMIZERS:
        return False
    inner = getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer
    mro_modules = {(cls.__module__ or "").split(".")[0] for cls in type(inner).__mro__}
    if "optimi" not in mro_modules or hasattr(inner, _HOOKS_ATTR):
        return False
    compensate_weight_decay, partition_steps = _resolve_hook_options(args, compensate_weight_decay, partition_steps)
    decay_divides = type(inner).__name__ == "Adan"  # Adan divides by 1 + lr * wd (unless adam_wd=True)
    before_step, after_step = _step_hooks(compensate_weight_decay, partition_steps, decay_divides)

    def after_load_state_dict(opt):
        _fit_implementation_to_machine(opt)

    handles = [
        inner.register_step_pre_hook(before_step),
        inner.register_step_post_hook(after_step),
        inner.register_load_state_dict_post_hook(after_load_state_dict),
    ]
    setattr(inner, _HOOKS_ATTR, handles)
    # read by `check_pure_half_precision_training`: decay does not round away on half-precision weights
    inner._compensate_weight_decay = bool(compensate_weight_decay)
    return True


def get_optimi_optimizer_cls(name: str) -> type:
    """
    The optimi class of an optimizer name: optimi's own class, unchanged (`prepare_optimi_optimizer` adds the
    `Trainer`'s hooks to an instance).

    Args:
        name (`str`): An optimi class name (`"AdamW"`, `"Lion"`, ...) or an `optim` name (`"adamw_optimi"`, ...).
    """
    optimi = _require_optimi()
    class_name = OPTIMI_OPTIMIZERS.get(str(name), str(name))
    if class_name not in _EXTRA_ARGS:
        valid = ", ".join(sorted(OPTIMI_OPTIMIZERS))
        raise ValueError(f"{name!r} is not an optimi optimizer. Valid names: {valid}.")
    return getattr(optimi, class_name)


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

    parsed.pop("compensate_weight_decay", None)  # ours, not optimi's: read by `prepare_optimi_optimizer`
    kwargs.update(parsed)
    # FSDP2-sharded (DTensor) parameters: the for-loop implementation; an explicit foreach/triton=true raises
    from .pure_bf16_distributed import check_optimi_args_for_sharded_params, has_dtensor_params, requested_fsdp_version

    sharded = requested_fsdp_version(ctx.args) == 2 or (ctx.model is not None and has_dtensor_params(ctx.model))
    kwargs.update(check_optimi_args_for_sharded_params(parsed, sharded))
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
