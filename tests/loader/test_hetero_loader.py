"""The DataLoader over a typed sampler: per-type features are the rows of each type's input nodes, labels those of
the seeds, and the batches are the same whatever the thread count."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphfeed.errors import GraphfeedError
from graphfeed.features.memory import InMemoryFeature
from graphfeed.graph.hetero import HeteroGraph
from graphfeed.loader.dataloader import DataLoader
from graphfeed.loader.item_sampler import ItemSampler
from graphfeed.sampling.hetero import HeteroNeighborSampler

NUM = {"user": 400, "item": 150}


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(0)
    u, i = rng.integers(0, 400, 3000), rng.integers(0, 150, 3000)
    g = HeteroGraph.from_edges(NUM, {("user", "buys", "item"): (u, i),
                                     ("item", "bought_by", "user"): (i, u),
                                     ("user", "follows", "user"): (rng.integers(0, 400, 2000),
                                                                   rng.integers(0, 400, 2000))},
                               drop_duplicates=True)
    xu = np.arange(400 * 3, dtype=np.float32).reshape(400, 3)
    xi = -np.arange(150 * 5, dtype=np.float32).reshape(150, 5)
    labels = np.arange(g.num_nodes, dtype=np.int64) % 7
    feats = {"user": {"feat": InMemoryFeature(xu)}, "item": {"feat": InMemoryFeature(xi),
                                                             "id": InMemoryFeature(np.arange(150))}}
    return g, feats, InMemoryFeature(labels), xu, xi, labels


def _loader(setup, threads, batch=64):
    g, feats, labels, *_ = setup
    off = int(g.node_offsets[g.type_id("user")])
    items = ItemSampler(np.arange(300) + off, batch, shuffle=True, seed=3)
    s = HeteroNeighborSampler(g, [4, 3], seed=5)
    return DataLoader(items, s, type_features=feats, labels=labels, num_threads=threads)


def test_features_and_labels_are_the_right_rows(setup):
    g, feats, labels, xu, xi, lab = setup
    with _loader(setup, 2) as ld:
        n = 0
        for mb in ld:
            ids = mb.input_nodes_dict
            assert torch.equal(mb.x_dict["user"], torch.from_numpy(xu[ids["user"].numpy()]))
            assert torch.equal(mb.type_features["item"]["feat"],
                               torch.from_numpy(xi[ids["item"].numpy()]))
            assert torch.equal(mb.type_features["item"]["id"], ids["item"])
            assert torch.equal(mb.labels, torch.from_numpy(lab[mb.seeds.numpy()]))
            n += 1
        assert n == len(ld) == 5


def _batches(setup, threads):
    with _loader(setup, threads) as ld:
        ld.set_epoch(1)
        return [mb for mb in ld]


def test_same_batches_for_any_thread_count(setup):
    ref = _batches(setup, 0)
    for threads in (1, 3):
        other = _batches(setup, threads)
        assert [_flat(mb) for mb in other] == [_flat(mb) for mb in ref]


def _flat(mb):
    """Every id and feature value of a batch, as plain lists (comparable with ==)."""
    ids = [mb.seeds] + [ei.reshape(-1) for b in mb.blocks for ei in b.edge_index_dict.values()]
    return torch.cat(ids).tolist(), torch.cat([x.reshape(-1) for x in mb.x_dict.values()]).tolist()


def test_refuses_bad_features(setup):
    g, feats, labels, *_ = setup
    items = ItemSampler(np.arange(10), 4)
    s = HeteroNeighborSampler(g, [2])
    with pytest.raises(GraphfeedError, match="unknown node type"):
        DataLoader(items, s, type_features={"shop": {}})
    with pytest.raises(GraphfeedError, match="rows but the type has"):
        DataLoader(items, s, type_features={"user": {"f": InMemoryFeature(np.zeros(3))}})
    with pytest.raises(GraphfeedError, match="need a typed sampler"):
        from graphfeed.sampling import build_sampler

        DataLoader(items, build_sampler("neighbor", g.csc, [2]),
                   type_features={"user": feats["user"]})
