# auditmesh: `make run` serves the mesh; `make test` runs the whole suite. Both set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
TRITON_VENV := .venv-triton
PY := $(VENV)/bin/python
STUBS := services/common/gen
REPO := model_repository
DEBIAN_BCC := /usr/lib/python3/dist-packages/bcc
DEBIAN_PACKAGES := fonts-wqy-zenhei python3-bpfcc libbpfcc linux-headers-$(shell dpkg --print-architecture 2>/dev/null || echo amd64) iperf3
PROTOS := $(wildcard protos/auditmesh/v1/*.proto)

.PHONY: help setup fonts system-deps bcc-venv venv triton-venv stubs models run lint test test-slow accuracy clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup: venv stubs models fonts ## everything needed to run and benchmark: venv, generated stubs, model repository, CJK font

fonts: ## the CJK font the benchmarks and tests render text images with (fonts-wqy-zenhei); installs when root
	@dpkg -s fonts-wqy-zenhei >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fonts-wqy-zenhei; \
	  else echo "missing Debian package fonts-wqy-zenhei (benchmarks and tests render text images with it): run 'sudo apt-get install fonts-wqy-zenhei'"; exit 1; fi; }

system-deps: ## Debian packages the tests need (CJK font for test images; bcc, kernel headers, iperf3 for ebpf/); installs when root
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

venv: $(VENV)/.installed ## Python environment from requirements*.txt (requirements-build.txt: PyTorch, to fine-tune at build time)
$(VENV)/.installed: requirements.txt requirements-data.txt requirements-build.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -r requirements-data.txt
	$(PY) -m pip install -q -r requirements-build.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
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

models: $(REPO)/.built ## model repository built from the installed wheels (no downloads)
$(REPO)/.built: $(VENV)/.installed $(wildcard services/*/build/*.py services/text/*.py services/text/data/*.yaml services/text/data/corpus/*.jsonl bench/probe_sets/en_*.tsv)
	$(PY) -m services.text.build.build_models --repository $(REPO)
	$(PY) -m services.vision.build.build_models --repository $(REPO)
	$(PY) -m services.ocr.build.build_models --repository $(REPO)
	touch $@

run: setup ## start router + text + vision + ocr on loopback and serve until Ctrl-C
	$(PY) -m services.launcher --config-dir config

lint: setup ## strict mypy over services, tests, bench, ebpf and the client (auditmesh/client) (config in pyproject.toml)
	$(PY) -m mypy services tests bench ebpf auditmesh

test: setup system-deps bcc-venv triton-venv lint ## the whole test suite (what CI runs): mypy, then pytest
	$(PY) -m pytest -q

test-slow: setup system-deps bcc-venv triton-venv ## load/soak tests only
	$(PY) -m pytest -q -m slow

accuracy: setup ## decision quality JSON per profile on the corpus test split (bench/quality.py), with the old held-out table
	$(PY) -m bench.quality

clean: ## remove generated files (venv kept)
	rm -rf $(STUBS) $(REPO) .pytest_cache
