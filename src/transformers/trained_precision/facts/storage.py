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
What a checkpoint stores, read without loading it: [`read_storage`] sums its safetensors headers, with bounded,
non-blocking reads of regular files inside the checkpoint only; pickled weights are never opened.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import stat
import struct
from typing import IO, Any

from ...utils import CONFIG_NAME, SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, WEIGHTS_INDEX_NAME, WEIGHTS_NAME
from ..vocabulary import SAFETENSORS_DTYPES
from .hub_ids import cache_snapshot_of, find_cached_snapshot, parse_hub_id


#: The safetensors library refuses headers above 100 MB; so do we, before reading them.
MAX_HEADER_BYTES = 100_000_000


class CheckpointInspectionError(ValueError):
    """A checkpoint that cannot be inspected: a missing path or file, a malformed header, an uncached Hub id."""


class SafetensorsHeaderError(CheckpointInspectionError):
    """A safetensors file whose header is truncated, oversized or not valid JSON."""


def checkpoint_root(directory: str | os.PathLike) -> str:
    """The folder a checkpoint's files must resolve inside: the directory, or a Hub cache snapshot's repo folder."""
    snapshot = cache_snapshot_of(directory)
    if snapshot is not None:
        return os.path.dirname(os.path.dirname(snapshot.snapshot_dir))
    return os.fspath(directory)


def local_checkpoint(path_or_id: str, cache_dir: str | os.PathLike | None = None) -> str | None:
    """The directory `path_or_id` names, or a Hub id's cached snapshot (any spelling); `None` when neither."""
    if os.path.isdir(path_or_id):
        return path_or_id
    if parse_hub_id(path_or_id) is None:
        return None
    return find_cached_snapshot(path_or_id, filename=CONFIG_NAME, cache_dir=cache_dir)


def open_checkpoint_file(path: str | os.PathLike, root: str | os.PathLike | None = None) -> IO[bytes]:
    """
    Opens a checkpoint's file (binary, non-blocking); a [`CheckpointInspectionError`] when it resolves outside `root`
    (default: its own directory) or is not a regular file (a FIFO, a device, a directory).
    """
    path = os.fspath(path)
    real_root = os.path.realpath(os.path.dirname(path) if root is None else os.fspath(root))
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise CheckpointInspectionError(
            f"{path} is a link to {real}, outside the checkpoint ({real_root}): it is not opened. Copy the file into "
            "the checkpoint instead of linking to it."
        )
    # O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting for one
    f = open(real, "rb", opener=lambda name, flags: os.open(name, flags | getattr(os, "O_NONBLOCK", 0)))
    try:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise CheckpointInspectionError(f"{path} is {kind}, not a file of weights or config: it is not read.")
    except BaseException:
        f.close()
        raise
    return f


def read_safetensors_header(
    path: str | os.PathLike, max_header_bytes: int = MAX_HEADER_BYTES, root: str | os.PathLike | None = None
) -> dict[str, Any]:
    """
    Reads a safetensors file's header (at most `8 + max_header_bytes` bytes), checked against the file's size: a
    [`SafetensorsHeaderError`] for a truncated, oversized or malformed one ([`open_checkpoint_file`]'s errors too).
    """
    path = os.fspath(path)
    try:
        with open_checkpoint_file(path, root) as f:
            size = os.fstat(f.fileno()).st_size
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
    for name, info in header.items():
        if name != "__metadata__":
            _check_tensor_entry(path, name, info, size - 8 - length)
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
    What the safetensors headers say: the format (`"safetensors"`, `"pickle"`: never opened, or `"none"`), the files,
    whether an index listed them, the stored elements per torch dtype name and in all, and the bytes of tensor data.
    """

    format: str
    files: list[str] = dataclasses.field(default_factory=list)
    sharded: bool = False
    dtypes: dict[str, int] = dataclasses.field(default_factory=dict)
    parameters: int = 0
    bytes: int = 0


def summarize_headers(headers: dict[str, dict[str, Any]], sharded: bool = False) -> StorageSummary:
    """Sums dtypes, element counts and bytes over parsed safetensors headers (`{file name: header}`)."""
    summary = StorageSummary(format="safetensors", files=sorted(headers), sharded=sharded)
    for header in headers.values():
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dtype = SAFETENSORS_DTYPES.get(info["dtype"], (info["dtype"].lower(), None))[0]
            count = math.prod(info["shape"])
            summary.dtypes[dtype] = summary.dtypes.get(dtype, 0) + count
            summary.parameters += count
            summary.bytes += info["data_offsets"][1] - info["data_offsets"][0]
    summary.dtypes = dict(sorted(summary.dtypes.items(), key=lambda kv: -kv[1]))
    return summary


def read_storage(directory: str, max_header_bytes: int = MAX_HEADER_BYTES) -> StorageSummary:
    """A checkpoint directory's safetensors weights; a [`CheckpointInspectionError`] for a bad index, shard or header."""
    root = checkpoint_root(directory)
    index_path = os.path.join(directory, SAFE_WEIGHTS_INDEX_NAME)
    if os.path.lexists(index_path):
        files, sharded = _index_shards(directory, index_path, root), True
    elif os.path.lexists(os.path.join(directory, SAFE_WEIGHTS_NAME)):
        files, sharded = [SAFE_WEIGHTS_NAME], False
    else:
        files = sorted(n for n in os.listdir(directory) if n.endswith(".safetensors"))
        sharded = len(files) > 1
    if files or sharded:  # an index without shards is still safetensors
        headers = {n: read_safetensors_header(os.path.join(directory, n), max_header_bytes, root) for n in files}
        return summarize_headers(headers, sharded=sharded)
    pickled = [n for n in (WEIGHTS_NAME, WEIGHTS_INDEX_NAME) if os.path.lexists(os.path.join(directory, n))]
    return StorageSummary(format="pickle", files=pickled) if pickled else StorageSummary(format="none")


def _index_shards(directory: str, index_path: str, root: str) -> list[str]:
    """The shard files a safetensors index lists: plain file names (no directories, `..`, or absolute path) present."""
    try:
        with open_checkpoint_file(index_path, root) as f:
            files = sorted(set(json.loads(f.read().decode("utf-8"))["weight_map"].values()))
    except CheckpointInspectionError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointInspectionError(
            f"{index_path} is malformed: a JSON object with a `weight_map` of tensor name -> shard file was "
            f"expected ({type(e).__name__}: {e})."
        ) from e
    bad = [
        n
        for n in files
        if not isinstance(n, str) or n in ("", ".", "..") or os.path.basename(n) != n or set(n) & set("/\\\0")
    ]
    if bad:
        raise CheckpointInspectionError(
            f"{index_path} is malformed: shard names must be plain file names inside the checkpoint directory, "
            f"got {', '.join(repr(name) for name in bad[:5])}. Nothing outside the checkpoint is opened."
        )
    missing = [name for name in files if not os.path.lexists(os.path.join(directory, name))]
    if missing:
        raise CheckpointInspectionError(f"{index_path} lists shard(s) missing from {directory}: {', '.join(missing)}.")
    return files


def storage_from_hub_metadata(metadata: Any) -> StorageSummary:
    """Converts `huggingface_hub.get_safetensors_metadata`'s answer (headers read with HTTP range requests)."""
    headers = {
        filename: {
            name: {"dtype": info.dtype, "shape": list(info.shape), "data_offsets": list(info.data_offsets)}
            for name, info in file_metadata.tensors.items()
        }
        for filename, file_metadata in metadata.files_metadata.items()
    }
    return summarize_headers(headers, sharded=metadata.sharded)


__all__ = [
    "MAX_HEADER_BYTES",
    "CheckpointInspectionError",
    "SafetensorsHeaderError",
    "StorageSummary",
    "checkpoint_root",
    "open_checkpoint_file",
    "read_safetensors_header",
    "read_storage",
    "storage_from_hub_metadata",
    "summarize_headers",
]
