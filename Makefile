# The two commands a fresh machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.benchlib-installed
SMOKE  ?= params/smoke_cpu.yaml
# The sizes params/smoke_cpu.yaml's data_prep row asks for (so that row reuses the data).
SMOKE_DATA ?= --offline --size 6000 --fashion-size 6000 --cifar-size 2048 --imagefolder-size 200

.PHONY: setup run test test-fast lint lab report clean-outputs gpu-check screenshot

# Create or update .venv with the pinned versions in constraints.txt (torch 2.14.1,
# torchvision 0.29.1, timm, transformers, HTA, MLflow, TensorBoard, torchao, ...). Re-runs only when the pins or pyproject.toml change.
# uv (pinned, installed into the venv by pip) does the install: about 3x faster than pip
# here, figures in docs/commands.md. uv reads no pip.conf: where pip must go through a
# mirror of your own, `make setup INSTALLER=pip` (or set UV_DEFAULT_INDEX).
INSTALLER ?= uv
EXTRAS := .[dev,jax,models,traces,export,fp8,streaming]
# the streaming extra's libraries whose own pins clash with ours (constraints.txt says which):
# installed without their dependencies, at the versions constraints.txt pins
STREAMING_NODEPS := boto3 botocore s3transfer litdata mosaicml-streaming
setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "benchlib needs Python >= 3.11, found " + sys.version.split()[0]'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
ifeq ($(INSTALLER),uv)
	$(PY) -m pip install --quiet -c constraints.txt uv
	$(VENV)/bin/uv pip install --quiet --python $(PY) --compile-bytecode -c constraints.txt -e '$(EXTRAS)' \
	  || { echo "setup: uv could not install; trying pip (make setup INSTALLER=pip goes straight there)"; \
	       $(PY) -m pip install --quiet -c constraints.txt -e '$(EXTRAS)'; }
	$(VENV)/bin/uv pip install --quiet --python $(PY) --no-deps -c constraints.txt $(STREAMING_NODEPS) \
	  || $(PY) -m pip install --quiet --no-deps -c constraints.txt $(STREAMING_NODEPS)
else
	$(PY) -m pip install --quiet -c constraints.txt -e '$(EXTRAS)'
	$(PY) -m pip install --quiet --no-deps -c constraints.txt $(STREAMING_NODEPS)
endif
	@# benchlib's own bytecode, once: where PYTHONDONTWRITEBYTECODE is set (as on this VM),
	@# each process compiles what it imports of benchlib again: the studies, analysis and
	@# report a kernel imports took 0.78 s, against 0.58 s compiled. The installer compiled the rest
	$(PY) -m compileall -q benchlib examples
	@# strip notebook outputs on commit (a test also checks this)
	-git rev-parse --git-dir >/dev/null 2>&1 && $(VENV)/bin/nbstripout --install
	touch $(STAMP)

# Data generated offline, the smoke study on CPU, then the analysis and the report.
# Rows already done are skipped; the report is published even when a row failed,
# and the exit status then says so.
run: setup
	$(PY) -m benchlib data --path outputs/data $(SMOKE_DATA)
	$(PY) -m benchlib sweep $(SMOKE); status=$$?; \
	$(PY) -m benchlib report && exit $$status

# Two pytest-xdist workers: most of the suite's time is spent waiting (ranks joining, Slurm's
# queue, kernels starting), so two overlap well on two cores; TEST_WORKERS=0 runs one process
TEST_WORKERS ?= 2
test: lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

# ruff (pyflakes, pycodestyle, import order; configured in pyproject.toml), as pre-commit runs it
lint: setup
	$(VENV)/bin/ruff check benchlib tests scripts

# The pure layers only (config, params, results, analysis, rendering, argv building): no
# Slurm, no ranks started, no notebook executed, no GPU; under a minute.
FAST_TESTS := tests/test_architecture.py tests/test_parameters.py tests/test_params.py \
	tests/test_results.py tests/test_analysis.py tests/test_timing.py tests/test_multinode.py \
	tests/test_lightning.py tests/test_slurm.py tests/test_notebooks.py tests/test_packaging.py
test-fast: lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not slurm and not distributed and not notebook and not gpu" $(FAST_TESTS)

report: setup
	$(PY) -m benchlib report

# Every GPU path on a single-GPU machine (scripts/gpu-check.sh), in six parts of one call of
# under 10 minutes each (GPU_CHECK_PART=2: the language model, timm and transformers models;
# 3: IO, traces, the comm hook's cost; 4: torch.compile cold and warm; 5: the largest batch;
# 6: float8 training); the
# image's own python is enough: it installs nothing.
GPU_CHECK_OUT ?= outputs/gpu-check
GPU_CHECK_PART ?= 1
gpu-check:
	scripts/gpu-check.sh $(GPU_CHECK_OUT) --part $(GPU_CHECK_PART)

# JupyterLab on notebooks/ with the project's kernel ("benchlib (.venv)", registered into
# .venv, not your home); LAB_ARGS passes options on, e.g. LAB_ARGS="--port 8890"
# The README's picture of the landing page (docs/report-landing.png), from outputs/report
# (make run first), by headless chromium at 1400 px wide
screenshot:
	scripts/screenshot.sh

lab: setup
	VENV=$(VENV) scripts/lab.sh $(LAB_ARGS)

clean-outputs:
	find outputs -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
