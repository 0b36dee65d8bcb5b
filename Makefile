# The two commands a newcomer needs: `make demo` and `make test`.
# Both create .venv themselves; nothing else must be installed first. Each
# installs only what it needs: the demo the base package, the tests and the
# benchmarks the extras they use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-fast lint typecheck bench charts services clean generate docs docs-build

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

# The type check covers the benchmarks, which import the library they compare against.
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,spark,bench]'
	touch $@ $(VENV)/.installed-base $(VENV)/.installed-bench

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[bench,spark,console]'
	touch $@ $(VENV)/.installed-base

# PostgreSQL is the production backend, Java 17 runs Spark, Chromium the console's
# browser test: the tests need all three.
services:
	@bash scripts/ensure-postgres.sh
	@bash scripts/ensure-java.sh
	@bash scripts/ensure-jdbc.sh
	@bash scripts/ensure-brokers.sh
	@bash scripts/ensure-chromium.sh

demo: $(VENV)/.installed-base
	$(BIN)/python -m examples.demo

# The sync modules are generated from their async sources: edit the async one, then this.
generate: $(VENV)/.installed-test
	$(BIN)/python scripts/async_to_sync.py

lint: $(VENV)/.installed-test
	$(BIN)/python scripts/async_to_sync.py --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	LINT_IMPORTS=$(CURDIR)/$(BIN)/lint-imports bash scripts/lint-imports.sh

typecheck: $(VENV)/.installed-test
	MYPY=$(BIN)/mypy bash scripts/typecheck.sh

# The suite runs on WORKERS pytest-xdist processes (`make test WORKERS=0`: in one). Each
# worker has its own schemas, ports and folders; tests/conftest.py puts the SparkSession's
# tests on two workers (a JVM each) and a module's shared fixtures on one (loadgroup).
WORKERS ?= 4
PARALLEL = -n $(WORKERS) --dist loadgroup

test: $(VENV)/.installed-test services lint typecheck
	$(BIN)/pytest $(PARALLEL)

# The suite without the tests that need Spark, RabbitMQ or NATS, or Chromium (marked
# spark, broker and browser: see tests/conftest.py), without those marked slow (a second
# or more each, measured: processes killed mid-batch, servers started, hypothesis models
# over real databases, and the store's whole conformance suite run again through tenants'
# stores, a replica, a pooler and a partitioned table),
# and without the lint and the type check: what to run while working. It needs
# PostgreSQL (and PgBouncer, installed beside it) only; `make test` runs it all.
test-fast: $(VENV)/.installed-test
	@bash scripts/ensure-postgres.sh
	$(BIN)/pytest $(PARALLEL) -m "not spark and not broker and not browser and not slow"

bench: $(VENV)/.installed-bench services
	$(BIN)/python -m benchmarks.eventstore
	$(BIN)/python -m benchmarks.floors
	$(BIN)/python -m benchmarks.aggregates
	$(BIN)/python -m benchmarks.projections
	$(BIN)/python -m benchmarks.spark
	$(BIN)/python -m benchmarks.sagas
	$(BIN)/python -m benchmarks.console
	$(BIN)/python -m benchmarks.cli

# The Benchmarks page's charts from the JSON records the benchmarks wrote with --json
# (docs/benchmarks/data; see benchmarks/README.md): the same records give the same PNGs.
charts: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks.charts docs/benchmarks/data/*.json --out docs/benchmarks

# The documentation site: the package and the docs extra only.
$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[docs]'
	touch $@ $(VENV)/.installed-base

# Serves the site on http://127.0.0.1:8000, rebuilt as pages change (loopback only).
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:8000

# Builds the site into build/site; any broken link, anchor or reference fails it. `make
# test` builds it too (tests/docs/test_site.py).
docs-build: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
