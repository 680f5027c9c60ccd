# Developer and CI entry points of the trained_precision fork. See README.md and CONTRIBUTING.md.
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
# The torch release the suite runs on. From PyPI on Linux, torch==2.13.0 is the multi-GB CUDA build (our CI machines
# carry a local CPU wheel); the CPU build, or a CUDA build for your GPU, into a fresh $(VENV) (pip keeps a torch already
# there that satisfies TORCH): TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" (or .../whl/cu126).
# Installing the fork and its extras then pins the torch $(VENV) holds.
TORCH ?= torch==2.13.0
# the torch that $(VENV) holds, as a pin (TORCH's index options would hide PyPI from the fork's other dependencies)
TORCH_INSTALLED = "torch==$$($(VPY) -c 'from importlib.metadata import version; print(version("torch"))')"
EXTRAS ?= trained-precision-testing,optimi,trained-precision-demo
# one pytest worker per core, each test file on one worker (as upstream runs its suite); PYTEST_WORKERS=0 runs serially
PYTEST_WORKERS ?= auto
PYTEST_ARGS ?=
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS := 1

.PHONY: venv install test check fork export fork-install smoke demo bench clean

$(VPY):
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip

# The venv with CPU torch, the fork built as a wheel (isolated build), and its test extras.
venv: $(VPY)
	$(VPY) -m pip install -q $(TORCH)

install: venv
	rm -rf dist && $(VPY) -m pip wheel -q --no-deps -w dist .
	$(VPY) -m pip install -q "$$(ls dist/transformers-*.whl)[$(EXTRAS)]" $(TORCH_INSTALLED)
	$(VPY) -m pip install -q --no-deps --force-reinstall dist/transformers-*.whl

# The test command of README.md and .ci/run.
test: install
	cd tests && ../$(VPY) -m pytest -q -rfEs --rootdir=.. -c ../pyproject.toml -n $(PYTEST_WORKERS) --dist=loadfile $(PYTEST_ARGS) .

# The guard, stamp, pure-bf16 and distributed tests on another torch release, in a venv of its own (.venv-torch-X.Y.Z):
# `make test-torch TORCH_NEW="torch==2.14.1"`. A bare release from the package index is the CUDA build with Triton,
# which is what most users install, also on machines without a GPU. See CONTRIBUTING.md for the releases tested.
TORCH_NEW ?= torch==2.14.1
TORCH_NEW_VENV ?= .venv-$(subst ==,-,$(TORCH_NEW))
TORCH_NEW_TESTS ?= utils/test_trained_precision_sentinel*.py trainer/test_trainer_trained_precision*.py \
	trainer/test_trainer_pure_bf16*.py
.PHONY: test-torch
test-torch:
	$(MAKE) install VENV=$(TORCH_NEW_VENV) TORCH="$(TORCH_NEW)"
	$(TORCH_NEW_VENV)/bin/python -c "import importlib.util, torch; print('torch', torch.__version__, \
	'cuda', torch.version.cuda, 'triton', importlib.util.find_spec('triton') is not None, \
	'gpu', torch.cuda.is_available())"
	cd tests && ../$(TORCH_NEW_VENV)/bin/python -m pytest -q -rfEs --rootdir=.. -c ../pyproject.toml \
	-n $(PYTEST_WORKERS) --dist=loadfile $(PYTEST_ARGS) $(TORCH_NEW_TESTS)

# Repo consistency: the patch series applies exactly; the stack table places every change, and its pull requests
# break no rule and raise no warning (check --strict); everything that goes upstream passes ruff with upstream's own
# configuration (from the pinned sdist, cached in .cache/), each earlier branch's copy of a file with regions too;
# all our files pass our own rules; the published precisions (utils/trained_precisions.json) are valid and sorted,
# and the registry's table in docs/source/en/trained_precision_registry.md is current.
check: $(VPY)
	@$(VPY) -m ruff --version >/dev/null 2>&1 || $(VPY) -m pip install -q ruff==0.14.10
	$(VPY) tools/patchset.py check
	$(VPY) tools/upstream_pr.py check --strict
	$(VPY) -m ruff check setup.py tools utils tests src benchmarks examples
	$(VPY) -m ruff format --check setup.py tools utils tests src benchmarks examples
	@$(VPY) -c "import transformers" >/dev/null 2>&1 || $(MAKE) install
	$(VPY) utils/check_trained_precision.py
	$(VPY) utils/check_trained_precision_registry.py
	$(VPY) tools/upstream_pr.py lint

# Developer loop: fork/ holds upstream + one commit per patch; edit there, commit, `make export`.
fork: $(VPY)
	$(VPY) tools/patchset.py fork
	$(MAKE) fork-install

fork-install: venv
	$(VPY) -m pip install -q -e ".[$(EXTRAS)]" $(TORCH_INSTALLED)

export: $(VPY)
	$(VPY) tools/patchset.py export
	$(VPY) tools/patchset.py check

# Upstream pull requests: a stack of branches in a clone of huggingface/transformers, one per entry of
# tools/pr_stack.toml, each based on the one before, and one description per branch (.cache/pr-descriptions, or
# DESCRIPTIONS=dir). A stack that breaks the rules (size, tests-only PRs, later links or reads) is refused; STRICT=1
# also refuses one with warnings (imports, untested modules, words).
# Moving to a new upstream release: rebase fork/, export patches/, bump the pin and its sha256. See CONTRIBUTING.md.
.PHONY: pr pr-test rebase
pr:
	@test -n "$(UPSTREAM)" || { echo "usage: make pr UPSTREAM=/path/to/transformers-clone [BASE=v5.25.0] [BRANCH=prefix] [STRICT=1]"; exit 2; }
	$(PYTHON) tools/upstream_pr.py pr --upstream "$(UPSTREAM)" $(if $(BASE),--base "$(BASE)") $(if $(BRANCH),--branch "$(BRANCH)") $(if $(STRICT),--strict) $(if $(DESCRIPTIONS),--descriptions "$(DESCRIPTIONS)")

# Each branch of the stack, on its own src/: `from transformers.trained_precision import *`, ruff with upstream's
# configuration on the files it changes, and the tests it adds (torch and the test extras from .venv).
pr-test: $(VPY)
	@test -n "$(UPSTREAM)" || { echo "usage: make pr-test UPSTREAM=/path/to/transformers-clone [BASE=v5.25.0] [BRANCH=prefix]"; exit 2; }
	$(VPY) tools/upstream_pr.py test-stack --upstream "$(UPSTREAM)" $(if $(BASE),--base "$(BASE)") $(if $(BRANCH),--branch "$(BRANCH)")

rebase:
	@test -n "$(VERSION)" || { echo "usage: make rebase VERSION=x.y.z"; exit 2; }
	$(PYTHON) tools/upstream_pr.py rebase "$(VERSION)"

# The README's demo: a small GPT-Neo trained in fp32, pure bf16 + torch AdamW and pure bf16 + optimi AdamW with Kahan
# summation; writes demo_output/ (loss_curves.png, summary.md, three checkpoints). It times a few steps first and picks
# the model size that fits DEMO_ARGS="--budget SECONDS" (default 200): under 5 minutes also where bf16 is emulated.
DEMO_ARGS ?=
demo: EXTRAS = optimi,trained-precision-demo
demo: install
	$(VPY) examples/pure_bf16_demo.py --output_dir demo_output $(DEMO_ARGS)

# The speed comparison, in one process with the runs' steps interleaved: ratios to bf16=True and fp32 with their spread,
# an optimizer-step benchmark in parameters/s and the machine class (~5 minutes where bf16 is native; where it is
# emulated (AVX2-only CPUs), use BENCH_ARGS="--hidden 64 --seq_len 64 --layers 2").
# BENCH_ARGS="--json a.json", twice, then `benchmarks/benchmark_pure_bf16.py --compare a.json b.json`: do they repeat?
BENCH_ARGS ?=
bench: EXTRAS = optimi,torchao,trained-precision-demo
bench: install
	$(VPY) benchmarks/benchmark_pure_bf16.py $(BENCH_ARGS)

# The installed wheel works in a fresh venv without torch (also run by .ci/run).
smoke: $(VPY)
	bash tools/smoke_install.sh

clean:
	rm -rf build dist .cache *.egg-info
