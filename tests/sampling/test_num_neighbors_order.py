"""``num_neighbors=`` (PyG's order: the seeds' hop first) is accepted wherever a PyG user builds a
sampler, as the reverse of graphfeed's ``fanouts`` (input layer first): the same batches, and
giving both is a ``ValueError``."""

from __future__ import annotations

import pytest
import torch

from graphfeed.sampling import build_sampler
from graphfeed.sampling.hetero import HeteroNeighborSampler
from graphfeed.sampling.neighbor import NeighborSampler
from graphfeed.sampling.torch_hetero import TorchHeteroSampler
from graphfeed.sampling.torch_sampler import TorchNeighborSampler


def _same_batches(a, b, seeds):
    for epoch in range(2):
        x = a.sample(seeds, epoch=epoch, batch_index=7)
        y = b.sample(seeds, epoch=epoch, batch_index=7)
        assert len(x.blocks) == len(y.blocks)
        assert torch.equal(x.input_nodes, y.input_nodes)
        for bx, by in zip(x.blocks, y.blocks):
            assert torch.equal(bx.edge_index, by.edge_index)


def _torch(graph, *args, **kw):
    return TorchNeighborSampler(torch.from_numpy(graph.indptr.copy()),
                                torch.from_numpy(graph.indices.copy()), *args, **kw)


@pytest.mark.parametrize("make", [NeighborSampler, _torch], ids=["numba", "torch"])
def test_num_neighbors_is_fanouts_reversed(tiny_dataset, make):
    g = tiny_dataset.graph
    seeds = torch.as_tensor(tiny_dataset.train_ids[:50])
    pyg = make(g, num_neighbors=[7, 3, 2], seed=5)
    ours = make(g, [2, 3, 7], seed=5)
    assert pyg.fanouts == ours.fanouts == (2, 3, 7)
    _same_batches(pyg, ours, seeds)
    with pytest.raises(ValueError, match="same setting in opposite orders"):
        make(g, [2, 3, 7], num_neighbors=[7, 3, 2])
    with pytest.raises(ValueError, match="give fanouts .* or num_neighbors"):
        make(g)


@pytest.mark.parametrize("name", ["neighbor", "torch"])
def test_build_sampler_takes_num_neighbors(tiny_dataset, name):
    g = tiny_dataset.graph
    a = build_sampler(name, g, num_neighbors=[10, 4], seed=1)
    b = build_sampler(name, g, [4, 10], seed=1)
    assert a.fanouts == (4, 10)
    _same_batches(a, b, torch.as_tensor(tiny_dataset.train_ids[:40]))
    with pytest.raises(ValueError, match="build_sampler"):
        build_sampler(name, g, [4, 10], num_neighbors=[10, 4])


@pytest.mark.parametrize("cls", [HeteroNeighborSampler, TorchHeteroSampler])
def test_typed_samplers_reverse_every_list(builtin_root, cls):
    from graphfeed.datasets.open import open_dataset

    h = open_dataset("hetero", builtin_root("hetero")).hetero
    ets = h.edge_types
    pyg = {"__".join(et) if i % 2 else et: [5, i % 3] for i, et in enumerate(ets)}
    ours = {et: [i % 3, 5] for i, et in enumerate(ets)}
    a, b = cls(h, num_neighbors=pyg, seed=2), cls(h, ours, seed=2)
    assert a.fanouts_dict == b.fanouts_dict
    seeds = {h.node_types[0]: torch.arange(20)}
    x, y = a.sample(seeds, epoch=0, batch_index=3), b.sample(seeds, epoch=0, batch_index=3)
    for bx, by in zip(x.blocks, y.blocks):
        for et in ets:
            assert torch.equal(bx.edge_index_dict[et], by.edge_index_dict[et])
    with pytest.raises(ValueError, match="opposite orders"):
        cls(h, ours, num_neighbors=pyg)


def test_graphfeed_sampler_takes_fanouts_in_graphfeed_order(tiny_dataset):
    pytest.importorskip("torch_geometric")
    from torch_geometric.loader import NodeLoader

    from graphfeed.pyg import GraphfeedSampler, from_dataset

    fs, gs = from_dataset(tiny_dataset)
    ids = torch.as_tensor(tiny_dataset.train_ids[:150])

    def batches(sampler):
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=ids, batch_size=50)
        return [(b.n_id, b.edge_index, b.num_sampled_nodes) for b in loader]

    pyg = GraphfeedSampler((fs, gs), [10, 5, 3], seed=4)
    ours = GraphfeedSampler((fs, gs), fanouts=[3, 5, 10], seed=4)
    assert ours.num_neighbors == pyg.num_neighbors == [10, 5, 3]  # always shown in PyG's order
    for (n1, e1, c1), (n2, e2, c2) in zip(batches(pyg), batches(ours)):
        assert torch.equal(n1, n2) and torch.equal(e1, e2) and c1 == c2
    with pytest.raises(ValueError, match="GraphfeedSampler: fanouts=.* and num_neighbors="):
        GraphfeedSampler((fs, gs), [10, 5], fanouts=[5, 10])
    with pytest.raises(ValueError, match="give fanouts"):
        GraphfeedSampler((fs, gs))
