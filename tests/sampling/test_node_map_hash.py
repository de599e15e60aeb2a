"""NeighborSampler's batch-sized hash node map (issue 30, item 5): the same batches as the dense
map, bit for bit, for every method and the chunked path; errors; the auto choice; no
O(num_nodes) allocation per batch."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from graphfeed.errors import GraphfeedError
from graphfeed.graph.csc import CSCGraph
from graphfeed.sampling import _kernels as K
from graphfeed.sampling import _cpu_common, neighbor
from graphfeed.sampling._cpu_common import MapPool
from graphfeed.sampling.method import SamplingMethod
from graphfeed.sampling.neighbor import NeighborSampler, choose_node_map
from sampling_helpers import assert_same_minibatch

N = 12_000
_rng = np.random.default_rng(7)
_src = _rng.integers(0, N, 150_000)
_dst = np.where(_rng.random(150_000) < 0.05, _rng.integers(0, 20, 150_000),
                _rng.integers(0, N, 150_000))  # a few hubs (degrees past 64 and FLOYD_MAX_K)
GRAPH = CSCGraph.from_edges(_src, _dst, N)
E = GRAPH.num_edges
ARRAYS = {"weights": _rng.random(E).astype(np.float32) * (_rng.random(E) < 0.9),
          "node_times": _rng.integers(0, 1000, N), "edge_times": _rng.integers(0, 1000, E)}
SEEDS = np.sort(_rng.choice(N, 5000, replace=False))  # >= 2 chunks of 2048 destinations


_same = assert_same_minibatch


def _pair(fanouts, **kw):
    return (NeighborSampler(GRAPH, fanouts, node_map="dense", **kw),
            NeighborSampler(GRAPH, fanouts, node_map="hash", **kw))


METHODS = [
    (None, False), (None, True),
    (SamplingMethod("weighted"), False), (SamplingMethod("weighted"), True),
    (SamplingMethod("labor", variates="rotated"), False),
    (SamplingMethod("labor", variates="iid"), False),
    (SamplingMethod("temporal"), False), (SamplingMethod("temporal"), True),
    (SamplingMethod("temporal", strategy="last"), False),
]


@pytest.mark.parametrize("method,replace", METHODS,
                         ids=lambda v: v.describe() if isinstance(v, SamplingMethod) else str(v))
@pytest.mark.parametrize("threads", [1, 2])
def test_hash_and_dense_give_identical_batches(method, replace, threads):
    m = None if method is None else method.bind(ARRAYS)
    dense, hashed = _pair([3, 40, 5], replace=replace, method=m, num_threads=threads,
                          return_edge_ids=True)
    assert dense.node_map == "dense" and hashed.node_map == "hash"
    with ThreadPoolExecutor(2) as ex:
        for b, seeds in enumerate([SEEDS, SEEDS[:300], SEEDS[::-1].copy()]):
            kw = {"executor": ex} if b == 1 else {}
            _same(dense.sample(seeds, batch_index=b, **kw), hashed.sample(seeds, batch_index=b))
    dense.close()
    hashed.close()


@pytest.mark.parametrize("replace", [False, True])
def test_fanout_all_and_growth_inside_a_layer(replace):
    dense, hashed = _pair([-1, 20], replace=replace, return_edge_ids=True)
    seeds = SEEDS[:500]  # fits the first table; the layers grow it while relabelling
    _same(dense.sample(seeds), hashed.sample(seeds))
    (table,) = hashed._maps._free
    assert table.shape[0] > 2 * K.HASH_MIN_CAP and np.all(table == -1)
    _same(dense.sample(SEEDS, batch_index=3), hashed.sample(SEEDS, batch_index=3))  # reused


def test_relabel_kernel_grows_from_a_tiny_table():
    rng = np.random.default_rng(1)
    rows = rng.integers(0, 10**12, 50_000)  # ids far beyond any dense map
    ei = np.stack([rows, np.zeros_like(rows)])
    src = np.empty(rows.shape[0] + 1, np.int64)
    src[0] = 10**12 + 3  # one destination already in the table
    table = K._hash_rebuild(src, 1, 4)  # 4 slots
    n_src, table = K.relabel_layer_hash(ei[0], table, src, 1)
    uniq, first = np.unique(rows, return_index=True)
    order = uniq[np.argsort(first)]
    assert n_src == 1 + order.shape[0]
    assert np.array_equal(src[1:n_src], order)
    assert np.array_equal(src[:n_src][ei[0]], rows)
    assert table.shape[0] // 2 >= 2 * n_src


@pytest.mark.parametrize("node_map", ["dense", "hash"])
def test_seed_errors_are_the_same_and_leave_the_sampler_usable(node_map):
    s = NeighborSampler(GRAPH, [4, 4], node_map=node_map)
    ref = NeighborSampler(GRAPH, [4, 4], node_map="dense").sample(SEEDS[:3000])
    with pytest.raises(GraphfeedError, match=r"seed id 5 appears twice \(positions 1 and 3\)"):
        s.sample([7, 5, 9, 5])
    with pytest.raises(GraphfeedError, match=rf"seed id {N} \(position 2\) is out of range"):
        s.sample(np.array([1, 2, N]))
    big = SEEDS[:3000].copy()  # the hash table grows for these seeds before the error
    big[2999] = big[0]
    with pytest.raises(GraphfeedError, match="appears twice"):
        s.sample(big)
    _same(ref, s.sample(SEEDS[:3000]))
    assert all(np.all(m == -1) for m in s._maps._free)


def test_node_map_argument_is_checked():
    with pytest.raises(GraphfeedError, match="node_map must be one of 'auto', 'dense', 'hash'"):
        NeighborSampler(GRAPH, [2], node_map="sparse")
    assert NeighborSampler(GRAPH, [2]).node_map == "dense"  # a small graph
    assert NeighborSampler(GRAPH, [2], node_map="hash").with_fanouts([3]).node_map == "hash"


def test_auto_picks_hash_above_the_threshold(monkeypatch):
    limit = neighbor.DENSE_MAP_MAX_BYTES
    assert choose_node_map(limit // 4) == "dense"
    assert choose_node_map(limit // 4 + 1) == "hash"
    assert choose_node_map(2**31) == "hash"
    assert choose_node_map(2**40, "dense") == "dense"
    monkeypatch.setattr(_cpu_common, "DENSE_MAP_MAX_BYTES", 4 * (N - 1))
    s = NeighborSampler(GRAPH, [5, 5])
    assert s.node_map == "hash" and s._maps.kind == "hash"
    _same(NeighborSampler(GRAPH, [5, 5], node_map="dense").sample(SEEDS), s.sample(SEEDS))


def test_hash_map_allocates_nothing_of_graph_size(monkeypatch):
    """A pool for a graph of 2**40 nodes hands out tables sized by the batch; the sampler's
    per-batch allocations are of the batch too (checked by counting np.full's sizes)."""
    pool = MapPool(2**40, "hash")
    t = pool.acquire()
    assert t.shape == (2 * K.HASH_MIN_CAP,) and t.dtype == np.int64
    assert MapPool.clear_hash(np.full(2**20, 3, np.int64), 10).shape == (2 * K.HASH_MIN_CAP,)
    sizes = []
    real_full = np.full

    def full(shape, *a, **k):
        sizes.append(int(np.prod(shape)))
        return real_full(shape, *a, **k)

    s = NeighborSampler(GRAPH, [5, 5], node_map="hash")
    monkeypatch.setattr(np, "full", full)
    s.sample(SEEDS[:100])
    assert sizes and max(sizes) < N  # never num_nodes entries
    with pytest.raises(GraphfeedError, match="MapPool kind"):
        MapPool(10, "tree")


@pytest.mark.parametrize("replace", [False, True])
def test_keyed_sampler_hash_map_equals_dense(replace):
    """The keyed (partition) sampler relabels through the same pool: the hash map gives the
    dense map's batches, and a bad node_map is refused by name."""
    from graphfeed.partition.keyed import KeyedNeighborSampler

    keys = np.random.default_rng(3).permutation(N).astype(np.int64)
    dense = KeyedNeighborSampler(GRAPH, [4, 3, 2], replace=replace, seed=5, keys=keys,
                                 node_map="dense")
    hashed = KeyedNeighborSampler(GRAPH, [4, 3, 2], replace=replace, seed=5, keys=keys,
                                  node_map="hash")
    assert hashed._maps.kind == "hash" and dense._maps.kind == "dense"
    for b in range(3):
        _same(dense.sample(SEEDS[b::3], batch_index=b), hashed.sample(SEEDS[b::3], batch_index=b))
    assert hashed.with_fanouts([2, 2]).node_map == "hash"
    with pytest.raises(GraphfeedError, match="appears twice"):
        hashed.sample(np.array([SEEDS[0], SEEDS[0]]))
    _same(dense.sample(SEEDS[:50], batch_index=9), hashed.sample(SEEDS[:50], batch_index=9))
    with pytest.raises(GraphfeedError, match="node_map must be one of"):
        KeyedNeighborSampler(GRAPH, [2], node_map="sparse")


@pytest.mark.parametrize("replace", [False, True])
def test_typed_sampler_hash_map_equals_dense(replace):
    """HeteroNeighborSampler over the hash table (type-local ids, room reserved per layer, the
    table grown from a small start) gives the dense map's batches; a repeated seed is refused
    the same way and leaves the sampler usable."""
    from graphfeed.datasets.open import open_dataset
    from graphfeed.sampling.hetero import HeteroNeighborSampler

    g = open_dataset("hetero").hetero
    rng = np.random.default_rng(7)
    seeds = np.sort(rng.choice(g.num_nodes, 3000, replace=False))
    dense = HeteroNeighborSampler(g, [6, 4, 3], replace=replace, seed=2, return_edge_ids=True,
                                  node_map="dense")
    hashed = HeteroNeighborSampler(g, [6, 4, 3], replace=replace, seed=2, return_edge_ids=True,
                                   node_map="hash")
    assert hashed._maps.kind == "hash"
    for b, part in enumerate((seeds[:40], seeds, seeds[::7])):
        x = dense.sample(part, batch_index=b)
        y = hashed.sample(part, batch_index=b)
        assert torch.equal(x.seeds, y.seeds)
        for bx, by in zip(x.blocks, y.blocks):
            assert bx.src_nodes.keys() == by.src_nodes.keys() and bx.num_dst == by.num_dst
            for k in bx.src_nodes:
                assert torch.equal(bx.src_nodes[k], by.src_nodes[k])
            assert bx.edge_index_dict.keys() == by.edge_index_dict.keys()
            for k in bx.edge_index_dict:
                assert torch.equal(bx.edge_index_dict[k], by.edge_index_dict[k])
                assert torch.equal(bx.edge_ids[k], by.edge_ids[k])
    with pytest.raises(GraphfeedError, match="appears twice"):
        hashed.sample(np.array([seeds[3], seeds[3]]))
    after = hashed.sample(seeds[:40], batch_index=0).blocks[0].src_nodes
    for k, v in dense.sample(seeds[:40], batch_index=0).blocks[0].src_nodes.items():
        assert torch.equal(after[k], v)
    assert hashed.with_fanouts([2, 2]).node_map == "hash"
