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
The one answer to "what precision was this model trained in?".

[`resolve_trained_precision`] turns a config (a `PreTrainedConfig` or the dict of a `config.json`) and the name or
path the model comes from into a [`TrainedPrecisionInfo`]: the precision and where it was read from. Every path asks
it: `from_pretrained`, `from_config` and the casts, the Trainer stamp, `transformers precision` (report and `set`),
and the repository check. The order is:

1. the config's own `trained_precision`, when it is known: it always wins;
2. else the registry row of the model's Hub id ([`~trained_precision.hub_ids.hub_id_for`]: legacy short ids, any
   case, cache snapshot paths under any cache root; a local copy outside a cache has no Hub id);
3. else `"unknown"`, which is never reported as safe.

A model fine-tuned in another precision than its pretraining keeps the older precision as
`config.pretraining_precision` (the Trainer writes it when its stamp changes a known value); the risk rules then
consider both stages ([`~trained_precision.risk.assess_lineage_risk`]).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from ..utils import logging
from .hub_ids import hub_id_for
from .registry import RegistryEntry, lookup
from .risk import Risk, assess_lineage_risk
from .vocabulary import FIELD, PRETRAINING_FIELD, UNKNOWN, InvalidTrainedPrecisionError, normalize_precision


logger = logging.get_logger(__name__)

#: Where a trained precision was read from.
SOURCE_CONFIG = "config"
SOURCE_REGISTRY = "registry"


def config_precision(config: Any, field: str = FIELD) -> str:
    """
    A config's canonical value for `field` (`"trained_precision"` or `"pretraining_precision"`), from a
    `PreTrainedConfig` or a `config.json` dict; `"unknown"` when it is absent or not a valid value.
    """
    if isinstance(config, Mapping):
        value = config.get(field)
    else:
        value = getattr(config, field, None)
    if value is None:
        return UNKNOWN
    try:
        return normalize_precision(value)
    except InvalidTrainedPrecisionError:
        return UNKNOWN


@dataclasses.dataclass(frozen=True)
class TrainedPrecisionInfo:
    """
    A model's trained precision and where it was read from.

    Args:
        precision (`str`): the canonical trained precision; `"unknown"` when neither the config nor the registry
            knows it.
        source (`str`, *optional*): `"config"`, `"registry"`, or `None` when the precision is unknown.
        hub_id (`str`, *optional*): the canonical Hub id the name or path refers to, if any.
        entry ([`~trained_precision.registry.RegistryEntry`], *optional*): the registry row, when it was used.
        pretraining (`str`, *optional*, defaults to `"unknown"`): the config's `pretraining_precision`.
    """

    precision: str
    source: str | None = None
    hub_id: str | None = None
    entry: RegistryEntry | None = None
    pretraining: str = UNKNOWN

    @property
    def is_known(self) -> bool:
        return self.precision != UNKNOWN

    @property
    def provenance(self) -> str:
        """`"config"`, `"registry: <row id>"` or `"unknown"`: the short form reports and JSON use."""
        if self.source == SOURCE_REGISTRY and self.entry is not None:
            return f"{SOURCE_REGISTRY}: {self.entry.model_id}"
        return self.source or UNKNOWN

    @property
    def lineage(self) -> tuple[str, ...]:
        """The known training stages, oldest first: `("bf16", "fp32")` for a bf16-pretrained, fp32-tuned model."""
        stages = [p for p in (self.pretraining, self.precision) if p != UNKNOWN]
        return tuple(dict.fromkeys(stages))

    def risk(self, runtime: Any) -> Risk | None:
        """The risk of running at `runtime` (see [`~trained_precision.risk.assess_lineage_risk`]); `None` if unknown."""
        return assess_lineage_risk(self.lineage, runtime)

    def describe(self) -> str:
        """Where the precision comes from, as a phrase for messages."""
        if self.source == SOURCE_CONFIG:
            text = f"from its config's `{FIELD}`"
            if self.pretraining not in (UNKNOWN, self.precision):
                text += f", pretrained in {self.pretraining}"
            return text
        if self.source == SOURCE_REGISTRY and self.entry is not None:
            return (
                f"from the trained-precision registry entry for '{self.entry.model_id}', source: {self.entry.source}; "
                f"its config says '{UNKNOWN}'"
            )
        return "by an unknown source"


def resolve_trained_precision(config: Any, name_or_path: str | os.PathLike | None = None) -> TrainedPrecisionInfo:
    """
    A model's trained precision: the config's value when it is known (it always wins), else the registry's row for
    the model's Hub id, else `"unknown"`.

    Args:
        config (`PreTrainedConfig` or `dict`): the model's configuration, or the content of its `config.json`.
        name_or_path (`str` or `os.PathLike`, *optional*): the name or path the model comes from: a Hub id (legacy
            short ids included), a cache snapshot path, or a local directory (which has no Hub id). Defaults to the
            config's `name_or_path`.
    """
    if not name_or_path:
        name_or_path = (
            config.get("_name_or_path") if isinstance(config, Mapping) else getattr(config, "name_or_path", None)
        )
    hub_id = hub_id_for(name_or_path) if isinstance(name_or_path, (str, os.PathLike)) else None
    precision = config_precision(config, FIELD)
    pretraining = config_precision(config, PRETRAINING_FIELD)
    if precision != UNKNOWN:
        return TrainedPrecisionInfo(precision, SOURCE_CONFIG, hub_id, pretraining=pretraining)
    entry = lookup(hub_id) if hub_id else None
    if entry is None:
        return TrainedPrecisionInfo(UNKNOWN, None, hub_id, pretraining=pretraining)
    return TrainedPrecisionInfo(normalize_precision(entry.precision), SOURCE_REGISTRY, hub_id, entry, pretraining)


def persist_registry_precision(config: Any, info: TrainedPrecisionInfo) -> bool:
    """
    Writes a precision the registry supplied into the loaded config, so that `save_pretrained` keeps it: a fine-tuned
    copy of T5 then still knows it was trained in bf16. Does nothing when the config already had a value.

    Returns:
        `bool`: whether the config was changed.
    """
    if info.source != SOURCE_REGISTRY or config is None or isinstance(config, Mapping):
        return False
    if config_precision(config, FIELD) != UNKNOWN:
        return False
    setattr(config, FIELD, info.precision)
    logger.info(
        f"Set `{FIELD}={info.precision!r}` on the config of '{info.hub_id}' from the trained-precision registry row "
        f"'{info.entry.model_id}' (source: {info.entry.source}); `save_pretrained` will write it."
    )
    return True


__all__ = [
    "SOURCE_CONFIG",
    "SOURCE_REGISTRY",
    "TrainedPrecisionInfo",
    "config_precision",
    "persist_registry_precision",
    "resolve_trained_precision",
]
