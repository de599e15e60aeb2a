"""``graphfeed bench sample`` on a heterogeneous dataset: seeds/s and sampled edges/s of the
``HeteroNeighborSampler`` through the loader (alone, and with the per-type feature fetch), next
to homogeneous sampling of the same fused graph (same seeds, same fanouts, same total edge
count), alternating in one run. ``per_edge_cost_ratio`` is hetero's seconds per sampled edge
over homogeneous's (the median over rounds)."""

from __future__ import annotations

import os
import time
from typing import Sequence

import numpy as np

from .._memory import peak_rss_bytes
from ..errors import GraphfeedError
from .sample import _figures

__all__ = ["bench_hetero_sample", "format_hetero_report"]


def _run(loader_cls, items_ids, batch_size, warmup, sampler, **kw) -> dict:
    from ..loader import ItemSampler

    items = ItemSampler(items_ids, batch_size, shuffle=False, drop_last=True, seed=0)
    with loader_cls(items, sampler, **kw) as loader:
        it = iter(loader)
        for _ in range(warmup):  # compiles the kernels, fills the pools
            next(it)
        t0 = time.perf_counter()
        per_batch = [(int(mb.seeds.shape[0]), mb.num_sampled_edges,
                      sum(v.numel() * v.element_size()
                          for feats in mb.type_features.values()
                          for v in feats.values()))
                     for mb in it]
        dt = time.perf_counter() - t0
    seeds, edges, nbytes = (sum(col) for col in zip(*per_batch))
    return _figures(seeds, edges, len(per_batch), dt, nbytes)


def bench_hetero_sample(dataset, *, fanouts: Sequence[int] = (15, 10, 5), batch_size: int = 1024,
                        num_batches: int = 50, warmup: int = 3, replace: bool = False,
                        num_threads: int = 2, prefetch: int = 2, features: bool = True,
                        seed: int = 0, rounds: int = 3) -> dict:
    """Figures of heterogeneous sampling of ``dataset`` (with ``dataset.hetero``), seeds drawn
    from its training ids; homogeneous sampling of its fused graph alternates with it ``rounds``
    times."""
    import torch

    from ..loader import DataLoader
    from ..sampling.hetero import HeteroNeighborSampler
    from ..sampling.neighbor import NeighborSampler

    h = dataset.hetero
    pool = np.asarray(dataset.train_ids)
    if pool.shape[0] < batch_size:
        raise GraphfeedError(f"--batch-size {batch_size} is more than the {pool.shape[0]} "
                             f"training ids of {dataset.name}")
    rng = np.random.default_rng(seed)  # each batch distinct ids (a pool may be small)
    ids = np.concatenate([rng.choice(pool, batch_size, replace=False)
                          for _ in range(num_batches + warmup)]).astype(np.int64)
    hs = HeteroNeighborSampler(h, list(fanouts), replace=replace, seed=seed)
    ns = NeighborSampler(h.csc, list(fanouts), replace=replace, seed=seed)
    kw = dict(num_threads=num_threads, prefetch=prefetch)
    runs, homo = [], []
    for _ in range(max(1, int(rounds))):
        homo.append(_run(DataLoader, ids, batch_size, warmup, ns, **kw))
        runs.append(_run(DataLoader, ids, batch_size, warmup, hs, **kw))
    ratios = [u["edges_per_s"] / r["edges_per_s"] for r, u in zip(runs, homo)]
    mid = int(np.argsort(ratios)[len(ratios) // 2])
    result = {
        "dataset": dataset.name, "num_nodes": h.num_nodes, "num_edges": h.num_edges,
        "node_types": h.num_nodes_dict, "edge_types": [list(e) for e in h.edge_types],
        "fanouts": list(fanouts), "batch_size": batch_size, "num_batches": num_batches,
        "replace": replace, "num_threads": num_threads, "prefetch": prefetch,
        "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "sample": runs[mid], "homogeneous_sample": homo[mid],
        "per_edge_cost_ratio": float(np.median(ratios)), "per_edge_cost_ratios": ratios,
    }
    if features and dataset.type_features:
        result["sample_fetch"] = _run(DataLoader, ids, batch_size, warmup, hs,
                                      type_features=dataset.type_features, **kw)
    result["peak_rss_bytes"] = peak_rss_bytes()
    return result


def format_hetero_report(r: dict) -> str:
    from .._units import format_bytes

    def row(label, f):
        extra = f"  {f['feature_gb_per_s']:.2f} GB/s features" if "feature_gb_per_s" in f else ""
        return (f"  {label:<34} {f['seeds_per_s']:>10,.0f} seeds/s  {f['edges_per_s']:>13,.0f} "
                f"edges/s  {f['edges_per_batch']:>10,.0f} edges/batch{extra}")

    lines = [
        f"dataset {r['dataset']} (heterogeneous): {r['num_nodes']:,} nodes {r['node_types']}, "
        f"{r['num_edges']:,} edges of {len(r['edge_types'])} types; fanouts {r['fanouts']} per "
        f"edge type, batch {r['batch_size']}, {r['num_batches']} batches, "
        f"{r['num_threads']} loader threads, {r['cpu_count']} CPUs",
        row("hetero sampling", r["sample"]),
        row("homogeneous, same graph (same run)", r["homogeneous_sample"]),
        f"  per sampled edge, hetero costs {r['per_edge_cost_ratio']:.2f}x homogeneous (median "
        f"of {len(r['per_edge_cost_ratios'])} alternating rounds: "
        f"{', '.join(f'{x:.2f}' for x in r['per_edge_cost_ratios'])})",
    ]
    if "sample_fetch" in r:
        lines.append(row("hetero sampling + per-type fetch", r["sample_fetch"]))
    lines.append(f"  peak RSS {format_bytes(r['peak_rss_bytes'])}")
    return "\n".join(lines)
