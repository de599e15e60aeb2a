"""Heterogeneous sampling against homogeneous sampling on the same 1M-node, ~15M-edge graph.

Generates (once, into ``--out``) a heterogeneous dataset: node types ``paper`` (600k),
``author`` (350k), ``field`` (50k); relations ``author writes paper`` and ``paper written_by
author`` (4 authors per paper, power-law author popularity), ``paper cites paper`` (12 per paper,
power-law), ``field topic_of paper`` and ``paper has_topic field`` (2 per paper); about 14.4M
stored edges and 16 float32 features per type. Then runs ``graphfeed bench sample`` on it:
the ``HeteroNeighborSampler`` through the loader and the homogeneous ``NeighborSampler`` on the
fused CSC (same seeds, same fanouts), alternating ``--rounds`` times, and prints the per-edge
cost ratio (target <= 1.5x).

    python benchmarks/hetero_sample.py --out /tmp/hetero-1m [--batches 30 --rounds 5 --json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def generate(out: Path, seed: int = 0) -> None:
    import numpy as np

    from graphfeed.datasets.format import write_dataset
    from graphfeed.datasets.hetero import HeteroParts
    from graphfeed.graph.hetero import HeteroGraph

    rng = np.random.default_rng(seed)
    P, A, F = 600_000, 350_000, 50_000

    def popular(n, size, alpha=1.2):
        w = rng.pareto(alpha, n) + 1.0
        cum = np.cumsum(w)
        return np.minimum(np.searchsorted(cum, rng.random(size) * cum[-1]), n - 1)

    wp = np.repeat(np.arange(P), 4)
    wa = popular(A, wp.shape[0])
    cd = np.repeat(np.arange(P), 12)
    cs = popular(P, cd.shape[0])
    tp = np.repeat(np.arange(P), 2)
    tf = popular(F, tp.shape[0])
    edges = {("author", "writes", "paper"): (wa, wp), ("paper", "written_by", "author"): (wp, wa),
             ("paper", "cites", "paper"): (cs, cd), ("field", "topic_of", "paper"): (tf, tp),
             ("paper", "has_topic", "field"): (tp, tf)}
    t0 = time.perf_counter()
    g = HeteroGraph.from_edges({"paper": P, "author": A, "field": F}, edges)
    print(f"built {g} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    labels = np.full(g.num_nodes, -1, np.int64)
    labels[:P] = rng.integers(0, 10, P)
    feats = {t: {"feat": rng.standard_normal((n, 16), dtype=np.float32)}
             for t, n in g.num_nodes_dict.items()}
    write_dataset(out, graph=g.csc, node_features={"label": labels},
                  splits={"train": rng.permutation(P)[: P // 2]}, num_classes=10,
                  name="hetero-1m", hetero=HeteroParts(g, feats, target_type="paper"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                epilog="other arguments go to 'graphfeed bench sample'")
    p.add_argument("--out", default="/tmp/graphfeed-hetero-1m")
    args, rest = p.parse_known_args()
    out = Path(args.out)
    if not (out / "graphfeed.json").exists():
        generate(out)
    from graphfeed.cli.main import main as cli

    return cli(["bench", "sample", "--graph", str(out), *rest])


if __name__ == "__main__":
    sys.exit(main())
