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
"""Tests of `utils/open_trained_precision_prs.py`: the published precisions proposed as Hub pull requests."""

import contextlib
import io
import json
import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

from parameterized import parameterized

from transformers.testing_utils import TestCasePlus


REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO_ROOT / "utils"))

import open_trained_precision_prs as prs  # noqa: E402


CONFIG = {"architectures": ["GPTNeoForCausalLM"], "hidden_size": 2048, "model_type": "gpt_neo", "vocab_size": 50257}


def dump_config(data):
    """What `PreTrainedConfig.to_json_file` writes."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


class FakeHubApi:
    """The Hub at the boundary: serves config.json files from a dict and records the commits it would receive."""

    def __init__(self, tmp, configs=None, earlier_prs=(), failing=()):
        self.tmp, self.configs, self.earlier_prs, self.failing = Path(tmp), configs or {}, earlier_prs, failing
        self.commits = []

    def model_info(self, repo_id):
        if repo_id in self.failing:
            raise OSError(f"cannot reach {repo_id}")
        return SimpleNamespace(sha=f"{abs(hash(repo_id)):040d}"[:40])

    def get_repo_discussions(self, repo_id, discussion_type=None, discussion_status=None):
        assert (discussion_type, discussion_status) == ("pull_request", None)  # open, merged and closed ones
        return iter([SimpleNamespace(title=t, num=7, status=s) for t, s in self.earlier_prs])

    def hf_hub_download(self, repo_id, filename, revision=None):
        assert filename == "config.json" and revision == self.model_info(repo_id).sha
        path = self.tmp / repo_id.replace("/", "--") / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.configs.get(repo_id, dump_config(CONFIG)))
        return str(path)

    def create_commit(self, repo_id, operations, **kwargs):
        self.commits.append((repo_id, list(operations), kwargs))
        return SimpleNamespace(pr_url=f"https://huggingface.co/{repo_id}/discussions/1")


def run(api, *args):
    """The script's command line in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = prs.main(list(args), api=api)
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


class OpenPullRequestsTest(TestCasePlus):
    def setUp(self):
        super().setUp()
        self.tmp = self.get_auto_remove_tmp_dir()

    def test_dry_run_prepares_a_pr_for_every_exact_row(self):
        api = FakeHubApi(self.tmp)
        results, missing = prs.open_prs(api=api)
        exact = [row for row in prs.check_trained_precision.load_rows()[1] if "*" not in row[0]]
        self.assertGreaterEqual(len(exact), 40)
        self.assertEqual([r.repo_id for r in results], [row[0] for row in exact])
        self.assertEqual(missing, [])
        self.assertEqual(api.commits, [])  # a dry run sends nothing
        for (hub_id, precision, source), result in zip(exact, results):
            self.assertEqual(result.status, "would write")
            [op] = result.operations
            self.assertEqual(op.path_in_repo, "config.json")
            self.assertEqual(op.path_or_fileobj, dump_config({**CONFIG, "trained_precision": precision}).encode())
            self.assertIn(f"Source: stated at {source}\n", result.commit_description)
            self.assertNotIn("stored in", result.commit_description)  # CONFIG names no dtype
            self.assertEqual(result.parent_commit, api.model_info(hub_id).sha)

    def test_push_opens_a_pull_request(self):
        stored_in_fp16 = dump_config({**CONFIG, "torch_dtype": "float16"})
        api = FakeHubApi(self.tmp, configs={"tiiuae/falcon-7b": stored_in_fp16})
        code, out, _ = run(api, "TIIUAE/Falcon-7B", "--push")  # ids as the Hub resolves them
        self.assertEqual(code, 0, out)
        self.assertIn("[written] tiiuae/falcon-7b: opened https://huggingface.co/tiiuae/", out)
        [(repo_id, operations, kwargs)] = api.commits
        self.assertEqual(repo_id, "tiiuae/falcon-7b")
        self.assertTrue(kwargs["create_pr"])
        self.assertEqual(kwargs["parent_commit"], api.model_info(repo_id).sha)
        self.assertEqual(kwargs["commit_message"], prs.PR_TITLE)
        self.assertIn("https://huggingface.co/tiiuae/falcon-7b", kwargs["commit_description"])
        self.assertIn("The weights in this repo are stored in fp16", kwargs["commit_description"])
        self.assertEqual(json.loads(operations[0].path_or_fileobj)["trained_precision"], "bf16")

    def test_dry_run_is_the_default(self):
        api = FakeHubApi(self.tmp)
        code, out, _ = run(api, "EleutherAI/gpt-neo-1.3B")
        self.assertEqual(code, 0)
        self.assertIn("[would write] EleutherAI/gpt-neo-1.3B", out)
        self.assertIn('+  "trained_precision": "bf16",', out)
        self.assertEqual(api.commits, [])

    def test_skips_and_errors(self):
        ids = ["EleutherAI/gpt-neo-1.3B", "EleutherAI/gpt-neox-20b", "bigscience/bloom"]
        configs = {
            "EleutherAI/gpt-neo-1.3B": dump_config({**CONFIG, "trained_precision": "bf16"}),
            "EleutherAI/gpt-neox-20b": dump_config({**CONFIG, "trained_precision": "bf16"}),  # the row says fp16
        }
        api = FakeHubApi(self.tmp, configs, failing=("bigscience/bloom",))
        results, _ = prs.open_prs(ids, push=True, api=api)  # in the order of the rows, sorted by id
        self.assertEqual([r.repo_id for r in results], ["bigscience/bloom", *ids[:2]])
        self.assertEqual([r.status for r in results], ["error", "unchanged", "error"])
        self.assertIn("cannot reach bigscience/bloom", results[0].message)
        self.assertIn("pass --force", results[2].message)
        self.assertEqual(api.commits, [])
        code, _, _ = run(api, *ids, "--push")
        self.assertEqual(code, 4)  # not done: 1 means risky and nothing else

    @parameterized.expand([("open",), ("merged",), ("closed",)])
    def test_any_earlier_pr_is_an_answer(self, status):
        api = FakeHubApi(self.tmp, earlier_prs=[(prs.PR_TITLE, status)])
        code, out, _ = run(api, "EleutherAI/gpt-neo-1.3B", "--push")
        self.assertEqual(code, 0)
        self.assertIn(f"[skipped] EleutherAI/gpt-neo-1.3B: an earlier PR already proposed it (#7, {status})", out)
        self.assertIn("--force", out)
        self.assertEqual(api.commits, [])
        # --force opens another one anyway
        code, out, _ = run(api, "EleutherAI/gpt-neo-1.3B", "--push", "--force")
        self.assertEqual(code, 0)
        self.assertEqual(len(api.commits), 1)

    def test_an_id_that_is_no_exact_row_is_not_done(self):
        api = FakeHubApi(self.tmp)
        for hub_id in ("not/in-registry", "google-t5/t5-*"):  # a glob row is a family, not a repo
            code, _, err = run(api, hub_id)
            self.assertEqual(code, 4)
            self.assertIn(f"not exact-id rows of utils/trained_precisions.json: {hub_id}", err)
        self.assertEqual(api.commits, [])

    def test_json_is_one_document_with_the_exit_code(self):
        api = FakeHubApi(self.tmp)
        code, out, err = run(api, "not/in-registry", "EleutherAI/gpt-neo-1.3B", "--json")
        document = json.loads(out)  # one document: "Extra data" otherwise
        self.assertEqual((code, document["exit_code"]), (4, 4))
        self.assertEqual(document["not_in_registry"], ["not/in-registry"])
        self.assertIn("not exact-id rows", document["error"])
        self.assertEqual([r["status"] for r in document["results"]], ["would write"])
        self.assertEqual(err, "")
        # a usage error too
        code, out, _ = run(api, "--bogus", "--json")
        self.assertEqual((code, json.loads(out)["exit_code"]), (2, 2))
        self.assertEqual(api.commits, [])


# EleutherAI/gpt-neo-1.3B's config.json in its layout (keys sorted, the attention patterns as inline arrays), cut short
GPT_NEO_CONFIG = """{
  "activation_function": "gelu_new",
  "architectures": [
    "GPTNeoForCausalLM"
  ],
  "attention_layers": ["global", "local", "global", "local"],
  "attention_types": [[["global", "local"], 12]],
  "model_type": "gpt_neo",
  "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50, "temperature": 0.9}},
  "tokenizer_class": "GPT2Tokenizer",
  "transformers_version": "4.9.0.dev0",
  "vocab_size": 50257
}
"""
SOURCE = "https://github.com/EleutherAI/gpt-neo/blob/master/configs/GPT3_XL_pretrained.json"


class WriteConfigsTest(TestCasePlus):
    """`--write_configs`: the same edit as the pull requests, into local clones of the repos."""

    def clone(self, text):
        path = Path(self.get_auto_remove_tmp_dir())
        (path / "config.json").write_text(text, encoding="utf-8")
        (path / "config.json").chmod(0o644)
        return path

    def test_only_the_fields_line_changes_atomically(self):
        clone = self.clone(GPT_NEO_CONFIG)
        code, out, err = run(None, "EleutherAI/gpt-neo-1.3B", "--write_configs", str(clone))
        self.assertEqual((code, err), (0, ""))
        self.assertEqual(out, f"{clone / 'config.json'}: wrote 'bf16' (EleutherAI/gpt-neo-1.3B, {SOURCE})\n")
        new = (clone / "config.json").read_text(encoding="utf-8").splitlines(keepends=True)
        self.assertEqual([line for line in new if line not in GPT_NEO_CONFIG], ['  "trained_precision": "bf16",\n'])
        self.assertEqual("".join(line for line in new if "trained_precision" not in line), GPT_NEO_CONFIG)
        self.assertEqual(os.listdir(clone), ["config.json"])  # the temporary file was moved into place
        self.assertEqual(stat.S_IMODE((clone / "config.json").stat().st_mode), 0o644)
        self.assertEqual(run(None, "EleutherAI/gpt-neo-2.7B", "--write_configs", str(clone))[0], 4)  # says bf16
        self.assertEqual(run(None, "EleutherAI/gpt-neo-2.7B", "--write_configs", str(clone), "--force")[0], 0)
        self.assertIn('  "trained_precision": "fp32",\n', (clone / "config.json").read_text(encoding="utf-8"))

    def test_bad_input_is_a_message_not_a_traceback(self):
        bad = self.clone('{"vocab_size": 8,}')
        empty = Path(self.get_auto_remove_tmp_dir())
        for args, code, expected in [
            (["EleutherAI/gpt-neo-125M", "--write_configs", str(bad)], 2, "has no published precision"),
            (["EleutherAI/gpt-neo-1.3B", "--write_configs", str(empty)], 2, f"no config.json in {empty}"),
            (["EleutherAI/gpt-neo-1.3B", "--write_configs", str(bad)], 4, "left as it is: malformed JSON"),
            (["--write_configs", str(bad)], 2, "give exactly one"),
        ]:
            with self.subTest(expected):
                result, out, err = run(None, *args)
                self.assertEqual(result, code)
                self.assertIn(expected, out + err)
                self.assertNotIn("Traceback", out + err)
        self.assertEqual((bad / "config.json").read_text(encoding="utf-8"), '{"vocab_size": 8,}')
        self.assertEqual(os.listdir(bad), ["config.json"])
