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
Load cost of binding evidence (a stored fp16 plan, a finished run, a publisher reference) to a model.

A load that finds such evidence computes the model's binding (`trained_precision.facts.binding.binding_digest`: the names,
shapes and dtypes of the weights, the first 512 values of each, and the config's forward fields), once per load or
cast: a second ask in the same check reads the digest kept on its `WeightsSubject`. For each checkpoint of
`benchmarks/benchmark_scale.py`'s cache (`.cache/scale/`: the 1.1B Llama layout in bf16, the 7B one in fp16, T5-large's shape in bf16; write them with that script), a child process
loads it lazily (`from_pretrained` in its stored dtype, which maps the safetensors file) and times the binding cold
and kept, as a share of the load, with the process's peak resident memory (`VmHWM`) after the load and after the
binding. `--old` also times the digest evidence used before (a SHA-256 of every value, on up to 8 threads), which
reads every page of the file. Each 7B child holds `/tmp/bigmem.lock`; the load average is printed before and after. Usage:

    python benchmarks/benchmark_plan_fingerprint.py [--repeats 5] [--old] [--shapes llama-1.1b-bfloat16,...]
"""

import argparse
import contextlib
import fcntl
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time


HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(os.path.dirname(HERE), ".cache", "scale")
SHAPES = ("llama-1.1b-bfloat16", "t5-large-bfloat16", "llama-7b-float16")
LOCK = "/tmp/bigmem.lock"
GOAL = 0.02


def status(key: str) -> int:
    """A `/proc/self/status` figure, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def old_full_digest(model) -> str:
    """The digest evidence used before the binding: a SHA-256 of every value of every floating weight, as fp16."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    import torch

    def one(tensor):
        data = tensor.detach().to(device="cpu", dtype=torch.float16).contiguous()
        return hashlib.sha256(data.view(torch.int16).numpy()).digest()

    tensors = [t for t in model.parameters() if t.is_floating_point()]
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        return hashlib.sha256(b"".join(pool.map(one, tensors))).hexdigest()


def child(folder: str, old: bool) -> None:
    """One lazy load, the binding cold and kept, optionally the old digest; prints one JSON line."""
    import torch

    from transformers import AutoModelForCausalLM, T5ForConditionalGeneration
    from transformers.trained_precision.facts.binding import weights_subject
    from transformers.utils import logging

    logging.set_verbosity_error()
    cls = T5ForConditionalGeneration if "t5" in os.path.basename(folder) else AutoModelForCausalLM
    dtype = torch.float16 if folder.endswith("float16") else torch.bfloat16
    base, start, cpu = status("VmHWM"), time.perf_counter(), time.process_time()
    model = cls.from_pretrained(folder, dtype=dtype)
    result = {"load_s": time.perf_counter() - start, "load_cpu": time.process_time() - cpu, "base": base}
    result["hwm_load"], faults = status("VmHWM"), resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    start, cpu = time.perf_counter(), time.process_time()
    subject = weights_subject(model)
    subject.digest()
    result["binding_s"], result["binding_cpu"] = time.perf_counter() - start, time.process_time() - cpu
    result["hwm_binding"] = status("VmHWM")
    result["major_faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults
    start = time.perf_counter()
    subject.digest()
    result["kept_s"] = time.perf_counter() - start
    result["tensors"] = sum(1 for _ in model.parameters())
    if old:
        start = time.perf_counter()
        old_full_digest(model)
        result["old_s"] = time.perf_counter() - start
        result["hwm_old"] = status("VmHWM")
    print(json.dumps(result), flush=True)


@contextlib.contextmanager
def memory_lock(held: bool):
    if not held:
        yield
        return
    with open(LOCK, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--old", action="store_true", help="also time the old digest of every value")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.old)
    import torch

    model_name = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line), "")
    print(
        f"machine: {model_name or platform.processor()}, {os.cpu_count()} cores, cpu capability "
        f"{torch.backends.cpu.get_cpu_capability()}; torch {torch.__version__}; load average {os.getloadavg()}"
    )
    print(
        "| checkpoint | tensors | lazy load s (CPU s) | binding ms (CPU ms; major faults) | kept ms | binding / load "
        "(CPU / CPU) | peak RSS after load / after binding GB | old digest s (share of load) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        folder = os.path.join(CACHE, shape)
        if not os.path.exists(os.path.join(folder, "config.json")):
            print(f"| {shape} | not written: run benchmarks/benchmark_scale.py first |")
            continue
        runs = []
        for _ in range(args.repeats):
            command = [sys.executable, os.path.abspath(__file__), "--child", folder] + (["--old"] if args.old else [])
            with memory_lock("7b" in shape):
                output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            runs.append(json.loads(output.strip().splitlines()[-1]))
        median = lambda key, runs=runs: statistics.median(r[key] for r in runs)  # noqa: E731
        shares = sorted(r["binding_s"] / r["load_s"] for r in runs)
        cpu_share = statistics.median(r["binding_cpu"] / r["load_cpu"] for r in runs)
        old = f"{median('old_s'):.2f} ({median('old_s') / median('load_s'):.0%})" if args.old else "-"
        print(
            f"| {shape} | {runs[0]['tensors']} | {median('load_s'):.2f} ({median('load_cpu'):.2f}) | "
            f"{median('binding_s') * 1e3:.1f} ({median('binding_cpu') * 1e3:.1f}; {median('major_faults'):.0f}) | "
            f"{median('kept_s') * 1e3:.2f} | {statistics.median(shares):.2%} [{shares[0]:.2%}-{shares[-1]:.2%}] "
            f"({cpu_share:.2%}) | "
            f"{median('hwm_load') / 1e9:.2f} / {median('hwm_binding') / 1e9:.2f} | {old} |",
            flush=True,
        )
    print(
        f"(goal: binding <= {GOAL:.0%} of the lazy load, peak memory of the load unchanged); load average now "
        f"{os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
