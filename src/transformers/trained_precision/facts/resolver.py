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
The facts: what precision a model was trained in, where that was read from, and the evidence its checkpoint records.

[`resolve_trained_precision`] answers for every path (loading, casting, the report): the config's own known
`trained_precision` always wins; else the registry row of the model's Hub id; else `"unknown"`, never reported as safe.
A fine-tune keeps its older stage as `pretraining_precision`: the oldest stage is the risk rules' prior (an explicitly
unknown one makes the risk unknown), which [`TrainedPrecisionInfo.assess`] weighs against the evidence and upstream's
`_keep_in_fp32_modules`: one [`Assessment`] per runtime, per sub-model of a composite model.

A loaded model is read once ([`ModelSnapshot`]); its stored fp16 plan is decided with the facts ([`decide_fp16_plan`]):
applied when the path runs fp16, it is on, the model is not quantized and every module name resolves; evidence only
when its binding also holds ([`~trained_precision.facts.binding.binding_problem`]).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

from ...utils import logging
from ..configuration import sub_config_items
from ..vocabulary import (
    FIELD,
    FP16,
    FP16_PLAN_FIELD,
    FP32,
    PRETRAINING_FIELD,
    REFERENCE_FIELD,
    RUN_FIELD,
    RUN_PURE,
    UNKNOWN,
    InvalidTrainedPrecisionError,
    dtype_to_precision,
    normalize_precision,
)
from .binding import (
    BINDING_VERSION,
    BOUND_PLAN,
    BOUND_PUBLISHER,
    Binding,
    WeightsSubject,
    binding_digest,
    binding_problem,
    weights_subject,
)
from .evidence import (
    FINISHED_RUN,
    FP16_PLAN_VERSION,
    REFERENCE_RUNTIME,
    Evidence,
    bound_evidence_pending,
    find_evidence,
    keep_in_fp32_mitigation,
    read_fp16_plan,
    read_reference_record,
)
from .hub_ids import hub_id_for, possible_hub_ids
from .registry import RegistryEntry, lookup
from .risk import Risk, assess_lineage_risk
from .run_record import RunRecord, read_run_record


logger = logging.get_logger(__name__)

#: Where a trained precision was read from.
SOURCE_CONFIG = "config"
SOURCE_REGISTRY = "registry"

#: The attribute on which `from_pretrained` / `_from_config` record a per-call mode on the models they build, so that
#: their later casts follow it rather than the environment variable.
MODE_ATTRIBUTE = "_trained_precision_check"
#: The attribute on which `from_pretrained` records the registry row whose precision it wrote into the config, so that
#: later casts name the registry as the load did (the config is serialised, so the row is kept on the model).
REGISTRY_ATTRIBUTE = "_trained_precision_registry_row"

#: What a check runs for (it decides the message's verb and fix).
LOAD = "load"
FROM_CONFIG = "from_config"
CAST = "cast"


def config_precision(config: Any, field: str = FIELD) -> str:
    """A config's canonical value for `field` (`"trained_precision"` or `"pretraining_precision"`), from a
    `PreTrainedConfig` or a `config.json` dict; `"unknown"` when it is absent or not a valid value."""
    if isinstance(config, Mapping):
        value = config.get(field)
    else:
        value = getattr(config, field, None)
    if value is None:
        return UNKNOWN
    try:
        return normalize_precision(value)
    except InvalidTrainedPrecisionError:
        return UNKNOWN


def pretraining_recorded_unknown(config: Any) -> bool:
    """Whether `pretraining_precision` is present and reads as `"unknown"` (an absent field says nothing)."""
    if isinstance(config, Mapping):
        value = config.get(PRETRAINING_FIELD)
    else:
        value = getattr(config, PRETRAINING_FIELD, None)
    return value is not None and config_precision(config, PRETRAINING_FIELD) == UNKNOWN


@dataclasses.dataclass(frozen=True)
class Assessment:
    """
    The answer for one `runtime`: the risk rules' `prior` from the lineage, the `evidence` that overrides it, upstream's
    `mitigation` (`_keep_in_fp32_modules`: the known overflow site only, the risk stays), and why recorded evidence was
    `dropped` (not bound to these weights), as a sentence for the message.
    """

    runtime: str
    prior: Risk | None = None
    evidence: Evidence | None = None
    mitigation: Evidence | None = None
    dropped: str | None = None

    @property
    def risk(self) -> Risk | None:
        """The risk that remains: the prior, unless evidence overrides it."""
        return None if self.evidence is not None else self.prior

    @property
    def overridden(self) -> bool:
        """Whether evidence overrides a risk the rules predicted."""
        return self.prior is not None and self.evidence is not None


@dataclasses.dataclass(frozen=True)
class TrainedPrecisionInfo:
    """
    A model's trained `precision` (`"unknown"` when neither the config nor the registry knows it) and its `source`
    (`"config"`, `"registry"` or `None`), with what the checkpoint records: the registry `entry` used, the `row` of its
    Hub id (for a `save_pretrained` copy: the row its reference names, `copied_from`), the older stage (`pretraining`,
    `oldest_unknown`), the verified fp16 `plan`, the `run` that stamped it, and the loaded `subject` bound evidence is
    checked against (without it a finished run or a copy's reference is no evidence).
    """

    precision: str
    source: str | None = None
    hub_id: str | None = None
    entry: RegistryEntry | None = None
    pretraining: str = UNKNOWN
    row: RegistryEntry | None = None
    plan: dict | None = dataclasses.field(default=None, compare=False)
    run: RunRecord | None = None
    architectures: tuple[str, ...] = ()
    copied_from: str | None = None
    oldest_unknown: bool = False
    reference: dict | None = dataclasses.field(default=None, compare=False)
    subject: Any = dataclasses.field(default=None, compare=False)
    run_source: str | None = None

    @property
    def run_status(self) -> str | None:
        """How the run that stamped the config's `trained_precision` ended, or `None`."""
        return self.run.status if self.run is not None else None

    @property
    def is_known(self) -> bool:
        return self.precision != UNKNOWN

    @property
    def provenance(self) -> str:
        """`"config"`, `"registry: <row id>"` or `"unknown"`."""
        if self.source == SOURCE_REGISTRY and self.entry is not None:
            return f"{SOURCE_REGISTRY}: {self.entry.model_id}"
        return self.source or UNKNOWN

    @property
    def lineage(self) -> tuple[str, ...]:
        """The training stages, oldest first (`("unknown", "fp32")` for a fine-tune of an unknown model)."""
        stages = [p for p in (self.pretraining, self.precision) if p != UNKNOWN]
        if self.oldest_unknown and stages and self.pretraining == UNKNOWN:
            stages.insert(0, UNKNOWN)
        return tuple(dict.fromkeys(stages))

    @property
    def lineage_known(self) -> bool:
        """Whether the oldest training stage is known: only then do the risk rules (and a "safe") apply."""
        return bool(self.lineage) and self.lineage[0] != UNKNOWN

    def assess(
        self, runtime: Any, model_class: Any = None, import_classes: bool = True, compute: str = RUN_PURE
    ) -> Assessment:
        """
        The [`Assessment`] of running at `runtime`: the oldest stage's prior, the evidence (bound evidence that does
        not hold is dropped, and the next kind looked for), and upstream's mitigation when an fp16 risk remains.
        `import_classes=False` never imports a model class; `compute="amp"`: a mixed-precision run over wider weights.
        """
        runtime = dtype_to_precision(runtime)
        prior = assess_lineage_risk(self.lineage, runtime)
        if prior is None:
            return Assessment(runtime)
        found, dropped = {"entry": self.row, "run": self.run, "copied_from": self.copied_from}, []
        trained = self.precision if self.source == SOURCE_CONFIG else UNKNOWN
        while True:  # at most twice per kind: evidence that is not bound to this model is dropped, then look again
            evidence = find_evidence(
                runtime, plan=self.plan, trained=trained, compute=compute, hub_id=self.hub_id, **found
            )
            problem = self._unbound(evidence, found)
            if problem is None:
                break
            dropped.append(problem)
        dropped = " ".join(dropped) or None
        if evidence is not None:
            return Assessment(runtime, prior, evidence, dropped=dropped)
        mitigation = keep_in_fp32_mitigation(runtime, self.architectures, model_class, import_classes)
        return Assessment(runtime, prior, mitigation=mitigation, dropped=dropped)

    def _unbound(self, evidence: Evidence | None, found: dict) -> str | None:
        """Why `evidence` (a finished run, a publisher reference the config records) is not bound to [`subject`], after
        removing it. A Hub id's own reference holds for the weights its load bound (less a PEFT adapter's layers): `{}`
        once the one its load persisted was dropped, `None` (with weights here) when no load of it wrote one."""
        if evidence is None:
            return None
        subject, copied = self.subject, found["copied_from"]
        if evidence.kind == FINISHED_RUN:
            binding, runs, key = self.run.binding, (self.run.compute,), "run"
            what = f"The finished run in {self.run_source or f'`{RUN_FIELD}`'}"
            recreate = "train it again with this version"
        elif evidence.kind == REFERENCE_RUNTIME and (self.reference is not None or subject is not None):
            binding, runs, key = (self.reference or {}).get("binding"), (BOUND_PUBLISHER,), "entry"
            where = f"in `{REFERENCE_FIELD}`" if self.reference is not None else "of the registry"
            what = f"The publisher reference {where} ('{copied or self.hub_id}')"
            recreate = f"load '{copied}' itself and save it again" if copied else f"load '{self.hub_id}' again"
            if not copied and self.reference and (binding is None or subject is None):
                return None  # a Hub id's own weights: not read yet (its load), or not here to check
            subject = subject if copied else _without_adapters(subject)
        else:
            return None
        if key == "entry" and self.reference == {}:
            problem = f"it was dropped when the weights were rounded, quantized or trained: {recreate}"
        elif key == "entry" and self.reference is None:  # built from its config, or its reference removed since
            problem = f"no load of it bound these weights (built from its config, or trained since): {recreate}"
        else:
            problem = binding_problem(binding, subject, runs=runs, recreate=recreate)
        if problem is None:
            return None
        found[key] = None
        if key == "entry":
            found["copied_from"] = None
        return f"{what} is no evidence here: {problem}."

    def risk(self, runtime: Any) -> Risk | None:
        """The risk of running at `runtime` that remains after the evidence (see [`assess`]); `None` if unknown."""
        return self.assess(runtime).risk

    def describe(self) -> str:
        """Where the precision comes from, as a phrase for messages."""
        if self.source == SOURCE_CONFIG:
            if self.oldest_unknown and self.pretraining == UNKNOWN:
                return (
                    f"from its config's `{FIELD}`, a fine-tune of a model whose precision is unknown (its "
                    f'`{PRETRAINING_FIELD}` is "{UNKNOWN}")'
                )
            if self.pretraining not in (UNKNOWN, self.precision):
                # messages say "trained in <the oldest stage> (<this>)": name both stages and their fields
                return (
                    f"from its config's `{PRETRAINING_FIELD}`; fine-tuned in {self.precision} since, by its `{FIELD}`"
                )
            return f"from its config's `{FIELD}`"
        if self.source == SOURCE_REGISTRY and self.entry is not None:
            return f"registry: {self.entry.model_id}, {self.entry.citation}"
        return "by an unknown source"


def _without_adapters(subject: WeightsSubject | None) -> WeightsSubject | None:
    """`subject` as its base model was loaded: the layers a PEFT adapter adds beside each `base_layer` left out."""
    weights = subject.weights if subject is not None else None
    wrapped = tuple({name.split(".base_layer.")[0] + "." for name, *_ in weights or () if ".base_layer." in name})
    if not wrapped:
        return subject
    weights = tuple(
        (name.replace(".base_layer.", ".", 1), *rest)
        for name, *rest in weights
        if ".base_layer." in name or not name.startswith(wrapped)
    )
    return dataclasses.replace(subject, weights=weights, _digests={})


def _name_of(config: Any) -> Any:
    return config.get("_name_or_path") if isinstance(config, Mapping) else getattr(config, "name_or_path", None)


def _architectures(config: Any) -> tuple[str, ...]:
    value = config.get("architectures") if isinstance(config, Mapping) else getattr(config, "architectures", None)
    return tuple(a for a in value if isinstance(a, str)) if isinstance(value, (list, tuple)) else ()


def resolve_trained_precision(
    config: Any,
    name_or_path: str | os.PathLike | None = None,
    *,
    persisted_from: RegistryEntry | None = None,
    fp16_plan: dict | None = None,
    subject: Any = None,
) -> TrainedPrecisionInfo:
    """
    A model's trained precision (the config's known value, else the registry row of its Hub id, else `"unknown"`),
    with the evidence the config records. `config`: a `PreTrainedConfig` or a `config.json` dict; `name_or_path`:
    where the model comes from (the config's by default); `persisted_from`: the row whose precision loading wrote into
    it (reported as the registry's while it holds that value); `fp16_plan`: the plan the caller verified against the
    weights; `subject`: the loaded weights bound evidence must match (without it a run or a copy's reference clears
    nothing).
    """
    name_or_path = name_or_path or _name_of(config)
    hub_id = hub_id_for(name_or_path) if isinstance(name_or_path, (str, os.PathLike)) else None
    precision = config_precision(config, FIELD)
    row = lookup(hub_id) if hub_id else None
    found = {
        "hub_id": hub_id,
        "pretraining": config_precision(config, PRETRAINING_FIELD),
        "row": row,
        "architectures": _architectures(config) if config is not None else (),
        "subject": subject,
    }
    if row is None and config is not None:
        row, found["copied_from"] = _copied_reference_row(config, precision)
        found["row"] = row
    if row is not None and config is not None:  # `{}`: the reference a load persisted with the precision is gone
        gone = persisted_from is not None and precision != UNKNOWN
        found["reference"] = read_reference_record(config) or ({} if gone else None)
    # the plan verified on this path: the plan's own evidence, and a finished run that rested on it, use it
    found["plan"] = fp16_plan
    if persisted_from is not None and precision == normalize_precision(persisted_from.precision):
        return TrainedPrecisionInfo(precision, SOURCE_REGISTRY, entry=persisted_from, **found)
    if precision != UNKNOWN:
        found["run"] = read_run_record(config)
        found["oldest_unknown"] = pretraining_recorded_unknown(config)
        return TrainedPrecisionInfo(precision, SOURCE_CONFIG, **found)
    if row is None:
        return TrainedPrecisionInfo(UNKNOWN, None, **found)
    return TrainedPrecisionInfo(normalize_precision(row.precision), SOURCE_REGISTRY, entry=row, **found)


# What a config can record that gives a model a trained precision, evidence or an fp16 plan (see `records_nothing`),
# each with the one value besides `None` that records nothing.
_RECORDED_FIELDS = ((FIELD, UNKNOWN), (PRETRAINING_FIELD, UNKNOWN), (REFERENCE_FIELD, None), (FP16_PLAN_FIELD, None))


def records_nothing(config: Any) -> bool:
    """
    Whether `config` and its sub-configs can only resolve to `"unknown"` with nothing for a check to act on (no known
    precision, reference, fp16 plan or registry row for its name): the cast's early exit, so it reads the configs' own
    attributes and keeps what depends on the class only. `False` whenever unsure.
    """
    if config is None:
        return True
    kind = type(config)
    facts = _CLASS_FACTS.get(kind) or _config_class_facts(kind)  # (records nothing itself, has sub-configs, is a dict)
    if facts[2]:  # the dict of a `config.json`: its sub-configs are the members that look like one
        own, sub_configs = config, True
        if not _records_no_field(own):
            return False
    else:
        try:
            own = object.__getattribute__(config, "__dict__")
        except AttributeError:
            return False
        if not (facts[0] and _records_no_field(own)):
            return False
        sub_configs = facts[1] or own.get("sub_configs")  # (an instance's own, where its class lets it have one)
    if sub_configs and not all(_records_no_field(_own_fields(sub)) for _, sub in sub_config_items(config)):
        return False
    # the name the check resolves the registry with: `config.name_or_path`, a property over `_name_or_path`
    name = own["_name_or_path"] if "_name_or_path" in own else getattr(config, "name_or_path", None)
    if not name or not isinstance(name, (str, os.PathLike)):
        return True  # no Hub id, as `resolve_trained_precision` reads it
    return not _name_has_registry_row(os.fspath(name), os.getcwd())


def _own_fields(config: Any) -> dict | None:
    """What [`_records_no_field`] reads of a (sub-)config: the dict itself, or a config's own attributes."""
    if issubclass(type(config), dict):
        return config
    if not (_CLASS_FACTS.get(type(config)) or _config_class_facts(type(config)))[0]:
        return None
    try:
        return object.__getattribute__(config, "__dict__")
    except AttributeError:
        return None


def _records_no_field(own: dict | None) -> bool:
    """Whether a config's own attributes (or a `config.json` dict) hold none of `_RECORDED_FIELDS`, "unknown" aside."""
    if own is None:
        return False
    get = own.get
    return (
        get(FIELD) in (None, UNKNOWN)
        and get(PRETRAINING_FIELD) in (None, UNKNOWN)
        and get(REFERENCE_FIELD) is None
        and get(FP16_PLAN_FIELD) is None
    )


# `_config_class_facts` per class: a plain dict, which every cast reads.
_CLASS_FACTS: dict[type, tuple[bool, bool, bool]] = {}


def _config_class_facts(cls: type) -> tuple[bool, bool, bool]:
    """(records nothing itself, has sub-configs, is a dict) of a config class, once per class."""
    if issubclass(cls, dict):
        facts = (False, True, True)
    elif not hasattr(cls, "sub_configs"):
        facts = (False, False, False)
    else:
        quiet = all(getattr(cls, key, None) in (None, allowed) for key, allowed in _RECORDED_FIELDS)
        facts = (quiet, bool(cls.sub_configs), False)
    _CLASS_FACTS[cls] = facts
    return facts


@functools.lru_cache(maxsize=256)
def _name_has_registry_row(name: str, cwd: str) -> bool:
    """Whether some Hub id `name` can refer to (from `cwd`) has a registry row; `cwd` is part of the key only."""
    return any(lookup(hub_id) is not None for hub_id in possible_hub_ids(name))


def _copied_reference_row(config: Any, precision: str) -> tuple[RegistryEntry | None, str | None]:
    """For a `save_pretrained` copy of a Hub checkpoint: the registry row its `trained_precision_reference` names,
    while that row documents the same reference runtime and the precision is still the row's; else `(None, None)`."""
    record = read_reference_record(config)
    if record is None:
        return None, None
    model_id = record["model_id"]
    row = lookup(model_id)
    if (
        row is None
        or row.reference_runtime is None
        or record.get("runtime") != row.reference_runtime
        or precision != normalize_precision(row.precision)
    ):
        return None, None
    return row, model_id


def forget_changed_reference(config: Any, dtype: Any, quantized: bool = False) -> bool:
    """Removes a persisted publisher reference (`trained_precision_reference`) from a loaded config when its weights
    stop being the publisher's: rounded (bf16 from fp16 weights; fp32 holds both exactly) or quantized. Returns whether
    it changed the config."""
    if config is None or isinstance(config, Mapping):
        return False
    record = vars(config).get(REFERENCE_FIELD)
    if not isinstance(record, Mapping):
        return False
    runtime = dtype_to_precision(dtype)
    stored = record.get("stored_dtype")
    if not quantized and (runtime in (UNKNOWN, "fp32") or stored is None or runtime == dtype_to_precision(stored)):
        return False
    del vars(config)[REFERENCE_FIELD]
    name = getattr(config, "name_or_path", None) or f"<unnamed {getattr(config, 'model_type', None) or 'model'}>"
    logger.info(
        f"Dropped `{REFERENCE_FIELD}` from the config of '{name}': its weights "
        f"{'are quantized' if quantized else f'are rounded to {runtime}'}, so they are no longer the publisher's "
        f"{stored} weights its reference runtime was stated for."
    )
    return True


def bind_persisted_reference(config: Any, persisted_row: Any, subject: WeightsSubject | None) -> bool:
    """Binds the publisher reference a load by its Hub id persisted into its `config` (`persisted_row`: the row whose
    precision it wrote, if any) to its weights as read (`subject`), so that a copy keeps it only while its weights
    are the publisher's (a copy's reference is never bound again). Returns whether it bound one."""
    record = vars(config).get(REFERENCE_FIELD) if config is not None else None
    if not isinstance(record, dict) or "binding" in record or subject is None:
        return False
    if persisted_row is None and record.get("model_id") != hub_id_for(getattr(config, "name_or_path", None)):
        return False
    digest = subject.digest()
    if digest is not None:  # any length, any backend
        record["binding"] = Binding(digest, None, None, BOUND_PUBLISHER).to_dict()
    return digest is not None


def persist_registry_precision(config: Any, info: TrainedPrecisionInfo) -> bool:
    """Writes a precision the registry supplied (a fine-tuned T5 still knows it was trained in bf16) and its Hub id's
    publisher reference (also where the config states its precision) into a loaded config; `True` for the first."""
    entry = info.entry if info.source == SOURCE_REGISTRY else info.row
    if entry is None or config is None or isinstance(config, Mapping) or info.copied_from:
        return False
    if precision := info.source == SOURCE_REGISTRY and config_precision(config, FIELD) == UNKNOWN:
        setattr(config, FIELD, info.precision)
    written = [f"`{FIELD}={info.precision!r}`"] * precision
    if entry.reference_runtime is not None and entry.reference_source and info.hub_id:
        reference = {"model_id": info.hub_id, "runtime": entry.reference_runtime}
        if entry.stored_dtype is not None:
            reference["stored_dtype"] = entry.stored_dtype
        setattr(config, REFERENCE_FIELD, reference)  # for the publisher's weights only: `bind_persisted_reference`
        written.append(f"`{REFERENCE_FIELD}` (its publisher's {entry.reference_runtime} runtime)")
    if written:  # the Hub id's publisher reference, also when its config states its own precision
        logger.info(
            f"Set {' and '.join(written)} on the config of '{info.hub_id}' from the trained-precision registry row "
            f"'{entry.model_id}' ({entry.citation}); `save_pretrained` will write it."
        )
    return precision


#: The attribute of a model loaded with `use_fp16_plan=False`: later casts ignore the plan too.
PLAN_DISABLED = "_fp16_plan_disabled"


def resolve_plan_modules(model, names: list[str]) -> list[str] | None:
    """The plan's module names as named in `model` (another head of the checkpoint adds or strips the
    `base_model_prefix`), or `None` when some of them name no module of it."""
    return _resolved(names, {name for name, _ in model.named_modules()}, getattr(model, "base_model_prefix", "") or "")


def _resolved(names: list[str], existing: set[str], prefix: str) -> list[str] | None:
    """[`resolve_plan_modules`] on a model's module names (`existing`) and its `base_model_prefix`."""
    resolved, existing = [], existing - {""}
    for name in names:
        if name in existing:
            resolved.append(name)
        elif prefix and name.startswith(prefix + ".") and name[len(prefix) + 1 :] in existing:
            resolved.append(name[len(prefix) + 1 :])
        elif prefix and f"{prefix}.{name}" in existing:
            resolved.append(f"{prefix}.{name}")
        else:
            return None
    return resolved


def sub_models(model) -> list[tuple[str, str, Any]]:
    """`(sub-config key, module name, sub-model)` for each sub-model of a composite model: the outermost module whose
    `config` is one of `model.config`'s sub-configs (text, vision, encoder, decoder, ...)."""
    config = getattr(model, "config", None)
    keys = {}
    for key in getattr(config, "sub_configs", None) or {}:
        sub_config = getattr(config, key, None)
        if sub_config is not None and sub_config is not config:
            keys[id(sub_config)] = key
    if not keys:
        return []
    found, seen = [], set()
    for name, module in model.named_modules():
        key = keys.get(id(getattr(module, "config", None))) if name else None
        if key is not None and key not in seen:
            seen.add(key)
            found.append((key, name, module))
    return found


def plan_fingerprint(model, plan: dict, fp32_modules: list[str] | None = None, bound: str | None = None) -> str | None:
    """The `fingerprint` a plan stores: the binding digest of `model` with the plan's modules in fp32 (`fp32_modules`,
    as named in `model`; or that digest, `bound`, without a `model`) and the plan's own content, so that new weights, a
    config edit, another checkpoint and a hand edit of the plan all change it. `None` when a weight is offloaded."""
    if model is not None:
        bound = binding_digest(model, plan["modules"] if fp32_modules is None else fp32_modules)
    if bound is None:
        return None
    content = {key: value for key, value in plan.items() if key != "fingerprint"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(f"{bound}:{text}".encode()).hexdigest()


#: What a reason a plan is no evidence ends with: what to do about it.
_MEASURE = "measure it again (`transformers precision plan PATH --dtype fp16{} --write`)"
STALE = "the plan is stale: " + _MEASURE.format("")


@dataclasses.dataclass(frozen=True)
class Fp16PlanDecision:
    """
    What [`decide_fp16_plan`] decided for a model: the `modules` that run in fp32, the stored `plans` applied (`(sub-config
    key or "", plan)`), per key the plan that is `evidence` or the `problems` that make it none, the evidence that
    cleared its runtime once a check judged it (`cleared_by`, [`~trained_precision.guard.decision.cleared_phrase`]), and the model's name.
    """

    modules: tuple[str, ...] = ()
    plans: tuple = ()
    evidence: Mapping[str, dict] = dataclasses.field(default_factory=dict)
    problems: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cleared_by: str | None = dataclasses.field(default=None, compare=False)
    model_name: str = dataclasses.field(default="", compare=False)


def is_quantized(model) -> bool:
    """Whether `model` is quantized (its quantizer marks the model or its config)."""
    config = getattr(model, "config", None)
    return bool(
        getattr(model, "is_quantized", False)
        or getattr(config, "_is_quantized", False)
        or getattr(config, "quantization_config", None) is not None
    )


def _evidence_problem(part: SnapshotPart, plan: dict, resolved: list[str], subject) -> str | None:
    """Why an applied plan is no evidence for `part` (its config's model), or `None`: its own record, then its binding
    ([`~trained_precision.facts.binding.binding_problem`]: the weights, lengths and backend it was validated on)."""
    if plan["version"] < FP16_PLAN_VERSION or "fingerprint" not in plan:
        return f"it was made by an older version and is not bound to these weights and config; {STALE}"
    if isinstance(plan.get("stale"), str):
        return f"{plan['stale']}; {STALE}"
    recorded = plan["validation"].get("modules")
    if not isinstance(recorded, list) or sorted(recorded) != sorted(plan["modules"]):
        return f"its modules are not the ones its own validation record names (edited by hand?); {STALE}"
    domain = plan["validated_on"]
    binding = Binding(plan["fingerprint"], domain["max_tokens"], domain["backend"], BOUND_PLAN, BINDING_VERSION)
    return binding_problem(
        binding,
        subject,
        runs=(BOUND_PLAN,),
        recreate=STALE,
        digest=lambda: plan_fingerprint(None, plan, bound=part.subject.digest(resolved) if part.subject else None),
        longer=_MEASURE.format(" --max-length {tokens}"),
        elsewhere="the plan holds there only; on {backend}, " + _MEASURE.format(""),
    )


def decide_fp16_plan(model, dtype, *, use_fp16_plan: bool = True, hf_quantizer=None, subject=None) -> Fp16PlanDecision:
    """
    The one decision about a stored fp16 plan of `model` (or of its [`ModelSnapshot`]), on every path that can verify
    it: applied when `dtype` is fp16, `use_fp16_plan` is not `False` (here or at the model's load), the model is not
    quantized and every module name resolves; evidence when also bound to the weights `subject` ([`_evidence_problem`]).
    """
    import torch

    snapshot = model if isinstance(model, ModelSnapshot) else ModelSnapshot(model) if dtype == torch.float16 else None
    stored = [(part, plan) for part in snapshot.parts if (plan := read_fp16_plan(part.config))] if snapshot else []
    if not stored or dtype != torch.float16:
        return Fp16PlanDecision()
    refused = None
    if not use_fp16_plan or snapshot.plan_disabled:
        refused = "it is switched off on this path (`use_fp16_plan=False`), so no module is kept in fp32"
    elif hf_quantizer is not None or snapshot.quantized:
        # quantized layers keep their own storage and compute dtype: a planned module cannot simply be cast to fp32
        logger.info_once(f"The stored `{FP16_PLAN_FIELD}` is not applied to a quantized model.")
        refused = "a quantized model does not apply it (its layers keep their own storage and compute dtype)"
    resolved_by_key, names = {}, []
    for part, plan in stored if refused is None else ():
        resolved = _resolved(plan["modules"], part.modules, part.base_prefix)
        if resolved is None:
            refused = _unresolved_plan(snapshot, part, plan)
            break
        resolved_by_key[part.key] = resolved
        names.extend(f"{part.prefix}.{name}" if part.prefix else name for name in resolved)
    if refused is not None:
        return Fp16PlanDecision(problems={part.key: refused for part, _ in stored})
    evidence, problems = {}, {}
    for part, plan in stored if subject is not None else ():
        problem = _evidence_problem(part, plan, resolved_by_key[part.key], subject)
        if problem is None:
            evidence[part.key] = plan
        else:
            problems[part.key] = problem
    plans = tuple((part.key, plan) for part, plan in stored)
    name = snapshot.name or snapshot.class_name
    return Fp16PlanDecision(tuple(sorted(set(names))), plans, evidence, problems, model_name=name)


def _unresolved_plan(snapshot: ModelSnapshot, part: SnapshotPart, plan: dict) -> str:
    """Warns once that a plan names modules its part lacks (no plan is applied); returns why it is no evidence."""
    missing = ", ".join(sorted(set(plan["modules"]) - part.modules)[:3])
    where = f"`{part.key}` sub-config" if part.key else "config"
    logger.warning_once(
        f"The `{FP16_PLAN_FIELD}` stored in the {where} of {snapshot.name or snapshot.class_name} names modules that "
        f"{part.class_name} does not have ({missing}): no plan is applied. Measure the plan again for this model: "
        "`transformers precision plan PATH --dtype fp16 --write`."
    )
    return f"it names modules that {part.class_name} does not have ({missing}); {STALE}"


@dataclasses.dataclass(frozen=True)
class SnapshotPart:
    """The model (`key` `""`) or a sub-model (its sub-config `key` and module name `prefix`) in a [`ModelSnapshot`]."""

    key: str
    prefix: str
    class_name: str
    modules: frozenset  # its module names
    base_prefix: str  # its `base_model_prefix`
    config: dict  # its config's fields, as `to_dict` writes them
    subject: WeightsSubject | None = None  # its weights, read when its config records evidence they must verify


class ModelSnapshot:
    """
    A loaded model (a PEFT model: its base model) read once for a check, as plain values (the model is not kept): its
    `name`, class, whether it is `quantized` or its plan switched off, the check `mode` and `registry_row` a load
    recorded on it, and its [`SnapshotPart`]s (the model, then its [`sub_models`]). With `quick`, a model whose configs
    record nothing ([`records_nothing`]) is read no further.
    """

    def __init__(self, model: Any, quick: bool = False):
        if callable(getattr(model, "get_base_model", None)):
            model = model.get_base_model()
        config = getattr(model, "config", None)
        self.nothing, self.parts = quick and records_nothing(config), ()
        if self.nothing or config is None:
            return
        self.name = getattr(config, "name_or_path", None) or None  # the Hub id or path (an unnamed model has none)
        self.class_name, self.model_class = type(model).__name__, type(model)
        own = vars(model)
        self.quantized, self.plan_disabled = is_quantized(model), bool(own.get(PLAN_DISABLED))
        self.mode, self.registry_row = own.get(MODE_ATTRIBUTE), own.get(REGISTRY_ATTRIBUTE)
        owners = [  # a config's fields as `to_dict` writes them (a plain module may hold a dict)
            (key, prefix, owner, c.to_dict() if hasattr(c, "to_dict") else dict(c) if isinstance(c, Mapping) else {})
            for key, prefix, owner in [("", "", model), *sub_models(model)]
            for c in [owner.config]
        ]
        planned = {key for key, _, _, fields in owners if read_fp16_plan(fields) is not None}
        row = lookup(hub_id_for(self.name))  # its publisher's runtime holds for the weights its load bound only
        parts, bound = [], bool(planned) or bound_evidence_pending(config) or bool(row and row.reference_runtime)
        for key, prefix, owner, fields in owners:
            subject = weights_subject(owner) if key in planned or (bound and not key) else None
            names = frozenset(name for name, _ in owner.named_modules())
            base = getattr(owner, "base_model_prefix", "") or ""
            parts.append(SnapshotPart(key, prefix, type(owner).__name__, names, base, fields, subject))
        self.parts = tuple(parts)


@dataclasses.dataclass(frozen=True)
class Call:
    """What the caller of a check knows beyond the config and the runtime dtype."""

    mode: str | None = None
    model_name: str | None = None
    action: str = LOAD
    display_name: str | None = None  # the model's name in messages when it has none (its class): never looked up
    hf_quantizer: Any = None
    deferred: bool = False  # judged once the weights are loaded (a stored fp16 plan, bound evidence)
    model_class: Any = None  # for `_keep_in_fp32_modules`; by default the config's first `architectures` entry
    registry_row: Any = None  # the row whose precision loading wrote into the config
    plan_key: str | None = None  # the sub-config key ("": the model's own) of the stored fp16 plan it reads
    sub_model: str | None = None  # by default: "" for the model a call was made for, else the sub-config's type


@dataclasses.dataclass(frozen=True)
class PrecisionFacts:
    """
    What is known about one model (or sub-model) at one load, cast or report, gathered once ([`gather_facts`]): the
    [`TrainedPrecisionInfo`], an `(assessment, note)` per dtype that carries the activations (a quantized model's load and
    compute dtypes), the `name` and `sub_model` for messages, the `action`, the `mode` and whether it was given
    `per_call`, why a stored fp16 plan is no evidence (`plan_problem`), the registry row an outermost load wrote into the
    config (`persisted`: `False` for none, `None` for any other check), and the whole model's [`Fp16PlanDecision`].
    """

    info: TrainedPrecisionInfo
    runtimes: tuple[tuple[Assessment, str | None], ...]
    name: str = ""
    sub_model: str = ""
    action: str = LOAD
    mode: str = "warn"
    per_call: bool = False
    plan_problem: str | None = None
    persisted: Any = None
    fp16_plan: Fp16PlanDecision = dataclasses.field(default_factory=Fp16PlanDecision, compare=False)


def gather_facts(
    parts: list[tuple[Any, Call]], dtype: Any, mode: str, in_scope: bool = False, snapshot: ModelSnapshot | None = None
) -> list[PrecisionFacts]:
    """
    The [`PrecisionFacts`] of one check at `dtype` of each `(config, call)` in `parts` (a model's config, then its
    sub-configs), gathered once. With a loaded model's `snapshot`, bound evidence is checked against its weights and its
    stored fp16 plans are decided ([`decide_fp16_plan`]), each part reading its own plan's by its `plan_key`.
    """
    subject = snapshot.parts[0].subject if snapshot is not None and snapshot.parts else None
    plan = decide_fp16_plan(snapshot, dtype, subject=subject) if snapshot is not None else Fp16PlanDecision()
    return [_part_facts(config, dtype, call, mode, in_scope, subject, plan) for config, call in parts]


def _part_facts(
    config: Any, dtype: Any, call: Call, mode: str, in_scope: bool, subject: Any, plan: Fp16PlanDecision
) -> PrecisionFacts:
    """The facts of one (sub-)config; an outermost load writes a registry precision into a config object, weights about
    to be rounded or quantized drop its publisher reference, a deferred check assesses nothing yet."""
    verified = plan.evidence.get(call.plan_key)
    info = resolve_trained_precision(
        config, call.model_name, persisted_from=call.registry_row, fp16_plan=verified, subject=subject
    )
    if call.action == FROM_CONFIG and not info.copied_from:  # random weights: no publisher ran them
        info = dataclasses.replace(info, row=None)
    persisted = None
    if call.action in (LOAD, FROM_CONFIG) and not call.sub_model and not in_scope:
        persisted = call.action == LOAD and persist_registry_precision(config, info) and info.entry
    quantizer = call.hf_quantizer
    runtimes = _quantized_runtimes(quantizer, dtype) if quantizer is not None else [(dtype, None)]
    # weights rounded or quantized are no longer the publisher's: a later save must not carry its reference runtime
    forget_changed_reference(config, dtype, quantized=quantizer is not None)
    assessed = tuple(
        (info.assess(runtime, model_class=call.model_class), note)
        for runtime, note in (() if call.deferred else runtimes)
        if dtype_to_precision(runtime) not in (UNKNOWN, FP32)
    )
    plan_problem = plan.problems.get(call.plan_key)
    if plan_problem is None and call.action == LOAD and not (in_scope or call.deferred) and read_fp16_plan(config):
        # a load that did not wait for the weights to verify its stored plan does not apply it
        plan_problem = (
            "a quantized model does not apply it (its layers keep their own storage and compute dtype)"
            if quantizer is not None
            else "it is switched off on this path (`use_fp16_plan=False`), so no module is kept in fp32"
        )
    kind = getattr(config, "model_type", None) or type(config).__name__
    sub_model = call.sub_model if call.sub_model is not None else ("" if not in_scope else kind)
    name = call.model_name or getattr(config, "name_or_path", None) or call.display_name or f"<unnamed {kind} model>"
    per_call = call.mode is not None
    return PrecisionFacts(info, assessed, name, sub_model, call.action, mode, per_call, plan_problem, persisted, plan)


def config_cleared_phrase(config: Any, row: Any, model_class: Any, fp16_plans: Mapping[str, dict]) -> str | None:
    """[`~trained_precision.guard.decision.cleared_phrase`] for a load judged before its weights existed: what clears fp16 for `config` and its
    sub-configs (`row`: the registry row the load recorded; `fp16_plans`: the plans bound to the weights, per key)."""
    name = _name_of(config) or None  # the Hub id or path (an unnamed model has none)
    found = []
    for key, sub in [("", config), *sub_config_items(config)]:
        info = resolve_trained_precision(sub, name, persisted_from=None if key else row, fp16_plan=fp16_plans.get(key))
        if info.precision == UNKNOWN:
            continue
        if not (key or info.copied_from) and info.reference is None:  # built, not loaded by its Hub id
            info = dataclasses.replace(info, row=None)
        assessment = info.assess(FP16, model_class=None if key else model_class)
        if assessment.overridden:
            found.append((f"(its {key} sub-model) " if key else "") + assessment.evidence.describe())
    return "; ".join(found) or None


def _quantized_runtimes(hf_quantizer, dtype) -> list[tuple[Any, str | None]]:
    """
    The dtypes that carry a quantized model's activations, each with a note for the message: the load dtype
    (embeddings, norms, the residual stream: bitsandbytes casts every quantized matmul's output back to its input's
    dtype), then the compute dtype of the quantized matmuls when it differs.
    """
    from ...modeling_utils import _activation_dtypes  # the core's answer: which dtypes carry the activations

    dtypes = _activation_dtypes(dtype, hf_quantizer)
    compute = dtypes[1] if len(dtypes) > 1 else None
    method = getattr(getattr(hf_quantizer, "quantization_config", None), "quant_method", None)
    method = getattr(method, "value", method)
    quantized = f"{method}-quantized" if isinstance(method, str) and method else "quantized"
    if compute is None or dtype_to_precision(compute) == dtype_to_precision(dtype):
        return [(dtype, f"{quantized}, its activations run in this dtype")]
    precision = dtype_to_precision(compute)
    name = precision if precision != UNKNOWN else str(compute).replace("torch.", "")  # float8, int8: torch's name
    load = f"{quantized} with compute dtype {name}, so the embeddings, norms and residual stream run in the load dtype"
    return [(dtype, load), (compute, f"the compute dtype of the {quantized} matmuls")]


__all__ = [
    "Assessment",
    "Call",
    "Fp16PlanDecision",
    "ModelSnapshot",
    "SnapshotPart",
    "config_cleared_phrase",
    "decide_fp16_plan",
    "is_quantized",
    "plan_fingerprint",
    "resolve_plan_modules",
    "sub_models",
    "PrecisionFacts",
    "gather_facts",
    "SOURCE_CONFIG",
    "SOURCE_REGISTRY",
    "TrainedPrecisionInfo",
    "config_precision",
    "bind_persisted_reference",
    "forget_changed_reference",
    "persist_registry_precision",
    "pretraining_recorded_unknown",
    "records_nothing",
    "resolve_trained_precision",
]
