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

The load and cast check predicts from what it can read ahead of time (the trained precision, a stored fp16 plan, a
finished run, a publisher's runtime). The paths a model can take to fp16 are open (a second cast, a wrapper, autocast,
a longer input, weights edited after the load), so the forward itself looks at what it produced: when it computed in
fp16 and one of its outputs is not finite,

- `"error"` mode raises [`~trained_precision.check.TrainedPrecisionRiskError`], naming the model, the evidence that
  had cleared fp16 for it (if any) and the fix;
- `"warn"` mode logs one warning per model (a head and its base model share one), for a model whose trained precision
  is known; a model of unknown precision outside `"error"` mode is left as upstream runs it;
- `"ignore"` does nothing.

The mode is read at every forward that computes in fp16: the `trained_precision_check` the model was loaded with,
else the environment variable `TRANSFORMERS_TRAINED_PRECISION_CHECK`, else `"warn"`. Nothing is attached to a model.

**Where it runs.** [`guard_forward`] wraps the `forward` each `PreTrainedModel` subclass defines, when the class is
created (`PreTrainedModel.__init_subclass__`), with `functools.wraps`, so `inspect.signature(model.forward)` is the
model's own. So every way of running a forward passes it: `model(...)`, `model.forward(...)` (sentence-transformers
calls it so), a base model or an encoder on its own, PEFT, accelerate's `prepare` (which wraps the instance's
`forward` around the class's), pipelines, `generate`, the Trainer, and `torch.compile` (any backend, `fullgraph=True`
too, and the decoding steps `generate` compiles). A head and the base model it calls each check their own outputs.
The check keeps no state across a call, so no exception (a `KeyboardInterrupt` included) can leave it off.
Not checked: a `torch.export`ed or `torch.jit.trace`d program (no Python runs around it), and a module that is not a
`PreTrainedModel` called on its own (a single decoder layer).

**When a forward computes in fp16.** fp16 autocast is on for the output's device, or the model has fp16 weights. The
latter is read from the parameters once and kept until the next cast of any model (`PreTrainedModel._apply` calls
[`note_cast`]). With neither, the wrapper costs one call into torch and one dictionary read: nothing else runs, and
the mode is not read. accelerate's fp16 mixed precision runs the forward inside its autocast, so it counts as autocast.

**What is read.** Every floating tensor of the output that is not a loss (a loss can be NaN in any precision when no
label is left to learn from): all logits of a multi-head output, the tuple of `return_dict=False`, nested tuples such
as `hidden_states`. The minimum and maximum of each (`torch.aminmax`: an inf shows in one, a NaN in both) are added in
fp32: one value per forward, non-finite exactly when an element is. On the CPU it is read at once. When the
output is not finite and a floating input (`inputs_embeds`, `pixel_values`, ...) already was, the message says so
instead of blaming fp16.

**On a GPU** (any device but the CPU) reading a device value would synchronise the host at every forward. The check
never does: each forward adds its value to a device accumulator, which is copied to pinned host memory with
`non_blocking=True` and followed by an event; a later forward asks the event whether the copy has landed
(`Event.query()`, which does not wait) and reads it then. So an overflow is reported by a later forward (in `generate`,
the next step; in a loop, the next batch), as "a recent forward"; [`check_sentinel`] reads what is pending and waits.
On a device without events, the accumulator is read synchronously once every [`SYNC_EVERY`] forwards.

**Under `torch.compile`** the traced wrapper hands the output tensors to a check that `torch._dynamo` runs after the
graph (`reorderable_logging_functions`): no graph break, and the check reads the graph's outputs as eager code does.
`torch._dynamo` keeps such a call only where it is made in the compiled forward itself (torch 2.13 drops the ones made
inside a nested module's forward or a helper), so under `torch.compile` the compiled model's own outputs are checked,
not those of the sub-models traced inside its graph.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import weakref

from ..utils import logging
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
from .configuration import sub_config_items
from .resolver import resolve_trained_precision
from .risk import OVERFLOW, Risk
from .vocabulary import BF16, FP16, FP32, UNKNOWN, dtype_options


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

# Per model (a head and its base model share one key: their config), whether warn mode has warned, and the device
# accumulator of its forwards.
_WARNED: set[str] = set()
_FLAGS: dict[str, _DeviceFlag] = {}

# The check a traced forward calls, registered before any trace (see `_register_compiled_check`).
_COMPILED_CHECK = []

# Floating inputs that are not data: a mask may hold -inf by design.
_NOT_DATA = ("mask",)


def guard_forward(cls) -> None:
    """
    Wraps the `forward` that `cls` resolves in the check, unless it is already wrapped (one a model class it inherits
    from defined). Called by `PreTrainedModel.__init_subclass__` for every model class.
    """
    # the forward `cls` resolves, its own or a mixin's (upstream's `GenericForSequenceClassification` and its siblings
    # come before `PreTrainedModel` in the bases of about a hundred head classes, and are not model classes themselves)
    import torch

    forward = getattr(cls, "forward", None)
    if not callable(forward) or getattr(forward, _GUARDED, False) or forward is torch.nn.Module.forward:
        return

    _register_compiled_check()
    is_compiling, any_autocast = torch.compiler.is_compiling, torch._C._is_any_autocast_enabled

    @functools.wraps(forward)
    def guarded_forward(self, *args, **kwargs):
        output = forward(self, *args, **kwargs)
        if is_compiling():  # the call is made here: `torch._dynamo` keeps it for the compiled model's own forward
            facts, check = _traced_facts(self, output), _COMPILED_CHECK[0]
            if facts is not None:
                check(*facts)
        elif any_autocast() or _fp16_weights(self):  # else nothing computed in fp16: nothing else runs
            _check(self, output, args, kwargs)
        return output

    setattr(guarded_forward, _GUARDED, True)
    cls.forward = guarded_forward


def _any_autocast() -> bool:
    import torch

    return torch._C._is_any_autocast_enabled()


def note_cast() -> None:
    """Called by every `PreTrainedModel._apply`: each model's record of fp16 weights is read again at its next forward."""
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
    if has_fp16_weights(model):
        return "its weights are fp16"
    return None


def _total(tensors):
    """
    One fp32 value, non-finite exactly when an element of `tensors` is: the sum of each tensor's minimum and maximum (an
    inf shows in one of them, a NaN in both; finite extremes cannot add up past fp32's range). `torch.aminmax` reads an
    fp16 tensor about five times faster on the CPU than a sum in fp32 does.
    """
    import torch

    extremes = [value.float() for tensor in tensors for value in torch.aminmax(tensor.detach())]
    return extremes[0] + extremes[1] if len(extremes) == 2 else torch.stack(extremes).sum()


def _finite(tensors) -> bool:
    """On the CPU, whose values are read at once: whether every element of `tensors` is finite (fewest torch calls)."""
    import torch

    for tensor in tensors:
        low, high = torch.aminmax(tensor.detach())
        if not (math.isfinite(low) and math.isfinite(high)):
            return False
    return True


def _key(model) -> str:
    """The key of a model's warning and device flag: its config, which a head shares with its base model."""
    return str(id(model.config))


def _is_watched(model, mode: str) -> bool:
    """Whether this forward is checked in `mode`: always in `"error"` mode, in `"warn"` mode when the precision is known."""
    if mode == ERROR:
        return True
    return mode == WARN and _key(model) not in _WARNED and _is_known(model)


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
    if not _is_watched(model, mode):
        return
    key = _key(model)
    if tensors[0].device.type == "cpu":
        if not _finite(tensors):
            _report(model, key, mode, why, late=False, bad_input=_non_finite_input(args, kwargs))
        return
    if key not in _FLAGS:
        _FLAGS[key] = _DeviceFlag()
        _forget_with(model.config, key)
    flag = _FLAGS[key]
    if flag.overflowed(_total(tensors), why):
        _report(model, key, mode, flag.why or why, late=True)


def _non_finite_input(args, kwargs) -> str | None:
    """The name of a floating input that already held inf/NaN (`None` when none did)."""
    import torch

    named = [*((f"positional argument {i}", a) for i, a in enumerate(args)), *kwargs.items()]
    for name, value in named:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not any(w in name for w in _NOT_DATA):
            if not torch.isfinite(value).all():
                return name
    return None


def _traced_facts(model, output) -> tuple | None:
    """
    Under `torch.compile`: what [`_check_compiled`] needs after the graph (constants, then the output tensors), or
    `None` when the forward does not compute in fp16.
    """
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
    if mode == IGNORE or (mode == WARN and (key in _WARNED or trained == UNKNOWN)):
        return
    facts = {"name": name, "model_class": model_class, "trained": trained, "cleared_by": cleared_by or None}
    if tensors[0].device.type == "cpu":
        if not _finite(tensors):
            _raise_or_warn(key, mode, why=why, late=False, per_call=bool(per_call_mode), **facts)
        return
    flag = _FLAGS.setdefault(key, _DeviceFlag())
    if flag.overflowed(_total(tensors), why):
        _raise_or_warn(key, mode, why=flag.why or why, late=True, per_call=bool(per_call_mode), **facts)


def _register_compiled_check() -> None:
    """
    Once per process: registers [`_check_compiled`] as a function `torch._dynamo` may reorder, so that a traced call
    runs after the graph with the tensors among the graph's outputs (no graph break, also with `fullgraph=True`).
    """
    if _COMPILED_CHECK:
        return
    import torch

    check = torch.compiler.disable(_check_compiled, recursive=True)
    reorderable = getattr(getattr(torch._dynamo, "config", None), "reorderable_logging_functions", None)
    if reorderable is not None:  # without it (an older torch), the traced call breaks the graph there instead
        reorderable.add(check)
    _COMPILED_CHECK.append(check)


class _DeviceFlag:
    """The device accumulator of a model's forwards, read without waiting for the device (see the module docstring)."""

    def __init__(self):
        self.pending = self.host = self.event = self.device = self.why = None
        self.unread = 0  # forwards accumulated since the last synchronous read (devices without events)

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


def _report(model, key: str, mode: str, why: str, late: bool, bad_input: str | None = None) -> None:
    """Raises or warns for an eager forward of `model`, with what its config and the load recorded."""
    name = _model_name(model)
    info = resolve_trained_precision(model.config, name, persisted_from=vars(model).get(REGISTRY_ATTRIBUTE))
    _raise_or_warn(
        key,
        mode,
        name=name,
        model_class=type(model).__name__,
        trained=info.precision,
        described=info.describe() if info.is_known else None,
        source=info.source,
        cleared_by=vars(model).get(_CLEARED_BY),
        why=why,
        late=late,
        per_call=vars(model).get(MODE_ATTRIBUTE) is not None,
        bad_input=bad_input,
    )
    _forget_with(model.config, key)  # warned: a later config at the same address is another model


def _forget_with(config, key: str) -> None:
    """Drops what is kept under `key` (a config's id) when `config` is collected, so that a new config there starts clean."""
    weakref.finalize(config, _forget, key)


def _forget(key: str) -> None:
    _WARNED.discard(key)
    _FLAGS.pop(key, None)


def _raise_or_warn(key: str, mode: str, *, name: str, trained: str, source: str | None = None, **details) -> None:
    safe = (FP32,) if trained == FP32 else (BF16, FP32)
    risk = Risk(trained, FP16, OVERFLOW, "high", "this forward's output holds inf/NaN", safe)
    message = format_overflow_message(name, trained=trained, safe=safe, **details)
    if mode == ERROR:
        raise TrainedPrecisionRiskError(message, risk, name, source or UNKNOWN)
    _WARNED.add(key)
    logger.warning(message)


def format_overflow_message(
    name: str,
    *,
    model_class: str,
    why: str,
    trained: str,
    safe: tuple[str, ...],
    described: str | None = None,
    cleared_by: str | None = None,
    late: bool = False,
    per_call: bool = False,
    bad_input: str | None = None,
) -> str:
    """
    The check's message: the model and its class, that a forward computing in fp16 (and why) returned inf/NaN, what
    the model was trained in, the evidence that had cleared fp16 for it (if any), the fix, how to find the overflowing
    module, and how to silence it (`per_call`: the mode was given to `from_pretrained`, which the environment variable
    cannot override). With `bad_input`, the input that already held inf/NaN is named instead of fp16.
    """
    when = "a recent forward" if late else "this forward"
    silence = f'load it with `{KWARG}="ignore"`' if per_call else f"set {ENV_VAR}=ignore"
    if bad_input is not None:
        return (
            f"The output of {when} of '{name}' ({model_class}) holds inf/NaN, and so did its input `{bad_input}`: "
            f"fp16 is not the cause (the forward computed in fp16, {why}, but any precision gives inf/NaN from such "
            f"an input). Check the input. To silence this, {silence}."
        )
    model = f"'{name}'" if name == model_class else f"'{name}' ({model_class})"
    text = f"fp16 overflowed in {when} of {model}: its output holds inf/NaN, and it computes in fp16 ({why})."
    if late:
        text += " (On this device the check reads its flag without synchronising, so it reports a later forward.)"
    if trained != UNKNOWN:
        text += f" It was trained in {trained}" + (f" ({described})." if described else ".")
    if cleared_by:
        text += (
            f" fp16 had been cleared for it by evidence: {cleared_by}. This forward is outside what that evidence "
            "covers (a longer input, weights changed since, or another path to fp16)."
        )
    casts = " or ".join("`.float()`" if p == FP32 else "`.bfloat16()`" for p in safe)
    return (
        f"{text} Load it with {dtype_options(safe)} instead (or cast it with {casts}), without fp16 autocast. To find "
        f"the module that overflows, {FIND_THE_MODULE.format(name=name)}. To silence this, {silence}."
    )


@contextlib.contextmanager
def sentinel_paused():
    """
    Forwards inside this block are not checked: for tools that run a model in fp16 to measure where it overflows (the
    fp16 plan search), where an overflow is the expected answer, not an error.
    """
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
    from ..modeling_utils import PreTrainedModel

    modules = model.modules() if callable(getattr(model, "modules", None)) else [model]
    return [module for module in modules if isinstance(module, PreTrainedModel)]


def check_sentinel(model) -> None:
    """
    Reads what the forwards of `model` (or of the `PreTrainedModel` inside a wrapper) have accumulated on a device and
    reports an overflow as a forward would: raises in `"error"` mode, warns once in `"warn"` mode. Waits for the device;
    call it where a run ends (after a lone forward, at the end of an evaluation). On the CPU nothing is ever pending.
    """
    for module in _pretrained_modules(model):
        key = _key(module)
        flag = _FLAGS.get(key)
        if flag is not None and flag.flush():
            mode = vars(module).get(MODE_ATTRIBUTE) or resolve_check_mode()
            if mode == ERROR or (mode == WARN and key not in _WARNED):
                _report(module, key, mode, flag.why or "on the device", late=True)


def note_runtime(model, dtype=None, fp16_plans: dict | None = None, attach: bool = True) -> None:
    """
    After a load, a `from_config` or a cast of `model` (the outermost one) to `dtype`: records, when `dtype` is fp16,
    the evidence that cleared fp16 for it and its sub-models (the check's message names it if the model overflows
    anyway), and forgets it after a cast to another dtype. Called from the fp16 plan's call sites, which every load and
    every cast reach.

    Args:
        model ([`PreTrainedModel`]): the model.
        dtype (`torch.dtype`, *optional*): the dtype the load or the cast put it in; `None` for a device move or a
            training run (what is recorded is kept).
        fp16_plans (`dict`, *optional*): per sub-config key, the fp16 plan the path applies and verified.
        attach (`bool`, *optional*): unused, kept for the call sites.
    """
    import torch

    if dtype is None:
        return
    cleared_by = _cleared_by(model, fp16_plans or {}) if dtype == torch.float16 else None
    for module in _pretrained_modules(model):
        if cleared_by is None:
            module.__dict__.pop(_CLEARED_BY, None)
        else:
            module.__dict__[_CLEARED_BY] = cleared_by


def _cleared_by(model, fp16_plans: dict) -> str | None:
    """The evidence that clears fp16 for `model` and its sub-models, as a phrase; `None` when none does."""
    config = getattr(model, "config", None)
    if config is None:
        return None
    name = getattr(config, "name_or_path", None) or None  # the Hub id or path (an unnamed model has none)
    row = vars(model).get(REGISTRY_ATTRIBUTE)
    found = []
    for key, sub in [("", config), *sub_config_items(config)]:
        info = resolve_trained_precision(sub, name, persisted_from=None if key else row, fp16_plan=fp16_plans.get(key))
        if info.precision == UNKNOWN:
            continue
        assessment = info.assess(FP16, model_class=None if key else type(model))
        if assessment.overridden:
            found.append((f"(its {key} sub-model) " if key else "") + assessment.evidence.describe())
    return "; ".join(found) or None


def cleared_by(model) -> str | None:
    """The evidence that cleared fp16 for `model` at its latest fp16 load or cast, as the check's message names it."""
    return vars(model).get(_CLEARED_BY)


__all__ = [
    "check_sentinel",
    "cleared_by",
    "format_overflow_message",
    "guard_forward",
    "has_fp16_weights",
    "note_cast",
    "note_runtime",
    "output_tensors",
    "sentinel_paused",
]
