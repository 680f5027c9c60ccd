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
Applying a stored fp16 plan: the modules of a model that must run in fp32 for it to run safely in fp16, kept in fp32 by
every fp16 load, cast and fine-tune.

A plan is measured and validated against fp32 ([`~trained_precision.plan.fp16_plan_search.search_fp16_plan`]) and stored in
the config (`config.fp16_plan`) with its `fingerprint` ([`plan_fingerprint`]: the binding of the weights and config it
was measured on, [`~trained_precision.facts.binding`], with the plan's own content) and `validated_on` (the sequences,
their lengths, the device). Which modules it keeps and whether it is evidence is decided with the other facts
([`~trained_precision.facts.resolver.decide_fp16_plan`]); a search sweeps at most [`DEFAULT_MAX_LENGTH`] by default.

[`apply_fp16_plan`] applies it: the planned modules keep fp32 weights and run with fp32 inputs and autocast disabled;
their outputs go back to the dtype their inputs came in, so fp16 modules never receive fp32 tensors. Module names are
relative to the model the config belongs to.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ...utils import logging
from ..configuration import sub_config_items
from ..facts.binding import model_max_length
from ..facts.evidence import bound_evidence_pending, read_fp16_plan
from ..facts.resolver import (  # noqa: F401  (the plan's names, as the Trainer, the search and the tests import them)
    PLAN_DISABLED,
    Fp16PlanDecision,
    ModelSnapshot,
    bind_persisted_reference,
    config_cleared_phrase,
    decide_fp16_plan,
    is_quantized,
    plan_fingerprint,
    resolve_plan_modules,
    sub_models,
)
from ..guard.check import FROM_CONFIG, LOAD, check_model, checked_cast, in_construction
from ..guard.sentinel import note_cast, note_runtime
from ..vocabulary import FP16_PLAN_FIELD


logger = logging.get_logger(__name__)

#: The longest input a plan must be validated on to be evidence, when the model takes longer inputs (its
#: `max_position_embeddings`) or states no limit: a forward at this length costs seconds on a CPU for a model of a
#: few hundred million parameters.
DEFAULT_MAX_LENGTH = 2048

#: The attribute of a planned module that holds the forward it wraps.
_INNER_FORWARD = "_fp16_plan_inner_forward"
#: The attribute of a planned module that holds the dtype its outputs go to when it has no floating input.
_OUTPUT_DTYPE = "_fp16_plan_output_dtype"


# ----------------------------------------------------------------------------------------------------------------
# Running planned modules in fp32
# ----------------------------------------------------------------------------------------------------------------


def _cast_floating(value: Any, dtype, only_from=None, depth: int = 0):
    """`value` with its floating tensors (in tuples, lists, dicts and `ModelOutput`s) cast to `dtype`."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and value.dtype != dtype and (only_from is None or value.dtype == only_from):
            return value.to(dtype)
        return value
    if depth >= 4:
        return value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_cast_floating(v, dtype, only_from, depth + 1) for v in value)
    if isinstance(value, list):
        return [_cast_floating(v, dtype, only_from, depth + 1) for v in value]
    if type(value) is dict:
        return {key: _cast_floating(item, dtype, only_from, depth + 1) for key, item in value.items()}
    if isinstance(value, dict):  # a `ModelOutput` (an ordered dict with attributes): its items are set in place
        for key in list(value.keys()):
            value[key] = _cast_floating(value[key], dtype, only_from, depth + 1)
    return value


def _floating(values, depth: int = 0):
    """The floating tensors in `values` (tensors, tuples, lists, dicts), in order."""
    import torch

    for value in values:
        if isinstance(value, torch.Tensor):
            if value.is_floating_point():
                yield value
        elif depth < 4 and isinstance(value, (tuple, list)):
            yield from _floating(value, depth + 1)
        elif depth < 4 and isinstance(value, dict):
            yield from _floating(value.values(), depth + 1)


def _compute_dtype(module):
    """The dtype a planned module computes in: its weights' (fp32 once planned), fp32 for modules without weights."""
    import torch

    for tensor in module.parameters():
        if tensor.is_floating_point():
            return tensor.dtype
    return torch.float32


def _planned_forward(self, *args, **kwargs):
    """The forward of a planned module: fp32 inputs, no autocast inside, outputs back in the dtype inputs came in."""
    import torch

    inner = self.__dict__.get(_INNER_FORWARD)
    inner = inner if inner is not None else type(self).forward.__get__(self)
    dtype = _compute_dtype(self)
    floating = list(_floating((args, kwargs)))
    # the dtype outputs go back to: the first narrower input (the fp16 around the module), else the first input's
    narrower = [t for t in floating if t.element_size() < torch.finfo(dtype).bits // 8]
    incoming = narrower[0] if narrower else (floating[0] if floating else None)
    # a module without floating inputs (an embedding): its outputs go to the dtype the rest of the model runs in
    outgoing = incoming.dtype if incoming is not None else self.__dict__.get(_OUTPUT_DTYPE)
    args = _cast_floating(args, dtype)
    kwargs = _cast_floating(kwargs, dtype)
    device_type = incoming.device.type if incoming is not None else "cpu"
    with torch.autocast(device_type=device_type, enabled=False):
        output = inner(*args, **kwargs)
    if outgoing is not None and outgoing != dtype:
        output = _cast_floating(output, outgoing, only_from=dtype)
    return output


def keep_module_in_fp32(module, output_dtype=None) -> None:
    """
    Makes `module` run as a planned module: its weights in fp32, its floating inputs cast to them, autocast disabled
    inside it, and its outputs cast back to the dtype of its first floating input (for a module without floating
    inputs, such as an embedding: to `output_dtype`). Idempotent; works for any module: the forward is wrapped on the
    instance (a bound method, so `copy.deepcopy` and pickling follow the module).
    """
    import types

    import torch

    module.to(torch.float32)
    if output_dtype is not None:
        module.__dict__[_OUTPUT_DTYPE] = output_dtype
    current = module.__dict__.get("forward")
    if getattr(current, "__func__", None) is _planned_forward:
        return
    if current is not None:  # someone (e.g. accelerate) already wraps this instance's forward: keep it inside
        module.__dict__[_INNER_FORWARD] = current
    module.forward = types.MethodType(_planned_forward, module)


def release_module(module) -> None:
    """Undoes [`keep_module_in_fp32`]'s forward wrapper (the weights keep their dtype)."""
    current = module.__dict__.get("forward")
    if getattr(current, "__func__", None) is not _planned_forward:
        return
    module.__dict__.pop(_OUTPUT_DTYPE, None)
    inner = module.__dict__.pop(_INNER_FORWARD, None)
    if inner is not None:
        module.forward = inner
    else:
        del module.forward


def usable_length(config) -> int:
    """The longest input a plan search sweeps by default (a plan is evidence only up to it): the model's, at most
    [`DEFAULT_MAX_LENGTH`]."""
    return min(model_max_length(config), DEFAULT_MAX_LENGTH)


def fp16_plan_pending(config, dtype, use_fp16_plan: bool = True, hf_quantizer=None) -> bool:
    """Whether a load's check must wait for the weights: fp16, the plan on, not quantized, and evidence to bind."""
    import torch

    quantized = hf_quantizer is not None or getattr(config, "quantization_config", None) is not None
    if dtype != torch.float16 or not use_fp16_plan or quantized or config is None:
        return False
    if bound_evidence_pending(config):  # a finished run or a copy's publisher reference: bound to the weights too
        return True
    return any(read_fp16_plan(item) is not None for item in [config, *(sub for _, sub in sub_config_items(config))])


def fp16_plan_dtype_plan(model, dtype, use_fp16_plan: bool = True) -> dict:
    """For the loader: `dtype_plan` entries that load the plan's modules straight into fp32 (as `_keep_in_fp32_modules`)."""
    import torch

    decision = decide_fp16_plan(model, dtype, use_fp16_plan=use_fp16_plan)
    return {"^" + re.escape(name) + r"\.": torch.float32 for name in decision.modules}


def mark_fp16_plan_stale(model, reason: str) -> bool:
    """Marks the model's stored plans stale with `reason` (still applied, no evidence); returns whether one was marked."""
    if callable(getattr(model, "get_base_model", None)):
        model = model.get_base_model()
    config, marked = getattr(model, "config", None), False
    for owner in [config, *(getattr(config, key, None) for key in getattr(config, "sub_configs", None) or {})]:
        plan = getattr(owner, FP16_PLAN_FIELD, None)
        if isinstance(plan, dict) and plan.get("stale") != reason:
            setattr(owner, FP16_PLAN_FIELD, {**plan, "stale": reason})
            marked = True
    return marked


def _weight_share(parameters, planned: list) -> float:
    """The share of a model's weights (`parameters`, each tied tensor once) inside its modules `planned`."""
    total = sum(t.numel() for t in parameters)  # `parameters()` yields a tied tensor once
    return sum({id(t): t.numel() for module in planned for t in module.parameters()}.values()) / max(total, 1)


def _keep_planned(model, modules: dict, decision: Fp16PlanDecision, dtype, training: bool = False) -> None:
    """The last step of a load, cast or fine-tune (`training`: its plans marked stale) to `dtype`: the planned modules
    kept in fp32 and said, then what cleared the runtime noted for the check in the forward."""
    if training:
        mark_fp16_plan_stale(model, "it was measured before a training run changed the weights")
    planned = [modules[name] for name in decision.modules]
    for module in planned:
        keep_module_in_fp32(module, dtype)
    if planned:
        names, validation = decision.modules, decision.plans[0][1]["validation"]
        share = _weight_share(model.parameters(), planned)
        listed = ", ".join(f"`{n}`" for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        logger.info(
            f"{decision.model_name} runs in {'fp16 mixed-precision training' if training else 'fp16'} with its stored "
            f"fp16 plan: {listed} kept in fp32 ({share:.1%} of the weights); validated against fp32 on "
            f"{validation['texts']} sequences (cosine {validation['cosine']:.5f}, top-1 agreement "
            f"{validation['top1_agreement']:.1%})."
        )
    note_runtime(model, dtype, decision.cleared_by)  # checked where it runs


def apply_fp16_plan(
    model, dtype, use_fp16_plan: bool = True, training: bool = False, check: str | None = None
) -> list[str]:
    """
    Applies the model's stored fp16 plan when `dtype` is fp16 ([`keep_module_in_fp32`] for each planned module) and
    returns those modules. Called by `from_pretrained` and `_from_config` (`check`: `"load"` or `"from_config"`: a check
    deferred until the weights could verify the plan, [`fp16_plan_pending`], runs here) and by the Trainer
    (`training=True`, `fp16=True`: the run changes the fp32 weights, so the plan is marked stale). `use_fp16_plan=False`
    ignores the plan now and in later casts.
    """
    import torch

    if callable(getattr(model, "get_base_model", None)):  # a PEFT model: the plan names its base model's modules
        model = model.get_base_model()
    if getattr(model, "config", None) is None:  # a plain `nn.Module` (a Trainer can train one): no plan to read
        return []
    if not use_fp16_plan:
        model.__dict__[PLAN_DISABLED] = True
    snapshot = ModelSnapshot(model)  # the model, read once
    if check == LOAD:  # a publisher reference this load persisted: bound to the loaded weights
        bind_persisted_reference(model.config, snapshot.registry_row, snapshot.parts[0].subject)
    deferred = check in (LOAD, FROM_CONFIG) and not in_construction() and not snapshot.quantized
    if deferred and fp16_plan_pending(snapshot.parts[0].config, dtype, use_fp16_plan):
        # the check deferred until the weights could verify the plan: it gathers the plan with the facts and says
        decision = check_model(model, dtype, action=check, snapshot=snapshot)[1]
    else:
        subject = snapshot.parts[0].subject if check is not None else None
        decision = plans = decide_fp16_plan(snapshot, dtype, use_fp16_plan=use_fp16_plan, subject=subject)
        if not training and dtype == torch.float16:
            facts = (snapshot.parts[0].config, snapshot.registry_row, snapshot.model_class, plans.evidence)
            decision = replace(plans, cleared_by=config_cleared_phrase(*facts))
    _keep_planned(model, dict(model.named_modules()), decision, None if training else dtype, training)
    return list(decision.modules)


def fp16_plan_apply(model, apply, fn, recurse=True):
    """
    `PreTrainedModel._apply(fn, recurse)`, which every cast reaches: one check before the cast decides with the stored
    fp16 plan and says ([`~trained_precision.guard.check.checked_cast`]). When the cast goes to fp16 and the check did
    not raise, the planned modules keep their exact fp32 weights and run as planned modules. Returns what `apply`
    returns.
    """
    import torch

    note_cast()  # whether the weights are fp16 is read again at the next forward
    with checked_cast(model, fn) as (target, decision):  # error mode raises here, before the cast
        modules = dict(model.named_modules()) if decision.modules else {}
        kept = {  # the planned modules' floating parameters and buffers, by (module name, attribute)
            (prefix, attribute): tensor.data
            for name in decision.modules
            for prefix, module in modules[name].named_modules(prefix=name)
            for attribute, tensor in (*module.named_parameters(recurse=False), *module.named_buffers(recurse=False))
            if tensor is not None and tensor.is_floating_point()
        }
        result = apply(fn, recurse)
    for (name, attribute), data in kept.items():
        tensor = getattr(modules[name], attribute)
        tensor.data = data.to(device=tensor.device, dtype=torch.float32)
    _keep_planned(model, modules, decision, target)
    return result


__all__ = [
    "DEFAULT_MAX_LENGTH",
    "Fp16PlanDecision",
    "apply_fp16_plan",
    "decide_fp16_plan",
    "fp16_plan_apply",
    "fp16_plan_dtype_plan",
    "fp16_plan_pending",
    "keep_module_in_fp32",
    "mark_fp16_plan_stale",
    "plan_fingerprint",
    "release_module",
    "resolve_plan_modules",
    "sub_models",
    "usable_length",
]
