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

`modeling_utils.py` calls in from `from_pretrained` ([`check_trained_precision`], at the dtype it resolved),
`_from_config` ([`check_trained_precision_from_config`]) and `PreTrainedModel._apply`, which every cast reaches
(`.half()`, `.to(dtype)`, a parent module's cast). Only a change of floating dtype is checked, once, for the outermost
model being cast. The mode is chosen per call (`trained_precision_check=`, kept for the model's later casts) or for the
process (`TRANSFORMERS_TRAINED_PRECISION_CHECK`): `"warn"` (default, once per model and runtime), `"error"` (raise
[`TrainedPrecisionRiskError`]) or `"ignore"`; a bad value raises a `ValueError`, never falls back to `"warn"`.

Each check reads the model once, gathers the facts ([`~trained_precision.facts.resolver.gather_facts`]), hands them to
the one pure [`~trained_precision.guard.decision.decide`], and [`~trained_precision.guard.decision.say`] says it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import os
from typing import Any

from ..configuration import sub_config_items
from ..facts.resolver import (
    CAST,
    FROM_CONFIG,
    LOAD,
    MODE_ATTRIBUTE,
    REGISTRY_ATTRIBUTE,
    Call,
    Fp16PlanDecision,
    ModelSnapshot,
    forget_changed_reference,
    gather_facts,
)
from ..facts.risk import Risk
from .decision import (  # noqa: F401  (the check's names, as `patches/` and the other modules import them)
    CHECK_MODES,
    ENV_VAR,
    ERROR,
    IGNORE,
    KWARG,
    WARN,
    TrainedPrecisionRiskError,
    cleared_phrase,
    decide,
    reset_warning_cache,
    say,
)


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

# Set while `from_pretrained` / `_from_config` constructs a model: the sub-models a composite model builds in its
# `__init__` are checked as part of the outer call, with its mode, its model name and its wording.
_SCOPE: contextvars.ContextVar[_ConstructionScope | None] = contextvars.ContextVar(
    "trained_precision_scope", default=None
)


def _invalid_mode_error(value: Any, origin: str) -> ValueError:
    valid = ", ".join(repr(m) for m in CHECK_MODES)
    return ValueError(f"{value!r} is not a valid {origin}. Valid values are {valid} (default {WARN!r}).")


def resolve_check_mode(mode: str | None = None) -> str:
    """
    The mode a check runs in: `mode` when given, else `TRANSFORMERS_TRAINED_PRECISION_CHECK` (unset or blank: `"warn"`),
    in any case; a `ValueError` that names where an invalid value came from.
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
    # Every cast reads it. For an unset variable `os.environ.get` raises and catches a `KeyError`: about 10 us inside
    # a cast. The mapping's own data answers "unset" without it.
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict) and _ENV_KEY is not None and _ENV_KEY not in data:
        return None
    return os.environ.get(ENV_VAR)


# The environment variable's name as `os.environ` stores it (bytes on POSIX, upper case on Windows).
_ENV_KEY = os.environ.encodekey(ENV_VAR) if hasattr(os.environ, "encodekey") else None


def check_trained_precision(
    config,
    *,
    mode: str | None = None,
    model_name: str | os.PathLike | None = None,
    hf_quantizer=None,
    deferred: bool = False,
) -> Risk | None:
    """
    The check of `from_pretrained`, at the dtype it resolved and recorded as `config.dtype`: warns once when that dtype
    is risky for the precision the model was trained in, raises [`TrainedPrecisionRiskError`] in `"error"` mode, or says
    at info level that evidence overrides the risk.

    Args:
        config ([`PreTrainedConfig`]): the model's configuration; its `dtype` is the runtime (outside fp32/bf16/fp16 never
            risky).
        mode (`str`, *optional*): `"warn"`, `"error"` or `"ignore"`; defaults to the environment variable, then `"warn"`.
        model_name (`str` or `os.PathLike`, *optional*): the name or path the model is loaded from.
        hf_quantizer (`HfQuantizer`, *optional*): for a quantized model, checked on its load and compute dtypes.
        deferred (`bool`, *optional*, defaults to `False`): judged once the weights are loaded (a stored fp16 plan, bound
            evidence): the registry precision is still recorded, nothing is said now.

    Returns:
        The [`~trained_precision.facts.risk.Risk`] that remains (also in `"ignore"` mode), or `None`.
    """
    name = os.fspath(model_name) if model_name else None
    return _check([(config, Call(mode, name, LOAD, hf_quantizer=hf_quantizer, deferred=deferred))], config.dtype)[0]


def check_trained_precision_from_config(
    config, dtype, *, mode: str | None = None, display_name: str | None = None, deferred: bool = False
) -> Risk | None:
    """
    The check of `_from_config`, as [`check_trained_precision`] is for a load: `dtype` is the runtime, and
    `display_name` (the model class's name) names a model whose config has no `name_or_path` in messages, never looked
    up in the registry.
    """
    return _check([(config, Call(mode, None, FROM_CONFIG, display_name, deferred=deferred))], dtype)[0]


def _check(parts: list[tuple[Any, Call]], dtype, snapshot=None) -> tuple[Risk | None, Fp16PlanDecision]:
    """
    One check of a model's config and its sub-configs (`parts`, the same call for all but the sub-model): the call's
    scope and mode, the facts gathered once (with a loaded model's `snapshot`: its stored fp16 plans decided), the
    decision on each part, and saying it. Returns the first risk and the plans' decision.
    """
    scope = _SCOPE.get()
    call = parts[0][1]
    if scope is not None and call.action in (FROM_CONFIG, CAST):
        if scope.deferred:  # judged with the whole model once its weights are loaded
            return None, Fp16PlanDecision()
        inherited = {
            "mode": call.mode if call.mode is not None else scope.mode,
            "model_name": scope.model_name or call.model_name,
            "action": scope.action,
            "registry_row": call.registry_row or scope.registry_row,
        }
        parts = [(config, dataclasses.replace(part_call, **inherited)) for config, part_call in parts]
        call = parts[0][1]
    mode = resolve_check_mode(call.mode)
    facts = gather_facts(parts, dtype, mode, in_scope=scope is not None, snapshot=snapshot)
    if facts[0].persisted is not None:  # the outermost load: what it wrote into the config, for its construction scope
        who = call.model_name or getattr(parts[0][0], "name_or_path", None) or None
        _PERSISTED.set({"who": who, "row": facts[0].persisted or None, "deferred": call.deferred})
    if call.deferred:
        return None, facts[0].fp16_plan
    found = None
    for part in facts:
        risk = say(decide(part))  # every part is said (or raises); the first risk is returned
        found = found or risk
    return found, dataclasses.replace(facts[0].fp16_plan, cleared_by=cleared_phrase(parts, facts))


def cast_target_dtype(fn):
    """
    The floating dtype `model._apply(fn)` casts floating weights to, from `fn` applied to empty fp32 and fp16 probes
    (parameters when plain tensors fail) when both come out alike (`.half()` of an fp16 model too: it casts an fp16
    plan's fp32 modules). `None` for a device move or a failed probe.
    """
    import torch

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


def check_model(model, dtype, action: str = CAST, snapshot=None) -> tuple[Risk | None, Fp16PlanDecision]:
    """
    Checks a model, and each sub-model of a composite model, at `dtype` (a cast's; a load's, `action="load"` or
    `"from_config"`, once the weights can verify bound evidence) in the mode the model was loaded with, else the
    environment variable's, else `"warn"`, on what the caller read of it (`snapshot`), else read here. Returns the
    first risk (or `None`) and the plan's decision: which modules stay in fp32 (applied once this has not raised).
    """
    config = getattr(model, "config", None)
    if dtype is None or config is None or getattr(model, "is_quantized", False):  # upstream casts no quantized model
        return None, Fp16PlanDecision()
    snapshot = snapshot if snapshot is not None else ModelSnapshot(model)
    found = _judge(snapshot, dtype, action)
    _forget_rounded(config, dtype)
    return found


def _judge(snapshot: ModelSnapshot, dtype, action: str = CAST) -> tuple[Risk | None, Fp16PlanDecision]:
    """[`check_model`] on what was read of the model, its [`~trained_precision.facts.resolver.ModelSnapshot`]."""
    common = {"mode": snapshot.mode, "model_name": snapshot.name, "display_name": snapshot.class_name}
    common.update(action=action, registry_row=snapshot.registry_row)
    parts = [  # the model, then each sub-model built as a module of it, with its sub-config
        (part.config, Call(**common, plan_key=part.key, sub_model=(part.config.get("model_type") or part.key)))
        for part in snapshot.parts
    ]
    parts[0] = (parts[0][0], dataclasses.replace(parts[0][1], model_class=snapshot.model_class, sub_model=""))
    return _check(parts, dtype, snapshot)


def _forget_rounded(config, dtype) -> None:  # weights rounded to `dtype` are no longer the publisher's
    for item in [config, *(sub for _, sub in sub_config_items(config))]:
        forget_changed_reference(item, dtype)


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


# The modes in which a model of unknown precision carries no sentinel ("" is the default, "warn").
_QUIET_MODES = frozenset({"", WARN, IGNORE})


def _quiet(model) -> bool:
    """
    Whether a cast of `model` whose configs record nothing ([`~trained_precision.facts.resolver.records_nothing`]) goes
    unchecked: not built inside a `from_pretrained` / `from_config` call, its mode is not `"error"` (read without side
    effects), and no load recorded a registry row on it.
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
    return value is None or value.strip().lower() in _QUIET_MODES


@contextlib.contextmanager
def quiet_casts():
    """Casts inside this block are not checked (a search's own fp16 copies of a model)."""
    token = _IN_CAST.set(True)
    try:
        yield
    finally:
        _IN_CAST.reset(token)


def checked_apply(model, apply, fn, recurse=True):
    """`PreTrainedModel._apply(fn, recurse)` inside [`checked_cast`]; returns what `apply` returns."""
    with checked_cast(model, fn):
        return apply(fn, recurse)


@contextlib.contextmanager
def checked_cast(model, fn):
    """
    The one check of a cast, around `PreTrainedModel._apply(fn)` (which every cast reaches). The outermost model being
    cast is read once ([`~trained_precision.facts.resolver.ModelSnapshot`]) and, unless it has nothing to judge, judged
    at the cast's target ([`cast_target_dtype`]) before the cast, so that `"error"` mode raises with the model
    unchanged, or after it when the target cannot be told beforehand; its `PreTrainedModel`s are judged with it. Yields
    `(target, plan)`: the target (`None` when unknown or unchecked) and the plan's decision. A cast with nothing to
    judge costs a few microseconds, whatever the model's size.
    """
    if not is_outermost_cast(model):  # a sub-model inside a cast (judged with it), or a quantized model
        yield None, Fp16PlanDecision()
        return
    quiet = _quiet(model)
    snapshot = ModelSnapshot(model, quick=quiet)  # the model, read once (no further than its records when quiet)
    before = None if snapshot.nothing else next((t.dtype for t in model.parameters() if t.is_floating_point()), None)
    target = cast_target_dtype(fn) if before is not None else None
    plan = _judge(snapshot, target)[1] if target is not None else Fp16PlanDecision()
    with quiet_casts():
        yield target, plan
    if target is not None:
        _forget_rounded(getattr(model, "config", None), target)
    elif before is not None:  # a device move, or a target no probe tells: compare the dtypes after the cast
        after = next((t.dtype for t in model.parameters() if t.is_floating_point()), None)
        if after is not None and after != before:
            check_model(model, after)  # the cast changed it: read again


def in_construction() -> bool:
    """Whether a model is being constructed inside a `from_pretrained` / `_from_config` call (a sub-model)."""
    return _SCOPE.get() is not None


@contextlib.contextmanager
def model_construction_scope(mode: str | None = None, model_name: str | os.PathLike | None = None, action: str = LOAD):
    """
    Around a model's construction by `from_pretrained` and `_from_config`: the sub-models a composite model builds in its
    `__init__` are checked on their own sub-config as part of the outer call, with its mode, its model name (a risk the
    outer check warned about is not repeated) and its action (`"load"` or `"from_config"`).
    """
    if _SCOPE.get() is not None:  # a sub-model of a sub-model: the outermost call decides
        yield
        return
    name = os.fspath(model_name) if model_name else None
    persisted = _PERSISTED.get()
    mine = persisted is not None and persisted["who"] == name
    row = persisted["row"] if mine and action == LOAD else None
    _PERSISTED.set(None)
    token = _SCOPE.set(_ConstructionScope(mode, name, action, row, deferred=mine and persisted["deferred"]))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def remember_check_mode(model, mode: str | None) -> None:
    """
    Records the `trained_precision_check` a model was loaded (or built) with on it and its sub-models
    (`_trained_precision_check`), so that its later casts follow it instead of the environment variable; inside
    `from_pretrained`, also the registry row the load wrote into the config (`_trained_precision_registry_row`), so the
    casts name the same source.
    """
    scope = _SCOPE.get()
    row = scope.registry_row if scope is not None else None
    if mode is None and row is None:
        return
    if mode is not None:
        mode = resolve_check_mode(mode)
    from ...modeling_utils import PreTrainedModel

    for module in model.modules():
        if isinstance(module, PreTrainedModel):
            if mode is not None:
                vars(module).setdefault(MODE_ATTRIBUTE, mode)
            if row is not None:
                vars(module).setdefault(REGISTRY_ATTRIBUTE, row)


__all__ = [
    "TrainedPrecisionRiskError",
    "check_trained_precision",
    "check_trained_precision_from_config",
    "check_model",
    "checked_apply",
    "checked_cast",
    "reset_warning_cache",
    "resolve_check_mode",
]
