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
`trained_precision`: which precision a checkpoint was trained in, and what follows from it (RFC #11209).

Submodules are imported lazily so that `configuration_utils.py` can use the vocabulary without importing torch.
"""

import importlib

from .vocabulary import (
    BF16,
    FP16,
    FP32,
    PRECISION_ALIASES,
    PRECISIONS,
    UNKNOWN,
    InvalidTrainedPrecisionError,
    dtype_to_precision,
    normalize_precision,
)


# public name -> submodule that defines it (filled in as features land)
_LAZY = {
    "TrainedPrecisionRiskError": "check",
    "check_trained_precision": "check",
    "check_trained_precision_on_cast": "check",
    "reset_warning_cache": "check",
    "resolve_check_mode": "check",
    "resolve_trained_precision": "resolver",
    "TrainedPrecisionInfo": "resolver",
    "canonical_hub_id": "hub_ids",
    "format_risk_message": "check",
    "hub_id_for": "hub_ids",
    "inspect_checkpoint": "inspection",
    "read_safetensors_header": "inspection",
    "CheckpointReport": "inspection",
    "CheckpointInspectionError": "inspection",
    "SafetensorsHeaderError": "inspection",
    "audit_activations": "audit",
    "audit_checkpoint": "audit",
    "ActivationAudit": "audit",
    "ActivationRecorder": "audit",
    "search_fp16_plan": "fp16_plan",
    "apply_fp16_plan": "fp16_plan",
    "plan_checkpoint": "fp16_plan",
    "PlanResult": "fp16_plan",
    "resolve_run_precision": "stamp",
    "stamp_trained_precision": "stamp",
    "finish_trained_precision_run": "stamp",
    "note_training_loss": "stamp",
    "read_fp16_plan": "evidence",
    "Assessment": "resolver",
    "populate_checkpoints": "populate",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


__all__ = [
    "BF16",
    "FP16",
    "FP32",
    "PRECISIONS",
    "PRECISION_ALIASES",
    "UNKNOWN",
    "InvalidTrainedPrecisionError",
    "dtype_to_precision",
    "normalize_precision",
    *_LAZY,
]
