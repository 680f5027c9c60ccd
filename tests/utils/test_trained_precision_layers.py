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
The modules of `transformers.trained_precision` import each other one way only: each imports lower layers. The
pure-bf16 training integration (`transformers.integrations`: `pure_bf16`, `optimi`, ...) sits above the whole package:
it may use the field's vocabulary, the field's package never imports it.
"""

import ast
import os
import unittest

import transformers.integrations as integrations
import transformers.trained_precision as package


# module -> layer; a module may import modules of lower layers only (function-level imports included)
LAYERS = {
    "vocabulary": 0,  # names: precisions, aliases, dtype names
    "hub_ids": 1,  # ids: legacy ids, cache snapshot paths
    "registry": 2,  # facts
    "risk": 2,
    "storage": 2,
    "configuration": 1,  # a config's fields as read from a `config.json`, and its sub-configs
    "run_record": 1,  # the record of a checkpoint's latest training run, and what it proves
    "binding": 2,  # what a piece of evidence was made on: weights (names, shapes, dtypes, a sample) and config
    "evidence": 3,  # evidence that a runtime works for one checkpoint (reference runtime, fp16 plan, finished run)
    "resolver": 4,  # the facts
    "decision": 5,  # the one pure decision on the facts, and the one place that says it
    "check": 6,  # uses
    "audit": 4,
    "populate": 4,
    "sentinel": 7,  # the check of what an fp16 forward returned, inside every model's forward
    "fp16_plan": 8,  # applying a stored plan, and whether it is evidence; it records the evidence the check names
    "fp16_plan_search": 9,  # measuring and validating a plan, writing it into a checkpoint
    "adapter": 7,  # a PEFT adapter's training record and the check of base + adapter
    "stamp": 8,
    "inspection": 8,
    "cli": 10,  # surface
    "__main__": 11,
    "testing_utils": 11,  # test helpers
    "__init__": 11,
}

# our modules in `transformers.integrations` (upstream's own modules there are not ours to layer)
INTEGRATION_LAYERS = {
    "bf16_hardware": 0,  # is bf16 native on this device
    "pure_bf16_deepspeed": 0,  # DeepSpeed ZeRO's bf16 options for bf16_full_train, and what it refuses
    "pure_bf16_distributed": 1,  # DDP / FSDP2 / DeepSpeed decisions and FSDP2 sharding
    "optimi": 2,  # the torch-optimi handler and its optimizer hooks
    "torchao_cpu_adam": 2,  # torchao's 8-bit AdamW update for CPU parameters (table-lookup quantizer)
    "torchao_optim": 3,  # torchao's low-bit AdamW: stochastic rounding for bf16_full_train, one stream on every rank
    "pure_bf16": 4,  # `bf16_full_train`: the switch, the cast, the warnings
}


def relative_imports(path, level=1):
    """Modules imported with `level` leading dots (`from .x import` for 1, `from ..x import` for 2)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == level:
            names = [node.module.split(".")[0]] if node.module else [alias.name for alias in node.names]
            found.update(names)
    return found


def package_imports(path):
    """Sub-packages of `transformers` that a module of a sub-package imports (`from ..integrations.x import`)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module:
            found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("transformers."):
            found.add(node.module.removeprefix("transformers."))
    return found


class LayersTest(unittest.TestCase):
    def test_every_module_has_a_layer_and_imports_downwards(self):
        directory = os.path.dirname(package.__file__)
        modules = sorted(name[:-3] for name in os.listdir(directory) if name.endswith(".py"))
        self.assertEqual(sorted(set(modules) - set(LAYERS)), [], "give new modules a layer in LAYERS")
        for module in modules:
            for dependency in relative_imports(os.path.join(directory, f"{module}.py")):
                with self.subTest(module=module, dependency=dependency):
                    self.assertIn(dependency, LAYERS)
                    self.assertLess(LAYERS[dependency], LAYERS[module], f"{module} imports {dependency}")

    def test_the_field_never_imports_the_training_integration(self):
        directory = os.path.dirname(package.__file__)
        for name in sorted(os.listdir(directory)):
            if name.endswith(".py"):
                for module in package_imports(os.path.join(directory, name)):
                    with self.subTest(module=name, imports=module):
                        self.assertFalse(module.startswith("integrations"), f"{name} imports {module}")

    def test_integration_modules_import_downwards(self):
        directory = os.path.dirname(integrations.__file__)
        for module, layer in INTEGRATION_LAYERS.items():
            path = os.path.join(directory, f"{module}.py")
            self.assertTrue(os.path.isfile(path), path)
            for dependency in relative_imports(path):
                with self.subTest(module=module, dependency=dependency):
                    self.assertIn(dependency, INTEGRATION_LAYERS, f"{module} imports integrations.{dependency}")
                    self.assertLess(INTEGRATION_LAYERS[dependency], layer, f"{module} imports {dependency}")
            # of the field's package, only the names layer
            for imported in package_imports(path):
                if imported.startswith("trained_precision"):
                    with self.subTest(module=module, imports=imported):
                        self.assertEqual(imported, "trained_precision.vocabulary")
