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
"""The CPU update of torchao's 8-bit AdamW (`integrations/torchao_cpu_adam.py`): torchao's codes, torchao's steps."""

import contextlib
import glob
import io
import logging
import os
import shutil
import subprocess
import sys
import unittest.mock

from transformers import TrainingArguments
from transformers.testing_utils import CaptureLogger, LoggingLevel, TestCasePlus, require_torch, require_torchao
from transformers.trained_precision.testing_utils import random_token_dataset
from transformers.utils import is_torch_available, is_torchao_available


if is_torch_available():
    import torch
    import torch.utils.cpp_extension

    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback

if is_torch_available() and is_torchao_available():
    from torchao.optim import AdamW8bit
    from torchao.optim.adam import single_param_adam
    from torchao.optim.quant_utils import create_dynamic_map, quantize_8bit_with_qmap

    from transformers.integrations import torchao_cpu_adam
    from transformers.integrations.torchao_cpu_adam import (
        AdamW8bit as CPUAdamW8bit,
    )
    from transformers.integrations.torchao_cpu_adam import (
        build_quantize_lut,
        fp32_to_bf16_sr_hashed,
        quantize_8bit_with_lut,
    )


class PackageTest(TestCasePlus):
    def test_the_wheel_ships_the_ops_source(self):
        # the ops build from the installed .cpp at first use: the wheel must carry it (its RECORD lists it)
        import transformers.integrations

        source = os.path.join(os.path.dirname(transformers.integrations.__file__), "torchao_cpu_adam.cpp")
        with open(source, encoding="utf-8") as f:
            self.assertIn("TORCH_LIBRARY_FRAGMENT(TORCHAO_CPU_ADAM_NAMESPACE", f.read())
        site = os.path.dirname(os.path.dirname(os.path.dirname(source)))
        [record] = glob.glob(os.path.join(site, "transformers-*.dist-info", "RECORD"))
        with open(record, encoding="utf-8") as f:
            self.assertIn("transformers/integrations/torchao_cpu_adam.cpp,sha256=", f.read())


def adversarial_inputs(qmap):
    """The map's values, its midpoints and their float neighbours, zeros, subnormals, extremes, inf and NaN."""
    midpoints = (qmap[1:] + qmap[:-1]) / 2
    up, down = torch.tensor(float("inf")), torch.tensor(float("-inf"))
    specials = [0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1.0, -1.0, 3.4e38, -3.4e38, float("inf"), float("-inf")]
    nans = torch.tensor([0x7FC00000, 0x7F800001, 0x7F80FFFF, -1, -0x7F0000], dtype=torch.int32).view(torch.float32)
    pieces = [qmap, midpoints, torch.nextafter(midpoints, up), torch.nextafter(midpoints, down)]
    pieces += [torch.nextafter(qmap, up), torch.nextafter(qmap, down), torch.tensor(specials), nans]
    return torch.cat(pieces)


@require_torch
@require_torchao
class QuantizerTest(TestCasePlus):
    def assert_torchaos_codes(self, x, qmap, lut):
        expected, got = quantize_8bit_with_qmap(x, qmap), quantize_8bit_with_lut(x, lut)
        different = (expected != got).nonzero().flatten()
        self.assertEqual(len(different), 0, f"inputs {x[different[:5]].tolist()}")

    def test_codes_equal_torchaos(self):
        generator = torch.Generator().manual_seed(0)
        for signed in (True, False):
            qmap = torch.tensor(create_dynamic_map(signed=signed), dtype=torch.float32)
            lut = build_quantize_lut(qmap)
            self.assert_torchaos_codes(adversarial_inputs(qmap), qmap, lut)
            uniform = torch.rand(1 << 16, generator=generator) * 2 - 1
            tiny = torch.randn(1 << 14, generator=generator) * 1e-6
            self.assert_torchaos_codes(torch.cat([uniform, tiny]), qmap, lut)
            bits = torch.randint(-(1 << 31), 1 << 31, (1 << 18,), generator=generator, dtype=torch.int64)
            self.assert_torchaos_codes(bits.to(torch.int32).view(torch.float32), qmap, lut)  # any float32

    def test_a_map_too_dense_for_the_table_is_refused(self):
        qmap = torch.linspace(1.0, 1.0 + 255 * 2**-20, 256)  # many code steps between two bf16 values
        with self.assertRaisesRegex(ValueError, "two code steps in one bf16 interval"):
            build_quantize_lut(qmap)

    def test_stochastic_rounding_is_unbiased_and_reproducible(self):
        x = torch.full((1 << 16,), 1.0 + 2**-7 * 0.3)  # 30% of the way from 1 to the next bf16 value
        seed = torch.tensor(12345)
        rounded = fp32_to_bf16_sr_hashed(x, seed)
        self.assertEqual(set(rounded.float().unique().tolist()), {1.0, 1.0 + 2**-7})
        self.assertAlmostEqual((rounded.float() == 1.0 + 2**-7).float().mean().item(), 0.3, delta=0.01)
        self.assertTrue(torch.equal(rounded, fp32_to_bf16_sr_hashed(x, seed)))
        self.assertFalse(torch.equal(rounded, fp32_to_bf16_sr_hashed(x, seed + 1)))
        exact = torch.tensor([1.0, -2.5, 0.0])
        self.assertTrue(torch.equal(fp32_to_bf16_sr_hashed(exact, seed).float(), exact))


@contextlib.contextmanager
def torchao_path_only():
    """Sends every parameter of `CPUAdamW8bit` to torchao's own update."""
    with unittest.mock.patch.object(torchao_cpu_adam, "_takes_8bit_cpu", return_value=False):
        with unittest.mock.patch.object(torchao_cpu_adam, "_takes_native_plain", return_value=False):
            yield


def compiled_update_only():
    """Sends `CPUAdamW8bit`'s CPU parameters to the compiled update, as where the C++ ops cannot be built."""
    return unittest.mock.patch.object(torchao_cpu_adam, "_cpu_ops", return_value=None)


def has_compiler():
    return shutil.which(torch.utils.cpp_extension.get_cxx_compiler()) is not None and shutil.which("ninja") is not None


def steps(optimizer_cls, force_torchao, stochastic_round=False, count=4, train_bias=True, betas=(0.9, 0.999)):
    """Weights and moments after `count` steps on fixed gradients, from the same start: a 64 x 128 matrix (8-bit
    moments, weight decay) and a bias (unquantized moments; left without gradient unless `train_bias`)."""
    weight = torch.nn.Parameter(torch.randn(64, 128, generator=torch.Generator().manual_seed(0)).bfloat16())
    bias = torch.nn.Parameter(torch.zeros(64, dtype=torch.bfloat16))
    groups = [{"params": [weight], "weight_decay": 0.01}, {"params": [bias], "weight_decay": 0.0}]
    optimizer = optimizer_cls(groups, lr=1e-2, betas=betas, bf16_stochastic_round=stochastic_round)
    generator = torch.Generator().manual_seed(1)
    with torchao_path_only() if force_torchao else contextlib.nullcontext():
        for i in range(count):
            for p in (weight, bias):
                grad = (torch.randn(p.shape, generator=generator) * 10.0 ** -(i % 3)).bfloat16()
                p.grad = grad if train_bias or p is weight else None
            optimizer.step()
    state = optimizer.state[weight]
    return weight.detach(), bias.detach(), state["exp_avg"].codes, state["exp_avg_sq"].codes, state["exp_avg"].scale


@require_torch
@require_torchao
class UpdateTest(TestCasePlus):
    def test_compiled_update_takes_torchaos_steps(self):
        # round-to-nearest: both compiled updates do the same fp32 arithmetic, so weights, codes and scales are equal
        ours, theirs = steps(CPUAdamW8bit, False), steps(AdamW8bit, False)
        for name, a, b in zip(("weight", "bias", "exp_avg codes", "exp_avg_sq codes", "scale"), ours, theirs):
            self.assertTrue(torch.equal(a, b), name)

    def fresh_ops(self, folder):
        """`_cpu_ops()` afresh with `folder` as torch's extension folder (refused before anything loads)."""
        torchao_cpu_adam._cpu_ops.cache_clear()
        self.addCleanup(torchao_cpu_adam._cpu_ops.cache_clear)
        with unittest.mock.patch.dict(os.environ, {"TORCH_EXTENSIONS_DIR": folder}):
            return torchao_cpu_adam._cpu_ops()

    def test_a_kernel_folder_others_can_write_to_is_refused(self):
        # a library another user could replace would run as this one: the folder is checked before anything loads
        folder = self.get_auto_remove_tmp_dir()
        with unittest.mock.patch.dict(os.environ, {"TORCH_EXTENSIONS_DIR": folder}):
            build = torchao_cpu_adam._extension_folder(torchao_cpu_adam._build_flags())
        os.makedirs(build, mode=0o777)
        os.chmod(build, 0o777)
        with CaptureLogger(torchao_cpu_adam.logger) as captured:
            self.assertIsNone(self.fresh_ops(folder))
        self.assertIn("is not a folder that only this user can write to: remove it", captured.out)

    def test_without_ninja_the_compiled_update_runs_with_a_warning(self):
        folder = self.get_auto_remove_tmp_dir()
        missing = RuntimeError("Ninja is required to load C++ extensions (pip install ninja to get it)")
        with unittest.mock.patch.object(torch.utils.cpp_extension, "verify_ninja_availability", side_effect=missing):
            with CaptureLogger(torchao_cpu_adam.logger) as captured:
                self.assertIsNone(self.fresh_ops(folder))
        self.assertIn("could not be built or loaded (Ninja is required", captured.out)
        self.assertIn("the compiled torch update runs instead", captured.out)
        self.assertIn("install one (g++) or set `CXX`", captured.out)

    def test_a_damaged_cached_kernel_or_a_killed_builds_lock_is_built_again(self):
        if not has_compiler():
            self.skipTest("no C++ compiler or ninja")
        folder = self.get_auto_remove_tmp_dir()
        # each load in its own process: a process can register the ops once, and truncating a library a process
        # has loaded would crash it
        check = "from transformers.integrations import torchao_cpu_adam as t; assert t._cpu_ops() is not None"
        env = {**os.environ, "TORCH_EXTENSIONS_DIR": folder}
        subprocess.run([sys.executable, "-c", check], check=True, env=env)
        [library] = glob.glob(os.path.join(folder, "torchao_cpu_adam_*", "*.so"))
        self.assertEqual(os.stat(os.path.dirname(library)).st_mode & 0o777, 0o700)
        with open(library, "r+b") as f:  # truncated, as by a full disk: loading it would crash the process
            f.truncate(1000)
        self.assertFalse(torchao_cpu_adam._whole_library(library))
        # torch's lock file, as a build killed mid-way leaves it: torch alone would wait for it forever
        open(os.path.join(os.path.dirname(library), "lock"), "w", encoding="utf-8").close()
        subprocess.run([sys.executable, "-c", check], check=True, env=env, timeout=600)
        self.assertGreater(os.path.getsize(library), 1000)
        self.assertTrue(torchao_cpu_adam._whole_library(library))

    def test_cpp_update_is_built_and_takes_the_compiled_updates_steps(self):
        if not has_compiler():
            self.skipTest("no C++ compiler or ninja")
        self.assertIsNotNone(torchao_cpu_adam._cpu_ops())
        # the same hash: the same draws (with stochastic rounding the bias, whose fallback is torchao's `randint`, stays
        # out); betas 0.3 and 0.4 take torch's other lerp formula (weight >= 0.5)
        for stochastic_round, betas in ((False, (0.9, 0.999)), (True, (0.9, 0.999)), (False, (0.3, 0.4))):
            kwargs = {"stochastic_round": stochastic_round, "train_bias": not stochastic_round, "betas": betas}
            torch.manual_seed(5)
            ours = steps(CPUAdamW8bit, False, **kwargs)
            torch.manual_seed(5)
            with compiled_update_only():
                compiled = steps(CPUAdamW8bit, False, **kwargs)
            theirs = steps(AdamW8bit, False, **kwargs) if not stochastic_round else compiled
            for name, a, b, c in zip(("weight", "bias", "exp_avg codes", "exp_avg_sq codes", "scale"), ours, compiled, theirs):  # fmt: skip
                self.assertTrue(torch.equal(a, b), f"{name}, stochastic rounding {stochastic_round}, betas {betas}")
                self.assertTrue(torch.equal(a, c), f"{name}, torchao's update, betas {betas}")

    def test_one_call_per_group_for_the_8bit_tensors_with_the_compiled_updates_draws(self):
        if not has_compiler():
            self.skipTest("no C++ compiler or ninja")
        calls = []
        original = torchao_cpu_adam.native_adam_8bit_cpu

        def record(params, *args):
            calls.append(len(params))
            return original(params, *args)

        def run():
            generator = torch.Generator().manual_seed(0)
            params = [torch.nn.Parameter(torch.randn(n, generator=generator).bfloat16()) for n in (8192, 4096, 12288)]
            optimizer = CPUAdamW8bit(params, lr=1e-2, bf16_stochastic_round=True)
            for _ in range(2):
                for p in params:
                    p.grad = torch.randn(p.shape, generator=generator).bfloat16()
                optimizer.step()
            return [p.detach().clone() for p in params]

        torch.manual_seed(7)
        with unittest.mock.patch.object(torchao_cpu_adam, "native_adam_8bit_cpu", side_effect=record):
            ours = run()
        self.assertEqual(calls, [3, 3])  # the three 8-bit tensors in one call per step
        torch.manual_seed(7)
        with compiled_update_only():
            compiled = run()
        for i, (a, b) in enumerate(zip(ours, compiled)):
            self.assertTrue(torch.equal(a, b), f"tensor {i}")  # the index runs on across the call's tensors

    def test_the_ops_check_their_arguments(self):
        if not has_compiler():
            self.skipTest("no C++ compiler or ninja")
        ops = torchao_cpu_adam._cpu_ops()
        (qmap1, lut1), (qmap2, lut2) = (
            torchao_cpu_adam._standard_luts()[True],
            torchao_cpu_adam._standard_luts()[False],
        )
        p, g = torch.zeros(512, dtype=torch.bfloat16), torch.zeros(512, dtype=torch.bfloat16)
        codes, scales = torch.zeros(512, dtype=torch.uint8), torch.ones(2)
        scalars = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "weight_decay": 0.0, "eps": 1e-8, "is_adamw": True}
        scalars.update(bias_correction1=0.1, bias_correction2_sqrt=0.03)

        def call(**changes):
            args = {"params": [p], "grads": [g], "exp_avg_codes": [codes], "exp_avg_scales": [scales]}
            args.update(exp_avg_sq_codes=[codes.clone()], exp_avg_sq_scales=[scales.clone()], block_size=256)
            args.update(qmaps=[qmap1, qmap2], luts=[lut1, lut2])
            args.update(changes)
            ops.adam_8bit_(**args, **scalars)

        call()  # valid
        for changes, message in (
            ({"grads": [g.float()]}, r"grads\[0\] must be BFloat16, got Float"),
            ({"exp_avg_codes": [codes.float()]}, r"exp_avg_codes\[0\] must be Byte"),
            ({"exp_avg_sq_scales": [torch.ones(4)]}, r"exp_avg_sq_scales\[0\] must have 2 elements"),
            ({"params": [torch.zeros(1024, dtype=torch.bfloat16)[::2]]}, r"params\[0\] must be contiguous"),
            ({"block_size": 384}, "not a multiple of block_size 384"),
            ({"luts": [lut1[:100], lut2]}, "luts\\[0\\] must be a contiguous CPU Int tensor of 65536 elements"),
            ({"grads": []}, r"grads must have one tensor per param \(1\), got 0"),
            ({"params": [p.float()], "grads": [g.float()], "seed": 3}, "seed .stochastic rounding. needs bfloat16"),
        ):
            with self.assertRaisesRegex(RuntimeError, message):
                call(**changes)
        with self.assertRaisesRegex(RuntimeError, "exp_avgs\\[0\\] must be BFloat16"):
            ops.adam_([p], [g], [p.float()], [p.clone()], **scalars)

    def test_state_dicts_round_trip_with_torchaos_class(self):
        # the same state: each class resumes the other's state dict, and the next step is the same
        def make(cls):
            weight = torch.nn.Parameter(torch.randn(64, 128, generator=torch.Generator().manual_seed(0)).bfloat16())
            bias = torch.nn.Parameter(torch.zeros(64, dtype=torch.bfloat16))
            return [weight, bias], cls([weight, bias], lr=1e-2, bf16_stochastic_round=False)

        generator = torch.Generator().manual_seed(2)
        grads = [[torch.randn(s, generator=generator).bfloat16() for s in ((64, 128), (64,))] for _ in range(3)]
        for first, second in ((CPUAdamW8bit, AdamW8bit), (AdamW8bit, CPUAdamW8bit)):
            params, optimizer = make(first)
            for step in grads[:2]:
                for p, g in zip(params, step):
                    p.grad = g
                optimizer.step()
            saved, checkpoint = [p.detach().clone() for p in params], io.BytesIO()
            torch.save(optimizer.state_dict(), checkpoint)  # as a checkpoint holds it
            results = []
            for cls in (first, second):
                resumed_params, resumed = make(cls)
                with torch.no_grad():
                    for p, value in zip(resumed_params, saved):
                        p.copy_(value)
                checkpoint.seek(0)
                resumed.load_state_dict(torch.load(checkpoint, weights_only=False))
                for p, g in zip(resumed_params, grads[2]):
                    p.grad = g
                resumed.step()
                state = resumed.state[resumed_params[0]]
                results.append([*resumed_params, state["exp_avg"].codes, state["exp_avg_sq"].scale])
            for name, a, b in zip(("weight", "bias", "exp_avg codes", "exp_avg_sq scale"), *results):
                self.assertTrue(torch.equal(a, b), f"{name}, {first.__module__} -> {second.__module__}")

    def test_the_update_each_parameter_takes_is_logged_once(self):
        for context, update in ((contextlib.nullcontext(), "C++ kernel"), (compiled_update_only(), "compiled torch")):
            if update == "C++ kernel" and torchao_cpu_adam._cpu_ops() is None:
                continue
            with LoggingLevel(logging.INFO), CaptureLogger(torchao_cpu_adam.logger) as captured, context:
                steps(CPUAdamW8bit, False, count=2)
            self.assertEqual(captured.out.count("torchao_cpu_adam.AdamW8bit updates"), 1, captured.out)
            small = "the small-tensor CPU update (C++ kernel)" if update == "C++ kernel" else "torchao's own update"
            self.assertIn(f"1 with the CPU update ({update}), 1 with {small}", captured.out)

    def test_stochastic_rounding_is_on_and_seeded_by_the_global_generator(self):
        with torch.compiler.set_stance("force_eager"):
            torch.manual_seed(3)
            first = steps(CPUAdamW8bit, False, stochastic_round=True, count=2)[0]
            torch.manual_seed(3)
            again = steps(CPUAdamW8bit, False, stochastic_round=True, count=2)[0]
            nearest = steps(CPUAdamW8bit, False, stochastic_round=False, count=2)[0]
        self.assertTrue(torch.equal(first, again))
        self.assertFalse(torch.equal(first, nearest))


def plain_adam_inputs(dtype, sizes, seed=0):
    """Weights, gradients and both (unquantized) moments of tensors of `sizes` values, as after a few steps."""
    generator = torch.Generator().manual_seed(seed)

    def tensors(scale, positive=False):
        values = [torch.randn(n, generator=generator) * scale for n in sizes]
        return [(v.abs() if positive else v).to(dtype) for v in values]

    return tensors(1.0), tensors(0.1), tensors(0.01), tensors(1e-4, positive=True)


def clone_all(*lists):
    return [[t.clone() for t in ts] for ts in lists]


@require_torch
@require_torchao
class SmallTensorUpdateTest(TestCasePlus):
    """`native_adam_plain_cpu`: the tensors whose moments torchao keeps unquantized, all of a group in one call."""

    def setUp(self):
        super().setUp()
        if not has_compiler() or torchao_cpu_adam._cpu_ops() is None:
            self.skipTest("no C++ compiler or ninja")

    def test_round_to_nearest_equals_torchaos_compiled_update(self):
        # torchao's update compiled as its fallback here runs it: dynamic in the size
        compiled = torch.compile(single_param_adam, fullgraph=True, dynamic=False)
        sizes = (1, 7, 333, 4095)
        # betas 0.3 and 0.4: torch's lerp takes its other formula (weight >= 0.5)
        for dtype, is_adamw, weight_decay, (beta1, beta2) in ((torch.bfloat16, True, 0.01, (0.9, 0.999)),
                                                              (torch.float32, True, 0.1, (0.9, 0.999)),
                                                              (torch.bfloat16, False, 0.01, (0.9, 0.999)),
                                                              (torch.bfloat16, True, 0.01, (0.3, 0.4)),
                                                              (torch.float32, False, 0.1, (0.3, 0.4))):  # fmt: skip
            lr, step = torch.tensor(3e-3), torch.tensor(7.0)
            hparams = (beta1, beta2, weight_decay, 1e-8, is_adamw)
            ours = plain_adam_inputs(dtype, sizes)
            theirs = clone_all(*ours)
            torchao_cpu_adam.native_adam_plain_cpu(*ours, lr, step, hparams, None)
            for p, g, m, v in zip(*theirs):
                for tensor in (p, g, m, v):
                    torch._dynamo.maybe_mark_dynamic(tensor, 0)
                with torch._dynamo.utils.disable_cache_limit():  # other tests compiled it too
                    compiled(p, g, step, m, v, None, lr, beta1, beta2, weight_decay, 1e-8, is_adamw, False)
            for name, a, b in zip(("weight", "exp_avg", "exp_avg_sq"), (ours[0], ours[2], ours[3]), (theirs[0], theirs[2], theirs[3])):  # fmt: skip
                for i, (x, y) in enumerate(zip(a, b)):
                    self.assertTrue(torch.equal(x, y), f"{name} {i}, {dtype}, adamw {is_adamw}, {beta1}, {beta2}")
            self.assertFalse(torch.equal(ours[0][-1], plain_adam_inputs(dtype, sizes)[0][-1]))  # it did update

    def test_stochastic_rounding_is_unbiased_and_reproducible(self):
        # a weight 30% of the way between two bf16 values after the step: lr 0 keeps w (given as fp32 through p)
        def run(seed):
            p = [torch.full((4000,), 1.0, dtype=torch.bfloat16) for _ in range(3)]
            g = [torch.zeros(4000, dtype=torch.bfloat16) for _ in range(3)]
            m, v = clone_all(g, g)
            # AdamW's decay p - lr * wd * p moves 1.0 down by 0.3 of bf16's step below 1 (2^-8)
            lr, hparams = torch.tensor(1.0), (0.9, 0.999, 0.3 * 2**-8, 1e-8, True)
            torchao_cpu_adam.native_adam_plain_cpu(p, g, m, v, lr, torch.tensor(1.0), hparams, seed)
            return torch.cat(p).float()

        rounded = run(torch.tensor(12345))
        low = 1.0 - 2**-8
        self.assertEqual(set(rounded.unique().tolist()), {low, 1.0})
        self.assertAlmostEqual((rounded == low).float().mean().item(), 0.3, delta=0.015)
        for part in rounded.view(3, -1):  # the index runs on across tensors: each tensor its own draws
            self.assertAlmostEqual((part == low).float().mean().item(), 0.3, delta=0.03)
        self.assertFalse(torch.equal(rounded[:4000], rounded[4000:8000]))
        self.assertTrue(torch.equal(rounded, run(torch.tensor(12345))))
        self.assertFalse(torch.equal(rounded, run(torch.tensor(12346))))
        self.assertTrue(torch.equal(run(None), torch.ones(12000)))  # nearest: 1 - 0.3 ulp rounds to 1

    def test_the_optimizer_batches_a_groups_small_tensors_and_seeds_from_the_global_generator(self):
        calls = []
        original = torchao_cpu_adam.native_adam_plain_cpu

        def record(params, *args):
            calls.append(len(params))
            return original(params, *args)

        with unittest.mock.patch.object(torchao_cpu_adam, "native_adam_plain_cpu", side_effect=record):
            torch.manual_seed(3)
            first = steps(CPUAdamW8bit, False, stochastic_round=True, count=2)[1]
            self.assertEqual(calls, [1, 1])  # one call per group and step
            calls.clear()
            params = [torch.nn.Parameter(torch.randn(n).bfloat16()) for n in (10, 20, 30, 64 * 128)]
            optimizer = CPUAdamW8bit(params, lr=1e-2)
            for p in params:
                p.grad = torch.randn_like(p)
            optimizer.step()
            self.assertEqual(calls, [3])  # the group's three small tensors in one call; the large one 8-bit
        torch.manual_seed(3)
        again = steps(CPUAdamW8bit, False, stochastic_round=True, count=2)[1]
        nearest = steps(CPUAdamW8bit, False, stochastic_round=False, count=2)[1]
        self.assertTrue(torch.equal(first, again))
        self.assertFalse(torch.equal(first, nearest))


class RecordWeights(TrainerCallback if is_torch_available() else object):
    def __init__(self, model):
        self.model, self.history = model, []

    def on_step_end(self, args, state, control, **kwargs):
        self.history.append([p.detach().clone() for p in self.model.parameters()])


@require_torch
@require_torchao
class TrainerTest(TestCasePlus):
    def train(self, force_torchao):
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=64, n_layer=2, n_head=2, n_inner=64))
        args = TrainingArguments(
            self.get_auto_remove_tmp_dir(),
            bf16_full_train=True,
            use_cpu=True,
            report_to=[],
            save_strategy="no",
            disable_tqdm=True,
            per_device_train_batch_size=4,
            learning_rate=1e-3,
            weight_decay=0.01,
            max_steps=4,
            seed=3,
        )
        record = RecordWeights(model)
        # the class the Trainer builds for `optim="adamw_torch_8bit"` with `bf16_full_train` (torchao_optim.py)
        optimizer = (CPUAdamW8bit, {"lr": 1e-3, "bf16_stochastic_round": False})
        trainer = Trainer(
            model=model, args=args, train_dataset=random_token_dataset(), callbacks=[record],
            optimizer_cls_and_kwargs=optimizer,
        )  # fmt: skip
        # compiled as in use: the C++ update reproduces the compiled update's fp32 arithmetic, and eager `lerp`
        # rounds differently (a fused multiply-add)
        with torchao_path_only() if force_torchao else contextlib.nullcontext():
            trainer.train()
        self.assertIsInstance(trainer.optimizer.optimizer, CPUAdamW8bit)
        self.assertEqual(trainer.optimizer.optimizer.param_groups[0]["weight_decay"], 0.01)
        return record.history

    def test_trainer_run_matches_torchaos_path_step_for_step(self):
        # stochastic rounding off, so both paths are deterministic: every weight equal after every step
        ours, theirs = self.train(False), self.train(True)
        self.assertEqual(len(ours), 4)
        for step, (a, b) in enumerate(zip(ours, theirs)):
            for i, (x, y) in enumerate(zip(a, b)):
                self.assertTrue(torch.equal(x, y), f"step {step}, parameter {i}")
