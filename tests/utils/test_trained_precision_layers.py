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
"""The modules of `transformers.trained_precision` import each other one way only: each imports lower layers."""

import ast
import os
import unittest

import transformers.trained_precision as package


# module -> layer; a module may import modules of lower layers only (function-level imports included)
LAYERS = {
    "vocabulary": 0,  # names: precisions, aliases, dtype names
    "hub_ids": 1,  # ids: legacy ids, cache snapshot paths
    "distributed": 1,
    "hardware": 1,  # is bf16 native on this device  # torch.distributed / FSDP2 glue, used by the optimizers
    "registry": 2,  # facts
    "risk": 2,
    "storage": 2,
    "configuration": 2,
    "optimizers": 2,
    "resolver": 3,  # the answer
    "evidence": 3,
    "torchao_optimizers": 3,
    "check": 4,  # uses
    "audit": 4,
    "populate": 4,
    "pure_bf16": 4,
    "stamp": 5,
    "inspection": 5,
    "fp16_plan": 5,
    "cli": 6,  # surface
    "__main__": 7,
    "testing_utils": 7,  # test helpers
    "__init__": 7,
}


def relative_imports(path):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module.split(".")[0]] if node.module else [alias.name for alias in node.names]
            found.update(names)
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
                    if module != "__init__":  # the package's lazy table names every module
                        self.assertLess(LAYERS[dependency], LAYERS[module], f"{module} imports {dependency}")
