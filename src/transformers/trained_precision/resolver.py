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
The one answer to "what precision was this model trained in?".

[`resolve_trained_precision`] turns a config (a `PreTrainedConfig` or the dict of a `config.json`) and the name or
path the model comes from into a [`TrainedPrecisionInfo`]: the precision and where it was read from. Every path that
needs the answer asks it (`from_pretrained`, `from_config`, the casts, the repository check), so they all give the
same one. The order is:

1. the config's own `trained_precision`, when it is known: it always wins;
2. else the registry row of the model's Hub id ([`~trained_precision.hub_ids.hub_id_for`]: legacy short ids, any
   case, cache snapshot paths under any cache root; a local copy outside a cache has no Hub id);
3. else `"unknown"`, which is never reported as safe.

A model fine-tuned in another precision than its pretraining keeps the older precision as
`config.pretraining_precision` (the Trainer writes it when its stamp changes a known value); the oldest stage is the
risk rules' prior ([`~trained_precision.risk.assess_lineage_risk`]). A fine-tune of a model whose precision nobody
recorded says so: `pretraining_precision: "unknown"`, written explicitly (a config without the field is a model whose
first recorded run trained it from scratch). Its oldest stage is then unknown, and so is its risk: the fine-tune's
precision says nothing about the activations its pretraining shaped.

[`TrainedPrecisionInfo.assess`] then weighs that prior against the evidence that a runtime works for this checkpoint
([`~trained_precision.evidence.find_evidence`], in the order its module documents) and upstream's
`_keep_in_fp32_modules` mitigation: one [`Assessment`] per runtime, which every path uses.

A composite model (encoder-decoder, text + vision) has one answer per sub-model ([`resolve_sub_models`]): the
sub-configs the loader checks and the Trainer stamps, resolved with the outer model's name.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping
from typing import Any

from ..utils import logging
from .binding import BOUND_PUBLISHER, bind, binding_problem
from .configuration import sub_config_items
from .evidence import (
    FINISHED_RUN,
    REFERENCE_RUNTIME,
    Evidence,
    find_evidence,
    keep_in_fp32_mitigation,
    read_reference_record,
)
from .hub_ids import hub_id_for, possible_hub_ids
from .registry import RegistryEntry, lookup
from .risk import Risk, assess_lineage_risk
from .run_record import RunRecord, read_run_record
from .vocabulary import (
    FIELD,
    FP16_PLAN_FIELD,
    PRETRAINING_FIELD,
    REFERENCE_FIELD,
    RUN_FIELD,
    RUN_PURE,
    UNKNOWN,
    InvalidTrainedPrecisionError,
    dtype_to_precision,
    normalize_precision,
)


logger = logging.get_logger(__name__)

#: Where a trained precision was read from.
SOURCE_CONFIG = "config"
SOURCE_REGISTRY = "registry"


def config_precision(config: Any, field: str = FIELD) -> str:
    """
    A config's canonical value for `field` (`"trained_precision"` or `"pretraining_precision"`), from a
    `PreTrainedConfig` or a `config.json` dict; `"unknown"` when it is absent or not a valid value.
    """
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
    """
    Whether a config records that its model's stage before `trained_precision` is unknown: `pretraining_precision`
    is present and reads as `"unknown"` (the stamp writes it on a fine-tune of a model of unknown precision; a value
    that is not a precision loads as `"unknown"` too, and says as little). An absent field says nothing of the kind.
    """
    if isinstance(config, Mapping):
        value = config.get(PRETRAINING_FIELD)
    else:
        value = getattr(config, PRETRAINING_FIELD, None)
    return value is not None and config_precision(config, PRETRAINING_FIELD) == UNKNOWN


@dataclasses.dataclass(frozen=True)
class Assessment:
    """
    The answer for one runtime precision: the risk rules' prior, and the evidence that overrides it.

    Args:
        runtime (`str`): the canonical runtime precision.
        prior ([`~trained_precision.risk.Risk`], *optional*): what the risk rules predict from the training lineage.
        evidence ([`~trained_precision.evidence.Evidence`], *optional*): evidence that the runtime works for this
            checkpoint; it makes a risky prior safe.
        mitigation ([`~trained_precision.evidence.Evidence`], *optional*): upstream's `_keep_in_fp32_modules`, which
            protects the known overflow site only: the risk stays, its message says what is already done.
        dropped (`str`, *optional*): why recorded evidence was dropped (not bound to these weights, these lengths or
            this backend), as a sentence for the message.
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
        """Whether the rules predicted a risk that evidence overrides (said at info level, with the evidence)."""
        return self.prior is not None and self.evidence is not None


@dataclasses.dataclass(frozen=True)
class TrainedPrecisionInfo:
    """
    A model's trained precision, where it was read from, and what the checkpoint records as evidence.

    Args:
        precision (`str`): the canonical trained precision; `"unknown"` when neither the config nor the registry
            knows it.
        source (`str`, *optional*): `"config"`, `"registry"`, or `None` when the precision is unknown.
        hub_id (`str`, *optional*): the canonical Hub id the name or path refers to, if any.
        entry ([`~trained_precision.registry.RegistryEntry`], *optional*): the registry row, when it was used.
        pretraining (`str`, *optional*, defaults to `"unknown"`): the config's `pretraining_precision`.
        oldest_unknown (`bool`, *optional*, defaults to `False`): the config records that the stage before
            `precision` is unknown (`pretraining_precision: "unknown"`, what the stamp writes on a fine-tune of a model
            of unknown precision): the lineage starts with `"unknown"` and no rule applies.
        row ([`~trained_precision.registry.RegistryEntry`], *optional*): the registry row of the Hub id, used or not
            (its reference runtime is evidence even when the config states the precision itself).
            For a `save_pretrained` copy of a Hub checkpoint, the row of the id its `trained_precision_reference`
            names.
        copied_from (`str`, *optional*): that id, when `row` comes from the copy's `trained_precision_reference`.
        plan (`dict`, *optional*): the fp16 plan verified on this path (see `resolve_trained_precision`'s
            `fp16_plan`); a plan the config merely stores is not evidence.
        run ([`~trained_precision.run_record.RunRecord`], *optional*): the run that stamped the config's
            `trained_precision`.
        architectures (`tuple[str, ...]`): the config's `architectures`, for upstream's `_keep_in_fp32_modules`.
        reference (`dict`, *optional*): the copy's `trained_precision_reference`, with its binding.
        subject ([`~trained_precision.binding.WeightsSubject`], *optional*): the loaded model a finished run and a
            copy's publisher reference are checked against; without it they are no evidence.
        run_source (`str`, *optional*): what `run` is when it is not the config's `trained_precision_run` (a PEFT
            adapter's run, stored in the adapter's weights file), for messages.
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
        """`"config"`, `"registry: <row id>"` or `"unknown"`: the short form reports and JSON use."""
        if self.source == SOURCE_REGISTRY and self.entry is not None:
            return f"{SOURCE_REGISTRY}: {self.entry.model_id}"
        return self.source or UNKNOWN

    @property
    def lineage(self) -> tuple[str, ...]:
        """
        The training stages, oldest first: `("bf16", "fp32")` for a bf16-pretrained, fp32-tuned model; `("unknown",
        "fp32")` for an fp32 fine-tune of a model of unknown precision ([`oldest_unknown`]); `()` when nothing is known.
        """
        stages = [p for p in (self.pretraining, self.precision) if p != UNKNOWN]
        if self.oldest_unknown and stages and self.pretraining == UNKNOWN:
            stages.insert(0, UNKNOWN)
        return tuple(dict.fromkeys(stages))

    @property
    def lineage_known(self) -> bool:
        """Whether the oldest training stage is known: only then do the risk rules (and a "safe") apply."""
        return bool(self.lineage) and self.lineage[0] != UNKNOWN

    def assess(
        self,
        runtime: Any,
        model_class: Any = None,
        import_classes: bool = True,
        compute: str = RUN_PURE,
    ) -> Assessment:
        """
        The [`Assessment`] of running at `runtime`: the prior of the oldest training stage, then the evidence in the
        documented order, and upstream's mitigation when an fp16 risk remains.

        Args:
            runtime (`str` or `torch.dtype`): the runtime precision.
            model_class (`type`, *optional*): the model class, for its `_keep_in_fp32_modules`; by default the first
                of the config's `architectures`.
            import_classes (`bool`, *optional*, defaults to `True`): whether that default may import the model class
                (and so torch); the report without `--audit` passes `False`.
            compute (`str`, *optional*, defaults to `"pure"`): how the runtime computes: `"pure"` (weights in it:
                loading, casting, reports) or `"amp"` (a mixed-precision training run over wider weights). A finished
                AMP run is evidence for `"amp"` only.
        """
        runtime = dtype_to_precision(runtime)
        prior = assess_lineage_risk(self.lineage, runtime)
        if prior is None:
            return Assessment(runtime)
        found = {"entry": self.row, "run": self.run, "copied_from": self.copied_from}
        dropped = []
        while True:  # at most twice per kind: evidence that is not bound to this model is dropped, then look again
            evidence = find_evidence(
                runtime,
                plan=self.plan,
                trained=self.precision if self.source == SOURCE_CONFIG else UNKNOWN,
                compute=compute,
                hub_id=self.hub_id,
                **found,
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
        """
        Why `evidence` (a finished run, or the publisher reference of a copy) is not bound to [`subject`], as a
        sentence, after removing it from `found`; `None` when it is bound or needs no binding (a registry row of the
        model's own Hub id, a plan `decide_fp16_plan` verified).
        """
        if evidence is None:
            return None
        if evidence.kind == FINISHED_RUN:
            binding, runs = self.run.binding, (self.run.compute,)
            what = f"The finished run in {self.run_source or f'`{RUN_FIELD}`'}"
            recreate = "train it again with this version"
            key = "run"
        elif evidence.kind == REFERENCE_RUNTIME and found["copied_from"]:
            binding, runs = (self.reference or {}).get("binding"), (BOUND_PUBLISHER,)
            what = f"The publisher reference in `{REFERENCE_FIELD}` ('{found['copied_from']}')"
            recreate = f"load '{found['copied_from']}' itself and save it again"
            key = "entry"
        else:
            return None
        problem = binding_problem(binding, self.subject, runs=runs, recreate=recreate)
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
    A model's trained precision: the config's value when it is known (it always wins), else the registry's row for
    the model's Hub id, else `"unknown"`; with the evidence the config records.

    Args:
        config (`PreTrainedConfig` or `dict`): the model's configuration, or the content of its `config.json`.
        name_or_path (`str` or `os.PathLike`, *optional*): the name or path the model comes from: a Hub id (legacy
            short ids included), a cache snapshot path, or a local directory (which has no Hub id). Defaults to the
            config's `name_or_path`.
        persisted_from ([`~trained_precision.registry.RegistryEntry`], *optional*): the row whose precision loading
            wrote into this config ([`persist_registry_precision`]); while the config still holds that value, it is
            reported as the registry's, so a later cast names the same source as the load.
        fp16_plan (`dict`, *optional*): the fp16 plan the caller applies and verified against the model's weights
            (`trained_precision.fp16_plan.decide_fp16_plan`). The plan a config stores is evidence only through it:
            without the weights (the torch-free report), a stored plan is unverified and clears nothing.
        subject ([`~trained_precision.binding.WeightsSubject`], *optional*): the loaded model, which a finished run
            and a copy's publisher reference must be bound to ([`~trained_precision.binding.binding_problem`]);
            without it (the torch-free report, a check before the weights are loaded) they clear nothing.
    """
    if not name_or_path:
        name_or_path = (
            config.get("_name_or_path") if isinstance(config, Mapping) else getattr(config, "name_or_path", None)
        )
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
        found["reference"] = read_reference_record(config) if row is not None else None
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
    Whether resolving `config` and each of its sub-configs with the config's own `name_or_path` can only give
    `"unknown"` with an empty lineage and nothing for a check to act on: no known `trained_precision` or
    `pretraining_precision`, no `trained_precision_reference`, no `fp16_plan`, and no registry row for any Hub id the
    name can refer to (whatever exists on disk, see [`~trained_precision.hub_ids.possible_hub_ids`]). Then no runtime
    is risky for the model and nothing is there to apply or to forget: the cast path's early exit.

    Every cast asks, so it reads the configs' own attributes (a `PreTrainedConfig`'s `__getattribute__` costs about a
    microsecond per attribute, and so does `isinstance` on one) and keeps two answers that depend on nothing else:
    what a config class records itself (read once per class), and the registry's answer for a name and working
    directory. `False` whenever unsure (an object that is neither a config nor a dict).
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
        get = own.get  # `_records_no_field`, inline: every cast runs this
        if not (
            facts[0]
            and get(FIELD) in (None, UNKNOWN)
            and get(PRETRAINING_FIELD) in (None, UNKNOWN)
            and get(REFERENCE_FIELD) is None
            and get(FP16_PLAN_FIELD) is None
        ):
            return False
        sub_configs = facts[1] or get("sub_configs")  # (an instance's own, where its class lets it have one)
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
    """
    What [`records_nothing`] reads of a config class, once per class: whether it is a config class (it has
    `sub_configs`) whose own attributes record none of `_RECORDED_FIELDS`, whether it has sub-configs (a
    `PreTrainedConfig`'s `sub_configs` is a property of the class, computed at every read), and whether it is a dict.
    """
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
    """
    For a `save_pretrained` copy of a Hub checkpoint (no Hub id of its own): the registry row its
    `trained_precision_reference` names, when that row still documents the same reference runtime and the config's
    precision is still the row's (nothing retrained it); else `(None, None)`. The evidence is the registry's, never the
    config's text: the config only says which row it is a copy of.
    """
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
    """
    Removes a persisted publisher reference (`trained_precision_reference`) from a loaded config when the weights are
    about to stop being the publisher's: loaded or cast into a dtype that rounds them (bf16 from fp16 weights), or
    quantized. fp32 holds fp16 and bf16 values exactly, so an fp32 load keeps it. Loading and every cast call it
    before they check, so a later `save_pretrained` does not carry the evidence over to other weights.

    Returns:
        `bool`: whether the config was changed.
    """
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


def resolve_sub_models(config: Any, name_or_path: str | os.PathLike | None = None) -> dict[str, TrainedPrecisionInfo]:
    """
    One [`TrainedPrecisionInfo`] per sub-model of a composite model (`{"encoder": ..., "decoder": ...}`), each
    resolved like the loader resolves it: its own sub-config, with the outer model's name (and so its registry row).
    Empty for a model without sub-configs.
    """
    if not name_or_path:
        name_or_path = (
            config.get("_name_or_path") if isinstance(config, Mapping) else getattr(config, "name_or_path", None)
        )
    return {key: resolve_trained_precision(sub, name_or_path) for key, sub in sub_config_items(config)}


def bind_persisted_reference(model: Any, persisted_row: Any) -> bool:
    """
    Binds the publisher reference that loading `model` persisted ([`persist_registry_precision`]; `persisted_row` is
    the registry row the load wrote, `None` when it wrote none) to the weights it loaded
    and config ([`~trained_precision.binding.Binding`]: any length, any backend), so that a `save_pretrained` copy
    keeps the publisher's evidence only while its weights and config are the publisher's. A reference read from a
    copy's `config.json` is never bound again. Returns whether it bound one.
    """
    config = getattr(model, "config", None)
    record = vars(config).get(REFERENCE_FIELD) if config is not None else None
    if not isinstance(record, dict) or "binding" in record or persisted_row is None:
        return False
    binding = bind(model, BOUND_PUBLISHER)  # any length, any backend
    if binding is None:
        return False
    record["binding"] = binding
    return True


def persist_registry_precision(config: Any, info: TrainedPrecisionInfo) -> bool:
    """
    Writes a precision the registry supplied into the loaded config, so that `save_pretrained` keeps it: a fine-tuned
    copy of T5 then still knows it was trained in bf16. Does nothing when the config already had a value.

    Returns:
        `bool`: whether the config was changed.
    """
    if info.source != SOURCE_REGISTRY or config is None or isinstance(config, Mapping):
        return False
    if config_precision(config, FIELD) != UNKNOWN:
        return False
    setattr(config, FIELD, info.precision)
    entry = info.entry
    written = f"`{FIELD}={info.precision!r}`"
    if entry.reference_runtime is not None and entry.reference_source and info.hub_id:
        # the publisher's reference runtime holds for the publisher's weights: an unchanged copy keeps it, a
        # fine-tune drops it (the Trainer stamp removes the field)
        reference = {"model_id": info.hub_id, "runtime": entry.reference_runtime}
        if entry.stored_dtype is not None:
            reference["stored_dtype"] = entry.stored_dtype
        setattr(config, REFERENCE_FIELD, reference)
        # bound to the weights once they are loaded (`bind_persisted_reference`)
        written += f" and `{REFERENCE_FIELD}` (its publisher's {entry.reference_runtime} runtime)"
    logger.info(
        f"Set {written} on the config of '{info.hub_id}' from the trained-precision registry row "
        f"'{entry.model_id}' ({entry.citation}); `save_pretrained` will write it."
    )
    return True


__all__ = [
    "Assessment",
    "SOURCE_CONFIG",
    "SOURCE_REGISTRY",
    "TrainedPrecisionInfo",
    "config_precision",
    "bind_persisted_reference",
    "forget_changed_reference",
    "persist_registry_precision",
    "pretraining_recorded_unknown",
    "records_nothing",
    "resolve_sub_models",
    "resolve_trained_precision",
]
