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
Pure-bf16 training (`bf16_full_train=True`) under DeepSpeed ZeRO with the real `deepspeed` package, on the CPU
(`DS_ACCELERATOR=cpu`, gloo): the compensated optimizer step on ZeRO's flat partitions, the `Trainer`'s ZeRO-2 and
ZeRO-3 runs (stamp, checkpoints, resume, ZeRO-3's gathered final save), the warning for DeepSpeed's uncompensated bf16
master weights, and the refusals.

This file is also the script of the 2-process tests: `torchrun --nproc_per_node 2 test_trainer_pure_bf16_deepspeed.py
--output_dir DIR` runs the compensated ZeRO step, then the `Trainer`'s ZeRO-2 run (in `DIR/zero2`) and its ZeRO-3 run
(in `DIR/zero3`), and writes what each rank saw to `DIR/rank{N}.json`. The three share one launch: each launch of two
processes that import torch, transformers and DeepSpeed costs about as much CPU as the runs themselves.
"""

import json
import os
import shutil
import sys
import tempfile
import types

from transformers import TrainingArguments, is_torch_available
from transformers.testing_utils import (
    CaptureLogger,
    TestCasePlus,
    execute_subprocess_async,
    require_accelerate,
    require_deepspeed,
    require_torch,
    require_torch_optimi,
)
from transformers.trained_precision.testing_utils import free_port, tiny_gpt_neo_config
from transformers.utils import logging


if is_torch_available():
    import torch

    from transformers import GPTNeoForCausalLM, Trainer, TrainerCallback
    from transformers.integrations import pure_bf16_deepspeed as ds_bf16


def tiny_gpt_neo(seed=0):
    torch.manual_seed(seed)
    return GPTNeoForCausalLM(tiny_gpt_neo_config(hidden_size=32))


class RepeatingLMDataset:
    """32 sequences of 8 token ids following one pattern, the labels being the inputs: quick to learn."""

    def __len__(self):
        return 32

    def __getitem__(self, i):
        ids = (torch.arange(8) * 3 + i) % 64
        return {"input_ids": ids, "labels": ids}


def zero_config(stage, **extra):
    """A DeepSpeed config as a user writes it for the `Trainer`: no bf16 keys, no optimizer (the switch sets them)."""
    return {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "zero_optimization": {"stage": stage},
        **extra,
    }


def run_torchrun(test, output_dir, nproc=2, timeout=600):
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", f"--master_port={free_port()}"]
    cmd += [os.path.abspath(__file__), "--output_dir", output_dir]
    env = test.get_env()
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", DS_ACCELERATOR="cpu")
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
# Multi-process runs (CPU, gloo, real DeepSpeed)
# ---------------------------------------------------------------------------------------------------------------------


@require_torch
@require_accelerate
@require_torch_optimi
@require_deepspeed
class DeepSpeedBf16FullTrainTest(TestCasePlus):
    # the one 2-process launch the tests share (see the module docstring): its folder, and what each rank saw, or why
    # the launch failed (each test then fails with it, without launching again)
    output_dir = ranks = launch_error = None

    @classmethod
    def tearDownClass(cls):
        if cls.output_dir is not None:
            shutil.rmtree(cls.output_dir, ignore_errors=True)
        super().tearDownClass()

    def launched(self, key):
        """What each rank saw in part `key` of the shared launch (`zero_step`, `trainer2`, `trainer3`)."""
        cls = type(self)
        if cls.ranks is None and cls.launch_error is None:
            cls.output_dir = tempfile.mkdtemp(prefix="pure_bf16_deepspeed_")
            try:
                cls.ranks = run_torchrun(self, cls.output_dir)
            except Exception as e:
                cls.launch_error = e
        if cls.launch_error is not None:
            raise RuntimeError("the 2-process DeepSpeed launch failed") from cls.launch_error
        return [result[key] for result in cls.ranks]

    def test_zero2_and_zero3_step_equals_the_unsharded_compensated_step(self):
        ranks = self.launched("zero_step")
        for rank, result in enumerate(ranks):
            for stage in ("2", "3"):
                run = result[stage]
                # ZeRO's partition and everything optimi keeps on it are bf16 ...
                self.assertEqual(run["master_dtypes"], ["torch.bfloat16"], (rank, stage))
                self.assertEqual(set(run["state_dtypes"]), {"torch.bfloat16"}, (rank, stage))
                self.assertIn("kahan_comp", run["state_keys"], (rank, stage))
                # ... and sharded: each rank holds about half of the moments and Kahan buffers
                self.assertLess(run["state_bytes_per_param"], 0.55 * 6, (rank, stage))
                self.assertGreater(run["state_bytes_per_param"], 0.45 * 6, (rank, stage))
                # three steps on the same weights and gradients as the unsharded optimi step (Kahan, compensated
                # decay): weights, moments and Kahan buffers agree, bit for bit
                self.assertEqual(run["mismatches"], [], (rank, stage))
                self.assertGreater(run["kahan_nonzero"], 0, (rank, stage))
                self.assertLess(run["losses"][-1], run["losses"][0], (rank, stage))

    def _check_trainer_run(self, ranks, output_dir, stage):
        for rank, result in enumerate(ranks):
            self.assertEqual(result["trained_precision"], "bf16", rank)
            # ZeRO keeps bf16 master weights: the model card names a pure (non-mixed) bf16 run, as DeepSpeed ran it
            self.assertEqual(result["training_regime"], "bf16 non-mixed precision", rank)
            # the switch completed the user's config
            self.assertTrue(result["bf16_config"]["bf16_master_weights_and_grads"], rank)
            self.assertTrue(result["bf16_config"]["bf16_optimizer_states"], rank)
            self.assertEqual(result["optimizer"], "AdamW", rank)
            self.assertEqual(result["optimizer_module"].split(".")[0], "optimi", rank)
            self.assertEqual(result["zero_stage"], stage, rank)
            self.assertEqual(set(result["state_dtypes"]), {"torch.bfloat16"}, rank)
            self.assertLess(result["losses"][-1], 0.95 * result["losses"][0], result["losses"])
            # the Kahan buffer survives save and resume_from_checkpoint: the resumed run starts from the saved
            # buffer and ends on the uninterrupted run's weights, bit for bit
            self.assertGreater(result["kahan_at_save_norm"], 0, rank)
            self.assertTrue(result["kahan_restored"], rank)
            self.assertEqual(result["resumed_weights_sha"], result["weights_sha"], rank)
            self.assertEqual(result["resumed_global_step"], 4, rank)
        self.assertEqual(ranks[0]["losses"], ranks[1]["losses"])
        for directory in [
            os.path.join(output_dir, "checkpoint-2"),
            os.path.join(output_dir, "checkpoint-4"),
            output_dir,
        ]:
            config = read_config(directory)
            self.assertEqual(config["trained_precision"], "bf16", directory)
            self.assertEqual(config["dtype"], "bfloat16", directory)
        return ranks[0]

    def test_trainer_zero2(self):
        ranks = self.launched("trainer2")
        main = self._check_trainer_run(ranks, os.path.join(self.output_dir, "zero2"), 2)
        # without the switch, DeepSpeed's own bf16 master weights get the uncompensated-pure-bf16 warning, with the fix
        self.assertIn("does not compensate rounding", main["uncompensated_log"])
        self.assertIn("bf16_full_train=True", main["uncompensated_log"])
        self.assertEqual(ranks[1]["uncompensated_log"], "")

    def test_trainer_zero3_gathers_a_bf16_checkpoint(self):
        ranks = self.launched("trainer3")
        output_dir = os.path.join(self.output_dir, "zero3")
        main = self._check_trainer_run(ranks, output_dir, 3)
        self.assertTrue(main["gather_16bit"])
        # the final save is a normal checkpoint of the gathered bf16 weights, which loads as the trained model
        from safetensors import safe_open

        with safe_open(os.path.join(output_dir, "model.safetensors"), "pt") as f:
            dtypes = {str(f.get_tensor(key).dtype) for key in f.keys()}
        self.assertEqual(dtypes, {"torch.bfloat16"})
        # (loaded here, outside the ZeRO-3 processes, as a user loads it)
        reloaded = GPTNeoForCausalLM.from_pretrained(output_dir)
        self.assertEqual(reloaded.dtype, torch.bfloat16)
        self.assertEqual(reloaded.config.trained_precision, "bf16")
        self.assertEqual(_sha(dict(reloaded.named_parameters())), main["weights_sha"])


# ---------------------------------------------------------------------------------------------------------------------
# Configuration, on one CPU process
# ---------------------------------------------------------------------------------------------------------------------


def accelerator_with(deepspeed_plugin, is_main_process=True):
    """An object shaped like a resolved `Accelerator` around accelerate's real DeepSpeed plugin (built on the CPU)."""
    return types.SimpleNamespace(
        mixed_precision="bf16",
        device=torch.device("cpu"),
        is_main_process=is_main_process,
        state=types.SimpleNamespace(fsdp_plugin=None, deepspeed_plugin=deepspeed_plugin),
    )


@require_torch
@require_accelerate
@require_deepspeed
class DeepSpeedBf16ConfigurationTest(TestCasePlus):
    def args(self, **kwargs):
        return TrainingArguments(self.get_auto_remove_tmp_dir(), bf16_full_train=True, report_to=[], **kwargs)

    def test_refusals_name_the_key_the_reason_and_the_alternative(self):
        cases = [
            ({"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, "Remove the `optimizer` section"),
            ({"fp16": {"enabled": True}}, "`fp16.enabled` true"),
            ({"bf16": {"enabled": False}}, "Set it to true"),
            ({"bf16": {"enabled": True, "bf16_master_weights_and_grads": False}}, "fp32 master weights"),
            ({"bf16": {"enabled": True, "bf16_optimizer_states": False}}, "optimizer state"),
            ({"zero_optimization": {"stage": 0}}, "ZeRO stage 1, 2 or 3"),
            ({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}, "DeepSpeedCPUAdam"),
            ({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}, "offload_param"),
        ]
        for change, expected in cases:
            config = {**zero_config(2), **change}
            with self.assertRaises(ValueError, msg=change) as cm:
                self.args(deepspeed=config)
            self.assertIn(expected, str(cm.exception), change)
        # a JSON file is read the same way
        path = os.path.join(self.get_auto_remove_tmp_dir(), "ds_config.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({**zero_config(3), "optimizer": {"type": "Adam"}}, f)
        with self.assertRaisesRegex(ValueError, "optimizer of the DeepSpeed config \\('Adam'\\)"):
            self.args(deepspeed=path)

    def test_config_is_completed_for_pure_bf16(self):
        from accelerate.utils import DeepSpeedPlugin

        plugin = DeepSpeedPlugin(hf_ds_config=zero_config(3))
        logger = logging.get_logger("transformers.integrations.pure_bf16_deepspeed")
        logger.setLevel(logging.INFO)
        try:
            with CaptureLogger(logger) as cl:
                changes = ds_bf16.prepare_deepspeed_for_bf16_full_train(accelerator_with(plugin))
        finally:
            logger.setLevel(logging.WARNING)
        config = plugin.hf_ds_config.config
        self.assertIs(plugin.deepspeed_config, config)  # what DeepSpeed will read
        self.assertEqual(
            config["bf16"], {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}
        )
        self.assertTrue(config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"])
        self.assertEqual(len(changes), 4)
        self.assertIn("bf16.bf16_master_weights_and_grads=true", cl.out)
        # a user's explicit `false` for the gathered save is kept; a complete config is left as it is
        explicit = zero_config(3, bf16={"enabled": True})
        explicit["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] = False
        ds_bf16.resolve_deepspeed_config_for_bf16_full_train(explicit)
        self.assertFalse(explicit["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"])
        self.assertEqual(ds_bf16.resolve_deepspeed_config_for_bf16_full_train(explicit), [])

    def test_uncompensated_bf16_master_weights_warn_only_where_they_apply(self):
        from accelerate.utils import DeepSpeedPlugin

        bf16 = {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}
        args = types.SimpleNamespace(bf16_full_train=False, optim="adamw_torch")
        for config, warns in [
            (zero_config(2, bf16=bf16, optimizer={"type": "AdamW"}), "DeepSpeed's AdamW"),
            (zero_config(2, bf16=bf16), "optim='adamw_torch'"),
            (zero_config(2, bf16={"enabled": True}), None),  # fp32 master weights: mixed precision, nothing to say
        ]:
            message = ds_bf16.warn_if_uncompensated_deepspeed(
                args, accelerator_with(DeepSpeedPlugin(hf_ds_config=config), is_main_process=False)
            )
            if warns is None:
                self.assertIsNone(message)
            else:
                self.assertIn(warns, message)
                self.assertIn("bf16_full_train=True", message)
        # optimi compensates on the bf16 partitions too; the switch itself never warns
        optimi_args = types.SimpleNamespace(bf16_full_train=False, optim="adamw_optimi")
        plugin = DeepSpeedPlugin(hf_ds_config=zero_config(2, bf16=bf16))
        # (the Trainer's check tells it whether its optimizer is an optimi one: `compensated`)
        self.assertIsNone(
            ds_bf16.warn_if_uncompensated_deepspeed(optimi_args, accelerator_with(plugin), compensated=True)
        )
        switch_args = types.SimpleNamespace(bf16_full_train=True, optim="adamw_optimi")
        self.assertIsNone(ds_bf16.warn_if_uncompensated_deepspeed(switch_args, accelerator_with(plugin)))
        # the Trainer's optimizer checks see accelerate's placeholder for a config's optimizer, and leave it alone
        from accelerate.utils import DummyOptim

        from transformers.integrations.pure_bf16 import check_pure_half_precision_training

        model = tiny_gpt_neo().to(torch.bfloat16)
        self.assertEqual(check_pure_half_precision_training(model, DummyOptim(model.parameters()), args), [])


# ---------------------------------------------------------------------------------------------------------------------
# The 2-process scripts
# ---------------------------------------------------------------------------------------------------------------------


def _dump(output_dir, rank, result):
    path = os.path.join(output_dir, f"rank{rank}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, sort_keys=True)


def _sha(model_or_state_dict):
    import hashlib

    state = model_or_state_dict if isinstance(model_or_state_dict, dict) else model_or_state_dict.state_dict()
    digest = hashlib.sha256()
    for name, tensor in sorted(state.items()):
        if name == "lm_head.weight":  # tied to the embeddings
            continue
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _local_state(optimizer):
    """dtypes, keys and bytes of the tensors the (inner) optimizer keeps on this rank."""
    inner = getattr(optimizer, "optimizer", optimizer)
    dtypes, keys, size = set(), set(), 0
    for state in inner.state.values():
        for key, value in state.items():
            if torch.is_tensor(value) and value.dim() > 0:
                dtypes.add(str(value.dtype))
                keys.add(key)
                size += value.numel() * value.element_size()
    return sorted(dtypes), sorted(keys), size


def _step_mismatches(step, names, ds_params, ref_params, ref_optimizer):
    """Where ZeRO's weights and optimizer state differ from the unsharded step's, after `step`."""
    from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state

    mismatches = []
    for name in names:
        ds_param, ref_param = ds_params[name], ref_params[name]
        pairs = [("weight", safe_get_full_fp32_param(ds_param), ref_param)]
        for key in ("exp_avg", "exp_avg_sq", "kahan_comp"):
            pairs.append((key, safe_get_full_optimizer_state(ds_param, key), ref_optimizer.state[ref_param][key]))
        for what, sharded, unsharded in pairs:
            if not torch.equal(sharded.reshape(unsharded.shape).to(unsharded.dtype), unsharded):
                a, b = sharded.reshape(unsharded.shape).float(), unsharded.float()
                mismatches.append(
                    f"step {step} {name} {what} {float((a - b).abs().max()):.3g} {float(a.abs().max()):.3g} {float(b.abs().max()):.3g}"
                )
    return mismatches


def _zero_step_main():
    import copy

    import deepspeed
    from deepspeed.utils import safe_get_full_grad

    from transformers.integrations.optimi import get_optimi_optimizer_cls, prepare_optimi_optimizer
    from transformers.integrations.pure_bf16 import cast_model_for_bf16_full_train

    deepspeed.init_distributed(dist_backend="gloo")
    AdamW = get_optimi_optimizer_cls("AdamW")
    batch = torch.stack([RepeatingLMDataset()[i]["input_ids"] for i in range(4)])  # the same batch on both ranks
    result = {}
    for stage in (2, 3):
        model = tiny_gpt_neo()
        cast_model_for_bf16_full_train(model, cast_all=True)
        reference = copy.deepcopy(model)
        n_params = sum(p.numel() for p in model.parameters())

        def optimizer_for(m):
            decay = [p for n, p in m.named_parameters() if p.ndim > 1]
            no_decay = [p for n, p in m.named_parameters() if p.ndim <= 1]
            groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
            optimizer = AdamW(groups, lr=3e-3, betas=(0.9, 0.99), kahan_sum=True, foreach=False, triton=False)
            # what the Trainer adds: the compensated weight decay, and a step count per ZeRO partition
            prepare_optimi_optimizer(optimizer, partition_steps=True)
            return optimizer

        ref_optimizer = optimizer_for(reference)
        # no gradient clipping (DeepSpeed's default is 1.0): the step itself is compared, on the gradients ZeRO reduced
        config = {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": stage}, "gradient_clipping": 0.0}
        config["steps_per_print"] = 10**6
        ds_bf16.resolve_deepspeed_config_for_bf16_full_train(config)
        config["zero_allow_untested_optimizer"] = True
        engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer_for(model), config=config)
        names = [n for n, _ in reference.named_parameters()]
        ds_params = dict(engine.module.named_parameters())
        ref_params = dict(reference.named_parameters())
        mismatches, losses = [], []
        for step in range(3):
            loss = engine(input_ids=batch, labels=batch).loss
            engine.backward(loss)
            losses.append(loss.item())
            # the unsharded step gets the very gradients ZeRO reduced
            for name in names:
                ref_params[name].grad = safe_get_full_grad(ds_params[name]).to(torch.bfloat16).clone()
            engine.step()
            if step == 0 and hasattr(optimizer, "_hp_optimizer_states_linked"):
                # ZeRO-1/2 links the optimizer state of its partitions to the parameters after the first group's first
                # step, before the other groups have any state; link them again now that every group has stepped
                optimizer._hp_optimizer_states_linked = False
                optimizer._lazy_init_hp_params_optimizer_state()
            ref_optimizer.step()
            ref_optimizer.zero_grad()
            mismatches += _step_mismatches(step, names, ds_params, ref_params, ref_optimizer)
        kahan_nonzero = sum(int((ref_optimizer.state[p]["kahan_comp"] != 0).sum()) for p in reference.parameters())
        inner = getattr(optimizer, "optimizer", optimizer)
        dtypes, keys, size = _local_state(inner)
        master = {str(p.dtype) for group in inner.param_groups for p in group["params"]}
        if stage == 3:
            master = {str(t.dtype) for t in optimizer.fp32_partitioned_groups_flat}
        result[str(stage)] = {
            "mismatches": mismatches[:10],
            "losses": losses,
            "kahan_nonzero": kahan_nonzero,
            "state_dtypes": dtypes,
            "state_keys": keys,
            "state_bytes_per_param": size / n_params,
            "master_dtypes": sorted(master),
        }
        engine.destroy()
    return result


class _KahanProbe(TrainerCallback):
    """Records the gathered Kahan buffer of one parameter at each save and when training begins (after a resume)."""

    def __init__(self, name="transformer.h.0.mlp.c_fc.weight"):
        self.name, self.at_save, self.at_begin = name, {}, None
        self.trainer = None

    def _kahan(self):
        from deepspeed.utils import safe_get_full_optimizer_state

        zero = self.trainer.model_wrapped.optimizer
        if hasattr(zero, "_hp_optimizer_states_linked"):  # ZeRO-1/2 links loaded state at the next step: link it now
            zero._hp_optimizer_states_linked = False
            zero._lazy_init_hp_params_optimizer_state()
        param = dict(self.trainer.model_wrapped.module.named_parameters())[self.name]
        buffer = safe_get_full_optimizer_state(param, "kahan_comp")
        return None if buffer is None else buffer.clone()

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step > 0:
            self.at_begin = self._kahan()

    def on_save(self, args, state, control, **kwargs):
        self.at_save[state.global_step] = self._kahan()


def _trainer_main(output_dir, stage):
    from transformers.modelcard import extract_hyperparameters_from_trainer

    def make(max_steps, probe, **kwargs):
        args = TrainingArguments(
            output_dir,
            use_cpu=True,
            bf16_full_train=True,
            deepspeed=zero_config(stage),
            max_steps=max_steps,
            save_steps=2,
            per_device_train_batch_size=4,
            learning_rate=1e-2,
            weight_decay=0.1,
            adam_beta2=0.99,
            logging_steps=1,
            report_to=[],
            disable_tqdm=True,
            seed=0,
            **kwargs,
        )
        trainer = Trainer(tiny_gpt_neo(), args, train_dataset=RepeatingLMDataset(), callbacks=[probe])
        probe.trainer = trainer
        return trainer

    def gathered_sha(trainer):
        if stage == 3:
            from deepspeed.utils import safe_get_full_fp32_param

            state = {n: safe_get_full_fp32_param(p) for n, p in trainer.model_wrapped.module.named_parameters()}
            return _sha({n: t.to(torch.bfloat16) for n, t in state.items()})
        return _sha(dict(trainer.model_wrapped.module.named_parameters()))

    probe = _KahanProbe()
    trainer = make(4, probe)
    trainer.train()
    trainer.save_model()
    model = trainer.model
    ds_config = trainer.accelerator.state.deepspeed_plugin.deepspeed_config
    dtypes, _, _ = _local_state(trainer.optimizer)
    inner = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    inner = getattr(inner, "optimizer", inner)  # ZeRO's optimizer around optimi's
    result = {
        "trained_precision": model.config.trained_precision,
        "training_regime": extract_hyperparameters_from_trainer(trainer).get("training_regime"),
        "bf16_config": ds_config["bf16"],
        "gather_16bit": ds_config["zero_optimization"].get("stage3_gather_16bit_weights_on_model_save"),
        "zero_stage": trainer.model_wrapped.zero_optimization_stage(),
        "optimizer": type(inner).__name__,
        "optimizer_module": type(inner).__module__,
        "state_dtypes": dtypes,
        "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
        "weights_sha": gathered_sha(trainer),
        "kahan_at_save_norm": float(probe.at_save[2].float().norm()),
    }
    saved = probe.at_save[2]

    resumed_probe = _KahanProbe()
    resumed = make(4, resumed_probe)
    resumed.train(resume_from_checkpoint=os.path.join(output_dir, "checkpoint-2"))
    result["kahan_restored"] = resumed_probe.at_begin is not None and torch.equal(resumed_probe.at_begin, saved)
    result["resumed_weights_sha"] = gathered_sha(resumed)
    result["resumed_global_step"] = resumed.state.global_step

    # without the switch: DeepSpeed's own bf16 master weights, uncompensated
    logger = logging.get_logger("transformers.integrations.pure_bf16_deepspeed")
    bf16 = {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}
    args = TrainingArguments(
        os.path.join(output_dir, "uncompensated"),
        deepspeed=zero_config(2, bf16=bf16, optimizer={"type": "AdamW", "params": {"lr": "auto"}}),
        bf16=True,
        use_cpu=True,
        report_to=[],
    )
    with CaptureLogger(logger) as cl:
        Trainer(tiny_gpt_neo(), args, train_dataset=RepeatingLMDataset())
    result["uncompensated_log"] = cl.out
    return result


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", required=True)
    cli = parser.parse_args()
    launched = {"zero_step": _zero_step_main()}
    for stage in (2, 3):
        launched[f"trainer{stage}"] = _trainer_main(os.path.join(cli.output_dir, f"zero{stage}"), stage)
    _dump(cli.output_dir, torch.distributed.get_rank(), launched)
