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

An adapter has no `config.json`, so an [`AdapterRun`] record is the `"trained_precision"` entry of the `__metadata__`
of its `adapter_model.safetensors`: it travels with its weights (PEFT's loading ignores it) and a later save of other
weights drops it. The [`Trainer`] writes it: [`~trained_precision.record.stamp.stamp_trained_precision`] starts it, before the
base's config is stamped, [`finish_adapter_run`] closes it, [`save_adapter_record`] adds it to every save. The answer
for an adapter ([`adapter_precision_info`]) is the base's lineage then the adapter's run, whose finished run is
evidence only for the weights it ran with (fp16 autocast over bf16 base weights says nothing about fp16 weights).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import struct
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from ...utils import logging
from ..facts.evidence import weights_subject
from ..facts.resolver import SOURCE_CONFIG, TrainedPrecisionInfo, resolve_trained_precision
from ..facts.run_record import RunRecord
from ..guard.check import (
    ERROR,
    IGNORE,
    MODE_ATTRIBUTE,
    REGISTRY_ATTRIBUTE,
    WARN,
    TrainedPrecisionRiskError,
    resolve_check_mode,
)
from ..vocabulary import (
    FIELD,
    PRETRAINING_FIELD,
    REFERENCE_FIELD,
    RUN_AMP,
    RUN_FIELD,
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
#: The largest safetensors header read (an adapter's is a few kB; 100 MB is the limit the checkpoint reports use).
MAX_HEADER_BYTES = 100_000_000

# (adapter, runtime) warned about, and apart (so that it never silences a warning) said at info level to be cleared
_WARNED: set[tuple[str, str]] = set()
_INFORMED: set[tuple[str, str]] = set()


@dataclasses.dataclass(frozen=True)
class AdapterRun:
    """
    What trained an adapter, and on which base: the run's `precision` and `status` (as `config.trained_precision_run`
    has them), its autocast `mixed_precision`, the torch dtypes of the trainable adapter and of the frozen base's
    weights (`adapter_dtype`, `base_dtype`), the base's id and its lineage before the run (`base_precision`,
    `base_pretraining`, and `base_provenance`: `"config"`, `"registry: <row>"` or `"unknown"`), a quantized base's
    `method`, `bits`, `quant_type` and `compute_dtype` (`base_quantization`), the optimizer `steps`, and the `binding`
    of a finished run that is evidence ([`~trained_precision.facts.binding.Binding`]: the digest of base + adapter weights
    it ended on, the longest input, the backend), checked against the model the adapter is loaded into.
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
        """The precisions of the run's activations: the base's weights, the autocast, quantized matmuls."""
        found = [dtype_to_precision(self.base_dtype) if self.base_dtype else UNKNOWN, self.mixed_precision]
        if self.base_quantization and self.base_quantization.get("compute_dtype"):
            found.append(dtype_to_precision(self.base_quantization["compute_dtype"]))
        return tuple(dict.fromkeys(p for p in found if p and p != UNKNOWN))

    def run_record(self) -> RunRecord | None:
        """
        This run as a [`~trained_precision.facts.run_record.RunRecord`]: `"pure"` when the base's weights were in the run's
        precision, `"amp"` when an autocast ran over wider (or quantized) base weights.
        """
        if self.status is None:
            return None
        pure = self.base_dtype is not None and dtype_to_precision(self.base_dtype) == self.precision
        return RunRecord(self.status, RUN_PURE if pure else RUN_AMP, self.steps, binding=self.binding)

    def is_evidence_for(self, runtime: Any) -> bool:
        """
        Whether this run is evidence that `runtime` works for base + adapter (by
        [`~trained_precision.facts.run_record.RunRecord.proves`]): an autocast run over wider weights kept the residual stream in
        the weights' dtype, and proves nothing.
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
        if q := self.base_quantization:
            details = [q.get("quant_type"), f"compute dtype {q['compute_dtype']}" if q.get("compute_dtype") else None]
            details = ", ".join(part for part in details if part)
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
        """Reads a record; `ValueError` names what is wrong (another version, an unknown value, a wrong type)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"the record is a {type(data).__name__}, not an object")
        if data.get("version") != RECORD_VERSION:
            raise ValueError(f"the record's version is {data.get('version')!r}; this version reads {RECORD_VERSION}")
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        defaults = {"precision": None, "base_precision": UNKNOWN, "base_pretraining": UNKNOWN}
        try:
            values.update({key: normalize_precision(values.get(key, default)) for key, default in defaults.items()})
            if values.get("mixed_precision") is not None:
                values["mixed_precision"] = normalize_precision(values["mixed_precision"])
        except InvalidTrainedPrecisionError as e:
            raise ValueError(str(e)) from e
        if values.get("status") is not None and values["status"] not in RUN_STATUSES:
            raise ValueError(f"status {values['status']!r} is not one of {', '.join(RUN_STATUSES)}")
        for keys, types, expected in (
            (("adapter_dtype", "base_dtype", "base_name_or_path", "base_provenance"), str, "a string"),
            (("base_quantization", "binding"), dict, "an object"),
            (("steps",), int, "an integer"),
        ):
            for key in keys:
                value = values.get(key)
                if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
                    raise ValueError(f"{key} is {value!r}, expected {expected}")
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> AdapterRun:
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ValueError(f"the record is not JSON: {e}") from e
        return cls.from_dict(data)


def _dominant_dtype(params) -> str | None:
    counts = collections.Counter()
    for param in params:
        if param.is_floating_point():
            counts[param.dtype] += param.numel()
    return str(max(counts, key=counts.get)).replace("torch.", "") if counts else None


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
        "compute_dtype": str(compute).replace("torch.", "") if compute is not None else None,
    }


def start_adapter_run(peft_model: Any, precision: str, *, base: Any, mixed_precision: str | None = None) -> AdapterRun:
    """
    Starts (and keeps on `peft_model`) the record of the run that trains its adapters in `precision`, with the lineage
    of `base` before the base's config is stamped; a second run of the same model keeps the base lineage of the first.
    """
    previous = getattr(peft_model, RUN_ATTRIBUTE, None)
    if previous is not None:
        keys = ("base_name_or_path", "base_precision", "base_pretraining", "base_provenance")
        base_fields = {key: getattr(previous, key) for key in keys}
    else:
        config = getattr(base, "config", None)
        info = resolve_trained_precision(config, persisted_from=vars(base).get(REGISTRY_ATTRIBUTE))
        adapters = (getattr(peft_model, "peft_config", None) or {}).values()
        names = [getattr(adapter, "base_model_name_or_path", None) for adapter in adapters]
        name = next(filter(None, names), None) or getattr(config, "name_or_path", None)
        base_fields = {
            "base_name_or_path": str(name) if name else None,
            # a base whose oldest stage is unknown (a fine-tune of a model of unknown precision) is unknown as a whole
            "base_precision": info.precision if not info.oldest_unknown else UNKNOWN,
            "base_pretraining": info.pretraining,
            "base_provenance": info.provenance,
        }
    record = AdapterRun(
        precision=precision,
        status="started",
        mixed_precision=mixed_precision,
        adapter_dtype=_dominant_dtype(p for p in peft_model.parameters() if p.requires_grad),
        base_dtype=_dominant_dtype(p for p in base.parameters() if not p.requires_grad),
        base_quantization=_quantization_of(base),
        **base_fields,
    )
    setattr(peft_model, RUN_ATTRIBUTE, record)
    return record


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
    Writes `record` into the `__metadata__` of a safetensors file, keeping its other metadata and its tensors byte for
    byte, atomically (a new file beside it, flushed, renamed over it: an interruption leaves the old file whole).
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


def read_adapter_record(path: str | os.PathLike) -> AdapterRun | None:
    """
    The [`AdapterRun`] of an adapter (its directory or its `adapter_model.safetensors`); `None` without one, and with
    one warning for a malformed one.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, ADAPTER_SAFE_WEIGHTS_NAME)
    if not os.path.isfile(path):
        return None
    text = (_read_header(path)[0].get("__metadata__") or {}).get(METADATA_KEY)
    try:
        return AdapterRun.from_json(text) if text is not None else None
    except ValueError as e:
        logger.warning_once(f"The `{METADATA_KEY}` record of {path} is malformed ({e}): it is ignored.")
        return None


def save_adapter_record(model: Any, output_dir: str | os.PathLike) -> list[str]:
    """
    The [`Trainer`]'s call after it saved a stamped `PeftModel` into `output_dir`: writes the run's record into each
    saved adapter's `adapter_model.safetensors` (`"default"` in `output_dir`, others in `output_dir/<name>`). Returns
    the files.
    """
    from ...trainer_utils import _is_peft_model

    try:
        from accelerate.utils import extract_model_from_parallel

        model = extract_model_from_parallel(model)
    except ImportError:  # pragma: no cover - accelerate is a Trainer dependency
        pass
    record = getattr(model, RUN_ATTRIBUTE, None)
    if record is None or not _is_peft_model(model):
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


def stamp_merged_adapter(model: Any, adapter: str | os.PathLike) -> AdapterRun | None:
    """
    Writes the lineage of base + adapter into the config of `model`, a base into which `adapter` (its directory, its
    `adapter_model.safetensors` or its Hub id) was merged, so that its `save_pretrained` keeps both stages:
    `trained_precision` is the adapter run's precision, `pretraining_precision` the oldest stage
    ([`adapter_precision_info`]), `trained_precision_run` the adapter's run, and the reference runtime is dropped.
    PEFT's loaders do not read the record, so after `PeftModel.from_pretrained(base, ADAPTER).merge_and_unload()` the
    merged config says only what the base's says until this is called (a merge in the process the [`Trainer`] trained
    the adapter in needs no call). Returns the record; `None`, with a warning, when the adapter has none.
    """
    from ...utils import cached_file
    from ..configuration import sub_config_items

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
    configs = list({id(c): c for c in (config, *(sub for _, sub in sub_config_items(config)))}.values())
    persisted = vars(model).get(REGISTRY_ATTRIBUTE)  # the registry row found at load time is the top-level model's
    run = record.run_record()
    for i, config in enumerate(configs):
        info = adapter_precision_info(
            resolve_trained_precision(config, persisted_from=persisted if i == 0 else None), record
        )
        config.trained_precision = record.precision
        if info.pretraining != record.precision:
            setattr(config, PRETRAINING_FIELD, info.pretraining)
        if run is not None:
            setattr(config, RUN_FIELD, run.to_dict())
        else:
            vars(config).pop(RUN_FIELD, None)
        vars(config).pop(REFERENCE_FIELD, None)  # the merged weights are not the ones the publisher ran
    top = adapter_precision_info(resolve_trained_precision(configs[0]), record)
    logger.info(f"Recorded the lineage {' then '.join(top.lineage)} on the merged model ({record.describe()}).")
    return record


def adapter_precision_info(base_info: TrainedPrecisionInfo | None, record: AdapterRun | None) -> TrainedPrecisionInfo:
    """
    The [`TrainedPrecisionInfo`] of base + adapter, which every verdict about an adapter uses: the base's lineage (as
    resolved now, else as the adapter's `record` kept it), then the adapter's run. The base's own evidence carries over
    (a low-rank adapter leaves the base's weights as they are); the adapter's run is evidence only for the runtime it
    ran in over base weights of that dtype ([`AdapterRun.is_evidence_for`]).
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
    Warns (or raises [`~trained_precision.guard.check.TrainedPrecisionRiskError`] in `"error"` mode) when the runtime `dtype`
    (by default the model's) of base + adapter is risky for the base's lineage followed by the adapter's run, read from
    `record` or else from `adapter_file` (its resolved `adapter_model.safetensors`); `adapter` is its id or directory,
    for messages. `mode` is by default the mode the base was loaded with, else `TRANSFORMERS_TRAINED_PRECISION_CHECK`.
    `model.load_adapter(...)` and `from_pretrained(ADAPTER_DIR, ...)` call it once the adapter is loaded.

    A risk the base alone has was reported at its load or cast: it is said again only when the adapter's record adds to
    it (a run in this runtime that is no evidence). A risk only the adapter's record shows warns here; evidence from
    the adapter's run that overrides the base's risk is said at info level. Returns the first
    [`~trained_precision.facts.risk.Risk`] that remains (said now, before or silenced), or `None`.
    """
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
        where = f"Adapter '{adapter_name}' on '{base_name}'"
        if assessment.risk is None:
            if mode != IGNORE and assessment.overridden and alone is not None and key not in _INFORMED:
                _INFORMED.add(key)
                evidence = f"{assessment.evidence.describe()} ({_adapter_note(record, runtime)})"
                logger.info(f"{where}: {runtime} is not risky for base + adapter: {evidence}.")
            continue
        found = found or assessment.risk
        adds = record is not None and record.precision == runtime
        # silenced; or the base's own check said it, and the adapter adds nothing; or said already
        if mode == IGNORE or (alone is not None and not adds) or (mode == WARN and key in _WARNED):
            continue
        where = f"Adapter '{adapter_name}' is being loaded on '{base_name}' in {runtime}"
        message = _adapter_risk_message(assessment, runtime, where, base_info, record, mode)
        if mode == ERROR:
            raise TrainedPrecisionRiskError(message, assessment.risk, adapter_name, info.source)
        _WARNED.add(key)
        logger.warning(message)
        return found
    return found


def _adapter_runtimes(model: Any, dtype: Any) -> list[str]:
    """The known precisions of base + adapter's activations: `dtype` (or the model's), a quantized compute dtype."""
    runtimes = [getattr(model, "dtype", None) if dtype is None else dtype]
    quantization = _quantization_of(model) if getattr(model, "is_quantized", False) else None
    if quantization and quantization.get("compute_dtype"):
        runtimes.append(quantization["compute_dtype"])
    return [runtime for runtime in map(dtype_to_precision, runtimes) if runtime != UNKNOWN]


def _adapter_risk_message(assessment, runtime: str, where: str, base_info, record, mode: str) -> str:
    """The warning (or error) of a risky base + adapter in `runtime`: both trainings, the risk and the fix."""
    if base_info.is_known:
        base_text = f"{' then '.join(base_info.lineage)} ({base_info.describe()})"
    elif record is not None and record.base_lineage:
        base_text = f"{' then '.join(record.base_lineage)} (as the adapter's record kept it)"
    else:
        base_text = "an unknown precision"
    risk = assessment.risk
    message = (
        f"{where}: the base was trained in {base_text} and {_adapter_note(record, runtime)}: {risk.reason}. Load the "
        f"base with {dtype_options(risk.safe_dtypes)} instead, or set TRANSFORMERS_TRAINED_PRECISION_CHECK=ignore to "
        f"silence this {'error' if mode == ERROR else 'warning'}."
    )
    # evidence that would have cleared it, and why it does not
    return f"{message} {assessment.dropped}" if assessment.dropped else message


def check_loaded_adapter(model: Any, adapter: Any, checkpoint_files: Any) -> None:
    """The call site of `PeftAdapterMixin.load_adapter`: [`check_adapter_precision`] with the resolved files."""
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
