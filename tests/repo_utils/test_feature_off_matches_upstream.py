# Copyright 2026 The HuggingFace Team. All rights reserved. Licensed under the Apache License, Version 2.0.
"""
With nothing of ours turned on, the patched optimizer handlers build what the pinned upstream release's build. Fork-only: it runs
upstream's own `trainer_optimizer.py`, read from the pinned wheel in `.cache/`, beside the patched one, on the same
`TrainingArguments`, and compares the optimizer class and keyword arguments each returns. The only differences allowed
are the two bug fixes, each asserted as the difference it is.
"""

import functools
import importlib.util
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path

from parameterized import parameterized


REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import patchset as ps  # noqa: E402

from transformers import TrainingArguments  # noqa: E402
from transformers.testing_utils import require_torch, require_torch_optimi, require_torchao  # noqa: E402
from transformers.utils import is_torch_available  # noqa: E402


if is_torch_available():
    import torch

    from transformers import Trainer
    from transformers.trainer_optimizer import _parse_optim_args


@functools.cache
def upstream_trainer_optimizer():
    """The pinned upstream release's `transformers/trainer_optimizer.py`, imported as a module of the installed package (its
    relative imports resolve there), without replacing the patched one."""
    config = ps.read_config(REPO)
    wheel = ps.cached_upstream_wheel(config.upstream_version, config.pins["wheel"])
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read("transformers/trainer_optimizer.py")
    tmp = Path(tempfile.mkdtemp(prefix="upstream-trainer-optimizer-"))
    path = tmp / "trainer_optimizer.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("transformers._upstream_trainer_optimizer", path)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "transformers"
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def both(optim, optim_args=None, model=None):
    """(class, kwargs) from upstream's handler and from the patched `Trainer.get_optimizer_cls_and_kwargs`."""
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(tmp, optim=optim, optim_args=optim_args, report_to=[], use_cpu=True)
    upstream = upstream_trainer_optimizer()
    ctx = upstream.OptimizerContext(
        args=args,
        model=model,
        optimizer_kwargs={"lr": args.learning_rate},
        adam_kwargs={"betas": (args.adam_beta1, args.adam_beta2), "eps": args.adam_epsilon},
        optim_args=_parse_optim_args(args.optim_args),
    )
    theirs = upstream._OPTIMIZER_HANDLERS[args.optim](ctx)
    ours = Trainer.get_optimizer_cls_and_kwargs(args, model)
    return theirs, ours


def bf16_model():
    return torch.nn.Linear(64, 64).to(torch.bfloat16)


@require_torch
class FeatureOffMatchesUpstreamTest(unittest.TestCase):
    @parameterized.expand([("adamw_torch",), ("adamw_torch_fused",), ("sgd",), ("adafactor",), ("adagrad",)])
    def test_builtin_optimizers(self, optim):
        (their_cls, theirs), (our_cls, ours) = both(optim, model=bf16_model())
        self.assertIs(our_cls, their_cls)
        self.assertEqual(ours, theirs)

    @require_torchao
    @parameterized.expand(
        [
            ("bf16 weights", None, True),
            ("fp32 weights", None, False),
            ("stochastic rounding asked for", "bf16_stochastic_round=true", True),
            ("an unknown key is ignored", "foo=1", True),
        ]
    )
    def test_torchao_8bit(self, _, optim_args, bf16):
        model = bf16_model() if bf16 else torch.nn.Linear(64, 64)
        (their_cls, theirs), (our_cls, ours) = both("adamw_torch_8bit", optim_args, model)
        self.assertIs(our_cls, their_cls)
        self.assertEqual(ours, theirs)

    @require_torchao
    def test_torchao_block_size_fixes(self):
        # the fix: torchao's own 4-bit default (128), and `block_size` from optim_args as an int (upstream: a string,
        # which fails at the first step)
        (_, theirs), (_, ours) = both("adamw_torch_4bit", model=bf16_model())
        self.assertEqual((theirs.pop("block_size"), ours.pop("block_size")), (256, 128))
        self.assertEqual(ours, theirs)
        (_, theirs), (_, ours) = both("adamw_torch_8bit", "block_size=128", bf16_model())
        self.assertEqual((theirs.pop("block_size"), ours.pop("block_size")), ("128", 128))
        self.assertEqual(ours, theirs)

    @require_torch_optimi
    @parameterized.expand([("no optim_args", None), ("true values", "kahan_sum=True,decouple_lr=True")])
    def test_stable_adamw(self, _, optim_args):
        (their_cls, theirs), (our_cls, ours) = both("stable_adamw", optim_args)
        self.assertIs(our_cls, their_cls)
        self.assertEqual(ours, theirs)

    @require_torch_optimi
    def test_stable_adamw_boolean_fix(self):
        # the fix: "False" is False (upstream: bool("False") is True)
        (_, theirs), (_, ours) = both("stable_adamw", "kahan_sum=False,decouple_lr=False")
        self.assertEqual((theirs.pop("kahan_sum"), ours.pop("kahan_sum")), (True, False))
        self.assertEqual((theirs.pop("decouple_lr"), ours.pop("decouple_lr")), (True, False))
        self.assertEqual(ours, theirs)


if __name__ == "__main__":
    unittest.main()
