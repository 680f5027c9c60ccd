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
The risk rules: which runtime precisions a trained precision makes risky, and why.

Running in fp32 is always safe, running in the precision a model was trained in is safe, and an unknown trained
precision is silent. The risky cells (trained -> runtime):

| trained | runtime fp16                                   | runtime bf16                         |
|---------|------------------------------------------------|--------------------------------------|
| fp32    | overflow past 65504, and fewer mantissa bits   | precision loss (8 significant bits)  |
| bf16    | overflow: activations learned in bf16's range  | safe                                 |
| fp16    | safe                                           | precision loss (11 -> 8 bits), mild  |

Every path that judges a runtime precision asks [`assess_risk`], so they all apply the same rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from ..vocabulary import BF16, FP16, FP32, UNKNOWN, dtype_options, dtype_to_precision, normalize_precision


#: fp16's largest finite value: activations above it become inf, then NaN.
FP16_MAX = 65504.0

OVERFLOW = "overflow"
PRECISION_LOSS = "precision_loss"


@dataclasses.dataclass(frozen=True)
class Risk:
    """
    One risky (trained, runtime) pair: its `kind` (`"overflow"` or `"precision_loss"`), `severity` (`"high"`, a known
    failure mode; `"low"`, weak public evidence), `reason`, and the `safe_dtypes` for the trained precision, best first.
    """

    trained: str
    runtime: str
    kind: str
    severity: str
    reason: str
    safe_dtypes: tuple[str, ...]

    @property
    def fix(self) -> str:
        """What to do instead, as a `dtype=` suggestion."""
        return f"use {dtype_options(self.safe_dtypes)}"


_RULES: dict[tuple[str, str], tuple[str, str, str]] = {
    (FP32, FP16): (
        OVERFLOW,
        "high",
        f"fp16 overflows above {FP16_MAX:g} and keeps 11 significant bits, while an fp32-trained model may "
        "produce larger activations and rely on finer values",
    ),
    (FP32, BF16): (
        PRECISION_LOSS,
        "high",
        "bf16 keeps only 8 significant bits, so an fp32-trained model may lose accuracy",
    ),
    (BF16, FP16): (
        OVERFLOW,
        "high",
        f"activations learned in bf16's range can exceed fp16's maximum of {FP16_MAX:g} and turn into inf/NaN "
        "(T5, mT5, Flan-T5, GPT-Neo-1.3B and Gemma 3 fail this way)",
    ),
    (FP16, BF16): (
        PRECISION_LOSS,
        "low",
        "bf16 keeps 8 significant bits where fp16 kept 11, so outputs may drift slightly (weak public evidence)",
    ),
}

_SAFE: dict[str, tuple[str, ...]] = {FP32: (FP32,), BF16: (BF16, FP32), FP16: (FP16, FP32)}


def assess_risk(trained: Any, runtime: Any) -> Risk | None:
    """A [`Risk`] when running a model trained in `trained` at `runtime` is risky; `None` when safe or unknown."""
    trained = normalize_precision(trained)
    runtime = dtype_to_precision(runtime)
    if UNKNOWN in (trained, runtime):
        return None
    rule = _RULES.get((trained, runtime))
    if rule is None:
        return None
    kind, severity, reason = rule
    return Risk(trained, runtime, kind, severity, reason, _SAFE[trained])


def assess_lineage_risk(lineage: Iterable[Any], runtime: Any) -> Risk | None:
    """
    The rules' prior for a model trained in several stages, oldest first: the oldest stage decides (it shaped the
    activations; unknown: `None`). A later stage's precision is safe only with evidence that its run worked.
    """
    stages = [normalize_precision(stage) for stage in lineage]
    if not stages or stages[0] == UNKNOWN:
        return None
    return assess_risk(stages[0], runtime)
