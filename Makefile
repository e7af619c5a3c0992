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
# `make run`, `make test` and the benchmarks keep using the repository's model cache (CI keeps it between runs);
# an installed tooldispatch uses the per-user cache instead (~/.cache/tooldispatch/models: `tooldispatch config path`).
export TOOLDISPATCH_MODELS_DIR ?= $(CURDIR)/models/cache

.PHONY: run test test-vllm test-vulkan test-clients lint typecheck unit integration compiled clean-compiled wheel bench-parser bench-dispatch bench-backend clean

# The parser and repair modules, compiled with mypyc into extension modules beside their sources (see
# setup.py). They are rebuilt when one of them changes. On a machine with a C compiler a failed build stops
# here (`make test` then tests the build users get, or nothing); with no C compiler at all the sources run as
# they are: the same behaviour, slower (see docs/benchmarks.md). `make run` goes on with the sources either way.
COMPILED_SRC := setup.py src/tooldispatch/types.py src/tooldispatch/toolspec.py \
	$(shell find src/tooldispatch/parsing src/tooldispatch/repair -name '*.py')
CC_FOUND := $(shell command -v $${CC:-cc} >/dev/null 2>&1 && echo yes)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.run-deps: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[llama]"
	touch $@

$(VENV)/.test-deps: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[dev]"
	touch $@

$(VENV)/.compiled: $(COMPILED_SRC) | $(PY)
	$(PIP) install -q "mypy>=1.11" "setuptools>=77" wheel types-jsonschema types-regex
	@echo "compiling the parser and repair modules with mypyc (about a minute on two cores)"
	@TOOLDISPATCH_MYPYC=1 $(PY) setup.py -q build_ext --inplace >$(VENV)/compile.log 2>&1 \
		&& find src -name '*.so' -exec touch {} + \
		|| { $(MAKE) --no-print-directory clean-compiled; \
			if grep -q '^src/tooldispatch/' $(VENV)/compile.log; then \
				grep '^src/tooldispatch/' $(VENV)/compile.log; \
				echo "error: mypyc rejected the sources above; fix them (the whole log: $(VENV)/compile.log)"; exit 1; fi; \
			if [ -n "$(CC_FOUND)" ] && [ -z "$(ALLOW_SOURCES)" ]; then \
				tail -n 20 $(VENV)/compile.log; \
				echo "error: the compiled build failed with a C compiler present (the whole log: $(VENV)/compile.log);"; \
				echo "  fix it, or run the sources on purpose with ALLOW_SOURCES=1"; exit 1; fi; \
			echo "note: no C compiler ($${CC:-cc}); the pure-Python modules run instead"; }
	touch $@

compiled: $(VENV)/.compiled

clean-compiled:
	find src -name '*.so' -delete
	rm -f $(VENV)/.compiled

# What users install, in dist/: the sdist, then from it the compiled wheel (the mypyc modules inside, for this
# platform and Python) and the pure-Python wheel (py3-none-any) pip takes where no compiled wheel fits. Each
# wheel is built in its own unpacked copy of the sdist (build/wheel/), so the in-place .so files of
# `make compiled` never reach the pure wheel and the sdist is known to build both ways; a pip install of the
# sdist itself builds the pure package.
BUILD_DEPS := "mypy>=1.11" "setuptools>=77" wheel types-jsonschema types-regex
BUILD_WHEEL := from setuptools import build_meta as b; print(b.build_wheel("$(CURDIR)/dist"))

wheel: $(VENV)/.run-deps $(VENV)/.test-deps  # mypyc type-checks the package as mypy does: every optional dependency (mcp, psycopg)
	$(PIP) install -q $(BUILD_DEPS)
	rm -rf dist build/wheel
	mkdir -p build/wheel/compiled build/wheel/pure
	$(PY) -c 'from setuptools import build_meta as b; b.build_sdist("dist")' >build/wheel/sdist.log
	tar -xzf dist/tooldispatch-*.tar.gz -C build/wheel/compiled --strip-components=1
	tar -xzf dist/tooldispatch-*.tar.gz -C build/wheel/pure --strip-components=1
	@echo "compiling the wheel with mypyc (a few minutes on two cores; the log: build/wheel/compiled.log)"
	cd build/wheel/compiled && TOOLDISPATCH_MYPYC=1 $(CURDIR)/$(PY) -c '$(BUILD_WHEEL)' >../compiled.log 2>&1 \
		|| { tail -n 20 ../compiled.log; exit 1; }
	cd build/wheel/pure && $(CURDIR)/$(PY) -c '$(BUILD_WHEEL)' >../pure.log 2>&1 || { tail -n 20 ../pure.log; exit 1; }
	@ls -l dist

run: $(VENV)/.run-deps
	@$(MAKE) --no-print-directory $(VENV)/.compiled || echo "note: the compiled build failed; the demo runs on the sources"
	$(PY) -m tooldispatch demo

test: $(VENV)/.test-deps lint typecheck $(VENV)/.compiled
	$(PY) -m pytest

# The tests marked vllm, against the server `scripts/vllm-cpu.sh serve` started (its state file says where);
# without one they skip, saying how to start it. `make test` leaves them out.
test-vllm: $(VENV)/.test-deps $(VENV)/.compiled
	$(PY) -m pytest -m vllm tests/integration/vllm

# The tests marked vulkan: the strix-halo-vulkan profile launching the Vulkan llama-server that
# scripts/fetch-llama-server-vulkan.sh installs, on a Vulkan device (a Radeon, or Mesa's lavapipe on any CPU:
# apt-get install mesa-vulkan-drivers). Without the binary or a device they skip, saying what to install.
test-vulkan: $(VENV)/.test-deps $(VENV)/.compiled
	$(PY) -m pytest -m vulkan tests/integration/vulkan

# The tests marked live: Qwen Code and opencode, installed here with npm, finishing a task through the proxy
# with the packaged model in process (minutes each; TOOLDISPATCH_LIVE_MODEL=NAME@QUANT picks another model).
CLIENTS := build/clients
test-clients: $(VENV)/.test-deps $(VENV)/.compiled
	npm install --prefix $(CLIENTS) --no-audit --no-fund --loglevel=error @qwen-code/qwen-code@0.15.10 opencode-ai@1.18.33
	TOOLDISPATCH_CLIENTS_DIR=$(CLIENTS) $(PY) -m pytest -m live -s tests/live

lint: $(VENV)/.test-deps
	$(PY) -m ruff check setup.py src tests
	$(PY) -m ruff format --check setup.py src tests

typecheck: $(VENV)/.test-deps
	$(PY) -m mypy

unit: $(VENV)/.test-deps $(VENV)/.compiled
	$(PY) -m pytest tests/unit

integration: $(VENV)/.test-deps $(VENV)/.compiled
	$(PY) -m pytest tests/integration

bench-parser: $(VENV)/.test-deps $(VENV)/.compiled
	$(PY) -m tooldispatch bench parser

bench-dispatch: $(VENV)/.test-deps $(VENV)/.compiled
	$(PY) -m tooldispatch bench dispatch

bench-backend: $(VENV)/.test-deps $(VENV)/.compiled
	$(PY) -m tooldispatch bench backend

clean: clean-compiled
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache .pytest_cache
