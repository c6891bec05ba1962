# gpuop — two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.gpuop-installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: setup run test bench schema clean

setup: $(STAMP)

$(STAMP): pyproject.toml package.json package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -U pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	npm ci --no-audit --no-fund --loglevel=error
	touch $(STAMP)

run: setup
	$(VENV)/bin/gpuop synth profiles -o dist

test: setup
	$(PY) -m pytest

bench: setup
	$(PY) bench/fleet.py

schema: setup
	$(VENV)/bin/gpuop schema

clean:
	rm -rf $(VENV) node_modules cdk8s.out
