# The README's two commands: `make run` and `make test`. Both create .venv and install what they
# need; a second call installs nothing (stamp files follow pyproject.toml). llama-cpp-python builds
# from source once; pip keeps the built wheel in its cache for every later venv.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# A portable x86-64 build: a native build may enable AMX and die with "Illegal instruction".
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: run test lint typecheck unit integration bench-parser bench-dispatch bench-backend clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.run-deps: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[llama]"
	touch $@

$(VENV)/.test-deps: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[dev]"
	touch $@

run: $(VENV)/.run-deps
	$(PY) -m tooldispatch demo

test: $(VENV)/.test-deps lint typecheck
	$(PY) -m pytest

lint: $(VENV)/.test-deps
	$(PY) -m ruff check src tests
	$(PY) -m ruff format --check src tests

typecheck: $(VENV)/.test-deps
	$(PY) -m mypy

unit: $(VENV)/.test-deps
	$(PY) -m pytest tests/unit

integration: $(VENV)/.test-deps
	$(PY) -m pytest tests/integration

bench-parser: $(VENV)/.test-deps
	$(PY) -m tooldispatch bench parser

bench-dispatch: $(VENV)/.test-deps
	$(PY) -m tooldispatch bench dispatch

bench-backend: $(VENV)/.test-deps
	$(PY) -m tooldispatch bench backend

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
