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

__all__ = ["PartitionPlaced", "place_partitions"]


@dataclass
class PartitionPlaced:
    """``book`` (``partition.json``), this rank's ``part``, the ``exchange`` group, the
    distributed ``sampler`` and ``features`` (``"feat"`` and ``"label"``: ``DistFeature``),
    ``per_part`` ranks per part, ``splits`` this part's ``train``/``valid``/``test`` ids
    (global)."""

    book: object
    part: object
    exchange: object
    sampler: object
    features: dict
    per_part: int
    splits: dict
    remote_cache: int = 0

    mode = "partitioned"

    @property
    def device(self):
        import torch

        return torch.device("cpu")

    @property
    def reason(self) -> str:
        return (f"--partitions {self.book.path} ({self.book.num_parts} parts, {self.book.method}, "
                f"edge cut {100 * self.book.edge_cut_fraction:.1f}%): part "
                f"{self.part.index} memory-mapped, "
                f"remote rows over all_to_all ({self.per_part} rank(s) per part)")

    def loader(self, ids, *, train: bool, batch_size: int, seed: int, prefetch: int = 2,
               sampler=None, labels: bool = True):
        """A ``DataLoader`` over this part's ``ids``, split between the part's ranks; every rank
        of the world runs the same number of batches (the most any rank needs)."""
        from ..loader.dataloader import DataLoader
        from ..partition.seeds import PartItemSampler

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

    def epoch_stats(self):
        """A snapshot of the exchange's counters (``ExchangeStats``) and the remote cache's,
        reset for the epoch that starts."""
        from ..partition.dist import CacheStats, ExchangeStats

        self.features["feat"].cache_stats = CacheStats()
        return ExchangeStats(**vars(self.exchange.stats))

    def epoch_line(self, start) -> str:
        """What an epoch moved: seconds in exchanges, MB received, remote cache hit rate."""
        st = self.exchange.stats
        return (f"exchanges {st.seconds - start.seconds:.1f}s (loader thread), "
                f"{(st.bytes_received - start.bytes_received) / 1e6:,.1f} MB received, remote "
                f"cache hit rate {self.features['feat'].cache_stats.hit_rate:.1%}")

    def after_epoch(self, epoch: int) -> None:
        """After the first epoch: the remote-row cache of its hottest rows (``--remote-cache``)."""
        if epoch == 0 and self.remote_cache:
            self.features["feat"].build_cache(self.remote_cache)


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
