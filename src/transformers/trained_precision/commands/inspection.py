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
Inspecting a checkpoint without loading it: what `transformers precision` prints.

[`inspect_checkpoint`] reports the trained precision as loading resolves it, the storage dtypes (safetensors headers;
pickled weights are never opened), and a verdict per runtime precision from the same
[`~trained_precision.guard.decision.decide`] as loading, refined by an audit's measurement. A composite model's status for an
asked dtype is the worst of its parts', so the report and `from_pretrained` agree.

```py
>>> from transformers.trained_precision import inspect_checkpoint
>>> inspect_checkpoint("./my-t5").verdict("fp16").status
'risky'
```
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from ...utils import CONFIG_NAME, logging
from ..configuration import sub_config_items
from ..facts.binding import backend_family, weights_subject
from ..facts.evidence import bound_evidence_pending, read_fp16_plan
from ..facts.hub_ids import cache_snapshot_of, find_cached_snapshot, parse_hub_id
from ..facts.registry import lookup
from ..facts.resolver import ModelSnapshot, decide_fp16_plan, resolve_trained_precision
from ..facts.risk import FP16_MAX, OVERFLOW
from ..facts.storage import (
    MAX_HEADER_BYTES,
    CheckpointInspectionError,
    SafetensorsHeaderError,
    StorageSummary,
    checkpoint_root,
    open_checkpoint_file,
    read_safetensors_header,
    read_storage,
    storage_from_hub_metadata,
)
from ..guard.decision import BASIS_EVIDENCE, BASIS_RULE, RISKY, SAFE, UNKNOWN_STATUS, PrecisionFacts, decide
from ..vocabulary import (
    FIELD,
    FP16,
    FP32,
    RUN_FIELD,
    RUNTIME_PRECISIONS,
    UNKNOWN,
    InvalidTrainedPrecisionError,
    dtype_options,
    normalize_precision,
)


logger = logging.get_logger(__name__)

#: Bump when a key of [`CheckpointReport.to_dict`] appears, changes meaning or disappears. 3: `sub_models`, `evidence`,
#: `mitigation`, and `status` the worst over the sub-models. 4: `basis`, what a verdict rests on.
SCHEMA_VERSION = 4

#: What a verdict rests on (its `basis`): the risk rules, evidence that overrides them, or the audit's measurement on the
#: calibration inputs; `None` for an `"unknown"` verdict.
BASIS_MEASURED = "measured"
#: A composite model's basis is the least certain of its parts that set its status: measured, evidence, then rule.
_BASIS_ORDER = (None, BASIS_MEASURED, BASIS_EVIDENCE, BASIS_RULE)

#: `transformers precision` exit codes, for every subcommand (the report's are also [`CheckpointReport.exit_code`]).
#: 1 means risky and nothing else: a crash of the interpreter also exits 1, so the command never lets one escape.
EXIT_SAFE = 0
EXIT_RISKY = 1
EXIT_BAD_INPUT = 2
EXIT_UNKNOWN = 3
#: Something the user asked to write (or open) was not: a file left unwritten, a checkpoint skipped.
EXIT_NOT_DONE = 4
#: An unexpected error inside the command (a bug): `EX_SOFTWARE` of BSD's sysexits.h.
EXIT_INTERNAL_ERROR = 70
_EXIT_CODES = {SAFE: EXIT_SAFE, RISKY: EXIT_RISKY, UNKNOWN_STATUS: EXIT_UNKNOWN}


# resolving a path or a Hub id


@dataclasses.dataclass
class _Resolved:
    directory: str | None  # a local directory holding config.json (a cached snapshot for a Hub id)
    name: str  # what the resolver is given: the directory, or the Hub id when nothing is cached
    config_path: str
    remote_storage: StorageSummary | None = None


#: Seconds the reachability probe of [`_hub_unreachable`] waits for a TCP connection to the Hub.
HUB_PROBE_TIMEOUT = 5.0


def _hub_unreachable() -> str | None:
    """Why the Hub cannot be reached (one TCP connection), or `None`: a download would retry for tens of seconds."""
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    endpoint = urlsplit(constants.ENDPOINT)
    host = endpoint.hostname or ""
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=HUB_PROBE_TIMEOUT).close()
    except OSError as e:
        return f"{constants.ENDPOINT}: {e.strerror or e}"
    return None


def _resolve(path_or_id: str, revision: str | None = None, cache_dir: str | None = None) -> _Resolved:
    expanded = os.path.expanduser(os.fspath(path_or_id))
    if os.path.isdir(expanded):
        if revision is not None:
            raise CheckpointInspectionError(
                f"--revision applies to Hub ids, and {expanded} is a local directory: drop --revision, or pass the Hub "
                "id instead of the directory."
            )
        config_path = os.path.join(expanded, CONFIG_NAME)
        if not os.path.lexists(config_path) or os.path.isdir(config_path):
            raise CheckpointInspectionError(
                f"no {CONFIG_NAME} in {expanded}: pass the directory that `save_pretrained` wrote (it holds "
                f"{CONFIG_NAME} next to the weights)."
            )
        return _Resolved(directory=expanded, name=expanded, config_path=config_path)
    if os.path.exists(expanded):
        raise CheckpointInspectionError(
            f"{expanded} is a file: pass the checkpoint directory that holds {CONFIG_NAME} and the weights."
        )
    hub_id = parse_hub_id(path_or_id)
    if hub_id is None:
        raise CheckpointInspectionError(f"{path_or_id} does not exist, and it is not a Hub model id.")

    snapshot = find_cached_snapshot(hub_id, filename=CONFIG_NAME, revision=revision, cache_dir=cache_dir)
    if snapshot is not None:
        return _Resolved(directory=snapshot, name=snapshot, config_path=os.path.join(snapshot, CONFIG_NAME))
    return _resolve_uncached(path_or_id, hub_id, revision, cache_dir)


def _resolve_uncached(path_or_id: str, hub_id: str, revision: str | None, cache_dir: str | None) -> _Resolved:
    """An uncached Hub id: online, its `config.json` and safetensors headers (HTTP range requests); else an error."""
    from huggingface_hub import constants, get_safetensors_metadata, hf_hub_download

    cache = os.fspath(cache_dir) if cache_dir is not None else constants.HF_HUB_CACHE
    not_cached = (
        f"{path_or_id} is not a local directory, and the Hub id is not in the local Hugging Face cache ({cache})"
    )
    elsewhere = "pass the checkpoint directory, or --cache-dir if it is cached elsewhere"
    offline = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
    if constants.HF_HUB_OFFLINE or offline:
        raise CheckpointInspectionError(
            f"{not_cached}; HF_HUB_OFFLINE is set, so nothing is downloaded. {elsewhere.capitalize()}, or download it "
            f"first with `hf download {path_or_id}` while online."
        )
    unreachable = _hub_unreachable()
    if unreachable is not None:
        raise CheckpointInspectionError(
            f"{not_cached}, and the Hub cannot be reached ({unreachable}). Without a network, set HF_HUB_OFFLINE=1 "
            f"(only the cache is read, nothing is tried); {elsewhere}; or download it with `hf download {path_or_id}` "
            "while online."
        )
    try:
        config_path = hf_hub_download(path_or_id, CONFIG_NAME, revision=revision, cache_dir=cache_dir)
    except Exception as e:
        raise CheckpointInspectionError(
            f"{not_cached}, and its {CONFIG_NAME} could not be fetched from the Hub ({type(e).__name__}: {e}). "
            "Without a network, set HF_HUB_OFFLINE=1."
        ) from e
    try:
        remote = storage_from_hub_metadata(get_safetensors_metadata(path_or_id, revision=revision))
    except Exception as e:  # not a safetensors repo, or the headers could not be read
        logger.info(f"Could not read the safetensors headers of {path_or_id} from the Hub: {e}")
        remote = StorageSummary(format="none")
    return _Resolved(directory=None, name=hub_id, config_path=config_path, remote_storage=remote)


# the report


@dataclasses.dataclass
class Verdict:
    """
    Whether running the checkpoint at `runtime` is safe: `status` (`"safe"`, `"risky"`, `"unknown"`), a one-line
    `summary`, the `reasons` behind it and the `fix`; a risk's `kind` (`"overflow"`, `"precision_loss"`,
    `"measured_overflow"`) and `severity`; the `evidence` that made a risky prior safe, upstream's `mitigation`
    (`_keep_in_fp32_modules`), and the `basis` (`"rule"`, `"evidence"`, `"measured"`; `None` when unknown).
    """

    runtime: str
    status: str
    summary: str = ""
    reasons: list[str] = dataclasses.field(default_factory=list)
    fix: str | None = None
    kind: str | None = None
    severity: str | None = None
    evidence: dict | None = None
    mitigation: str | None = None
    basis: str | None = BASIS_RULE

    @property
    def is_safe(self) -> bool:
        return self.status == SAFE


#: Verdict statuses from the best to the worst: a composite model's status is its worst part's.
_STATUS_ORDER = (SAFE, UNKNOWN_STATUS, RISKY)


@dataclasses.dataclass
class SubModelReport:
    """The answer for one sub-model of a composite model (its `config.json` key, dotted when nested)."""

    key: str
    model_type: str | None
    declared: str
    effective: str
    provenance: str
    pretraining: str
    verdicts: dict[str, Verdict]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_type": self.model_type,
            FIELD: {
                "declared": self.declared,
                "effective": self.effective,
                "provenance": self.provenance,
                "pretraining": self.pretraining,
            },
            "verdicts": {name: dataclasses.asdict(v) for name, v in self.verdicts.items()},
        }


class _Report:
    """What both reports answer for an asked runtime, from the verdicts of their parts (`_parts`)."""

    def status(self, runtime: Any) -> str:
        """The status at `runtime` of the whole model: the worst of its own verdict and its sub-models' verdicts."""
        return max((v.status for v in self._parts(runtime_name(runtime))), key=_STATUS_ORDER.index)

    def basis(self, runtime: Any) -> str | None:
        """What the status at `runtime` rests on: the least certain basis of the verdicts that set it."""
        worst = self.status(runtime)
        verdicts = self._parts(runtime_name(runtime))
        return min((v.basis for v in verdicts if v.status == worst), key=_BASIS_ORDER.index)

    def exit_code(self, runtime: Any = None) -> int:
        """`transformers precision`'s exit code: 0 safe (or no `runtime`), 1 risky, 3 unknown."""
        return EXIT_SAFE if runtime is None else _EXIT_CODES[self.status(runtime)]

    def _asked(self, asked: str | None) -> dict[str, Any]:
        status, basis = (None, None) if asked is None else (self.status(asked), self.basis(asked))
        return {"asked_dtype": asked, "status": status, "basis": basis, "exit_code": self.exit_code(asked)}


@dataclasses.dataclass
class CheckpointReport(_Report):
    """
    What [`inspect_checkpoint`] found: `format()` is what `transformers precision` prints, `to_dict()` its `--json`.
    `declared` is what `config.json` says, `effective` what the verdicts use (from `effective_from`: `"config"`,
    `"registry"` or `None`).
    """

    checkpoint: str
    directory: str | None
    hub_id: str | None
    model_type: str | None
    architectures: list[str]
    declared: str
    declared_raw: Any
    registry: Any
    effective: str
    effective_from: str | None
    storage: StorageSummary
    verdicts: dict[str, Verdict]
    audit: Any = None
    pretraining: str = UNKNOWN
    provenance: str = UNKNOWN
    sub_models: dict[str, SubModelReport] = dataclasses.field(default_factory=dict)

    def verdict(self, runtime: Any) -> Verdict:
        """The verdict for a runtime precision (any spelling of fp32, bf16 or fp16), for the top-level config."""
        return self.verdicts[runtime_name(runtime)]

    def _parts(self, name: str) -> list[Verdict]:
        return [self.verdicts[name]] + [sub.verdicts[name] for sub in self.sub_models.values()]

    def to_dict(self, runtime: Any = None, top_k: int = 10) -> dict[str, Any]:
        """The JSON-serializable report (`transformers precision --json`); `runtime` is the asked dtype, if any."""
        asked = None if runtime is None else runtime_name(runtime)
        registry = None if self.registry is None else {key: getattr(self.registry, key) for key in _REGISTRY_KEYS}
        return {
            "schema_version": SCHEMA_VERSION,
            "checkpoint": self.checkpoint,
            "directory": self.directory,
            "hub_id": self.hub_id,
            "model_type": self.model_type,
            "architectures": list(self.architectures),
            FIELD: {
                "declared": self.declared,
                "declared_raw": self.declared_raw,
                "registry": registry,
                "effective": self.effective,
                "effective_from": self.effective_from,
                "provenance": self.provenance,
                "pretraining": self.pretraining,
            },
            "storage": dataclasses.asdict(self.storage),
            "verdicts": {name: dataclasses.asdict(v) for name, v in self.verdicts.items()},
            "audit": None if self.audit is None else self.audit.to_dict(top_k=top_k),
            "sub_models": {key: sub.to_dict() for key, sub in self.sub_models.items()},
            **self._asked(asked),
        }

    def format(self, runtime: Any = None, top_k: int = 10) -> str:
        """The human-readable report; `runtime` marks the asked dtype."""
        asked = None if runtime is None else runtime_name(runtime)
        lines = [f"Checkpoint: {self.checkpoint}"]
        if self.directory and self.directory != self.checkpoint:
            lines.append(f"  read from: {self.directory}")
        if self.model_type or self.architectures:
            arch = f" ({', '.join(self.architectures)})" if self.architectures else ""
            lines.append(f"  model type: {self.model_type or 'unknown'}{arch}")
        declared = self.declared
        if self.declared_raw is not None and str(self.declared_raw) != self.declared:
            declared += f" (config.json says {self.declared_raw!r})"
        if self.declared_raw is None:
            declared += " (not in config.json)"
        lines.append(f"Trained precision (config): {declared}")
        if self.pretraining != UNKNOWN:
            lines.append(f"Pretraining precision (config): {self.pretraining}")
        if self.hub_id is None:
            lines.append(
                "Trained precision (registry): not consulted: a directory outside the Hub cache has no Hub id"
            )
        elif self.registry is None:
            lines.append(f"Trained precision (registry): no entry for {self.hub_id}")
        else:
            lines.append(
                f"Trained precision (registry): {self.registry.precision} via {self.registry.model_id} "
                f"({self.registry.note}; {self.registry.citation})"
            )
        lines.append(f"Trained precision used for the verdicts: {self.effective} ({self.provenance})")
        lines.append(_format_storage(self.storage))
        lines.append("Verdicts:")
        lines.extend(_verdict_lines(self.verdicts, asked))
        for key, sub in self.sub_models.items():
            kind = f" ({sub.model_type})" if sub.model_type else ""
            lines.append(f"Sub-model {key}{kind}: trained in {sub.effective} ({sub.provenance})")
            lines.extend(_verdict_lines(sub.verdicts, asked, details=False))
        if asked is not None and self.sub_models:
            lines.append(f"Whole model at {asked}: {self.status(asked)} (the worst of the model and its sub-models)")
        if self.audit is not None:
            lines.append(self.audit.format(top_k=top_k))
        return "\n".join(lines)


_REGISTRY_KEYS = ("model_id", "precision", "source", "confidence", "note", "reference_runtime", "reference_source")


def _verdict_lines(verdicts: dict[str, Verdict], asked: str | None, details: bool = True) -> list[str]:
    """One line per verdict (the asked one marked), with the reasons and fix of one not safe (no `details`: if asked)."""
    lines = []
    for name, verdict in verdicts.items():
        lines.append(f"  {name}: {verdict.summary}{'  <- asked' if name == asked else ''}")
        if (details or name == asked) and verdict.status != SAFE:
            lines.extend(f"      {reason}" for reason in verdict.reasons)
            lines.extend([f"      fix: {verdict.fix}"] if verdict.fix else [])
    return lines


def _format_storage(storage: StorageSummary) -> str:
    if storage.format == "safetensors":
        dtypes = ", ".join(f"{name} ({count:,})" for name, count in storage.dtypes.items()) or "no tensors"
        files = f"{len(storage.files)} shards" if storage.sharded else ", ".join(storage.files)
        return (
            f"Storage: {dtypes}; {storage.parameters:,} stored values (parameters and persistent buffers; the header "
            f"does not tell them apart) in {files}"
        )
    if storage.format == "pickle":
        return f"Storage: pickled weights ({', '.join(storage.files)}), not opened: no safetensors header to read"
    return "Storage: no weight files found"


def runtime_name(runtime: Any) -> str:
    """The canonical runtime precision of `runtime`; a [`CheckpointInspectionError`] unless fp32, bf16 or fp16."""
    try:
        name = normalize_precision(runtime)
    except InvalidTrainedPrecisionError:
        name = None
    if name not in RUNTIME_PRECISIONS:
        raise CheckpointInspectionError(f"{runtime!r} is not a runtime dtype: use one of fp32, bf16, fp16.")
    return name


def _read_config(resolved: _Resolved) -> dict[str, Any]:
    """The `config.json` of a resolved checkpoint (a downloaded one lies in the cache, then the checkpoint)."""
    config_path = resolved.config_path
    root = checkpoint_root(resolved.directory or os.path.dirname(config_path))
    try:
        with open_checkpoint_file(config_path, root) as f:
            config = json.loads(f.read().decode("utf-8-sig"))
    except CheckpointInspectionError:
        raise
    except (OSError, ValueError) as e:
        raise CheckpointInspectionError(f"{config_path} is not a readable JSON file: {e}") from e
    except RecursionError as e:  # `json` recurses once per nesting level
        raise CheckpointInspectionError(f"{config_path} is malformed: its JSON is nested too deeply to read.") from e
    if not isinstance(config, dict):
        raise CheckpointInspectionError(f"{config_path} is malformed: a JSON object was expected.")
    return config


def _declared_precision(config: dict[str, Any], config_path: str | None = None) -> tuple[str, Any]:
    """The canonical precision a config declares, and its raw value; an invalid one warns when `config_path` is given."""
    raw = config.get(FIELD)
    if raw is None:
        return UNKNOWN, None
    try:
        return normalize_precision(raw), raw
    except InvalidTrainedPrecisionError:
        if config_path is not None:
            logger.warning(f"{config_path} holds an unrecognised {FIELD} {raw!r}: treated as '{UNKNOWN}'.")
        return UNKNOWN, raw


def _rule_verdict(runtime: str, info: Any, audit: Any) -> Verdict:
    """The verdict [`~trained_precision.guard.decision.decide`] gives loading, refined by the measurement of an audit."""
    assessment = info.assess(runtime, import_classes=audit is not None)  # no torch import without an audit
    decision = decide(PrecisionFacts(info, ((assessment, None),)))
    measured = audit.problem_for(runtime) if audit is not None else None
    if decision.status == RISKY:
        return _risky_verdict(runtime, assessment, measured, audit)
    if measured is not None:
        safer = [p for p in RUNTIME_PRECISIONS if p != runtime and audit.problem_for(p) is None]
        fix = f"use {dtype_options(reversed(safer))}" if safer else None
        return Verdict(
            runtime,
            RISKY,
            summary=f"RISKY: overflow measured ({measured})",
            reasons=[f"measured: {measured}."],
            fix=fix,
            kind="measured_overflow",
            severity="high",
            basis=BASIS_MEASURED,
        )
    if decision.basis == BASIS_EVIDENCE:
        evidence = assessment.evidence
        return Verdict(
            runtime,
            SAFE,
            summary=f"safe: {evidence.describe()}",
            reasons=[
                f"the rules alone predict {assessment.prior.kind.replace('_', ' ')} (trained in "
                f"{assessment.prior.trained}); the evidence overrides them."
            ],
            evidence={"kind": evidence.kind, "detail": evidence.detail, "source": evidence.source},
            basis=BASIS_EVIDENCE,
        )
    if decision.status == SAFE:
        why = runtime if runtime in info.lineage else " then ".join(info.lineage)
        return Verdict(
            runtime, SAFE, summary="safe (fp32 is always safe)" if runtime == FP32 else f"safe (trained in {why})"
        )
    return _unknown_verdict(runtime, info, audit)


def _unknown_verdict(runtime: str, info: Any, audit: Any) -> Verdict:
    """The verdict of a runtime no rule decides: the oldest training stage is unknown."""
    what = "the trained precision is unknown"
    if info.lineage:  # a recorded fine-tune whose oldest stage is unknown
        what = f"it was fine-tuned in {info.lineage[-1]} from a model whose trained precision is unknown"
    if audit is not None:
        return Verdict(
            runtime,
            SAFE,
            summary=f"safe as measured: the range fits {runtime} ({audit.range_for(runtime)}); {what}, so precision "
            "loss cannot be ruled out",
            reasons=[
                "a measurement on the calibration inputs, not a verdict from the trained precision: no rule covers an "
                "unknown trained precision, and other inputs may reach larger values."
            ],
            basis=BASIS_MEASURED,
        )
    return Verdict(
        runtime,
        UNKNOWN_STATUS,
        summary=f"unknown: {what}, so no rule says this is safe",
        reasons=[
            "`--audit` measures the activation ranges; `transformers precision set PATH --precision ...` records the "
            "precision once you know it."
        ],
        basis=None,
    )


def _risky_verdict(runtime: str, assessment: Any, measured: str | None, audit: Any) -> Verdict:
    """The verdict of a runtime the rules find risky: why, what upstream mitigates, and what the audit measured."""
    risk = assessment.risk
    fits = "" if audit is None else f"; the measured range fits {runtime} ({audit.range_for(runtime)})"
    verdict = Verdict(runtime, RISKY, fix=risk.fix, kind=risk.kind, severity=risk.severity)
    verdict.reasons.append(f"trained in {risk.trained}: {risk.reason}.")
    if assessment.dropped:  # bound evidence (a run, a copy's reference) that these weights do not match
        verdict.reasons.append(assessment.dropped)
    if assessment.mitigation is not None:
        verdict.mitigation = assessment.mitigation.detail
        verdict.reasons.append(f"mitigation: {assessment.mitigation.detail}.")
    mild = " (mild: weak public evidence)" if risk.severity == "low" else ""
    if measured is not None:
        verdict.summary = f"RISKY: overflow measured ({measured})"
        verdict.reasons.append(f"measured: {measured}.")
        verdict.basis = BASIS_MEASURED
    elif risk.kind == OVERFLOW and audit is not None and risk.trained == FP32:
        verdict.summary = f"RISKY: precision loss expected (trained in fp32, fewer mantissa bits){fits}"
    elif risk.kind == OVERFLOW and audit is not None:
        verdict.summary = (
            f"RISKY: overflow expected (trained in {risk.trained}), not seen on the calibration inputs{fits}; "
            "other inputs may overflow"
        )
    else:
        what = "overflow" if risk.kind == OVERFLOW else "precision loss"
        verdict.summary = f"RISKY{mild}: {what} expected (trained in {risk.trained}){fits}"
    return verdict


def build_verdicts(info: Any, audit: Any = None) -> dict[str, Verdict]:
    """A verdict per runtime precision, from the resolved trained precision and, after an audit, the measurement."""
    return {runtime: _rule_verdict(runtime, info, audit) for runtime in RUNTIME_PRECISIONS}


def build_sub_model_reports(config: dict[str, Any], name: str, plans: dict, subject) -> dict[str, SubModelReport]:
    """One [`SubModelReport`] per sub-config of a composite model's `config.json`, resolved as the loader does (with the
    weights `subject` and, per key, what its stored fp16 plan came to: `plans`)."""
    reports = {}
    for key, sub in sub_config_items(config):
        info, verdicts = _info_and_verdicts(sub, name, plans.get(key), subject)
        declared = _declared_precision(sub)[0]
        reports[key] = SubModelReport(
            key, sub.get("model_type"), declared, info.precision, info.provenance, info.pretraining, verdicts
        )
    return reports


def _info_and_verdicts(config: dict, name: str, plan: dict | str | None, subject, audit: Any = None) -> tuple:
    """A (sub-)config's precision and verdicts; its stored fp16 `plan` is evidence once verified, else a reason why not."""
    info = resolve_trained_precision(config, name, fp16_plan=plan if isinstance(plan, dict) else None, subject=subject)
    verdicts = build_verdicts(info, audit)
    if isinstance(plan, str) and verdicts[FP16].status != SAFE:
        verdicts[FP16].reasons.append(plan)
    elif isinstance(plan, dict) and verdicts[FP16].status == SAFE:
        _condition_on_backend(verdicts[FP16], plan["validated_on"]["backend"], subject)
    return info, verdicts


def inspect_checkpoint(
    path_or_id: str,
    audit: bool = False,
    revision: str | None = None,
    max_header_bytes: int = MAX_HEADER_BYTES,
    download: bool = False,
    allow_pickle: bool = False,
    cache_dir: str | None = None,
    **audit_kwargs,
) -> CheckpointReport:
    """
    Inspects a checkpoint (a directory, or a Hub id: cached under any spelling, else read online) without loading it:
    its trained precision as loading resolves it, its storage dtypes, and a verdict per runtime precision. `audit=True`
    also loads it in fp32 on the CPU and measures its activations ([`~trained_precision.plan.audit.audit_checkpoint`], needs
    torch; `audit_kwargs` go to it: `texts`, `max_length`, `seed`); `download` and `allow_pickle` let the audit
    download weights or unpickle `.bin` files (which can run code).
    A [`CheckpointInspectionError`] (a `ValueError`) for bad input, a checkpoint neither cached nor reachable, or an
    audit that would download or unpickle without its opt-in.
    """
    resolved = _resolve(path_or_id, revision=revision, cache_dir=cache_dir)
    config = _read_config(resolved)
    declared, declared_raw = _declared_precision(config, resolved.config_path)
    storage = resolved.remote_storage or read_storage(resolved.directory, max_header_bytes=max_header_bytes)
    stored = {key: plan for key, sub in [("", config), *sub_config_items(config)] if (plan := read_fp16_plan(sub))}
    # bound evidence (a plan, a run, a copy's reference) is checked on the weights, mapped as the load checks them
    model = _mapped_model(resolved.directory, storage) if stored or bound_evidence_pending(config) else None
    subject = None if model is None or isinstance(model, str) else weights_subject(model)
    plans = _verified_fp16_plans(model, subject, stored) if stored else {}
    measured = _run_audit(resolved, storage, download, allow_pickle, cache_dir, audit_kwargs) if audit else None
    info, verdicts = _info_and_verdicts(config, resolved.name, plans.get(""), subject, measured)
    architectures = config.get("architectures") or []
    snapshot = cache_snapshot_of(resolved.directory) if resolved.directory else None
    return CheckpointReport(
        checkpoint=os.fspath(path_or_id),
        directory=resolved.directory,
        hub_id=info.hub_id,
        model_type=config.get("model_type"),
        architectures=[str(a) for a in architectures] if isinstance(architectures, list) else [str(architectures)],
        declared=declared,
        declared_raw=declared_raw,
        registry=lookup(info.hub_id) if info.hub_id else None,
        effective=info.precision,
        effective_from=info.source,
        storage=storage,
        verdicts=verdicts,
        audit=measured,
        pretraining=info.pretraining,
        provenance=info.provenance if snapshot is None else f"{info.provenance} (cached as {snapshot.cached_as})",
        sub_models=build_sub_model_reports(config, resolved.name, plans, subject),
    )


def _mapped_model(directory: str | None, storage: StorageSummary):
    """The model on the meta device, its weights mapped from the safetensors files as a load binds them, or why not."""
    if directory is None or storage.format != "safetensors":
        return "its weights are not local safetensors files"
    try:
        import torch
    except ImportError:
        return "checking it against the weights needs PyTorch"
    from ...models.auto import AutoConfig
    from ..plan.audit import model_class

    try:  # the classes `architectures` names, as a load builds them (custom code is never run here)
        config = AutoConfig.from_pretrained(directory, local_files_only=True)
        cls = model_class(config)
        with torch.device("meta"):
            model = cls.from_config(config) if hasattr(cls, "from_config") else cls(config)  # `AutoModel`, or a class
        model.tie_weights()
        problem = _map_weights(model, [os.path.join(directory, name) for name in storage.files])
    except Exception as e:
        return f"the model could not be built to map its weights ({type(e).__name__}: {e})"
    return problem or model


def _verified_fp16_plans(model, subject, stored: dict[str, dict]) -> dict[str, dict | str]:
    """Per sub-config key of the `stored` plans ("": the model's own), the plan if the load's decision makes it evidence
    for the mapped `model` on the device it was measured on (the report cannot know the runtime), else why not."""
    if isinstance(model, str):
        return dict.fromkeys(
            stored,
            f"the stored fp16 plan is unverified here: {model}, so it clears nothing; loading with `dtype=torch.float16` "
            "checks it against the weights (their fingerprint) and applies it.",
        )
    import torch

    snapshot, found = ModelSnapshot(model), {}
    for key, plan in stored.items():  # each on the device it was measured on
        on = dataclasses.replace(subject, backend=plan["validated_on"]["backend"] or subject.backend)
        decision = decide_fp16_plan(snapshot, torch.float16, subject=on)
        problem = decision.problems.get(key, "no sub-model is built from its sub-config, so a load applies none")
        found[key] = decision.evidence.get(key) or f"its stored fp16 plan is no evidence here: {problem}."
    return found


def _condition_on_backend(verdict: Verdict, measured_on: str | None, subject) -> None:
    """Says that a plan measured on another kind of device than the report maps the weights on holds there only."""
    family = backend_family(measured_on)
    if family is not None and family != backend_family(subject.backend):
        verdict.summary = f"safe on {family} ({measured_on}): {verdict.summary.removeprefix('safe: ')}"
        verdict.reasons.append(
            f"the fp16 plan is verified for {measured_on}, the kind of device it was measured on; on another kind (as "
            f"{subject.backend}) it is stale and an fp16 load there does not apply it: measure it again there."
        )


def _map_weights(model, paths: list[str]) -> str | None:
    """Maps the safetensors files `paths` into `model`'s meta parameters as a load binds them, or says why not."""
    from safetensors import safe_open

    mapped = {}
    for path in paths:
        with safe_open(path, framework="pt") as f:  # the loader's reader: each tensor mapped, nothing read until used
            mapped.update((name, f.get_tensor(name)) for name in f.keys())
    loaded = _as_loaded(model, mapped)
    if isinstance(loaded, str):
        return loaded
    model.load_state_dict(loaded, strict=False, assign=True)  # each tensor as it is mapped; a wrong shape raises
    model.tie_weights()
    missing = next((name for name, parameter in model.named_parameters() if parameter.is_meta), None)
    return missing and f"the model's weight `{missing}` is not mapped from the checkpoint as named"


#: The most bytes of weights the report fuses as a load does (a MoE's experts), in memory; the others stay mapped.
MAX_CONVERTED_BYTES = 8 * 2**30


def _as_loaded(model, mapped: dict) -> dict | str:
    """The tensors `mapped` (by checkpoint name) by the names a load binds them to, or why not: renamed and converted by
    the loader's own conversion mapping for `model`, with its base model prefix added or dropped as the loader does."""
    from copy import deepcopy

    from ...conversion_mapping import get_model_conversion_mapping
    from ...core_model_loading import WeightConverter, WeightRenaming, dot_natural_key, rename_source_key

    transforms = get_model_conversion_mapping(model)
    renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = {p: t for t in transforms if isinstance(t, WeightConverter) for p in t.source_patterns}
    meta, prefix = model.state_dict(), model.base_model_prefix
    loaded, pending = {}, {}
    for key in sorted(mapped, key=dot_natural_key):  # the loader's order: the order it stacks experts in
        name, pattern = rename_source_key(key, renamings, list(converters.values()), prefix, meta)
        if name not in meta and key in meta:
            name, pattern = rename_source_key(key, [], [], prefix, meta)
        if pattern is None:
            loaded[name] = mapped[key]
        else:
            pending.setdefault(name, deepcopy(converters[pattern])).add_tensor(name, key, pattern, mapped[key])
    size = sum(t.nbytes for c in pending.values() for tensors in c.collected_tensors.values() for t in tensors)
    if size > MAX_CONVERTED_BYTES:
        return f"a load fuses {size / 2**30:.1f} GiB of its weights, over the report's {MAX_CONVERTED_BYTES >> 30} GiB"
    for name, converter in pending.items():
        for target, tensor in converter.convert(name, model=model, config=model.config).items():
            loaded[target] = tensor[0] if isinstance(tensor, list) else tensor
    return loaded


def _run_audit(resolved, storage, download, allow_pickle, cache_dir, audit_kwargs):
    if resolved.directory is None and not download:
        size = f"{storage.bytes / 1e9:.2f} GB of weights" if storage.bytes else "its weights (size unknown)"
        raise CheckpointInspectionError(
            f"{resolved.name} is not in the local cache: the audit would download {size} and load them in fp32. "
            "Pass --download (`download=True`) to allow it."
        )
    if storage.format == "pickle" and not allow_pickle:
        raise CheckpointInspectionError(
            f"the weights are pickled ({', '.join(storage.files)}): loading them for the audit unpickles them, which "
            "can run code. Pass --allow-pickle (`allow_pickle=True`) only if you trust the checkpoint, or convert it "
            "to safetensors."
        )
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise CheckpointInspectionError(
            "the audit runs the model, which needs PyTorch: `pip install torch` (the report without --audit does not "
            "need it)."
        ) from e
    from ..plan.audit import audit_checkpoint

    return audit_checkpoint(
        resolved.directory or resolved.name,
        local_files_only=not download,
        use_safetensors=storage.format != "pickle",
        cache_dir=cache_dir,
        **audit_kwargs,
    )


# --------------------------------------------------------------------------------------------------------------------
# the report of a PEFT adapter directory (`transformers precision ADAPTER_DIR`)


def is_adapter_directory(path: str | os.PathLike) -> bool:
    """Whether `path` is a PEFT adapter directory: an `adapter_config.json` and no `config.json` of a full model."""
    from ..record.adapter import ADAPTER_CONFIG_NAME

    path = os.path.expanduser(os.fspath(path))
    adapter, full = (os.path.join(path, name) for name in (ADAPTER_CONFIG_NAME, CONFIG_NAME))
    return os.path.isfile(adapter) and not os.path.exists(full)


@dataclasses.dataclass
class AdapterReport(_Report):
    """What [`inspect_adapter`] found: the adapter's record, its base's report, and a verdict per runtime from both."""

    checkpoint: str
    directory: str
    peft_type: str | None
    base_name_or_path: str | None
    record: Any  # AdapterRun, or None when the adapter has no record
    base: Any  # CheckpointReport, or None when the base could not be read
    base_error: str | None
    info: Any  # TrainedPrecisionInfo of base + adapter
    verdicts: dict

    def _parts(self, name: str) -> list[Verdict]:
        return [self.verdicts[name]]

    def to_dict(self, runtime: Any = None, top_k: int = 10) -> dict[str, Any]:
        asked = None if runtime is None else runtime_name(runtime)
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "adapter",
            "checkpoint": self.checkpoint,
            "directory": self.directory,
            "adapter": {
                "peft_type": self.peft_type,
                "run": self.record.to_dict() if self.record is not None else None,
            },
            "base": {
                "name_or_path": self.base_name_or_path,
                "report": self.base.to_dict(top_k=top_k) if self.base is not None else None,
                "error": self.base_error,
            },
            FIELD: {
                "effective": self.info.precision,
                "lineage": list(self.info.lineage),
                RUN_FIELD: self.info.run_status,
            },
            "verdicts": {name: dataclasses.asdict(v) for name, v in self.verdicts.items()},
            **self._asked(asked),
        }

    def format(self, runtime: Any = None, top_k: int = 10) -> str:
        asked = None if runtime is None else runtime_name(runtime)
        lines = [f"Adapter: {self.checkpoint} ({self.peft_type or 'PEFT'})"]
        run = "no training record (saved without the Trainer, or before records existed)"
        lines.append(f"  run: {run if self.record is None else self.record.describe()}")
        lines.append(f"Base: {self.base_name_or_path or 'not named in adapter_config.json'}")
        if self.base is not None:
            lines.append(
                f"  trained precision: {self.base.effective} ({self.base.provenance})"
                + (f", pretrained in {self.base.pretraining}" if self.base.pretraining != UNKNOWN else "")
            )
        else:
            lines.append(f"  not read: {self.base_error}")
        if self.record is not None and self.record.base_lineage:
            lines.append(
                f"  at training time: {' then '.join(self.record.base_lineage)} ({self.record.base_provenance})"
            )
        lines.append(f"Base + adapter: {' then '.join(self.info.lineage) or UNKNOWN}")
        lines.append("Verdicts (base + adapter):")
        lines.extend(_verdict_lines(self.verdicts, asked))
        return "\n".join(lines)


def inspect_adapter(path: str | os.PathLike, cache_dir: str | None = None) -> AdapterReport:
    """
    Inspects a PEFT adapter directory: its record, its base (resolved as [`inspect_checkpoint`] does), and a verdict
    per runtime from both; a [`CheckpointInspectionError`] for a missing or malformed `adapter_config.json`.
    """
    from ..record.adapter import ADAPTER_CONFIG_NAME, adapter_precision_info, read_adapter_record

    directory = os.path.expanduser(os.fspath(path))
    config_path = os.path.join(directory, ADAPTER_CONFIG_NAME)
    try:
        with open(config_path, encoding="utf-8") as f:
            adapter_config = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointInspectionError(f"{config_path} is not a readable JSON file: {e}") from e
    if not isinstance(adapter_config, dict):
        raise CheckpointInspectionError(f"{config_path} is malformed: a JSON object was expected.")
    record = read_adapter_record(directory)
    base_name = adapter_config.get("base_model_name_or_path")
    base_report, base_error, base_info = None, None, None
    if isinstance(base_name, str) and base_name:
        try:
            base_report = inspect_checkpoint(base_name, cache_dir=cache_dir)
        except CheckpointInspectionError as e:
            base_error = str(e)
            base_info = resolve_trained_precision({}, base_name)  # not readable here: the registry knows a Hub id
        else:
            # the base's config as its own report read it (a local directory, a cache snapshot, a downloaded file)
            resolved = _resolve(base_name, cache_dir=cache_dir)
            base_info = resolve_trained_precision(_read_config(resolved), resolved.name)
    else:
        base_error = f"{ADAPTER_CONFIG_NAME} names no base_model_name_or_path"
    info = adapter_precision_info(base_info, record)
    return AdapterReport(
        checkpoint=os.fspath(path),
        directory=directory,
        peft_type=adapter_config.get("peft_type"),
        base_name_or_path=base_name if isinstance(base_name, str) else None,
        record=record,
        base=base_report,
        base_error=base_error,
        info=info,
        verdicts=build_verdicts(info),
    )


__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL_ERROR",
    "EXIT_NOT_DONE",
    "EXIT_RISKY",
    "EXIT_SAFE",
    "EXIT_UNKNOWN",
    "FP16_MAX",
    "CheckpointInspectionError",
    "AdapterReport",
    "CheckpointReport",
    "SafetensorsHeaderError",
    "SubModelReport",
    "Verdict",
    "build_verdicts",
    "inspect_adapter",
    "inspect_checkpoint",
    "is_adapter_directory",
    "read_safetensors_header",
    "runtime_name",
]
