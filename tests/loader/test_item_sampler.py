"""ItemSampler: per-epoch shuffles from (seed, epoch), coverage, drop_last, distributed splits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphfeed.errors import GraphfeedError
from graphfeed.loader import ItemSampler, SeedBatch


def order(sampler, epoch=None) -> list[int]:
    if epoch is not None:
        sampler.set_epoch(epoch)
    return [int(v) for b in sampler for v in b.seeds]


def test_batches_are_seed_batches_with_epoch_and_index():
    s = ItemSampler(torch.arange(10), 4, shuffle=False)
    batches = list(s)
    assert [type(b) for b in batches] == [SeedBatch] * 3
    assert [(b.epoch, b.index, len(b)) for b in batches] == [(0, 0, 4), (0, 1, 4), (0, 2, 2)]
    assert all(b.seeds.dtype == torch.int64 for b in batches)
    assert order(ItemSampler(torch.arange(10), 4, shuffle=False)) == list(range(10))
    with pytest.raises(Exception):  # frozen
        batches[0].epoch = 3


def test_same_seed_and_epoch_same_order_other_epoch_or_seed_differs():
    ids = torch.arange(100, 300)
    a = order(ItemSampler(ids, 16, seed=5), epoch=3)
    b = order(ItemSampler(ids, 16, seed=5), epoch=3)
    assert a == b
    assert a != order(ItemSampler(ids, 16, seed=5), epoch=4)
    assert a != order(ItemSampler(ids, 16, seed=6), epoch=3)
    assert sorted(a) == list(range(100, 300))


def test_shuffle_ignores_global_rng():
    ids = torch.arange(50)
    torch.manual_seed(0)
    np.random.seed(0)
    a = order(ItemSampler(ids, 7, seed=1), epoch=2)
    torch.manual_seed(123)
    np.random.seed(123)
    torch.rand(10)
    assert a == order(ItemSampler(ids, 7, seed=1), epoch=2)


def test_each_iteration_advances_the_epoch_and_set_epoch_replays():
    s = ItemSampler(torch.arange(40), 8, seed=0)
    epochs = [order(s) for _ in range(3)]
    assert s.epoch == 3
    assert epochs[0] != epochs[1] != epochs[2]
    assert [b.epoch for b in ItemSampler(torch.arange(4), 2)] == [0, 0]
    s.set_epoch(1)
    assert order(s) == epochs[1]
    # breaking out early still advances
    s.set_epoch(0)
    for _ in s:
        break
    assert s.epoch == 1


@pytest.mark.parametrize("n,bs", [(0, 3), (1, 3), (9, 3), (10, 3), (257, 32)])
def test_every_id_once_per_epoch_and_len(n, bs):
    ids = torch.arange(n) * 3 + 1
    s = ItemSampler(ids, bs, seed=2)
    batches = list(s)
    assert len(batches) == len(s) == -(-n // bs)
    got = torch.cat([b.seeds for b in batches]) if batches else torch.empty(0, dtype=torch.int64)
    assert sorted(got.tolist()) == sorted(ids.tolist())
    assert all(len(b) == bs for b in batches[:-1])


def test_drop_last():
    s = ItemSampler(torch.arange(10), 4, drop_last=True, shuffle=False)
    assert len(s) == 2
    assert [len(b) for b in s] == [4, 4]
    assert len(ItemSampler(torch.arange(3), 4, drop_last=True)) == 0


def test_ids_forms():
    assert order(ItemSampler(5, 2, shuffle=False)) == [0, 1, 2, 3, 4]
    assert order(ItemSampler(np.array([7, 3], dtype=np.int32), 2, shuffle=False)) == [7, 3]
    assert order(ItemSampler([4, 2, 9], 2, shuffle=False)) == [4, 2, 9]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(ids=torch.arange(4), batch_size=0), "batch_size"),
        (dict(ids=torch.arange(4), batch_size=2, rank=2, world_size=2), "rank"),
        (dict(ids=torch.arange(4), batch_size=2, rank=-1), "rank"),
        (dict(ids=torch.arange(4), batch_size=2, world_size=0), "world_size"),
        (dict(ids=torch.zeros(2, 2, dtype=torch.int64), batch_size=2), "1-D"),
        (dict(ids=np.array([0.5, 1.0]), batch_size=2), "integers"),
        (dict(ids=torch.arange(4), batch_size=2, even_split="nope"), "even_split"),
        (dict(ids=torch.arange(4), batch_size=2, seed=-1), "seed"),
        (dict(ids=torch.arange(4), batch_size=2.0), "batch_size"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(GraphfeedError, match=match):
        ItemSampler(**kwargs)


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
@pytest.mark.parametrize("n", [1, 3, 10, 13, 64])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_pad_split(world_size, n, drop_last):
    ids = torch.arange(n) + 100
    ranks = [
        ItemSampler(ids, 3, seed=4, rank=r, world_size=world_size, drop_last=drop_last)
        for r in range(world_size)
    ]
    for epoch in (0, 1):
        per_rank = []
        for s in ranks:
            s.set_epoch(epoch)
            batches = list(s)
            assert len(batches) == len(s)
            per_rank.append(torch.cat([b.seeds for b in batches]).tolist() if batches else [])
        # equal batch counts on every rank: no DDP hang
        assert len({len(s) for s in ranks}) == 1
        assert len({len(p) for p in per_rank}) == 1
        if not drop_last:
            allv = [v for p in per_rank for v in p]
            assert set(allv) == set(ids.tolist())  # union covers every id
            total = -(-n // world_size) * world_size
            assert len(allv) == total  # only the padding repeats
            if n % world_size == 0:
                assert len(set(allv)) == len(allv)  # disjoint


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_distributed_drop_split_is_disjoint(world_size):
    n = 23
    ranks = [ItemSampler(torch.arange(n), 4, rank=r, world_size=world_size, even_split="drop")
             for r in range(world_size)]
    shares = [sorted(int(v) for b in s for v in b.seeds) for s in ranks]
    assert len({len(s) for s in shares}) == 1 and len(shares[0]) == n // world_size
    flat = [v for s in shares for v in s]
    assert len(set(flat)) == len(flat)  # disjoint
    assert len({len(s) for s in ranks}) == 1


def test_distributed_ranks_shuffle_together():
    # every rank derives the same permutation: the shares of one epoch are a partition of it
    a = ItemSampler(torch.arange(20), 5, seed=9, rank=0, world_size=2)
    b = ItemSampler(torch.arange(20), 5, seed=9, rank=1, world_size=2)
    a.set_epoch(7)
    b.set_epoch(7)
    full = ItemSampler(torch.arange(20), 20, seed=9)
    perm = full.rank_ids(7).tolist()
    assert a.rank_ids(7).tolist() == perm[0::2]
    assert b.rank_ids(7).tolist() == perm[1::2]


def test_iter_epoch_start_resumes():
    s = ItemSampler(torch.arange(30), 4, seed=3)
    full = list(s.iter_epoch(2))
    tail = list(s.iter_epoch(2, start=5))
    assert [b.index for b in tail] == [5, 6, 7]
    assert all(torch.equal(x.seeds, y.seeds) for x, y in zip(full[5:], tail))
    assert s.epoch == 0  # iter_epoch does not touch the counter
