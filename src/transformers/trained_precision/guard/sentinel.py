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
A check inside every model's `forward` that raises (or warns) when a forward computed in fp16 returns inf or NaN.

[`guard_forward`] wraps each `PreTrainedModel` subclass's `forward` at class creation, so every way of running a
forward passes it (eager, PEFT, pipelines, `generate`, the Trainer, `torch.compile`); it keeps no state across a call.
A forward computes in fp16 under fp16 autocast or with fp16 weights (read once per cast, [`note_cast`]); otherwise the
wrapper costs one call into torch and one dict read. `"error"` mode raises
[`~trained_precision.guard.check.TrainedPrecisionRiskError`], `"warn"` warns once per model whose trained precision is known.
On the CPU the outputs' `torch.aminmax` extremes are read at once; on another device they accumulate behind an event
that a later forward queries without waiting ([`check_sentinel`] waits). Design, limits and costs:
`docs/source/en/trained_precision_fp16_plan.md` ("The sentinel").
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import math
import weakref

from ...utils import logging
from ..configuration import sub_config_items
from ..facts.resolver import resolve_trained_precision
from ..facts.risk import OVERFLOW, Risk
from ..vocabulary import BF16, FP16, FP32, UNKNOWN, dtype_options
from .check import (
    ENV_VAR,
    ERROR,
    IGNORE,
    KWARG,
    MODE_ATTRIBUTE,
    REGISTRY_ATTRIBUTE,
    WARN,
    TrainedPrecisionRiskError,
    resolve_check_mode,
)


logger = logging.get_logger(__name__)

#: Where the device flag is read synchronously, once every `SYNC_EVERY` forwards, when the device has no events.
SYNC_EVERY = 16

#: How every message says to find the overflowing module (`{name}`: the model's name or path).
FIND_THE_MODULE = "run `transformers precision {name} --audit`, or wrap the model in `transformers.debug_utils.DebugUnderflowOverflow`"

# Set while a tool measures fp16 overflow on purpose (the fp16 plan search): see `sentinel_paused`.
_PAUSED: contextvars.ContextVar[bool] = contextvars.ContextVar("trained_precision_sentinel_paused", default=False)

# Marks a guarded `forward`; the instance attributes the check keeps on a model.
_GUARDED = "_trained_precision_guarded"
_FP16_WEIGHTS = "_trained_precision_fp16_weights"  # (the cast count it was read at, whether a parameter is fp16)
_CLEARED_BY = "_trained_precision_cleared_by"  # the evidence that cleared fp16 at the latest fp16 load or cast
_KNOWN = "_trained_precision_known"  # (the config's precision and name it was read for, whether it is known)

# How many casts of a `PreTrainedModel` this process has made: a model's record of fp16 weights holds until it moves.
_CASTS = [0]

# Per model (its config's id, shared by a head and its base model): whether it warned, and its device accumulator.
_WATCHES: dict[str, _DeviceFlag] = {}


def guard_forward(cls) -> None:
    """Wraps the `forward` `cls` resolves (its own or a mixin's) in the check, once per class (`__init_subclass__`)."""
    import torch

    forward = getattr(cls, "forward", None)
    if not callable(forward) or getattr(forward, _GUARDED, False) or forward is torch.nn.Module.forward:
        return

    check = _compiled_check()
    is_compiling, any_autocast = torch.compiler.is_compiling, torch._C._is_any_autocast_enabled

    @functools.wraps(forward)
    def guarded_forward(self, *args, **kwargs):
        output = forward(self, *args, **kwargs)
        if is_compiling():  # the call is made here: `torch._dynamo` keeps it for the compiled model's own forward
            facts = _traced_facts(self, output)
            if facts is not None:
                check(*facts)
        elif any_autocast() or _fp16_weights(self):  # else nothing computed in fp16: nothing else runs
            _check(self, output, args, kwargs)
        return output

    setattr(guarded_forward, _GUARDED, True)
    cls.forward = guarded_forward


def note_cast() -> None:
    """Called by every `PreTrainedModel._apply`: each model's fp16-weights record is read again at its next forward."""
    _CASTS[0] += 1


def has_fp16_weights(model) -> bool:
    """Whether a parameter of `model` is fp16: read once per cast (see [`note_cast`])."""
    import torch

    if torch.compiler.is_compiling():  # read while tracing only: the graph's guards keep it
        return any(p.dtype == torch.float16 for p in model.parameters())
    return _fp16_weights(model)


def _fp16_weights(model) -> bool:
    """[`has_fp16_weights`] outside a trace: the record of the latest cast, else one pass over the parameters."""
    cached = model.__dict__.get(_FP16_WEIGHTS)
    if cached is not None and cached[0] == _CASTS[0]:
        return cached[1]
    import torch

    value = any(p.dtype == torch.float16 for p in model.parameters())
    model.__dict__[_FP16_WEIGHTS] = (_CASTS[0], value)
    return value


def output_tensors(output, depth: int = 0) -> list:
    """Every floating, non-scalar tensor of a model output that is not a loss, nested tuples and lists included."""
    import torch

    if isinstance(output, torch.Tensor):
        return [output] if output.is_floating_point() and output.dim() > 0 and output.numel() > 0 else []
    if depth > 2:
        return []
    if isinstance(output, dict):  # a `ModelOutput`
        values = [value for key, value in output.items() if "loss" not in key]
    elif isinstance(output, (tuple, list)):
        values = output
    else:
        return []
    return [tensor for value in values for tensor in output_tensors(value, depth + 1)]


def _fp16_reason(model, tensor) -> str | None:
    """Why this forward computed in fp16, as a phrase; `None` when it did not."""
    import torch

    device = tensor.device.type
    if torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == torch.float16:
        return "under fp16 autocast"
    return "its weights are fp16" if has_fp16_weights(model) else None


def _total(tensors):
    """One fp32 value, non-finite exactly when an element is: the sum of each tensor's extremes (`torch.aminmax`)."""
    import torch

    extremes = [value.float() for tensor in tensors for value in torch.aminmax(tensor.detach())]
    return extremes[0] + extremes[1] if len(extremes) == 2 else torch.stack(extremes).sum()


def _finite(tensors) -> bool:
    """On the CPU, whose values are read at once: whether every element of `tensors` is finite (fewest torch calls)."""
    import torch

    return all(math.isfinite(value) for tensor in tensors for value in torch.aminmax(tensor.detach()))


def _key(model) -> str:
    """The key of a model's warning and device flag: its config, which a head shares with its base model."""
    return str(id(model.config))


def _watch(key: str, config=None) -> _DeviceFlag:
    """What is kept under `key`; with `config`, dropped when it is collected (a new config there starts clean)."""
    watch = _WATCHES.get(key)
    if watch is None:
        watch = _WATCHES[key] = _DeviceFlag()
    if config is not None and not watch.bound:
        watch.bound = True
        weakref.finalize(config, _WATCHES.pop, key, None)
    return watch


def _warned(key: str) -> bool:
    watch = _WATCHES.get(key)
    return watch is not None and watch.warned


def _is_known(model) -> bool:
    """Whether the trained precision of `model` or of a sub-model is known; kept while its config says the same."""
    config = model.config
    facts = (getattr(config, "trained_precision", None), getattr(config, "name_or_path", None))
    cached = model.__dict__.get(_KNOWN)
    if cached is not None and cached[0] == facts:
        return cached[1]
    name = facts[1] or None
    configs = (config, *dict(sub_config_items(config)).values())
    known = vars(model).get(REGISTRY_ATTRIBUTE) is not None or any(
        resolve_trained_precision(c, name).is_known for c in configs
    )
    model.__dict__[_KNOWN] = (facts, known)
    return known


def _overflowed(key: str, tensors, why: str, config=None) -> tuple[bool, str] | None:
    """`(late, why)` when `tensors` overflowed (at once on the CPU, else once the device flag landed), else `None`."""
    if tensors[0].device.type == "cpu":
        return None if _finite(tensors) else (False, why)
    flag = _watch(key, config)
    return (True, flag.why or why) if flag.overflowed(_total(tensors), why) else None


def _check(model, output, args, kwargs) -> None:
    """The check of an eager forward that may have computed in fp16 (see the module docstring)."""
    import torch

    if _PAUSED.get() or torch.compiler.is_exporting() or torch.jit.is_tracing():
        return
    tensors = output_tensors(output)
    if not tensors or tensors[0].device.type == "meta":
        return
    why = _fp16_reason(model, tensors[0])
    if why is None:
        return
    mode = vars(model).get(MODE_ATTRIBUTE) or resolve_check_mode()
    key = _key(model)
    if mode != ERROR and not (mode == WARN and not _warned(key) and _is_known(model)):
        return
    found = _overflowed(key, tensors, why, model.config)
    if found is None:
        return
    late, why = found
    # a floating input that already held inf/NaN is blamed instead (not a mask: it may hold -inf by design)
    named = [*((f"positional argument {i}", a) for i, a in enumerate(args)), *kwargs.items()]
    data = [(n, v) for n, v in named if isinstance(v, torch.Tensor) and v.is_floating_point() and "mask" not in n]
    bad_input = None if late else next((n for n, v in data if not torch.isfinite(v).all()), None)
    _report(model, mode, why, late, bad_input=bad_input)


def _traced_facts(model, output) -> tuple | None:
    """Under `torch.compile`: the arguments of [`_check_compiled`], or `None` when the forward is not in fp16."""
    import torch

    if torch.compiler.is_exporting():
        return None
    tensors = output_tensors(output)
    why = _fp16_reason(model, tensors[0]) if tensors else None
    if why is None:
        return None
    own, config = model.__dict__, model.config
    facts = (_key(model), own.get(MODE_ATTRIBUTE) or "", _model_name(model), type(model).__name__)
    return (*facts, getattr(config, "trained_precision", UNKNOWN), own.get(_CLEARED_BY) or "", why, *tensors)


def _check_compiled(key, per_call_mode, name, model_class, trained, cleared_by, why, *tensors) -> None:
    """The check of a compiled forward, which `torch._dynamo` runs after the graph, with what the trace read."""
    if _PAUSED.get():
        return
    mode = per_call_mode or resolve_check_mode()
    if mode == IGNORE or (mode == WARN and (_warned(key) or trained == UNKNOWN)):
        return
    found = _overflowed(key, tensors, why)
    if found is not None:
        late, why = found
        overflow = _Overflow(name, model_class, why, trained, None, cleared_by or None, late, bool(per_call_mode))
        overflow.raise_or_warn(key, mode)


@functools.cache
def _compiled_check():
    """[`_check_compiled`], registered once as a function `torch._dynamo` may run after the graph (no graph break)."""
    import torch

    check = torch.compiler.disable(_check_compiled, recursive=True)
    reorderable = getattr(getattr(torch._dynamo, "config", None), "reorderable_logging_functions", None)
    if reorderable is not None:  # without it (an older torch), the traced call breaks the graph there instead
        reorderable.add(check)
    return check


class _DeviceFlag:
    """Per model: whether warn mode has warned, and the device accumulator of its forwards, read without waiting."""

    def __init__(self):
        self.pending = self.host = self.event = self.device = self.why = None
        self.unread = 0  # forwards accumulated since the last synchronous read (devices without events)
        self.warned = self.bound = False

    def overflowed(self, total, why: str) -> bool:
        """Adds `total`; returns whether a copy that has already landed on the host shows an earlier overflow."""
        import torch

        overflowed = False
        if self.device is not None and total.device != self.device:
            overflowed = self.flush()  # the model moved: read what the old device holds (rare, synchronises)
        # out of place, and the host buffer made outside inference mode: a forward under `torch.inference_mode()`
        # (sentence-transformers' `encode`) followed by a plain one must not update an inference tensor in place
        self.pending = total if self.pending is None else self.pending + total
        self.device, self.why = total.device, self.why or why
        event = self.event
        if event is not None:
            if not event.query():
                return overflowed  # the latest copy has not landed: look again at the next forward
            overflowed = overflowed or not math.isfinite(self.host.item())
            self.event = None
        try:
            event = torch.Event(device=total.device)
            if self.host is None:
                with torch.inference_mode(False):
                    self.host = torch.empty((), dtype=torch.float32, pin_memory=torch.cuda.is_available())
            self.host.copy_(self.pending, non_blocking=True)
            event.record()
        except (RuntimeError, TypeError, ValueError):  # no events on this device: read once every SYNC_EVERY forwards
            self.unread += 1
            return (self.unread >= SYNC_EVERY and self.flush()) or overflowed
        self.event, self.pending = event, None
        return overflowed

    def flush(self) -> bool:
        """Reads everything accumulated, waiting for the device; returns whether a forward overflowed."""
        overflowed = False
        if self.event is not None:
            self.event.synchronize()
            overflowed = not math.isfinite(self.host.item())
            self.event = None
        if self.pending is not None:
            overflowed = not math.isfinite(self.pending.item()) or overflowed
            self.pending = None
        self.unread = 0
        return overflowed


def _report(model, mode: str, why: str, late: bool, bad_input: str | None = None) -> None:
    """Raises or warns for an eager forward of `model`, with what its config and the load recorded."""
    name, own, key = _model_name(model), vars(model), _key(model)
    info = resolve_trained_precision(model.config, name, persisted_from=own.get(REGISTRY_ATTRIBUTE))
    described = info.describe() if info.is_known else None
    overflow = _Overflow(name, type(model).__name__, why, info.precision, described, own.get(_CLEARED_BY), late)
    per_call = own.get(MODE_ATTRIBUTE) is not None
    overflow = dataclasses.replace(overflow, per_call=per_call, bad_input=bad_input, source=info.source)
    _watch(key, model.config)  # a later config at the same address is another model
    overflow.raise_or_warn(key, mode)


@dataclasses.dataclass(frozen=True)
class _Overflow:
    """An fp16 overflow to report, with what its message says (see [`_Overflow.message`])."""

    name: str
    model_class: str
    why: str
    trained: str = UNKNOWN
    described: str | None = None
    cleared_by: str | None = None
    late: bool = False
    per_call: bool = False
    bad_input: str | None = None
    source: str | None = None

    @property
    def safe(self) -> tuple[str, ...]:
        return (FP32,) if self.trained == FP32 else (BF16, FP32)

    def raise_or_warn(self, key: str, mode: str) -> None:
        if mode == ERROR:
            risk = Risk(self.trained, FP16, OVERFLOW, "high", "this forward's output holds inf/NaN", self.safe)
            raise TrainedPrecisionRiskError(self.message(), risk, self.name, self.source or UNKNOWN)
        _watch(key).warned = True
        logger.warning(self.message())

    def message(self) -> str:
        """The message; with `bad_input`, the input that already held inf/NaN is blamed instead of fp16."""
        when = "a recent forward" if self.late else "this forward"
        silence = f'load it with `{KWARG}="ignore"`' if self.per_call else f"set {ENV_VAR}=ignore"
        if self.bad_input is not None:
            return (
                f"The output of {when} of '{self.name}' ({self.model_class}) holds inf/NaN, and so did its input "
                f"`{self.bad_input}`: fp16 is not the cause (the forward computed in fp16, {self.why}, but any "
                f"precision gives inf/NaN from such an input). Check the input. To silence this, {silence}."
            )
        model = f"'{self.name}'" if self.name == self.model_class else f"'{self.name}' ({self.model_class})"
        text = f"fp16 overflowed in {when} of {model}: its output holds inf/NaN, and it computes in fp16 ({self.why})."
        if self.late:
            text += " (On this device the check reads its flag without synchronising, so it reports a later forward.)"
        if self.trained != UNKNOWN:
            text += f" It was trained in {self.trained}" + (f" ({self.described})." if self.described else ".")
        if self.cleared_by:
            text += (
                f" fp16 had been cleared for it by evidence: {self.cleared_by}. This forward is outside what that "
                "evidence covers (a longer input, weights changed since, or another path to fp16)."
            )
        casts = " or ".join("`.float()`" if p == FP32 else "`.bfloat16()`" for p in self.safe)
        return (
            f"{text} Load it with {dtype_options(self.safe)} instead (or cast it with {casts}), without fp16 "
            f"autocast. To find the module that overflows, {FIND_THE_MODULE.format(name=self.name)}. To silence "
            f"this, {silence}."
        )


@contextlib.contextmanager
def sentinel_paused():
    """Forwards in this block are not checked: for tools that measure where fp16 overflows (the fp16 plan search)."""
    token = _PAUSED.set(True)
    try:
        yield
    finally:
        _PAUSED.reset(token)


def _model_name(model) -> str:
    """The model's name in messages: its Hub id or path, else its class."""
    return getattr(model.config, "name_or_path", None) or type(model).__name__


def _pretrained_modules(model) -> list:
    """`model` and its `PreTrainedModel` modules (through a wrapper such as PEFT's too)."""
    from ...modeling_utils import PreTrainedModel

    modules = model.modules() if callable(getattr(model, "modules", None)) else [model]
    return [module for module in modules if isinstance(module, PreTrainedModel)]


def check_sentinel(model) -> None:
    """Reports what the forwards of `model` (or of a wrapper's models) accumulated on a device, waiting for it."""
    for module in _pretrained_modules(model):
        key = _key(module)
        flag = _WATCHES.get(key)
        if flag is not None and flag.flush():
            mode = vars(module).get(MODE_ATTRIBUTE) or resolve_check_mode()
            if mode == ERROR or (mode == WARN and not flag.warned):
                _report(module, mode, flag.why or "on the device", late=True)


def note_runtime(model, dtype=None, cleared: str | None = None) -> None:
    """
    Records on `model` and its sub-models the evidence that cleared fp16 at a load or cast to `dtype` (`cleared`: the
    check's phrase, [`~trained_precision.guard.decision.cleared_phrase`]); another dtype forgets it, `None` (a move) keeps it.
    """
    import torch

    if dtype is None:
        return
    for module in _pretrained_modules(model):
        if cleared is None or dtype != torch.float16:
            module.__dict__.pop(_CLEARED_BY, None)
        else:
            module.__dict__[_CLEARED_BY] = cleared


def cleared_by(model) -> str | None:
    """The evidence that cleared fp16 for `model` at its latest fp16 load or cast, as the check's message names it."""
    return vars(model).get(_CLEARED_BY)


__all__ = [
    "check_sentinel",
    "cleared_by",
    "guard_forward",
    "has_fp16_weights",
    "note_cast",
    "note_runtime",
    "output_tensors",
    "sentinel_paused",
]
