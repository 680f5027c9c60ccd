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
The one vocabulary of training precisions (RFC huggingface/transformers#11209): the canonical names (`"fp32"`,
`"bf16"`, `"fp16"`, `"unknown"`), the spellings that mean them (torch dtypes, `"bfloat16"`, `"half"`, Lightning's and
Composer's; `"tf32"` is fp32) and the config fields. Importable without torch: `configuration_utils.py` imports it.
"""

from __future__ import annotations

from typing import Any


#: The config field of the RFC: the precision of the model's latest training.
FIELD = "trained_precision"
#: The config field that keeps the precision of an earlier stage (pretraining) when a later one differs.
PRETRAINING_FIELD = "pretraining_precision"
#: Both fields; they accept the same values and are validated the same way.
FIELDS: tuple[str, ...] = (FIELD, PRETRAINING_FIELD)
#: The config field of a measured fp16 plan: the modules kept in fp32 in fp16, and the measurement that validated it.
FP16_PLAN_FIELD = "fp16_plan"
#: The config field in which the Trainer records its latest run: its `status` (`"started"` until it ends, `"finished"`
#: with finite losses and weights, `"diverged"`), how it computed (`compute`) and its optimizer steps. Only a finished
#: run is evidence that `trained_precision` works for the checkpoint, and only for runs of its kind.
RUN_FIELD = "trained_precision_run"
RUN_STARTED = "started"
RUN_FINISHED = "finished"
RUN_DIVERGED = "diverged"
RUN_STATUSES: tuple[str, ...] = (RUN_STARTED, RUN_FINISHED, RUN_DIVERGED)
#: How a run computes: `"amp"`, autocast over wider weights (only the matmuls in the run's precision); `"pure"`, the
#: weights themselves in the run's precision (every activation in it).
RUN_AMP = "amp"
RUN_PURE = "pure"
RUN_COMPUTES: tuple[str, ...] = (RUN_AMP, RUN_PURE)
#: The config field that keeps the publisher's reference runtime of the registry row a load used, bound to the
#: publisher's weights: a `save_pretrained` copy keeps it, a fine-tune (the Trainer stamp) drops it.
REFERENCE_FIELD = "trained_precision_reference"
#: The model attribute holding a run's precision policy (set by `bf16_full_train`'s cast; the Trainer stamp reads it).
PRECISION_POLICY_ATTR = "_precision_policy"

FP32 = "fp32"
BF16 = "bf16"
FP16 = "fp16"
UNKNOWN = "unknown"

#: Canonical precision names, in the order they are listed in messages.
PRECISIONS: tuple[str, ...] = (FP32, BF16, FP16, UNKNOWN)

#: Every accepted spelling (lower case, stripped) -> canonical name: torch's names, `tf32` (TF32 matmuls keep fp32's
#: exponent range), Lightning's (`32-true`, `bf16-mixed`, `bf16-true`, `16-mixed`, `16-true`) and Composer's (`amp_*`).
PRECISION_ALIASES: dict[str, str] = {
    **dict.fromkeys(("fp32", "float32", "float", "tf32", "32", "32-true", "torch.float32"), FP32),
    **dict.fromkeys(("bf16", "bfloat16", "bf16-mixed", "bf16-true", "amp_bf16", "torch.bfloat16"), BF16),
    **dict.fromkeys(("fp16", "float16", "half", "16", "16-mixed", "16-true", "amp_fp16", "torch.float16"), FP16),
    "unknown": UNKNOWN,
}

#: The precisions a model can run in, in the order verdicts list them. `"unknown"` is a trained precision only.
RUNTIME_PRECISIONS: tuple[str, ...] = (FP32, BF16, FP16)

#: Canonical precision -> torch dtype name (`torch.float32` is `"float32"`).
TORCH_DTYPE_NAMES: dict[str, str] = {FP32: "float32", BF16: "bfloat16", FP16: "float16"}

#: Canonical precision -> how code spells its dtype, for messages that tell users what to write.
DTYPE_CODE: dict[str, str] = {name: f"torch.{dtype}" for name, dtype in TORCH_DTYPE_NAMES.items()}

#: safetensors dtype tag -> (torch dtype name, bytes per element), as the safetensors format defines them.
SAFETENSORS_DTYPES: dict[str, tuple[str, int]] = {
    **{"F64": ("float64", 8), "F32": ("float32", 4), "BF16": ("bfloat16", 2), "F16": ("float16", 2)},
    **{"F8_E4M3": ("float8_e4m3fn", 1), "F8_E5M2": ("float8_e5m2", 1), "BOOL": ("bool", 1), "U8": ("uint8", 1)},
    **{"I64": ("int64", 8), "I32": ("int32", 4), "I16": ("int16", 2), "I8": ("int8", 1)},
}

#: Floating dtypes that are a training precision (float8 and float64 are not: no risk rule applies to them).
PRECISION_DTYPE_NAMES: frozenset[str] = frozenset(TORCH_DTYPE_NAMES.values())


def dtype_code(precision: Any) -> str:
    """How code spells a precision's dtype: `"bf16"` -> `"torch.bfloat16"`."""
    return DTYPE_CODE[normalize_precision(precision)]


def dtype_options(precisions: Any, template: str = "`dtype={}`") -> str:
    """`("bf16", "fp32")` -> "`dtype=torch.bfloat16` or `dtype=torch.float32`", for the fix line of a message."""
    return " or ".join(template.format(dtype_code(p)) for p in precisions)


class InvalidTrainedPrecisionError(ValueError):
    """Raised when a value cannot be read as a training precision."""


def normalize_precision(value: Any) -> str:
    """
    Reads `value` (a canonical name, an alias of [`PRECISION_ALIASES`] in any case, or a torch dtype) as a canonical
    training precision; an [`InvalidTrainedPrecisionError`] (a `ValueError`) names the valid values for anything else.
    """
    key = None
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":  # without importing torch
        key = str(value).replace("torch.", "")
    elif isinstance(value, str):
        key = value.strip().lower()
    name = PRECISION_ALIASES.get(key) if key is not None else None
    if name is None:
        aliases = ", ".join(repr(a) for a in sorted(a for a, canonical in PRECISION_ALIASES.items() if a != canonical))
        raise InvalidTrainedPrecisionError(
            f"{value!r} ({type(value).__name__}) is not a valid `trained_precision`. Valid values are "
            f"{', '.join(repr(p) for p in PRECISIONS)} (aliases: {aliases}, or a torch dtype among torch.float32, "
            "torch.bfloat16 and torch.float16)."
        )
    return name


def dtype_to_precision(dtype: Any) -> str:
    """The precision a runtime dtype computes in; `"unknown"` for float64, float8 and non-floating dtypes."""
    try:
        return normalize_precision(dtype)
    except InvalidTrainedPrecisionError:
        return UNKNOWN


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
]
