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
The registry: checkpoints published before `trained_precision` existed, with the precision their trainers published.

Only rows with a public source are listed, each with a confidence (`"stated"` or `"inferred"`, see
`CONFIDENCE_LEVELS`). The registry is consulted when a loaded config says `"unknown"`; a config's own value always
wins. `tests/utils/test_trained_precision_registry.py` keeps this table consistent (its `stated` rows are those of
`utils/trained_precisions.json`) and `utils/check_trained_precision_registry.py` renders it into the docs.
"""

from __future__ import annotations

import dataclasses
import fnmatch

from .hub_ids import canonical_hub_id


#: How directly a row's source states its precision, most direct first. `"stated"`: the people who trained the
#: checkpoint (or its family) state its training precision in the source: a training config, the card, the paper, a
#: maintainer's comment. `"inferred"`: the source states something the precision follows from, not the precision of
#: this run: the same training pipeline or configuration, a sibling checkpoint, the model configuration published
#: with the weights, or the precision its publisher runs it in.
STATED = "stated"
INFERRED = "inferred"
CONFIDENCE_LEVELS = (STATED, INFERRED)


@dataclasses.dataclass(frozen=True)
class RegistryEntry:
    """
    One registry row.

    Args:
        model_id (`str`): a Hub id (`"EleutherAI/gpt-neo-1.3B"`) or a family glob (`"facebook/opt-*"`): `*` and `?`
            in the repository name only, the organisation is always literal.
        precision (`str`): the canonical trained precision (`"fp32"`, `"bf16"` or `"fp16"`).
        source (`str`): an https URL where the trainers state it.
        note (`str`): a short note, e.g. "mixed bf16, fp32 master weights".
        model_type (`str`, *optional*): the config's `model_type`, checked against upstream's `CONFIG_MAPPING`.
        exceptions (`tuple[str, ...]`): ids (or globs) a glob must not match; usually they have rows of their own.
        stored_dtype (`str`, *optional*): the precision the Hub checkpoint is stored in, where a source says it differs
            from the trained one. Not evidence that the model runs well in it: anyone can save bf16 weights as fp16.
        confidence (`str`, *optional*): how directly `source` states the precision (`CONFIDENCE_LEVELS`); every row
            of `REGISTRY` has one.
        reference_runtime (`str`, *optional*): the precision the publisher documents as the model's reference runtime
            (Llama 2: fp16 inference), when it differs from `precision`: evidence that this runtime works for this
            checkpoint, with a source of its own (`reference_source`, an https URL).
        reference_source (`str`, *optional*): see `reference_runtime`.
    """

    model_id: str
    precision: str
    source: str
    note: str = ""
    model_type: str | None = None
    exceptions: tuple[str, ...] = ()
    stored_dtype: str | None = None
    confidence: str | None = None
    reference_runtime: str | None = None
    reference_source: str | None = None

    @property
    def citation(self) -> str:
        """
        The row's source with its confidence, as messages and reports quote it: `"stated at URL"`, `"inferred from
        URL"`, or `"from URL"` for a row without a confidence (only outside the checked registry).
        """
        if self.confidence == STATED:
            return f"stated at {self.source}"
        if self.confidence == INFERRED:
            return f"inferred from {self.source}"
        return f"from {self.source}"

    @property
    def is_glob(self) -> bool:
        return any(ch in self.model_id for ch in "*?[")

    def matches(self, model_id: str) -> bool:
        """Case-insensitive, as the Hub resolves ids."""
        wanted = model_id.lower()
        if any(fnmatch.fnmatchcase(wanted, e.lower()) for e in self.exceptions):
            return False
        if self.is_glob:
            return fnmatch.fnmatchcase(wanted, self.model_id.lower())
        return wanted == self.model_id.lower()


_BLOOM_SMALL = "https://github.com/bigscience-workshop/bigscience/tree/master/train/tr11-176B-ml/smaller_models"
_FALCON_BLOG = "https://huggingface.co/blog/falcon"
# The T5X model configuration of every T5 1.1 size (and so of the Flan-T5 checkpoints, listed with these configs in
# https://github.com/google-research/t5x/blob/main/docs/models.md); each size's gin includes this one.
_FLAN_T5 = "https://github.com/google-research/t5x/blob/main/t5x/examples/t5/t5_1_1/base.gin"
_GEMMA2 = "https://huggingface.co/blog/gemma2"
_HANDBOOK = "https://github.com/huggingface/alignment-handbook/blob/main/recipes"
_GEMMA3 = "https://developers.googleblog.com/en/gemma-3-quantized-aware-trained-bringing-state-of-the-art-ai-to-consumer-gpus/"
_LLAMA2 = "https://github.com/huggingface/transformers/pull/25794"
_LLAMA3_DOC = "https://github.com/huggingface/transformers/blob/main/docs/source/en/model_doc/llama3.md"
_LLAMA31 = "https://arxiv.org/abs/2407.21783"
_QWEN = "https://arxiv.org/abs/2309.16609"
_ROBERTA = "https://arxiv.org/abs/1907.11692"
_PRECISION_DATABASE = "https://discuss.huggingface.co/t/model-pre-training-precision-database-fp16-fp32-bf16/5671"
_T5 = "https://github.com/google-research/text-to-text-transfer-transformer/issues/539"


# Only rows whose source states the precision or the training configuration, each with a confidence (see
# `CONFIDENCE_LEVELS`). Looked for and not found, so left out: gpt-neo-125M, GPT-2, Mistral and Mixtral, Qwen 2 / 2.5 /
# 3, phi-2 and Phi-3, Gemma 1, Gemma 2 2B, Gemma 3 270M, BART, Pegasus. Diffusers pipelines stay out although their
# trainers state it (CogVideoX-2b fp16, CogVideoX-5b bf16: zai-org/CogVideo#217): a row gives one precision per Hub id,
# and a pipeline's id also names its text encoder (a bf16-trained T5 v1.1), which a `subfolder` load would match.
# One row a line: Hub id or glob | precision | confidence | model type (`-`: none) | source | note, then any of
# `exceptions=` (comma-separated), `stored_dtype=`, `reference_runtime=`, `reference_source=`. Lines starting with
# `#` are comments. Order: gpt-neo first, then by organisation. Edit here (a `stated` row in utils/trained_precisions.json too), then run
# `python utils/check_trained_precision_registry.py --fix_and_overwrite` to regenerate the table in
# docs/source/en/trained_precision_registry.md.
_TABLE = f"""
EleutherAI/gpt-neo-1.3B | bf16 | stated | gpt_neo | https://github.com/EleutherAI/gpt-neo/blob/master/configs/GPT3_XL_pretrained.json | mixed bf16: bf16 activations, fp32 weights and Adam state, bf16 checkpoints
EleutherAI/gpt-neo-2.7B | fp32 | stated | gpt_neo | https://github.com/EleutherAI/gpt-neo/blob/master/configs/GPT3_2-7B_pretrained.json | fp32 throughout: its published training config sets no precision, and the training code's default is fp32 (EleutherAI/gpt-neo#207)
EleutherAI/gpt-j-6b | bf16 | inferred | gptj | https://github.com/kingoflolz/mesh-transformer-jax/blob/master/mesh_transformer/transformer_shard.py | bf16 compute, fp32 master weights and optimizer (TPU v3), read from the training code; the Hub main branch is an fp32 upcast | stored_dtype=fp32
EleutherAI/gpt-neox-20b | fp16 | stated | gpt_neox | https://github.com/EleutherAI/gpt-neox/blob/main/configs/20B.yml | mixed fp16, dynamic loss scaling, ZeRO-1 (the training config)
EleutherAI/pythia-* | fp16 | stated | gpt_neox | https://github.com/EleutherAI/pythia | mixed fp16 for every size except pythia-1b | exceptions=EleutherAI/pythia-1b,EleutherAI/pythia-1b-deduped
EleutherAI/pythia-1b | bf16 | stated | gpt_neox | https://github.com/EleutherAI/pythia | mixed bf16, the one Pythia size not trained in fp16
EleutherAI/pythia-1b-deduped | fp16 | stated | gpt_neox | https://github.com/EleutherAI/pythia/issues/171 | mixed fp16, unlike pythia-1b (maintainer clarification)
allenai/OLMo-1B | bf16 | stated | - | https://github.com/allenai/OLMo/blob/main/configs/official/OLMo-1B.yaml | mixed bf16 (amp_bf16, FSDP mixed precision)
allenai/OLMo-1B-hf | bf16 | stated | olmo | https://github.com/allenai/OLMo/blob/main/configs/official/OLMo-1B.yaml | mixed bf16 (amp_bf16, FSDP mixed precision); Transformers-native port of OLMo-1B
allenai/OLMo-7B | bf16 | stated | - | https://github.com/allenai/OLMo/blob/main/configs/official/OLMo-7B.yaml | mixed bf16 (amp_bf16, FSDP mixed precision)
allenai/OLMo-7B-hf | bf16 | stated | olmo | https://github.com/allenai/OLMo/blob/main/configs/official/OLMo-7B.yaml | mixed bf16 (amp_bf16, FSDP mixed precision); Transformers-native port of OLMo-7B
allenai/led-* | fp16 | inferred | led | {_PRECISION_DATABASE} | mixed fp16 (apex), attention kept in fp32: the Longformer paper's recipe, listed for LED in the precision database
# The precision database is a forum thread, not the people who trained these models.
allenai/longformer-* | fp16 | inferred | longformer | {_PRECISION_DATABASE} | mixed fp16 (apex), attention kept in fp32 (the Longformer paper, quoted in the precision database)
bigcode/starcoder | bf16 | stated | gpt_bigcode | https://huggingface.co/bigcode/starcoder | bf16 (model card: Megatron-LM, 512 A100)
bigcode/starcoderbase | bf16 | stated | gpt_bigcode | https://arxiv.org/abs/2305.06161 | bf16, chosen over fp16 to avoid training instabilities (StarCoder paper)
bigcode/starcoder2-3b | bf16 | stated | starcoder2 | https://huggingface.co/bigcode/starcoder2-3b | bf16 (model card: 160 A100)
bigscience/bloom | bf16 | stated | bloom | https://github.com/bigscience-workshop/bigscience/tree/master/train/tr11-176B-ml | mixed bf16 (Megatron-DeepSpeed BF16_Optimizer)
bigscience/bloom-560m | fp16 | stated | bloom | {_BLOOM_SMALL} | mixed fp16 (tr11b, 350M run), not bf16
bigscience/bloom-1b1 | fp16 | inferred | bloom | {_BLOOM_SMALL} | mixed fp16 (tr11c, 760M run), not bf16; run-to-checkpoint mapping by elimination
bigscience/bloom-1b7 | fp16 | stated | bloom | {_BLOOM_SMALL} | mixed fp16 (tr11d, 1B3 run), not bf16
bigscience/bloom-3b | fp16 | inferred | bloom | {_BLOOM_SMALL} | mixed fp16 (tr11e, 2B5 run), not bf16; run-to-checkpoint mapping by elimination
bigscience/bloom-7b1 | fp16 | stated | bloom | {_BLOOM_SMALL} | mixed fp16 (tr11f, 6B3 run), not bf16
# Galactica: each size's model card loads it with `torch_dtype=torch.float16` ("Running the model on a GPU using
# different precisions"); the 125m card stands for all five, which carry the same example.
facebook/galactica-* | bf16 | stated | opt | https://github.com/paperswithcode/galai/issues/58 | bf16 with fp32 optimizer state; every Hub checkpoint is stored in fp16, and its model card runs it in fp16 | stored_dtype=fp16 | reference_runtime=fp16 | reference_source=https://huggingface.co/facebook/galactica-125m
facebook/m2m100_418M | fp16 | inferred | m2m_100 | {_PRECISION_DATABASE} | mixed fp16 (fairseq), as listed in the precision database
facebook/opt-* | fp16 | inferred | opt | https://github.com/facebookresearch/metaseq/issues/213 | mixed fp16 (metaseq); stated for OPT-175B, the smaller sizes come from the same pipeline
FacebookAI/roberta-base | fp16 | stated | roberta | {_ROBERTA} | mixed fp16 (fairseq, V100)
FacebookAI/roberta-large | fp16 | stated | roberta | {_ROBERTA} | mixed fp16 (fairseq, V100)
google-bert/bert-* | fp32 | inferred | bert | https://github.com/google-research/bert | fp32: the TPU pretraining code has no half-precision path
google-t5/t5-* | bf16 | stated | t5 | {_T5} | bf16 activations, fp32 variables (Mesh TensorFlow on TPU)
google/byt5-* | bf16 | inferred | t5 | {_T5} | bf16 activations: the same Mesh TensorFlow TPU pipeline as T5
# Flan-T5: T5X publishes each checkpoint with the T5 1.1 model config of its size, which sets bf16.
google/flan-t5-small | bf16 | inferred | t5 | {_FLAN_T5} | bf16 activations: the T5X config published with the checkpoint (t5_1_1/small.gin, which includes base.gin)
google/flan-t5-base | bf16 | inferred | t5 | {_FLAN_T5} | bf16 activations: the T5X config published with the checkpoint (t5_1_1/base.gin)
google/flan-t5-large | bf16 | inferred | t5 | {_FLAN_T5} | bf16 activations: the T5X config published with the checkpoint (t5_1_1/large.gin, which includes base.gin)
google/flan-t5-xl | bf16 | inferred | t5 | {_FLAN_T5} | bf16 activations: the T5X config published with the checkpoint (t5_1_1/xl.gin, which includes base.gin)
google/flan-t5-xxl | bf16 | inferred | t5 | {_FLAN_T5} | bf16 activations: the T5X config published with the checkpoint (t5_1_1/xxl.gin, which includes base.gin)
google/gemma-2-9b | bf16 | inferred | gemma2 | {_GEMMA2} | bf16: the reference precision of its instruction-tuned sibling (TPU training, JAX)
google/gemma-2-9b-it | bf16 | inferred | gemma2 | {_GEMMA2} | bf16, the reference precision of the instruction-tuned model (TPU training, JAX)
google/gemma-2-27b | bf16 | inferred | gemma2 | {_GEMMA2} | bf16: the reference precision of its instruction-tuned sibling (TPU training, JAX)
google/gemma-2-27b-it | bf16 | inferred | gemma2 | {_GEMMA2} | bf16, the reference precision; the release notes say its outputs are erratic in fp16
google/gemma-3-* | bf16 | inferred | gemma3 | {_GEMMA3} | bf16, the native precision Google states for Gemma 3; fp16 breaks it (transformers#36822) | exceptions=google/gemma-3-1b-*,google/gemma-3-270m*
google/gemma-3-1b-* | bf16 | inferred | gemma3_text | {_GEMMA3} | bf16, the native precision Google states for Gemma 3 (text-only 1B)
google/gemma-4-* | bf16 | stated | gemma4 | https://huggingface.co/google/gemma-4-31B-it/discussions/13 | bf16 pre-training (Google, on the Hub)
google/mt5-* | bf16 | inferred | mt5 | {_T5} | bf16 activations: the same Mesh TensorFlow TPU pipeline as T5; fails in fp16
google/t5-v1_1-* | bf16 | inferred | t5 | {_T5} | bf16 activations: the same Mesh TensorFlow TPU pipeline as T5; fails in fp16
HuggingFaceH4/starchat2-15b-v0.1 | bf16 | inferred | starcoder2 | {_HANDBOOK}/starchat2-15b/dpo/config_v0.1.yaml | bf16 fine-tune (the published SFT and DPO recipe) of StarCoder2-15B
HuggingFaceH4/zephyr-7b-beta | bf16 | inferred | mistral | {_HANDBOOK}/zephyr-7b-beta/dpo/config_full.yaml | bf16 fine-tune (the published SFT and DPO recipe) of Mistral-7B-v0.1
HuggingFaceH4/zephyr-orpo-141b-A35b-v0.1 | bf16 | inferred | mixtral | {_HANDBOOK}/zephyr-141b-A35b/orpo/config_full.yaml | bf16 ORPO fine-tune (the published recipe) of Mixtral-8x22B
HuggingFaceTB/SmolLM2-135M | bf16 | stated | llama | https://huggingface.co/HuggingFaceTB/SmolLM2-135M | bf16 (model card: nanotron, 64 H100)
HuggingFaceTB/SmolLM2-360M | bf16 | stated | llama | https://huggingface.co/HuggingFaceTB/SmolLM2-360M | bf16 (model card: nanotron)
HuggingFaceTB/SmolLM2-1.7B | bf16 | stated | llama | https://huggingface.co/HuggingFaceTB/SmolLM2-1.7B | bf16 (model card: nanotron, 256 H100)
HuggingFaceTB/SmolLM2-1.7B-Instruct | bf16 | inferred | llama | {_HANDBOOK}/smollm2/dpo/config.yaml | bf16 SFT and DPO of SmolLM2-1.7B (the recipe its model card links)
# Llama 2 `-hf`: the source is transformers' own pull request (inferred, not Meta's words), which also documents the
# reference inference in fp16.
meta-llama/Llama-2-7b-hf | bf16 | inferred | llama | {_LLAMA2} | bf16; the Hub checkpoint is stored in fp16 | stored_dtype=fp16 | reference_runtime=fp16 | reference_source={_LLAMA2}
meta-llama/Llama-2-7b-chat-hf | bf16 | inferred | llama | {_LLAMA2} | bf16; the Hub checkpoint is stored in fp16 | stored_dtype=fp16 | reference_runtime=fp16 | reference_source={_LLAMA2}
meta-llama/Llama-2-13b-hf | bf16 | inferred | llama | {_LLAMA2} | bf16; the Hub checkpoint is stored in fp16 | stored_dtype=fp16 | reference_runtime=fp16 | reference_source={_LLAMA2}
meta-llama/Llama-2-13b-chat-hf | bf16 | inferred | llama | {_LLAMA2} | bf16; the Hub checkpoint is stored in fp16 | stored_dtype=fp16 | reference_runtime=fp16 | reference_source={_LLAMA2}
meta-llama/Llama-2-70b-hf | bf16 | inferred | llama | {_LLAMA2} | bf16; the Hub checkpoint is stored in fp16 | stored_dtype=fp16 | reference_runtime=fp16 | reference_source={_LLAMA2}
meta-llama/Llama-2-70b-chat-hf | bf16 | inferred | llama | {_LLAMA2} | bf16; the Hub checkpoint is stored in fp16 | stored_dtype=fp16 | reference_runtime=fp16 | reference_source={_LLAMA2}
# No reference runtime for Llama 3: its model doc repeats Llama 2's "the original inference uses float16", but
# Meta's Llama 3 reference code runs in bf16 wherever the GPU has it, fp16 only as a fallback
# (https://github.com/meta-llama/llama3/blob/main/llama/generation.py). Its model doc is transformers', not Meta's.
meta-llama/Meta-Llama-3-* | bf16 | inferred | llama | {_LLAMA3_DOC} | bf16 (maintainers' model doc); fp16 training is known to produce NaN
meta-llama/Meta-Llama-3.1-* | bf16 | stated | llama | {_LLAMA31} | bf16 (Llama 3 paper); the ids Llama 3.1 was first published under
meta-llama/Llama-3.1-* | bf16 | stated | llama | {_LLAMA31} | bf16 (Llama 3 paper)
# Later Llama 3 releases (3.2, 3.3): the maintainers' Llama 3 doc states bf16 for the family, not this run.
meta-llama/Llama-3.2-1B | bf16 | inferred | llama | {_LLAMA3_DOC} | bf16: the maintainers' model doc states it for the Llama 3 family
meta-llama/Llama-3.2-1B-Instruct | bf16 | inferred | llama | {_LLAMA3_DOC} | bf16: the maintainers' model doc states it for the Llama 3 family
meta-llama/Llama-3.2-3B | bf16 | inferred | llama | {_LLAMA3_DOC} | bf16: the maintainers' model doc states it for the Llama 3 family
meta-llama/Llama-3.2-3B-Instruct | bf16 | inferred | llama | {_LLAMA3_DOC} | bf16: the maintainers' model doc states it for the Llama 3 family
meta-llama/Llama-3.3-70B-Instruct | bf16 | inferred | llama | {_LLAMA3_DOC} | bf16: the maintainers' model doc states it for the Llama 3 family
microsoft/deberta-v2-* | fp16 | inferred | deberta-v2 | https://github.com/microsoft/DeBERTa/blob/master/experiments/language_model/mlm.sh | mixed fp16: the released pretraining script
microsoft/deberta-v3-* | fp16 | inferred | deberta-v2 | https://github.com/microsoft/DeBERTa/blob/master/experiments/language_model/rtd.sh | mixed fp16: the released pretraining script
microsoft/phi-1_5 | fp16 | stated | phi | https://huggingface.co/microsoft/phi-1_5 | fp16 (model card, 32 A100-40G)
Qwen/Qwen-7B | bf16 | stated | - | {_QWEN} | mixed bf16 (Qwen technical report)
Qwen/Qwen-14B | bf16 | stated | - | {_QWEN} | mixed bf16 (Qwen technical report)
Qwen/Qwen-72B | bf16 | stated | - | {_QWEN} | mixed bf16 (Qwen technical report)
tiiuae/falcon-7b | bf16 | stated | falcon | https://huggingface.co/tiiuae/falcon-7b | bf16 (model card, training hyperparameters)
tiiuae/falcon-7b-instruct | bf16 | stated | falcon | {_FALCON_BLOG} | bf16, as every Falcon model of the first release
tiiuae/falcon-11B | bf16 | stated | falcon | https://huggingface.co/tiiuae/falcon-11B | bf16 (model card, training hyperparameters: 1024 A100)
tiiuae/falcon-40b | bf16 | stated | falcon | https://huggingface.co/tiiuae/falcon-40b | bf16 (model card, training hyperparameters: 384 A100)
tiiuae/falcon-40b-instruct | bf16 | stated | falcon | {_FALCON_BLOG} | bf16, as every Falcon model of the first release
tiiuae/falcon-180B | bf16 | stated | falcon | https://huggingface.co/tiiuae/falcon-180B | bf16 (model card, training hyperparameters: up to 4096 A100)
tiiuae/falcon-mamba-7b | bf16 | stated | falcon_mamba | https://huggingface.co/tiiuae/falcon-mamba-7b | bf16 (model card, training hyperparameters: 256 H100)
"""


def _rows(table: str) -> tuple[RegistryEntry, ...]:
    """The [`RegistryEntry`] of each line of `table` (see its comment for the columns)."""
    rows = []
    for line in table.strip().splitlines():
        if line.startswith("#"):
            continue
        model_id, precision, confidence, model_type, source, note, *extra = line.split(" | ")
        options: dict = dict(item.split("=", 1) for item in extra)
        if "exceptions" in options:
            options["exceptions"] = tuple(options["exceptions"].split(","))
        model_type = None if model_type == "-" else model_type
        rows.append(
            RegistryEntry(model_id, precision, source, note, model_type, confidence=confidence or None, **options)
        )
    return tuple(rows)


REGISTRY: tuple[RegistryEntry, ...] = _rows(_TABLE)


def lookup(model_id: str | None, registry: tuple[RegistryEntry, ...] = REGISTRY) -> RegistryEntry | None:
    """
    The registry row for a Hub id, or `None`. Legacy short ids are looked up under the id the Hub redirects them to
    (`"t5-base"` -> `"google-t5/t5-base"`); case does not matter. Exact ids win over globs. Paths are never matched:
    a directory is not a Hub id (resolve a cache snapshot path with [`~trained_precision.facts.hub_ids.hub_id_for`] first).

    Args:
        model_id (`str`, *optional*): a Hub id such as `"EleutherAI/gpt-neo-1.3B"` or `"t5-base"`.
    """
    hub_id = canonical_hub_id(model_id)
    if hub_id is None or "/" not in hub_id:
        return None
    exact = [e for e in registry if not e.is_glob and e.matches(hub_id)]
    if exact:
        return exact[0]
    return next((e for e in registry if e.is_glob and e.matches(hub_id)), None)
