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
Pure-bf16 training in three runs (`make demo`): why the optimizer has to compensate bf16 rounding.

A small GPT-Neo learns byte-level text that ships with every CPython (`pydoc_data.topics`, the text of `help()`),
three times, through the `Trainer`, from the same initial weights and the same batches:

1. fp32 weights, torch AdamW (16 bytes of training state per parameter);
2. pure bf16 weights, torch AdamW: updates smaller than 2^-8 of a weight are rounded away (8 bytes/parameter);
3. pure bf16 weights, optimi AdamW with Kahan summation, what `bf16_full_train=True` picks (10 bytes/parameter).

It writes into `--output_dir` (default `demo_output/`): one checkpoint per run (their `config.json` carries
`trained_precision`), `loss_curves.png`, `summary.md` and `summary.json`. Then it reloads the bf16 checkpoint in fp16,
which a bf16-trained model may not survive, so that the loading check can warn.

How big a model and how many steps: bf16 is fast on CPUs with AVX512-BF16 or AMX-BF16 and on recent GPUs, but
*emulated*, about 8 times slower than fp32 per training step, on AVX2-only CPUs (most laptops, many cloud instances).
So the demo first asks [`bf16_support`] whether bf16 is native here, times a few fp32 and bf16 training steps of the
smallest size in `SIZES`, predicts how long the three runs take at each size, and trains the largest size that fits
`--budget` seconds (default 200: the whole demo then takes under 5 minutes on a 2-core AVX2-only CPU). It prints what
it measured and what it chose. `--steps/--hidden/--seq_len/--layers` fix the size yourself.

Run: `python examples/pure_bf16_demo.py [--budget SECONDS]`. `--quick` is a smoke run of about a minute (40 steps of
the smallest model, which is too short to show the effect).
"""

import argparse
import json
import logging as stdlib_logging
import math
import os
import tempfile
import time


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class OfflineKernelTrustNotice(stdlib_logging.Filter):
    """
    Drops the one notice of the `kernels` package that says it skips its publisher trust check offline: importing
    GPT-Neo's module makes upstream probe the Hub for flash-attention kernels (`kernels-community/flash-attn2`, ...),
    and with `HF_HUB_OFFLINE=1` each probe logs it. The demo runs on the CPU and uses none of them. Every other record
    of `kernels`, and every error it raises (an untrusted publisher raises `ValueError`), still reaches you.
    """

    def filter(self, record: stdlib_logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (
            message.startswith("Skipping publisher trust check for ")
            and message.endswith("because Hugging Face Hub is in offline mode.")
        )


stdlib_logging.getLogger("kernels._internals.hf_hub").addFilter(OfflineKernelTrustNotice())

import torch  # noqa: E402

from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    GPTNeoConfig,
    GPTNeoForCausalLM,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)
from transformers.integrations.bf16_hardware import bf16_support  # noqa: E402
from transformers.integrations.pure_bf16 import (  # noqa: E402
    cast_model_for_bf16_full_train,
    training_state_bytes,
)
from transformers.utils import logging  # noqa: E402


RUNS = {
    "fp32": {"label": "fp32 + torch AdamW", "kwargs": {"optim": "adamw_torch"}},
    "bf16_adamw": {
        "label": "pure bf16 + torch AdamW",
        "kwargs": {"bf16_full_train": True, "bf16_full_train_cast_all": True, "optim": "adamw_torch"},
    },
    "bf16_kahan": {
        "label": "pure bf16 + optimi AdamW (Kahan)",
        "kwargs": {"bf16_full_train": True, "bf16_full_train_cast_all": True},  # optim defaults to adamw_optimi
    },
}


#: The sizes the demo chooses from, largest first. The first is the size of the README's numbers from a CPU with
#: native bf16; on an AVX2-only CPU (bf16 emulated) its two bf16 runs alone would take about 40 minutes.
SIZES = [
    {"hidden": 128, "seq_len": 128, "layers": 4, "steps": 300},
    {"hidden": 128, "seq_len": 64, "layers": 4, "steps": 300},
    {"hidden": 64, "seq_len": 64, "layers": 4, "steps": 300},
    {"hidden": 64, "seq_len": 64, "layers": 2, "steps": 300},
]
QUICK = {"hidden": 64, "seq_len": 64, "layers": 2, "steps": 40}
#: Fewest steps the size choice goes down to: below this the runs end before the updates get small.
MIN_STEPS = 150
#: Trainer overhead (data loading, logging, evaluation, saving) on top of the bare training steps, measured on an
#: AVX2-only CPU: 300 steps and 7 evaluations cost about (300 + 20) bare steps, plus 10%.
EVAL_STEP_EQUIVALENTS = 20
TRAINER_OVERHEAD = 1.1


def describe_size(size) -> str:
    return f"hidden {size['hidden']}, {size['layers']} layers, {size['seq_len']}-byte windows, {size['steps']} steps"


def relative_cost(size) -> float:
    """Multiply-adds per training step, up to a constant: the projections and MLP (12 h^2 per token and layer),
    attention scores (2 * seq_len * h) and the 256-byte output layer."""
    h, s = size["hidden"], size["seq_len"]
    return s * (size["layers"] * (12 * h * h + 2 * s * h) + 256 * h)


def measure_step_seconds(size, batch_size: int, bf16: bool, steps: int = 2) -> float:
    """Best wall time of one bare training step (forward, backward, torch AdamW) at `size`, after one warm-up step:
    in fp32, or as the pure-bf16 runs train (bf16 weights, bf16 autocast)."""
    model = make_model(argparse.Namespace(seed=0, **size))
    if bf16:
        cast_model_for_bf16_full_train(model, cast_all=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = torch.randint(0, 256, (batch_size, size["seq_len"]), generator=torch.Generator().manual_seed(0))
    best = float("inf")
    for i in range(steps + 1):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if i:
            best = min(best, time.perf_counter() - start)
    return best


def predict_seconds(size, fp32_step: float, bf16_step: float) -> float:
    """The three runs' training wall time: one fp32 run and two bf16 runs of `size["steps"]` steps."""
    steps = size["steps"] + EVAL_STEP_EQUIVALENTS
    return steps * (fp32_step + 2 * bf16_step) * TRAINER_OVERHEAD


def choose_size(budget: float, batch_size: int) -> tuple[dict, list[str]]:
    """
    The largest of `SIZES` whose three training runs are predicted to fit `budget` seconds on this machine.

    Times a few steps of the smallest size, scales them by [`relative_cost`] to the others, then times the chosen
    size itself to check it (moving one size down when it does not fit). When even the smallest size does not fit
    (a slow or busy machine), it trains fewer steps, down to `MIN_STEPS`.

    Returns:
        `(size, lines)`: the chosen size and the lines that say why.
    """
    smallest = SIZES[-1]
    fp32_small = measure_step_seconds(smallest, batch_size, bf16=False)
    bf16_small = measure_step_seconds(smallest, batch_size, bf16=True)
    lines = [
        f"measured at {describe_size(smallest)}: fp32 step {fp32_small:.3f} s, bf16 step {bf16_small:.3f} s "
        f"(bf16 / fp32 = {bf16_small / fp32_small:.1f}x)"
    ]
    first = len(SIZES) - 1
    for index, size in enumerate(SIZES[:-1]):
        scale = relative_cost(size) / relative_cost(smallest)
        predicted = predict_seconds(size, fp32_small * scale, bf16_small * scale)
        lines.append(f"estimated {predicted:.0f} s for {describe_size(size)}")
        if predicted <= budget:
            first = index
            break
    for size in SIZES[first:-1]:
        fp32_step = measure_step_seconds(size, batch_size, bf16=False)
        bf16_step = measure_step_seconds(size, batch_size, bf16=True)
        predicted = predict_seconds(size, fp32_step, bf16_step)
        lines.append(
            f"measured at {describe_size(size)}: fp32 step {fp32_step:.3f} s, bf16 step {bf16_step:.3f} s: "
            f"predicted {predicted:.0f} s"
        )
        if predicted <= budget:
            return size, lines
    predicted = predict_seconds(smallest, fp32_small, bf16_small)
    lines.append(f"predicted {predicted:.0f} s for {describe_size(smallest)}")
    if predicted <= budget:
        return smallest, lines
    per_step = predicted / (smallest["steps"] + EVAL_STEP_EQUIVALENTS)
    steps = max(MIN_STEPS, min(smallest["steps"], int(budget / per_step - EVAL_STEP_EQUIVALENTS) // 10 * 10))
    size = dict(smallest, steps=steps)
    lines.append(
        f"over budget: training {steps} steps instead, predicted {per_step * (steps + EVAL_STEP_EQUIVALENTS):.0f} s "
        f"(fewer steps show a smaller gap; the demo does not go below {MIN_STEPS})"
    )
    return size, lines


def platform_name() -> str:
    """The CPU's model name (from `/proc/cpuinfo` on Linux), else what `platform` says."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_text() -> bytes:
    """The text of Python's `help()` topics: about 0.5 MB of English and code, in every CPython."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics)).encode("utf-8")


class ByteWindows(torch.utils.data.Dataset):
    """`count` windows of `length + 1` bytes at seeded random offsets (the same windows for every run)."""

    def __init__(self, data: torch.Tensor, length: int, count: int, seed: int, random: bool = True):
        generator = torch.Generator().manual_seed(seed)
        last = len(data) - length - 1
        if random:
            self.offsets = torch.randint(0, last, (count,), generator=generator).tolist()
        else:
            self.offsets = [int(i * last / max(count - 1, 1)) for i in range(count)]
        self.data, self.length = data, length

    def __len__(self):
        return len(self.offsets)

    def __getitem__(self, i):
        window = self.data[self.offsets[i] : self.offsets[i] + self.length]
        return {"input_ids": window, "labels": window}


class StepTimer(TrainerCallback):
    """Wall time of the training steps alone (evaluation and saving excluded)."""

    def __init__(self):
        self.seconds, self.steps, self._start = 0.0, 0, None

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self._start is not None:
            self.seconds += time.perf_counter() - self._start
            self.steps += 1
            self._start = None


def make_model(opts) -> GPTNeoForCausalLM:
    config = GPTNeoConfig(
        vocab_size=256,  # bytes
        max_position_embeddings=opts.seq_len,
        hidden_size=opts.hidden,
        num_layers=opts.layers,
        num_heads=4,
        attention_types=[[["global", "local"], opts.layers // 2]],
        window_size=opts.seq_len // 2,
        intermediate_size=4 * opts.hidden,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(opts.seed)
    return GPTNeoForCausalLM(config)


def train_one(name, opts, train_set, eval_set):
    run = RUNS[name]
    print(f"\n=== {run['label']} ===", flush=True)
    out = os.path.join(opts.output_dir, name)
    # the Trainer's own output folder: with save_strategy="no" it stays empty, so it lives outside --output_dir
    scratch = tempfile.TemporaryDirectory(prefix=f"demo_{name}_")
    args = TrainingArguments(
        output_dir=scratch.name,
        max_steps=opts.steps,
        per_device_train_batch_size=opts.batch_size,
        per_device_eval_batch_size=64,
        learning_rate=opts.lr,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, opts.steps // 20),
        weight_decay=0.0,
        adam_beta2=0.99,  # optimi's default; the same for every run
        max_grad_norm=1.0,
        eval_strategy="steps",
        eval_steps=max(1, opts.steps // 6),
        logging_steps=max(1, opts.steps // 30),
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=opts.seed,
        data_seed=opts.seed,
        dataloader_num_workers=0,
        disable_tqdm=False,
        **run["kwargs"],
    )
    model = make_model(opts)
    timer = StepTimer()
    trainer = Trainer(model=model, args=args, train_dataset=train_set, eval_dataset=eval_set, callbacks=[timer])
    trainer.train()
    metrics = trainer.evaluate()
    state_bytes = training_state_bytes(model, trainer.optimizer)
    trainer.save_model(out)
    scratch.cleanup()
    with open(os.path.join(out, "config.json")) as f:
        saved = json.load(f)
    history = trainer.state.log_history
    return {
        "label": run["label"],
        "eval_loss": metrics["eval_loss"],
        "bytes_per_param": state_bytes["total"],
        "seconds_per_step": timer.seconds / max(timer.steps, 1),
        "optimizer": type(getattr(trainer.optimizer, "optimizer", trainer.optimizer)).__module__.split(".")[0]
        + "."
        + type(getattr(trainer.optimizer, "optimizer", trainer.optimizer)).__name__,
        "trained_precision": saved.get("trained_precision", "unknown"),
        "saved_dtype": saved.get("dtype"),
        "checkpoint": out,
        "train_curve": [(h["step"], h["loss"]) for h in history if "loss" in h and "eval_loss" not in h],
        "eval_curve": [(h["step"], h["eval_loss"]) for h in history if "eval_loss" in h],
    }


def write_plot(results, path, opts, machine: str = ""):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {"fp32": "tab:blue", "bf16_adamw": "tab:red", "bf16_kahan": "tab:green"}
    for name, r in results.items():
        steps, losses = zip(*r["train_curve"])
        left.plot(steps, losses, color=colors[name], label=r["label"], linewidth=1.2)
        steps, losses = zip(*r["eval_curve"])
        right.plot(steps, losses, "o-", color=colors[name], label=f"{r['label']}: {r['eval_loss']:.3f}")
    # zoom both panels past the first steps, where the runs differ
    late = [loss for r in results.values() for step, loss in r["train_curve"] if step >= opts.steps // 4]
    if late:
        left.set_ylim(min(late) - 0.05, max(late) + 0.1)
    left.set_title("training loss")
    right.set_title("eval loss (held-out bytes)")
    for ax in (left, right):
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy (nats/byte)")
        ax.grid(alpha=0.3)
        ax.legend()
    tail = [loss for r in results.values() for _, loss in r["eval_curve"][1:]]
    if tail:
        right.set_ylim(min(tail) - 0.05, max(tail) + 0.05)
    fig.suptitle(
        f"GPT-Neo ({opts.layers} layers, hidden {opts.hidden}) on pydoc_data.topics bytes, {opts.steps} steps: "
        "bf16 weights need a compensating optimizer" + (f"\n{machine}" if machine else ""),
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_table(results) -> str:
    fp32 = results["fp32"]
    lines = [
        "| run | eval loss | vs fp32 | training state (bytes/param) | seconds/step | config.json trained_precision |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in results.values():
        ratio = r["eval_loss"] / fp32["eval_loss"]
        lines.append(
            f"| {r['label']} | {r['eval_loss']:.4f} | {100 * (ratio - 1):+.2f}% | {r['bytes_per_param']:.1f} | "
            f"{r['seconds_per_step']:.3f} | {r['trained_precision']} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default="demo_output")
    parser.add_argument(
        "--budget",
        type=float,
        default=200,
        help="seconds for the three training runs: the demo picks the largest model size predicted to fit "
        "(default 200, which keeps the whole demo under 5 minutes)",
    )
    parser.add_argument("--steps", type=int, default=None, help="fix the number of steps (skips the size choice)")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--seq_len", type=int, default=None, help="fix the window length (skips the size choice)")
    parser.add_argument("--hidden", type=int, default=None, help="fix the hidden size (skips the size choice)")
    parser.add_argument("--layers", type=int, default=None, help="fix the number of layers (skips the size choice)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: comparable step times, and no slowdown when other processes share the cores)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run of about a minute: 40 steps of the smallest model"
    )
    opts = parser.parse_args()
    if opts.threads:
        torch.set_num_threads(opts.threads)
    os.makedirs(opts.output_dir, exist_ok=True)
    logging.set_verbosity_warning()

    started = time.perf_counter()
    support = bf16_support("cpu")
    print(f"{support.describe()}; {torch.get_num_threads()} torch thread(s)")
    fixed = {key: getattr(opts, key) for key in SIZES[0] if getattr(opts, key) is not None}
    if opts.quick:
        size, why = dict(QUICK, **fixed), ["--quick"]
    elif fixed:
        size, why = dict(SIZES[0], **fixed), ["fixed on the command line"]
    else:
        size, why = choose_size(opts.budget, opts.batch_size)
        why.append(f"--budget {opts.budget:g} s for the three training runs")
    for key, value in size.items():
        setattr(opts, key, value)
    print(f"size: {describe_size(size)}; how it was chosen:")
    for line in why:
        print(f"  {line}")

    data = torch.tensor(list(load_text()), dtype=torch.long)
    split = int(0.95 * len(data))
    train_set = ByteWindows(data[:split], opts.seq_len, opts.steps * opts.batch_size, seed=opts.seed)
    eval_set = ByteWindows(data[split:], opts.seq_len, 128, seed=opts.seed, random=False)
    print(f"pydoc_data.topics: {len(data):,} bytes ({split:,} train, {len(data) - split:,} held out)")

    results = {name: train_one(name, opts, train_set, eval_set) for name in RUNS}
    training_seconds = time.perf_counter() - started

    png = os.path.join(opts.output_dir, "loss_curves.png")
    machine = f"{platform_name()}, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}; {support.describe()}"
    write_plot(results, png, opts, machine)
    table = summary_table(results)
    with open(os.path.join(opts.output_dir, "summary.md"), "w") as f:
        f.write(f"{describe_size(size)}; {machine}\n\n{table}\n")
    with open(os.path.join(opts.output_dir, "summary.json"), "w") as f:
        json.dump({"machine": machine, "size": size, "runs": results}, f, indent=2)

    print("\n" + table + "\n")
    kahan, plain, fp32 = (results[k]["eval_loss"] for k in ("bf16_kahan", "bf16_adamw", "fp32"))
    print(
        f"bf16 + Kahan / fp32 eval loss: {kahan / fp32:.4f}; plain bf16 / fp32: {plain / fp32:.4f}. "
        f"Wrote {png}, {opts.output_dir}/summary.md and three checkpoints."
    )
    for r in results.values():
        print(
            f"  {r['checkpoint']}/config.json: trained_precision={r['trained_precision']!r}, dtype={r['saved_dtype']!r}"
        )

    checkpoint = results["bf16_kahan"]["checkpoint"]
    print(f"\nReloading {checkpoint} in float16 (the model was trained in bf16; fp16 overflows above 65504):")
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float16)
    print(f"  loaded as {model.dtype}; config.trained_precision = {model.config.trained_precision!r}")
    print(
        f"\nDone in {time.perf_counter() - started:.0f} s ({training_seconds:.0f} s to choose the size and train; "
        f"{support.describe()})."
    )
    if not math.isfinite(kahan):
        raise SystemExit("the Kahan run diverged")


if __name__ == "__main__":
    main()
