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
What the cast check costs a cast with nothing turned on, measured in one process, paired.

`benchmark_trainer_overhead.py` compares the fork with upstream in two processes; each fresh process has its own
memory layout, which moves a 0.5 ms cast by 1-2% either way, so a few microseconds need many runs there. Here both
sides live in one process: two models built from the same config (the tiny GPT-2 of that benchmark), one of the
fork's classes and one whose classes (`GPT2LMHeadModel` and its inner `GPT2Model`) are subclasses with upstream's
`_apply` (`nn.Module._apply`: upstream's `PreTrainedModel` has no override). Each cast of one is followed by the same
cast of the other, in alternating order, and the ratio of each pair is taken; what differs is the override and the
check it runs (`trained_precision.plan.fp16_plan.fp16_plan_apply`). `--control` gives both models subclasses of the fork's
classes: how far that stays from 1.000 is this method's own bias.

    python benchmarks/benchmark_cast_overhead.py [--pairs 3000] [--control] [--gpt2-small]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_trainer_overhead import machine_class, tiny_config  # noqa: E402


CASTS = ("half", "to_fp16", "float")


def _models(control: bool, gpt2_small: bool):
    import torch

    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

    config = GPT2Config() if gpt2_small else tiny_config()
    checked, other = GPT2LMHeadModel(config), GPT2LMHeadModel(config)
    extra = {} if control else {"_apply": torch.nn.Module._apply}
    other.__class__ = type("OtherGPT2LMHeadModel", (GPT2LMHeadModel,), extra)
    other.transformer.__class__ = type("OtherGPT2Model", (GPT2Model,), extra)
    return checked, other


def measure(pairs: int, control: bool, gpt2_small: bool = False) -> dict:
    """Per cast kind: the median paired ratio checked / other, the median paired difference (us) and other's time (ms)."""
    import torch

    torch.set_num_threads(1)
    checked, other = _models(control, gpt2_small)
    casts = {
        "half": lambda m: m.half(),
        "to_fp16": lambda m: m.to(torch.float16),
        "float": lambda m: m.float(),
    }
    ratios = {key: [] for key in CASTS}
    diffs = {key: [] for key in CASTS}
    base = {key: [] for key in CASTS}
    for i in range(pairs):
        order = (checked, other) if i % 2 else (other, checked)
        for key in CASTS:
            if key == "float":  # each cast changes the dtype: the fp16 casts start from fp32, `.float()` from fp16
                continue
            for cast_key in (key, "float"):
                took = {}
                for model in order:
                    start = time.process_time()
                    casts[cast_key](model)
                    took[model is checked] = time.process_time() - start
                ratios[cast_key].append(took[True] / took[False])
                diffs[cast_key].append((took[True] - took[False]) * 1e6)
                base[cast_key].append(took[False] * 1e3)
    skip = pairs // 10  # the first pairs warm caches and allocators up
    return {
        key: {
            "ratio": statistics.median(ratios[key][skip:]),
            "us": statistics.median(diffs[key][skip:]),
            "other_ms": statistics.median(base[key][skip:]),
        }
        for key in CASTS
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3000, help="paired casts of each kind")
    parser.add_argument("--control", action="store_true", help="both sides the fork's classes: this method's bias")
    parser.add_argument(
        "--gpt2-small", action="store_true", help="GPT-2 small's size (124M parameters) instead of the tiny model"
    )
    args = parser.parse_args()
    from transformers.utils import logging

    logging.set_verbosity_error()
    result = measure(args.pairs, args.control, args.gpt2_small)
    machine = machine_class()
    print(
        f"machine: {machine['cpu']}, {machine['cores']} cores, torch cpu capability {machine['cpu_capability']}; "
        f"torch {machine['torch']}, Python {machine['python']}, load average {machine['load_average']:.2f}"
    )
    against = "the fork's classes again (control)" if args.control else "upstream's nn.Module._apply"
    model = "GPT-2 small (124M parameters)" if args.gpt2_small else "a tiny GPT-2 (2 layers, width 64)"
    print(
        f"the fork's cast vs {against}: {model}, {args.pairs} pairs of each kind, one process, CPU time, one torch "
        "thread"
    )
    print(f"{'cast':<26} {'other ms':>9} {'ratio':>7} {'difference':>12}")
    labels = {"half": "model.half()", "to_fp16": "model.to(torch.float16)", "float": "model.float()"}
    for key in CASTS:
        r = result[key]
        print(f"{labels[key]:<26} {r['other_ms']:>9.3f} {r['ratio']:>7.3f} {r['us']:>9.1f} us")


if __name__ == "__main__":
    main()
