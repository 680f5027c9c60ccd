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
Per-rank training state of pure-bf16 training under FSDP2, 1 rank vs 2 ranks, measured from live tensors.

    python benchmarks/benchmark_distributed_bf16.py            # CPU, gloo; about a minute
    python benchmarks/benchmark_distributed_bf16.py --cast_all # embeddings and norms in bf16 too

The script launches itself with `torchrun --nproc_per_node 1` and then `2`. Each rank builds the same GPT-Neo, casts it
for `bf16_full_train`, shards it with `fully_shard_for_bf16_full_train` (FSDP2), takes two optimi AdamW steps (Kahan
summation, for-loop implementation on DTensors) and measures the bytes its own shards hold: weights, gradients and
optimizer state, divided by the model's (global) parameter count. It prints both runs side by side and their ratio.
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--cast_all", action="store_true", help="also cast embeddings and norms to bf16")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--output_dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

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


if __name__ == "__main__":
    main()
