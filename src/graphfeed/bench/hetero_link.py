"""``graphfeed bench sample --task link`` on a typed link dataset: typed link sampling
(``LinkSampler`` over the ``HeteroNeighborSampler``, through the ``DataLoader``)
next to homogeneous link sampling (``LinkSampler`` over the ``NeighborSampler``) of the same
fused graph, the same seed pairs in global ids and the same fanouts, alternating in one run.

A batch is ``batch_size`` of the dataset's training pairs (every relation with some, cycled in
a seeded order) with ``num_negatives`` negatives each; typed negatives are drawn within the
destination type, homogeneous ones over every node. Figures: pairs/s, seeds/s (distinct
endpoints), sampled edges/s; ``edges_per_s_ratio`` is typed over homogeneous edges/s (median
of the per-round ratios).
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from .._memory import peak_rss_bytes
from ..errors import GraphfeedError
from .hetero_sample import _run
from .sample import _run_loader, _seed_batches

__all__ = ["bench_typed_link_sample", "format_typed_link_report"]


def bench_typed_link_sample(dataset, *, fanouts: Sequence[int] = (15, 10, 5),
                            batch_size: int = 1024, num_negatives: int = 1,
                            num_batches: int = 50, warmup: int = 3, replace: bool = False,
                            num_threads: int = 2, prefetch: int = 2, seed: int = 0,
                            rounds: int = 3, exclude: str = "auto") -> dict:
    """Figures of typed and homogeneous link sampling of ``dataset`` (a typed link dataset);
    ``exclude``: ``auto`` is ``reverse`` when a predicted relation has a reverse relation."""
    import torch

    from ..datasets.hetero_link import reverse_edge_types, typed_link_split
    from ..loader.dataloader import DataLoader
    from ..sampling.hetero import HeteroNeighborSampler
    from ..sampling.link import LinkSampler
    from ..sampling.neighbor import NeighborSampler

    h = dataset.hetero
    train = {et: np.asarray(p, dtype=np.int64) for et, (p, _) in
             typed_link_split(dataset, "train").items()}
    if not train:
        raise GraphfeedError(f"dataset {dataset.name!r} has no training pairs")
    rev = reverse_edge_types(h)
    if exclude == "auto":
        exclude = "reverse" if any(et in rev for et in train) else "self"
    # the table in relation-id order, as the sampler concatenates it; the same pairs globally
    ets = sorted(train, key=h.edge_type_id)
    glob = np.concatenate([np.stack([train[et][0] + h.node_offsets[h.type_id(et[0])],
                                     train[et][1] + h.node_offsets[h.type_id(et[2])]])
                           for et in ets], axis=1)
    total = batch_size * (num_batches + warmup)
    pos = _seed_batches(np.arange(glob.shape[1]), total, 1, seed)
    typed = LinkSampler(HeteroNeighborSampler(h, list(fanouts), replace=replace, seed=seed),
                        num_negatives=num_negatives, exclude=exclude,
                        reverse_edge_types=rev, seed=seed).with_pairs(train)
    # the homogeneous graph has no relations: its "reverse" is the reversed pair
    homo = LinkSampler(NeighborSampler(h.csc, list(fanouts), replace=replace, seed=seed),
                       num_negatives=num_negatives, exclude=exclude, seed=seed).with_pairs(glob)
    runs, hruns = [], []
    for _ in range(max(1, int(rounds))):
        r = _run_loader(homo, pos, batch_size, warmup, num_threads=num_threads,
                        prefetch=prefetch)
        r["pairs_per_s"] = batch_size * r["batches"] / r["seconds"]
        hruns.append(r)
        t = _run(DataLoader, pos, batch_size, warmup, typed, num_threads=num_threads,
                 prefetch=prefetch)
        t["pairs_per_s"] = batch_size * t["batches"] / t["seconds"]
        runs.append(t)
    ratios = [t["edges_per_s"] / r["edges_per_s"] for t, r in zip(runs, hruns)]
    mid = int(np.argsort(ratios)[len(ratios) // 2])
    return {
        "task": "link", "typed": True, "dataset": dataset.name, "num_nodes": h.num_nodes,
        "num_edges": h.num_edges, "edge_types": [list(e) for e in ets],
        "fanouts": list(fanouts), "batch_size": batch_size, "num_negatives": num_negatives,
        "num_batches": num_batches, "replace": replace, "exclude": exclude,
        "num_threads": num_threads, "prefetch": prefetch, "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "typed_link_sample": runs[mid],
        "link_sample": hruns[mid], "edges_per_s_ratio": float(np.median(ratios)),
        "edges_per_s_ratios": ratios, "peak_rss_bytes": peak_rss_bytes(),
    }


def format_typed_link_report(r: dict) -> str:
    from .._units import format_bytes

    def row(label, f):
        return (f"  {label:<28} {f['pairs_per_s']:>10,.0f} pairs/s  {f['seeds_per_s']:>10,.0f} "
                f"seeds/s  {f['edges_per_s']:>13,.0f} edges/s  {f['batches'] / f['seconds']:>6.1f}"
                f" batches/s")

    head = (f"dataset {r['dataset']} (typed link): {r['num_nodes']:,} nodes, "
            f"{r['num_edges']:,} edges; pairs of {r['edge_types']}; fanouts {r['fanouts']} per "
            f"edge type, batch {r['batch_size']} pairs + {r['num_negatives']} negative(s) each "
            f"(exclude {r['exclude']}), {r['num_batches']} batches, {r['num_threads']} loader "
            f"threads, {r['cpu_count']} CPUs")
    ratios = ", ".join(f"{x:.2f}" for x in r["edges_per_s_ratios"])
    tail = (f"  typed / homogeneous sampled edges/s: {r['edges_per_s_ratio']:.2f}x (median of "
            f"{len(r['edges_per_s_ratios'])} alternating rounds: {ratios}); peak RSS "
            f"{format_bytes(r['peak_rss_bytes'])}")
    rows = [row("typed link sampling", r["typed_link_sample"]),
            row("homogeneous link, same graph", r["link_sample"])]
    return "\n".join([head, *rows, tail])
