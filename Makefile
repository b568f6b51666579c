# Everything a fresh machine needs: `make demo`, `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# tests run two at a time (pytest-xdist): on this 2-core machine the suite takes ~6.5 min, not ~9.5
TEST_WORKERS ?= 2

.PHONY: install bytecode sysdeps shared demo test test-fast lint bench bench-site bench-redis clean

# mypyc compiles setup.py's NATIVE modules at install; editing one reinstalls (until then they
# run as .py)
NATIVE_SRC := $(addprefix src/skitter/,$(shell sed -n 's/^NATIVE = \[\(.*\)\].*/\1/p' setup.py | tr -d '",'))

$(STAMP): pyproject.toml setup.py $(NATIVE_SRC) | sysdeps
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	# pywb's CDXJ index reader for the tests (six, python-dateutil, werkzeug, redis in dev);
	# not its whole dependency set, whose brotlipy replaces Brotli's module
	$(BIN)/pip install -q --no-deps 'pywb==2.10.0'
	touch $(STAMP)

# Byte-code of src/skitter, written even with PYTHONDONTWRITEBYTECODE=1 (set on this machine and
# in CI), so that a crawl does not compile every module from source at each start (~0.1 s per
# process); imports check each .pyc against its .py (mtime and size), so an edited file is
# never run stale, only compiled again until the next install.
install: $(STAMP) bytecode

bytecode: $(STAMP)
	$(BIN)/python -m compileall -q -j0 src/skitter

# Debian packages the tests need (redis-server, chromium, nginx, wget), installed when missing
sysdeps:
	bash scripts/system-deps.sh

demo: $(STAMP)
	$(BIN)/python demo/run_demo.py

# The tests read the team's shared material beside the checkout (WHATWG URL data, cases)
SHARED := ../shared/data/urltestdata.json

shared:
	@test -f $(SHARED) || { echo "make: $(SHARED) not found: the tests need ../shared beside the repository (WHATWG URL test data)" >&2; exit 1; }

test: $(STAMP) bytecode sysdeps shared
	$(BIN)/pytest -q -p no:cacheprovider -n $(TEST_WORKERS)

test-fast: $(STAMP) bytecode sysdeps shared
	$(BIN)/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench demo
	$(BIN)/mypy

# Skitter vs Scrapy, Crawlee, spider-rs on ../shared/bench's synthetic web, then vs wget on one
# big site (bench-site; BENCH_SITE=0 skips it). BENCH_POLITE=1: the polite run alone. bench/README.md
bench: $(STAMP) bytecode
	rc=0; bash bench/run_bench.sh || rc=$$?; \
	if [ "$${BENCH_SITE:-1}" = 1 ] && [ "$${BENCH_POLITE:-0}" != 1 ]; then \
	  bash bench/run_site.sh || rc=1; fi; exit $$rc

# Skitter with 1, 2, 4 workers on one Redis vs --processes 2 and Scrapy (bench/README.md)
bench-redis: $(STAMP) bytecode
	bash bench/run_redis_bench.sh

# Skitter vs wget on one big site, Debian's rust-doc served by nginx (bench/README.md)
bench-site: $(STAMP) bytecode
	bash bench/run_site.sh

clean:
	rm -rf $(VENV) demo-out build *.egg-info src/*.egg-info
