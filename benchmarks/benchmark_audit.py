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
Overhead of the activation audit (`transformers precision --audit`) against a plain forward.

Both run side by side in one process on the same random-init models and the same inputs, in fp32 on the CPU, with
`torch.no_grad()`; each timing is the median of `--repeats` interleaved runs over all calibration sequences. The goal
is an overhead ratio <= 2x. One thread by default: on a shared machine multi-threaded CPU timings are dominated by
oversubscription noise. Usage:

    python benchmarks/benchmark_audit.py [--repeats 7] [--seq-len 128] [--samples 5] [--threads 1]
"""

import argparse
import statistics
import time

import torch

from transformers import BertConfig, BertModel, GPTNeoConfig, GPTNeoForCausalLM, T5Config, T5ForConditionalGeneration
from transformers.trained_precision.plan.audit import _forward_kwargs, audit_activations


GOAL = 2.0


def models():
    """Small but not toy models: the per-module hook cost matters most when the modules are small."""
    yield (
        "t5 (d_model=256, 4+4 layers)",
        T5ForConditionalGeneration(
            T5Config(vocab_size=1024, d_model=256, d_kv=32, d_ff=1024, num_layers=4, num_heads=8)
        ),
    )
    yield (
        "gpt-neo (hidden=256, 4 layers)",
        GPTNeoForCausalLM(
            GPTNeoConfig(
                vocab_size=1024,
                hidden_size=256,
                num_layers=4,
                num_heads=8,
                attention_types=[[["global", "local"], 2]],
                max_position_embeddings=512,
            )
        ),
    )
    yield (
        "bert (hidden=256, 4 layers)",
        BertModel(
            BertConfig(
                vocab_size=1024, hidden_size=256, num_hidden_layers=4, num_attention_heads=8, intermediate_size=1024
            )
        ),
    )


def plain(model, batches):
    with torch.no_grad():
        for batch in batches:
            model(**_forward_kwargs(model, batch))


def audited(model, batches):
    audit_activations(model, inputs=batches)


def timed(fn, model, batches):
    start = time.perf_counter()
    fn(model, batches)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.samples} x {args.seq_len} tokens")
    print(f"{'model':<34} {'modules':>8} {'plain (ms)':>11} {'audit (ms)':>11} {'ratio':>7}")
    worst = 0.0
    for name, model in models():
        model.eval()
        batches = [
            {
                "input_ids": torch.randint(0, model.config.vocab_size, (1, args.seq_len)),
                "attention_mask": torch.ones(1, args.seq_len, dtype=torch.long),
            }
            for _ in range(args.samples)
        ]
        plain(model, batches)  # warm-up
        audited(model, batches)
        # interleaved, so that load from other processes hits both alike
        plain_times, audit_times = [], []
        for _ in range(args.repeats):
            plain_times.append(timed(plain, model, batches))
            audit_times.append(timed(audited, model, batches))
        t_plain, t_audit = statistics.median(plain_times), statistics.median(audit_times)
        ratio = t_audit / t_plain
        worst = max(worst, ratio)
        modules = sum(1 for _ in model.modules())
        print(f"{name:<34} {modules:>8} {t_plain * 1e3:>11.1f} {t_audit * 1e3:>11.1f} {ratio:>6.2f}x")
    status = "meets" if worst <= GOAL else "MISSES"
    print(f"worst audit overhead: {worst:.2f}x ({status} the <= {GOAL:g}x goal)")


if __name__ == "__main__":
    main()
