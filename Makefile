# Task runner. Everything runs inside .venv, which `make setup` creates from pyproject.toml.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-ci test-extended bench lab clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	# uv installs the same resolution as pip in ~15 s instead of ~55 (pip stays the fallback).
	# Bytecode is compiled at install (pip does it by default, uv only when asked): where
	# PYTHONDONTWRITEBYTECODE is set, as on this project's machines, every process would
	# otherwise compile numpy, pandas and numba from source at each import (~3 s a process;
	# the test suite and the studies start hundreds of them)
	# the distribution was named "lob" before it was "lob-workbench": that record goes first
	# (its files are this checkout's; left, two distributions would claim `lob`); and the
	# example engine earlier test runs pip-installed here (the tests no longer install it)
	for d in lob lob-listbook; do \
	  $(BIN)/python -c "import importlib.metadata as m; m.distribution('$$d')" 2>/dev/null \
	    && $(BIN)/pip uninstall -q -y $$d; \
	done; true
	( $(BIN)/pip install -q uv && \
	  $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -e '.[dev]' ) \
	  || ( $(BIN)/pip install -q --upgrade pip && $(BIN)/pip install -q -e '.[dev]' )
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)  ## the main job: the default experiment batch, writing artifacts/
	$(BIN)/python -m compileall -q lob  # lob's own bytecode, for the same reason as above
	-$(BIN)/lob engines build orderly_chaos  # no compiler / no index: one line, runs without it
	$(BIN)/lob engines warm  # numba's kernels, once, side by side
	$(BIN)/lob main

test: $(STAMP)  ## the test suite (quick sizes + the seed-sized checks that matter) and nbval
	$(BIN)/ruff check lob tests
	$(BIN)/python -m compileall -q lob  # lob's own bytecode (see $(STAMP) above)
	-$(BIN)/lob engines build orderly_chaos  # no compiler / no index: one line, tests skip it
	$(BIN)/lob engines warm  # numba's kernels, once, side by side: no nbval worker compiles one
	# each notebook runs once: nbval executes it (defaults = the quick preset) into a temporary
	# artifacts folder, and the tests read its outputs from there (tests/notebooks)
	nb=$$(mktemp -d) && \
	LOB_ARTIFACTS=$$nb $(BIN)/pytest -q -n 2 --dist loadfile --nbval-lax -p no:cacheprovider --durations=10 notebooks && \
	LOB_NB_OUTPUTS=$$nb $(BIN)/pytest -q -n 2 --durations=20 tests

test-ci: $(STAMP)  ## the long checks CI adds after `make test` (bounds-checked builds, the rest of the fuzz)
	$(BIN)/lob engines warm
	$(BIN)/pytest -q -n 2 -m ci --durations=10 tests

test-extended: $(STAMP)  ## the long checks CI covers another way (full-size counters of every version, ...)
	$(BIN)/pytest -q -n 2 -m extended tests

bench: $(STAMP)  ## benchmarks (not tests)
	$(BIN)/pytest -q -m bench -s

# JupyterLab on the repository, opening the start page notebooks/README.md (rendered);
# --allow-root only when run as root (containers). LAB_ARGS adds options, e.g. --no-browser.
LAB_ARGS ?=
lab: $(STAMP)  ## open the notebooks in JupyterLab, on their start page
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" \
	  --LabApp.default_url=/lab/tree/notebooks/README.md \
	  --LabApp.app_settings_dir="$(CURDIR)/notebooks/.lab" \
	  $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
