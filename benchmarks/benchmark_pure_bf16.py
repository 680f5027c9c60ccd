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
Pure-bf16 training benchmark (`make bench`): fp32 vs pure bf16 + torch AdamW vs pure bf16 + optimi AdamW (Kahan) vs
pure bf16 + torchao 8-bit AdamW with stochastic rounding.

The three runs of `examples/pure_bf16_demo.py`, on a larger GPT-Neo and for more steps, plus bf16 mixed precision
(`bf16=True`: fp32 weights, bf16 compute), side by side in one process (same machine state, same data, same initial
weights), then the ratios:

- eval loss: bf16 + Kahan / fp32 (goal <= 1.005) and plain bf16 / fp32;
- training state (weights + gradients + optimizer state) in bytes per parameter, measured from the live tensors after
  training (goal: 10 for bf16 + Kahan vs 16 for fp32);
- seconds per training step: bf16 / fp32 and Kahan / plain bf16 (the cost of the compensation);
- pure bf16 + torchao `AdamW8bit` with stochastic rounding (`optim="adamw_torch_8bit"`): goal <= 1.01 of fp32's eval
  loss at <= 6.1 bytes/param. Its first step compiles the update (`torch.compile`): the first step of every run is
  timed apart and left out of seconds/step.

Kahan summation with 8-bit moments is not in the table: no library offers it (optimi's optimizers keep bf16/fp32
moments, torchao's low-bit optimizers round stochastically but do not compensate, bitsandbytes does neither).

Step times depend on the machine class, so the benchmark prints whether bf16 is native on this CPU
(`integrations.bf16_hardware.bf16_support`) beside the step-time ratios. The step-time goal (bf16 <= 0.6x fp32) applies
where bf16 is native (AVX512-BF16, AMX-BF16, Arm BF16, CUDA compute capability >= 8.0). Where torch emulates bf16
(AVX2-only CPUs) a bf16 step is several times *slower* than an fp32 one, and the default size takes hours there: use
`--steps 100 --hidden 64 --seq_len 64 --layers 2` (about 4 minutes). The eval-loss and bytes/param ratios hold on both.

Run: `python benchmarks/benchmark_pure_bf16.py [--steps 500 --hidden 192 --layers 6]`. Prints a Markdown table and
the ratios; `--json PATH` also writes them; `--runs fp32,bf16_adamw,bf16_kahan,bf16_8bit_sr` runs a subset (the full
default run takes well over an hour on a CPU without native bf16, where bf16 arithmetic is emulated).
"""

import argparse
import importlib.util
import json
import os
import platform
import tempfile
import time
from datetime import UTC, datetime


HERE = os.path.dirname(os.path.abspath(__file__))


def _load_demo():
    path = os.path.join(HERE, "..", "examples", "pure_bf16_demo.py")
    spec = importlib.util.spec_from_file_location("pure_bf16_demo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def machine() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {torch.get_num_threads()} torch threads, torch {torch.__version__}"


RUN_ORDER = ("fp32", "bf16_amp", "bf16_adamw", "bf16_kahan", "bf16_8bit_sr")
#: printed ratio -> (run, run it is divided by or None, field)
RATIOS = {
    "eval_loss bf16+Kahan / fp32": ("bf16_kahan", "fp32", "eval_loss"),
    "eval_loss plain bf16 / fp32": ("bf16_adamw", "fp32", "eval_loss"),
    "eval_loss bf16+Kahan / bf16 mixed": ("bf16_kahan", "bf16_amp", "eval_loss"),
    "eval_loss bf16 mixed / fp32": ("bf16_amp", "fp32", "eval_loss"),
    "eval_loss bf16+8bit+SR / fp32": ("bf16_8bit_sr", "fp32", "eval_loss"),
    "bytes/param fp32": ("fp32", None, "bytes_per_param"),
    "bytes/param plain bf16": ("bf16_adamw", None, "bytes_per_param"),
    "bytes/param bf16+Kahan": ("bf16_kahan", None, "bytes_per_param"),
    "bytes/param bf16+8bit+SR": ("bf16_8bit_sr", None, "bytes_per_param"),
    "step time bf16 mixed / fp32": ("bf16_amp", "fp32", "seconds_per_step"),
    "step time plain bf16 / fp32": ("bf16_adamw", "fp32", "seconds_per_step"),
    "step time bf16+Kahan / fp32": ("bf16_kahan", "fp32", "seconds_per_step"),
    "step time bf16+Kahan / plain bf16": ("bf16_kahan", "bf16_adamw", "seconds_per_step"),
    "step time bf16+8bit+SR / fp32": ("bf16_8bit_sr", "fp32", "seconds_per_step"),
    "step time bf16+8bit+SR / bf16+Kahan": ("bf16_8bit_sr", "bf16_kahan", "seconds_per_step"),
    "first step bf16+8bit+SR / fp32": ("bf16_8bit_sr", "fp32", "first_step_seconds"),
}


def _time_first_steps_apart(demo) -> list:
    """Makes the demo's step timer keep each run's first step (torchao's compile) out of its seconds/step."""
    timers = []

    class FirstStepApart(demo.StepTimer):
        def __init__(self):
            super().__init__()
            self.first_step = None
            timers.append(self)

        def on_step_end(self, args, state, control, **kwargs):
            if self.first_step is None and self._start is not None:
                self.first_step, self._start = time.perf_counter() - self._start, None
                return
            super().on_step_end(args, state, control, **kwargs)

    demo.StepTimer = FirstStepApart
    return timers


#: Where bf16 is native, a bf16 training step should take at most this fraction of an fp32 one.
STEP_TIME_GOAL = 0.6


def machine_class() -> tuple[bool | None, str]:
    """Whether bf16 compute is native on this CPU, and the line that says so (e.g.
    `"cpu: bf16 emulated (AMD EPYC: AVX2, no AVX512-BF16 or AMX-BF16)"`)."""
    from transformers.integrations.bf16_hardware import bf16_support

    support = bf16_support("cpu")
    return support.native, support.describe()


def step_time_note(native: bool | None) -> str:
    """What the step-time ratios mean on this machine class."""
    if native:
        return f"goal <= {STEP_TIME_GOAL} (bf16 is native here)"
    if native is False:
        return "no goal: bf16 is emulated here"
    return "no goal: bf16 support unknown here"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--seq_len", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=192)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--runs",
        default=",".join(RUN_ORDER),
        help=f"comma-separated subset of {','.join(RUN_ORDER)} (fp32 is always run: the ratios are to it)",
    )
    opts = parser.parse_args()
    chosen = {name.strip() for name in opts.runs.split(",") if name.strip()} | {"fp32"}
    if chosen - set(RUN_ORDER):
        parser.error(
            f"--runs: unknown run(s) {', '.join(sorted(chosen - set(RUN_ORDER)))}; valid: {', '.join(RUN_ORDER)}"
        )

    import torch

    from transformers.utils import logging

    if opts.threads:
        torch.set_num_threads(opts.threads)
    logging.set_verbosity_error()
    demo = _load_demo()
    # a fourth run: bf16 mixed precision (fp32 weights and AdamW, bf16 autocast) separates the cost of bf16 *compute*
    # from the cost of bf16 *weights*
    runs = dict(demo.RUNS)
    runs["bf16_amp"] = {
        "label": "bf16 mixed precision + torch AdamW",
        "kwargs": {"bf16": True, "optim": "adamw_torch"},
    }
    runs["bf16_8bit_sr"] = {
        "label": "pure bf16 + torchao AdamW8bit (stochastic rounding)",
        "kwargs": {"bf16_full_train": True, "bf16_full_train_cast_all": True, "optim": "adamw_torch_8bit"},
    }
    demo.RUNS = {key: runs[key] for key in RUN_ORDER if key in chosen}
    timers = _time_first_steps_apart(demo)

    data = torch.tensor(list(demo.load_text()), dtype=torch.long)
    split = int(0.95 * len(data))
    train_set = demo.ByteWindows(data[:split], opts.seq_len, opts.steps * opts.batch_size, seed=opts.seed)
    eval_set = demo.ByteWindows(data[split:], opts.seq_len, 256, seed=opts.seed, random=False)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        opts.output_dir = tmp
        results = {}
        for name in demo.RUNS:
            results[name] = demo.train_one(name, opts, train_set, eval_set)
            results[name]["first_step_seconds"] = timers[-1].first_step
    fp32 = results["fp32"]
    n_params = sum(p.numel() for p in demo.make_model(opts).parameters())

    ratios = {}
    for key, (a, b, field) in RATIOS.items():
        if a in results and (b is None or b in results):
            ratios[key] = results[a][field] / (results[b][field] if b is not None else 1.0)
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    native, bf16_line = machine_class()
    print(
        f"\nPure-bf16 benchmark, {date}, {machine()}\n{bf16_line}\n"
        f"GPT-Neo {opts.layers} layers, hidden {opts.hidden}, {n_params / 1e6:.2f}M parameters, {opts.steps} steps of "
        f"{opts.batch_size}x{opts.seq_len} bytes, lr {opts.lr:g} (cosine), {time.perf_counter() - started:.0f} s\n"
    )
    print("| run | eval loss | vs fp32 | training state (bytes/param) | seconds/step | first step (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results.values():
        print(
            f"| {r['label']} | {r['eval_loss']:.4f} | {r['eval_loss'] / fp32['eval_loss']:.4f} | "
            f"{r['bytes_per_param']:.2f} | {r['seconds_per_step']:.3f} | {r['first_step_seconds']:.1f} |"
        )
    print()
    goals = {
        "eval_loss bf16+Kahan / fp32": "goal <= 1.005",
        "bytes/param bf16+Kahan": "goal 10 (fp32: 16)",
        "eval_loss bf16+8bit+SR / fp32": "goal <= 1.01",
        "bytes/param bf16+8bit+SR": "goal <= 6.1",
    }
    for key in ratios:
        if key.startswith("step time") and key.endswith("/ fp32"):
            goals[key] = step_time_note(native)
    for key, value in ratios.items():
        print(f"{key:36s} {value:8.4f}  {goals.get(key, '')}")
    if native is False:
        print(
            f"\n{bf16_line}: torch computes bf16 matmuls at a few percent of fp32's speed on this CPU, so bf16 steps "
            f"are slower than fp32 ones here. The step-time goal (<= {STEP_TIME_GOAL}x fp32) is for CPUs with "
            "AVX512-BF16 or AMX-BF16 and for GPUs; the eval-loss and bytes/param ratios do not depend on the machine."
        )
    if opts.json:
        with open(opts.json, "w") as f:
            record = {"date": date, "machine": machine(), "bf16": bf16_line, "bf16_native": native}
            json.dump({**record, "options": vars(opts), "ratios": ratios}, f, indent=2)


if __name__ == "__main__":
    main()
