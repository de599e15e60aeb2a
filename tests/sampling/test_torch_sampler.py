"""TorchNeighborSampler: the NeighborSampler invariants on CPU tensors (and on CUDA when present)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sampling_helpers import check_minibatch, random_graph

from graphfeed.errors import GraphfeedError
from graphfeed.graph.csc import CSCGraph
from graphfeed.sampling import torch_sampler
from graphfeed.sampling.torch_sampler import TorchNeighborSampler

GRAPH = random_graph()


def _same(a, b):
    for x, y in zip(a.blocks, b.blocks, strict=True):
        assert torch.equal(x.edge_index, y.edge_index)
        assert torch.equal(x.src_nodes, y.src_nodes)
        assert x.num_dst == y.num_dst


def _differ(a, b):
    return any(
        not torch.equal(x.edge_index, y.edge_index) or not torch.equal(x.src_nodes, y.src_nodes)
        for x, y in zip(a.blocks, b.blocks)
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fanouts=st.lists(st.sampled_from([-1, 1, 2, 5, 15, 40, 100]), min_size=1, max_size=3),
    replace=st.booleans(),
    num_seeds=st.integers(0, 40),
    seed=st.integers(0, 2**64 - 1),
    perm_seed=st.integers(0, 1000),
)
def test_invariants(fanouts, replace, num_seeds, seed, perm_seed):
    seeds = np.random.default_rng(perm_seed).permutation(GRAPH.num_nodes)[:num_seeds]
    s = TorchNeighborSampler.from_graph(
        GRAPH, fanouts, replace=replace, seed=seed, return_edge_ids=True
    )
    mb = s.sample(torch.from_numpy(seeds), epoch=1, batch_index=4)
    check_minibatch(GRAPH, mb, seeds, fanouts, replace)
    assert s.fanouts == tuple(fanouts)


def test_sort_path_invariants(monkeypatch):
    monkeypatch.setattr(torch_sampler, "FLOYD_MAX_K", 0)
    seeds = np.arange(0, 300, 4)
    for fanouts in ([3, 40], [100, 2]):
        s = TorchNeighborSampler.from_graph(GRAPH, fanouts, return_edge_ids=True)
        check_minibatch(GRAPH, s.sample(seeds), seeds, fanouts, False)


def test_int64_indices_and_raw_tensors():
    g64 = random_graph(index_dtype=np.int64)
    indptr, indices = torch.from_numpy(g64.indptr), torch.from_numpy(g64.indices)
    s = TorchNeighborSampler(indptr, indices, [5, 5], seed=2)
    seeds = np.arange(20)
    check_minibatch(g64, s.sample(seeds), seeds, [5, 5], False)
    # same RNG stream on the same device: int32 and int64 indices give the same sample
    _same(s.sample(seeds), TorchNeighborSampler.from_graph(GRAPH, [5, 5], seed=2).sample(seeds))


def test_deterministic_and_depends_on_batch():
    seeds = torch.from_numpy(np.flatnonzero(GRAPH.in_degrees > 8)[:30])
    s = TorchNeighborSampler.from_graph(GRAPH, [5, 5], seed=1)
    base = s.sample(seeds, epoch=0, batch_index=0)
    _same(base, TorchNeighborSampler.from_graph(GRAPH, [5, 5], seed=1).sample(seeds))
    assert _differ(base, s.sample(seeds, epoch=0, batch_index=1))
    assert _differ(base, s.sample(seeds, epoch=1, batch_index=0))
    assert _differ(base, TorchNeighborSampler.from_graph(GRAPH, [5, 5], seed=2).sample(seeds))


@pytest.mark.parametrize(
    "seeds, match",
    [
        ([1, 2, 1], r"seed id 1 appears twice \(positions 0 and 2\)"),
        ([0, 300], r"seed id 300 \(position 1\) is out of range \[0, 300\)"),
        ([[1, 2]], r"1-D"),
        (torch.tensor([1.0]), r"integer"),
    ],
)
def test_bad_seeds(seeds, match):
    with pytest.raises(GraphfeedError, match=match):
        TorchNeighborSampler.from_graph(GRAPH, [2]).sample(seeds)


def test_bad_construction():
    indptr, indices = GRAPH.tensors()
    with pytest.raises(GraphfeedError, match="int64"):
        TorchNeighborSampler(indptr.int(), indices, [2])
    with pytest.raises(GraphfeedError, match="fanouts"):
        TorchNeighborSampler(indptr, indices, [0])
    with pytest.raises(GraphfeedError, match="torch tensors"):
        TorchNeighborSampler(GRAPH.indptr, GRAPH.indices, [2])


def test_empty_seeds_and_edgeless_graph():
    g = CSCGraph.from_edges(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 4)
    mb = TorchNeighborSampler.from_graph(g, [3, -1], replace=True).sample([0, 3])
    check_minibatch(g, mb, [0, 3], [3, -1], True)
    mb = TorchNeighborSampler.from_graph(GRAPH, [3]).sample(torch.empty(0, dtype=torch.int64))
    assert mb.input_nodes.numel() == 0


@pytest.mark.cuda
@pytest.mark.parametrize("replace", [False, True])
def test_cuda(replace):
    seeds = np.arange(0, 300, 3)
    fanouts = [3, 40, -1]
    s = TorchNeighborSampler.from_graph(
        GRAPH, fanouts, device="cuda", replace=replace, seed=3, return_edge_ids=True
    )
    mb = s.sample(torch.from_numpy(seeds).cuda(), epoch=1, batch_index=2)
    assert mb.input_nodes.is_cuda and all(b.edge_index.is_cuda for b in mb.blocks)
    check_minibatch(GRAPH, mb, seeds, fanouts, replace)
    again = s.sample(torch.from_numpy(seeds).cuda(), epoch=1, batch_index=2)
    _same(mb, again)
