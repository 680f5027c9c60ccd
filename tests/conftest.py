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
The test session runs offline in a Hugging Face home of its own: nothing the tests do (lock files of `transformers
precision set`, a cache lookup, a download attempt) reaches the user's `~/.cache/huggingface`.

`HF_HOME` and the paths derived from it (`HF_HUB_CACHE`, `HF_XET_CACHE`, `HF_ASSETS_CACHE`, `TRANSFORMERS_CACHE`) are
set here, at import, before any test module imports `huggingface_hub` (which reads them once, at its own import), and
child processes (the CLI, `torchrun`, the guide's blocks) inherit them. The folder is removed at the end of the session.
Each pytest-xdist worker (`make test` runs one per core) has its own folder.
"""

import atexit
import hashlib
import os
import shutil
import sys
import tempfile


_HF_HOME = tempfile.mkdtemp(prefix="transformers_tests_hf_home_")
atexit.register(shutil.rmtree, _HF_HOME, ignore_errors=True)
os.environ["HF_HOME"] = _HF_HOME
for _derived in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_XET_CACHE", "HF_ASSETS_CACHE", "TRANSFORMERS_CACHE"):
    os.environ.pop(_derived, None)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
# `make test` runs one pytest-xdist worker per core; torch's default of one compute thread per core in every worker
# would oversubscribe the cores (OpenMP threads spin while they wait), so each worker, and the processes it starts
# (the CLI, torchrun, the guide's blocks), computes on one thread
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
# DeepSpeed on the CPU compiles an op (`deepspeed_shm_comm`, about a minute of CPU) on its first launch, into
# `~/.cache/torch_extensions` by default. Its build file holds the venv's absolute paths, so a launch from another venv
# (another checkout) rebuilds it there, and the next launch from this one rebuilds it again: each venv keeps its own
# build, here in `.cache/`, and pays it once
os.environ.setdefault(
    "TORCH_EXTENSIONS_DIR",
    os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        ".cache",
        "torch_extensions",
        hashlib.sha256(os.path.realpath(sys.prefix).encode()).hexdigest()[:12],
    ),
)


def pytest_sessionstart(session):
    import huggingface_hub.constants

    # a test runner that imported huggingface_hub before this file (a plugin) read the user's home: refuse to run
    if os.path.realpath(huggingface_hub.constants.HF_HOME) != os.path.realpath(_HF_HOME):
        raise RuntimeError(
            "huggingface_hub was imported before tests/conftest.py set HF_HOME to a temporary folder; its constants "
            f"point at {huggingface_hub.constants.HF_HOME}. Run pytest from the repository's tests/ folder."
        )
