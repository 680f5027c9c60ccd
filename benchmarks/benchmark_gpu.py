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
The fork on one GPU (issue 26): four measurements side by side in one run, written as a Markdown table and a JSON file.

1. `stamp`: a `Trainer` run with `fp16=True` on a bf16-pretrained tiny GPT-2 logs the overflow warning at the start of
   `train()` and stamps `"fp16"`; a `bf16=True` run stamps `"bf16"`.
2. `bf16`: a GPT-2-shaped model of 124M parameters, the same batches for every run, 50 steps each: fp32, bf16 mixed
   precision (`bf16=True`), pure bf16 + optimi AdamW with Kahan summation (`bf16_full_train=True`), pure bf16 + torchao
   `AdamW8bit` with stochastic rounding (`optim="adamw_torch_8bit"`, when torchao imports). Per run: seconds per step
   after warm-up, peak `torch.cuda.max_memory_allocated`, bytes per parameter of weights + gradients + optimizer state
   (read from the live tensors), the loss after the last step, the stamp.
3. `plan`: a GPT-2 with planted overflow (one MLP's `c_fc` scaled up, its `c_proj` down by the same factor): plain fp16
   outputs inf/NaN; `transformers precision plan PATH --dtype fp16 --write` stores a plan in `config.fp16_plan`, and
   `from_pretrained(..., dtype=torch.float16)` applies it. Forward time, memory and error vs fp32 of fp32, bf16, plain
   fp16 and fp16 + plan; then a short `fp16=True` fine-tune without and with the plan (non-finite losses counted).
   Where the installed build has no `plan` command, the rows that need a plan say so and the others still run.
4. `fsdp2`: one rank of FSDP2 (`fsdp=True, fsdp_config={"version": 2}`) with `bf16_full_train=True` and optimi, two
   steps under `torchrun --nproc_per_node 1`, to show that the DTensor path runs on CUDA.

Only public interfaces: `TrainingArguments`, `Trainer`, `from_pretrained`, `config.trained_precision`,
`config.fp16_plan` and the `transformers precision` command.

    python benchmarks/benchmark_gpu.py --output_dir $OUT          # on a GPU: about 4 to 6 minutes on an H200
    python benchmarks/benchmark_gpu.py --cpu-dry-run               # tiny sizes on the CPU; CUDA-only parts skipped

Without CUDA the dry run is chosen by itself: every section runs at a tiny size where the CPU can run it and prints
"skipped: needs CUDA" for the parts that cannot (fp16 mixed precision, which accelerate ignores on the CPU, CUDA memory
and FSDP2, which accelerate enables on accelerators only). CPU numbers of a dry run are not measurements. Each section
is bounded by `--budget` (seconds for the whole run): a section that would start after it is skipped and says so, and
the table and JSON are rewritten after every section, so a run stopped at its limit still leaves what it measured.
"""

import argparse
import gc
import json
import logging
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime


# The device machine reaches no network: no Hub lookups, no PyPI update check of the `transformers` command.
for _name in ("HF_HUB_OFFLINE", "HF_HUB_DISABLE_UPDATE_CHECK", "TRANSFORMERS_NO_ADVISORY_WARNINGS"):
    os.environ.setdefault(_name, "1")

NEEDS_CUDA = "skipped: needs CUDA"
#: Whether this run uses CUDA (False for a dry run, also where a GPU is present); set by `main`.
USE_CUDA = [False]
#: What failed (a section, or one run of one): the exit code is 1 when this is not empty.
FAILED = []
SECTIONS = ("stamp", "bf16", "plan", "fsdp2")
FP16_MAX = 65504.0

#: Sizes per mode. `gpu` is sized for an H200 (all four sections in about 4 to 6 minutes); `cpu` is a smoke run.
SIZES = {
    "gpu": {
        "stamp": {"model": {"n_embd": 128, "n_layer": 2, "n_head": 4, "vocab_size": 512, "n_positions": 128}},
        "bf16": {"model": {}, "steps": 50, "warmup": 5, "batch": 16, "seq": 512},
        "plan": {
            "model": {"n_embd": 512, "n_layer": 8, "n_head": 8, "vocab_size": 8192, "n_positions": 256},
            "scale": 1e5,
            "batch": 16,
            "seq": 256,
            "forwards": 20,
            "finetune_steps": 20,
            "plan_timeout": 150,
        },
        "fsdp2": {"model": {}, "steps": 2, "batch": 8, "seq": 512},
    },
    "cpu": {
        "stamp": {"model": {"n_embd": 64, "n_layer": 2, "n_head": 2, "vocab_size": 256, "n_positions": 64}},
        "bf16": {
            "model": {"n_embd": 64, "n_layer": 2, "n_head": 2, "vocab_size": 256, "n_positions": 64},
            "steps": 6,
            "warmup": 2,
            "batch": 4,
            "seq": 32,
        },
        "plan": {
            "model": {"n_embd": 64, "n_layer": 2, "n_head": 2, "vocab_size": 256, "n_positions": 64},
            "scale": 1e6,
            "batch": 4,
            "seq": 32,
            "forwards": 3,
            "finetune_steps": 4,
            "plan_timeout": 300,
        },
        "fsdp2": {
            "model": {"n_embd": 64, "n_layer": 2, "n_head": 2, "vocab_size": 256},
            "steps": 2,
            "batch": 2,
            "seq": 32,
        },
    },
}

#: Seconds each section may need on the GPU, so a section that cannot finish inside `--budget` is not started.
EXPECTED_SECONDS = {"stamp": 20, "bf16": 150, "plan": 90, "fsdp2": 60}


# ---------------------------------------------------------------------------------------------------------------------
# Report: one Markdown file and one JSON file, rewritten after every section
# ---------------------------------------------------------------------------------------------------------------------


class Report:
    def __init__(self, output_dir: str, header: dict):
        self.output_dir = output_dir
        self.header = header
        self.sections = {}
        os.makedirs(output_dir, exist_ok=True)

    def section(self, name: str, title: str) -> dict:
        self.sections[name] = {"title": title, "status": "running", "lines": [], "tables": [], "data": {}}
        print(f"\n=== {name}: {title} ===", flush=True)
        return self.sections[name]

    @staticmethod
    def line(section: dict, text: str) -> None:
        section["lines"].append(text)
        print(text, flush=True)

    @staticmethod
    def table(section: dict, columns: list[str], rows: list[list]) -> None:
        section["tables"].append({"columns": columns, "rows": rows})
        print(_markdown_table(columns, rows), flush=True)

    def write(self) -> None:
        parts = [f"# {self.header['title']}", ""]
        parts += [f"- {key}: {value}" for key, value in self.header.items() if key != "title"]
        for name, section in self.sections.items():
            parts += ["", f"## {name}: {section['title']} ({section['status']})", ""]
            parts += [f"{text}  " for text in section["lines"]]
            for table in section["tables"]:
                parts += ["", _markdown_table(table["columns"], table["rows"])]
        _atomic_write(os.path.join(self.output_dir, "gpu_results.md"), "\n".join(parts) + "\n")
        payload = {"header": self.header, "sections": self.sections}
        _atomic_write(os.path.join(self.output_dir, "gpu_results.json"), json.dumps(payload, indent=2, default=str))


def _markdown_table(columns: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.3e}"
    return str(value)


def _atomic_write(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# ---------------------------------------------------------------------------------------------------------------------
# Shared pieces: device, data, models, measurements
# ---------------------------------------------------------------------------------------------------------------------


def machine() -> str:
    import torch

    if USE_CUDA[0]:
        props = torch.cuda.get_device_properties(0)
        return (
            f"{props.name} ({props.total_memory / 2**30:.0f} GiB, compute capability {props.major}.{props.minor}), "
            f"torch {torch.__version__}, CUDA {torch.version.cuda}"
        )
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"CPU {cpu}, {torch.get_num_threads()} torch threads, torch {torch.__version__} (dry run: no CUDA)"


def corpus_bytes() -> bytes:
    """The text of Python's `help()` (ships with CPython), else this file: the same bytes for every run."""
    try:
        from pydoc_data.topics import topics

        return "\n".join(topics[k] for k in sorted(topics)).encode("utf-8")
    except ImportError:
        with open(__file__, "rb") as f:
            return f.read() * 50


def byte_windows(seq_len: int, count: int, seed: int):
    """`count` windows of `seq_len` bytes of [`corpus_bytes`] as causal-LM examples (labels = inputs)."""
    import torch

    data = torch.tensor(list(corpus_bytes()), dtype=torch.long)
    starts = torch.randint(0, len(data) - seq_len - 1, (count,), generator=torch.Generator().manual_seed(seed))

    class Windows(torch.utils.data.Dataset):
        def __len__(self):
            return count

        def __getitem__(self, i):
            ids = data[starts[i] : starts[i] + seq_len]
            return {"input_ids": ids, "labels": ids}

    return Windows()


def gpt2(model_kwargs: dict, seed: int = 0, trained_precision: str | None = "bf16"):
    """A randomly initialised GPT-2 (defaults: the 124M GPT-2 shape); `trained_precision` as a bf16-pretrained
    checkpoint would carry it."""
    import torch

    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    vocab = model_kwargs.get("vocab_size", GPT2Config().vocab_size)
    special = {} if vocab > 50256 else {"bos_token_id": 0, "eos_token_id": 0}
    config = GPT2Config(**special, **model_kwargs)
    model = GPT2LMHeadModel(config)
    if trained_precision is not None:
        model.config.trained_precision = trained_precision
    return model


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def tensor_bytes(tensor, seen: set) -> int:
    """Bytes a tensor holds, once per tensor object (`seen`: ids of the parameters and states already counted)."""
    import torch

    if not torch.is_tensor(tensor) or id(tensor) in seen:
        return 0
    seen.add(id(tensor))
    return _held_bytes(tensor)


def _held_bytes(tensor) -> int:
    """Counts tensor subclasses (DTensors: the local shard; torchao's 8-bit states) by the tensors inside them."""
    if hasattr(tensor, "to_local"):
        return _held_bytes(tensor.to_local())
    if hasattr(tensor, "__tensor_flatten__"):
        names, _ = tensor.__tensor_flatten__()
        return sum(_held_bytes(getattr(tensor, name)) for name in names)
    return tensor.numel() * tensor.element_size()


def optimizer_state_bytes(optimizer) -> int:
    inner = getattr(optimizer, "optimizer", optimizer)
    seen = set()
    return sum(tensor_bytes(v, seen) for state in inner.state.values() for v in state.values())


def dtype_counts(model) -> dict[str, int]:
    counts = {}
    for p in model.parameters():
        local = p.to_local() if hasattr(p, "to_local") else p
        counts[str(local.dtype).replace("torch.", "")] = (
            counts.get(str(local.dtype).replace("torch.", ""), 0) + p.numel()
        )
    return counts


def free_memory() -> None:
    import torch

    gc.collect()
    if USE_CUDA[0]:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_memory():
    import torch

    return torch.cuda.max_memory_allocated() if USE_CUDA[0] else None


def reset_accelerate() -> None:
    """Each `Trainer` of this process gets a fresh accelerate state (mixed precision changes between runs)."""
    try:
        from accelerate.state import AcceleratorState

        AcceleratorState._reset_state(reset_partial_state=True)
    except (ImportError, AttributeError):
        pass


def is_overflow_warning(message: str) -> bool:
    """The trained-precision warning of an fp16 run or load: it names fp16 and its maximum, 65504."""
    return "fp16" in message and "65504" in message


class LogCapture(logging.Handler):
    """Keeps the warnings transformers logs, with the Trainer step at which each arrived."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []
        self.trainer = None

    def emit(self, record):
        step = self.trainer.state.global_step if self.trainer is not None else None
        self.records.append((step, record.getMessage()))

    def __enter__(self):
        from transformers.utils import logging as hf_logging

        hf_logging.warning_once.cache_clear()  # it caches by message: each run shows its own warnings
        logging.getLogger("transformers").addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger("transformers").removeHandler(self)


def training_args(output_dir: str, steps: int, batch: int, **kwargs):
    from transformers import TrainingArguments

    defaults = {
        "max_steps": steps,
        "per_device_train_batch_size": batch,
        "learning_rate": 6e-4,
        "lr_scheduler_type": "cosine",
        "warmup_steps": max(1, steps // 10),
        "weight_decay": 0.0,
        "adam_beta2": 0.99,  # optimi's default; the same for every run
        "max_grad_norm": 1.0,
        "logging_steps": 1,
        "logging_nan_inf_filter": False,  # a NaN loss is what section 3 counts: log it as it is
        "save_strategy": "no",
        "report_to": [],
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        "seed": 0,
        "data_seed": 0,
        "use_cpu": not USE_CUDA[0],
    }
    return TrainingArguments(output_dir=output_dir, **{**defaults, **kwargs})


def make_step_clock():
    """A `TrainerCallback` that times every step (synchronising CUDA) and measures the gradients once."""
    import torch

    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self):
            self.times = []
            self.grad_bytes = None
            self._start = None

        def _sync(self):
            if USE_CUDA[0]:
                torch.cuda.synchronize()

        def on_step_begin(self, args, state, control, **kwargs):
            self._sync()
            self._start = time.perf_counter()

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            if self.grad_bytes is None and model is not None:
                seen = set()
                self.grad_bytes = sum(tensor_bytes(p.grad, seen) for p in model.parameters() if p.grad is not None)

        def on_step_end(self, args, state, control, **kwargs):
            self._sync()
            self.times.append(time.perf_counter() - self._start)

    return StepClock()


def losses_of(trainer) -> list[float]:
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def run_trainer(model, args, dataset, capture: LogCapture | None = None) -> dict:
    """Trains `model` with `args`; returns the measurements every section reports."""
    import torch

    from transformers import PrinterCallback, Trainer

    reset_accelerate()
    free_memory()
    # what an earlier run left on the device (it would count in this run's peak): expected 0, the model is on the CPU
    before = torch.cuda.memory_allocated() if USE_CUDA[0] else None
    clock = make_step_clock()
    trainer = Trainer(model=model, args=args, train_dataset=dataset, callbacks=[clock])
    trainer.remove_callback(PrinterCallback)  # the losses are read from the log history, not printed per step
    if capture is not None:
        capture.trainer = trainer
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    inner = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    groups = [{k: g.get(k) for k in ("fused", "foreach", "triton", "kahan_sum") if k in g} for g in inner.param_groups]
    seen = set()
    weights = sum(tensor_bytes(p, seen) for p in trainer.model.parameters())
    return {
        "trainer": trainer,
        "wall_seconds": wall,
        "step_times": clock.times,
        "weight_bytes": weights,
        "grad_bytes": clock.grad_bytes or 0,
        "optimizer_bytes": optimizer_state_bytes(trainer.optimizer),
        "peak_memory": peak_memory(),
        "memory_before": before,
        "losses": losses_of(trainer),
        "trained_precision": trainer.model.config.trained_precision,
        "optimizer": optimizer_label(inner),
        "param_groups": groups,
        "dtypes": dtype_counts(trainer.model),
    }


def optimizer_label(optimizer) -> str:
    """`library.Class` of the optimizer that does the work (the first class of its MRO from a known library)."""
    for cls in type(optimizer).__mro__:
        root = cls.__module__.split(".")[0]
        if root in ("optimi", "torchao", "bitsandbytes", "torch"):
            return f"{root}.{cls.__name__}"
    return type(optimizer).__name__


def _finite(values) -> bool:
    return all(math.isfinite(v) for v in values)


# ---------------------------------------------------------------------------------------------------------------------
# 1. The fp16 stamp
# ---------------------------------------------------------------------------------------------------------------------


def section_stamp(report: Report, sizes: dict, cuda: bool, tmp: str) -> None:
    section = report.section("stamp", "the Trainer's stamp and overflow warning, fp16=True and bf16=True")
    rows = []
    for flag in ("fp16", "bf16"):
        if flag == "fp16" and not cuda:
            Report.line(section, f"fp16=True: {NEEDS_CUDA} (accelerate ignores fp16 mixed precision on the CPU)")
            rows.append([f"{flag}=True", NEEDS_CUDA, None, None, None])
            continue
        model = gpt2(sizes["model"], trained_precision="bf16")
        args = training_args(os.path.join(tmp, f"stamp-{flag}"), 4, 4, **{flag: True})
        with LogCapture() as capture:
            result = run_trainer(model, args, byte_windows(32, 64, seed=1), capture)
        overflow = [(step, msg) for step, msg in capture.records if is_overflow_warning(msg)]
        first = overflow[0] if overflow else None
        rows.append(
            [
                f"{flag}=True",
                result["trained_precision"],
                "yes" if first else "no",
                first[0] if first else None,
                _finite(result["losses"]),
            ]
        )
        section["data"][flag] = {
            "trained_precision": result["trained_precision"],
            "overflow_warning": first[1] if first else None,
            "warning_step": first[0] if first else None,
            "losses": result["losses"],
        }
        if first:
            Report.line(section, f"{flag}=True warned at step {first[0]}: {first[1][:300]}")
    Report.table(
        section,
        ["run (bf16-pretrained model)", "stamped trained_precision", "overflow warning", "at step", "losses finite"],
        rows,
    )
    expected = {"fp16": ("fp16", "yes", 0), "bf16": ("bf16", "no", None)}
    for row in rows:
        want = expected[row[0].split("=")[0]]
        if row[1] != NEEDS_CUDA:
            ok = (row[1], row[2], row[3]) == want
            Report.line(
                section,
                f"{row[0]}: {'as expected' if ok else 'NOT as expected'} (want stamp {want[0]}, warning {want[1]})",
            )


# ---------------------------------------------------------------------------------------------------------------------
# 2. Pure bf16 against what users run today
# ---------------------------------------------------------------------------------------------------------------------

BF16_RUNS = {
    "fp32": ("fp32, torch AdamW (fused)", {}),
    "bf16_amp": ("bf16 mixed precision (bf16=True), torch AdamW (fused)", {"bf16": True}),
    "bf16_kahan": (
        "pure bf16 (bf16_full_train=True), optimi AdamW + Kahan",
        {"bf16_full_train": True, "bf16_full_train_cast_all": True},
    ),
    "bf16_8bit_sr": (
        "pure bf16, torchao AdamW8bit + stochastic rounding",
        {"bf16_full_train": True, "bf16_full_train_cast_all": True, "optim": "adamw_torch_8bit"},
    ),
}


def torchao_missing() -> str | None:
    try:
        import torchao  # noqa: F401
        from torchao.optim import AdamW8bit  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means the run cannot happen
        return f"skipped: torchao does not import here ({type(e).__name__}: {e})"
    return None


def section_bf16(report: Report, sizes: dict, cuda: bool, tmp: str, deadline: float) -> None:
    section = report.section("bf16", "pure bf16 against fp32 and bf16 mixed precision, same data, same steps")
    probe = gpt2(sizes["model"], trained_precision=None)
    params = n_params(probe)
    del probe
    steps, warmup = sizes["steps"], sizes["warmup"]
    Report.line(
        section,
        f"GPT-2 shape {sizes['model'] or 'default (12 layers, 768 hidden, vocab 50257)'}: "
        f"{params / 1e6:.1f}M parameters; "
        f"{steps} steps of {sizes['batch']} x {sizes['seq']} bytes; lr 6e-4 cosine, adam_beta2 0.99; "
        f"seconds/step is the mean of steps {warmup + 1}..{steps}",
    )
    dataset = byte_windows(sizes["seq"], steps * sizes["batch"], seed=0)
    results = {}
    for name, (label, kwargs) in BF16_RUNS.items():
        skip = torchao_missing() if name == "bf16_8bit_sr" else None
        if skip is None and time.monotonic() > deadline:
            skip = "skipped: time budget spent"
        if skip:
            Report.line(section, f"{label}: {skip}")
            results[name] = {"label": label, "skipped": skip}
            continue
        try:
            model = gpt2(sizes["model"], trained_precision=None)
            out = run_trainer(
                model, training_args(os.path.join(tmp, f"bf16-{name}"), steps, sizes["batch"], **kwargs), dataset
            )
        except Exception as e:  # noqa: BLE001 - one failing run must not lose the others
            traceback.print_exc()
            results[name] = {"label": label, "skipped": f"failed: {type(e).__name__}: {e}"}
            Report.line(section, f"{label}: failed: {type(e).__name__}: {e}")
            FAILED.append(f"bf16/{name}")
            continue
        timed = out["step_times"][warmup:] or out["step_times"]
        state = out["weight_bytes"] + out["grad_bytes"] + out["optimizer_bytes"]
        results[name] = {
            "label": label,
            "seconds_per_step": sum(timed) / len(timed),
            "first_step_seconds": out["step_times"][0] if out["step_times"] else None,
            "peak_memory_gib": out["peak_memory"] / 2**30 if out["peak_memory"] is not None else None,
            "memory_before_gib": out["memory_before"] / 2**30 if out["memory_before"] is not None else None,
            "peak_bytes_per_param": out["peak_memory"] / params if out["peak_memory"] is not None else None,
            "state_bytes_per_param": state / params,
            "weights_grads_optimizer": [
                out["weight_bytes"] / params,
                out["grad_bytes"] / params,
                out["optimizer_bytes"] / params,
            ],
            "final_loss": out["losses"][-1] if out["losses"] else None,
            "mean_loss_last5": sum(out["losses"][-5:]) / len(out["losses"][-5:]) if out["losses"] else None,
            "trained_precision": out["trained_precision"],
            "optimizer": out["optimizer"],
            "param_groups": out["param_groups"],
            "dtypes": out["dtypes"],
        }
        del model, out
        free_memory()
    section["data"] = {"params": params, "runs": results}
    rows = []
    for r in results.values():
        if "skipped" in r:
            rows.append([r["label"], r["skipped"], None, None, None, None, None, None])
            continue
        split = "/".join(f"{b:.1f}" for b in r["weights_grads_optimizer"])
        rows.append(
            [
                r["label"],
                r["seconds_per_step"],
                r["first_step_seconds"],
                r["peak_memory_gib"],
                f"{r['state_bytes_per_param']:.2f} ({split})",
                r["final_loss"],
                r["trained_precision"],
                f"{r['optimizer']} {r['param_groups'][0] if r['param_groups'] else ''}",
            ]
        )
    Report.table(
        section,
        [
            "run",
            "seconds/step",
            "first step (s)",
            "peak memory (GiB)",
            "training state bytes/param (weights/grads/optimizer)",
            f"loss at step {steps}",
            "stamp",
            "optimizer (param group)",
        ],
        rows,
    )
    ran = {k: v for k, v in results.items() if "skipped" not in v}
    goals = []
    if "bf16_kahan" in ran and "bf16_amp" in ran:
        kahan, amp = ran["bf16_kahan"], ran["bf16_amp"]
        ratio = kahan["seconds_per_step"] / amp["seconds_per_step"]
        goals.append(
            ["step time, pure bf16 + Kahan / bf16 mixed precision", ratio, "<= 1.0", _verdict(ratio <= 1.0, cuda)]
        )
        goals.append(
            [
                "training state, pure bf16 + Kahan (bytes/param)",
                kahan["state_bytes_per_param"],
                "~10 (AMP: 16)",
                _verdict(kahan["state_bytes_per_param"] <= 10.5, True),
            ]
        )
        if kahan["peak_bytes_per_param"] is not None:
            saved = amp["peak_bytes_per_param"] - kahan["peak_bytes_per_param"]
            goals.append(
                ["peak memory, AMP - pure bf16 + Kahan (bytes/param)", saved, ">= 6", _verdict(saved >= 6, True)]
            )
        else:
            goals.append(["peak memory, AMP - pure bf16 + Kahan (bytes/param)", None, ">= 6", NEEDS_CUDA])
        goals.append(
            [
                "loss, pure bf16 + Kahan / bf16 mixed precision (mean of last 5)",
                kahan["mean_loss_last5"] / amp["mean_loss_last5"],
                "",
                "",
            ]
        )
    if "bf16_kahan" in ran and "fp32" in ran:
        goals.append(
            [
                "step time, pure bf16 + Kahan / fp32",
                ran["bf16_kahan"]["seconds_per_step"] / ran["fp32"]["seconds_per_step"],
                "",
                "",
            ]
        )
        goals.append(
            [
                "loss, pure bf16 + Kahan / fp32 (mean of last 5)",
                ran["bf16_kahan"]["mean_loss_last5"] / ran["fp32"]["mean_loss_last5"],
                "",
                "",
            ]
        )
    if "bf16_8bit_sr" in ran:
        goals.append(
            [
                "training state, pure bf16 + 8-bit + SR (bytes/param)",
                ran["bf16_8bit_sr"]["state_bytes_per_param"],
                "~6.1",
                _verdict(ran["bf16_8bit_sr"]["state_bytes_per_param"] <= 6.5, True),
            ]
        )
        if "bf16_amp" in ran:
            goals.append(
                [
                    "step time, pure bf16 + 8-bit + SR / bf16 mixed precision",
                    ran["bf16_8bit_sr"]["seconds_per_step"] / ran["bf16_amp"]["seconds_per_step"],
                    "",
                    "",
                ]
            )
    section["data"]["ratios"] = goals
    Report.table(section, ["ratio", "measured", "goal", "met"], goals)


def _verdict(ok: bool, meaningful: bool) -> str:
    if not meaningful:
        return "no goal on the CPU dry run"
    return "yes" if ok else "NO"


# ---------------------------------------------------------------------------------------------------------------------
# 3. fp16 with a stored plan
# ---------------------------------------------------------------------------------------------------------------------


def planted_overflow_model(sizes: dict):
    """GPT-2 whose middle MLP's `c_fc` is scaled up by `scale` and its `c_proj` down by as much: the same function in
    fp32, but the MLP's hidden activations pass fp16's 65504."""
    import torch

    model = gpt2(sizes["model"], trained_precision="bf16")
    mlp = model.transformer.h[model.config.n_layer // 2].mlp
    with torch.no_grad():
        mlp.c_fc.weight.mul_(sizes["scale"])
        mlp.c_fc.bias.mul_(sizes["scale"])
        mlp.c_proj.weight.div_(sizes["scale"])
    return model, f"transformer.h.{model.config.n_layer // 2}.mlp"


def plan_command() -> list[str]:
    """The `transformers` console script, run with this interpreter (the carried install has no script on PATH)."""
    return [sys.executable, "-c", "from transformers.cli.transformers import main; main()", "precision"]


def has_plan_command() -> bool:
    help_text = subprocess.run(plan_command() + ["--help"], capture_output=True, text=True, timeout=120).stdout
    return "precision plan" in help_text


def forward_stats(model, ids, reference, repeats: int, cuda: bool) -> dict:
    import torch

    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        for _ in range(repeats):
            model(input_ids=ids)
        if cuda:
            torch.cuda.synchronize()
        seconds = (time.perf_counter() - started) / repeats
    finite = torch.isfinite(logits)
    stats = {
        "non_finite": int((~finite).sum()),
        "forward_ms": seconds * 1000,
        "peak_memory_mib": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
        "weights_mib": sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20,
    }
    if reference is None:
        stats.update(max_abs_error=0.0, cosine=1.0, top1_agreement=1.0)
    elif stats["non_finite"]:
        stats.update(max_abs_error=float("inf"), cosine=None, top1_agreement=None)
    else:
        ref = reference.to(logits.device)
        stats["max_abs_error"] = float((logits - ref).abs().max())
        stats["cosine"] = float(torch.nn.functional.cosine_similarity(logits.flatten(), ref.flatten(), dim=0))
        stats["top1_agreement"] = float((logits.argmax(-1) == ref.argmax(-1)).float().mean())
    return stats, logits


def section_plan(report: Report, sizes: dict, cuda: bool, tmp: str) -> None:
    import torch

    from transformers import AutoModelForCausalLM

    section = report.section("plan", "fp16 on the device: planted overflow, plain fp16 vs fp16 with its stored plan")
    device = "cuda" if cuda else "cpu"
    model, planted = planted_overflow_model(sizes)
    plain_dir, plan_dir = os.path.join(tmp, "planted-plain"), os.path.join(tmp, "planted-plan")
    model.save_pretrained(plain_dir)
    del model
    shutil.copytree(plain_dir, plan_dir)
    Report.line(
        section,
        f"GPT-2 {sizes['model']}, overflow planted in `{planted}` (x{sizes['scale']:g} / x{1 / sizes['scale']:g})",
    )

    plan = None
    if not has_plan_command():
        plan_skip = "skipped: this build has no `transformers precision plan` command (issue 22)"
        Report.line(section, f"fp16 + plan: {plan_skip}")
    else:
        cmd = plan_command() + ["plan", plan_dir, "--dtype", "fp16", "--write"]
        started = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=sizes["plan_timeout"])
        except subprocess.TimeoutExpired as e:
            # the captured output of a timed-out child is bytes, whatever `text=` says
            text = "".join(
                o.decode(errors="replace") if isinstance(o, bytes) else o for o in (e.stdout, e.stderr) if o
            )
            proc = subprocess.CompletedProcess(cmd, f"timeout after {sizes['plan_timeout']} s", "", text)
        plan_seconds = time.perf_counter() - started
        with open(os.path.join(plan_dir, "config.json"), encoding="utf-8") as f:
            plan = json.load(f).get("fp16_plan")
        section["data"]["plan_command"] = {
            "exit_code": proc.returncode,
            "seconds": plan_seconds,
            "output": (proc.stdout + proc.stderr)[-4000:],
        }
        Report.line(
            section,
            f"`transformers precision plan PATH --dtype fp16 --write`: exit {proc.returncode} in {plan_seconds:.1f} s",
        )
        if plan is None:
            tail = (proc.stdout + proc.stderr)[-300:]
            plan_skip = f"skipped: the plan command wrote no `fp16_plan` (exit {proc.returncode}): {tail!r}"
            Report.line(section, f"fp16 + plan: {plan_skip}")
        else:
            plan_skip = None
            section["data"]["plan"] = plan
            Report.line(
                section,
                f"plan: {len(plan.get('modules', []))} modules in fp32 ({', '.join(plan.get('modules', [])[:6])}), "
                f"fp32 weight share {plan.get('fp32_weight_share')}, headroom {plan.get('headroom')}, "
                f"stored validation {plan.get('validation')}",
            )

    ids = torch.randint(
        0, sizes["model"]["vocab_size"], (sizes["batch"], sizes["seq"]), generator=torch.Generator().manual_seed(7)
    ).to(device)
    rows, reference = [], None
    loads = [
        ("fp32", plain_dir, torch.float32),
        ("bf16", plain_dir, torch.bfloat16),
        ("fp16, no plan", plain_dir, torch.float16),
    ]
    loads.append(("fp16 + stored plan", plan_dir, torch.float16))
    for label, path, dtype in loads:
        if label.startswith("fp16 +") and plan_skip:
            rows.append([label, plan_skip, None, None, None, None, None, None])
            continue
        free_memory()
        loaded = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
        fp32_share = sum(p.numel() for p in loaded.parameters() if p.dtype == torch.float32) / n_params(loaded)
        stats, logits = forward_stats(loaded, ids, reference, sizes["forwards"], cuda)
        if reference is None:
            reference = logits.cpu()
        stats["fp32_weight_share"] = fp32_share
        section["data"][label] = stats
        rows.append(
            [
                label,
                stats["non_finite"],
                stats["max_abs_error"],
                stats["cosine"],
                stats["top1_agreement"],
                fp32_share,
                stats["forward_ms"],
                stats["peak_memory_mib"],
            ]
        )
        del loaded, logits
    Report.table(
        section,
        [
            "load",
            "non-finite logits",
            "max abs error vs fp32",
            "cosine",
            "top-1 agreement",
            "fp32 weight share",
            "forward (ms)",
            "peak memory (MiB)",
        ],
        rows,
    )
    if "fp16 + stored plan" in section["data"]:
        got = section["data"]["fp16 + stored plan"]
        ok = got["non_finite"] == 0 and (got["top1_agreement"] or 0) >= 0.99
        Report.line(
            section,
            f"fp16 + plan within the plan issue's goals (no non-finite logits, top-1 >= 99%): {'yes' if ok else 'NO'}",
        )

    if not cuda:
        Report.line(
            section,
            f"fp16=True fine-tune without and with the plan: {NEEDS_CUDA} (accelerate ignores fp16 on the CPU)",
        )
        return
    tune_rows = []
    dataset = byte_windows(sizes["seq"], sizes["finetune_steps"] * 8, seed=3)
    for label, path in (("fp16=True, no plan", plain_dir), ("fp16=True, stored plan", plan_dir)):
        if path == plan_dir and plan_skip:
            tune_rows.append([label, plan_skip, None, None, None])
            continue
        loaded = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        args = training_args(
            os.path.join(tmp, f"tune-{len(tune_rows)}"), sizes["finetune_steps"], 8, fp16=True, learning_rate=1e-4
        )
        with LogCapture() as capture:
            out = run_trainer(loaded, args, dataset, capture)
        losses = out["losses"]
        bad = sum(not math.isfinite(v) for v in losses)
        warned = any(is_overflow_warning(msg) for _, msg in capture.records)
        section["data"][label] = {"losses": losses, "non_finite_losses": bad, "overflow_warning": warned}
        tune_rows.append(
            [
                label,
                f"{bad}/{len(losses)}",
                losses[-1] if losses else None,
                out["trained_precision"],
                "yes" if warned else "no",
            ]
        )
        del loaded, out
        free_memory()
    Report.table(section, ["fine-tune", "non-finite losses", "last loss", "stamp", "overflow warning"], tune_rows)


# ---------------------------------------------------------------------------------------------------------------------
# 4. FSDP2 on one rank
# ---------------------------------------------------------------------------------------------------------------------


def fsdp2_worker(result_path: str, sizes: dict) -> None:
    """Run by `torchrun --nproc_per_node 1`: two steps of FSDP2 + bf16_full_train + optimi through the Trainer."""
    import torch

    tmp = tempfile.mkdtemp()
    try:
        model = gpt2(sizes["model"], trained_precision=None)
        params = n_params(model)
        args = training_args(
            tmp, sizes["steps"], sizes["batch"], bf16_full_train=True, fsdp=True, fsdp_config={"version": 2}
        )
        out = run_trainer(model, args, byte_windows(sizes["seq"], sizes["steps"] * sizes["batch"], seed=5))
        trainer = out["trainer"]
        result = {
            "params": params,
            "distributed_type": str(trainer.accelerator.distributed_type),
            "param_types": sorted({type(p).__name__ for p in trainer.model.parameters()}),
            "dtypes": out["dtypes"],
            "optimizer": out["optimizer"],
            "param_groups": out["param_groups"],
            "losses": out["losses"],
            "trained_precision": out["trained_precision"],
            "bytes_per_param": {
                "weights": out["weight_bytes"] / params,
                "grads": out["grad_bytes"] / params,
                "optimizer": out["optimizer_bytes"] / params,
            },
            "peak_memory_gib": out["peak_memory"] / 2**30 if out["peak_memory"] is not None else None,
            "step_times": out["step_times"],
            "device": str(next(trainer.model.parameters()).device),
            "cuda": torch.cuda.is_available(),
        }
        with open(result_path, "w", encoding="utf-8") as f:
            json.dump(result, f, default=str)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def section_fsdp2(report: Report, sizes: dict, cuda: bool, tmp: str, mode: str, timeout: float) -> None:
    section = report.section("fsdp2", "FSDP2 on one rank: bf16_full_train + optimi through the Trainer")
    if not cuda:
        Report.line(section, f"FSDP2: {NEEDS_CUDA} (accelerate enables FSDP on accelerator devices only)")
        return NEEDS_CUDA
    result_path = os.path.join(tmp, "fsdp2.json")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=1",
        os.path.abspath(__file__),
    ]
    cmd += ["--fsdp2-worker", result_path, "--mode", mode]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not os.path.exists(result_path):
        tail = (proc.stdout + proc.stderr)[-3000:]
        print(tail, flush=True)
        Report.line(section, f"FSDP2 run failed (exit {proc.returncode}); its output's end is in gpu_results.json")
        FAILED.append("fsdp2")
        section["data"] = {"exit_code": proc.returncode, "output": tail}
        return
    with open(result_path, encoding="utf-8") as f:
        result = json.load(f)
    section["data"] = result
    b = result["bytes_per_param"]
    Report.table(
        section,
        [
            "parameters",
            "distributed type",
            "parameter types",
            "dtypes",
            "optimizer (param groups)",
            "losses",
            "stamp",
            "bytes/param weights/grads/optimizer",
            "peak memory (GiB)",
        ],
        [
            [
                f"{result['params'] / 1e6:.1f}M",
                result["distributed_type"],
                ",".join(result["param_types"]),
                json.dumps(result["dtypes"]),
                f"{result['optimizer']} {result['param_groups']}",
                ", ".join(f"{v:.3f}" for v in result["losses"]),
                result["trained_precision"],
                f"{b['weights']:.2f}/{b['grads']:.2f}/{b['optimizer']:.2f}",
                result["peak_memory_gib"],
            ]
        ],
    )
    ok = result["param_types"] == ["DTensor"] and result["trained_precision"] == "bf16" and _finite(result["losses"])
    Report.line(section, f"DTensor parameters, bf16 stamp, finite losses: {'yes' if ok else 'NO'}")


# ---------------------------------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default=os.environ.get("OUT") or "gpu_output")
    parser.add_argument("--cpu-dry-run", action="store_true", help="tiny sizes on the CPU (the default without CUDA)")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}"
    )
    parser.add_argument("--budget", type=float, default=300.0, help="seconds for the whole run (default 300)")
    parser.add_argument("--mode", choices=sorted(SIZES), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--fsdp2-worker", default=None, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    chosen = [s.strip() for s in opts.sections.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"--sections: unknown section(s) {', '.join(unknown)}; valid: {', '.join(SECTIONS)}")

    import torch

    import transformers
    from transformers.utils import logging as hf_logging

    if opts.fsdp2_worker:
        USE_CUDA[0] = True
        hf_logging.set_verbosity_error()
        fsdp2_worker(opts.fsdp2_worker, SIZES[opts.mode]["fsdp2"])
        return 0
    if "trainedprecision" not in transformers.__version__:
        print(
            f"error: transformers {transformers.__version__} at {os.path.dirname(transformers.__file__)} is not this "
            "fork's build: install the carried wheel first (benchmarks/README.md, GPU)",
            file=sys.stderr,
        )
        return 2
    cuda = torch.cuda.is_available() and not opts.cpu_dry_run
    USE_CUDA[0] = cuda
    mode = "gpu" if cuda else "cpu"
    if not cuda:
        print("No CUDA device (or --cpu-dry-run): tiny sizes on the CPU; CUDA-only parts print 'skipped: needs CUDA'.")
    hf_logging.set_verbosity_warning()
    hf_logging.disable_progress_bar()
    started = time.monotonic()
    deadline = started + opts.budget
    header = {
        "title": "benchmark_gpu.py" + ("" if cuda else " (CPU dry run: not measurements)"),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "device": machine(),
        "transformers": transformers.__version__,
        "mode": mode,
    }
    if cuda:
        header["tf32 matmul"] = torch.backends.cuda.matmul.allow_tf32  # fp32 rows: torch's default, as users run
    for name in ("accelerate", "torch-optimi", "torchao", "triton"):
        try:
            from importlib.metadata import version

            header[name] = version(name)
        except Exception:  # noqa: BLE001
            header[name] = "not installed"
    report = Report(opts.output_dir, header)
    print("\n".join(f"{k}: {v}" for k, v in header.items()), flush=True)
    sizes = SIZES[mode]
    tmp = tempfile.mkdtemp(prefix="benchmark_gpu-")
    try:
        for name in chosen:
            left = deadline - time.monotonic()
            if cuda and left < EXPECTED_SECONDS[name] * 0.5:
                section = report.section(name, "not started")
                section["status"] = f"skipped: time budget ({left:.0f} s left of {opts.budget:.0f})"
                print(section["status"], flush=True)
                report.write()
                continue
            section_started = time.monotonic()
            try:
                if name == "stamp":
                    skipped = section_stamp(report, sizes["stamp"], cuda, tmp)
                elif name == "bf16":
                    skipped = section_bf16(report, sizes["bf16"], cuda, tmp, deadline - EXPECTED_SECONDS["fsdp2"])
                elif name == "plan":
                    skipped = section_plan(report, sizes["plan"], cuda, tmp)
                elif name == "fsdp2":
                    skipped = section_fsdp2(report, sizes["fsdp2"], cuda, tmp, mode, timeout=max(60.0, left))
                ran = f"ran in {time.monotonic() - section_started:.0f} s"
                if skipped is None and any(NEEDS_CUDA in line for line in report.sections[name]["lines"]):
                    ran += f"; parts {NEEDS_CUDA}"
                report.sections[name]["status"] = skipped or ran
            except Exception as e:  # noqa: BLE001 - report what failed and go on to the next section
                traceback.print_exc()
                report.sections[name]["status"] = f"failed: {type(e).__name__}: {e}"
                FAILED.append(name)
            report.write()
            free_memory()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total = time.monotonic() - started
    report.header["total_seconds"] = round(total, 1)
    report.header["failed"] = ", ".join(FAILED) or "nothing"
    report.write()
    print(
        f"\nwrote {os.path.join(opts.output_dir, 'gpu_results.md')} and gpu_results.json in {total:.0f} s", flush=True
    )
    if FAILED:
        print(f"failed: {', '.join(FAILED)}; rerun those with --sections", file=sys.stderr)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
