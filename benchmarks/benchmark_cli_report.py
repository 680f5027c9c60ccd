"""
How fast `transformers precision` answers from headers alone, next to a bare interpreter start, in one run.

The report reads `config.json` and the safetensors header; it must not import torch. It prints the median wall time
of each command over `--repeat` runs, the ratio to `python -c pass`, and whether torch was imported:

    python benchmarks/benchmark_cli_report.py [--repeat 5]

`python -m transformers.trained_precision` runs the command alone; `transformers precision` goes through the
`transformers` console script, whose other commands (`serve`) import torch at start-up: that cost is upstream's CLI,
not the report's. Timings depend on the machine and its load: name the machine class beside any figure you quote.
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


def median_seconds(command: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp()
    try:
        checkpoint = os.path.join(tmp, "ckpt")
        write_checkpoint(checkpoint)
        probe = (
            "import sys; from transformers.trained_precision.cli import main\n"
            "try:\n    main([sys.argv[1], '--dtype', 'fp16'])\nexcept SystemExit:\n    pass\n"
            "print('torch imported:', 'torch' in sys.modules, file=sys.stderr)"
        )
        torch_line = (
            subprocess.run([sys.executable, "-c", probe, checkpoint], capture_output=True, text=True, check=False)
            .stderr.strip()
            .splitlines()[-1]
        )
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
        try:  # the machine class, as every timing here names it (the report itself does not need torch)
            import torch

            capability = f", CPU capability {torch.backends.cpu.get_cpu_capability()}"
        except ImportError:
            capability = ""
        print(
            f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs{capability}, "
            f"load average {load:.2f}"
        )
        print(f"headers-only report ({torch_line})")
        baseline = None
        for name, command in commands.items():
            seconds = median_seconds(command, args.repeat)
            baseline = baseline or seconds
            print(f"  {name:<45} {seconds:6.2f} s   {seconds / baseline:5.1f}x python -c pass")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
