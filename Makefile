# mmsim: build, test, lint and run. `make help` lists the targets.
# On a fresh machine (python3 and cargo only) `make test` and `make run` set everything up:
# a virtualenv in .venv with the build and test tools, and the extension built into it.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Build pyo3 against the venv's interpreter everywhere, so cargo and maturin share one build.
export PYO3_PYTHON := $(abspath $(BIN)/python)

# Stamps: the venv's tools, and the extension built from the current sources.
TOOLS := $(VENV)/.tools
BUILT := $(VENV)/.built
DEV_DEPS := maturin pytest pyyaml ruff hypothesis pandas pyarrow tqdm matplotlib "ray>=2.9" \
	mkdocs mkdocs-material "mkdocstrings[python]"
SOURCES := $(shell find crates profiles -type f \( -name '*.rs' -o -name '*.toml' \) -not -path '*/target/*' 2>/dev/null) \
	Cargo.toml Cargo.lock pyproject.toml

REPORT := report
NATIVE_OUT := target/native

.PHONY: help build test lint fmt run bench calibrate reproduce fuzz clean docs

help: ## list the targets
	@grep -E '^[a-z][a-zA-Z_-]*:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  make %-8s %s\n", $$1, $$2}'

$(TOOLS): Makefile
	@# Headless Chromium checks the HTML report in a test; Debian's package, when we are root.
	command -v chromium >/dev/null || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null) || true
	@# Valgrind with its tool headers and libraries builds `mmsim record`'s tool (Debian's package).
	[ -f /usr/include/valgrind/pub_tool_basics.h ] || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null) || true
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(DEV_DEPS)
	touch $@

$(BUILT): $(TOOLS) $(SOURCES)
	VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/maturin develop --release --quiet
	touch $@

build: $(BUILT) $(NATIVE_OUT)/runner ## create .venv and build the extension into it (.venv/bin/mmsim)

test: build ## build, then run the Rust and Python test suites
	cargo test --workspace --exclude mmsim-py
	$(BIN)/pytest -q --durations=25 python/tests

docs: build ## write the generated reference pages, then build the site into target/site (--strict)
	$(BIN)/python -m mmsim.docgen docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	@echo "site: target/site/index.html"

lint: $(TOOLS) ## rustfmt, clippy (warnings are errors) and ruff
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(BIN)/ruff check python scripts
	$(BIN)/ruff format --check python scripts

fmt: $(TOOLS) ## format Rust and Python sources in place
	cargo fmt --all
	$(BIN)/ruff check --fix-only --quiet python
	$(BIN)/ruff format python

run: build ## build, then reproduce every seed experiment and write the report (report/index.html)
	mkdir -p $(REPORT)
	$(BIN)/mmsim reproduce --report $(REPORT) | tee $(REPORT)/reproduce.txt
	@echo
	@echo "report: $(REPORT)/index.html (and $(REPORT)/report.md); the table above is $(REPORT)/reproduce.txt"

$(NATIVE_OUT)/stream: native/stream.c
	mkdir -p $(NATIVE_OUT)
	$(CC) -O2 -Wall -Wextra -o $@ $<

$(NATIVE_OUT)/runner: native/runner.c native/runner_host.h native/runner_parse.h native/runner_report.h \
		native/runner_files.h native/runner_ops.h native/runner_memcg.h
	mkdir -p $(NATIVE_OUT)
	$(CC) -O2 -Wall -Wextra -o $@ $<

BENCH_ARGS ?=
PROGRAMS_ARGS ?=
bench: build $(NATIVE_OUT)/stream ## simulated references/s (fast-forward off and on) vs native and cachegrind; seed workload wall times
	@command -v valgrind >/dev/null || (apt-get install -y -q valgrind >/dev/null 2>&1 || true)
	$(BIN)/python scripts/bench.py --results docs/results/bench.json $(BENCH_ARGS)
	$(BIN)/python scripts/bench_programs.py --json docs/results/bench-programs.json $(PROGRAMS_ARGS)

calibrate: build ## time a page fault on this machine's kernel beside mmsim's default profile
	$(BIN)/python scripts/calibrate_fault.py

reproduce: build ## run every seed experiment at full scale beside the published numbers (writes docs/results/reproduce.json)
	$(BIN)/mmsim reproduce --results docs/results/reproduce.json | tee target/reproduce.txt

FUZZ_SEED ?= $(shell date +%s)
FUZZ_CASES ?= 20000
PTSHARE_FUZZ_CASES ?= 150
MADVISE_FUZZ_CASES ?= 150
# The cargo profile flag of the campaign's build: release by default; empty for the test
# profile, which `make test` builds anyway and which checks integer overflow (CI uses it).
FUZZ_RELEASE ?= --release
fuzz: ## differential fuzzing campaigns against the reference model (FUZZ_SEED, FUZZ_CASES, PTSHARE_FUZZ_CASES, MADVISE_FUZZ_CASES, FUZZ_RELEASE)
	MMSIM_FUZZ_SEED=$(FUZZ_SEED) MMSIM_FUZZ_CASES=$(FUZZ_CASES) MMSIM_PTSHARE_FUZZ_CASES=$(PTSHARE_FUZZ_CASES) \
		MMSIM_MADVISE_FUZZ_CASES=$(MADVISE_FUZZ_CASES) \
		cargo test $(FUZZ_RELEASE) --workspace --exclude mmsim-py --lib fuzz_campaign -- --ignored --nocapture

clean: ## remove the virtualenv and build outputs
	rm -rf $(VENV) target $(REPORT) python/mmsim/_mmsim*.so
