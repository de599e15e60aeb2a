"""LABOR with ``variates="rotated"``: the kept edges are exactly those of the definition
``frac(b_t + shift) < min(1, fanout / d)`` (the arcs of the base-sorted columns), and the
documented properties and weakness of the variant."""

from __future__ import annotations

import numpy as np
import pytest

from graphfeed.errors import GraphfeedError
from graphfeed.graph.csc import CSCGraph
from graphfeed.sampling import SamplingMethod, build_sampler
from graphfeed.sampling._common import labor_key, labor_rotation
from graphfeed.sampling._method_kernels import labor_variate

ROTATED = SamplingMethod("labor", variates="rotated")


def power_law_graph(n=2000, e=60000, seed=0, dtype=None):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, e)
    dst = np.minimum(rng.zipf(1.5, e), n) - 1  # hubs of thousands of in-edges and small ones
    g = CSCGraph.from_edges(src, dst, n)
    if dtype is not None:
        g = CSCGraph(g.indptr, g.indices.astype(dtype))
    return g


def expected_edges(g, v, fanout, bkey, shift):
    """Edge positions of destination ``v`` kept by the definition (a brute-force pass)."""
    lo, hi = int(g.indptr[v]), int(g.indptr[v + 1])
    d = hi - lo
    if fanout < 0 or d <= fanout:
        return list(range(lo, hi))
    thr = int(np.uint64(fanout / d * 4294967296.0))
    return [p for p in range(lo, hi)
            if (int(labor_variate(int(g.indices[p]), np.uint64(bkey))) + shift) % (1 << 32) < thr]


@pytest.mark.parametrize("dtype", [None, np.int64])
@pytest.mark.parametrize("dep", [False, True])
def test_rotated_keeps_exactly_the_definitions_edges(dep, dtype):
    g = power_law_graph(dtype=dtype)
    m = SamplingMethod("labor", variates="rotated", layer_dependency=dep)
    fanouts = [5, 3]
    s = build_sampler("neighbor", g, fanouts, method=m, seed=7, return_edge_ids=True)
    seeds = np.arange(0, 400)
    for b in range(4):
        mb = s.sample(seeds, epoch=1, batch_index=b)
        for layer, blk in enumerate(mb.blocks):
            shift = labor_rotation(7, labor_key(7, 1, b, layer, m))[1]
            bkey = labor_rotation(7, 0)[0]
            ei, eids = blk.edge_index.numpy(), blk.edge_ids.numpy()
            sn = blk.src_nodes.numpy()
            assert np.array_equal(g.indices[eids], sn[ei[0]])  # edges exist, ids agree
            got = {}
            for e in range(ei.shape[1]):
                got.setdefault(int(ei[1, e]), []).append(int(eids[e]))
            dsts = sn[:blk.num_dst]
            deg = np.diff(g.indptr)[dsts]
            w = blk.edge_weight.numpy()
            exp_w = np.where(deg[ei[1]] <= fanouts[layer], 1.0 / np.maximum(deg[ei[1]], 1),
                             1.0 / fanouts[layer]).astype(np.float32)
            assert np.array_equal(w, exp_w)
            for i, v in enumerate(dsts):
                exp = expected_edges(g, int(v), fanouts[layer], bkey, shift)
                assert sorted(got.get(i, [])) == exp


def test_rotated_count_is_the_bases_in_the_arc_with_mean_fanout():
    """The count per destination is the number of its base variates in an arc of length
    ``fanout / d``: random (as in LABOR-0), with mean ``fanout`` over the shift."""
    g = power_law_graph()
    deg = np.diff(g.indptr)
    hubs = np.flatnonzero(deg >= 200)[:5]
    k, n = 10, 2000
    s = build_sampler("neighbor", g, [k], method=ROTATED)
    counts = np.zeros((n, hubs.size))
    for b in range(n):
        blk = s.sample(hubs, batch_index=b).blocks[0]
        counts[b] = np.bincount(blk.edge_index[1].numpy(), minlength=hubs.size)
    se = counts.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(counts.mean(axis=0) - k) < 4.5 * se)
    assert np.all(counts.std(axis=0) > 0)  # not a fixed count: the bases are iid, not spaced


def test_rotated_marginals_of_a_large_destination():
    """Every in-edge of a destination of degree ~200 is kept with probability ``k / d`` over
    the batches' shifts, whatever the fixed bases (a binomial z-test per edge)."""
    g = power_law_graph()
    deg = np.diff(g.indptr)
    v = int(np.flatnonzero((deg >= 150) & (deg <= 400))[0])
    d, k, n = int(deg[v]), 20, 4000
    s = build_sampler("neighbor", g, [k], method=ROTATED, seed=3, return_edge_ids=True)
    incl = np.zeros(d)
    for b in range(n):
        blk = s.sample(np.array([v]), batch_index=b).blocks[0]
        np.add.at(incl, blk.edge_ids.numpy() - g.indptr[v], 1)
    pi = int(np.uint64(k / d * 4294967296.0)) / 2.0 ** 32
    z = (incl / n - pi) / np.sqrt(pi * (1 - pi) / n)
    assert np.all(np.abs(z) < 4.5)


def test_rotated_sees_at_most_degree_subsets():
    """The documented weakness: with the bases fixed, a destination of degree ``d`` has at most
    ``2 d`` distinct kept sets across batches (an arc's set changes when either end passes a
    base); ``iid`` variates have many more."""
    src = np.arange(1, 13)
    g = CSCGraph.from_edges(src, np.zeros(12, np.int64), 13)
    seen = {}
    for variates in ("iid", "rotated"):
        s = build_sampler("neighbor", g, [4], method=SamplingMethod("labor", variates=variates))
        sets = set()
        for b in range(3000):
            blk = s.sample(np.array([0]), batch_index=b).blocks[0]
            sets.add(tuple(sorted(blk.src_nodes[blk.edge_index[0]].tolist())))
        seen[variates] = len(sets)
    assert 1 < seen["rotated"] <= 24
    assert seen["iid"] > 100


def test_rotated_base_is_built_once_per_seed_and_shared():
    g = power_law_graph()
    s = build_sampler("neighbor", g, [5, 5], method=ROTATED, seed=1)
    t = s.with_fanouts([3])
    assert t._prepared() is s._prepared()
    a = s.sample(np.arange(50), batch_index=2)
    b = build_sampler("neighbor", g, [5, 5], method=ROTATED, seed=2).sample(np.arange(50),
                                                                              batch_index=2)
    assert a.blocks[0].src_nodes.tolist() != b.blocks[0].src_nodes.tolist()


def test_variates_validation_and_describe():
    with pytest.raises(GraphfeedError, match="variates"):
        SamplingMethod("labor", variates="fresh")
    assert SamplingMethod("labor", variates="rotated").describe() == "labor rotated"
    assert SamplingMethod("labor", variates="iid").describe() == "labor iid"
    assert SamplingMethod("labor").variates == "rotated"  # the default (docs/benchmarks.md)


def test_cli_labor_variates_option(capsys):
    import json

    from graphfeed.cli.main import main

    for variates in ("iid", "rotated"):
        assert main(["bench", "sample", "--dataset", "tiny", "--batches", "2", "--warmup", "1",
                     "--batch-size", "32", "--features", "none", "--json", "--sampler", "labor",
                     "--labor-variates", variates]) == 0
        assert json.loads(capsys.readouterr().out)["sampler"] == f"labor {variates}"
