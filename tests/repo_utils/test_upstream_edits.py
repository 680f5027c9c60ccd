# Copyright 2026 The HuggingFace Team. All rights reserved. Licensed under the Apache License, Version 2.0.
"""
The rule-based edits of upstream-only files (tools/upstream_edits.py), fed hand-written upstream-shaped files in
several layouts (tests/repo_utils/upstream_fixtures.py) and, for setup.py and the dependency table, the real files of
the pinned sdist. Each edit must insert exactly its entry where it belongs, keep the file valid, be idempotent, and
fail naming the anchor when upstream no longer has it.
"""

import ast
import difflib
import importlib.util
import re
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

import yaml


HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(HERE))

import upstream_edits as ue  # noqa: E402
import upstream_fixtures as fx  # noqa: E402


def assigned_literal(source: str, name: str):
    """The value of the top-level or in-function assignment `name = <literal>` in `source`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"no assignment to {name}")


def added_lines(old: str, new: str) -> list[str]:
    """The lines of `new` that are not in `old`, when `new` is `old` with lines inserted (and at most one line
    gaining a trailing comma)."""
    old_lines, new_lines = old.split("\n"), new.split("\n")
    extra = list(new_lines)
    for line in old_lines:
        if line in extra:
            extra.remove(line)
        elif line + "," in extra:
            extra.remove(line + ",")
        else:
            raise AssertionError(f"line lost by the edit: {line!r}")
    return extra


class EditCase(unittest.TestCase):
    def apply_all_variants(self, edit, path):
        results = []
        for i, text in enumerate(fx.VARIANTS[path]):
            with self.subTest(variant=i):
                new = edit(text)
                self.assertEqual(edit(new), new, "the edit is not idempotent")
                results.append((text, new))
        return results


class ConfigAttributesTest(EditCase):
    def test_entry_added_to_allow_list(self):
        for (text, new), name in zip(
            self.apply_all_variants(ue.allow_config_attribute, "utils/check_config_attributes.py"),
            ["ATTRIBUTES_TO_ALLOW", "attributes_to_allow"],
        ):
            values = assigned_literal(new, name)
            self.assertIn("trained_precision", values)
            self.assertEqual(len(values), len(assigned_literal(text, name)) + 1)
            [line] = [ln for ln in added_lines(text, new) if "trained_precision" in ln]
            self.assertRegex(line, r'^ {4,8}"trained_precision",$')

    def test_with_the_base_config_attributes(self):
        new = ue.allow_config_attribute(fx.CHECK_CONFIG_ATTRIBUTES_TUPLE)
        values = list(assigned_literal(new, "ATTRIBUTES_TO_ALLOW"))
        self.assertEqual(values[values.index("architectures") + 1], "trained_precision")

    def test_list_without_trailing_comma_stays_valid(self):
        new = ue.allow_config_attribute(fx.CHECK_CONFIG_ATTRIBUTES_LIST)
        values = assigned_literal(new, "attributes_to_allow")
        self.assertEqual(values[-2:], ["eoi_token_id", "trained_precision"])  # not "eoi_token_idtrained_precision"

    def test_missing_anchor_is_named(self):
        with self.assertRaisesRegex(
            ue.EditError, r"check_config_attributes\.py: anchor not found: .*ATTRIBUTES_TO_ALLOW"
        ):
            ue.allow_config_attribute("SPECIAL_CASES_TO_ALLOW = {}\n")
        with self.assertRaisesRegex(ue.EditError, "on one line"):
            ue.allow_config_attribute(fx.CHECK_CONFIG_ATTRIBUTES_ONE_LINE)


class ConfigCommonKwargsTest(EditCase):
    def test_entry_added(self):
        for text, new in self.apply_all_variants(ue.config_common_kwarg, "tests/utils/test_configuration_utils.py"):
            kwargs = assigned_literal(new, "config_common_kwargs")
            self.assertEqual(kwargs.pop("trained_precision"), "bf16")
            self.assertEqual(kwargs, assigned_literal(text, "config_common_kwargs"))
            self.assertEqual(len([ln for ln in added_lines(text, new) if ln.strip()]), 1)

    def test_missing_anchor_is_named(self):
        with self.assertRaisesRegex(
            ue.EditError, "test_configuration_utils.py: anchor not found: .*config_common_kwargs"
        ):
            ue.config_common_kwarg("common_kwargs = {\n    'a': 1,\n}\n")


def makefile_list(text: str, var: str) -> list[str]:
    lines = text.split("\n")
    start = next(i for i, ln in enumerate(lines) if re.match(rf"^{var}\s*:?=", ln))
    block = [lines[start]]
    while block[-1].rstrip().endswith("\\"):
        block.append(lines[start + len(block)])
    value = " ".join(ln.rstrip().removesuffix("\\") for ln in block).split("=", 1)[1]
    return [name.strip() for name in value.split(",")]


class MakefileTest(EditCase):
    def test_checker_listed(self):
        current, no_config_attributes, old = self.apply_all_variants(ue.makefile_checker, "Makefile")
        for text, new in (current, no_config_attributes):
            names = makefile_list(new, "REPO_CONSISTENCY_CHECKERS")
            self.assertEqual(
                [n for n in names if n != "trained_precision"], makefile_list(text, "REPO_CONSISTENCY_CHECKERS")
            )
            self.assertIn("trained_precision", names)
            self.assertNotIn("", names)
        names = makefile_list(current[1], "REPO_CONSISTENCY_CHECKERS")
        self.assertEqual(names[names.index("config_attributes") + 1], "trained_precision")
        self.assertEqual(added_lines(*current), ["\ttrained_precision, \\"])
        self.assertEqual(added_lines(*no_config_attributes), ["    trained_precision, \\"])
        # a Makefile from before utils/checkers.py: a command line next to the config-attributes one
        self.assertEqual(added_lines(*old), ["\t-python utils/check_trained_precision.py"])
        lines = old[1].split("\n")
        self.assertEqual(
            lines.index("\t-python utils/check_trained_precision.py"),
            lines.index("\t-python utils/check_config_attributes.py") + 1,
        )

    def test_missing_anchor_is_named(self):
        with self.assertRaisesRegex(ue.EditError, "Makefile: anchor not found: a `REPO_CONSISTENCY_CHECKERS :=` list"):
            ue.makefile_checker(fx.MAKEFILE_NO_ANCHOR)


class CheckersTest(EditCase):
    def test_checker_registered(self):
        for text, new in self.apply_all_variants(ue.register_checker, "utils/checkers.py"):
            table = assigned_literal(new, "CHECKERS")
            self.assertEqual(
                table.pop("trained_precision"),
                ("Published trained precisions", "check_trained_precision.py", [], ["--fix_and_overwrite"]),
            )
            self.assertEqual(table, assigned_literal(text, "CHECKERS"))
        keys = list(assigned_literal(ue.register_checker(fx.CHECKERS), "CHECKERS"))
        self.assertEqual(keys[keys.index("config_attributes") + 1], "trained_precision")

    def test_a_table_runner_gains_one_line(self):
        # its CHECKER_FILE_GLOBS stays as it is (a checker it does not list always runs): one line, as the estimate says
        new = ue.register_checker(fx.CHECKERS)
        self.assertEqual(
            assigned_literal(new, "CHECKER_FILE_GLOBS"), assigned_literal(fx.CHECKERS, "CHECKER_FILE_GLOBS")
        )
        self.assertEqual(len(added_lines(fx.CHECKERS, new)), ue.EDITS["checkers-registry"].lines)

    def test_after_a_multi_line_entry(self):
        new = ue.register_checker(fx.CHECKERS_OTHER_ORDER)
        self.assertEqual(list(assigned_literal(new, "CHECKERS")), ["copies", "types", "trained_precision"])

    def test_missing_anchor_is_named(self):
        with self.assertRaisesRegex(ue.EditError, r"utils/checkers.py: anchor not found: .*CHECKERS"):
            ue.register_checker("RUNNERS = {}\n")

    def test_a_discovering_runner_needs_no_edit_and_finds_our_checker(self):
        self.assertEqual(ue.register_checker(fx.CHECKERS_DISCOVERED), fx.CHECKERS_DISCOVERED)
        with tempfile.TemporaryDirectory() as tmp:
            utils = Path(tmp) / "utils"
            utils.mkdir()
            (utils / "checkers.py").write_text(fx.CHECKERS_DISCOVERED, encoding="utf-8")
            shutil.copy(ROOT / "utils" / ue.CHECKER_SCRIPT, utils / ue.CHECKER_SCRIPT)
            spec = importlib.util.spec_from_file_location("discovering_checkers", utils / "checkers.py")
            runner = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(runner)
            label, script, globs, check_args = runner.discover()[ue.CHECKER_NAME]
        self.assertEqual(script, ue.CHECKER_SCRIPT)
        self.assertIn("utils/trained_precisions.json", globs)

    def test_a_discovering_runner_with_another_glob_key_is_named(self):
        with self.assertRaisesRegex(ue.EditError, r"reads `cache_globs`.*it reads file_globs: rename the key"):
            ue.register_checker(fx.CHECKERS_DISCOVERED_OLD_KEY)


def toc_siblings(text: str, local: str) -> list[str] | None:
    """The `local` names of the list (at any depth) that holds the entry `local`."""

    def walk(items):
        if isinstance(items, list):
            locals_ = [i.get("local") for i in items if isinstance(i, dict)]
            if local in locals_:
                return locals_
            for item in items:
                found = walk(item.get("sections")) if isinstance(item, dict) else None
                if found:
                    return found
        return None

    return walk(yaml.safe_load(text))


class ToctreeTest(EditCase):
    def test_guide_listed_after_the_models_page(self):
        for (text, new), anchor in zip(
            self.apply_all_variants(ue.toctree_entry, "docs/source/en/_toctree.yml"),
            ["models", "models", "custom_models"],
        ):
            siblings = toc_siblings(new, "trained_precision")
            self.assertEqual(siblings[siblings.index(anchor) + 1], "trained_precision")
            self.assertEqual([s for s in siblings if s != "trained_precision"], toc_siblings(text, anchor))
            self.assertEqual(len(added_lines(text, new)), 2)
        self.assertNotIn("main_classes", str(toc_siblings(ue.toctree_entry(fx.TOCTREE), "trained_precision")))

    def test_entry_title(self):
        new = ue.toctree_entry(fx.TOCTREE)
        self.assertIn("    - local: trained_precision\n      title: Trained precision\n", new)

    def test_missing_anchor_is_named(self):
        with self.assertRaisesRegex(ue.EditError, "_toctree.yml: anchor not found: an entry `- local: models`"):
            ue.toctree_entry(fx.TOCTREE_NO_ANCHOR)

    def test_each_page_lands_in_guide_order_whichever_pull_request_adds_it_first(self):
        pages = [page for page, _ in ue.TOC_PAGES]
        # the registry's page comes in a pull request before the guide's first page, the CLI's after the fp16 plan's
        order = [pages[1], pages[0], pages[3], pages[2], *pages[4:]]
        text = fx.TOCTREE
        for page in order:
            new = ue.apply_edit_text(f"toctree-{page}", text)
            self.assertEqual(len(added_lines(text, new)), 2, page)
            text = new
        siblings = toc_siblings(text, pages[0])
        start = siblings.index("models") + 1
        self.assertEqual(siblings[start : start + len(pages)], pages)
        self.assertEqual(ue.apply_edit_text(f"toctree-{pages[0]}", text), text, "applying it again changes nothing")

    def test_unknown_page_is_named(self):
        with self.assertRaisesRegex(ue.EditError, "'nope' is not a guide page"):
            ue.toctree_page_entry(fx.TOCTREE, "nope")


class TrainerDocsTest(EditCase):
    def test_paragraph_ends_the_checkpoints_section(self):
        for text, new in self.apply_all_variants(ue.trainer_doc_paragraph, "docs/source/en/trainer.md"):
            self.assertEqual(sorted(added_lines(text, new)), sorted(["", *ue.TRAINER_DOC_PARAGRAPH.split("\n")]))
            lines = new.split("\n")
            first = lines.index(ue.TRAINER_DOC_PARAGRAPH.split("\n")[0])
            headings = [line for line in lines[:first] if line.startswith("## ")]
            self.assertEqual(headings[-1], "## Checkpoints")
            self.assertTrue(lines[first - 2].strip(), "the paragraph follows the section's text after one blank line")
        self.assertIn('`trained_precision_check="error"`.\n\n## Logging', ue.trainer_doc_paragraph(fx.TRAINER_MD))

    def test_missing_anchor_is_named(self):
        with self.assertRaisesRegex(ue.EditError, "trainer.md: anchor not found: a `## Checkpoints` heading"):
            ue.trainer_doc_paragraph(fx.TRAINER_MD_NO_ANCHOR)


class EstimateTest(unittest.TestCase):
    def test_each_edit_changes_the_lines_it_declares(self):
        # `make check` sizes a pull request before any clone from these; `make pr` checks the branches as built
        for name, edit in ue.EDITS.items():
            old = fx.CURRENT[edit.path]
            diff = difflib.ndiff(old.split("\n"), edit.apply(old).split("\n"))
            with self.subTest(name):
                self.assertEqual(len([ln for ln in diff if ln.startswith(("+ ", "- "))]), edit.lines)


class DependencyStyleTest(unittest.TestCase):
    def test_no_edit_adds_a_dependency_or_an_extra(self):
        # upstream's style: optional libraries behind `is_*_available()`, no `_deps` entry or extra per integration
        touched = {edit.path for edit in ue.EDITS.values()}
        self.assertFalse(touched & {"setup.py", "src/transformers/dependency_versions_table.py"}, touched)


class ApplyEditTest(unittest.TestCase):
    def test_missing_file_and_unknown_edit(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaisesRegex(ue.EditError, r"utils/checkers.py: the file is missing.*CHECKERS"):
                ue.apply_edit("checkers-registry", Path(tmp))
            with self.assertRaisesRegex(ue.EditError, "unknown edit 'nope'"):
                ue.apply_edit("nope", Path(tmp))
            (Path(tmp) / "Makefile").write_text(fx.MAKEFILE, encoding="utf-8")
            self.assertTrue(ue.apply_edit("makefile-checker", Path(tmp)))
            self.assertFalse(ue.apply_edit("makefile-checker", Path(tmp)))


if __name__ == "__main__":
    unittest.main()
