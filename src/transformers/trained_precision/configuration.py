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
`PreTrainedConfig.trained_precision`: how values are accepted in code and read from `config.json`.

Code that assigns a value gets it normalised (`torch.bfloat16` -> `"bf16"`) or a `ValueError` naming the valid
values. A `config.json` written elsewhere may hold anything: an unrecognised value there loads as `"unknown"` with
one warning, so that no checkpoint stops loading because of this field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..utils import logging
from .vocabulary import FIELDS, UNKNOWN, InvalidTrainedPrecisionError, normalize_precision


logger = logging.get_logger(__name__)


def normalize_config_value(value: Any) -> str:
    """Used by `PreTrainedConfig.__setattr__`: the canonical name, or a `ValueError` that lists the valid values."""
    return normalize_precision(value)


def sanitize_config_dict(config_dict: dict[str, Any], source: str | os.PathLike | None = None) -> dict[str, Any]:
    """
    Returns `config_dict` with every `trained_precision` and `pretraining_precision` (also in nested sub-config
    dicts) made loadable: aliases are normalised, unrecognised values become `"unknown"` with one warning, which names
    `source` (the `config.json` read) when given: the next `save_pretrained` drops the value. The input dict is not
    modified.
    """
    if not isinstance(config_dict, dict):
        return config_dict
    result = None
    for key, value in config_dict.items():
        new = value
        if key in FIELDS:
            try:
                new = normalize_precision(value)
            except InvalidTrainedPrecisionError as e:
                where = f"in {os.fspath(source)}" if source is not None else "of this configuration"
                logger.warning_once(
                    f"Ignoring the `{key}` {where} and treating it as '{UNKNOWN}' (a later `save_pretrained` drops "
                    f"it): {e} Fix the value in the checkpoint's config.json to silence this warning."
                )
                new = UNKNOWN
        elif isinstance(value, dict):
            new = sanitize_config_dict(value, source)
        if new is not value:
            if result is None:
                result = dict(config_dict)
            result[key] = new
    return config_dict if result is None else result


def sub_config_items(config: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """
    The sub-configs of a composite model's config, recursively, as `(dotted key, sub-config)` pairs: `encoder` and
    `decoder`, `text_config` and `vision_config`, ... For a `PreTrainedConfig` they are its `sub_configs` (what the
    loader checks and the Trainer stamps); for the dict of a `config.json`, the members that are objects with a
    `model_type` (how `to_dict` writes a sub-config).
    """
    items = []
    if isinstance(config, Mapping):
        keys = [k for k, v in config.items() if isinstance(v, Mapping) and isinstance(v.get("model_type"), str)]
        get = config.get
    else:
        keys = list(getattr(config, "sub_configs", None) or {})

        def get(key):
            return getattr(config, key, None)

    for key in keys:
        sub = get(key)
        if sub is None or isinstance(sub, (str, bytes)) or not (isinstance(sub, Mapping) or hasattr(sub, "to_dict")):
            continue
        path = f"{prefix}{key}"
        items.append((path, sub))
        items.extend(sub_config_items(sub, f"{path}."))
    return items
