# Copyright 2026 The HuggingFace Team. All rights reserved. Licensed under the Apache License, Version 2.0.
"""
Hand-written, upstream-shaped stand-ins for the upstream files that the pinned sdist does not carry (the Makefile,
utils/checkers.py, utils/check_config_attributes.py, tests/utils/test_configuration_utils.py,
docs/source/en/_toctree.yml, docs/source/en/trainer.md). Fork-only: used by tests/repo_utils/test_upstream_edits.py and test_upstream_pr.py.

They are written from the shapes upstream's files have had across releases (not derived from our edits): each
`VARIANTS[path]` holds several versions of a file (older and newer layouts, different neighbours, indentation and
ordering) so an edit that only works on one exact text fails a test. `CURRENT[path]` is the variant used as the
synthetic upstream tree of `make pr`.
"""

CHECK_CONFIG_ATTRIBUTES_TUPLE = '''# Copyright 2023 The HuggingFace Inc. team.
"""Checks that the arguments of every config's `__init__` are used in its modeling files."""

import inspect
import os
import re

from transformers.configuration_utils import PreTrainedConfig


PATH_TO_TRANSFORMERS = "src/transformers"

SPECIAL_CASES_TO_ALLOW = {
    "GPTNeoConfig": ["attention_types"],
    "EsmConfig": ["is_folding_model"],
    "DPRConfig": True,
}

# Common and important attributes, even if they do not always appear in the modeling files (can be a regex pattern)
ATTRIBUTES_TO_ALLOW = (
    # Attr in base `PreTrainedConfig`
    "transformers_version",
    "architectures",
    "chunk_size_feed_forward",
    "dtype",
    "id2label",
    "label2id",
    "problem_type",
    # Inits related
    "initializer_range",
    "init_std",
    # Special tokens
    r".+_token_id",
    r".+_token_index",
    # Processors
    "image_seq_length",
    "text_config",  # may appear as `get_text_config()`
)


def check_attribute_being_used(config_class, attributes, default_value, source_strings):
    for attribute in attributes:
        if any(re.fullmatch(pattern, attribute) for pattern in ATTRIBUTES_TO_ALLOW):
            return True
    return False
'''

# Before the allow list moved to module level: a list inside the function, without base-config attributes.
CHECK_CONFIG_ATTRIBUTES_LIST = """# coding=utf-8
# Copyright 2023 The HuggingFace Inc. team.

import inspect
import os
import re


def check_attribute_being_used(config_class, attributes, default_value, source_strings):
    attribute_used = False
    for attribute in attributes:
        for modeling_source in source_strings:
            if f"config.{attribute}" in modeling_source:
                attribute_used = True

    # common and important attributes, even if they do not always appear in the modeling files
    attributes_to_allow = [
        "initializer_range",
        "init_std",
        "initializer_factor",
        "bos_index",
        "eos_index",
        "text_config",  # may appear as `get_text_config()`
        "use_cache",
        # rope attributes may not appear directly in the modeling but are used
        "rope_theta",
        "partial_rotary_factor",
        "pretraining_tp",
        "boi_token_id",
        "eoi_token_id"
    ]
    attributes_used_in_generation = ["encoder_no_repeat_ngram_size"]
    return attribute_used or any(a in attributes_to_allow + attributes_used_in_generation for a in attributes)
"""

# A tuple on a single line: a shape the edit cannot extend safely, so it must say so.
CHECK_CONFIG_ATTRIBUTES_ONE_LINE = """ATTRIBUTES_TO_ALLOW = ("transformers_version", "architectures")
"""

TEST_CONFIGURATION_UTILS = """# Copyright 2019 HuggingFace Inc.
import json
import os
import sys
import tempfile
import unittest
from pathlib import Path

from transformers import AutoConfig, BertConfig, GPT2Config
from transformers.configuration_utils import PreTrainedConfig
from transformers.testing_utils import TOKEN, TemporaryHubRepo, is_staging_test


sys.path.append(str(Path(__file__).parent.parent.parent / "utils"))

from test_module.custom_configuration import CustomConfig  # noqa E402


config_common_kwargs = {
    "return_dict": False,
    "output_hidden_states": True,
    "output_attentions": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "architectures": ["BertModel"],
    "id2label": {0: "label"},
    "label2id": {"label": "0"},
    "problem_type": "regression",
}


class ConfigTestUtils(unittest.TestCase):
    def test_config_common_kwargs_is_complete(self):
        base_config = PreTrainedConfig()
        missing_keys = [key for key in base_config.__dict__ if key not in config_common_kwargs]
        self.assertListEqual(missing_keys, ["is_encoder_decoder", "_name_or_path", "transformers_version"])
"""

# Older: a longer dict whose last value spans several lines and has no trailing comma.
TEST_CONFIGURATION_UTILS_OLD = """import json
import unittest

from transformers import PretrainedConfig

config_common_kwargs = {
    "return_dict": False,
    "output_hidden_states": True,
    "torchscript": True,
    "torch_dtype": "float16",
    "pruned_heads": {"a": 1},
    "tie_word_embeddings": False,
    "bad_words_ids": [1, 2, 3],
    "id2label": {
        0: "label",
    },
    "label2id": {"label": "0"}
}


class ConfigTestUtils(unittest.TestCase):
    pass
"""

MAKEFILE = """# make sure to test the local checkout in scripts and not the pre-installed one (don't use quotes!)
export PYTHONPATH = src

.PHONY: style typing check-code-quality check-repository-consistency check-repo fix-repo test

STYLE_CHECKERS := ruff_check, ruff_format, init_isort, sort_auto_mappings
TYPING_CHECKERS := types, modeling_structure
CODE_QUALITY_CHECKERS := $(TYPING_CHECKERS), $(STYLE_CHECKERS)

REPO_CONSISTENCY_CHECKERS := \\
\tauto_mappings, \\
\timports, \\
\tcopies, \\
\tmodular_conversion, \\
\tdoc_toc, \\
\tdocstrings, \\
\tdummies, \\
\trepo, \\
\tinits, \\
\tpipeline_typing, \\
\tconfig_docstrings, \\
\tconfig_attributes, \\
\tdoctest_list, \\
\tupdate_metadata, \\
\tadd_dates, \\
\tdeps_table

ALL_CHECKERS := $(CODE_QUALITY_CHECKERS), $(REPO_CONSISTENCY_CHECKERS)

# Runs a full repository consistency check.
check-repository-consistency:
\t@python utils/checkers.py $(REPO_CONSISTENCY_CHECKERS)

test:
\tpython -m pytest -n auto --dist=loadfile -s -v ./tests/
"""

# A list that does not (yet) hold config_attributes, indented with spaces, with `=` instead of `:=`.
MAKEFILE_NO_CONFIG_ATTRIBUTES = """export PYTHONPATH = src

REPO_CONSISTENCY_CHECKERS = \\
    copies, \\
    doc_toc, \\
    deps_table

check-repository-consistency:
\t@python utils/checkers.py $(REPO_CONSISTENCY_CHECKERS)
"""

# Before utils/checkers.py: one command per script in check-repo.
MAKEFILE_OLD = """export PYTHONPATH = src

check_dirs := examples tests src utils

check-repo:
\truff check $(check_dirs) setup.py conftest.py
\tpython -c "from transformers import *" || (echo 'import failed'; exit 1)
\t-python utils/check_copies.py
\t-python utils/check_config_docstrings.py
\t-python utils/check_config_attributes.py
\t-python utils/check_doctest_list.py

fix-repo: style
\t-python utils/check_copies.py --fix_and_overwrite
"""

MAKEFILE_NO_ANCHOR = """export PYTHONPATH = src

test:
\tpython -m pytest ./tests/
"""

CHECKERS = '''#!/usr/bin/env python
"""Unified runner for check/fix scripts.

Usage:
    python utils/checkers.py copies,doc_toc --fix
"""

import argparse
import subprocess
import sys
from pathlib import Path


UTILS_DIR = Path(__file__).parent

# Each checker maps to (label, script_path, extra_check_args, extra_fix_args).
CHECKERS = {
    "copies": ("Copied code consistency", "check_copies.py", [], ["--fix_and_overwrite"]),
    "doc_toc": ("Documentation table of contents", "check_doc_toc.py", [], ["--fix_and_overwrite"]),
    "config_docstrings": ("Config docstrings", "check_config_docstrings.py", [], None),
    "config_attributes": ("Config attributes", "check_config_attributes.py", [], None),
    "update_metadata": ("Model metadata", "update_metadata.py", ["--check-only"], []),
    "types": (
        "Type annotations",
        "check_types.py",
        [
            "src/transformers/utils",
        ],
        None,
    ),
    "deps_table": ("Dependency versions table", None, None, None),
}

# File glob patterns that each checker depends on.
# Checkers not listed here are always run.
CHECKER_FILE_GLOBS = {
    "copies": ["src/transformers/models/**/*.py"],
    "config_attributes": ["src/transformers/models/**/configuration_*.py"],
    "repo": [
        "src/transformers/models/**/*.py",
        "docs/**/*.md",
    ],
    "deps_table": ["setup.py", "pyproject.toml"],
}


def main():
    parser = argparse.ArgumentParser(description="Run check/fix scripts.")
    parser.add_argument("checkers", nargs="+")
    args = parser.parse_args()
    for name in ",".join(args.checkers).split(","):
        label, script, check_args, _ = CHECKERS[name]
        subprocess.run([sys.executable, str(UTILS_DIR / script), *check_args], check=True)


if __name__ == "__main__":
    main()
'''

# A CHECKERS table without config_attributes, its last entry a multi-line tuple.
CHECKERS_OTHER_ORDER = """CHECKERS = {
    "copies": ("Copied code consistency", "check_copies.py", [], ["--fix_and_overwrite"]),
    "types": (
        "Type annotations",
        "check_types.py",
        [],
        None,
    )
}
"""

# A runner that finds each utils/check_*.py by its CHECKER_CONFIG dict instead of listing it in a table.
CHECKERS_DISCOVERED = '''"""Runs every utils/check_*.py that declares a CHECKER_CONFIG."""

import importlib.util
from pathlib import Path


UTILS_DIR = Path(__file__).parent


def discover():
    found = {}
    for path in sorted(UTILS_DIR.glob("check_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        config = getattr(module, "CHECKER_CONFIG", None)
        if config is not None:
            found[config["name"]] = (config["label"], path.name, config.get("cache_globs"), config["check_args"])
    return found
'''

# The same runner, but reading the older key for the files a checker depends on.
CHECKERS_DISCOVERED_OLD_KEY = CHECKERS_DISCOVERED.replace('"cache_globs"', '"file_globs"')

TOCTREE = """- title: Get started
  sections:
  - local: index
    title: Transformers
  - local: installation
    title: Installation
  - local: quicktour
    title: Quickstart
- title: Base classes
  isExpanded: false
  sections:
  - title: Models
    sections:
    - local: models
      title: Loading models
    - local: custom_models
      title: Customizing models
    - local: how_to_hack_models
      title: Customizing model components
    - local: model_sharing
      title: Sharing
  - title: Preprocessors
    sections:
    - local: fast_tokenizers
      title: Tokenizers
- title: API
  sections:
  - title: Main classes
    sections:
    - local: main_classes/callback
      title: Callbacks
    - local: main_classes/configuration
      title: Configuration
    - local: main_classes/data_collator
      title: Data Collator
"""

# An older layout: `models` is a top-level entry with an extra key, indented differently.
TOCTREE_OLD = """- sections:
    - local: index
      title: Transformers
    - local: models
      title: Load
      isExpanded: false
    - local: model_sharing
      title: Share
  title: Get started
- sections:
    - local: main_classes/configuration
      title: Configuration
  title: Main Classes
"""

# Only `custom_models` is there: the fallback anchor.
TOCTREE_CUSTOM_ONLY = """- title: Models
  sections:
  - local: custom_models
    title: Customize
  - local: model_sharing
    title: Share
"""

TOCTREE_NO_ANCHOR = """- title: Get started
  sections:
  - local: index
    title: Transformers
"""

# The Trainer guide: a section on checkpoints followed by another section, and a layout where it is the last one.
TRAINER_MD = """<!--Copyright 2024 The HuggingFace Team. All rights reserved.
-->

# Trainer

[`Trainer`] runs the training and evaluation loop of a model.

## Checkpoints

[`Trainer`] writes a checkpoint folder every `save_steps` steps.

Resume from one with `resume_from_checkpoint`.

## Logging

[`Trainer`] logs at the `INFO` level.
"""

TRAINER_MD_CHECKPOINTS_LAST = """# Trainer

## Customize

Subclass [`Trainer`].

## Checkpoints

Checkpoints are folders named `checkpoint-<step>`.


"""

TRAINER_MD_NO_ANCHOR = """# Trainer

## Saving

Checkpoints are folders.
"""

VARIANTS = {
    "utils/check_config_attributes.py": [CHECK_CONFIG_ATTRIBUTES_TUPLE, CHECK_CONFIG_ATTRIBUTES_LIST],
    "tests/utils/test_configuration_utils.py": [TEST_CONFIGURATION_UTILS, TEST_CONFIGURATION_UTILS_OLD],
    "Makefile": [MAKEFILE, MAKEFILE_NO_CONFIG_ATTRIBUTES, MAKEFILE_OLD],
    "utils/checkers.py": [CHECKERS, CHECKERS_OTHER_ORDER],
    "docs/source/en/_toctree.yml": [TOCTREE, TOCTREE_OLD, TOCTREE_CUSTOM_ONLY],
    "docs/source/en/trainer.md": [TRAINER_MD, TRAINER_MD_CHECKPOINTS_LAST],
}

CURRENT = {
    "utils/check_config_attributes.py": CHECK_CONFIG_ATTRIBUTES_TUPLE,
    "tests/utils/test_configuration_utils.py": TEST_CONFIGURATION_UTILS,
    "Makefile": MAKEFILE,
    "utils/checkers.py": CHECKERS,
    "docs/source/en/_toctree.yml": TOCTREE,
    "docs/source/en/trainer.md": TRAINER_MD,
}
