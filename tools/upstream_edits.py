#!/usr/bin/env python3
# Copyright 2026 The trained_precision fork authors. Licensed under the Apache License, Version 2.0.
"""
Small edits of upstream files that are not in the wheel, applied by rule instead of by line number.

The upstream pull request needs a few one-line registrations in files the wheel does not carry (the config-attributes
allow list, `config_common_kwargs`, the repository-consistency checker list, the docs table of contents, a paragraph of
the Trainer guide). No edit adds a
dependency or an extra to upstream's `setup.py`: optional libraries stay behind upstream's `is_*_available()`. A patch with line numbers and context breaks as soon as upstream edits a line nearby;
each edit here finds its *anchor* instead (a tuple, a dict, a Makefile variable, a YAML list entry), inserts one entry
in the style of its neighbours, and fails with a message naming the anchor when upstream no longer has it.

Every edit is idempotent: a file that already holds the entry is left as it is (upstream merged it, or the edit runs
twice). `EDITS` maps the names used in `tools/pr_stack.toml` to the edits.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from pathlib import Path


class EditError(Exception):
    """An upstream file lacks the anchor an edit needs; the message names the file and the anchor."""


@dataclasses.dataclass(frozen=True)
class Edit:
    name: str
    path: str  # upstream repo-relative
    anchor: str  # what the edit looks for, in words (used in error messages)
    apply: Callable[[str], str]
    summary: str
    lines: int = 1  # the changed lines the edit shows in a diff (what `make check` estimates before a clone)


def _missing(path: str, anchor: str, hint: str = "") -> EditError:
    return EditError(
        f"{path}: anchor not found: {anchor}. Upstream changed this file; update the rule in tools/upstream_edits.py"
        + (f" ({hint})" if hint else "")
    )


def _block_end(lines: list[str], start: int, opener: str, path: str, anchor: str) -> int:
    """Index of the line closing the bracket opened on `lines[start]` (Python source, strings not containing brackets)."""
    closer = {"(": ")", "[": "]", "{": "}"}[opener]
    depth = 0
    for i in range(start, len(lines)):
        code = re.sub(r"#.*$", "", re.sub(r'"[^"]*"|\'[^\']*\'', '""', lines[i]))
        for ch in code:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
                if depth == 0:
                    if ch != closer:
                        raise _missing(path, anchor, "brackets do not match")
                    return i
    raise _missing(path, anchor, "the bracket is never closed")


def _item_indent(lines: list[str], start: int, end: int, default: str) -> str:
    for line in lines[start + 1 : end]:
        if line.strip() and not line.strip().startswith("#"):
            return line[: len(line) - len(line.lstrip())]
    return default


def _insert_python_item(
    text: str, path: str, assignment: str, item: str, present: str, after: tuple[str, ...] = ()
) -> str:
    """Adds `item` (one source line, without indentation) to the literal assigned on the line matching `assignment`.

    It goes after the first line of the literal that matches one of the `after` patterns (the entry it belongs
    with), else before the closing bracket; the literal's own indentation is kept. Nothing changes when a line of
    the literal already matches `present`.
    """
    lines = text.split("\n")
    pattern = re.compile(assignment)
    start = next((i for i, line in enumerate(lines) if pattern.search(line)), None)
    anchor = f"the literal assigned by /{assignment}/"
    if start is None:
        raise _missing(path, anchor)
    opener = next((ch for ch in lines[start].split("=", 1)[-1] if ch in "([{"), None)
    if opener is None:
        raise _missing(path, anchor, "no bracket after the assignment")
    end = _block_end(lines, start, opener, path, anchor)
    if end == start:
        raise _missing(path, anchor, "the literal is on one line; a multi-line literal is expected")
    body = range(start + 1, end)
    if any(re.search(present, lines[i]) for i in body):
        return text
    indent = _item_indent(lines, start, end, lines[start][: len(lines[start]) - len(lines[start].lstrip())] + "    ")
    at = None
    for pat in after:
        hit = next((i for i in body if re.search(pat, lines[i])), None)
        if hit is not None:
            # skip a multi-line entry (a value spread over several lines) to its end
            stripped = lines[hit].rstrip()
            if stripped.endswith(("(", "[", "{")):
                hit = _block_end(lines, hit, stripped[-1], path, anchor)
            at = hit + 1
            break
    if at is None:
        at = end
        last = max((i for i in body if lines[i].strip() and not lines[i].strip().startswith("#")), default=None)
        if last is not None and not re.sub(r"#.*$", "", lines[last]).rstrip().endswith(","):
            lines[last] = lines[last].rstrip() + ","
    lines.insert(at, indent + item)
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# The edits


def allow_config_attribute(text: str) -> str:
    """`trained_precision` in utils/check_config_attributes.py's allow list of base-config attributes."""
    return _insert_python_item(
        text,
        "utils/check_config_attributes.py",
        r"^\s*(ATTRIBUTES_TO_ALLOW|attributes_to_allow)\s*(:[^=]*)?=\s*[\(\[]",
        '"trained_precision",',
        r'^\s*r?"trained_precision"',
        after=(r'^\s*"architectures",', r'^\s*"transformers_version",'),
    )


def config_common_kwarg(text: str) -> str:
    """A non-default value for the new base-config attribute in tests/utils/test_configuration_utils.py."""
    return _insert_python_item(
        text,
        "tests/utils/test_configuration_utils.py",
        r"^config_common_kwargs\s*(:[^=]*)?=\s*\{",
        '"trained_precision": "bf16",',
        r'^\s*"trained_precision"\s*:',
    )


CHECKER_NAME = "trained_precision"
CHECKER_SCRIPT = "check_trained_precision.py"


def makefile_checker(text: str) -> str:
    """The checker in the Makefile's `REPO_CONSISTENCY_CHECKERS` list (or, in older Makefiles, `check-repo`)."""
    lines = text.split("\n")
    start = next((i for i, ln in enumerate(lines) if re.match(r"^REPO_CONSISTENCY_CHECKERS\s*:?=", ln)), None)
    if start is not None:
        end = start
        while lines[end].rstrip().endswith("\\") and end + 1 < len(lines):
            end += 1
        names = [n.strip() for ln in lines[start : end + 1] for n in ln.split("=", 1)[-1].replace("\\", "").split(",")]
        if CHECKER_NAME in names:
            return text
        if end == start:  # one-line list: append
            lines[start] = lines[start].rstrip() + f", {CHECKER_NAME}"
            return "\n".join(lines)
        indent = re.match(r"^\s*", lines[end]).group(0) or "\t"
        at = next((i + 1 for i in range(start + 1, end) if re.match(r"^\s*config_attributes\s*,", lines[i])), end)
        lines.insert(at, f"{indent}{CHECKER_NAME}, \\")
        return "\n".join(lines)
    old = next((i for i, ln in enumerate(lines) if re.search(r"python utils/check_config_attributes\.py", ln)), None)
    if old is None:
        raise _missing(
            "Makefile",
            "a `REPO_CONSISTENCY_CHECKERS :=` list, or a `python utils/check_config_attributes.py` line in check-repo",
        )
    if any(f"utils/{CHECKER_SCRIPT}" in ln for ln in lines):
        return text
    line = lines[old]
    lines.insert(old + 1, line.replace("check_config_attributes.py", CHECKER_SCRIPT))
    return "\n".join(lines)


#: The `CHECKER_CONFIG` keys a discovering `utils/checkers.py` may read for the files a checker depends on; our
#: script declares the one stored upstream scripts use today (`cache_globs`).
CHECKER_GLOB_KEYS = ("cache_globs", "file_globs")
CHECKER_GLOB_KEY = "cache_globs"


def register_checker(text: str) -> str:
    """
    The checker in utils/checkers.py. Two upstream layouts exist: a `CHECKERS = {...}` table of (label, script, check
    args, fix args), where our entry is inserted (its `CHECKER_FILE_GLOBS` stays as it is: a checker it does not list
    always runs); and a runner that discovers each `utils/check_*.py` by its `CHECKER_CONFIG` dict, which needs no
    edit as long as it reads the glob key our script declares. Anything else stops with the anchor named.
    """
    if re.search(r"^CHECKERS\s*(:[^=]*)?=\s*\{", text, flags=re.M) is None and "CHECKER_CONFIG" in text:
        read = [key for key in CHECKER_GLOB_KEYS if f'"{key}"' in text or f"'{key}'" in text]
        if read and CHECKER_GLOB_KEY not in read:
            raise _missing(
                "utils/checkers.py",
                f"a `CHECKER_CONFIG` runner that reads `{CHECKER_GLOB_KEY}`",
                f"it reads {', '.join(read)}: rename the key in utils/{CHECKER_SCRIPT}'s CHECKER_CONFIG",
            )
        return text
    entry = f'"{CHECKER_NAME}": ("Published trained precisions", "{CHECKER_SCRIPT}", [], ["--fix_and_overwrite"]),'
    return _insert_python_item(
        text,
        "utils/checkers.py",
        r"^CHECKERS\s*(:[^=]*)?=\s*\{",
        entry,
        rf'^\s*"{CHECKER_NAME}"\s*:',
        after=(r'^\s*"config_attributes"\s*:',),
    )


# The guide's pages, in the order the toctree lists them, each added by the pull request that ships what it documents
# (an entry `toctree-<page>` in tools/pr_stack.toml), after the page on loading models.
TOC_PAGES = (
    ("trained_precision", "Trained precision"),
    ("trained_precision_registry", "Trained precision registry"),
    ("trained_precision_cli", "Inspecting a checkpoint's precision"),
    ("trained_precision_fp16_plan", "Running bf16-trained models in fp16"),
    ("pure_bf16_training", "Pure-bf16 training"),
    ("pure_bf16_distributed", "Pure bf16 on several GPUs"),
    ("pure_bf16_torchao", "Pure bf16 with torchao 8-bit AdamW"),
    ("trained_precision_peft", "Trained precision of LoRA and QLoRA adapters"),
)
TOC_LOCAL, TOC_TITLE = TOC_PAGES[0]
TOC_AFTER = ("models", "custom_models")  # the guide is about loading and saving models: it sits with them


def _toc_local_line(lines: list[str], local: str) -> int | None:
    return next((i for i, ln in enumerate(lines) if re.match(rf"^\s*- local:\s*{re.escape(local)}\s*$", ln)), None)


def toctree_page_entry(text: str, local: str) -> str:
    """The guide page `local` (one of `TOC_PAGES`) in docs/source/en/_toctree.yml: right after the nearest guide page
    before it that is listed already, else right after the page on loading models (`local: models`)."""
    pages = [page for page, _ in TOC_PAGES]
    if local not in pages:
        raise EditError(f"{local!r} is not a guide page of TOC_PAGES: {', '.join(pages)}")
    title = dict(TOC_PAGES)[local]
    lines = text.split("\n")
    if any(re.match(rf"^\s*-?\s*local:\s*{re.escape(local)}\s*$", ln) for ln in lines):
        return text
    earlier = list(reversed(pages[: pages.index(local)]))
    for target in (*earlier, *TOC_AFTER):
        hit = _toc_local_line(lines, target)
        if hit is None:
            continue
        dash = lines[hit].index("-")
        # the entry runs until the next line at the dash's indentation or less
        end = hit + 1
        while end < len(lines) and lines[end].strip() and len(lines[end]) - len(lines[end].lstrip()) > dash:
            end += 1
        key_indent = " " * (dash + 2)
        lines[end:end] = [" " * dash + f"- local: {local}", f"{key_indent}title: {title}"]
        return "\n".join(lines)
    raise _missing("docs/source/en/_toctree.yml", " or ".join(f"an entry `- local: {t}`" for t in TOC_AFTER))


def toctree_entry(text: str) -> str:
    """The guide's first page in docs/source/en/_toctree.yml, right after the page on loading models."""
    return toctree_page_entry(text, TOC_LOCAL)


#: The Trainer guide's paragraph on the stamp, at the end of its section on checkpoints (which carry the stamp).
TRAINER_DOC_SECTION = "## Checkpoints"
TRAINER_DOC_PARAGRAPH = """\
[`~Trainer.train`] records the precision the run computes in as `model.config.trained_precision` (`"fp32"`, `"bf16"` or
`"fp16"`, also in sub-configs), so every checkpoint and the final model carry it, and the model card names the run as
its `training_regime`. It is decided once the model is prepared: DeepSpeed's bf16 or fp16, the autocast dtype where it
runs (there is no fp16 autocast on the CPU), and the lowest precision among the parameters. A run without steps records
nothing. A PEFT adapter saves no `config.json`: merge it to keep the value. Fine-tuning a bf16-trained model in fp16
first warns, or raises for a model loaded with `trained_precision_check="error"`."""


def trainer_doc_paragraph(text: str) -> str:
    """The stamp's paragraph at the end of the Trainer guide's section on checkpoints, before the next `## ` heading."""
    if "`model.config.trained_precision`" in text:
        return text
    lines = text.split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.strip() == TRAINER_DOC_SECTION), None)
    if start is None:
        raise _missing("docs/source/en/trainer.md", f"a `{TRAINER_DOC_SECTION}` heading")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    lines[end:end] = ["", *TRAINER_DOC_PARAGRAPH.split("\n")]
    return "\n".join(lines)


EDITS: dict[str, Edit] = {
    e.name: e
    for e in (
        Edit(
            "config-attributes-allow",
            "utils/check_config_attributes.py",
            "ATTRIBUTES_TO_ALLOW",
            allow_config_attribute,
            "allow the base-config attribute trained_precision in the config-attributes check",
        ),
        Edit(
            "config-common-kwargs",
            "tests/utils/test_configuration_utils.py",
            "config_common_kwargs",
            config_common_kwarg,
            "give trained_precision a non-default value in config_common_kwargs",
        ),
        Edit(
            "makefile-checker",
            "Makefile",
            "REPO_CONSISTENCY_CHECKERS",
            makefile_checker,
            "run the trained_precision check in repository consistency",
        ),
        Edit(
            "trainer-docs",
            "docs/source/en/trainer.md",
            TRAINER_DOC_SECTION,
            trainer_doc_paragraph,
            "say in the Trainer guide what train() records in config.trained_precision",
            lines=len(TRAINER_DOC_PARAGRAPH.split("\n")) + 1,  # and a blank line before it
        ),
        Edit(
            "checkers-registry",
            "utils/checkers.py",
            "CHECKERS",
            register_checker,
            "register utils/check_trained_precision.py with utils/checkers.py",
        ),
    )
}
for _local, _title in TOC_PAGES:
    EDITS[f"toctree-{_local}"] = Edit(
        f"toctree-{_local}",
        "docs/source/en/_toctree.yml",
        "- local: models",
        functools.partial(toctree_page_entry, local=_local),
        f"add the guide page {_local} ({_title}) to the toctree",
        lines=2,  # `- local:` and `title:`
    )


def apply_edit_text(name: str, text: str) -> str:
    """The text of the edit `name`'s file after the edit (for tests and previews)."""
    edit = EDITS.get(name)
    if edit is None:
        raise EditError(f"unknown edit {name!r}; known edits: {', '.join(EDITS)}")
    return edit.apply(text)


def apply_edit(name: str, tree: Path) -> bool:
    """Applies the edit `name` to the upstream checkout `tree`; returns whether the file changed."""
    edit = EDITS.get(name)
    if edit is None:
        raise EditError(f"unknown edit {name!r}; known edits: {', '.join(EDITS)}")
    path = tree / edit.path
    if not path.is_file():
        raise EditError(f"{edit.path}: the file is missing, so its anchor ({edit.anchor}) cannot be found")
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    new = edit.apply(text)
    if new == text:
        return False
    path.write_bytes(new.encode("utf-8"))
    return True
