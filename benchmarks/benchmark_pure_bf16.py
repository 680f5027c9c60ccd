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
Pure-bf16 speed benchmark (`make bench`): the configurations' training steps interleaved in one process, so that their
ratios hold on a shared machine.

Runs, each on the same initial weights (one seed) and the same batches, built by the `Trainer` itself (its cast of the
model, its optimizer with the hooks it adds, its scheduler):

- `fp32`: fp32 weights, torch AdamW;
- `bf16_amp`: `bf16=True`, fp32 weights and AdamW under bf16 autocast (the usual mixed precision, 16 bytes/param);
- `bf16_adamw`: pure bf16 (`bf16_full_train=True`, every parameter cast) with torch AdamW, no compensation;
- `bf16_optimi`: pure bf16 with optimi's own `AdamW(kahan_sum=True)`, as optimi ships it (no `Trainer` hooks);
- `bf16_kahan`: pure bf16 with `optim="adamw_optimi"` (the default of the switch: optimi plus the compensated decay);
- `bf16_8bit_sr`: pure bf16 with torchao `AdamW8bit` and stochastic rounding (`optim="adamw_torch_8bit"`).

Step `i` of every run uses batch `i`; the runs take their step `i` one after the other, in an order rotated at every
step, so a change of the machine's load falls on all of them alike. Forward + backward and the optimizer step are
timed apart; the first step (torchao compiles its update with `torch.compile` there) is reported by itself, the next
`--warmup` steps are left out, and the rest give medians with their interquartile range. A run's ratio to another is
the median of its per-step ratios (both measured within the same few seconds), with their interquartile range.

Then an optimizer-step microbenchmark: the optimizers alone on tensors of the model's parameter shapes with fixed
random gradients, interleaved the same way, in parameters per second. It involves no matmul, so its ratios mean the
same on CPUs where bf16 matmuls are native (AVX512-BF16, AMX-BF16) and where torch emulates them (AVX2 only).

The eval loss after the run is printed for each configuration (and / fp32) as a check that every run trained; the
quality ratios of a full-length run are those of `examples/pure_bf16_demo.py` and benchmarks/README.md.

Run: `python benchmarks/benchmark_pure_bf16.py [--steps 60 --warmup 5 --hidden 192 --layers 6]`; `--runs` picks a
subset, `--json PATH` also writes the numbers. Where bf16 is emulated use `--hidden 64 --seq_len 64 --layers 2`.
"""

import argparse
import importlib.util
import json
import math
import os
import platform
import statistics
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
    return f"{cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, torch {torch.__version__}"


def machine_class() -> tuple[bool | None, str]:
    """Whether bf16 compute is native on this CPU, and the line that says so."""
    from transformers.integrations.bf16_hardware import bf16_support

    support = bf16_support("cpu")
    return support.native, support.describe()


def library_versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("torch-optimi", "torchao"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} missing")
    return ", ".join(found)


#: name -> (label, TrainingArguments keywords, optimizer built outside the Trainer)
RUNS = {
    "fp32": ("fp32 + torch AdamW", {"optim": "adamw_torch"}, None),
    "bf16_amp": ("bf16 mixed precision (bf16=True) + torch AdamW", {"bf16": True, "optim": "adamw_torch"}, None),
    "bf16_adamw": ("pure bf16 + torch AdamW", {"bf16_full_train": True, "optim": "adamw_torch"}, None),
    "bf16_optimi": ("pure bf16 + optimi AdamW (Kahan), optimi alone", {"bf16_full_train": True}, "optimi"),
    "bf16_kahan": ("pure bf16 + adamw_optimi (Kahan, the switch's default)", {"bf16_full_train": True}, None),
    "bf16_8bit_sr": (
        "pure bf16 + torchao AdamW8bit (stochastic rounding; torchao_cpu_adam.AdamW8bit's update on the CPU)",
        {"bf16_full_train": True, "optim": "adamw_torch_8bit"},
        None,
    ),
}
#: printed ratio -> (run, run it is divided by); step time, forward + backward, optimizer step
RATIOS = (
    ("bf16_amp", "fp32"),
    ("bf16_adamw", "fp32"),
    ("bf16_kahan", "fp32"),
    ("bf16_8bit_sr", "fp32"),
    ("fp32", "bf16_amp"),
    ("bf16_adamw", "bf16_amp"),
    ("bf16_optimi", "bf16_amp"),
    ("bf16_kahan", "bf16_amp"),
    ("bf16_8bit_sr", "bf16_amp"),
    ("bf16_kahan", "bf16_optimi"),
    ("bf16_kahan", "bf16_adamw"),
)
#: (run, divided by, timing) -> goal, where bf16 is native (the optimizer-step goal holds everywhere)
GOALS = {
    ("bf16_kahan", "bf16_amp", "step"): ("<= 0.9", 0.9, True),
    ("bf16_8bit_sr", "bf16_amp", "step"): ("<= 1.2", 1.2, True),
    ("bf16_kahan", "bf16_optimi", "optimizer"): ("<= 1.15", 1.15, False),
}
#: Seconds the torchao first step (its compile) should take at most, where bf16 is native.
FIRST_STEP_GOAL = 10.0


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """Median and interquartile range (25th and 75th percentiles) of `values`."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q2, q1, q3


def tenth(values: list[float]) -> float:
    """The 10th percentile of `values`."""
    return statistics.quantiles(values, n=10, method="inclusive")[0] if len(values) > 1 else values[0]


class Run:
    """One configuration: the `Trainer`'s model, optimizer and scheduler, and its timings."""

    def __init__(self, name, opts, demo, total_steps):
        import torch

        from transformers import Trainer, TrainingArguments

        self.name = name
        self.label, kwargs, outside = RUNS[name]
        kwargs = dict(kwargs)
        if kwargs.get("bf16_full_train"):
            kwargs["bf16_full_train_cast_all"] = True
        self.args = TrainingArguments(
            output_dir=os.path.join(opts.output_dir, name),
            max_steps=total_steps,
            per_device_train_batch_size=opts.batch_size,
            learning_rate=opts.lr,
            lr_scheduler_type="cosine",
            warmup_steps=max(1, total_steps // 20),
            weight_decay=opts.weight_decay,
            adam_beta2=0.99,  # optimi's default; the same for every run
            max_grad_norm=1.0,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            seed=opts.seed,
            **kwargs,
        )
        self.model = demo.make_model(opts)  # seeded: the same initial weights for every run
        self.trainer = Trainer(model=self.model, args=self.args)  # casts the model for `bf16_full_train`
        if outside == "optimi":
            import optimi

            groups = self.trainer.get_decay_parameter_names(self.model)
            params = [
                {
                    "params": [p for n, p in self.model.named_parameters() if n in groups],
                    "weight_decay": opts.weight_decay,
                },
                {"params": [p for n, p in self.model.named_parameters() if n not in groups], "weight_decay": 0.0},
            ]
            self.trainer.optimizer = optimi.AdamW(
                params, lr=opts.lr, betas=(0.9, 0.99), eps=self.args.adam_epsilon, kahan_sum=True
            )
            self.trainer.create_scheduler(total_steps, optimizer=self.trainer.optimizer)
        else:
            self.trainer.create_optimizer_and_scheduler(total_steps)
        self.optimizer, self.scheduler = self.trainer.optimizer, self.trainer.lr_scheduler
        self.autocast = bool(self.args.bf16)
        self.times = {"forward_backward": [], "optimizer": [], "step": []}
        self.first_step = None
        self.torch = torch

    def step(self, batch, keep: bool) -> None:
        torch = self.torch
        self.model.train()
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            loss = self.model(**batch).loss
        loss.backward()
        backward_done = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
        optimizer_start = time.perf_counter()
        self.optimizer.step()
        optimizer_done = time.perf_counter()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        done = time.perf_counter()
        if self.first_step is None:
            self.first_step = {"step": done - start, "optimizer": optimizer_done - optimizer_start}
        elif keep:
            self.times["forward_backward"].append(backward_done - start)
            self.times["optimizer"].append(optimizer_done - optimizer_start)
            self.times["step"].append(done - start)

    def eval_loss(self, batches) -> float:
        torch = self.torch
        self.model.eval()
        losses = []
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            for batch in batches:
                losses.append(self.model(**batch).loss.float().item())
        return sum(losses) / len(losses)


def batches_of(dataset, batch_size: int, count: int) -> list[dict]:
    import torch

    batches = []
    for i in range(count):
        items = [dataset[j] for j in range(i * batch_size, (i + 1) * batch_size)]
        batches.append({key: torch.stack([item[key] for item in items]) for key in items[0]})
    return batches


def interleave(runs: list, steps: int, step_fn) -> None:
    """Calls `step_fn(run, i)` for every run at every step `i`, the order rotated by one run per step."""
    for i in range(steps):
        shift = i % len(runs)
        for run in runs[shift:] + runs[:shift]:
            step_fn(run, i)


def paired_ratios(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b)]


# ---------------------------------------------------------------------------------------------------------------------
# The optimizer-step microbenchmark
# ---------------------------------------------------------------------------------------------------------------------

#: name -> label
OPTIMIZER_RUNS = {
    "torch_adamw_fp32": "torch AdamW, fp32 weights (default: foreach)",
    "torch_adamw_fp32_fused": "torch AdamW, fp32 weights, fused=True",
    "torch_adamw_bf16": "torch AdamW, bf16 weights",
    "optimi_kahan": "optimi AdamW (Kahan), bf16 weights, optimi alone",
    "adamw_optimi": "adamw_optimi (optimi + compensated decay), bf16 weights",
    "torchao_8bit": "torchao AdamW8bit, bf16 weights, no stochastic rounding",
    "torchao_8bit_sr_alone": "torchao AdamW8bit + stochastic rounding, bf16 weights, torchao alone",
    "torchao_8bit_sr": "torchao AdamW8bit + stochastic rounding, seeded per step (adamw_torch_8bit), bf16 weights",
    "torchao_8bit_sr_block2048": "the same with optim_args block_size=2048 (torchao's default: 256)",
    "cpu_8bit": "torchao_cpu_adam.AdamW8bit (torchao's state and codes, table-lookup update), bf16 weights, no stochastic rounding",
    "cpu_8bit_sr": "torchao_cpu_adam.AdamW8bit + stochastic rounding, seeded per step (adamw_torch_8bit + bf16_full_train)",
}
#: Left out unless `--optimizers` names them (each compiles torchao's update for every shape again).
EXTRA_OPTIMIZER_RUNS = ("torchao_8bit_sr_block2048",)


def parse_shapes(spec: str) -> list[tuple[int, ...]]:
    """`2048x512*3,512` -> three (2048, 512) shapes and one (512,)."""
    shapes = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        shape, _, count = item.partition("*")
        shapes += [tuple(int(size) for size in shape.split("x"))] * int(count or 1)
    return shapes


def optimizer_microbenchmark(shapes, steps: int, warmup: int, weight_decay: float, seed: int, chosen) -> dict:
    """Seconds per optimizer step (median, quartiles) and parameters per second, interleaved, for each optimizer."""
    import torch

    from transformers.integrations.optimi import prepare_optimi_optimizer
    from transformers.integrations.torchao_optim import synchronize_stochastic_rounding

    generator = torch.Generator().manual_seed(seed)
    initial = [torch.randn(shape, generator=generator) * 0.02 for shape in shapes]
    grads = [[torch.randn(shape, generator=generator) * 1e-3 for shape in shapes] for _ in range(4)]
    n_params = sum(t.numel() for t in initial)

    def params(dtype):
        return [torch.nn.Parameter(t.to(dtype)) for t in initial]

    def groups(ps):  # weight decay on matrices only, as the Trainer does
        return [
            {"params": [p for p in ps if p.ndim > 1], "weight_decay": weight_decay},
            {"params": [p for p in ps if p.ndim <= 1], "weight_decay": 0.0},
        ]

    def build(name):
        common = {"lr": 1e-3, "betas": (0.9, 0.99)}
        if name.startswith("torch_adamw"):
            ps = params(torch.bfloat16 if name.endswith("bf16") else torch.float32)
            return ps, torch.optim.AdamW(groups(ps), fused=name.endswith("fused") or None, **common)
        if name in ("optimi_kahan", "adamw_optimi"):
            import optimi

            ps = params(torch.bfloat16)
            optimizer = optimi.AdamW(groups(ps), kahan_sum=True, **common)
            if name == "adamw_optimi":
                prepare_optimi_optimizer(optimizer)
            return ps, optimizer
        from torchao.optim import AdamW8bit

        from transformers.integrations.torchao_cpu_adam import AdamW8bit as CPUAdamW8bit

        ps = params(torch.bfloat16)
        block_size = 2048 if name.endswith("_block2048") else 256
        optimizer = (CPUAdamW8bit if name.startswith("cpu_") else AdamW8bit)(
            groups(ps), bf16_stochastic_round="_sr" in name, block_size=block_size, **common
        )
        if "_sr" in name and not name.endswith("_alone"):
            synchronize_stochastic_rounding(optimizer, seed=seed)
        return ps, optimizer

    built = {name: build(name) for name in OPTIMIZER_RUNS if name in chosen}
    times = {name: [] for name in built}
    first = {}

    def one_step(name, i):
        ps, optimizer = built[name]
        for p, g in zip(ps, grads[i % len(grads)]):
            p.grad = g.to(p.dtype)
        start = time.perf_counter()
        optimizer.step()
        seconds = time.perf_counter() - start
        if i == 0:
            first[name] = seconds
        elif i > warmup:
            times[name].append(seconds)

    interleave(list(built), steps + warmup + 1, one_step)
    return {
        name: {
            "label": OPTIMIZER_RUNS[name],
            "seconds": quartiles(t),
            "params_per_second": n_params / quartiles(t)[0],
            "first_step": first[name],
            "per_step": t,
        }
        for name, t in times.items()
    }


# ---------------------------------------------------------------------------------------------------------------------


def write_json_atomically(path: str, record: dict) -> None:
    """
    Writes `record` to `path` through a temporary file in the same directory: a reader never sees half a file.
    (`trained_precision.record.populate.atomic_write_text` replaces an existing file only; this one usually creates it.)
    """
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".bench-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=2)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def compare(first_path: str, second_path: str) -> None:
    """The ratios of two runs side by side: does the benchmark repeat on this machine?"""
    with open(first_path) as f:
        first = json.load(f)
    with open(second_path) as f:
        second = json.load(f)
    print(f"first: {first['date']}, {first['machine']}\nsecond: {second['date']}, {second['machine']}\n")
    print("| ratio (median of per-step ratios) | first run | second run | difference |")
    print("|---|---:|---:|---:|")
    worst = 0.0
    for key, value in first["ratios"].items():
        if key in second["ratios"]:
            a, b = value["median"], second["ratios"][key]["median"]
            worst = max(worst, abs(b / a - 1))
            print(f"| {key} | {a:.3f} | {b:.3f} | {100 * (b / a - 1):+.1f}% |")
    print(f"\nLargest difference: {100 * worst:.1f}% (goal <= 5%)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=5, help="steps after the first one left out of the timings")
    parser.add_argument("--optimizer_steps", type=int, default=60, help="timed steps of the optimizer benchmark")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--seq_len", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=192)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: ratios repeat best)")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--cold_compile",
        action="store_true",
        help="compile with an empty inductor cache (a fresh machine's first step); by default inductor's disk cache "
        "is used, as a second run on the same machine would",
    )
    parser.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated subset of {','.join(RUNS)}")
    parser.add_argument(
        "--optimizers",
        default=",".join(name for name in OPTIMIZER_RUNS if name not in EXTRA_OPTIMIZER_RUNS),
        help=f"comma-separated subset of {','.join(OPTIMIZER_RUNS)}; empty to skip the optimizer benchmark",
    )
    parser.add_argument(
        "--optimizer_shapes",
        default="",
        help="the optimizer benchmark's tensors instead of the model's, e.g. 2048x2048*4,2048x512*3,512*4 (a review's "
        "19.9M parameters in 11 tensors)",
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("FIRST_JSON", "SECOND_JSON"),
        help="print the ratios of two earlier runs (their --json files) side by side, with their difference, and exit",
    )
    opts = parser.parse_args()
    if opts.compare:
        compare(*opts.compare)
        return
    chosen = [name.strip() for name in opts.runs.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(RUNS))
    if unknown or not chosen:
        parser.error(f"--runs: unknown or no run(s) {', '.join(unknown)}; valid: {', '.join(RUNS)}")
    chosen_optimizers = {name.strip() for name in opts.optimizers.split(",") if name.strip()}
    if chosen_optimizers - set(OPTIMIZER_RUNS):
        parser.error(
            f"--optimizers: unknown {', '.join(sorted(chosen_optimizers - set(OPTIMIZER_RUNS)))}; "
            f"valid: {', '.join(OPTIMIZER_RUNS)}"
        )
    if opts.steps < 4:
        parser.error("--steps: at least 4, for quartiles")

    import shutil
    import tempfile

    cold_cache = None
    if opts.cold_compile:  # before torch is imported: inductor reads it once
        cold_cache = tempfile.mkdtemp(prefix="bench_inductor_")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cold_cache
    try:
        run_benchmark(opts, chosen, chosen_optimizers)
    finally:
        if cold_cache:
            shutil.rmtree(cold_cache, ignore_errors=True)


def run_benchmark(opts, chosen, chosen_optimizers):
    import tempfile

    import torch

    from transformers.integrations.pure_bf16 import training_state_bytes
    from transformers.utils import logging

    torch.set_num_threads(opts.threads)
    logging.set_verbosity_error()
    demo = _load_demo()
    total_steps = 1 + opts.warmup + opts.steps
    data = torch.tensor(list(demo.load_text()), dtype=torch.long)
    split = int(0.95 * len(data))
    train_set = demo.ByteWindows(data[:split], opts.seq_len, total_steps * opts.batch_size, seed=opts.seed)
    eval_set = demo.ByteWindows(data[split:], opts.seq_len, 4 * opts.batch_size, seed=opts.seed, random=False)
    batches = batches_of(train_set, opts.batch_size, total_steps)
    eval_batches = batches_of(eval_set, opts.batch_size, 4)
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    native, bf16_line = machine_class()
    load_before = os.getloadavg()

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        opts.output_dir = tmp
        runs = [Run(name, opts, demo, total_steps) for name in chosen]
        interleave(runs, total_steps, lambda run, i: run.step(batches[i], keep=i > opts.warmup))
    train_seconds = time.perf_counter() - started
    by_name = {run.name: run for run in runs}
    n_params = sum(p.numel() for p in runs[0].model.parameters())

    print(
        f"\nPure-bf16 speed benchmark, {date}, {machine()}, {library_versions()}\n"
        f"Machine class: {bf16_line}\n"
        f"GPT-Neo {opts.layers} layers, hidden {opts.hidden}, {n_params / 1e6:.2f}M parameters, batch "
        f"{opts.batch_size}x{opts.seq_len} bytes, weight decay {opts.weight_decay:g}; {len(runs)} runs interleaved "
        f"step by step: 1 first step + {opts.warmup} warm-up + {opts.steps} timed steps each, {train_seconds:.0f} s; "
        f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after; first steps compiled with "
        f"{'an empty' if opts.cold_compile else 'the existing'} inductor cache\n"
    )
    print("Median seconds [25th-75th percentile] of the timed steps:\n")
    print("| run | step (s) | forward+backward (s) | optimizer step (s) | first step (s) | bytes/param | eval loss |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    results = {}
    fp32_eval = by_name["fp32"].eval_loss(eval_batches) if "fp32" in by_name else None
    for run in runs:
        cells = []
        for key in ("step", "forward_backward", "optimizer"):
            median, q1, q3 = quartiles(run.times[key])
            cells.append(f"{median:.4f} [{q1:.4f}-{q3:.4f}]")
        loss = fp32_eval if run.name == "fp32" else run.eval_loss(eval_batches)
        state = training_state_bytes(run.model, run.optimizer)["total"]
        vs = f" ({loss / fp32_eval:.4f})" if fp32_eval and run.name != "fp32" else ""
        print(f"| {run.label} | {' | '.join(cells)} | {run.first_step['step']:.1f} | {state:.2f} | {loss:.4f}{vs} |")
        results[run.name] = {
            "label": run.label,
            **{key: quartiles(values) for key, values in run.times.items()},
            "per_step": run.times,
            "first_step": run.first_step,
            "bytes_per_param": state,
            "eval_loss": loss,
        }

    print(
        "\nRatios: median [25th-75th percentile] of the per-step ratios (both runs' step i, taken seconds apart); "
        "'fastest' divides the runs' 10th-percentile step times (the steps the machine's load disturbed least). "
        "Goals (on the medians) apply where bf16 is native, the optimizer-step goal on every machine class.\n"
    )
    print("| ratio | step | step, fastest | forward+backward | optimizer step | goal |")
    print("|---|---:|---:|---:|---:|---|")
    ratios = {}
    for a, b in RATIOS:
        if a not in by_name or b not in by_name:
            continue
        cells, goal_text = [], []
        for key, short in (("step", "step"), ("forward_backward", "forward_backward"), ("optimizer", "optimizer")):
            values = paired_ratios(by_name[a].times[key], by_name[b].times[key])
            median, q1, q3 = quartiles(values)
            ratios[f"{a} / {b} {short}"] = {"median": median, "q1": q1, "q3": q3}
            cells.append(f"{median:.3f} [{q1:.3f}-{q3:.3f}]")
            if key == "step":
                fastest = tenth(by_name[a].times[key]) / tenth(by_name[b].times[key])
                ratios[f"{a} / {b} step, fastest"] = {"median": fastest}
                cells.append(f"{fastest:.3f}")
            goal = GOALS.get((a, b, short))
            if goal:
                text, limit, native_only = goal
                if native_only and not native:
                    goal_text.append(f"{short} {text} (not here: bf16 is not native)")
                else:
                    goal_text.append(f"{short} {text}: {'met' if median <= limit else 'NOT met'}")
        print(f"| {RUNS[a][0]} / {RUNS[b][0]} | {' | '.join(cells)} | {'; '.join(goal_text)} |")
    if "bf16_8bit_sr" in by_name:
        first = by_name["bf16_8bit_sr"].first_step["step"]
        verdict = "met" if first <= FIRST_STEP_GOAL else "NOT met"
        where = "" if native else " (goal for native bf16 only)"
        print(
            f"\ntorchao 8-bit + SR first step (compile): {first:.1f} s, goal <= {FIRST_STEP_GOAL:g} s: {verdict}{where}"
        )

    optimizer_results = {}
    if chosen_optimizers and opts.optimizer_steps > 0:
        shapes = parse_shapes(opts.optimizer_shapes) or [tuple(p.shape) for p in runs[0].model.parameters()]
        where = "the given" if opts.optimizer_shapes else "the model's"
        n_values = sum(math.prod(shape) for shape in shapes)
        started = time.perf_counter()
        optimizer_results = optimizer_microbenchmark(
            shapes, opts.optimizer_steps, opts.warmup, opts.weight_decay, opts.seed, chosen_optimizers
        )
        print(
            f"\nOptimizer step alone: {n_values / 1e6:.2f}M parameters in {where} {len(shapes)} tensor shapes, "
            f"fixed random gradients, weight decay {opts.weight_decay:g} on matrices, interleaved, "
            f"{opts.optimizer_steps} timed steps each, {time.perf_counter() - started:.0f} s. No matmul: the same "
            "meaning on every machine class.\n"
        )
        print("| optimizer | step (ms) | M parameters/s | first step (s) |")
        print("|---|---:|---:|---:|")
        for entry in optimizer_results.values():
            median, q1, q3 = entry["seconds"]
            print(
                f"| {entry['label']} | {median * 1e3:.2f} [{q1 * 1e3:.2f}-{q3 * 1e3:.2f}] | "
                f"{entry['params_per_second'] / 1e6:.1f} | {entry['first_step']:.1f} |"
            )
        pairs = [
            ("adamw_optimi", "optimi_kahan", "<= 1.15"),
            ("optimi_kahan", "torch_adamw_fp32_fused", ""),
            ("torchao_8bit_sr", "torchao_8bit_sr_alone", ""),
            ("torchao_8bit_sr", "torchao_8bit", ""),
            ("torchao_8bit_sr", "torch_adamw_fp32_fused", ""),
            ("torchao_8bit_sr_block2048", "torchao_8bit_sr", ""),
            ("cpu_8bit_sr", "torch_adamw_fp32_fused", "<= 3"),
            ("cpu_8bit", "torch_adamw_fp32_fused", ""),
            ("cpu_8bit_sr", "torchao_8bit_sr", ""),
            ("cpu_8bit_sr", "cpu_8bit", ""),
        ]
        print()
        for a, b, goal in pairs:
            if a in optimizer_results and b in optimizer_results:
                values = paired_ratios(optimizer_results[a]["per_step"], optimizer_results[b]["per_step"])
                median, q1, q3 = quartiles(values)
                ratios[f"optimizer benchmark {a} / {b}"] = {"median": median, "q1": q1, "q3": q3}
                verdict = f"  goal {goal}: {'met' if median <= float(goal[3:]) else 'NOT met'}" if goal else ""
                print(f"optimizer step {a} / {b}: {median:.3f} [{q1:.3f}-{q3:.3f}]{verdict}")

    if opts.json:
        record = {
            "date": date,
            "machine": machine(),
            "libraries": library_versions(),
            "bf16": bf16_line,
            "bf16_native": native,
            "options": vars(opts),
            "runs": results,
            "ratios": ratios,
            "optimizer_benchmark": {
                name: {key: value for key, value in entry.items() if key != "per_step"}
                for name, entry in optimizer_results.items()
            },
        }
        write_json_atomically(opts.json, record)


if __name__ == "__main__":
    main()
