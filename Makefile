# Everything a fresh machine needs: `make demo`, `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install sysdeps demo test test-fast lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	# pywb's CDXJ index reader for the tests (six, python-dateutil, werkzeug, redis in dev);
	# not its whole dependency set, whose brotlipy replaces Brotli's module
	$(BIN)/pip install -q --no-deps 'pywb==2.10.0'
	touch $(STAMP)

install: $(STAMP)

# Debian packages the tests need (redis-server, chromium, nginx, wget), installed when missing
sysdeps:
	bash scripts/system-deps.sh

demo: $(STAMP)
	$(BIN)/python demo/run_demo.py

test: $(STAMP) sysdeps
	$(BIN)/pytest -q -p no:cacheprovider

test-fast: $(STAMP) sysdeps
	$(BIN)/pytest -q -p no:cacheprovider -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench demo
	$(BIN)/mypy

# Skitter vs Scrapy on ../shared/bench's synthetic web (bench/README.md); BENCH_POLITE=1: polite run
bench: $(STAMP)
	bash bench/run_bench.sh

clean:
	rm -rf $(VENV) demo-out build *.egg-info src/*.egg-info
