# The two commands a newcomer needs: `make demo` and `make test`.
# Both create .venv themselves; nothing else must be installed first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck bench services clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,bench,spark]'
	touch $(STAMP)

# PostgreSQL is the production backend; the tests need it running.
services:
	@bash scripts/ensure-postgres.sh

demo: $(STAMP)
	$(BIN)/python -m examples.demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

test: $(STAMP) services lint typecheck
	$(BIN)/pytest

bench: $(STAMP) services
	$(BIN)/python -m benchmarks.eventstore
	$(BIN)/python -m benchmarks.aggregates
	$(BIN)/python -m benchmarks.projections
	$(BIN)/python -m benchmarks.spark
	$(BIN)/python -m benchmarks.sagas

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
