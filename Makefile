# terrain — the whole setup is `make demo` and `make test`; each installs what is missing.
SHELL := /bin/bash
.DEFAULT_GOAL := build

# What the demo needs (`make demo` installs only these):
# erlang-nox, erlang-dev, rebar3: Erlang/OTP and the build.
# python3, python3-venv: the Python package's virtualenv .venv (terrain-analysis: the fits, plots and the report).
# procps: pgrep and kill (the tests call them too).
# graphviz: the ML-ACO experiment draws its placements (dot).
# gcc, libc6-dev: the native netem proxy (apps/terrain_lab/c_src, built by rebar3's compile hook).
APT_DEMO := erlang-nox erlang-dev rebar3 python3 python3-venv procps graphviz gcc libc6-dev
# The rest, for the checks and tests (`make test` and the other targets install everything):
# erlang-common-test, erlang-dialyzer, erlang-proper, erlang-proper-dev: Common Test, dialyzer, PropEr.
# chromium: the report's browser test (pytest -m browser) opens the HTML report in it.
# openssh-server, openssh-client, iproute2: the test hosts of the ssh launcher (network namespaces with sshd).
# slurmctld, slurmd, slurm-client, munge: `terrain testbed up --slurm` and the real-SLURM tests (docs/TESTBED.md).
# elixir: the Elixir example project (examples/elixir_app) that depends on terrain.
APT_PACKAGES := $(APT_DEMO) erlang-common-test erlang-dialyzer erlang-proper erlang-proper-dev \
                chromium openssh-server openssh-client iproute2 slurmctld slurmd slurm-client munge elixir
VENV := .venv
PYTHON := $(VENV)/bin/python
REBAR := rebar3
TEST_PATHS = $(wildcard _build/test/lib/*/ebin) $(wildcard _build/test/lib/*/test)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup apt build escript check compile xref dialyzer docs eunit ct proper pytest examples test test-fast bench demo \
        bare-check clean formats

## setup: Erlang/OTP, rebar3 and test applications from Debian; the Python package in .venv
setup: apt $(VENV)/.installed

apt:
	@command -v dpkg-query >/dev/null || { echo "make: the set-up installs Debian packages with apt, and this system" \
	    "has no dpkg; install these (or your system's equivalents) by hand: $(APT_PACKAGES)" >&2; exit 1; }; \
	missing=$$(for p in $(APT_PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    if [ -n "$(SUDO)" ] && ! command -v sudo >/dev/null; then \
	        echo "make: installing" $$missing "needs root: run make as root, or install sudo (Debian package sudo)" >&2; \
	        exit 1; \
	    fi; \
	    echo "installing from Debian:" $$missing; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The virtualenv: made once (a half-made one, without pip, is removed and made again), the package installed
# into it whenever python/pyproject.toml changes. A failed creation leaves no .venv behind.
$(VENV)/.installed: python/pyproject.toml | apt
	@if [ ! -x $(VENV)/bin/pip ]; then \
	    rm -rf $(VENV); \
	    echo "making the virtualenv $(VENV)"; \
	    python3 -m venv $(VENV) || { rm -rf $(VENV); \
	        echo "make: python3 -m venv failed (Debian packages python3 and python3-venv)" >&2; exit 1; }; \
	fi
	@echo "installing the Python package terrain-analysis into $(VENV)"
	@$(VENV)/bin/pip install -q --disable-pip-version-check -e 'python[test]'
	@touch $@

## build: compile and build the escript at bin/terrain
build: apt
	@$(REBAR) compile
	@$(REBAR) escriptize >/dev/null
	@mkdir -p bin && cp _build/default/bin/terrain bin/terrain

escript: build

## check: compile with warnings as errors, xref, dialyzer
check: build xref dialyzer

xref: apt
	$(REBAR) xref
	escript tools/lab_layers.escript

dialyzer: apt
	$(REBAR) dialyzer

## docs: API documentation (edoc) of the library's public modules in _build/docs/index.html;
## fails on any edoc error in any module, or an exported function or type of a public module without documentation
docs: apt
	escript tools/edoc.escript

eunit: apt
	$(REBAR) eunit

ct: build
	@epmd -daemon
	$(REBAR) ct

proper: apt
	@$(REBAR) as test compile
	erl -noshell -pa $(TEST_PATHS) -eval 'terrain_test_runner:proper(), halt().'

## examples: the two projects that depend on terrain as users' projects do, each with its own build
## and tests: examples/erlang_app (rebar3, Common Test) and examples/elixir_app (mix, ExUnit; no hex:
## terrain's applications are path dependencies that mix builds with Debian's rebar3)
examples: apt
	@epmd -daemon
	cd examples/erlang_app && $(REBAR) ct
	cd examples/elixir_app && MIX_REBAR3=$$(command -v rebar3) REBAR_BASE_DIR=$(CURDIR)/examples/elixir_app/_build/rebar3 \
	    MIX_ENV=test mix test

pytest: $(VENV)/.installed
	cd python && ../$(VENV)/bin/python -m pytest -q

## formats: regenerate apps/terrain_json/include/terrain_formats.hrl from spec/formats.json (the registry of format
## tags and manifest kinds; python/tests/test_formats.py fails when they differ)
formats:
	python3 python/tools/formats_hrl.py

## test: everything CI runs; exits non-zero on any failure
test: setup check docs eunit ct proper examples pytest

## test-fast: the part of `make test` that takes a few minutes: the build, xref and the lab's layers, every EUnit
## test, pytest without the browser test (no Common Test, PropEr, dialyzer, API docs or example projects)
test-fast: setup build xref eunit
	cd python && ../$(VENV)/bin/python -m pytest -q -m 'not browser'

## bare-check: make demo (twice) and make test-fast on a minimal Debian bookworm root made with debootstrap that has
## only git, make and ca-certificates (tools/bare-check; what it needs: README, "Setup")
bare-check:
	tools/bare-check

## bench: every benchmark (figures go to docs/BENCHMARKS.md with this command)
bench: setup build
	@$(REBAR) as test compile
	@epmd -daemon
	erl -noshell -sname terrain_bench -kernel prevent_overlapping_partitions false -pa $(TEST_PATHS) -eval 'terrain_test_runner:bench(), halt().'
	@for b in python/bench/*.py; do if [ -e "$$b" ]; then $(PYTHON) "$$b" || exit 1; fi; done

## demo: the demo cluster walk-through, then the lab's tools run into the same run directory, ending in runs/<stamp>/report.html
## (installs only the demo's Debian packages, APT_DEMO: its prerequisites take this list from it)
demo: APT_PACKAGES = $(APT_DEMO)
demo: setup build
	@epmd -daemon
	bin/terrain demo
	@echo "to watch a live cluster in a browser: bin/terrain up examples/live.cluster --live, then bin/terrain dashboard and open http://127.0.0.1:8470/ (docs/DASHBOARD.md)" >&2

clean:
	$(REBAR) clean
	rm -rf bin _build/test/logs examples/erlang_app/_build examples/elixir_app/_build examples/elixir_app/deps
