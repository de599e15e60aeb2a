"""Sampling CPU time of this checkout against an older one, with every batch checked identical
(issue 31).

    PYTHONPATH=src python benchmarks/sample_paired.py --before-src ../old-checkout/src \\
        [--dataset medium | --graph DIR] [--methods uniform,weighted,labor,labor-iid,temporal]

1. Identity: the older checkout's package is copied to a temporary folder as
   ``graphfeed_before`` and imported beside ``graphfeed``; both build a ``NeighborSampler``
   (fanouts 15,10,5, one thread) per method and sample the same ``--check-batches`` batches;
   every block (edge index, source nodes, edge weights) must be equal, or the run stops.
2. Time: child processes, one checkout each (``PYTHONPATH``), alternate for ``--rounds``
   rounds; each samples ``--batches`` batches per method and reports the median CPU ms per
   batch (``time.thread_time``, after 3 untimed batches). Separate processes, because in one
   process the second sampler of a batch finds its lines in cache and both samplers' node maps
   compete for it. On a shared VM memory-bound code drifts by 1.5x and more between runs a
   minute apart: read the median over rounds and the ratio of medians.

Weighted sampling uses random weights in (0, 1], temporal random node times in [0, 10^6) (the
seeds' own times); the same arrays (same seed) in every process.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import shutil
import statistics
import subprocess
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


def _load(args):
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
    return indptr, indices, pool, arrays


def _seeds(pool, batch_size, count):
    r = np.random.default_rng(5)
    return [np.sort(r.choice(pool, batch_size, replace=False)) for _ in range(count)]


def _child(args) -> int:
    """One checkout (the ``graphfeed`` on ``PYTHONPATH``): median CPU ms per batch per method."""
    import graphfeed as gf

    indptr, indices, pool, arrays = _load(args)
    out = {}
    for method in args.methods.split(","):
        sampler = _sampler(gf, (indptr, indices), method, arrays)
        ms = []
        for b, seeds in enumerate(_seeds(pool, args.batch_size, args.batches + 3)):
            t0 = time.thread_time()
            sampler.sample(seeds, epoch=0, batch_index=b)
            if b >= 3:  # the first batches compile
                ms.append(1e3 * (time.thread_time() - t0))
        out[method] = statistics.median(ms)
    print(json.dumps(out))
    return 0


def _check_identical(args) -> None:
    import graphfeed as gf

    before = _import_before(args.before_src)
    indptr, indices, pool, arrays = _load(args)
    for method in args.methods.split(","):
        old = _sampler(before, (indptr, indices), method, arrays)
        new = _sampler(gf, (indptr, indices), method, arrays)
        for b, seeds in enumerate(_seeds(pool, args.batch_size, args.check_batches)):
            if not _same(old.sample(seeds, epoch=0, batch_index=b),
                         new.sample(seeds, epoch=0, batch_index=b)):
                raise SystemExit(f"{method}: batch {b} differs between the two checkouts")
        print(f"{method:>10}: {args.check_batches} batches identical", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before-src", help="the older checkout's src/ folder")
    p.add_argument("--dataset", default="medium")
    p.add_argument("--graph", help="a folder with indptr.npy and indices.npy instead")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--batches", type=int, default=60)
    p.add_argument("--check-batches", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)
    for m in args.methods.split(","):
        if m not in METHODS:
            raise SystemExit(f"unknown method {m!r}; one of {', '.join(METHODS)}")
    if args.child:
        return _child(args)
    if not args.before_src:
        raise SystemExit("--before-src is required")
    _check_identical(args)
    here = os.path.abspath(__file__)
    now_src = os.path.join(os.path.dirname(os.path.dirname(here)), "src")
    child = [sys.executable, here, "--child", "--methods", args.methods, "--batches",
             str(args.batches), "--batch-size", str(args.batch_size), "--dataset", args.dataset]
    if args.graph:
        child += ["--graph", args.graph]
    runs = {"before": [], "now": []}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for name, src in (("before", args.before_src), ("now", now_src)):
            env = dict(os.environ)
            env["PYTHONPATH"] = os.path.realpath(src)
            res = subprocess.run(child, env=env, capture_output=True, text=True)
            if res.returncode != 0:
                sys.stderr.write(res.stderr)
                raise SystemExit(f"the {name} child failed")
            runs[name].append(json.loads(res.stdout.strip().splitlines()[-1]))
            load.append(os.getloadavg()[0])
            print(f"round {r} {name:>6}: " + ", ".join(
                f"{m} {v:.2f}" for m, v in runs[name][-1].items()) + " ms", flush=True)
    report = {}
    for m in args.methods.split(","):
        b = statistics.median(x[m] for x in runs["before"])
        n = statistics.median(x[m] for x in runs["now"])
        report[m] = {"before_ms": b, "now_ms": n, "speedup": b / n}
        print(f"{m:>10}: {b:6.2f} -> {n:6.2f} CPU ms per batch (median of {args.rounds} rounds), "
              f"{b / n:.2f}x")
    print(f"load average {min(load):.2f}-{max(load):.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"methods": report, "rounds": runs, "load_average": load,
                       "graph": args.graph or args.dataset}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
