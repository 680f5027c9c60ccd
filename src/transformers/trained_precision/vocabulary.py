# Copyright 2026 The trained_precision fork authors. All rights reserved.
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
The one vocabulary of training precisions (RFC huggingface/transformers#11209).

Every other part of `trained_precision` (the config field, the loading check, the Trainer stamp, the registry, the
CLI) asks this module what a precision is called, which spellings mean it and which `torch.dtype` it maps to.

The canonical names are `"fp32"`, `"bf16"`, `"fp16"` and `"unknown"`. Other spellings are normalised at the boundary:
torch dtypes, `"bfloat16"`, `"half"`, Lightning's `"bf16-mixed"`/`"16-true"`, Composer's `"amp_bf16"`, and so on.
`"tf32"` means `"fp32"`: TF32 only shortens the matmul mantissa, activations keep fp32's range.

This module must stay importable without torch: `configuration_utils.py` imports it.
"""

from __future__ import annotations

from typing import Any


FP32 = "fp32"
BF16 = "bf16"
FP16 = "fp16"
UNKNOWN = "unknown"

#: Canonical precision names, in the order they are listed in messages.
PRECISIONS: tuple[str, ...] = (FP32, BF16, FP16, UNKNOWN)

#: Every accepted spelling (lower case, stripped) -> canonical name.
PRECISION_ALIASES: dict[str, str] = {
    # fp32 (TF32 matmuls keep fp32's exponent range, so they count as fp32)
    "fp32": FP32,
    "float32": FP32,
    "float": FP32,
    "tf32": FP32,
    "32": FP32,
    "32-true": FP32,  # Lightning
    "torch.float32": FP32,
    # bf16
    "bf16": BF16,
    "bfloat16": BF16,
    "bf16-mixed": BF16,  # Lightning
    "bf16-true": BF16,  # Lightning
    "amp_bf16": BF16,  # Composer
    "torch.bfloat16": BF16,
    # fp16
    "fp16": FP16,
    "float16": FP16,
    "half": FP16,
    "16": FP16,
    "16-mixed": FP16,  # Lightning
    "16-true": FP16,  # Lightning
    "amp_fp16": FP16,  # Composer
    "torch.float16": FP16,
    # unknown
    "unknown": UNKNOWN,
}

_DTYPE_NAMES: dict[str, str] = {FP32: "float32", BF16: "bfloat16", FP16: "float16"}


class InvalidTrainedPrecisionError(ValueError):
    """Raised when a value cannot be read as a training precision."""


def _describe_valid_values() -> str:
    aliases = sorted(alias for alias, name in PRECISION_ALIASES.items() if alias != name)
    return (
        f"Valid values are {', '.join(repr(p) for p in PRECISIONS)} "
        f"(aliases: {', '.join(repr(a) for a in aliases)}, or a torch dtype among "
        "torch.float32, torch.bfloat16 and torch.float16)"
    )


def _torch_dtype_name(value: Any) -> str | None:
    """Returns `"float32"` for `torch.float32` without importing torch; `None` for anything that is not a dtype."""
    cls = type(value)
    if cls.__module__ == "torch" and cls.__name__ == "dtype":
        return str(value).replace("torch.", "")
    return None


def normalize_precision(value: Any) -> str:
    """
    Reads `value` as a canonical training precision.

    Args:
        value (`str` or `torch.dtype`):
            A canonical name (`"fp32"`, `"bf16"`, `"fp16"`, `"unknown"`), one of the aliases in
            [`PRECISION_ALIASES`] (case and surrounding whitespace are ignored), or one of `torch.float32`,
            `torch.bfloat16`, `torch.float16`.

    Returns:
        `str`: the canonical name.

    Raises:
        [`InvalidTrainedPrecisionError`] (a `ValueError`): for anything else, naming the valid values.
    """
    dtype_name = _torch_dtype_name(value)
    if dtype_name is not None:
        key = dtype_name
    elif isinstance(value, str):
        key = value.strip().lower()
    else:
        key = None
    name = PRECISION_ALIASES.get(key) if key is not None else None
    if name is None:
        raise InvalidTrainedPrecisionError(
            f"{value!r} ({type(value).__name__}) is not a valid `trained_precision`. {_describe_valid_values()}."
        )
    return name


def is_valid_precision(value: Any) -> bool:
    """Whether [`normalize_precision`] accepts `value`."""
    try:
        normalize_precision(value)
    except InvalidTrainedPrecisionError:
        return False
    return True


def precision_to_dtype(precision: Any):
    """
    The `torch.dtype` a precision computes in: `torch.float32`, `torch.bfloat16` or `torch.float16`.

    Raises a `ValueError` for `"unknown"`, which has no dtype.
    """
    name = normalize_precision(precision)
    if name == UNKNOWN:
        raise InvalidTrainedPrecisionError("'unknown' has no torch dtype.")
    import torch

    return getattr(torch, _DTYPE_NAMES[name])


def dtype_to_precision(dtype: Any) -> str:
    """
    The precision a runtime dtype computes in. Floating dtypes outside the vocabulary (float64, float8 variants) and
    non-floating dtypes map to `"unknown"`: no risk rule applies to them.

    Args:
        dtype (`torch.dtype` or `str`): e.g. `torch.bfloat16` or `"bfloat16"`.
    """
    try:
        return normalize_precision(dtype)
    except InvalidTrainedPrecisionError:
        return UNKNOWN
