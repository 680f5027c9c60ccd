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
What the forward's fp16 check (`transformers.trained_precision.guard.sentinel`) costs, side by side in one run: with nothing
turned on (an fp32 model of unknown precision, no autocast: the check's wrapper only looks whether the forward computed
in fp16), and when it checks (an fp16 forward and a `generate` step), eager and compiled.

Each model class's `forward` carries the check from the class's creation; the "without" arm gives every
`PreTrainedModel` module of the model its class's unwrapped forward as an instance attribute (`forward.__wrapped__`,
upstream's own forward with its decorators), which is what upstream runs, and the "with" arm takes it off again. A
compiled forward guards on that attribute, so both arms stay among its compiled entries and never recompile.

- "nothing on": the tests' tiny GPT-2 (vocabulary 64, hidden 32, 3 layers: a forward of about a millisecond, the
  largest share the wrapper's fixed Python cost can be) in fp32, unknown precision, the default mode; the goal is a
  ratio of at most 1.01 against upstream's forward.
- "checked": GPT-2 small's shape (12 layers, hidden 768, GPT-2's vocabulary of 50257 tokens; 124 M parameters, random
  weights with GPT-2's default scale, so its outputs are finite and every forward is checked), trained precision
  `"fp16"`, cast to fp16: one eager forward of `--seq` tokens and a greedy `generate` of `--new-tokens` tokens from an
  8-token prompt (its time divided by the number of tokens is "a generate step"); the same through
  `torch.compile(model, backend=--backend)`, where the check runs after the graph, and `generate` with
  `cache_implementation="static"`, which compiles its decoding steps (on a CPU only when told to).

A ratio is the median of the per-repeat ratios (with / without, both timed within the same second or two, so a change
of the machine's load falls on both), with its spread. Each repeat also times the work a second time without the
check: that control ratio (without / without) is the noise floor of this machine. Times are the process's CPU time
(`time.process_time`, one torch thread), which other jobs on a shared machine move less than wall time. The check's
own cost is also timed apart (`timeit` on the real outputs), with the ratio it implies (1 + check / median time
without). fp16 matmuls are emulated on CPUs without AVX512-FP16 or AMX-FP16: use `--tiny` (the tiny GPT-2 for the
checked rows too) or a smaller shape there. Usage:

    python benchmarks/benchmark_sentinel.py [--repeats 21] [--threads 1] [--layers 12 --hidden 768] [--tiny]
        [--backend inductor] [--eager-only]
    python benchmarks/benchmark_sentinel.py --llama-1b --seq 16 --repeats 3   # ~1.1B parameters, about 2.5 GB
"""

import argparse
import os
import statistics
import time
import timeit
from types import MethodType

import torch
from torch._dynamo.utils import counters

from transformers import CompileConfig, GPT2Config, GPT2LMHeadModel
from transformers.modeling_utils import PreTrainedModel
from transformers.trained_precision.guard import sentinel
from transformers.trained_precision.testing_utils import TINY_GPT2
from transformers.utils import logging


GOAL = 1.01


def build(args) -> GPT2LMHeadModel:
    if args.tiny:
        config = GPT2Config(**TINY_GPT2)
        config.initializer_range = 0.02  # finite in fp16: every forward is checked
    else:
        config = GPT2Config(
            vocab_size=50257, n_layer=args.layers, n_embd=args.hidden, n_head=max(args.hidden // 64, 2)
        )
    config.trained_precision = "fp16"  # known and safe in fp16: no load warning, and warn mode checks every forward
    torch.manual_seed(0)
    return GPT2LMHeadModel(config).eval().half()


def nothing_on() -> GPT2LMHeadModel:
    """The tiny GPT-2 in fp32, its precision unknown: nothing is turned on."""
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(**TINY_GPT2)).eval()


def set_arm(models, name: str) -> None:
    """`"with"`: the class's checked forward; otherwise upstream's forward, unwrapped, on every model module."""
    for model in models:
        for module in model.modules():
            if not isinstance(module, PreTrainedModel):
                continue
            module.__dict__.pop("forward", None)
            if name != "with":
                module.forward = MethodType(type(module).forward.__wrapped__, module)


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


def workloads(args, model) -> tuple[dict, tuple]:
    """Per work, the call to time: eager and compiled, a forward and a `generate` (divided by its steps)."""
    vocab, positions = model.config.vocab_size, model.config.n_positions
    ids = torch.randint(0, vocab, (1, min(args.seq, positions)), generator=torch.Generator().manual_seed(0))
    prompt, new = ids[:, :8], min(args.new_tokens, positions - 8)
    compile_config = CompileConfig(backend=args.backend, mode="default" if args.backend == "inductor" else None)
    compile_config._compile_all_devices = True  # generate compiles its decoding steps on a GPU only, unless told
    kwargs = {"max_new_tokens": new, "min_new_tokens": new, "do_sample": False, "pad_token_id": 0}
    compiled = torch.compile(model, backend=args.backend)

    def forward(module, tokens):
        def call():
            with torch.no_grad():
                return module(input_ids=tokens)

        return call

    def generate(**extra):
        return lambda: model.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs, **extra)

    off = nothing_on()
    off_ids = ids[:, : min(args.seq, off.config.n_positions)] % off.config.vocab_size
    works = {
        f"nothing on: eager fp32 forward ({off_ids.shape[1]} tok)": (forward(off, off_ids), 1),
        f"eager fp16 forward ({ids.shape[1]} tok)": (forward(model, ids), 1),
        "eager generate step": (generate(), new),
    }
    if not args.eager_only:
        static = {"cache_implementation": "static", "compile_config": compile_config}
        works[f"nothing on: compiled fp32 forward ({off_ids.shape[1]} tok)"] = (
            forward(torch.compile(off, backend=args.backend), off_ids),
            1,
        )
        works[f"compiled fp16 forward ({ids.shape[1]} tok)"] = (forward(compiled, ids), 1)
        works["compiled generate step"] = (generate(**static), new)
    return works, (model, off)


def run(args) -> None:
    model = build(args)
    works, models = workloads(args, model)
    for call, _ in works.values():  # warm-up (and compilation), both ways
        for name in ("with", "without", "with", "without"):
            set_arm(models, name)
            call()
    graphs = dict(counters["stats"]).get("unique_graphs", 0)
    times = {(work, name): [] for work in works for name in ARMS}
    for repeat in range(args.repeats):
        for work, (call, steps) in works.items():
            for name in ARMS[repeat % 3 :] + ARMS[: repeat % 3]:  # the order rotates between repeats
                set_arm(models, name)
                times[(work, name)].append(timed(call) / steps)
    set_arm(models, "with")
    recompiled = dict(counters["stats"]).get("unique_graphs", 0) - graphs
    report(models, args, times, works)
    print(f"graphs compiled while timing: {recompiled} (0: the timed calls never recompiled)")


def run_llama_1b(args) -> None:
    """
    `--llama-1b`: one eager fp16 forward of `--seq` tokens of TinyLlama-1.1B's layout (22 layers, hidden 2048, vocabulary
    32000; random weights, built in fp16: about 2.2 GB), with the check and without it, and the check alone.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4
    )
    config.trained_precision = "fp16"
    torch.manual_seed(0)
    model = LlamaForCausalLM._from_config(config, dtype=torch.float16).eval()
    ids = torch.randint(0, config.vocab_size, (1, args.seq), generator=torch.Generator().manual_seed(0))

    def call():
        with torch.no_grad():
            return model(input_ids=ids)

    times = {name: [] for name in ARMS}
    output = call()  # warm-up
    for repeat in range(args.repeats):
        for name in ARMS[repeat % 3 :] + ARMS[: repeat % 3]:
            set_arm([model], name)
            times[name].append(timed(call))
    set_arm([model], "with")
    params = sum(p.numel() for p in model.parameters()) / 1e9
    print(f"machine class: {machine()}, torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    print(f"Llama, 22 layers, hidden 2048, vocab 32000 ({params:.2f} B parameters), fp16 weights, {args.seq} tokens")
    base = times["without"]
    ratios = [a / b for a, b in zip(times["with"], base)]
    control = [a / b for a, b in zip(times["control"], base)]
    cost = check_cost(model, {"logits": output.logits}, compiled=False)
    print(f"eager fp16 forward: without {statistics.median(base):.2f} s CPU, with/without {spread(ratios)}")
    print(f"  control: without/without {spread(control)}")
    print(f"  check alone: {cost * 1e6:.1f} us -> implied ratio {1 + cost / statistics.median(base):.6f}")


def check_cost(model, output, compiled: bool) -> float:
    """
    Seconds per call of the check on `output`: the eager checks (the model's and its base model's, as a forward runs
    both), or the one a compiled forward calls after its graph (through `torch.compiler.disable`, as compiled code does).
    """
    if compiled:
        facts, check = sentinel._traced_facts(model, output), sentinel._compiled_check()

        def call():
            check(*facts)
    else:  # eagerly the base model checks its own output too: its last hidden state
        base = model.base_model
        rows = next(iter(output.values())).shape[:-1] if isinstance(output, dict) else (1, 1)
        hidden = {"last_hidden_state": torch.zeros(*rows, model.config.hidden_size, dtype=model.dtype)}

        def call():
            if torch._C._is_any_autocast_enabled() or sentinel._fp16_weights(model):
                sentinel._check(model, output, (), {})
            if base is not model and (torch._C._is_any_autocast_enabled() or sentinel._fp16_weights(base)):
                sentinel._check(base, hidden, (), {})

    number = 200
    return min(timeit.repeat(call, number=number, repeat=5)) / number


def machine() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            name = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "?")
    except OSError:
        name = "?"
    return f"{torch.backends.cpu.get_cpu_capability()} ({name})"


def report(models, args, times, works) -> None:
    model, off = models
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"machine class: {machine()}, torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    print(
        f"checked model: GPT-2, {model.config.n_layer} layers, hidden {model.config.n_embd}, vocab "
        f"{model.config.vocab_size} ({params:.2f} M parameters), fp16 weights; nothing-on model: the tiny GPT-2 in "
        f"fp32; compiled with backend={args.backend!r}; {args.repeats} interleaved repeats, CPU time"
    )
    with torch.no_grad():
        logits = model(input_ids=torch.zeros((1, args.seq), dtype=torch.long)).logits
        off_output = off(input_ids=torch.zeros((1, 16), dtype=torch.long))
    print(f"{'':44}{'without':>12}{'with':>12}   median of per-repeat ratios (range, IQR)")
    for work in works:
        base = times[(work, "without")]
        ratios = [a / b for a, b in zip(times[(work, "with")], base)]
        control = [a / b for a, b in zip(times[(work, "control")], base)]
        without, with_ = statistics.median(base) * 1e3, statistics.median(times[(work, "with")]) * 1e3
        print(f"{work:44}{without:>10.3f}ms{with_:>10.3f}ms   with/without {spread(ratios)}")
        print(f"{'':68}   control: without/without {spread(control)}")
        if work.startswith("nothing on"):
            cost = check_cost(off, off_output, compiled=False)  # the wrapper's test alone: nothing computed in fp16
        else:
            output = {"logits": logits if "forward" in work else logits[:, -1:]}  # a generate step: one row
            cost = check_cost(model, output, compiled=work.startswith("compiled"))
        implied = 1 + cost / statistics.median(base)
        verdict = "ok" if implied <= GOAL else "OVER"
        print(
            f"{'':44}check alone: {cost * 1e6:.2f} us per call -> implied ratio {implied:.4f} "
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
    parser.add_argument(
        "--llama-1b", action="store_true", help="only an eager fp16 forward at TinyLlama-1.1B's layout"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.set_verbosity_error()
    os.environ.pop("TRANSFORMERS_TRAINED_PRECISION_CHECK", None)  # the default mode: warn
    if args.llama_1b:
        run_llama_1b(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
