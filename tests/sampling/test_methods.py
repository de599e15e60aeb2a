"""Weighted, LABOR and temporal sampling (``SamplingMethod``): distributions, invariants,
reproducibility and errors, for the numba sampler and the torch sampler (on CPU)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy import stats

from graphfeed.errors import GraphfeedError
from graphfeed.graph.csc import CSCGraph
from graphfeed.sampling import SamplingMethod, build_sampler

SAMPLERS = ["neighbor", "torch"]
VARIATES = ["iid", "rotated"]  # LABOR's variates
P_MIN = 1e-3  # fixed seeds: the tests are deterministic, this only bounds how unlucky they are


def star(weights, extra=()):
    """Node 0's in-edges come from nodes 1..len(weights) with ``weights``; ``extra`` adds
    more destinations as ``(dst, [(src, weight), ...])``."""
    src = list(range(1, len(weights) + 1))
    dst = [0] * len(weights)
    w = list(weights)
    n = len(weights) + 1
    for d, edges in extra:
        for s, x in edges:
            src.append(s)
            dst.append(d)
            w.append(x)
            n = max(n, s + 1, d + 1)
    return CSCGraph.from_edges(np.array(src), np.array(dst), n, weights=np.array(w, np.float32))


def draws(sampler, seed_node, n, **kw):
    """The global source ids sampled for ``seed_node`` in ``n`` independent batches."""
    out = []
    for b in range(n):
        blk = sampler.sample(np.array([seed_node]), batch_index=b, **kw).blocks[-1]
        out.append(blk.src_nodes[blk.edge_index[0]].cpu().numpy())
    return out


def successive_subset_probs(w, k):
    """Exact probability of every k-subset under successive draws without replacement."""
    w = np.asarray(w, float)
    probs = {}
    for seq in itertools.permutations(np.flatnonzero(w > 0), k):
        p, rest = 1.0, w.sum()
        for j in seq:
            p *= w[j] / rest
            rest -= w[j]
        key = tuple(sorted(seq))
        probs[key] = probs.get(key, 0.0) + p
    return probs


# ------------------------------------------------------------------ weighted
@pytest.mark.parametrize("name", SAMPLERS)
@pytest.mark.parametrize("replace", [False, True])
def test_weighted_first_draw_chi_square(name, replace):
    w = [1.0, 2.0, 0.0, 3.0, 4.0, 0.5, 0.0, 5.5]
    s = build_sampler(name, star(w), [1], method=SamplingMethod("weighted"), replace=replace)
    got = np.concatenate(draws(s, 0, 4000))
    assert got.shape == (4000,)
    pos = got - 1
    assert not np.isin(pos, np.flatnonzero(np.array(w) == 0)).any(), "zero weight drawn"
    counts = np.bincount(pos, minlength=len(w))
    nz = np.array(w) > 0
    expected = np.array(w)[nz] / sum(w) * 4000
    assert stats.chisquare(counts[nz], expected).pvalue > P_MIN


@pytest.mark.parametrize("name", SAMPLERS)
# numba: k=2 draws successively from the alias table, k=4 adds the exact fallback step after
# repeated rejections, k=5 (degree 7 <= 1.5 k) is the scan of the weights (_weighted_scan)
@pytest.mark.parametrize("k", [2, 4, 5])
def test_weighted_subsets_match_successive_sampling(name, k):
    w = [1.0, 2.0, 0.0, 3.0, 4.0, 0.5, 6.0]
    exact = successive_subset_probs(w, k)
    s = build_sampler(name, star(w), [k], method=SamplingMethod("weighted"))
    assert subsets_pvalue(draws(s, 0, 4000), exact, k) > P_MIN


def subsets_pvalue(samples, exact, k) -> float:
    """Chi-square p-value of the sampled k-subsets of star sources (``samples``: source ids
    per batch) against ``exact`` (subset of positions -> probability), rare subsets pooled
    so that every expected count is >= 5."""
    seen = {key: 0 for key in exact}
    for d in samples:
        key = tuple(sorted((d - 1).tolist()))
        assert len(key) == k and len(set(key)) == k
        seen[key] += 1  # a KeyError would mean a subset with a zero weight
    keys = sorted(exact)
    obs = np.array([seen[key] for key in keys])
    exp = np.array([exact[key] for key in keys]) * len(samples)
    big = exp >= 5
    obs_p, exp_p = obs[big], exp[big]
    if (~big).any():
        obs_p, exp_p = np.append(obs_p, obs[~big].sum()), np.append(exp_p, exp[~big].sum())
    return stats.chisquare(obs_p, exp_p).pvalue


@pytest.mark.parametrize("name", SAMPLERS)
def test_weighted_with_replacement_iid_counts(name):
    w = [1.0, 0.0, 3.0, 2.0]
    s = build_sampler(name, star(w), [3], method=SamplingMethod("weighted"), replace=True)
    got = draws(s, 0, 2000)
    assert all(d.shape == (3,) for d in got)
    counts = np.bincount(np.concatenate(got) - 1, minlength=4)
    assert counts[1] == 0
    exp = np.array([1.0, 3.0, 2.0]) / 6 * 6000
    assert stats.chisquare(counts[[0, 2, 3]], exp).pvalue > P_MIN


@pytest.mark.parametrize("name", SAMPLERS)
@pytest.mark.parametrize("replace", [False, True])
def test_weighted_all_zero_destination_gets_nothing(name, replace):
    g = star([0.0, 0.0, 0.0], extra=[(4, [(1, 1.0), (2, 0.0)])])
    s = build_sampler(name, g, [2], method=SamplingMethod("weighted"), replace=replace)
    mb = s.sample(np.array([0, 4]))
    b = mb.blocks[-1]
    dst = b.edge_index[1].cpu().numpy()
    assert (dst == 1).all() and len(dst) == (2 if replace else 1)
    assert (b.src_nodes[b.edge_index[0]].cpu().numpy() == 1).all()


def test_weighted_hub_degrees_use_every_path():
    """A random weighted graph with hubs: the numba and torch samplers draw only edges of the
    graph with positive weight, at most ``fanout`` distinct per destination."""
    rng = np.random.default_rng(3)
    n, e = 400, 6000
    src = rng.integers(0, n, e)
    dst = np.where(rng.random(e) < 0.3, rng.integers(0, 4, e), rng.integers(0, n, e))
    w = rng.random(e).astype(np.float32)
    w[rng.random(e) < 0.2] = 0
    g = CSCGraph.from_edges(src, dst, n, weights=w)
    seeds = np.arange(0, 300)
    for name in SAMPLERS:
        s = build_sampler(name, g, [5, 12], method=SamplingMethod("weighted"), return_edge_ids=True)
        mb = s.sample(seeds)
        for blk, k in zip(mb.blocks, [5, 12]):
            eids = blk.edge_ids.cpu().numpy()
            assert (g.weights[eids] > 0).all()
            gs = blk.src_nodes[blk.edge_index[0]].cpu().numpy()
            gd = blk.src_nodes[blk.edge_index[1]].cpu().numpy()
            assert np.array_equal(g.indices[eids], gs)
            assert (np.searchsorted(g.indptr, eids, side="right") - 1 == gd).all()
            assert len(np.unique(eids)) == len(eids)
            cnt = np.bincount(blk.edge_index[1].cpu().numpy(), minlength=blk.num_dst)
            npos = np.array([(g.weights[g.indptr[v]:g.indptr[v + 1]] > 0).sum()
                             for v in blk.dst_nodes.cpu().numpy()])
            assert np.array_equal(cnt, np.minimum(npos, k))


# ------------------------------------------------------------------ LABOR
def labor_graph():
    """Destinations 0..3 with in-degrees 3, 8, 20, 40 over sources 10..49 (shared)."""
    extra = []
    for d, deg in zip(range(4), (3, 8, 20, 40)):
        extra.append((d, [(10 + j, 1.0) for j in range(deg)]))
    src = [s for _, es in extra for s, _ in es]
    dst = [d for d, es in extra for _ in es]
    return CSCGraph.from_edges(np.array(src), np.array(dst), 50)


@pytest.mark.parametrize("variates", VARIATES)
@pytest.mark.parametrize("name", SAMPLERS)
def test_labor_marginals_and_unbiased_mean(name, variates):
    g = labor_graph()
    k, n = 5, 3000
    s = build_sampler(name, g, [k], method=SamplingMethod("labor", variates=variates))
    h = np.random.default_rng(0).normal(size=50)
    seeds = np.arange(4)
    incl = np.zeros(g.num_edges)
    est = np.zeros((n, 4))
    for b in range(n):
        blk = s.sample(seeds, batch_index=b, ).blocks[-1]
        s_glob = blk.src_nodes[blk.edge_index[0]].numpy()
        d_loc = blk.edge_index[1].numpy()
        w = blk.edge_weight.numpy()
        np.add.at(est[b], d_loc, w * h[s_glob])
        for sg, dl in zip(s_glob, d_loc):
            lo = g.indptr[dl]
            incl[lo + np.flatnonzero(g.indices[lo:g.indptr[dl + 1]] == sg)[0]] += 1
    deg = np.diff(g.indptr)[:4]
    pi = np.repeat(np.minimum(1.0, k / deg), deg)
    # every edge's inclusion frequency against min(1, k / d): a two-sided binomial z-test
    sd = np.sqrt(np.maximum(pi * (1 - pi), 1e-12) / n)
    z = (incl / n - pi) / sd
    assert np.all(np.abs(z[pi < 1]) < 4.5) and np.all(incl[pi == 1] == n)
    exact = np.array([h[g.indices[g.indptr[v]:g.indptr[v + 1]]].mean() for v in range(4)])
    se = est.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(est.mean(axis=0) - exact) < 4.5 * np.maximum(se, 1e-6))  # float32 weights


@pytest.mark.parametrize("variates", VARIATES)
@pytest.mark.parametrize("name", SAMPLERS)
def test_labor_shares_variates_across_destinations(name, variates):
    """Destinations 2 and 3 share their first 20 sources: with shared variates a source kept
    for destination 3 (threshold 5/40) is always kept for destination 2 (threshold 5/20)."""
    g = labor_graph()
    s = build_sampler(name, g, [5], method=SamplingMethod("labor", variates=variates))
    for b in range(200):
        blk = s.sample(np.array([2, 3]), batch_index=b).blocks[-1]
        gs = blk.src_nodes[blk.edge_index[0]].numpy()
        dl = blk.edge_index[1].numpy()
        kept2, kept3 = set(gs[dl == 0]), set(gs[dl == 1])
        assert {t for t in kept3 if t < 30} <= kept2


@pytest.mark.parametrize("variates", VARIATES)
@pytest.mark.parametrize("name", SAMPLERS)
def test_labor_layer_dependency(name, variates):
    """Seed 3 (degree 40) is a destination of both layers: with ``layer_dependency`` it keeps
    the same neighbours in both; without, the layers draw independently."""
    g = labor_graph()
    same = {}
    for dep in (False, True):
        s = build_sampler(name, g, [5, 5], method=SamplingMethod("labor", layer_dependency=dep,
                                                                 variates=variates))
        eq = 0
        for b in range(100):
            mb = s.sample(np.array([3]), batch_index=b)
            sets = []
            for blk in mb.blocks:
                gs = blk.src_nodes[blk.edge_index[0]].numpy()
                sets.append(set(gs[blk.edge_index[1].numpy() == 0]))
            eq += sets[0] == sets[1]
        same[dep] = eq
    assert same[True] == 100 and same[False] < 50


@pytest.mark.parametrize("variates", VARIATES)
def test_labor_numba_and_torch_keep_the_same_edges(variates):
    """Both samplers hash source ids the same way: same seed, same kept edges and weights."""
    g, _, _ = big_graph()
    for dep in (False, True):
        m = SamplingMethod("labor", layer_dependency=dep, variates=variates)
        a = build_sampler("neighbor", g, [4, 6], method=m, seed=5, return_edge_ids=True)
        b = build_sampler("torch", g, [4, 6], method=m, seed=5, return_edge_ids=True)
        ma, mb = a.sample(np.arange(500), batch_index=3), b.sample(np.arange(500), batch_index=3)
        for x, y in zip(ma.blocks, mb.blocks):
            kx = sorted(zip(x.edge_ids.tolist(), x.src_nodes[x.edge_index[1]].tolist(), x.edge_weight.tolist()))
            ky = sorted(zip(y.edge_ids.tolist(), y.src_nodes[y.edge_index[1]].tolist(), y.edge_weight.tolist()))
            assert kx == ky
            assert sorted(x.src_nodes.tolist()) == sorted(y.src_nodes.tolist())


def test_labor_weights_move_with_block():
    g = labor_graph()
    mb = build_sampler("neighbor", g, [5], method="labor").sample(np.arange(4))
    blk = mb.blocks[0]
    assert blk.edge_weight.dtype == torch.float32 and blk.edge_weight.shape == (blk.num_edges,)
    assert mb.to("cpu").blocks[0].edge_weight is not None


@pytest.mark.parametrize("variates", VARIATES)
def test_labor_draws_fewer_inputs_than_uniform(variates):
    rng = np.random.default_rng(1)
    n = 3000
    src, dst = rng.integers(0, n, 60000), rng.integers(0, n, 60000)
    g = CSCGraph.from_edges(src, dst, n)
    seeds = np.arange(200)
    m = SamplingMethod("labor", variates=variates)
    uni = lab = 0
    for b in range(5):
        uni += build_sampler("neighbor", g, [10, 10]).sample(seeds, batch_index=b).input_nodes.numel()
        lab += build_sampler("neighbor", g, [10, 10], method=m).sample(
            seeds, batch_index=b).input_nodes.numel()
    assert lab < 0.9 * uni


# ------------------------------------------------------------------ temporal
def temporal_graph(seed=0, n=300, e=6000):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, e)
    dst = np.where(rng.random(e) < 0.2, rng.integers(0, 3, e), rng.integers(0, n, e))
    g = CSCGraph.from_edges(src, dst, n)
    et = rng.integers(0, 1000, g.num_edges)
    nt = rng.integers(0, 1000, n)
    return g, nt, et


def edge_time(nt, et, g, eids, use):
    t = np.full(len(eids), np.iinfo(np.int64).min)
    if "edge" in use:
        t = np.maximum(t, et[eids])
    if "node" in use:
        t = np.maximum(t, nt[g.indices[eids]])
    return t


@pytest.mark.parametrize("name", SAMPLERS)
@pytest.mark.parametrize("use", [("edge",), ("node",), ("edge", "node")])
@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("strict", [False, True])
def test_temporal_no_edge_after_its_seed(name, use, strategy, strict):
    g, nt, et = temporal_graph()
    arrays = {"edge_times": et} if "edge" in use else {}
    if "node" in use:
        arrays["node_times"] = nt
    m = SamplingMethod("temporal", strategy=strategy, strict=strict).bind(arrays)
    s = build_sampler(name, g, [4, 6], method=m, return_edge_ids=True)
    seeds = np.arange(0, 120)
    seed_times = np.random.default_rng(5).integers(200, 1000, len(seeds))
    mb = s.sample(seeds, seed_times=seed_times)
    # the times every node of each layer may not exceed: the minimum over its seeds' times
    limit = dict(zip(seeds.tolist(), seed_times.tolist()))
    for blk, k in zip(reversed(mb.blocks), [6, 4]):
        src = blk.src_nodes.cpu().numpy()
        ei = blk.edge_index.cpu().numpy()
        eids = blk.edge_ids.cpu().numpy()
        t = edge_time(nt, et, g, eids, use)
        lim = np.array([limit[v] for v in src[ei[1]]])
        assert np.all(t < lim) if strict else np.all(t <= lim)
        dst_nodes = src[: blk.num_dst]
        for j, v in enumerate(dst_nodes):  # counts: min(k, eligible)
            lo, hi = g.indptr[v], g.indptr[v + 1]
            tv = edge_time(nt, et, g, np.arange(lo, hi), use)
            ok = tv < limit[v] if strict else tv <= limit[v]
            got = eids[ei[1] == j]
            assert len(got) == min(k, ok.sum())
            if strategy == "last":
                assert np.array_equal(np.sort(t[ei[1] == j]), np.sort(tv[ok])[len(tv[ok]) - len(got):])
        new = {}
        for u, v in zip(src[ei[0]], src[ei[1]]):
            new[u] = min(new.get(u, limit.get(u, 1 << 62)), limit[v])
        limit = {**limit, **new}


@pytest.mark.parametrize("name", SAMPLERS)
def test_temporal_uniform_is_uniform_over_eligible(name):
    et = np.array([5, 1, 9, 3, 7, 2, 8])
    g = star(np.ones(7))
    m = SamplingMethod("temporal").bind({"edge_times": et})
    s = build_sampler(name, g, [1], method=m)
    got = np.concatenate(draws(s, 0, 3000, seed_times=np.array([6])))
    eligible = np.flatnonzero(et <= 6) + 1
    assert set(got.tolist()) <= set(eligible.tolist())
    counts = np.array([(got == v).sum() for v in eligible])
    assert stats.chisquare(counts).pvalue > P_MIN


def test_temporal_default_seed_times_are_node_times():
    g, nt, et = temporal_graph()
    m = SamplingMethod("temporal").bind({"node_times": nt, "edge_times": et})
    s = build_sampler("neighbor", g, [5], method=m)
    seeds = np.arange(50)
    a = s.sample(seeds)
    b = s.sample(seeds, seed_times=nt[seeds])
    assert torch.equal(a.blocks[0].edge_index, b.blocks[0].edge_index)
    only_edges = build_sampler("neighbor", g, [5],
                               method=SamplingMethod("temporal").bind({"edge_times": et}))
    with pytest.raises(GraphfeedError, match="seed_times"):
        only_edges.sample(seeds)
    with pytest.raises(GraphfeedError, match="one time per seed"):
        s.sample(seeds, seed_times=np.zeros(3))


# ------------------------------------------------------------------ reproducibility
def big_graph():
    rng = np.random.default_rng(7)
    n = 20000
    src = rng.integers(0, n, 200000)
    dst = np.where(rng.random(200000) < 0.05, rng.integers(0, 20, 200000), rng.integers(0, n, 200000))
    w = rng.random(200000).astype(np.float32)
    w[rng.random(200000) < 0.1] = 0
    g = CSCGraph.from_edges(src, dst, n, weights=w)
    return g, rng.integers(0, 1000, n), rng.integers(0, 1000, g.num_edges)


@pytest.mark.parametrize("method,replace", [
    (SamplingMethod("weighted"), False), (SamplingMethod("weighted"), True),
    (SamplingMethod("labor", variates="iid"), False),
    (SamplingMethod("labor", variates="iid", layer_dependency=True), False),
    (SamplingMethod("labor", variates="rotated"), False),
    (SamplingMethod("labor", variates="rotated", layer_dependency=True), False),
    (SamplingMethod("temporal"), False), (SamplingMethod("temporal"), True),
    (SamplingMethod("temporal", strategy="last"), False),
])
def test_methods_identical_across_thread_counts(method, replace):
    g, nt, et = big_graph()
    if method.kind == "temporal":
        method = method.bind({"node_times": nt, "edge_times": et})
    seeds = np.arange(0, 20000, 3)
    outs = []
    for threads in (1, 3):
        s = build_sampler("neighbor", g, [5, 10], method=method, replace=replace,
                          num_threads=threads, seed=11, return_edge_ids=True)
        outs.append(s.sample(seeds, epoch=2, batch_index=4))
        s.close()
    for a, b in zip(outs[0].blocks, outs[1].blocks):
        assert a.num_dst >= 2048 or a is outs[0].blocks[-1]
        assert torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.src_nodes, b.src_nodes)
        assert torch.equal(a.edge_ids, b.edge_ids)
        if method.kind == "labor":
            assert torch.equal(a.edge_weight, b.edge_weight)


@pytest.mark.parametrize("name", SAMPLERS)
def test_methods_reproducible_for_a_seed(name):
    g, nt, et = big_graph()
    for method in (SamplingMethod("weighted"), SamplingMethod("labor", variates="iid"),
                   SamplingMethod("labor", variates="rotated"),
                   SamplingMethod("temporal").bind({"node_times": nt})):
        a = build_sampler(name, g, [3, 4], method=method, seed=3).sample(np.arange(100), batch_index=2)
        b = build_sampler(name, g, [3, 4], method=method, seed=3).sample(np.arange(100), batch_index=2)
        c = build_sampler(name, g, [3, 4], method=method, seed=4).sample(np.arange(100), batch_index=2)
        assert torch.equal(a.blocks[0].edge_index, b.blocks[0].edge_index)
        assert not torch.equal(a.blocks[0].src_nodes, c.blocks[0].src_nodes)


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("name", SAMPLERS)
def test_method_errors(name):
    g = CSCGraph.from_edges(np.array([1, 2]), np.array([0, 0]), 3)
    with pytest.raises(GraphfeedError, match="weights"):
        build_sampler(name, g, [2], method=SamplingMethod("weighted"))
    with pytest.raises(GraphfeedError, match="LABOR samples without replacement"):
        build_sampler(name, g, [2], method="labor", replace=True)
    with pytest.raises(GraphfeedError, match="finite and >= 0"):
        build_sampler(name, g, [2], method=SamplingMethod("weighted").bind({"weights": np.array([1.0, -1.0])}))
    with pytest.raises(GraphfeedError, match="one per edge"):
        build_sampler(name, g, [2], method=SamplingMethod("weighted").bind({"weights": np.ones(5)}))
    with pytest.raises(GraphfeedError, match="node and/or edge times"):
        build_sampler(name, g, [2], method="temporal")
    with pytest.raises(GraphfeedError, match="seed_times is for temporal"):
        build_sampler(name, g, [2]).sample(np.array([0]), seed_times=np.array([1]))


def test_sampling_method_validation():
    assert SamplingMethod().kind == "uniform" and SamplingMethod().is_uniform
    with pytest.raises(GraphfeedError, match="kind"):
        SamplingMethod("bogus")
    with pytest.raises(GraphfeedError, match="strategy"):
        SamplingMethod("temporal", strategy="first")
    with pytest.raises(GraphfeedError, match="layer_dependency"):
        SamplingMethod("labor", layer_dependency=1)
    a = SamplingMethod("weighted").bind({"weights": np.ones(3)})
    assert a == SamplingMethod("weighted") and hash(a) == hash(SamplingMethod("weighted"))


def test_bind_names_the_dataset_and_the_fix():
    class DS:
        name = "toy"
        graph = CSCGraph.from_edges(np.array([1]), np.array([0]), 2)
        edge_features = {}
        arrays = None

    with pytest.raises(GraphfeedError, match=r"dataset 'toy' has no edge weights.*--weight-col"):
        SamplingMethod("weighted").bind(DS())
    with pytest.raises(GraphfeedError, match=r"dataset 'toy' has no node or edge times.*--time-col"):
        SamplingMethod("temporal").bind(DS())
    DS.edge_features = {"timestamp": np.array([3])}
    m = SamplingMethod("temporal").bind(DS())
    assert m.arrays["edge_times"].tolist() == [3]


def test_methods_on_int64_indices_match_int32():
    """Graphs with int64 indices (more than 2**31 nodes) use int64 alias records: the same
    samples as the int32 graph."""
    g, nt, et = big_graph()
    g64 = CSCGraph(g.indptr, g.indices.astype(np.int64), g.weights)
    for method in (SamplingMethod("weighted"), SamplingMethod("labor", variates="iid"),
                   SamplingMethod("labor", variates="rotated"),
                   SamplingMethod("temporal").bind({"node_times": nt, "edge_times": et})):
        for replace in ((False, True) if method.kind == "weighted" else (False,)):
            a = build_sampler("neighbor", g, [4, 6], method=method, replace=replace).sample(np.arange(300))
            b = build_sampler("neighbor", g64, [4, 6], method=method, replace=replace).sample(np.arange(300))
            for x, y in zip(a.blocks, b.blocks):
                assert torch.equal(x.edge_index, y.edge_index) and torch.equal(x.src_nodes, y.src_nodes)


def _with(tables, name, value):
    return {**tables, name: value}


def _edited(a, edit):
    b = np.array(a)  # a writable copy of the built table
    edit(b)
    return b


# (table, edit of a copy of it, what the error says): each would make a kernel index out of
# bounds, or sample other edges than the tables say, if the tables were used unchecked
_DAMAGE = {
    "labor": [
        ("lsrc", lambda a: a.fill(2**30), "'lsrc': edge 0: not the edge's source"),
        ("lpos", lambda a: a.__setitem__(5, 10**6), "'lpos': edge 5: a position outside"),
        ("lpos", lambda a: a.__setitem__(7, -1), "'lpos': edge 7: a position outside"),
        ("lbase", lambda a: a.__setitem__(slice(None), a[::-1]), "'lbase'"),
    ],
    "weighted": [
        ("table", lambda a: a.__setitem__(3, a[3] | np.uint64(2**62)),
         "'table': node .*: an alias offset outside"),
        ("totals", lambda a: a.__setitem__(-1, a[-1] + 1), "'totals': node 19999: not"),
        ("npos", lambda a: a.__setitem__(0, a[0] + 1), "'npos': node 0: not"),
    ],
    "temporal": [
        ("tpos", lambda a: a.__setitem__(9, 2**40), "'tpos': edge 9: a position outside"),
        ("tsrc", lambda a: a.fill(2**30), "'tsrc': edge 0: not the edge's source"),
        ("tkey", lambda a: a.__setitem__(slice(None), a[::-1]), "'tkey'"),
    ],
}


@pytest.mark.parametrize("kind", sorted(_DAMAGE))
def test_check_tables_refuses_tables_the_kernels_cannot_trust(kind):
    """NeighborSampler.check_tables: the tables the sampler built pass; edited ones (values out
    of range, other rows, other shapes or dtypes, missing or extra names) are refused naming the
    table, before any kernel indexes with them."""
    g, nt, et = big_graph()
    method = {"labor": SamplingMethod("labor", variates="rotated"),
              "weighted": SamplingMethod("weighted"),
              "temporal": SamplingMethod("temporal").bind({"node_times": nt, "edge_times": et})}[kind]
    s = build_sampler("neighbor", g, [4, 6], method=method)
    tables = dict(s.prepare())
    s.check_tables(tables)
    for name, edit, msg in _DAMAGE[kind]:
        with pytest.raises(GraphfeedError, match=msg):
            s.check_tables(_with(tables, name, _edited(tables[name], edit)))
    arrays = [k for k, v in tables.items() if isinstance(v, np.ndarray) and v.ndim == 1
              and k != "weights"]  # the input itself, checked by identity below
    for name in arrays:
        a = tables[name]
        with pytest.raises(GraphfeedError, match=rf"table '{name}' has shape \({len(a) // 2},\)"):
            s.check_tables(_with(tables, name, a[: len(a) // 2]))
        other = np.float32 if a.dtype != np.float32 else np.float64
        with pytest.raises(GraphfeedError, match=rf"table '{name}' has shape .*, dtype {np.dtype(other)}"):
            s.check_tables(_with(tables, name, a.astype(other)))
    with pytest.raises(GraphfeedError, match="expected"):
        s.check_tables({k: v for k, v in tables.items() if k != arrays[0]})
    with pytest.raises(GraphfeedError, match="expected"):
        s.check_tables({**tables, "extra": np.zeros(1)})
    if kind == "labor":
        with pytest.raises(GraphfeedError, match="'bkey'.*not the base key of seed"):
            s.check_tables(_with(tables, "bkey", tables["bkey"] + np.uint64(1)))
    if kind == "weighted":
        with pytest.raises(GraphfeedError, match="'all_positive' is True"):
            s.check_tables(_with(tables, "all_positive", True))
        with pytest.raises(GraphfeedError, match="'weights' is not the sampler's weights"):
            s.check_tables(_with(tables, "weights", np.array(tables["weights"])))
