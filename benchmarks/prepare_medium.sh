#!/usr/bin/env bash
# Prepare the built-in medium graph from a raw edge-list CSV through the generic importer and
# report time and peak RSS against the size of the prepared dataset (docs/benchmarks.md).
# Usage: benchmarks/prepare_medium.sh [WORKDIR]   (needs ~1.5 GB free in WORKDIR)
set -euo pipefail
work=${1:-/tmp/graphfeed-prepare-bench}
py=${PYTHON:-.venv/bin/python}
mkdir -p "$work"
"$py" - "$work" <<'PY'
import sys
import numpy as np
from graphfeed.datasets.synthetic import SPECS, generate_arrays

w = sys.argv[1]
a = generate_arrays(SPECS["medium"])
np.savetxt(f"{w}/edges.csv", np.stack([a.src, a.dst], 1), fmt="%d", delimiter=",",
           header="src,dst", comments="")
np.save(f"{w}/feat.npy", a.features)
np.save(f"{w}/label.npy", a.labels)
for k, v in a.splits.items():
    np.save(f"{w}/{k}.npy", v)
print(f"{len(a.src):,} one-way edges written to {w}/edges.csv")
PY
rm -rf "$work/out"
/usr/bin/time -v "$py" -m graphfeed prepare generic --edges "$work/edges.csv" \
    --features "feat=$work/feat.npy" --labels "$work/label.npy" \
    --train "$work/train.npy" --valid "$work/valid.npy" --test "$work/test.npy" \
    --undirected --drop-self-loops --dedupe --num-classes 16 --name medium-from-csv "$work/out" \
    2> >(grep -E "Elapsed|Maximum resident" >&2)
du -sh "$work/out"
