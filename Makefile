# Every target creates .venv on first use and installs what it needs.
PY ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck check bench clean venv node-test go-test protos

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
	$(BIN)/ruff check oma_actors sidecar scripts tests bench
	$(BIN)/ruff format --check oma_actors sidecar scripts tests bench
	$(BIN)/lint-imports
	$(BIN)/python scripts/gen_protos.py --check

typecheck: $(STAMP)
	$(BIN)/mypy

check: test lint typecheck

node-test: $(STAMP)
	cd clients/node && npm ci --no-audit --no-fund && OMA_PYTHON="$(CURDIR)/$(BIN)/python" node --test test/

go-test: $(STAMP)
	clients/go/build.sh test

protos: $(STAMP)
	$(BIN)/python scripts/gen_protos.py

bench: $(STAMP)
	$(BIN)/python bench/actors.py
	$(BIN)/python bench/checkpoint.py
	$(BIN)/python bench/sidecar.py
	$(BIN)/python bench/store_postgres.py
	$(BIN)/python bench/lease_overhead.py
	$(BIN)/python bench/journal_postgres.py
	$(BIN)/python bench/context_strategies.py
	$(BIN)/python bench/journal_p13.py
	$(BIN)/python bench/runs_p13.py
	$(BIN)/python bench/sidecar_retention.py
	$(BIN)/python bench/sidecar_scaleout.py
	$(BIN)/python bench/sidecar_outage.py
	$(BIN)/python bench/encryption.py
	$(BIN)/python bench/history.py
	$(BIN)/python bench/history.py --store sqlite
	$(BIN)/python bench/history.py --store postgres
	$(BIN)/python bench/store_prefix.py
	$(BIN)/python bench/dispatch_marks.py
	$(BIN)/python bench/redaction.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache oma-demo-out
