# The two commands of the README: `make demo` and `make test`. Each installs first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
STORE ?= ./turnlens-data

.PHONY: install demo test test-fast lint sample bench browser clean

install: $(STAMP)

$(STAMP): pyproject.toml setup.py collector/_otlp_wire.pyx
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,frameworks]'
	touch $(STAMP)

# Debian's chromium for the browser tests (Playwright drives it; it never downloads a browser).
browser:
	bash scripts/install-chromium.sh

demo: install
	$(BIN)/turnlens demo --store $(STORE)

test: install browser lint
	$(BIN)/python -m pytest

test-fast: install
	$(BIN)/python -m pytest -m 'not slow'

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy turnlens collector queries dashboard sample_data

sample: install
	$(BIN)/turnlens simulate --seed 7 --sessions 120 --out sample_data/sample.jsonl.gz --labels sample_data/sample_labels.json

bench: install
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/queries.py
	$(BIN)/python bench/dashboard.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
