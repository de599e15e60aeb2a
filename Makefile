# graphfeed: two set-up commands on a fresh machine.
#   make demo   creates .venv, installs graphfeed with what the demo needs, trains on the default dataset
#   make test   same environment, the whole test suite
# Re-running skips work already done (the environment is rebuilt only when pyproject.toml changes).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.graphfeed-installed
# torch: an interpreter that already has torch keeps it (the venv then sees the system site-packages).
# Otherwise a machine without an NVIDIA driver gets the CPU build; a machine with one gets pip's default.
TORCH_CPU_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
PYTEST_ARGS ?=

.PHONY: demo test venv bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@set -e; \
	if [ ! -x "$(PY)" ]; then \
	  if $(PYTHON) -c "import torch" >/dev/null 2>&1; then \
	    echo "graphfeed: $(PYTHON) already has torch $$($(PYTHON) -c 'import torch; print(torch.__version__)'); the venv reuses it"; \
	    $(PYTHON) -m venv --system-site-packages $(VENV); \
	  else \
	    $(PYTHON) -m venv $(VENV); \
	  fi; \
	fi; \
	if ! $(PY) -c "import torch" >/dev/null 2>&1; then \
	  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	    echo "graphfeed: NVIDIA GPU found, installing pip's default torch build"; \
	    $(PY) -m pip install -q "torch>=2.1" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)); \
	  else \
	    echo "graphfeed: no GPU, installing the CPU build $(TORCH_CPU_SPEC)"; \
	    $(PY) -m pip install -q "$(TORCH_CPU_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)); \
	  fi; \
	fi; \
	$(PY) -m pip install -q -e ".[pyg,lmdb,dev]"; \
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m graphfeed train

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m graphfeed bench sample --dataset medium

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis
