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
What the fork costs with nothing turned on, against upstream: a Trainer step, a cast and a load.

Two package trees run side by side under this same interpreter (so the same torch, accelerate and safetensors):

- the fork: `tools/patchset.py tree` of this working tree, written to `.cache/bench-fork-tree` (or `--fork-tree`);
- upstream: the pinned release's wheel (`transformers==<pin>` from `pyproject.toml`), downloaded once with pip into
  `.cache/`, checked against the pinned sha256 and every RECORD hash, and extracted, pristine, into
  `.cache/bench-upstream-<version>` (or `--upstream-tree`).

Each side is a child process with its tree first on `PYTHONPATH` and one torch thread, and the two run in lock-step:
the driver hands out one unit of work at a time, to one side then the other (ABBA order), and only one computes at a
time. So step i of the fork and step i of upstream run within milliseconds of each other, under the same load from
whatever else shares the machine, and their ratio is paired. The units:

- a step of a tiny GPT-2 (2 layers, width 64) trained in fp32 by the `Trainer`, nothing turned on (no mixed
  precision, no saves, no logging inside the loop), timed from the moment the step may start to its `on_step_end`,
  so everything the loop does per step counts (the batch, the forward and backward, the optimizer, the callbacks and
  the run's bookkeeping); the whole `train()` call, with its start and end, is timed too;
- `.half()`, `.to(torch.float16)` and the casts back with `.float()`, on a model built from the same config;
- `from_pretrained` of a tiny checkpoint saved once by upstream (a plain checkpoint, as on the Hub).

Each unit is timed in CPU time of its process (with one thread and one side computing at a time, other jobs on a
shared machine move it little; wall time is printed too). The ratio fork/upstream of a measure is the median of its
paired ratios over all runs, and its spread the min-max of the runs' own medians; the first units of each measure
warm up and are left out. `--control` runs the fork against itself: how far that stays from 1.000 is this machine's
noise floor. A run is a fresh pair of processes; `--runs` of them. Usage:

    python benchmarks/benchmark_trainer_overhead.py [--runs 5] [--steps 200] [--control] [--json out.json]
"""

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.01
SIDES = ("fork", "upstream")
MEASURES = {
    "train_step": "Trainer step, tiny GPT-2 fp32",
    "train_total": "whole train() call",
    "half": "model.half()",
    "to_fp16": "model.to(torch.float16)",
    "float": "model.float() (fp16 -> fp32)",
    "from_pretrained": "from_pretrained, tiny checkpoint",
}
GOAL_MEASURES = ("train_step", "half", "to_fp16", "from_pretrained")
# the first units of each measure (allocator, autograd and once-caches, file cache) are left out
WARMUP = {"train_step": 20, "half": 5, "to_fp16": 5, "float": 10, "from_pretrained": 3}


# ----------------------------------------------------------------------------------------------------------------
# The two package trees


def _patchset():
    sys.path.insert(0, str(ROOT / "tools"))
    import patchset

    return patchset


def upstream_tree(dest: Path | None) -> Path:
    """The pinned upstream wheel, checked and extracted once; its files are the published ones, unmodified."""
    patchset = _patchset()
    config = patchset.read_config(ROOT)
    dest = dest or ROOT / ".cache" / f"bench-upstream-{config.upstream_version}"
    marker = dest / ".extracted"
    if not marker.exists():
        wheel = patchset.cached_upstream_wheel(config.upstream_version, config.pins["wheel"])
        patchset.upstream_from_wheel(wheel, config.upstream_version, config.pins["wheel"])  # RECORD hashes
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(dest)
        marker.write_text(config.upstream_version)
    return dest


def fork_tree(dest: Path | None) -> Path:
    """`tools/patchset.py tree` of this working tree (rebuilt every time, so it is the code being measured)."""
    if dest is not None:
        return dest
    dest = ROOT / ".cache" / "bench-fork-tree"
    subprocess.run([sys.executable, str(ROOT / "tools" / "patchset.py"), "tree", str(dest)], check=True, cwd=ROOT)
    return dest


def default_cpu() -> int | None:
    """The last core this process may run on (Linux), where both sides are pinned; `None` elsewhere."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    return max(os.sched_getaffinity(0))


def machine_class() -> dict:
    """What decides how fast a step runs here: the CPU, its vector unit as torch sees it, the versions."""
    import torch

    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    import accelerate

    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "accelerate": accelerate.__version__,
        "python": platform.python_version(),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


# ----------------------------------------------------------------------------------------------------------------
# One run (a fresh process, one tree on PYTHONPATH)


def tiny_config(**kwargs):
    from transformers import GPT2Config

    return GPT2Config(
        n_layer=2, n_embd=64, n_head=2, n_positions=64, vocab_size=256, bos_token_id=0, eos_token_id=0, **kwargs
    )


class _Batches:
    """A fixed map-style dataset of random token windows (labels = inputs, as causal-LM fine-tuning has it)."""

    def __init__(self, n: int, length: int = 32, seed: int = 0):
        import torch

        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 256, (n, length), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Worker:
    """
    One tree's side of a lock-step run: a child process that builds the same model, trainer and checkpoint, and times
    one unit of work (a training step, a cast, a load) each time the driver asks, so the two trees take turns.
    """

    def __init__(self, tree: Path, options: dict, log, cpu: int | None = None):
        env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1")
        env.pop("TRANSFORMERS_TRAINED_PRECISION_CHECK", None)  # nothing turned on: the default mode
        self.tree = tree
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(options)],
            env=env,
            cwd="/",  # so neither this checkout's src/ nor a local `transformers` folder shadows the tree
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            # both sides on the same core (they never compute at once): no core is faster or busier for one of them
            preexec_fn=None if cpu is None else functools.partial(os.sched_setaffinity, 0, {cpu}),
        )
        self.ready = self.read()
        imported = str(Path(self.ready["file"]).resolve())
        if not imported.startswith(str(tree.resolve())):
            self.process.kill()
            raise SystemExit(f"the run under {tree} imported transformers from {imported}")

    def send(self, command: str) -> None:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            raise SystemExit(f"the run under {self.tree} stopped (exit {self.process.returncode}); see its log")
        return json.loads(line)

    def ask(self, command: str) -> dict:
        self.send(command)
        return self.read()

    def close(self) -> None:
        self.send("quit")
        self.process.wait(timeout=60)


def _timed(function) -> list[float]:
    c, w = time.process_time(), time.perf_counter()
    function()
    return [time.process_time() - c, time.perf_counter() - w]


def _worker_trainer(options: dict, channel, commands, output_dir: str):
    """The plain fp32 Trainer of a run; its callback hands the driver each step's time and waits for its turn."""
    import torch

    from transformers import GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    class LockStep(TrainerCallback):
        def _wait(self):
            if commands.readline().strip() != "step":
                raise SystemExit("expected 'step'")
            self.mark = time.process_time(), time.perf_counter()

        def on_train_begin(self, args, state, control, **kwargs):
            self._wait()

        def on_step_end(self, args, state, control, **kwargs):
            cpu, wall = time.process_time() - self.mark[0], time.perf_counter() - self.mark[1]
            channel.write(json.dumps([cpu, wall]) + "\n")
            channel.flush()
            if state.global_step < state.max_steps:
                self._wait()

    torch.manual_seed(0)
    model = GPT2LMHeadModel(tiny_config())
    args = TrainingArguments(
        output_dir=output_dir,
        max_steps=options["steps"],
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        save_strategy="no",
        logging_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        seed=0,
        dataloader_num_workers=0,
    )
    dataset = _Batches(4 * options["steps"])
    return Trainer(model=model, args=args, train_dataset=dataset, callbacks=[LockStep()])


def worker(options: dict) -> None:
    """The child process: answers the driver's commands on the stdout it was given (logs and prints go to stderr)."""
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the Trainer prints its metrics: keep them out of the channel
    commands = sys.stdin
    import torch

    torch.set_num_threads(1)
    import transformers
    from transformers.utils import logging

    logging.disable_progress_bar()
    if options.get("save"):
        torch.manual_seed(0)
        transformers.GPT2LMHeadModel(tiny_config()).save_pretrained(options["save"])
    model = transformers.GPT2LMHeadModel(tiny_config())
    casts = {
        "half": model.half,
        "to_fp16": lambda: model.to(torch.float16),
        "float": model.float,
        "from_pretrained": lambda: transformers.GPT2LMHeadModel.from_pretrained(options["checkpoint"]),
    }
    channel.write(json.dumps({"version": transformers.__version__, "file": transformers.__file__}) + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        for line in commands:
            command = line.strip()
            if command == "quit":
                break
            if command == "train":
                trainer = _worker_trainer(options, channel, commands, tmp)
                result = {"train_total": _timed(trainer.train)}
            else:
                result = {command: _timed(casts[command])}
            channel.write(json.dumps(result) + "\n")


# ----------------------------------------------------------------------------------------------------------------
# Driver


def _turns(i: int) -> tuple[str, str]:
    """Which side goes first at turn `i`: ABBA, so a drift in the machine's load falls on both alike."""
    return SIDES if i % 4 in (0, 3) else SIDES[::-1]


def one_run(workers: dict, args) -> dict:
    """One lock-step run: both sides do every unit of work back to back; each side's [cpu, wall] per unit."""
    times = {side: {key: [] for key in MEASURES} for side in SIDES}
    for side in SIDES:
        workers[side].send("train")
    for i in range(args.steps):
        for side in _turns(i):
            workers[side].send("step")
            times[side]["train_step"].append(workers[side].read())
    for side in SIDES:
        times[side]["train_total"].append(workers[side].read()["train_total"])
    for i in range(args.cast_repeats):
        for command in ("half", "float", "to_fp16", "float"):
            for side in _turns(i):
                times[side][command].append(workers[side].ask(command)[command])
    for i in range(args.load_repeats):
        for side in _turns(i):
            times[side]["from_pretrained"].append(workers[side].ask("from_pretrained")["from_pretrained"])
    for side in SIDES:  # the first units of each measure warm up caches and allocators: left out
        for key, skip in WARMUP.items():
            times[side][key] = times[side][key][skip:]
    return times


def run_all(trees: dict, args, logs: Path) -> dict:
    """`args.runs` lock-step runs, each with a fresh process per side; the upstream side saves the checkpoint first."""
    runs, versions = [], {}
    checkpoint = logs / "tiny-gpt2"
    options = {"steps": args.steps, "checkpoint": str(checkpoint)}
    for r in range(args.runs):
        workers = {}
        try:
            for side in reversed(SIDES):  # upstream first: it writes the checkpoint both sides load
                save = {"save": str(checkpoint)} if not checkpoint.exists() and side == "upstream" else {}
                with open(logs / f"{side}-{r}.log", "w") as log:
                    workers[side] = Worker(trees[side], {**options, **save}, log, cpu=args.cpu)
                versions[side] = workers[side].ready["version"]
            runs.append(one_run(workers, args))
        finally:
            for w in workers.values():
                w.close()
        step = {side: statistics.median(t[0] for t in runs[-1][side]["train_step"]) * 1e3 for side in SIDES}
        print(f"  run {r + 1}/{args.runs}: step {step['fork']:.3f} ms (fork), {step['upstream']:.3f} ms (upstream)")
    return {"versions": versions, "runs": runs}


def summarize(data: dict) -> dict:
    """
    Per measure: each side's median CPU and wall ms over all units, and the fork/upstream ratio: the median of the
    paired ratios (unit i of the fork over unit i of upstream, done back to back) over all runs, with the min-max of
    the runs' own medians as its spread.
    """
    summary = {}
    for key in MEASURES:
        per_run, pooled, wall = [], [], []
        fork_cpu, up_cpu, fork_wall, up_wall = [], [], [], []
        for run in data["runs"]:
            pairs = list(zip(run["fork"][key], run["upstream"][key]))
            ratios = [f[0] / u[0] for f, u in pairs]
            per_run.append(statistics.median(ratios))
            pooled += ratios
            wall += [f[1] / u[1] for f, u in pairs]
            fork_cpu += [f[0] for f, _ in pairs]
            up_cpu += [u[0] for _, u in pairs]
            fork_wall += [f[1] for f, _ in pairs]
            up_wall += [u[1] for _, u in pairs]
        summary[key] = {
            "fork_cpu": statistics.median(fork_cpu),
            "upstream_cpu": statistics.median(up_cpu),
            "fork_wall": statistics.median(fork_wall),
            "upstream_wall": statistics.median(up_wall),
            "ratio": statistics.median(pooled),
            "run_ratios": per_run,
            "wall_ratio": statistics.median(wall),
        }
    return summary


def print_table(summary: dict, machine: dict, data: dict, args) -> None:
    print()
    print(
        f"machine: {machine['cpu']}, {machine['cores']} cores, torch cpu capability {machine['cpu_capability']}; "
        f"torch {machine['torch']}, accelerate {machine['accelerate']}, Python {machine['python']}, "
        f"load average {machine['load_average']:.2f}"
    )
    against = "itself (A/A control)" if args.control else f"upstream {data['versions'].get('upstream')}"
    print(
        f"fork {data['versions'].get('fork')} vs {against}: {args.runs} lock-step runs, {args.steps} steps "
        f"({WARMUP['train_step']} warm-up left out), {args.cast_repeats} casts of each kind, {args.load_repeats} "
        f"loads per run, one torch thread, both on core {args.cpu}; CPU time"
    )
    b = "fork (B) ms" if args.control else "upstream ms"
    print(f"{'measure':<34} {'fork ms':>9} {b:>12} {'ratio':>7} {'runs min-max':>14} {'wall ratio':>10}")
    for key, label in MEASURES.items():
        s = summary[key]
        spread = f"{min(s['run_ratios']):.3f}-{max(s['run_ratios']):.3f}"
        print(
            f"{label:<34} {s['fork_cpu'] * 1e3:>9.3f} {s['upstream_cpu'] * 1e3:>12.3f} {s['ratio']:>7.3f} "
            f"{spread:>14} {s['wall_ratio']:>10.3f}"
        )
    worst = max(summary[k]["ratio"] for k in GOAL_MEASURES)
    verdict = "OK" if worst <= GOAL else "ABOVE GOAL"
    print(f"worst ratio of {', '.join(GOAL_MEASURES)}: {worst:.3f} (goal <= {GOAL}) -> {verdict}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="lock-step runs (a fresh process per side each)")
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps per run")
    parser.add_argument("--cast-repeats", type=int, default=300, help="casts of each kind per run")
    parser.add_argument("--load-repeats", type=int, default=60, help="from_pretrained calls per run")
    parser.add_argument("--control", action="store_true", help="the fork against itself: the noise floor here")
    parser.add_argument(
        "--cpu", type=int, default=default_cpu(), help="the core both sides run on (default: the last one allowed)"
    )
    parser.add_argument("--fork-tree", type=Path, help="a built fork package tree (default: build this checkout)")
    parser.add_argument("--upstream-tree", type=Path, help="an extracted upstream tree (default: the pinned wheel)")
    parser.add_argument("--json", type=Path, help="write the per-run numbers and the summary here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))
    fork = fork_tree(args.fork_tree)
    trees = {"fork": fork, "upstream": fork if args.control else upstream_tree(args.upstream_tree)}
    machine = machine_class()
    with tempfile.TemporaryDirectory() as tmp:
        data = run_all(trees, args, Path(tmp))
    summary = summarize(data)
    print_table(summary, machine, data, args)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "summary": summary, **data}, indent=1))


if __name__ == "__main__":
    main()
