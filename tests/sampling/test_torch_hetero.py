"""TorchHeteroSampler (the vectorised torch heterogeneous sampler, the GPU path) on CPU tensors:
the invariants of the numba ``HeteroNeighborSampler`` (every sampled edge exists in its edge
type, endpoint types match, destinations-first per type, per-relation fanouts), uniform over
k-subsets (chi-square), reproducible from (seed, epoch, batch_index) across threads and torch
thread counts. It draws other neighbours than the numba kernels (its own RNG stream)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import chisquare
import test_hetero_sampler as numba_tests
from test_hetero_sampler import (
    CITES, NUM, WRITES, _differ, _same, check_batch, edge_sets, make_edges,
)

from graphfeed._cuda import cuda_available
from graphfeed.errors import GraphfeedError
from graphfeed.graph.hetero import HeteroGraph
from graphfeed.sampling import SAMPLERS, build_sampler
from graphfeed.sampling.torch_hetero import TorchHeteroSampler

P_MIN = 1e-4


@pytest.fixture(scope="module")
def hg():
    return HeteroGraph.from_edges(NUM, make_edges(), drop_duplicates=True)


SEED_SETS = [{"paper": np.arange(0, 40)}, {"author": [5, 1, 9], "venue": [0]},
             np.array([455, 3, 301, 0, 460]), torch.tensor([0, 1, 2, 300, 450])]


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", [[4, 3], [-1, 2], [3, 70, 2], [1]])
def test_batches_hold_every_invariant(hg, replace, fanouts):
    s = build_sampler("torch-hetero", hg, fanouts, replace=replace, seed=3)
    assert isinstance(s, TorchHeteroSampler) and s.device == torch.device("cpu")
    sets = edge_sets(hg)
    fd = {et: list(fanouts) for et in hg.edge_types}
    for b, seeds in enumerate(SEED_SETS):
        check_batch(hg, s.sample(seeds, epoch=1, batch_index=b), fd, replace, sets)


def test_seeds_grouped_by_type_like_the_numba_sampler(hg):
    t = build_sampler("torch-hetero", hg, [2]).sample(np.array([455, 3, 301, 0, 460]))
    n = build_sampler("hetero", hg, [2]).sample(np.array([455, 3, 301, 0, 460]))
    assert t.seeds.tolist() == n.seeds.tolist() == [3, 0, 301, 455, 460]
    for k in n.seed_dict:
        assert torch.equal(t.seed_dict[k], n.seed_dict[k])
    # fanout -1 takes every in-edge: both samplers give the same edge sets per relation
    t = build_sampler("torch-hetero", hg, [-1]).sample({"paper": np.arange(30)})
    n = build_sampler("hetero", hg, [-1]).sample({"paper": np.arange(30)})
    for et in hg.edge_types:
        bt, bn = t.blocks[0], n.blocks[0]

        def pairs(b):
            ei = b.edge_index_dict[et]
            return sorted(zip(b.src_nodes[et[0]][ei[0]].tolist(),
                              b.src_nodes[et[2]][ei[1]].tolist()))
        assert pairs(bt) == pairs(bn)


@pytest.mark.parametrize("replace", [False, True])
def test_dict_fanouts_per_relation(hg, replace):
    # several distinct fanout values in one layer (one subset draw per value), 0 and -1
    fan = {"writes": [3, 40], CITES: [0, 5], "hosts": [1, 1], "rev_writes": [2, 0],
           "rev_hosts": [-1, 0]}
    s = build_sampler("torch-hetero", hg, fan, seed=1, replace=replace)
    fd = {hg.edge_types[hg.edge_type_id(k)]: v for k, v in fan.items()}
    assert s.fanouts_dict == fd and s.fanouts == (-1, 40)
    for b, seeds in enumerate(SEED_SETS):
        mb = s.sample(seeds, batch_index=b)
        check_batch(hg, mb, fd, replace)
        assert mb.blocks[0].edge_index_dict[CITES].shape[1] == 0
    mb = build_sampler("torch-hetero", hg, {"writes": [4]}).sample({"paper": np.arange(50)})
    assert mb.blocks[0].edge_index_dict[CITES].shape[1] == 0
    assert mb.blocks[0].edge_index_dict[WRITES].shape[1] > 0


def test_with_fanouts_keeps_the_placed_tensors(hg):
    s = build_sampler("torch-hetero", hg, [3, 3], seed=4)
    e = s.with_fanouts([5])
    assert e.fanouts == (5,) and s.fanouts == (3, 3)
    assert e._base is s._base and e._etype is s._etype
    check_batch(hg, e.sample({"paper": np.arange(20)}), {et: [5] for et in hg.edge_types}, False)


def test_bad_input(hg):
    with pytest.raises(GraphfeedError, match="appears twice"):  # more in test_bad_seeds
        build_sampler("torch-hetero", hg, [2]).sample(torch.tensor([3, 300, 3]))
    with pytest.raises(GraphfeedError, match="HeteroGraph"):
        build_sampler("torch-hetero", hg.csc, [2])
    with pytest.raises(GraphfeedError, match="fanouts"):
        build_sampler("torch-hetero", hg, {"writes": [2], "cites": [1, 1]})
    from graphfeed.sampling import SamplingMethod

    with pytest.raises(GraphfeedError, match="uniformly"):
        build_sampler("torch-hetero", hg, [2], method=SamplingMethod(kind="labor"))
    # the numba sampler refuses a GPU and names this one
    with pytest.raises(GraphfeedError, match="torch-hetero"):
        build_sampler("hetero", hg, [2], device="meta")
    assert "torch-hetero" in SAMPLERS


def test_empty_seeds_and_edgeless_relations():
    g = HeteroGraph.from_edges({"a": 3, "b": 2}, {("a", "r", "b"): ([0, 1], [0, 0]),
                                                 ("b", "s", "a"): ([], [])})
    s = build_sampler("torch-hetero", g, [2, 2])
    mb = s.sample({"b": [0, 1]})
    check_batch(g, mb, {et: [2, 2] for et in g.edge_types}, False)
    mb = s.sample(np.zeros(0, np.int64))
    assert mb.num_sampled_edges == 0
    assert all(v.numel() == 0 for v in mb.blocks[0].src_nodes.values())


# the numba sampler's tests, run unchanged on the torch sampler: their build_sampler("hetero",
# ...) builds "torch-hetero" here (edge ids, reproducibility from threads, PyG models, bad seeds)
SHARED = ["test_return_edge_ids", "test_reproducible_and_thread_independent",
          "test_global_seeds_grouped_by_type", "test_bad_seeds",
          "test_to_hetero_model_runs_on_batches", "test_hetero_conv_model_runs_on_batches"]


@pytest.mark.parametrize("name", SHARED)
def test_numba_sampler_tests_pass_on_torch(hg, name, monkeypatch):
    def torch_build(sampler, *args, **kw):
        assert sampler == "hetero"
        return build_sampler("torch-hetero", *args, **kw)

    monkeypatch.setattr(numba_tests, "build_sampler", torch_build)
    getattr(numba_tests, name)(hg)


def test_same_batch_whatever_the_torch_thread_count(hg):
    s = build_sampler("torch-hetero", hg, [5, 40], seed=7)
    seeds = {"paper": np.arange(100), "author": np.arange(20)}
    before = torch.get_num_threads()
    try:
        ref = s.sample(seeds, epoch=1, batch_index=2)
        torch.set_num_threads(1)
        _same(ref, s.sample(seeds, epoch=1, batch_index=2))
    finally:
        torch.set_num_threads(before)
    assert _differ(ref, s.sample(seeds, epoch=1, batch_index=3))


# ---------------------------------------------------------------------------- uniformity
def _copies(deg, n):
    """``n`` destinations of type "b", each with ``deg`` in-edges of relation "x" from its own
    "a" nodes (``i * deg + p``) and 3 of relation "y" from its own "c" nodes: one batch of
    every destination is ``n`` independent draws (a Python loop of tiny batches is slow in
    torch)."""
    i = np.repeat(np.arange(n), deg)
    j = np.repeat(np.arange(n), 3)
    edges = {("a", "x", "b"): (np.arange(n * deg), i), ("c", "y", "b"): (np.arange(3 * n), j),
             ("b", "z", "a"): (np.zeros(2, np.int64), np.arange(2))}
    return HeteroGraph.from_edges({"a": n * deg, "b": n, "c": 3 * n}, edges)


def _draws(g, s, rel, per, n, batches):
    """Per draw of destination ``i``: the positions ``src - i * per`` its ``rel`` edges chose,
    one row per destination and batch."""
    rows = []
    for b in range(batches):
        blk = s.sample({"b": np.arange(n)}, batch_index=b).blocks[0]
        ei = blk.edge_index_dict[rel].numpy()
        src = blk.src_nodes[rel[0]].numpy()[ei[0]]
        dst = blk.src_nodes["b"].numpy()[ei[1]]
        order = np.lexsort((src, dst))
        rows.append((src - dst * per)[order].reshape(n, -1))
    return np.concatenate(rows)


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("deg, k, n", [(6, 2, 3000), (7, 3, 7000), (70, 2, 2000), (70, 40, 200)])
def test_uniform(deg, k, n, replace):
    """Without replacement every k-subset is equally likely (small degrees: the subsets
    themselves; degree 70: each neighbour's marginal, Floyd's path for k=2, the sort path for
    k=40); with replacement each draw is uniform over the in-edges."""
    g = _copies(deg, n)
    s = build_sampler("torch-hetero", g, {"x": [k], "y": [1]}, seed=5, replace=replace)
    x = ("a", "x", "b")
    chosen = _draws(g, s, x, deg, n, 2)
    if deg > 10 or replace:
        assert chisquare(np.bincount(chosen.ravel(), minlength=deg)).pvalue > P_MIN
        return
    subsets = {c: i for i, c in enumerate(itertools.combinations(range(deg), k))}
    counts = np.zeros(len(subsets), np.int64)
    for row in chosen:
        counts[subsets[tuple(row.tolist())]] += 1
    assert chisquare(counts).pvalue > P_MIN


def test_relations_draw_independently():
    g = _copies(4, 3000)
    s = build_sampler("torch-hetero", g, {"x": [1], "y": [1]}, seed=2)
    x = _draws(g, s, ("a", "x", "b"), 4, 3000, 2)[:, 0]
    y = _draws(g, s, ("c", "y", "b"), 3, 3000, 2)[:, 0]
    assert chisquare(np.bincount(x * 3 + y, minlength=12)).pvalue > P_MIN


# ---------------------------------------------------------------------------- CUDA
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("uva", [False, True])
def test_cuda(hg, uva):
    s = build_sampler("torch-hetero", hg, [4, 70], seed=3, device="cuda", uva=uva)
    assert s.device.type == "cuda"
    mb = s.sample({"paper": np.arange(40), "author": [3, 4]})
    assert mb.seeds.device.type == "cuda"
    cpu = mb.to("cpu")
    check_batch(hg, cpu, {et: [4, 70] for et in hg.edge_types}, False)
    _same(cpu, s.sample({"paper": np.arange(40), "author": [3, 4]}).to("cpu"))


@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_cuda_host_syncs_do_not_grow_with_the_batch(hg):
    """The synchronising calls of a batch (counted by torch's sync debug mode) are the same for
    10 and 200 seeds: a fixed number per layer, not per node."""
    import warnings

    s = build_sampler("torch-hetero", hg, [4, 3], device="cuda")
    s.sample({"paper": np.arange(10)})  # warm up

    def syncs(n):
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                s.sample({"paper": np.arange(n)})
        finally:
            torch.cuda.set_sync_debug_mode("default")
        return len(w)

    assert syncs(10) == syncs(200) <= 2 * 8
