"""PyG graphs given where graphfeed graphs are expected: ``CSCGraph.from_pyg``,
``HeteroGraph.from_pyg`` (and ``HeteroGraph.from_edges(hetero_data)``), ``graphfeed.place(data,
...)``, and the permutations back to PyG's edge ids."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.data import Data, HeteroData  # noqa: E402

import graphfeed  # noqa: E402
from graphfeed.errors import GraphfeedError  # noqa: E402
from graphfeed.graph.csc import CSCGraph  # noqa: E402
from graphfeed.graph.from_pyg import csc_perm, hetero_perm, node_tensors, pyg_kind  # noqa: E402
from graphfeed.graph.hetero import HeteroGraph  # noqa: E402


def data(n=60, e=400, seed=0):
    g = torch.Generator().manual_seed(seed)
    return Data(x=torch.randn(n, 4, generator=g), y=torch.randint(0, 3, (n,), generator=g),
                edge_index=torch.randint(0, n, (2, e), generator=g),
                train_mask=torch.zeros(n, dtype=torch.bool), num_nodes=n)


def hetero_data(seed=0):
    g = torch.Generator().manual_seed(seed)
    h = HeteroData()
    h["a"].x = torch.randn(30, 2, generator=g)
    h["b"].num_nodes = 20
    for et, (ns, nd, e) in {("a", "r", "b"): (30, 20, 100), ("b", "s", "a"): (20, 30, 80),
                            ("a", "t", "a"): (30, 30, 60)}.items():
        h[et].edge_index = torch.stack([torch.randint(0, ns, (e,), generator=g),
                                        torch.randint(0, nd, (e,), generator=g)])
    return h


def test_a_data_is_its_csc_and_perm_maps_back_to_pyg_edge_ids():
    d = data()
    g = CSCGraph.from_pyg(d)
    perm = csc_perm(d)
    assert g.num_nodes == 60 and g.num_edges == 400
    assert (g.indices == d.edge_index[0].numpy()[perm]).all()
    dst = np.repeat(np.arange(60), np.diff(g.indptr))
    assert (dst == d.edge_index[1].numpy()[perm]).all()
    assert pyg_kind(d) == "data" and pyg_kind(g) is None
    assert sorted(node_tensors(d)) == ["feat", "label"]  # x, y; masks left out


def test_a_heterodata_is_its_fused_graph_also_through_from_edges():
    h = hetero_data()
    g = HeteroGraph.from_edges(h)
    assert g.node_types == ("a", "b") and g.edge_types == tuple(h.edge_types)
    assert g.num_nodes_dict == {"a": 30, "b": 20}
    assert HeteroGraph.from_edges(h, {}).num_edges == g.num_edges  # the call
    perm = hetero_perm(g, h)
    for r, et in enumerate(g.edge_types):
        sel = np.flatnonzero(g.edge_type == r)
        s_off, d_off = (g.node_offsets[g.type_id(t)] for t in (et[0], et[2]))
        assert (g.csc.indices[sel] - s_off == h[et].edge_index[0].numpy()[perm[sel]]).all()
        dst = np.searchsorted(g.csc.indptr, sel, side="right") - 1 - d_off
        assert (dst == h[et].edge_index[1].numpy()[perm[sel]]).all()


def test_place_takes_a_pyg_data():
    d = data()
    placed = graphfeed.place(d, {}, [3, 2], mode="cpu-cpu")
    assert sorted(placed.features) == ["feat", "label"]
    assert torch.equal(placed.features["feat"].read(torch.arange(60)), d.x)
    mb = placed.sampler.sample(torch.tensor([0, 5, 9]))
    assert mb.seeds.tolist() == [0, 5, 9]
    loader = graphfeed.node_loader(torch.arange(20), placed, batch_size=10)
    assert sum(b.seeds.numel() for b in loader) == 20


def test_refusals_name_what_to_pass():
    d, h = data(), hetero_data()
    with pytest.raises(GraphfeedError, match=r"HeteroGraph.from_pyg\(data\)"):
        graphfeed.place(h, {}, [2])
    with pytest.raises(GraphfeedError, match=r"CSCGraph.from_pyg\(data\)"):
        CSCGraph.from_edges(d, [0])
    with pytest.raises(GraphfeedError, match="alone"):
        HeteroGraph.from_edges(h, {("a", "r", "b"): ([0], [0])})
    with pytest.raises(GraphfeedError, match=r"CSCGraph.from_pyg"):
        HeteroGraph.from_edges(d)
    with pytest.warns(UserWarning), pytest.raises(GraphfeedError, match="num_nodes is unknown"):
        HeteroGraph.from_pyg(HeteroData({
            "a": {"num_nodes": None},
            ("a", "r", "a"): {"edge_index": torch.zeros(2, 0, dtype=torch.long)}}))
