# graphfeed: two set-up commands on a fresh machine.
#   make demo   creates .venv, installs graphfeed and what the demo needs (torch, numpy, numba,
#               tqdm, PyG), trains on the default dataset
#   make test   the same environment plus the tests' packages (LMDB, pytest, hypothesis, pymetis,
#               scipy, matplotlib, pyyaml, triton on a CPU torch), the whole test suite
#   make test-quick   the suite without the tests measured slow (tests/slow_tests.txt), a few minutes
# Re-running skips work already done (the environment is rebuilt only when pyproject.toml changes).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.graphfeed-installed
TEST_STAMP := $(VENV)/.graphfeed-test-installed
# torch: an interpreter that already has torch keeps it (the venv then sees the system site-packages).
# Otherwise a machine without an NVIDIA driver gets the CPU build; a machine with one gets pip's default.
TORCH_CPU_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
# triton for the tests on a CPU torch build (CUDA builds bring their own): the release the lent
# GPU machines carry with torch 2.11, so `make test` compiles every Triton kernel variant for
# sm_90 with it (tests/sampling/test_triton_compile.py). Its interpreter, which runs the kernels
# on CPU tensors in the tests, needs numpy < 2.4 (numpy 2.4 refuses the 1-element arrays it
# turns into Python ints). `make triton-compile TRITON=X.Y.Z` checks another release.
TRITON_TEST_SPEC ?= triton==3.6.0
TRITON_TEST_NUMPY ?= numpy<2.4
TRITON ?= 3.9.0
PYTEST_ARGS ?=

.PHONY: demo test test-quick venv bench clean triton-compile

venv: $(STAMP)

# the demo's environment: torch (the machine's build, or the one the interpreter has), and
# graphfeed with its own dependencies and PyG (the reference models' layers) only
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
	$(PY) -m pip install -q -e ".[pyg]"; \
	touch $(STAMP)

# the tests' environment on top: PyG, LMDB, the report's matplotlib, the test tools, and on a
# CPU torch build the Triton release of the GPU machines (its interpreter runs the kernels)
$(TEST_STAMP): $(STAMP)
	@set -e; \
	if [ "$$(uname -s)-$$(uname -m)" = "Linux-x86_64" ] && \
	   $(PY) -c "import sys, torch; sys.exit(torch.version.cuda is not None)" >/dev/null 2>&1; then \
	  echo "graphfeed: CPU torch: installing $(TRITON_TEST_SPEC) for the Triton kernel tests"; \
	  $(PY) -m pip install -q "$(TRITON_TEST_SPEC)" "$(TRITON_TEST_NUMPY)"; \
	fi; \
	$(PY) -m pip install -q -e ".[pyg,lmdb,report,dev]"; \
	touch $(TEST_STAMP)

demo: $(STAMP)
	$(PY) -m graphfeed train

test: $(TEST_STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

test-quick: $(TEST_STAMP)
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m graphfeed bench sample --dataset medium

# compile every Triton kernel variant the sampler launches for sm_90 with another triton release
# (installed beside the venv in .triton-envs/, not into it): make triton-compile TRITON=3.9.0
triton-compile: $(TEST_STAMP)
	$(PY) -m pip install -q --target .triton-envs/$(TRITON) "triton==$(TRITON)"
	GRAPHFEED_COMPILE_TRITON=.triton-envs/$(TRITON) $(PY) -m pytest -q -p no:cacheprovider \
	  tests/sampling/test_triton_compile.py -k sm90

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis .triton-envs
