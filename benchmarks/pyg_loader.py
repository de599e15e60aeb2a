"""Seeds per second of PyG's ``NodeLoader`` over ``graphfeed.pyg`` against graphfeed's own
loader, on the same graph, seeds and fanouts, in one run (issue 28.1).

Paths, each reading the input features and labels of every batch:

- ``graphfeed``: ``graphfeed.place(..., mode="cpu-cpu")`` + ``graphfeed.node_loader``
  (``--num-threads`` loader threads, the numba sampler);
- ``pyg``: PyG's ``NodeLoader`` with ``GraphfeedSampler`` and ``from_dataset``'s stores
  (``--num-workers`` PyG worker processes; 0 samples in the main process);
- ``pyg-native``: PyG's ``NodeLoader`` with PyG's own ``NeighborSampler``, only where pyg-lib or
  torch-sparse is installed (else reported as unavailable).

The paths alternate for ``--rounds`` rounds of ``--batches`` batches each (the first batch of
each path is a warm-up: numba compiles there); the report gives each path's median seeds/s,
the ratio to ``graphfeed``, and the mean sampled nodes and edges per batch (PyG's subgraph
keeps each node once, graphfeed's blocks sample every layer's destinations: different work).

    python benchmarks/pyg_loader.py --dataset medium --num-neighbors 15,10 [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def _graphfeed(ds, ids, fanouts, args):
    import graphfeed as gf

    placed = gf.place(ds.graph, {"feat": ds.node_feature("feat"),
                                 "label": ds.node_feature(ds.target)},
                      fanouts, mode="cpu-cpu", seed=args.seed)
    loader = gf.node_loader(ids, placed, batch_size=args.batch_size, shuffle=False,
                            num_threads=args.num_threads)

    def run(n):
        nodes = edges = 0
        for i, b in enumerate(loader):
            if i == n:
                break
            nodes += int(b.input_nodes.numel())
            edges += b.num_sampled_edges
        return nodes, edges

    return run


def _pyg(data, ids, num_neighbors, args, native: bool):
    import torch
    from torch_geometric.loader import NodeLoader

    if native:
        from torch_geometric.sampler import NeighborSampler

        sampler = NeighborSampler(data, num_neighbors=num_neighbors)
    else:
        from graphfeed.pyg import GraphfeedSampler

        sampler = GraphfeedSampler(data, num_neighbors, seed=args.seed)
    loader = NodeLoader(data, node_sampler=sampler, input_nodes=torch.as_tensor(ids),
                        batch_size=args.batch_size, num_workers=args.num_workers)

    def run(n):
        nodes = edges = 0
        for i, b in enumerate(loader):
            if i == n:
                break
            nodes += int(b.num_nodes)
            edges += int(b.edge_index.shape[1])
        return nodes, edges

    return run


def _native_available() -> bool:
    for mod in ("pyg_lib", "torch_sparse"):
        try:
            __import__(mod)
            return True
        except ImportError:
            pass
    return False


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="medium", help="built-in name or prepared folder")
    p.add_argument("--num-neighbors", default="15,10", help="PyG order: hop 1 first")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--batches", type=int, default=30, help="timed batches per path and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--num-threads", type=int, default=2, help="graphfeed loader threads")
    p.add_argument("--num-workers", type=int, default=0, help="PyG loader worker processes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="OUT", help="also write the report as JSON")
    args = p.parse_args(argv)

    from graphfeed.datasets.open import open_dataset
    from graphfeed.pyg import from_dataset, graphfeed_fanouts

    ds = open_dataset(args.dataset)
    num_neighbors = [int(x) for x in args.num_neighbors.split(",")]
    fanouts = graphfeed_fanouts(num_neighbors)
    need = (args.batches + 1) * args.batch_size
    ids = ds.train_ids
    if ids.size < need:
        raise SystemExit(f"pyg_loader: {args.dataset} has {ids.size} training ids, the run "
                         f"needs {need} (--batches + 1 warm-up, times --batch-size)")
    ids = ids[:need]
    paths = {"graphfeed": _graphfeed(ds, ids, fanouts, args),
             "pyg": _pyg(from_dataset(ds), ids, num_neighbors, args, native=False)}
    if _native_available():
        from torch_geometric.data import Data
        import torch
        import numpy as np

        g = ds.graph
        dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
        data = Data(x=torch.from_numpy(np.asarray(ds.arrays.node_features["feat"])),
                    y=torch.from_numpy(np.asarray(ds.labels)),
                    edge_index=torch.from_numpy(np.stack([np.asarray(g.indices, np.int64), dst])))
        paths["pyg-native"] = _pyg(data, ids, num_neighbors, args, native=True)
    for run in paths.values():  # warm-up: numba compiles, files are paged in
        run(1)
    rates = {k: [] for k in paths}
    work = {k: (0, 0) for k in paths}
    for _ in range(args.rounds):
        for name, run in paths.items():
            t0 = time.perf_counter()
            nodes, edges = run(args.batches)
            dt = time.perf_counter() - t0
            rates[name].append(args.batches * args.batch_size / dt)
            work[name] = (nodes / args.batches, edges / args.batches)
    base = statistics.median(rates["graphfeed"])
    report = {
        "dataset": args.dataset, "num_neighbors": num_neighbors, "batch_size": args.batch_size,
        "batches": args.batches, "rounds": args.rounds, "num_threads": args.num_threads,
        "num_workers": args.num_workers,
        "paths": {name: {"seeds_per_s": statistics.median(r), "rounds": r,
                         "ratio_to_graphfeed": statistics.median(r) / base,
                         "nodes_per_batch": work[name][0], "edges_per_batch": work[name][1]}
                  for name, r in rates.items()},
        "pyg_native": "measured" if "pyg-native" in paths else
                      "unavailable (neither pyg-lib nor torch-sparse is installed)",
    }
    for name, r in report["paths"].items():
        print(f"{name:>10}: {r['seeds_per_s']:10.0f} seeds/s  ({r['ratio_to_graphfeed']:.2f}x "
              f"graphfeed)  {r['nodes_per_batch']:.0f} nodes, {r['edges_per_batch']:.0f} edges "
              f"per batch")
    if "pyg-native" not in paths:
        print(f"pyg-native: {report['pyg_native']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
