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
Overhead of the trained-precision loading check on `from_pretrained`.

A tiny GPT-Neo is saved to a temporary directory, then loaded again and again in one process, alternating between the
patched `from_pretrained` (the check runs, in `"warn"` mode) and the same `from_pretrained` with the check
monkeypatched out of `modeling_utils` (its call sites replaced by no-ops). A tiny model is the worst case: loading it
takes milliseconds, so the check's fixed cost is the largest share it can ever be.

Each scenario prints the two medians, their ratio, and the median of the paired ratios (each checked load over the
unchecked load run next to it), which is the number held to the goal of <= 1.01. The cost of one check call, timed on
its own, is printed too, with the ratio it implies (1 + check / load): the same answer without the timing noise of a
whole load. Usage:

    python benchmarks/benchmark_loading_check.py [--repeats 400] [--threads 1]
"""

import argparse
import contextlib
import gc
import os
import statistics
import tempfile
import time
import timeit

import torch

import transformers.modeling_utils as modeling_utils
from transformers import GPTNeoConfig, GPTNeoForCausalLM
from transformers.trained_precision.guard import check as tp_check
from transformers.utils import logging


GOAL = 1.01


def tiny_model(trained_precision):
    config = GPTNeoConfig(
        num_layers=2,
        attention_types=[[["global", "local"], 1]],
        hidden_size=32,
        num_heads=2,
        vocab_size=128,
        max_position_embeddings=64,
        bos_token_id=0,
        eos_token_id=0,
        trained_precision=trained_precision,
    )
    return GPTNeoForCausalLM(config)


@contextlib.contextmanager
def check_removed():
    """`from_pretrained` as upstream has it: the check's call sites in `modeling_utils` do nothing."""
    saved = modeling_utils.check_trained_precision, modeling_utils.model_construction_scope
    modeling_utils.check_trained_precision = lambda *args, **kwargs: None
    modeling_utils.model_construction_scope = lambda *args, **kwargs: contextlib.nullcontext()
    try:
        yield
    finally:
        modeling_utils.check_trained_precision, modeling_utils.model_construction_scope = saved


def time_load(directory, dtype):
    """CPU seconds of one load: unlike wall time, other processes on a busy machine barely move it."""
    gc.collect()
    start = time.process_time()
    GPTNeoForCausalLM.from_pretrained(directory, dtype=dtype)
    return time.process_time() - start


def measure(directory, dtype, repeats, checked_a, checked_b):
    """Median CPU ms of variants a and b, and the median of the paired ratios a/b; loads interleaved."""
    variants = {True: contextlib.nullcontext, False: check_removed}
    for _ in range(10):  # warm up both variants (imports, file cache, the once-cache)
        for flag in (checked_a, checked_b):
            with variants[flag]():
                time_load(directory, dtype)
    a, b = [], []
    for i in range(repeats):  # alternate which goes first, so drift hits both alike
        for first in (True, False) if i % 2 else (False, True):
            with variants[checked_a if first else checked_b]():
                (a if first else b).append(time_load(directory, dtype))
    paired = statistics.median(x / y for x, y in zip(a, b))
    return statistics.median(a), statistics.median(b), paired


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=400, help="loads per variant and scenario")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 keeps the timings steady)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.pop(tp_check.ENV_VAR, None)
    logging.disable_progress_bar()
    logging.set_verbosity_error()  # keep the output to the table (the warning itself is logged once anyway)
    gc.freeze()  # the imported modules stay out of the per-load `gc.collect()`, which then costs microseconds

    scenarios = [
        # name, trained precision of the saved model, load dtype
        ("safe: bf16-trained loaded in bf16", "bf16", torch.bfloat16),
        ("risky: bf16-trained loaded in fp16 (warned once)", "bf16", torch.float16),
        ("unknown: no trained precision, registry consulted", "unknown", torch.float16),
    ]
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.repeats} loads per variant and scenario")
    print(f"{'scenario':<52} {'unchecked ms':>12} {'checked ms':>11} {'ratio':>7} {'paired':>7}")
    worst = 0.0
    fastest_load = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        for name, trained, dtype in scenarios:
            directory = os.path.join(tmp, trained)
            if not os.path.isdir(directory):
                tiny_model(trained).save_pretrained(directory)
            checked, unchecked, paired = measure(directory, dtype, args.repeats, True, False)
            worst = max(worst, paired)
            fastest_load = min(fastest_load, unchecked)
            print(
                f"{name:<52} {unchecked * 1e3:>12.3f} {checked * 1e3:>11.3f} {checked / unchecked:>7.4f} {paired:>7.4f}"
            )
        # A/A control: unchecked against unchecked, the same way. Its distance from 1 is this machine's noise.
        _, _, control = measure(os.path.join(tmp, "bf16"), torch.float16, args.repeats, False, False)
        print(f"{'control: unchecked vs unchecked (noise floor)':<52} {'':>12} {'':>11} {'':>7} {control:>7.4f}")

    # the check on its own, for scale: the same answer without the noise of whole loads
    config = tiny_model("bf16").config
    config.dtype = torch.float16  # the load check reads the dtype `from_pretrained` resolved from the config
    n = 20000
    per_call = timeit.timeit(lambda: tp_check.check_trained_precision(config), number=n) / n
    print(
        f"one check_trained_precision call (risky, already warned): {per_call * 1e6:.2f} us, "
        f"implied ratio on the fastest load: {1 + per_call / fastest_load:.5f}"
    )
    verdict = "OK" if worst <= GOAL else f"ABOVE GOAL (noise floor on this machine: {abs(control - 1):.4f})"
    print(f"worst paired ratio checked/unchecked: {worst:.4f} (goal <= {GOAL}) -> {verdict}")


if __name__ == "__main__":
    main()
