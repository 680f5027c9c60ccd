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
The decision: what is known about a model ([`~trained_precision.facts.resolver.PrecisionFacts`], gathered once per load,
cast or report) goes into one pure function, [`decide`], whose [`Decision`] carries its status and its message;
[`say`] is the one place that says it. Loading, casting and the `transformers precision PATH` report all ask [`decide`].
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...utils import logging
from ..facts.resolver import CAST, FROM_CONFIG, LOAD, Assessment, Call, PrecisionFacts
from ..facts.risk import PRECISION_LOSS, Risk
from ..vocabulary import FP16, FP32, dtype_code, dtype_options


# said under the check's logger, which users and tests filter on
logger = logging.get_logger(__name__.rpartition(".")[0] + ".check")

#: The environment variable that sets the mode for the whole process.
ENV_VAR = "TRANSFORMERS_TRAINED_PRECISION_CHECK"
#: The `from_pretrained` / `from_config` keyword that sets the mode for one call.
KWARG = "trained_precision_check"
WARN = "warn"
ERROR = "error"
IGNORE = "ignore"
#: Valid modes, the default first.
CHECK_MODES: tuple[str, ...] = (WARN, ERROR, IGNORE)

_ACTIONS = (LOAD, FROM_CONFIG, CAST)

#: Statuses and what a status rests on (shared with the report's verdicts).
SAFE = "safe"
RISKY = "risky"
UNKNOWN_STATUS = "unknown"
BASIS_RULE = "rule"
BASIS_EVIDENCE = "evidence"

# What `say` already said: (name, sub-model, trained, runtime) warned about, and the same keys with the kind of an
# info message ("evidence", "note"), kept apart so that a note never silences a later real warning.
_WARNED: set[tuple[str, str, str, str]] = set()
_INFORMED: set[tuple[str, str, str, str, str]] = set()


class TrainedPrecisionRiskError(Exception):
    """
    Raised in `"error"` mode when a model is loaded or cast into a precision its training makes risky: the `message` the
    `"warn"` mode logs, the `risk`, the `model_name` and the `source` of the trained precision. Not a `ValueError`, so
    that callers which retry a load on one (`transformers serve`) do not swallow it.
    """

    def __init__(self, message: str, risk: Risk, model_name: str, source: str):
        super().__init__(message)
        self.risk = risk
        self.model_name = model_name
        self.source = source


@dataclasses.dataclass(frozen=True)
class Decision:
    """
    The verdict on one runtime: its `status` (`"safe"`, `"risky"`, `"unknown"`) and `basis` (`"rule"`, `"evidence"`,
    `None`), the `assessment` behind it, and what to say: the `level` (`"warning"`, `"error"`, `"info"` or `None`), the
    `message`, and the once-cache's `tag` and `keys` (this (sub-)model's, the whole model's).
    """

    status: str
    basis: str | None
    assessment: Assessment
    level: str | None = None
    message: str | None = None
    tag: str = "warning"
    keys: tuple = ()
    name: str = ""
    source: str | None = None

    @property
    def risk(self) -> Risk | None:
        return self.assessment.risk


def decide(facts: PrecisionFacts) -> Decision | None:
    """
    The one decision: of the runtimes in `facts`, the first risky one, else the first the rules have a say on, else
    the first; its status, and what to say in `facts.mode`. Pure: no logging, no state. `None` without a runtime.
    """
    if not facts.runtimes:
        return None
    assessment, note = facts.runtimes[0]
    for candidate, candidate_note in facts.runtimes:
        if candidate.prior is not None and (assessment.prior is None or assessment.risk is None and candidate.risk):
            assessment, note = candidate, candidate_note
    info, risk, prior = facts.info, assessment.risk, assessment.prior
    if risk is not None:
        status, basis = RISKY, BASIS_RULE
    elif prior is not None:
        status, basis = SAFE, BASIS_EVIDENCE
    elif assessment.runtime == FP32 or info.lineage_known:
        status, basis = SAFE, BASIS_RULE
    else:
        status, basis = UNKNOWN_STATUS, None
    decision = Decision(status, basis, assessment, name=facts.name, source=info.source)
    if prior is None or facts.mode == IGNORE:
        return decision
    key = (facts.name, facts.sub_model, prior.trained, prior.runtime)
    keys = (key, (facts.name, "", prior.trained, prior.runtime))
    if risk is None:
        message = (
            f"{_who(facts)} was trained in {prior.trained} ({info.describe()}), and {prior.runtime} is not risky "
            f"for it: {assessment.evidence.describe()}."
        )
        return dataclasses.replace(decision, level="info", message=message, tag="evidence", keys=keys)
    # a loss of precision with no known failure (fp32 weights run in bf16) is a note: never an error, never a warning
    note_only = risk.kind == PRECISION_LOSS
    level, tag = ("info", "note") if note_only else (facts.mode if facts.mode == ERROR else "warning", "warning")
    message = risk_message(facts, assessment, note, WARN if note_only else facts.mode)
    return dataclasses.replace(decision, level=level, message=message, tag=tag, keys=keys)


def _who(facts: PrecisionFacts) -> str:
    return f"Model '{facts.name}'" + (f" (its {facts.sub_model} sub-model)" if facts.sub_model else "")


def risk_message(facts: PrecisionFacts, assessment: Assessment, note: str | None, mode: str) -> str:
    """A risk's message: the model, both precisions and where the trained one came from, the risk, and the fix."""
    if facts.action not in _ACTIONS:
        raise ValueError(f"{facts.action!r} is not a valid action. Valid values are {', '.join(map(repr, _ACTIONS))}.")
    risk = assessment.risk
    runtime = f"{risk.runtime} (`{dtype_code(risk.runtime)}`{f'; {note}' if note else ''})"
    verb = {LOAD: "is being loaded in", FROM_CONFIG: "is being instantiated in", CAST: "is being cast to"}
    reason = risk.reason
    if assessment.mitigation is not None:
        reason = f"{reason}; {assessment.mitigation.detail}"
    stale = None
    if facts.plan_problem and risk.runtime == FP16:
        stale = f"Its stored fp16 plan is no evidence here: {facts.plan_problem}."
    evidence_note = " ".join(n for n in (stale, assessment.dropped) if n)
    return (
        f"{_who(facts)} was trained in {risk.trained} ({facts.info.describe()}) but {verb[facts.action]} {runtime}: "
        f"{reason}. {f'{evidence_note} ' if evidence_note else ''}{_fix_text(risk, facts.action, mode, facts.per_call)}"
    )


def _fix_text(risk: Risk, action: str, mode: str, per_call: bool) -> str:
    if action == CAST:
        casts = " or ".join("`.float()`" if p == FP32 else f"`.to({dtype_code(p)})`" for p in risk.safe_dtypes)
        fix = f"Cast it with {casts} instead"
        # a mode recorded at loading beats the environment variable: only loading with "ignore" silences the cast
        silence = f'load the model with `{KWARG}="ignore"`' if per_call else f"set {ENV_VAR}=ignore"
    else:
        fix = f"Load it with {dtype_options(risk.safe_dtypes)} instead"
        silence = f'pass `{KWARG}="ignore"` or set {ENV_VAR}=ignore'
    return f"{fix}, or {silence} to silence {'this error' if mode == ERROR else 'this warning'}."


def say(decision: Decision | None) -> Risk | None:
    """
    The one place a decision is said: an error raises [`TrainedPrecisionRiskError`]; a warning is logged once per
    (model, sub-model, trained, runtime), also for the whole model; an info message once per key and kind. Returns the
    risk that remains (`None` when safe).
    """
    if decision is None:
        return None
    risk = decision.risk
    if decision.level is None:
        return risk
    key, outer = decision.keys
    if decision.level == "info":
        if (*key, decision.tag) not in _INFORMED and (*outer, decision.tag) not in _INFORMED:
            _INFORMED.add((*key, decision.tag))
            logger.info(decision.message)
        return risk
    if decision.level == ERROR:
        raise TrainedPrecisionRiskError(decision.message, risk, decision.name, decision.source)
    if key not in _WARNED and outer not in _WARNED:
        _WARNED.update((key, outer))  # a composite model's other sub-models at risk are not said again
        logger.warning(decision.message)
    return risk


def cleared_phrase(parts: list[tuple[Any, Call]], facts: list[PrecisionFacts]) -> str | None:
    """The evidence that overrode a predicted risk in the judged `facts` of `parts`, as a phrase; `None` if none did."""
    found = [
        (f"(its {call.plan_key} sub-model) " if call.plan_key else "") + assessment.evidence.describe()
        for (_, call), part in zip(parts, facts)
        for assessment, _ in part.runtimes
        if assessment.overridden
    ]
    return "; ".join(dict.fromkeys(found)) or None


def reset_warning_cache() -> None:
    """Forget which (model, sub-model, trained, runtime precision) combinations were already reported on (tests)."""
    _WARNED.clear()
    _INFORMED.clear()


__all__ = [
    "Decision",
    "cleared_phrase",
    "PrecisionFacts",
    "TrainedPrecisionRiskError",
    "decide",
    "reset_warning_cache",
    "say",
]
