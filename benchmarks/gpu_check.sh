#!/usr/bin/env bash
# The whole GPU checklist in one command: CUDA tests, the full suite, bench sample and train in
# the three CUDA modes on `medium` (with and without expandable segments), the allocator
# comparison and the multi-process run. Writes OUTDIR/summary.json plus one log per step.
# Usage (repository root, on a machine with a GPU): benchmarks/gpu_check.sh OUTDIR [--only a,b]
# (--only: groups sized for one 10-minute call, quick (the most wanted steps, first on a short
# loan), tests-a, tests-b, bench, train, methods, task, or step-name prefixes, run in the order
# given; see benchmarks/gpu_check.py)
# Python: $PYTHON, else .venv/bin/python when present, else python3 (with graphfeed's src on the
# path, so a machine whose python3 already has torch, numba and PyG needs no install; the LMDB
# tests need the `lmdb` package and skip without it). With numpy >= 2.4, set
# GRAPHFEED_INTERPRETER_PATH to a folder holding numpy < 2.4 (pip install --target DIR
# numpy==2.3.5): triton 3.6's interpreter, which one CUDA test compares the GPU batch with,
# needs it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ] && [ $# -ne 3 ]; then
  echo "usage: benchmarks/gpu_check.sh OUTDIR [--only PREFIX[,PREFIX...]]" >&2; exit 2
fi
py=${PYTHON:-}
if [ -z "$py" ]; then
  if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# caches inside the repository (ignored by git): the next call on the same machine reuses the
# generated datasets and the compiled numba and triton kernels
cache="$PWD/.gpu-cache"
export GRAPHFEED_HOME="${GRAPHFEED_HOME:-$cache/graphfeed}"
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$cache/numba}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$cache/triton}"
mkdir -p "$GRAPHFEED_HOME" "$NUMBA_CACHE_DIR" "$TRITON_CACHE_DIR"
mkdir -p "$1"
exec "$py" benchmarks/gpu_check.py "$@"
