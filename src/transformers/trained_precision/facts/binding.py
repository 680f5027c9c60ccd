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
The one binding of every kind of evidence (a measured fp16 plan, a finished training run, a publisher's reference):
what it was made on, written by its producer beside it and checked by [`binding_problem`] only.

A binding records a digest ([`binding_digest`]) of

- the name, shape and dtype of every weight and its first [`SAMPLED_VALUES`] values, of each slice where it stacks
  others (three dimensions or more: a MoE's experts), as fp16 (fp32 in an fp16 plan's modules: one digest for a
  model and its fp16 cast);
- the config's fields that change what the forward computes: the whole config (and its sub-configs) less the
  precision record, the evidence and bookkeeping ([`UNBOUND_FIELDS`]), so an edit of `config.json` such as Granite's
  `logits_scaling` or a `layer_norm_eps` breaks it;

and the longest input the evidence saw and the kind of device it ran on.

It catches a fine-tune, another checkpoint, a changed name, shape, dtype or config field, and an edit of a sampled
value; not an edit past the sample, nor weights swapped for others with the same first values. Static evidence only
decides whether a load warns: in fp16 the check in the forward catches a real overflow whatever the evidence says.

A load or cast reads the weights once ([`WeightsSubject`]); no digest is kept on the model: an in-place edit through
`tensor.data` (PEFT's `merge_and_unload`) moves no version counter.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from ..configuration import sub_config_items
from ..vocabulary import FIELDS, FP16_PLAN_FIELD, REFERENCE_FIELD, RUN_FIELD


#: The version of the binding records written now. Older ones are read and are no evidence (the message says to make
#: the evidence again): version 1 (no `version` field: a digest of every value, or a sample without the config) and
#: version 2 (1,024 values per weight, in two runs from an offset that moved per weight).
BINDING_VERSION = 3
#: Values per weight (per stacked slice) the digest covers: its first, on a page a lazy load touched (not a fault each).
SAMPLED_VALUES = 512
#: The binding's `run` for a measured fp16 plan and for a publisher's reference runtime (a training run's is its
#: `compute`: `"pure"` or `"amp"`).
BOUND_PLAN = "plan"
BOUND_PUBLISHER = "publisher"
#: The longest input assumed for a model whose config states no limit (relative positions, as T5's).
ASSUMED_MAX_LENGTH = 2048
_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "n_ctx")
#: Config fields a binding leaves out: the precision record, the evidence itself, the dtype the weights are stored
#: or loaded in, and bookkeeping or runtime switches that do not change what the forward computes (and every field
#: whose name starts with `_`: `_name_or_path`, `_commit_hash`, `_attn_implementation`...).
UNBOUND_FIELDS = frozenset(
    (*FIELDS, FP16_PLAN_FIELD, RUN_FIELD, REFERENCE_FIELD, "dtype", "torch_dtype", "name_or_path", "architectures")
    + ("transformers_version", "use_cache", "return_dict", "output_hidden_states", "output_attentions", "torchscript")
)


@dataclasses.dataclass(frozen=True)
class Binding:
    """
    What a piece of evidence was made on: the [`binding_digest`] (for a plan, with its content), the longest input it
    saw (`max_tokens`; `None` for a publisher's runtime), where it ran (`backend`; `None`: anywhere), what made it
    (`run`: `"pure"`, `"amp"`, `"plan"`, `"publisher"`) and the binding's `version` (older ones are no evidence).
    """

    digest: str
    max_tokens: int | None
    backend: str | None
    run: str
    version: int = BINDING_VERSION

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, value: Any) -> Binding | None:
        """The binding a record stores (version 1 when it names none), or `None` when it has none or is malformed."""
        if isinstance(value, Binding) or value is None:
            return value
        if not isinstance(value, dict) or not isinstance(value.get("digest"), str) or "run" not in value:
            return None
        tokens, backend, version = value.get("max_tokens"), value.get("backend"), value.get("version", 1)
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)):
            return None
        backend = backend if isinstance(backend, str) else None
        version = version if isinstance(version, int) and not isinstance(version, bool) else 1
        return cls(value["digest"], tokens, backend, str(value["run"]), version)


def _forward_fields(value: Any) -> Any:
    """A config's `to_dict()` without [`UNBOUND_FIELDS`], at every depth (sub-configs)."""
    if isinstance(value, dict):
        return {
            k: _forward_fields(v) for k, v in value.items() if k not in UNBOUND_FIELDS and not str(k).startswith("_")
        }
    if isinstance(value, (list, tuple)):
        return [_forward_fields(item) for item in value]
    return value


def config_digest(config: Any) -> str:
    """The SHA-256 of the config's fields that change what the forward computes (see [`UNBOUND_FIELDS`])."""
    value = config.to_dict() if hasattr(config, "to_dict") else dict(config or {})
    text = json.dumps(_forward_fields(value), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _sample(first: bytes, stored, dtype) -> bytes:
    """A weight's sample ([`read_weights`], bytes of its `stored` dtype) as bytes of `dtype`."""
    import torch

    if stored == dtype or not first:
        return first
    return torch.frombuffer(bytearray(first), dtype=stored).to(dtype).view(torch.uint8).numpy().tobytes()


def read_weights(named_parameters: Iterable) -> tuple | None:
    """`(name, shape, dtype, sample bytes)` of each of `named_parameters` (read in place from a contiguous CPU weight);
    `None` where one is not here (offloaded, a DTensor or ZeRO-3 shard)."""
    import torch

    plain, weights = (torch.nn.Parameter, torch.Tensor), []
    with torch.no_grad():
        for name, tensor in named_parameters:
            if tensor.device.type == "meta" or "ds_shape" in tensor.__dict__:
                return None
            if type(tensor) not in plain and type(tensor.data) is not torch.Tensor:
                return None
            slices = tensor.shape[0] if tensor.dim() > 2 and tensor.numel() else 1  # a slice per stacked expert
            step, size = tensor.numel() // slices, tensor.element_size()
            if tensor.device.type == "cpu" and tensor.is_contiguous():
                at, length = tensor.data_ptr(), min(step, SAMPLED_VALUES) * size
                first = b"".join(ctypes.string_at(at + i * step * size, length) for i in range(slices))
            else:
                rows = tensor.reshape(slices, step)[:, :SAMPLED_VALUES]
                first = rows.to("cpu").contiguous().view(torch.uint8).numpy().tobytes()
            weights.append((name, tuple(tensor.shape), tensor.dtype, first))
    return tuple(weights)


def _weights_digest(weights: tuple | None, prefix: str, config_sha: str, fp32_modules: tuple[str, ...]) -> str | None:
    """[`binding_digest`] of weights [`read_weights`] read, their `base_model_prefix` and their [`config_digest`]."""
    import torch

    if weights is None:
        return None
    planned = tuple(f"{name}." for name in fp32_modules)
    headers, samples = [], {}  # the samples of a dtype, hashed together
    for name, shape, stored, first in weights:
        key = name[len(prefix) + 1 :] if prefix and name.startswith(prefix + ".") else name
        dtype = (torch.float32 if name.startswith(planned) else torch.float16) if stored.is_floating_point else stored
        headers.append(f"{key}:{shape}:{dtype};")
        samples.setdefault(dtype, []).append(_sample(first, stored, dtype))
    digest = hashlib.sha256("".join(headers).encode())
    for dtype in sorted(samples, key=str):  # by the dtype counted, whatever the dtype a weight is stored in
        digest.update(b"".join(samples[dtype]))
    return hashlib.sha256(f"{digest.hexdigest()}:{config_sha}".encode()).hexdigest()


def binding_digest(model, fp32_modules: Iterable[str] = ()) -> str | None:
    """
    The digest a binding records, or `None` when a weight is not materialised here: a SHA-256 over [`config_digest`]
    and the name, shape, dtype and sample of every weight of `model` (a PEFT model: its base model; each tied tensor
    once), floating values as fp16, those of the modules `fp32_modules` as fp32, names without the `base_model_prefix`
    (a head model and its base model agree). Computed afresh at each call: an in-place edit through `.data` moves no
    version counter; one load or cast keeps it on its [`WeightsSubject`].
    """
    if callable(getattr(model, "get_base_model", None)):
        model = model.get_base_model()
    prefix, config = getattr(model, "base_model_prefix", "") or "", getattr(model, "config", None)
    return _weights_digest(
        read_weights(model.named_parameters()), prefix, config_digest(config), tuple(sorted(fp32_modules))
    )


def bind(model, run: str, max_tokens: int | None = None, backend: str | None = None) -> dict | None:
    """The binding record of evidence made on `model` by `run`, or `None` when its weights are not all here."""
    digest = binding_digest(model)
    return Binding(digest, max_tokens, backend, run).to_dict() if digest is not None else None


def backend_of(device: Any) -> str:
    """Where a model runs, as a binding records it: `"cpu <vector extension>"`, `"cuda <device name>"`, or the type."""
    import torch

    if device.type == "cpu":
        return f"cpu {torch.backends.cpu.get_cpu_capability()}"
    if device.type == "cuda" and torch.cuda.is_available():
        return f"cuda {torch.cuda.get_device_name(device)}"
    return device.type


def backend_family(backend: str | None) -> str | None:
    """The device type of a backend: what a binding must share with the runtime (a GPU name alone means CUDA)."""
    if not backend:
        return None
    first = backend.split()[0]
    return first if first in ("cpu", "cuda", "mps", "xpu", "npu", "hpu", "meta") else "cuda"


def model_max_length(config: Any) -> int:
    """The longest input a model takes, which evidence must cover: the shortest `max_position_embeddings` (or another of
    `_LENGTH_KEYS`) over its config and sub-configs; when none states one (as T5's), [`ASSUMED_MAX_LENGTH`]."""
    found = []
    for item in [config, *(sub for _, sub in sub_config_items(config))] if config is not None else []:
        for key in _LENGTH_KEYS:
            value = item.get(key) if isinstance(item, dict) else getattr(item, key, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                found.append(value)
                break
    return min(found) if found else ASSUMED_MAX_LENGTH


@dataclasses.dataclass
class WeightsSubject:
    """What evidence is checked against, read once from the loaded model: its weights ([`read_weights`]), its
    [`config_digest`], the longest input it takes, where it runs and its `base_model_prefix`."""

    weights: tuple | None
    config_sha: str
    max_tokens: int
    backend: str | None
    prefix: str = ""
    _digests: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def digest(self, fp32_modules: Iterable[str] = ()) -> str | None:
        """[`binding_digest`] of the weights read, computed once per subject (one load or cast makes one subject)."""
        key = tuple(sorted(fp32_modules))
        if key not in self._digests:
            self._digests[key] = _weights_digest(self.weights, self.prefix, self.config_sha, key)
        return self._digests[key]


def weights_subject(model: Any) -> WeightsSubject | None:
    """The [`WeightsSubject`] of a loaded model (a PEFT model: its base model), or `None` for one without a config."""
    if callable(getattr(model, "get_base_model", None)):
        model = model.get_base_model()
    config = getattr(model, "config", None)
    if config is None:
        return None
    device = next((t.device for t in model.parameters()), None)
    return WeightsSubject(
        read_weights(model.named_parameters()),
        config_digest(config),
        model_max_length(config),
        backend_of(device) if device is not None else None,
        getattr(model, "base_model_prefix", "") or "",
    )


def binding_problem(
    binding: Binding | dict | None,
    subject: WeightsSubject | None,
    *,
    runs: tuple[str, ...],
    recreate: str,
    digest: Callable[[], str | None] | None = None,
    longer: str | None = None,
    elsewhere: str | None = None,
) -> str | None:
    """
    The one check of every piece of evidence that lowers a verdict: why it is no evidence for `subject` (`recreate`:
    how to make it again; `longer` and `elsewhere` replace it for a length or a device gap, formatted with `tokens` or
    `backend`), or `None`. In order: a binding of this version, the weights are here (`subject`), one of `runs` made
    it, it covers the model's length limit, the same kind of device, and the digest (`digest`, computed last).
    """
    binding = Binding.from_dict(binding)
    if binding is None or binding.version != BINDING_VERSION:
        return (
            f"it records no binding to the weights and config it was made on (an older version wrote it): {recreate}"
        )
    if subject is None:
        return "it can only be checked against the loaded weights, and they are not loaded here"
    if binding.run not in runs:
        return f"it was made by a {binding.run!r} run, not by {' or '.join(repr(r) for r in runs)}"
    if binding.run != BOUND_PUBLISHER and binding.max_tokens is None:
        return f"it records no input lengths: {recreate}"
    if binding.max_tokens is not None and binding.max_tokens < subject.max_tokens:
        again = (longer or "{recreate}, on inputs of {tokens} tokens").format(
            recreate=recreate, tokens=subject.max_tokens
        )
        return (
            f"it saw inputs of up to {binding.max_tokens} tokens, and this model takes {subject.max_tokens}: beyond "
            f"{binding.max_tokens} tokens it is no evidence; {again}"
        )
    made, runs_on = backend_family(binding.backend), backend_family(subject.backend)
    if made is not None and runs_on is not None and made != runs_on:
        again = (elsewhere or "{recreate} there").format(recreate=recreate, backend=subject.backend)
        return f"it was made on {binding.backend}, and this model runs on {subject.backend}: {again}"
    found = digest() if digest is not None else subject.digest()
    if found is None:
        return "the weights are not all in memory (offloaded), so its digest cannot be checked"
    if found != binding.digest:
        return (
            "its digest does not match these weights and config (they, or the record, changed since it was made: a "
            f"fine-tune, an edit of the weights or of `config.json`, another checkpoint): {recreate}"
        )
    return None


__all__ = [
    "ASSUMED_MAX_LENGTH",
    "BINDING_VERSION",
    "BOUND_PLAN",
    "BOUND_PUBLISHER",
    "SAMPLED_VALUES",
    "UNBOUND_FIELDS",
    "Binding",
    "WeightsSubject",
    "backend_of",
    "bind",
    "binding_digest",
    "backend_family",
    "binding_problem",
    "config_digest",
    "model_max_length",
    "read_weights",
    "weights_subject",
]
