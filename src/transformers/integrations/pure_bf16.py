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
Pure-bf16 training (`TrainingArguments(bf16_full_train=True)`).

The weights themselves are bf16 and the optimizer compensates the rounding (optimi's Kahan summation): 10 bytes of
training state per parameter instead of 16 for fp32 weights + fp32 AdamW, at fp32 quality. Without compensation a bf16
weight loses every update smaller than 2^-8 of its value (bf16 keeps 8 significant bits) and training stalls.

What lives here:

- [`Bf16FullTrainPrecision`]: the run's precision policy: the weights' dtype, the parameter cast, the autocast and
  the name the stamp writes, in one object.
- [`apply_bf16_full_train_args`]: `TrainingArguments.__post_init__` resolves the switch (autocast on, optimi AdamW
  with Kahan summation unless an optimizer was chosen) and refuses the combinations that cannot work.
- [`cast_model_for_bf16_full_train`]: casts the trainable parameters, parameter by parameter (GPT-2's `Conv1D`, fused
  MoE expert weights and custom `nn.Parameter`s included), keeping in fp32 what the model needs there.
- [`check_pure_half_precision_training`]: the warnings, with their numbers, once on the main process.
- [`storage_dtype`]: the dtype that `save_pretrained` records for a model cast by the switch.
- [`training_state_bytes`]: bytes per parameter of weights + gradients + optimizer state, from live tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..trained_precision.vocabulary import BF16, PRECISION_POLICY_ATTR
from ..utils import logging
from .optimi import is_compensated_optimizer
from .pure_bf16_distributed import (
    FSDP1_REFUSAL,
    check_bf16_full_train_accelerator_state,
    check_bf16_full_train_parallelism,
    check_optimizer_for_sharded_params,
    fsdp_plugin_of,
    is_low_bit_optimizer,
    shard_for_bf16_full_train_with_accelerate,
    warn_if_fsdp_not_enabled,
)


if TYPE_CHECKING:
    import torch
    from torch import nn

logger = logging.get_logger(__name__)

#: bf16 keeps 8 significant bits: an update smaller than 2^-8 of a weight can be rounded away.
BF16_UPDATE_FLOOR = 2.0**-8
#: fp16 keeps 11 significant bits: an update smaller than 2^-11 of a weight can be rounded away.
FP16_UPDATE_FLOOR = 2.0**-11
#: `w * (1 - lr * wd)` rounds back to `w` in fp16 whenever `lr * wd` is below half an fp16 step, 2^-12.
FP16_DECAY_FLOOR = 2.0**-12
#: `w * (1 - lr * wd)` rounds back to `w` in bf16 whenever `lr * wd` is below half a bf16 step, 2^-9.
BF16_DECAY_FLOOR = 2.0**-9
#: Above this beta2, decreases of a bf16 second moment are smaller than half a bf16 step late in training.
BF16_MAX_BETA2 = 0.99

_DEFAULT_OPTIM = "adamw_optimi"
_MARK = "_bf16_full_train_summary"


# ---------------------------------------------------------------------------------------------------------------------
# TrainingArguments
# ---------------------------------------------------------------------------------------------------------------------


# The refusals live with the rest of the distributed logic (`pure_bf16_distributed.py`); both names stay importable from here.
FSDP_REFUSAL = FSDP1_REFUSAL


def apply_bf16_full_train_args(args) -> None:
    """
    Resolves `bf16_full_train` in `TrainingArguments.__post_init__`; without it, nothing changes.

    - `optim` at its default (`TrainingArguments.default_optim`: `adamw_torch_fused` on torch >= 2.8) becomes
      `"adamw_optimi"` (Kahan summation): torch's AdamW loses every update smaller than 2^-8 of a bf16 weight. Any
      other `optim` is kept; to train bf16 weights with torch's AdamW anyway, pass `optim="adamw_torch"`. The
      dataclass default itself (what `--help` shows) stays upstream's. When it picks the optimizer, it also picks
      its `adam_beta2`: `TrainingArguments`' 0.999 becomes 0.99 (optimi's own default; above it a bf16 second moment
      stops decreasing late in training), unless another value was given.
    - `bf16_full_train` turns `bf16` autocast on: the fp32-kept embeddings and norms meet bf16 weights, and softmax
      and the loss stay in fp32.
    - It refuses `fp16`, FSDP1, 8-bit optimizers under FSDP2 and DeepSpeed configs that cannot train compensated pure
      bf16, explaining why (see [`~integrations.pure_bf16_distributed.check_bf16_full_train_parallelism`]). DDP, FSDP2
      and DeepSpeed ZeRO 1-3 are supported.

    Args:
        args (`TrainingArguments`): Mutated in place.
    """
    if not getattr(args, "bf16_full_train", False):
        return
    if args.fp16:
        raise ValueError(
            "`bf16_full_train=True` trains bf16 weights and cannot be combined with `fp16=True`; drop `fp16` "
            "(bf16 autocast is turned on for you)."
        )
    if str(getattr(args.optim, "value", args.optim)) == args.default_optim:
        args.optim = _DEFAULT_OPTIM
        beta2 = ""
        if args.adam_beta2 == _field_default(args, "adam_beta2"):
            args.adam_beta2 = BF16_MAX_BETA2
            beta2 = f" and its `adam_beta2={BF16_MAX_BETA2}`"
        logger.info(
            f"bf16_full_train: `optim` left at its default ({args.default_optim}), using optimi AdamW with Kahan "
            f"summation (`optim='{_DEFAULT_OPTIM}'`){beta2}; pass another `optim` to choose."
        )
    check_bf16_full_train_parallelism(args)
    precision_policy(args).configure_args(args)


def _field_default(args, name: str) -> Any:
    """The dataclass default of the field `name` of `args` (`TrainingArguments`), or `None` when it has none."""
    import dataclasses

    for item in dataclasses.fields(args) if dataclasses.is_dataclass(args) else ():
        if item.name == name:
            return item.default
    return None


def check_bf16_full_train_accelerator(args, accelerator, model=None) -> None:
    """
    The same decisions as [`apply_bf16_full_train_args`], on the resolved accelerate state (covers `accelerate launch`
    configs: FSDP1 is refused, FSDP2 passes, a DeepSpeed config is checked and completed for pure bf16), plus, without
    the switch, a warning for a bf16 model under FSDP with mixed precision and one for DeepSpeed's uncompensated
    `bf16_master_weights_and_grads` (see [`~integrations.pure_bf16_deepspeed.warn_if_uncompensated_deepspeed`]). For every run, with or without the switch: one warning when FSDP was asked for but
    accelerate did not enable it (CPU processes run as DDP; see
    [`~integrations.pure_bf16_distributed.warn_if_fsdp_not_enabled`]).

    Args:
        args (`TrainingArguments`): The run's arguments.
        accelerator: The `Trainer`'s `Accelerator` (anything with `.state` and `.mixed_precision`).
        model (`nn.Module`, *optional*): The model, to detect bf16 trainable parameters.
    """
    warn_if_fsdp_not_enabled(args, accelerator)  # FSDP asked for on a CPU: it runs as DDP, say so once
    state = getattr(accelerator, "state", None)
    fsdp = getattr(state, "fsdp_plugin", None) is not None
    deepspeed = getattr(state, "deepspeed_plugin", None) is not None
    mixed_precision = str(getattr(accelerator, "mixed_precision", "no"))
    if getattr(args, "bf16_full_train", False):
        if fsdp or deepspeed:
            check_bf16_full_train_accelerator_state(accelerator)
        return
    if deepspeed:
        from .optimi import OPTIMI_OPTIMIZERS
        from .pure_bf16_deepspeed import warn_if_uncompensated_deepspeed

        compensated = getattr(args.optim, "value", args.optim) in OPTIMI_OPTIMIZERS
        warn_if_uncompensated_deepspeed(args, accelerator, compensated=compensated)
    if fsdp and mixed_precision != "no" and model is not None:
        from .optimi import has_half_precision_trainable_params

        if has_half_precision_trainable_params(model):
            logger.warning_once(
                f"The model has half-precision trainable parameters, but FSDP with mixed_precision="
                f"{mixed_precision!r} upcasts them to fp32 before sharding: this run trains in fp32, not in bf16. "
                f"`bf16_full_train=True` with FSDP2 trains the bf16 weights themselves."
            )


# ---------------------------------------------------------------------------------------------------------------------
# Casting the model
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class Bf16CastSummary:
    """What [`cast_model_for_bf16_full_train`] did, in parameter counts (tied parameters counted once)."""

    bf16_params: int = 0
    fp32_params: int = 0
    other_params: int = 0
    #: parameter name -> why it stays fp32 ("token embeddings", "norm", "_keep_in_fp32_modules", ...)
    kept_fp32: dict[str, str] = field(default_factory=dict)
    #: parameter name -> the other names of the same (tied) tensor
    tied: dict[str, list[str]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.bf16_params + self.fp32_params + self.other_params

    def __str__(self) -> str:
        total = max(self.total, 1)
        reasons: dict[str, list[str]] = {}
        for name, why in self.kept_fp32.items():
            reasons.setdefault(why, []).append(name)
        kept = "; ".join(
            f"{why}: {len(names)} tensor{'s' if len(names) > 1 else ''} ({', '.join(names[:2])}{', ...' if len(names) > 2 else ''})"
            for why, names in reasons.items()
        )
        text = (
            f"bf16_full_train: {self.bf16_params:,} parameters ({100 * self.bf16_params / total:.1f}%) in bfloat16, "
            f"{self.fp32_params:,} ({100 * self.fp32_params / total:.1f}%) in float32"
        )
        if self.other_params:
            text += f", {self.other_params:,} in other dtypes"
        if kept:
            text += f" (kept: {kept})"
        return text + "."


def _keep_patterns(model) -> tuple[list[str], list[str]]:
    strict, plain = set(), set()
    for module in model.modules():
        strict.update(getattr(module, "_keep_in_fp32_modules_strict", None) or [])
        plain.update(getattr(module, "_keep_in_fp32_modules", None) or [])
    return sorted(strict), sorted(plain - strict)


def _matcher(patterns: list[str]):
    if not patterns:
        return None
    from ..core_model_loading import build_glob_alternation  # the matching rule `from_pretrained` uses

    return build_glob_alternation(list(patterns))[0]


def _is_norm(module) -> bool:
    import torch.nn as nn

    norm_types = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase)
    if hasattr(nn, "RMSNorm"):
        norm_types += (nn.RMSNorm,)
    return isinstance(module, norm_types) or "norm" in type(module).__name__.lower()


def cast_model_for_bf16_full_train(
    model: nn.Module, cast_all: bool = False, dtype: torch.dtype | None = None
) -> Bf16CastSummary:
    """
    Casts the trainable floating-point parameters of `model` to bf16, parameter by parameter.

    Kept in fp32 (by default):

    - parameters of the model's `_keep_in_fp32_modules_strict` (always, even with `cast_all`) and
      `_keep_in_fp32_modules`, matched as `from_pretrained` matches them;
    - token embeddings (`get_input_embeddings()`) and every `nn.Embedding`, as optimi's documentation recommends;
    - normalisation weights and biases (a few thousand values; CPU `layer_norm` also refuses bf16 weights with fp32
      inputs).

    Casting by parameter reaches what casting by module type misses: GPT-2's `Conv1D`, fused MoE expert tensors, custom
    `nn.Parameter`s. Tied parameters are decided once per tensor: if any of their names is kept, all are. Buffers and
    frozen parameters are left as they are. `param.data` is replaced, so ties and optimizer references survive.

    A PEFT `PeftModel` (LoRA, ...) has its frozen base cast to bf16 as well (with the same exceptions), and its
    trainable adapter like any trainable weight: bf16, trained with Kahan summation by the switch's optimizer. Measured
    against an fp32 adapter (PEFT's `autocast_adapter_dtype=True`) in `benchmarks/benchmark_peft_bf16.py`, it trained
    as well at 10 instead of 16 bytes per trainable parameter (the guide's page on adapters has the numbers).

    Args:
        model (`nn.Module`): The model, modified in place.
        cast_all (`bool`, *optional*, defaults to `False`): Also cast embeddings, norms and `_keep_in_fp32_modules`.
        dtype (`torch.dtype`, *optional*, defaults to `torch.bfloat16`): The half-precision dtype.

    Returns:
        [`Bf16CastSummary`], also logged as one line.
    """
    import torch

    dtype = dtype or torch.bfloat16
    strict_patterns, plain_patterns = _keep_patterns(model)
    strict_match, plain_match = _matcher(strict_patterns), _matcher(plain_patterns)
    if cast_all:  # only `_keep_in_fp32_modules_strict` stays in fp32
        plain_match, embedding_ids, norm_ids = None, set(), set()
    else:
        embedding_ids, norm_ids = _embedding_and_norm_param_ids(model)

    names_by_tensor: dict[int, list[str]] = {}
    tensors: dict[int, nn.Parameter] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names_by_tensor.setdefault(id(param), []).append(name)
        tensors[id(param)] = param

    from ..trainer_utils import _is_peft_model

    peft = _is_peft_model(model)
    summary = Bf16CastSummary()
    with torch.no_grad():
        for key, param in tensors.items():
            names = names_by_tensor[key]
            if len(names) > 1:
                summary.tied[names[0]] = names[1:]
            # a PeftModel's frozen base is cast too (its trainable adapter like any trainable weight: see the docstring)
            if not param.is_floating_point() or not (param.requires_grad or peft):
                _count_as_is(summary, param, dtype)
                continue
            reason = _keep_reason(key, names, strict_match, plain_match, embedding_ids, norm_ids)
            _cast_param(summary, param, names, reason, dtype)
    setattr(model, _MARK, summary)
    return summary


def _embedding_and_norm_param_ids(model) -> tuple[set[int], set[int]]:
    """The ids of the parameters of the embeddings (every `nn.Embedding` and the input embeddings) and the norms."""
    import torch.nn as nn

    embedding_modules = [m for m in model.modules() if isinstance(m, nn.Embedding)]
    get_input = getattr(model, "get_input_embeddings", None)
    if callable(get_input):
        try:
            input_embeddings = get_input()
        except (NotImplementedError, AttributeError):
            input_embeddings = None
        if isinstance(input_embeddings, nn.Module):
            embedding_modules.append(input_embeddings)
    embedding_ids = {id(p) for m in embedding_modules for p in m.parameters()}
    norm_ids = {id(p) for m in model.modules() if _is_norm(m) for p in m.parameters(recurse=False)}
    return embedding_ids, norm_ids


def _keep_reason(key: int, names: list[str], strict_match, plain_match, embedding_ids, norm_ids) -> str | None:
    """Why a trainable tensor (`names`: all its tied names) stays in fp32, as the summary says it; `None`: cast it."""
    if strict_match is not None and any(strict_match.search(n) for n in names):
        return "_keep_in_fp32_modules_strict"
    if plain_match is not None and any(plain_match.search(n) for n in names):
        return "_keep_in_fp32_modules"
    if key in embedding_ids:
        return "embeddings"
    if key in norm_ids:
        return "norms"
    return None


def _count_as_is(summary: Bf16CastSummary, param, dtype) -> None:
    """Counts a parameter the cast leaves alone (frozen, or not floating point) under the dtype it has."""
    import torch

    if param.dtype == torch.float32:
        summary.fp32_params += param.numel()
    elif param.dtype == dtype:
        summary.bf16_params += param.numel()
    else:
        summary.other_params += param.numel()


def _cast_param(summary: Bf16CastSummary, param, names: list[str], reason: str | None, dtype) -> None:
    """Casts a trainable parameter to fp32 when there is a `reason` to keep it there, else to `dtype`; counts it."""
    import torch

    if reason is not None:
        if param.dtype != torch.float32:
            param.data = param.data.to(torch.float32)
        label = names[0] + (f" (tied: {', '.join(names[1:])})" if len(names) > 1 else "")
        summary.kept_fp32[label] = reason
        summary.fp32_params += param.numel()
    else:
        if param.dtype != dtype:
            param.data = param.data.to(dtype)
        summary.bf16_params += param.numel()


@dataclass(frozen=True)
class Bf16FullTrainPrecision:
    """
    The precision policy of a pure-bf16 run (`bf16_full_train=True`): one object that knows what the run computes in,
    as one of Lightning's precision plugins does (its `"bf16-true"`). [`apply_bf16_full_train_args`] asks it for the
    autocast, [`prepare_model_for_bf16_full_train`] for the parameter cast, and the `Trainer` stamp for the name it
    writes (the cast leaves the policy on the model, under `PRECISION_POLICY_ATTR`).

    Attributes:
        cast_all (`bool`): `bf16_full_train_cast_all`: also cast embeddings, norms and `_keep_in_fp32_modules`.
        name (`str`): The precision the stamp writes in `config.trained_precision`: `"bf16"`.
        mixed_precision (`str`): The autocast the run needs, as accelerate names it: `"bf16"`. fp32-kept embeddings
            and norms meet bf16 weights under it, and softmax and the loss stay in fp32.
    """

    cast_all: bool = False
    name: ClassVar[str] = BF16
    mixed_precision: ClassVar[str] = "bf16"

    @property
    def param_dtype(self) -> torch.dtype:
        """The dtype of the trained weights."""
        import torch

        return torch.bfloat16

    @property
    def compute_dtype(self) -> torch.dtype:
        """The autocast dtype."""
        import torch

        return torch.bfloat16

    def configure_args(self, args) -> None:
        """Turns the autocast on: `args.bf16 = True` (accelerate's `mixed_precision="bf16"`)."""
        if not args.bf16:
            args.bf16 = True

    def convert_module(self, model: nn.Module) -> Bf16CastSummary:
        """Casts the trainable parameters ([`cast_model_for_bf16_full_train`]) and leaves this policy on `model`."""
        summary = cast_model_for_bf16_full_train(model, cast_all=self.cast_all, dtype=self.param_dtype)
        setattr(model, PRECISION_POLICY_ATTR, self)
        return summary

    def forward_context(self, device_type: str = "cpu"):
        """The autocast a forward runs under, for code that runs it outside accelerate (custom loops)."""
        import torch

        return torch.autocast(device_type, dtype=self.compute_dtype)


def precision_policy(args) -> Bf16FullTrainPrecision | None:
    """The precision policy of a run's arguments: [`Bf16FullTrainPrecision`] with `bf16_full_train`, else `None`."""
    if not getattr(args, "bf16_full_train", False):
        return None
    return Bf16FullTrainPrecision(cast_all=bool(getattr(args, "bf16_full_train_cast_all", False)))


def _optimizer_label(args) -> str:
    optim = str(getattr(getattr(args, "optim", None), "value", getattr(args, "optim", None)))
    if optim == _DEFAULT_OPTIM:
        return f"{optim} (optimi AdamW with Kahan summation)"
    return optim


def _under_deepspeed(args, accelerator=None) -> bool:
    if accelerator is not None:
        return getattr(getattr(accelerator, "state", None), "deepspeed_plugin", None) is not None
    from .pure_bf16_distributed import deepspeed_requested

    return deepspeed_requested(args)


def prepare_model_for_bf16_full_train(model: nn.Module | None, args, accelerator=None) -> Bf16CastSummary | None:
    """
    The `Trainer`'s call site: refuses FSDP1 and completes a DeepSpeed config on the resolved accelerate state, then
    casts `model` once (a model from `model_init` is cast when it is created; under DeepSpeed every trainable parameter,
    as ZeRO's flat partitions hold one dtype) and logs the one-line dtype summary on the main process.
    Under FSDP2 it then shards the cast model itself (see
    [`~integrations.pure_bf16_distributed.shard_for_bf16_full_train_with_accelerate`]), so that accelerate's preparation
    does not upcast the bf16 weights to fp32.

    Args:
        model (`nn.Module`): The model to train.
        args (`TrainingArguments`): With `bf16_full_train` and `bf16_full_train_cast_all`.
        accelerator (*optional*): The `Trainer`'s `Accelerator`.

    Returns:
        [`Bf16CastSummary`] or `None` when the switch is off.
    """
    if accelerator is not None:
        check_bf16_full_train_accelerator(args, accelerator, model)
        # bf16 works everywhere but is slow where it is emulated (AVX2-only CPUs, pre-Ampere GPUs): say so, once
        from .bf16_hardware import warn_if_bf16_emulated

        warn_if_bf16_emulated(args, getattr(accelerator, "device", None))
    if model is None or not getattr(args, "bf16_full_train", False):
        return None
    summary = getattr(model, _MARK, None)
    if summary is None:
        policy = precision_policy(args)
        if _under_deepspeed(args, accelerator) and not policy.cast_all:
            # ZeRO flattens each parameter group into one buffer of one dtype, and DeepSpeed casts the module to bf16
            # itself: embeddings and norms are bf16 too, and the summary says so
            policy = Bf16FullTrainPrecision(cast_all=True)
            if getattr(args, "process_index", 0) == 0:
                logger.info(
                    "bf16_full_train with DeepSpeed: every trainable parameter is cast to bf16 (ZeRO's flat bf16 partitions)."
                )
        summary = policy.convert_module(model)
        if getattr(args, "process_index", 0) == 0:
            # the one line that says what the switch did: visible at the default verbosity
            logger.warning(f"{summary} Optimizer: {_optimizer_label(args)}.")
            for name, others in summary.tied.items():
                logger.info(f"bf16_full_train: {name} is tied to {', '.join(others)}; cast once, with the same dtype.")
    if accelerator is not None and fsdp_plugin_of(accelerator) is not None:
        from torch.distributed.fsdp import FSDPModule

        if not isinstance(model, FSDPModule):
            shard_for_bf16_full_train_with_accelerate(model, accelerator)
    return summary


# ---------------------------------------------------------------------------------------------------------------------
# Warnings
# ---------------------------------------------------------------------------------------------------------------------


def _half_params_in(group: dict[str, Any]) -> int:
    import torch

    return sum(p.numel() for p in group["params"] if p.dtype in (torch.bfloat16, torch.float16))


def _beta2(group: dict[str, Any]) -> float | None:
    if "beta2" in group:
        return group["beta2"]
    betas = group.get("betas")
    if isinstance(betas, (tuple, list)) and len(betas) >= 2:
        return float(betas[1])
    return None


def _is_optimi(optimizer) -> bool:
    return any((cls.__module__ or "").split(".")[0] == "optimi" for cls in type(optimizer).__mro__)


def _rounding_hint(optimizer) -> str:
    """The fix for lost updates, in terms of the optimizer in use."""
    if hasattr(optimizer, "bf16_stochastic_round"):  # torchao's low-bit AdamW
        return (
            f'Turn on {type(optimizer).__name__}\'s stochastic rounding: `optim_args="bf16_stochastic_round=true"` '
            "(`bf16_full_train=True` turns it on by itself)."
        )
    if _is_optimi(optimizer):
        return "Turn on its Kahan summation: drop `kahan_sum=false` from `optim_args`."
    return "Use `optim='adamw_optimi'` (Kahan summation, +2 bytes/parameter; the default of `bf16_full_train=True`)."


def _decay_hint(optimizer) -> str:
    if hasattr(optimizer, "bf16_stochastic_round"):
        return (
            'With `optim_args="bf16_stochastic_round=true"` the decay is rounded stochastically and kept on average.'
        )
    if _is_optimi(optimizer):
        return "Keep Kahan summation on: the optimi optimizers then apply decay inside the compensated update."
    return "The optimi optimizers (`optim='adamw_optimi'`, ...) apply decay inside the compensated update."


def _uncompensated_warning(optimizer, half: list, trainable: list, dtype_name: str) -> str:
    """The warning of an optimizer that does not compensate rounding: updates below 2^-8 (fp16: 2^-11) are lost."""
    n_half = sum(p.numel() for p in half)
    n_total = sum(p.numel() for p in trainable)
    # each format's own numbers: bf16 keeps 8 significant bits, fp16 11
    update_floor, update_exp = (BF16_UPDATE_FLOOR, 8) if dtype_name == "bfloat16" else (FP16_UPDATE_FLOOR, 11)
    return (
        f"{n_half:,} of {n_total:,} trainable parameters ({100 * n_half / n_total:.1f}%) are {dtype_name} and the "
        f"optimizer {type(optimizer).__name__} does not compensate rounding: any update smaller than 2^-{update_exp} "
        f"(~{100 * update_floor:.2g}%) of a weight is rounded away, so training stalls as the learning rate decays. "
        + _rounding_hint(optimizer)
    )


def _lost_decay_warning(optimizer, groups: list[dict], lr: float | None, dtype_name: str) -> list[str]:
    """
    The warning, for the first group it applies to, that `lr * weight_decay` is below half a step of the weights'
    format (2^-9 in bf16, 2^-12 in fp16), so an uncompensated decay multiplier rounds back to 1.
    """
    decay_floor, decay_exp = (BF16_DECAY_FLOOR, 9) if dtype_name == "bfloat16" else (FP16_DECAY_FLOOR, 12)
    for group in groups:
        wd = group.get("weight_decay", 0.0) or 0.0
        glr = group.get("lr", lr) or lr
        if wd and glr and _half_params_in(group) and glr * wd < decay_floor:
            return [
                f"learning_rate * weight_decay = {glr:g} * {wd:g} = {glr * wd:.3g} is below 2^-{decay_exp} (~{decay_floor:.3g}): "
                f"multiplying a {dtype_name} weight by (1 - {glr * wd:.3g}) rounds back to the weight, so weight decay "
                f"has no effect on {_half_params_in(group):,} {dtype_name} parameters with {type(optimizer).__name__}. "
                + _decay_hint(optimizer)
            ]
    return []


def _beta2_warning(optimizer, groups: list[dict], dtype_name: str) -> list[str]:
    """
    The warning, for the first group it applies to, that Adam's `beta2 > 0.99` stalls a half-precision moment. Only
    for optimizers whose state has the weights' dtype (torch's, optimi's): a low-bit optimizer (torchao, bitsandbytes)
    keeps quantized state, of which this is not measured.
    """
    if is_low_bit_optimizer(optimizer):
        return []
    for group in groups:
        beta2 = _beta2(group)
        if beta2 is not None and beta2 > BF16_MAX_BETA2 and _half_params_in(group):
            return [
                f"adam_beta2 = {beta2:g} > {BF16_MAX_BETA2} with {dtype_name} optimizer state: once (1 - beta2) is "
                f"below half a {dtype_name} step, the second moment cannot decrease any more and the effective step "
                f"size shrinks. "
                + ("optimi's default is 0.99; " if _is_optimi(optimizer) else "")
                + "Pass `adam_beta2=0.99`."
            ]
    return []


def check_pure_half_precision_training(model, optimizer, args) -> list[str]:
    """
    Warns, once and on the main process, about half-precision (bf16/fp16) trainable parameters that will not train as
    intended, in a `bf16_full_train` run (without the switch the Trainer says and refuses nothing here, as upstream's):

    1. the optimizer does not compensate rounding: updates smaller than 2^-8 of a weight are lost;
    2. `learning_rate * weight_decay` < 2^-9 and the decay is not applied inside a compensated update: the decay
       multiplier rounds back to 1 and weight decay does nothing;
    3. Adam's `beta2 > 0.99` with a half-precision second moment: late in training it can no longer decrease.

    Args:
        model (`nn.Module`): The model being trained.
        optimizer (`torch.optim.Optimizer`): The optimizer that was created.
        args (`TrainingArguments`): The run's arguments.

    Returns:
        `list[str]`: The warnings (also when they were not logged because this is not the main process).
    """
    import torch

    if model is None or optimizer is None or not getattr(args, "bf16_full_train", False):
        return []
    if type(optimizer).__name__ == "DummyOptim":
        # accelerate's placeholder for the optimizer of a DeepSpeed config: DeepSpeed builds the real one, and
        # `warn_if_uncompensated_deepspeed` speaks for it
        return []
    check_optimizer_for_sharded_params(model, optimizer)
    trainable = [p for p in model.parameters() if p.requires_grad]
    half = [p for p in trainable if p.dtype in (torch.bfloat16, torch.float16)]
    if not half:
        return []
    dtype_name = "bfloat16" if any(p.dtype == torch.bfloat16 for p in half) else "float16"
    inner = getattr(optimizer, "optimizer", optimizer)
    compensated = is_compensated_optimizer(inner)
    messages = []
    if compensated is False:
        messages.append(_uncompensated_warning(inner, half, trainable, dtype_name))
    groups = getattr(inner, "param_groups", None) or []
    # torchao computes decoupled decay in fp32 and rounds the result stochastically: compensated whenever that is on
    compensates_decay = compensated and (
        getattr(inner, "_compensate_weight_decay", False) or bool(getattr(inner, "bf16_stochastic_round", False))
    )
    if not compensates_decay:
        messages.extend(_lost_decay_warning(inner, groups, getattr(args, "learning_rate", None), dtype_name))
    messages.extend(_beta2_warning(inner, groups, dtype_name))

    if getattr(args, "process_index", 0) == 0:
        for message in messages:
            logger.warning_once(message)
    return messages


# ---------------------------------------------------------------------------------------------------------------------
# Saving and measuring
# ---------------------------------------------------------------------------------------------------------------------


def storage_dtype(model: nn.Module) -> torch.dtype:
    """
    The dtype `save_pretrained` records in `config.dtype`.

    For every model that [`cast_model_for_bf16_full_train`] did not cast, upstream's choice, unchanged:
    `model.dtype`, the first floating-point parameter's dtype. A model cast for pure-bf16 training keeps its token
    embeddings (usually the first parameter) and norms in fp32 for the optimizer's sake, so `model.dtype` says
    `float32`; for such a model it is `bfloat16`, the dtype of the weights it trained, whatever share of the
    parameters the fp32-kept tensors hold (in a tiny model the embeddings can be most of them). It is the dtype that
    `dtype="auto"` then loads the whole model in, the precision `config.trained_precision` names.

    Only fp32, bf16 and fp16 parameters are counted: a cast model that also stores float8 (or other) weights keeps
    upstream's choice, and so does one without any bf16 parameter left.

    Args:
        model (`nn.Module`): The model about to be saved.

    Returns:
        `torch.dtype`: `model.dtype`, or `torch.bfloat16` for a model cast by `bf16_full_train` that holds bf16
        weights.
    """
    if getattr(model, _MARK, None) is None:
        return model.dtype
    import torch

    from ..trained_precision.vocabulary import PRECISION_DTYPE_NAMES

    dtypes = {param.dtype for param in model.parameters() if param.is_floating_point()}
    if any(str(dtype).replace("torch.", "") not in PRECISION_DTYPE_NAMES for dtype in dtypes):
        return model.dtype
    return torch.bfloat16 if torch.bfloat16 in dtypes else model.dtype


def tensor_storage_bytes(tensor: torch.Tensor, counted: set | None = None) -> int:
    """
    Bytes that `tensor` holds in memory. A tensor subclass that wraps other tensors (torchao's 8-bit and 4-bit optimizer
    states: codes, per-block scales and the quantization map; `DTensor`: its local shard) is measured by the tensors it
    wraps, not by its apparent dtype. Tensors already in `counted` (by storage and offset) are not counted again.

    Args:
        tensor (`torch.Tensor`): A plain tensor or a traceable wrapper subclass.
        counted (`set`, *optional*): Updated in place with the tensors counted.

    Returns:
        `int`: The bytes.
    """
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    if is_traceable_wrapper_subclass(tensor):
        names, _ = tensor.__tensor_flatten__()
        return sum(tensor_storage_bytes(getattr(tensor, name), counted) for name in names)
    if counted is not None:
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tensor.numel())
        if key in counted:
            return 0
        counted.add(key)
    return tensor.numel() * tensor.element_size()


def training_state_bytes(model: nn.Module, optimizer=None, include_grads: bool = True) -> dict[str, float]:
    """
    Bytes per trainable parameter of the training state, measured from live tensors: weights, gradients (as their
    dtype will be; a missing `.grad` counts as one of the weight's dtype) and optimizer state (every tensor in
    `optimizer.state`, Kahan buffers included, quantized states by the codes, scales and maps they hold
    ([`tensor_storage_bytes`]); 0-d step counters ignored).

    Args:
        model (`nn.Module`): The model.
        optimizer (`torch.optim.Optimizer`, *optional*): Its optimizer, after at least one step.
        include_grads (`bool`, *optional*, defaults to `True`): Count gradients.

    Returns:
        `dict` with `weights`, `grads`, `optimizer` and `total`, each in bytes per trainable parameter.
    """
    import torch

    seen: set[int] = set()
    params = []
    for p in model.parameters():
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            params.append(p)
    n = sum(p.numel() for p in params) or 1
    weights = sum(p.numel() * p.element_size() for p in params)
    grads = 0
    if include_grads:
        grads = sum(
            (p.grad.numel() * p.grad.element_size()) if p.grad is not None else p.numel() * p.element_size()
            for p in params
        )
    state_bytes = 0
    if optimizer is not None:
        inner = getattr(optimizer, "optimizer", optimizer)
        counted: set[tuple[int, int, int]] = set()
        for state in inner.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor) and value.dim() > 0:
                    state_bytes += tensor_storage_bytes(value, counted)
    result = {"weights": weights / n, "grads": grads / n, "optimizer": state_bytes / n}
    result["total"] = result["weights"] + result["grads"] + result["optimizer"]
    return result
