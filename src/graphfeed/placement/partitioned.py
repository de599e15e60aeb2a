"""A partitioned dataset (``graphfeed partition``) placed for one rank: the data plan's variant
for ``graphfeed train --partitions``.

Rank ``r`` of ``W`` holds part ``r // (W / P)`` (the ranks of one machine share its part: the
arrays are memory-mapped, so the page cache holds one copy), samples with
``DistNeighborSampler`` and reads features and labels with ``DistFeature`` (remote frontier
nodes and rows fetched from their owners with ``all_to_all_single`` on a group of its own:
NCCL with the tensors on the GPU where ranks train on GPUs, gloo for CPU ranks or
``--dist-backend gloo``; ``distributed.world.exchange_backend``). Loaders have one worker
thread (a rank's exchanges are collectives and must stay in order) and every rank runs the
same number of batches (``PartItemSampler``: ranks with fewer seeds wrap around in training,
run empty batches in evaluation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .base import Placed

__all__ = ["PartitionPlaced", "check_partitions", "place_partitions"]


@dataclass
class PartitionPlaced(Placed):
    """``book`` (``partition.json``), this rank's ``part``, the ``exchange`` group, the
    distributed ``sampler`` and ``features`` (``"feat"`` and ``"label"``: ``DistFeature``),
    ``per_part`` ranks per part, ``splits`` this part's ``train``/``valid``/``test`` ids
    (global, relabelled)."""

    book: object
    part: object
    exchange: object
    sampler: object
    features: dict
    per_part: int
    splits: dict
    remote_cache: int = 0

    mode = kind = "partitioned"
    graph = None  # no rank holds the whole graph

    @property
    def device(self):
        import torch

        return torch.device("cpu")

    def describe(self) -> str:
        return (f"--partitions {self.book.path} ({self.book.num_parts} parts, {self.book.method}, "
                f"edge cut {100 * self.book.edge_cut_fraction:.1f}%): part "
                f"{self.part.index} memory-mapped, "
                f"remote rows over all_to_all ({self.per_part} rank(s) per part)")

    @property
    def layerwise_refusal(self) -> str:
        return "--partitions: each rank holds one part's in-edges, not the whole graph"

    @property
    def input_features(self) -> dict:
        return {None: self.features["feat"]}

    @property
    def label_feature(self):
        return self.features["label"]

    def loader(self, ids, *, train: bool, batch_size: int, seed: int, sampler=None,
               labels: bool = True, num_threads: int = 1, prefetch: int = 2, rank: int = 0,
               world_size: int = 1):
        """:meth:`Placed.loader` over this part's ``ids`` (each rank passes its part's), split
        between the part's ranks; every rank of the world runs the same number of batches (the
        most any rank needs; empty ones past its share in evaluation). One worker thread: a
        rank's exchanges are collectives and must stay in order (``num_threads``, ``rank``
        and ``world_size`` are the exchange's)."""
        from ..loader.dataloader import DataLoader
        from ..partition.seeds import PartItemSampler

        del num_threads, rank, world_size
        g = self.per_part
        local = self.exchange.rank % g
        own = PartItemSampler(ids, batch_size, num_batches=0, shuffle=train, seed=seed,
                              rank=local, world_size=g).own_batches()
        items = PartItemSampler(ids, batch_size, num_batches=_max(own), wrap=train,
                                shuffle=train, seed=seed, rank=local, world_size=g)
        return DataLoader(items, sampler or self.sampler,
                          node_features={"feat": self.features["feat"]},
                          labels=self.features["label"] if labels else None,
                          num_threads=1, prefetch=prefetch)

    def before_epoch(self, epoch: int) -> None:
        """A snapshot of the exchange's counters; the remote cache's reset for the epoch."""
        from ..partition.dist import CacheStats, ExchangeStats

        self.features["feat"].cache_stats = CacheStats()
        self._start = ExchangeStats(**vars(self.exchange.stats))

    def after_epoch(self, epoch: int) -> str:
        """What the epoch moved (seconds in exchanges, MB received, remote cache hit rate);
        after the first epoch, the remote-row cache of its hottest rows (``--remote-cache``)."""
        st, start = self.exchange.stats, self._start
        line = (f"exchanges {st.seconds - start.seconds:.1f}s (loader thread), "
                f"{(st.bytes_received - start.bytes_received) / 1e6:,.1f} MB received, remote "
                f"cache hit rate {self.features['feat'].cache_stats.hit_rate:.1%}")
        if epoch == 0 and self.remote_cache:
            self.features["feat"].build_cache(self.remote_cache)
        return line

    def original_ids(self, ids: np.ndarray) -> np.ndarray:
        """Dataset ids of relabelled global ``ids``: each part's first rank maps its own nodes,
        the sum over the ranks gives all (a collective)."""
        import torch
        import torch.distributed as dist

        part = self.part
        mine = np.zeros(ids.shape[0], dtype=np.int64)
        own = (ids >= part.lo) & (ids < part.hi)
        if self.exchange.rank % self.per_part == 0:
            mine[own] = np.asarray(part.orig_ids)[ids[own] - part.lo]
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return mine
        from ..distributed.sharing import collective_device

        t = torch.from_numpy(mine).to(collective_device())
        dist.all_reduce(t)
        return t.cpu().numpy()


def _max(value: int) -> int:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return value
    import torch

    t = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def place_partitions(path, fanouts: Sequence[int], *, replace: bool = False, seed: int = 0,
                     timeout_s: float = 1800.0, remote_cache: int = 0) -> PartitionPlaced:
    """This rank's :class:`PartitionPlaced` of the partitioned dataset at ``path``."""
    from ..partition.book import load_part, read_book
    from ..partition.dist import DistFeature, DistNeighborSampler, Exchange, ranks_per_part

    book = read_book(path)
    ex = Exchange(timeout_s=timeout_s)
    g = max(1, ex.size // book.num_parts)
    part = load_part(book, ex.rank // g)
    per_part = ranks_per_part(part, ex)
    sampler = DistNeighborSampler(part, list(fanouts), ex, replace=replace, seed=seed)
    feats = {"feat": DistFeature(part, "feat", ex),
             "label": DistFeature(part, book.target, ex, count=False)}
    splits = {s: np.asarray(part.splits.get(s, np.empty(0, np.int64)))
              for s in ("train", "valid", "test")}
    return PartitionPlaced(book, part, ex, sampler, feats, per_part, splits, int(remote_cache))


def check_partitions(cfg) -> None:
    """Refuse what a partitioned run of ``cfg`` (a ``TrainConfig``) does not support, naming
    the option, before any rank starts."""
    import os

    from ..errors import GraphfeedError
    from ..partition.book import read_book

    if cfg.model == "gcn":
        raise GraphfeedError("--partitions trains sage or gat: gcn's normalisation needs the "
                             "in-degree of every source node, which no part holds")
    if cfg.sampler != "uniform":
        raise GraphfeedError(f"--partitions samples uniformly; got --sampler {cfg.sampler}")
    if cfg.predict and cfg.predict_nodes != "test":
        raise GraphfeedError("--partitions --predict writes the test nodes' classes; "
                             "--predict-nodes all is for one graph")
    book = read_book(cfg.partitions)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    n = world if world > 1 else cfg.nproc
    if n % book.num_parts:
        raise GraphfeedError(f"--partitions {cfg.partitions} has {book.num_parts} parts: run a "
                             f"multiple of {book.num_parts} processes (--nproc), got {n}")
    if "feat" not in book.features:
        raise GraphfeedError(f"--partitions {cfg.partitions}: no node feature 'feat'")
