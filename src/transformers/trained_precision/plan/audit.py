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
The activation audit: how large a model's activations get, and whether fp16 (max 65504) can hold them.

A calibration forward runs in fp32 while [`ActivationRecorder`] keeps every module's largest |input| and |output|;
the audit names the first module, in execution order, past fp16's max: where the overflow starts. Unlike upstream's
`DebugUnderflowOverflow` (a nan/inf tripwire that prints), it keeps the numbers.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import weakref
from collections.abc import Mapping
from typing import Any

from ...utils import logging
from ..facts.risk import FP16_MAX
from ..facts.storage import CheckpointInspectionError
from ..vocabulary import BF16, FP16


logger = logging.get_logger(__name__)

#: bf16's largest finite value (the same exponent range as fp32), and fp32's.
BF16_MAX = 3.3895313892515355e38
FP32_MAX = 3.4028234663852886e38

#: Below this headroom (fp16 max / measured max) an fp16 run is called tight: other inputs may overflow.
TIGHT_HEADROOM = 2.0

#: Short, varied calibration texts: prose, numbers, code, a list, and non-English text.
DEFAULT_TEXTS = (
    "The quick brown fox jumps over the lazy dog while the committee reviews the annual budget in detail.",
    "In 1969, 3 astronauts travelled 384,400 km; the mission cost about $25.4 billion (roughly 0.57% of GDP).",
    "def mean(values):\n    return sum(values) / max(len(values), 1)  # avoid dividing by zero",
    "Translate to German: The weather is nice today. Summarize: prices rose 12% after the storm closed two ports.",
    "Les modèles de langue apprennent des régularités statistiques; 機械学習は大量のデータを必要とします。",
)


def _floating_tensors(value: Any, found: list, depth: int = 0) -> list:
    """Appends to `found` the non-empty floating-point tensors in `value` (a tensor, tuple, list, dict, ModelOutput)."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and value.numel() > 0:
            found.append(value)
    elif depth < 4:
        if isinstance(value, Mapping):
            value = value.values()
        elif not isinstance(value, (tuple, list)):
            return found
        for item in value:
            _floating_tensors(item, found, depth + 1)
    return found


class ActivationRecorder:
    """
    Records the largest |activation| of every module of `model` inside `with ActivationRecorder(model):` into
    `output_max`, `input_max` and `calls`, one `torch.aminmax` per tensor per pass. Additive masks (inputs named
    `*mask*`, the dtype's largest finite value) are left out.
    """

    def __init__(self, model, prefix: str = ""):
        self.model = model
        self.names = [f"{prefix}{name}" if name else "(model)" for name, _ in model.named_modules()]
        self._handles = []
        # (module index, 0 input / 1 output / None for the call itself, position in _minima/_maxima)
        self._events: list[tuple[int, int | None, int | None]] = []
        # id(tensor) -> (weakref, version, position): a tensor passed on from module to module (and unchanged, per
        # its version counter) is measured once per pass
        self._seen: dict[int, tuple[Any, int, int]] = {}
        self._minima, self._maxima, self._limits = [], [], []  # per measured tensor
        self.input_max: dict[str, float] = {}
        self.output_max: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def __enter__(self) -> ActivationRecorder:
        for index, (_, module) in enumerate(self.model.named_modules()):
            self._handles.append(module.register_forward_hook(self._make_hook(index), with_kwargs=True))
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.collect()

    def _measure(self, tensor) -> int:
        """The index of `tensor`'s (min, max) in this pass's lists, computing them unless already known."""
        import torch

        try:
            version = tensor._version
        except RuntimeError:  # inference tensors have no version counter: never reuse their values
            version = None
        known = self._seen.get(id(tensor))
        if known is not None and version is not None and known[1] == version and known[0]() is tensor:
            return known[2]
        low, high = torch.aminmax(tensor.detach())
        self._minima.append(low)
        self._maxima.append(high)
        self._limits.append(torch.finfo(tensor.dtype).max)
        position = len(self._maxima) - 1
        if version is not None:
            self._seen[id(tensor)] = (weakref.ref(tensor), version, position)
        return position

    def _make_hook(self, index: int):
        events, measure = self._events, self._measure

        def hook(module, args, kwargs, output):
            if kwargs:
                kwargs = {k: v for k, v in kwargs.items() if "mask" not in k}  # additive masks are not activations
            for kind, value in ((0, (args, kwargs)), (1, output)):
                for tensor in _floating_tensors(value, []):
                    events.append((index, kind, measure(tensor)))
            events.append((index, None, None))  # the call itself, even without floating tensors

        return hook

    def collect(self) -> list[tuple[str, str, float]]:
        """Adds the passes since the last call; returns `(module, "input" or "output", max |value|)` in firing order."""
        import torch

        if not self._events:
            return []
        if self._maxima:
            lows = torch.stack([t.to(torch.float32) for t in self._minima])
            highs = torch.stack([t.to(torch.float32) for t in self._maxima])
            # An extreme equal to its dtype's largest finite value is a mask sentinel (`torch.finfo(dtype).min` added
            # to attention scores), not an activation: it is left out. inf and NaN are kept (and propagate).
            limits = torch.tensor(self._limits, dtype=torch.float32)
            negative = torch.where(lows == -limits, torch.zeros_like(lows), -lows)
            positive = torch.where(highs == limits, torch.zeros_like(highs), highs)
            numbers = torch.maximum(positive, negative).tolist()
        else:
            numbers = []
        ordered = []
        for index, kind, position in self._events:
            name = self.names[index]
            if kind is None:
                self.calls[name] = self.calls.get(name, 0) + 1
                continue
            number = numbers[position]
            table = self.output_max if kind else self.input_max
            previous = table.get(name)
            if previous is None or not number <= previous:  # keeps NaN once seen
                table[name] = number
            ordered.append((name, "output" if kind else "input", number))
        for recorded in (self._events, self._minima, self._maxima, self._limits, self._seen):
            recorded.clear()
        return ordered


@dataclasses.dataclass
class ModuleRange:
    """One module's measured range: its largest |output| (`nan` once NaN) and |input|, and how many times it ran."""

    name: str
    max_abs: float
    max_input: float | None = None
    calls: int = 0

    @property
    def headroom(self) -> float:
        """fp16's max over the measured max: above 1 it fits, below 1 it overflows."""
        return 0.0 if math.isnan(self.max_abs) else math.inf if self.max_abs == 0 else FP16_MAX / self.max_abs

    @property
    def overflows_fp16(self) -> bool:
        return not self.max_abs <= FP16_MAX

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "max_abs": _json_float(self.max_abs),
            "max_input": _json_float(self.max_input),
            "headroom": _json_float(self.headroom),
            "overflows_fp16": self.overflows_fp16,
            "calls": self.calls,
        }


def _json_float(value: float | None):
    """JSON has no inf/nan: they are written as the strings "inf", "-inf" and "nan"."""
    return value if value is None or math.isfinite(value) else str(value)


@dataclasses.dataclass
class ActivationAudit:
    """
    The result of [`audit_activations`]: every module's range, largest first; where a value first passed fp16's max
    (`(module, "input" or "output", its largest over every sample)`); the modules already inf/NaN; the sequences and
    tokens run, and their source (`"tokenizer"`, `"texts"`, `"random"` or `"inputs"`).
    """

    modules: list[ModuleRange]
    first_overflow: tuple[str, str, float] | None
    nonfinite: list[str]
    samples: int
    tokens: int
    input_source: str
    parameters: int = 0
    buffers: int = 0

    @property
    def max_abs(self) -> float:
        """The largest output measured anywhere."""
        return self.modules[0].max_abs if self.modules else 0.0

    @property
    def overflows_fp16(self) -> bool:
        return self.first_overflow is not None

    @property
    def headroom(self) -> float:
        """fp16's max over the largest output."""
        return self.modules[0].headroom if self.modules else math.inf

    @property
    def verdict(self) -> str:
        """One sentence, e.g. "overflows fp16 at `encoder.block.3.layer.1.DenseReluDense.wo` (max 1.23e+05)"."""
        if self.nonfinite:
            return (
                f"non-finite activations (inf/NaN) at `{self.nonfinite[0]}` even in the audited dtype: the weights or "
                "the inputs are broken"
            )
        if self.first_overflow is not None:
            name, kind, value = self.first_overflow
            where = f"`{name}`" if kind == "output" else f"the input of `{name}`"
            return f"overflows fp16 at {where} (max {value:.3g}; fp16 max {FP16_MAX:g})"
        if not self.modules:
            return "no floating-point activations were recorded"
        return f"fits fp16: {self.range_for(FP16)}"

    def range_for(self, runtime: str) -> str:
        """What the measurement says of `runtime`, in its own range: [`problem_for`], else the largest activation."""
        problem = self.problem_for(runtime)
        if problem is not None:
            return problem
        if not self.modules:
            return "no floating-point activations were recorded"
        top = self.modules[0]
        if runtime == FP16:
            tight = " (tight: other inputs may overflow)" if top.headroom < TIGHT_HEADROOM else ""
            return f"largest activation {top.max_abs:.3g} at `{top.name}`, headroom {top.headroom:.3g}x{tight}"
        limit = BF16_MAX if runtime == BF16 else FP32_MAX
        return f"largest activation {top.max_abs:.3g} at `{top.name}`, within {runtime}'s max {limit:.3g}"

    def problem_for(self, runtime: str) -> str | None:
        """Why the measured activations do not fit `runtime` ("fp32", "bf16", "fp16"), or `None` when they do."""
        if self.nonfinite or (runtime == FP16 and self.first_overflow is not None):
            return self.verdict
        if runtime == BF16 and self.max_abs > BF16_MAX:
            return f"an activation of {self.max_abs:.3g} exceeds bf16's max at `{self.modules[0].name}`"
        return None

    def to_dict(self, top_k: int = 10) -> dict[str, Any]:
        first = None
        if self.first_overflow is not None:
            name, kind, value = self.first_overflow
            first = {"module": name, "where": kind, "max_abs": _json_float(value)}
        return {
            "fp16_max": FP16_MAX,
            "samples": self.samples,
            "tokens": self.tokens,
            "input_source": self.input_source,
            "parameters": self.parameters,
            "buffers": self.buffers,
            "max_abs": _json_float(self.max_abs),
            "headroom": _json_float(self.headroom),
            "overflows_fp16": self.overflows_fp16,
            "first_overflow": first,
            "nonfinite": list(self.nonfinite),
            "verdict": self.verdict,
            "top_modules": [m.to_dict() for m in self.modules[:top_k]],
            "modules_recorded": len(self.modules),
        }

    def format(self, top_k: int = 10) -> str:
        source = {
            "tokenizer": "built-in texts",
            "texts": "your texts",
            "random": "random token ids (no tokenizer)",
            "inputs": "the given inputs",
        }.get(self.input_source, self.input_source)
        lines = [f"Activation audit (fp32 on CPU, {self.samples} sample(s), {self.tokens} tokens, {source}):"]
        if self.parameters or self.buffers:
            lines.append(f"  loaded model: {self.parameters:,} parameters, {self.buffers:,} buffer values")
        lines.append(f"  {'module':<60} {'max |out|':>10} {'fp16 headroom':>14}")
        for m in self.modules[:top_k]:
            flag = "  OVERFLOW" if m.overflows_fp16 else ""
            lines.append(f"  {m.name:<60} {m.max_abs:>10.3g} {m.headroom:>13.3g}x{flag}")
        lines.append(f"  verdict: {self.verdict}")
        return "\n".join(lines)


def _forward_kwargs(model, inputs: dict[str, Any]) -> dict[str, Any]:
    """Adds what a forward needs beyond the encoder inputs: decoder inputs (teacher forcing) and `use_cache=False`."""
    import torch

    kwargs = dict(inputs)
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        parameters = {}
    config = getattr(model, "config", None)
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in parameters:
        if "decoder_input_ids" not in kwargs and "input_ids" in kwargs:
            input_ids = kwargs["input_ids"]
            start = getattr(config, "decoder_start_token_id", None)
            if start is None:
                start = getattr(config, "pad_token_id", None) or 0
            start_column = torch.full_like(input_ids[:, :1], int(start))
            kwargs["decoder_input_ids"] = torch.cat([start_column, input_ids[:, :-1]], dim=1)
    if "use_cache" in parameters:
        kwargs["use_cache"] = False
    return kwargs


def calibration_inputs(
    model, tokenizer=None, texts: list[str] | None = None, max_length: int = 128, num_random: int = 4, seed: int = 0
) -> tuple[list[dict[str, Any]], str]:
    """
    The calibration batches, one unpadded sequence each, and their source: `texts` (default [`DEFAULT_TEXTS`]), or
    without a tokenizer `num_random` sequences of `max_length // 2` random token ids drawn with `seed`.
    """
    import torch

    if tokenizer is not None:
        encoded = (
            tokenizer(text, return_tensors="pt", truncation=True, max_length=max_length)
            for text in (texts if texts is not None else DEFAULT_TEXTS)
        )
        keys = ("input_ids", "attention_mask")
        batches = [{k: e[k] for k in keys if k in e} for e in encoded if e["input_ids"].shape[-1]]
        if not batches:
            raise ValueError("The calibration texts are empty after tokenization.")
        return batches, "tokenizer" if texts is None else "texts"
    if texts is not None:
        raise ValueError("Calibration texts need a tokenizer, and this checkpoint has none: omit the texts.")
    try:
        embeddings = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        embeddings = None
    vocab = getattr(embeddings, "num_embeddings", None) or getattr(model.config, "vocab_size", None)
    if not vocab:
        raise ValueError(
            f"{type(model).__name__} takes no token ids (no input embeddings): the audit runs on text models only."
        )
    generator = torch.Generator().manual_seed(seed)
    ids = [torch.randint(0, vocab, (1, max(2, max_length // 2)), generator=generator) for _ in range(num_random)]
    return [{"input_ids": i, "attention_mask": torch.ones_like(i)} for i in ids], "random"


def audit_activations(
    model,
    inputs: list[dict[str, Any]] | None = None,
    tokenizer=None,
    texts: list[str] | None = None,
    max_length: int = 128,
    seed: int = 0,
) -> ActivationAudit:
    """
    Measures every module's largest |activation| over calibration forwards of `model` (in eval mode, its dtype and
    device): `inputs` (forward kwargs, one dict per pass), else [`calibration_inputs`].
    """
    import torch

    source = "inputs"
    if inputs is None:
        inputs, source = calibration_inputs(model, tokenizer, texts, max_length=max_length, seed=seed)
    was_training = model.training
    model.eval()
    first_overflow = None
    tokens = 0
    try:
        with ActivationRecorder(model) as recorder, torch.no_grad():
            for batch in inputs:
                model(**_forward_kwargs(model, batch))
                ids = batch.get("input_ids")
                tokens += int(ids.numel()) if isinstance(ids, torch.Tensor) else 0
                for name, kind, value in recorder.collect():
                    if first_overflow is None and not value <= FP16_MAX:
                        first_overflow = (name, kind, value)
    finally:
        model.train(was_training)
    modules = [
        ModuleRange(name, value, recorder.input_max.get(name), recorder.calls.get(name, 0))
        for name, value in recorder.output_max.items()
    ]  # largest first, non-finite ones first of all
    modules.sort(key=lambda m: (math.isfinite(m.max_abs), -math.inf if math.isnan(m.max_abs) else -m.max_abs))
    nonfinite = [m.name for m in modules if not math.isfinite(m.max_abs)]
    if first_overflow is not None:
        # where the overflow starts, with that module's largest value over every sample (as the table lists it): the
        # first value to pass fp16's max, in execution order, can be a smaller one from an earlier sample
        name, kind, value = first_overflow
        largest = (recorder.output_max if kind == "output" else recorder.input_max).get(name)
        first_overflow = (name, kind, value if largest is None or math.isnan(largest) else max(value, largest))
    return ActivationAudit(modules, first_overflow, nonfinite, len(inputs), tokens, source)


#: Files that show a directory ships a tokenizer (without them, v5 builds a blank one mapping every word to unk).
TOKENIZER_FILES = tuple(
    "tokenizer.json tokenizer_config.json vocab.txt vocab.json merges.txt spiece.model tokenizer.model "
    "sentencepiece.bpe.model".split()
)


def _mostly_unknown(tokenizer, texts: list[str] | None) -> bool:
    """Whether more than half the calibration tokens are the tokenizer's unknown token."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None:
        return False
    ids = [i for text in (texts or DEFAULT_TEXTS) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]
    return bool(ids) and sum(i == unk for i in ids) > len(ids) / 2


def registered_model_class_names() -> frozenset[str]:
    """The model classes transformers registers for its auto classes (every `*_MAPPING_NAMES` of `modeling_auto`)."""
    from ...models.auto import modeling_auto

    names = set()
    for attribute in dir(modeling_auto):
        if attribute.endswith("_MAPPING_NAMES"):
            for value in getattr(modeling_auto, attribute).values():
                names.update([value] if isinstance(value, str) else value)
    return frozenset(names)


def model_class(config):
    """The registered model class `architectures` names (never another attribute of `transformers`), or `AutoModel`."""
    import transformers

    registered = registered_model_class_names()
    for name in getattr(config, "architectures", None) or []:
        if isinstance(name, str) and name in registered and getattr(transformers, name, None) is not None:
            return getattr(transformers, name)
    return transformers.AutoModel


def load_audit_model(
    path_or_id: str | os.PathLike,
    texts: list[str] | None = None,
    local_files_only: bool = True,
    use_safetensors: bool = True,
    cache_dir: str | os.PathLike | None = None,
):
    """
    A checkpoint in fp32 on the CPU (the class `architectures` names, else `AutoModel`) and its tokenizer (`None`
    without a usable one); a [`CheckpointInspectionError`] when the model cannot be loaded.
    """
    from ..facts.storage import local_checkpoint, read_storage

    path_or_id = os.fspath(path_or_id)
    # the report's check of the stored weights, before torch is imported: a bad file fails in a second, named
    directory = local_checkpoint(path_or_id, cache_dir) if local_files_only or os.path.isdir(path_or_id) else None
    if directory is not None:
        read_storage(directory)
    import torch

    from ...models.auto import AutoConfig, AutoTokenizer

    hub_kwargs = {"local_files_only": local_files_only, "cache_dir": cache_dir}
    try:
        config = AutoConfig.from_pretrained(path_or_id, **hub_kwargs)
        model = model_class(config).from_pretrained(
            path_or_id, dtype=torch.float32, use_safetensors=use_safetensors or None, **hub_kwargs
        )
    except Exception as e:
        raise CheckpointInspectionError(f"Cannot load {path_or_id} in fp32 ({type(e).__name__}: {e}).") from e
    tokenizer = None
    if not os.path.isdir(path_or_id) or any(os.path.isfile(os.path.join(path_or_id, n)) for n in TOKENIZER_FILES):
        try:
            tokenizer = AutoTokenizer.from_pretrained(path_or_id, **hub_kwargs)
        except Exception as e:
            logger.info(f"{path_or_id} has no usable tokenizer ({e}); the audit uses random token ids.")
        if tokenizer is not None and _mostly_unknown(tokenizer, texts):
            logger.warning(
                f"The tokenizer of {path_or_id} maps most calibration text to its unknown token: the audit uses "
                "random token ids instead."
            )
            tokenizer = None
    return model, tokenizer


def audit_checkpoint(
    path_or_id: str | os.PathLike,
    texts: list[str] | None = None,
    max_length: int = 128,
    seed: int = 0,
    local_files_only: bool = True,
    use_safetensors: bool = True,
    cache_dir: str | os.PathLike | None = None,
) -> ActivationAudit:
    """
    [`audit_activations`] of a checkpoint loaded by [`load_audit_model`]; `use_safetensors=False` also loads pickled
    weights, which can run code. A [`CheckpointInspectionError`] when the model or its inputs cannot be built.
    """
    model, tokenizer = load_audit_model(
        path_or_id, texts, local_files_only=local_files_only, use_safetensors=use_safetensors, cache_dir=cache_dir
    )
    try:
        inputs, source = calibration_inputs(model, tokenizer, texts, max_length=max_length, seed=seed)
    except ValueError as e:
        raise CheckpointInspectionError(f"Cannot audit {path_or_id}: {e}") from e
    try:
        audit = audit_activations(model, inputs=inputs)
    except Exception as e:
        raise CheckpointInspectionError(
            f"The calibration forward of {path_or_id} ({type(model).__name__}) failed: {type(e).__name__}: {e}. "
            "The audit feeds token ids only; models that need other inputs cannot be audited from the command line: "
            "call `audit_activations(model, inputs=[...])` with your own inputs."
        ) from e
    audit.input_source = source
    audit.parameters = sum(p.numel() for p in model.parameters())
    audit.buffers = sum(b.numel() for b in model.buffers())
    return audit


__all__ = [
    "ActivationAudit",
    "ActivationRecorder",
    "DEFAULT_TEXTS",
    "TOKENIZER_FILES",
    "ModuleRange",
    "audit_activations",
    "audit_checkpoint",
    "calibration_inputs",
    "load_audit_model",
    "model_class",
]
