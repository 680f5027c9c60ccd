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

[`Trainer.train`] calls [`stamp_trained_precision`] once, before its loop, so that every checkpoint carries it; custom
loops call it with their `Accelerator` (or a dtype). `config.trained_precision_run` records the run: `status`
(`"started"`, then from [`finish_trained_precision_run`] `"finished"` when every loss ([`note_training_loss`]) and
trainable weight stayed finite, else `"diverged"`), `compute` (`"amp"`: autocast over wider weights, `"pure"`: weights
in the run's precision), the optimizer steps that updated the weights ([`note_optimizer_step`]) and whether a stored
fp16 plan was in use. Only a finished run of [`~trained_precision.facts.run_record.MIN_RUN_STEPS`] steps is evidence, for
runs of its kind ([`~trained_precision.facts.run_record.RunRecord.proves`]). A stamp drops the publisher's reference runtime.

[`resolve_run_precision`] decides the precision: with an `Accelerator` whose model is prepared, the [`Trainer`]'s own
[`~trainer_utils.get_training_precision`]; otherwise, in this order, the precision policy the model carries (pure
bf16), a DeepSpeed config that enables `bf16` or `fp16` (read as DeepSpeed reads `"enabled"`), an FSDP policy's
`param_dtype`, accelerate's mixed precision (`"fp8"` counts as `"bf16"`) or, over half-precision weights, the narrower
range of the two (bf16 autocast over fp16 weights is `"fp16"`: the residual stream runs in fp16), the trainable
parameters' dtype, `"fp32"`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import weakref
from typing import Any

from ...utils import logging
from ..facts.evidence import read_fp16_plan, weights_subject
from ..facts.resolver import config_precision, resolve_trained_precision
from ..facts.risk import OVERFLOW, Risk
from ..facts.run_record import RunRecord, read_run_record
from ..guard.check import (
    ENV_VAR,
    ERROR,
    IGNORE,
    MODE_ATTRIBUTE,
    REGISTRY_ATTRIBUTE,
    TrainedPrecisionRiskError,
    resolve_check_mode,
)
from ..vocabulary import (
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

# precisions by the range of their values, narrowest first
_BY_RANGE = (FP16, BF16, FP32)
# the strings pydantic reads as `True` in a `bool` field, which is how DeepSpeed's precision configs read `"enabled"`
_TRUE_STRINGS = ("1", "on", "t", "true", "y", "yes")


def resolve_run_precision(
    model: Any = None, *, args: Any = None, accelerator: Any = None, deepspeed_config: Any = None
) -> str:
    """
    Decides which precision a training run computes in (`"fp32"`, `"bf16"` or `"fp16"`, see the module docstring) from
    the `model` (wrapped or not), its `args` ([`TrainingArguments`]), its `accelerator` (whose state wins over `args`;
    fp16 on the CPU counts as no mixed precision: accelerate applies no autocast there) and a `deepspeed_config` (a
    dict, the path of a JSON file or an `HfDeepSpeedConfig`) that overrides the one on `accelerator` or `args`.
    """
    return _resolve_run(model, args, accelerator, deepspeed_config)[0]


def resolve_run_compute(
    model: Any = None, *, args: Any = None, accelerator: Any = None, deepspeed_config: Any = None
) -> str:
    """
    How a run computes in its precision ([`resolve_run_precision`], same arguments): `"amp"` when autocast runs the
    matmuls in it over wider weights (the residual stream, norms and embeddings stay in the weights' dtype), `"pure"`
    when the weights are in it (half-precision weights, DeepSpeed's and FSDP's casts, or an fp32 run).
    """
    return _resolve_run(model, args, accelerator, deepspeed_config)[1]


def _resolve_run(model: Any, args: Any, accelerator: Any, deepspeed_config: Any) -> tuple[str, str]:
    """`(precision, compute)` of a run: see [`resolve_run_precision`] and [`resolve_run_compute`]."""
    policy = getattr(unwrap_model_for_config(model), PRECISION_POLICY_ATTR, None) if model is not None else None
    if policy is not None:
        return normalize_precision(policy.name), RUN_PURE
    # a real `Accelerator` whose run is decided (a DeepSpeed one only once `prepare` cast the model)
    deepspeed = _distributed_type(accelerator) == "DEEPSPEED"
    decided = not deepspeed or getattr(accelerator, "deepspeed_engine_wrapped", None) is not None
    if deepspeed_config is None and hasattr(accelerator, "native_amp") and decided:
        from ...trainer_utils import get_training_precision

        precision = get_training_precision(unwrap_model_for_config(model), accelerator)[0]
        return precision, RUN_PURE if _parameter_precision(model) in (None, precision) else RUN_AMP
    mixed_precision = _mixed_precision(args=args, accelerator=accelerator)
    ds_config = deepspeed_config if deepspeed_config is not None else _find_deepspeed_config(args, accelerator)
    if ds_config is not None:  # DeepSpeed casts the model and runs its own mixed precision
        precision = _deepspeed_precision(ds_config, mixed_precision)
        return precision or _parameter_precision(model) or FP32, RUN_PURE
    precision = _fsdp_policy_precision(accelerator)
    if precision is not None:
        return precision, RUN_PURE  # FSDP runs the forward with the parameters cast to `param_dtype`
    weights = _parameter_precision(model)
    if mixed_precision == FP16 and _device_type(accelerator) == "cpu":
        # accelerate silently skips fp16 autocast on the CPU: nothing runs in fp16 unless the weights are fp16
        mixed_precision = None
        logger.warning_once(
            "fp16 mixed precision was asked for (`fp16=True` or `mixed_precision='fp16'`), but accelerate runs no fp16 "
            f"autocast on the CPU: this run computes in {weights or FP32}, the dtype of the model's weights, and is "
            f"stamped `trained_precision={weights or FP32!r}`. Run on a GPU for fp16 mixed precision; on the CPU, "
            "`bf16=True` has an autocast."
        )
    if mixed_precision is not None:  # autocast only covers the matmuls: the weights carry the residual stream
        precision = narrowest_range(mixed_precision, weights)
        return precision, RUN_PURE if weights == precision else RUN_AMP
    return weights or FP32, RUN_PURE


def narrowest_range(*precisions: str | None) -> str:
    """The narrowest range among `precisions` (`None`, `"unknown"` skipped): `("bf16", "fp16")` is `"fp16"`."""
    known = [p for p in precisions if p in _BY_RANGE]
    return min(known, key=_BY_RANGE.index) if known else FP32


def _read_mixed_precision(value: Any) -> str | None:
    """accelerate's mixed-precision name (`"no"`, `"fp16"`, `"bf16"`, `"fp8"`) -> canonical precision or `None`."""
    if value is None:
        return None
    value = str(getattr(value, "value", value)).strip().lower()
    if value in ("no", "none", ""):
        return None
    precision = BF16 if value == "fp8" else normalize_precision(value)
    return None if precision in (FP32, UNKNOWN) else precision


def _mixed_precision(args: Any = None, accelerator: Any = None) -> str | None:
    if accelerator is not None:
        return _read_mixed_precision(getattr(accelerator, "mixed_precision", None))
    if args is not None:
        if hasattr(args, "mixed_precision"):
            return _read_mixed_precision(args.mixed_precision)
        if getattr(args, "fp16", False) or getattr(args, "bf16", False):
            return FP16 if getattr(args, "fp16", False) else BF16
    return _read_mixed_precision(os.environ.get("ACCELERATE_MIXED_PRECISION"))


def _device_type(accelerator: Any) -> str | None:
    return getattr(getattr(accelerator, "device", None), "type", None)


def _distributed_type(accelerator: Any) -> str:
    value = getattr(accelerator, "distributed_type", None)
    return str(getattr(value, "value", value) or "").upper()


def _find_deepspeed_config(args: Any, accelerator: Any) -> Any:
    if accelerator is not None:
        if _distributed_type(accelerator) != "DEEPSPEED":
            return None
        plugin = getattr(getattr(accelerator, "state", None), "deepspeed_plugin", None)
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
    `"bf16"`/`"fp16"` when the DeepSpeed config enables it, as DeepSpeed reads `"enabled"` (`True`, `1` and the strings
    pydantic reads as `True`); `"auto"` follows the run's mixed precision, as the `Trainer` fills it in. An `"amp"`
    section (apex AMP, in DeepSpeed versions that still have it) is fp16 autocast.
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
            if isinstance(enabled, str):
                enabled = enabled.strip().lower() in _TRUE_STRINGS
            if enabled is True or (isinstance(enabled, (int, float)) and enabled == 1):
                return precision
    return None


def _fsdp_policy_precision(accelerator: Any) -> str | None:
    """The `param_dtype` of an FSDP mixed-precision policy, when one is set."""
    if accelerator is None or _distributed_type(accelerator) != "FSDP":
        return None
    plugin = getattr(getattr(accelerator, "state", None), "fsdp_plugin", None)
    policy = getattr(plugin, "mixed_precision_policy", None)
    if policy is None or isinstance(policy, str):
        return _read_mixed_precision(policy)
    param_dtype = policy.get("param_dtype") if isinstance(policy, dict) else getattr(policy, "param_dtype", None)
    precision = dtype_to_precision(param_dtype) if param_dtype is not None else UNKNOWN
    return None if precision == UNKNOWN else precision


def _parameter_precision(model: Any) -> str | None:
    """
    The precision the floating parameters compute in: the narrowest range among all their dtypes, frozen ones included
    (adapters on a frozen bf16 base compute in bf16); float64 and float8 storage count as fp32.
    """
    if model is None or not hasattr(model, "parameters"):
        return None
    dtypes = {param.dtype for param in model.parameters() if param.is_floating_point()}
    return narrowest_range(*(dtype_to_precision(dtype) for dtype in dtypes)) if dtypes else None


def _extract_from_parallel(model: Any) -> Any:
    """`model` without its DDP/DeepSpeed/FSDP/`torch.compile` wrappers (accelerate's `extract_model_from_parallel`)."""
    try:
        from accelerate.utils import extract_model_from_parallel
    except ImportError:  # pragma: no cover - accelerate is a Trainer dependency
        return model
    return extract_model_from_parallel(model)


def unwrap_model_for_config(model: Any) -> Any:
    """Strips DDP/DataParallel/DeepSpeed/FSDP/`torch.compile` and PEFT wrappers, in any nesting, down to the model."""
    from ...trainer_utils import unwrap_peft_model

    for _ in range(8):
        inner = unwrap_peft_model(_extract_from_parallel(model))
        if inner is model:
            break
        model = inner
    return model


def _peft_model_of(model: Any) -> Any:
    """The `PeftModel` inside DDP/DeepSpeed/FSDP/`torch.compile` wrappers, or `None` when `model` is not one."""
    from ...trainer_utils import _is_peft_model

    model = _extract_from_parallel(model)
    return model if _is_peft_model(model) else None


def _all_configs(config: Any) -> list:
    """The config and its sub-configs (text, vision, encoder, decoder, ...), recursively, each once."""
    from ...configuration_utils import PreTrainedConfig
    from ..configuration import sub_config_items

    if not isinstance(config, PreTrainedConfig):
        return []
    subs = (sub for _, sub in sub_config_items(config) if isinstance(sub, PreTrainedConfig))
    return list({id(c): c for c in (config, *subs)}.values())


def check_run_precision(model: Any, precision: str, compute: str = RUN_PURE) -> Risk | None:
    """
    Warns (or raises [`~trained_precision.guard.check.TrainedPrecisionRiskError`] in the model's or the environment's error
    mode) when training `model` in `precision` (computed as `compute` says, see [`resolve_run_compute`]) is risky for
    the precision it was trained in, weighed against the evidence that `precision` works for it
    ([`~trained_precision.facts.resolver.TrainedPrecisionInfo.assess`]). Overflow risks (a bf16-trained model fine-tuned in
    fp16) warn once per model and pair; precision-loss risks (fp32-trained, bf16 mixed precision: fp32 master weights)
    and risks that evidence overrides are logged at info level. Returns the [`~trained_precision.facts.risk.Risk`] found.
    """
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
    head = f"Model '{name}' was trained in {assessment.prior.trained} ({info.describe()})"
    if risk is None:
        runtime = assessment.prior.runtime
        logger.info_once(f"{head}, and training it in {runtime} is not risky: {assessment.evidence.describe()}.")
        return None
    reason = risk.reason + (f" ({assessment.dropped.rstrip('.')})" if assessment.dropped else "")
    if assessment.mitigation is not None:
        reason += f"; {assessment.mitigation.detail}"
    flags = {BF16: "`bf16=True`", FP16: "`fp16=True`", FP32: "no mixed precision"}
    safe = risk.safe_dtypes
    message = (
        f"{head} but is being trained in {risk.runtime}{' mixed precision (autocast)' if compute == RUN_AMP else ''}: "
        f"{reason}. Train in {' or '.join(safe)} instead ({' or '.join(flags[p] for p in safe)} in "
        f"`TrainingArguments`, with the weights loaded as {dtype_options(safe, '`{}`')}), or set {ENV_VAR}=ignore to "
        f"silence {'this error' if mode == ERROR else 'this warning'}."
    )
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
    that every checkpoint saved from now on carries it, and returns it; first warns if it is risky for the precision the
    model was trained in ([`check_run_precision`], unless `check=False`). `model` may be wrapped (DDP, DeepSpeed, FSDP,
    `torch.compile`, PEFT); one without a `PreTrainedConfig` is skipped (`None` returned). `accelerator_or_dtype` is an
    `Accelerator` (see [`resolve_run_precision`]), the precision itself (`torch.bfloat16`, `"bf16"`, `"bf16-mixed"`, ...)
    or `None` (`ACCELERATE_MIXED_PRECISION`, then the parameters). The [`Trainer`] calls it at the start of `train()`;
    call it in a custom training loop, once, before the first save (see the guide).
    """
    inner = unwrap_model_for_config(model)
    configs = _all_configs(getattr(inner, "config", None))
    if not configs:
        return None
    precision, compute = _stamped_run(inner, accelerator_or_dtype)
    peft_model = _peft_model_of(model)
    if peft_model is not None:  # the adapter's record keeps the base's lineage as it is before the stamp
        from .adapter import start_adapter_run

        given = _is_given(accelerator_or_dtype) or _fp16_on_cpu(accelerator_or_dtype)  # no autocast
        mixed = None if given else _mixed_precision(accelerator=accelerator_or_dtype)
        start_adapter_run(peft_model, precision, base=inner, mixed_precision=mixed)
    if check:
        check_run_precision(inner, precision, compute)
    # read before anything changes the configs: whether this run keeps a stored fp16 plan's modules in fp32
    uses_plan = precision == FP16 and any(read_fp16_plan(config) is not None for config in configs)
    record = RunRecord(RUN_STARTED, compute, 0, 0, fp16_plan=uses_plan)
    for config in configs:
        _record_stage(config, precision, inner)
        if precision == FP32:  # evidence for nothing: a plain run writes no record, and drops an earlier run's
            vars(config).pop(RUN_FIELD, None)
        else:
            setattr(config, RUN_FIELD, record.to_dict())
        vars(config).pop(REFERENCE_FIELD, None)  # a new run changes the weights the publisher's reference ran
    _RUNS[inner] = _RunState()
    if precision != FP32:  # a plain run logs nothing upstream does not
        cpu = _fp16_on_cpu(accelerator_or_dtype)
        why = " (fp16 mixed precision asked for on the CPU, where accelerate runs no fp16 autocast)" if cpu else ""
        logger.info(f"Stamped `trained_precision={precision!r}` on the config of {type(inner).__name__}{why}.")
    return precision


def _is_given(accelerator_or_dtype: Any) -> bool:
    """Whether the run's precision was given (`None`, a name or a `torch.dtype`) rather than an `Accelerator`'s."""
    cls = type(accelerator_or_dtype)
    dtype = cls.__module__ == "torch" and cls.__name__ == "dtype"
    return accelerator_or_dtype is None or isinstance(accelerator_or_dtype, str) or dtype


def _fp16_on_cpu(accelerator: Any) -> bool:
    """Whether `accelerator` asks for fp16 mixed precision on the CPU, where accelerate runs no fp16 autocast."""
    return _mixed_precision(accelerator=accelerator) == FP16 and _device_type(accelerator) == "cpu"


def _stamped_run(model: Any, accelerator_or_dtype: Any) -> tuple[str, str]:
    """The precision [`stamp_trained_precision`] stamps and how the run computes in it (`"unknown"` raises)."""
    given = _is_given(accelerator_or_dtype)
    if accelerator_or_dtype is None or not given:
        precision, compute = _resolve_run(model, None, accelerator_or_dtype, None)
    else:  # Lightning's "bf16-mixed" and Composer's "amp_bf16" are autocast, "bf16-true" is pure; else the weights say
        precision = normalize_precision(accelerator_or_dtype)
        name = str(accelerator_or_dtype).strip().lower() if isinstance(accelerator_or_dtype, str) else ""
        compute = RUN_AMP if "mixed" in name or name.startswith("amp") else RUN_PURE if name.endswith("true") else None
        compute = compute or (RUN_PURE if _parameter_precision(model) in (None, precision) else RUN_AMP)
    if given and precision == UNKNOWN:
        raise ValueError("Cannot stamp 'unknown' as a trained precision: pass 'fp32', 'bf16' or 'fp16'.")
    return precision, compute


@dataclasses.dataclass(slots=True)
class _RunState:
    """
    What a stamped run has noted, in O(1) per step: its longest sequence, its optimizer steps, and its losses folded by
    an in-place `add_(loss, alpha=0)` into a 0-dim fp32 tensor on the loss's device, which becomes NaN for good once a
    loss is inf or NaN (`0 * inf`), with no synchronisation and no overflow; read once, at the end of the run.
    """

    losses: Any = None
    max_tokens: int | None = None
    optimizer_steps: int = 0
    skipped_steps: int = 0

    def note_inputs(self, inputs: Any) -> None:
        """The longest sequence of a batch (the second dimension of its token ids or embeddings): O(1)."""
        shapes = [getattr(inputs.get(key), "shape", None) for key in _LENGTH_INPUTS] if hasattr(inputs, "get") else []
        longest = max((int(shape[1]) for shape in shapes if shape is not None and len(shape) >= 2), default=0)
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


# the inputs whose second dimension is a sequence length the model sees
_LENGTH_INPUTS = ("input_ids", "inputs_embeds", "decoder_input_ids", "decoder_inputs_embeds", "labels")
# the stamped (unwrapped) model -> its run; a wrapper the per-step calls get (PEFT, DDP) -> the model inside, unwrapped
# once: the Trainer passes the same `self.model` at every step, and unwrapping costs more than a small model's step
_RUNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_UNWRAPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _run_state(model: Any) -> _RunState:
    """The state of the run on `model` (wrapped or not), created when none was stamped; O(1) after the first call."""
    state = _RUNS.get(model)
    if state is None:
        inner = (ref := _UNWRAPPED.get(model)) and ref()
        if inner is None:
            inner = unwrap_model_for_config(model)
            _UNWRAPPED[model] = weakref.ref(inner)
        state = _RUNS.get(inner) or _RUNS.setdefault(inner, _RunState())
    return state


def note_training_loss(model: Any, loss: Any, inputs: Any = None) -> None:
    """
    Notes one training loss of the run stamped on `model` (wrapped or not) and the longest sequence of its batch
    `inputs` (a run is evidence only up to the longest sequence it saw), for [`finish_trained_precision_run`]. The
    [`Trainer`] calls it after every `training_step`: one in-place tensor op, no synchronisation.
    """
    import torch

    state = _run_state(model)
    if isinstance(loss, torch.Tensor):
        state.note_loss(loss)
    if inputs is not None:
        state.note_inputs(inputs)


def note_optimizer_step(model: Any, skipped: Any = False) -> None:
    """
    Notes one optimizer step of the run stamped on `model` (wrapped or not), for [`finish_trained_precision_run`]: only
    steps that updated the weights count towards the [`~trained_precision.facts.run_record.MIN_RUN_STEPS`] a run needs to be
    evidence. `skipped` says whether a gradient scaler skipped the step, or is the object that knows
    (`Accelerator.optimizer_step_was_skipped`, `AcceleratedOptimizer.step_was_skipped`); with a `torch.amp.GradScaler`,
    it is `scaler.get_scale() < scale`, `scale` read before `scaler.step(optimizer)`. The [`Trainer`] calls it after
    every `optimizer.step()`.
    """
    if not isinstance(skipped, bool):
        known = [
            getattr(skipped, a) for a in ("optimizer_step_was_skipped", "step_was_skipped") if hasattr(skipped, a)
        ]
        skipped = known[0] if known else skipped
    state = _run_state(model)
    if skipped:
        state.skipped_steps += 1
    else:
        state.optimizer_steps += 1


def finish_trained_precision_run(model: Any) -> str | None:
    """
    Records how the run stamped on `model` ended in `config.trained_precision_run` (and on every sub-config): status
    `"finished"` when every noted loss and every trainable weight is finite, else `"diverged"` (with a warning), and
    the optimizer steps. The [`Trainer`] calls it when its loop ends. Returns the status, `None` when nothing was
    stamped.
    """
    import torch

    inner = unwrap_model_for_config(model)
    configs = [c for c in _all_configs(getattr(inner, "config", None)) if getattr(c, RUN_FIELD, None) is not None]
    peft_model = _peft_model_of(model)
    state = _RUNS.pop(inner, None) or _RunState()
    if not configs and peft_model is None:  # nothing stamped, or a plain fp32 run (which records nothing)
        return None
    finite = state.losses is None or bool(state.losses.isfinite())  # one synchronisation, at the end of the run
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
    _log_finished_run(record, configs[0], type(inner).__name__)
    return status


def _log_finished_run(record: RunRecord, config: Any, model_class: str) -> None:
    """Says how the run ended: whether a finished run is evidence (info), or that it diverged (a warning)."""
    precision = config_precision(config, FIELD)
    name = getattr(config, "name_or_path", None) or model_class
    if record.status == RUN_DIVERGED:
        logger.warning(
            f"The {precision} run of '{name}' diverged (a training loss or a weight became inf/NaN): "
            f"`{RUN_FIELD}` records status {record.status!r}, so {precision} is not counted as working for this model."
        )
        return
    why_not = record.why_not_evidence(precision, record.compute or RUN_PURE)
    amp = (
        f" in {precision} mixed-precision training (not for {precision} weights)" if record.compute == RUN_AMP else ""
    )
    if why_not is None:
        counts = f"evidence that {precision} works for this model{amp}"
    else:
        counts = f"not evidence for {precision}: {why_not}"
    logger.info(
        f"The {precision} run of '{name}' finished with finite losses after {record.optimizer_steps} optimizer "
        f"step(s): `{RUN_FIELD}` records it, {counts}."
    )


def _run_binding(model: Any, compute: str, max_tokens: int | None) -> dict | None:
    """
    What a finished run ran on ([`~trained_precision.facts.binding.Binding`]): the digest of the weights and config it ended
    on, the longest input it saw and its backend; `None` when the weights are offloaded or sharded (FSDP2, ZeRO-3):
    such a run is no evidence. One digest per run, at its end.
    """
    from ..facts.binding import Binding

    subject = weights_subject(model)
    digest = subject.digest() if subject is not None else None
    return Binding(digest, max_tokens, subject.backend, compute).to_dict() if digest is not None else None


def _record_stage(config: Any, precision: str, model: Any) -> None:
    """
    Stamps `precision` on one config, keeping the oldest stage the risk rules start from in `pretraining_precision`:
    the known value it replaces (a bf16-pretrained model fine-tuned in fp32 still runs safely in bf16), or `"unknown"`
    for a fine-tune (weights from a checkpoint) of a model of unknown precision, whose risk then stays unknown.
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
    """Whether `model`'s weights came from a checkpoint: upstream's loader marks each one with `_is_hf_initialized`."""
    return any(getattr(p, "_is_hf_initialized", False) for p in model.parameters())


__all__ = [
    "finish_trained_precision_run",
    "note_optimizer_step",
    "note_training_loss",
    "resolve_run_compute",
    "resolve_run_precision",
    "stamp_trained_precision",
]
