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
`PreTrainedConfig.trained_precision` and `pretraining_precision`: one validation for both (the field's validator,
on init and every assignment, naming the field), and one lenient reading from `config.json` (an unrecognised value
reads as `"unknown"` with one warning). Both hold the canonical names only: tools that write them normalise first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .vocabulary import FIELD, PRETRAINING_FIELD, InvalidTrainedPrecisionError


#: The config fields that hold a training precision, read leniently when loading.
FIELDS: tuple[str, ...] = (FIELD, PRETRAINING_FIELD)


def validate_config_value(field: str, value: Any) -> None:
    """
    Used by `PreTrainedConfig.__setattr__` for `pretraining_precision`: the config field's validator, with `field` named
    in the message.

    Raises:
        [`~trained_precision.vocabulary.InvalidTrainedPrecisionError`] (a `ValueError`): naming `field`, the value and
        the valid values.
    """
    from ..utils.type_validators import trained_precision

    try:
        trained_precision(value)
    except ValueError as error:
        raise InvalidTrainedPrecisionError(f"Invalid `{field}`: {error}.") from None


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
