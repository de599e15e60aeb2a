"""The numba weighted sampler's paths without replacement (exponential keys, the scan of the
weights, successive alias draws with and without draws made ahead) each follow successive
sampling, and the draws ahead change no output."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from graphfeed.graph.csc import CSCGraph
from graphfeed.sampling import SamplingMethod, build_sampler
from graphfeed.sampling import _method_kernels as MK

from test_methods import P_MIN, draws, star, subsets_pvalue, successive_subset_probs

# (keys max degree, scan max degree, draws ahead): which path a degree-7 list takes
PATHS = {
    "keys": (24, 64, 2),
    "scan": (0, 64, 2),  # taken when 2 d <= 3 k (k = 5 here), else alias draws
    "alias": (0, 0, 2),
    "alias-inline": (0, 0, 0),
}


@pytest.fixture(params=sorted(PATHS))
def path(request, monkeypatch):
    keys, scan, ahead = PATHS[request.param]
    monkeypatch.setattr(MK, "WEIGHTED_KEYS_MAX_DEG", keys)
    monkeypatch.setattr(MK, "WEIGHTED_SCAN_MAX_DEG", scan)
    monkeypatch.setattr(MK, "WEIGHTED_DRAW_AHEAD", ahead)
    return request.param


@pytest.mark.parametrize("k", [1, 2, 4, 5])
def test_each_path_matches_successive_sampling(path, k):
    w = [1.0, 2.0, 0.0, 3.0, 4.0, 0.5, 6.0]
    exact = successive_subset_probs(w, k)
    s = build_sampler("neighbor", star(w), [k], method=SamplingMethod("weighted"))
    assert subsets_pvalue(draws(s, 0, 3000), exact, k) > P_MIN


def test_keys_path_gives_draw_order(monkeypatch):
    """Exponential keys write positions in draw order: the first position is a first draw,
    with probability w / sum(w), also when k > 1."""
    w = [1.0, 2.0, 0.0, 3.0, 4.0, 0.5, 0.0, 5.5]
    s = build_sampler("neighbor", star(w), [3], method=SamplingMethod("weighted"))
    first = np.array([d[0] for d in draws(s, 0, 4000)]) - 1
    counts = np.bincount(first, minlength=len(w))
    nz = np.array(w) > 0
    assert counts[~nz].sum() == 0
    assert stats.chisquare(counts[nz], np.array(w)[nz] / sum(w) * 4000).pvalue > P_MIN


def _hub_graph(seed=5):
    rng = np.random.default_rng(seed)
    n, e = 600, 30000
    src = rng.integers(0, n, e)
    dst = np.where(rng.random(e) < 0.5, rng.integers(0, 40, e), rng.integers(0, n, e))
    w = rng.random(e).astype(np.float32)
    w[rng.random(e) < 0.1] = 0
    return CSCGraph.from_edges(src, dst, n, weights=w)


@pytest.mark.parametrize("ahead", [1, 2, 5])
def test_draws_ahead_change_nothing(monkeypatch, ahead):
    """The alias draws made ahead are the ones the destination would make itself: the same
    batch, edge for edge, with 0 and with ``ahead`` destinations ahead, on one thread or two."""
    g = _hub_graph()
    seeds = np.arange(0, 600, 2)
    out = {}
    for a in (0, ahead):
        monkeypatch.setattr(MK, "WEIGHTED_DRAW_AHEAD", a)
        for threads in (1, 2):
            s = build_sampler("neighbor", g, [15, 10], method=SamplingMethod("weighted"),
                              return_edge_ids=True, num_threads=threads)
            mb = s.sample(seeds, batch_index=3)
            out[(a, threads)] = [b.edge_ids.numpy().copy() for b in mb.blocks]
    ref = out[(0, 1)]
    for key, got in out.items():
        assert all(np.array_equal(x, y) for x, y in zip(ref, got)), key


def test_graph_without_zero_weights_skips_the_positive_counts():
    """A graph whose weights are all positive counts like uniform sampling (``npos`` unread);
    one with zeros still leaves them out."""
    g = _hub_graph()
    gp = CSCGraph(g.indptr, g.indices, np.where(g.weights > 0, g.weights, 0.5).astype(np.float32))
    for graph, allpos in ((g, False), (gp, True)):
        s = build_sampler("neighbor", graph, [12], method=SamplingMethod("weighted"),
                          return_edge_ids=True)
        mb = s.sample(np.arange(100))
        assert s._prepared()["all_positive"] is allpos
        blk = mb.blocks[-1]
        assert (graph.weights[blk.edge_ids.numpy()] > 0).all()
        cnt = np.bincount(blk.edge_index[1].numpy(), minlength=blk.num_dst)
        npos = np.array([(graph.weights[graph.indptr[v]:graph.indptr[v + 1]] > 0).sum()
                         for v in blk.dst_nodes.numpy()])
        assert np.array_equal(cnt, np.minimum(npos, 12))


def test_neg_log_unit_matches_log():
    import numba

    @numba.njit
    def run(xs):
        out = np.empty(xs.shape[0])
        for i in range(xs.shape[0]):
            out[i] = MK.neg_log_unit(xs[i])
        return out

    rng = np.random.default_rng(0)
    xs = rng.integers(0, 2**63, 200_000, dtype=np.uint64) * np.uint64(2)
    xs = np.concatenate([xs, xs >> np.uint64(40), np.array([0, 1, 2**64 - 1], np.uint64)])
    ref = -np.log((xs | np.uint64(1)).astype(np.float64) / 2.0**64)
    got = run(xs)
    assert np.all(np.isfinite(got)) and np.all(got >= 0)
    assert np.max(np.abs(got - ref)) < 1e-9
