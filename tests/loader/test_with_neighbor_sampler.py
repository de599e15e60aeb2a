"""The DataLoader with the real numba NeighborSampler: thread-count independent, feature rows
match the sampled input nodes, block invariants hold. Also on Cora when the shared datasets exist."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from graphfeed.features.memory import InMemoryFeature
from graphfeed.graph.csc import CSCGraph
from graphfeed.loader import DataLoader, ItemSampler
from graphfeed.sampling.neighbor import NeighborSampler
from shared_paths import shared_datasets_dir


@pytest.fixture(autouse=True)
def _no_leaks(thread_baseline):
    yield


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(0)
    n, e = 2_000, 16_000
    return CSCGraph.from_edges(rng.integers(0, n, e), rng.integers(0, n, e), n,
                               drop_duplicates=True)


def run(graph, num_threads, epoch, *, feat, labels, batch_size=64):
    items = ItemSampler(torch.arange(0, graph.num_nodes, 3), batch_size, seed=11)
    items.set_epoch(epoch)
    sampler = NeighborSampler(graph, [5, 3], seed=7)
    loader = DataLoader(items, sampler, node_features=feat, labels=labels,
                        num_threads=num_threads, prefetch=2)
    return [mb for mb in loader]


def check_batch(mb, feat_data, label_data):
    assert torch.equal(mb.x, feat_data[mb.input_nodes])
    assert torch.equal(mb.labels, label_data[mb.seeds])
    assert torch.equal(mb.blocks[-1].dst_nodes, mb.seeds)
    for lower, upper in zip(mb.blocks[:-1], mb.blocks[1:]):
        assert torch.equal(lower.dst_nodes, upper.src_nodes)


def test_neighbor_sampler_same_batches_for_any_thread_count(graph):
    feat_data = torch.randn(graph.num_nodes, 16)
    label_data = torch.randint(0, 5, (graph.num_nodes,))
    feat, labels = InMemoryFeature(feat_data), InMemoryFeature(label_data)
    ref = run(graph, 0, epoch=2, feat=feat, labels=labels)
    assert len(ref) == -(-len(range(0, graph.num_nodes, 3)) // 64)
    for mb in ref:
        check_batch(mb, feat_data, label_data)
    for t in (1, 2, 4):
        got = run(graph, t, epoch=2, feat=feat, labels=labels)
        assert len(got) == len(ref)
        for a, b in zip(got, ref):
            assert a.batch_index == b.batch_index and a.epoch == b.epoch == 2
            assert torch.equal(a.seeds, b.seeds)
            for ba, bb in zip(a.blocks, b.blocks):
                assert torch.equal(ba.edge_index, bb.edge_index)
                assert torch.equal(ba.src_nodes, bb.src_nodes)
            assert torch.equal(a.x, b.x) and torch.equal(a.labels, b.labels)
    other = run(graph, 2, epoch=3, feat=feat, labels=labels)
    assert not torch.equal(other[0].seeds, ref[0].seeds)


def test_cora_epoch_covers_train_nodes_with_true_features():
    text = shared_datasets_dir() / "cora" / "text"
    if not (text / "cora_edges.csv").exists():
        pytest.skip(f"shared datasets not found at {text}")
    edges = np.loadtxt(text / "cora_edges.csv", delimiter=",", skiprows=1, dtype=np.int64)
    n = 2708
    graph = CSCGraph.from_edges(edges[:, 0], edges[:, 1], n)
    feats = torch.zeros(n, 1433)
    for node, cols in json.loads((text / "cora_features.json").read_text()).items():
        feats[int(node), cols] = 1.0
    target = np.loadtxt(text / "cora_target.csv", delimiter=",", skiprows=1, dtype=np.int64)
    labels = torch.zeros(n, dtype=torch.int64)
    labels[torch.from_numpy(target[:, 0])] = torch.from_numpy(target[:, 1])
    train = torch.arange(140)
    loader = DataLoader(ItemSampler(train, 32, seed=0), NeighborSampler(graph, [10, 10]),
                        node_features=InMemoryFeature(feats), labels=InMemoryFeature(labels),
                        num_threads=2)
    seen = []
    for mb in loader:
        check_batch(mb, feats, labels)
        seen.append(mb.seeds)
    assert sorted(torch.cat(seen).tolist()) == train.tolist()
    assert torch.bincount(torch.cat([labels[s] for s in seen]), minlength=7).tolist() == [20] * 7
