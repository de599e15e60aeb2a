"""A user's own papers-sized input for ``graphfeed prepare generic`` (issue 38, item 2): the
``papers`` graph (``graphfeed.datasets.synthetic_papers``) written as an edge list, in no
useful order, with small float32 features and papers100M-like labels.

    python benchmarks/make_edge_list.py OUT [--scale 1.0] [--features 16]

writes into folder ``OUT``:

- ``edges.npy``: ``(E, 2)`` int32 ``(src, dst)`` pairs, 1.6 billion at full size (12.9 GB):
  the graph's columns cut into ranges of about 16M edges, the ranges written in a random order
  and the pairs of each range shuffled (an input sorted by destination would flatter the build);
- ``feat.npy``: ``(N, 16)`` float32 (7.1 GB): class centroid plus unit noise;
- ``labels.npy``: ``(N,)`` int64, -1 except the 1.55M nodes of papers' splits (as
  ogbn-papers100M labels only its arXiv papers), for ``--split 0.8,0.1,0.1``.

Memory: the in-degrees (8 bytes a node) and one range. Then, for example:

    /usr/bin/time -v graphfeed prepare generic --edges OUT/edges.npy --features OUT/feat.npy \\
        --labels OUT/labels.npy --split 0.8,0.1,0.1 DATASET
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

CHUNK_EDGES = 1 << 24
ROWS = 1 << 20


def main(argv=None) -> int:
    from graphfeed.datasets import _papers_kernels as K
    from graphfeed.datasets import synthetic_papers as P
    from graphfeed.datasets.build import NpyAppender

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = P.SPEC.scaled(a.scale)
    law = P._Law.of(spec)
    n = spec.num_nodes
    t0 = time.perf_counter()
    indptr = np.zeros(n + 1, dtype=np.int64)
    labels = np.empty(n, dtype=np.int64)
    K.nodes_degrees_labels(0, n, n, law.keys, law.half, law.mask, law.class_start, law.gspan,
                           law.g0, spec.popularity_offset, spec.popularity_exponent,
                           law.mean_degree, law.caps, np.uint64(spec.seed) ^ np.uint64(1),
                           indptr[1:], labels)
    np.cumsum(indptr, out=indptr)
    e = int(indptr[-1])
    cuts = [0]
    while cuts[-1] < n:
        hi = int(np.searchsorted(indptr, indptr[cuts[-1]] + CHUNK_EDGES, side="right")) - 1
        cuts.append(min(n, max(hi, cuts[-1] + 1)))
    rng = np.random.default_rng(a.seed)
    order = rng.permutation(len(cuts) - 1)
    with NpyAppender(out / "edges.npy", np.int32, row_shape=(2,), rows_bound=e) as f:
        for k, c in enumerate(order):
            lo, hi = cuts[c], cuts[c + 1]
            cols = np.empty(int(indptr[hi] - indptr[lo]), dtype=np.int32)
            K.fill_columns(lo, hi, indptr, cols, n, law.keys, law.half, law.mask,
                           law.class_start, law.gspan, law.g0, spec.popularity_offset,
                           spec.popularity_exponent, spec.homophily,
                           np.uint64(spec.seed) ^ np.uint64(2))
            pairs = np.empty((cols.shape[0], 2), dtype=np.int32)
            pairs[:, 0] = cols
            pairs[:, 1] = np.repeat(np.arange(lo, hi, dtype=np.int32),
                                    np.diff(indptr[lo:hi + 1]))
            f.write(pairs[rng.permutation(pairs.shape[0])])
            print(f"\redges {k + 1}/{len(order)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    del indptr
    centroids = np.random.default_rng(a.seed + 1).standard_normal((spec.num_classes, a.features))
    with NpyAppender(out / "feat.npy", np.float32, row_shape=(a.features,), rows_bound=n) as f:
        for lo in range(0, n, ROWS):
            hi = min(n, lo + ROWS)
            x = rng.standard_normal((hi - lo, a.features), dtype=np.float32)
            x += (spec.signal * centroids[labels[lo:hi]]).astype(np.float32)
            f.write(x)
    keep = np.empty(spec.num_train + spec.num_valid + spec.num_test, dtype=np.int64)
    K.permute_range(0, keep.shape[0], n, law.split_keys, law.half, law.mask, keep)
    y = np.full(n, -1, dtype=np.int64)
    y[keep] = labels[keep]
    np.save(out / "labels.npy", y)
    print(f"{e:,} edges, {n:,} nodes, {keep.shape[0]:,} labelled, in "
          f"{time.perf_counter() - t0:.0f} s -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
