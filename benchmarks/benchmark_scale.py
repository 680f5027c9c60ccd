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
Every trained-precision feature at the sizes users run: a Llama layout of 1.1B parameters (hidden 2048, 22 layers,
intermediate 5632, 32 heads, 4 key-value heads, vocabulary 32000), T5-large's shape (0.74B) and a 7B Llama layout
(fp16, loading and hashing only), side by side with the pinned upstream release.

The checkpoints are random-init, written once as safetensors shards under `.cache/scale/` (git-ignored; the 7B one
is 13.5 GB and is only written when the disk has room). Upstream runs from `.cache/upstream-venv`, a venv this
script builds once as a copy of the fork's venv with `transformers==5.25.0` in place of the fork (every other package
the same, since importing a model class imports the optional integrations that are installed).

Every measure runs in a child process of its own (a cold interpreter, a warm page cache), fork and upstream
alternating, so a change of the machine's load falls on both. The parent watches each child: its peak resident
memory (`ru_maxrss` from `wait4`, so the interpreter, torch and every transient are counted) and the machine's
`MemAvailable`; a child is killed when `MemAvailable` drops below 1.5 GB, so no measure can run the machine out of
memory. A child predicted above 3 GB holds `/tmp/bigmem.lock` (exclusive) while it runs.

Measures (`--parts`, all by default):

- `train`: `Trainer` steps (batch 1, `--seq` tokens) for fp32 AdamW, `bf16=True`, `bf16_full_train=True` (optimi
  AdamW with Kahan summation) and `bf16_full_train=True, optim="adamw_torch_8bit"` (torchao 8-bit + stochastic
  rounding), every weight cast (`bf16_full_train_cast_all=True`, as the guide's table counts). Peak resident memory
  at two sizes of the 1.1B layer shape (2 and 8 layers) gives bytes per parameter (the slope) and the fixed cost
  (the intercept); from them, the peak at 1.1B, and the largest model each optimizer trains within this machine's
  memory. The 1.1B row itself runs when `MemAvailable` has the predicted peak + 3 GB; then a size that bf16 AMP
  cannot fit trains a few steps with Kahan (and 8-bit + SR).
- `load`: `from_pretrained` + the first `--tokens`-token forward, fork / upstream: bf16; fp16 (a bf16-trained model,
  the check warns). The binding alone (`binding_digest`: first, then kept) at 1.1B and 7B, as a share of the
  load: what a load of a checkpoint storing an fp16 plan, a bound run or a publisher reference pays on top.
- `sentinel`: what the forward's fp16 check costs an fp16 forward and a `generate` step at 1.1B (the check
  timed on the real outputs against the forward's time; fp16 is emulated on AVX2-only CPUs, which makes the share
  smaller than where fp16 is native).
- `audit`: `transformers precision --audit` and `transformers precision plan` on the 1.1B layout with a planted
  fp16 overflow: wall time and peak memory; the audit beside an fp32 reference process (the same load and one
  plain fp32 forward of each of the audit's calibration inputs), whose wall time it should stay within 2x of.

`--quick` runs a 17M-parameter Llama layout through every part (about a minute where bf16 is native). Usage:

    python benchmarks/benchmark_scale.py [--quick] [--parts train,load,sentinel,audit] [--repeats 3]
"""

import argparse
import contextlib
import fcntl
import gc
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CACHE = os.path.join(ROOT, ".cache", "scale")
UPSTREAM_VENV = os.path.join(ROOT, ".cache", "upstream-venv")
#: The pinned upstream release, installed over a copy of the fork's venv (`upstream_python`).
UPSTREAM_PIN = "transformers==5.25.0"
LOCK = "/tmp/bigmem.lock"
#: A child predicted above this many bytes holds the exclusive memory lock.
SMALL_PROCESS = 3e9
#: The watchdog kills a child when the machine's available memory drops below this.
FLOOR = 1.5e9
GB = 1e9

LLAMA_1B = {
    "hidden_size": 2048,
    "num_hidden_layers": 22,
    "intermediate_size": 5632,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
}
#: name -> (architecture, config keywords)
SHAPES = {
    "llama-1.1b": ("llama", LLAMA_1B),
    "llama-7b": (
        "llama",
        dict(LLAMA_1B, hidden_size=4096, num_hidden_layers=32, intermediate_size=11008, num_key_value_heads=32),
    ),
    "t5-large": ("t5", {"d_model": 1024, "d_ff": 4096, "d_kv": 64, "num_layers": 24, "num_heads": 16}),
    "llama-quick": (
        "llama",
        dict(LLAMA_1B, hidden_size=256, num_hidden_layers=2, intermediate_size=704, num_attention_heads=8),
    ),
}
#: optimizer -> (label, TrainingArguments keywords, the guide's bytes of training state per parameter)
OPTIMIZERS = {
    "fp32": ("fp32 + torch AdamW", {"optim": "adamw_torch"}, 16.0),
    "bf16_amp": ("bf16 AMP (bf16=True) + torch AdamW", {"bf16": True, "optim": "adamw_torch"}, 16.0),
    "bf16_kahan": ("pure bf16 + optimi AdamW (Kahan)", {"bf16_full_train": True}, 10.0),
    "bf16_8bit_sr": (
        "pure bf16 + torchao 8-bit AdamW + SR",
        {"bf16_full_train": True, "optim": "adamw_torch_8bit"},
        6.1,
    ),
}


def llama_params(config: dict) -> int:
    """Parameters of a Llama layout (untied embeddings, no biases)."""
    h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    kv = h * config["num_key_value_heads"] // config["num_attention_heads"]
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * inter + 2 * h
    return 2 * config["vocab_size"] * h + layers * per_layer + h


# ---------------------------------------------------------------------------------------------------------------
# the machine


def machine_line() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    return (
        f"{cpu}, {os.cpu_count()} cores, cpu capability {torch.backends.cpu.get_cpu_capability()}, "
        f"{meminfo('MemTotal') / 2**30:.1f} GiB, torch {torch.__version__}"
    )


def meminfo(key: str) -> float:
    """A `/proc/meminfo` value in bytes."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return float(line.split()[1]) * 1024
    raise KeyError(key)


def load_average() -> str:
    return "{:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())


# ---------------------------------------------------------------------------------------------------------------
# children: each measure in a process of its own, watched


def upstream_python() -> str:
    """
    The pinned upstream release's interpreter: a copy of the fork's venv with `transformers` swapped for the release,
    built once. Every other package is the fork's own, at the same version: importing a model class imports the
    optional integrations that are installed (torchao, deepspeed, peft...), so a venv with fewer packages would
    import faster and bias every ratio.
    """
    python = os.path.join(UPSTREAM_VENV, "bin", "python")
    if not os.path.exists(os.path.join(UPSTREAM_VENV, ".complete")):
        print(f"building {UPSTREAM_VENV} (a copy of {sys.prefix} with {UPSTREAM_PIN}) ...", flush=True)
        shutil.rmtree(UPSTREAM_VENV, ignore_errors=True)
        shutil.copytree(sys.prefix, UPSTREAM_VENV, symlinks=True)
        pip = [python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", UPSTREAM_PIN]
        subprocess.run(pip, check=True)
        open(os.path.join(UPSTREAM_VENV, ".complete"), "w").close()
    return python


@contextlib.contextmanager
def memory_lock(needed: float):
    """The team's exclusive lock for a process above `SMALL_PROCESS` bytes (none below)."""
    if needed <= SMALL_PROCESS:
        yield
        return
    with open(LOCK, "a") as handle:
        print(f"  (waiting for {LOCK}: {needed / GB:.1f} GB predicted)", flush=True)
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_child(python: str, mode: str, spec: dict, needed: float = 0.0, command=None) -> dict:
    """
    Runs `mode` with `spec` in a child (or `command`), watched: its result (the JSON it prints last), its peak
    resident memory (`ru_maxrss`) and wall time; killed when `MemAvailable` drops below `FLOOR`.
    """
    command = command or [python, os.path.abspath(__file__), "--child", mode, "--spec", json.dumps(spec)]
    env = dict(os.environ, PYTHONWARNINGS="ignore", TOKENIZERS_PARALLELISM="false")
    with memory_lock(needed), tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        killed = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if killed is None and meminfo("MemAvailable") < FLOOR:
                killed = f"killed by the watchdog: MemAvailable below {FLOOR / GB:.1f} GB"
                proc.kill()
            time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        text = out.read()
    result = {}
    for line in text.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
    if not result and "{" in text:  # a command's `--json` document
        with contextlib.suppress(ValueError):
            result = {"document": json.loads(text[text.index("{") :]), "exit_code": proc.returncode}
    if not result:
        result["error"] = killed or f"exit {proc.returncode}: {text[-2000:]}"
    result.update(peak_rss=usage.ru_maxrss * 1024, wall=wall, load=load_average())
    return result


def child_result(**values):
    """What a child reports to its parent."""
    print("RESULT " + json.dumps(values), flush=True)


# ---------------------------------------------------------------------------------------------------------------
# checkpoints


def make_config(arch: str, values: dict, **extra):
    from transformers import LlamaConfig, T5Config

    if arch == "llama":
        return LlamaConfig(**values, max_position_embeddings=2048, tie_word_embeddings=False, **extra)
    return T5Config(**values, **extra)


def model_class(arch: str):
    from transformers import LlamaForCausalLM, T5ForConditionalGeneration

    return LlamaForCausalLM if arch == "llama" else T5ForConditionalGeneration


def write_checkpoint(spec: dict) -> None:
    """
    Child: a random-init checkpoint of `spec["shape"]` in `spec["dtype"]`, written shard by shard from a model on
    the meta device, so that writing a 7B checkpoint holds one shard in memory, not the model.
    """
    import torch
    from safetensors.torch import save_file

    arch, values = SHAPES[spec["shape"]]
    dtype = getattr(torch, spec["dtype"])
    config = make_config(arch, values, trained_precision="bf16", dtype=spec["dtype"])
    with torch.device("meta"):
        model = model_class(arch)(config)
    folder, generator = spec["folder"], torch.Generator().manual_seed(0)
    weight_map, shard, shard_bytes, total, count = {}, {}, 0, 0, 0
    tensors = list(model.state_dict().items())
    for position, (name, meta) in enumerate(tensors):
        if name.endswith("norm.weight") or name.endswith("layer_norm.weight"):
            value = torch.ones(meta.shape, dtype=dtype)
        else:
            value = (torch.randn(meta.shape, generator=generator) * 0.02).to(dtype)
        shard[name], shard_bytes = value, shard_bytes + value.numel() * value.element_size()
        if shard_bytes > 1e9 or position == len(tensors) - 1:
            count += 1
            filename = f"model-{count:05d}.safetensors"
            save_file(shard, os.path.join(folder, filename), metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(shard, filename))
            total, shard, shard_bytes = total + shard_bytes, {}, 0
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f)
    config.save_pretrained(folder)
    child_result(parameters=sum(t.numel() for _, t in tensors), bytes=total)


def ensure_checkpoint(shape: str, dtype: str) -> str:
    """The cached checkpoint of `shape` (written once, by a child)."""
    folder = os.path.join(CACHE, f"{shape}-{dtype}")
    if os.path.exists(os.path.join(folder, "config.json")):
        return folder
    os.makedirs(folder, exist_ok=True)
    print(f"writing {folder} ...", flush=True)
    result = run_child(sys.executable, "write", {"shape": shape, "dtype": dtype, "folder": folder})
    if "error" in result:
        raise RuntimeError(f"writing {folder} failed: {result['error']}")
    print(f"  {result['parameters'] / 1e9:.3f}B parameters, {result['bytes'] / GB:.2f} GB, {result['wall']:.0f} s")
    return folder


def size_on_disk(folder: str) -> float:
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder) if n.endswith(".safetensors"))


# ---------------------------------------------------------------------------------------------------------------
# training memory


def train_steps(spec: dict) -> None:
    """Child: `spec["steps"]` `Trainer` steps of one optimizer on a random-init Llama layout; times and memory."""
    import torch

    from transformers import LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

    torch.manual_seed(0)
    label, kwargs, _ = OPTIMIZERS[spec["optimizer"]]
    pure = bool(kwargs.get("bf16_full_train"))
    config = make_config("llama", spec["config"])
    torch.set_default_dtype(torch.bfloat16 if pure else torch.float32)  # built in its training dtype: no fp32 copy
    model = LlamaForCausalLM(config)
    torch.set_default_dtype(torch.float32)
    built_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    data = [
        {"input_ids": ids, "labels": ids}
        for ids in torch.randint(0, config.vocab_size, (spec["steps"], spec["seq"])).tolist()
    ]
    times = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **unused):
            times.append(-time.perf_counter())

        def on_step_end(self, args, state, control, **unused):
            times[-1] += time.perf_counter()

    extra = {"bf16_full_train_cast_all": True} if pure else {}
    args = TrainingArguments(
        output_dir=spec["output_dir"],
        max_steps=spec["steps"],
        per_device_train_batch_size=1,
        learning_rate=1e-4,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        logging_steps=10**6,
        disable_tqdm=True,
        **kwargs,
        **extra,
    )
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[Clock()])
    result = trainer.train()
    child_result(
        parameters=sum(p.numel() for p in model.parameters()),
        built_rss=built_rss,
        step_times=times,
        loss=result.training_loss,
        dtype=str(next(model.parameters()).dtype),
        optimizer=type(
            trainer.optimizer.optimizer if hasattr(trainer.optimizer, "optimizer") else trainer.optimizer
        ).__name__,
    )


def train_row(base: dict, optimizer: str, layers: int, opts, predicted: float, steps: int | None = None) -> dict:
    config, seq, steps = dict(base, num_hidden_layers=layers), opts.seq, steps or opts.steps
    with tempfile.TemporaryDirectory() as output_dir:
        spec = {"optimizer": optimizer, "config": config, "seq": seq, "steps": steps, "output_dir": output_dir}
        result = run_child(sys.executable, "train", spec, needed=predicted)
    result.update(optimizer=optimizer, layers=layers, parameters=result.get("parameters", llama_params(config)))
    steps_after_first = result.get("step_times", [])[1:]
    result["step"] = statistics.median(steps_after_first) if steps_after_first else None
    if "error" not in result:
        first = result["step_times"][0]
        step = f"{result['step']:.1f}" if result["step"] else "-"
        print(
            f"  {OPTIMIZERS[optimizer][0]:<40} {layers:>3} layers {result['parameters'] / 1e9:6.3f}B  peak "
            f"{result['peak_rss'] / GB:6.2f} GB ({result['peak_rss'] / result['parameters']:5.1f} B/param)  first "
            f"step {first:6.1f} s, then {step} s  load {result['load']}",
            flush=True,
        )
    else:
        print(f"  {OPTIMIZERS[optimizer][0]:<40} {layers:>3} layers: {result['error'][-600:]}", flush=True)
    return result


def fit(rows: list[dict]) -> tuple[float, float]:
    """Bytes per parameter (slope) and fixed bytes (intercept) of peak memory, from two sizes."""
    (n1, m1), (n2, m2) = sorted((r["parameters"], r["peak_rss"]) for r in rows)
    slope = (m2 - m1) / (n2 - n1)
    return slope, m1 - slope * n1


def layers_within(base: dict, slope: float, intercept: float, budget: float) -> int:
    """The most layers of `base`'s layer shape whose predicted peak fits `budget` bytes."""
    layers = 0
    while intercept + slope * llama_params(dict(base, num_hidden_layers=layers + 1)) <= budget:
        layers += 1
    return layers


def part_train(opts, report: dict) -> None:
    """Peak memory per optimizer at two sizes, the fit, 1.1B when it fits now, and a size bf16 AMP cannot fit."""
    base = SHAPES["llama-quick" if opts.quick else "llama-1.1b"][1]
    if opts.train_rows:
        report["train_rows"] = train_named_rows(opts, base)
        return
    small, large = (2, 12) if opts.quick else (2, 8)
    print(f"\n## training: batch 1 x {opts.seq} tokens, {opts.steps} steps (peak RSS of the whole process)")
    rows, fits = [], {}
    for optimizer, (_, _, guide) in OPTIMIZERS.items():
        found = [
            train_row(
                base, optimizer, layers, opts, (guide + 4) * llama_params(dict(base, num_hidden_layers=layers)) + GB
            )
            for layers in (small, large)
        ]
        rows += found
        if all("error" not in row for row in found):
            fits[optimizer] = fit(found)
    budget = meminfo("MemTotal") - FLOOR
    summary = {}
    print(f"\nfit over {small} and {large} layers; budget: MemTotal - {FLOOR / GB:.1f} GB = {budget / GB:.1f} GB")
    for optimizer, (slope, intercept) in fits.items():
        at_full = intercept + slope * llama_params(base)
        most = layers_within(base, slope, intercept, budget)
        summary[optimizer] = {
            "bytes_per_param": slope,
            "fixed": intercept,
            "predicted_full": at_full,
            "largest_layers": most,
            "largest_params": llama_params(dict(base, num_hidden_layers=most)),
        }
        print(
            f"  {OPTIMIZERS[optimizer][0]:<40} {slope:5.2f} B/param (guide {OPTIMIZERS[optimizer][2]:4.1f}) + "
            f"{intercept / GB:5.2f} GB; predicted at {llama_params(base) / 1e9:.2f}B: {at_full / GB:5.1f} GB; largest "
            f"here: {most} layers, {summary[optimizer]['largest_params'] / 1e9:.2f}B",
            flush=True,
        )
    report["train"] = {"rows": rows, "fits": summary, "budget": budget}
    if not opts.quick:  # the quick layout's fitting sizes bracket its full size; its AMP limit is thousands of layers
        rows += train_at_full(opts, base, summary)
        rows += train_past_amp(opts, base, summary)


def train_named_rows(opts, base: dict) -> list[dict]:
    """`--train-rows optimizer:layers,...`: those rows alone (predicted from the guide's bytes per parameter)."""
    rows = []
    for item in opts.train_rows:
        optimizer, layers = item.split(":")
        params = llama_params(dict(base, num_hidden_layers=int(layers)))
        predicted = (OPTIMIZERS[optimizer][2] + 1) * params + GB
        if not fits_now(predicted, margin=FLOOR + GB):
            print(f"  {optimizer} at {layers} layers: predicted {predicted / GB:.1f} GB; not available now")
            continue
        rows.append(train_row(base, optimizer, int(layers), opts, predicted, steps=opts.full_steps))
    return rows


def fits_now(predicted: float, margin: float = 3 * GB) -> bool:
    return predicted + margin <= meminfo("MemAvailable")


def train_at_full(opts, base: dict, summary: dict) -> list[dict]:
    """Each optimizer at the full size, when `MemAvailable` holds its predicted peak + 3 GB."""
    rows = []
    for optimizer, fitted in summary.items():
        if optimizer in opts.skip_full:
            continue
        if not fits_now(fitted["predicted_full"]):
            print(
                f"  {optimizer} at full size: predicted {fitted['predicted_full'] / GB:.1f} GB + 3 GB not available now"
            )
            continue
        row = train_row(
            base, optimizer, base["num_hidden_layers"], opts, fitted["predicted_full"], steps=opts.full_steps
        )
        row["predicted"] = fitted["predicted_full"]
        rows.append(row)
    return rows


def train_past_amp(opts, base: dict, summary: dict) -> list[dict]:
    """Pure bf16 (Kahan, then 8-bit + SR) at the smallest size whose bf16 AMP peak is predicted past the budget."""
    if "bf16_amp" not in summary:
        return []
    layers = summary["bf16_amp"]["largest_layers"] + 1
    params = llama_params(dict(base, num_hidden_layers=layers))
    print(f"\nbf16 AMP predicted not to fit at {layers} layers ({params / 1e9:.2f}B): pure bf16 there")
    rows = []
    for optimizer in ("bf16_kahan", "bf16_8bit_sr"):
        fitted = summary.get(optimizer)
        if fitted is None or optimizer in opts.skip_past_amp:
            continue
        predicted = fitted["fixed"] + fitted["bytes_per_param"] * params
        if not fits_now(predicted, margin=FLOOR + GB):
            print(f"  {optimizer}: predicted {predicted / GB:.1f} GB; not available now")
            continue
        row = train_row(base, optimizer, layers, opts, predicted, steps=opts.full_steps)
        row.update(predicted=predicted, past_amp=True)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------------------------
# loading, hashing


def load_and_forward(spec: dict) -> None:
    """Child (fork or upstream): `from_pretrained` + the first forward; on the fork, the digest timed apart."""
    import torch

    import transformers
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    arch = spec["arch"]
    dtype = getattr(torch, spec["dtype"])
    start = time.perf_counter()
    cls = model_class(arch)  # the model's modules, and on the fork the trained_precision ones they import
    imported = time.perf_counter() - start
    fork_code = account_fork_code() if spec.get("digest") else None
    start = time.perf_counter()
    model = cls.from_pretrained(spec["folder"], dtype=dtype)
    loaded = time.perf_counter() - start
    fork_first = fork_code["s"] if fork_code else None
    forward = None
    if spec["tokens"]:
        ids = torch.randint(
            0, model.config.vocab_size, (1, spec["tokens"]), generator=torch.Generator().manual_seed(0)
        )
        extra = {"decoder_input_ids": ids[:, :8]} if arch == "t5" else {}
        start = time.perf_counter()
        with torch.no_grad():
            model(input_ids=ids, **extra)
        forward = time.perf_counter() - start
    del model
    gc.collect()
    start = time.perf_counter()  # again, in the same process: the code's cost without the first load's imports
    model = cls.from_pretrained(spec["folder"], dtype=dtype)
    again = time.perf_counter() - start
    digests = {}
    if spec.get("digest"):
        from transformers.trained_precision.facts.binding import binding_digest

        for key in ("binding", "kept"):  # the first digest of this load, then the one kept on the model
            start = time.perf_counter()
            binding_digest(model)
            digests[key] = time.perf_counter() - start
    child_result(
        import_s=imported,
        load_s=loaded,
        again_s=again,
        fork_code_s=[fork_first, fork_code["s"] - fork_first] if fork_code else None,
        forward_s=forward,
        digest_s=digests,
        version=transformers.__version__,
    )


#: What `modeling_utils` calls into `transformers.trained_precision` on a load and a cast (patches 0011-0020).
FORK_CALLS = (
    "check_trained_precision",
    "remember_check_mode",
    "apply_fp16_plan",
    "fp16_plan_dtype_plan",
    "fp16_plan_pending",
)


def account_fork_code() -> dict:
    """
    Times every call `modeling_utils` makes into the fork's code on the load path (`FORK_CALLS`, and what
    `fp16_plan_apply` adds around upstream's `_apply`), accumulated in the returned `{"s": seconds}`: the fork's own
    cost, exactly, where a ratio of two loads a few percent apart cannot resolve it.
    """
    from transformers import modeling_utils

    totals = {"s": 0.0}

    def timed(original):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                totals["s"] += time.perf_counter() - start

        return call

    for name in FORK_CALLS:
        setattr(modeling_utils, name, timed(getattr(modeling_utils, name)))
    plan_apply = modeling_utils.fp16_plan_apply

    def apply_around(model, apply, fn, recurse=True):
        inner = [0.0]

        def upstream_apply(*args, **kwargs):
            start = time.perf_counter()
            try:
                return apply(*args, **kwargs)
            finally:
                inner[0] += time.perf_counter() - start

        start = time.perf_counter()
        try:
            return plan_apply(model, upstream_apply, fn, recurse)
        finally:
            totals["s"] += time.perf_counter() - start - inner[0]

    modeling_utils.fp16_plan_apply = apply_around
    return totals


def paired(opts, spec: dict, needed: float, upstream: str) -> dict:
    """`opts.repeats` pairs of fork and upstream children, alternating which goes first."""
    runs = {"fork": [], "upstream": []}
    for repeat in range(opts.repeats):
        order = ("fork", "upstream") if repeat % 2 == 0 else ("upstream", "fork")
        for side in order:
            python = sys.executable if side == "fork" else upstream
            runs[side].append(run_child(python, "load", dict(spec, digest=side == "fork"), needed=needed))
    return runs


def ratio_line(fork: list[float], upstream: list[float]) -> str:
    """Median of the per-pair ratios with their range."""
    ratios = sorted(f / u for f, u in zip(fork, upstream))
    return f"{statistics.median(ratios):.3f} [{ratios[0]:.3f}-{ratios[-1]:.3f}]"


def part_load(opts, report: dict) -> None:
    """Fork / upstream: bf16 load, fp16 load (warned); the digest alone."""
    upstream = upstream_python()
    shapes = [s for s in (["llama-quick"] if opts.quick else ["llama-1.1b", "t5-large"]) if s not in opts.skip_shapes]
    print(f"\n## from_pretrained + first {opts.tokens}-token forward, fork / upstream, {opts.repeats} pairs")
    rows = []
    for shape in shapes:
        arch = SHAPES[shape][0]
        folder = ensure_checkpoint(shape, "bfloat16") if arch == "llama" else ensure_t5(shape)
        cases = [("bf16", "bf16", folder, "bfloat16"), ("fp16", "fp16 (bf16-trained: warned)", folder, "float16")]
        for key, name, path, dtype in cases:
            if opts.load_cases and key not in opts.load_cases:
                continue
            spec = {"arch": arch, "folder": path, "dtype": dtype, "tokens": opts.tokens}
            runs = paired(opts, spec, size_on_disk(folder) + 0.7 * GB, upstream)  # the weights + the interpreter
            rows.append(load_row(shape, name, runs))
    report["load"] = rows
    part_digest(opts, report, upstream)


def load_row(shape: str, name: str, runs: dict) -> dict:
    errors = [r["error"] for side in runs.values() for r in side if "error" in r]
    if errors:
        print(f"  {shape} {name}: {errors[0][-800:]}")
        return {"shape": shape, "case": name, "error": errors[0]}
    fork, up = runs["fork"], runs["upstream"]
    row = {"shape": shape, "case": name, "fork": fork, "upstream": up}
    row["load_ratio"] = ratio_line([r["load_s"] for r in fork], [r["load_s"] for r in up])
    row["import_ratio"] = ratio_line([r["import_s"] for r in fork], [r["import_s"] for r in up])
    if all("again_s" in r for r in fork + up):
        row["again_ratio"] = ratio_line([r["again_s"] for r in fork], [r["again_s"] for r in up])
    if fork[0]["forward_s"] is not None:
        row["total_ratio"] = ratio_line(
            [r["import_s"] + r["load_s"] + r["forward_s"] for r in fork],
            [r["import_s"] + r["load_s"] + r["forward_s"] for r in up],
        )
    median = statistics.median
    if all(r.get("fork_code_s") for r in fork):
        whole = [r["load_s"] + (r["forward_s"] or 0.0) for r in fork]
        share = [r["fork_code_s"][0] / w for r, w in zip(fork, whole)]
        row["fork_code"] = {
            "first_load_ms": median(r["fork_code_s"][0] for r in fork) * 1e3,
            "second_load_ms": median(r["fork_code_s"][1] for r in fork) * 1e3,
            "share_of_load_and_forward": median(share),
        }
    row["text"] = (
        f"  {shape:<11} {name:<38} class import {median(r['import_s'] for r in fork):5.2f} / "
        f"{median(r['import_s'] for r in up):5.2f} s = {row['import_ratio']}; "
        f"from_pretrained {median(r['load_s'] for r in fork):6.2f} / "
        f"{median(r['load_s'] for r in up):6.2f} s = {row['load_ratio']}; import + load + forward = "
        f"{row.get('total_ratio', '-')} (with the import); second load in the process {row.get('again_ratio', '-')}; peak {median(r['peak_rss'] for r in fork) / GB:.2f} / "
        f"{median(r['peak_rss'] for r in up) / GB:.2f} GB; binding {median(r['digest_s']['binding'] for r in fork) * 1e3:.1f} ms "
        f"(kept {median(r['digest_s']['kept'] for r in fork) * 1e3:.1f} ms) after the second load; load {fork[-1]['load']}"
        + (
            f"\n{'':<52}the fork's own code on the load path: {row['fork_code']['first_load_ms']:.1f} ms on the first "
            f"load, {row['fork_code']['second_load_ms']:.1f} ms on the second = "
            f"{row['fork_code']['share_of_load_and_forward']:.2%} of load + forward"
            if "fork_code" in row
            else ""
        )
    )
    print(row["text"], flush=True)
    return row


def ensure_t5(shape: str) -> str:
    """T5's tied embeddings: written with `save_pretrained` from a model built in bf16 (1.5 GB)."""
    folder = os.path.join(CACHE, f"{shape}-bfloat16")
    if not os.path.exists(os.path.join(folder, "config.json")):
        result = run_child(sys.executable, "write_t5", {"shape": shape, "folder": folder}, needed=2 * GB)
        if "error" in result:
            raise RuntimeError(result["error"])
    return folder


def write_t5(spec: dict) -> None:
    import torch

    arch, values = SHAPES[spec["shape"]]
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    model = model_class(arch)(make_config(arch, values, trained_precision="bf16"))
    model.save_pretrained(spec["folder"])
    child_result(parameters=sum(p.numel() for p in model.parameters()))


def part_digest(opts, report: dict, upstream: str) -> None:
    """7B (fp16): load fork / upstream (no forward) and the digest alone, when disk and memory allow."""
    if opts.quick or "llama-7b" in opts.skip_shapes:
        return
    free_disk = os.statvfs(CACHE).f_bavail * os.statvfs(CACHE).f_frsize
    needed = llama_params(SHAPES["llama-7b"][1]) * 2
    if not os.path.exists(os.path.join(CACHE, "llama-7b-float16", "config.json")) and free_disk < needed + 20 * GB:
        print(f"7B: {free_disk / GB:.0f} GB free on disk, {needed / GB:.1f} GB needed + 20 GB: skipped")
        return
    if not fits_now(needed + GB):
        print(f"7B: {needed / GB:.1f} GB + 4 GB not available now: skipped")
        return
    folder = ensure_checkpoint("llama-7b", "float16")
    spec = {"arch": "llama", "folder": folder, "dtype": "float16", "tokens": 0}
    report["load_7b"] = [load_row("llama-7b", "fp16, no forward", paired(opts, spec, needed + GB, upstream))]


# ---------------------------------------------------------------------------------------------------------------
# sentinel


def sentinel_cost(spec: dict) -> None:
    """
    Child (fork): an fp16 forward and `generate` steps with the forward's fp16 check and without it (every model
    module given its class's unwrapped forward, upstream's), and the check alone on the real outputs.
    """
    import os
    import timeit
    from types import MethodType

    import torch

    from transformers import LlamaForCausalLM
    from transformers.modeling_utils import PreTrainedModel
    from transformers.trained_precision.guard import sentinel
    from transformers.utils import logging

    logging.set_verbosity_error()
    os.environ["TRANSFORMERS_TRAINED_PRECISION_CHECK"] = "error"  # checked at every forward, whatever the config says
    model = LlamaForCausalLM.from_pretrained(spec["folder"], dtype=torch.float16)
    modules = [module for module in model.modules() if isinstance(module, PreTrainedModel)]

    def set_arm(arm: str) -> None:
        for module in modules:
            module.__dict__.pop("forward", None)
            if arm != "with":
                module.forward = MethodType(type(module).forward.__wrapped__, module)

    ids = torch.randint(0, model.config.vocab_size, (1, spec["tokens"]), generator=torch.Generator().manual_seed(0))
    work = {
        "forward": lambda: model(input_ids=ids),
        "generate": lambda: model.generate(
            ids[:, :8],
            max_new_tokens=spec["new_tokens"],
            do_sample=False,
            return_dict_in_generate=True,
            output_logits=True,
        ),
    }
    times, outputs = {(w, arm): [] for w in work for arm in ("with", "without")}, {}
    with torch.no_grad():
        for repeat in range(spec["repeats"]):
            for arm in ("with", "without") if repeat % 2 == 0 else ("without", "with"):
                set_arm(arm)
                for name, call in work.items():
                    start = time.process_time()
                    outputs[name] = call()
                    times[name, arm].append(time.process_time() - start)
        set_arm("with")
        step_output = {"logits": outputs["generate"].logits[-1]}

        def check(output):
            return lambda: sentinel._check(model, output, (), {})

        hook = {
            "forward": min(timeit.repeat(check(outputs["forward"]), number=20, repeat=3)) / 20,
            "generate": min(timeit.repeat(check(step_output), number=20, repeat=3)) / 20,
        }
    child_result(attached=True, times={f"{w}|{a}": t for (w, a), t in times.items()}, hook=hook)


def part_sentinel(opts, report: dict) -> None:
    shape = "llama-quick" if opts.quick else "llama-1.1b"
    folder = ensure_checkpoint(shape, "bfloat16")
    spec = {"folder": folder, "tokens": opts.sentinel_tokens, "new_tokens": 4, "repeats": opts.sentinel_repeats}
    print(f"\n## sentinel, {shape} in fp16: a {opts.sentinel_tokens}-token forward, generate 4 tokens from 8")
    result = run_child(sys.executable, "sentinel", spec, needed=size_on_disk(folder) + 0.8 * GB)
    report["sentinel"] = result
    if "error" in result:
        print(f"  {result['error'][-800:]}")
        return
    for work, per_call in result["hook"].items():
        with_, without = result["times"][f"{work}|with"], result["times"][f"{work}|without"]
        whole = statistics.median(without) / (1 if work == "forward" else spec["new_tokens"])
        ratios = sorted(w / o for w, o in zip(with_, without))
        print(
            f"  {work:<8} without {statistics.median(without):7.2f} s CPU; with/without {statistics.median(ratios):.4f} "
            f"[{ratios[0]:.4f}-{ratios[-1]:.4f}]; hook alone {per_call * 1e6:.0f} us -> implied "
            f"{1 + per_call / whole:.5f} (per {'forward' if work == 'forward' else 'generate step'}); "
            f"load {result['load']}",
            flush=True,
        )


# ---------------------------------------------------------------------------------------------------------------
# audit and plan


def plant(spec: dict) -> None:
    """Child (fork): the checkpoint with an fp16 overflow planted in one MLP (up x k, down / k), saved in bf16."""
    import torch

    from transformers import LlamaForCausalLM
    from transformers.trained_precision.testing_utils import plant_fp16_overflow

    model = LlamaForCausalLM.from_pretrained(spec["folder"], dtype=torch.float32)
    plant_fp16_overflow(model, "model.layers.1.mlp.up_proj", "model.layers.1.mlp.down_proj")
    model.to(torch.bfloat16).save_pretrained(spec["planted"])
    child_result(planted=spec["planted"])


def fp32_reference(spec: dict) -> None:
    """
    Child (fork): what the audit is compared with: the same process, the same fp32 load and one fp32 forward of each
    of the audit's own calibration inputs (`calibration_inputs` without a tokenizer), with no recorder.
    """
    import torch

    from transformers import LlamaForCausalLM
    from transformers.trained_precision.plan.audit import calibration_inputs

    start = time.perf_counter()
    model = LlamaForCausalLM.from_pretrained(spec["folder"], dtype=torch.float32)
    loaded = time.perf_counter() - start
    inputs, _ = calibration_inputs(model)
    start = time.perf_counter()
    with torch.no_grad():
        for batch in inputs:
            model(**batch)
    child_result(load_s=loaded, forward_s=time.perf_counter() - start, batches=len(inputs))


def part_audit(opts, report: dict) -> None:
    """`transformers precision --audit` and `transformers precision plan` on the planted checkpoint."""
    shape = "llama-quick" if opts.quick else "llama-1.1b"
    folder = ensure_checkpoint(shape, "bfloat16")
    planted = folder + "-planted"
    needed = size_on_disk(folder) * 2.5 + GB  # fp32 weights + the fp16 copy's working set
    if not os.path.exists(os.path.join(planted, "config.json")):
        result = run_child(sys.executable, "plant", {"folder": folder, "planted": planted}, needed=needed)
        if "error" in result:
            print(f"planting failed: {result['error'][-800:]}")
            return
    cli = os.path.join(os.path.dirname(sys.executable), "transformers")
    commands = {"audit": [cli, "precision", planted, "--dtype", "fp16", "--audit", "--json"]}
    for length in opts.plan_lengths:
        commands[f"plan --max-length {length}"] = [
            cli,
            "precision",
            "plan",
            planted,
            "--dtype",
            "fp16",
            "--max-length",
            str(length),
            "--json",
        ]
    print(f"\n## audit and plan, {shape} with a planted fp16 overflow (model.layers.1.mlp)")
    reference = run_child(sys.executable, "reference", {"folder": planted}, needed=needed)
    if "error" in reference:
        print(f"  fp32 reference failed: {reference['error'][-600:]}")
    else:
        print(
            f"  fp32 reference: load {reference['load_s']:.1f} s + {reference['batches']} forwards "
            f"{reference['forward_s']:.1f} s; {reference['wall']:.1f} s wall (the process), peak "
            f"{reference['peak_rss'] / GB:.2f} GB",
            flush=True,
        )
    rows = []
    for name, command in commands.items():
        result = run_child(sys.executable, "", {}, needed=needed, command=command)
        result["name"] = name
        plan = (result.get("document") or {}).get("plan") or {}
        print(
            f"  {name:<24} {result['wall']:7.1f} s wall, peak {result['peak_rss'] / GB:5.2f} GB, exit "
            f"{result.get('exit_code', '-')}, modules {plan.get('modules', '-')}, attempts {plan.get('attempts', '-')}, "
            f"load {result['load']}{'; ' + result['error'][-600:] if 'error' in result else ''}",
            flush=True,
        )
        if name == "audit" and "error" not in reference:
            result["wall_ratio"] = result["wall"] / reference["wall"]
            print(f"  audit / fp32 reference (whole process): {result['wall_ratio']:.2f} (goal <= 2)", flush=True)
        rows.append(result)
    report["audit"] = rows
    report["audit_reference"] = reference


# ---------------------------------------------------------------------------------------------------------------

CHILDREN = {
    "write": write_checkpoint,
    "write_t5": write_t5,
    "train": train_steps,
    "load": load_and_forward,
    "sentinel": sentinel_cost,
    "plant": plant,
    "reference": fp32_reference,
}
PARTS = {"train": part_train, "load": part_load, "sentinel": part_sentinel, "audit": part_audit}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a 17M-parameter Llama layout through every part")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    parser.add_argument("--repeats", type=int, default=3, help="fork/upstream pairs per load case")
    parser.add_argument("--tokens", type=int, default=128, help="the first forward's length after a load")
    parser.add_argument("--seq", type=int, default=8, help="training sequence length (batch 1)")
    parser.add_argument("--steps", type=int, default=2, help="training steps at the two fitting sizes")
    parser.add_argument("--full-steps", type=int, default=2, help="training steps at 1.1B and past AMP")
    parser.add_argument("--skip-full", default="", help="optimizers not run at the full size (comma-separated)")
    parser.add_argument("--skip-past-amp", default="", help="optimizers not run past AMP's size")
    parser.add_argument("--skip-shapes", default="", help="e.g. llama-7b")
    parser.add_argument("--train-rows", default="", help="only these training rows: optimizer:layers,...")
    parser.add_argument("--load-cases", default="", help="load cases to run (bf16, fp16; default both)")
    parser.add_argument("--sentinel-tokens", type=int, default=32)
    parser.add_argument("--sentinel-repeats", type=int, default=2)
    parser.add_argument("--plan-lengths", default="32", help="plan --max-length values (comma-separated)")
    parser.add_argument("--json", help="also write every number to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    for name in ("skip_full", "skip_past_amp", "skip_shapes", "load_cases", "train_rows"):
        setattr(opts, name, [v for v in getattr(opts, name).split(",") if v])
    opts.plan_lengths = [int(v) for v in opts.plan_lengths.split(",") if v]
    if opts.quick:
        opts.repeats, opts.tokens, opts.full_steps = min(opts.repeats, 2), min(opts.tokens, 32), 2
    return opts


def main():
    opts = parse_args()
    if opts.child:
        import torch

        torch.set_num_threads(int(os.environ.get("SCALE_THREADS", os.cpu_count() or 1)))
        CHILDREN[opts.child](json.loads(opts.spec))
        return
    os.makedirs(CACHE, exist_ok=True)
    started = time.perf_counter()
    report = {"machine": machine_line(), "date": datetime.now(UTC).isoformat(timespec="minutes")}
    print(f"machine: {report['machine']}; load {load_average()}; {report['date']}", flush=True)
    for part in opts.parts.split(","):
        PARTS[part](opts, report)
    report["seconds"] = time.perf_counter() - started
    print(f"\nall parts: {report['seconds'] / 60:.1f} min; load {load_average()}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    main()
