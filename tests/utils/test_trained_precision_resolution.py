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
"""The resolver's answer for a config: where its trained precision comes from, and what the run records prove."""

import unittest

from transformers.trained_precision.facts.binding import BINDING_VERSION
from transformers.trained_precision.facts.resolver import resolve_trained_precision
from transformers.trained_precision.facts.risk import OVERFLOW, assess_lineage_risk, assess_risk
from transformers.trained_precision.facts.run_record import MIN_RUN_STEPS, RunRecord


def config_dict(**fields):
    return {"model_type": "gpt_neo", "_name_or_path": "", **fields}


def finished_run(steps=MIN_RUN_STEPS, compute="pure"):
    return {"status": "finished", "compute": compute, "optimizer_steps": steps, "skipped_steps": 0}


class ResolutionTest(unittest.TestCase):
    def test_the_config_value_wins_over_the_registry(self):
        info = resolve_trained_precision(config_dict(trained_precision="fp32"), "EleutherAI/gpt-neo-1.3B")
        self.assertEqual((info.precision, info.source), ("fp32", "config"))

    def test_the_registry_answers_for_an_old_checkpoint(self):
        info = resolve_trained_precision(config_dict(), "EleutherAI/gpt-neo-1.3B")
        self.assertEqual((info.precision, info.source), ("bf16", "registry"))
        self.assertEqual(info.assess("fp16").risk.kind, OVERFLOW)
        self.assertIsNone(info.assess("bf16").risk)

    def test_an_unknown_checkpoint_is_never_risky(self):
        info = resolve_trained_precision(config_dict(), "a-local-directory")
        self.assertFalse(info.is_known)
        for runtime in ("fp16", "bf16", "fp32"):
            self.assertIsNone(info.assess(runtime).prior)

    def test_the_oldest_stage_decides(self):
        # a bf16-pretrained model fine-tuned in fp16 keeps its overflow risk without a run that proves otherwise
        self.assertEqual(assess_lineage_risk(["bf16", "fp16"], "fp16").trained, "bf16")
        info = resolve_trained_precision(config_dict(trained_precision="fp16", pretraining_precision="bf16"))
        self.assertEqual(info.lineage, ("bf16", "fp16"))
        self.assertIsNotNone(info.assess("fp16").risk)

    def test_a_finished_run_without_its_binding_or_weights_is_no_evidence(self):
        # a record from before runs were bound to their weights, lengths and backend: the message says how to re-create it
        config = config_dict(
            trained_precision="fp16", pretraining_precision="bf16", trained_precision_run=finished_run()
        )
        assessment = resolve_trained_precision(config).assess("fp16")
        self.assertIsNotNone(assessment.risk)
        self.assertIn("records no binding", assessment.dropped)
        self.assertIn("train it again with this version", assessment.dropped)
        # a bound record read without the weights (the torch-free report) clears nothing either
        bound = {
            "digest": "0" * 64,
            "max_tokens": 32,
            "backend": "cpu AVX512",
            "run": "pure",
            "version": BINDING_VERSION,
        }
        config["trained_precision_run"] = {**finished_run(), "binding": bound}
        assessment = resolve_trained_precision(config).assess("fp16")
        self.assertIsNotNone(assessment.risk)
        self.assertIn("they are not loaded here", assessment.dropped)

    def test_runs_that_prove_nothing(self):
        short = config_dict(
            trained_precision="fp16", pretraining_precision="bf16", trained_precision_run=finished_run(steps=3)
        )
        amp = config_dict(
            trained_precision="fp16", pretraining_precision="bf16", trained_precision_run=finished_run(compute="amp")
        )
        for config in (short, amp):
            self.assertIsNotNone(resolve_trained_precision(config).assess("fp16").risk)
        self.assertIn("fewer than", RunRecord("finished", "pure", 3).why_not_evidence("fp16"))

    def test_the_risk_rules(self):
        self.assertIsNone(assess_risk("bf16", "bf16"))
        self.assertIsNone(assess_risk("fp32", "fp32"))
        self.assertEqual(assess_risk("bf16", "fp16").kind, OVERFLOW)
        self.assertIsNone(assess_risk("unknown", "fp16"))
