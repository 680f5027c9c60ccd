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
The contracts scripts and CI read from `transformers precision`: exit codes (1 means risky and nothing else), one
JSON document per invocation, nothing left behind in a checkpoint, nothing read outside it, no network for a cached
model. No torch needed: checkpoints are written as JSON and raw safetensors bytes.
"""

import contextlib
import io
import json
import multiprocessing
import os
import socket
import struct
import subprocess
import sys
import unittest
from pathlib import Path
from unittest import mock

from transformers.testing_utils import TestCasePlus
from transformers.trained_precision.commands import cli
from transformers.trained_precision.record import populate


def run_main(*args):
    """`transformers precision ARGS...` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main([os.fspath(a) for a in args])
        except SystemExit as e:
            code = e.code or 0
    return code, out.getvalue(), err.getvalue()


def safetensors_bytes(header, data=b"", declared_length=None):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    length = len(raw) if declared_length is None else declared_length
    return struct.pack("<Q", length) + raw + data


def write_checkpoint(directory, config, files=()):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "wb") as f:
        f.write(config if isinstance(config, bytes) else json.dumps(config).encode())
    for name, content in files:
        with open(os.path.join(directory, name), "wb") as f:
            f.write(content)
    return directory


CONFIG = {"architectures": ["GPTNeoForCausalLM"], "model_type": "gpt_neo", "hidden_size": 8}
BF16_HEADER = {"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}
BF16_WEIGHTS = (("model.safetensors", safetensors_bytes(BF16_HEADER, bytes(4))),)


class IsolatedHomeTestCase(TestCasePlus):
    """HF_HOME (where `set` keeps its lock files) and the Hub cache in a temporary folder."""

    def setUp(self):
        super().setUp()
        self.tmp = Path(self.get_auto_remove_tmp_dir())
        self.home = self.tmp / "hf_home"
        for patcher in (
            mock.patch("huggingface_hub.constants.HF_HOME", str(self.home)),
            mock.patch("huggingface_hub.constants.HF_HUB_CACHE", str(self.home / "hub")),
        ):
            patcher.start()
            self.addCleanup(patcher.stop)

    def checkpoint(self, name="ckpt", config=CONFIG, files=None):
        files = BF16_WEIGHTS if files is None else files
        return Path(write_checkpoint(self.tmp / name, config, files))

    def cached_snapshot(self, repo_id="EleutherAI/gpt-neo-1.3B", config=CONFIG):
        """A Hub cache snapshot as huggingface_hub lays it out: links into blobs/."""
        repo = self.home / "hub" / ("models--" + repo_id.replace("/", "--"))
        commit = "a" * 40
        (repo / "blobs").mkdir(parents=True)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(commit)
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True)
        for name, content in (
            ("config.json", json.dumps(config).encode()),
            ("model.safetensors", safetensors_bytes(BF16_HEADER, bytes(4))),
        ):
            blob = repo / "blobs" / f"blob-{name}"
            blob.write_bytes(content)
            os.symlink(os.path.join("..", "..", "blobs", blob.name), snapshot / name)
        return snapshot


class CommandContractTest(IsolatedHomeTestCase):
    """Exit codes and JSON documents of every subcommand, as `--help` states them."""

    def test_help_states_every_exit_code(self):
        code, out, _ = run_main("--help")
        self.assertEqual(code, 0)
        for line in ("0  safe", "1  risky", "2  bad input", "3  unknown", "4  not done", "70 internal error"):
            self.assertIn(line, out)

    def test_crash_is_an_internal_error_not_risky(self):
        directory = self.checkpoint()
        with mock.patch(
            "transformers.trained_precision.commands.inspection.inspect_checkpoint", side_effect=TypeError("boom")
        ):
            code, out, err = run_main(directory, "--dtype", "fp16")
            self.assertEqual(code, cli.EXIT_INTERNAL_ERROR)
            self.assertEqual(out, "")
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn("internal error", err)
            self.assertIn("TypeError: boom", err)
            self.assertIn(cli.ISSUES_URL, err)
            code, out, err = run_main(directory, "--dtype", "fp16", "--json")
        self.assertEqual(code, 70)
        document = json.loads(out)
        self.assertEqual((document["exit_code"], document["exception"]), (70, "TypeError"))
        self.assertEqual(err, "")

    def test_non_string_architectures_are_reported(self):
        directory = self.checkpoint(config={**CONFIG, "architectures": [1], "trained_precision": "bf16"})
        code, out, err = run_main(directory, "--dtype", "fp16")
        self.assertEqual(code, 1, err)  # risky: bf16-trained in fp16; the odd entry is shown, not crashed on
        self.assertIn("(1)", out)

    def test_usage_error_is_one_json_document(self):
        code, out, err = run_main(self.checkpoint(), "--no-such-option", "--json")
        self.assertEqual(code, 2)
        self.assertEqual(json.loads(out)["exit_code"], 2)
        self.assertIn("--no-such-option", json.loads(out)["error"])

    def test_set_missing_path_is_bad_input(self):
        missing = self.tmp / "nope"
        code, out, err = run_main("set", missing, "--precision", "bf16")
        self.assertEqual(code, 2)
        self.assertIn("does not exist", err)
        code, out, _ = run_main("set", missing, "--from-registry", "--json")
        self.assertEqual((code, json.loads(out)["exit_code"]), (2, 2))

    def test_set_from_registry_without_a_hub_id_is_not_done(self):
        directory = self.checkpoint()
        code, out, _ = run_main("set", directory, "--from-registry")
        self.assertEqual(code, cli.EXIT_NOT_DONE)
        self.assertIn("--model-id", out)
        self.assertNotIn("--model_id", out)
        code, out, _ = run_main("set", directory, "--from-registry", "--json")
        document = json.loads(out)
        self.assertEqual((code, document["exit_code"]), (4, 4))
        self.assertEqual([r["status"] for r in document["results"]], ["skipped"])
        # with the id, it is done
        code, out, _ = run_main("set", directory, "--from-registry", "--model-id", "EleutherAI/gpt-neo-1.3B")
        self.assertEqual(code, 0, out)

    def test_a_cache_sweep_is_done_when_something_was_written(self):
        self.cached_snapshot("EleutherAI/gpt-neo-1.3B")
        self.cached_snapshot("someone/not-in-the-registry")
        code, out, _ = run_main("set", self.home / "hub", "--from-registry")
        self.assertEqual(code, 0, out)  # the repo without a registry row is skipped, as a sweep expects
        self.assertIn("1 written, 1 skipped", out)
        code, out, _ = run_main("set", self.home / "hub" / "models--someone--not-in-the-registry", "--from-registry")
        self.assertEqual(code, cli.EXIT_NOT_DONE, out)  # asked for this repo, nothing written

    def test_set_dry_run_and_unchanged_are_success(self):
        directory = self.checkpoint(config={**CONFIG, "trained_precision": "bf16"})
        self.assertEqual(run_main("set", directory, "--precision", "bf16")[0], 0)
        self.assertEqual(run_main("set", directory, "--precision", "fp32", "--force", "--dry-run")[0], 0)

    def test_every_json_output_parses(self):
        directory = self.checkpoint()
        for args in (
            (directory, "--json"),
            (directory, "--dtype", "fp16", "--json"),
            (directory, "--dtype", "fp8", "--json"),
            (self.tmp / "missing", "--json"),
            (directory, "--precision", "bf16", "--json"),
            ("set", directory, "--precision", "bf16", "--json"),
            ("set", directory, "--json"),
            ("set", "--precision", "bf16", "--json"),
            ("plan", directory, "--dtype", "bf16", "--json"),
            ("plan", directory, "--push", "--json"),
            (directory, directory, "--json"),
            (directory, "--top", "x", "--format", "json"),
        ):
            code, out, _ = run_main(*args)
            self.assertEqual(json.loads(out)["exit_code"], code, args)


class BasisTest(IsolatedHomeTestCase):
    """`--json`'s `basis`: what a verdict's status rests on, so a script need not read the text (the audit's
    "measured" is tested with torch in test_precision.py)."""

    def test_rule_evidence_and_nothing(self):
        bf16 = self.checkpoint("bf16", {**CONFIG, "trained_precision": "bf16"})
        code, out, _ = run_main(bf16, "--dtype", "fp16", "--json")
        report = json.loads(out)
        self.assertEqual((code, report["status"], report["basis"]), (1, "risky", "rule"))
        self.assertEqual({v["basis"] for v in report["verdicts"].values()}, {"rule"})
        # no rule decides an unknown precision: nothing to rest on
        code, out, _ = run_main(self.checkpoint("unknown"), "--dtype", "fp16", "--json")
        report = json.loads(out)
        self.assertEqual((code, report["status"], report["basis"]), (3, "unknown", None))
        self.assertEqual(report["verdicts"]["fp32"]["basis"], "rule")
        # without --dtype there is no whole-report status, so no basis either
        report = json.loads(run_main(bf16, "--json")[1])
        self.assertEqual((report["status"], report["basis"]), (None, None))
        # Llama 2: bf16-trained, run in fp16 by its publisher (the registry's reference runtime): safe by evidence
        self.cached_snapshot(
            "meta-llama/Llama-2-7b-hf", {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
        )
        code, out, _ = run_main("meta-llama/Llama-2-7b-hf", "--dtype", "fp16", "--json")
        report = json.loads(out)
        self.assertEqual((code, report["status"], report["basis"]), (0, "safe", "evidence"), out)
        self.assertIsNotNone(report["verdicts"]["fp16"]["evidence"])

    def test_a_composite_model_rests_on_its_least_certain_part(self):
        from transformers.trained_precision.commands.inspection import CheckpointReport, SubModelReport, Verdict

        def basis(own, *subs):
            """The report's basis at fp16 for its own verdict and its sub-models', each a (status, basis) pair."""
            parts = {
                f"sub{i}": SubModelReport(
                    f"sub{i}", None, "bf16", "bf16", "config", "unknown", {"fp16": Verdict("fp16", st, basis=b)}
                )
                for i, (st, b) in enumerate(subs)
            }
            verdicts = {"fp16": Verdict("fp16", own[0], basis=own[1])}
            return CheckpointReport(
                "x", None, None, None, [], "bf16", "bf16", None, "bf16", "config", None, verdicts, sub_models=parts
            ).basis("fp16")

        self.assertEqual(basis(("safe", "rule"), ("safe", "measured")), "measured")
        self.assertEqual(basis(("safe", "evidence"), ("safe", "rule")), "evidence")
        self.assertEqual(basis(("safe", "measured"), ("risky", "rule")), "rule")  # the part that sets the status
        self.assertIsNone(basis(("safe", "rule"), ("unknown", None)))


class LeaveNothingBehindTest(IsolatedHomeTestCase):
    def test_set_leaves_nothing_in_the_checkpoint(self):
        directory = self.checkpoint()
        before = sorted(os.listdir(directory))
        for args in (("--precision", "bf16"), ("--precision", "unknown", "--force"), ("--precision", "fp16")):
            code, out, _ = run_main("set", directory, *args)
            self.assertEqual(code, 0, out)
            self.assertEqual(sorted(os.listdir(directory)), before)
        self.assertTrue(populate.lock_path(directory / "config.json").is_relative_to(self.home))

    def test_set_leaves_nothing_in_a_cache_snapshot(self):
        snapshot = self.cached_snapshot()
        repo = snapshot.parent.parent
        before = sorted(str(p.relative_to(repo)) for p in repo.rglob("*"))
        code, out, _ = run_main("set", "EleutherAI/gpt-neo-1.3B", "--from-registry")
        self.assertEqual(code, 0, out)
        self.assertEqual(json.loads((snapshot / "config.json").read_text())["trained_precision"], "bf16")
        self.assertEqual(sorted(str(p.relative_to(repo)) for p in repo.rglob("*")), before)

    def test_two_writers_at_once(self):
        """Two processes write different fields' worth of edits to one config: both land, the file stays valid."""
        directory = self.checkpoint()
        context = multiprocessing.get_context("spawn")
        with context.Pool(2) as pool:
            results = pool.starmap(
                _write_in_a_process,
                [(str(self.home), str(directory), "bf16"), (str(self.home), str(directory / "config.json"), "bf16")],
            )
        statuses = sorted(status for status, _ in results)
        self.assertEqual(statuses, ["unchanged", "written"], results)
        self.assertEqual(json.loads((directory / "config.json").read_text())["trained_precision"], "bf16")
        self.assertEqual(sorted(os.listdir(directory)), ["config.json", "model.safetensors"])

    def test_the_lock_is_keyed_by_the_resolved_path(self):
        directory = self.checkpoint()
        link = self.tmp / "link"
        os.symlink(directory, link)
        self.assertEqual(populate.lock_path(link / "config.json"), populate.lock_path(directory / "config.json"))
        self.assertNotEqual(
            populate.lock_path(directory / "config.json"), populate.lock_path(self.tmp / "config.json")
        )


def _write_in_a_process(home, path, precision):
    with mock.patch("huggingface_hub.constants.HF_HOME", home):
        [result] = populate.populate_checkpoints([path], precision=precision, progress=False)
    return result.status, result.message


class ReadOnlyWhatIsYoursTest(IsolatedHomeTestCase):
    def test_a_link_out_of_the_checkpoint_is_refused(self):
        outside = self.tmp / "outside.safetensors"
        outside.write_bytes(safetensors_bytes(BF16_HEADER, bytes(4)))
        directory = self.checkpoint(files=())
        os.symlink(outside, directory / "model.safetensors")
        code, _, err = run_main(directory)
        self.assertEqual(code, 2)
        self.assertIn("outside the checkpoint", err)
        self.assertIn(str(outside), err)

    def test_a_config_link_out_of_the_checkpoint_is_refused(self):
        directory = self.checkpoint()
        outside = self.tmp / "elsewhere.json"
        os.replace(directory / "config.json", outside)
        os.symlink(outside, directory / "config.json")
        code, _, err = run_main(directory)
        self.assertEqual(code, 2)
        self.assertIn("outside the checkpoint", err)

    def test_links_inside_the_checkpoint_and_the_cache_are_read(self):
        directory = self.checkpoint(files=(("real.bin.safetensors", safetensors_bytes(BF16_HEADER, bytes(4))),))
        os.symlink("real.bin.safetensors", directory / "model.safetensors")
        code, out, err = run_main(directory, "--json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["storage"]["dtypes"], {"bfloat16": 2})
        code, out, err = run_main(self.cached_snapshot(), "--json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["storage"]["dtypes"], {"bfloat16": 2})

    @unittest.skipUnless(hasattr(os, "mkfifo"), "FIFOs are a POSIX thing")
    def test_a_fifo_does_not_block(self):
        for name in ("x.safetensors", "model.safetensors", "config.json", "model.safetensors.index.json"):
            with self.subTest(name):
                directory = self.checkpoint(name=name.replace(".", "_"), files=())
                if name == "config.json":
                    os.remove(directory / name)
                os.mkfifo(directory / name)
                # the command runs in a thread: a blocking open would hang it, and the join below would say so
                import threading

                result = {}
                worker = threading.Thread(
                    target=lambda d=directory, r=result: r.update(r=run_main(d, "--json")), daemon=True
                )
                worker.start()
                worker.join(60)
                self.assertFalse(worker.is_alive(), f"reading a FIFO named {name} blocked")
                code, out, _ = result["r"]
                self.assertEqual(code, 2)
                self.assertIn("FIFO", json.loads(out)["error"])

    def test_architectures_are_looked_up_among_registered_model_classes_only(self):
        from transformers.trained_precision.plan import audit

        registered = audit.registered_model_class_names()
        self.assertIn("GPTNeoForCausalLM", registered)
        self.assertIn("FunnelBaseModel", registered)  # a tuple value of a mapping
        for name in ("AutoTokenizer", "pipeline", "logging", "__class__", "PreTrainedConfig"):
            self.assertNotIn(name, registered)
        import transformers

        config = mock.Mock(architectures=["pipeline", 3, "GPTNeoForCausalLM"])
        self.assertIs(audit.model_class(config), transformers.GPTNeoForCausalLM)
        self.assertIs(audit.model_class(mock.Mock(architectures=["AutoTokenizer"])), transformers.AutoModel)


class OfflineFirstTest(IsolatedHomeTestCase):
    """No HF_HUB_OFFLINE, no network: a cached model is reported without a connection; an uncached id fails at once."""

    def setUp(self):
        super().setUp()
        self.connections = []

        def refuse(*args, **kwargs):
            self.connections.append(args)
            raise OSError(101, "Network is unreachable")

        for patcher in (
            mock.patch.dict(os.environ, {"HF_HUB_OFFLINE": "0"}),
            mock.patch("huggingface_hub.constants.HF_HUB_OFFLINE", False),
            mock.patch.object(socket, "create_connection", refuse),
            mock.patch.object(socket.socket, "connect", refuse),
            mock.patch.object(socket, "getaddrinfo", refuse),
        ):
            patcher.start()
            self.addCleanup(patcher.stop)

    def test_cached_model_needs_no_network(self):
        self.cached_snapshot()
        code, out, err = run_main("EleutherAI/gpt-neo-1.3B", "--dtype", "fp16", "--json")
        self.assertEqual(code, 1, err)
        self.assertEqual(json.loads(out)["trained_precision"]["effective_from"], "registry")
        self.assertEqual(self.connections, [])

    def test_uncached_id_fails_fast_naming_hf_hub_offline_and_the_cache(self):
        with mock.patch("huggingface_hub.hf_hub_download") as download:
            code, _, err = run_main("trained-precision-tests/not-cached")
        self.assertEqual(code, 2)
        self.assertIn("HF_HUB_OFFLINE", err)
        self.assertIn(str(self.home / "hub"), err)
        self.assertIn("cannot be reached", err)
        download.assert_not_called()  # no download, so none of its retries
        self.assertEqual(len(self.connections), 1)  # one probe

    def test_offline_mode_names_the_cache(self):
        with mock.patch("huggingface_hub.constants.HF_HUB_OFFLINE", True):
            code, _, err = run_main("trained-precision-tests/not-cached")
        self.assertEqual(code, 2)
        self.assertIn("HF_HUB_OFFLINE is set", err)
        self.assertIn(str(self.home / "hub"), err)
        self.assertEqual(self.connections, [])


class ConsoleScriptDispatchTest(IsolatedHomeTestCase):
    """`transformers precision` is one more command of the console script; `python -m transformers.trained_precision`
    runs it alone: no `serve`, no torch for a headers-only report."""

    PROBE = (
        "import sys\n"
        "sys.argv = ['transformers', 'precision', sys.argv[1], '--dtype', 'fp16']\n"
        "from transformers.cli.transformers import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "print(code, file=sys.stderr)\n"
    )
    MODULE_PROBE = (
        "import runpy, sys\n"
        "sys.argv = ['transformers.trained_precision', sys.argv[1], '--dtype', 'fp16']\n"
        "try:\n    runpy.run_module('transformers.trained_precision', run_name='__main__')\n"
        "except SystemExit as e:\n    code = e.code\n"
        "print(code, 'torch' in sys.modules, 'transformers.cli.serve' in sys.modules, file=sys.stderr)\n"
    )

    def run_probe(self, probe, directory):
        return subprocess.run(
            [sys.executable, "-c", probe, str(directory)],
            capture_output=True,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1"},
            timeout=120,
        )

    def test_console_script_runs_the_command(self):
        directory = self.checkpoint(config={**CONFIG, "trained_precision": "bf16"})
        result = self.run_probe(self.PROBE, directory)
        self.assertEqual(result.stderr.strip().splitlines()[-1], "1", result.stdout + result.stderr)
        self.assertIn("Trained precision (config): bf16", result.stdout)

    def test_module_entry_point_imports_no_other_command_and_no_torch(self):
        directory = self.checkpoint(config={**CONFIG, "trained_precision": "bf16"})
        result = self.run_probe(self.MODULE_PROBE, directory)
        self.assertEqual(result.stderr.strip().splitlines()[-1], "1 False False", result.stdout + result.stderr)
        self.assertIn("Trained precision (config): bf16", result.stdout)

    def test_console_script_usage_errors_are_one_json_document(self):
        # the app the console script runs, invoked as the script invokes it (click's standalone mode): each usage
        # error gives the document and the exit code of `python -m transformers.trained_precision`
        import click
        import typer
        from click.testing import CliRunner

        from transformers.cli.transformers import app

        command = app if isinstance(app, click.Group) else typer.main.get_group(app)
        directory = self.checkpoint()
        for args in (
            [directory, "--json", "--bogus"],
            ["--json"],
            ["set", directory, "--json", "--bogus"],
            [directory, "--format", "json", "--top", "x"],
        ):
            result = CliRunner().invoke(command, ["precision", *map(os.fspath, args)])
            code, out, err = run_main(*args)
            self.assertEqual((result.exit_code, result.stdout), (code, out), args)
            self.assertEqual(json.loads(result.stdout)["exit_code"], 2, args)
            self.assertEqual(result.stderr, "", args)
        # without --json, the usage error is the command's own text, on stderr
        result = CliRunner().invoke(command, ["precision", os.fspath(directory), "--bogus"])
        self.assertEqual((result.exit_code, result.stdout), (2, ""))
        self.assertIn("No such option: --bogus", result.stderr)
        # and --help is the command's own help, exit codes included
        result = CliRunner().invoke(command, ["precision", "--help"])
        self.assertEqual(result.exit_code, 0)
        self.assertIn("70 internal error", result.stdout)

    def test_installed_console_script_answers_a_usage_error_with_json(self):
        script = os.path.join(os.path.dirname(sys.executable), "transformers")
        if not os.access(script, os.X_OK):
            self.skipTest("no `transformers` console script next to this interpreter")
        result = subprocess.run(
            [script, "precision", os.fspath(self.checkpoint()), "--json", "--bogus"],
            capture_output=True,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1"},
            timeout=120,
        )
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(json.loads(result.stdout), {"error": "No such option: --bogus", "exit_code": 2})

    def test_precision_is_registered_beside_upstreams_commands(self):
        import click
        import typer

        from transformers.cli.transformers import app

        command = app if isinstance(app, click.Group) else typer.main.get_group(app)
        names = set(command.list_commands(click.Context(command)))
        self.assertLessEqual({"add-new-model-like", "chat", "download", "env", "serve", "version", "precision"}, names)


if __name__ == "__main__":
    unittest.main()
