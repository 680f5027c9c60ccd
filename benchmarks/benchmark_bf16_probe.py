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
The bf16 probe (`integrations.bf16_hardware`): what it costs and how stable its answer is.

`bf16_support("cpu")` decides from the CPU flags when they are conclusive and otherwise times a bf16 and an fp32 matmul
(`measure_bf16_matmul_slowdown`). This prints, side by side in one run:

- the flags' answer and how long it took (first call, uncached);
- the probe's bf16 / fp32 time ratio at several matrix sizes, `--repeats` times each (min, median, max), and its wall
  time per call;
- the throughput behind it: GFLOP/s of one matmul in fp32 and in bf16 at each size.

Run: `python benchmarks/benchmark_bf16_probe.py [--sizes 64 128 256] [--repeats 5] [--threads N]`.
"""

import argparse
import statistics
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--repeats", type=int, default=5, help="probe calls per size")
    parser.add_argument("--threads", type=int, default=None)
    opts = parser.parse_args()

    import torch

    from transformers.integrations import bf16_hardware as hardware

    if opts.threads:
        torch.set_num_threads(opts.threads)

    start = time.perf_counter()
    support = hardware.bf16_support("cpu", probe=False)
    flags_seconds = time.perf_counter() - start
    print(f"torch {torch.__version__}, {torch.get_num_threads()} torch thread(s)")
    print(f"flags: {support.describe()} (cpu capability {support.cpu_capability}; {1e3 * flags_seconds:.1f} ms)")
    print()
    print("| size | bf16/fp32 time, min | median | max | probe wall time per call | fp32 GFLOP/s | bf16 GFLOP/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size in opts.sizes:
        ratios, walls = [], []
        for _ in range(opts.repeats):
            start = time.perf_counter()
            ratios.append(hardware.measure_bf16_matmul_slowdown("cpu", size=size))
            walls.append(time.perf_counter() - start)
        gflops = {}
        for dtype in (torch.float32, torch.bfloat16):
            a, b = torch.randn(2, size, size).to(dtype)
            a @ b
            start = time.perf_counter()
            a @ b
            gflops[dtype] = 2 * size**3 / max(time.perf_counter() - start, 1e-9) / 1e9
        print(
            f"| {size} | {min(ratios):.2f} | {statistics.median(ratios):.2f} | {max(ratios):.2f} | "
            f"{1e3 * statistics.median(walls):.0f} ms | {gflops[torch.float32]:.1f} | {gflops[torch.bfloat16]:.2f} |"
        )
    print(
        f"\nThe probe runs only where the flags cannot decide, once per process, at size {hardware.PROBE_SIZE}; it calls "
        f"bf16 slow above {hardware.SLOW_BF16_MATMUL_RATIO}x."
    )


if __name__ == "__main__":
    main()
