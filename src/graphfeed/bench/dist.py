"""``graphfeed bench dist``: sampling and feature fetch over a partitioned dataset, one gloo
process per part (standing for machines): bytes exchanged per batch, time in the exchanges
against local work, seeds/s per rank, and the remote feature cache's hit rate.

Each rank samples ``batches`` batches of its own train ids (after ``warmup`` ones, which also
rank the remote rows for the cache), then, with ``cache_rows``, builds the cache from the counts of both and samples as many
new batches: both phases are reported, measured in the same run.
"""

from __future__ import annotations

import time
from typing import Sequence


def _phase(sampler, feat, ex, train, batch_size: int, batches: int, first: int) -> dict:
    from ..partition.dist import CacheStats, ExchangeStats

    s0 = ExchangeStats(**vars(ex.stats))
    feat.cache_stats = CacheStats()
    seeds = edges = inputs = 0
    t0 = time.perf_counter()
    n_own = max(1, -(-train.shape[0] // batch_size))
    for i in range(batches):
        j = (first + i) % n_own
        ids = train[j * batch_size:(j + 1) * batch_size]
        mb = sampler.sample(ids, epoch=0, batch_index=first + i)
        feat.read(mb.input_nodes, check=False)
        seeds += int(ids.shape[0])
        edges += mb.num_sampled_edges
        inputs += int(mb.input_nodes.shape[0])
    secs = time.perf_counter() - t0
    st = ex.stats
    ex_s = st.seconds - s0.seconds
    return {
        "batches": batches, "seconds": round(secs, 4),
        "seeds_per_s": round(seeds / secs, 1) if secs else 0.0,
        "exchange_s": round(ex_s, 4), "local_s": round(secs - ex_s, 4),
        "exchange_fraction": round(ex_s / secs, 4) if secs else 0.0,
        "bytes_received_per_batch": (st.bytes_received - s0.bytes_received) // max(1, batches),
        "bytes_sent_per_batch": (st.bytes_sent - s0.bytes_sent) // max(1, batches),
        "calls_per_batch": (st.calls - s0.calls) / max(1, batches),
        "edges_per_batch": edges // max(1, batches),
        "input_nodes_per_batch": inputs // max(1, batches),
        "cache": feat.cache_stats.to_json(),
    }


def _rank(path: str, fanouts: Sequence[int], batch_size: int, batches: int, warmup: int,
          cache_rows: int, seed: int) -> dict:
    import numpy as np

    from ..distributed import World, init, shutdown
    from ..partition.book import load_part, read_book
    from ..partition.dist import DistFeature, DistNeighborSampler, Exchange

    w = init(World.from_env(), backend="gloo")
    try:
        book = read_book(path)
        ex = Exchange()
        part = load_part(book, ex.rank // max(1, ex.size // book.num_parts))
        sampler = DistNeighborSampler(part, fanouts, ex, seed=seed)
        feat = DistFeature(part, "feat", ex)
        train = np.asarray(part.splits["train"])
        _phase(sampler, feat, ex, train, batch_size, warmup, 0)
        out = {"rank": w.rank, "plain": _phase(sampler, feat, ex, train, batch_size, batches,
                                               warmup)}
        if cache_rows:
            out["cache_rows"] = feat.build_cache(cache_rows)
            # new batches: the cache was ranked on the earlier ones, as in training, where it
            # is built after epoch 0 (replaying the same batches would flatter it)
            out["cached"] = _phase(sampler, feat, ex, train, batch_size, batches,
                                   warmup + batches)
        return out
    finally:
        shutdown()


def bench_dist(path, *, nproc: int = 0, fanouts=(15, 10, 5), batch_size: int = 1024,
               batches: int = 20, warmup: int = 5, cache_rows: int = 0, seed: int = 0,
               timeout_s: float = 600.0) -> dict:
    """Run the benchmark on the partition at ``path`` with ``nproc`` processes (default: one
    per part) and return ``{"book": ..., "ranks": [...], "mean": {...}}``."""
    from ..distributed import launch
    from ..partition.book import read_book

    book = read_book(path)
    nproc = nproc or book.num_parts
    ranks = launch(_rank, nproc, str(path), list(fanouts), batch_size, batches, warmup,
                   cache_rows, seed, timeout_s=timeout_s, preload=("graphfeed.bench.dist",))
    mean = {}
    for phase in ("plain", "cached"):
        rs = [r[phase] for r in ranks if phase in r]
        if not rs:
            continue
        keys = ("seeds_per_s", "exchange_fraction", "bytes_received_per_batch",
                "edges_per_batch", "input_nodes_per_batch", "calls_per_batch")
        mean[phase] = {k: round(sum(r[k] for r in rs) / len(rs), 4) for k in keys}
        lookups = sum(r["cache"]["lookups"] for r in rs)
        mean[phase]["cache_hit_rate"] = round(
            sum(r["cache"]["hits"] for r in rs) / lookups, 4) if lookups else 0.0
    return {
        "partitions": str(path), "method": book.method, "parts": book.num_parts,
        "nproc": nproc, "edge_cut": book.edge_cut,
        "edge_cut_fraction": round(book.edge_cut_fraction, 4), "fanouts": list(fanouts),
        "batch_size": batch_size, "batches": batches, "cache_rows": cache_rows,
        "ranks": ranks, "mean": mean,
    }


def format_report(r: dict) -> str:
    lines = [f"bench dist: {r['partitions']} ({r['parts']} parts, {r['method']}, edge cut "
             f"{100 * r['edge_cut_fraction']:.1f}%), {r['nproc']} gloo processes, fanouts "
             f"{r['fanouts']}, batch {r['batch_size']}, {r['batches']} batches per rank"]
    for phase, m in r["mean"].items():
        label = "no cache" if phase == "plain" else f"cache of {r['cache_rows']:,} rows"
        lines.append(
            f"  {label}: per rank and batch {m['bytes_received_per_batch'] / 1e6:,.2f} MB "
            f"received, {m['calls_per_batch']:.0f} all_to_all calls, "
            f"{m['input_nodes_per_batch']:,.0f} input nodes; exchange "
            f"{100 * m['exchange_fraction']:.0f}% of the time; {m['seeds_per_s']:,.0f} "
            f"seeds/s per rank; cache hit rate {100 * m['cache_hit_rate']:.1f}%")
    return "\n".join(lines)
