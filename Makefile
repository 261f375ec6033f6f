# The two commands of the README: `make demo` and `make test`. Each installs first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ADK_VENV := .venv-adk
ADK_STAMP := $(ADK_VENV)/.installed
ADK_CONSTRAINTS := tests/frameworks/adk-constraints.txt
STORE ?= ./turnlens-data

.PHONY: install lock demo test test-fast lint docs sample bench fuzz browser java redis adk clean

install: $(STAMP)

$(STAMP): pyproject.toml setup.py collector/_otlp_wire.pyx constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,frameworks,spark]'
	touch $(STAMP)

# Record the venv's versions as the ones `make install` takes: after upgrading a package in .venv and a green
# `make test`. Unpinned, pip re-solves ~200 framework packages and can give up (resolution-too-deep).
lock: install
	{ sed -n '/^#/p' constraints.txt; $(BIN)/pip freeze --exclude-editable | grep -v '^-e'; } > constraints.tmp
	mv constraints.tmp constraints.txt

# Debian's chromium for the browser tests (Playwright drives it; it never downloads a browser).
browser:
	bash scripts/install-chromium.sh

# Debian's Java 17 for the Spark engine's tests (pyspark starts its JVM from it).
java:
	bash scripts/install-java.sh

# Debian's Redis server for the object-storage tests (JuiceFS keeps the volume's metadata in it).
redis:
	bash scripts/install-redis.sh

# Google ADK for its framework test, in an environment of its own: ADK pins an older OpenTelemetry than the
# project's, and a real application runs its agents in its own process anyway (tests/frameworks/run_adk.py).
adk: $(ADK_STAMP)

$(ADK_STAMP): $(ADK_CONSTRAINTS)
	test -x $(ADK_VENV)/bin/python || $(PY) -m venv $(ADK_VENV)
	$(ADK_VENV)/bin/pip install --quiet --upgrade pip
	$(ADK_VENV)/bin/pip install --quiet -c $(ADK_CONSTRAINTS) google-adk litellm opentelemetry-exporter-otlp-proto-http
	touch $(ADK_STAMP)

demo: install
	$(BIN)/turnlens demo --store $(STORE)

test: install browser java redis adk lint
	$(BIN)/python -m pytest

test-fast: install
	$(BIN)/python -m pytest -m 'not slow'

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy turnlens kernel instrument collector queries alerts export dashboard sample_data

# docs/views.md is generated from the views' own column comments; tests/test_docs.py fails when it is stale.
docs: install
	$(BIN)/turnlens views --markdown > docs/views.md.tmp
	mv docs/views.md.tmp docs/views.md

sample: install
	$(BIN)/turnlens simulate --seed 7 --sessions 120 --out sample_data/sample.jsonl.gz --labels sample_data/sample_labels.json

bench: install
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/queries.py
	$(BIN)/python bench/dashboard.py

# Malformed OTLP against a real collector, then valid OTLP with hostile values read back through every view,
# page query, export and alert rule; each prints a JSON summary (the tests run a small campaign of each).
FUZZ_CASES ?= 100000
FUZZ_REQUESTS ?= 400
fuzz: install
	$(BIN)/python bench/fuzz.py --cases $(FUZZ_CASES)
	$(BIN)/python bench/fuzz_values.py --requests $(FUZZ_REQUESTS)

clean:
	rm -rf $(VENV) $(ADK_VENV) build *.egg-info .pytest_cache
