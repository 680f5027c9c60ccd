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
Pure-bf16 training with torchao's 8-bit AdamW and stochastic rounding (`optim="adamw_torch_8bit"`).

torchao compiles its update with `torch.compile` at the first step (30 to 100 seconds on a CPU); these tests run it
eagerly (`torch.compiler.set_stance("force_eager")`), which is the same arithmetic.

This file is also the script of the distributed test: `torchrun --nproc_per_node 2 test_trainer_pure_bf16_torchao.py
--output_dir DIR` trains on the CPU (gloo) and writes each rank's parameters.
"""

import os
import sys

from transformers import TrainingArguments
from transformers.testing_utils import (
    CaptureLogger,
    TestCasePlus,
    execute_subprocess_async,
    require_accelerate,
    require_torch,
    require_torchao,
)
from transformers.trained_precision.testing_utils import free_port, random_token_dataset
from transformers.utils import is_torch_available, is_torchao_available, logging


if is_torch_available():
    import torch

    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback
    from transformers.integrations import pure_bf16

if is_torch_available() and is_torchao_available():
    from torchao.optim import AdamW8bit

    from transformers.integrations import torchao_optim


PURE_BF16_LOGGER = "transformers.integrations.pure_bf16"


def tiny_gpt2(seed=0):
    """Its attention and MLP matrices (64 x 192, 64 x 256, ...) exceed torchao's 4096 values: 8-bit states."""
    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=64, n_layer=2, n_head=2))


class DrawFromGlobalGenerator(TrainerCallback if is_torch_available() else object):
    """Draws `count` numbers from the global generator before every step, as rank-dependent code would."""

    def __init__(self, count):
        self.count = count

    def on_step_begin(self, args, state, control, **kwargs):
        torch.rand(self.count)


def pure_bf16_args(output_dir, **kwargs):
    defaults = {
        "bf16_full_train": True,
        "optim": "adamw_torch_8bit",
        "use_cpu": True,
        "report_to": [],
        "save_strategy": "no",
        "disable_tqdm": True,
        "per_device_train_batch_size": 4,
        "learning_rate": 1e-3,
        "adam_beta2": 0.99,
        "logging_steps": 100,
    }
    defaults.update(kwargs)
    return TrainingArguments(output_dir, **defaults)


def eager():
    """torchao's update without `torch.compile` (the same arithmetic, without the first-step compile)."""
    return torch.compiler.set_stance("force_eager")


@require_torch
@require_torchao
class TorchaoHandlerTest(TestCasePlus):
    def setUp(self):
        super().setUp()
        logging.warning_once.cache_clear()

    def optimizer(self, model, **kwargs):
        trainer = Trainer(model=model, args=pure_bf16_args(self.get_auto_remove_tmp_dir(), **kwargs))
        trainer.create_optimizer()
        return getattr(trainer.optimizer, "optimizer", trainer.optimizer)

    def test_bf16_full_train_turns_stochastic_rounding_on(self):
        optimizer = self.optimizer(tiny_gpt2())
        self.assertIsInstance(optimizer, AdamW8bit)
        self.assertEqual(type(optimizer).__module__, "transformers.integrations.torchao_cpu_adam")  # its CPU update
        self.assertTrue(optimizer.bf16_stochastic_round)
        self.assertEqual(optimizer.block_size, 256)
        self.assertEqual(optimizer.param_groups[0]["sr_seed"], 42)  # TrainingArguments' default seed

    def test_bf16_model_without_the_switch_keeps_torchaos_defaults(self):
        # without bf16_full_train the handler builds what upstream's builds: round-to-nearest, torchao's own random
        # stream (no step hooks, nothing added to param_groups), and the Trainer says nothing upstream's does not
        model = tiny_gpt2().to(torch.bfloat16)
        logger = logging.get_logger(PURE_BF16_LOGGER)
        with CaptureLogger(logger) as cl:
            optimizer = self.optimizer(model, bf16_full_train=False, adam_beta2=0.999)
        self.assertFalse(optimizer.bf16_stochastic_round)
        self.assertEqual(dict(optimizer._optimizer_step_pre_hooks), {})
        self.assertEqual(dict(optimizer._optimizer_step_post_hooks), {})
        self.assertNotIn("sr_seed", optimizer.param_groups[0])
        self.assertNotIn("does not compensate rounding", cl.out)
        self.assertNotIn("adam_beta2", cl.out)

    def test_no_beta2_warning_for_8bit_state(self):
        # torchao keeps 8-bit quantized moments, not bfloat16 ones: the bf16 second-moment warning does not apply
        logger = logging.get_logger(PURE_BF16_LOGGER)
        with CaptureLogger(logger) as cl:
            self.optimizer(tiny_gpt2(), optim_args="bf16_stochastic_round=false", adam_beta2=0.999)
        self.assertIn("AdamW8bit does not compensate rounding", cl.out)
        self.assertNotIn("adam_beta2", cl.out)
        self.assertNotIn("bfloat16 optimizer state", cl.out)

    def test_feature_off_builds_the_optimizer_upstream_builds(self):
        # upstream 5.23.0's handler passes {lr, betas, eps, block_size=256, bf16_stochastic_round=False} to torchao's
        # class, and `create_optimizer` adds the weight decay of each parameter group: the same optimizer, built
        # directly, takes bit-identical steps and leaves the global generator where it was
        torch.manual_seed(0)
        model = tiny_gpt2().to(torch.bfloat16)
        reference_model = tiny_gpt2().to(torch.bfloat16)
        reference_model.load_state_dict(model.state_dict())
        trainer = Trainer(model=model, args=pure_bf16_args(self.get_auto_remove_tmp_dir(), bf16_full_train=False))
        trainer.create_optimizer()
        optimizer = trainer.optimizer
        decay = set(trainer.get_decay_parameter_names(reference_model))
        groups = [
            {"params": [p for n, p in reference_model.named_parameters() if n in decay], "weight_decay": 0.0},
            {"params": [p for n, p in reference_model.named_parameters() if n not in decay], "weight_decay": 0.0},
        ]
        reference = AdamW8bit(
            groups, lr=1e-3, betas=(0.9, 0.99), eps=1e-8, block_size=256, bf16_stochastic_round=False
        )
        self.assertEqual(type(optimizer), type(reference))
        ours = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.state_dict()["param_groups"]]
        theirs = [{k: v for k, v in g.items() if k != "params"} for g in reference.state_dict()["param_groups"]]
        self.assertEqual(ours, theirs)
        x = torch.randint(0, 64, (4, 16), generator=torch.Generator().manual_seed(1))
        with eager():
            for m, opt in ((model, optimizer), (reference_model, reference)):
                m.eval()(x, labels=x).loss.backward()  # no dropout: the same gradients
                state = torch.get_rng_state()
                opt.step()
                self.assertTrue(torch.equal(state, torch.get_rng_state()))
        for (name, a), b in zip(model.named_parameters(), reference_model.parameters()):
            self.assertTrue(torch.equal(a, b), name)

    def test_turning_it_off_warns(self):
        logger = logging.get_logger(PURE_BF16_LOGGER)
        with CaptureLogger(logger) as cl:
            optimizer = self.optimizer(tiny_gpt2(), optim_args="bf16_stochastic_round=false")
        self.assertFalse(optimizer.bf16_stochastic_round)
        self.assertIn("AdamW8bit does not compensate rounding", cl.out)
        self.assertIn("bf16_stochastic_round=true", cl.out)
        self.assertNotRegex(cl.out, r"\boptimi\b")

    def test_on_by_default_does_not_warn(self):
        logger = logging.get_logger(PURE_BF16_LOGGER)
        with CaptureLogger(logger) as cl:
            self.optimizer(tiny_gpt2(), weight_decay=1e-2)
        self.assertNotIn("does not compensate rounding", cl.out)
        self.assertNotIn("weight decay has no effect", cl.out)

    def test_unknown_optim_args_are_ignored_as_upstream_does(self):
        logger = logging.get_logger("transformers.integrations.torchao_optim")
        with CaptureLogger(logger) as cl:
            optimizer = self.optimizer(tiny_gpt2(), bf16_full_train=False, optim_args="kahan_sum=true")
        self.assertIn("kahan_sum is not an option of torchao's low-bit AdamW and is ignored", cl.out)
        self.assertIn("Valid keys: bf16_stochastic_round, block_size", cl.out)
        self.assertFalse(optimizer.bf16_stochastic_round)
        self.assertEqual(optimizer.block_size, 256)

    def test_invalid_optim_args_values_name_the_valid_ones(self):
        with self.assertRaisesRegex(ValueError, r"block_size='0' is not a positive integer"):
            self.optimizer(tiny_gpt2(), optim_args="block_size=0")
        with self.assertRaisesRegex(ValueError, r"bf16_stochastic_round='maybe' is not a boolean.*true/false"):
            self.optimizer(tiny_gpt2(), optim_args="bf16_stochastic_round=maybe")


@require_torch
@require_torchao
class TorchaoTrainingTest(TestCasePlus):
    def test_training_state_bytes_counts_the_quantized_state(self):
        # one 256 x 256 bf16 matrix: 2 bytes of weight, 2 of gradient, and two 8-bit moments, each holding one uint8
        # code per value, an fp32 scale per block of 256 values and a 256-entry fp32 quantization map
        torch.manual_seed(0)
        model = torch.nn.Linear(256, 256, bias=False).to(torch.bfloat16)
        optimizer = AdamW8bit(model.parameters(), lr=1e-3, bf16_stochastic_round=True)
        torchao_optim.synchronize_stochastic_rounding(optimizer)
        with eager():
            model(torch.randn(4, 256, dtype=torch.bfloat16)).float().square().mean().backward()
            optimizer.step()
        n = 256 * 256
        moment = (n * 1 + (n // 256) * 4 + 256 * 4) / n
        measured = pure_bf16.training_state_bytes(model, optimizer)
        self.assertEqual(measured["weights"], 2.0)
        self.assertEqual(measured["grads"], 2.0)
        self.assertAlmostEqual(measured["optimizer"], 2 * moment, places=9)
        self.assertAlmostEqual(measured["total"], 6.0625, places=9)

    def _sr_run(self, synchronized, draws_before_each_step):
        torch.manual_seed(0)
        model = torch.nn.Linear(64, 64, bias=False).to(torch.bfloat16)
        optimizer = AdamW8bit(model.parameters(), lr=1e-3, bf16_stochastic_round=True)
        if synchronized:
            torchao_optim.synchronize_stochastic_rounding(optimizer, seed=7)
        x = torch.randn(8, 64, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
        with eager():
            for _ in range(3):
                torch.rand(draws_before_each_step)  # rank-dependent draws from the global generator
                optimizer.zero_grad()
                model(x).float().square().mean().backward()
                state = torch.get_rng_state()
                optimizer.step()
                self.assertEqual(not synchronized, not torch.equal(state, torch.get_rng_state()), "global generator")
        return model.weight.detach().clone()

    def test_stochastic_rounding_stream_does_not_depend_on_the_global_generator(self):
        self.assertTrue(torch.equal(self._sr_run(True, 1), self._sr_run(True, 5)))
        # torchao alone draws its rounding noise from the global generator: different draws, different weights
        self.assertFalse(torch.equal(self._sr_run(False, 1), self._sr_run(False, 5)))

    def test_resume_is_bit_identical(self):
        tmp = self.get_auto_remove_tmp_dir()

        def trainer_for(output_dir):
            model = tiny_gpt2()
            args = pure_bf16_args(output_dir, max_steps=6, save_strategy="steps", save_steps=3, seed=3)
            return Trainer(model=model, args=args, train_dataset=random_token_dataset()), model

        with eager():
            trainer, full = trainer_for(os.path.join(tmp, "full"))
            trainer.train()
            trainer, resumed = trainer_for(os.path.join(tmp, "resumed"))
            trainer.train(resume_from_checkpoint=os.path.join(tmp, "full", "checkpoint-3"))
        changed = 0
        initial = tiny_gpt2()
        for (name, a), b, c in zip(full.named_parameters(), resumed.parameters(), initial.parameters()):
            self.assertTrue(torch.equal(a, b), name)
            changed += not torch.equal(a.float(), c.float())
        self.assertGreater(changed, 0)
        optimizer = trainer.optimizer.optimizer
        self.assertTrue(optimizer.bf16_stochastic_round)
        self.assertEqual(optimizer.param_groups[0]["sr_step"], 6)
        weight = resumed.transformer.h[0].attn.c_attn.weight
        self.assertEqual(weight.dtype, torch.bfloat16)
        self.assertEqual(type(optimizer.state[weight]["exp_avg"]).__name__, "OptimState8bit")

    @require_accelerate
    def test_data_parallel_replicas_stay_identical(self):
        output_dir = self.get_auto_remove_tmp_dir()
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={free_port()}",
            os.path.abspath(__file__),
            "--output_dir",
            output_dir,
        ]
        env = self.get_env()
        env["OMP_NUM_THREADS"] = "1"
        execute_subprocess_async(cmd, env=env, timeout=300)
        params = [torch.load(os.path.join(output_dir, f"params-rank{rank}.pt")) for rank in (0, 1)]
        initial = dict(tiny_gpt2().named_parameters())
        for name, value in params[0]["params"].items():
            self.assertTrue(torch.equal(value, params[1]["params"][name]), name)
        self.assertEqual(params[0]["sr_step"], 4)
        bf16 = [name for name, value in params[0]["params"].items() if value.dtype == torch.bfloat16]
        self.assertIn("transformer.h.0.attn.c_attn.weight", bf16)
        self.assertTrue(any(not torch.equal(params[0]["params"][n].float(), initial[n].float()) for n in bf16))


def _distributed_main():
    """The 2-process run of `test_data_parallel_replicas_stay_identical` (launched by torchrun, gloo on the CPU)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", required=True)
    output_dir = parser.parse_args().output_dir

    args = pure_bf16_args(output_dir, max_steps=4, seed=5)
    rank = args.process_index
    model = tiny_gpt2()
    # each rank draws a different amount from its global generator before every step, so torchao's rounding noise
    # would differ between the replicas if it still came from there
    trainer = Trainer(
        model, args, train_dataset=random_token_dataset(), callbacks=[DrawFromGlobalGenerator(1 + 3 * rank)]
    )
    with eager():
        trainer.train()
    optimizer = trainer.optimizer.optimizer
    assert optimizer.bf16_stochastic_round and args.world_size == 2
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    torch.save(
        {"params": params, "sr_step": optimizer.param_groups[0]["sr_step"]},
        os.path.join(output_dir, f"params-rank{rank}.pt"),
    )


if __name__ == "__main__":
    _distributed_main()
