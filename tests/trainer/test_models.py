"""The reference models over blocks equal their full-graph PyG counterparts on full
neighbourhoods (GCN with the whole graph's degree normalisation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pyg_nn = pytest.importorskip("torch_geometric.nn")

from graphfeed.models import build_model  # noqa: E402
from graphfeed.sampling.neighbor import NeighborSampler  # noqa: E402


def _full(ds):
    g = ds.graph
    indptr = torch.as_tensor(np.asarray(g.indptr))
    dst = torch.repeat_interleave(torch.arange(g.num_nodes), indptr[1:] - indptr[:-1])
    ei = torch.stack([torch.as_tensor(np.asarray(g.indices), dtype=torch.int64), dst])
    x = ds.features["feat"].read(torch.arange(g.num_nodes)).float()
    return x, ei


@pytest.mark.parametrize("name", ["sage", "gcn", "gat"])
@pytest.mark.parametrize("fanouts", [(-1, -1), (5, 3)])
def test_block_models_match_the_full_graph(tiny_dataset, name, fanouts):
    torch.manual_seed(0)
    model = build_model(name, 32, 16, 5, 2, dropout=0.0, heads=4,
                        in_degrees=tiny_dataset.graph.in_degrees).eval()
    mb = NeighborSampler(tiny_dataset.graph, fanouts, seed=1).sample(
        torch.as_tensor(tiny_dataset.test_ids[:100]))
    x_all, ei = _full(tiny_dataset)
    with torch.no_grad():
        out = model(x_all[mb.input_nodes], mb.blocks)
        full = _whole_graph(model, name, x_all, ei)[mb.seeds]
    assert out.shape == (100, 5)
    if fanouts == (-1, -1):
        torch.testing.assert_close(out, full, rtol=1e-4, atol=1e-5)
    else:
        assert not torch.allclose(out, full)  # sampled: an estimate, not the exact value


def _whole_graph(model, name, x_all, ei):
    """The model's two layers run on the whole graph by PyG itself (with its residual
    connections and norm, when it has them)."""
    h = x_all
    for i, conv in enumerate(model.convs):
        c = _pyg_gcn(conv, h, ei) if name == "gcn" else conv(h, ei)
        h = c + model.skips[i](h) if len(model.skips) else c
        if i == 0:
            h = model.norms[0](h) if len(model.norms) else h
            h = model.activation(h)
    return h


def _pyg_gcn(conv, h, ei):
    """Stock normalised GCNConv with the block model's weights, on the whole graph."""
    ref = pyg_nn.GCNConv(conv.in_channels, conv.out_channels)
    ref.load_state_dict(conv.state_dict())
    return ref(h, ei)


@pytest.mark.parametrize("name", ["sage", "gcn", "gat"])
@pytest.mark.parametrize("norm", ["none", "layer", "batch"])
def test_residual_and_norm_options_match_the_full_graph(tiny_dataset, name, norm):
    """``residual=True`` adds each layer's input (a linear map where the widths differ) to the
    convolution; ``norm`` picks the normalisation between layers. On full neighbourhoods the
    block model still equals the same layers run on the whole graph by PyG."""
    torch.manual_seed(0)
    model = build_model(name, 32, 16, 5, 2, dropout=0.0, heads=4, norm=norm, residual=True,
                        in_degrees=tiny_dataset.graph.in_degrees)
    assert len(model.skips) == 2 and isinstance(model.skips[0], torch.nn.Linear)
    assert len(model.norms) == (0 if norm == "none" else 1)
    if norm == "batch":  # running statistics that are not the identity
        model.train()
        with torch.no_grad():
            model.norms[0](torch.randn(64, 16) * 3 + 1)
    model.eval()
    mb = NeighborSampler(tiny_dataset.graph, (-1, -1), seed=1).sample(
        torch.as_tensor(tiny_dataset.test_ids[:100]))
    x_all, ei = _full(tiny_dataset)
    with torch.no_grad():
        out = model(x_all[mb.input_nodes], mb.blocks)
        full = _whole_graph(model, name, x_all, ei)[mb.seeds]
    torch.testing.assert_close(out, full, rtol=1e-4, atol=1e-5)


def test_pyg_argument_order_is_refused():
    """``GraphSAGE(32, 128, 3, 5)`` is PyG's (in, hidden, num_layers, out): it would build 5
    layers with 3 outputs in graphfeed's order, so a fourth positional argument is refused
    (issue 28, item 4)."""
    from graphfeed.models import GAT, GCN, GraphSAGE

    for model in (GraphSAGE, GCN, GAT):
        with pytest.raises(TypeError, match="pass num_layers and the rest by name"):
            model(32, 128, 3, 5)
    m = GraphSAGE(32, 128, 3, num_layers=5)
    assert m.num_layers == 5 and m.convs[-1].out_channels == 3


def test_wide_inputs_aggregate_without_a_row_per_edge(tiny_dataset, monkeypatch):
    """A mean SAGEConv on inputs wider than its output, whose per-edge rows would be large,
    takes the neighbour mean as one sparse product (issue 29, item 11): the same output and
    input gradient as PyG's gather, and no temporary of a row per edge at the input width.
    Small per-edge rows keep PyG's gather (cheaper: no sort, no host sync)."""
    from graphfeed.models import gnn
    from graphfeed.models.adapter import apply_conv
    from graphfeed.models.gnn import _sage_sparse_mean, _wide_mean_sage

    torch.manual_seed(0)
    mb = NeighborSampler(tiny_dataset.graph, (10, 5), seed=3).sample(
        torch.as_tensor(tiny_dataset.train_ids[:200]))
    block = mb.blocks[0]
    conv = pyg_nn.SAGEConv(300, 16)
    x = torch.randn(block.num_src, 300, requires_grad=True)
    edges = block.edge_index.shape[1]
    per_edge_rows = edges * 300 * 4
    assert per_edge_rows < gnn.SPARSE_MEAN_MIN_BYTES and not _wide_mean_sage(conv, x, edges)
    assert _wide_mean_sage(conv, x, -(-gnn.SPARSE_MEAN_MIN_BYTES // (300 * 4)))
    monkeypatch.setattr(gnn, "SPARSE_MEAN_MIN_BYTES", per_edge_rows)
    assert _wide_mean_sage(conv, x, edges) and not _wide_mean_sage(conv, x[:, :16], edges)
    ours, ref = _sage_sparse_mean(conv, x, block), apply_conv(conv, x, block)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    g1, = torch.autograd.grad(ours.square().sum(), x)
    g2, = torch.autograd.grad(ref.square().sum(), x)
    torch.testing.assert_close(g1, g2, rtol=1e-5, atol=1e-5)
    # the whole model takes the sparse path for its wide first layer and still trains
    model = build_model("sage", 300, 16, 5, 2, dropout=0.0)
    out = model(torch.randn(mb.input_nodes.shape[0], 300), mb.blocks)
    out.sum().backward()
    assert out.shape == (200, 5) and model.convs[0].lin_l.weight.grad is not None


@pytest.mark.parametrize("name,residual", [("sage", False), ("sage", True), ("gcn", False)])
def test_integer_rows_reach_a_wide_first_layer_unwidened_with_the_same_outputs_and_gradients(
        tiny_dataset, monkeypatch, name, residual):
    """0/1 (and small count) rows stored as uint8 reach layer 0 as they are: a wide mean-SAGE
    or graph-normalised GCN layer multiplies their CSR form by its weights, never a float row
    of the input width, and matches the float path in value and gradient."""
    from graphfeed.models import gnn

    torch.manual_seed(0)
    mb = NeighborSampler(tiny_dataset.graph, (10, 5), seed=3).sample(
        torch.as_tensor(tiny_dataset.train_ids[:200]))
    n = mb.input_nodes.shape[0]
    g = torch.Generator().manual_seed(1)
    x = ((torch.rand(n, 300, generator=g) < 0.02) * torch.randint(1, 4, (n, 300), generator=g)
         ).to(torch.uint8)
    x[5] = 0  # a row without a nonzero
    model = build_model(name, 300, 16, 5, 2, dropout=0.5, residual=residual,
                        in_degrees=tiny_dataset.graph.in_degrees if name == "gcn" else None)
    model.eval()
    assert not gnn._sparse_input(model.convs[0], x)  # a small batch: widened, as before
    monkeypatch.setattr(gnn, "SPARSE_INPUT_MIN_BYTES", 4 * n * 300)
    assert gnn._sparse_input(model.convs[0], x) and not gnn._sparse_input(model.convs[0], x[:, :16])
    ref = model(x.to(torch.float32), mb.blocks)
    ref.square().sum().backward()
    want = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    widened = []
    real_to = torch.Tensor.to
    monkeypatch.setattr(torch.Tensor, "to", lambda t, *a, **k: (
        widened.append(t.shape) if t.dtype == torch.uint8 and t.dim() == 2 else None)
        or real_to(t, *a, **k))
    ours = model(x, mb.blocks)
    ours.square().sum().backward()
    monkeypatch.setattr(torch.Tensor, "to", real_to)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    for k, p in model.named_parameters():
        torch.testing.assert_close(p.grad, want[k], rtol=1e-4, atol=1e-5)
    # a residual connection reads the rows themselves: then the layer widens them
    assert (widened == [(n, 300)]) if residual else not widened


def test_dropout_on_the_nonzeros_of_integer_rows_keeps_the_expectation(tiny_dataset):
    """Input dropout on uint8 rows drops nonzeros and scales the rest by 1 / (1 - p): the mean
    of many training-mode outputs of the first layer is its eval-mode output."""
    from graphfeed.models.gnn import _csr_rows

    torch.manual_seed(0)
    mb = NeighborSampler(tiny_dataset.graph, (10,), seed=3).sample(
        torch.as_tensor(tiny_dataset.train_ids[:50]))
    block = mb.blocks[0]
    x = (torch.rand(block.num_src, 100) < 0.1).to(torch.uint8)
    model = build_model("sage", 100, 4, 4, 1)
    conv = model.convs[0]
    with torch.no_grad():
        exact = model._sparse_layer(conv, _csr_rows(x, 0.0), block)
        runs = torch.stack([model._sparse_layer(conv, _csr_rows(x, 0.7), block)
                            for _ in range(4000)])
    assert not torch.allclose(runs[0], exact)
    # each entry's mean over 4000 draws is within 5 standard errors of the exact value
    se = runs.std(0) / 4000 ** 0.5
    assert ((runs.mean(0) - exact).abs() <= 5 * se + 1e-6).all()


@pytest.mark.parametrize("shape,density", [((50, 30), 0.2), ((7, 5), 0.0), ((1, 40), 1.0)])
def test_csr_of_integer_rows_and_its_transpose_hold_the_same_matrix(shape, density):
    from graphfeed.models._kernels import csr_of_rows, csr_transpose

    rng = np.random.default_rng(0)
    x = ((rng.random(shape) < density) * rng.integers(1, 200, shape)).astype(np.uint8)
    crow = np.empty(shape[0] + 1, np.int64)
    cols, vals = csr_of_rows(x, crow)

    def dense(crow, cols, vals, n_cols):
        out = np.zeros((crow.shape[0] - 1, n_cols), np.float32)
        for i in range(crow.shape[0] - 1):
            assert np.all(np.diff(cols[crow[i]:crow[i + 1]]) > 0)  # sorted, distinct
            out[i, cols[crow[i]:crow[i + 1]]] = vals[crow[i]:crow[i + 1]]
        return out

    assert crow[-1] == np.count_nonzero(x) and vals.dtype == np.float32
    np.testing.assert_array_equal(dense(crow, cols, vals, shape[1]), x)
    np.testing.assert_array_equal(dense(*csr_transpose(crow, cols, vals, shape[1]), shape[0]),
                                  x.T)


def test_integer_rows_train_under_bf16_autocast(tiny_dataset, monkeypatch):
    from graphfeed.models import gnn

    mb = NeighborSampler(tiny_dataset.graph, (10, 5), seed=3).sample(
        torch.as_tensor(tiny_dataset.train_ids[:100]))
    x = (torch.rand(mb.input_nodes.shape[0], 300) < 0.05).to(torch.uint8)
    monkeypatch.setattr(gnn, "SPARSE_INPUT_MIN_BYTES", 0)
    model = build_model("sage", 300, 16, 5, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x, mb.blocks)
    out.float().sum().backward()
    assert out.shape == (100, 5) and torch.isfinite(model.convs[0].lin_l.weight.grad).all()
