# sglang-lab: Ansible for SGLang optimization experiments.
# The two commands a user needs are `make demo` and `make test`; each sets up
# what it needs on a fresh machine (venv, containers) before it runs.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Python: prefer pyenv's 3.12 (what the project is pinned and tested on), then
# any python3.12 on PATH, then python3 (>= 3.11) with a warning.
PYENV_PY312 := $(wildcard /root/.pyenv/versions/3.12.*/bin/python3.12)
PYTHON ?= $(or $(firstword $(PYENV_PY312)),$(shell command -v python3.12 2>/dev/null),python3)
VENV := .venv
VPY := $(VENV)/bin/python
VBIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(VBIN):$(PATH)
export PYTHONDONTWRITEBYTECODE := 1

WORK := .work
RESULTS := results
DEMO_TIER ?= t03-single-batch-overlap

.PHONY: help venv demo test lint pytest unit integration wheels flashinfer-wheel molecule containers check-tiers tier-docs manifests flag-history perf campaign-demo fleet-demo report browser real-gpu-kit real-gpu-check gpu-check clean distclean

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): requirements.txt constraints.txt requirements-nodeps.txt
	@ver=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	case "$$ver" in 3.12) ;; 3.1[1-9]) echo "WARNING: using Python $$ver from '$(PYTHON)'; the project is pinned and tested on 3.12 (set PYTHON=...)" >&2 ;; \
	  *) echo "ERROR: Python >= 3.11 is required, '$(PYTHON)' is $$ver. Install 3.12 (pyenv install 3.12) or set PYTHON=/path/to/python3.12" >&2; exit 1 ;; esac
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip==26.3
	$(VPY) -m pip install -q -r requirements.txt -c constraints.txt
	$(VPY) -m pip install -q --no-deps -r requirements-nodeps.txt
	touch $@

venv: $(STAMP) ## Create the pinned controller venv (.venv)

demo: $(STAMP) ## Run the baseline and one more tier against the simulator, then build the report
	$(VBIN)/ansible-playbook playbooks/demo.yml -e demo_tier=$(DEMO_TIER)

# CI has 2 cores. lint, pytest (-n 2) and molecule side by side took 48 min on 2026-12-05: pytest 42
# min against 13 alone, molecule 44 against 11; three CPU-bound jobs on two cores thrash, and the
# tests' own waits grow with them. So two phases: first the jobs that leave a core free between them
# (lint, the unit tests in one process, molecule, whose containers wait on apt and pip), then the
# integration tests alone on both cores (two xdist workers: they wait on servers about half the time).
# browser first: its apt-get must not race setup-podman.sh's under -j (on a fresh machine).
test: $(STAMP) $(WHEELS) $(FLASHINFER_WHEEL) browser ## Lint, every test and every molecule scenario (what CI runs)
	$(MAKE) --no-print-directory -j3 lint unit molecule
	$(MAKE) --no-print-directory integration

lint: $(STAMP) ## yamllint, ansible-lint (production), ruff, shellcheck
	$(VBIN)/yamllint -s .
	$(VBIN)/ansible-lint --offline
	$(VBIN)/ruff check .
	git ls-files '*.sh' .ci/run | xargs -r $(VBIN)/shellcheck
	$(VPY) tools/render_tier_docs.py --check

# The two SGLang wheels whose real parser the manifest tests compare against
# (pinned, 0.5.17 - the newest that runs on the lent H200 - and 0.5.23),
# fetched once into the tool's cache.
WHEEL_CACHE := .cache/sglang-wheels
WHEELS := $(WHEEL_CACHE)/0.5.10.post1/.fetched $(WHEEL_CACHE)/0.5.17/.fetched $(WHEEL_CACHE)/0.5.23/.fetched

$(WHEEL_CACHE)/%/.fetched: | $(STAMP)
	$(VPY) -m pip download -q --no-deps -d $(WHEEL_CACHE)/$* sglang==$*
	touch $@

wheels: $(WHEELS) ## Fetch the SGLang wheels the flag-manifest tests parse

# The FlashInfer wheel whose files the patch catalogue (roles/flashinfer) is checked against
# (tests/unit/test_provision_patches.py): fetched here, so no unit test makes a network call.
FLASHINFER_VERSION := $(shell sed -n 's/^flashinfer_version: "\(.*\)"$$/\1/p' roles/flashinfer/defaults/main.yml)
FLASHINFER_WHEEL := .cache/flashinfer-wheels/$(FLASHINFER_VERSION)/.fetched

$(FLASHINFER_WHEEL): roles/flashinfer/defaults/main.yml | $(STAMP)
	$(VPY) -m pip download -q --no-deps -d .cache/flashinfer-wheels flashinfer-python==$(FLASHINFER_VERSION)
	mkdir -p $(@D) && touch $@

flashinfer-wheel: $(FLASHINFER_WHEEL) ## Fetch the FlashInfer wheel the patch-catalogue tests read

# Everything under tests/ (pyproject.toml's testpaths): tests/integration and tests/unit.
pytest: $(STAMP) $(WHEELS) $(FLASHINFER_WHEEL) browser ## Unit and integration tests (simulator, modules, playbooks, the HTML report in Chromium)
	$(VPY) -m pytest -q -n 2 --dist loadfile --durations=25

integration: $(STAMP) $(WHEELS) browser ## Integration tests only (tests/integration): playbooks, servers, Chromium
	$(VPY) -m pytest -q -n 2 --dist loadfile --durations=25 tests/integration

# The folder is the selection: tests/unit holds no playbook run and no server (tests/conftest.py
# stops a run whose tests/unit has an integration mark, fixture or helper). A unit test that hangs
# fails after 2 min (pytest-timeout), not the 15 min an integration test is given.
unit: $(STAMP) $(WHEELS) $(FLASHINFER_WHEEL) ## Unit tests only (tests/unit): no playbook runs, no servers (about two minutes)
	$(VPY) -m pytest -q tests/unit --timeout=120

browser: ## Install headless Chromium (Debian's package) for the campaign HTML page's browser test
	bash tools/browser/setup-chromium.sh

containers: $(STAMP) ## Install podman and build the local Debian test image (cached)
	bash tools/containers/setup-podman.sh
	bash tools/containers/build-image.sh

# One scenario at a time (tools/containers/molecule-all.sh). Two lanes beside pytest's two
# workers made a fresh-clone CI run slower, not faster (36.6 min against 33.1; 2 cores, CPU-bound).
MOLECULE_JOBS ?= 1
molecule: containers ## Every molecule scenario in podman
	MOLECULE_JOBS=$(MOLECULE_JOBS) bash tools/containers/molecule-all.sh

check-tiers: $(STAMP) ## Tiers x SGLang versions flag-check matrix
	$(VPY) tools/check_tiers.py

crash-corpus: $(STAMP) $(WHEELS) $(WHEEL_CACHE)/0.5.17/.fetched ## Crash catalogue vs the real-log corpus: per-class precision/recall, accuracy, regex evidence
	$(VPY) tools/crash_corpus.py --evidence

tier-docs: $(STAMP) ## Regenerate docs/tiers/ from data/tiers.yml
	$(VPY) tools/render_tier_docs.py

manifests: $(STAMP) ## Rebuild the flag manifests from downloaded SGLang wheels
	$(VPY) tools/build_flag_manifest.py --version 0.5.10.post1 --version 0.5.17 --version 0.5.23

flag-history: $(STAMP) ## Rebuild data/flag_manifests/history.json from every wheel in .cache/sglang-wheels
	$(VPY) tools/build_flag_manifest.py --out-dir .cache/flag-manifests --history data/flag_manifests/history.json $(WHEEL_CACHE)/*/sglang-*.whl

perf: $(STAMP) ## Lifecycle latency and per-cycle orchestration overhead vs seeds-style bash (results/perf.json)
	$(VPY) tools/perf_lifecycle.py

# The simulator crashes t01 the way real SGLang did for the seeds (dynamo/FlashInfer-FP4 while
# capturing piecewise CUDA graphs), and changes t09's greedy outputs (SGLANG_SIM_NUMERICS=perturbed:
# a stand-in for a tier that changes the arithmetic, so the campaign's quality rule fires); both are
# inventory business, not the campaign file's.
CAMPAIGN_DEMO_FAULTS := {"sglang_campaign_tier_env": {"t01-piecewise-cuda-graph": {"SGLANG_SIM_FAULT": "crash_on_load"}, "t09-torch-compile": {"SGLANG_SIM_NUMERICS": "perturbed"}}}

campaign-demo: $(STAMP) ## A small campaign on the simulator (baseline, t03, crashing t01, t09 with changed outputs x 2 repeats, A/A, two workloads), resumable, with its report
	$(VBIN)/ansible-playbook playbooks/campaign.yml -e campaign=data/campaigns/demo.yml -e '$(CAMPAIGN_DEMO_FAULTS)'

fleet-demo: $(STAMP) ## One campaign on two simulator nodes in parallel: calibration, verdicts per host, an SLO search, the report
	$(VBIN)/ansible-playbook -i inventory/local.yml -i inventory/fleet-local.yml playbooks/campaign.yml -e campaign=data/campaigns/fleet-demo.yml

report: $(STAMP) ## Markdown report + PNG chart, and each campaign's .md/.png/.html, from results/*/ledger.jsonl
	$(VBIN)/ansible-playbook playbooks/report.yml

real-gpu-kit: $(STAMP) ## Build here what real-gpu-check carries to the lent H200 (.whl, .awhl, .device-kit)
	bash tools/device/make_kit.sh

real-gpu-check: ## On the lent H200 (PHASE=a, then PHASE=b): the playbooks against real SGLang 0.5.17 (tools/device/)
	bash tools/device/real_gpu_check.sh

gpu-check: $(STAMP) ## On a GPU node: hold GPU memory, verified stop, telemetry (see docs/gpu.md)
	bash tools/gpu_check.sh

clean: ## Remove run state and results (keeps the venv)
	rm -rf $(WORK) $(RESULTS)

distclean: clean ## Also remove the venv
	rm -rf $(VENV)
