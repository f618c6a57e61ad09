# Python binding (py/): included by the top-level Makefile.
#   make py-venv     create .venv-py (python3 -m venv) with maturin, pytest, numpy,
#                    array-api-strict (the Array API tests' second reference) and hypothesis
#                    (generated shapes and values) from PyPI
#   make py-install  pip install ./py into that venv (maturin release build, workspace target/)
#   make py-test     the pytest suite in py/tests (every op against numpy, errors, threads)
#   make py-bench    per-op Python overhead over kiln-core, numpy round-trip bandwidth

PY_VENV          ?= .venv-py
PY_PYTHON        := $(PY_VENV)/bin/python
PYTHON3          ?= python3
CARGO_TARGET_DIR ?= $(CURDIR)/target

.PHONY: py-venv py-install py-test py-bench

# The stamp's name changes with the package list, so an existing venv gets the new packages.
$(PY_VENV)/.kiln-venv-ready-2:
	@scripts/ensure-deps.sh venv
	test -x $(PY_PYTHON) || $(PYTHON3) -m venv $(PY_VENV)
	$(PY_PYTHON) -m pip install -q --upgrade pip
	$(PY_PYTHON) -m pip install -q "maturin>=1.5,<2" pytest numpy array-api-strict hypothesis
	touch $@

py-venv: $(PY_VENV)/.kiln-venv-ready-2

# --no-build-isolation: use the venv's maturin rather than fetching one per build; the wheel is
# built by maturin in release mode into the workspace target/ (shared with every other crate).
py-install: py-venv deps
	PATH="$(abspath $(PY_VENV))/bin:$$PATH" CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) $(PY_PYTHON) -m pip install --no-build-isolation --force-reinstall --no-deps ./py

py-test: py-install
	$(PY_PYTHON) -m pytest -q py/tests

py-bench: py-install
	$(PY_PYTHON) py/bench/bench.py

TEST_TARGETS += py-test
