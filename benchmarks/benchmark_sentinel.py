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
What the non-finite sentinel (`transformers.trained_precision.sentinel`) costs an fp16 forward and a `generate` step.

GPT-2 small's shape (12 layers, hidden 768, GPT-2's vocabulary of 50257 tokens; 124 M parameters, randomly
initialised) is built with a known trained precision and cast to fp16, so the cast attaches the sentinel. Its weights
are drawn with GPT-2's default scale, so its outputs are finite and the sentinel checks every forward (an overflowing
model in `"warn"` mode stops checking after its one warning). Then, in one process, each repeat times the same work
with the sentinel and without it (`remove_sentinel` / `attach_sentinel`), in an order that alternates between repeats:
one forward of a batch of `--seq` tokens, and a greedy `generate` of `--new-tokens` tokens from an 8-token prompt
(its time divided by the number of tokens is "a generate step"). A ratio is the median of the per-repeat ratios (with
sentinel / without, both timed within the same second or two, so a change of the machine's load falls on both), with
its spread (the lowest and highest per-repeat ratio, and the interquartile range). Each repeat also times the work a
second time without the sentinel: that control ratio (without / without) is the noise floor of this machine. Times
are the process's CPU time (`time.process_time`, one torch thread), which other jobs on a shared machine move less
than wall time.

The hook's own cost is also timed apart (`timeit` of the hook on the real outputs: the forward's logits and one
`generate` step's), with the ratio it implies (1 + hook / median time without the sentinel): the same answer without
the timing noise of whole forwards. The machine class is `torch.backends.cpu.get_cpu_capability()`; fp16 matmuls are
emulated on CPUs without AVX512-FP16 or AMX-FP16, which makes the forward slower and the sentinel's share smaller.
`--tiny` uses the tests' tiny GPT-2 instead (vocabulary 64, hidden 32, 3 layers): a forward of a millisecond, where
the hook's fixed Python cost is the largest share it can be. The check reads the logits once, and the forward wrote
them with at least `hidden` multiply-adds each, so its share shrinks as the model grows: `--layers 2 --hidden 128`
shows a shape where the vocabulary outweighs the rest of the model. Usage:

    python benchmarks/benchmark_sentinel.py [--repeats 21] [--threads 1] [--layers 12 --hidden 768] [--tiny]
"""

import argparse
import statistics
import time
import timeit

import torch

from transformers import GPT2Config, GPT2LMHeadModel
from transformers.trained_precision.sentinel import attach_sentinel, find_sentinel, remove_sentinel
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


def run(args) -> None:
    model = build(args)
    vocab, positions = model.config.vocab_size, model.config.n_positions
    ids = torch.randint(0, vocab, (1, min(args.seq, positions)), generator=torch.Generator().manual_seed(0))
    prompt = ids[:, :8]
    new = min(args.new_tokens, positions - 8)

    def forward():
        with torch.no_grad():
            return model(input_ids=ids)

    def generate():
        kwargs = {"max_new_tokens": new, "min_new_tokens": new, "do_sample": False, "pad_token_id": 0}
        return model.generate(prompt, **kwargs)

    for _ in range(2):  # warm-up, both ways
        forward(), generate()
    times = {(work, arm): [] for work in ("forward", "step") for arm in ARMS}
    for repeat in range(args.repeats):
        for arm in ARMS[repeat % 3 :] + ARMS[: repeat % 3]:  # the order rotates between repeats
            attach_sentinel(model) if arm == "with" else remove_sentinel(model)
            times[("forward", arm)].append(timed(forward))
            times[("step", arm)].append(timed(generate) / new)
    attach_sentinel(model)
    report(model, args, times, forward, prompt)


def hook_cost(model, output) -> float:
    """Seconds per call of the sentinel's hook on `output`, timed on its own."""
    sentinel = find_sentinel(model)
    number = 200
    return min(timeit.repeat(lambda: sentinel(model, (), output), number=number, repeat=5)) / number


def report(model, args, times, forward, prompt) -> None:
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(
        f"machine class: {torch.backends.cpu.get_cpu_capability()} (torch.backends.cpu.get_cpu_capability()), "
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)"
    )
    print(
        f"model: GPT-2, {model.config.n_layer} layers, hidden {model.config.n_embd}, vocab {model.config.vocab_size} "
        f"({params:.2f} M parameters), fp16 weights; {args.repeats} interleaved repeats, CPU time"
    )
    with torch.no_grad():
        step_logits = model(input_ids=prompt).logits[:, -1:]  # what a generate step's forward returns
    outputs = {"forward": forward().logits, "step": step_logits}
    print(f"{'':24}{'without':>12}{'with':>12}   median of per-repeat ratios (range, IQR)")
    for work, label in (("forward", f"fp16 forward ({outputs['forward'].shape[1]} tok)"), ("step", "generate step")):
        off = times[(work, "without")]
        ratios = [a / b for a, b in zip(times[(work, "with")], off)]
        control = [a / b for a, b in zip(times[(work, "control")], off)]
        without, with_ = statistics.median(off) * 1e3, statistics.median(times[(work, "with")]) * 1e3
        print(f"{label:24}{without:>10.2f}ms{with_:>10.2f}ms   with/without {spread(ratios)}")
        print(f"{'':48}   control: without/without {spread(control)}")
        cost = hook_cost(model, outputs[work])
        implied = 1 + cost / statistics.median(off)
        verdict = "ok" if implied <= GOAL else "OVER"
        alone = f"hook alone: {cost * 1e6:.1f} us per call -> implied ratio {implied:.4f}"
        print(f"{'':24}{alone} (goal <= {GOAL}: {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=4)
    parser.add_argument("--tiny", action="store_true", help="the tests' tiny GPT-2 (vocabulary 64): the worst case")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.set_verbosity_error()
    run(args)


if __name__ == "__main__":
    main()
