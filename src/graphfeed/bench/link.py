"""``graphfeed bench sample --task link``: link-prediction sampling through the loader, next to
node sampling of the same placement in the same run.

A batch is ``batch_size`` seed pairs (a link dataset's training pairs, else edges of the graph
drawn uniformly with the seed) with ``num_negatives`` uniform negatives each; the node sampler
samples every distinct endpoint and the seed pairs (and, on an undirected graph, their
reverses) are filtered out of the blocks. Figures: pairs/s (seed pairs), seeds/s (distinct
endpoints sampled), sampled edges/s; the node figure is ``batch_size`` node seeds a batch.
Node and link runs alternate ``rounds`` times; the ratios are medians of the per-round ratios.
On a typed link dataset (node and edge types) the typed sampler runs instead, next to this
homogeneous link sampling of the same fused graph (:mod:`.hetero_link`).
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from .._memory import peak_rss_bytes
from .sample import BenchData, _run_loader, _seed_batches


def _bench_pairs(data: BenchData, count: int, seed: int) -> np.ndarray:
    """``(2, count)`` seed pairs: a link dataset's training pairs (cycled in a seeded order),
    else edges of the graph drawn uniformly (O(count) memory, whatever the edge count)."""
    ds = data.dataset
    if ds is not None and ds.task_type == "link_prediction":
        train = np.asarray(ds.link_split("train")[0], dtype=np.int64)
        pos = _seed_batches(np.arange(train.shape[1]), count, 1, seed)
        return np.ascontiguousarray(train[:, pos])
    g = data.graph
    eid = np.random.default_rng(seed).integers(0, g.num_edges, count)
    dst = np.searchsorted(np.asarray(g.indptr), eid, side="right") - 1
    return np.stack([np.asarray(g.indices)[eid].astype(np.int64), dst.astype(np.int64)])


def _node_batches(data: BenchData, batch_size: int, count: int, seed: int) -> np.ndarray:
    """``count`` batches of distinct node seeds: from the seed pool as ``bench sample`` draws
    them, or (a pool smaller than a batch, or a link dataset's pairs) each batch a uniform
    subset of every node."""
    pool = data.seed_pool
    if pool.ndim == 1 and pool.size >= batch_size:
        return _seed_batches(pool, batch_size, count, seed)
    n = data.graph.num_nodes
    if n < batch_size:
        from ..errors import GraphfeedError

        raise GraphfeedError(f"--batch-size {batch_size} is more than the graph's {n} nodes")
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.choice(n, batch_size, replace=False) for _ in range(count)])


def bench_link_sample(data: BenchData, *, fanouts: Sequence[int] = (15, 10, 5),
                      batch_size: int = 1024, num_negatives: int = 1, num_batches: int = 100,
                      warmup: int = 5, replace: bool = False, num_threads: int = 2,
                      prefetch: int = 2, seed: int = 0, mode: str = "cpu-cpu",
                      device: str = "auto", rounds: int = 3, exclude: str = "auto") -> dict:
    """Throughput of link sampling and of node sampling (same placement, same run); a dict.
    ``exclude``: the ``LinkSampler``'s; ``auto``: ``reverse`` when the dataset says its graph
    is undirected, else ``self``."""
    import torch

    from ..placement.plan import place
    from ..sampling.link import LinkSampler

    if data.dataset is not None and data.dataset.hetero is not None:
        from .hetero_link import bench_typed_link_sample  # typed pairs: the typed sampler

        if mode not in ("cpu-cpu", "auto"):
            from ..errors import GraphfeedError

            raise GraphfeedError(f"--mode {mode}: typed link sampling is benchmarked on the CPU")
        return bench_typed_link_sample(
            data.dataset, fanouts=fanouts, batch_size=batch_size, num_negatives=num_negatives,
            num_batches=num_batches, warmup=max(warmup, 1), replace=replace,
            num_threads=num_threads, prefetch=prefetch, seed=seed, rounds=rounds,
            exclude=exclude)
    total = batch_size * (num_batches + warmup)
    pairs = _bench_pairs(data, total, seed)
    if exclude == "auto":
        undirected = data.dataset is not None and bool(data.dataset.metadata.graph.undirected)
        exclude = "reverse" if undirected else "self"
    placed = place(data.graph, {}, list(fanouts), mode=mode, device=device, replace=replace,
                   seed=seed)
    link = LinkSampler(placed.sampler, num_negatives=num_negatives, seed=seed,
                       exclude=exclude).with_pairs(pairs)
    positions = np.arange(total, dtype=np.int64)
    node_ids = _node_batches(data, batch_size, num_batches + warmup, seed)
    runs, nruns = [], []
    for _ in range(max(1, int(rounds))):
        nruns.append(_run_loader(placed.sampler, node_ids, batch_size, warmup,
                                 num_threads=num_threads, prefetch=prefetch, device=placed.device))
        r = _run_loader(link, positions, batch_size, warmup, num_threads=num_threads,
                        prefetch=prefetch, device=placed.device)
        r["pairs_per_s"] = batch_size * r["batches"] / r["seconds"]
        runs.append(r)
    edge_ratios = [r["edges_per_s"] / n["edges_per_s"] for r, n in zip(runs, nruns)]
    best = int(np.argsort(edge_ratios)[len(edge_ratios) // 2])
    return {
        "task": "link", "dataset": data.name, "num_nodes": data.graph.num_nodes,
        "num_edges": data.graph.num_edges, "fanouts": list(fanouts), "batch_size": batch_size,
        "num_negatives": num_negatives, "num_batches": num_batches, "replace": replace,
        "exclude": link.exclude, "num_threads": num_threads, "prefetch": prefetch,
        "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "mode": placed.mode, "placement_reason": placed.placement.reason,
        "device": str(placed.device), "link_sample": runs[best], "node_sample": nruns[best],
        "edges_per_s_ratio": float(np.median(edge_ratios)), "edges_per_s_ratios": edge_ratios,
        "peak_rss_bytes": peak_rss_bytes(),
    }


def format_link_report(r: dict) -> str:
    from .._units import format_bytes

    if r.get("typed"):
        from .hetero_link import format_typed_link_report

        return format_typed_link_report(r)

    link, node = r["link_sample"], r["node_sample"]
    return "\n".join([
        f"dataset {r['dataset']}: {r['num_nodes']:,} nodes, {r['num_edges']:,} edges; fanouts "
        f"{r['fanouts']}, batch {r['batch_size']} pairs + {r['num_negatives']} negative(s) each "
        f"(exclude {r['exclude']}), {r['num_batches']} batches, {r['num_threads']} loader "
        f"threads, {r['cpu_count']} CPUs",
        f"placement {r['mode']} on {r['device']}: {r['placement_reason']}",
        f"  link sampling   {link['pairs_per_s']:>12,.0f} pairs/s  {link['seeds_per_s']:>12,.0f} "
        f"seeds/s  {link['edges_per_s']:>14,.0f} edges/s  {link['batches_per_s']:>7.1f} "
        f"batches/s  ({link['seeds_per_s'] / link['batches_per_s']:,.0f} endpoints a batch)",
        f"  node sampling   {'':>12}         {node['seeds_per_s']:>12,.0f} seeds/s  "
        f"{node['edges_per_s']:>14,.0f} edges/s  {node['batches_per_s']:>7.1f} batches/s",
        f"  link / node sampled edges/s: {r['edges_per_s_ratio']:.2f}x (median of "
        f"{len(r['edges_per_s_ratios'])} alternating rounds: "
        f"{', '.join(f'{x:.2f}' for x in r['edges_per_s_ratios'])}); peak RSS "
        f"{format_bytes(r['peak_rss_bytes'])}",
    ])
