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
Pure-bf16 training (`bf16_full_train=True`) on several processes: DDP through the `Trainer`, FSDP2 sharding and its
optimizer step, what the `Trainer` resolves from an FSDP2 configuration, and the refusals (FSDP1, DeepSpeed's own
optimizer, 8-bit optimizers under FSDP2). DeepSpeed ZeRO has its own file, test_trainer_pure_bf16_deepspeed.py.

This file is also the script of the 2-process tests: `torchrun --nproc_per_node 2 test_trainer_pure_bf16_distributed.py --mode
{ddp,fsdp2,trainer_fsdp2} --output_dir DIR` runs on the CPU (gloo), except `trainer_fsdp2`, which needs accelerators
(accelerate enables FSDP only on accelerator devices), and writes what each rank saw to `DIR/rank{N}.json`.
"""

import glob
import json
import os
import sys
import types

from parameterized import parameterized

from transformers import TrainingArguments, is_torch_available
from transformers.testing_utils import (
    TestCasePlus,
    backend_device_count,
    execute_subprocess_async,
    mockenv_context,
    require_accelerate,
    require_torch,
    require_torch_accelerator,
    require_torch_optimi,
    torch_device,
)
from transformers.trained_precision.testing_utils import free_port, tiny_gpt_neo_config


if is_torch_available():
    import torch

    from transformers import GPTNeoForCausalLM, Trainer
    from transformers.integrations import pure_bf16
    from transformers.integrations import pure_bf16_distributed as distributed
    from transformers.integrations.optimi import get_optimi_optimizer_cls, prepare_optimi_optimizer


def tiny_gpt_neo(seed=0, hidden_size=32):
    torch.manual_seed(seed)
    return GPTNeoForCausalLM(tiny_gpt_neo_config(hidden_size=hidden_size))


class RepeatingLMDataset:
    """32 sequences of 8 token ids following one pattern, the labels being the inputs: quick to learn."""

    def __len__(self):
        return 32

    def __getitem__(self, i):
        ids = (torch.arange(8) * 3 + i) % 64
        return {"input_ids": ids, "labels": ids}


def run_torchrun(test, mode, output_dir, nproc=2, timeout=300):
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        f"--master_port={free_port()}",
        os.path.abspath(__file__),
        "--mode",
        mode,
        "--output_dir",
        output_dir,
    ]
    env = test.get_env()
    env["OMP_NUM_THREADS"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    execute_subprocess_async(cmd, env=env, timeout=timeout)
    results = []
    for rank in range(nproc):
        with open(os.path.join(output_dir, f"rank{rank}.json"), encoding="utf-8") as f:
            results.append(json.load(f))
    return results


def read_config(directory):
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        return json.load(f)


# ---------------------------------------------------------------------------------------------------------------------
# Multi-process runs (CPU, gloo)
# ---------------------------------------------------------------------------------------------------------------------


@require_torch
@require_accelerate
@require_torch_optimi
class DistributedBf16FullTrainTest(TestCasePlus):
    def test_fsdp_on_cpu_says_it_runs_as_ddp(self):
        # the guide's `--bf16_full_train --fsdp` on two CPU processes: accelerate enables FSDP on accelerators only
        output_dir = self.get_auto_remove_tmp_dir()
        ranks = run_torchrun(self, "fsdp_on_cpu", output_dir)
        for rank, result in enumerate(ranks):
            self.assertEqual(result["distributed_type"], "MULTI_CPU", rank)
            self.assertEqual(result["global_step"], 2, rank)  # it trains, as DDP
        self.assertEqual(ranks[0]["notices"], 1, ranks[0]["log"])  # once, on the main process, before training
        self.assertIn("run as DDP", ranks[0]["log"])
        self.assertIn("fsdp=", ranks[0]["log"])
        self.assertTrue(ranks[0]["before_train"])
        self.assertEqual(ranks[1]["notices"], 0, ranks[1]["log"])

    def test_ddp_trainer(self):
        output_dir = self.get_auto_remove_tmp_dir()
        ranks = run_torchrun(self, "ddp", output_dir)
        for rank, result in enumerate(ranks):
            self.assertEqual(result["world_size"], 2)
            self.assertEqual(result["parallel_mode"], "ParallelMode.DISTRIBUTED")
            self.assertEqual(result["trained_precision"], "bf16", rank)
            self.assertEqual(result["optimizer"], "AdamW", rank)
            self.assertTrue(result["kahan_sum"], rank)
            self.assertGreater(result["bf16_fraction"], 0.8, rank)
            losses = result["losses"]
            self.assertEqual(len(losses), 6)
            self.assertLess(losses[-1], 0.95 * losses[0], losses)
        # the replicas are identical, bit for bit, after 6 compensated steps
        self.assertEqual(ranks[0]["weights_sha"], ranks[1]["weights_sha"])
        self.assertEqual(ranks[0]["losses"], ranks[1]["losses"])
        # every checkpoint and the final save say bf16; only rank 0 wrote config files
        checkpoints = sorted(glob.glob(os.path.join(output_dir, "checkpoint-*")))
        self.assertEqual([os.path.basename(c) for c in checkpoints], ["checkpoint-3", "checkpoint-6"])
        for directory in [*checkpoints, output_dir]:
            config = read_config(directory)
            self.assertEqual(config["trained_precision"], "bf16", directory)
            self.assertEqual(config["dtype"], "bfloat16", directory)
        self.assertGreaterEqual(len(ranks[0]["config_writes"]), 3)
        self.assertEqual(ranks[1]["config_writes"], [])

    def test_fsdp2_sharded_optimizer_step(self):
        output_dir = self.get_auto_remove_tmp_dir()
        ranks = run_torchrun(self, "fsdp2", output_dir)
        for rank, result in enumerate(ranks):
            # accelerate's own FSDP2 preparation leaves the model sharded for pure bf16 as it is (no fp32 upcast) ...
            self.assertEqual(result["after_accelerate"], result["before_accelerate"], rank)
            self.assertTrue(result["optimizer_holds_model_params"], rank)
            self.assertGreater(result["before_accelerate"].get("torch.bfloat16", 0), 0)
            # ... which it would upcast to fp32 had the model not been sharded first (the behaviour we avoid)
            self.assertEqual(set(result["accelerate_alone"]), {"torch.float32"}, rank)
            # one unit per fp32 module group, one per block, and the root
            self.assertIn(["transformer.wte", "lm_head"], result["plan"]["fp32_units"])
            self.assertEqual(result["plan"]["block_units"], ["transformer.h.0", "transformer.h.1"])
            # sharded gradients match the single-process ones within bf16 rounding (max relative norm error)
            self.assertLess(result["grad_rel_error"], 2**-7, rank)
            # given those gradients, the sharded optimi step (for-loop, Kahan, decay) equals the single-process one
            self.assertEqual(result["step_mismatches"], [], rank)
            # optimi was left to choose: on DTensors it is put on the for-loop implementation before its first step
            self.assertEqual(result["param_groups"], [{"foreach": False, "triton": False}], rank)
            self.assertEqual(set(result["state_types"]), {"DTensor"})
            self.assertIn("torch.bfloat16", result["state_dtypes"])
            # each rank holds half of the state: optimi AdamW keeps 6 bytes/param for bf16 params (4+4+4 for fp32)
            self.assertLess(result["state_bytes_per_param"], 0.55 * result["single_state_bytes_per_param"])
            # three more steps keep the two runs on the same path
            self.assertLess(
                abs(result["final_loss"] - result["final_loss_single"]), 0.02 * result["final_loss_single"]
            )
            self.assertLess(result["final_loss"], result["first_loss"])
            # torchao / bitsandbytes 8-bit optimizers are refused on sharded parameters, naming the alternative
            self.assertIn("adamw_optimi", result["low_bit_refusal"])
            # an explicit foreach=true is refused on sharded parameters
            self.assertIn("foreach=true cannot be used with FSDP2", result["foreach_refusal"])
        self.assertEqual(ranks[0]["final_loss"], ranks[1]["final_loss"])

    def test_fsdp2_trainer_on_cpu(self):
        # The Trainer's whole FSDP2 path (its plugin, accelerate's `prepare`, checkpoints, resume) on the CPU: accelerate
        # enables FSDP on accelerator devices only, so the script turns the resolved CPU state into an FSDP one.
        output_dir = self.get_auto_remove_tmp_dir()
        ranks = run_torchrun(self, "trainer_fsdp2_cpu", output_dir)
        for rank, result in enumerate(ranks):
            self.assertEqual(result["distributed_type"], "DistributedType.FSDP", rank)
            self.assertEqual(result["trained_precision"], "bf16", rank)
            # still sharded and still bf16 after accelerate's preparation and six steps: no fp32 upcast
            self.assertEqual(result["param_types"], ["DTensor"], rank)
            self.assertEqual(result["param_dtypes"], {"torch.bfloat16": 24960, "torch.float32": 3392}, rank)
            self.assertEqual(result["param_groups"], [{"foreach": False, "triton": False}] * 2, rank)
            self.assertLess(result["losses"][-1], 0.95 * result["losses"][0], result["losses"])
            # resuming a fresh model from checkpoint-6 (FSDP model and optimizer state) continues where it stopped
            resumed = result["resumed"]
            self.assertEqual(resumed["global_step"], 8, rank)
            self.assertEqual(resumed["trained_precision"], "bf16", rank)
            self.assertEqual(resumed["param_types"], ["DTensor"], rank)
            self.assertEqual(resumed["param_dtypes"], result["param_dtypes"], rank)
            self.assertEqual(resumed["losses"][:6], result["losses"], rank)
            self.assertLess(resumed["losses"][6], result["losses"][5], resumed["losses"])  # not a fresh model's loss
        self.assertEqual(ranks[0]["losses"], ranks[1]["losses"])
        self.assertGreaterEqual(len(ranks[0]["config_writes"]), 3)
        self.assertEqual(ranks[1]["config_writes"], [])
        for directory in [
            os.path.join(output_dir, "checkpoint-3"),
            os.path.join(output_dir, "checkpoint-6"),
            output_dir,
        ]:
            config = read_config(directory)
            self.assertEqual(config["trained_precision"], "bf16", directory)
            self.assertEqual(config["dtype"], "bfloat16", directory)
        from safetensors import safe_open

        with safe_open(os.path.join(output_dir, "model.safetensors"), "pt") as f:
            dtypes = {str(f.get_tensor(key).dtype) for key in f.keys()}
        self.assertEqual(dtypes, {"torch.bfloat16", "torch.float32"})

    @require_torch_accelerator
    def test_fsdp2_trainer_on_accelerators(self):
        # accelerate enables FSDP on accelerator devices only; this runs where a GPU is present, skipped elsewhere.
        output_dir = self.get_auto_remove_tmp_dir()
        nproc = max(1, min(2, backend_device_count(torch_device)))
        ranks = run_torchrun(self, "trainer_fsdp2", output_dir, nproc=nproc, timeout=600)
        for rank, result in enumerate(ranks):
            self.assertEqual(result["trained_precision"], "bf16", rank)
            self.assertEqual(set(result["param_types"]), {"DTensor"}, rank)
            self.assertGreater(
                result["param_dtypes"].get("torch.bfloat16", 0), 0.8 * sum(result["param_dtypes"].values())
            )
            self.assertEqual(result["param_groups"], [{"foreach": False, "triton": False}], rank)
            self.assertLess(result["losses"][-1], result["losses"][0])
        config = read_config(output_dir)
        self.assertEqual(config["trained_precision"], "bf16")
        self.assertEqual(config["dtype"], "bfloat16")


# ---------------------------------------------------------------------------------------------------------------------
# Configuration, on one CPU process
# ---------------------------------------------------------------------------------------------------------------------


def accelerator_with(fsdp_plugin=None, deepspeed_plugin=None, mixed_precision="bf16"):
    """An object shaped like a resolved `Accelerator` around accelerate's real plugin objects (built on the CPU)."""
    return types.SimpleNamespace(
        mixed_precision=mixed_precision,
        device=torch.device("cpu"),
        is_main_process=True,
        state=types.SimpleNamespace(fsdp_plugin=fsdp_plugin, deepspeed_plugin=deepspeed_plugin),
    )


@require_torch
@require_accelerate
class Fsdp2ConfigurationTest(TestCasePlus):
    def setUp(self):
        super().setUp()
        self.output_dir = self.get_auto_remove_tmp_dir()
        env = mockenv_context("ACCELERATE_USE_FSDP", "FSDP_VERSION", "ACCELERATE_USE_DEEPSPEED")
        env.__enter__()
        self.addCleanup(env.__exit__, None, None, None)

    def args(self, **kwargs):
        defaults = {"use_cpu": True, "report_to": [], "save_strategy": "no", "bf16_full_train": True}
        defaults.update(kwargs)
        return TrainingArguments(self.output_dir, **defaults)

    def plugin(self, args):
        from accelerate.utils import FullyShardedDataParallelPlugin

        return FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)

    def test_fsdp_not_enabled_notice_only_where_it_applies(self):
        from accelerate.utils import DistributedType

        args = self.args(fsdp=True, fsdp_config={"version": 2})
        many = accelerator_with()
        many.state.num_processes, many.state.distributed_type = 2, DistributedType.MULTI_CPU
        self.assertIn("2 processes run as DDP", distributed.warn_if_fsdp_not_enabled(args, many))
        one = accelerator_with()
        one.state.num_processes, one.state.distributed_type = 1, DistributedType.NO
        self.assertIsNone(distributed.warn_if_fsdp_not_enabled(args, one))  # the Trainer refuses one process itself
        sharded = accelerator_with(fsdp_plugin=self.plugin(args))
        sharded.state.num_processes = 2
        self.assertIsNone(distributed.warn_if_fsdp_not_enabled(args, sharded))  # FSDP is on: nothing to say
        self.assertIsNone(distributed.warn_if_fsdp_not_enabled(self.args(), many))  # FSDP not asked for

    def test_fsdp2_is_accepted_and_resolves_to_its_units(self):
        args = self.args(fsdp=True, fsdp_config={"version": 2})
        self.assertEqual(args.optim, "adamw_optimi")
        self.assertTrue(args.bf16)
        plugin = self.plugin(args)
        self.assertEqual(plugin.fsdp_version, 2)
        accelerator = accelerator_with(plugin)
        pure_bf16.check_bf16_full_train_accelerator(args, accelerator)  # no refusal

        model = tiny_gpt_neo()
        pure_bf16.cast_model_for_bf16_full_train(model)
        kwargs = distributed.fsdp2_sharding_kwargs(accelerator, model)
        self.assertIs(kwargs["reshard_after_forward"], True)
        self.assertEqual([c.__name__ for c in kwargs["block_classes"]], ["GPTNeoBlock"])  # `_no_split_modules`
        plan = distributed.plan_bf16_full_train_sharding(model, kwargs["block_classes"])
        self.assertEqual(plan.fp32_units[0], ["transformer.wte", "lm_head"])  # tied: one unit
        self.assertIn(["transformer.ln_f"], plan.fp32_units)
        self.assertEqual(len(plan.fp32_units), 2 + 2 * 2 + 1)  # wte+lm_head, wpe, 2 norms per block, ln_f
        self.assertEqual(plan.block_units, ["transformer.h.0", "transformer.h.1"])

        # `fsdp_config` options reach the plugin and from there the sharding
        args = self.args(
            fsdp=True,
            fsdp_config={"version": 2, "reshard_after_forward": False, "transformer_layer_cls_to_wrap": "GPTNeoMLP"},
        )
        kwargs = distributed.fsdp2_sharding_kwargs(accelerator_with(self.plugin(args)), model)
        self.assertIs(kwargs["reshard_after_forward"], False)
        self.assertEqual([c.__name__ for c in kwargs["block_classes"]], ["GPTNeoMLP"])
        args = self.args(fsdp=True, fsdp_config={"version": 2, "transformer_layer_cls_to_wrap": "T5Block"})
        with self.assertRaisesRegex(
            ValueError, "T5Block, not found in GPTNeoForCausalLM. Valid block classes: GPTNeoBlock"
        ):
            distributed.fsdp2_sharding_kwargs(accelerator_with(self.plugin(args)), model)

    def test_policy_is_deliberate(self):
        from torch.distributed.fsdp import MixedPrecisionPolicy

        policy = distributed.bf16_full_train_mp_policy()
        self.assertIsInstance(policy, MixedPrecisionPolicy)
        self.assertIsNone(policy.param_dtype)  # never upcast or cast: the weights are used in their storage dtype
        self.assertEqual(policy.reduce_dtype, torch.float32)  # fp32 sums of bf16 gradients, one rounding
        self.assertEqual(distributed.bf16_full_train_mp_policy(torch.bfloat16).reduce_dtype, torch.bfloat16)

    def test_stamp_with_the_recorded_policy(self):
        # the policy recorded on the plugin has no param_dtype, so the stamp reads the run's bf16 autocast
        from transformers.trained_precision.record.stamp import resolve_run_precision

        args = self.args(fsdp=True, fsdp_config={"version": 2})
        plugin = self.plugin(args)
        plugin.set_mixed_precision("bf16")  # what accelerate does for a bf16 run: param_dtype=bf16
        plugin.mixed_precision_policy = distributed.bf16_full_train_mp_policy()
        accelerator = accelerator_with(plugin)
        accelerator.distributed_type = "FSDP"
        model = tiny_gpt_neo()
        pure_bf16.cast_model_for_bf16_full_train(model)
        self.assertEqual(resolve_run_precision(model, accelerator=accelerator), "bf16")

    def test_mixed_dtype_unit_is_refused_with_the_module(self):
        model = tiny_gpt_neo()
        pure_bf16.cast_model_for_bf16_full_train(model)
        model.transformer.h[0].attn.attention.q_proj.weight.data = model.transformer.h[
            0
        ].attn.attention.q_proj.weight.data.float()
        # q_proj is a leaf, so it just becomes an fp32 unit of its own
        plan = distributed.plan_bf16_full_train_sharding(model)
        self.assertIn(["transformer.h.0.attn.attention.q_proj"], plan.fp32_units)
        # a module holding fp32 parameters itself and bf16 ones below cannot be one unit
        model.transformer.h[1].register_parameter("scale", torch.nn.Parameter(torch.ones(2)))
        with self.assertRaisesRegex(ValueError, r"transformer\.h\.1 hold trainable parameters of several dtypes"):
            distributed.plan_bf16_full_train_sharding(model)

    def test_fsdp_config_file_of_the_command_line(self):
        # `--fsdp --fsdp_config fsdp_config.json`: the file is read before TrainingArguments normalises it
        path = os.path.join(self.output_dir, "fsdp_config.json")
        for content, accepted in (({"version": 2}, True), ({"fsdp_version": 1}, False)):
            with open(path, "w", encoding="utf-8") as f:
                json.dump(content, f)
            if accepted:
                self.assertEqual(self.plugin(self.args(fsdp=True, fsdp_config=path)).fsdp_version, 2)
            else:
                with self.assertRaisesRegex(ValueError, "got FSDP version 1"):
                    self.args(fsdp=True, fsdp_config=path)

    @parameterized.expand([("args", "args"), ("env", "env"), ("plugin", "plugin")])
    def test_fsdp1_is_refused(self, _, source):
        if source == "args":
            with self.assertRaisesRegex(ValueError, r"needs FSDP2.*got FSDP version 1"):
                self.args(fsdp=True, fsdp_config={"version": 1})
        elif source == "env":
            os.environ.update(ACCELERATE_USE_FSDP="true", FSDP_VERSION="1")
            with self.assertRaisesRegex(ValueError, r"fsdp_version: 2"):
                self.args()
        else:
            from accelerate.utils import FullyShardedDataParallelPlugin

            plugin = FullyShardedDataParallelPlugin(
                fsdp_version=1
            )  # the FSDP1 plugin of an `accelerate launch` config
            with self.assertRaisesRegex(ValueError, "needs FSDP2"):
                pure_bf16.check_bf16_full_train_accelerator(self.args(), accelerator_with(plugin))

    @parameterized.expand(
        [("torchao", "adamw_torch_8bit"), ("torchao_4bit", "adamw_torch_4bit"), ("bnb", "adamw_bnb_8bit")]
    )
    def test_low_bit_optimizers_are_refused_under_fsdp2(self, _, optim):
        with self.assertRaisesRegex(ValueError, r"optim='adamw_optimi'.*or train with the 8-bit optimizer under DDP"):
            self.args(fsdp=True, fsdp_config={"version": 2}, optim=optim)
        self.args(optim=optim)  # accepted without FSDP (DDP or one process)

    def test_low_bit_optimizer_classes_are_detected_by_name(self):
        for module, name, expected in [
            ("torchao.optim.adam", "AdamW8bit", True),
            ("torchao.optim.adam", "AdamWFp8", True),
            ("bitsandbytes.optim.adamw", "PagedAdamW8bit", True),
            ("torchao.optim.adam", "_AdamW", False),
            ("optimi.adamw", "AdamW", False),
        ]:
            cls = type(name, (torch.optim.Optimizer,), {"__module__": module})
            self.assertIs(distributed.is_low_bit_optimizer(cls), expected, f"{module}.{name}")

    def test_activation_checkpointing_and_ram_efficient_loading_are_refused(self):
        with self.assertRaisesRegex(ValueError, "gradient_checkpointing=True"):
            self.args(fsdp=True, fsdp_config={"version": 2, "activation_checkpointing": True})
        with self.assertRaisesRegex(ValueError, "cpu_ram_efficient_loading"):
            self.args(fsdp=True, fsdp_config={"version": 2, "cpu_ram_efficient_loading": True})

    def test_deepspeed_optimizer_is_refused_with_reason_and_alternative(self):
        # ZeRO 1-3 run pure bf16 (tests/trainer/test_trainer_pure_bf16_deepspeed.py); DeepSpeed's own optimizer is refused
        from accelerate.utils import DeepSpeedPlugin

        config = {"bf16": {"enabled": True}, "zero_optimization": {"stage": 3}, "optimizer": {"type": "AdamW"}}
        plugin = DeepSpeedPlugin(hf_ds_config=config)
        with self.assertRaises(ValueError) as cm:
            pure_bf16.check_bf16_full_train_accelerator(self.args(), accelerator_with(deepspeed_plugin=plugin))
        message = str(cm.exception)
        self.assertIn("do not compensate rounding", message)  # the reason
        self.assertIn("Remove the `optimizer` section", message)  # the alternative

    @require_torch_optimi
    def test_optimi_arguments_for_sharded_parameters(self):
        args = self.args(fsdp=True, fsdp_config={"version": 2})
        model = tiny_gpt_neo()
        pure_bf16.cast_model_for_bf16_full_train(model)
        _, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
        self.assertIs(kwargs["foreach"], False)
        self.assertIs(kwargs["triton"], False)
        args = self.args(fsdp=True, fsdp_config={"version": 2}, optim_args="triton=true")
        with self.assertRaisesRegex(ValueError, "triton=true cannot be used with FSDP2"):
            Trainer.get_optimizer_cls_and_kwargs(args, model)
        # without FSDP optimi chooses its implementation itself
        _, kwargs = Trainer.get_optimizer_cls_and_kwargs(self.args(), model)
        self.assertNotIn("foreach", kwargs)


# ---------------------------------------------------------------------------------------------------------------------
# The torchrun script
# ---------------------------------------------------------------------------------------------------------------------


def _dump(output_dir, rank, result):
    path = os.path.join(output_dir, f"rank{rank}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    print(f"rank {rank}: wrote {path}")


def _dtype_counts(model):
    counts = {}
    for p in model.parameters():
        counts[str(p.dtype)] = counts.get(str(p.dtype), 0) + p.numel()
    return counts


def _record_config_writes(output_dir, rank, writes):
    from transformers import PreTrainedConfig

    to_json_file = PreTrainedConfig.to_json_file

    def recording_to_json_file(self, json_file_path, *a, **kw):
        writes.append(os.path.relpath(str(json_file_path), output_dir))
        return to_json_file(self, json_file_path, *a, **kw)

    PreTrainedConfig.to_json_file = recording_to_json_file


def _fsdp_on_cpu_main(output_dir):
    from transformers.testing_utils import CaptureLogger
    from transformers.utils import logging

    args = TrainingArguments(
        output_dir,
        use_cpu=True,
        bf16_full_train=True,
        fsdp=True,
        fsdp_config={"version": 2},
        max_steps=2,
        per_device_train_batch_size=2,
        report_to=[],
        disable_tqdm=True,
        save_strategy="no",
    )
    logger = logging.get_logger("transformers.integrations.pure_bf16_distributed")
    with CaptureLogger(logger) as at_start:
        trainer = Trainer(tiny_gpt_neo(), args, train_dataset=RepeatingLMDataset())
    with CaptureLogger(logger) as during:
        trainer.train()
    log = at_start.out + during.out
    _dump(
        output_dir,
        args.process_index,
        {
            "distributed_type": str(trainer.accelerator.distributed_type.value),
            "global_step": trainer.state.global_step,
            "notices": log.count("FSDP was requested"),
            "before_train": "run as DDP" in at_start.out,
            "log": log,
        },
    )


def _ddp_main(output_dir):
    import hashlib

    args = TrainingArguments(
        output_dir,
        use_cpu=True,
        bf16_full_train=True,
        max_steps=6,
        save_steps=3,
        per_device_train_batch_size=4,
        learning_rate=3e-3,
        adam_beta2=0.99,
        logging_steps=1,
        report_to=[],
        disable_tqdm=True,
        seed=0,
    )
    rank = args.process_index
    writes = []
    _record_config_writes(output_dir, rank, writes)
    model = tiny_gpt_neo()
    trainer = Trainer(model, args, train_dataset=RepeatingLMDataset())
    trainer.train()
    trainer.save_model()
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().view(torch.uint8).numpy().tobytes())
    counts = _dtype_counts(model)
    inner = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    _dump(
        output_dir,
        rank,
        {
            "world_size": args.world_size,
            "parallel_mode": str(args.parallel_mode),
            "trained_precision": model.config.trained_precision,
            "optimizer": type(inner).__name__,
            "kahan_sum": all(g.get("kahan_sum") for g in inner.param_groups),
            "bf16_fraction": counts.get("torch.bfloat16", 0) / sum(counts.values()),
            "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
            "weights_sha": digest.hexdigest(),
            "config_writes": writes,
        },
    )


def _fsdp2_main(output_dir):
    import copy

    from accelerate import Accelerator
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.fsdp_utils import fsdp2_prepare_model

    args = TrainingArguments(
        output_dir, use_cpu=True, bf16_full_train=True, fsdp=True, fsdp_config={"version": 2}, report_to=[]
    )
    accelerator = Accelerator(cpu=True, mixed_precision="bf16")  # initialises the gloo process group
    rank = accelerator.process_index
    # accelerate enables FSDP on accelerator devices only: hand the real plugin to the CPU state ourselves
    accelerator.state.fsdp_plugin = FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)
    result = {}

    # accelerate alone upcasts a bf16 model to fp32 when the run has a mixed precision
    alone = tiny_gpt_neo()
    pure_bf16.cast_model_for_bf16_full_train(alone)
    result["accelerate_alone"] = _dtype_counts(fsdp2_prepare_model(accelerator, alone))
    accelerator.state.fsdp_plugin = FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)

    model = tiny_gpt_neo()
    pure_bf16.cast_model_for_bf16_full_train(model)
    single = copy.deepcopy(model)
    plan = distributed.shard_for_bf16_full_train_with_accelerate(model, accelerator)
    result["plan"] = {"fp32_units": plan.fp32_units, "block_units": plan.block_units}
    result["before_accelerate"] = _dtype_counts(model)

    # as the Trainer does under FSDP2: the optimizer first (optimi left to choose its implementation), then
    # accelerate's FSDP2 preparation of both, which swaps the optimizer's parameters for the prepared model's
    optimizer_cls = get_optimi_optimizer_cls("AdamW")
    kwargs = {"lr": 1e-3, "betas": (0.9, 0.99), "weight_decay": 0.1, "kahan_sum": True}
    optimizer = optimizer_cls(model.parameters(), **kwargs)
    prepare_optimi_optimizer(optimizer)  # as `Trainer.create_optimizer` does
    model, accelerated_optimizer = accelerator._prepare_fsdp2(model, optimizer)
    result["after_accelerate"] = _dtype_counts(model)
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    result["optimizer_holds_model_params"] = optimized == {id(p) for p in model.parameters()}
    single_optimizer = optimizer_cls(single.parameters(), **kwargs, foreach=False, triton=False)
    prepare_optimi_optimizer(single_optimizer)
    ids = torch.stack([RepeatingLMDataset()[i]["input_ids"] for i in range(4)])
    ids[:, ::3] = torch.randint(0, 64, ids[:, ::3].shape, generator=torch.Generator().manual_seed(1))
    local = ids[2 * rank : 2 * rank + 2]

    def loss_of(m, batch):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return m(input_ids=batch, labels=batch).loss

    # one step: gradients, then the optimizer step given the same gradients
    first_loss = loss_of(model, ids).item()  # the full batch, every rank
    loss_of(model, local).backward()
    loss_of(single, ids).backward()
    optimizer = accelerated_optimizer
    worst = 0.0
    for p, q in zip(model.parameters(), single.parameters()):
        grad = p.grad.full_tensor()
        worst = max(worst, ((grad.float() - q.grad.float()).norm() / q.grad.float().norm().clamp_min(1e-30)).item())
        q.grad = grad.clone()  # the single process steps with exactly the sharded gradients
    result["grad_rel_error"] = worst
    optimizer.step()
    single_optimizer.step()
    mismatches = []
    for (name, p), (_, q) in zip(model.named_parameters(), single.named_parameters()):
        if not torch.equal(p.full_tensor(), q):
            mismatches.append(name)
        for key, value in optimizer.optimizer.state[p].items():
            if (
                torch.is_tensor(value)
                and value.dim() > 0
                and not torch.equal(value.full_tensor(), single_optimizer.state[q][key])
            ):
                mismatches.append(f"{name}:{key}")
    result["step_mismatches"] = mismatches
    result["param_groups"] = [{"foreach": g["foreach"], "triton": g["triton"]} for g in optimizer.param_groups]
    states = [v for s in optimizer.optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    result["state_types"] = sorted({type(v).__name__ for v in states})
    result["state_dtypes"] = sorted({str(v.dtype) for v in states})
    n_params = sum(p.numel() for p in single.parameters())
    result["state_bytes_per_param"] = sum(v.to_local().numel() * v.element_size() for v in states) / n_params
    single_states = [
        v for s in single_optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0
    ]
    result["single_state_bytes_per_param"] = sum(v.numel() * v.element_size() for v in single_states) / n_params

    optimizer.zero_grad()
    single_optimizer.zero_grad()
    for _ in range(3):
        loss_of(model, local).backward()
        optimizer.step()
        optimizer.zero_grad()
        loss_of(single, ids).backward()
        single_optimizer.step()
        single_optimizer.zero_grad()
    result["first_loss"] = first_loss
    result["final_loss"] = loss_of(model, ids).item()
    result["final_loss_single"] = loss_of(single, ids).item()

    class AdamW8bit(torch.optim.SGD):  # named as torchao's, the refusal goes by library and name
        __module__ = "torchao.optim.adam"

    try:
        distributed.check_optimizer_for_sharded_params(model, AdamW8bit(model.parameters(), lr=1e-3))
        result["low_bit_refusal"] = ""
    except ValueError as e:
        result["low_bit_refusal"] = str(e)
    try:
        distributed.check_optimi_args_for_sharded_params({"foreach": True}, True)
        result["foreach_refusal"] = ""
    except ValueError as e:
        result["foreach_refusal"] = str(e)
    _dump(output_dir, rank, result)


def _trainer_fsdp2_main(output_dir, cpu=False):
    trainer_cls = Trainer
    if cpu:
        from accelerate import PartialState
        from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

        class CpuFsdp2Trainer(Trainer):
            """accelerate enables FSDP on accelerator devices only: turn the resolved CPU state into an FSDP2 one."""

            def create_accelerator_and_postprocess(self):
                super().create_accelerator_and_postprocess()
                state = self.accelerator.state
                state.fsdp_plugin = FullyShardedDataParallelPlugin(**self.args.fsdp_plugin_args)
                state.fsdp_plugin.set_mixed_precision(self.accelerator.mixed_precision)
                state.distributed_type = DistributedType.FSDP
                PartialState().distributed_type = DistributedType.FSDP
                self.is_fsdp_enabled = True

        trainer_cls = CpuFsdp2Trainer

    def make_args(max_steps):
        return TrainingArguments(
            output_dir,
            use_cpu=cpu,
            bf16_full_train=True,
            fsdp=True,
            fsdp_config={"version": 2},
            max_steps=max_steps,
            save_steps=3,
            per_device_train_batch_size=4,
            learning_rate=3e-3,
            adam_beta2=0.99,
            logging_steps=1,
            report_to=[],
            disable_tqdm=True,
            seed=0,
        )

    args = make_args(6)
    writes = []
    _record_config_writes(output_dir, args.process_index, writes)
    model = tiny_gpt_neo()
    trainer = trainer_cls(model, args, train_dataset=RepeatingLMDataset())
    trainer.train()
    trainer.save_model()
    inner = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    result = {
        "trained_precision": model.config.trained_precision,
        "distributed_type": str(trainer.accelerator.distributed_type),
        "param_types": sorted({type(p).__name__ for p in trainer.model.parameters()}),
        "param_dtypes": _dtype_counts(trainer.model),
        "param_groups": [{"foreach": g["foreach"], "triton": g["triton"]} for g in inner.param_groups],
        "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
        "config_writes": list(writes),
    }

    # resume from checkpoint-6 (FSDP model and optimizer state) with a fresh model, and train two more steps
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state()
    resumed = trainer_cls(tiny_gpt_neo(seed=1), make_args(8), train_dataset=RepeatingLMDataset())
    resumed.train(resume_from_checkpoint=os.path.join(output_dir, "checkpoint-6"))
    result["resumed"] = {
        "global_step": resumed.state.global_step,
        "trained_precision": resumed.model.config.trained_precision,
        "param_types": sorted({type(p).__name__ for p in resumed.model.parameters()}),
        "param_dtypes": _dtype_counts(resumed.model),
        "losses": [entry["loss"] for entry in resumed.state.log_history if "loss" in entry],
    }
    _dump(output_dir, args.process_index, result)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--mode", choices=["ddp", "fsdp2", "trainer_fsdp2", "trainer_fsdp2_cpu", "fsdp_on_cpu"], required=True
    )
    parser.add_argument("--output_dir", required=True)
    cli = parser.parse_args()
    if cli.mode == "trainer_fsdp2_cpu":
        _trainer_fsdp2_main(cli.output_dir, cpu=True)
    else:
        modes = {"ddp": _ddp_main, "fsdp2": _fsdp2_main, "trainer_fsdp2": _trainer_fsdp2_main}
        modes["fsdp_on_cpu"] = _fsdp_on_cpu_main
        modes[cli.mode](cli.output_dir)
    # Leave together: rank 1, which writes nothing, used to exit while rank 0 was still saving, and a gloo process
    # group torn down by interpreter exit on one side can abort the other (SIGABRT) at the final save.
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
