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
The trained precision of a PEFT adapter (LoRA, QLoRA, ...): the run that trained it and the base it was trained on.

An adapter directory (`adapter_config.json` + `adapter_model.safetensors`) has no `config.json`, so it carries its
precision in an [`AdapterRun`] record, stored as the `"trained_precision"` entry of the `__metadata__` of
`adapter_model.safetensors`:

- it travels with the weights it describes: a copy of the file, a Hub upload and every loader keep it, and PEFT's own
  loading ignores safetensors metadata (no warning, nothing to break); a later `save_pretrained` of other weights
  writes a new file without it, so a record never outlives the weights it was written for;
- it says what the run computed in (`precision`, the autocast `mixed_precision`, the dtypes of the trainable adapter
  and of the frozen base, for a quantized base what it was loaded as), how the run ended (`status`, as
  `config.trained_precision_run` says it for a full model) and the base's lineage before the run (its id, trained and
  pretraining precision, and where that was read).

The [`Trainer`] writes it: [`~trained_precision.stamp.stamp_trained_precision`] starts the record of a `PeftModel` at the
start of `train()` (before the base's config is stamped), [`finish_adapter_run`] closes it, and [`save_adapter_record`]
adds it to every checkpoint and to `save_model`'s output.

The answer for an adapter combines both: the base's lineage, then the adapter's run, weighed against the base's
evidence and the adapter's finished run ([`adapter_precision_info`]). A finished run is evidence only for the weights
it ran with: an fp16 mixed-precision run over bf16 base weights says nothing about fp16 weights.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from ..utils import logging
from .check import ERROR, IGNORE, MODE_ATTRIBUTE, WARN, TrainedPrecisionRiskError, resolve_check_mode
from .evidence import weights_subject
from .resolver import SOURCE_CONFIG, TrainedPrecisionInfo, resolve_trained_precision
from .run_record import RunRecord
from .vocabulary import (
    FIELD,
    RUN_AMP,
    RUN_FINISHED,
    RUN_PURE,
    RUN_STATUSES,
    UNKNOWN,
    InvalidTrainedPrecisionError,
    dtype_options,
    dtype_to_precision,
    normalize_precision,
)


logger = logging.get_logger(__name__)

#: PEFT's file names.
ADAPTER_CONFIG_NAME = "adapter_config.json"
ADAPTER_SAFE_WEIGHTS_NAME = "adapter_model.safetensors"
#: The key of the safetensors `__metadata__` that holds the record (a JSON string: metadata values are strings).
METADATA_KEY = FIELD
#: The version of the record's schema that [`AdapterRun.from_json`] reads.
RECORD_VERSION = 1
#: The attribute of a `PeftModel` that holds the record of its current run.
RUN_ATTRIBUTE = "_trained_precision_adapter_run"


@dataclasses.dataclass(frozen=True)
class AdapterRun:
    """
    What trained an adapter, and on which base.

    Args:
        precision (`str`): the precision the run computed in, as the Trainer stamp decides it
            ([`~trained_precision.stamp.resolve_run_precision`]).
        status (`str`, *optional*): `"started"`, `"finished"` or `"diverged"`, as `config.trained_precision_run`.
        mixed_precision (`str`, *optional*): the autocast precision of the run (`"bf16"`, `"fp16"`), `None` without one.
        adapter_dtype (`str`, *optional*): the torch dtype of the trainable adapter weights (`"float32"`, ...).
        base_dtype (`str`, *optional*): the torch dtype of the frozen base's floating weights during the run.
        base_name_or_path (`str`, *optional*): the base's id or path (`base_model_name_or_path`).
        base_precision (`str`): the base's trained precision before this run.
        base_pretraining (`str`): the base's `pretraining_precision` before this run.
        base_provenance (`str`): where the base's precision was read: `"config"`, `"registry: <row>"`, `"unknown"`.
        base_quantization (`dict`, *optional*): for a quantized base (QLoRA): `method`, `bits`, `quant_type` and the
            `compute_dtype` of its quantized matmuls.
        steps (`int`, *optional*): optimizer steps the run took, when known.
        binding (`dict`, *optional*): what a finished run that is evidence was made on
            ([`~trained_precision.binding.Binding`]: the digest of base + adapter weights it ended on, the longest
            input, the backend), checked against the model the adapter is loaded into.
    """

    precision: str
    status: str | None = None
    mixed_precision: str | None = None
    adapter_dtype: str | None = None
    base_dtype: str | None = None
    base_name_or_path: str | None = None
    base_precision: str = UNKNOWN
    base_pretraining: str = UNKNOWN
    base_provenance: str = UNKNOWN
    base_quantization: dict | None = None
    steps: int | None = None
    binding: dict | None = None

    @property
    def base_lineage(self) -> tuple[str, ...]:
        """The base's known training stages before this run, oldest first."""
        return tuple(dict.fromkeys(p for p in (self.base_pretraining, self.base_precision) if p != UNKNOWN))

    @property
    def compute_precisions(self) -> tuple[str, ...]:
        """The precisions the run's activations were computed in: the base's weights, the autocast, quantized matmuls."""
        found = [dtype_to_precision(self.base_dtype) if self.base_dtype else UNKNOWN]
        if self.mixed_precision:
            found.append(self.mixed_precision)
        if self.base_quantization and self.base_quantization.get("compute_dtype"):
            found.append(dtype_to_precision(self.base_quantization["compute_dtype"]))
        return tuple(dict.fromkeys(p for p in found if p != UNKNOWN))

    def run_record(self) -> RunRecord | None:
        """
        This run as the [`~trained_precision.run_record.RunRecord`] every other run is judged by: `"pure"` when the
        base's weights were in the run's precision, `"amp"` when an autocast ran over wider (or quantized) base weights.
        """
        if self.status is None:
            return None
        pure = self.base_dtype is not None and dtype_to_precision(self.base_dtype) == self.precision
        return RunRecord(self.status, RUN_PURE if pure else RUN_AMP, self.steps, binding=self.binding)

    def is_evidence_for(self, runtime: Any) -> bool:
        """
        Whether this run is evidence that `runtime` works for base + adapter, by the rules of every finished run
        ([`~trained_precision.run_record.RunRecord.proves`]): it finished with finite losses after enough optimizer steps,
        in `runtime`, over base weights of `runtime`'s dtype. An autocast run over wider weights (fp16 mixed precision
        over bf16 weights) kept the norms and the residual stream in the weights' dtype: it proves nothing about
        `runtime` weights.
        """
        runtime = dtype_to_precision(runtime)
        run = self.run_record()
        return self.precision == runtime and run is not None and run.proves(runtime)

    def describe(self) -> str:
        """The run as a phrase for messages: "trained in fp16 (fp16 mixed precision over bfloat16 base weights)"."""
        how = []
        weights = f"{self.base_dtype} base weights" if self.base_dtype else "base weights of an unrecorded dtype"
        if self.mixed_precision:
            how.append(f"{self.mixed_precision} mixed precision over {weights}")
        elif self.base_dtype:
            how.append(weights)
        if self.base_quantization:
            q = self.base_quantization
            details = ", ".join(
                part
                for part in (
                    q.get("quant_type"),
                    f"compute dtype {q['compute_dtype']}" if q.get("compute_dtype") else None,
                )
                if part
            )
            how.append(f"a {q.get('bits')}-bit {q.get('method')} base" + (f" ({details})" if details else ""))
        if self.adapter_dtype:
            how.append(f"{self.adapter_dtype} adapter weights")
        status = f", run {self.status}" if self.status else ""
        return f"trained in {self.precision} ({', '.join(how) or 'no details recorded'}{status})"

    def to_dict(self) -> dict[str, Any]:
        return {"version": RECORD_VERSION, **dataclasses.asdict(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AdapterRun:
        """
        Reads a record. Raises `ValueError` naming the problem for a record of another version, an unknown precision or
        status, or a member of the wrong type.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"the record is a {type(data).__name__}, not an object")
        if data.get("version") != RECORD_VERSION:
            raise ValueError(f"the record's version is {data.get('version')!r}; this version reads {RECORD_VERSION}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        try:
            values["precision"] = normalize_precision(values.get("precision"))
            for key in ("base_precision", "base_pretraining"):
                values[key] = normalize_precision(values.get(key, UNKNOWN))
            if values.get("mixed_precision") is not None:
                values["mixed_precision"] = normalize_precision(values["mixed_precision"])
        except InvalidTrainedPrecisionError as e:
            raise ValueError(str(e)) from e
        if values.get("status") is not None and values["status"] not in RUN_STATUSES:
            raise ValueError(f"status {values['status']!r} is not one of {', '.join(RUN_STATUSES)}")
        for key in ("adapter_dtype", "base_dtype", "base_name_or_path", "base_provenance"):
            if values.get(key) is not None and not isinstance(values[key], str):
                raise ValueError(f"{key} is {values[key]!r}, expected a string")
        for key in ("base_quantization", "binding"):
            if values.get(key) is not None and not isinstance(values[key], dict):
                raise ValueError(f"{key} must be an object")
        if values.get("steps") is not None and (
            isinstance(values["steps"], bool) or not isinstance(values["steps"], int)
        ):
            raise ValueError(f"steps is {values['steps']!r}, expected an integer")
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> AdapterRun:
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ValueError(f"the record is not JSON: {e}") from e
        return cls.from_dict(data)


# --------------------------------------------------------------------------------------------------------------------
# Recording a run (the Trainer stamp)


def is_peft_model(model: Any) -> bool:
    """Whether `model` is a PEFT `PeftModel` (or `PeftMixedModel`), without importing peft when it is not installed."""
    from ..trainer_utils import _is_peft_model

    return _is_peft_model(model)


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _dominant_dtype(params) -> str | None:
    counts: dict[Any, int] = {}
    for param in params:
        if param.is_floating_point():
            counts[param.dtype] = counts.get(param.dtype, 0) + param.numel()
    return _dtype_name(max(counts, key=counts.get)) if counts else None


def _quantization_of(base: Any) -> dict | None:
    """What a quantized base was loaded as (bitsandbytes 4-bit/8-bit, ...), from its `quantization_config`."""
    quantizer = getattr(base, "hf_quantizer", None)
    config = getattr(quantizer, "quantization_config", None) or getattr(
        getattr(base, "config", None), "quantization_config", None
    )
    if config is None:
        return None
    get = config.get if isinstance(config, Mapping) else lambda key, default=None: getattr(config, key, default)
    method = get("quant_method")
    method = getattr(method, "value", method)
    bits = 4 if get("load_in_4bit", False) else 8 if get("load_in_8bit", False) else get("bits")
    compute = get("bnb_4bit_compute_dtype") if bits == 4 else None
    return {
        "method": str(method) if method is not None else None,
        "bits": bits,
        "quant_type": get("bnb_4bit_quant_type") if bits == 4 else None,
        "compute_dtype": _dtype_name(compute) if compute is not None else None,
    }


def start_adapter_run(peft_model: Any, precision: str, *, base: Any, mixed_precision: str | None = None) -> AdapterRun:
    """
    Starts the record of the run that trains `peft_model`'s adapters, with the base's lineage as it is before the run
    (call it before the base's config is stamped). A second run of the same model keeps the base lineage of the first:
    the base's config then holds the first run's stamp, not the base's own training.

    Args:
        peft_model (`PeftModel`): the model being trained.
        precision (`str`): the run's precision.
        base (`PreTrainedModel`): its base model (`peft_model.get_base_model()`).
        mixed_precision (`str`, *optional*): the run's autocast precision.

    Returns:
        [`AdapterRun`]: the record, also kept on `peft_model`.
    """
    previous = getattr(peft_model, RUN_ATTRIBUTE, None)
    trainable = [p for p in peft_model.parameters() if p.requires_grad]
    frozen = [p for p in base.parameters() if not p.requires_grad]
    quantization = _quantization_of(base)
    if previous is not None:
        base_fields = {
            k: getattr(previous, k)
            for k in ("base_name_or_path", "base_precision", "base_pretraining", "base_provenance")
        }
    else:
        from .check import REGISTRY_ATTRIBUTE

        config = getattr(base, "config", None)
        info = resolve_trained_precision(config, persisted_from=vars(base).get(REGISTRY_ATTRIBUTE))
        base_fields = {
            "base_name_or_path": _base_name(peft_model, base),
            # a base whose oldest stage is unknown (a fine-tune of a model of unknown precision) is unknown as a whole
            "base_precision": info.precision if not info.oldest_unknown else UNKNOWN,
            "base_pretraining": info.pretraining,
            "base_provenance": info.provenance,
        }
    record = AdapterRun(
        precision=precision,
        status="started",
        mixed_precision=mixed_precision,
        adapter_dtype=_dominant_dtype(trainable),
        base_dtype=_dominant_dtype(frozen),
        base_quantization=quantization,
        **base_fields,
    )
    setattr(peft_model, RUN_ATTRIBUTE, record)
    return record


def _base_name(peft_model: Any, base: Any) -> str | None:
    for adapter_config in (getattr(peft_model, "peft_config", None) or {}).values():
        name = getattr(adapter_config, "base_model_name_or_path", None)
        if name:
            return str(name)
    name = getattr(getattr(base, "config", None), "name_or_path", None)
    return str(name) if name else None


def finish_adapter_run(
    peft_model: Any, status: str, steps: int | None = None, bind: Callable[[str], dict | None] | None = None
) -> AdapterRun | None:
    """
    Records how the run of `peft_model` ended (`"finished"` or `"diverged"`, and its steps). When the run is evidence
    for its precision, `bind(compute)` gives its binding (see [`AdapterRun`]).
    """
    record = getattr(peft_model, RUN_ATTRIBUTE, None)
    if record is None:
        return None
    record = dataclasses.replace(record, status=status, steps=steps if steps is not None else record.steps)
    if bind is not None and record.is_evidence_for(record.precision):
        record = dataclasses.replace(record, binding=bind(record.run_record().compute))
    setattr(peft_model, RUN_ATTRIBUTE, record)
    return record


# --------------------------------------------------------------------------------------------------------------------
# Storing and reading the record (the safetensors metadata of the adapter weights)


#: The largest safetensors header read (an adapter's is a few kB; 100 MB is the limit the checkpoint reports use).
MAX_HEADER_BYTES = 100_000_000


def _read_header(path: str) -> tuple[dict, int]:
    """A safetensors file's JSON header and where its tensor data starts; `ValueError` for a file that is not one."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        prefix = f.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{path} is not a safetensors file: it has {size} bytes")
        (length,) = struct.unpack("<Q", prefix)
        if length > min(MAX_HEADER_BYTES, size - 8):
            raise ValueError(
                f"{path} declares a {length}-byte header in a {size}-byte file: it is not a safetensors file"
            )
        try:
            header = json.loads(f.read(length).decode("utf-8"))
        except ValueError as e:
            raise ValueError(f"{path} has a malformed safetensors header: {e}") from e
    if not isinstance(header, dict):
        raise ValueError(f"{path} has a malformed safetensors header: a JSON object was expected")
    return header, 8 + length


def write_adapter_record(weights_path: str | os.PathLike, record: AdapterRun) -> None:
    """
    Writes `record` into the `__metadata__` of a safetensors file (`adapter_model.safetensors`), keeping its other
    metadata and its tensors byte for byte. The file is replaced atomically: a new file is written beside it, flushed,
    then renamed over it, so an interruption leaves the old file whole.
    """
    path = os.fspath(weights_path)
    header, data_start = _read_header(path)
    metadata = dict(header.get("__metadata__") or {})
    metadata[METADATA_KEY] = record.to_json()
    header["__metadata__"] = metadata
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)  # keep the tensor data 8-byte aligned, as safetensors writes it
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".adapter_model.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            out.write(struct.pack("<Q", len(encoded)))
            out.write(encoded)
            src.seek(data_start)
            while chunk := src.read(1 << 24):
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, os.stat(path).st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def record_from_metadata(metadata: Mapping[str, Any] | None, where: str = "the adapter") -> AdapterRun | None:
    """The record in a safetensors `__metadata__` map; `None` without one, and one warning for a malformed one."""
    text = (metadata or {}).get(METADATA_KEY)
    if text is None:
        return None
    try:
        return AdapterRun.from_json(text)
    except ValueError as e:
        logger.warning_once(f"The `{METADATA_KEY}` record of {where} is malformed ({e}): it is ignored.")
        return None


def read_adapter_record(path: str | os.PathLike) -> AdapterRun | None:
    """
    The [`AdapterRun`] of an adapter: `path` is its directory or its `adapter_model.safetensors`. `None` when the
    adapter has no record (saved by PEFT alone, or as `.bin`); a malformed record logs one warning and reads as none.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, ADAPTER_SAFE_WEIGHTS_NAME)
    if not os.path.isfile(path):
        return None
    header, _ = _read_header(path)
    return record_from_metadata(header.get("__metadata__"), where=path)


def save_adapter_record(model: Any, output_dir: str | os.PathLike) -> list[str]:
    """
    The [`Trainer`]'s call after it saved a `PeftModel` into `output_dir` (every checkpoint and `save_model`): writes
    the record of the run into each saved adapter's `adapter_model.safetensors` (the `"default"` adapter in
    `output_dir`, others in `output_dir/<name>`, as PEFT saves them). Does nothing for a model that is not a
    `PeftModel`, was not stamped, or was saved without safetensors.

    Returns:
        `list[str]`: the files written.
    """
    try:
        from accelerate.utils import extract_model_from_parallel

        model = extract_model_from_parallel(model)
    except ImportError:  # pragma: no cover - accelerate is a Trainer dependency
        pass
    record = getattr(model, RUN_ATTRIBUTE, None)
    if record is None or not is_peft_model(model):
        return []
    written = []
    for name in getattr(model, "peft_config", None) or {}:
        directory = os.fspath(output_dir) if name == "default" else os.path.join(os.fspath(output_dir), name)
        path = os.path.join(directory, ADAPTER_SAFE_WEIGHTS_NAME)
        if os.path.isfile(path):
            write_adapter_record(path, record)
            written.append(path)
    if written:
        logger.info(f"Wrote the adapter's training record ({record.describe()}) into {', '.join(written)}.")
    return written


# --------------------------------------------------------------------------------------------------------------------
# A merged model (`merge_and_unload()`)


def stamp_merged_adapter(model: Any, adapter: str | os.PathLike) -> AdapterRun | None:
    """
    Writes the lineage of base + adapter into the config of `model`, a base into which the adapter `adapter` was
    merged (`merge_and_unload()`), so that its `save_pretrained` keeps both stages: `trained_precision` is the
    adapter run's precision, `pretraining_precision` the oldest stage ([`adapter_precision_info`]: the base's own
    config, else the lineage the record kept; `"unknown"` for a base of unknown precision), `trained_precision_run` the
    adapter's run, and the base's reference runtime is dropped, as a training run's stamp drops it.

    A merge in the process that trained the adapter needs no call: the [`Trainer`] stamped the base's config. PEFT's
    loaders (`PeftModel.from_pretrained(base, ADAPTER)`, `AutoPeftModelForCausalLM.from_pretrained(ADAPTER)`) read the
    weights without the safetensors metadata that holds the record and keep no reference to the adapter's directory,
    so after them the merged config says only what the base's says until this is called.

    Args:
        model (`PreTrainedModel`): the merged model (what `merge_and_unload()` returned).
        adapter (`str` or `os.PathLike`): the adapter that was merged: its directory, its `adapter_model.safetensors`,
            or its Hub id (read from the cache or downloaded, as `from_pretrained` reads files).

    Returns:
        [`AdapterRun`] or `None`: the record written from; `None` (with a warning, the config unchanged) when the
        adapter has no record.

    Example:

    ```python
    merged = PeftModel.from_pretrained(base, "my-adapter").merge_and_unload()
    stamp_merged_adapter(merged, "my-adapter")
    merged.save_pretrained("my-merged-model")  # config.json: trained_precision, pretraining_precision, the run
    ```
    """
    from ..utils import cached_file
    from .check import REGISTRY_ATTRIBUTE
    from .configuration import sub_config_items
    from .vocabulary import PRETRAINING_FIELD, REFERENCE_FIELD, RUN_FIELD

    path = os.fspath(adapter)
    if not path.endswith(".safetensors"):
        path = cached_file(path, ADAPTER_SAFE_WEIGHTS_NAME, _raise_exceptions_for_missing_entries=False)
    record = read_adapter_record(path) if path is not None else None
    if record is None:
        logger.warning(
            f"Adapter '{os.fspath(adapter)}' has no training record (saved without the Trainer, or as .bin): the "
            "config of the merged model keeps what the base's says."
        )
        return None
    config = getattr(model, "config", None)
    if config is None:
        return None
    # the config and its sub-configs, each once, as the Trainer's stamp writes them
    configs = list({id(c): c for c in (config, *(sub for _, sub in sub_config_items(config)))}.values())
    persisted = vars(model).get(REGISTRY_ATTRIBUTE)
    run = record.run_record()
    for config in configs:
        info = adapter_precision_info(resolve_trained_precision(config, persisted_from=persisted), record)
        config.trained_precision = record.precision
        if info.pretraining != record.precision:
            setattr(config, PRETRAINING_FIELD, info.pretraining)
        if run is not None:
            setattr(config, RUN_FIELD, run.to_dict())
        else:
            vars(config).pop(RUN_FIELD, None)
        vars(config).pop(REFERENCE_FIELD, None)  # the merged weights are not the ones the publisher ran
        persisted = None  # the registry row found at load time is the top-level model's
    top = adapter_precision_info(resolve_trained_precision(configs[0]), record)
    logger.info(f"Recorded the lineage {' then '.join(top.lineage)} on the merged model ({record.describe()}).")
    return record


# --------------------------------------------------------------------------------------------------------------------
# The answer for base + adapter


def adapter_precision_info(base_info: TrainedPrecisionInfo | None, record: AdapterRun | None) -> TrainedPrecisionInfo:
    """
    The [`TrainedPrecisionInfo`] of base + adapter, which every verdict about an adapter uses: the base's lineage (as
    resolved now, else as the record saw it at training time), then the adapter's run. The base's own evidence (its
    publisher's reference runtime, its fp16 plan) carries over, since a low-rank adapter leaves the base's weights as
    they are; the adapter's run is evidence only for the runtime it ran in over base weights of that dtype
    ([`AdapterRun.is_evidence_for`]).

    Args:
        base_info ([`TrainedPrecisionInfo`], *optional*): the base, as the resolver answers for it.
        record ([`AdapterRun`], *optional*): the adapter's record.
    """
    if base_info is None or not base_info.is_known:
        if record is not None and record.base_lineage:
            stages = record.base_lineage
            base_info = dataclasses.replace(
                base_info or TrainedPrecisionInfo(UNKNOWN),
                precision=stages[-1],
                pretraining=stages[0],
                source=SOURCE_CONFIG,
            )
        elif base_info is None:
            base_info = TrainedPrecisionInfo(UNKNOWN)
    if record is None:
        return base_info
    # the oldest stage decides: a base of unknown precision leaves base + adapter unknown, whatever the adapter ran in
    oldest = base_info.lineage[0] if base_info.lineage else UNKNOWN
    evidence_for = record.precision if record.is_evidence_for(record.precision) else None
    return dataclasses.replace(
        base_info,
        precision=record.precision,
        source=SOURCE_CONFIG,
        entry=None,
        pretraining=oldest,
        oldest_unknown=oldest == UNKNOWN,
        run=record.run_record() if evidence_for else None,
        run_source="the adapter's record",
    )


def _adapter_note(record: AdapterRun | None, runtime: str) -> str:
    if record is None:
        return "the adapter has no training record"
    note = f"the adapter was {record.describe()}"
    if record.precision == runtime and not record.is_evidence_for(runtime):
        run = record.run_record()
        if run is None or record.status != RUN_FINISHED:
            note += f", a run that did not finish, so it is no evidence that {runtime} works"
        else:
            note += f", which is no evidence for {runtime} weights: {run.why_not_evidence(runtime)}"
    return note


# (adapter, runtime) already warned about; `_INFORMED` the same for evidence said at info level, kept apart so that an
# "informed, not risky" message never silences a later warning.
_WARNED: set[tuple[str, str]] = set()
_INFORMED: set[tuple[str, str]] = set()


def check_adapter_precision(
    model: Any,
    adapter: str | os.PathLike | None,
    *,
    record: AdapterRun | None = None,
    adapter_file: str | os.PathLike | None = None,
    dtype: Any = None,
    mode: str | None = None,
):
    """
    Checks the runtime of base + adapter against both: warns, or raises
    [`~trained_precision.check.TrainedPrecisionRiskError`] in `"error"` mode, when the runtime dtype is risky for the
    base's lineage followed by the adapter's run. `model.load_adapter(...)` and `from_pretrained(ADAPTER_DIR, ...)`
    call it once the adapter is loaded.

    A risk the base alone already has was reported when the base was loaded or cast: it is said again only when the
    adapter's record adds to it (a run in this runtime that is no evidence, e.g. fp16 mixed precision over bf16
    weights). A risk the base alone does not show (a base whose own config says nothing, whose adapter's record knows
    it was trained in bf16) warns here. Evidence from the adapter's run that overrides the base's risk is said at info
    level.

    Args:
        model (`PreTrainedModel`): the base model the adapter was loaded into.
        adapter (`str` or `os.PathLike`, *optional*): the adapter's id or directory, for messages.
        record ([`AdapterRun`], *optional*): the adapter's record; read from `adapter_file` when not given.
        adapter_file (`str` or `os.PathLike`, *optional*): the adapter's resolved `adapter_model.safetensors`.
        dtype (`torch.dtype`, *optional*): the runtime dtype; by default the model's.
        mode (`str`, *optional*): `"warn"`, `"error"` or `"ignore"`; by default the mode the base was loaded with, else
            the environment variable `TRANSFORMERS_TRAINED_PRECISION_CHECK`.

    Returns:
        The first [`~trained_precision.risk.Risk`] that remains (said now, said before or silenced, as
        [`~trained_precision.check.check_trained_precision`] returns it), or `None`.
    """
    from .check import REGISTRY_ATTRIBUTE

    if record is None and adapter_file is not None and str(adapter_file).endswith(".safetensors"):
        record = read_adapter_record(adapter_file)
    mode = resolve_check_mode(mode if mode is not None else vars(model).get(MODE_ATTRIBUTE))
    config = getattr(model, "config", None)
    base_info = resolve_trained_precision(config, persisted_from=vars(model).get(REGISTRY_ATTRIBUTE))
    # the adapter's run is checked against the weights it is loaded with, base and adapter
    info = dataclasses.replace(adapter_precision_info(base_info, record), subject=weights_subject(model))
    base_name = getattr(config, "name_or_path", None) or type(model).__name__
    adapter_name, found = (os.fspath(adapter) if adapter is not None else "<adapter>"), None
    for runtime in _adapter_runtimes(model, dtype):
        assessment = info.assess(runtime, model_class=type(model))
        alone = base_info.assess(runtime, model_class=type(model)).risk
        key = (adapter_name, runtime)
        if assessment.risk is None:
            if mode != IGNORE and assessment.overridden and alone is not None and key not in _INFORMED:
                _say_adapter_evidence(assessment, runtime, key, base_name, record)
            continue
        found = found or assessment.risk
        adds = record is not None and record.precision == runtime
        # silenced; or the base's own check said it, and the adapter adds nothing; or said already
        if mode == IGNORE or (alone is not None and not adds) or (mode == WARN and key in _WARNED):
            continue
        _say_adapter_risk(assessment, runtime, key, base_name, base_info, record, mode, info.source)
        return found
    return found


def _say_adapter_evidence(assessment, runtime: str, key, base_name: str, record) -> None:
    """Says once, at info level, that the adapter's run is evidence that overrides the base's risk in `runtime`."""
    _INFORMED.add(key)
    logger.info(
        f"Adapter '{key[0]}' on '{base_name}': {runtime} is not risky for base + adapter: "
        f"{assessment.evidence.describe()} ({_adapter_note(record, runtime)})."
    )


def _say_adapter_risk(assessment, runtime: str, key, base_name: str, base_info, record, mode: str, source) -> None:
    """Warns about a risky base + adapter once per (adapter, runtime), or raises it in `"error"` mode."""
    adapter_name, risk = key[0], assessment.risk
    message = _adapter_risk_message(risk, runtime, adapter_name, base_name, base_info, record, mode)
    if assessment.dropped:  # evidence that would have cleared it, and why it does not
        message = f"{message} {assessment.dropped}"
    if mode == ERROR:
        raise TrainedPrecisionRiskError(message, risk, adapter_name, source)
    _WARNED.add(key)
    logger.warning(message)


def _adapter_runtimes(model: Any, dtype: Any) -> list[str]:
    """
    The precisions that carry base + adapter's activations: `dtype` (by default the model's), then a quantized base's
    compute dtype; unknown ones (float8, int8) left out.
    """
    if dtype is None:
        dtype = getattr(model, "dtype", None)
    runtimes = [dtype]
    quantization = _quantization_of(model) if getattr(model, "is_quantized", False) else None
    if quantization and quantization.get("compute_dtype"):
        runtimes.append(quantization["compute_dtype"])
    return [runtime for runtime in map(dtype_to_precision, runtimes) if runtime != UNKNOWN]


def _adapter_risk_message(risk, runtime: str, adapter_name: str, base_name: str, base_info, record, mode: str) -> str:
    """The warning (or error) of a risky base + adapter in `runtime`: both trainings, the risk and the fix."""
    if base_info.is_known:
        base_text = f"{' then '.join(base_info.lineage)} ({base_info.describe()})"
    elif record is not None and record.base_lineage:
        base_text = f"{' then '.join(record.base_lineage)} (as the adapter's record kept it)"
    else:
        base_text = "an unknown precision"
    return (
        f"Adapter '{adapter_name}' is being loaded on '{base_name}' in {runtime}: the base was trained in "
        f"{base_text} and "
        f"{_adapter_note(record, runtime)}: {risk.reason}. Load the base with {dtype_options(risk.safe_dtypes)} "
        f"instead, or set TRANSFORMERS_TRAINED_PRECISION_CHECK=ignore to silence this "
        f"{'error' if mode == ERROR else 'warning'}."
    )


def check_loaded_adapter(model: Any, adapter: Any, checkpoint_files: Any) -> None:
    """
    The call site of `PeftAdapterMixin.load_adapter`: checks the adapter just loaded from `adapter` (its id or
    directory) with its resolved files `checkpoint_files`, see [`check_adapter_precision`].
    """
    files = [os.fspath(f) for f in (checkpoint_files or []) if str(f).endswith(".safetensors")]
    check_adapter_precision(model, adapter, adapter_file=files[0] if files else None)


def reset_adapter_warning_cache() -> None:
    """Forget which adapters were already warned about (tests)."""
    _WARNED.clear()
    _INFORMED.clear()


__all__ = [
    "ADAPTER_CONFIG_NAME",
    "ADAPTER_SAFE_WEIGHTS_NAME",
    "AdapterRun",
    "adapter_precision_info",
    "check_adapter_precision",
    "finish_adapter_run",
    "read_adapter_record",
    "save_adapter_record",
    "stamp_merged_adapter",
    "start_adapter_run",
    "write_adapter_record",
]
