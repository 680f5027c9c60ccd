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
The training stamp: which precision a training run computes in, written into `model.config.trained_precision`.

[`Trainer.train`] calls [`stamp_trained_precision`] once, before its loop, so that every checkpoint and the final save
carry the value. Custom training loops call the same function with their `Accelerator` (or a dtype).

The stamp says what the run computes in, not that it worked. Beside it, `config.trained_precision_run` records the
run: its `status`, `"started"` from the stamp on (what an interrupted run and every checkpoint saved during the run
keep), then, from [`finish_trained_precision_run`] at the end of `train()`, `"finished"` when every training loss
([`note_training_loss`]) and every trainable weight stayed finite, else `"diverged"`; how it computed (`compute`:
`"amp"` for autocast over wider weights, `"pure"` for weights in the run's precision, see [`resolve_run_compute`]);
the optimizer steps that updated the weights ([`note_optimizer_step`]; steps a gradient scaler skipped do not count).
It also records whether a stored fp16 plan was in use.
Only a finished run of at least [`~trained_precision.run_record.MIN_RUN_STEPS`] steps is evidence that its precision
works for the checkpoint, and only for runs of its kind ([`~trained_precision.run_record.RunRecord.proves`]): a
bf16-pretrained T5 whose fp16 fine-tune diverged still warns in fp16, and so does one fine-tuned with fp16 autocast
when it is loaded in fp16.

A stamp is a new run: it removes the publisher's reference runtime a load persisted (`trained_precision_reference`),
which holds only for the publisher's unchanged weights.

Which precision a run has is decided by [`resolve_run_precision`]. With an `Accelerator` whose model is prepared (the
[`Trainer`]'s case, and a custom loop's after `accelerator.prepare`), it is the [`Trainer`]'s own answer,
[`~trainer_utils.get_training_precision`], which the model card's training regime also comes from. Without one (settings
alone, or DeepSpeed before `prepare`), in this order:

0. the precision policy the model carries, when the run set one (pure bf16, `bf16_full_train`, leaves its policy on
   the model it casts);

1. a DeepSpeed config that enables `bf16` or `fp16`, read as DeepSpeed reads `"enabled"` (`true`, `1`, `"yes"`, ...;
   DeepSpeed casts the model itself, so accelerate's setting does not apply);
2. an FSDP mixed-precision policy: its `param_dtype` is the dtype the forward computes in;
3. accelerate's resolved mixed precision (`TrainingArguments(bf16=True/fp16=True)`, `ACCELERATE_MIXED_PRECISION`,
   `accelerate launch --mixed_precision`); `"fp8"` counts as `"bf16"`, because fp8 runs keep bf16 activations;
4. the dtype of the trainable parameters (pure half-precision training, e.g. bf16 weights without autocast);
5. `"fp32"`.

When mixed precision (3.) runs over half-precision weights, the narrower range of the two is the run's precision:
bf16 autocast over fp16 weights is `"fp16"`, since the norms, the embeddings and the residual stream run in the
weights' fp16 and only the autocast matmuls in bf16.
"""

from __future__ import annotations

import dataclasses
import json
import os
import weakref
from typing import Any

from ..utils import logging
from .check import (
    ENV_VAR,
    ERROR,
    IGNORE,
    MODE_ATTRIBUTE,
    REGISTRY_ATTRIBUTE,
    TrainedPrecisionRiskError,
    resolve_check_mode,
)
from .evidence import read_fp16_plan, weights_subject
from .resolver import config_precision, resolve_trained_precision
from .risk import OVERFLOW, Risk
from .run_record import RunRecord, read_run_record
from .vocabulary import (
    BF16,
    FIELD,
    FP16,
    FP32,
    PRECISION_POLICY_ATTR,
    PRETRAINING_FIELD,
    REFERENCE_FIELD,
    RUN_AMP,
    RUN_DIVERGED,
    RUN_FIELD,
    RUN_FINISHED,
    RUN_PURE,
    RUN_STARTED,
    UNKNOWN,
    dtype_options,
    dtype_to_precision,
    normalize_precision,
)


logger = logging.get_logger(__name__)

# accelerate's mixed-precision names that are not precisions of our vocabulary
_NO_MIXED_PRECISION = ("no", "none", "")
_FP8 = "fp8"


# --------------------------------------------------------------------------------------------------------------------
# Which precision this run computes in


def resolve_run_precision(
    model: Any = None,
    *,
    args: Any = None,
    accelerator: Any = None,
    deepspeed_config: Any = None,
) -> str:
    """
    Decides which precision a training run computes in: `"fp32"`, `"bf16"` or `"fp16"`.

    Args:
        model (`torch.nn.Module`, *optional*):
            The model being trained (wrapped or not). Used when no mixed precision applies: the dtype of its trainable
            parameters is the run's precision (pure bf16/fp16 training).
        args ([`TrainingArguments`], *optional*):
            The run's arguments. Their `mixed_precision` (from `bf16`/`fp16` or `ACCELERATE_MIXED_PRECISION`) and their
            DeepSpeed config are read when no `accelerator` is given.
        accelerator (`accelerate.Accelerator`, *optional*):
            The run's accelerator. Its resolved state wins over `args`: it also knows `accelerate launch` settings and
            the DeepSpeed/FSDP plugins. fp16 on the CPU counts as no mixed precision: accelerate applies no autocast
            there, so the run computes in the parameters' dtype.
        deepspeed_config (`dict`, `str` or `HfDeepSpeedConfig`, *optional*):
            A DeepSpeed config (a dict, the path of a JSON file or an `HfDeepSpeedConfig`). Overrides the one found on
            `accelerator` or `args`.

    Returns:
        `str`: the canonical precision.
    """
    return _resolve_run(model, args, accelerator, deepspeed_config)[0]


def resolve_run_compute(
    model: Any = None,
    *,
    args: Any = None,
    accelerator: Any = None,
    deepspeed_config: Any = None,
) -> str:
    """
    Decides how a training run computes in its precision ([`resolve_run_precision`]): `"amp"` when autocast runs the
    matmuls in it over wider weights (accelerate's mixed precision over fp32 weights: the residual stream, the norms
    and the embeddings stay in the weights' dtype), `"pure"` when the weights themselves are in it (half-precision
    weights, DeepSpeed's and FSDP's casts, or an fp32 run). Takes the same arguments.
    """
    return _resolve_run(model, args, accelerator, deepspeed_config)[1]


def _resolve_run(model: Any, args: Any, accelerator: Any, deepspeed_config: Any) -> tuple[str, str]:
    """`(precision, compute)` of a run: see [`resolve_run_precision`] and [`resolve_run_compute`]."""
    # a run whose model carries a precision policy (pure bf16, `bf16_full_train`) computes in the policy's precision
    policy = getattr(unwrap_model_for_config(model), PRECISION_POLICY_ATTR, None) if model is not None else None
    if policy is not None:
        return normalize_precision(policy.name), RUN_PURE

    if deepspeed_config is None and _is_prepared(accelerator):
        # the `Trainer`'s own answer ([`~trainer_utils.get_training_precision`]), for the model as accelerate prepared it
        from ..trainer_utils import get_training_precision

        precision = get_training_precision(unwrap_model_for_config(model), accelerator)[0]
        return precision, RUN_PURE if _parameter_precision(model) in (None, precision) else RUN_AMP

    fallback_mixed_precision = _mixed_precision(args=args, accelerator=accelerator)

    ds_config = deepspeed_config if deepspeed_config is not None else _find_deepspeed_config(args, accelerator)
    if ds_config is not None:
        # DeepSpeed casts the model and runs its own mixed precision; accelerate's setting does not apply.
        precision = _deepspeed_precision(ds_config, fallback_mixed_precision)
        return precision or _parameter_precision(model) or FP32, RUN_PURE

    precision = _fsdp_policy_precision(accelerator)
    if precision is not None:
        return precision, RUN_PURE  # FSDP runs the forward with the parameters cast to `param_dtype`

    mixed_precision = fallback_mixed_precision
    if mixed_precision == FP16 and _device_type(accelerator) == "cpu":
        # accelerate silently skips fp16 autocast on the CPU: nothing runs in fp16 unless the weights are fp16.
        mixed_precision = None
        logger.warning_once(_fp16_on_cpu_message(_parameter_precision(model) or FP32))
    if mixed_precision is not None:
        # autocast only covers the matmuls: the weights' dtype carries the norms and the residual stream
        weights = _parameter_precision(model)
        precision = narrowest_range(mixed_precision, weights)
        return precision, RUN_PURE if weights == precision else RUN_AMP

    return _parameter_precision(model) or FP32, RUN_PURE


def _is_prepared(accelerator: Any) -> bool:
    """
    Whether `accelerator` is a real `Accelerator` whose run is decided: every one but a DeepSpeed one whose model is not
    prepared yet (DeepSpeed casts the model in `prepare`; before it, only its config says what will run).
    """
    if accelerator is None or not hasattr(accelerator, "native_amp"):
        return False
    return (
        _distributed_type(accelerator) != "DEEPSPEED"
        or getattr(accelerator, "deepspeed_engine_wrapped", None) is not None
    )


# precisions by the range of their values, narrowest first
_BY_RANGE = (FP16, BF16, FP32)


def narrowest_range(*precisions: str | None) -> str:
    """
    The precision with the narrowest range among `precisions` (`None` and `"unknown"` are skipped): the one whose
    limits a run that mixes them must respect. `("bf16", "fp16")` is `"fp16"`, `("bf16", "fp32")` is `"bf16"`.
    """
    known = [p for p in precisions if p in _BY_RANGE]
    return min(known, key=_BY_RANGE.index) if known else FP32


def _read_mixed_precision(value: Any) -> str | None:
    """accelerate's mixed-precision name (`"no"`, `"fp16"`, `"bf16"`, `"fp8"`) -> canonical precision or `None`."""
    if value is None:
        return None
    value = str(getattr(value, "value", value)).strip().lower()
    if value in _NO_MIXED_PRECISION:
        return None
    if value == _FP8:
        return BF16
    precision = normalize_precision(value)
    return None if precision in (FP32, UNKNOWN) else precision


def _mixed_precision(args: Any = None, accelerator: Any = None) -> str | None:
    if accelerator is not None:
        return _read_mixed_precision(getattr(accelerator, "mixed_precision", None))
    if args is not None:
        if hasattr(args, "mixed_precision"):
            return _read_mixed_precision(args.mixed_precision)
        if getattr(args, "fp16", False):
            return FP16
        if getattr(args, "bf16", False):
            return BF16
    return _read_mixed_precision(os.environ.get("ACCELERATE_MIXED_PRECISION"))


def _fp16_on_cpu_message(precision: str) -> str:
    return (
        f"fp16 mixed precision was asked for (`fp16=True` or `mixed_precision='fp16'`), but accelerate runs no fp16 "
        f"autocast on the CPU: this run computes in {precision}, the dtype of the model's weights, and is stamped "
        f"`trained_precision={precision!r}`. Run on a GPU for fp16 mixed precision; on the CPU, `bf16=True` has an "
        "autocast."
    )


def _device_type(accelerator: Any) -> str | None:
    device = getattr(accelerator, "device", None) if accelerator is not None else None
    return getattr(device, "type", None)


def _accelerator_state(accelerator: Any) -> Any:
    return getattr(accelerator, "state", None) if accelerator is not None else None


def _distributed_type(accelerator: Any) -> str:
    value = getattr(accelerator, "distributed_type", None) if accelerator is not None else None
    return str(getattr(value, "value", value) or "").upper()


def _find_deepspeed_config(args: Any, accelerator: Any) -> Any:
    if accelerator is not None:
        if _distributed_type(accelerator) != "DEEPSPEED":
            return None
        plugin = getattr(_accelerator_state(accelerator), "deepspeed_plugin", None)
        if plugin is None:
            return None
        return getattr(plugin, "deepspeed_config", None) or getattr(plugin, "hf_ds_config", None)
    if args is not None:
        return getattr(args, "hf_deepspeed_config", None) or getattr(args, "deepspeed", None)
    return None


def _deepspeed_config_dict(ds_config: Any) -> dict:
    if isinstance(ds_config, dict):
        return ds_config
    if isinstance(ds_config, (str, os.PathLike)):
        with open(ds_config, encoding="utf-8") as f:
            return json.load(f)
    config = getattr(ds_config, "config", None)  # HfDeepSpeedConfig / HfTrainerDeepSpeedConfig
    if isinstance(config, dict):
        return config
    raise TypeError(
        f"A DeepSpeed config must be a dict, the path of a JSON file or an `HfDeepSpeedConfig`, got "
        f"{type(ds_config).__name__}."
    )


def _deepspeed_precision(ds_config: Any, fallback_mixed_precision: str | None) -> str | None:
    """
    `"bf16"`/`"fp16"` when the DeepSpeed config enables it, as DeepSpeed reads `"enabled"` ([`_deepspeed_enabled`]);
    `"auto"` follows the mixed precision of the run, as the `Trainer` fills it in. An `"amp"` section (apex AMP, in
    DeepSpeed versions that still have it) is fp16 autocast.
    """
    config = _deepspeed_config_dict(ds_config)
    for precision, keys in ((BF16, ("bf16", "bfloat16")), (FP16, ("fp16", "amp"))):
        for key in keys:
            section = config.get(key)
            if not isinstance(section, dict):
                continue
            enabled = section.get("enabled", False)
            if enabled == "auto":
                enabled = fallback_mixed_precision == precision
            if _deepspeed_enabled(enabled):
                return precision
    return None


# the strings pydantic reads as `True` in a `bool` field, which is how DeepSpeed's precision configs read `"enabled"`
_TRUE_STRINGS = ("1", "on", "t", "true", "y", "yes")


def _deepspeed_enabled(value: Any) -> bool:
    """Whether DeepSpeed reads `value` as `True`: `True`, `1` (or `1.0`) and the strings pydantic accepts for it."""
    if isinstance(value, str):
        return value.strip().lower() in _TRUE_STRINGS
    return value is True or (isinstance(value, (int, float)) and value == 1)


def _fsdp_policy_precision(accelerator: Any) -> str | None:
    """The `param_dtype` of an FSDP mixed-precision policy, when one is set."""
    if accelerator is None or _distributed_type(accelerator) != "FSDP":
        return None
    plugin = getattr(_accelerator_state(accelerator), "fsdp_plugin", None)
    policy = getattr(plugin, "mixed_precision_policy", None)
    if policy is None:
        return None
    if isinstance(policy, str):
        return _read_mixed_precision(policy)
    param_dtype = policy.get("param_dtype") if isinstance(policy, dict) else getattr(policy, "param_dtype", None)
    if param_dtype is None:
        return None
    precision = dtype_to_precision(param_dtype)
    return None if precision == UNKNOWN else precision


def _parameter_precision(model: Any) -> str | None:
    """
    The precision the floating parameters compute in: the narrowest range among the dtypes of all of them, frozen ones
    included (adapters on a frozen bf16 base compute in bf16; fp16 weights with modules kept in fp32 compute in fp16).
    float64 and float8 storage have no name of their own: their activations are at least as wide as fp32's.
    """
    if model is None or not hasattr(model, "parameters"):
        return None
    dtypes = {param.dtype for param in model.parameters() if param.is_floating_point()}
    if not dtypes:
        return None
    return narrowest_range(*(dtype_to_precision(dtype) for dtype in dtypes))


# --------------------------------------------------------------------------------------------------------------------
# The stamp


def unwrap_model_for_config(model: Any) -> Any:
    """Strips DDP/DataParallel/DeepSpeed/FSDP/`torch.compile` and PEFT wrappers, in any nesting, down to the model."""
    from ..trainer_utils import unwrap_peft_model

    try:
        from accelerate.utils import extract_model_from_parallel
    except ImportError:  # pragma: no cover - accelerate is a Trainer dependency
        extract_model_from_parallel = None

    for _ in range(8):
        inner = model
        if extract_model_from_parallel is not None:
            inner = extract_model_from_parallel(inner)
        inner = unwrap_peft_model(inner)
        if inner is model:
            break
        model = inner
    return model


def _peft_model_of(model: Any) -> Any:
    """The `PeftModel` inside DDP/DeepSpeed/FSDP/`torch.compile` wrappers, or `None` when `model` is not one."""
    from .adapter import is_peft_model

    try:
        from accelerate.utils import extract_model_from_parallel
    except ImportError:  # pragma: no cover - accelerate is a Trainer dependency
        extract_model_from_parallel = None
    if extract_model_from_parallel is not None:
        model = extract_model_from_parallel(model)
    return model if is_peft_model(model) else None


def _all_configs(config: Any):
    """The config and its sub-configs (text, vision, encoder, decoder, ...), recursively, each once."""
    from ..configuration_utils import PreTrainedConfig

    seen, stack = set(), [config]
    while stack:
        current = stack.pop()
        if not isinstance(current, PreTrainedConfig) or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for key in getattr(current, "sub_configs", None) or {}:
            stack.append(getattr(current, key, None))


def _training_fix(risk, mode: str) -> str:
    flags = {BF16: "`bf16=True`", FP16: "`fp16=True`", FP32: "no mixed precision"}
    safe = risk.safe_dtypes
    what = "this error" if mode == ERROR else "this warning"
    return (
        f"Train in {' or '.join(safe)} instead ({' or '.join(flags[p] for p in safe)} in `TrainingArguments`, with "
        f"the weights loaded as {dtype_options(safe, '`{}`')}), or set {ENV_VAR}=ignore to silence {what}."
    )


def check_run_precision(model: Any, precision: str, compute: str = RUN_PURE) -> Risk | None:
    """
    Warns, or raises [`~trained_precision.check.TrainedPrecisionRiskError`] in error mode (the model's
    `trained_precision_check`, else `TRANSFORMERS_TRAINED_PRECISION_CHECK`), if training `model` in `precision` is risky for the precision it was
    trained in: its config's `trained_precision`, else the registry's row for its Hub id, weighed against the evidence
    that `precision` works for it ([`~trained_precision.resolver.TrainedPrecisionInfo.assess`]).

    One level per kind of message: overflow risks (a bf16- or fp32-trained model fine-tuned in fp16: NaN losses) warn
    once per model and pair, and raise in error mode. Precision-loss risks (an fp32-trained model fine-tuned with bf16
    mixed precision) are logged at info level in every mode: mixed precision keeps fp32 master weights and
    fine-tuning adapts. A risk that evidence overrides is logged at info level, with the evidence.

    Args:
        model (`PreTrainedModel`): the unwrapped model, with a `config`.
        precision (`str`): the run's precision, as [`resolve_run_precision`] decides it.
        compute (`str`, *optional*, defaults to `"pure"`): how the run computes in it, as [`resolve_run_compute`]
            decides it: evidence from an earlier autocast (`"amp"`) run covers only another `"amp"` run.

    Returns:
        The [`~trained_precision.risk.Risk`] found, or `None` when the run is safe or the trained precision unknown.
    """
    # the mode the model was loaded with (`trained_precision_check`), else the environment's
    mode = resolve_check_mode(getattr(model, MODE_ATTRIBUTE, None))
    config = getattr(model, "config", None)
    info = resolve_trained_precision(
        config,
        persisted_from=getattr(model, "__dict__", {}).get(REGISTRY_ATTRIBUTE),
        subject=weights_subject(model),  # a finished run's evidence is bound to the weights it ended on
    )
    assessment = info.assess(precision, model_class=type(model), compute=compute)
    risk = assessment.risk
    if assessment.prior is None or mode == IGNORE:
        return risk
    name = getattr(config, "name_or_path", None) or type(model).__name__
    prior = assessment.prior
    head = f"Model '{name}' was trained in {prior.trained} ({info.describe()})"
    if risk is None:
        logger.info_once(f"{head}, and training it in {prior.runtime} is not risky: {assessment.evidence.describe()}.")
        return None
    reason = risk.reason
    if assessment.dropped:
        reason += f" ({assessment.dropped.rstrip('.')})"
    if assessment.mitigation is not None:
        reason += f"; {assessment.mitigation.detail}"
    how = " mixed precision (autocast)" if compute == RUN_AMP else ""
    message = f"{head} but is being trained in {risk.runtime}{how}: {reason}. {_training_fix(risk, mode)}"
    if risk.kind != OVERFLOW:
        logger.info_once(message)
    elif mode == ERROR:
        raise TrainedPrecisionRiskError(message, risk, name, info.source)
    else:
        logger.warning_once(message)
    return risk


def stamp_trained_precision(model: Any, accelerator_or_dtype: Any = None, *, check: bool = True) -> str | None:
    """
    Records the precision a training run computes in as `model.config.trained_precision` (and on every sub-config), so
    that every checkpoint saved from now on carries it. The [`Trainer`] calls it at the start of `train()`; call it
    yourself in a custom training loop, once, before the first save.

    Before stamping, it warns if the run's precision is risky for the precision the model was trained in (a
    bf16-pretrained T5 fine-tuned in fp16 overflows), see [`check_run_precision`].

    Args:
        model (`torch.nn.Module`):
            The model, possibly wrapped by DDP, DeepSpeed, FSDP, `torch.compile` or PEFT. A model without a
            `PreTrainedConfig` is skipped silently.
        accelerator_or_dtype (`accelerate.Accelerator`, `torch.dtype` or `str`, *optional*):
            Where the precision comes from: an `Accelerator` (its mixed precision, DeepSpeed or FSDP settings, else the
            trainable parameters' dtype, see [`resolve_run_precision`]), or the precision itself (`torch.bfloat16`,
            `"bf16"`, `"bf16-mixed"`, ...). `None` looks at `ACCELERATE_MIXED_PRECISION`, then the parameters.
        check (`bool`, *optional*, defaults to `True`):
            Whether to warn when the run's precision is risky for the model's trained precision.

    Returns:
        `str` or `None`: the stamped precision, `None` when the model has no config to stamp.

    Example:

    ```python
    accelerator = Accelerator(mixed_precision="bf16")
    model, optimizer, dataloader = accelerator.prepare(model, optimizer, dataloader)
    stamp_trained_precision(model, accelerator)  # model.config.trained_precision == "bf16"
    train(model, optimizer, dataloader)  # your loop
    accelerator.unwrap_model(model).save_pretrained("out")  # config.json: "trained_precision": "bf16"
    ```
    """
    inner = unwrap_model_for_config(model)
    configs = list(_all_configs(getattr(inner, "config", None)))
    if not configs:
        return None

    precision, compute = _stamped_run(inner, accelerator_or_dtype)
    peft_model = _peft_model_of(model)
    if peft_model is not None:
        # the adapter's record keeps the base's lineage as it is before the base's config is stamped
        from .adapter import start_adapter_run

        mixed = _adapter_mixed_precision(accelerator_or_dtype)
        start_adapter_run(peft_model, precision, base=inner, mixed_precision=mixed)
    if check:
        check_run_precision(inner, precision, compute)
    record = RunRecord(RUN_STARTED, compute, 0, 0)
    # read before anything changes the configs: whether this run keeps a stored fp16 plan's modules in fp32
    if precision == FP16 and any(read_fp16_plan(config) is not None for config in configs):
        record = dataclasses.replace(record, fp16_plan=True)
    for config in configs:
        _record_stage(config, precision, inner)
        if precision == FP32:
            # fp32 is never a risky runtime, so an fp32 run's record would be evidence for nothing: a plain run writes
            # none (and an earlier run's record no longer describes the latest run)
            vars(config).pop(RUN_FIELD, None)
        else:
            setattr(config, RUN_FIELD, record.to_dict())
        # a new run changes the weights: the publisher's reference runtime no longer holds for them
        vars(config).pop(REFERENCE_FIELD, None)
    _RUNS[inner] = _RunState()
    if precision == FP32:
        return precision  # a plain run logs nothing upstream does not
    why = ""
    if _mixed_precision(accelerator=accelerator_or_dtype) == FP16 and _device_type(accelerator_or_dtype) == "cpu":
        why = " (fp16 mixed precision asked for on the CPU, where accelerate runs no fp16 autocast)"
    logger.info(f"Stamped `trained_precision={precision!r}` on the config of {type(inner).__name__}{why}.")
    return precision


def _stamped_run(model: Any, accelerator_or_dtype: Any) -> tuple[str, str]:
    """
    The precision [`stamp_trained_precision`] stamps and how the run computes in it, from an `Accelerator`, a given
    precision (which cannot be `"unknown"`) or, with `None`, the environment and the parameters.
    """
    if accelerator_or_dtype is None or isinstance(accelerator_or_dtype, str) or _is_dtype(accelerator_or_dtype):
        if accelerator_or_dtype is None:
            precision, compute = _resolve_run(model, None, None, None)
        else:
            precision = normalize_precision(accelerator_or_dtype)
            compute = _given_compute(accelerator_or_dtype, precision, model)
        if precision == UNKNOWN:
            raise ValueError("Cannot stamp 'unknown' as a trained precision: pass 'fp32', 'bf16' or 'fp16'.")
        return precision, compute
    return _resolve_run(model, None, accelerator_or_dtype, None)


def _adapter_mixed_precision(accelerator_or_dtype: Any) -> str | None:
    """The mixed precision of an adapter's run: an `Accelerator`'s autocast (none for fp16 on the CPU)."""
    if accelerator_or_dtype is None or isinstance(accelerator_or_dtype, str) or _is_dtype(accelerator_or_dtype):
        return None
    mixed = _mixed_precision(accelerator=accelerator_or_dtype)
    if mixed == FP16 and _device_type(accelerator_or_dtype) == "cpu":
        return None  # accelerate applies no fp16 autocast on the CPU
    return mixed


def _given_compute(value: Any, precision: str, model: Any) -> str:
    """
    How a run whose precision was given (a dtype or a name) computes: Lightning's `"bf16-mixed"` and Composer's
    `"amp_bf16"` are autocast, `"bf16-true"` is pure; otherwise the run is pure when the trainable weights are in
    `precision` (or when there are none to look at), autocast over wider weights when they are not.
    """
    if isinstance(value, str):
        name = value.strip().lower()
        if "mixed" in name or name.startswith("amp"):
            return RUN_AMP
        if name.endswith("true"):
            return RUN_PURE
    weights = _parameter_precision(model)
    return RUN_PURE if weights in (None, precision) else RUN_AMP


class _RunState:
    """
    What a stamped run has noted so far, in O(1) per step: whether every loss was finite, and its optimizer steps.

    The losses are folded into one 0-dim fp32 tensor on the loss's device with a single in-place `add_(loss, alpha=0)`
    per step: it stays 0 while every loss is finite and becomes NaN for good once one is inf or NaN (`0 * inf` is
    NaN), with no device synchronisation and no growth (a plain sum of fp16 losses could overflow). It is read once,
    by [`finish_trained_precision_run`].
    """

    __slots__ = ("losses", "max_tokens", "optimizer_steps", "skipped_steps")

    def __init__(self):
        self.losses = None
        self.max_tokens = None
        self.optimizer_steps = 0
        self.skipped_steps = 0

    def note_inputs(self, inputs: Any) -> None:
        """The longest sequence of a batch (the last dimension of its token ids or embeddings' second): O(1)."""
        longest = 0
        for key in _LENGTH_INPUTS:
            value = inputs.get(key) if hasattr(inputs, "get") else None
            shape = getattr(value, "shape", None)
            if shape is not None and len(shape) >= 2:
                longest = max(longest, int(shape[1]))
        if longest:
            self.max_tokens = max(self.max_tokens or 0, longest)

    def note_loss(self, loss: Any) -> None:
        if loss.requires_grad:
            loss = loss.detach()  # an in-place add of a graph tensor would keep every step's graph alive
        if loss.dim():
            loss = loss.mul(0).sum()  # per replica or per token: NaN if any is inf/NaN, else 0 (no overflow)
        losses = self.losses
        if losses is None:
            import torch

            losses = self.losses = torch.zeros((), dtype=torch.float32, device=loss.device)
        elif loss.device != losses.device:
            loss = loss.to(losses.device)
        losses.add_(loss, alpha=0)

    def losses_finite(self) -> bool:
        """Whether every noted loss was finite (one device synchronisation, at the end of the run)."""
        return self.losses is None or bool(self.losses.isfinite())


# the inputs whose second dimension is a sequence length the model sees
_LENGTH_INPUTS = ("input_ids", "inputs_embeds", "decoder_input_ids", "decoder_inputs_embeds", "labels")
# the model whose config the run stamped (unwrapped) -> the state of that run
_RUNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# a wrapper the per-step calls were given (PEFT, DDP, `torch.compile`) -> a weak reference to the model inside it,
# unwrapped once: the Trainer passes the same `self.model` at every step, and unwrapping (accelerate's
# `extract_model_from_parallel` reads package metadata) costs more than a small model's step
_UNWRAPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _run_state(model: Any) -> _RunState:
    """The state of the run on `model` (wrapped or not), created when none was stamped; O(1) after the first call."""
    state = _RUNS.get(model)
    if state is not None:
        return state
    inner_ref = _UNWRAPPED.get(model)
    inner = inner_ref() if inner_ref is not None else None
    if inner is None:
        inner = unwrap_model_for_config(model)
        _UNWRAPPED[model] = weakref.ref(inner)
    state = _RUNS.get(inner)
    if state is None:
        state = _RUNS[inner] = _RunState()
    return state


def note_training_loss(model: Any, loss: Any, inputs: Any = None) -> None:
    """
    Notes one training loss of the run stamped on `model`, and the longest sequence of its batch, for
    [`finish_trained_precision_run`]. The [`Trainer`] calls it after every `training_step`. It costs one in-place
    tensor op on the loss's device and never synchronises; the model is unwrapped once, on the first call, not at
    every step.

    Args:
        model (`torch.nn.Module`): the model being trained (wrapped or not).
        loss (`torch.Tensor`): the step's loss.
        inputs (`dict`, *optional*): the step's batch (`input_ids`, `inputs_embeds`, ...): the run is evidence only up
            to the longest sequence it saw, so a run whose batches were never given is no evidence.
    """
    import torch

    state = _run_state(model)
    if isinstance(loss, torch.Tensor):
        state.note_loss(loss)
    if inputs is not None:
        state.note_inputs(inputs)


def note_optimizer_step(model: Any, skipped: Any = False) -> None:
    """
    Notes one optimizer step of the run stamped on `model`, for [`finish_trained_precision_run`]: only steps that
    updated the weights count towards the [`~trained_precision.run_record.MIN_RUN_STEPS`] a run needs to be evidence.
    The [`Trainer`] calls it after every `optimizer.step()`.

    Args:
        model (`torch.nn.Module`): the model being trained (wrapped or not).
        skipped (`bool`, `accelerate.Accelerator` or an accelerate optimizer, *optional*, defaults to `False`):
            whether a gradient scaler skipped the step (its gradients held an inf/NaN), or the object that knows it
            (`Accelerator.optimizer_step_was_skipped`, `AcceleratedOptimizer.step_was_skipped`). With a
            `torch.amp.GradScaler` in a custom loop, the step was skipped when `scaler.update()` lowered the scale:

            ```python
            scale = scaler.get_scale()
            scaler.step(optimizer)
            scaler.update()
            note_optimizer_step(model, skipped=scaler.get_scale() < scale)
            ```
    """
    if not isinstance(skipped, bool):
        for attribute in ("optimizer_step_was_skipped", "step_was_skipped"):
            if hasattr(skipped, attribute):
                skipped = getattr(skipped, attribute)
                break
    state = _run_state(model)
    if skipped:
        state.skipped_steps += 1
    else:
        state.optimizer_steps += 1


def finish_trained_precision_run(model: Any) -> str | None:
    """
    Records how the run stamped on `model` ended, in `config.trained_precision_run` (and on every sub-config): status
    `"finished"` when every loss noted with [`note_training_loss`] and every trainable weight is finite, else
    `"diverged"` (with a warning: the checkpoint is then no evidence that its precision works), and the optimizer
    steps noted with [`note_optimizer_step`]. The [`Trainer`] calls it when its loop ends; call it at the end of a
    custom loop, after [`stamp_trained_precision`].

    Returns:
        `str` or `None`: the status written, `None` when the model has no stamped config.
    """
    import torch

    inner = unwrap_model_for_config(model)
    configs = [c for c in _all_configs(getattr(inner, "config", None)) if getattr(c, RUN_FIELD, None) is not None]
    peft_model = _peft_model_of(model)
    state = _RUNS.pop(inner, None) or _RunState()
    if not configs and peft_model is None:  # nothing stamped, or a plain fp32 run (which records nothing)
        return None
    finite = state.losses_finite()
    if finite:
        finite = all(
            bool(torch.isfinite(p.detach()).all()) for p in inner.parameters() if p.requires_grad and p.numel()
        )
    status = RUN_FINISHED if finite else RUN_DIVERGED
    if peft_model is not None:
        from .adapter import finish_adapter_run

        finish_adapter_run(
            peft_model,
            status,
            steps=state.optimizer_steps,
            bind=lambda compute: _run_binding(inner, compute, state.max_tokens),
        )
    if not configs:
        return status
    started = read_run_record(configs[0]) or RunRecord(RUN_STARTED)
    record = dataclasses.replace(
        started, status=status, optimizer_steps=state.optimizer_steps, skipped_steps=state.skipped_steps
    )
    if finite and record.compute is not None:
        record = dataclasses.replace(record, binding=_run_binding(inner, record.compute, state.max_tokens))
    for config in configs:
        setattr(config, RUN_FIELD, record.to_dict())
    precision = config_precision(configs[0], FIELD)
    name = getattr(configs[0], "name_or_path", None) or type(inner).__name__
    if finite:
        why_not = record.why_not_evidence(precision, record.compute or RUN_PURE)
        if why_not is None:
            counts = f"evidence that {precision} works for this model"
            if record.compute == RUN_AMP:
                counts += f" in {precision} mixed-precision training (not for {precision} weights)"
        else:
            counts = f"not evidence for {precision}: {why_not}"
        logger.info(
            f"The {precision} run of '{name}' finished with finite losses after {record.optimizer_steps} optimizer "
            f"step(s): `{RUN_FIELD}` records it, {counts}."
        )
    else:
        logger.warning(
            f"The {precision} run of '{name}' diverged (a training loss or a weight became inf/NaN): "
            f"`{RUN_FIELD}` records status {status!r}, so {precision} is not counted as working for this model."
        )
    return status


def _run_binding(model: Any, compute: str, max_tokens: int | None) -> dict | None:
    """
    What a finished run ran on ([`~trained_precision.binding.Binding`]): the digest of the weights and config it ended
    on, the longest input it saw and its backend; `None` when the weights are offloaded or sharded (FSDP2, ZeRO-3):
    such a run is no evidence. One digest per run, at its end.
    """
    from .binding import bind

    subject = weights_subject(model)
    return bind(subject.model, compute, max_tokens, subject.backend) if subject is not None else None


def _record_stage(config: Any, precision: str, model: Any) -> None:
    """
    Stamps `precision` on one config and keeps the lineage the risk rules start from, its oldest stage:
    - when the stamp replaces a different known value, the older one is kept as `pretraining_precision` (unless an
      earlier stage is already recorded there), and a note names both: a bf16-pretrained model fine-tuned in fp32 is
      stamped `"fp32"` but still runs safely in bf16;
    - when the model's precision was unknown and its weights were loaded from a checkpoint (a fine-tune, not a run
      from scratch), `pretraining_precision` is written as `"unknown"`: the oldest stage stays unknown, and so does
      the risk, instead of becoming this run's precision (three fp32 steps do not make a model "fp32-trained").
    """
    previous = config_precision(config, FIELD)
    name = getattr(config, "name_or_path", None) or type(model).__name__
    if previous == UNKNOWN and getattr(config, PRETRAINING_FIELD, None) is None and _weights_were_loaded(model):
        setattr(config, PRETRAINING_FIELD, UNKNOWN)
        if resolve_check_mode() != IGNORE:
            logger.info_once(
                f"Model '{name}' has no known trained precision, and this run fine-tunes it in {precision}: its "
                f"checkpoints will say `{FIELD}={precision!r}` and `{PRETRAINING_FIELD}={UNKNOWN!r}`, so its risk in "
                "other precisions stays unknown (the oldest stage decides, and nobody recorded it)."
            )
    elif previous not in (UNKNOWN, precision):
        if getattr(config, PRETRAINING_FIELD, None) is None:
            setattr(config, PRETRAINING_FIELD, previous)
        earliest = config_precision(config, PRETRAINING_FIELD)
        if resolve_check_mode() != IGNORE:
            logger.info_once(
                f"Model '{name}' says `{FIELD}={previous!r}`, and this run trains in {precision}: its checkpoints "
                f"will say `{FIELD}={precision!r}` and keep `{PRETRAINING_FIELD}={earliest!r}`, the stage the risk "
                f"rules start from; {precision} counts as working once the run finishes with finite losses."
            )
    config.trained_precision = precision


def _weights_were_loaded(model: Any) -> bool:
    """
    Whether `model`'s weights came from a checkpoint (`from_pretrained`), not from a random initialisation: upstream's
    loader marks each weight it loaded (or tied to a loaded one) with `_is_hf_initialized`, which this only reads.
    """
    return any(getattr(p, "_is_hf_initialized", False) for p in model.parameters())


def _is_dtype(value: Any) -> bool:
    cls = type(value)
    return cls.__module__ == "torch" and cls.__name__ == "dtype"


__all__ = [
    "finish_trained_precision_run",
    "note_optimizer_step",
    "note_training_loss",
    "resolve_run_compute",
    "resolve_run_precision",
    "stamp_trained_precision",
]
