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
Inspecting a checkpoint without loading it: what `transformers precision` prints.

[`inspect_checkpoint`] reads a checkpoint directory (or a Hub id found in the local cache) and reports

- the trained precision its `config.json` declares,
- the registry's value (only for Hub ids: a local directory's name is never used to guess one),
- the storage dtype(s) and the parameter count, read from the safetensors header(s) with a bounded read (sharded
  checkpoints through their `model.safetensors.index.json`; pickled weights are never opened),
- a verdict per runtime precision from the risk rules ([`assess_risk`]), and, when asked, the measured activation
  ranges of a calibration forward ([`audit_activations`]).

Everything here works from a notebook:

```py
>>> from transformers.trained_precision import inspect_checkpoint
>>> report = inspect_checkpoint("./my-t5", audit=True)
>>> print(report.format())
>>> report.verdicts["fp16"].status
'risky'
```
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import struct
from typing import Any

from ..utils import logging
from .registry import lookup
from .risk import FP16_MAX, assess_risk
from .vocabulary import (
    BF16,
    FP16,
    FP32,
    UNKNOWN,
    InvalidTrainedPrecisionError,
    normalize_precision,
)


logger = logging.get_logger(__name__)

#: Bump when a key of [`CheckpointReport.to_dict`] changes meaning or disappears.
SCHEMA_VERSION = 1

#: The safetensors library refuses headers above 100 MB; so do we, before reading them.
MAX_HEADER_BYTES = 100_000_000

SAFE_WEIGHTS_NAME = "model.safetensors"
SAFE_WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
CONFIG_NAME = "config.json"
PICKLE_WEIGHTS_NAMES = ("pytorch_model.bin", "pytorch_model.bin.index.json")

#: The runtime precisions a verdict is given for, in the order they are printed.
RUNTIME_PRECISIONS = (FP32, BF16, FP16)

SAFE = "safe"
RISKY = "risky"

#: safetensors dtype tag -> (torch dtype name, bytes per element). Unlisted tags are reported as they are.
_SAFETENSORS_DTYPES = {
    "F64": ("float64", 8),
    "F32": ("float32", 4),
    "BF16": ("bfloat16", 2),
    "F16": ("float16", 2),
    "F8_E4M3": ("float8_e4m3fn", 1),
    "F8_E5M2": ("float8_e5m2", 1),
    "I64": ("int64", 8),
    "I32": ("int32", 4),
    "I16": ("int16", 2),
    "I8": ("int8", 1),
    "U8": ("uint8", 1),
    "BOOL": ("bool", 1),
}

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


class CheckpointInspectionError(ValueError):
    """A checkpoint that cannot be inspected: a missing path or file, a malformed header, an uncached Hub id."""


class SafetensorsHeaderError(CheckpointInspectionError):
    """A safetensors file whose header is truncated, oversized or not valid JSON."""


# --------------------------------------------------------------------------------------------------------------------
# safetensors headers
# --------------------------------------------------------------------------------------------------------------------


def read_safetensors_header(path: str | os.PathLike, max_header_bytes: int = MAX_HEADER_BYTES) -> dict[str, Any]:
    """
    Reads the JSON header of a safetensors file, and only the header: at most `8 + max_header_bytes` bytes.

    The file starts with a little-endian `uint64` header length N, then N bytes of JSON mapping each tensor name to
    `{"dtype", "shape", "data_offsets"}` (plus an optional `"__metadata__"`). The header is checked against the file
    size, so a truncated download is reported here rather than when the weights are loaded.

    Args:
        path (`str` or `os.PathLike`): the `.safetensors` file.
        max_header_bytes (`int`, *optional*, defaults to 100 MB): refuse longer headers without reading them.

    Returns:
        `dict`: the parsed header.

    Raises:
        [`SafetensorsHeaderError`]: for a truncated, oversized or malformed header.
    """
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise SafetensorsHeaderError(
                    f"{path} is not a safetensors file: it has {size} bytes, fewer than the 8-byte header length."
                )
            (length,) = struct.unpack("<Q", prefix)
            if length > max_header_bytes:
                raise SafetensorsHeaderError(
                    f"{path} declares a {length}-byte header, over the {max_header_bytes}-byte limit: the file is "
                    "corrupted or not a safetensors file."
                )
            if length > size - 8:
                raise SafetensorsHeaderError(
                    f"{path} is truncated: it declares a {length}-byte header but only {size - 8} bytes follow."
                )
            raw = f.read(length)
    except OSError as e:
        raise SafetensorsHeaderError(f"Cannot read {path}: {e}") from e
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsHeaderError(f"{path} has a malformed header (not UTF-8 JSON): {e}") from e
    if not isinstance(header, dict):
        raise SafetensorsHeaderError(f"{path} has a malformed header: a JSON object was expected.")
    data_size = size - 8 - length
    for name, info in header.items():
        if name == "__metadata__":
            continue
        _check_tensor_entry(path, name, info, data_size)
    return header


def _check_tensor_entry(path: str, name: str, info: Any, data_size: int) -> None:
    valid = (
        isinstance(info, dict)
        and isinstance(info.get("dtype"), str)
        and isinstance(info.get("shape"), list)
        and all(isinstance(d, int) and d >= 0 for d in info["shape"])
        and isinstance(info.get("data_offsets"), list)
        and len(info["data_offsets"]) == 2
        and all(isinstance(o, int) for o in info["data_offsets"])
        and 0 <= info["data_offsets"][0] <= info["data_offsets"][1]
    )
    if not valid:
        raise SafetensorsHeaderError(
            f"{path} has a malformed header: tensor {name!r} needs a `dtype`, a `shape` and two `data_offsets`."
        )
    if info["data_offsets"][1] > data_size:
        raise SafetensorsHeaderError(
            f"{path} is truncated: tensor {name!r} ends at byte {info['data_offsets'][1]} of the data section, which "
            f"has {data_size} bytes."
        )


@dataclasses.dataclass
class StorageSummary:
    """
    What the safetensors header(s) say about the stored weights.

    Args:
        format (`str`): `"safetensors"`, `"pickle"` (present but never opened) or `"none"`.
        files (`list[str]`): the weight files, relative to the checkpoint directory.
        sharded (`bool`): whether an index file listed them.
        dtypes (`dict[str, int]`): torch dtype name -> number of stored elements in that dtype.
        parameters (`int`): the number of stored elements (tied weights are stored, and counted, once).
        bytes (`int`): the size of the tensor data.
    """

    format: str
    files: list[str] = dataclasses.field(default_factory=list)
    sharded: bool = False
    dtypes: dict[str, int] = dataclasses.field(default_factory=dict)
    parameters: int = 0
    bytes: int = 0

    @property
    def main_dtype(self) -> str | None:
        """The dtype that holds most elements."""
        return max(self.dtypes, key=self.dtypes.get) if self.dtypes else None


def summarize_headers(headers: dict[str, dict[str, Any]], sharded: bool = False) -> StorageSummary:
    """Sums dtypes, element counts and bytes over parsed safetensors headers (`{file name: header}`)."""
    summary = StorageSummary(format="safetensors", files=sorted(headers), sharded=sharded)
    for header in headers.values():
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dtype = _SAFETENSORS_DTYPES.get(info["dtype"], (info["dtype"].lower(), None))[0]
            count = math.prod(info["shape"])
            summary.dtypes[dtype] = summary.dtypes.get(dtype, 0) + count
            summary.parameters += count
            summary.bytes += info["data_offsets"][1] - info["data_offsets"][0]
    summary.dtypes = dict(sorted(summary.dtypes.items(), key=lambda kv: -kv[1]))
    return summary


def read_storage(directory: str, max_header_bytes: int = MAX_HEADER_BYTES) -> StorageSummary:
    """
    Summarizes the safetensors weights of a checkpoint directory: a single `model.safetensors`, or the shards listed
    by `model.safetensors.index.json`. Pickled weights are reported as present but never opened.

    Raises:
        [`CheckpointInspectionError`]: for a malformed index, a missing shard or a bad header.
    """
    index_path = os.path.join(directory, SAFE_WEIGHTS_INDEX_NAME)
    if os.path.isfile(index_path):
        try:
            with open(index_path, encoding="utf-8") as f:
                index = json.load(f)
            files = sorted(set(index["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointInspectionError(
                f"{index_path} is malformed: a JSON object with a `weight_map` of tensor name -> shard file was "
                f"expected ({type(e).__name__}: {e})."
            ) from e
        missing = [name for name in files if not os.path.isfile(os.path.join(directory, name))]
        if missing:
            raise CheckpointInspectionError(
                f"{index_path} lists shard(s) missing from {directory}: {', '.join(missing)}."
            )
        headers = {name: read_safetensors_header(os.path.join(directory, name), max_header_bytes) for name in files}
        return summarize_headers(headers, sharded=True)
    single = os.path.join(directory, SAFE_WEIGHTS_NAME)
    if os.path.isfile(single):
        return summarize_headers({SAFE_WEIGHTS_NAME: read_safetensors_header(single, max_header_bytes)})
    others = sorted(n for n in os.listdir(directory) if n.endswith(".safetensors"))
    if others:
        headers = {name: read_safetensors_header(os.path.join(directory, name), max_header_bytes) for name in others}
        return summarize_headers(headers, sharded=len(others) > 1)
    pickled = [n for n in PICKLE_WEIGHTS_NAMES if os.path.isfile(os.path.join(directory, n))]
    if pickled:
        return StorageSummary(format="pickle", files=pickled)
    return StorageSummary(format="none")


def _storage_from_hub_metadata(metadata: Any) -> StorageSummary:
    """Converts `huggingface_hub.get_safetensors_metadata`'s answer (headers read with HTTP range requests)."""
    headers = {}
    for filename, file_metadata in metadata.files_metadata.items():
        headers[filename] = {
            name: {"dtype": info.dtype, "shape": list(info.shape), "data_offsets": list(info.data_offsets)}
            for name, info in file_metadata.tensors.items()
        }
    return summarize_headers(headers, sharded=metadata.sharded)


# --------------------------------------------------------------------------------------------------------------------
# resolving a path or a Hub id
# --------------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Resolved:
    directory: str | None  # a local directory holding config.json (a cached snapshot for a Hub id)
    hub_id: str | None
    config_path: str | None = None
    remote_storage: StorageSummary | None = None


def _hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")


def _looks_like_hub_id(value: str) -> bool:
    return bool(_HUB_ID.match(value)) and ".." not in value and not value.endswith((".json", ".safetensors"))


def _resolve(path_or_id: str, revision: str | None = None, max_header_bytes: int = MAX_HEADER_BYTES) -> _Resolved:
    expanded = os.path.expanduser(os.fspath(path_or_id))
    if os.path.isdir(expanded):
        config_path = os.path.join(expanded, CONFIG_NAME)
        if not os.path.isfile(config_path):
            raise CheckpointInspectionError(
                f"{expanded} has no {CONFIG_NAME}: pass the directory that `save_pretrained` wrote (it holds "
                f"{CONFIG_NAME} next to the weights)."
            )
        return _Resolved(directory=expanded, hub_id=None, config_path=config_path)
    if os.path.exists(expanded):
        raise CheckpointInspectionError(
            f"{expanded} is a file: pass the checkpoint directory that holds {CONFIG_NAME} and the weights."
        )
    if not _looks_like_hub_id(path_or_id):
        raise CheckpointInspectionError(f"{path_or_id}: no such directory, and it is not a Hub model id.")

    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(path_or_id, CONFIG_NAME, revision=revision)
    if isinstance(cached, str) and os.path.isfile(cached):
        return _Resolved(directory=os.path.dirname(cached), hub_id=path_or_id, config_path=cached)
    if _hub_offline():
        raise CheckpointInspectionError(
            f"{path_or_id}: no such directory, and the Hub id is not in the local Hugging Face cache (offline mode is "
            f"on, so nothing is downloaded). Pass a checkpoint directory, or download it first with "
            f"`hf download {path_or_id}` while online."
        )
    # Online and not cached: fetch config.json only, and read the safetensors headers with HTTP range requests.
    from huggingface_hub import get_safetensors_metadata, hf_hub_download

    try:
        config_path = hf_hub_download(path_or_id, CONFIG_NAME, revision=revision)
    except Exception as e:
        raise CheckpointInspectionError(
            f"{path_or_id}: no such directory, and its {CONFIG_NAME} could not be fetched from the Hub "
            f"({type(e).__name__}: {e})."
        ) from e
    try:
        remote = _storage_from_hub_metadata(get_safetensors_metadata(path_or_id, revision=revision))
    except Exception as e:  # not a safetensors repo, or the headers could not be read
        logger.info(f"Could not read the safetensors headers of {path_or_id} from the Hub: {e}")
        remote = StorageSummary(format="none")
    return _Resolved(directory=None, hub_id=path_or_id, config_path=config_path, remote_storage=remote)


# --------------------------------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Verdict:
    """
    Whether running the checkpoint at one runtime precision is safe.

    Args:
        runtime (`str`): `"fp32"`, `"bf16"` or `"fp16"`.
        status (`str`): `"safe"` or `"risky"`.
        reasons (`list[str]`): why it is risky (from the risk rules and/or the audit); empty when safe.
        fix (`str`, *optional*): what to do instead.
        kind (`str`, *optional*): the risk rule's kind (`"overflow"`, `"precision_loss"`), or `"measured_overflow"`
            when only the audit found it.
        severity (`str`, *optional*): `"high"` or `"low"`.
    """

    runtime: str
    status: str
    reasons: list[str] = dataclasses.field(default_factory=list)
    fix: str | None = None
    kind: str | None = None
    severity: str | None = None

    @property
    def is_safe(self) -> bool:
        return self.status == SAFE


@dataclasses.dataclass
class CheckpointReport:
    """
    What [`inspect_checkpoint`] found. `format()` renders the text `transformers precision` prints, `to_dict()` the
    `--json` output.

    Args:
        checkpoint (`str`): what was asked for.
        directory (`str`, *optional*): the local directory read (a cache snapshot for a Hub id).
        hub_id (`str`, *optional*): the Hub id, when one was given.
        model_type (`str`, *optional*): the config's `model_type`.
        architectures (`list[str]`): the config's `architectures`.
        declared (`str`): the trained precision `config.json` declares (`"unknown"` when absent).
        declared_raw (`Any`): the raw value in `config.json` (`None` when absent).
        registry (`RegistryEntry`, *optional*): the registry row, for Hub ids only.
        effective (`str`): the trained precision the verdicts use: the config's when known, else the registry's.
        effective_from (`str`, *optional*): `"config"`, `"registry"` or `None` (unknown).
        storage (`StorageSummary`): the stored weights.
        verdicts (`dict[str, Verdict]`): per runtime precision.
        audit (`ActivationAudit`, *optional*): the measured activation ranges, when an audit ran.
    """

    checkpoint: str
    directory: str | None
    hub_id: str | None
    model_type: str | None
    architectures: list[str]
    declared: str
    declared_raw: Any
    registry: Any
    effective: str
    effective_from: str | None
    storage: StorageSummary
    verdicts: dict[str, Verdict]
    audit: Any = None

    def verdict(self, runtime: Any) -> Verdict:
        """The verdict for a runtime precision (any spelling of fp32, bf16 or fp16)."""
        return self.verdicts[_runtime_name(runtime)]

    def exit_code(self, runtime: Any = None) -> int:
        """`transformers precision`'s exit code: 0 when `runtime` is safe (or `None`), 1 when it is risky."""
        if runtime is None:
            return 0
        return 0 if self.verdict(runtime).is_safe else 1

    def to_dict(self, runtime: Any = None, top_k: int = 10) -> dict[str, Any]:
        """The JSON-serializable report (`transformers precision --json`); `runtime` is the asked dtype, if any."""
        asked = None if runtime is None else _runtime_name(runtime)
        registry = None
        if self.registry is not None:
            registry = {
                "model_id": self.registry.model_id,
                "precision": self.registry.precision,
                "source": self.registry.source,
                "note": self.registry.note,
            }
        return {
            "schema_version": SCHEMA_VERSION,
            "checkpoint": self.checkpoint,
            "directory": self.directory,
            "hub_id": self.hub_id,
            "model_type": self.model_type,
            "architectures": list(self.architectures),
            "trained_precision": {
                "declared": self.declared,
                "declared_raw": self.declared_raw,
                "registry": registry,
                "effective": self.effective,
                "effective_from": self.effective_from,
            },
            "storage": dataclasses.asdict(self.storage),
            "verdicts": {name: dataclasses.asdict(v) for name, v in self.verdicts.items()},
            "audit": None if self.audit is None else self.audit.to_dict(top_k=top_k),
            "asked_dtype": asked,
            "exit_code": self.exit_code(asked),
        }

    def format(self, runtime: Any = None, top_k: int = 10) -> str:
        """The human-readable report; `runtime` marks the asked dtype."""
        asked = None if runtime is None else _runtime_name(runtime)
        lines = [f"Checkpoint: {self.checkpoint}"]
        if self.hub_id and self.directory:
            lines.append(f"  cached at: {self.directory}")
        if self.model_type or self.architectures:
            arch = f" ({', '.join(self.architectures)})" if self.architectures else ""
            lines.append(f"  model type: {self.model_type or 'unknown'}{arch}")
        declared = self.declared
        if self.declared_raw is not None and str(self.declared_raw) != self.declared:
            declared += f" (config.json says {self.declared_raw!r})"
        if self.declared_raw is None:
            declared += " (not in config.json)"
        lines.append(f"Trained precision (config): {declared}")
        if self.hub_id is None:
            lines.append("Trained precision (registry): not consulted for a local directory")
        elif self.registry is None:
            lines.append("Trained precision (registry): no entry")
        else:
            lines.append(
                f"Trained precision (registry): {self.registry.precision} via {self.registry.model_id} "
                f"({self.registry.note}; {self.registry.source})"
            )
        used = f" (from the {self.effective_from})" if self.effective_from else ""
        lines.append(f"Trained precision used for the verdicts: {self.effective}{used}")
        lines.append(_format_storage(self.storage))
        lines.append("Verdicts:")
        for name, verdict in self.verdicts.items():
            mark = "  <- asked" if name == asked else ""
            if verdict.is_safe:
                note = "safe"
                if self.effective == UNKNOWN and name != FP32 and self.audit is None:
                    note = "no rule applies (trained precision unknown; `--audit` measures the activations)"
                lines.append(f"  {name}: {note}{mark}")
            else:
                mild = " (mild: weak public evidence)" if verdict.severity == "low" else ""
                lines.append(f"  {name}: RISKY{mild}{mark}")
                lines.extend(f"      {reason}" for reason in verdict.reasons)
                if verdict.fix:
                    lines.append(f"      fix: {verdict.fix}")
        if self.audit is not None:
            lines.append(self.audit.format(top_k=top_k))
        return "\n".join(lines)


def _format_storage(storage: StorageSummary) -> str:
    if storage.format == "safetensors":
        dtypes = ", ".join(f"{name} ({count:,})" for name, count in storage.dtypes.items()) or "no tensors"
        files = f"{len(storage.files)} shards" if storage.sharded else ", ".join(storage.files)
        return f"Storage: {dtypes}; {storage.parameters:,} parameters in {files}"
    if storage.format == "pickle":
        return f"Storage: pickled weights ({', '.join(storage.files)}), not opened: no safetensors header to read"
    return "Storage: no weight files found"


def _runtime_name(runtime: Any) -> str:
    try:
        name = normalize_precision(runtime)
    except InvalidTrainedPrecisionError as e:
        raise CheckpointInspectionError(f"{e} The runtime dtype must be one of fp32, bf16, fp16.") from e
    if name not in RUNTIME_PRECISIONS:
        raise CheckpointInspectionError(f"{runtime!r} is not a runtime dtype: use one of fp32, bf16, fp16.")
    return name


def _read_config(config_path: str) -> dict[str, Any]:
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointInspectionError(f"{config_path} is not a readable JSON file: {e}") from e
    if not isinstance(config, dict):
        raise CheckpointInspectionError(f"{config_path} is malformed: a JSON object was expected.")
    return config


def _declared_precision(config: dict[str, Any]) -> tuple[str, Any]:
    raw = config.get("trained_precision")
    if raw is None:
        return UNKNOWN, None
    try:
        return normalize_precision(raw), raw
    except InvalidTrainedPrecisionError:
        logger.warning(f"config.json holds an unrecognised trained_precision {raw!r}: treated as 'unknown'.")
        return UNKNOWN, raw


def build_verdicts(trained: str, audit: Any = None) -> dict[str, Verdict]:
    """
    A verdict per runtime precision. A runtime is risky when the risk rules say so for `trained`, or when the audit
    measured an activation it cannot hold (above fp16's 65504 for fp16; non-finite for any precision).
    """
    verdicts = {}
    for runtime in RUNTIME_PRECISIONS:
        verdict = Verdict(runtime=runtime, status=SAFE)
        risk = assess_risk(trained, runtime)
        if risk is not None:
            verdict.status = RISKY
            verdict.kind, verdict.severity, verdict.fix = risk.kind, risk.severity, risk.fix
            verdict.reasons.append(f"trained in {risk.trained}: {risk.reason}.")
        if audit is not None:
            measured = audit.problem_for(runtime)
            if measured is not None:
                verdict.status = RISKY
                verdict.reasons.append(f"measured: {measured}.")
                if verdict.kind is None:
                    verdict.kind, verdict.severity = "measured_overflow", "high"
                    safer = [p for p in RUNTIME_PRECISIONS if p != runtime and audit.problem_for(p) is None]
                    names = {FP32: "torch.float32", BF16: "torch.bfloat16", FP16: "torch.float16"}
                    if safer:
                        verdict.fix = "use " + " or ".join(f"`dtype={names[p]}`" for p in reversed(safer))
        verdicts[runtime] = verdict
    return verdicts


def inspect_checkpoint(
    path_or_id: str,
    audit: bool = False,
    texts: list[str] | None = None,
    revision: str | None = None,
    max_header_bytes: int = MAX_HEADER_BYTES,
    **audit_kwargs,
) -> CheckpointReport:
    """
    Inspects a checkpoint: declared and registry trained precision, storage dtypes, and a verdict per runtime
    precision. Nothing is loaded unless `audit=True`.

    Args:
        path_or_id (`str`):
            A directory written by `save_pretrained`, or a Hub id. A Hub id is read from the local cache; when it is
            not cached and the Hub is reachable (`HF_HUB_OFFLINE` unset), only its `config.json` is downloaded and
            its safetensors headers are read with HTTP range requests.
        audit (`bool`, *optional*, defaults to `False`):
            Also load the model in fp32 on the CPU and measure its activations on calibration texts
            ([`audit_activations`]); the measurement enters the verdicts.
        texts (`list[str]`, *optional*): calibration texts for the audit (default: a few built-in samples).
        revision (`str`, *optional*): the Hub revision.
        max_header_bytes (`int`, *optional*, defaults to 100 MB): the largest safetensors header read.
        audit_kwargs: passed to [`audit_checkpoint`] (`top_k`, `max_length`, `seed`).

    Returns:
        [`CheckpointReport`].

    Raises:
        [`CheckpointInspectionError`] (a `ValueError`): for a missing path, a directory without `config.json`, a
        malformed index or header, or a Hub id that is neither cached nor reachable.
    """
    resolved = _resolve(path_or_id, revision=revision, max_header_bytes=max_header_bytes)
    config = _read_config(resolved.config_path)
    declared, declared_raw = _declared_precision(config)
    entry = lookup(resolved.hub_id) if resolved.hub_id else None
    if declared != UNKNOWN:
        effective, effective_from = declared, "config"
    elif entry is not None:
        effective, effective_from = entry.precision, "registry"
    else:
        effective, effective_from = UNKNOWN, None
    if resolved.remote_storage is not None:
        storage = resolved.remote_storage
    else:
        storage = read_storage(resolved.directory, max_header_bytes=max_header_bytes)

    measured = None
    if audit:
        from .audit import audit_checkpoint

        measured = audit_checkpoint(resolved.directory or resolved.hub_id, texts=texts, **audit_kwargs)

    architectures = config.get("architectures") or []
    return CheckpointReport(
        checkpoint=os.fspath(path_or_id),
        directory=resolved.directory,
        hub_id=resolved.hub_id,
        model_type=config.get("model_type"),
        architectures=list(architectures) if isinstance(architectures, list) else [str(architectures)],
        declared=declared,
        declared_raw=declared_raw,
        registry=entry,
        effective=effective,
        effective_from=effective_from,
        storage=storage,
        verdicts=build_verdicts(effective, measured),
        audit=measured,
    )


__all__ = [
    "FP16_MAX",
    "CheckpointInspectionError",
    "CheckpointReport",
    "SafetensorsHeaderError",
    "StorageSummary",
    "Verdict",
    "inspect_checkpoint",
    "read_safetensors_header",
    "read_storage",
]
