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
The record of a checkpoint's latest training run (`config.trained_precision_run`), and what it proves.

The Trainer stamp writes it at the start of `train()` (`"started"`: what an interrupted run and its checkpoints keep)
and at its end (`"finished"` with finite losses and weights, or `"diverged"`). A finished run is evidence that its
precision works ([`RunRecord.proves`]) for its kind (an autocast run kept the residual stream in its fp32 weights, so
it proves AMP training only; a pure run proves both), after at least [`MIN_RUN_STEPS`] optimizer steps that updated
the weights, and for what it ran on (its `binding`: [`~trained_precision.facts.binding.binding_problem`]). A run that
diverged or did not end is no evidence, nor is a record older than its kind, steps or binding. An fp32 run writes no
record: fp32 is never risky.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..vocabulary import RUN_AMP, RUN_COMPUTES, RUN_FIELD, RUN_FINISHED, RUN_PURE, RUN_STATUSES


#: The optimizer steps a finished run needs before it is evidence for its precision. The first steps of an fp16 run
#: prove little: a gradient scaler spends them finding its scale (its first steps are often skipped), and a
#: fine-tune's activations drift from the pretrained ones over hundreds of updates, which is where a model trained in
#: another precision overflows. 100 steps is about what the Trainer logs in its first `logging_steps=100` and what
#: the warm-up of most fine-tuning recipes spans; fewer is a smoke test, not evidence.
MIN_RUN_STEPS = 100


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """
    The latest training run a config records (`trained_precision_run`).

    Args:
        status (`str`): `"started"`, `"finished"` or `"diverged"`.
        compute (`str`, *optional*): `"amp"` (autocast over wider weights) or `"pure"`; `None` in an older record.
        optimizer_steps (`int`, *optional*): the optimizer steps that updated the weights (skipped steps excluded).
        skipped_steps (`int`, *optional*, defaults to 0): the optimizer steps a gradient scaler skipped.
        fp16_plan (`bool`, *optional*, defaults to `False`): a stored fp16 plan kept modules in fp32 during the run: it
            proves fp16 only while that plan is evidence.
        binding (`dict`, *optional*): what a finished run was made on ([`~trained_precision.facts.binding.Binding`]); a record
            without one is no evidence.
    """

    status: str
    compute: str | None = None
    optimizer_steps: int | None = None
    skipped_steps: int = 0
    fp16_plan: bool = False
    binding: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as `config.json` stores it."""
        return dataclasses.asdict(self)

    def why_not_evidence(self, runtime: str, compute: str = RUN_PURE) -> str | None:
        """Why this run is no evidence that `runtime`, computed as `compute`, works; `None` when it is."""
        if self.status != RUN_FINISHED:
            return f"the run recorded in `{RUN_FIELD}` is {self.status!r}, not finished"
        if self.compute not in RUN_COMPUTES or self.optimizer_steps is None:
            return f"`{RUN_FIELD}` does not record how the run computed and how many optimizer steps it took"
        if self.optimizer_steps < MIN_RUN_STEPS:
            skipped = f" ({self.skipped_steps} more were skipped)" if self.skipped_steps else ""
            return (
                f"the run took {self.optimizer_steps} optimizer step(s){skipped}, fewer than the {MIN_RUN_STEPS} "
                "that make it evidence"
            )
        if self.compute == RUN_AMP and compute != RUN_AMP:
            return (
                f"the run was {runtime} autocast (AMP), whose residual stream stayed in the wider weights: it is "
                f"evidence for {runtime} mixed-precision training only, not for {runtime} weights"
            )
        return None

    def proves(self, runtime: str, compute: str = RUN_PURE) -> bool:
        """Whether this run is evidence that `runtime`, computed as `compute` (`"pure"` for loads and casts), works."""
        return self.why_not_evidence(runtime, compute) is None

    def describe(self, runtime: str) -> str:
        kind = "mixed-precision (autocast)" if self.compute == RUN_AMP else "pure"
        text = f"a {kind} {runtime} training run"
        if self.fp16_plan:
            text += " with its fp16 plan"
        text = f"{text} finished {self.optimizer_steps} optimizer steps with finite losses"
        tokens = (self.binding or {}).get("max_tokens")
        if tokens is not None:
            text += (
                f" on inputs of up to {tokens} tokens, and these are the weights it ended on (a digest of their "
                "names, shapes and a sample of each one's first values)"
            )
        return text


def read_run_record(config: Any) -> RunRecord | None:
    """
    The latest training run recorded in a config, or `None` when there is none or it is malformed. A bare status string
    (an older record) or a record with a member this version does not know reads as its status only: no evidence.
    """
    value = config.get(RUN_FIELD) if isinstance(config, Mapping) else getattr(config, RUN_FIELD, None)
    if isinstance(value, str):
        return RunRecord(value) if value in RUN_STATUSES else None
    if not isinstance(value, Mapping) or value.get("status") not in RUN_STATUSES:
        return None
    if set(value) - {field.name for field in dataclasses.fields(RunRecord)}:
        # a member this version does not know (a newer one wrote it): what it changes about the run is unknown, so
        # the record is its status only, which is no evidence
        return RunRecord(value["status"])
    compute = value.get("compute") if value.get("compute") in RUN_COMPUTES else None
    steps, skipped = value.get("optimizer_steps"), value.get("skipped_steps", 0)
    steps = steps if isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0 else None
    skipped = skipped if isinstance(skipped, int) and not isinstance(skipped, bool) and skipped >= 0 else 0
    record = RunRecord(value["status"], compute, steps, skipped)
    if value.get("fp16_plan") is True:
        record = dataclasses.replace(record, fp16_plan=True)
    if isinstance(value.get("binding"), Mapping):
        record = dataclasses.replace(record, binding=dict(value["binding"]))
    return record


def read_run_status(config: Any) -> str | None:
    """How the latest training run recorded in a config ended (`"started"`, `"finished"`, `"diverged"`), or `None`."""
    record = read_run_record(config)
    return record.status if record is not None else None


__all__ = ["MIN_RUN_STEPS", "RunRecord", "read_run_record", "read_run_status"]
