# Every target creates .venv on first use and installs what it needs.
PY ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck check bench clean venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/oma demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check oma_actors tests bench
	$(BIN)/ruff format --check oma_actors tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

check: test lint typecheck

bench: $(STAMP)
	$(BIN)/python bench/actors.py
	$(BIN)/python bench/checkpoint.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache oma-demo-out
