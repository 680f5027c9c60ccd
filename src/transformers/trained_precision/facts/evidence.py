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
Evidence that a runtime precision works for one checkpoint, whatever the risk rules predict from its training.

The risk rules ([`~trained_precision.facts.risk.assess_risk`]) are a prior: a bf16-trained model may overflow in fp16. For
some checkpoints there is evidence that the runtime works. It is looked for in this order, and the first kind found
decides ([`find_evidence`]):

| order | evidence | where it is read | what it covers |
|-------|----------|------------------|----------------|
| 1 | the publisher's reference runtime | the registry row of the Hub id (`reference_runtime`, with its own `reference_source`) | that runtime, for the publisher's unchanged weights |
| 2 | a validated fp16 plan | the config's `fp16_plan`, once the loader or cast verified it (see below) | fp16, with the plan's modules kept in fp32, for the input lengths it was validated on |
| 3 | a finished training run | the config's `trained_precision_run` ([`~trained_precision.facts.run_record.RunRecord`]), `status: "finished"` after at least `MIN_RUN_STEPS` optimizer steps | the precision of that run (`trained_precision`), for runs of its kind |
| - | upstream's `_keep_in_fp32_modules` | the model class | a mitigation, not evidence: the known overflow site only |

A `save_pretrained` copy of a Hub checkpoint keeps the publisher's reference in its config
(`trained_precision_reference`, [`read_reference_record`]) while its weights are the publisher's. A stored dtype
alone is never evidence, nor is a run that diverged or did not end; a run that kept an fp16 plan's modules in fp32
proves fp16 only while the plan itself is evidence. A stored plan ([`read_fp16_plan`]) is a claim until
[`~trained_precision.facts.resolver.decide_fp16_plan`] verified it against the weights: a load or cast on the model, the
`transformers precision` report on the safetensors mapped lazily (unverified, with the reason, where it cannot).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from ...utils import logging
from ..configuration import sub_config_items
from ..vocabulary import (
    FP16,
    FP16_PLAN_FIELD,
    REFERENCE_FIELD,
    RUN_FIELD,
    RUN_FINISHED,
    RUN_PURE,
    UNKNOWN,
    dtype_to_precision,
)
from .binding import SAMPLED_VALUES, weights_subject  # noqa: F401 (re-exported: the checks bind with it)
from .run_record import RunRecord


logger = logging.get_logger(__name__)

#: Evidence kinds, in the order they are looked for.
REFERENCE_RUNTIME = "reference_runtime"
FP16_PLAN = "fp16_plan"
FINISHED_RUN = "finished_run"
#: The version of the fp16 plan schema [`read_fp16_plan`] accepts. Older plans (version 1: no fingerprint, no record
#: of their inputs; 2: a fingerprint of sampled values; 3: of every value, without the config) are still read and
#: applied, but are never evidence; 4: bound by a sample of values that moved per weight (binding version 2).
FP16_PLAN_VERSION = 5
FP16_PLAN_VERSIONS = (1, 2, 3, 4, 5)

# The fixed schema of a stored fp16 plan: member -> accepted types (`bool` is never a number here).
_PLAN_SCHEMA: dict[str, tuple[type, ...]] = {
    "version": (int,),
    "dtype": (str,),
    "modules": (list,),
    "headroom": (int, float),
    "fp32_weight_share": (int, float),
    "calibration_sha256": (str,),
    "validation": (dict,),
}
# Version 2 adds the binding to the weights and to the inputs.
_PLAN_SCHEMA_V2: dict[str, tuple[type, ...]] = {
    "fingerprint": (str,),
    "validated_on": (dict,),
}
_VALIDATED_ON_SCHEMA: dict[str, tuple[type, ...]] = {
    "sequences": (int,),
    "lengths": (list,),
    "max_tokens": (int,),
    "device": (str,),
    "backend": (str,),
}
_VALIDATION_SCHEMA: dict[str, tuple[type, ...]] = {
    "passed": (bool,),
    "max_abs_error": (int, float),
    "cosine": (int, float),
    "top1_agreement": (int, float),
    "texts": (int,),
}


@dataclasses.dataclass(frozen=True)
class Evidence:
    """
    Why a runtime precision is known to work for a checkpoint (or, for a mitigation, what already protects it): its
    `kind` (`"reference_runtime"`, ..., or `"keep_in_fp32"` for a mitigation), the canonical `runtime`, the `detail` as a
    phrase for messages, and the `source` where it is recorded.
    """

    kind: str
    runtime: str
    detail: str
    source: str | None = None

    @property
    def is_mitigation(self) -> bool:
        """`True` for a mitigation (upstream's `_keep_in_fp32_modules`): it protects a known overflow site only."""
        return self.kind == KEEP_IN_FP32

    def describe(self) -> str:
        """The evidence and its source, as one phrase."""
        return f"{self.detail} ({self.source})" if self.source else self.detail


#: The kind of a mitigation: upstream's hand-written `_keep_in_fp32_modules`.
KEEP_IN_FP32 = "keep_in_fp32"


def _member(config: Any, name: str) -> Any:
    """A member of a `PreTrainedConfig`, or of the dict of a `config.json`."""
    if isinstance(config, dict):
        return config.get(name)
    return getattr(config, name, None)


def _schema_problem(value: Any, schema: dict[str, tuple[type, ...]], where: str) -> str | None:
    if not isinstance(value, dict):
        return f"{where} is a {type(value).__name__}, not an object"
    missing = [key for key in schema if key not in value]
    if missing:
        return f"{where} lacks {', '.join(missing)}"
    for key, types in schema.items():
        if isinstance(value[key], bool) and bool not in types or not isinstance(value[key], types):
            return f"{where}.{key} is {value[key]!r}, expected {' or '.join(t.__name__ for t in types)}"
    return None


def fp16_plan_problem(plan: Any) -> str | None:
    """
    What is wrong with a stored fp16 plan, or `None` when it matches the fixed schema of its version (the members of
    `_PLAN_SCHEMA` and `validation`'s; version 2 adds `fingerprint` and `validated_on`), with `dtype` `"fp16"` and
    `modules` dotted module names.
    """
    problem = _schema_problem(plan, _PLAN_SCHEMA, FP16_PLAN_FIELD)
    if problem is None:
        problem = _schema_problem(plan["validation"], _VALIDATION_SCHEMA, f"{FP16_PLAN_FIELD}.validation")
    if problem is None and plan["version"] not in FP16_PLAN_VERSIONS:
        problem = f"{FP16_PLAN_FIELD}.version is {plan['version']!r}; this version reads {FP16_PLAN_VERSIONS}"
    if problem is None and plan["version"] >= 2:
        problem = _schema_problem(plan, _PLAN_SCHEMA_V2, FP16_PLAN_FIELD) or _schema_problem(
            plan["validated_on"], _VALIDATED_ON_SCHEMA, f"{FP16_PLAN_FIELD}.validated_on"
        )
    if problem is None and plan["dtype"] != FP16:
        problem = f"{FP16_PLAN_FIELD}.dtype is {plan['dtype']!r}, expected {FP16!r}"
    if problem is None and not all(isinstance(m, str) and m for m in plan["modules"]):
        problem = f"{FP16_PLAN_FIELD}.modules must hold dotted module names (non-empty strings)"
    return problem


def read_fp16_plan(config: Any) -> dict | None:
    """
    The fp16 plan stored in a config (or `config.json` dict) when it claims to work: it matches the schema and passed its
    validation. A malformed plan logs one warning and reads as absent; a failed one is absent without a warning. A claim,
    not evidence: see [`~trained_precision.facts.resolver.decide_fp16_plan`].
    """
    plan = _member(config, FP16_PLAN_FIELD)
    if plan is None:
        return None
    problem = fp16_plan_problem(plan)
    if problem is not None:
        name = _member(config, "_name_or_path") or _member(config, "name_or_path") or "a config"
        logger.warning_once(
            f"The `{FP16_PLAN_FIELD}` of {name} is malformed ({problem}): it is ignored. "
            f"`transformers precision plan --write` stores a valid one."
        )
        return None
    return dict(plan) if plan["validation"]["passed"] is True else None


def read_reference_record(config: Any) -> dict | None:
    """
    The publisher reference a load persisted into a config (`trained_precision_reference`), or `None`: also once the
    config records a training run, or when the weights were saved in a dtype that rounds the publisher's values.
    """
    from .run_record import read_run_record

    value = _member(config, REFERENCE_FIELD)
    if not isinstance(value, dict) or not isinstance(value.get("model_id"), str):
        return None
    if read_run_record(config) is not None:
        return None
    stored, saved = value.get("stored_dtype"), _member(config, "dtype") or _member(config, "torch_dtype")
    saved = dtype_to_precision(saved) if saved is not None else UNKNOWN
    if stored is not None and saved not in (UNKNOWN, "fp32", dtype_to_precision(stored)):
        return None
    return dict(value)


def keep_in_fp32_modules(
    architectures: Iterable[Any] = (), model_class: Any = None, import_classes: bool = True
) -> tuple[str, ...]:
    """
    Upstream's `_keep_in_fp32_modules` (T5's `wo`) of `model_class`, else of the first of `architectures` that names a
    class of this library; `()` when none is known, without torch, or with `import_classes=False` and no class (the
    report without `--audit` never imports torch).
    """
    if model_class is None and import_classes:
        import transformers

        for name in architectures or ():
            if not (isinstance(name, str) and name.isidentifier() and name[:1].isupper()):
                continue
            try:
                found = getattr(transformers, name)
            except Exception:  # not a class of this library, or its backend is missing
                continue
            if isinstance(found, type):
                model_class = found
                break
    modules = getattr(model_class, "_keep_in_fp32_modules", None) if isinstance(model_class, type) else None
    return tuple(sorted(modules)) if modules else ()


def find_evidence(
    runtime: Any,
    *,
    entry: Any = None,
    plan: dict | None = None,
    trained: str = UNKNOWN,
    run: RunRecord | None = None,
    compute: str = RUN_PURE,
    copied_from: str | None = None,
    hub_id: str | None = None,
) -> Evidence | None:
    """
    The first evidence, in the order of the module's table, that `runtime` works for a checkpoint, or `None`.

    Args:
        runtime (`str` or `torch.dtype`): the runtime precision.
        entry ([`~trained_precision.facts.registry.RegistryEntry`], *optional*): the registry row of the checkpoint.
        plan (`dict`, *optional*): the fp16 plan this path applies and verified; never the config's claim alone.
        trained (`str`, *optional*): the config's own `trained_precision`, the precision of `run`.
        run ([`~trained_precision.facts.run_record.RunRecord`], *optional*): the run that stamped it.
        compute (`str`, *optional*, defaults to `"pure"`): `"pure"` for a model loaded or cast into `runtime`, `"amp"`
            for a mixed-precision training run.
        copied_from (`str`, *optional*): the Hub id a `save_pretrained` copy was loaded from, when `entry` comes from
            its `trained_precision_reference`.
        hub_id (`str`, *optional*): the checkpoint's Hub id, named instead of a family glob's pattern.
    """
    runtime = dtype_to_precision(runtime)
    if runtime == UNKNOWN:
        return None
    reference = getattr(entry, "reference_runtime", None) if entry is not None else None
    if reference is not None and dtype_to_precision(reference) == runtime and entry.reference_source:
        name = hub_id or entry.model_id if entry.is_glob else entry.model_id
        copy = ""
        if copied_from:
            name = copied_from if entry.is_glob else name
            copy = (
                f", and this is an unchanged copy of '{copied_from}' (config: {REFERENCE_FIELD}; its config and weights "
                f"match the publisher's, on a sample of {SAMPLED_VALUES} values per weight)"
            )
        return Evidence(
            REFERENCE_RUNTIME,
            runtime,
            f"its publisher runs '{name}' in {runtime}{copy}",
            f"stated at {entry.reference_source}",
        )
    if runtime == FP16 and plan is not None:
        return _plan_evidence(plan)
    if runtime == FP16 and run is not None and run.fp16_plan:
        # the run kept a stored plan's modules in fp32: it proves fp16 only while that plan is evidence (`plan`)
        return None
    if trained == runtime and run is not None and run.proves(runtime, compute):
        return Evidence(FINISHED_RUN, runtime, run.describe(runtime), f"config: {RUN_FIELD}")
    return None


def _plan_evidence(plan: dict) -> Evidence:
    """The evidence of a verified fp16 plan: how many modules it keeps in fp32, and its validation against fp32."""
    validation = plan["validation"]
    domain = plan.get("validated_on") or {}
    inputs = f"{validation['texts']} sequences"
    if domain:
        inputs = (
            f"{domain['sequences']} sequences of up to {domain['max_tokens']} tokens on {domain['device']} "
            f"({domain['backend']})"
        )
    return Evidence(
        FP16_PLAN,
        FP16,
        f"a measured fp16 plan, verified against these weights, keeps {len(plan['modules'])} module(s) in fp32 "
        f"and passed its validation against fp32 (cosine {validation['cosine']:.4f}, top-1 agreement "
        f"{validation['top1_agreement']:.2%} on {inputs})",
        f"config: {FP16_PLAN_FIELD}",
    )


def keep_in_fp32_mitigation(
    runtime: Any, architectures: Iterable[Any] = (), model_class: Any = None, import_classes: bool = True
):
    """
    Upstream's mitigation for an fp16 runtime ([`keep_in_fp32_modules`]) as an [`Evidence`] of kind `"keep_in_fp32"`, or
    `None`: it protects the known overflow site only, so a risk stays a warning.
    """
    if dtype_to_precision(runtime) != FP16:
        return None
    modules = keep_in_fp32_modules(architectures, model_class, import_classes)
    if not modules:
        return None
    names = ", ".join(f"`{m}`" for m in modules)
    detail = (
        f"upstream keeps {names} in fp32 for fp16 loads (`_keep_in_fp32_modules`), which covers the known overflow "
        "site; the other modules are not measured"
    )
    detail += ": `transformers precision plan` measures them and stores a plan"
    return Evidence(KEEP_IN_FP32, FP16, detail, None)


def bound_evidence_pending(config: Any) -> bool:
    """
    Whether a config (or a sub-config) records evidence only the loaded weights can check (a finished run, a copy's
    publisher reference): a load then judges the model once its weights are loaded.
    """
    from .run_record import read_run_status

    for item in [config, *(sub for _, sub in sub_config_items(config))] if config is not None else []:
        if read_run_status(item) == RUN_FINISHED or isinstance(_member(item, REFERENCE_FIELD), dict):
            return True
    return False


__all__ = [
    "bound_evidence_pending",
    "FINISHED_RUN",
    "FP16_PLAN",
    "KEEP_IN_FP32",
    "REFERENCE_RUNTIME",
    "Evidence",
    "find_evidence",
    "fp16_plan_problem",
    "keep_in_fp32_mitigation",
    "keep_in_fp32_modules",
    "read_fp16_plan",
    "read_reference_record",
]
