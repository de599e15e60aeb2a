"""Seed batches of one part's ids, the same number on every rank (collectives must pair up)."""

from __future__ import annotations

from typing import Iterator

import torch

from .._checks import check_int
from ..loader.item_sampler import ItemSampler, SeedBatch


class PartItemSampler(ItemSampler):
    """An ``ItemSampler`` of this rank's ids (``rank``/``world_size``: its index among the ranks
    sharing a part) that yields exactly ``num_batches`` batches per epoch, the number every rank
    agreed on (the most any rank needs). A rank with fewer batches of its own either starts its
    permutation again (``wrap=True``, training: every rank keeps working) or yields empty batches
    (``wrap=False``, evaluation: each id is counted once)."""

    def __init__(self, ids, batch_size: int, *, num_batches: int, wrap: bool = True, **kw):
        super().__init__(ids, batch_size, **kw)
        self.num_batches = check_int("num_batches", num_batches, 0)
        self.wrap = bool(wrap)

    def own_batches(self) -> int:
        """Batches of this rank's own ids (without wrapping, padding or ``max_batches``)."""
        return self._batches()

    def __len__(self) -> int:
        return self._capped(self.num_batches)

    def iter_epoch(self, epoch: int, start: int = 0) -> Iterator[SeedBatch]:
        mine = self.rank_ids(epoch)
        own, bs = self.own_batches(), self.batch_size
        empty = torch.empty(0, dtype=torch.int64)
        for index in range(check_int("start", start, 0), len(self)):
            if index < own or (self.wrap and own):
                j = index % own
                yield SeedBatch(epoch, index, mine[j * bs:(j + 1) * bs])
            else:
                yield SeedBatch(epoch, index, empty)
