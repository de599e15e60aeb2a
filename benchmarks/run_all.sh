#!/usr/bin/env bash
# Every figure in docs/benchmarks.md, as JSON files in OUTDIR (run on a quiet machine).
# Usage: benchmarks/run_all.sh [OUTDIR]
set -euo pipefail
out=${1:-bench-results}
g="${PYTHON:-.venv/bin/python} -m graphfeed"
mkdir -p "$out"
for i in 1 2 3; do
  $g bench sample --dataset medium --batches 150 --baselines --json > "$out/sample_$i.json"
done
$g bench sample --dataset medium --batches 100 --replace --json > "$out/sample_replace.json"
$g bench sample --dataset medium --batches 60 --features disk --json > "$out/sample_disk.json"
$g bench sample --dataset medium --batches 60 --features lmdb --json > "$out/sample_lmdb.json"
$g bench features --dataset medium --batches 20 --warmup 20 --cold-batches 10 --repeats 3 \
  --cache-policy sieve,s3fifo,lru,clock --json > "$out/features.json"
$g bench memory --nproc 1,2,4 --dataset medium --json > "$out/memory_shared.json"
$g bench memory --nproc 1,2,4 --dataset medium --private-copy --json > "$out/memory_private.json"
echo "results in $out/"
