"""Where a uniform sampling batch spends its CPU, stage by stage, next to the memory-latency floor
of the same work (issue 31).

    PYTHONPATH=src python benchmarks/sample_costs.py [--dataset medium | --graph DIR] [--batches 60]

The passes of the one-thread sampler (``_kernels.sample_layer``: count, fill, relabel per
layer; the seeds' insert and the node map's reset per batch) run one by one, each timed in this
thread's CPU time (``time.thread_time``), over ``--batches`` batches of ``--batch-size`` seeds
(fanouts 15,10,5); the first batch is checked equal to ``NeighborSampler.sample``'s. The report
gives each stage's median CPU ms per batch (all layers). Run it from two checkouts
(``PYTHONPATH=<checkout>/src``) to compare code, alternating.

The floor. The batch's random memory accesses are counted from its own output: one ``indptr``
line per destination (count), the distinct ``indices`` lines its sampled positions fall on
(fill), the distinct node-map lines of its sampled sources (relabel) and of its nodes (reset).
A microbenchmark on the same machine measures the cost of one such access when many are
independent (``--floor-mb`` of int64 read at random, so that nearly every read misses every
cache: the rate at which the core retires independent misses) and when each depends on the
previous (a pointer chase: the latency). The floor is accesses x the independent cost: what
the batch would take if the CPU did nothing but wait for its cache misses, as many at once as
it can. The node map (4 bytes a node) may live in the caches for small graphs, so its accesses
are shown apart.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict

import numpy as np

LINE = 64


def _floor_costs(mb: int) -> tuple[float, float]:
    """(ns per independent random read, ns per dependent read) over ``mb`` MB."""
    from graphfeed._numba import kernel

    @kernel
    def independent(a, idx):
        s = 0
        for i in range(idx.shape[0]):
            s += a[idx[i]]
        return s

    @kernel
    def chase(nxt, steps):
        j = 0
        for _ in range(steps):
            j = nxt[j]
        return j

    n = mb * (1 << 20) // 8
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1 << 40, n)
    idx = rng.integers(0, n, 4_000_000)
    independent(a, idx[:1000])
    t0 = time.perf_counter()
    independent(a, idx)
    ind = (time.perf_counter() - t0) / idx.shape[0] * 1e9
    perm = rng.permutation(n)
    nxt = np.empty(n, np.int64)
    nxt[perm[:-1]] = perm[1:]
    nxt[perm[-1]] = perm[0]
    chase(nxt, 1000)
    steps = 1_000_000
    t0 = time.perf_counter()
    chase(nxt, steps)
    dep = (time.perf_counter() - t0) / steps * 1e9
    return ind, dep


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="medium")
    p.add_argument("--graph", help="a folder with indptr.npy and indices.npy instead")
    p.add_argument("--batches", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--floor-mb", type=int, default=1024)
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)

    import graphfeed as gf
    from graphfeed.sampling import _kernels as K

    if args.graph:
        indptr = np.load(f"{args.graph}/indptr.npy")
        indices = np.load(f"{args.graph}/indices.npy")
        graph = gf.CSCGraph(indptr, indices)
        pool = np.arange(graph.num_nodes)
    else:
        from graphfeed.datasets.open import open_dataset

        ds = open_dataset(args.dataset)
        graph = ds.graph
        pool = np.asarray(ds.train_ids)
    itemsize = np.asarray(graph.indices).dtype.itemsize

    from graphfeed.sampling._common import batch_key

    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    fanouts = (15, 10, 5)
    node_map = np.full(graph.num_nodes, -1, np.int32)

    def sample(seeds, b, spent):
        """``K.sample_layer``'s passes one by one (its exact code path), each timed."""
        t = time.thread_time()
        K.insert_seeds(seeds, node_map, graph.num_nodes)
        spent["insert seeds"] += time.thread_time() - t
        dst, layers = seeds, []
        for layer in range(len(fanouts) - 1, -1, -1):
            key = np.uint64(batch_key(0, 0, b, layer))
            n = dst.shape[0]
            t = time.thread_time()
            offsets = np.empty(n + 1, np.int64)
            offsets[0] = 0
            starts = np.empty(n, np.int64)
            degs = np.empty(n, np.int64)
            K.count_layer(indptr, dst, 0, n, fanouts[layer], False, offsets, starts, degs)
            np.cumsum(offsets, out=offsets)
            t1 = time.thread_time()
            spent["count"] += t1 - t
            e = int(offsets[-1])
            edge_index = np.empty((2, e), np.int64)
            eids = np.empty(e, np.int64)
            K.fill_layer(indices, starts, degs, 0, n, fanouts[layer], False, key, offsets,
                         edge_index, eids, True)
            t2 = time.thread_time()
            spent["fill"] += t2 - t1
            src = np.empty(n + e, np.int64)
            src[:n] = dst
            n_src = K.relabel_layer(edge_index[0], node_map, src, n)
            spent["relabel"] += time.thread_time() - t2
            layers.append((edge_index, eids, src[:n_src], n))
            dst = src[:n_src]
        t = time.thread_time()
        K.reset_map(node_map, dst)
        spent["reset"] += time.thread_time() - t
        return layers[::-1]

    check = gf.NeighborSampler(graph, list(fanouts), seed=0, return_edge_ids=True)
    rng = np.random.default_rng(5)
    per_batch = defaultdict(list)
    totals = []
    acc = defaultdict(list)
    for b in range(args.batches + 3):
        seeds = np.sort(rng.choice(pool, args.batch_size, replace=False)).astype(np.int64)
        spent = defaultdict(float)
        t0 = time.thread_time()
        layers = sample(seeds, b, spent)
        total = time.thread_time() - t0
        if b == 0:  # the same blocks as the sampler's
            ref = check.sample(seeds, epoch=0, batch_index=0)
            for (ei, eids, src, _), blk in zip(layers, ref.blocks):
                assert np.array_equal(ei, blk.edge_index.numpy())
                assert np.array_equal(src, blk.src_nodes.numpy())
                assert np.array_equal(eids, blk.edge_ids.numpy())
        if b < 3:
            continue
        totals.append(total)
        for k, v in spent.items():
            per_batch[k].append(v)
        # the batch's random accesses, from its output
        acc["indptr lines (count)"].append(sum(n for _, _, _, n in layers))
        acc["indices lines (fill)"].append(sum(
            np.unique(eids * itemsize // LINE).size for _, eids, _, _ in layers))
        acc["node-map lines (relabel)"].append(sum(
            np.unique(src[n:] * 4 // LINE).size for _, _, src, n in layers))
        acc["node-map lines (reset)"].append(np.unique(layers[0][2] * 4 // LINE).size)
        acc["sampled edges"].append(sum(ei.shape[1] for ei, _, _, _ in layers))
        acc["input nodes"].append(layers[0][2].shape[0])
    ind, dep = _floor_costs(args.floor_mb)
    med = {k: 1e3 * statistics.median(v) for k, v in per_batch.items()}
    med["other (allocation, Python)"] = 1e3 * statistics.median(totals) - sum(med.values())
    counts = {k: statistics.median(v) for k, v in acc.items()}
    graph_miss = counts["indptr lines (count)"] + counts["indices lines (fill)"]
    map_miss = counts["node-map lines (relabel)"] + counts["node-map lines (reset)"]
    report = {
        "graph": args.graph or args.dataset, "batch_size": args.batch_size,
        "batches": args.batches, "cpu_ms_per_batch": 1e3 * statistics.median(totals),
        "stages_ms": med, "accesses": counts,
        "ns_per_independent_miss": ind, "ns_per_dependent_miss": dep,
        "floor_ms_graph": graph_miss * ind * 1e-6,
        "floor_ms_graph_and_map": (graph_miss + map_miss) * ind * 1e-6,
    }
    print(f"{report['graph']}: {report['cpu_ms_per_batch']:.2f} CPU ms per batch (median of "
          f"{args.batches}), one thread")
    for k, v in med.items():
        print(f"  {k:>24}: {v:6.2f} ms")
    print("random accesses per batch (median):")
    for k, v in counts.items():
        print(f"  {k:>24}: {v:10,.0f}")
    print(f"memory: {ind:.1f} ns per independent miss, {dep:.1f} ns per dependent miss "
          f"({args.floor_mb} MB at random)")
    print(f"floor: {report['floor_ms_graph']:.2f} ms for the graph's lines, "
          f"{report['floor_ms_graph_and_map']:.2f} ms with the node map's")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
