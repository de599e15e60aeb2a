"""Wide 0/1 features stored as uint8 (issue 41, item 6): a GraphSAGE training step whose first
layer reads the uint8 rows as they are (``models.gnn._sage_sparse_input``) against the same step
on the rows widened to float32 first (what every batch did before), in one process.

    PYTHONPATH=src python benchmarks/sparse_input.py [--nodes 22000] [--features 4714]

Makes a seeded graph (``--nodes``, ``--degree`` in-edges a node) with bag-of-words rows
(``--density`` of them 1) in memory, samples ``--batches`` batches (fanouts 10,10, ``--batch-size``
seeds) once, and times the forward and backward pass of the default model (sage, hidden 128,
LayerNorm, dropout 0.7 on the inputs and between layers) on each batch with both inputs,
alternating batch by batch, each step in wall time. Reports the median ms per step, their
ratio, and the bytes of input each step holds (the float32 rows, or the nonzeros' indices).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=22_000)
    p.add_argument("--features", type=int, default=4_714)
    p.add_argument("--density", type=float, default=0.0094)
    p.add_argument("--degree", type=int, default=12)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    import torch

    from graphfeed.graph.csc import CSCGraph
    from graphfeed.models import build_model
    from graphfeed.models import gnn
    from graphfeed.sampling.neighbor import NeighborSampler

    rng = np.random.default_rng(args.seed)
    n, d = args.nodes, args.features
    src = rng.integers(0, n, n * args.degree)
    dst = np.repeat(np.arange(n), args.degree)
    graph = CSCGraph.from_edges(src, dst, n)
    x = torch.from_numpy((rng.random((n, d), dtype=np.float32) < args.density).astype(np.uint8))
    y = torch.from_numpy(rng.integers(0, 10, n))
    sampler = NeighborSampler(graph, [10, 10], seed=args.seed)
    batches = [sampler.sample(torch.from_numpy(rng.choice(n, args.batch_size, replace=False)))
               for _ in range(args.batches)]
    torch.manual_seed(args.seed)
    model = build_model("sage", d, 128, 10, 2, dropout=0.7)
    model.train()

    def step(rows, mb) -> float:
        t = time.perf_counter()
        out = model(rows() if callable(rows) else rows, mb.blocks)
        torch.nn.functional.cross_entropy(out, y[mb.seeds]).backward()
        model.zero_grad()
        return time.perf_counter() - t

    sparse, dense, held = [], [], []
    for i, mb in enumerate(batches):
        rows = x[mb.input_nodes]
        assert gnn._sparse_input(model.convs[0], rows), "the batch is below SPARSE_INPUT_MIN_BYTES"
        pair = [(sparse, rows), (dense, lambda: rows.to(torch.float32))]
        for times, r in (pair if i % 2 else pair[::-1]):
            times.append(step(r, mb))
        held.append((4 * rows.numel(), 16 * int(rows.count_nonzero())))
    ms_s, ms_d = 1e3 * statistics.median(sparse), 1e3 * statistics.median(dense)
    f32 = statistics.median(h[0] for h in held) / 2**20
    nz = statistics.median(h[1] for h in held) / 2**20
    print(f"{args.batches} batches of {args.batch_size} seeds (fanouts 10,10), {n:,} nodes, {d:,} "
          f"0/1 features ({100 * args.density:.2f}% ones), torch threads {torch.get_num_threads()}")
    print(f"  uint8 rows read as they are: {ms_s:8.1f} ms/step  (nonzero indices {nz:,.1f} MB)")
    print(f"  rows widened to float32:     {ms_d:8.1f} ms/step  (float32 rows {f32:,.1f} MB)")
    print(f"  ratio (widened / as they are): {ms_d / ms_s:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
