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
`transformers precision`: what precision a checkpoint was trained in, whether a runtime dtype is safe for it, and
writing the answer into checkpoints.

[`precision`] (the `transformers` CLI's command) and `python -m transformers.trained_precision` hand the arguments as
typed to [`main`]. [`run_command`] keeps `HELP`'s exit codes: an expected failure is a [`CommandError`], anything else
exit 70, never 1 (risky); with `--json` stdout holds exactly one JSON document. The report never imports torch.
"""

import collections
import dataclasses
import inspect
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Annotated

import typer

from ...utils import CONFIG_NAME, logging
from ..facts.storage import local_checkpoint
from .inspection import EXIT_BAD_INPUT, EXIT_INTERNAL_ERROR, EXIT_NOT_DONE, EXIT_RISKY, EXIT_SAFE, EXIT_UNKNOWN


logger = logging.get_logger(__name__)

#: Subcommand names; the report is the command without one (`transformers precision PATH_OR_ID`).
REPORT, SET, PLAN = "report", "set", "plan"

#: Where an internal error asks to be reported.
ISSUES_URL = "https://github.com/huggingface/transformers/issues"

HELP = f"""What precision a checkpoint was trained in, and whether a runtime dtype is safe for it.

\b
Report (reads config.json and safetensors headers only; never imports torch unless --audit):
  transformers precision PATH_OR_ID [--dtype fp16] [--audit [--texts FILE]] [--json]
\b
Write the field into checkpoints (local directories, config.json files, Hub cache snapshots, repo folders or a whole
cache):
  transformers precision set PATH... --precision bf16 [--force] [--dry-run]
  transformers precision set PATH... --from-registry [--model-id HUB_ID] [--dry-run]
  transformers precision set PATH... --precision unknown --force     (removes the field)
\b
Find the modules fp16 overflows in, keep only those in fp32, validate against fp32, and store the plan (--write):
  transformers precision plan PATH_OR_ID --dtype fp16 [--write [--force]] [--texts FILE] [--headroom 2]
    [--max-length N]

\b
Exit codes (every subcommand; with --json, stdout is one JSON document holding "exit_code", and a report's "basis"
says what its status rests on: "rule", "evidence", "measured", or null when unknown):
  {EXIT_SAFE}  safe (or no --dtype asked; with --audit on an unknown precision: "safe as measured", a measurement on
     the calibration inputs, not a verdict from the trained precision); for `set`: everything asked was done or
     already so
  {EXIT_RISKY}  risky: the asked --dtype is risky for the trained precision; for `plan`: no plan makes fp16 safe
     (only these mean 1)
  {EXIT_BAD_INPUT}  bad input: a missing path, a malformed file, an invalid option; nothing was done
  {EXIT_UNKNOWN}  unknown: the trained precision is unknown, so nothing says the asked --dtype is safe
  {EXIT_NOT_DONE}  not done: a file asked for was not written, a checkpoint was skipped, an id is not in the registry
  {EXIT_INTERNAL_ERROR} internal error: a bug in the command (one line says what failed and where to report it)
"""


class CommandError(Exception):
    """A failure the command reports in one line (or one JSON error document) and exits with `exit_code`."""

    def __init__(self, message: str, exit_code: int = EXIT_BAD_INPUT):
        super().__init__(message)
        self.exit_code = exit_code


class _Output:
    """Text, or with `--json` one JSON document on stdout: the result, or `{"error": ..., "exit_code": ...}`."""

    def __init__(self, json_output: bool):
        self.json = json_output
        self.printed_document = False

    def document(self, payload: dict) -> None:
        if self.printed_document:
            raise RuntimeError("a second JSON document in one invocation")
        self.printed_document = True
        print(json.dumps(payload, indent=2, default=str))

    def error(self, message: str, code: int, **extra) -> None:
        """Reports a failure: the error document under `--json` (unless the result is out already), else stderr."""
        if self.json and not self.printed_document:
            self.document({"error": message, "exit_code": code, **extra})
        else:
            print(f"Error: {message}", file=sys.stderr)


def _option(default, help: str):
    """An [`Options`] field: its default, and its line in `--help`."""
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass
class Options:
    """Every option of `transformers precision` and its help; each subcommand takes some of them ([`Subcommand`])."""

    dtype: str | None = _option(None, "The dtype you will run in: fp32, bf16 or fp16. Exit code 1 risky, 3 unknown.")
    audit: bool = _option(
        False,
        "Load the model in fp32 on the CPU, run a calibration forward and measure every module's max |activation| "
        "against fp16's 65504. Needs torch.",
    )
    download: bool = _option(False, "With --audit: let it download the weights of an uncached Hub id.")
    allow_pickle: bool = _option(
        False, "With --audit: load pickled (.bin) weights, which can run code. Trusted files only."
    )
    top: int = _option(10, "With --audit: how many modules to list.")
    revision: str | None = _option(None, "The Hub revision, for a Hub id only.")
    cache_dir: str | None = _option(None, "The Hub cache holding Hub ids (default: HF_HUB_CACHE, else HF_HOME/hub).")
    precision: str | None = _option(None, "`set`: the value to write: fp32, bf16, fp16, or unknown (removes it).")
    from_registry: bool = _option(False, "`set`: write the registry's value for each checkpoint's Hub id.")
    model_id: str | None = _option(None, "`set --from-registry`: the Hub id of local checkpoints outside the cache.")
    force: bool = _option(
        False, "`set`: replace or remove a value a config holds. `plan --write`: write into a Hub cache snapshot."
    )
    dry_run: bool = _option(False, "`set`: print the diffs, change nothing.")
    write: bool = _option(False, "`plan`: store the validated plan in the checkpoint's config.json.")
    texts: str | None = _option(
        None, "With --audit, and `plan`: a UTF-8 file of calibration texts (one per paragraph, or per line)."
    )
    headroom: float | None = _option(None, "`plan`: keep values this many times below fp16's max 65504 (default 2).")
    max_length: int | None = _option(
        None,
        "`plan`: the longest input to calibrate and validate on (default: the model's length limit, at most 2048 "
        "tokens); the plan is evidence up to that length only.",
    )

    def given(self) -> list[str]:
        """The options set to something other than their default."""
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) != f.default]


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class Subcommand:
    """One subcommand: `run(args, options, out)` returns the exit code; `options` names the [`Options`] it takes."""

    run: Callable[[list[str], Options, _Output], int]
    options: frozenset[str]


def _read_texts(path: str | None) -> list[str] | None:
    """One calibration text per non-empty paragraph (blank-line separated); a file without blank lines: per line."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            content = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise CommandError(f"cannot read the calibration text file {path}: {e}") from e
    blocks = [b.strip() for b in content.split("\n\n") if b.strip()]
    if len(blocks) == 1:
        blocks = [line.strip() for line in content.splitlines() if line.strip()]
    if not blocks:
        raise CommandError(f"the calibration text file {path} is empty.")
    return blocks


def _precision(args: list[str], text=None, output_format="text", json_output=False, **options):
    # typer's callback in [`main`]; its parameters are `_precision.__signature__`, below. `--text` is the former
    # name of `--texts`, kept as a hidden alias.
    texts = options["texts"]
    if texts is not None and text is not None and texts != text:
        message = f"--texts {texts} and --text {text}: --text is another name of --texts, give one file."
        _Output(json_output or output_format == "json").error(message, EXIT_BAD_INPUT)
        raise SystemExit(EXIT_BAD_INPUT)
    options["texts"] = texts if texts is not None else text
    code = run_command(args, Options(**options), json_output=json_output, output_format=output_format)
    if code:
        # `typer.Exit` is not a click exit under huggingface_hub 2.x's click group: SystemExit works under both.
        raise SystemExit(code)


def _typer_parameter(name: str, annotation, default, help: str, flag: str | None = None, **kwargs):
    annotation = Annotated[annotation, typer.Option(flag or _flag(name), help=help, **kwargs)]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


_PATHS = typer.Argument(
    help="A checkpoint directory (with config.json) or a Hub id; or `set` followed by the paths to write.",
    show_default=False,
)
# The paths, every [`Options`] field, and the options of the output (and `--texts`'s former name).
_precision.__signature__ = inspect.Signature(
    [
        inspect.Parameter("args", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Annotated[list[str], _PATHS]),
        *(_typer_parameter(f.name, f.type, f.default, f.metadata["help"]) for f in dataclasses.fields(Options)),
        _typer_parameter("text", str | None, None, "The former name of --texts.", hidden=True),
        _typer_parameter("output_format", str, "text", "Output format: text or json.", "--format"),
        _typer_parameter(
            "json_output", bool, False, "Print the report (or the error) as JSON (same as --format json).", "--json"
        ),
    ]
)


#: `app.command(**PRECISION_COMMAND_SETTINGS)(precision)`: the arguments go as typed to [`main`], as `python -m` does.
PRECISION_COMMAND_SETTINGS = {
    "context_settings": {"ignore_unknown_options": True, "allow_extra_args": True, "allow_interspersed_args": False},
    "add_help_option": False,
}


def precision(ctx: typer.Context):
    # the docstring is `HELP`, set below: `transformers --help` shows its first line
    main(list(ctx.args))


precision.__doc__ = HELP


def run_command(args: list[str], options: Options, *, json_output: bool = False, output_format: str = "text") -> int:
    """Runs `transformers precision ARGS...`; any failure is one line (or JSON document), never exit 1 ("risky")."""
    out = _Output(json_output or output_format == "json")
    try:
        if output_format not in ("text", "json"):
            raise CommandError(f"--format {output_format!r} is not valid: use text or json.")
        # a local path named like a subcommand is a checkpoint to report on
        name = REPORT
        if args and args[0] in SUBCOMMANDS and args[0] != REPORT and (len(args) > 1 or not os.path.exists(args[0])):
            name, args = args[0], args[1:]
        subcommand = SUBCOMMANDS[name]
        misplaced = [option for option in options.given() if option not in subcommand.options]
        if misplaced:
            raise CommandError(_misplaced_message(name, misplaced))
        return subcommand.run(args, options, out)
    except CommandError as e:
        out.error(str(e), e.exit_code)
        return e.exit_code
    except KeyboardInterrupt:
        out.error("interrupted.", 130)
        return 130
    except Exception as e:  # the catch-all: a bug must not read as a verdict
        logger.debug("transformers precision failed", exc_info=True)
        out.error(_internal_error_message(e), EXIT_INTERNAL_ERROR, exception=type(e).__name__)
        return EXIT_INTERNAL_ERROR


def _misplaced_message(name: str, misplaced: list[str]) -> str:
    where = []
    for option in misplaced:
        owners = [other for other, sub in SUBCOMMANDS.items() if option in sub.options]
        spelled = " or ".join(
            "the report (`transformers precision PATH_OR_ID`)" if o == REPORT else f"`transformers precision {o}`"
            for o in owners
        )
        where.append(f"{_flag(option)} goes with {spelled}")
    this = "the report" if name == REPORT else f"`{name}`"
    return f"{'; '.join(where)}: not with {this}."


def _internal_error_message(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return (
        f"internal error{where}: {type(error).__name__}: {error}. This is a bug in `transformers precision`, not a "
        f"verdict about the checkpoint: please report it at {ISSUES_URL} with the command you ran "
        "(TRANSFORMERS_VERBOSITY=debug prints the traceback)."
    )


def _run_report(args: list[str], options: Options, out: _Output) -> int:
    """`transformers precision PATH_OR_ID`: the report, and the verdict for `--dtype`."""
    from .inspection import (
        CheckpointInspectionError,
        inspect_adapter,
        inspect_checkpoint,
        is_adapter_directory,
        runtime_name,
    )

    if len(args) != 1:
        raise CommandError(f"expected one checkpoint directory or Hub id, got {len(args)}: {' '.join(args)}")
    dtype = options.dtype
    if dtype is not None:
        try:
            dtype = runtime_name(dtype)
        except CheckpointInspectionError as e:
            raise CommandError(f"--dtype: {e}") from e
    if options.texts is not None and not options.audit:
        raise CommandError("--texts only applies with --audit.")
    if (options.download or options.allow_pickle) and not options.audit:
        raise CommandError("--download and --allow-pickle only apply with --audit.")
    if options.top < 1:
        raise CommandError(f"--top must be a positive integer, got {options.top}.")
    texts = _read_texts(options.texts)
    adapter = is_adapter_directory(args[0])
    if adapter and (options.audit or options.revision is not None):
        raise CommandError(
            f"{args[0]} is a PEFT adapter: --audit and --revision apply to the base; pass its id or directory."
        )
    try:
        if adapter:
            report = inspect_adapter(args[0], cache_dir=options.cache_dir)
        else:
            report = inspect_checkpoint(
                args[0],
                audit=options.audit,
                texts=texts,
                revision=options.revision,
                download=options.download,
                allow_pickle=options.allow_pickle,
                cache_dir=options.cache_dir,
            )
    except CheckpointInspectionError as e:
        raise CommandError(str(e)) from e
    if out.json:
        out.document(report.to_dict(dtype, top_k=options.top))
    else:
        print(report.format(dtype, top_k=options.top))
    return report.exit_code(dtype)


def _run_plan(args: list[str], options: Options, out: _Output) -> int:
    """`transformers precision plan PATH_OR_ID --dtype fp16 [--write]`: exit 0 with a validated plan, 1 without one."""
    from ..plan.fp16_plan_search import Fp16PlanError, plan_checkpoint, plan_write_problem
    from .inspection import CheckpointInspectionError, _resolve

    if len(args) != 1:
        raise CommandError(
            f"`plan` takes one checkpoint directory or Hub id, got {len(args)}: {' '.join(args)} "
            "(transformers precision plan PATH_OR_ID --dtype fp16 [--write])"
        )
    path_or_id = args[0]
    headroom, max_length = _plan_settings(options)
    config_path = _plan_config_path(path_or_id, options.cache_dir)
    if config_path is None and not options.download:
        raise CommandError(
            f"{path_or_id} is neither a checkpoint directory nor a Hub id in the local cache (--download fetches it)."
        )
    if config_path is None:
        # the report's resolution: offline or unreachable, it fails at once; online it fetches config.json
        try:
            config_path = _resolve(path_or_id, revision=None, cache_dir=options.cache_dir).config_path
        except CheckpointInspectionError as e:
            raise CommandError(str(e)) from e
    if options.write and config_path is not None:  # before the model is loaded and searched, not after
        problem = plan_write_problem(config_path, options.force)
        if problem is not None:
            raise CommandError(
                f"cannot write the plan into {config_path}: {problem}; nothing modified.", EXIT_NOT_DONE
            )
    try:
        result = plan_checkpoint(
            path_or_id,
            texts=_read_texts(options.texts),
            headroom=headroom,
            max_length=max_length,
            local_files_only=not options.download,
            use_safetensors=not options.allow_pickle,
            cache_dir=options.cache_dir,
        )
    except (CheckpointInspectionError, Fp16PlanError, ValueError) as e:
        raise CommandError(str(e)) from e
    code = EXIT_SAFE if result.passed else EXIT_RISKY
    written = None
    if result.passed and options.write:
        config_path = config_path or _plan_config_path(path_or_id, options.cache_dir)
        written = _write_plan(result, config_path, path_or_id, options.force)
    if out.json:
        out.document({"plan": result.to_dict(), "written": written, "exit_code": code})
    else:
        print(result.format())
        if written:
            subs = [key for key in result.parts if key]
            where = f" (and its part into the sub-configs {', '.join(subs)})" if subs else ""
            print(f"wrote the plan into {written}{where}: every fp16 load of this checkpoint now applies it")
        elif result.passed and not options.write:
            print("(not stored: add --write to store it in the checkpoint's config.json)")
    return code


def _plan_settings(options: Options) -> tuple[float, int | None]:
    """`plan`'s headroom and `--max-length` (`None`: the model's limit), once `--dtype` is checked to ask for fp16."""
    from ..plan.fp16_plan_search import DEFAULT_HEADROOM
    from ..vocabulary import FP16, InvalidTrainedPrecisionError, normalize_precision

    try:
        asked = normalize_precision(options.dtype) if options.dtype is not None else FP16
    except InvalidTrainedPrecisionError:
        asked = None
    if asked != FP16:
        raise CommandError(
            f"--dtype {options.dtype!r}: a plan is made for fp16 only (bf16 has fp32's range): use --dtype fp16."
        )
    headroom = DEFAULT_HEADROOM if options.headroom is None else options.headroom
    if not headroom >= 1 or headroom == float("inf"):
        raise CommandError(f"--headroom must be a number >= 1, got {headroom}.")
    if options.max_length is not None and options.max_length < 2:
        raise CommandError(f"--max-length must be an integer >= 2, got {options.max_length}.")
    return headroom, options.max_length


def _plan_config_path(path_or_id: str, cache_dir: str | None) -> str | None:
    """The `config.json` of a checkpoint directory, or of a Hub id's cached snapshot; `None` when neither."""
    directory = local_checkpoint(path_or_id, cache_dir)
    return os.path.join(directory, CONFIG_NAME) if directory is not None else None


def _write_plan(result, config_path: str | None, path_or_id: str, force: bool) -> str:
    """Stores a validated plan into `config_path` (and its parts into the sub-configs); returns the path written."""
    from ..plan.fp16_plan_search import write_fp16_plan

    if config_path is None or not os.path.isfile(config_path):
        raise CommandError(f"cannot find the config.json of {path_or_id} to write the plan into.", EXIT_NOT_DONE)
    try:
        write_fp16_plan(config_path, result.to_config_dict(), result.parts, force=force)
    except (OSError, ValueError) as e:
        raise CommandError(f"cannot write the plan into {config_path}: {e}; nothing modified.", EXIT_NOT_DONE) from e
    return config_path


def _run_set(args: list[str], options: Options, out: _Output) -> int:
    """`transformers precision set PATH...`: write (or remove) the field in checkpoints' `config.json`."""
    from ..record.populate import populate_checkpoints

    precision_value = _set_precision_value(args, options)
    resolved = [_set_path(path, options.cache_dir) for path in args]

    def show(result):
        if not out.json:
            print(f"[{result.status}] {result.path}: {result.message}")
            if options.dry_run and result.diff:
                print(result.diff.rstrip("\n"))

    # a path is done when none of its checkpoints failed and one was written (or already so); a cache skips some
    results, code = [], EXIT_SAFE
    for path in resolved:
        found = populate_checkpoints(
            [path],
            precision=precision_value,
            model_id=options.model_id,
            force=options.force,
            dry_run=options.dry_run,
            progress=False,
            on_result=show,
        )
        if not found or any(r.failed for r in found) or all(r.skipped for r in found):
            code = EXIT_NOT_DONE
        results.extend(found)
    if out.json:
        out.document({"results": [dataclasses.asdict(r) for r in results], "exit_code": code})
    else:
        counts = collections.Counter(r.status for r in results)
        print(", ".join(f"{n} {status}" for status, n in counts.items()) or "no checkpoints found")
    return code


def _set_precision_value(args: list[str], options: Options) -> str | None:
    """Checks `set`'s arguments and options; returns the normalized `--precision` (`None` with `--from-registry`)."""
    from ..facts.registry import lookup
    from ..vocabulary import PRECISIONS, InvalidTrainedPrecisionError, normalize_precision

    precision_value = options.precision
    if not args:
        raise CommandError("`set` needs at least one path: transformers precision set PATH... --precision bf16")
    if (precision_value is None) == (not options.from_registry):
        raise CommandError("`set` needs exactly one of --precision VALUE and --from-registry.")
    if precision_value is not None:
        try:
            precision_value = normalize_precision(precision_value)
        except InvalidTrainedPrecisionError as e:
            raise CommandError(
                f"--precision {precision_value!r} is not valid: use one of {', '.join(PRECISIONS)}."
            ) from e
    if options.model_id is not None and lookup(options.model_id) is None:
        raise CommandError(f"--model-id {options.model_id} is not in the registry: pass --precision instead.")
    return precision_value


def _set_path(path: str, cache_dir: str | None) -> str:
    """A path `set` writes into, checked before anything is written; a Hub id names its cached snapshot."""
    from ..facts.hub_ids import parse_hub_id

    if os.path.lexists(os.path.expanduser(path)):
        return path
    snapshot = local_checkpoint(path, cache_dir)
    if snapshot is None:
        raise CommandError(
            f"{path} is neither a local path nor a Hub id in the local cache: nothing was written. Download "
            f"it first (`hf download {path}`), or pass the checkpoint directory."
            if parse_hub_id(path) is not None
            else f"{path} does not exist: nothing was written."
        )
    return snapshot


_REPORT_OPTIONS = frozenset({"dtype", "audit", "download", "allow_pickle", "texts", "top", "revision", "cache_dir"})

#: Subcommand name -> handler and the options it takes. A new subcommand is one entry here and one function.
SUBCOMMANDS: dict[str, Subcommand] = {
    REPORT: Subcommand(_run_report, _REPORT_OPTIONS),
    SET: Subcommand(_run_set, frozenset({"precision", "from_registry", "model_id", "force", "dry_run", "cache_dir"})),
    PLAN: Subcommand(
        _run_plan,
        frozenset(
            {"dtype", "write", "force", "texts", "headroom", "max_length", "download", "allow_pickle", "cache_dir"}
        ),
    ),
}


def main(argv: list[str] | None = None) -> None:
    """`python -m transformers.trained_precision` and `transformers precision`; a usage error is exit 2."""
    import click

    argv = sys.argv[1:] if argv is None else list(argv)
    app = typer.Typer(
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
    )
    app.command(help=HELP)(_precision)
    # click's `UsageError`, and typer's own copy of it (typer >= 0.24 carries its own click)
    usage_errors = (click.UsageError, *(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError"))
    try:
        code = app(args=argv, prog_name="transformers precision", standalone_mode=False)
    except usage_errors as e:
        if "--json" in argv or "--format=json" in argv or ("--format", "json") in zip(argv, argv[1:]):
            _Output(True).error(e.format_message(), EXIT_BAD_INPUT)
        else:
            e.show()
        code = EXIT_BAD_INPUT
    except (click.Abort, typer.Abort):
        code = 130
    if code:
        raise SystemExit(code)
