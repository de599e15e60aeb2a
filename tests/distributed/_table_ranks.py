"""Rank functions for test_dist_tables.py (run inside ranks spawned by graphfeed.distributed.launch;
importable by name)."""

from __future__ import annotations

import hashlib

import numpy as np

METHODS = ("weighted", "labor", "temporal")


def make_graph(num_nodes: int, num_edges: int, seed: int = 0):
    """The same random graph in every process (private memory: nothing file-backed)."""
    from graphfeed.graph.csc import CSCGraph

    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    # skewed destinations: some high in-degrees, so weighted and LABOR draw subsets
    dst = (rng.pareto(1.2, num_edges) * 50).astype(np.int64) % num_nodes
    return CSCGraph.from_edges(src, dst, num_nodes)


def make_sampler(kind: str, graph, fanouts=(5, 3), seed: int = 7):
    from graphfeed.sampling import SamplingMethod
    from graphfeed.sampling.neighbor import NeighborSampler

    rng = np.random.default_rng(123)
    if kind == "weighted":
        method = SamplingMethod("weighted").bind({"weights": rng.random(graph.num_edges)})
    elif kind == "labor":
        method = SamplingMethod("labor", variates="rotated")
    else:
        method = SamplingMethod("temporal").bind(
            {"node_times": rng.integers(0, 1000, graph.num_nodes)})
    return NeighborSampler(graph, list(fanouts), seed=seed, method=method, return_edge_ids=True)


def digest(sampler, num_batches: int = 3, batch: int = 256) -> str:
    """One hash over a few batches' blocks (edges, sources, edge ids and weights)."""
    h = hashlib.sha256()
    rng = np.random.default_rng(5)
    for b in range(num_batches):
        seeds = rng.choice(sampler.num_nodes, batch, replace=False)
        mb = sampler.sample(seeds, epoch=1, batch_index=b)
        for blk in mb.blocks:
            for t in (blk.edge_index, blk.src_nodes, blk.edge_ids, blk.edge_weight):
                if t is not None:
                    h.update(t.numpy().tobytes())
    return h.hexdigest()


def _segment_of(a) -> tuple:
    """``(path, inode)`` of the mapping that holds ``a`` (from /proc/self/maps)."""
    ptr = int(a.ctypes.data)
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= ptr < hi:
                return (parts[5].strip() if len(parts) > 5 else "", int(parts[4]))
    return ("", 0)


def _touch(sampler) -> int:
    """Read every page of the sampler's tables (not its inputs); returns their bytes."""
    inputs = [id(a) for a in sampler._table_inputs().values()]
    total = 0
    for a in sampler.prepare().values():
        if isinstance(a, np.ndarray) and a.ndim >= 1 and id(a) not in inputs:
            np.add.reduce(a.reshape(-1).view(np.uint8)[::4096])
            total += a.nbytes
    return total


def shared_tables(num_nodes: int, num_edges: int, kinds=METHODS, private_copy: bool = False):
    """For each method: share the tables, sample a few batches, and report where the tables
    live and how much PSS they added to this rank."""
    from graphfeed.distributed import World, barrier, init, list_segments, share_prepared
    from graphfeed._memory import release_free_memory
    from graphfeed.distributed.pss import memory_breakdown

    w = init(World.from_env(), timeout_s=60)
    # compile (or load) every kernel first, so the PSS below counts tables, not JIT code
    small = make_graph(500, 5000, seed=1)
    for kind in kinds:
        digest(make_sampler(kind, small), num_batches=1, batch=64)
    graph = make_graph(num_nodes, num_edges)
    out = {"rank": w.rank}
    for kind in kinds:
        sampler = make_sampler(kind, graph)
        release_free_memory()  # freed heap pages would otherwise be reused and not counted
        barrier()
        before = memory_breakdown()["Pss"]
        how = share_prepared(sampler, w, private_copy=private_copy)
        tables = sampler.prepare()
        nbytes = _touch(sampler)
        barrier()  # every rank has touched every page before anyone measures
        after = memory_breakdown()["Pss"]
        barrier()  # nobody drops a mapping before everyone measured
        big = max((k for k in tables if isinstance(tables[k], np.ndarray)),
                  key=lambda k: tables[k].nbytes)
        copy = sampler.with_fanouts([4, 4])
        out[kind] = {
            "how": how,
            "digest": digest(sampler),
            "copy_digest": digest(copy),
            "copy_same_tables": all(copy.prepare()[k] is tables[k] for k in tables),
            "segment": _segment_of(tables[big]),
            "segments_during": [p.name for p in list_segments()],
            "table_bytes": nbytes,
            "pss_added": after - before,
        }
        del sampler, copy, tables
    return out


def failing_build(mode: str):
    """``mode="build"``: the first rank's build raises; ``"mismatch"``: rank 1 builds its
    sampler with another seed. Every rank reports the error it got, then proves the group still
    works (no rank left behind in a collective) and that the sampler still samples."""
    import torch
    import torch.distributed as dist

    from graphfeed.distributed import World, init, share_prepared

    w = init(World.from_env(), timeout_s=60)
    graph = make_graph(2000, 20000)
    sampler = make_sampler("labor", graph, seed=7 if mode == "build" or w.rank == 0 else 8)
    if mode == "build" and w.rank == 0:
        def boom():
            raise ValueError("table build failed on purpose")

        sampler._build_tables = boom
    error = None
    try:
        share_prepared(sampler, w)
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    t = torch.ones(1)
    dist.all_reduce(t)
    if mode == "build" and w.rank == 0:
        del sampler._build_tables  # the lazy path builds privately again
    return {"rank": w.rank, "error": error, "sum": float(t.item()), "digest": digest(sampler)}


def _tables_mapped() -> list:
    """Names of this process's mappings of shared sampler tables (unlinked segments)."""
    with open("/proc/self/maps") as f:
        return sorted({line.split(maxsplit=5)[5].strip() for line in f
                       if "graphfeed-" in line and "-tables" in line})


def train_and_look(cfg):
    """Run the real trainer in this rank; after the first optimizer step, note which shared
    table segments this rank maps."""
    from graphfeed.training import train

    seen = []

    def on_batch(epoch, batch_index):
        if not seen:
            seen.append(_tables_mapped())

    result = train(cfg, on_batch=on_batch)
    return {"mapped": seen[0] if seen else None, "epochs": len(result.epochs)}


def built_before_sharing(built_on: int):
    """Rank ``built_on`` samples (so builds private tables) before share_prepared: every rank
    still runs the same collectives and ends on the shared copy."""
    from graphfeed.distributed import World, init, share_prepared

    w = init(World.from_env(), timeout_s=60)
    sampler = make_sampler("labor", make_graph(2000, 20000))
    early = copy = None
    if w.rank == built_on:
        early = digest(sampler)
        copy = sampler.with_fanouts([4, 4])  # made before sharing: keeps the private tables
    how = share_prepared(sampler, w)
    tables = sampler.prepare()
    return {"how": how, "early": early, "digest": digest(sampler),
            "segment": _segment_of(tables["lsrc"]),
            "copy_private": None if copy is None else "graphfeed-" not in _segment_of(
                copy.prepare()["lsrc"])[0]}


def cached_tables(folder: str, forbid_build: bool):
    """share_prepared with a table cache in 2 ranks; ``forbid_build``: building fails on every
    rank (the tables must come from the cache)."""
    from graphfeed.distributed import World, init, share_prepared

    w = init(World.from_env(), timeout_s=60)
    sampler = make_sampler("labor", make_graph(2000, 20000))
    if forbid_build:
        def boom():
            raise ValueError("built again")

        sampler._build_tables = boom
    try:
        how = share_prepared(sampler, w, cache_dir=folder)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return {"how": how, "digest": digest(sampler), "error": None,
            "segment": _segment_of(sampler.prepare()["lsrc"])}
