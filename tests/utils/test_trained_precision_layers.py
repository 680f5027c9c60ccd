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


# folders of the package in the order they may import each other: a module of a folder imports modules of the package
# root (by their layer) and of its own or earlier folders only
FOLDERS = {"facts": 1, "guard": 2, "record": 3, "plan": 4, "commands": 5}


def imports_of(path, package):
    """Absolute dotted modules (without `transformers.`) that the file at `path`, in `package` (`["trained_precision",
    "facts"]`), imports with `from ... import`; `from x import name` also yields `x.name`, which may be a module."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            if node.level > len(package) + 1:
                continue
            base = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
        elif (node.module or "").startswith("transformers."):
            base = node.module.split(".")[1:]
        else:
            continue
        found.add(".".join(base))
        found.update(".".join(base + [alias.name]) for alias in node.names)
    return found


def package_files():
    """`(module, folder, path, package)` for every module of the package, its sub-packages' included."""
    root = os.path.dirname(package.__file__)
    for directory, folders, names in os.walk(root):
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        relative = os.path.relpath(directory, root)
        folder = "" if relative == "." else relative
        parts = ["trained_precision"] + ([] if not folder else folder.split(os.sep))
        for name in sorted(names):
            if name.endswith(".py"):
                yield name[:-3], folder, os.path.join(directory, name), parts


def package_modules():
    """Dotted path inside the package (`facts.registry`, `vocabulary`) -> (module, folder)."""
    return {
        ".".join(parts[1:] + [module]): (module, folder)
        for module, folder, _, parts in package_files()
        if module != "__init__" or not folder
    }


def dependencies(path, parts):
    """Modules of the package (by name) that a file imports, with their folders."""
    modules = package_modules()
    found = set()
    for dotted in imports_of(path, parts):
        if dotted.startswith("trained_precision."):
            inner = dotted.removeprefix("trained_precision.")
            if inner in modules:
                found.add(modules[inner])
    return found


def package_imports(path, parts):
    """Sub-packages of `transformers` outside `trained_precision` that a file imports (`integrations.x`)."""
    return {dotted for dotted in imports_of(path, parts) if not dotted.startswith("trained_precision")}


class LayersTest(unittest.TestCase):
    def test_every_module_has_a_layer_and_imports_downwards(self):
        files = [f for f in package_files() if f[0] != "__init__" or not f[1]]
        self.assertEqual(sorted({f[0] for f in files} - set(LAYERS)), [], "give new modules a layer in LAYERS")
        for module, folder, path, parts in files:
            for dependency, dependency_folder in dependencies(path, parts):
                with self.subTest(module=module, dependency=dependency):
                    self.assertLess(LAYERS[dependency], LAYERS[module], f"{module} imports {dependency}")
                    if folder and dependency_folder:
                        self.assertIn(folder, FOLDERS, "give new folders a place in FOLDERS")
                        self.assertLessEqual(FOLDERS[dependency_folder], FOLDERS[folder], f"{module} imports up")

    def test_folders_stay_lazy(self):
        # a folder's `__init__.py` imports nothing: the package's `_LazyModule` imports a module on first use only
        for module, folder, path, parts in package_files():
            if module == "__init__" and folder:
                with self.subTest(folder=folder):
                    self.assertEqual(imports_of(path, parts), set(), f"{folder}/__init__.py imports")

    def test_the_field_never_imports_the_training_integration(self):
        for module, folder, path, parts in package_files():
            for imported in package_imports(path, parts):
                with self.subTest(module=os.path.join(folder, module), imports=imported):
                    self.assertFalse(imported.startswith("integrations"), f"{module} imports {imported}")

    def test_integration_modules_import_downwards(self):
        directory = os.path.dirname(integrations.__file__)
        for module, layer in INTEGRATION_LAYERS.items():
            path = os.path.join(directory, f"{module}.py")
            self.assertTrue(os.path.isfile(path), path)
            imported = imports_of(path, ["integrations"])
            for dependency in sorted({d.split(".")[1] for d in imported if d.startswith("integrations.")}):
                with self.subTest(module=module, dependency=dependency):
                    self.assertIn(dependency, INTEGRATION_LAYERS, f"{module} imports integrations.{dependency}")
                    self.assertLess(INTEGRATION_LAYERS[dependency], layer, f"{module} imports {dependency}")
            # of the field's package, only the names layer
            for dotted in sorted(d for d in imported if d.split(".")[0] == "trained_precision"):
                with self.subTest(module=module, imports=dotted):
                    self.assertEqual(dotted.split(".")[1:2], ["vocabulary"], dotted)
