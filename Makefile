# Task runner. Everything runs inside .venv, which `make setup` creates from pyproject.toml.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-extended bench lab clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	# uv installs the same resolution as pip in ~15 s instead of ~55 (pip stays the fallback)
	( $(BIN)/pip install -q uv && $(BIN)/uv pip install -q --python $(BIN)/python -e '.[dev]' ) \
	  || ( $(BIN)/pip install -q --upgrade pip && $(BIN)/pip install -q -e '.[dev]' )
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)  ## the main job: the default experiment batch, writing artifacts/
	-$(BIN)/lob engines build orderly_chaos  # no compiler / no index: one line, runs without it
	$(BIN)/lob main

test: $(STAMP)  ## the test suite (quick sizes + the seed-sized checks that matter) and nbval
	$(BIN)/ruff check lob tests
	-$(BIN)/lob engines build orderly_chaos  # no compiler / no index: one line, tests skip it
	# each notebook runs once: nbval executes it (defaults = the quick preset) into a temporary
	# artifacts folder, and the tests read its outputs from there (tests/notebooks)
	nb=$$(mktemp -d) && \
	LOB_ARTIFACTS=$$nb $(BIN)/pytest -q -n 2 --dist loadfile --nbval-lax -p no:cacheprovider notebooks && \
	LOB_NB_OUTPUTS=$$nb $(BIN)/pytest -q -n 2 --durations=20 tests

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
