"""HeteroGraph and HeteroNeighborSampler: every sampled edge exists in its edge type's graph,
endpoint types match the relation, destinations-first per node type, fanouts hold per relation,
uniform over k-subsets, reproducible across threads; PyG ``to_hetero`` and ``HeteroConv`` models
run unchanged on the batches."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.graph.hetero import HeteroGraph
from graphfeed.sampling import SAMPLERS, build_sampler
from graphfeed.sampling.base import MiniBatch

P_MIN = 1e-4
NUM = {"paper": 300, "author": 150, "venue": 12}
WRITES = ("author", "writes", "paper")
REV_WRITES = ("paper", "rev_writes", "author")
CITES = ("paper", "cites", "paper")
HOSTS = ("venue", "hosts", "paper")
REV_HOSTS = ("paper", "rev_hosts", "venue")


def make_edges(seed=0):
    rng = np.random.default_rng(seed)
    e = {}
    a, p = rng.integers(0, 150, 1500), rng.integers(0, 300, 1500)
    e[WRITES] = (a, p)
    e[REV_WRITES] = (p, a)
    # paper 0 is a hub of citations (in-degree > 64: every kernel path runs)
    cs = np.concatenate([rng.integers(0, 300, 900), rng.choice(300, 100, replace=False)])
    cd = np.concatenate([rng.integers(0, 300, 900), np.zeros(100, np.int64)])
    e[CITES] = (cs, cd)
    v = rng.integers(0, 12, 300)
    e[HOSTS] = (v, np.arange(300))
    e[REV_HOSTS] = (np.arange(300), v)
    return e


@pytest.fixture(scope="module")
def hg():
    return HeteroGraph.from_edges(NUM, make_edges(), drop_duplicates=True)


def edge_sets(g):
    return {et: set(zip(*(x.tolist() for x in g.edges_of(et)))) for et in g.edge_types}


def rel_degrees(g, et):
    s, d = g.edges_of(et)
    return np.bincount(d, minlength=g.num_nodes_of(et[2]))


def check_batch(g, mb, fanouts_dict, replace, sets=None):
    """Every invariant of a typed MiniBatch against the graph."""
    sets = sets if sets is not None else edge_sets(g)
    assert isinstance(mb, MiniBatch) and mb.is_typed and not mb.is_link
    L = len(next(iter(fanouts_dict.values())))
    assert len(mb.blocks) == L
    seeds = mb.seed_dict
    for t in g.node_types:
        assert torch.equal(mb.blocks[-1].dst_nodes[t], seeds[t])
    for i in range(L - 1):
        for t in g.node_types:
            assert torch.equal(mb.blocks[i].dst_nodes[t], mb.blocks[i + 1].src_nodes[t])
    for layer, b in enumerate(mb.blocks):
        assert set(b.edge_index_dict) == set(g.edge_types)
        assert set(b.src_nodes) == set(g.node_types)
        for t, src in b.src_nodes.items():
            s = src.numpy()
            assert src.dtype == torch.int64
            assert len(np.unique(s)) == len(s), "sources unique per type"
            assert b.num_dst[t] <= len(s)
            if len(s):
                assert s.min() >= 0 and s.max() < g.num_nodes_of(t)
        used = {t: np.zeros(len(v), bool) for t, v in b.src_nodes.items()}
        for et, ei in b.edge_index_dict.items():
            st, _, dt = et
            assert ei.dtype == torch.int64 and ei.shape[0] == 2
            e = ei.numpy()
            n_src, n_dst = b.size(et)
            if e.shape[1]:
                # endpoint types match the relation: local ids index that type's nodes
                assert e[0].min() >= 0 and e[0].max() < n_src
                assert e[1].min() >= 0 and e[1].max() < n_dst
            gs = b.src_nodes[st].numpy()[e[0]]
            gd = b.src_nodes[dt].numpy()[e[1]]
            for pair in zip(gs.tolist(), gd.tolist()):
                assert pair in sets[et], f"{pair} is no {et} edge"
            used[st][e[0]] = True
            # exact per-destination counts of this relation
            f = fanouts_dict[et][layer]
            deg = rel_degrees(g, et)[b.dst_nodes[dt].numpy()]
            counts = np.bincount(e[1], minlength=n_dst)
            want = {0: 0 * deg, -1: deg}.get(f)  # not sampled / every in-edge
            if want is None:
                want = np.where(deg > 0, f, 0) if replace else np.minimum(deg, f)
            assert np.array_equal(counts, want), et
            if not replace or f == -1:
                pairs = gs * (g.num_nodes + 1) + gd
                assert len(np.unique(pairs)) == len(pairs), "an edge repeats"
        # every non-destination source is reached by an edge
        for t, u in used.items():
            assert u[b.num_dst[t]:].all()


# ---------------------------------------------------------------------------- graph
def test_from_edges_fused_layout(hg):
    assert hg.node_types == ("paper", "author", "venue")
    assert list(hg.node_offsets) == [0, 300, 450, 462]
    assert hg.num_edge_types == 5 and hg.edge_type.dtype == np.int8
    # in-edges of each destination sorted by relation, endpoint types checked
    hg.validate()
    raw = make_edges()
    for et in hg.edge_types:
        s, d = hg.edges_of(et)
        assert set(zip(s.tolist(), d.tolist())) == set(zip(*(x.tolist() for x in raw[et])))


def test_hetero_graph_checks_its_arrays(hg):
    csc = hg.csc
    et = hg.edge_type.copy()
    HeteroGraph(csc, hg.node_types, [300, 150, 12], hg.edge_types, et)
    bad = et.copy()
    bad[5] = 9
    with pytest.raises(DatasetError, match=r"edge_type\[5\] = 9 is out of range"):
        HeteroGraph(csc, hg.node_types, [300, 150, 12], hg.edge_types, bad)
    # swap two relation ids of a paper's in-edges: not sorted, or types mismatch
    v = int(np.flatnonzero(np.diff(csc.indptr)[:300] > 3)[0])
    lo = int(csc.indptr[v])
    bad = et.copy()
    bad[lo:int(csc.indptr[v + 1])] = bad[lo:int(csc.indptr[v + 1])][::-1]
    if not np.array_equal(bad, et):
        with pytest.raises(DatasetError, match="not sorted by edge type|is of type"):
            HeteroGraph(csc, hg.node_types, [300, 150, 12], hg.edge_types, bad)
    bad = et.copy()
    bad[lo] = hg.edge_type_id(REV_WRITES)  # destination is a paper, the relation ends at authors
    with pytest.raises(DatasetError, match="is of type"):
        HeteroGraph(csc, hg.node_types, [300, 150, 12], hg.edge_types, bad)
    with pytest.raises(GraphfeedError, match="add up to"):
        HeteroGraph(csc, hg.node_types, [300, 150, 11], hg.edge_types, et)
    with pytest.raises(GraphfeedError, match="node type 'x'"):
        HeteroGraph(csc, hg.node_types, [300, 150, 12], [("x", "r", "paper")], et)
    with pytest.raises(GraphfeedError, match="entries"):
        HeteroGraph(csc, hg.node_types, [300, 150, 12], hg.edge_types, et[:-1])
    with pytest.raises(GraphfeedError, match="out of range"):
        HeteroGraph.from_edges({"a": 2}, {("a", "r", "a"): ([0, 2], [1, 1])})


def test_edge_type_lookup(hg):
    assert hg.edge_type_id("cites") == hg.edge_type_id(CITES) == 2
    with pytest.raises(GraphfeedError, match="no relation"):
        hg.edge_type_id("likes")


# ---------------------------------------------------------------------------- sampling
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", [[4, 3], [-1, 2], [3, 70, 2]])
def test_batches_hold_every_invariant(hg, replace, fanouts):
    s = build_sampler("hetero", hg, fanouts, replace=replace, seed=3)
    sets = edge_sets(hg)
    fd = {et: list(fanouts) for et in hg.edge_types}
    for b, seeds in enumerate([{"paper": np.arange(0, 40)}, {"author": [5, 1, 9], "venue": [0]},
                               np.array([455, 3, 301, 0, 460])]):
        mb = s.sample(seeds, epoch=1, batch_index=b)
        check_batch(hg, mb, fd, replace, sets)


def test_global_seeds_grouped_by_type(hg):
    s = build_sampler("hetero", hg, [2])
    mb = s.sample(np.array([455, 3, 301, 0, 460]))
    assert mb.seeds.tolist() == [3, 0, 301, 455, 460]
    assert mb.seed_dict["paper"].tolist() == [3, 0]
    assert mb.seed_dict["author"].tolist() == [1]
    assert mb.seed_dict["venue"].tolist() == [5, 10]
    # global input ids are the per-type ids shifted by the type offsets
    gl = mb.input_nodes.numpy()
    parts = [mb.input_nodes_dict[t].numpy() + hg.node_offsets[i] for i, t in enumerate(hg.node_types)]
    assert np.array_equal(gl, np.concatenate(parts))


def test_dict_fanouts_per_relation(hg):
    fan = {"writes": [3, 2], CITES: [0, 5], "hosts": [1, 1], "rev_writes": [2, 0],
           "rev_hosts": [-1, 0]}
    s = build_sampler("hetero", hg, fan, seed=1)
    fd = {hg.edge_types[hg.edge_type_id(k)]: v for k, v in fan.items()}
    assert s.fanouts_dict == fd
    assert s.fanouts == (-1, 5)
    mb = s.sample({"paper": np.arange(50)})
    check_batch(hg, mb, fd, False)
    assert mb.blocks[0].edge_index_dict[CITES].shape[1] == 0
    # a relation missing from the dict is not sampled
    s2 = build_sampler("hetero", hg, {"writes": [4]})
    mb = s2.sample({"paper": np.arange(50)})
    assert mb.blocks[0].edge_index_dict[CITES].shape[1] == 0
    assert mb.blocks[0].edge_index_dict[WRITES].shape[1] > 0


@pytest.mark.parametrize("bad, match", [
    ({"likes": [2]}, "no relation"),
    ({"writes": [2], "cites": [1, 1]}, "same number"),
    ({"writes": [-2]}, "fanouts"),
    ({}, "names no edge type"),
    ([0, 2], "fanouts"),
])
def test_bad_fanouts(hg, bad, match):
    with pytest.raises(GraphfeedError, match=match):
        build_sampler("hetero", hg, bad)


def test_bad_seeds(hg):
    s = build_sampler("hetero", hg, [2])
    with pytest.raises(GraphfeedError, match="appears twice"):
        s.sample([3, 4, 3])
    with pytest.raises(GraphfeedError, match="out of range"):
        s.sample([3, 462])
    with pytest.raises(GraphfeedError, match="out of range"):
        s.sample({"venue": [12]})
    with pytest.raises(GraphfeedError, match="unknown node type"):
        s.sample({"user": [1]})
    # the map was left clean: a good batch afterwards is unaffected
    check_batch(hg, s.sample([3, 4]), {et: [2] for et in hg.edge_types}, False)


def test_refuses_homogeneous_graph_and_gpu(hg):
    with pytest.raises(GraphfeedError, match="HeteroGraph"):
        build_sampler("hetero", hg.csc, [2])
    with pytest.raises(GraphfeedError, match="CPU"):
        build_sampler("hetero", hg, [2], device="meta")
    assert "hetero" in SAMPLERS


def _same(a, b):
    assert torch.equal(a.seeds, b.seeds)
    for x, y in zip(a.blocks, b.blocks):
        for et in x.edge_index_dict:
            assert torch.equal(x.edge_index_dict[et], y.edge_index_dict[et])
        for t in x.src_nodes:
            assert torch.equal(x.src_nodes[t], y.src_nodes[t])


def _differ(a, b):
    return any(not torch.equal(x.edge_index_dict[et], y.edge_index_dict[et])
               for x, y in zip(a.blocks, b.blocks) for et in x.edge_index_dict)


def test_reproducible_and_thread_independent(hg):
    s = build_sampler("hetero", hg, [5, 4], seed=7)
    seeds = {"paper": np.arange(100), "author": np.arange(20)}
    ref = {(e, b): s.sample(seeds, epoch=e, batch_index=b) for e in range(2) for b in range(3)}
    # a fresh sampler, batches in another order, from several threads at once
    s2 = build_sampler("hetero", hg, [5, 4], seed=7)
    out = {}

    def work(keys):
        for k in keys:
            out[k] = s2.sample(seeds, epoch=k[0], batch_index=k[1])

    keys = list(reversed(list(ref)))
    threads = [threading.Thread(target=work, args=(keys[i::3],)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in ref:
        _same(ref[k], out[k])
    assert _differ(ref[(0, 0)], ref[(0, 1)]) and _differ(ref[(0, 0)], ref[(1, 0)])
    assert _differ(ref[(0, 0)], build_sampler("hetero", hg, [5, 4], seed=8).sample(seeds))


def test_return_edge_ids(hg):
    s = build_sampler("hetero", hg, [3, 3], return_edge_ids=True)
    mb = s.sample({"paper": np.arange(30)})
    ind = np.asarray(hg.csc.indices)
    for b in mb.blocks:
        for et, ei in b.edge_index_dict.items():
            eids = b.edge_ids[et].numpy()
            r = hg.edge_type_id(et)
            assert (hg.edge_type[eids] == r).all()
            st = hg.type_id(et[0])
            gsrc = b.src_nodes[et[0]].numpy()[ei[0].numpy()] + hg.node_offsets[st]
            assert np.array_equal(ind[eids], gsrc)


# ---------------------------------------------------------------------------- uniformity
def _uniform_graph(deg):
    """Node 0 of type "b" has ``deg`` in-edges of relation "x" and 3 of relation "y"."""
    edges = {("a", "x", "b"): (np.arange(deg), np.zeros(deg, np.int64)),
             ("c", "y", "b"): (np.arange(3), np.zeros(3, np.int64)),
             ("b", "z", "a"): (np.zeros(2, np.int64), np.arange(2))}
    return HeteroGraph.from_edges({"a": deg, "b": 1, "c": 3}, edges)


@pytest.mark.parametrize("deg, k, total", [(6, 2, 3000), (7, 3, 7000), (70, 2, 0)])
def test_without_replacement_uniform_over_subsets(deg, k, total):
    g = _uniform_graph(deg)
    s = build_sampler("hetero", g, {"x": [k], "y": [1]}, seed=5)
    if total == 0:  # large degree: the marginals of each neighbour (Floyd's path)
        hits = np.zeros(deg, np.int64)
        for b in range(4000):
            e = s.sample({"b": [0]}, batch_index=b).blocks[0]
            hits[e.src_nodes["a"].numpy()[e.edge_index_dict[("a", "x", "b")][0].numpy()]] += 1
        assert chisquare(hits).pvalue > P_MIN
        return
    subsets = {c: i for i, c in enumerate(itertools.combinations(range(deg), k))}
    counts = np.zeros(len(subsets), np.int64)
    for b in range(total):
        e = s.sample({"b": [0]}, batch_index=b).blocks[0]
        chosen = e.src_nodes["a"].numpy()[e.edge_index_dict[("a", "x", "b")][0].numpy()]
        counts[subsets[tuple(sorted(chosen.tolist()))]] += 1
    assert chisquare(counts).pvalue > P_MIN


def test_relations_draw_independently():
    g = _uniform_graph(4)
    s = build_sampler("hetero", g, {"x": [1], "y": [1]}, seed=2)
    joint = np.zeros(12, np.int64)
    for b in range(3000):
        e = s.sample({"b": [0]}, batch_index=b).blocks[0]
        x = int(e.src_nodes["a"][e.edge_index_dict[("a", "x", "b")][0][0]])
        y = int(e.src_nodes["c"][e.edge_index_dict[("c", "y", "b")][0][0]])
        joint[x * 3 + y] += 1
    assert chisquare(joint).pvalue > P_MIN


# ---------------------------------------------------------------------------- PyG models
def _x_dict(mb, dims=(8, 5, 3)):
    g = torch.Generator().manual_seed(0)
    return {t: torch.randn(len(v), d, generator=g)
            for (t, v), d in zip(mb.input_nodes_dict.items(), dims)}


def test_to_hetero_model_runs_on_batches(hg):
    pyg_nn = pytest.importorskip("torch_geometric.nn")

    class SAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg_nn.SAGEConv((-1, -1), 16)
            self.conv2 = pyg_nn.SAGEConv((-1, -1), 4)

        def forward(self, x, edge_index0, edge_index1):
            x = self.conv1(x, edge_index0).relu()
            return self.conv2(x, edge_index1)

    model = pyg_nn.to_hetero(SAGE(), (list(hg.node_types), list(hg.edge_types)), aggr="sum")
    s = build_sampler("hetero", hg, [4, 3])
    for b in range(3):
        mb = s.sample({"paper": np.arange(b * 20, b * 20 + 20)}, batch_index=b)
        out = model(_x_dict(mb), mb.edge_index_dict(0), mb.edge_index_dict(1))
        # local ids of every block index the first layer's inputs (destinations-first per type)
        assert out["paper"].shape == (len(mb.input_nodes_dict["paper"]), 4)
        seeds_out = out["paper"][: mb.num_seeds_dict["paper"]]
        assert torch.isfinite(seeds_out).all()
        seeds_out.sum().backward()


def test_hetero_conv_model_runs_on_batches(hg):
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    convs = torch.nn.ModuleList([
        pyg_nn.HeteroConv({et: pyg_nn.SAGEConv((-1, -1), 16) for et in hg.edge_types}),
        pyg_nn.HeteroConv({et: pyg_nn.GraphConv((-1, -1), 4) for et in hg.edge_types}),
    ])
    s = build_sampler("hetero", hg, [4, 3])
    mb = s.sample({"paper": np.arange(25), "author": np.arange(5)})
    h = _x_dict(mb)
    for i, conv in enumerate(convs):
        # bipartite per layer: sources are the block's src_nodes, outputs its destinations
        b = mb.blocks[i]
        h = {t: v[: b.num_src[t]] for t, v in h.items()}
        h = conv(h, b.edge_index_dict)
        h = {t: v[: b.num_dst[t]] for t, v in h.items()}
    assert h["paper"].shape == (25, 4) and h["author"].shape == (5, 4)
