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
Pure-bf16 training on several processes, measured side by side in one run (CPU, gloo, 2 processes).

    python benchmarks/benchmark_distributed_bf16.py              # FSDP2 per-rank state, 1 vs 2 ranks; about a minute
    python benchmarks/benchmark_distributed_bf16.py --cast_all   # embeddings and norms in bf16 too
    DS_ACCELERATOR=cpu python benchmarks/benchmark_distributed_bf16.py --deepspeed   # + DeepSpeed ZeRO; ~10 minutes

FSDP2: the script launches itself with `torchrun --nproc_per_node 1` and then `2`. Each rank builds the same GPT-Neo,
casts it for `bf16_full_train`, shards it with `fully_shard_for_bf16_full_train`, takes two optimi AdamW steps (Kahan
summation, for-loop implementation on DTensors) and measures the bytes its own shards hold: weights, gradients and
optimizer state, divided by the model's (global) parameter count.

`--deepspeed` adds, on 2 processes:

1. training-state bytes per parameter held by one rank, from live tensors, for DDP (every rank holds everything),
   FSDP2 and DeepSpeed ZeRO-2 and ZeRO-3 with `bf16_full_train`'s config (bf16 master weights, gradients and optimizer
   state; optimi AdamW with Kahan summation as ZeRO's client optimizer). ZeRO counts the bf16 module weights it keeps
   (all of them at stage 1-2, a partition at stage 3), its bf16 master partition, its bf16 gradient partition and the
   optimizer state of that partition;
2. `Trainer` runs of the same GPT-Neo on the held-out byte-level task of `examples/pure_bf16_demo.py`
   (`pydoc_data.topics`, the last 5% held out), same seed, batches and schedule: fp32 under DDP (the reference),
   `bf16_full_train` under DDP, ZeRO-2 and ZeRO-3, and DeepSpeed's own uncompensated bf16 master weights
   (`bf16_master_weights_and_grads` + `bf16_optimizer_states` with DeepSpeed's AdamW, no switch). It prints the eval
   loss / fp32 and the time of a training step / the `bf16_full_train` DDP run.

The machine class (`torch.backends.cpu.get_cpu_capability()`) is printed with the numbers: where it is AVX2, torch
emulates bf16 matmuls and the bf16 runs are slower than fp32.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _local_bytes(tensor):
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return local.numel() * local.element_size()


def worker(args):
    import torch
    import torch.distributed as dist

    from transformers import GPTNeoConfig, GPTNeoForCausalLM
    from transformers.integrations.optimi import get_optimi_optimizer_cls
    from transformers.integrations.pure_bf16 import cast_model_for_bf16_full_train
    from transformers.integrations.pure_bf16_distributed import (
        check_optimi_args_for_sharded_params,
        fully_shard_for_bf16_full_train,
    )

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    config = GPTNeoConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        num_layers=args.layers,
        num_heads=4,
        attention_types=[[["global", "local"], args.layers // 2]],
        max_position_embeddings=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = GPTNeoForCausalLM(config)
    cast_model_for_bf16_full_train(model, cast_all=args.cast_all)
    n_params = sum(p.numel() for p in model.parameters())
    fully_shard_for_bf16_full_train(model)
    optimizer = get_optimi_optimizer_cls("AdamW")(
        model.parameters(), lr=1e-4, kahan_sum=True, **check_optimi_args_for_sharded_params({}, True)
    )
    ids = torch.randint(0, args.vocab, (2, 32), generator=torch.Generator().manual_seed(rank))
    for _ in range(2):
        optimizer.zero_grad(set_to_none=False)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
    params = list(model.parameters())
    weights = sum(_local_bytes(p) for p in params)
    grads = sum(_local_bytes(p.grad) for p in params if p.grad is not None)
    state = sum(
        _local_bytes(v) for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0
    )
    result = {
        "world": world,
        "rank": rank,
        "params": n_params,
        "weights": weights / n_params,
        "grads": grads / n_params,
        "optimizer": state / n_params,
        "total": (weights + grads + state) / n_params,
    }
    with open(os.path.join(args.output_dir, f"w{world}-r{rank}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f)
    dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------------------------------
# --deepspeed: per-rank state of DDP and ZeRO, and Trainer runs on the held-out task
# ---------------------------------------------------------------------------------------------------------------------


def _bench_model(args, vocab=None):
    import torch

    from transformers import GPTNeoConfig, GPTNeoForCausalLM

    torch.manual_seed(0)
    config = GPTNeoConfig(
        vocab_size=vocab or args.vocab,
        hidden_size=args.hidden,
        num_layers=args.layers,
        num_heads=4,
        attention_types=[[["global", "local"], args.layers // 2]],
        max_position_embeddings=max(64, args.seq_len),
        window_size=max(args.seq_len // 2, 1),
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPTNeoForCausalLM(config)


def _optimi_groups(model):
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    return [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]


def state_worker(args):
    """Bytes per parameter one rank holds under DDP or DeepSpeed ZeRO-2/3 (bf16_full_train's config)."""
    import torch
    import torch.distributed as dist

    from transformers.integrations.optimi import get_optimi_optimizer_cls, prepare_optimi_optimizer
    from transformers.integrations.pure_bf16 import cast_model_for_bf16_full_train

    kind = args.state_kind
    model = _bench_model(args)
    cast_model_for_bf16_full_train(model, cast_all=kind != "ddp")
    n_params = sum(p.numel() for p in model.parameters())
    AdamW = get_optimi_optimizer_cls("AdamW")
    ids = None
    if kind == "ddp":
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        optimizer = AdamW(_optimi_groups(model), lr=1e-4, kahan_sum=True)
        ids = torch.randint(0, args.vocab, (2, 32), generator=torch.Generator().manual_seed(rank))
        for _ in range(2):
            optimizer.zero_grad(set_to_none=False)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                ddp(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
        weights = sum(_local_bytes(p) for p in model.parameters())
        grads = sum(_local_bytes(p.grad) for p in model.parameters() if p.grad is not None)
        inner = optimizer
    else:
        import deepspeed

        from transformers.integrations.pure_bf16_deepspeed import resolve_deepspeed_config_for_bf16_full_train

        deepspeed.init_distributed(dist_backend="gloo")
        rank = dist.get_rank()
        stage = int(kind[-1])
        config = {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": stage}, "steps_per_print": 10**9}
        resolve_deepspeed_config_for_bf16_full_train(config)
        config["zero_allow_untested_optimizer"] = True
        optimizer = AdamW(_optimi_groups(model), lr=1e-4, kahan_sum=True)
        prepare_optimi_optimizer(optimizer, partition_steps=True)
        engine, zero, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
        ids = torch.randint(0, args.vocab, (2, 32), generator=torch.Generator().manual_seed(rank))
        for _ in range(2):
            engine.backward(engine(input_ids=ids, labels=ids).loss)
            engine.step()
        counted = set()

        def unique_bytes(tensor):
            key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tensor.numel())
            if key in counted or tensor.numel() == 0:
                return 0
            counted.add(key)
            return tensor.numel() * tensor.element_size()

        if stage == 3:
            module = sum(unique_bytes(p.ds_tensor) for p in engine.module.parameters())
            masters = list(zero.fp32_partitioned_groups_flat)
        else:
            module = sum(unique_bytes(p.data) for p in engine.module.parameters())
            masters = list(zero.single_partition_of_fp32_groups)
        master = sum(unique_bytes(t) for t in masters)
        weights = module + master
        # ZeRO reduces each gradient into a partition of the master dtype before the step: one per master partition
        grads = sum(t.numel() * t.element_size() for t in masters)
        inner = zero.optimizer
    state = sum(
        _local_bytes(v) for s in inner.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0
    )
    result = {
        "kind": kind,
        "rank": rank,
        "params": n_params,
        "weights": weights / n_params,
        "grads": grads / n_params,
        "optimizer": state / n_params,
        "total": (weights + grads + state) / n_params,
    }
    with open(os.path.join(args.output_dir, f"state-{kind}-r{rank}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f)
    dist.destroy_process_group()


#: The Trainer runs of `--deepspeed`: name -> (label, TrainingArguments keywords, DeepSpeed config or None)
def _trainer_runs(args):
    bf16 = {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}
    zero = {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
    }
    ds_adamw = {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}}
    ds_adamw["params"]["torch_adam"] = True  # DeepSpeed's AdamW on the CPU: torch's implementation
    return {
        "fp32_ddp": ("fp32 weights, torch AdamW, DDP (reference)", {"optim": "adamw_torch"}, None),
        "kahan_ddp": ("bf16_full_train, DDP", {"bf16_full_train": True}, None),
        "kahan_zero2": (
            "bf16_full_train, ZeRO-2",
            {"bf16_full_train": True},
            {**zero, "zero_optimization": {"stage": 2}},
        ),
        "kahan_zero3": (
            "bf16_full_train, ZeRO-3",
            {"bf16_full_train": True},
            {**zero, "zero_optimization": {"stage": 3}},
        ),
        "ds_bf16_master": (
            "DeepSpeed's bf16 master weights + AdamW, ZeRO-2 (uncompensated)",
            {"bf16": True},
            {**zero, "bf16": bf16, "optimizer": ds_adamw, "zero_optimization": {"stage": 2}},
        ),
    }


def trainer_worker(args):
    """One `Trainer` run of `_trainer_runs` on the held-out byte-level task, on each of the launched processes."""
    import importlib.util
    import time

    import torch

    from transformers import Trainer, TrainerCallback, TrainingArguments

    spec = importlib.util.spec_from_file_location(
        "pure_bf16_demo",
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "pure_bf16_demo.py"),
    )
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    label, kwargs, ds_config = _trainer_runs(args)[args.trainer_run]
    data = torch.tensor(list(demo.load_text()), dtype=torch.long)
    split = int(0.95 * len(data))
    train_set = demo.ByteWindows(data[:split], args.seq_len, args.steps * args.batch_size * 2, seed=0)
    eval_set = demo.ByteWindows(data[split:], args.seq_len, 64, seed=0, random=False)

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times, self._start = [], None

        def on_step_begin(self, *a, **k):
            self._start = time.perf_counter()

        def on_step_end(self, *a, **k):
            self.times.append(time.perf_counter() - self._start)

    training_args = TrainingArguments(
        os.path.join(args.output_dir, args.trainer_run),
        use_cpu=True,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=16,
        learning_rate=args.lr,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, args.steps // 20),
        weight_decay=0.01,
        adam_beta2=0.99,
        max_grad_norm=1.0,
        save_strategy="no",
        logging_steps=max(1, args.steps // 10),
        report_to=[],
        disable_tqdm=True,
        seed=0,
        data_seed=0,
        deepspeed=ds_config,
        **kwargs,
    )
    timer = StepTimer()
    trainer = Trainer(_bench_model(args, vocab=256), training_args, train_dataset=train_set, eval_dataset=eval_set)
    trainer.add_callback(timer)
    trainer.train()
    eval_loss = trainer.evaluate()["eval_loss"]
    if training_args.process_index == 0:
        import statistics

        times = timer.times[max(2, args.steps // 10) :]
        result = {
            "run": args.trainer_run,
            "label": label,
            "eval_loss": eval_loss,
            "step_seconds": statistics.median(times),
            "trained_precision": trainer.model.config.trained_precision,
        }
        with open(os.path.join(args.output_dir, f"trainer-{args.trainer_run}.json"), "w", encoding="utf-8") as f:
            json.dump(result, f)


def _launch(args, output_dir, extra, nproc=2):
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", f"--master_port={_free_port()}"]
    cmd += [os.path.abspath(__file__), "--output_dir", output_dir] + extra
    for key in ("layers", "hidden", "vocab", "steps", "batch_size", "seq_len", "lr"):
        cmd += [f"--{key}", str(getattr(args, key))]
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", DS_ACCELERATOR="cpu")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def deepspeed_report(args, fsdp2_two_ranks):
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    with tempfile.TemporaryDirectory() as scratch:
        output_dir = args.results_dir or scratch  # --results_dir keeps the numbers, and a rerun skips what is there
        os.makedirs(output_dir, exist_ok=True)
        for kind in ("ddp", "zero2", "zero3"):
            if not os.path.exists(os.path.join(output_dir, f"state-{kind}-r0.json")):
                _launch(args, output_dir, ["--state_kind", kind])
        runs = _trainer_runs(args)
        for name in runs:
            if not os.path.exists(os.path.join(output_dir, f"trainer-{name}.json")):
                _launch(args, output_dir, ["--trainer_run", name])
        states = {}
        for kind in ("ddp", "zero2", "zero3"):
            with open(os.path.join(output_dir, f"state-{kind}-r0.json"), encoding="utf-8") as f:
                states[kind] = json.load(f)
        results = {}
        for name in runs:
            with open(os.path.join(output_dir, f"trainer-{name}.json"), encoding="utf-8") as f:
                results[name] = json.load(f)

    print()
    print(f"DeepSpeed ZeRO beside DDP and FSDP2, 2 processes, gloo, CPU capability {capability}")
    print(f"training state, bytes per parameter held by rank 0 (GPT-Neo {args.layers} layers, hidden {args.hidden})")
    print()
    print("| state | DDP | FSDP2 | ZeRO-2 | ZeRO-3 |")
    print("|---|---:|---:|---:|---:|")
    for key in ("weights", "grads", "optimizer", "total"):
        row = [states["ddp"][key], fsdp2_two_ranks[key], states["zero2"][key], states["zero3"][key]]
        print(f"| {key} | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    fp32, ddp = results["fp32_ddp"], results["kahan_ddp"]
    print()
    print(
        f"Trainer, {args.steps} steps, batch {args.batch_size} x {args.seq_len} bytes per rank, lr {args.lr:g} cosine, "
        f"held-out pydoc_data.topics bytes; CPU capability {capability}"
    )
    print()
    print("| run | eval loss | / fp32 | step time / bf16_full_train DDP | trained_precision |")
    print("|---|---:|---:|---:|---|")
    for r in results.values():
        print(
            f"| {r['label']} | {r['eval_loss']:.4f} | {r['eval_loss'] / fp32['eval_loss']:.4f} | "
            f"{r['step_seconds'] / ddp['step_seconds']:.2f} | {r['trained_precision']} |"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--cast_all", action="store_true", help="also cast embeddings and norms to bf16")
    parser.add_argument("--deepspeed", action="store_true", help="also DeepSpeed ZeRO-2/3, DDP, and Trainer runs")
    parser.add_argument("--steps", type=int, default=200, help="--deepspeed Trainer runs: training steps")
    parser.add_argument("--batch_size", type=int, default=8, help="--deepspeed Trainer runs: per process")
    parser.add_argument("--seq_len", type=int, default=64, help="--deepspeed Trainer runs: bytes per sequence")
    parser.add_argument("--lr", type=float, default=1e-3, help="--deepspeed Trainer runs: peak learning rate")
    parser.add_argument(
        "--results_dir", default=None, help="--deepspeed: keep each run's numbers there (and reuse them)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--state_kind", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--trainer_run", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--output_dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.state_kind:
        return state_worker(args)
    if args.trainer_run:
        return trainer_worker(args)

    with tempfile.TemporaryDirectory() as output_dir:
        forwarded = ["--layers", str(args.layers), "--hidden", str(args.hidden), "--vocab", str(args.vocab)]
        forwarded += ["--cast_all"] if args.cast_all else []
        for world in (1, 2):
            cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={world}"]
            cmd += [f"--master_port={_free_port()}", os.path.abspath(__file__), "--worker", "--output_dir", output_dir]
            env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
            subprocess.run(cmd + forwarded, check=True, env=env, stdout=subprocess.DEVNULL)
        runs = {}
        for name in sorted(os.listdir(output_dir)):
            with open(os.path.join(output_dir, name), encoding="utf-8") as f:
                result = json.load(f)
            runs.setdefault(result["world"], []).append(result)

    one, two = runs[1][0], runs[2]
    what = "all parameters bf16 (--cast_all)" if args.cast_all else "bf16, embeddings and norms kept fp32 (default)"
    print(
        f"GPT-Neo {args.layers} layers, hidden {args.hidden}, vocab {args.vocab}: {one['params']:,} parameters; {what}"
    )
    print(
        "FSDP2 (fully_shard_for_bf16_full_train), optimi AdamW with Kahan summation, bytes per parameter held by ONE rank"
    )
    print()
    print("| state | 1 rank | 2 ranks (rank 0) | 2 ranks (rank 1) | 2 ranks / 1 rank |")
    print("|---|---:|---:|---:|---:|")
    for key in ("weights", "grads", "optimizer", "total"):
        ratio = max(r[key] for r in two) / one[key]
        print(f"| {key} | {one[key]:.2f} | {two[0][key]:.2f} | {two[1][key]:.2f} | {ratio:.3f} |")
    if args.deepspeed:
        deepspeed_report(args, two[0])


if __name__ == "__main__":
    main()
