"""Splits training ids into seed batches: shuffled per epoch, split across DDP ranks.

The order of an epoch derives only from ``(seed, epoch)``, never from global RNG state, so every
rank computes the same permutation without communicating and a resumed run replays it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np
import torch

from .._checks import check_int
from ..errors import GraphfeedError
from ..features.base import as_id_tensor

__all__ = ["ItemSampler", "SeedBatch"]

_EVEN_SPLITS = ("pad", "drop")


@dataclass(frozen=True)
class SeedBatch:
    """One batch of seed ids: ``seeds`` is int64 ``(B,)``; ``index`` counts batches from 0 within
    ``epoch`` on this rank."""

    epoch: int
    index: int
    seeds: torch.Tensor

    def __len__(self) -> int:
        return int(self.seeds.shape[0])

    def __repr__(self) -> str:
        return f"SeedBatch(epoch={self.epoch}, index={self.index}, seeds={len(self)})"


class ItemSampler:
    """Iterates seed batches of ``ids`` (1-D integers; an int ``n`` means ``range(n)``).

    - Each ``for batch in item_sampler`` runs ONE epoch, then advances the epoch counter, so a
      plain ``for epoch in range(E): for b in sampler:`` reshuffles every epoch;
      ``set_epoch(e)`` picks the epoch the next iteration runs (like ``DistributedSampler``).
    - ``shuffle``: a permutation drawn from ``numpy.random.default_rng([seed, epoch])``.
    - Distributed (``world_size > 1``): the permutation is first made divisible by
      ``world_size`` (``even_split="pad"`` wraps around and repeats the first ids, like
      ``DistributedSampler``; ``"drop"`` drops the remainder), then rank ``r`` takes positions
      ``r, r + world_size, ...``. Ranks get disjoint shares (up to the padding) of equal size, so
      every rank yields the same number of batches and DDP never hangs on uneven data.
    - ``drop_last`` drops this rank's final incomplete batch.
    - ``max_batches``: at most this many batches per epoch, the first of the epoch's order
      (``graphfeed train --steps-per-epoch``); every rank stops at the same count.

    ``len(sampler)`` is the number of batches per epoch on this rank. Memory: one int64
    permutation of the ids per epoch.
    """

    def __init__(
        self,
        ids,
        batch_size: int,
        *,
        shuffle: bool = True,
        drop_last: bool = False,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        even_split: str = "pad",
        max_batches: Optional[int] = None,
    ):
        if isinstance(ids, (int, np.integer)) and not isinstance(ids, bool):
            ids = torch.arange(check_int("ids", ids, 0), dtype=torch.int64)
        self._ids = as_id_tensor(ids, name="ids").cpu()
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.seed = check_int("seed", seed, 0)
        self.world_size = check_int("world_size", world_size, 1)
        self.rank = check_int("rank", rank, 0)
        if self.rank >= self.world_size:
            raise GraphfeedError(f"rank must be in [0, world_size={self.world_size}), got {rank}")
        if even_split not in _EVEN_SPLITS:
            raise GraphfeedError(f"even_split must be one of {_EVEN_SPLITS}, got {even_split!r}")
        self.even_split = even_split
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.max_batches = max_batches
        self._epoch = 0

    # -- sizes -------------------------------------------------------------------------------
    @property
    def ids(self) -> torch.Tensor:
        """All ids (int64, every rank), in the given order."""
        return self._ids

    @property
    def num_items(self) -> int:
        """Ids this rank sees per epoch (padding included)."""
        n, w = int(self._ids.shape[0]), self.world_size
        if w == 1:
            return n
        if self.even_split == "drop":
            return n // w
        return 0 if n == 0 else -(-n // w)

    @property
    def max_batches(self) -> Optional[int]:
        """The cap on batches per epoch (``None``: every batch); settable."""
        return self._max_batches

    @max_batches.setter
    def max_batches(self, n: Optional[int]) -> None:
        self._max_batches = None if n is None else check_int("max_batches", n, 1)

    def _capped(self, n: int) -> int:
        return n if self._max_batches is None else min(n, self._max_batches)

    def _batches(self) -> int:
        """Batches of an epoch on this rank, before ``max_batches``."""
        m = self.num_items
        return m // self.batch_size if self.drop_last else -(-m // self.batch_size)

    def __len__(self) -> int:
        return self._capped(self._batches())

    # -- epochs ------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """The epoch the next ``iter(self)`` runs."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        self._epoch = check_int("epoch", epoch, 0)

    def rank_ids(self, epoch: int) -> torch.Tensor:
        """This rank's ids for ``epoch``, in batch order (int64, ``(num_items,)``)."""
        epoch = check_int("epoch", epoch, 0)
        ids = self._ids
        n = int(ids.shape[0])
        if self.shuffle and n > 1:
            perm = np.random.default_rng([self.seed, epoch]).permutation(n)
            ids = ids[torch.from_numpy(perm)]
        w = self.world_size
        if w == 1 or n == 0:
            return ids
        total = self.num_items * w
        if total > n:  # pad by wrapping around (repeats when n < world_size)
            reps = -(-(total - n) // n)
            ids = torch.cat([ids, ids.repeat(reps)[: total - n]])
        else:
            ids = ids[:total]
        return ids[self.rank :: w].contiguous()

    def iter_epoch(self, epoch: int, start: int = 0) -> Iterator[SeedBatch]:
        """The batches of ``epoch`` from batch ``start`` on; does not touch the epoch counter."""
        mine = self.rank_ids(epoch)
        start = check_int("start", start, 0)
        bs = self.batch_size
        for index in range(start, len(self)):
            yield SeedBatch(epoch, index, mine[index * bs : (index + 1) * bs])

    def __iter__(self) -> Iterator[SeedBatch]:
        epoch = self._epoch
        self._epoch = epoch + 1  # advance now: breaking out early still reshuffles next time
        return self.iter_epoch(epoch)

    def __repr__(self) -> str:
        return (
            f"ItemSampler(num_ids={int(self._ids.shape[0])}, batch_size={self.batch_size}, "
            f"shuffle={self.shuffle}, drop_last={self.drop_last}, seed={self.seed}, "
            f"rank={self.rank}, world_size={self.world_size}, batches={len(self)})"
        )
