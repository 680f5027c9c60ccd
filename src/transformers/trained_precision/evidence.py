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
Evidence that a runtime precision works for one checkpoint, whatever the trained precision's rules say.

Only the stored fp16 plan is read here so far: [`read_fp16_plan`] returns a config's `fp16_plan` when it has the
fixed schema and its validation passed.
"""

from __future__ import annotations

import math
from typing import Any

from ..utils import logging
from .vocabulary import FP16, FP16_PLAN_FIELD


logger = logging.get_logger(__name__)

_PLAN_NUMBERS = ("headroom", "fp32_weight_share")
_VALIDATION_NUMBERS = ("max_abs_error", "cosine", "top1_agreement")


def _schema_problem(plan: Any) -> str | None:
    """Why `plan` does not have the `fp16_plan` schema, or `None` when it does."""
    if not isinstance(plan, dict):
        return f"it is a {type(plan).__name__}, not an object"
    if plan.get("version") != 1:
        return f"version {plan.get('version')!r} is not 1"
    if plan.get("dtype") != FP16:
        return f"dtype {plan.get('dtype')!r} is not {FP16!r}"
    modules = plan.get("modules")
    if not isinstance(modules, list) or not all(isinstance(m, str) and m for m in modules):
        return "modules is not a list of module names"
    for key in _PLAN_NUMBERS:
        value = plan.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            return f"{key} is not a number"
    if not isinstance(plan.get("calibration_sha256"), str):
        return "calibration_sha256 is not a string"
    validation = plan.get("validation")
    if not isinstance(validation, dict):
        return "validation is not an object"
    if not isinstance(validation.get("passed"), bool):
        return "validation.passed is not true or false"
    for key in _VALIDATION_NUMBERS:
        value = validation.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"validation.{key} is not a number"
    texts = validation.get("texts")
    if isinstance(texts, bool) or not isinstance(texts, int):
        return "validation.texts is not an integer"
    return None


def read_fp16_plan(config) -> dict | None:
    """
    The validated fp16 plan a config stores under `fp16_plan`, or `None`.

    Args:
        config ([`PreTrainedConfig`] or `dict`): the config (or its `to_dict()`).

    Returns:
        `dict | None`: the plan when it has the fixed schema and `validation.passed` is true; `None` when there is
        none, when it did not pass, or when it is malformed (one warning names what is wrong).
    """
    plan = config.get(FP16_PLAN_FIELD) if isinstance(config, dict) else getattr(config, FP16_PLAN_FIELD, None)
    if plan is None:
        return None
    problem = _schema_problem(plan)
    if problem is not None:
        name = (config.get("_name_or_path") if isinstance(config, dict) else getattr(config, "name_or_path", "")) or ""
        logger.warning_once(f"Ignoring the malformed `{FP16_PLAN_FIELD}` of {name or 'this config'}: {problem}.")
        return None
    return plan if plan["validation"]["passed"] else None


__all__ = ["read_fp16_plan"]
