"""Typed graphs through PyG's loaders: ``HeteroData`` batches from ``GraphfeedSampler`` over the
built-in ``hetero`` dataset's stores and over a PyG ``HeteroData``, node and link seeds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.loader import LinkLoader, NeighborLoader, NodeLoader  # noqa: E402
from torch_geometric.sampler import NegativeSampling  # noqa: E402

from graphfeed.errors import GraphfeedError  # noqa: E402
from graphfeed.pyg import GraphfeedSampler, from_dataset  # noqa: E402

from pyg_helpers import check_hetero_batch, contains, typed_edge_keys  # noqa: E402

WRITES = ("author", "writes", "paper")
WRITTEN_BY = ("paper", "written_by", "author")


@pytest.fixture(scope="module")
def hetero(builtin_root):
    from graphfeed.datasets.open import open_dataset

    ds = open_dataset("hetero", builtin_root("hetero"))
    fs, gs = from_dataset(ds)
    return ds, fs, gs


def paper_ids(ds, split="train_ids", n=200):
    g = ds.hetero
    off = int(g.node_offsets[g.type_id("paper")])
    return torch.from_numpy(getattr(ds, split)[:n] - off)


def test_node_loader_gives_typed_subgraphs_with_stored_features(hetero):
    ds, fs, gs = hetero
    g = ds.hetero
    nn = {et: [4, 3] for et in g.edge_types}
    nn[("field", "topic_of", "paper")] = [1, 0]  # 0: not sampled at hop 2
    sampler = GraphfeedSampler((fs, gs), nn)
    ids = paper_ids(ds)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=("paper", ids),
                        batch_size=64)
    off = int(g.node_offsets[g.type_id("paper")])
    labels = np.asarray(ds.labels)
    done = 0
    for b in loader:
        seeds = ids[done:done + b["paper"].batch_size]
        check_hetero_batch(b, g, nn, "paper", seeds)
        for t in g.node_types:
            want = ds.type_features[t]["feat"].read(b[t].n_id)
            assert torch.equal(b[t].x, want), t
        assert torch.equal(b["paper"].y, torch.from_numpy(labels[b["paper"].n_id.numpy() + off]))
        assert b["field", "topic_of", "paper"].num_sampled_edges[1] == 0
        done += seeds.numel()
    assert done == ids.numel()


def test_a_pyg_heterodata_and_a_to_hetero_model(hetero):
    from torch_geometric.data import HeteroData
    from torch_geometric.nn import SAGEConv, to_hetero

    ds, _, _ = hetero
    g = ds.hetero
    data = HeteroData()
    for t in g.node_types:
        data[t].x = ds.type_features[t]["feat"].read(torch.arange(g.num_nodes_of(t)))
    off = int(g.node_offsets[g.type_id("paper")])
    data["paper"].y = torch.from_numpy(np.asarray(ds.labels)[off:off + g.num_nodes_of("paper")])
    rng = np.random.default_rng(0)
    for et in g.edge_types:
        src, dst = g.edges_of(et)
        p = rng.permutation(src.size)  # PyG's own edge order
        data[et].edge_index = torch.from_numpy(np.stack([src[p], dst[p]]))
    # fields receive no edges in the dataset; to_hetero wants every type updated
    data["paper", "about", "field"].edge_index = data["field", "topic_of", "paper"].edge_index.flip(0)
    sampler = GraphfeedSampler(data, [5, 5])
    loader = NeighborLoader(data, [5, 5], input_nodes=("paper", paper_ids(ds, n=1200)),
                            batch_size=200, shuffle=True, neighbor_sampler=sampler)

    class SAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = SAGEConv((-1, -1), 64), SAGEConv((-1, -1), 6)

        def forward(self, x, edge_index):
            return self.c2(self.c1(x, edge_index).relu(), edge_index)

    torch.manual_seed(0)
    model = to_hetero(SAGE(), data.metadata(), aggr="sum")
    with torch.no_grad():  # lazy shapes
        b = next(iter(loader))
        model(b.x_dict, b.edge_index_dict)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for epoch in range(4):
        sampler.set_epoch(epoch)
        total = 0.0
        for b in loader:
            for et in data.edge_types:  # e_id is PyG's edge id within the edge type
                ei, e = b[et].edge_index, b[et].e_id
                assert torch.equal(b[et[0]].n_id[ei[0]], data[et].edge_index[0, e])
                assert torch.equal(b[et[2]].n_id[ei[1]], data[et].edge_index[1, e])
            opt.zero_grad()
            n = b["paper"].batch_size
            out = model(b.x_dict, b.edge_index_dict)["paper"][:n]
            loss = torch.nn.functional.cross_entropy(out, b["paper"].y[:n])
            loss.backward()
            opt.step()
            total += float(loss.detach())
        losses.append(total)
    assert losses[-1] < 0.8 * losses[0], losses


@pytest.mark.parametrize("mode", ["binary", "triplet"])
def test_typed_link_loader(hetero, mode):
    ds, fs, gs = hetero
    g = ds.hetero
    src, dst = g.edges_of(WRITES)
    pick = np.random.default_rng(3).choice(src.size, 150, replace=False)
    pairs = torch.from_numpy(np.stack([src[pick], dst[pick]]))
    sampler = GraphfeedSampler((fs, gs), [4, 4], exclude="reverse",
                               reverse_edge_types={WRITES: WRITTEN_BY})
    loader = LinkLoader((fs, gs), link_sampler=sampler, edge_label_index=(WRITES, pairs),
                        neg_sampling=NegativeSampling(mode, 2), batch_size=50)
    keys, n = typed_edge_keys(g, WRITES)
    nn = {et: [4, 4] for et in g.edge_types}
    done = 0
    for b in loader:
        p = pairs[:, done:done + 50]
        check_hetero_batch(b, g, nn)
        a, q = b["author"].n_id, b["paper"].n_id
        # neither the seed edges nor their reverses were sampled
        ei = b[WRITES].edge_index
        sampled = (a[ei[0]] * n + q[ei[1]]).numpy()
        assert not np.isin(sampled, (p[0] * n + p[1]).numpy()).any()
        ei = b[WRITTEN_BY].edge_index
        assert not np.isin((a[ei[1]] * n + q[ei[0]]).numpy(), (p[0] * n + p[1]).numpy()).any()
        if mode == "binary":
            eli = b[WRITES].edge_label_index
            assert torch.equal(a[eli[0, :50]], p[0]) and torch.equal(q[eli[1, :50]], p[1])
            assert eli.shape[1] == 150 and torch.equal(b[WRITES].edge_label[50:],
                                                       torch.zeros(100))
        else:
            assert torch.equal(a[b["author"].src_index], p[0])
            assert torch.equal(q[b["paper"].dst_pos_index], p[1])
            assert b["paper"].dst_neg_index.shape == (50, 2)
        assert contains(keys, (p[0] * n + p[1]).numpy())
        done += 50
    assert done == 150


def test_typed_errors(hetero):
    ds, fs, gs = hetero
    s = GraphfeedSampler((fs, gs), [2])
    with pytest.raises(GraphfeedError, match="typed seeds"):
        next(iter(NodeLoader((fs, gs), node_sampler=s, input_nodes=torch.tensor([0, 1]),
                             batch_size=2)))
    with pytest.raises(GraphfeedError, match="samples uniformly"):
        GraphfeedSampler((fs, gs), [2], method="labor")
    with pytest.raises(GraphfeedError, match="unknown edge type"):
        GraphfeedSampler((fs, gs), {("paper", "nope", "paper"): [1]})
