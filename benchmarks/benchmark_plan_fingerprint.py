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
Load overhead of binding evidence (a stored fp16 plan, a finished run, a publisher reference) to its weights.

An fp16 load of a checkpoint that stores such evidence computes the weights' digest (`weights_fingerprint`, a SHA-256
of every value of every weight tensor) to compare it with the stored one. For GPT-2 models of growing size
(random init, saved to a temporary directory), this prints the median `from_pretrained(dtype=torch.float16)` time,
the median fingerprint time on the loaded model, measured interleaved in one process, and the ratio
1 + fingerprint / load, held to the goal of <= 1.01. Usage:

    python benchmarks/benchmark_plan_fingerprint.py [--repeats 7] [--threads 1]
"""

import argparse
import platform
import statistics
import tempfile
import time

import torch

from transformers import GPT2Config, GPT2LMHeadModel
from transformers.trained_precision.fp16_plan import weights_fingerprint


GOAL = 1.01
SIZES = {"GPT-2 3x32": (3, 32), "GPT-2 8x256": (8, 256), "GPT-2 small 12x768 (124M)": (12, 768)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"machine: {platform.processor() or platform.machine()}, cpu capability "
        f"{torch.backends.cpu.get_cpu_capability()}; torch {torch.__version__}, {args.threads} thread(s)"
    )
    print("| model | tensors | fp16 load ms | fingerprint ms | 1 + fingerprint / load |")
    print("|---|---|---|---|---|")
    for name, (layers, width) in SIZES.items():
        torch.manual_seed(0)
        config = GPT2Config(n_layer=layers, n_embd=width, n_head=4, n_positions=1024)
        with tempfile.TemporaryDirectory() as path:
            GPT2LMHeadModel(config).save_pretrained(path)
            loads, prints = [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                model = GPT2LMHeadModel.from_pretrained(path, dtype=torch.float16)
                loads.append(time.perf_counter() - start)
                start = time.perf_counter()
                weights_fingerprint(model, ["transformer.h.1.mlp"])
                prints.append(time.perf_counter() - start)
            tensors = sum(1 for _ in model.parameters())
        load, fingerprint = statistics.median(loads), statistics.median(prints)
        print(f"| {name} | {tensors} | {load * 1e3:.1f} | {fingerprint * 1e3:.2f} | {1 + fingerprint / load:.4f} |")
    print(f"(goal: <= {GOAL})")


if __name__ == "__main__":
    main()
