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
The loading and casting check: warn, or raise on request, when a model runs in a precision its training makes risky.

`modeling_utils.py` calls into this module from three places: `from_pretrained` (right after the runtime dtype is
resolved, so `dtype="auto"` is checked against what it resolved to), `_from_config`, and `PreTrainedModel._apply`,
which every cast reaches: `.half()`, `.bfloat16()`, `.to(dtype)`, `.type(dtype)`, and the casts of a parent module
(a PEFT model's `.half()`, `nn.ModuleList([model]).to(torch.float16)`, accelerate's `prepare`), which recurse into
`_apply` and never call the model's own `.to`. Only a change of the floating dtype is checked (a device move is not),
once, for the outermost model being cast. `.float()` never warns: fp32 is always safe.

What to do about a risky pair is chosen per call (`from_pretrained(..., trained_precision_check="error")`) or for the
whole process (the environment variable `TRANSFORMERS_TRAINED_PRECISION_CHECK`); the per-call value wins, also for
the later casts of the model that call built (it is recorded on the model, see [`model_construction_scope`]):

- `"warn"` (default): log one warning per model and runtime precision;
- `"error"`: raise [`TrainedPrecisionRiskError`] (not a `ValueError`, so that callers which retry a load on a
  `ValueError`, like `transformers serve`'s model manager, do not swallow it);
- `"ignore"`: do nothing.

A bad value, per call or in the environment variable, raises a `ValueError` that names where it came from and the
valid values, the first time a check needs the mode (every load does, a device move does not): the variable is a
safety switch, and a typo of `"error"` that fell back to `"warn"` would turn error mode off without a word.

The answer comes from [`~trained_precision.resolver.TrainedPrecisionInfo.assess`]: the risk rules' prior, overridden
by evidence that the runtime works for this checkpoint ([`~trained_precision.evidence.find_evidence`]). An overridden risk is said at info level, with the evidence; a remaining risk is a warning (or the
error). A quantized model is judged on every dtype that carries activations: its load dtype (embeddings, norms, the
residual stream: bitsandbytes casts each quantized matmul's output back to its input's dtype) and its compute dtype.

The trained precision comes from `config.trained_precision`. While that is `"unknown"`, the registry of published
checkpoints (`registry.py`) is consulted with the model's Hub id. A local directory has a Hub id only when its path is
a Hub cache snapshot (`.../models--{org}--{name}/snapshots/{revision}`, the layout `huggingface_hub` writes); its
folder name is never taken as a guess.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import os
from typing import Any

from ..utils import logging
from .evidence import read_fp16_plan, weights_subject
from .resolver import (
    Assessment,
    forget_changed_reference,
    persist_registry_precision,
    records_nothing,
    resolve_trained_precision,
)
from .risk import PRECISION_LOSS, Risk
from .vocabulary import FP32, UNKNOWN, dtype_code, dtype_options, dtype_to_precision


logger = logging.get_logger(__name__)

#: The environment variable that sets the mode for the whole process.
ENV_VAR = "TRANSFORMERS_TRAINED_PRECISION_CHECK"

#: The `from_pretrained` / `from_config` keyword that sets the mode for one call.
KWARG = "trained_precision_check"

WARN = "warn"
ERROR = "error"
IGNORE = "ignore"

#: Valid modes, the default first.
CHECK_MODES: tuple[str, ...] = (WARN, ERROR, IGNORE)

#: The attribute on which `from_pretrained` / `_from_config` record a per-call mode on the models they build, so that
#: their later casts follow it rather than the environment variable.
MODE_ATTRIBUTE = "_trained_precision_check"

#: The attribute on which `from_pretrained` records the registry row whose precision it wrote into the config, so that
#: later casts name the registry as the load did (the config is serialised, so the row is kept on the model).
REGISTRY_ATTRIBUTE = "_trained_precision_registry_row"

# The actions the check runs for; they decide the wording of the message and its fix.
LOAD = "load"
FROM_CONFIG = "from_config"
CAST = "cast"
_ACTIONS = (LOAD, FROM_CONFIG, CAST)

# (model name, sub-model, trained precision, runtime precision) already warned about; the sub-model is "" for the
# model itself. See `reset_warning_cache`.
_WARNED: set[tuple[str, str, str, str]] = set()
# The same keys, for the messages said at info level: evidence that overrides a risk, and a precision-loss note. Kept
# apart from `_WARNED`, so that an "informed, not risky" message never silences a later real warning of the model
# (the same path loaded with `use_fp16_plan=False`, or after its plan went stale).
_INFORMED: set[tuple[str, str, str, str, str]] = set()


@dataclasses.dataclass(frozen=True)
class _ConstructionScope:
    mode: str | None
    model_name: str | None
    action: str
    registry_row: Any = None
    deferred: bool = False


# The registry row the latest `from_pretrained` check wrote into its config, with the model name, until its
# construction scope picks it up (see `model_construction_scope`).
_PERSISTED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("trained_precision_persisted", default=None)

# Set while the outermost model of a cast is cast: the `PreTrainedModel`s inside it (sub-models) are judged with it.
_IN_CAST: contextvars.ContextVar[bool] = contextvars.ContextVar("trained_precision_in_cast", default=False)


# Set while `from_pretrained` / `_from_config` constructs a model. The sub-models a composite model builds in its
# `__init__` (`AutoModel.from_config(config.text_config)`) are then checked as part of the outer call: with its mode,
# its model name (so the once-cache does not repeat the outer warning) and its wording.
_SCOPE: contextvars.ContextVar[_ConstructionScope | None] = contextvars.ContextVar(
    "trained_precision_scope", default=None
)


class TrainedPrecisionRiskError(Exception):
    """
    Raised in `"error"` mode when a model is loaded or cast into a precision its trained precision makes risky.

    Args:
        message (`str`): the same text the `"warn"` mode logs.
        risk ([`~trained_precision.risk.Risk`]): the risky pair and why it is risky.
        model_name (`str`): the model's name or path.
        source (`str`): where the trained precision was read from, `"config"` or `"registry"`.
    """

    def __init__(self, message: str, risk: Risk, model_name: str, source: str):
        super().__init__(message)
        self.risk = risk
        self.model_name = model_name
        self.source = source


def _invalid_mode_error(value: Any, origin: str) -> ValueError:
    valid = ", ".join(repr(m) for m in CHECK_MODES)
    return ValueError(f"{value!r} is not a valid {origin}. Valid values are {valid} (default {WARN!r}).")


def resolve_check_mode(mode: str | None = None) -> str:
    """
    The mode a check runs in: `mode` when given, else the environment variable `TRANSFORMERS_TRAINED_PRECISION_CHECK`
    (unset or blank: `"warn"`). Case and surrounding whitespace are ignored.

    Args:
        mode (`str`, *optional*): the per-call value (`"warn"`, `"error"` or `"ignore"`).

    Raises:
        `ValueError`: when the per-call value, or without one the environment variable, is not one of the valid modes;
        the message names where the value came from and lists the valid ones. A typo of `"error"` never means `"warn"`.
    """
    if mode is not None:
        if not isinstance(mode, str) or mode.strip().lower() not in CHECK_MODES:
            raise _invalid_mode_error(mode, f"`{KWARG}`")
        return mode.strip().lower()
    env = _environment_value()
    if env is None or not env.strip():
        return WARN
    if env.strip().lower() not in CHECK_MODES:
        raise _invalid_mode_error(env, f"value of the environment variable {ENV_VAR}")
    return env.strip().lower()


def _environment_value() -> str | None:
    """The value of the environment variable `TRANSFORMERS_TRAINED_PRECISION_CHECK`, `None` when it is unset."""
    # Every cast reads it. For an unset variable (the usual case) `os.environ.get` raises and catches a `KeyError`:
    # about 10 us inside a cast, 2-3% of a small model's `.half()`. The mapping's own data answers "unset" without it.
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict) and _ENV_KEY is not None and _ENV_KEY not in data:
        return None
    return os.environ.get(ENV_VAR)


# The environment variable's name as `os.environ` stores it (bytes on POSIX, upper case on Windows).
_ENV_KEY = os.environ.encodekey(ENV_VAR) if hasattr(os.environ, "encodekey") else None


def reset_warning_cache() -> None:
    """Forget which (model, sub-model, trained, runtime precision) combinations were already reported on (tests)."""
    _WARNED.clear()
    _INFORMED.clear()


def _fix_text(risk: Risk, action: str, mode: str, per_call: bool = False) -> str:
    if action == CAST:
        casts = " or ".join("`.float()`" if p == FP32 else f"`.to({dtype_code(p)})`" for p in risk.safe_dtypes)
        fix = f"Cast it with {casts} instead"
        # a mode recorded at loading beats the environment variable: only loading with "ignore" silences the cast
        silence = f'load the model with `{KWARG}="ignore"`' if per_call else f"set {ENV_VAR}=ignore"
    else:
        fix = f"Load it with {dtype_options(risk.safe_dtypes)} instead"
        silence = f'pass `{KWARG}="ignore"` or set {ENV_VAR}=ignore'
    what = "this error" if mode == ERROR else "this warning"
    return f"{fix}, or {silence} to silence {what}."


def format_risk_message(
    risk: Risk,
    *,
    model_name: str,
    source: str = "from its config's `trained_precision`",
    action: str = LOAD,
    mode: str = WARN,
    per_call: bool = False,
    mitigation: str | None = None,
    runtime_note: str | None = None,
    sub_model: str = "",
    evidence_note: str | None = None,
) -> str:
    """
    The message of a risky pair: the model, both precisions, where the trained precision came from, the risk in one
    sentence and the fix.

    Args:
        risk ([`~trained_precision.risk.Risk`]): from [`~trained_precision.risk.assess_risk`].
        model_name (`str`): the model's name or path.
        source (`str`): where the trained precision was read from, as a phrase (see
            [`TrainedPrecisionInfo.describe`]).
        action (`str`): `"load"`, `"from_config"` or `"cast"`; it decides the verb and the suggested fix.
        mode (`str`): `"warn"` or `"error"`; it decides whether the text says "warning" or "error".
        per_call (`bool`, *optional*, defaults to `False`): whether the mode was given per call (for a cast: recorded
            on the model by `from_pretrained`), which the environment variable cannot override; a cast's fix then
            names the `trained_precision_check` keyword instead of the variable.
        mitigation (`str`, *optional*): what upstream already does about the risk (T5's `_keep_in_fp32_modules`).
        runtime_note (`str`, *optional*): why this runtime applies, e.g. for a quantized model whose compute dtype
            differs from its load dtype.
        sub_model (`str`, *optional*): the sub-model of a composite model the risk is about (its `model_type`).
        evidence_note (`str`, *optional*): why evidence the checkpoint stores is no evidence on this path (a stale
            fp16 plan), said before the fix.
    """
    if action not in _ACTIONS:
        raise ValueError(f"{action!r} is not a valid action. Valid values are {', '.join(map(repr, _ACTIONS))}.")
    note = f"; {runtime_note}" if runtime_note else ""
    runtime = f"{risk.runtime} (`{dtype_code(risk.runtime)}`{note})"
    verb = {
        LOAD: f"is being loaded in {runtime}",
        FROM_CONFIG: f"is being instantiated in {runtime}",
        CAST: f"is being cast to {runtime}",
    }[action]
    reason = risk.reason
    if mitigation:
        reason = f"{reason}; {mitigation}"
    note = ""
    if evidence_note:
        note = f"{evidence_note} "
    return (
        f"{_who(model_name, sub_model)} was trained in {risk.trained} ({source}) but {verb}: {reason}. "
        f"{note}{_fix_text(risk, action, mode, per_call)}"
    )


def _who(model_name: str, sub_model: str = "") -> str:
    return f"Model '{model_name}'" + (f" (its {sub_model} sub-model)" if sub_model else "")


def format_evidence_message(assessment: Assessment, *, model_name: str, source: str, sub_model: str = "") -> str:
    """The info-level message of a risk that evidence overrides: the rule, and the evidence with its source."""
    prior = assessment.prior
    return (
        f"{_who(model_name, sub_model)} was trained in {prior.trained} ({source}), and {prior.runtime} is not risky for it: "
        f"{assessment.evidence.describe()}."
    )


def _quantized_runtimes(hf_quantizer, dtype) -> list[tuple[Any, str | None]]:
    """
    The dtypes that carry a quantized model's activations, each with a note for the message: the load dtype
    (embeddings, norms and the residual stream; bitsandbytes casts every quantized matmul's output back to its input's
    dtype), then the compute dtype of the quantized matmuls when it differs.
    """
    from ..modeling_utils import _activation_dtypes  # the core's answer: which dtypes carry the activations

    quantization_config = getattr(hf_quantizer, "quantization_config", None)
    dtypes = _activation_dtypes(dtype, hf_quantizer)
    compute = dtypes[1] if len(dtypes) > 1 else None
    method = getattr(quantization_config, "quant_method", None)
    method = getattr(method, "value", method)
    quantized = f"{method}-quantized" if isinstance(method, str) and method else "quantized"
    if compute is None or dtype_to_precision(compute) == dtype_to_precision(dtype):
        return [(dtype, f"{quantized}, its activations run in this dtype")]
    return [
        (
            dtype,
            f"{quantized} with compute dtype {_dtype_name(compute)}, so the embeddings, norms and residual stream "
            "run in the load dtype",
        ),
        (compute, f"the compute dtype of the {quantized} matmuls"),
    ]


def _dtype_name(dtype) -> str:
    """`torch.float32` -> `"fp32"`; other dtypes (float8, int8) by their torch name."""
    precision = dtype_to_precision(dtype)
    return precision if precision != UNKNOWN else str(dtype).replace("torch.", "")


def _sub_model_label(config, scope: _ConstructionScope | None) -> str:
    """`""` for the model a call was made for, the sub-config's `model_type` for a sub-model built inside it."""
    if scope is None:
        return ""
    return getattr(config, "model_type", None) or type(config).__name__


def check_trained_precision(
    config,
    dtype,
    *,
    mode: str | None = None,
    model_name: str | os.PathLike | None = None,
    hf_quantizer=None,
    action: str = LOAD,
    model_class=None,
    registry_row=None,
    fp16_plan: dict | None = None,
    fp16_plan_problem: str | None = None,
    sub_model: str | None = None,
    deferred: bool = False,
    subject=None,
    display_name: str | None = None,
) -> Risk | None:
    """
    Checks that running a model in `dtype` is safe for the precision it was trained in; warns once or raises
    [`TrainedPrecisionRiskError`] when it is not, depending on the mode. A risk that evidence overrides (see
    [`~trained_precision.evidence.find_evidence`]) is said once at info level instead.

    Args:
        config ([`PreTrainedConfig`]): the model's configuration (its `trained_precision`, and `name_or_path` when
            `model_name` is not given).
        dtype (`torch.dtype` or `str`): the runtime dtype, after `dtype="auto"` was resolved. Dtypes outside
            fp32/bf16/fp16 (float64, float8, integers) are never risky.
        mode (`str`, *optional*): `"warn"`, `"error"` or `"ignore"`; defaults to the environment variable
            `TRANSFORMERS_TRAINED_PRECISION_CHECK`, then `"warn"`.
        model_name (`str` or `os.PathLike`, *optional*): the name or path the model is loaded from.
        display_name (`str`, *optional*): the model's name in messages when it has no `model_name` (its class, for a
            model built from a config): never looked up as a Hub id or a path.
        hf_quantizer (`HfQuantizer`, *optional*): for a quantized model, which is checked on its load dtype and on its
            compute dtype.
        action (`str`, *optional*, defaults to `"load"`): `"load"`, `"from_config"` or `"cast"`, for the message's
            wording.
        model_class (`type`, *optional*): the model class, for its `_keep_in_fp32_modules`; by default the config's
            first `architectures` entry.
        registry_row ([`~trained_precision.registry.RegistryEntry`], *optional*): the registry row whose precision
            loading wrote into `config` (so a cast names the registry, as the load did).
        fp16_plan (`dict`, *optional*): the fp16 plan this path applies and has verified against the model's weights
            ([`~trained_precision.fp16_plan.decide_fp16_plan`]): evidence for an fp16 runtime. A plan stored in the
            config is never evidence by itself.
        fp16_plan_problem (`str`, *optional*): why the config's stored plan is no evidence on this path (stale, not
            applied, not validated on the model's lengths); a remaining risk's message says it.
        sub_model (`str`, *optional*): the sub-model of a composite model being judged (its `model_type`); by default
            the construction scope decides.
        deferred (`bool`, *optional*, defaults to `False`): the caller judges the model once its weights are loaded
            (a stored fp16 plan needs them): the registry precision is still recorded, nothing is said now, and the
            sub-models built in this call are not judged while they are constructed.
        subject ([`~trained_precision.evidence.WeightsSubject`], *optional*): the loaded model, which a finished run
            or a copy's publisher reference must be bound to; without it they are no evidence.

    Returns:
        The [`~trained_precision.risk.Risk`] found (also in `"ignore"` mode), or `None` when the pair is safe (the
        rules say so, or evidence overrides them) or the trained precision is unknown.

    Raises:
        `ValueError`: for an invalid per-call mode. [`TrainedPrecisionRiskError`]: for a risky pair in `"error"` mode.
    """
    scope = _SCOPE.get()
    if sub_model is None:
        sub_model = _sub_model_label(config, scope)
    if scope is not None and action in (FROM_CONFIG, CAST):
        if scope.deferred:  # judged with the whole model once its weights are loaded
            return None
        mode, model_name, action, registry_row = _inherit_scope(scope, mode, model_name, registry_row)
    per_call = mode is not None
    mode = resolve_check_mode(mode)
    info = resolve_trained_precision(
        config, model_name, persisted_from=registry_row, fp16_plan=fp16_plan, subject=subject
    )
    if action in (LOAD, FROM_CONFIG) and not sub_model and scope is None:
        _remember_persisted(config, info, model_name, action, deferred)
    # weights rounded or quantized are no longer the publisher's: a later save must not carry its reference runtime
    forget_changed_reference(config, dtype, quantized=hf_quantizer is not None)
    if deferred:
        return None
    if fp16_plan_problem is None and action == LOAD and scope is None:
        fp16_plan_problem = _unapplied_plan_problem(config, hf_quantizer)
    assessment, note = _riskiest_assessment(info, dtype, hf_quantizer, model_class)
    if assessment is None:
        return None
    if mode == IGNORE:
        return assessment.risk
    name = _display_name(config, model_name, display_name)
    return _report_assessment(assessment, info, name, sub_model, action, mode, per_call, note, fp16_plan_problem)


def _inherit_scope(scope: _ConstructionScope, mode, model_name, registry_row) -> tuple:
    """For a sub-model built inside a load: the load's mode and registry row (unless given), its name and action."""
    mode = mode if mode is not None else scope.mode
    return mode, scope.model_name or model_name, scope.action, registry_row or scope.registry_row


def _display_name(config, model_name, display_name: str | None = None) -> str:
    """
    The model's name in messages: `model_name`, else the config's `name_or_path`, else `display_name` (the model's
    class, as the core names it), else `<unnamed ... model>`.
    """
    name = os.fspath(model_name) if model_name else (getattr(config, "name_or_path", None) or display_name or "")
    if not name:
        name = f"<unnamed {getattr(config, 'model_type', None) or type(config).__name__} model>"
    return name


def _remember_persisted(config, info, model_name, action: str, deferred: bool) -> None:
    """Records, for the construction scope of this call, the registry row a load wrote into `config` (if any)."""
    persisted = persist_registry_precision(config, info) if action == LOAD else False
    who = os.fspath(model_name) if model_name else (getattr(config, "name_or_path", None) or None)
    _PERSISTED.set({"who": who, "row": info.entry if persisted else None, "deferred": deferred})


def _unapplied_plan_problem(config, hf_quantizer) -> str | None:
    """Why a stored fp16 plan is no evidence on a load that did not wait for the weights; `None` without a plan."""
    if read_fp16_plan(config) is None:
        return None
    # a load that did not wait for the weights to verify its stored plan does not apply it
    return (
        "a quantized model does not apply it (its layers keep their own storage and compute dtype)"
        if hf_quantizer is not None
        else "it is switched off on this path (`use_fp16_plan=False`), so no module is kept in fp32"
    )


def _riskiest_assessment(info, dtype, hf_quantizer, model_class) -> tuple[Assessment | None, str | None]:
    """
    The assessment of the runtime to report on, with its note: the first risky one of the dtypes that carry the
    activations (a quantized model's load and compute dtypes), else the first one the rules had a say on.
    """
    runtimes = _quantized_runtimes(hf_quantizer, dtype) if hf_quantizer is not None else [(dtype, None)]
    assessment, note = None, None
    for candidate, candidate_note in runtimes:
        if dtype_to_precision(candidate) in (UNKNOWN, FP32):
            continue
        found = info.assess(candidate, model_class=model_class)
        if found.prior is not None and (assessment is None or assessment.risk is None and found.risk is not None):
            assessment, note = found, candidate_note if hf_quantizer is not None else None
    return assessment, note


def _report_assessment(
    assessment: Assessment, info, name: str, sub_model: str, action: str, mode: str, per_call: bool, note, plan_problem
) -> Risk | None:
    """
    Says an assessment once per (model, sub-model, trained, runtime precision) and kind of message: evidence that
    overrides the risk at info level, a precision-loss note at info level, a risk as a warning, or raises it in
    `"error"` mode. Returns the risk (`None` when overridden). An info message never silences a later warning.
    """
    risk = assessment.risk
    prior = assessment.prior
    key = (name, sub_model, prior.trained, prior.runtime)
    outer_key = (name, "", prior.trained, prior.runtime)
    if risk is None:
        if (*key, "evidence") not in _INFORMED and (*outer_key, "evidence") not in _INFORMED:
            _INFORMED.add((*key, "evidence"))
            logger.info(
                format_evidence_message(assessment, model_name=name, source=info.describe(), sub_model=sub_model)
            )
        return None
    # a loss of precision with no known failure (fp32 weights run in bf16) is a note: never an error, never a warning
    note_only = risk.kind == PRECISION_LOSS
    if note_only and ((*key, "note") in _INFORMED or (*outer_key, "note") in _INFORMED):
        return risk
    if mode == WARN and not note_only and (key in _WARNED or outer_key in _WARNED):
        return risk
    message = format_risk_message(
        risk,
        model_name=name,
        sub_model=sub_model,
        source=info.describe(),
        action=action,
        mode=WARN if note_only else mode,
        per_call=per_call,
        mitigation=assessment.mitigation.detail if assessment.mitigation is not None else None,
        runtime_note=note,
        evidence_note=" ".join(
            note
            for note in (
                f"Its stored fp16 plan is no evidence here: {plan_problem}."
                if plan_problem and prior.runtime == "fp16"
                else None,
                assessment.dropped,
            )
            if note
        )
        or None,
    )
    if mode == ERROR and not note_only:
        raise TrainedPrecisionRiskError(message, risk, name, info.source)
    if note_only:
        _INFORMED.add((*key, "note"))
    else:
        # one warning per model, dtype and call: a composite model's other sub-models at risk are not said again
        _WARNED.update((key, outer_key))
    (logger.info if note_only else logger.warning)(message)
    return risk


def cast_target_dtype(model, fn):
    """
    The floating dtype that `model._apply(fn)` casts to, read from the cast itself: `fn` applied to empty CPU probes
    of fp32 and of fp16 (a function meant only for parameters gets parameters). When both come out in the same dtype,
    that is the target, also when the model is in it already: `.half()` of an fp16-loaded model still casts the fp32
    modules an fp16 plan keeps, so the plan and the check must see it. `None` when `fn` keeps each dtype (a device
    move), gives no floating tensor, fails on both probes, or the model has no floating weights;
    [`trained_precision_cast_scope`] then compares the dtypes after the cast.
    """
    import torch

    if not any(t.is_floating_point() for t in model.parameters()):
        return None
    targets = {_probe_cast(fn, dtype) for dtype in (torch.float32, torch.float16)}
    return targets.pop() if len(targets) == 1 else None


def _probe_cast(fn, dtype):
    """The dtype `fn` turns an empty `dtype` tensor into (a parameter when a plain tensor fails); `None` otherwise."""
    import torch

    for make in (torch.empty, lambda *a, **k: torch.nn.Parameter(torch.empty(*a, **k), requires_grad=False)):
        try:
            after = fn(make(0, dtype=dtype))
        except Exception:
            continue
        return after.dtype if isinstance(after, torch.Tensor) and after.is_floating_point() else None
    return None


def _sub_model_configs(model) -> list[tuple[str, Any]]:
    """`(sub-config key, sub-config)` for each sub-model of a composite model that is built as a module of it."""
    config = getattr(model, "config", None)
    keys = {}
    for key in getattr(config, "sub_configs", None) or {}:
        sub_config = getattr(config, key, None)
        if sub_config is not None and sub_config is not config:
            keys[id(sub_config)] = (key, sub_config)
    found, seen = [], set()
    if keys:
        for name, module in model.named_modules():
            item = keys.get(id(getattr(module, "config", None))) if name else None
            if item is not None and item[0] not in seen:
                seen.add(item[0])
                found.append(item)
    return found


def check_trained_precision_on_cast(
    model,
    dtype,
    *,
    action: str = CAST,
    fp16_plans: dict[str, dict | None] | None = None,
    fp16_plan_problems: dict[str, str] | None = None,
) -> Risk | None:
    """
    Checks a model, and each sub-model of a composite model, at `dtype`: the cast hook of `PreTrainedModel._apply`.
    Also the check `from_pretrained` runs once the weights are loaded when a stored fp16 plan must be verified first.
    The mode is the `trained_precision_check` the model was loaded (or built with `from_config`) with, when one was
    given; else the environment variable `TRANSFORMERS_TRAINED_PRECISION_CHECK`; else `"warn"`.

    Args:
        model ([`PreTrainedModel`]): the model being cast.
        dtype (`torch.dtype`): the dtype it is cast to.
        action (`str`, *optional*, defaults to `"cast"`): `"cast"`, or `"load"` / `"from_config"` for the check
            after loading.
        fp16_plans (`dict`, *optional*): per sub-config key (`""` for the model's own config), the fp16 plan this path
            applies and verified ([`~trained_precision.fp16_plan.decide_fp16_plan`]).
        fp16_plan_problems (`dict`, *optional*): per sub-config key, why the stored plan is no evidence.

    Returns:
        The first [`~trained_precision.risk.Risk`] found, or `None`.
    """
    if dtype is None or getattr(model, "is_quantized", False):  # upstream refuses to cast a quantized model
        return None
    config = getattr(model, "config", None)
    if config is None:
        return None
    name = getattr(config, "name_or_path", None) or None  # an unnamed model has no Hub id to look up
    plans, problems = fp16_plans or {}, fp16_plan_problems or {}
    common = {
        "mode": vars(model).get(MODE_ATTRIBUTE),
        "model_name": name,
        "display_name": type(model).__name__,
        "action": action,
        "registry_row": vars(model).get(REGISTRY_ATTRIBUTE),
        "subject": weights_subject(model),  # what recorded evidence must be bound to
    }
    found = check_trained_precision(
        config,
        dtype,
        model_class=type(model),
        fp16_plan=plans.get(""),
        fp16_plan_problem=problems.get(""),
        sub_model="",
        **common,
    )
    for key, sub_config in _sub_model_configs(model):
        risk = check_trained_precision(
            sub_config,
            dtype,
            fp16_plan=plans.get(key),
            fp16_plan_problem=problems.get(key),
            sub_model=getattr(sub_config, "model_type", None) or key,
            **common,
        )
        found = found or risk
    return found


def is_outermost_cast(model) -> bool:
    """Whether `model._apply` runs for the outermost model of a cast (not for a sub-model inside one)."""
    if _IN_CAST.get():
        return False
    # `getattr(model, "is_quantized", False)` (a quantizer sets it on the instance), without the `AttributeError`
    # that `nn.Module.__getattr__` builds when it is absent: every cast asks
    own = model.__dict__
    return not (own["is_quantized"] if "is_quantized" in own else _class_attribute(type(model), "is_quantized"))


@functools.lru_cache(maxsize=256)
def _class_attribute(cls: type, name: str) -> Any:
    """`getattr(cls, name, False)`, once per class: a missing attribute costs an `AttributeError` at every read."""
    return getattr(cls, name, False)


# What `trained_precision_cast_scope` is given when the caller has not read the cast's target dtype.
_PROBE = object()

# The modes in which a model of unknown precision carries no sentinel ("" is the default, "warn").
_QUIET_MODES = frozenset({"", WARN, IGNORE})


def nothing_to_check(model) -> bool:
    """
    Whether no cast of `model` can be judged, whatever its dtype: it is not being built inside a `from_pretrained` /
    `from_config` call (whose mode and registry row it would inherit), its mode is not `"error"`, no load recorded a
    registry row on it, and its config records nothing the check reads ([`~trained_precision.resolver.records_nothing`]:
    the trained precision is unknown with no lineage, no registry row, no reference, no fp16 plan). The mode is
    resolved as the check resolves it, so a bad environment variable is reported all the same.
    """
    own = model.__dict__
    if own.get(REGISTRY_ATTRIBUTE) is not None or _SCOPE.get() is not None:
        return False
    # the mode, read without a side effect (a device move never reads it, so never warns about a bad value): a
    # per-call mode is recorded resolved; the environment variable must be unset, blank, "warn" or "ignore"
    mode = own.get(MODE_ATTRIBUTE)
    if mode is not None and mode not in _QUIET_MODES:
        return False
    value = _environment_value()
    if value is not None and value.strip().lower() not in _QUIET_MODES:
        return False
    config = own.get("config")  # a `PreTrainedModel` keeps its config in its `__dict__`
    return records_nothing(config if config is not None else getattr(model, "config", None))


@contextlib.contextmanager
def trained_precision_cast_scope(model, fn, *, target=_PROBE, **check_kwargs):
    """
    Around `PreTrainedModel._apply(fn)`: when `fn` changes the model's floating dtype and the model is the outermost
    one being cast, checks the new dtype against its trained precision before the cast (so `"error"` mode raises with
    the model unchanged). When the dtype cannot be told beforehand, the dtypes are compared after the cast. The
    `PreTrainedModel`s inside it are judged with it (per sub-model), not again on their own.

    Args:
        model ([`PreTrainedModel`]): the model whose `_apply` runs.
        fn (`Callable`): the function `_apply` maps over the tensors.
        target (`torch.dtype`, *optional*): the cast's target as [`cast_target_dtype`] read it, when the caller did
            already (`None`: it cannot be told beforehand); read here otherwise.
        check_kwargs: passed to [`check_trained_precision_on_cast`].
    """
    if not is_outermost_cast(model):
        yield
        return
    if target is _PROBE:
        target = cast_target_dtype(model, fn)
    before = None
    if target is not None:
        check_trained_precision_on_cast(model, target, **check_kwargs)
    else:
        before = next((t.dtype for t in model.parameters() if t.is_floating_point()), None)
    token = _IN_CAST.set(True)
    try:
        yield
    finally:
        _IN_CAST.reset(token)
    if before is not None:
        after = next((t.dtype for t in model.parameters() if t.is_floating_point()), None)
        if after is not None and after != before:
            check_trained_precision_on_cast(model, after, **check_kwargs)


@contextlib.contextmanager
def quiet_casts():
    """Casts inside this block are not checked (a search's own fp16 copies of a model)."""
    token = _IN_CAST.set(True)
    try:
        yield
    finally:
        _IN_CAST.reset(token)


def checked_apply(model, apply, fn, recurse=True):
    """
    `PreTrainedModel._apply(fn, recurse)`, which every cast reaches: `apply` (the `nn.Module` method, bound to
    `model`) run under [`trained_precision_cast_scope`] when `model` is the outermost model being cast and something
    about it can be judged. A sub-model inside a cast, or a quantized model, runs `apply` as is. An outermost cast with
    nothing to judge ([`nothing_to_check`]) reads nothing else and only marks the models inside it as part of it
    ([`apply_unchecked`]): a fixed cost of a few microseconds, whatever the model's size.

    Returns:
        What `apply(fn, recurse)` returns (the model).
    """
    if not is_outermost_cast(model):
        return apply(fn, recurse)
    if nothing_to_check(model):
        return apply_unchecked(apply, fn, recurse)
    with trained_precision_cast_scope(model, fn):
        return apply(fn, recurse)


def apply_unchecked(apply, fn, recurse=True):
    """
    `apply(fn, recurse)` as an outermost cast with nothing to check: the `PreTrainedModel`s inside it are part of it,
    so they are not checked on their own either.
    """
    token = _IN_CAST.set(True)
    try:
        return apply(fn, recurse)
    finally:
        _IN_CAST.reset(token)


def in_construction() -> bool:
    """Whether a model is being constructed inside a `from_pretrained` / `_from_config` call (a sub-model)."""
    return _SCOPE.get() is not None


@contextlib.contextmanager
def model_construction_scope(mode: str | None = None, model_name: str | os.PathLike | None = None, action: str = LOAD):
    """
    Used around a model's construction by `from_pretrained` and `_from_config`. The sub-models a composite model
    builds in its `__init__` (with `AutoModel.from_config`) are checked on their own sub-config, but as part of the
    outer call: with the outer call's mode (so `trained_precision_check="error"` or `"ignore"` reaches them) and
    its model name (so a risk the outer check already warned about is not repeated).

    Args:
        mode (`str`, *optional*): the outer call's `trained_precision_check`.
        model_name (`str` or `os.PathLike`, *optional*): the outer call's model name or path.
        action (`str`, *optional*, defaults to `"load"`): the outer call's action (`"load"` or `"from_config"`).
    """
    if _SCOPE.get() is not None:  # a sub-model of a sub-model: the outermost call decides
        yield
        return
    name = os.fspath(model_name) if model_name else None
    persisted = _PERSISTED.get()
    mine = persisted is not None and persisted["who"] == name
    row = persisted["row"] if mine and action == LOAD else None
    _PERSISTED.set(None)
    token = _SCOPE.set(
        _ConstructionScope(
            mode,
            name,
            action,
            row,
            deferred=mine and persisted["deferred"],
        )
    )
    try:
        yield
    finally:
        _SCOPE.reset(token)


def remember_check_mode(model, mode: str | None) -> None:
    """
    Records the `trained_precision_check` a model was loaded (or built with `from_config`) with on the model and on
    its sub-models, as the attribute `_trained_precision_check`, so that its later casts (`.half()`, `.bfloat16()`,
    `.to(dtype)`) follow it instead of the environment variable. Inside `from_pretrained`, it also records the
    registry row whose precision the load wrote into the config (`_trained_precision_registry_row`), so that the
    casts name the same source as the load.

    Args:
        model ([`PreTrainedModel`]): the model just built by `from_pretrained` or `_from_config`.
        mode (`str`, *optional*): the call's `trained_precision_check`.
    """
    scope = _SCOPE.get()
    row = scope.registry_row if scope is not None else None
    if mode is None and row is None:
        return
    if mode is not None:
        mode = resolve_check_mode(mode)
    from ..modeling_utils import PreTrainedModel

    for module in model.modules():
        if isinstance(module, PreTrainedModel):
            if mode is not None:
                vars(module).setdefault(MODE_ATTRIBUTE, mode)
            if row is not None:
                vars(module).setdefault(REGISTRY_ATTRIBUTE, row)


__all__ = [
    "TrainedPrecisionRiskError",
    "check_trained_precision",
    "check_trained_precision_on_cast",
    "checked_apply",
    "format_risk_message",
    "trained_precision_cast_scope",
    "reset_warning_cache",
    "resolve_check_mode",
]
