"""graphfeed's PyG ``FeatureStore`` and ``GraphStore`` on their own: keys, indices, layouts,
sizes, the read-only refusals, and PyG's worker processes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.data import TensorAttr  # noqa: E402
from torch_geometric.loader import NodeLoader  # noqa: E402

from graphfeed.errors import GraphfeedError  # noqa: E402
from graphfeed.features.memory import InMemoryFeature  # noqa: E402
from graphfeed.graph.csc import CSCGraph  # noqa: E402
from graphfeed.pyg import (GraphfeedFeatureStore, GraphfeedGraphStore,  # noqa: E402
                           GraphfeedSampler, from_dataset)


def test_feature_store_reads_what_pyg_asks():
    x = torch.arange(40, dtype=torch.float32).view(10, 4)
    fs = GraphfeedFeatureStore({"x": InMemoryFeature(x), "y": np.arange(10)})
    assert {(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()} == {
        (None, "x"), (None, "y")}
    assert torch.equal(fs.get_tensor(None, "x", index=torch.tensor([3, 1, 3])), x[[3, 1, 3]])
    assert torch.equal(fs.get_tensor(None, "x", index=slice(2, 8, 3)), x[2:8:3])
    mask = torch.zeros(10, dtype=torch.bool)
    mask[[0, 9]] = True
    assert torch.equal(fs.get_tensor(None, "x", index=mask), x[mask])
    assert torch.equal(fs[None, "x", None], x)
    assert fs.get_tensor_size(None, "x") == (10, 4)
    out = fs.multi_get_tensor([TensorAttr(None, "x", torch.tensor([2])),
                               TensorAttr(None, "y", torch.tensor([2, 5]))])
    assert torch.equal(out[0], x[[2]]) and out[1].tolist() == [2, 5]
    with pytest.raises(GraphfeedError, match="out of range"):
        fs.get_tensor(None, "x", index=torch.tensor([10]))
    assert fs.put_tensor(torch.ones(10, 2), None, "z", None)
    assert fs.get_tensor(None, "z", index=torch.tensor([0])).shape == (1, 2)
    with pytest.raises(GraphfeedError, match="read-only"):
        fs.put_tensor(torch.ones(1, 4), None, "x", torch.tensor([0]))
    assert fs.remove_tensor(None, "z", None) and not fs.remove_tensor(None, "z", None)
    with pytest.raises(GraphfeedError, match="must be a graphfeed Feature"):
        GraphfeedFeatureStore({"x": [1, 2]})


def test_graph_store_layouts_agree_with_the_graph():
    src = np.array([0, 2, 1, 3, 3, 0])
    dst = np.array([1, 1, 2, 0, 2, 3])
    gs = GraphfeedGraphStore(CSCGraph.from_edges(src, dst, 4))
    (attr,) = gs.get_all_edge_attrs()
    assert attr.edge_type is None and attr.size == (4, 4)
    row, col = gs.get_edge_index(None, "coo")
    got = sorted(zip(row.tolist(), col.tolist()))
    assert got == sorted(zip(src.tolist(), dst.tolist()))
    row, colptr = gs.get_edge_index(None, "csc")
    assert colptr.tolist() == [0, 1, 3, 5, 6]
    rowptr, col = gs.get_edge_index(None, "csr")
    assert rowptr.tolist() == [0, 2, 3, 4, 6]
    assert sorted(zip(torch.repeat_interleave(torch.arange(4), rowptr.diff()).tolist(),
                      col.tolist())) == got
    with pytest.raises(GraphfeedError, match="read-only"):
        gs.put_edge_index((row, col), None, "coo")


def test_typed_graph_store_per_edge_type(builtin_root):
    from graphfeed.datasets.open import open_dataset

    ds = open_dataset("hetero", builtin_root("hetero"))
    fs, gs = from_dataset(ds)
    g = ds.hetero
    attrs = {a.edge_type: a for a in gs.get_all_edge_attrs()}
    assert set(attrs) == set(g.edge_types)
    et = ("author", "writes", "paper")
    assert attrs[et].size == (g.num_nodes_of("author"), g.num_nodes_of("paper"))
    row, col = gs.get_edge_index(et, "coo")
    src, dst = g.edges_of(et)
    assert sorted(zip(row.tolist(), col.tolist())) == sorted(zip(src.tolist(), dst.tolist()))
    assert {(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()} == {
        ("author", "x"), ("field", "x"), ("paper", "x"), ("paper", "y")}
    with pytest.raises(KeyError, match="no edge type"):
        gs.get_edge_index(("paper", "nope", "paper"), "coo")


def test_pyg_worker_processes_give_the_same_batches(tiny_dataset):
    fs, gs = from_dataset(tiny_dataset)
    ids = torch.from_numpy(tiny_dataset.train_ids[:256])

    def batches(workers):
        loader = NodeLoader((fs, gs), node_sampler=GraphfeedSampler((fs, gs), [5, 5]),
                            input_nodes=ids, batch_size=64, num_workers=workers)
        return [(b.n_id, b.edge_index, b.x) for b in loader]

    for a, b in zip(batches(0), batches(2)):
        assert all(torch.equal(u, v) for u, v in zip(a, b))
