"""PyG models on graphfeed mini-batches: the per-layer and the NeighborLoader-style views, and
stock torch_geometric models trained by graphfeed.train through the adapter."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pyg_nn = pytest.importorskip("torch_geometric.nn")

from graphfeed.sampling.neighbor import NeighborSampler  # noqa: E402
from graphfeed.trainer.adapter import (  # noqa: E402
    StockModel, accepts_bipartite, apply_conv, hop_edge_index, to_adjs, to_data,
)
from graphfeed.training import TrainConfig, train  # noqa: E402


def _batch(ds, fanouts, seeds=64):
    sampler = NeighborSampler(ds.graph, fanouts, seed=3)
    mb = sampler.sample(torch.as_tensor(ds.train_ids[:seeds]), epoch=0, batch_index=0)
    ids = mb.input_nodes
    mb.node_features["feat"] = ds.features["feat"].read(ids).float()
    mb.labels = ds.features["label"].read(mb.seeds)
    return mb


def _full_edge_index(graph):
    indptr = torch.as_tensor(np.asarray(graph.indptr))
    dst = torch.repeat_interleave(torch.arange(graph.num_nodes), indptr[1:] - indptr[:-1])
    return torch.stack([torch.as_tensor(np.asarray(graph.indices), dtype=torch.int64), dst])


@pytest.mark.parametrize("fanouts", [(5, 3), (4, 3, 2), (-1, -1)])
def test_hop_edge_index_is_neighborloader_shaped(tiny_dataset, fanouts):
    mb = _batch(tiny_dataset, fanouts)
    ei, nodes, edges = hop_edge_index(mb)
    n = mb.blocks[0].num_src
    assert sum(nodes) == n and nodes[0] == mb.seeds.shape[0] and len(nodes) == len(fanouts) + 1
    assert sum(edges) == ei.shape[1] and len(edges) == len(fanouts)
    # no duplicate (src, dst) pair (sampling without replacement)
    keys = ei[1] * n + ei[0]
    assert torch.unique(keys).numel() == keys.numel()
    # each destination's in-edges come from exactly one block: the first that reaches it
    n_id = mb.input_nodes
    bounds = np.cumsum(nodes)  # hop h holds local ids [bounds[h-1], bounds[h])
    start = 0
    for hop, count in enumerate(edges):
        part = ei[:, start:start + count]
        start += count
        lo = 0 if hop == 0 else bounds[hop - 1]
        assert bool(((part[1] >= lo) & (part[1] < bounds[hop])).all())
        block = mb.blocks[len(fanouts) - 1 - hop]
        got = {(int(n_id[s]), int(n_id[d])) for s, d in part.T.tolist()}
        mask = block.edge_index[1] >= lo
        want = {(int(block.src_nodes[s]), int(block.src_nodes[d]))
                for s, d in block.edge_index[:, mask].T.tolist()}
        assert got == want
        # every such edge is a real in-edge of the graph
        for s, d in list(got)[:50]:
            g = tiny_dataset.graph
            assert s in set(np.asarray(g.indices[g.indptr[d]:g.indptr[d + 1]]).tolist())
    # the outermost hop only sends messages
    assert not bool((ei[1] >= bounds[-2]).any())
    data = to_data(mb)
    assert data.batch_size == mb.seeds.shape[0] and torch.equal(data.n_id, n_id)
    assert data.num_sampled_nodes == nodes and data.num_sampled_edges == edges
    assert torch.equal(data.y, mb.labels)


def test_stock_graphsage_on_full_neighbourhoods_equals_the_full_graph(tiny_dataset):
    """With every neighbour sampled, a stock 2-layer GraphSAGE on the adapter's edge_index gives
    the seeds exactly what it gives them on the whole graph (mean aggregation reads only the
    in-edges of the seeds and of their in-neighbours, which the batch holds in full)."""
    torch.manual_seed(0)
    model = pyg_nn.models.GraphSAGE(32, 16, num_layers=2, out_channels=5).eval()
    mb = _batch(tiny_dataset, (-1, -1))
    x_all = tiny_dataset.features["feat"].read(torch.arange(tiny_dataset.num_nodes)).float()
    with torch.no_grad():
        full = model(x_all, _full_edge_index(tiny_dataset.graph))[mb.seeds]
        got = StockModel(model)(mb.x, mb.blocks)
        trimmed = StockModel(model, trim=True)(mb.x, mb.blocks)
    torch.testing.assert_close(got, full, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(trimmed, full, rtol=1e-4, atol=1e-5)


def test_per_layer_views_and_apply_conv(tiny_dataset):
    mb = _batch(tiny_dataset, (-1, -1))
    adjs = to_adjs(mb)
    assert [a.size for a in adjs] == [b.size for b in mb.blocks]
    assert accepts_bipartite(pyg_nn.SAGEConv(4, 4)) and accepts_bipartite(pyg_nn.GATConv(4, 4))
    assert not accepts_bipartite(pyg_nn.GCNConv(4, 4))
    # a layer on a full block equals that layer on the whole graph at the block's destinations
    torch.manual_seed(0)
    x_all = tiny_dataset.features["feat"].read(torch.arange(tiny_dataset.num_nodes)).float()
    block = mb.blocks[-1]
    x_src = x_all[block.src_nodes]
    full_ei = _full_edge_index(tiny_dataset.graph)
    for conv in (pyg_nn.SAGEConv(32, 8), pyg_nn.GATConv(32, 8, heads=2)):
        conv.eval()
        with torch.no_grad():
            torch.testing.assert_close(apply_conv(conv, x_src, block), conv(x_all, full_ei)[block.dst_nodes],
                                       rtol=1e-4, atol=1e-5)
    gcn = pyg_nn.GCNConv(32, 8)
    out = apply_conv(gcn, x_src, block)  # union node set: no "tuple" error, one row per destination
    assert out.shape == (block.num_dst, 8)
    with pytest.raises(ValueError, match="source nodes"):
        apply_conv(gcn, x_src[:-1], block)


@pytest.mark.parametrize("name", ["GraphSAGE", "GCN", "GAT"])
def test_stock_pyg_models_train_through_the_adapter_and_beat_the_mlp(tiny_dataset, name):
    cls = getattr(pyg_nn.models, name)

    def factory(in_dim, num_classes):
        return StockModel(cls(in_dim, 64, num_layers=2, out_channels=num_classes))

    r = train(TrainConfig(dataset="tiny", epochs=8, fanouts=(10, 10), batch_size=128, lr=0.01,
                          progress=False, num_threads=1), dataset=tiny_dataset, model=factory)
    assert r.model == "StockModel" and r.mlp_test_acc is not None
    assert r.test_acc > r.mlp_test_acc + 0.05, (name, r.test_acc, r.mlp_test_acc)
