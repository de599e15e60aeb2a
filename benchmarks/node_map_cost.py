"""The dense node map against the batch-sized hash map (issue 30, item 5): CPU per batch of
``NeighborSampler(node_map="dense")`` and ``node_map="hash"`` on the same graph and seeds.

    PYTHONPATH=src python benchmarks/node_map_cost.py [--dataset medium] [--batches 80] [--spread K]

One thread, fanouts 15,10,5, ``--batch-size`` seeds. Whole batches: each batch is sampled by
both samplers in this process, one after the other, the order alternating batch by batch, each
call timed in this thread's CPU time (``time.thread_time``); the two batches are checked equal.
The relabel stage alone: the layers' global edge lists are made once (``_kernels._count_fill``)
and relabelled by each structure in turn (alternating), timing the seeds' insert, the relabel
of every layer and the map's reset / clear. Reports medians (ms per batch) and their ratio.
``--spread K`` multiplies every node id by ``K`` (``K - 1`` isolated nodes after each): the
same batches, relabelled over a dense map ``K`` times larger (where it leaves the caches).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="medium")
    p.add_argument("--batches", type=int, default=80)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--spread", type=int, default=1,
                   help="multiply every node id by this (isolated nodes between): the same "
                        "batches over a graph (and a dense map) this many times larger")
    args = p.parse_args(argv)

    import graphfeed as gf
    from graphfeed.datasets.open import open_dataset
    from graphfeed.sampling import _kernels as K
    from graphfeed.sampling._cpu_common import MapPool
    from graphfeed.sampling._common import batch_key

    graph = open_dataset(args.dataset).graph
    if args.spread > 1:
        k = args.spread
        ip, ix = np.asarray(graph.indptr), np.asarray(graph.indices)
        nn = graph.num_nodes * k
        deg = np.zeros(nn, np.int64)
        deg[::k] = np.diff(ip)
        indptr = np.zeros(nn + 1, np.int64)
        np.cumsum(deg, out=indptr[1:])
        graph = gf.CSCGraph(indptr, (ix.astype(np.int64) * k))
    n = graph.num_nodes
    fanouts = [int(f) for f in args.fanouts.split(",")]
    samplers = {kind: gf.NeighborSampler(graph, fanouts, seed=0, node_map=kind)
                for kind in ("dense", "hash")}
    rng = np.random.default_rng(args.seed)
    batches = [args.spread * np.sort(rng.choice(n // args.spread, args.batch_size,
                                                replace=False)).astype(np.int64)
               for _ in range(args.batches + 5)]

    def same(a, b):
        for x, y in zip(a.blocks, b.blocks):
            if not (np.array_equal(x.edge_index, y.edge_index)
                    and np.array_equal(x.src_nodes, y.src_nodes)):
                raise SystemExit("dense and hash batches differ")

    # whole batches
    whole = {"dense": [], "hash": []}
    for b, seeds in enumerate(batches):
        order = ("dense", "hash") if b % 2 == 0 else ("hash", "dense")
        out = {}
        for kind in order:
            t = time.thread_time()
            out[kind] = samplers[kind].sample(seeds, batch_index=b)
            if b >= 5:  # the first batches compile and warm the pools
                whole[kind].append(time.thread_time() - t)
        same(out["dense"], out["hash"])

    # the relabel stage alone (insert seeds + relabel every layer + reset / clear)
    indptr, indices = samplers["dense"]._indptr, samplers["dense"]._indices
    dense_map = np.full(n, -1, np.int32)
    table = np.full(2 * K.HASH_MIN_CAP, -1, np.int64)
    stage = {"dense": [], "hash": []}
    nodes = []
    for b, seeds in enumerate(batches):
        # the layers' global edge lists, made once (the dense map only to get the next dst)
        layers = []
        K.insert_seeds(seeds, dense_map, n)
        dst = seeds
        for layer in range(len(fanouts) - 1, -1, -1):
            key = np.uint64(batch_key(0, 0, b, layer))
            ei, _, src = K._count_fill(indptr, indices, dst, fanouts[layer], False, key, False)
            layers.append((ei.copy(), int(dst.shape[0]), src.shape[0]))
            n_src = K.relabel_layer(ei[0], dense_map, src, dst.shape[0])
            dst = src[:n_src]
        K.reset_map(dense_map, dst)
        nodes.append(int(dst.shape[0]))
        order = ("dense", "hash") if b % 2 == 0 else ("hash", "dense")
        for kind in order:
            work = [(ei.copy(), nd, np.empty(ns, np.int64)) for ei, nd, ns in layers]
            t = time.thread_time()
            if kind == "dense":
                K.insert_seeds(seeds, dense_map, n)
                d = seeds
                for ei, nd, src in work:
                    src[:nd] = d
                    d = src[:K.relabel_layer(ei[0], dense_map, src, nd)]
                K.reset_map(dense_map, d)
            else:
                _, _, table = K.insert_seeds_hash(seeds, table, n)
                d = seeds
                for ei, nd, src in work:
                    src[:nd] = d
                    ns, table = K.relabel_layer_hash(ei[0], table, src, nd)
                    d = src[:ns]
                table = MapPool.clear_hash(table, int(d.shape[0]))
            if b >= 5:
                stage[kind].append(time.thread_time() - t)

    med = {k: 1e3 * statistics.median(v) for k, v in whole.items()}
    smed = {k: 1e3 * statistics.median(v) for k, v in stage.items()}
    print(f"{args.dataset}: {n:,} nodes, {graph.num_edges:,} edges; fanouts {fanouts}, "
          f"batch {args.batch_size}, {len(whole['dense'])} batches; "
          f"{statistics.median(nodes):,.0f} nodes per batch (median)")
    print(f"dense map: {4 * n / 2**20:.1f} MiB per batch in flight; hash table: "
          f"{table.nbytes / 2**20:.1f} MiB after the last batch")
    print(f"whole batch CPU ms (median): dense {med['dense']:.2f}, hash {med['hash']:.2f}, "
          f"hash/dense {med['hash'] / med['dense']:.3f}")
    print(f"relabel stage CPU ms (median): dense {smed['dense']:.2f}, hash {smed['hash']:.2f}, "
          f"hash/dense {smed['hash'] / smed['dense']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
