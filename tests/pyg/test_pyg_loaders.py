"""PyG's own loaders (NodeLoader, LinkLoader, NeighborLoader) over ``GraphfeedSampler`` and
graphfeed's feature and graph stores: batches are PyG subgraphs of the stored graph (seeds
first, fanouts per hop), features are the stored rows, the same seed gives the same batches,
and a stock PyG model trains on them. pyg-lib and torch-sparse are not needed (and absent)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.loader import LinkLoader, NeighborLoader, NodeLoader  # noqa: E402
from torch_geometric.sampler import NegativeSampling  # noqa: E402

from graphfeed.errors import GraphfeedError  # noqa: E402
from graphfeed.pyg import GraphfeedSampler, from_dataset, graphfeed_fanouts  # noqa: E402

from pyg_helpers import check_homogeneous_batch, contains, edge_keys  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tiny_dataset):
    fs, gs = from_dataset(tiny_dataset)
    return tiny_dataset, fs, gs


def node_loader(fs, gs, ids, num_neighbors=(10, 5), batch_size=64, seed=0, **kw):
    sampler = GraphfeedSampler((fs, gs), list(num_neighbors), seed=seed, **kw)
    return NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.as_tensor(ids),
                      batch_size=batch_size)


def test_pyg_order_is_reversed_into_graphfeed_order():
    assert graphfeed_fanouts([10, 5, 2]) == [2, 5, 10]
    assert graphfeed_fanouts({("a", "r", "b"): [3, 1], "b__s__a": [4, 0]}) == {
        ("a", "r", "b"): [1, 3], ("b", "s", "a"): [0, 4]}


def test_node_loader_batches_are_pyg_subgraphs_of_the_stored_graph(tiny):
    ds, fs, gs = tiny
    ids = torch.from_numpy(ds.train_ids[:300])
    feat = np.asarray(ds.arrays.node_features["feat"])
    labels = np.asarray(ds.labels)
    seen = 0
    for b in node_loader(fs, gs, ids, num_neighbors=[10, 5]):
        seeds = ids[seen:seen + b.batch_size]
        check_homogeneous_batch(b, ds.graph, [10, 5], seeds)
        assert torch.equal(b.x, torch.from_numpy(feat[b.n_id.numpy()]))
        assert torch.equal(b.y, torch.from_numpy(labels[b.n_id.numpy()]))
        assert torch.equal(b.input_id, torch.arange(seen, seen + b.batch_size))
        seen += b.batch_size
    assert seen == 300


def test_every_neighbour_and_three_hops(tiny):
    ds, fs, gs = tiny
    ids = torch.from_numpy(ds.valid_ids[:100])
    for b in node_loader(fs, gs, ids, num_neighbors=[-1, 3, 2], batch_size=50):
        check_homogeneous_batch(b, ds.graph, [-1, 3, 2])
        assert len(b.num_sampled_nodes) == 4


def test_same_seed_same_batches_and_epochs_differ(tiny):
    ds, fs, gs = tiny
    ids = ds.train_ids[:200]

    def run(seed, epoch=0):
        loader = node_loader(fs, gs, ids, seed=seed)
        loader.node_sampler.set_epoch(epoch)
        return [(b.n_id.clone(), b.edge_index.clone()) for b in loader]

    a, b = run(3), run(3)
    assert all(torch.equal(x[0], y[0]) and torch.equal(x[1], y[1]) for x, y in zip(a, b))
    c, d = run(4), run(3, epoch=1)
    assert any(not torch.equal(x[0], y[0]) for x, y in zip(a, c))
    assert any(not torch.equal(x[0], y[0]) for x, y in zip(a, d))


def test_a_stock_pyg_graphsage_trains_and_its_loss_drops(tiny):
    from torch_geometric.nn import GraphSAGE

    ds, fs, gs = tiny
    torch.manual_seed(0)
    model = GraphSAGE(32, 64, num_layers=2, out_channels=ds.num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sampler = GraphfeedSampler((fs, gs), [10, 5])
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.from_numpy(
        ds.train_ids), batch_size=128, shuffle=True)
    losses = []
    for epoch in range(4):
        sampler.set_epoch(epoch)
        total = 0.0
        for b in loader:
            opt.zero_grad()
            out = model(b.x, b.edge_index, num_sampled_nodes_per_hop=b.num_sampled_nodes,
                        num_sampled_edges_per_hop=b.num_sampled_edges)[: b.batch_size]
            loss = torch.nn.functional.cross_entropy(out, b.y[: b.batch_size])
            loss.backward()
            opt.step()
            total += float(loss.detach()) * b.batch_size
        losses.append(total / ds.train_ids.size)
    assert losses[-1] < 0.8 * losses[0], losses


def test_disk_lmdb_and_cached_features_serve_the_same_rows(tiny, tmp_path):
    import shutil

    from graphfeed.datasets.format import Dataset

    ds, fs, gs = tiny
    copy = tmp_path / "tiny"
    shutil.copytree(ds.path, copy)  # LMDB builds its store beside the .npy
    ids = torch.from_numpy(ds.train_ids[:100])
    want = [b.x for b in node_loader(fs, gs, ids)]
    for backend, cache in (("disk", 0), ("disk", "64KB"), ("lmdb", 0)):
        fs2, gs2 = from_dataset(Dataset.open(copy), backend=backend, cache_size=cache)
        assert fs2.feature(None, "x").kind != "in-memory"
        got = [b.x for b in node_loader(fs2, gs2, ids)]
        assert all(torch.equal(x, y) for x, y in zip(want, got)), backend
        fs2.close()


def test_a_pyg_data_keeps_its_loader_and_edge_attributes(tiny):
    from torch_geometric.data import Data

    ds, _, _ = tiny
    g = ds.graph
    dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
    rng = np.random.default_rng(0)
    perm = rng.permutation(g.num_edges)  # PyG's edges in an order of their own
    ei = torch.from_numpy(np.stack([np.asarray(g.indices, np.int64)[perm], dst[perm]]))
    data = Data(x=torch.from_numpy(np.asarray(ds.arrays.node_features["feat"])),
                edge_index=ei, edge_attr=torch.arange(g.num_edges).float()[:, None],
                y=torch.from_numpy(np.asarray(ds.labels)))
    loader = NeighborLoader(data, [5, 5], batch_size=100,
                            input_nodes=torch.from_numpy(ds.train_ids[:200]),
                            neighbor_sampler=GraphfeedSampler(data, [5, 5]))
    for b in loader:
        # e_id is PyG's edge id, and edge_attr its row
        assert torch.equal(b.n_id[b.edge_index[0]], ei[0, b.e_id])
        assert torch.equal(b.n_id[b.edge_index[1]], ei[1, b.e_id])
        assert torch.equal(b.edge_attr[:, 0].long(), b.e_id)
        assert torch.equal(b.x, data.x[b.n_id])


def test_weighted_labor_and_temporal_methods(tiny):
    from torch_geometric.data import Data

    ds, fs, gs = tiny
    g = ds.graph
    n = g.num_nodes
    dst = np.repeat(np.arange(n), np.diff(g.indptr))
    ei = torch.from_numpy(np.stack([np.asarray(g.indices, np.int64), dst]))
    w = torch.from_numpy((np.arange(g.num_edges) % 3 != 0).astype(np.float32))  # 0: never
    t = torch.from_numpy(np.random.default_rng(1).integers(0, 100, n))
    data = Data(edge_index=ei, w=w, num_nodes=n, t=t)
    ids = torch.from_numpy(ds.train_ids[:200])
    weighted = GraphfeedSampler(data, [5, 5], weight_attr="w")
    for b in NodeLoader(data, node_sampler=weighted, input_nodes=ids, batch_size=100):
        assert (w[b.e_id] > 0).all()
        check_homogeneous_batch(b, g, [5, 5], exact=False)
    labor = GraphfeedSampler((fs, gs), [5, 5], method="labor")
    for b in NodeLoader((fs, gs), node_sampler=labor, input_nodes=ids, batch_size=100):
        check_homogeneous_batch(b, g, [-1, -1], exact=False)
    temporal = GraphfeedSampler(data, [5, 5], time_attr="t")
    when = torch.full((ids.numel(),), 50)
    loader = NodeLoader(data, node_sampler=temporal, input_nodes=ids, input_time=when,
                        batch_size=100)
    for b in loader:
        assert (t[b.n_id[b.batch_size:]] <= 50).all()  # no node later than its seed
        assert torch.equal(b.seed_time, when[: b.batch_size])
        check_homogeneous_batch(b, g, [5, 5], exact=False)


@pytest.mark.parametrize("mode,amount", [(None, 0), ("binary", 1), ("binary", 2.5),
                                         ("triplet", 3)])
def test_link_loader_seed_edges_and_negatives(tiny, mode, amount):
    ds, fs, gs = tiny
    g = ds.graph
    dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
    rng = np.random.default_rng(2)
    pick = rng.choice(g.num_edges, 300, replace=False)
    pairs = torch.from_numpy(np.stack([np.asarray(g.indices, np.int64)[pick], dst[pick]]))
    neg = None if mode is None else NegativeSampling(mode, amount)
    sampler = GraphfeedSampler((fs, gs), [5, 5], exclude="self")
    # a remote homogeneous graph's edge type is None
    loader = LinkLoader((fs, gs), link_sampler=sampler, edge_label_index=(None, pairs),
                        neg_sampling=neg, batch_size=100)
    keys = edge_keys(g)
    done = 0
    for b in loader:
        p = pairs[:, done:done + 100]
        check_homogeneous_batch(b, g, [5, 5], exact=False)
        # the seed edges themselves were removed from the sampled graph (exclude="self")
        sampled = b.n_id[b.edge_index[0]] * g.num_nodes + b.n_id[b.edge_index[1]]
        assert not np.isin(sampled.numpy(), (p[0] * g.num_nodes + p[1]).numpy()).any()
        num_pos = p.shape[1]
        if mode == "triplet":
            assert torch.equal(b.n_id[b.src_index], p[0])
            assert torch.equal(b.n_id[b.dst_pos_index], p[1])
            assert b.dst_neg_index.shape == (num_pos, amount)
            assert (b.n_id[b.dst_neg_index] != p[1][:, None]).all()
        else:
            eli = b.edge_label_index
            assert torch.equal(b.n_id[eli[:, :num_pos]], p)
            num_neg = 0 if mode is None else int(np.ceil(num_pos * amount))
            assert eli.shape == (2, num_pos + num_neg)
            if mode is not None:
                assert torch.equal(b.edge_label, torch.cat([torch.ones(num_pos),
                                                            torch.zeros(num_neg)]))
                negs = b.n_id[eli[:, num_pos:]]
                owner = torch.arange(num_neg) % num_pos  # one per pair in turn
                assert torch.equal(negs[0], p[0][owner])
                assert (negs[1] != p[1][owner]).all()
        assert contains(keys, (p[0] * g.num_nodes + p[1]).numpy())
        done += num_pos
    assert done == 300


def test_errors_are_one_line(tiny):
    ds, fs, gs = tiny
    with pytest.raises(GraphfeedError, match="dict of edge types is for typed graphs"):
        GraphfeedSampler((fs, gs), {("a", "r", "b"): [1]})
    with pytest.raises(GraphfeedError, match="num_neighbors must be ints|fanouts must be"):
        GraphfeedSampler((fs, gs), [0, 5])
    with pytest.raises(GraphfeedError, match="weight_attr"):
        GraphfeedSampler((fs, gs), [5], weight_attr="w")
    with pytest.raises(GraphfeedError, match="exclude must be one of"):
        GraphfeedSampler((fs, gs), [5], exclude="all")
    with pytest.raises(GraphfeedError, match="reverse_edge_types is for typed graphs"):
        GraphfeedSampler((fs, gs), [5], reverse_edge_types={})
    s = GraphfeedSampler((fs, gs), [5])
    with pytest.raises(GraphfeedError, match="appears twice"):
        next(iter(NodeLoader((fs, gs), node_sampler=s, input_nodes=torch.tensor([1, 1]),
                             batch_size=2)))
    with pytest.raises(GraphfeedError, match="weighted negatives"):
        next(iter(LinkLoader((fs, gs), link_sampler=s, edge_label_index=(None, torch.tensor([[0], [1]])),
                             neg_sampling=NegativeSampling("binary", 1,
                                                           src_weight=torch.ones(3000)))))
    with pytest.raises(KeyError, match="no feature"):
        fs.get_tensor(None, "nope", index=torch.tensor([0]))


def test_temporal_link_seeds():
    from torch_geometric.data import Data

    n = 200
    g = torch.Generator().manual_seed(0)
    ei = torch.randint(0, n, (2, 2000), generator=g)
    t = torch.randint(0, 100, (n,), generator=g)
    data = Data(edge_index=ei, t=t, num_nodes=n)
    sampler = GraphfeedSampler(data, [5, 5], time_attr="t")
    when = torch.full((100,), 40)
    loader = LinkLoader(data, link_sampler=sampler, edge_label_index=ei[:, :100],
                        edge_label_time=when, neg_sampling=NegativeSampling("binary", 1),
                        batch_size=50)
    for b in loader:
        ends = torch.zeros(b.num_nodes, dtype=torch.bool)
        ends[b.edge_label_index.unique()] = True
        # every node the seed pairs reached is at most as late as their time
        assert (t[b.n_id[~ends]] <= 40).all()
        assert torch.equal(b.edge_label_time, torch.full((100,), 40))
