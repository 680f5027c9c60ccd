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
The registry: checkpoints published before `trained_precision` existed, with the precision their trainers stated.

Only rows with a public source are listed. The registry is consulted when a loaded config says `"unknown"`; a config's
own value always wins. `utils/check_trained_precision.py` keeps this table consistent and renders it into the docs.
"""

from __future__ import annotations

import dataclasses
import fnmatch

from .vocabulary import BF16, FP16, FP32


@dataclasses.dataclass(frozen=True)
class RegistryEntry:
    """
    One registry row.

    Args:
        model_id (`str`): a Hub id (`"EleutherAI/gpt-neo-1.3B"`) or a family glob (`"facebook/opt-*"`).
        precision (`str`): the canonical trained precision.
        source (`str`): an https URL where the trainers state it.
        note (`str`): a short note, e.g. "mixed bf16, fp32 master weights".
        model_type (`str`, *optional*): the config's `model_type`, checked against upstream's `CONFIG_MAPPING`.
        exceptions (`tuple[str, ...]`): ids a glob must not match (they have rows of their own).
    """

    model_id: str
    precision: str
    source: str
    note: str = ""
    model_type: str | None = None
    exceptions: tuple[str, ...] = ()

    @property
    def is_glob(self) -> bool:
        return any(ch in self.model_id for ch in "*?[")

    def matches(self, model_id: str) -> bool:
        """Case-insensitive, as the Hub resolves ids."""
        wanted = model_id.lower()
        if any(wanted == e.lower() for e in self.exceptions):
            return False
        if self.is_glob:
            return fnmatch.fnmatchcase(wanted, self.model_id.lower())
        return wanted == self.model_id.lower()


REGISTRY: tuple[RegistryEntry, ...] = (
    RegistryEntry(
        "EleutherAI/gpt-neo-1.3B",
        BF16,
        "https://github.com/EleutherAI/gpt-neo/blob/master/configs/GPT3_XL_pretrained.json",
        "mixed bf16: bf16 activations, fp32 weights and Adam state, bf16 checkpoints",
        "gpt_neo",
    ),
    RegistryEntry(
        "EleutherAI/gpt-neo-2.7B",
        FP32,
        "https://github.com/EleutherAI/gpt-neo/issues/207",
        "fp32 throughout (its training config sets no precision)",
        "gpt_neo",
    ),
    RegistryEntry(
        "google-t5/t5-*",
        BF16,
        "https://github.com/google-research/text-to-text-transfer-transformer/issues/539",
        "bf16 activations, fp32 variables (Mesh TensorFlow on TPU)",
        "t5",
    ),
    RegistryEntry(
        "facebook/opt-*",
        FP16,
        "https://github.com/facebookresearch/metaseq/issues/213",
        "mixed fp16 (metaseq)",
        "opt",
    ),
    RegistryEntry(
        "bigscience/bloom",
        BF16,
        "https://github.com/bigscience-workshop/bigscience/tree/master/train/tr11-176B-ml",
        "mixed bf16 (Megatron-DeepSpeed BF16_Optimizer)",
        "bloom",
    ),
)


def lookup(model_id: str | None, registry: tuple[RegistryEntry, ...] = REGISTRY) -> RegistryEntry | None:
    """
    The registry row for a Hub id, or `None`. Exact ids win over globs. Local paths are never matched: a directory
    is not a Hub id, and guessing from its name could be wrong.

    Args:
        model_id (`str`, *optional*): a Hub id such as `"EleutherAI/gpt-neo-1.3B"`.
    """
    if not model_id or not isinstance(model_id, str):
        return None
    if model_id.count("/") != 1 or model_id.startswith((".", "/", "~")):
        return None
    exact = [e for e in registry if not e.is_glob and e.matches(model_id)]
    if exact:
        return exact[0]
    return next((e for e in registry if e.is_glob and e.matches(model_id)), None)
