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
Hub ids: the one place where every way of naming a model (a legacy short id, any case, a cache snapshot path) becomes
the id the registry knows. A local directory that is not a cache snapshot has no Hub id: its name is never a guess.
"""

from __future__ import annotations

import dataclasses
import os
import re


#: Where the Hub moved the models that had no organisation (January 2024); the old ids still redirect.
_CANONICAL_MOVE_SOURCE = "https://github.com/huggingface/transformers/pull/28795"

# organisation -> the legacy ids it took over (space-separated)
_LEGACY_FAMILIES: dict[str, str] = {
    "google-t5": "t5-small t5-base t5-large t5-3b t5-11b",
    "openai-community": (
        "gpt2 gpt2-medium gpt2-large gpt2-xl openai-gpt roberta-base-openai-detector roberta-large-openai-detector"
    ),
    "google-bert": (
        "bert-base-uncased bert-large-uncased bert-base-cased bert-large-cased "
        "bert-base-multilingual-uncased bert-base-multilingual-cased bert-base-chinese "
        "bert-base-german-cased bert-large-uncased-whole-word-masking "
        "bert-large-cased-whole-word-masking bert-large-uncased-whole-word-masking-finetuned-squad "
        "bert-large-cased-whole-word-masking-finetuned-squad bert-base-cased-finetuned-mrpc"
    ),
    "FacebookAI": "roberta-base roberta-large roberta-large-mnli xlm-roberta-base xlm-roberta-large xlm-mlm-en-2048",
    "distilbert": (
        "distilbert-base-uncased distilbert-base-cased distilbert-base-uncased-distilled-squad "
        "distilbert-base-cased-distilled-squad distilbert-base-multilingual-cased "
        "distilbert-base-uncased-finetuned-sst-2-english distilgpt2 distilroberta-base"
    ),
    "albert": "albert-base-v1 albert-base-v2 albert-large-v2 albert-xlarge-v2 albert-xxlarge-v2",
    "xlnet": "xlnet-base-cased xlnet-large-cased",
}


@dataclasses.dataclass(frozen=True)
class LegacyHubId:
    """A model id from before the Hub gave every model an organisation, the id it redirects to, and the move's record."""

    legacy: str
    canonical: str
    source: str


#: Legacy id (lower case) -> its row.
LEGACY_HUB_IDS: dict[str, LegacyHubId] = {
    name.lower(): LegacyHubId(name, f"{org}/{name}", _CANONICAL_MOVE_SOURCE)
    for org, names in _LEGACY_FAMILIES.items()
    for name in names.split()
}

# A Hub repository name: letters, digits, `-`, `_`, `.`; at most 96; no `--` or `..`; no `-` or `.` at either end.
_NAME = re.compile(r"^[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?$", re.ASCII)

#: The folder prefix `huggingface_hub` gives a model repository in its cache.
CACHE_REPO_PREFIX = "models--"


def is_valid_repo_name(part: str) -> bool:
    """Whether `part` can be a Hub organisation or repository name (one side of `org/name`)."""
    return isinstance(part, str) and bool(_NAME.match(part)) and "--" not in part and ".." not in part


def parse_hub_id(value: object) -> str | None:
    """`value` as a Hub id (`"name"` or `"org/name"`, stripped), or `None` for a path, an empty string, a file name."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not value or value.endswith((".json", ".safetensors", ".bin")) or (os.sep != "/" and os.sep in value):
        return None
    parts = value.split("/")
    if len(parts) > 2 or not all(is_valid_repo_name(part) for part in parts):
        return None
    return value


def canonical_hub_id(value: object) -> str | None:
    """The canonical Hub id `value` refers to (a legacy short id becomes the id it redirects to), or `None`."""
    hub_id = parse_hub_id(value)
    if hub_id is None:
        return None
    legacy = LEGACY_HUB_IDS.get(hub_id.lower())
    return legacy.canonical if legacy is not None else hub_id


def hub_id_spellings(hub_id: str) -> list[str]:
    """Every id a model may be cached under (as written, canonical, legacy): the cache names folders as typed."""
    canonical = canonical_hub_id(hub_id)
    if canonical is None:
        return []
    spellings = [hub_id.strip(), canonical]
    spellings += [row.legacy for row in LEGACY_HUB_IDS.values() if row.canonical.lower() == canonical.lower()]
    return list(dict.fromkeys(spellings))


@dataclasses.dataclass(frozen=True)
class CacheSnapshot:
    """Where a path lies in a Hub cache: the canonical `hub_id`, the id the folder names, the revision and the folder."""

    hub_id: str
    cached_as: str
    revision: str
    snapshot_dir: str


def cache_folder_hub_id(folder_name: str) -> str | None:
    """`"models--google-t5--t5-base"` -> `"google-t5/t5-base"`, `"models--t5-base"` -> `"t5-base"`; else `None`."""
    if not folder_name.startswith(CACHE_REPO_PREFIX):
        return None
    return parse_hub_id(folder_name[len(CACHE_REPO_PREFIX) :].replace("--", "/"))


def cache_snapshot_of(path: str | os.PathLike) -> CacheSnapshot | None:
    """The cache snapshot a path lies in (`<any root>/models--{org}--{name}/snapshots/{revision}[/...]`), or `None`."""
    parts = os.path.normpath(os.path.abspath(os.fspath(path))).split(os.sep)
    for i in range(len(parts) - 2):
        if parts[i + 1] != "snapshots" or not parts[i + 2]:
            continue
        cached_as = cache_folder_hub_id(parts[i])
        if cached_as is not None:
            return CacheSnapshot(
                hub_id=canonical_hub_id(cached_as),
                cached_as=cached_as,
                revision=parts[i + 2],
                snapshot_dir=os.sep.join(parts[: i + 3]) or os.sep,
            )
    return None


def hub_id_for(name_or_path: str | os.PathLike | None) -> str | None:
    """The canonical Hub id of a name or path, or `None`: an existing local path has one only in a cache snapshot."""
    if not name_or_path:
        return None
    name = os.fspath(name_or_path)
    if os.path.exists(name):
        snapshot = cache_snapshot_of(name)
        return snapshot.hub_id if snapshot is not None else None
    return canonical_hub_id(name)


def possible_hub_ids(name_or_path: str | os.PathLike | None) -> tuple[str, ...]:
    """Every Hub id [`hub_id_for`] can give for `name_or_path`, whatever exists on disk (so the answer can be kept)."""
    if not name_or_path:
        return ()
    name = os.fspath(name_or_path)
    snapshot = cache_snapshot_of(name)
    found = (snapshot.hub_id if snapshot is not None else None, canonical_hub_id(name))
    return tuple(dict.fromkeys(hub_id for hub_id in found if hub_id is not None))


def find_cached_snapshot(
    hub_id: str, *, filename: str, revision: str | None = None, cache_dir: str | os.PathLike | None = None
) -> str | None:
    """The cached snapshot of a Hub id (any spelling, any case) that holds `filename`, or `None`."""
    from huggingface_hub import constants, try_to_load_from_cache

    spellings = hub_id_spellings(hub_id)
    root = os.fspath(cache_dir) if cache_dir is not None else constants.HF_HUB_CACHE
    # the cache keeps the case the id was typed in; the Hub does not care: match folders case-insensitively too
    wanted = {CACHE_REPO_PREFIX + spelling.replace("/", "--").lower() for spelling in spellings}
    try:
        spellings += [
            cache_folder_hub_id(name)
            for name in sorted(os.listdir(root))
            if name.lower() in wanted and cache_folder_hub_id(name) not in spellings
        ]
    except OSError:
        pass
    for spelling in spellings:
        cached = try_to_load_from_cache(spelling, filename, cache_dir=root, revision=revision)
        if isinstance(cached, str) and os.path.isfile(cached):
            return os.path.dirname(cached)
    return None


__all__ = [
    "LEGACY_HUB_IDS",
    "CacheSnapshot",
    "LegacyHubId",
    "cache_folder_hub_id",
    "cache_snapshot_of",
    "canonical_hub_id",
    "find_cached_snapshot",
    "hub_id_for",
    "hub_id_spellings",
    "is_valid_repo_name",
    "possible_hub_ids",
    "parse_hub_id",
]
