"""
How fast `transformers precision` answers from headers alone, next to a bare interpreter start, in one run.

The report reads `config.json` and the safetensors header; it must not import torch. It prints the median wall time
and peak memory (max RSS) of each command over `--repeat` runs, side by side with `python -c pass`, the ratio of the
console script to `python -m transformers.trained_precision`, and whether torch was imported by either:

    python benchmarks/benchmark_cli_report.py [--repeat 5]

`python -m transformers.trained_precision` runs the command alone; `transformers precision` goes through the
`transformers` console script, which imports all of upstream's commands first (`serve` imports torch): the price
of registering the command as upstream registers its own. Timings depend on the machine and its load: the first line names the CPU; quote it beside any figure.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time


#: Run by `python -c` to see whether a command imports torch: the console script's `main`, or the command's own.
TORCH_PROBE = """import sys
sys.argv = ["transformers", "precision", sys.argv[1], "--dtype", "fp16"]
from {module} import main
try:
    main(*{args})
except SystemExit:
    pass
print("torch" in sys.modules, file=sys.stderr)
"""


def write_checkpoint(directory: str, tensors: int = 200) -> None:
    """A checkpoint without torch: a config.json and a safetensors file whose data is zeros."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump({"model_type": "gpt_neo", "architectures": ["GPTNeoForCausalLM"], "trained_precision": "bf16"}, f)
    header, offset = {}, 0
    for i in range(tensors):
        size = 64 * 64 * 2
        header[f"layer.{i}.weight"] = {"dtype": "BF16", "shape": [64, 64], "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def run_once(command: list[str]) -> tuple[float, float]:
    """The wall time (s) and peak resident memory (MiB) of one run of `command`."""
    start = time.perf_counter()
    pid = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid
    _, _, usage = os.wait4(pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1024  # KiB on Linux


def measure(commands: dict[str, list[str]], repeat: int) -> dict[str, tuple[float, float]]:
    """Median wall time and peak memory of each command; the runs take turns, so a change in load hits them all."""
    runs = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            runs[name].append(run_once(command))
    return {
        name: (statistics.median(t for t, _ in samples), statistics.median(m for _, m in samples))
        for name, samples in runs.items()
    }


def cpu_name() -> str:
    """The CPU model (from /proc/cpuinfo on Linux), its core count and torch's CPU capability when torch is here."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            name = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    # the machine class, as every timing here names it; asked in a child process, so that this one stays small (a
    # child's peak memory counts the parent's image it was forked from)
    capability = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if capability:
        name += f", CPU capability {capability}"
    return f"{name}, {os.cpu_count()} CPUs"


def imports_torch(module: str, args: str, checkpoint: str) -> bool:
    probe = TORCH_PROBE.format(module=module, args=args)
    result = subprocess.run([sys.executable, "-c", probe, checkpoint], capture_output=True, text=True, check=False)
    return result.stderr.strip().splitlines()[-1] == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp()
    try:
        checkpoint = os.path.join(tmp, "ckpt")
        write_checkpoint(checkpoint)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import transformers'": [sys.executable, "-c", "import transformers"],
            "python -m transformers.trained_precision": [
                sys.executable,
                "-m",
                "transformers.trained_precision",
                checkpoint,
                "--dtype",
                "fp16",
            ],
        }
        script = shutil.which("transformers", path=os.path.dirname(sys.executable))
        if script:
            commands["transformers precision"] = [script, "precision", checkpoint, "--dtype", "fp16"]
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"machine: {cpu_name()}, load average {load:.2f}; medians of {args.repeat} runs")
        print(
            "headers-only report imports torch: "
            f"python -m {imports_torch('transformers.trained_precision.commands.cli', '[sys.argv[2:]]', checkpoint)}, "
            f"console script {imports_torch('transformers.cli.transformers', '[]', checkpoint)}"
        )
        measured = measure(commands, args.repeat)
        baseline = measured["python -c pass"][0]
        for name, (seconds, mib) in measured.items():
            print(f"  {name:<45} {seconds:6.2f} s {mib:7.0f} MiB   {seconds / baseline:6.1f}x python -c pass")
        if "transformers precision" in measured:
            ratio = measured["transformers precision"][0] / measured["python -m transformers.trained_precision"][0]
            print(f"transformers precision / python -m transformers.trained_precision: {ratio:.2f}x")
        else:
            print("no `transformers` console script next to this interpreter: install the package to compare it")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
