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
Measuring an fp16 plan: the smallest set of modules that must run in fp32 for a model to run safely in fp16, found by
measurement, proven against fp32, and written into the checkpoint's config, where
[`~trained_precision.plan.fp16_plan.apply_fp16_plan`] applies it to every later fp16 load, cast and fine-tune.

The search ([`search_fp16_plan`]) runs on a sweep of input lengths up to the model's usable length
([`~trained_precision.plan.fp16_plan.usable_length`]), since some overflows appear only at long inputs:

0. every weight outside fp16's range divided by the headroom (default 2) keeps its module in fp32;
1. one fp32 calibration pass ([`ActivationRecorder`]) measures every module's largest input and output: a module is
   *hot* when one of them passes fp16's 65504 divided by the headroom;
2. a hot tensor leaves its module into the code of its caller, so the plan takes, for every hot module, its nearest
   calling ancestor that is not hot itself (for an MLP whose inner activations overflow: the MLP). When that walk
   reaches the model, or a repeated block (an item of a `ModuleList`) is hot at its boundary, the residual stream
   overflows and no set of modules short of the whole model can hold it: no plan, run the model in bf16 or fp32;
3. the plan is validated in fp16 against the fp32 outputs (logits, or an encoder's last hidden state) on the
   calibration and held-out texts: no inf/NaN, a max error within [`MAX_RELATIVE_ERROR`] of the largest reference
   value, a cosine of at least [`MIN_COSINE`], a top-1 agreement of at least [`MIN_TOP1_AGREEMENT`]. A failure grows
   the plan (the first module whose fp16 output turned non-finite, else the one with the least headroom) and
   validates again; a plan keeping more than [`MAX_FP32_SHARE`] of the weights in fp32 is refused.

[`write_fp16_plan`] stores it in a checkpoint's `config.json`, changing only that member, atomically:

```py
>>> result = search_fp16_plan(model, tokenizer=tokenizer)     # a model in fp32
>>> model.config.fp16_plan = result.to_config_dict()            # what `transformers precision plan --write` stores
```
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any

from ...utils import logging
from ..facts.binding import backend_of
from ..facts.evidence import FP16_PLAN_VERSION
from ..facts.risk import FP16_MAX
from ..guard.check import quiet_casts
from ..guard.sentinel import sentinel_paused
from ..record.populate import _top_level_members, atomic_write_text, config_lock
from ..vocabulary import FP16, FP16_PLAN_FIELD
from .audit import ActivationRecorder, _forward_kwargs, calibration_inputs, load_audit_model
from .fp16_plan import (
    _floating,
    _weight_share,
    keep_module_in_fp32,
    plan_fingerprint,
    release_module,
    sub_models,
    usable_length,
)


logger = logging.get_logger(__name__)

#: The shortest length of the sweep; each next length is 4x the previous one, up to the longest.
SWEEP_START = 32
#: The version of the stored plan's schema (4: its fingerprint is the binding every kind of evidence records).
PLAN_VERSION = FP16_PLAN_VERSION
#: The default headroom: a module is hot when a value reaches fp16's max divided by this.
DEFAULT_HEADROOM = 2.0
#: A plan that keeps more than this share of the weights in fp32 is refused: run the model in bf16 or fp32 instead.
MAX_FP32_SHARE = 0.5
#: Validation tolerances against the fp32 outputs. fp16 keeps 11 significant bits (a relative step of 2**-11 ~ 5e-4
#: per rounding); a forward accumulates many roundings, so the max error is allowed 2% of the largest |output|.
MAX_RELATIVE_ERROR = 0.02
MIN_COSINE = 0.999
MIN_TOP1_AGREEMENT = 0.99
#: How many times a failed validation grows the plan before giving up.
MAX_ATTEMPTS = 8

#: Texts the plan is validated on besides the calibration texts (none of them is a calibration text).
HELD_OUT_TEXTS = (
    "She opened the window, and the cold morning air filled the small kitchen with the smell of rain.",
    "Error 404: the page at /api/v2/users/17 was not found; retry in 30 s or contact support@example.com.",
    "for i in range(10):\n    total += i * i  # the sum of the first ten squares",
    "Die Katze schläft auf dem Sofa, während draußen der Schnee fällt. El tren sale a las 8:45.",
)
_ROOT = "(model)"


class Fp16PlanError(ValueError):
    """Bad input for the plan search: a model that cannot be run, broken weights, a plan that does not fit a model."""


def length_sweep(max_length: int) -> list[int]:
    """The input lengths a plan is calibrated and validated on: 32, 128, 512, 2048, ... below `max_length`, and it."""
    lengths, length = [], SWEEP_START
    while length < max_length:
        lengths.append(length)
        length *= 4
    return [*lengths, max_length]


@dataclasses.dataclass
class PlanResult:
    """
    The result of [`search_fp16_plan`]: the modules kept in fp32 in execution order (empty: the whole model fits fp16),
    whether fp16 with them `passed` validation, or why no plan can make fp16 safe (`refusal`); the headroom asked for
    (`headroom_required`) and measured (fp16's max over the largest value of what runs in fp16); the share of the
    weights kept in fp32; the SHA-256 of the calibration texts and token ids; the `validation` (`passed`,
    `max_abs_error`, `cosine`, `top1_agreement`, `texts` and the `modules` it validated in fp32); the `hot` modules
    with their largest value; how many validations ran (`attempts`) and the time spent (`seconds`); for a passed plan
    what each config stores (`parts`, see [`split_plan`]); what it was validated on (`validated_on`: `sequences`,
    `lengths`, `max_tokens`, `tokens`, `device`, `backend`, `torch`); and its [`plan_fingerprint`].
    """

    modules: list[str]
    passed: bool
    refusal: str | None
    headroom_required: float
    headroom: float
    fp32_weight_share: float
    calibration_sha256: str
    validation: dict
    hot: list = dataclasses.field(default_factory=list)
    attempts: int = 0
    seconds: dict = dataclasses.field(default_factory=dict)
    parts: dict = dataclasses.field(default_factory=dict)
    validated_on: dict = dataclasses.field(default_factory=dict)
    fingerprint: str = ""

    def to_config_dict(self) -> dict:
        """The plan as `config.fp16_plan` stores it (the fixed schema of [`FP16_PLAN_FIELD`])."""
        return {
            "version": PLAN_VERSION,
            "dtype": FP16,
            "modules": list(self.modules),
            "headroom": _finite(self.headroom),
            "fp32_weight_share": round(self.fp32_weight_share, 6),
            "calibration_sha256": self.calibration_sha256,
            "validation": dict(self.validation),
            "validated_on": dict(self.validated_on),
            "fingerprint": self.fingerprint,
        }

    def to_dict(self) -> dict:
        return {
            **self.to_config_dict(),
            "refusal": self.refusal,
            "headroom_required": self.headroom_required,
            "hot_modules": [{"module": n, "max_abs": _finite(v)} for n, v in self.hot],
            "attempts": self.attempts,
        }

    def format(self) -> str:
        v = self.validation
        lines = [f"fp16 plan (headroom {self.headroom_required:g}x below fp16's max {FP16_MAX:g}):"]
        if self.hot:
            shown = ", ".join(f"`{n}` ({m:.3g})" for n, m in self.hot[:5])
            more = f" and {len(self.hot) - 5} more" if len(self.hot) > 5 else ""
            lines.append(f"  values past {FP16_MAX / self.headroom_required:g} in fp32: {shown}{more}")
        if self.refusal:
            lines.append(f"  no plan: {self.refusal}")
            return "\n".join(lines)
        if self.modules:
            lines.append(f"  keep in fp32 ({self.fp32_weight_share:.2%} of the weights):")
            lines.extend(f"    {name}" for name in self.modules)
        else:
            lines.append("  keep in fp32: nothing (every module fits fp16)")
        lines.append(f"  measured headroom of the fp16 part: {self.headroom:.3g}x")
        status = "passed" if self.passed else "FAILED"
        domain = self.validated_on
        on = f"{v['texts']} sequences"
        if domain:
            on += f" of {', '.join(map(str, domain['lengths']))} tokens on {domain['backend']}"
        lines.append(
            f"  validation vs fp32 on {on}: {status}: max error {v['max_abs_error']:.3g}, cosine "
            f"{v['cosine']:.5f} (>= {MIN_COSINE}), top-1 agreement {v['top1_agreement']:.2%} (>= {MIN_TOP1_AGREEMENT:.0%})"
        )
        return "\n".join(lines)


def _finite(value: float) -> float:
    """JSON has no inf: an unbounded headroom is stored as fp16's max (a model whose values are all zero)."""
    return float(value) if math.isfinite(value) else FP16_MAX


def _main_output(output):
    """The tensor validation compares, and whether it is logits: logits, else the last hidden state."""
    import torch

    for key, is_logits in (("logits", True), ("last_hidden_state", False)):
        value = getattr(output, key, None)
        if isinstance(value, torch.Tensor):
            return value, is_logits
    if isinstance(output, torch.Tensor):
        return output, False
    value = next(_floating([output]), None)
    if value is None:
        raise Fp16PlanError(f"the model's output ({type(output).__name__}) holds no floating tensor to validate")
    return value, False


def _run(model, batches, recorder: ActivationRecorder | None = None):
    """The main outputs (fp32 copies) of `model` on `batches`, and the recorder's events in firing order."""
    import torch

    outputs, events = [], []
    with torch.no_grad():
        for batch in batches:
            output, is_logits = _main_output(model(**_forward_kwargs(model, batch)))
            outputs.append(output.detach().to(torch.float32))
            if recorder is not None:
                events.extend(recorder.collect())
    return outputs, is_logits, events


def _run_padded(model, batches):
    """
    The main outputs of `model` on single-sequence `batches`, run as right-padded batches of similar lengths (many
    small forwards cost mostly Python overhead) and cut back, in the order given; `None` unless plain token ids.
    """
    if any(set(b) - {"input_ids", "attention_mask"} or b["input_ids"].shape[0] != 1 for b in batches):
        return None
    outputs = [None] * len(batches)
    for group in _length_groups([b["input_ids"].shape[-1] for b in batches]):
        found = _run_one_padded(model, [batches[i] for i in group])
        if found is None:
            return None
        for index, output in zip(group, found):
            outputs[index] = output
    return outputs


#: A padded batch holds at most this many token positions per real token: a sweep's 512-token sequence runs apart
#: from the 64-token texts instead of padding each of them to 512 (8x the work at a billion parameters).
MAX_PADDING_RATIO = 1.25


def _length_groups(lengths: list[int]) -> list[list[int]]:
    """Indices of `lengths`, shortest first, cut into groups whose padded size stays within `MAX_PADDING_RATIO`."""
    groups, tokens = [], 0
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        length = lengths[index]
        if groups and length * (len(groups[-1]) + 1) <= MAX_PADDING_RATIO * (tokens + length):
            groups[-1].append(index)
            tokens += length
        else:
            groups.append([index])
            tokens = length
    return groups


def _padded(batches) -> bool:
    """Whether [`_run_padded`] pads any of `batches` (a group of sequences of different lengths)."""
    lengths = [b["input_ids"].shape[-1] for b in batches]
    return any(len({lengths[i] for i in group}) > 1 for group in _length_groups(lengths))


def _run_one_padded(model, batches):
    """One right-padded forward of `batches` (single sequences), each output cut back to its length."""
    import torch

    lengths = [b["input_ids"].shape[-1] for b in batches]
    first = batches[0]["input_ids"]
    ids = torch.zeros((len(batches), max(lengths)), dtype=first.dtype, device=first.device)
    mask = torch.zeros_like(ids)
    for row, (batch, length) in enumerate(zip(batches, lengths)):
        ids[row, :length] = batch["input_ids"][0]
        given = batch.get("attention_mask")
        mask[row, :length] = given[0] if given is not None else 1
    with torch.no_grad():
        output, _ = _main_output(model(**_forward_kwargs(model, {"input_ids": ids, "attention_mask": mask})))
    if output.dim() < 2 or output.shape[:2] != ids.shape:
        return None
    return [output[row : row + 1, :length].to(torch.float32) for row, length in enumerate(lengths)]


def _reference_stats(reference: list, is_logits: bool) -> list:
    """Per fp32 output: its largest |value|, its norm and (for logits) its next tokens, computed once per search."""
    import torch

    stats = []
    for ref in reference:
        low, high = torch.aminmax(ref)
        tokens = ref.argmax(-1) if is_logits else None
        stats.append((max(-float(low), float(high)), float(torch.linalg.vector_norm(ref)), tokens))
    return stats


def _compare(reference: list, candidate: list, is_logits: bool, stats: list | None = None) -> dict:
    """Max error (which also tells finiteness), worst cosine and top-1 agreement of `candidate` against `reference`."""
    import torch

    stats = stats if stats is not None else _reference_stats(reference, is_logits)
    finite, max_error, worst_cosine, agree, total = True, 0.0, 1.0, 0, 0
    scale = max((s[0] for s in stats), default=0.0)
    for ref, out, (_, ref_norm, tokens) in zip(reference, candidate, stats):
        error = float(torch.sub(out, ref).abs_().amax())
        if not math.isfinite(error):
            finite = False
            break
        max_error = max(max_error, error)
        norms = float(torch.linalg.vector_norm(out)) * ref_norm
        cosine = float(torch.dot(out.flatten(), ref.flatten())) / norms if norms > 0 else 1.0
        worst_cosine = min(worst_cosine, cosine)
        if is_logits:  # the same next token
            agree += int((out.argmax(-1) == tokens).sum())
            total += tokens.numel()
        else:  # each token's fp16 vector is nearest to its own fp32 vector among the sequence's tokens
            a = torch.nn.functional.normalize(out.reshape(-1, out.shape[-1]), dim=-1)
            b = torch.nn.functional.normalize(ref.reshape(-1, ref.shape[-1]), dim=-1)
            nearest = (a @ b.T).argmax(-1)
            agree += int((nearest == torch.arange(len(nearest))).sum())
            total += len(nearest)
    top1 = agree / total if total and finite else 0.0
    passed = (
        finite
        and max_error <= MAX_RELATIVE_ERROR * max(scale, 1e-30)
        and worst_cosine >= MIN_COSINE
        and top1 >= MIN_TOP1_AGREEMENT
    )
    return {
        "passed": passed,
        "max_abs_error": max_error if finite else FP16_MAX,
        "cosine": worst_cosine if finite else 0.0,
        "top1_agreement": top1,
        "texts": len(reference),
        "finite": finite,
    }


def _minimal(names, order: dict[str, int]) -> list[str]:
    """`names` without those inside another one, in execution order."""
    kept = [n for n in names if not any(n != m and n.startswith(m + ".") for m in names)]
    return sorted(set(kept), key=lambda n: order.get(n, len(order)))


def _calibration_hash(texts: list[str] | None, batches: list[dict]) -> str:
    digest = hashlib.sha256()
    if texts is not None:  # the texts decide the token ids
        for text in texts:
            digest.update(text.encode("utf-8") + b"\0")
    else:
        for batch in batches:
            digest.update(batch["input_ids"].cpu().numpy().tobytes())
    return digest.hexdigest()


def sweep_inputs(model, tokenizer=None, texts: list[str] | None = None, lengths=(), seed: int = 0) -> list[dict]:
    """One sequence per length: windows of the `texts` joined and repeated (with a tokenizer), else random token ids."""
    import torch

    device = next((t.device for t in model.parameters()), torch.device("cpu"))
    if tokenizer is not None:
        stream = tokenizer("\n\n".join(texts), add_special_tokens=False, verbose=False)["input_ids"]
        if not stream:
            raise ValueError("The calibration texts are empty after tokenization.")
        stream = torch.tensor(stream)
        longest = max(lengths)
        stream = stream.repeat(longest // len(stream) + 2)
        batches = []
        for i, length in enumerate(lengths):
            start = (i * 97) % max(1, len(stream) - length)
            batches.append({"input_ids": stream[None, start : start + length]})
    else:
        vocab = model.get_input_embeddings().num_embeddings
        generator = torch.Generator().manual_seed(seed)
        batches = [{"input_ids": torch.randint(0, vocab, (1, length), generator=generator)} for length in lengths]
    for batch in batches:
        batch["input_ids"] = batch["input_ids"].to(device)
        batch["attention_mask"] = torch.ones_like(batch["input_ids"])
    return batches


def _fp16_copy(model, names: list[str]):
    """A copy of `model` in fp16 with the modules `names` kept in fp32 (their exact weights), as a load applies it."""
    import torch

    with quiet_casts():  # no trained-precision check, no stored plan applied: this copy is the plan's own candidate
        candidate = torch.nn.Module.to(copy.deepcopy(model), torch.float16)
    modules, sources = dict(candidate.named_modules()), dict(model.named_modules())
    for name in names:
        keep_module_in_fp32(modules[name], torch.float16)
        modules[name].load_state_dict(sources[name].state_dict())  # the exact fp32 weights, not an fp16 round trip
    return candidate.eval()


@contextlib.contextmanager
def _as_planned_fp16(model, names: list[str]):
    """Runs `model` itself in fp16 with `names` in fp32 for the block (a copy would cost more), then puts it back."""
    import torch

    kept = [(t, t.data) for t in (*model.parameters(), *model.buffers()) if t.is_floating_point()]
    modules = dict(model.named_modules())
    planned = {id(t) for name in names for t in (*modules[name].parameters(), *modules[name].buffers())}
    try:
        for tensor, data in kept:
            if id(tensor) not in planned:
                tensor.data = data.to(torch.float16)
        for name in names:
            keep_module_in_fp32(modules[name], torch.float16)
        yield model
    finally:
        for name in names:
            release_module(modules[name])
        for tensor, data in kept:
            tensor.data = data


def _ready_made(values: list | None) -> tuple[list[dict] | None, list[str] | None]:
    """`(inputs, None)` for ready-made forward kwargs (dicts), else `(None, values)`: texts, or `None`."""
    return (list(values), None) if values and isinstance(values[0], dict) else (None, values)


def search_fp16_plan(
    model,
    tokenizer=None,
    texts: list[str] | list[dict] | None = None,
    held_out_texts: list[str] | list[dict] | None = None,
    headroom: float = DEFAULT_HEADROOM,
    max_length: int | None = None,
    seed: int = 0,
) -> PlanResult:
    """
    Finds, validates and returns the fp16 plan of `model` (see the module docstring for the method).

    Args:
        model (`PreTrainedModel`): the model, in fp32 (it is not modified; validation runs on fp16 copies).
        tokenizer (*optional*): tokenizes the texts; without one, random token ids are used.
        texts, held_out_texts (`list[str]` or `list[dict]`, *optional*): calibration texts (default: the audit's) and
            validation-only texts (default: [`HELD_OUT_TEXTS`]; the plan grows against them: keep a test set apart
            from both), or either as ready-made forward kwargs (dicts of tensors), used as they are.
        headroom (`float`, *optional*, defaults to 2.0): a module is hot when a value reaches 65504 / `headroom`.
        max_length (`int`, *optional*): the longest input calibrated and validated on (the texts truncated to it, and
            one sequence per length of [`length_sweep`]); defaults to the model's [`usable_length`]. A plan is
            evidence only for models whose usable length it covers.
        seed (`int`, *optional*, defaults to 0): for random token ids (the held-out ones use `seed + 1`).

    Raises:
        [`Fp16PlanError`]: bad input (the headroom, a model that does not run, non-finite values already in fp32).
    """

    if not (isinstance(headroom, (int, float)) and math.isfinite(headroom) and headroom >= 1):
        raise Fp16PlanError(f"the headroom must be a number >= 1 (1 = up to fp16's max itself), got {headroom!r}")
    if max_length is None:
        max_length = usable_length(getattr(model, "config", None))
    if not (isinstance(max_length, int) and max_length >= 2):
        raise Fp16PlanError(f"max_length must be an integer >= 2, got {max_length!r}")
    from .audit import DEFAULT_TEXTS

    (inputs, texts), (held_out_inputs, held_out_texts) = _ready_made(texts), _ready_made(held_out_texts)
    calibration_texts = list(texts) if texts is not None else list(DEFAULT_TEXTS)
    if inputs is None:
        inputs = _calibration_batches(model, tokenizer, texts, calibration_texts, max_length, seed)
    if held_out_inputs is None:
        held_out_inputs = _held_out_batches(model, tokenizer, list(held_out_texts or HELD_OUT_TEXTS), max_length, seed)
    digest = _calibration_hash(calibration_texts if tokenizer is not None else None, inputs)
    was_training = model.training
    model.eval()
    try:
        with sentinel_paused():  # fp16 overflows here are measurements, not errors
            result = _search(model, inputs, held_out_inputs, headroom, digest)
    finally:
        model.train(was_training)
    result.validated_on = _validation_domain(model, inputs, held_out_inputs)
    result.validation["modules"] = list(result.modules)
    result.fingerprint = plan_fingerprint(model, result.to_config_dict()) or ""
    if result.passed:
        result.parts = split_plan(model, result.to_config_dict())
    return result


def _calibration_batches(model, tokenizer, texts, calibration_texts: list[str], max_length: int, seed: int) -> list:
    """The calibration inputs: the texts (random ids without a tokenizer, at most 64 long), then the sweep."""
    short = min(max_length, 64) if tokenizer is None else max_length
    inputs, _ = calibration_inputs(model, tokenizer, texts, max_length=short, seed=seed)
    return inputs + sweep_inputs(model, tokenizer, calibration_texts, length_sweep(max_length), seed=seed + 100)


def _held_out_batches(model, tokenizer, held_texts: list[str], max_length: int, seed: int) -> list:
    """The validation-only inputs: the held-out texts (random token ids without a tokenizer), then the sweep."""
    if tokenizer is not None:
        held_out_inputs, _ = calibration_inputs(model, tokenizer, held_texts, max_length=max_length)
    else:
        held_out_inputs, _ = calibration_inputs(model, None, None, max_length=min(max_length, 64), seed=seed + 1)
    return held_out_inputs + sweep_inputs(model, tokenizer, held_texts, length_sweep(max_length), seed=seed + 101)


def _validation_domain(model, inputs: list[dict], held_out_inputs: list[dict]) -> dict:
    """What a plan was validated on (its `validated_on`): the sequences, their lengths, the device and torch."""
    import torch

    lengths = [int(batch["input_ids"].shape[-1]) for batch in (*inputs, *held_out_inputs) if "input_ids" in batch]
    device = next((t.device for t in model.parameters()), None)
    return {
        "sequences": len(inputs) + len(held_out_inputs),
        "lengths": sorted(set(lengths)),
        "max_tokens": max(lengths, default=0),
        "tokens": sum(lengths),
        "device": device.type if device is not None else "cpu",
        "backend": backend_of(device) if device is not None else "cpu",
        "torch": torch.__version__.split("+")[0],
    }


def split_plan(model, plan: dict) -> dict[str, dict]:
    """
    Where a plan is stored: `{"": plan}` for most models. For a composite model (text and vision, encoder and
    decoder), the model's own config keeps the whole plan and each sub-config (one answer per sub-model) its sub-model's
    modules, named relative to that sub-model, with their share of its weights; the measurement is the same.
    """
    parts = {"": plan}
    for key, prefix, owner in sub_models(model):
        inside = [name[len(prefix) + 1 :] for name in plan["modules"] if name.startswith(prefix + ".")]
        part = {
            **plan,
            "modules": inside,
            "fp32_weight_share": round(_weight_share(owner.parameters(), [owner.get_submodule(n) for n in inside]), 6),
            "validation": {**plan["validation"], "modules": inside},
        }
        part["fingerprint"] = plan_fingerprint(owner, part) or ""
        parts[key] = part
    return parts


def _search(model, inputs, held_out_inputs, headroom, digest) -> PlanResult:
    """[`search_fp16_plan`] on ready inputs, `model` in eval mode."""
    limit = FP16_MAX / headroom
    started = time.perf_counter()
    with ActivationRecorder(model) as recorder:
        reference, is_logits, events = _run(model, inputs, recorder)
    held_reference, _, _ = _run(model, held_out_inputs)  # one at a time: the reference must not depend on padding
    measured = time.perf_counter() - started

    order: dict[str, int] = {}
    for name, _, _ in events:
        order.setdefault(name, len(order))
    boundary = {
        name: max(recorder.input_max.get(name) or 0.0, recorder.output_max.get(name, 0.0), key=_nan_last)
        for name in recorder.calls
    }
    broken = [n for n, v in boundary.items() if not math.isfinite(v)]
    # the recorder saw the calibration outputs; the held-out ones: one pass each (inf and NaN propagate to the max)
    if broken or not all(math.isfinite(float(r.abs().amax())) for r in held_reference):
        raise Fp16PlanError(
            f"the model already gives inf/NaN in fp32 (at `{broken[0] if broken else _ROOT}`): its weights or inputs "
            "are broken, fp16 is not the problem"
        )
    hot = sorted(((n, v) for n, v in boundary.items() if v > limit), key=lambda item: order.get(item[0], 0))
    heavy = _heavy_weights(model, limit)
    all_inputs, all_reference = inputs + held_out_inputs, reference + held_reference
    stats = _reference_stats(all_reference, is_logits)
    result = PlanResult(
        modules=[],
        passed=False,
        refusal=None,
        headroom_required=float(headroom),
        headroom=math.inf,
        fp32_weight_share=0.0,
        calibration_sha256=digest,
        validation={"passed": False, "max_abs_error": 0.0, "cosine": 0.0, "top1_agreement": 0.0, "texts": 0},
        hot=hot + [(f"{name} (weights)", value) for name, value in heavy],
    )
    caller = functools.partial(_caller, recorder.calls)
    planned, result.refusal = _measured_plan(heavy, hot, boundary, limit, caller, dict(model.named_modules()))
    if result.refusal:
        result.seconds = {"measure": measured, "validate": 0.0}
        return result

    names = _minimal(planned, order)
    started = time.perf_counter()
    reference = (all_inputs, all_reference, is_logits, stats)
    _validate_and_grow(model, result, names, reference, boundary, order, caller)
    result.seconds = {"measure": measured, "validate": time.perf_counter() - started}
    if result.passed:
        covered = [n for n in boundary if not any(n.startswith(m + ".") for m in result.modules)]
        largest = max((boundary[n] for n in covered), default=0.0)
        result.headroom = FP16_MAX / largest if largest > 0 else math.inf
    return result


def _heavy_weights(model, limit: float) -> list[tuple[str, float]]:
    """The modules with a weight fp16 cannot hold within the headroom, with their largest |weight|: fp32 whatever the inputs."""
    heavy = []
    for name, module in model.named_modules():
        tensors = [t for t in module.parameters(recurse=False) if t.is_floating_point() and t.numel()]
        largest = max((float(t.detach().abs().amax()) for t in tensors), default=0.0)
        if largest > limit:
            heavy.append((name or _ROOT, largest))
    return heavy


def _caller(calls: dict[str, int], name: str) -> str:
    """The nearest ancestor that runs code (a `ModuleList` only holds modules); `(model)` for the model."""
    while "." in name:
        name = name.rsplit(".", 1)[0]
        if calls.get(name):
            return name
    return _ROOT


def _is_block(modules: dict, name: str) -> bool:
    """Whether `name` is an entry of a `ModuleList`: a block of the residual stream."""
    import torch

    parent = name.rsplit(".", 1)[0] if "." in name else ""
    return isinstance(modules.get(parent), torch.nn.ModuleList)


def _measured_plan(heavy, hot, boundary, limit, caller, modules) -> tuple[set[str], str | None]:
    """
    The modules the measurement keeps in fp32, or why no plan can work: each module with a heavy weight, and for
    each hot module its nearest caller whose own inputs and outputs fit within the headroom. A hot block of the
    residual stream, or the model itself, cannot be kept in fp32 alone: that is a refusal.
    """
    planned = set()
    for name, value in heavy:
        if name == _ROOT:
            return planned, _residual_refusal(name, value)
        planned.add(name)
    for name, value in hot:
        if name == _ROOT or _is_block(modules, name):
            return planned, _residual_refusal(name, value)
        holder = caller(name)
        while holder != _ROOT and boundary.get(holder, 0.0) > limit:
            if _is_block(modules, holder):
                break
            holder = caller(holder)
        if holder == _ROOT or _is_block(modules, holder) and boundary.get(holder, 0.0) > limit:
            return planned, _residual_refusal(holder if holder != _ROOT else name, boundary.get(holder, value))
        planned.add(holder)
    return planned, None


def _validate_and_grow(model, result: PlanResult, names, reference, boundary, order, caller) -> None:
    """Validates `names` and grows the plan after each failure until it passes, is refused or cannot grow."""
    while True:
        share = _weight_share(model.parameters(), [model.get_submodule(name) for name in names])
        if share > MAX_FP32_SHARE:
            result.refusal = (
                f"the plan would keep {share:.0%} of the weights in fp32 (more than {MAX_FP32_SHARE:.0%}): most of "
                "the model does not fit fp16. Run it in bf16 (fp32's range at half the memory) or fp32."
            )
            return
        result.attempts += 1
        validation, watch = _validate(model, names, reference)
        result.modules, result.fp32_weight_share, result.validation = names, share, validation
        if validation["passed"]:
            result.passed = True
            return
        if result.attempts >= MAX_ATTEMPTS:
            result.refusal = (
                f"validation still fails after {result.attempts} attempts (cosine {validation['cosine']:.5f}, top-1 "
                f"agreement {validation['top1_agreement']:.2%}): run the model in bf16 or fp32."
            )
            return
        grown = _grow(names, watch, boundary, order, caller)
        if grown is None:
            result.refusal = (
                "fp16 gives inf/NaN in the model's own code, outside any module that could be kept in fp32: run it "
                "in bf16 or fp32."
            )
            return
        names = _minimal([*names, grown], order)


def _validate(model, names: list[str], reference: tuple) -> tuple[dict, Any]:
    """
    One validation of `model` in fp16 with `names` in fp32 against the fp32 `reference`; when it is not finite, the
    [`ActivationRecorder`] of one more run (else `None`) says where the first inf/NaN appears.
    """
    inputs, expected, is_logits, stats = reference
    with _as_planned_fp16(model, names):
        outputs = _run_padded(model, inputs)  # texts of similar lengths batched: the fast path
        validation = _compare(expected, outputs, is_logits, stats) if outputs is not None else None
        if validation is None or (not validation["passed"] and _padded(inputs)):  # so that padding is not the cause
            outputs, _, _ = _run(model, inputs)
            validation = _compare(expected, outputs, is_logits, stats)
        watch = None
        if not validation.pop("finite"):
            with ActivationRecorder(model) as watch:  # where the first inf/NaN appears, to grow the plan there
                _run(model, inputs, watch)
    return validation, watch


def _nan_last(value: float) -> float:
    return math.inf if math.isnan(value) else value


def _residual_refusal(name: str, value: float) -> str:
    where = "the model's own code" if name == _ROOT else f"`{name}`"
    return (
        f"the residual stream itself leaves fp16's range: {where} carries values up to {value:.3g} (fp16 max "
        f"{FP16_MAX:g}) from block to block, and no set of modules short of the whole model can keep that in fp32. "
        "Run the model in bf16 (fp32's range at half the memory) or fp32."
    )


def _grow(names, watch, boundary, order, caller) -> str | None:
    """
    The module to add after a failed validation, or `None` when nothing can be added. With `watch` (the recorder of
    an fp16 run that gave inf/NaN): the first module, in execution order, whose inputs were finite and whose output
    was not (its code made the inf); else, for the first module that received a non-finite input, the nearest caller
    whose own inputs were finite (its code made it between two calls). Without: the module with the least headroom.
    """
    inside = lambda n: any(n == m or n.startswith(m + ".") for m in names)  # noqa: E731
    if watch is not None:
        finite = lambda value: value is None or math.isfinite(value)  # noqa: E731
        ordered = sorted(watch.calls, key=lambda n: order.get(n, len(order)))
        for name in ordered:
            if name != _ROOT and not inside(name):
                if finite(watch.input_max.get(name)) and not finite(watch.output_max.get(name)):
                    return name
        for name in ordered:
            if not finite(watch.input_max.get(name)):
                holder = caller(name)
                while holder != _ROOT and not finite(watch.input_max.get(holder)):
                    holder = caller(holder)
                return None if holder == _ROOT or inside(holder) else holder
        return None
    candidates = [n for n in boundary if n != _ROOT and not inside(n)]
    if not candidates:
        return None
    return max(candidates, key=lambda n: (boundary[n], -order.get(n, 0)))


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints: plan, write
# ----------------------------------------------------------------------------------------------------------------


def plan_checkpoint(
    path_or_id: str | os.PathLike,
    texts: list[str] | None = None,
    headroom: float = DEFAULT_HEADROOM,
    max_length: int | None = None,
    local_files_only: bool = True,
    use_safetensors: bool = True,
    cache_dir: str | os.PathLike | None = None,
) -> PlanResult:
    """Loads a checkpoint in fp32 on the CPU (as the audit does) and searches; a quarter of `texts` is held out."""
    model, tokenizer = load_audit_model(
        path_or_id, texts, local_files_only=local_files_only, use_safetensors=use_safetensors, cache_dir=cache_dir
    )
    held_out = None
    if texts is not None and tokenizer is not None and len(texts) >= 2:
        split = len(texts) - max(1, len(texts) // 4)
        texts, held_out = texts[:split], texts[split:]
    try:
        return search_fp16_plan(
            model, tokenizer=tokenizer, texts=texts, held_out_texts=held_out, headroom=headroom, max_length=max_length
        )
    except (Fp16PlanError, ValueError):
        raise
    except Exception as e:
        raise Fp16PlanError(
            f"the calibration forward of {os.fspath(path_or_id)} ({type(model).__name__}) failed: "
            f"{type(e).__name__}: {e}"
        ) from e


def _member_json(value: Any, indent: str) -> str:
    """`value` as JSON laid out like the file around it: nested lines indented one step deeper than the key."""
    step = "  " if "\t" not in indent else "\t"
    text = json.dumps(value, indent=len(step) if step != "\t" else "\t", ensure_ascii=False)
    return text.replace("\n", "\n" + indent)


def set_plan_member(text: str, plan: dict) -> str:
    """`text` (a `config.json`) with its top-level `fp16_plan` set to `plan`, laid out like its neighbours, nothing else changed."""
    from ..record.populate import ConfigEditError, _parse_object

    data = _parse_object(text)
    if data.get(FP16_PLAN_FIELD) == plan:
        return text
    members, open_brace, close_brace = _top_level_members(text)
    key = json.dumps(FP16_PLAN_FIELD)
    existing = [m for m in members if m.key == FP16_PLAN_FIELD]
    if existing:
        m = existing[-1]
        indent = m.leading.rsplit("\n", 1)[-1]
        new_text = text[: m.value_start] + _member_json(plan, indent) + text[m.value_end :]
    elif not members:
        new_text = f"{text[: open_brace + 1]}\n  {key}: {_member_json(plan, '  ')}\n{text[close_brace:]}"
    else:
        keys = [m.key for m in members]
        later = [m for m in members if m.key > FP16_PLAN_FIELD] if keys == sorted(keys) else []
        m = later[0] if later else members[-1]
        indent = m.leading.rsplit("\n", 1)[-1]
        value = _member_json(plan, indent)
        if later:
            new_text = text[: m.key_start] + key + m.colon + value + "," + m.leading + text[m.key_start :]
        else:
            new_text = text[: m.value_end] + "," + m.leading + key + m.colon + value + text[m.value_end :]
    new_data = json.loads(new_text)
    if new_data.get(FP16_PLAN_FIELD) != plan or {k: v for k, v in new_data.items() if k != FP16_PLAN_FIELD} != {
        k: v for k, v in data.items() if k != FP16_PLAN_FIELD
    }:
        raise ConfigEditError("internal error: the edited JSON does not round-trip; nothing modified")
    return new_text


def plan_write_problem(config_path: str | os.PathLike, force: bool = False) -> str | None:
    """Why [`write_fp16_plan`] would refuse `config_path` (a Hub cache snapshot without `force`, a link out), or `None`."""
    from ..facts.hub_ids import cache_snapshot_of
    from ..record.populate import link_outside_checkpoint

    path = Path(config_path)
    if cache_snapshot_of(path.parent) is not None:
        if force:
            return None
        return (
            f"{path.parent} is a Hub cache snapshot: writing the plan would make it differ from the Hub revision it "
            "names. Save the model to a directory of your own (`save_pretrained`) and plan that, or pass --force to "
            "replace the snapshot's config.json link with a regular file holding the plan"
        )
    return link_outside_checkpoint(path)


def write_fp16_plan(
    config_path: str | os.PathLike, plan: dict, parts: dict[str, dict] | None = None, force: bool = False
) -> bool:
    """
    Stores `plan` as `fp16_plan` in a `config.json` (and, with `parts` from [`split_plan`], each sub-config's part in
    that sub-config's object), with `set`'s guarantees: only those members change, the file is replaced atomically
    under `set`'s lock and keeps its mode. A Hub cache snapshot is refused unless `force` (then its link is replaced by
    a regular file; the shared blob is not touched). Returns whether the file changed.

    Raises:
        [`ConfigEditError`]: a malformed file, a sub-config it lacks, a snapshot without `force` (nothing modified).
        `OSError`: it cannot be written.
    """
    from ..facts.hub_ids import cache_snapshot_of
    from ..record.populate import ConfigEditError

    path = Path(config_path)
    in_cache = cache_snapshot_of(path.parent) is not None
    problem = plan_write_problem(path, force)
    if problem is not None:
        raise ConfigEditError(problem)
    # as `set` does: the cache's link itself is replaced (its blob may be shared), a user's own link is written through
    target = path if in_cache or not path.is_symlink() else Path(os.path.realpath(path))
    with config_lock(target, timeout=30):
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        body = text[len(bom) :]
        new_body = set_plan_member(body, plan)
        for key, part in (parts or {}).items():
            if not key:
                continue
            members = {m.key: m for m in _top_level_members(new_body)[0]}
            member = members.get(key)
            if member is None or not new_body[member.value_start : member.value_end].lstrip().startswith("{"):
                raise ConfigEditError(f"it has no `{key}` sub-config object to store that sub-model's plan in")
            edited = set_plan_member(new_body[member.value_start : member.value_end], part)
            new_body = new_body[: member.value_start] + edited + new_body[member.value_end :]
        if new_body == body:
            return False
        atomic_write_text(target, bom + new_body)
    return True


__all__ = [
    "Fp16PlanError",
    "length_sweep",
    "DEFAULT_HEADROOM",
    "HELD_OUT_TEXTS",
    "MAX_FP32_SHARE",
    "MAX_RELATIVE_ERROR",
    "MIN_COSINE",
    "MIN_TOP1_AGREEMENT",
    "PlanResult",
    "plan_checkpoint",
    "search_fp16_plan",
    "plan_write_problem",
    "set_plan_member",
    "split_plan",
    "write_fp16_plan",
]
