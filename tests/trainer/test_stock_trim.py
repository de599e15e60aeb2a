"""``StockModel(trim=True)`` gives the seeds what ``trim=False`` gives them, or is refused: PyG's
``trim_to_layer`` drops the outer hops' nodes and edges before the later layers, which only
layers that read nothing but a node's in-edges (SAGEConv, GATConv, GINConv) do not notice."""

from __future__ import annotations

import pytest
import torch

pyg_nn = pytest.importorskip("torch_geometric.nn")

from graphfeed.models.adapter import StockModel  # noqa: E402
from graphfeed.sampling.neighbor import NeighborSampler  # noqa: E402


@pytest.fixture(scope="module")
def batch(tiny_dataset):
    s = NeighborSampler(tiny_dataset.graph, (4, 5, 3), seed=3)
    mb = s.sample(torch.as_tensor(tiny_dataset.train_ids[:64]), epoch=0, batch_index=0)
    return tiny_dataset.features["feat"].read(mb.input_nodes).float(), mb.blocks


def _both(model, x, blocks):
    with torch.no_grad():
        return StockModel(model)(x, blocks), StockModel(model, trim=True)(x, blocks)


@pytest.mark.parametrize("name,kw", [("GraphSAGE", {}), ("GAT", {}), ("GIN", {}),
                                     ("GCN", {"normalize": False}),
                                     ("GraphSAGE", {"norm": "layer_norm",
                                                    "norm_kwargs": {"mode": "node"}})])
@pytest.mark.parametrize("training", [False, True])
def test_trim_gives_the_same_output(batch, name, kw, training):
    x, blocks = batch
    torch.manual_seed(0)
    model = getattr(pyg_nn.models, name)(x.shape[1], 16, num_layers=3, out_channels=5, **kw)
    model.train(training)
    full, trimmed = _both(model, x, blocks)
    assert trimmed.shape == full.shape == (blocks[-1].num_dst, 5)
    torch.testing.assert_close(trimmed, full, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,kw,where", [
    ("GCN", {}, r"convs\.0 \(GCNConv\) normalises each edge by the degrees"),
    ("GraphSAGE", {"norm": "layer_norm"}, r"norms\.0 \(LayerNorm\) normalises over every node"),
    ("GraphSAGE", {"norm": "graph_norm"}, r"GraphNorm"),
])
def test_trim_is_refused_where_it_would_change_the_output(batch, name, kw, where):
    x, blocks = batch
    torch.manual_seed(0)
    model = getattr(pyg_nn.models, name)(x.shape[1], 16, num_layers=3, out_channels=5, **kw)
    with torch.no_grad():  # it would change it: the refusal is not overcautious
        assert not torch.allclose(StockModel(model)(x, blocks), _trimmed(model, x, blocks),
                                  atol=1e-3)
    with pytest.raises(ValueError, match=where + ".*use trim=False"):
        StockModel(model, trim=True)
    StockModel(model)  # untrimmed is fine


def _trimmed(model, x, blocks):
    """What trimming would give, bypassing the refusal."""
    from graphfeed.models.adapter import hop_edge_index

    ei, nodes, edges = hop_edge_index(blocks)
    out = model(x, ei, num_sampled_nodes_per_hop=nodes, num_sampled_edges_per_hop=edges)
    return out[: blocks[-1].num_dst]


def test_batch_norm_is_refused_while_it_uses_batch_statistics(batch):
    """Batch norm is per node in evaluation (running statistics): trimmed evaluation is exact,
    trimmed training is refused at the forward pass."""
    x, blocks = batch
    torch.manual_seed(0)
    model = pyg_nn.models.GraphSAGE(x.shape[1], 16, num_layers=3, out_channels=5,
                                    norm="batch_norm")
    wrapped = StockModel(model, trim=True)
    model.eval()
    full, trimmed = _both(model, x, blocks)
    torch.testing.assert_close(trimmed, full, rtol=1e-4, atol=1e-5)
    model.train()
    with pytest.raises(ValueError, match=r"BatchNorm1d\) normalises with the statistics"):
        wrapped(x, blocks)
