"""Per-rank memory and build time of the sampling methods' tables under several ranks: one copy
per machine (``graphfeed.distributed.share_prepared``, what ``graphfeed train --nproc N`` does)
against one private copy per rank (what every rank built on its first batch before).

    python benchmarks/tables_memory.py [--dataset medium] [--nproc 2] [--methods weighted,labor]
                                       [--rounds 1] [--json OUT]
    python benchmarks/tables_memory.py --cache DIR [--dataset medium] [--methods ...]

For each round and each way (private, shared), ``--nproc`` ranks are launched with
``graphfeed.distributed.launch``; each opens the dataset (memory-mapped), and for each method
builds a ``NeighborSampler`` and then its tables, the way the trainers do. Each rank reports the
PSS its tables added (every table page touched, after every rank has built or mapped them) and
the wall time of the step. Weighted sampling draws random float32 weights per rank (seeded; the
weights are the method's input, not a table, and are not counted); temporal sampling random
int64 edge times the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _fault_in(sampler, inputs) -> int:
    """Read one byte per page of every table (not the inputs); returns the tables' bytes.
    (A function, so no loop variable keeps a table, hence its mapping, alive afterwards.)"""
    import numpy as np

    nbytes = 0
    for a in sampler.prepare().values():
        if isinstance(a, np.ndarray) and a.ndim and id(a) not in inputs:
            np.add.reduce(a.reshape(-1).view(np.uint8)[::4096])
            nbytes += a.nbytes
    return nbytes


def _rank(path: str, methods: list, private: bool) -> dict:
    import numpy as np

    from graphfeed._memory import release_free_memory
    from graphfeed.datasets.format import Dataset
    from graphfeed.distributed import World, barrier, init, share_prepared
    from graphfeed.distributed.pss import memory_breakdown
    from graphfeed.graph.csc import CSCGraph
    from graphfeed.sampling import SamplingMethod
    from graphfeed.sampling.neighbor import NeighborSampler

    w = init(World.from_env(), timeout_s=600)
    graph = Dataset.open(path, validate="quick").graph
    out = {"rank": w.rank, "num_edges": int(graph.num_edges)}

    def build(g, kind):
        method = SamplingMethod(kind)
        if kind == "weighted":
            weights = np.random.default_rng(0).random(g.num_edges, dtype=np.float32)
            method = method.bind({"weights": weights})
        elif kind == "temporal":
            times = np.random.default_rng(0).integers(0, 1 << 20, g.num_edges)
            method = method.bind({"edge_times": times})
        return NeighborSampler(g, [10, 5], seed=0, method=method)

    # load the table-building kernels first, so that neither the figures nor the times count JIT
    small = CSCGraph.from_edges(np.arange(100) % 7, np.arange(100) % 5, 10)
    for kind in methods:
        build(small, kind).prepare()
    for kind in methods:
        sampler = build(graph, kind)
        inputs = {id(a) for a in sampler._table_inputs().values()}
        release_free_memory()
        barrier()
        pss0 = memory_breakdown()["Pss"]
        t0 = time.perf_counter()
        how = share_prepared(sampler, w, private_copy=private)
        seconds = time.perf_counter() - t0
        nbytes = _fault_in(sampler, inputs)
        barrier()
        pss1 = memory_breakdown()["Pss"]
        barrier()
        out[kind] = {"how": how, "seconds": seconds, "table_bytes": nbytes,
                     "pss_added": pss1 - pss0}
        del sampler
    return out


def _cache_times(path: str, methods: list, folder: str) -> dict:
    """One process: seconds to build each method's tables, to build and store them in a
    ``TableCache`` (a miss), and to map them from it (a hit: hashing the inputs, then mapping)."""
    import shutil

    import numpy as np

    from graphfeed.datasets.format import Dataset
    from graphfeed.distributed import World, share_prepared
    from graphfeed.graph.csc import CSCGraph
    from graphfeed.sampling import SamplingMethod
    from graphfeed.sampling.neighbor import NeighborSampler

    graph = Dataset.open(path, validate="quick").graph
    out = {}
    for kind in methods:
        def build(g):
            method = SamplingMethod(kind)
            if kind == "weighted":
                method = method.bind({"weights": np.random.default_rng(0).random(
                    g.num_edges, dtype=np.float32)})
            elif kind == "temporal":
                method = method.bind({"edge_times": np.random.default_rng(0).integers(
                    0, 1 << 20, g.num_edges)})
            return NeighborSampler(g, [10, 5], seed=0, method=method)

        build(CSCGraph.from_edges(np.arange(100) % 7, np.arange(100) % 5, 10)).prepare()
        shutil.rmtree(folder, ignore_errors=True)
        times = {}
        for label, cache in (("build", None), ("miss", folder), ("hit", folder)):
            sampler = build(graph)
            t0 = time.perf_counter()
            if cache is None:
                sampler.prepare()
            else:
                share_prepared(sampler, World(), cache_dir=cache)
            times[label] = time.perf_counter() - t0
            del sampler
        out[kind] = times
    shutil.rmtree(folder, ignore_errors=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="medium", help="built-in name or a dataset folder")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--methods", default="weighted,labor")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--json", default=None, help="write the raw results here")
    p.add_argument("--cache", default=None, metavar="DIR",
                   help="instead: one process, seconds to build, to store in and to map from a "
                        "table cache in DIR (emptied before and after)")
    args = p.parse_args(argv)

    from graphfeed.datasets.synthetic import SPECS, builtin_path, load_builtin
    from graphfeed.distributed import launch

    if args.dataset in SPECS:
        load_builtin(args.dataset)
        path = str(builtin_path(args.dataset))
    else:
        path = args.dataset
    methods = [m for m in args.methods.split(",") if m]
    if args.cache:
        times = _cache_times(path, methods, args.cache)
        print(f"{'method':<9} {'build s':>8} {'miss s':>8} {'hit s':>8}")
        for kind, t in times.items():
            print(f"{kind:<9} {t['build']:>8.2f} {t['miss']:>8.2f} {t['hit']:>8.2f}")
        return 0
    runs = []
    for r in range(args.rounds):
        for private in (True, False):
            ranks = launch(_rank, args.nproc, path, methods, private, timeout_s=600)
            runs.append({"round": r, "private": private, "ranks": ranks})
    mb = 1 << 20
    print(f"{args.dataset}: {runs[0]['ranks'][0]['num_edges']:,} edges, {args.nproc} ranks")
    print(f"{'method':<9} {'tables':>9} {'way':<8} {'PSS added per rank (MiB)':>26} "
          f"{'sum':>8} {'step s (max)':>12}")
    for run in runs:
        for kind in methods:
            recs = [rk[kind] for rk in run["ranks"]]
            per = " / ".join(f"{x['pss_added'] / mb:.1f}" for x in recs)
            print(f"{kind:<9} {recs[0]['table_bytes'] / mb:>8.1f}M "
                  f"{'private' if run['private'] else 'shared':<8} {per:>26} "
                  f"{sum(x['pss_added'] for x in recs) / mb:>8.1f} "
                  f"{max(x['seconds'] for x in recs):>12.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dataset": args.dataset, "nproc": args.nproc, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
