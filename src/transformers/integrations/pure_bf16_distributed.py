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
Pure-bf16 training (`bf16_full_train=True`) on several processes: DDP, FSDP2, and what is refused.

- **DDP** needs nothing special: bf16 gradients are all-reduced in bf16 and every replica applies the same compensated
  update, so the replicas stay identical.
- **FSDP2** (`torch.distributed.fsdp.fully_shard`) shards the bf16 weights, their bf16 gradients and the optimizer
  state (optimi AdamW with Kahan summation: 6 bytes per parameter), so each of N ranks holds about 10/N bytes per
  parameter. Three things make it correct, and [`fully_shard_for_bf16_full_train`] does them:

  1. *No fp32 upcast.* accelerate's `fsdp2_prepare_model` casts every trainable parameter to fp32 when the run has
     a mixed precision (and `bf16_full_train` turns bf16 autocast on), which would silently train fp32 master
     weights. The model is sharded here instead, before accelerate sees it; `fsdp2_prepare_model` leaves a model that
     is already sharded alone.
  2. *One dtype per FSDP unit.* FSDP2 requires the trainable parameters of one `fully_shard` unit to share a dtype,
     and pure bf16 keeps embeddings and norms in fp32. Each module holding fp32 trainable parameters (with the modules
     tied to it) becomes its own unit, then each transformer block, then the root.
  3. *A deliberate mixed-precision policy.* `param_dtype=None`: parameters are all-gathered and used in their storage
     dtype, never upcast (the matmuls run in bf16 under the autocast that `bf16_full_train` turns on).
     `reduce_dtype=torch.float32` (see [`BF16_FULL_TRAIN_REDUCE_DTYPE`]): the reduce-scatter sums the ranks' bf16
     gradients in fp32 and rounds the mean to bf16 once, instead of rounding every partial sum; it costs twice the
     gradient traffic of a bf16 reduce-scatter, and the sharded gradient is bf16 again.

  optimi runs its for-loop implementation on sharded (DTensor) parameters: its foreach implementation fails
  (`aten._foreach_copy_.default` has no DTensor sharding strategy) and its Triton kernels read raw pointers, which a
  DTensor does not expose (`data_ptr()` is 0 and `numel()` is the global size). torchao's and bitsandbytes' 8-bit
  optimizers do not run on DTensors; they are refused with the working alternative.
- **DeepSpeed** ZeRO 1-3 keeps bf16 master weights, gradients and optimizer state and steps the compensated optimizer
  on its flat partitions (see `integrations.pure_bf16_deepspeed`); what it cannot run is refused there.
- **FSDP1** is refused, with the reason and the alternative.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..utils import logging


if TYPE_CHECKING:
    import torch
    from torch import nn

logger = logging.get_logger(__name__)

#: The FSDP2 reduce dtype of `bf16_full_train` (see the module docstring): fp32 sums, one rounding to bf16.
BF16_FULL_TRAIN_REDUCE_DTYPE = "float32"

FSDP1_REFUSAL = (
    "`bf16_full_train=True` needs FSDP2 (`fsdp_config={{'version': 2}}`, or `fsdp_version: 2` in an `accelerate "
    "launch` config), got FSDP version {version}. FSDP1 flattens each unit's parameters into one tensor of a single "
    "dtype and, with mixed precision, keeps them in fp32, so pure-bf16 weights and their fp32 embeddings and norms "
    "cannot be sharded as they are."
)
LOW_BIT_FSDP2_REFUSAL = (
    "The optimizer {name} keeps 8-bit (or 4-bit) state that does not run on FSDP2's sharded DTensor parameters "
    "(torchao's low-bit optimizers fail under FSDP2 on torch >= 2.11, bitsandbytes fails with 'mixed torch.Tensor and "
    "DTensor'). Under FSDP2 use `optim='adamw_optimi'` (Kahan summation, 6 bytes of optimizer state per parameter, "
    "sharded across ranks), or train with the 8-bit optimizer under DDP instead of FSDP."
)
AC_REFUSAL = (
    "`bf16_full_train=True` with FSDP2 does not support `fsdp_config['activation_checkpointing']`: accelerate applies "
    "it before sharding, and pure-bf16 models are sharded before accelerate sees them. Use the "
    "`gradient_checkpointing=True` training argument instead (the model's own activation checkpointing)."
)
RAM_EFFICIENT_LOADING_REFUSAL = (
    "`bf16_full_train=True` with FSDP2 does not support `fsdp_config['cpu_ram_efficient_loading']`: it leaves the "
    "weights on rank 0 only and relies on accelerate's sharding to broadcast them, which pure-bf16 models bypass to "
    "keep their bf16 weights. Set `cpu_ram_efficient_loading` to false."
)

_LOW_BIT_MARKERS = ("8bit", "4bit", "fp8", "8_bit", "4_bit")
_LOW_BIT_LIBRARIES = ("torchao", "bitsandbytes")


# ---------------------------------------------------------------------------------------------------------------------
# What is requested
# ---------------------------------------------------------------------------------------------------------------------


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "false").strip().lower() in ("1", "true", "yes", "on")


def _read_fsdp_config(fsdp_config: Any) -> dict[str, Any]:
    """`TrainingArguments.fsdp_config` before `__post_init__` normalises it: a dict, a JSON path or `None`."""
    if fsdp_config is None:
        return {}
    if isinstance(fsdp_config, (str, os.PathLike)):
        with open(fsdp_config, encoding="utf-8") as f:
            fsdp_config = json.load(f)
    if not isinstance(fsdp_config, dict):
        return {}
    return {k.removeprefix("fsdp_"): v for k, v in fsdp_config.items()}


def requested_fsdp_version(args: Any) -> int | None:
    """
    The FSDP version a run asks for, from `TrainingArguments` (`fsdp`, `fsdp_config["version"]`, default 2, as
    `TrainingArguments` resolves it) or from `accelerate launch` (`ACCELERATE_USE_FSDP`, `FSDP_VERSION`, default 1, as
    accelerate resolves it).

    Returns:
        `int` or `None` when the run does not use FSDP.
    """
    if getattr(args, "fsdp", None):
        return int(_read_fsdp_config(getattr(args, "fsdp_config", None)).get("version", 2))
    if _env_flag("ACCELERATE_USE_FSDP"):
        return int(os.environ.get("FSDP_VERSION", "1"))
    return None


def deepspeed_requested(args: Any) -> bool:
    return bool(getattr(args, "deepspeed", None)) or _env_flag("ACCELERATE_USE_DEEPSPEED")


def _optim_name(optim: Any) -> str:
    return str(getattr(optim, "value", optim) or "")


def is_low_bit_optimizer(optimizer_or_name: Any) -> bool:
    """
    Whether an optimizer keeps 8-bit/4-bit state that does not run on DTensors: an `optim` name (`"adamw_torch_8bit"`,
    `"adamw_bnb_8bit"`, `"paged_lion_8bit"`, ...) or an optimizer instance or class from torchao or bitsandbytes
    (`AdamW8bit`, `AdamW4bit`, `AdamWFp8`, ...). Detected by name, so new optimizers following the naming are covered.
    """
    if isinstance(optimizer_or_name, str) or hasattr(optimizer_or_name, "value"):
        name = _optim_name(optimizer_or_name).lower()
        return any(marker in name for marker in _LOW_BIT_MARKERS)
    optimizer = getattr(optimizer_or_name, "optimizer", optimizer_or_name)  # accelerate's AcceleratedOptimizer
    cls = optimizer if isinstance(optimizer, type) else type(optimizer)
    for klass in cls.__mro__:
        library = (klass.__module__ or "").split(".")[0]
        if library in _LOW_BIT_LIBRARIES and any(m in klass.__name__.lower() for m in _LOW_BIT_MARKERS):
            return True
    return False


def check_bf16_full_train_parallelism(args: Any) -> None:
    """
    `TrainingArguments.__post_init__`: the distributed settings `bf16_full_train` accepts. DDP, FSDP2 and DeepSpeed
    ZeRO 1-3 pass; FSDP1, 8-bit optimizers under FSDP2 and DeepSpeed configs that cannot train compensated pure bf16
    (see [`~integrations.pure_bf16_deepspeed.check_deepspeed_config_for_bf16_full_train`]) raise a `ValueError` that
    says why and what works.
    """
    version = requested_fsdp_version(args)
    if version is not None:
        if version != 2:
            raise ValueError(FSDP1_REFUSAL.format(version=version))
        optim = getattr(args, "optim", None)
        if optim is not None and is_low_bit_optimizer(optim):
            raise ValueError(LOW_BIT_FSDP2_REFUSAL.format(name=f"optim={_optim_name(optim)!r}"))
        config = _read_fsdp_config(getattr(args, "fsdp_config", None))
        _check_fsdp2_options(
            activation_checkpointing=config.get("activation_checkpointing", False),
            cpu_ram_efficient_loading=config.get("cpu_ram_efficient_loading", False),
        )
    if deepspeed_requested(args):
        from .pure_bf16_deepspeed import check_bf16_full_train_deepspeed_args

        check_bf16_full_train_deepspeed_args(args)


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _check_fsdp2_options(activation_checkpointing: Any, cpu_ram_efficient_loading: Any) -> None:
    if _truthy(activation_checkpointing):
        raise ValueError(AC_REFUSAL)
    if _truthy(cpu_ram_efficient_loading):
        raise ValueError(RAM_EFFICIENT_LOADING_REFUSAL)


def fsdp_plugin_of(accelerator: Any) -> Any:
    """The accelerate FSDP plugin of a resolved accelerator state, or `None`."""
    return getattr(getattr(accelerator, "state", None), "fsdp_plugin", None)


def check_bf16_full_train_accelerator_state(accelerator: Any) -> None:
    """
    The same decisions as [`check_bf16_full_train_parallelism`], on the resolved accelerate state (it also knows
    `accelerate launch` configs): an FSDP plugin must be version 2 without accelerate's activation checkpointing or
    RAM-efficient loading; a DeepSpeed plugin's config is checked and completed for pure bf16 (bf16 master weights,
    gradients and optimizer state; see [`~integrations.pure_bf16_deepspeed.prepare_deepspeed_for_bf16_full_train`]).
    """
    state = getattr(accelerator, "state", None)
    plugin = fsdp_plugin_of(accelerator)
    if plugin is not None:
        version = int(getattr(plugin, "fsdp_version", 1) or 1)
        if version != 2:
            raise ValueError(FSDP1_REFUSAL.format(version=version))
        _check_fsdp2_options(
            activation_checkpointing=getattr(plugin, "activation_checkpointing", False),
            cpu_ram_efficient_loading=getattr(plugin, "cpu_ram_efficient_loading", False),
        )
    if getattr(state, "deepspeed_plugin", None) is not None:
        from .pure_bf16_deepspeed import prepare_deepspeed_for_bf16_full_train

        prepare_deepspeed_for_bf16_full_train(accelerator)


FSDP_NOT_ENABLED = (
    "FSDP was requested ({requested}), but accelerate enables FSDP on accelerators only, and this run is on the {device}: "
    "its {world_size} processes run as {runs_as}, each holding the whole model, its gradients and its optimizer "
    "state (nothing is sharded). Training is otherwise unchanged. To shard, run on GPUs; to say what runs here, drop "
    "{drop}."
)


def warn_if_fsdp_not_enabled(args: Any, accelerator: Any) -> str | None:
    """
    Says once, on the main process, at the start of a run, when FSDP was asked for (`TrainingArguments.fsdp`, or an
    `accelerate launch` FSDP config) but accelerate did not enable it: it enables FSDP on accelerator devices only, so
    several CPU processes silently run as DDP (one CPU process is already refused by the `Trainer`).

    Args:
        args (`TrainingArguments`): The run's arguments.
        accelerator: The `Trainer`'s `Accelerator`.

    Returns:
        `str` or `None`: The message when FSDP is not enabled (also on the other ranks, which do not log it).
    """
    if requested_fsdp_version(args) is None or fsdp_plugin_of(accelerator) is not None:
        return None
    state = getattr(accelerator, "state", None)
    world_size = int(getattr(state, "num_processes", 1) or 1)
    if world_size < 2:  # one process asking for FSDP: the `Trainer` refuses it itself
        return None
    distributed_type = str(getattr(getattr(state, "distributed_type", None), "value", "NO"))
    runs_as = "DDP" if distributed_type.startswith("MULTI_") else f"accelerate's {distributed_type}"
    if getattr(args, "fsdp", None):
        requested, drop = f"fsdp={args.fsdp!r}", "`--fsdp`/`fsdp` and `fsdp_config`"
    else:
        requested, drop = "ACCELERATE_USE_FSDP=true, from an accelerate FSDP config", "the FSDP config"
    device = getattr(getattr(accelerator, "device", None), "type", None) or "cpu"
    message = FSDP_NOT_ENABLED.format(
        requested=requested,
        device=device.upper() if device == "cpu" else device,
        world_size=world_size,
        runs_as=runs_as,
        drop=drop,
    )
    if getattr(accelerator, "is_main_process", True):
        logger.warning_once(message)
    return message


# ---------------------------------------------------------------------------------------------------------------------
# DTensors and optimizers
# ---------------------------------------------------------------------------------------------------------------------


def is_dtensor(tensor: Any) -> bool:
    """Whether `tensor` is a `torch.distributed.tensor.DTensor` (an FSDP2-sharded parameter)."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # torch built without distributed
        return False
    return isinstance(tensor, DTensor)


def has_dtensor_params(params: Any) -> bool:
    """Whether a model, an optimizer or an iterable of parameters holds DTensor parameters."""
    if hasattr(params, "param_groups"):
        params = (p for group in params.param_groups for p in group["params"])
    elif hasattr(params, "parameters"):
        params = params.parameters()
    return any(is_dtensor(p) for p in params)


def check_optimizer_for_sharded_params(model: Any, optimizer: Any) -> None:
    """
    Refuses an 8-bit/4-bit optimizer (torchao, bitsandbytes) over DTensor (FSDP2-sharded) parameters, naming the
    alternative. Called when the `Trainer` creates the optimizer.
    """
    if optimizer is None or not (has_dtensor_params(optimizer) or (model is not None and has_dtensor_params(model))):
        return
    if is_low_bit_optimizer(optimizer):
        inner = getattr(optimizer, "optimizer", optimizer)
        raise ValueError(LOW_BIT_FSDP2_REFUSAL.format(name=f"{type(inner).__module__}.{type(inner).__name__}"))


def check_optimi_args_for_sharded_params(optim_args: dict[str, Any], sharded: bool) -> dict[str, Any]:
    """
    The optimi keyword arguments for sharded (DTensor) parameters: `foreach=False, triton=False` (the for-loop
    implementation). An explicit `foreach=True` or `triton=True` raises a `ValueError`, since neither runs on DTensors.

    Args:
        optim_args (`dict`): The parsed `optim_args` of an optimi optimizer.
        sharded (`bool`): Whether the parameters are (or will be) FSDP2-sharded.

    Returns:
        `dict`: The keyword arguments to add (empty when not sharded).
    """
    if not sharded:
        return {}
    explicit = [key for key in ("foreach", "triton") if optim_args.get(key) is True]
    if explicit:
        raise ValueError(
            f"`optim_args` {', '.join(f'{key}=true' for key in explicit)} cannot be used with FSDP2-sharded parameters: "
            "optimi's foreach implementation has no DTensor sharding strategy (`aten._foreach_copy_`) and its Triton "
            "kernels read raw pointers that a DTensor does not expose. Drop them: the for-loop implementation is used."
        )
    return {"foreach": False, "triton": False}


def make_optimi_dtensor_safe(optimizer: Any) -> bool:
    """
    Puts every param group of an optimi optimizer that holds DTensor parameters on the for-loop implementation
    (`foreach=False, triton=False`). Called before each step, so it also covers groups whose parameters were swapped
    for DTensors after the optimizer was created (accelerate's FSDP2 preparation) and implementations restored from a
    checkpoint.

    Returns:
        `bool`: Whether any group was changed.
    """
    changed = False
    for group in getattr(optimizer, "param_groups", []):
        if not has_dtensor_params(group["params"]):
            continue
        if group.get("triton") or group.get("foreach"):
            logger.info_once(
                "optimi: FSDP2-sharded (DTensor) parameters use the for-loop implementation; foreach and Triton do "
                "not support DTensors."
            )
        if group.get("triton") is not False or group.get("foreach") is not False:
            group["triton"], group["foreach"] = False, False
            changed = True
    return changed


# ---------------------------------------------------------------------------------------------------------------------
# FSDP2 sharding
# ---------------------------------------------------------------------------------------------------------------------


def bf16_full_train_mp_policy(reduce_dtype: torch.dtype | None = None):
    """
    The FSDP2 `MixedPrecisionPolicy` of pure-bf16 training: no `param_dtype` (parameters are used in their storage
    dtype, never upcast), `reduce_dtype=torch.float32` unless given (fp32 sums of the ranks' bf16 gradients, one
    rounding to bf16), no `output_dtype`.

    Args:
        reduce_dtype (`torch.dtype`, *optional*): Overrides the reduce dtype; `torch.bfloat16` halves the gradient
            traffic and rounds every partial sum.
    """
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if reduce_dtype is None:
        reduce_dtype = getattr(torch, BF16_FULL_TRAIN_REDUCE_DTYPE)
    return MixedPrecisionPolicy(
        param_dtype=None, reduce_dtype=reduce_dtype, output_dtype=None, cast_forward_inputs=False
    )


@dataclass
class ShardingPlan:
    """The FSDP2 units [`fully_shard_for_bf16_full_train`] creates, in order: each a list of module names."""

    #: modules holding fp32 trainable parameters (with the modules tied to them), one unit per group
    fp32_units: list[list[str]] = field(default_factory=list)
    #: transformer blocks (the model's `_no_split_modules` classes, or the given ones)
    block_units: list[str] = field(default_factory=list)
    #: the root module always becomes a unit
    root: str = ""

    def __str__(self) -> str:
        return (
            f"bf16_full_train FSDP2 units: {len(self.fp32_units)} fp32 unit(s) "
            f"({', '.join('+'.join(u) for u in self.fp32_units[:3])}{', ...' if len(self.fp32_units) > 3 else ''}), "
            f"{len(self.block_units)} block unit(s), and the root."
        )


def _trainable_float_params(module: nn.Module, recurse: bool) -> list[torch.Tensor]:
    return [p for p in module.parameters(recurse=recurse) if p.requires_grad and p.is_floating_point()]


def plan_bf16_full_train_sharding(
    model: nn.Module, block_classes: Iterable[type] | None = None, dtype: torch.dtype | None = None
) -> ShardingPlan:
    """
    Decides the FSDP2 units of a model cast for pure bf16 training, without sharding anything: each module that
    directly holds trainable parameters of another dtype than `dtype` (fp32 embeddings, norms, `_keep_in_fp32_modules`),
    together with the modules sharing a tensor with it (tied embeddings), is a unit; then each module of
    `block_classes`; then the root. Raises a `ValueError` naming the module when a unit would mix dtypes.

    Args:
        model (`nn.Module`): The model, after [`~integrations.pure_bf16.cast_model_for_bf16_full_train`].
        block_classes (iterable of `type`, *optional*): Defaults to the classes named by `model._no_split_modules`.
        dtype (`torch.dtype`, *optional*, defaults to `torch.bfloat16`): The dtype of the trained weights.
    """
    import torch

    dtype = dtype or torch.bfloat16
    names = {module: name for name, module in model.named_modules(remove_duplicate=False)}
    if block_classes is None:
        wanted = set(getattr(model, "_no_split_modules", None) or [])
        block_classes = {type(m) for m in model.modules() if type(m).__name__ in wanted}
    block_classes = tuple(block_classes)

    groups = _other_dtype_groups(model, dtype)
    order = {module: i for i, module in enumerate(names)}
    plan = ShardingPlan(root=names.get(model, ""))
    for members in groups.values():
        members.sort(key=order.__getitem__)
        dtypes = {p.dtype for m in members for p in _trainable_float_params(m, recurse=True)}
        if len(dtypes) > 1:
            raise ValueError(
                f"bf16_full_train with FSDP2: module(s) {', '.join(names[m] or '<root>' for m in members)} hold "
                f"trainable parameters of several dtypes ({', '.join(sorted(str(d) for d in dtypes))}), and FSDP2 needs "
                f"one dtype per unit. Use `bf16_full_train_cast_all=True`, or keep whole leaf modules in fp32."
            )
        if model in members:
            raise ValueError(
                "bf16_full_train with FSDP2: the root module holds fp32 trainable parameters directly; FSDP2 needs "
                "them in a submodule of their own, or `bf16_full_train_cast_all=True`."
            )
        plan.fp32_units.append([names[m] for m in members])

    fp32_modules = {m for members in groups.values() for m in members}
    for module in model.modules():
        if module is model or not isinstance(module, block_classes) or module in fp32_modules:
            continue
        plan.block_units.append(names[module])
    return plan


def _other_dtype_groups(model: nn.Module, dtype: torch.dtype) -> dict[nn.Module, list[nn.Module]]:
    """
    The modules that directly own trainable tensors of another dtype than `dtype`, grouped when they share a tensor
    (union-find over tensors), each group under one of its modules.
    """
    owners: dict[int, list[nn.Module]] = {}
    for module in model.modules():
        for param in module.parameters(recurse=False):
            if param.requires_grad and param.is_floating_point() and param.dtype != dtype:
                owners.setdefault(id(param), []).append(module)
    parent: dict[nn.Module, nn.Module] = {}

    def find(m):
        while parent.get(m, m) is not m:
            m = parent[m]
        return m

    for modules in owners.values():
        for m in modules:
            parent.setdefault(m, m)
        for m in modules[1:]:
            parent[find(m)] = find(modules[0])
    groups: dict[nn.Module, list[nn.Module]] = {}
    for m in parent:
        groups.setdefault(find(m), []).append(m)
    return groups


def fully_shard_for_bf16_full_train(
    model: nn.Module,
    *,
    mesh: Any = None,
    reshard_after_forward: bool | int = True,
    offload_policy: Any = None,
    reduce_dtype: torch.dtype | None = None,
    block_classes: Iterable[type] | None = None,
    ignored_params: set | None = None,
) -> ShardingPlan:
    """
    Shards a model cast for pure-bf16 training with FSDP2 (`fully_shard`), keeping its dtypes: bf16 weights stay bf16
    (no fp32 upcast, no `param_dtype` cast), fp32 embeddings and norms stay fp32 in units of their own, and gradients
    are reduce-scattered in fp32 (see [`bf16_full_train_mp_policy`]). Requires an initialised process group.

    Args:
        model (`nn.Module`): The model, after [`~integrations.pure_bf16.cast_model_for_bf16_full_train`].
        mesh (`DeviceMesh`, *optional*): The data-parallel mesh; `fully_shard`'s default (all ranks) if `None`.
        reshard_after_forward (`bool` or `int`, *optional*, defaults to `True`): Passed to `fully_shard` for the
            block units (`True`: ZeRO-3-like; `False`: ZeRO-2-like); the fp32 units and the root use FSDP2's default.
        offload_policy (`OffloadPolicy`, *optional*): Passed to `fully_shard`.
        reduce_dtype (`torch.dtype`, *optional*, defaults to `torch.float32`): The reduce-scatter dtype.
        block_classes (iterable of `type`, *optional*): The block classes; defaults to `model._no_split_modules`.
        ignored_params (`set`, *optional*): Parameters FSDP2 leaves alone.

    Returns:
        [`ShardingPlan`]: The units created.
    """
    from torch.distributed.fsdp import FSDPModule, OffloadPolicy, fully_shard

    plan = plan_bf16_full_train_sharding(model, block_classes)
    modules = dict(model.named_modules(remove_duplicate=False))
    common = {"mesh": mesh, "mp_policy": bf16_full_train_mp_policy(reduce_dtype)}
    common["offload_policy"] = offload_policy if offload_policy is not None else OffloadPolicy()
    if ignored_params:
        common["ignored_params"] = set(ignored_params)
    for unit in plan.fp32_units:
        members = [modules[name] for name in unit]
        if not all(isinstance(m, FSDPModule) for m in members):
            fully_shard(members if len(members) > 1 else members[0], **common)
    for name in plan.block_units:
        if not isinstance(modules[name], FSDPModule):
            fully_shard(modules[name], reshard_after_forward=reshard_after_forward, **common)
    if not isinstance(model, FSDPModule):
        fully_shard(model, **common)
    return plan


def fsdp2_sharding_kwargs(accelerator: Any, model: nn.Module) -> dict[str, Any]:
    """
    The arguments of [`fully_shard_for_bf16_full_train`] from accelerate's resolved FSDP2 plugin (built from
    `TrainingArguments.fsdp_config` or an `accelerate launch` config), as accelerate's own `fsdp2_prepare_model` reads
    them: `reshard_after_forward`, `cpu_offload`, the device mesh, `ignored_modules`, and the block classes of the
    transformer-based auto-wrap policy (`transformer_cls_names_to_wrap`, else the model's `_no_split_modules`). A
    size-based or missing auto-wrap policy shards no blocks separately (the root holds them).

    Does not need a process group: tests call it on the CPU with a real `FullyShardedDataParallelPlugin`.
    """
    import functools

    plugin = fsdp_plugin_of(accelerator)
    if plugin is None:
        raise ValueError("fsdp2_sharding_kwargs needs an accelerator with an FSDP plugin.")
    kwargs: dict[str, Any] = {
        "reshard_after_forward": getattr(plugin, "reshard_after_forward", True),
        "offload_policy": getattr(plugin, "cpu_offload", None),
    }
    mesh = getattr(accelerator, "torch_device_mesh", None)
    if mesh is not None:
        kwargs["mesh"] = mesh[tuple(accelerator.parallelism_config.fsdp_dim_names)]

    policy = getattr(plugin, "auto_wrap_policy", None)
    func = policy.func if isinstance(policy, functools.partial) else policy
    block_names: list[str] = []
    if getattr(func, "__name__", "") == "transformer_auto_wrap_policy":
        names = getattr(plugin, "transformer_cls_names_to_wrap", None) or getattr(model, "_no_split_modules", None)
        block_names = [name for name in (names or []) if name]
    found = {type(m).__name__: type(m) for m in model.modules()}
    missing = [name for name in block_names if name not in found]
    if missing:
        raise ValueError(
            f"FSDP transformer_layer_cls_to_wrap names {', '.join(missing)}, not found in {type(model).__name__}. "
            f"Valid block classes: {', '.join(sorted(set(getattr(model, '_no_split_modules', None) or [])))}."
        )
    kwargs["block_classes"] = [found[name] for name in block_names]

    ignored = getattr(plugin, "ignored_modules", None)
    if ignored is not None:
        from accelerate.utils.fsdp_utils import get_parameters_from_modules

        kwargs["ignored_params"] = get_parameters_from_modules(ignored, model, accelerator.device)
    return kwargs


def shard_for_bf16_full_train_with_accelerate(model: nn.Module, accelerator: Any) -> ShardingPlan | None:
    """
    The `Trainer`'s FSDP2 step of `bf16_full_train`: shards the cast model with the plugin's settings before
    accelerate prepares it (so `fsdp2_prepare_model` finds an FSDP module and skips its fp32 upcast), records the
    policy used on the plugin, so that the accelerate state says what the run does, and applies the run's bf16
    autocast to the forward (see [`apply_accelerate_autocast`]).

    Returns:
        [`ShardingPlan`], or `None` without an FSDP2 plugin.
    """
    plugin = fsdp_plugin_of(accelerator)
    if plugin is None:
        return None
    check_bf16_full_train_accelerator_state(accelerator)
    # Resolve the plugin's auto-wrap policy now: `fully_shard` renames the classes it shards (`FSDPGPTNeoBlock`), and
    # accelerate's preparation, which looks the block classes up by name, would no longer find them. Once resolved,
    # accelerate does not look them up again.
    plugin.set_auto_wrap_policy(model)
    kwargs = fsdp2_sharding_kwargs(accelerator, model)
    configured = getattr(plugin, "mixed_precision_policy", None)
    if getattr(configured, "param_dtype", None) is not None and getattr(accelerator, "is_main_process", True):
        logger.info(
            f"bf16_full_train: FSDP2 mixed-precision policy {configured} replaced by param_dtype=None (the bf16 "
            f"weights are used as they are), reduce_dtype={BF16_FULL_TRAIN_REDUCE_DTYPE}."
        )
    plugin.mixed_precision_policy = bf16_full_train_mp_policy()
    plan = fully_shard_for_bf16_full_train(model, **kwargs)
    apply_accelerate_autocast(model, accelerator)
    if getattr(accelerator, "is_main_process", True):
        logger.info(str(plan))
    return plan


def apply_accelerate_autocast(model: nn.Module, accelerator: Any) -> bool:
    """
    Wraps `model.forward` in the accelerator's autocast, as accelerate's `prepare_model` does for every other
    distributed type. Under FSDP2 accelerate leaves the compute dtype to the FSDP mixed-precision policy and applies no
    autocast, but pure bf16 with `param_dtype=None` needs it: fp32 embeddings and norms meet bf16 weights, and softmax
    and the loss stay in fp32, exactly as in a single-process or DDP run.

    Returns:
        `bool`: Whether the forward was wrapped (not when the run has no native mixed precision, or already wrapped).
    """
    from types import MethodType

    if not getattr(accelerator, "native_amp", False) or "_original_forward" in model.__dict__:
        return False
    from accelerate.utils import convert_outputs_to_fp32, get_mixed_precision_context_manager

    autocast_context = get_mixed_precision_context_manager(accelerator.native_amp, accelerator.autocast_handler)
    model._original_forward = model.forward
    forward = autocast_context(model.forward.__func__)
    model.forward = MethodType(convert_outputs_to_fp32(forward), model)
    return True
