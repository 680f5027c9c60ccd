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
The sentinel: the check's verdict confirmed where the model runs.

The load and cast check predicts from what it can read ahead of time (the trained precision, a stored fp16 plan, a
finished run, a publisher's runtime). The set of paths a model can take to fp16 is open (a second cast, a wrapper,
autocast, a longer input, weights edited after the load), so the models it cares about also carry a forward hook that
looks at what the forward produced: when the forward computed in fp16 and its output is not finite,

- `"error"` mode raises [`~trained_precision.check.TrainedPrecisionRiskError`], naming the model, the evidence that
  had cleared fp16 for it (if any) and the fix;
- `"warn"` mode logs one warning per model, its sub-models included ("fp16 overflowed in this forward of ...");
- `"ignore"` does nothing.

The mode is read at every forward, as the casts read it: the `trained_precision_check` the model was loaded with, else
the environment variable `TRANSFORMERS_TRAINED_PRECISION_CHECK`, else `"warn"`.

**Which models carry it.** The hook is attached (once, see [`attach_sentinel`]) when `from_pretrained` or
`_from_config` has built a model, and when it is cast (`PreTrainedModel._apply`), through the fp16 plan's call sites
that every load and cast reach ([`note_runtime`]), to every model whose trained precision is known (from its config,
a sub-model's config or the registry) and to every model in `"error"` mode. A model whose precision is unknown,
outside `"error"` mode, gets no hook: upstream's behaviour is unchanged. A model built directly
(`GPT2LMHeadModel(config)`) gets its hook at its first cast.

**Every call form.** Each sub-model that is a `PreTrainedModel` (the base model under a head, the encoder and decoder
of an encoder-decoder) carries the hook too, with a pre-hook that counts the model's forwards running on the thread;
only its outermost one checks (another model run inside checks its own). So a call is checked once, on its logits
(also through a PEFT model, `generate`, pipelines, the Trainer's loops, `nn.DataParallel`); a sub-model on its own
(`model.transformer(ids)`), and `model.forward(ids)` called directly, on the base model's last hidden state, the
message naming it ("of 'gpt2' (its sub-model `transformer`)"). Under `torch.compile` (any backend, `fullgraph=True`
too, and the decoding steps `generate` compiles with a static cache) the traced hook hands the output to a check that
`torch._dynamo` runs after the graph (`reorderable_logging_functions`, disabled for tracing): no graph break, and the
check reads the graph's output as an eager one. A `torch.export`ed or `torch.jit.trace`d program is not checked.

**When a forward computes in fp16.** The hook decides at every forward: fp16 autocast is on for the output's device
(`torch.is_autocast_enabled(device)` and `torch.get_autocast_dtype(device) == torch.float16`), or accelerate's
`prepare` wrapped the model's `forward` in it (`mixed_precision="fp16"`, the Trainer's `fp16=True`: the wrapper returns
fp32 outputs, and the hook runs outside it), or the model's weights are fp16 (recorded after the load and every cast),
or its output is fp16. Only then does it look at the output, which is the first floating tensor of the model output
that is not a loss: the logits, or the last hidden state (a loss is skipped: a batch whose labels are all ignored has
a NaN loss in any precision).

**What it costs.** One read of that tensor, a single reduction: on the CPU `torch.aminmax` (an inf shows in the
minimum or the maximum, a NaN in both), whose two values are read at once (a CPU tensor's value costs no
synchronisation), so an overflow is reported by the forward that produced it; on a GPU
`tensor.sum(dtype=torch.float32)`, which is non-finite exactly when an element is (the finite values of an fp16 tensor
cannot add up past fp32's range).
The forward wrote that tensor with `hidden_size` multiply-adds per element at the least, so the read is a small share
of it; under `generate` the model returns only the last position's logits, one row of the vocabulary per sequence.
Nothing runs per layer.

**On a GPU (any device but the CPU)** reading a device value would synchronise the host with the device at every
forward. The sentinel never does: each forward adds its sum to a device accumulator (one more kernel), and the
accumulator is copied to pinned host memory with `non_blocking=True`, followed by an event. A later forward asks the
event whether the copy has landed (`Event.query()`, which does not wait); once it has, the host value is read and a
new copy of what has accumulated since is started. So an overflow is reported by the first forward of the model that
starts after the device has finished the overflowing one: in `generate`, the next step (`generate` synchronises at
every step for its stopping criteria); in an evaluation or training loop, the next batch. The message then says "a
recent forward". A lone forward with nothing after it is reported by [`check_sentinel`], which synchronises. On a
device without events, the accumulator is read synchronously once every [`SYNC_EVERY`] forwards instead.

The hooks (a pre-hook, and a hook with `always_call=True`, so a forward that raises is counted out) add nothing to the
`state_dict`; a `copy.deepcopy` or pickled model carries its own, bound to the copy, with nothing pending or warned,
and [`remove_sentinel`] takes them off the model and its sub-models.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import math
import threading
import weakref
from typing import Any

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
    nothing_to_check,
    resolve_check_mode,
)
from .configuration import sub_config_items
from .resolver import resolve_trained_precision
from .risk import OVERFLOW, Risk
from .vocabulary import BF16, FP16, FP32, UNKNOWN, dtype_options


logger = logging.get_logger(__name__)

#: Where the device flag is read synchronously, once every `SYNC_EVERY` forwards, when the device has no events.
SYNC_EVERY = 16

# Devices whose tensors are read at once: reading a CPU tensor never waits for anything.
_EAGER_DEVICE_TYPES = frozenset({"cpu"})

#: How every message says to find the overflowing module (`{name}`: the model's name or path).
FIND_THE_MODULE = "wrap the model in `transformers.debug_utils.DebugUnderflowOverflow`"
FIND_THE_MODULE = "run `transformers precision {name} --audit`, or " + FIND_THE_MODULE

# Set while a tool measures fp16 overflow on purpose (the fp16 plan search): see `sentinel_paused`.
_PAUSED: contextvars.ContextVar[bool] = contextvars.ContextVar("trained_precision_sentinel_paused", default=False)

# Output keys that are never the output checked: a loss can be NaN in any precision (no label to learn from).
_LOSS_KEYS = frozenset({"loss", "aux_loss"})

#: A weak reference to every sentinel alive in this process, copies included (a copied or unpickled model's hook is
#: built by `__init__` too): while it is empty, no module carries one, and a cast or load has no hook to refresh or
#: take off. A plain set, whose truth every cast reads.
LIVE_SENTINELS: set = set()

# Every sentinel by key, for a compiled forward's check; the check a traced forward calls (`_register_compiled_check`).
_BY_KEY, _KEYS, _COMPILED_CHECK = weakref.WeakValueDictionary(), itertools.count(), []

# The forwards of each model (with its sub-models) running on this thread, and as a trace sees them (`_TRACED`, empty
# outside a trace): only the outermost one of a model checks.
_RUNNING, _TRACED = threading.local(), []


class FiniteSentinel:
    """
    The forward hook of the sentinel (see the module docstring). One per model and per sub-model that is a
    `PreTrainedModel`, with a forward pre-hook ([`FiniteSentinel.enter`]) that counts the forwards running; its state:

    Args:
        fp16_weights (`bool`): whether the module's weights are fp16, as the load or the latest checked cast left them.
        cleared_by (`str`, *optional*): the evidence that cleared fp16 for the model when it was last judged in fp16.
    """

    def __init__(self, fp16_weights: bool = False, cleared_by: str | None = None):
        self.fp16_weights = fp16_weights
        self.cleared_by = cleared_by
        self.key = f"sentinel-{next(_KEYS)}"  # a string: a traced graph keeps it constant (an int may turn symbolic)
        self.where, self.owner_name = "", None  # for a sub-model: its name in the outermost model, and that model's
        self.shared = {"tree": self.key}  # shared by the sentinels of a model and its sub-models: "tree", "warned"
        self._module = None  # a weak reference to the module this sentinel is hooked on
        self._reset()
        _BY_KEY[self.key] = self
        LIVE_SENTINELS.add(weakref.ref(self, LIVE_SENTINELS.discard))

    def _reset(self) -> None:
        self._pending = None  # device accumulator of the sums not yet copied to the host
        self._host = None  # pinned host scalar the latest copy goes to
        self._event = None  # recorded after that copy
        self._device = None
        self._why = None  # why the forwards accumulated on the device computed in fp16
        self._unread = 0  # forwards accumulated since the last synchronous read (devices without events)

    # whether warn mode has warned for this model or one of its sub-models
    warned = property(lambda self: self.shared.get("warned", False), lambda self, v: self.shared.update(warned=v))

    def __getstate__(self) -> dict:
        # a copy is another model: nothing pending, nothing warned. With the module, a copy points to the copied module
        state = {key: getattr(self, key) for key in ("fp16_weights", "cleared_by", "where", "owner_name", "shared")}
        return {**state, "module": self._module() if self._module is not None else None}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["fp16_weights"], state["cleared_by"])
        self.where, self.owner_name, self.shared = state["where"], state["owner_name"], state["shared"]
        self.shared.update(warned=False, tree=self.key)  # shared by the copied sub-models, which set it in turn
        self._module = weakref.ref(state["module"]) if state["module"] is not None else None

    def bind(self, module, owner=None, where: str = "") -> None:
        """Records the module it is hooked on and, for a sub-model, the outermost model and its name there."""
        self._module, self.where = weakref.ref(module), where
        self.owner_name = _model_name(owner) if owner is not None and owner is not module else None
        if self.owner_name is not None:
            self.shared = find_sentinel(owner).shared

    def enter(self, module, args) -> None:
        """The forward pre-hook: counts this forward among those running, so that a nested one does not check."""
        import torch

        if torch.compiler.is_exporting():
            return  # an exported program runs no Python around it: nothing to count or check
        if torch.compiler.is_compiling():  # the count as the trace sees it
            _TRACED.append(self.shared["tree"])
        else:
            vars(_RUNNING)[self.shared["tree"]] = vars(_RUNNING).get(self.shared["tree"], 0) + 1

    def __call__(self, module, args, output) -> None:
        import torch

        if torch.compiler.is_exporting():
            return None
        if torch.compiler.is_compiling():
            # traced: the check runs after the graph, on its output; a nested forward leaves it to the outermost
            if _TRACED:
                _TRACED.pop()
            tensor = None if self.shared["tree"] in _TRACED else _checked_output(output)
            if tensor is not None:
                _COMPILED_CHECK[0](self.key, tensor)
            return None
        depth = vars(_RUNNING).pop(self.shared["tree"], 0)
        if depth > 1:
            vars(_RUNNING)[self.shared["tree"]] = depth - 1
        if depth > 1 or output is None or torch.jit.is_tracing():
            return None  # a forward nested in another one that is checked, or one that raised
        return self.check(module, _checked_output(output))

    def check(self, module, tensor) -> None:
        """Reads `tensor`, the output of a forward of `module`, and reports an overflow (see the module docstring)."""
        import torch

        if tensor is None or _PAUSED.get():
            return None
        mode = _mode(module)
        if mode == IGNORE or (mode == WARN and self.warned):
            return None
        if tensor.device.type == "meta" or tensor.numel() == 0:
            return None
        why = self._fp16_reason(module, tensor)
        if why is None:
            return None
        if tensor.device.type in _EAGER_DEVICE_TYPES:
            low, high = torch.aminmax(tensor.detach())
            if not (math.isfinite(low) and math.isfinite(high)):
                self._report(module, mode, why, late=False)
        elif self._lazy_overflowed(tensor.detach(), why):
            self._report(module, mode, self._why or why, late=True)
        return None

    def _fp16_reason(self, model, tensor) -> str | None:
        """Why this forward computes in fp16, as a phrase; `None` when it does not."""
        import torch

        device = tensor.device.type
        if torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == torch.float16:
            return "under fp16 autocast"
        # accelerate's `prepare` (the Trainer's `fp16=True`) wraps the model's own `forward` in fp16 autocast and casts
        # its outputs to fp32: the hook runs after that wrapper, outside the autocast
        if "_original_forward" in vars(model) and _accelerate_mixed_precision() == "fp16":
            return "under accelerate's fp16 mixed precision"
        if self.fp16_weights:
            return "its weights are fp16"
        if tensor.dtype == torch.float16:
            return "its output is fp16"
        return None

    def _lazy_overflowed(self, tensor, why: str) -> bool:
        """
        Adds this forward's sum to the device accumulator; returns whether a copy that has already landed on the host
        shows an overflow of an earlier forward. Never waits for the device (see the module docstring).
        """
        import torch

        overflowed = False
        if self._device is not None and tensor.device != self._device:
            overflowed = self.flush()  # the model moved: read what the old device holds (rare, synchronises)
        total = tensor.sum(dtype=torch.float32)
        self._pending = total if self._pending is None else self._pending.add_(total)
        self._device, self._why = tensor.device, self._why or why
        if self._event is not None:
            if not self._event.query():
                return overflowed  # the latest copy has not landed: look again at the next forward
            overflowed = overflowed or not math.isfinite(self._host.item())
            self._event = None
        event = _new_event(tensor.device)
        if event is None:  # no events on this device: read synchronously, once every SYNC_EVERY forwards
            self._unread += 1
            if self._unread < SYNC_EVERY:
                return overflowed
            return self.flush() or overflowed
        if self._host is None:
            self._host = _host_scalar(tensor.device)
        self._host.copy_(self._pending, non_blocking=True)
        event.record()
        self._event, self._pending = event, None
        return overflowed

    def flush(self) -> bool:
        """Reads everything accumulated on a device, waiting for it; returns whether a forward overflowed."""
        overflowed = False
        if self._event is not None:
            self._event.synchronize()
            overflowed = not math.isfinite(self._host.item())
            self._event = None
        if self._pending is not None:
            overflowed = not math.isfinite(self._pending.item()) or overflowed
            self._pending = None
        self._unread = 0
        return overflowed

    def _report(self, model, mode: str, why: str, late: bool) -> None:
        name = self.owner_name or _model_name(model)
        config = getattr(model, "config", None)
        info = resolve_trained_precision(config, name, persisted_from=vars(model).get(REGISTRY_ATTRIBUTE))
        risk = _overflow_risk(info)
        per_call = vars(model).get(MODE_ATTRIBUTE) is not None
        message = format_overflow_message(
            name,
            why=why,
            mode=mode,
            info=info,
            risk=risk,
            cleared_by=self.cleared_by,
            late=late,
            per_call=per_call,
            where=self.where,
        )
        if mode == ERROR:
            raise TrainedPrecisionRiskError(message, risk, name, info.source or UNKNOWN)
        self._why = None
        self.warned = True
        logger.warning(message)


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


def _mode(model) -> str:
    """The mode of this forward: the model's per-call `trained_precision_check`, else the environment variable."""
    return vars(model).get(MODE_ATTRIBUTE) or resolve_check_mode()


def _accelerate_mixed_precision() -> str | None:
    """The mixed precision of accelerate's process state (`"fp16"`, `"bf16"`, `"no"`), without creating that state."""
    import sys

    state = sys.modules.get("accelerate.state")
    shared = getattr(getattr(state, "AcceleratorState", None), "_shared_state", None) or {}
    return shared.get("_mixed_precision")


def _checked_output(output, depth: int = 0) -> Any:
    """The tensor the sentinel checks: the first floating, non-scalar tensor of the output that is not a loss."""
    import torch

    if isinstance(output, torch.Tensor):
        return output if output.is_floating_point() and output.dim() > 0 else None
    if depth > 0:
        return None
    if isinstance(output, dict):  # a `ModelOutput`: its fields in order
        values = (value for key, value in output.items() if key not in _LOSS_KEYS)
    elif isinstance(output, (tuple, list)):
        values = iter(output)
    else:
        return None
    for value in values:
        found = _checked_output(value, depth + 1)
        if found is not None:
            return found
    return None


def _new_event(device):
    """An event on `device`'s current stream, or `None` where the device has no events."""
    import torch

    try:
        return torch.Event(device=device)
    except (RuntimeError, TypeError, ValueError):
        return None


def _host_scalar(device):
    """The host scalar a device's flag is copied to: pinned, so that a `non_blocking` copy does not wait."""
    import torch

    try:
        return torch.empty((), dtype=torch.float32, pin_memory=True)
    except RuntimeError:
        return torch.empty((), dtype=torch.float32)


def _model_name(model) -> str:
    """The model's name in messages: its Hub id or path, else its class."""
    config = getattr(model, "config", None)
    return getattr(config, "name_or_path", None) or type(model).__name__


def _overflow_risk(info) -> Risk:
    """The risk the rules predicted for fp16, or, where they predicted none, the overflow this forward shows."""
    assessment = info.assess(FP16) if info.is_known else None
    if assessment is not None and assessment.prior is not None:
        return assessment.prior
    safe = (FP32,) if info.precision == FP32 else (BF16, FP32)
    return Risk(info.precision, FP16, OVERFLOW, "high", "this forward's output holds inf/NaN", safe)


def format_overflow_message(
    name: str,
    *,
    why: str,
    mode: str,
    info,
    risk: Risk,
    cleared_by: str | None = None,
    late: bool = False,
    per_call: bool = False,
    where: str = "",
) -> str:
    """
    The sentinel's message: the model, that fp16 overflowed and why the forward ran in fp16, what the model was trained
    in, the evidence that had cleared fp16 for it (if any), the fix, how to find the overflowing module, and how to
    silence it (`per_call`: the mode was given to `from_pretrained`, which the environment variable cannot override).
    `where`: the sub-model whose forward it was, when it ran without the model's own forward around it.
    """
    when = "a recent forward" if late else "this forward"
    part = f" (its sub-model `{where}`)" if where else ""
    text = f"fp16 overflowed in {when} of '{name}'{part}: its output holds inf/NaN, and it computes in fp16 ({why})."
    if late:
        text += (
            " (On this device the sentinel reads its flag without synchronising, so it reports the overflow at a "
            "later forward.)"
        )
    if info.is_known:
        text += f" It was trained in {risk.trained} ({info.describe()})."
    if cleared_by:
        text += (
            f" fp16 had been cleared for it by evidence: {cleared_by}. This forward is outside what that evidence "
            "covers (a longer input, weights changed since, or another path to fp16)."
        )
    silence = f'load it with `{KWARG}="ignore"`' if per_call else f"set {ENV_VAR}=ignore"
    return (
        f"{text} Load it with {dtype_options(risk.safe_dtypes)} instead (or cast it with "
        f"{' or '.join('`.float()`' if p == FP32 else '`.bfloat16()`' for p in risk.safe_dtypes)}), without fp16 "
        f"autocast. To find the module that overflows, {FIND_THE_MODULE.format(name=name)}. To silence this, "
        f"{silence}."
    )


def find_sentinel(model) -> FiniteSentinel | None:
    """The sentinel hooked on `model`, or `None`."""
    for hook in getattr(model, "_forward_hooks", {}).values():
        if isinstance(hook, FiniteSentinel):
            return hook
    return None


def sentinels_alive() -> bool:
    """Whether any sentinel exists in this process; while none does, no model carries one."""
    return bool(LIVE_SENTINELS)


def has_sentinel(model) -> bool:
    """Whether `model` carries the sentinel."""
    return find_sentinel(model) is not None


def remove_sentinel(model) -> bool:
    """Takes the sentinel off `model` and off its sub-models; returns whether `model` had one."""
    had = has_sentinel(model)
    for module in _modules(model):
        for kind in ("_forward_hooks", "_forward_pre_hooks"):
            hooks = getattr(module, kind, None) or {}
            for key in [k for k, h in hooks.items() if isinstance(getattr(h, "__self__", h), FiniteSentinel)]:
                del hooks[key]
                for extra in (f"{kind}_with_kwargs", "_forward_hooks_always_called"):
                    getattr(module, extra, {}).pop(key, None)
    return had


def _hook(module, sentinel: FiniteSentinel) -> FiniteSentinel:
    """Hooks `sentinel` on `module`: its pre-hook counts the forward, its hook checks it (also after a raise)."""
    _register_compiled_check()
    module.register_forward_pre_hook(sentinel.enter)
    module.register_forward_hook(sentinel, always_call=True)
    return sentinel


def _check_compiled_output(key: str, tensor) -> None:
    """The check of a forward traced by `torch.compile`, which runs after the graph: as for an eager forward."""
    _TRACED.clear()  # nothing is traced while compiled code runs (a check that raised may have left a push behind)
    sentinel = _BY_KEY.get(key)
    module = sentinel._module() if sentinel is not None and sentinel._module is not None else None
    # an eager forward of the same model around it (its hooks outside the graph) checks instead
    if module is not None and not vars(_RUNNING).get(sentinel.shared["tree"]):
        sentinel.check(module, tensor)


def _register_compiled_check() -> None:
    """
    Once per process: registers the check as a function `torch._dynamo` may reorder, so that a traced call of it runs
    after the graph with the tensor among the graph's outputs (no graph break, also with `fullgraph=True`).
    """
    if _COMPILED_CHECK:
        return
    import torch

    check = torch.compiler.disable(_check_compiled_output, recursive=True)
    reorderable = getattr(getattr(torch._dynamo, "config", None), "reorderable_logging_functions", None)
    if reorderable is not None:  # without it (an older torch), the traced call breaks the graph there instead
        reorderable.add(check)
    _COMPILED_CHECK.append(check)


def _judged_sub_models(model):
    """The sub-models of `model` (its `PreTrainedModel` modules but itself), with their names."""
    from ..modeling_utils import PreTrainedModel

    return [(name, module) for name, module in model.named_modules() if name and isinstance(module, PreTrainedModel)]


def check_sentinel(model) -> None:
    """
    Reads what the sentinel of `model` (or of the `PreTrainedModel` inside a wrapper) has accumulated on a device and
    reports an overflow as a forward would: raises in `"error"` mode, warns once in `"warn"` mode. Synchronises with
    the device; call it where a run ends (after a lone forward, at the end of an evaluation). On the CPU nothing is
    ever pending. A no-op for a model without the sentinel.
    """
    for module in _modules(model):
        sentinel = find_sentinel(module)
        if sentinel is not None and sentinel.flush():
            mode = _mode(module)
            if mode != IGNORE and not (mode == WARN and sentinel.warned):
                sentinel._report(module, mode, sentinel._why or "on the device", late=True)


def _modules(model):
    modules = getattr(model, "modules", None)
    return modules() if callable(modules) else [model]


def _is_known(model, registry_row) -> bool:
    """Whether the trained precision of `model` (or of one of its sub-models) is known."""
    if registry_row is not None or vars(model).get(REGISTRY_ATTRIBUTE) is not None:
        return True
    config = getattr(model, "config", None)
    if config is None:
        return False
    name = getattr(config, "name_or_path", None) or None  # the Hub id or path (an unnamed model has none)
    if resolve_trained_precision(config, name).is_known:
        return True
    return any(resolve_trained_precision(sub, name).is_known for _, sub in sub_config_items(config))


def _has_fp16_weights(model) -> bool:
    import torch

    return any(p.dtype == torch.float16 for p in model.parameters())


def attach_sentinel(model, mode: str | None = None, registry_row: Any = None) -> FiniteSentinel | None:
    """
    Hooks the sentinel on `model` when it should carry one (its trained precision is known, or it runs in `"error"`
    mode), and on each of its `PreTrainedModel` sub-models (see "Every call form" in the module docstring), and records
    whether its weights are fp16 now; else takes it off them. Idempotent. Called through [`note_runtime`] after every
    load, `from_config` and cast.

    Args:
        model ([`PreTrainedModel`]): the model.
        mode (`str`, *optional*): the call's `trained_precision_check`; by default the model's, else the environment
            variable's.
        registry_row ([`~trained_precision.registry.RegistryEntry`], *optional*): the registry row whose precision the
            load wrote into the config.

    Returns:
        The model's [`FiniteSentinel`], or `None` when it carries none.
    """
    if not LIVE_SENTINELS and mode is None and registry_row is None and nothing_to_check(model):
        return None  # no hook anywhere to take off, and none wanted: unknown precision, not in "error" mode
    sentinel = find_sentinel(model)
    if sentinel is None:
        wanted = resolve_check_mode(mode if mode is not None else vars(model).get(MODE_ATTRIBUTE)) == ERROR
        if not wanted and not _is_known(model, registry_row):
            remove_sentinel(model)  # the sentinels its sub-models got when they were built
            return None
        sentinel = _hook(model, FiniteSentinel())
    sentinel.fp16_weights = _has_fp16_weights(model)  # read now: one pass over the weights
    sentinel.bind(model)
    for name, module in _judged_sub_models(model):
        sub = find_sentinel(module)
        if sub is None:  # a sub-model's weights are some of the model's: none is fp16 when the model has none
            sub = _hook(
                module, FiniteSentinel(sentinel.fp16_weights and _has_fp16_weights(module), sentinel.cleared_by)
            )
        sub.bind(module, model, name)
    return sentinel


def note_runtime(model, dtype=None, fp16_plans: dict | None = None, attach: bool = True) -> None:
    """
    After a load, a `from_config` or a cast of `model` (the outermost one) to `dtype`: attaches the sentinel when the
    model should carry one ([`attach_sentinel`]), records whether its weights are fp16 now and, when `dtype` is fp16,
    the evidence that cleared fp16 for it (the sentinel's message names it if the model overflows anyway). Called from
    the fp16 plan's call sites, which every load and every cast reach: `apply_fp16_plan` after a load and
    `fp16_plan_apply`, which `PreTrainedModel._apply` runs.

    Args:
        model ([`PreTrainedModel`]): the model.
        dtype (`torch.dtype`, *optional*): the dtype the load or the cast put it in; `None` for a device move or a
            cast whose target could not be told beforehand (the evidence recorded so far is kept while the weights
            stay fp16).
        fp16_plans (`dict`, *optional*): per sub-config key, the fp16 plan the path applies and verified.
        attach (`bool`, *optional*, defaults to `True`): `False` for a device move: a model that carries the
            sentinel has its record of fp16 weights refreshed, nothing else is read (not even the mode).
    """
    import torch

    if attach:
        sentinel = attach_sentinel(model)  # which reads whether its weights are fp16 now
    else:
        sentinel = find_sentinel(model)
        if sentinel is not None:
            sentinel.fp16_weights = _has_fp16_weights(model)
    if sentinel is None:
        return
    if not sentinel.fp16_weights:
        sentinel.cleared_by = None
    elif dtype == torch.float16:
        sentinel.cleared_by = _cleared_by(model, fp16_plans or {})
    for _, module in _judged_sub_models(model):  # the sub-models' sentinels follow the model's
        sub = find_sentinel(module)
        if sub is not None:
            sub.fp16_weights = sentinel.fp16_weights and _has_fp16_weights(module)
            sub.cleared_by = sentinel.cleared_by


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


__all__ = [
    "FiniteSentinel",
    "attach_sentinel",
    "check_sentinel",
    "format_overflow_message",
    "has_sentinel",
    "note_runtime",
    "remove_sentinel",
    "sentinel_paused",
    "sentinels_alive",
    "LIVE_SENTINELS",
]
