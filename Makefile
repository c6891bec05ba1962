# gpuop — two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.gpuop-installed
# node_modules/.bin first: `npm ci` puts Node 24 there (package.json), which jsii and the cdk8s CLI run on,
# and the `cdk8s` command itself.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
# The cdk8s CLI asks the npm registry for a newer release on every run (an HTTP error and a stack trace
# when offline); its yargs options read CDK8S_* variables, so this turns the check off (--no-check-upgrade).
export CDK8S_CHECK_UPGRADE := false

.PHONY: setup refs rig cosign kueue flux test-gitops bench-rehearsal run test test-fast test-quick test-crash fuzz bench bench-10k bench-floors bench-gate bench-profile schema clean checkov-venv

setup: $(STAMP)

$(STAMP): pyproject.toml package.json package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -U pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	npm ci --no-audit --no-fund --loglevel=error
	touch $(STAMP)

# The upstream reference data the tests compare against (NVIDIA's chart, CRDs and assets, Argo CD / Flux
# CRDs, OLM objects), at the commits refs.lock pins, checksums verified, into .refs/. Standard library only.
# REFS_MIRROR=URL fetches from a copy laid out like .refs/ instead of the upstream repositories.
refs:
	$(PYTHON) tools/refs.py $(if $(REFS_MIRROR),--mirror $(REFS_MIRROR))

# The rehearsal rig (tests/test_rehearsal_rig.py, bench/rehearsal.py): kube-apiserver, -controller-manager,
# -scheduler, etcd, kwok and nfd-master, built with `go build` from the wrapper modules pinned in
# tools/rehearsal/ into ~/.cache/gpuop/rig/<digest>/bin (GPUOP_RIG_DIR to choose), once per pinned version.
# KUBEBUILDER_ASSETS names a folder of binaries you already have: nothing is built. Needs Go >= 1.26 and the
# Go module proxy; outside CI a failed build leaves the rig tests skipped, under CI (CI set) it stops here.
rig:
	@if [ -n "$$KUBEBUILDER_ASSETS" ]; then echo "rig: KUBEBUILDER_ASSETS=$$KUBEBUILDER_ASSETS: nothing built"; \
	else $(PYTHON) tools/rehearsal/build.py || [ -z "$$CI" ]; fi

# cosign (chart signing, `gpuop images resolve --verify-key`, and the signing tests), built with `go build`
# from the wrapper module tools/rehearsal/cosign pins into ~/.cache/gpuop/cosign/<digest>/bin, once per
# pinned version (a cold build: about 8 minutes of CPU). Outside CI a failed build leaves the signing
# tests skipped; under CI it stops here.
cosign:
	@$(PYTHON) tools/rehearsal/build.py --cosign || [ -z "$$CI" ]

# Kueue's controller manager (the rehearsal admits a probe Workload per ResourceFlavor of a cluster's queues),
# built from the wrapper module tools/rehearsal/kueue pins into ~/.cache/gpuop/kueue/<digest>/bin. Outside CI a
# failed build leaves the queues' admission a note of the rehearsal; under CI it stops here.
kueue:
	@$(PYTHON) tools/rehearsal/build.py --kueue || [ -z "$$CI" ]

run: setup
	$(VENV)/bin/gpuop synth profiles -o dist

# checkov has its own venv: checkov 3.3.30 needs packaging<24, pytest 9.2 needs packaging>=24.
CHECKOV_STAMP := .venv-checkov/.installed
checkov-venv: $(CHECKOV_STAMP)
$(CHECKOV_STAMP): pyproject.toml
	$(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/python -m pip install -q --disable-pip-version-check 'checkov==3.3.30'
	touch $(CHECKOV_STAMP)

# Flux's source-, kustomize- and helm-controller (the GitOps lane: tests/test_gitops_rehearsal.py and the health
# gate's rehearsal), built from the wrapper modules tools/rehearsal/flux-* pin into ~/.cache/gpuop/flux/<digest>/bin
# (a cold build: about 1,234 CPU seconds, bench/gitops.json), once per pinned version. Outside CI a failed build
# leaves the lane skipped; under CI it stops here.
flux:
	@$(PYTHON) tools/rehearsal/build.py --flux || [ -z "$$CI" ]

# Two workers (the machine's cores); loadfile keeps each module's fixtures in one worker. The Go tools the suite
# runs are built first, once per pinned version (a fresh machine's first build: about 61 CPU minutes, within
# CI's 90 minutes with the suite: docs/rehearsal.md "The first build"); the GitOps lane is part of the suite.
test: setup checkov-venv rig cosign kueue flux
	$(PY) -m pytest -n 2 --dist loadfile

# The tests that start no process (tests/conftest.py marks them fast; nobody marks one by hand).
test-fast: setup
	$(PY) -m pytest -n 2 -m fast

# The suite without the tests marked slow (wheel build, cdk8s CLI, fleets, publish, kill -9 trials, ...).
test-quick: setup
	$(PY) -m pytest -n 2 --dist loadfile -m "not slow"

fuzz: setup  # the profile fuzzer with a large random budget (FUZZ_EXAMPLES=N to change it)
	GPUOP_FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-2000} $(PY) -m pytest -q tests/test_fuzz.py

# Every kill -9 point of the output transaction (the suite runs a subset; docs/output-transaction.md).
test-crash: setup
	GPUOP_CRASH_TRIALS=all $(PY) -m pytest -n 2 --dist loadfile tests/test_transaction.py tests/test_transaction_recovery.py

bench: setup
	$(PY) bench/fleet.py

bench-10k: setup
	$(PY) bench/fleet.py --profiles 10000 --out bench/results-10k.json

bench-floors: setup
	$(PY) bench/floors.py

bench-gate: setup
	$(PY) bench/gate.py

# The GitOps lane alone (`make test` runs it too): Flux's source-, kustomize- and helm-controller built from the Go
# module proxy reconcile gpuop's committed output on the rehearsal rig (docs/gitops-rehearsal.md).
test-gitops: setup rig flux
	GPUOP_GITOPS=1 $(PY) -m pytest -q tests/test_gitops_rehearsal.py tests/test_health_gate_rehearsal.py

bench-rehearsal: setup rig
	$(PY) bench/rehearsal.py

bench-profile: setup
	$(PY) bench/profile.py --profiles 200

schema: setup
	$(VENV)/bin/gpuop schema

clean:
	rm -rf $(VENV) .venv-checkov node_modules cdk8s.out
