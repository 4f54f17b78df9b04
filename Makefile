# Two commands do all set-up on a fresh machine:
#   make run    install, then index a repository and print a packed context for QUERY
#               (REPO=path, default .)
#   make test   install with test tools, then run the test suite (what .ci/run calls)
PYTHON ?= python3
VENV ?= .venv
REPO ?= .
QUERY ?= How is a file cut into chunks with tree-sitter?
BIN := $(VENV)/bin
# torch first, pinned: 2.13.0 resolves to a local CPU wheel; anything else pulls CUDA.
TORCH := torch==2.13.0
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) $(TORCH)
	$(PIP) -e '.[dev]'
	touch $@

# REPO and QUERY reach the commands through the environment, so a query's backticks, quotes
# or $ and a path with spaces are passed as written, never run by the shell.
export REPO QUERY
run: $(VENV)/.installed
	$(BIN)/cortex index "$$REPO"
	$(BIN)/cortex context "$$QUERY" --path "$$REPO"

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m "not slow"

lint: $(VENV)/.installed
	$(BIN)/ruff check engine indexers overlays ledger eval tests
	$(BIN)/mypy

bench: $(VENV)/.installed
	$(BIN)/python -m eval.bench_indexers

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
