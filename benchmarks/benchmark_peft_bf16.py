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
LoRA under `bf16_full_train=True`: which dtype for the trainable adapter, measured side by side in one run.

A small GPT-Neo is first trained in fp32 on byte-level text (`pydoc_data.topics`, which ships with CPython), then
fine-tuned with LoRA on another part of the text, from the same base weights, adapter initialisation and batches:

- `fp32`: fp32 base, fp32 adapter, torch AdamW (the reference);
- `bf16_adapter_kahan`: bf16 base, bf16 adapter, optimi AdamW with Kahan summation (what `bf16_full_train` does to the
  trainable parameters of a full model);
- `fp32_adapter`: bf16 base, fp32 adapter as PEFT's `autocast_adapter_dtype=True` keeps it, torch AdamW;
- `bf16_adapter_adamw`: bf16 base, bf16 adapter, torch AdamW without compensation (what the Kahan buffer buys).

Every half-precision run computes under bf16 autocast. Printed side by side: the held-out eval loss and its ratio to
fp32's, and the training state in bytes per trainable parameter (weights + gradients + optimizer state, from live
tensors) and per parameter of the whole model (the frozen base's weights included).

Run: `python benchmarks/benchmark_peft_bf16.py [--base_steps 300 --steps 200 --hidden 64 --layers 2]`.
"""

import argparse
import contextlib
import copy
import platform


def byte_batches(data, batch_size, seq_len, steps, seed):
    import torch

    generator = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(data) - seq_len - 1, (steps, batch_size), generator=generator)
    for row in starts:
        yield torch.stack([data[s : s + seq_len] for s in row.tolist()])


def eval_loss(model, data, seq_len, autocast):
    import torch

    model.eval()
    losses = []
    with torch.no_grad(), autocast():
        for start in range(0, len(data) - seq_len - 1, seq_len * 8)[:64]:
            ids = data[start : start + seq_len].unsqueeze(0)
            losses.append(float(model(input_ids=ids, labels=ids).loss))
    model.train()
    return sum(losses) / len(losses)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--base_steps", type=int, default=300)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seq_len", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    import pydoc_data.topics

    import torch
    from optimi import AdamW as OptimiAdamW
    from peft import LoraConfig, get_peft_model

    from transformers import GPTNeoConfig, GPTNeoForCausalLM
    from transformers.integrations.pure_bf16 import training_state_bytes

    text = "".join(pydoc_data.topics.topics.values()).encode("utf-8")
    data = torch.tensor(list(text), dtype=torch.long)
    third = len(data) // 3
    pretrain, finetune, held_out = data[:third], data[third : 2 * third], data[2 * third :]

    torch.manual_seed(0)
    config = GPTNeoConfig(
        vocab_size=256,
        hidden_size=args.hidden,
        num_layers=args.layers,
        num_heads=4,
        attention_types=[[["global", "local"], args.layers // 2 or 1]],
        max_position_embeddings=args.seq_len,
        bos_token_id=0,
        eos_token_id=0,
    )
    base = GPTNeoForCausalLM(config)
    optimizer = torch.optim.AdamW(base.parameters(), lr=3e-3)
    for ids in byte_batches(pretrain, args.batch_size, args.seq_len, args.base_steps, seed=1):
        base(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    def bf16_autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16)

    runs = {
        "fp32": (torch.float32, torch.float32, torch.optim.AdamW, contextlib.nullcontext),
        "bf16_adapter_kahan": (torch.bfloat16, torch.bfloat16, OptimiAdamW, bf16_autocast),
        "fp32_adapter": (torch.bfloat16, torch.float32, torch.optim.AdamW, bf16_autocast),
        "bf16_adapter_adamw": (torch.bfloat16, torch.bfloat16, torch.optim.AdamW, bf16_autocast),
    }
    lora = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, target_modules=["q_proj", "v_proj", "out_proj", "c_fc"])
    results = {}
    for name, (base_dtype, adapter_dtype, optimizer_class, autocast) in runs.items():
        model = copy.deepcopy(base)
        for module in model.modules():  # the base in bf16, norms kept in fp32 (as bf16_full_train keeps them)
            if "norm" not in type(module).__name__.lower():
                for param in module.parameters(recurse=False):
                    param.data = param.data.to(base_dtype)
        torch.manual_seed(1)
        model = get_peft_model(model, lora, autocast_adapter_dtype=True)
        for param in model.parameters():
            if param.requires_grad:
                param.data = param.data.to(adapter_dtype)
        trainable = [p for p in model.parameters() if p.requires_grad]
        kwargs = {"kahan_sum": True} if optimizer_class is OptimiAdamW else {}
        optimizer = optimizer_class(trainable, lr=args.lr, weight_decay=0.0, **kwargs)
        for ids in byte_batches(finetune, args.batch_size, args.seq_len, args.steps, seed=2):
            with autocast():
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
        state = training_state_bytes(model, optimizer)
        n_trainable = sum(p.numel() for p in trainable)
        n_all = sum(p.numel() for p in model.parameters())
        frozen_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if not p.requires_grad)
        results[name] = {
            "eval_loss": eval_loss(model, held_out, args.seq_len, autocast),
            "bytes_per_trainable": state["total"],
            "bytes_per_param": (state["total"] * n_trainable + frozen_bytes) / n_all,
        }

    import torch

    print(
        f"machine: {platform.processor() or platform.machine()}, torch CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}; base {args.base_steps} fp32 steps, LoRA r={args.rank} "
        f"{args.steps} steps, hidden {args.hidden}, {args.layers} layers"
    )
    reference = results["fp32"]["eval_loss"]
    print(f"{'run':<20} {'eval loss':>10} {'÷ fp32':>8} {'B/trainable':>12} {'B/param (all)':>14}")
    for name, r in results.items():
        print(
            f"{name:<20} {r['eval_loss']:>10.4f} {r['eval_loss'] / reference:>8.4f} "
            f"{r['bytes_per_trainable']:>12.2f} {r['bytes_per_param']:>14.2f}"
        )


if __name__ == "__main__":
    main()
