"""Sampling CPU time of this checkout against an older one, batch by batch in one process, with
every batch checked identical (issue 31).

    PYTHONPATH=src python benchmarks/sample_paired.py --before-src ../old-checkout/src \\
        [--dataset medium | --graph DIR] [--methods uniform,weighted,labor,labor-iid,temporal]

The older checkout's package is copied to a temporary folder as ``graphfeed_before`` and
imported beside ``graphfeed``; both build a ``NeighborSampler`` (fanouts 15,10,5, one thread)
for each method, and each batch of ``--batch-size`` seeds is sampled by both, in alternating
order, each timed in this thread's CPU time. Interleaving batch by batch puts both under the
same machine: on a shared VM, memory-bound code drifts by 1.5x and more between runs a minute
apart, which two separate runs would read as a difference. Weighted sampling uses random
weights in (0, 1], temporal random node times in [0, 10^6) (the seeds' own times); the same
arrays go to both.

The report gives, per method, the median CPU ms per batch of each and the median of the
per-batch ratios (before / now). Every batch's blocks (edge index, source nodes, edge weights)
must be equal between the two: a difference stops the run.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

METHODS = ("uniform", "weighted", "labor", "labor-iid", "temporal")


def _import_before(src: str):
    """The older package as ``graphfeed_before``, from a copy kept in the temporary folder
    (named by the source's path, files copied with their times: numba's cache beside them stays
    valid from one run to the next)."""
    real = os.path.realpath(src)
    tmp = os.path.join(tempfile.gettempdir(),
                       "gf-before-" + hashlib.sha256(real.encode()).hexdigest()[:12])
    shutil.copytree(os.path.join(real, "graphfeed"), os.path.join(tmp, "graphfeed_before"),
                    ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    sys.path.insert(0, tmp)
    return importlib.import_module("graphfeed_before")


def _sampler(pkg, graph_arrays, method: str, arrays: dict):
    indptr, indices = graph_arrays
    graph = pkg.CSCGraph(indptr, indices)
    method_mod = importlib.import_module(pkg.__name__ + ".sampling.method")
    kw = {}
    if method == "weighted":
        kw["method"] = method_mod.SamplingMethod("weighted", arrays={"weights": arrays["w"]})
    elif method == "labor":
        kw["method"] = method_mod.SamplingMethod("labor")
    elif method == "labor-iid":
        kw["method"] = method_mod.SamplingMethod("labor", variates="iid")
    elif method == "temporal":
        kw["method"] = method_mod.SamplingMethod("temporal", arrays={"node_times": arrays["t"]})
    return pkg.NeighborSampler(graph, [15, 10, 5], seed=0, num_threads=1, **kw)


def _same(a, b) -> bool:
    for x, y in zip(a.blocks, b.blocks):
        if not (np.array_equal(x.edge_index.numpy(), y.edge_index.numpy())
                and np.array_equal(x.src_nodes.numpy(), y.src_nodes.numpy())):
            return False
        if (x.edge_weight is None) != (y.edge_weight is None):
            return False
        if x.edge_weight is not None and not np.array_equal(x.edge_weight.numpy(),
                                                            y.edge_weight.numpy()):
            return False
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before-src", required=True, help="the older checkout's src/ folder")
    p.add_argument("--dataset", default="medium")
    p.add_argument("--graph", help="a folder with indptr.npy and indices.npy instead")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--batches", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)

    import graphfeed as gf

    before = _import_before(args.before_src)
    if args.graph:
        indptr = np.load(os.path.join(args.graph, "indptr.npy"))
        indices = np.load(os.path.join(args.graph, "indices.npy"))
        pool = np.arange(indptr.shape[0] - 1)
    else:
        from graphfeed.datasets.open import open_dataset

        ds = open_dataset(args.dataset)
        indptr, indices = np.asarray(ds.graph.indptr), np.asarray(ds.graph.indices)
        pool = np.asarray(ds.train_ids)
    rng = np.random.default_rng(1)
    arrays = {"w": (1.0 - rng.random(indices.shape[0])).astype(np.float32),
              "t": rng.integers(0, 1_000_000, indptr.shape[0] - 1)}
    load = [os.getloadavg()[0]]
    report = {}
    for method in args.methods.split(","):
        if method not in METHODS:
            raise SystemExit(f"unknown method {method!r}; one of {', '.join(METHODS)}")
        pair = {"before": _sampler(before, (indptr, indices), method, arrays),
                "now": _sampler(gf, (indptr, indices), method, arrays)}
        r = np.random.default_rng(5)
        ms = {"before": [], "now": []}
        edges = []
        for b in range(args.batches + 3):
            seeds = np.sort(r.choice(pool, args.batch_size, replace=False))
            order = ("before", "now") if b % 2 else ("now", "before")
            out = {}
            for name in order:
                t0 = time.thread_time()
                out[name] = pair[name].sample(seeds, epoch=0, batch_index=b)
                dt = time.thread_time() - t0
                if b >= 3:  # the first batches compile
                    ms[name].append(1e3 * dt)
            if not _same(out["before"], out["now"]):
                raise SystemExit(f"{method}: batch {b} differs between the two checkouts")
            edges.append(out["now"].num_sampled_edges)
        ratios = [x / y for x, y in zip(ms["before"], ms["now"])]
        report[method] = {"before_ms": statistics.median(ms["before"]),
                          "now_ms": statistics.median(ms["now"]),
                          "speedup": statistics.median(ratios),
                          "edges_per_batch": statistics.mean(edges)}
        load.append(os.getloadavg()[0])
        m = report[method]
        print(f"{method:>10}: {m['before_ms']:6.2f} -> {m['now_ms']:6.2f} CPU ms per batch, "
              f"{m['speedup']:.2f}x (median of per-batch ratios), "
              f"{m['edges_per_batch']:,.0f} edges per batch, identical batches", flush=True)
    print(f"load average {min(load):.2f}-{max(load):.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"methods": report, "load_average": load,
                       "graph": args.graph or args.dataset}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
