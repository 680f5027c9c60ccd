# Copyright 2026 The HuggingFace Team. All rights reserved.
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
Test helpers of `trained_precision` (also for scripts the tests launch with `torchrun`): one tiny GPT-Neo every test
builds, and a tiny GPT-2 with a planted fp16 overflow for the fp16 plan and the forward's check.
"""

from __future__ import annotations

from typing import Any


#: A GPT-Neo small enough for a CPU test: 2 layers (one global and one local attention), hidden 16, 64 tokens.
TINY_GPT_NEO: dict[str, Any] = {
    **{"vocab_size": 64, "hidden_size": 16, "num_layers": 2, "num_heads": 2, "max_position_embeddings": 32},
    **{"attention_types": [[["global", "local"], 1]], "bos_token_id": 0, "eos_token_id": 0},
}


def tiny_gpt_neo_config(**overrides):
    """A [`GPTNeoConfig`] of [`TINY_GPT_NEO`], with `overrides` (`hidden_size=32`, `trained_precision="bf16"`, ...)."""
    from ..models.gpt_neo import GPTNeoConfig

    return GPTNeoConfig(**{**TINY_GPT_NEO, **overrides})


def tiny_gpt_neo(**overrides):
    """A randomly initialised `GPTNeoForCausalLM` of [`tiny_gpt_neo_config`] (needs torch)."""
    from ..models.gpt_neo import GPTNeoForCausalLM

    return GPTNeoForCausalLM(tiny_gpt_neo_config(**overrides))


#: A GPT-2 for the fp16-plan tests and docs: 3 layers, hidden 32, 64 tokens. Its weights are drawn 10x wider than
#: GPT-2's default (std 0.2), so that its next-token logits are not near ties that fp16 rounding alone could flip.
TINY_GPT2: dict[str, Any] = {
    **{"initializer_range": 0.2, "vocab_size": 64, "n_embd": 32, "n_layer": 3, "n_head": 2, "n_positions": 64},
    **{"bos_token_id": 0, "eos_token_id": 0},
}


def tiny_gpt2(seed: int = 0, **overrides):
    """A `GPT2LMHeadModel` of [`TINY_GPT2`] with `overrides`, initialised from `seed`, in eval mode (needs torch)."""
    import torch

    from ..models.gpt2 import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(**{**TINY_GPT2, **overrides})).eval()


def plant_fp16_overflow(model, up: str, down: str, peak: float = 2e5, seed: int = 0):
    """
    Scales module `up` so that its largest output on 4 random sequences (from `seed`) reaches `peak`, and `down` by the
    inverse: only the values inside the block leave fp16's range, as in T5's and GPT-2's overflow reports.
    """
    import torch

    modules = dict(model.named_modules())
    vocab = model.get_input_embeddings().num_embeddings
    ids = torch.randint(0, vocab, (4, 32), generator=torch.Generator().manual_seed(seed))
    inputs = {"input_ids": ids}
    if getattr(model.config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = ids
    largest = []
    handle = modules[up].register_forward_hook(lambda module, args, output: largest.append(output.abs().max()))
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        handle.remove()
    factor = peak / float(max(largest))
    with torch.no_grad():
        modules[up].weight.mul_(factor)
        if getattr(modules[up], "bias", None) is not None:
            modules[up].bias.mul_(factor)
        modules[down].weight.div_(factor)
    return model


def random_token_dataset(size: int = 32, length: int = 16, vocab: int = 64) -> list[dict]:
    """`size` language-modelling examples of `length` token ids below `vocab`, the same on every call and process."""
    import torch

    ids = torch.randint(0, vocab, (size, length), generator=torch.Generator().manual_seed(0))
    return [{"input_ids": row, "labels": row} for row in ids]


def free_port() -> int:
    """A TCP port nobody listens on now, for a `torchrun` test: a fixed port collides when two test runs overlap."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
