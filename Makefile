# cairn: build, run and test.
#
#   make test    install test deps if missing (scripts/setup.sh), cargo tests, then the
#                Python integration tests (tests/) against target/release/cairn-server
#   make run     build and run the server in the foreground (extra flags: ARGS="--port 7000")
#   make build   release build of the server and of the load generator (cairn-bench)
#   make fmt     format the Rust code;  make lint: rustfmt --check + clippy -D warnings
#   make fuzz    the parsers' fuzz targets (crates/*/tests/fuzz.rs) for FUZZ_SECS (300) seconds
#                each, with overflow checks and a fresh seed (FUZZ_SEED=<n> replays one);
#                make test runs them for 5 s each (CAIRN_FUZZ_SECS)
#   make bench   the benchmark suite against Redis and memcached (bench/README.md): results,
#                tables and plots in bench/results/;  make bench-quick: < 3 minutes, bench/results/quick/
#   make bench-replication  replication lag, CPU per SET with replicas, full sync (bench/replication.py)
#   make bench-writebehind  CPU per SET with write-behind on/off, coalescing on a Zipf load (bench/writebehind.py)
#   make study-thesis  the thesis study (studies/thesis, docs/studies/thesis.md): ~1 hour;
#                make study-thesis-quick: the same rig with short runs (< 5 minutes, also in make test)
#   make study-concurrency  seed 003's concurrency-control study (studies/concurrency,
#                docs/studies/concurrency.md); make study-concurrency-quick: 2 replicas (< 5 minutes, in make test)
#   make man     the man page, generated from --help (clap_mangen): target/man/cairn-server.1
#   make docker  the container image (Dockerfile), tagged cairn:latest, naming the commit
#   make clean   remove build outputs and the test venv
#
# Knobs: PYTEST_ARGS="-k hashes -x", CAIRN_MODES=reactor (subset of server modes),
#        CAIRN_TARGET=redis|memcached (run the tests against the real peers: `make validate`),
#        CAIRN_DIFF_ROUNDS=300 (longer differential test against redis-server, tests/test_differential.py).

SHELL := /bin/bash
.DEFAULT_GOAL := build

CARGO   ?= cargo
VENV    ?= .venv
PYTHON  := $(VENV)/bin/python
SERVER  := target/release/cairn-server
ARGS    ?=
PYTEST_ARGS ?=
# Global guards (seconds): each phase is killed if it runs past these.
CARGO_TEST_TIMEOUT ?= 2400
PYTEST_TIMEOUT     ?= 1500

.PHONY: all build run test test-rust test-py setup validate validate-redis validate-memcached \
        fmt lint fuzz clean bench bench-quick bench-setup study-thesis study-thesis-quick \
        study-concurrency study-concurrency-quick \
        man docker

all: build

build:
	$(CARGO) build --release -p cairn-server -p cairn-bench

run: build
	exec ./$(SERVER) $(ARGS)

setup:
	scripts/setup.sh

# The man page from the command line's help (the settings table); not built by `make build`.
man:
	mkdir -p target/man
	$(CARGO) run --release -q -p cairn-server --example mangen -- target/man/cairn-server.1
	@echo "target/man/cairn-server.1 (man -l target/man/cairn-server.1)"

docker:
	docker build --build-arg CAIRN_COMMIT=$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown) \
		-t cairn:latest .

# Release everywhere: the integration tests need the release binary anyway, so the cargo
# tests share its dependency builds instead of compiling everything a second time in debug.
test-rust:
	timeout -k 30 $(CARGO_TEST_TIMEOUT) $(CARGO) test --workspace --release

test-py: setup build
	CAIRN_BIN="$(CURDIR)/$(SERVER)" timeout -k 30 $(PYTEST_TIMEOUT) \
		$(PYTHON) -m pytest tests/ -q $(PYTEST_ARGS)
	$(PYTHON) -m pytest clients/python/tests -q -p no:cacheprovider

test: setup
	$(MAKE) --no-print-directory test-rust
	$(MAKE) --no-print-directory test-py

# Check that the integration tests encode real Redis / memcached behaviour.
validate: validate-redis validate-memcached

validate-redis: setup
	CAIRN_TARGET=redis timeout -k 30 $(PYTEST_TIMEOUT) $(PYTHON) -m pytest tests/ -q $(PYTEST_ARGS)

validate-memcached: setup
	CAIRN_TARGET=memcached timeout -k 30 $(PYTEST_TIMEOUT) $(PYTHON) -m pytest tests/ -q $(PYTEST_ARGS)

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Debug build on purpose: overflow checks turn silent wrap-arounds into failures.
FUZZ_SECS ?= 300
FUZZ_SEED ?= $(shell date +%s)

fuzz:
	CAIRN_FUZZ_SECS=$(FUZZ_SECS) CAIRN_FUZZ_SEED=$(FUZZ_SEED) \
		$(CARGO) test --workspace --test fuzz -- --nocapture

clean:
	$(CARGO) clean
	rm -rf $(VENV) tests/.pytest_cache
	find tests -name __pycache__ -type d -prune -exec rm -rf {} +

# --- benchmarks (bench/README.md) ----------------------------------------------------------
# BENCH_ARGS passes options to bench/run.py, e.g. BENCH_ARGS="--suites null,memory --repeats 5".
BENCH_ARGS    ?=
BENCH_TIMEOUT ?= 5400
BENCH_REQ     := bench/requirements.txt
BENCH_STAMP   := $(VENV)/.requirements-bench.stamp

bench-setup: setup
	@if [ ! -f $(BENCH_STAMP) ] || ! cmp -s $(BENCH_REQ) $(BENCH_STAMP); then \
		echo "[bench] installing $(BENCH_REQ) into $(VENV)"; \
		$(PYTHON) -m pip install -q --disable-pip-version-check -r $(BENCH_REQ) && cp $(BENCH_REQ) $(BENCH_STAMP); \
	fi

bench: bench-setup build
	timeout -k 30 $(BENCH_TIMEOUT) $(PYTHON) bench/run.py $(BENCH_ARGS)

bench-quick: bench-setup build
	timeout -k 30 600 $(PYTHON) bench/run.py --quick $(BENCH_ARGS)

# Replication (issue 14): lag, primary CPU per SET with 0/1/2 replicas, full sync of 10M keys,
# cairn against redis-server -> bench/results/replication.md (REPL_BENCH_ARGS="--keys 1000000").
REPL_BENCH_ARGS ?=
.PHONY: bench-replication
bench-replication: bench-setup build
	timeout -k 30 3600 $(PYTHON) bench/replication.py $(REPL_BENCH_ARGS)

# Write-behind (issue 15): CPU per SET/HSET with write-behind off/on (Redis AOF as the peer),
# database writes saved by coalescing on a 90/10 Zipf load, write-through, against a private
# PostgreSQL -> bench/results/writebehind.md (WB_BENCH_ARGS="--rounds 3"). About 20 minutes.
WB_BENCH_ARGS ?=
.PHONY: bench-writebehind
bench-writebehind: bench-setup build
	timeout -k 30 3600 $(PYTHON) bench/writebehind.py $(WB_BENCH_ARGS)

# --- studies (docs/studies/) ---------------------------------------------------------------
# STUDY_ARGS passes options to studies/thesis/run.py, e.g. STUDY_ARGS="--fresh --repeats 5".
STUDY_ARGS ?=

study-thesis: bench-setup build
	timeout -k 30 7200 $(PYTHON) studies/thesis/run.py $(STUDY_ARGS)

study-thesis-quick: bench-setup build
	timeout -k 30 600 $(PYTHON) studies/thesis/run.py --quick $(STUDY_ARGS)

# Seed 003 (issue 16); STUDY_ARGS too, e.g. STUDY_ARGS="--db-latency-ms 1 --replicas 2,3".
study-concurrency: bench-setup build
	timeout -k 30 14400 $(PYTHON) studies/concurrency/run.py $(STUDY_ARGS)

study-concurrency-quick: bench-setup build
	timeout -k 30 600 $(PYTHON) studies/concurrency/run.py --quick $(STUDY_ARGS)
