# terrain — the whole setup is `make demo` and `make test`; each installs what is missing.
SHELL := /bin/bash
.DEFAULT_GOAL := build

# chromium: the report's browser test (pytest -m browser) opens the HTML report in it.
# graphviz: the ML-ACO experiment draws its placements (dot).
# openssh-server, openssh-client, iproute2: the test hosts of the ssh launcher (network namespaces with sshd).
# slurmctld, slurmd, slurm-client, munge: `terrain testbed up --slurm` and the real-SLURM tests (docs/TESTBED.md).
# elixir: the Elixir example project (examples/elixir_app) that depends on terrain.
# gcc, libc6-dev: the native netem proxy (apps/terrain_lab/c_src, built by rebar3's compile hook).
APT_PACKAGES := erlang-nox erlang-dev rebar3 erlang-common-test erlang-dialyzer erlang-proper erlang-proper-dev \
                chromium graphviz openssh-server openssh-client iproute2 slurmctld slurmd slurm-client munge elixir \
                gcc libc6-dev
VENV := .venv
PYTHON := $(VENV)/bin/python
REBAR := rebar3
TEST_PATHS = $(wildcard _build/test/lib/*/ebin) $(wildcard _build/test/lib/*/test)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup apt build escript check compile xref dialyzer docs eunit ct proper pytest examples test bench demo clean formats

## setup: Erlang/OTP, rebar3 and test applications from Debian; the Python package in .venv
setup: apt $(VENV)/.installed

apt:
	@missing=$$(for p in $(APT_PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "installing from Debian:" $$missing; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(VENV)/.installed: python/pyproject.toml
	@[ -x $(PYTHON) ] || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -e 'python[test]'
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

## bench: every benchmark (figures go to docs/BENCHMARKS.md with this command)
bench: setup build
	@$(REBAR) as test compile
	@epmd -daemon
	erl -noshell -sname terrain_bench -kernel prevent_overlapping_partitions false -pa $(TEST_PATHS) -eval 'terrain_test_runner:bench(), halt().'
	@for b in python/bench/*.py; do if [ -e "$$b" ]; then $(PYTHON) "$$b" || exit 1; fi; done

## demo: the demo cluster walk-through, then the lab's tools run into the same run directory, ending in runs/<stamp>/report.html
demo: setup build
	@epmd -daemon
	bin/terrain demo
	@echo "to watch a live cluster in a browser: bin/terrain up examples/live.cluster --live, then bin/terrain dashboard and open http://127.0.0.1:8470/ (docs/DASHBOARD.md)" >&2

clean:
	$(REBAR) clean
	rm -rf bin _build/test/logs examples/erlang_app/_build examples/elixir_app/_build examples/elixir_app/deps
