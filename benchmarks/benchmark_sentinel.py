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
What the non-finite sentinel (`transformers.trained_precision.sentinel`) costs an fp16 forward and a `generate` step,
eager and compiled, side by side in one run.

GPT-2 small's shape (12 layers, hidden 768, GPT-2's vocabulary of 50257 tokens; 124 M parameters, randomly
initialised) is built with a known trained precision and cast to fp16, so the cast attaches the sentinel, which is
taken off (`remove_sentinel`) and put back (the same hook objects, so that a compiled forward finds both states among
its compiled entries and never recompiles) between the arms of a repeat. Its weights are drawn with GPT-2's default
scale, so its outputs are finite and the sentinel checks every forward (an overflowing model in `"warn"` mode stops
checking after its one warning). Each repeat times the same work with the sentinel and without it, in an order that
alternates between repeats:

- one eager forward of a batch of `--seq` tokens, and a greedy `generate` of `--new-tokens` tokens from an 8-token
  prompt (its time divided by the number of tokens is "a generate step");
- the same forward through `torch.compile(model, backend=--backend)` (inductor by default), where the check runs after
  the compiled graph, and `generate` with `cache_implementation="static"`, which compiles its decoding steps (on a CPU
  only when told to: `CompileConfig._compile_all_devices`).

A ratio is the median of the per-repeat ratios (with sentinel / without, both timed within the same second or two, so
a change of the machine's load falls on both), with its spread (the lowest and highest per-repeat ratio, and the
interquartile range). Each repeat also times the work a second time without the sentinel: that control ratio
(without / without) is the noise floor of this machine. Times are the process's CPU time (`time.process_time`, one
torch thread), which other jobs on a shared machine move less than wall time.

The check's own cost is also timed apart (`timeit` on the real outputs, the forward's logits and one `generate` step's:
the eager pre-hook and hook, or for the compiled rows the check that the compiled code calls after its graph), with the
ratio it implies (1 + check / median time without the sentinel): the same answer without the timing noise of whole
forwards. The machine class is `torch.backends.cpu.get_cpu_capability()` with the CPU's model name; fp16 matmuls are
emulated on CPUs without AVX512-FP16 or AMX-FP16, which makes the forward slower and the sentinel's share smaller (an
fp16 forward of GPT-2 small's shape takes about 12 s on one AVX2 core, so use a smaller shape there).
`--tiny` uses the tests' tiny GPT-2 instead (vocabulary 64, hidden 32, 3 layers): a forward of a millisecond, where
the hook's fixed Python cost is the largest share it can be. The check reads the logits once, and the forward wrote
them with at least `hidden` multiply-adds each, so its share shrinks as the model grows: `--layers 2 --hidden 256`
shows a shape where the vocabulary outweighs the rest of the model. Usage:

    python benchmarks/benchmark_sentinel.py [--repeats 21] [--threads 1] [--layers 12 --hidden 768] [--tiny]
        [--backend inductor] [--eager-only]
"""

import argparse
import statistics
import time
import timeit

import torch
from torch._dynamo.utils import counters

from transformers import CompileConfig, GPT2Config, GPT2LMHeadModel
from transformers.trained_precision.sentinel import _COMPILED_CHECK, _hook, find_sentinel, remove_sentinel
from transformers.trained_precision.testing_utils import TINY_GPT2
from transformers.utils import logging


GOAL = 1.01


def build(args) -> GPT2LMHeadModel:
    if args.tiny:
        config = GPT2Config(**TINY_GPT2)
        config.initializer_range = 0.02  # finite in fp16: the sentinel checks every forward
    else:
        config = GPT2Config(
            vocab_size=50257, n_layer=args.layers, n_embd=args.hidden, n_head=max(args.hidden // 64, 2)
        )
    config.trained_precision = "fp16"  # known and safe in fp16: no load warning, and the cast attaches the sentinel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval().half()
    if find_sentinel(model) is None:
        raise SystemExit("the fp16 cast did not attach the sentinel")
    return model


def timed(fn) -> float:
    """CPU seconds of `fn()`: unlike wall time, other processes on a busy machine barely move it (one thread)."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def spread(ratios: list[float]) -> str:
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return f"{statistics.median(ratios):.4f} (range {min(ratios):.4f}-{max(ratios):.4f}, IQR {q[0]:.4f}-{q[2]:.4f})"


# the arms of every repeat: with the sentinel, without it, and without it again (the control: the noise floor)
ARMS = ("with", "without", "control")


def workloads(args, model) -> dict:
    """Per work, the call to time: eager and compiled, a forward and a `generate` (divided by its steps)."""
    vocab, positions = model.config.vocab_size, model.config.n_positions
    ids = torch.randint(0, vocab, (1, min(args.seq, positions)), generator=torch.Generator().manual_seed(0))
    prompt, new = ids[:, :8], min(args.new_tokens, positions - 8)
    compile_config = CompileConfig(backend=args.backend, mode="default" if args.backend == "inductor" else None)
    compile_config._compile_all_devices = True  # generate compiles its decoding steps on a GPU only, unless told
    kwargs = {"max_new_tokens": new, "min_new_tokens": new, "do_sample": False, "pad_token_id": 0}
    compiled = torch.compile(model, backend=args.backend)

    def forward(module):
        def call():
            with torch.no_grad():
                return module(input_ids=ids)

        return call

    def generate(**extra):
        return lambda: model.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs, **extra)

    works = {f"eager fp16 forward ({ids.shape[1]} tok)": (forward(model), 1), "eager generate step": (generate(), new)}
    if not args.eager_only:
        static = {"cache_implementation": "static", "compile_config": compile_config}
        works[f"compiled fp16 forward ({ids.shape[1]} tok)"] = (forward(compiled), 1)
        works["compiled generate step"] = (generate(**static), new)
    return works


def run(args) -> None:
    model = build(args)
    hooked = [(module, find_sentinel(module)) for module in model.modules() if find_sentinel(module) is not None]

    def arm(name: str) -> None:
        remove_sentinel(model)
        if name == "with":
            for module, sentinel in hooked:
                _hook(module, sentinel)

    works = workloads(args, model)
    for call, _ in works.values():  # warm-up (and compilation), both ways
        for name in ("with", "without", "with", "without"):
            arm(name)
            call()
    graphs = dict(counters["stats"]).get("unique_graphs", 0)
    times = {(work, name): [] for work in works for name in ARMS}
    for repeat in range(args.repeats):
        for work, (call, steps) in works.items():
            for name in ARMS[repeat % 3 :] + ARMS[: repeat % 3]:  # the order rotates between repeats
                arm(name)
                times[(work, name)].append(timed(call) / steps)
    arm("with")
    recompiled = dict(counters["stats"]).get("unique_graphs", 0) - graphs
    report(model, args, times, works)
    print(f"graphs compiled while timing: {recompiled} (0: the timed calls never recompiled)")


def hook_cost(model, output, compiled: bool) -> float:
    """
    Seconds per call of the sentinel on `output`: the eager hook, or the check a compiled forward calls after its graph
    (through `torch.compiler.disable`, as the compiled code calls it).
    """
    sentinel = find_sentinel(model)
    if compiled:
        check = _COMPILED_CHECK[0]

        def call():
            check(sentinel.key, output)
    else:

        def call():
            sentinel.enter(model, ())
            sentinel(model, (), output)

    number = 200
    return min(timeit.repeat(call, number=number, repeat=5)) / number


def machine() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            name = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "?")
    except OSError:
        name = "?"
    return f"{torch.backends.cpu.get_cpu_capability()} ({name})"


def report(model, args, times, works) -> None:
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"machine class: {machine()}, torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    print(
        f"model: GPT-2, {model.config.n_layer} layers, hidden {model.config.n_embd}, vocab {model.config.vocab_size} "
        f"({params:.2f} M parameters), fp16 weights; compiled with backend={args.backend!r}; {args.repeats} "
        "interleaved repeats, CPU time"
    )
    with torch.no_grad():
        logits = model(input_ids=torch.zeros((1, args.seq), dtype=torch.long)).logits
    print(f"{'':34}{'without':>12}{'with':>12}   median of per-repeat ratios (range, IQR)")
    for work in works:
        off = times[(work, "without")]
        ratios = [a / b for a, b in zip(times[(work, "with")], off)]
        control = [a / b for a, b in zip(times[(work, "control")], off)]
        without, with_ = statistics.median(off) * 1e3, statistics.median(times[(work, "with")]) * 1e3
        print(f"{work:34}{without:>10.2f}ms{with_:>10.2f}ms   with/without {spread(ratios)}")
        print(f"{'':58}   control: without/without {spread(control)}")
        output = logits if "forward" in work else logits[:, -1:]  # a generate step's forward returns one row
        cost = hook_cost(model, output, compiled=work.startswith("compiled"))
        implied = 1 + cost / statistics.median(off)
        verdict = "ok" if implied <= GOAL else "OVER"
        print(
            f"{'':34}check alone: {cost * 1e6:.1f} us per call -> implied ratio {implied:.4f} "
            f"(goal <= {GOAL}: {verdict})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=4)
    parser.add_argument("--backend", default="inductor", help="torch.compile's backend for the compiled rows")
    parser.add_argument("--eager-only", action="store_true", help="leave out the compiled rows")
    parser.add_argument("--tiny", action="store_true", help="the tests' tiny GPT-2 (vocabulary 64): the worst case")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.set_verbosity_error()
    run(args)


if __name__ == "__main__":
    main()
