"""LinkSampler: seed pairs -> negatives -> neighbourhoods of the endpoints, without the seed
edges (and their reverses) in any block of their batch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from graphfeed.errors import GraphfeedError
from graphfeed.graph.csc import CSCGraph
from graphfeed.sampling import LinkSampler, MiniBatch
from graphfeed.sampling.neighbor import NeighborSampler

P_MIN = 1e-4
SAMPLERS = ("neighbor", "torch")


def node_sampler(name):
    from graphfeed.sampling import SAMPLERS as registry

    return registry.get(name)


def undirected_graph(num_nodes=400, avg_deg=8, seed=0) -> CSCGraph:
    """A symmetrised random graph (both directions of every edge), hubs included."""
    rng = np.random.default_rng(seed)
    m = num_nodes * avg_deg // 2
    src = rng.integers(0, num_nodes, m)
    dst = np.where(rng.random(m) < 0.2, rng.integers(0, 5, m), rng.integers(0, num_nodes, m))
    keep = src != dst
    src, dst = src[keep], dst[keep]
    return CSCGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]), num_nodes)


def graph_edges(g: CSCGraph) -> np.ndarray:
    """(2, E) global (src, dst) of every edge."""
    indptr = np.asarray(g.indptr)
    dst = np.repeat(np.arange(g.num_nodes), np.diff(indptr))
    return np.stack([np.asarray(g.indices).astype(np.int64), dst])


def seed_edges(g: CSCGraph, n: int, seed=1) -> np.ndarray:
    """``n`` distinct edges of ``g`` as (2, n) pairs."""
    e = graph_edges(g)
    pick = np.random.default_rng(seed).choice(e.shape[1], n, replace=False)
    return e[:, pick]


def block_pairs(block) -> set:
    ei = block.edge_index.cpu().numpy()
    sn = block.src_nodes.cpu().numpy()
    return set(zip(sn[ei[0]].tolist(), sn[ei[1]].tolist()))


def check_link_batch(g: CSCGraph, mb: MiniBatch, pairs: np.ndarray, k: int, fanouts):
    """Structure: endpoints are the seeds, local ids point at them, every edge exists."""
    assert isinstance(mb, MiniBatch) and mb.is_link and not mb.is_typed
    seeds = mb.seeds.cpu().numpy()
    nodes = np.unique(np.concatenate([pairs.ravel(), mb.pairs.cpu().numpy().ravel()]))
    assert np.array_equal(np.sort(seeds), seeds) and len(np.unique(seeds)) == len(seeds)
    assert set(nodes.tolist()) <= set(seeds.tolist())
    assert np.array_equal(mb.pairs.cpu().numpy(), pairs)
    assert np.array_equal(seeds[mb.pair_index.cpu().numpy()], pairs)
    neg = mb.neg_index.cpu().numpy()
    assert neg.shape == (2, pairs.shape[1] * k) and mb.num_negatives == k
    assert np.array_equal(seeds[neg[0]], np.repeat(pairs[0], k))
    assert mb.edge_label_index.shape == (2, pairs.shape[1] * (k + 1))
    assert mb.edge_label.tolist() == [1.0] * pairs.shape[1] + [0.0] * (pairs.shape[1] * k)
    assert len(mb.blocks) == len(fanouts)
    assert torch.equal(mb.blocks[-1].dst_nodes, mb.seeds)
    for i in range(len(fanouts) - 1):
        assert torch.equal(mb.blocks[i].dst_nodes, mb.blocks[i + 1].src_nodes)
    edges = set(zip(*graph_edges(g).tolist()))
    for b, f in zip(mb.blocks, fanouts):
        ei = b.edge_index.cpu().numpy()
        if ei.shape[1]:
            assert ei[0].max() < b.num_src and ei[1].max() < b.num_dst and ei.min() >= 0
            assert np.bincount(ei[1], minlength=b.num_dst).max() <= f
        assert block_pairs(b) <= edges, "a sampled edge is not in the graph"


@pytest.mark.parametrize("name", SAMPLERS)
@pytest.mark.parametrize("exclude", ["self", "reverse"])
def test_edges_exist_and_seed_edges_are_excluded(name, exclude):
    g = undirected_graph()
    pairs = seed_edges(g, 64)
    fanouts = [5, 4, 3]
    ls = LinkSampler.from_graph(g, fanouts, sampler=node_sampler(name), seed=3, num_negatives=2,
                                exclude=exclude)
    for b in range(3):
        mb = ls.sample(pairs, epoch=1, batch_index=b)
        check_link_batch(g, mb, pairs, 2, fanouts)
        banned = set(zip(*pairs.tolist()))
        if exclude == "reverse":
            banned |= set(zip(pairs[1].tolist(), pairs[0].tolist()))
        for blk in mb.blocks:
            assert not (block_pairs(blk) & banned), "a seed edge (or reverse) leaked into a block"


def test_without_exclusion_seed_edges_do_appear():
    """The exclusion test above can fail: with every neighbour taken, the seed edges and their
    reverses are in the last block unless excluded."""
    g = undirected_graph()
    pairs = seed_edges(g, 32)
    banned = set(zip(*pairs.tolist())) | set(zip(pairs[1].tolist(), pairs[0].tolist()))
    kept = LinkSampler(NeighborSampler(g, [-1]), exclude="none").sample(pairs)
    assert banned <= block_pairs(kept.blocks[-1])
    self_only = LinkSampler(NeighborSampler(g, [-1]), exclude="self").sample(pairs)
    left = block_pairs(self_only.blocks[-1]) & banned
    assert left == set(zip(pairs[1].tolist(), pairs[0].tolist())) - set(zip(*pairs.tolist()))
    full = block_pairs(kept.blocks[-1])
    excl = block_pairs(LinkSampler(NeighborSampler(g, [-1]), exclude="reverse")
                       .sample(pairs).blocks[-1])
    assert full - excl == banned  # nothing else was removed


@pytest.mark.parametrize("negatives", ["uniform", "per_source"])
def test_negatives_never_equal_the_positive_destination(negatives):
    g = undirected_graph(num_nodes=6, avg_deg=4)
    pairs = np.stack([np.arange(3000) % 6, (np.arange(3000) // 6) % 6]).astype(np.int64)
    for excl in (True, False):
        ls = LinkSampler(NeighborSampler(g, [2]), num_negatives=4, negatives=negatives,
                         exclude_positive=excl, exclude="none")
        mb = ls.sample(pairs)
        neg_dst = mb.seeds[mb.neg_index[1]].numpy().reshape(-1, 4)
        hits = (neg_dst == pairs[1][:, None]).sum()
        if excl:
            assert hits == 0
        else:
            assert hits > 0  # the option is what prevents it


def test_negatives_are_uniform():
    n = 50
    g = undirected_graph(num_nodes=n, avg_deg=4)
    rng = np.random.default_rng(0)
    pairs = np.stack([rng.integers(0, n, 4000), np.full(4000, 7)]).astype(np.int64)
    ls = LinkSampler(NeighborSampler(g, [1]), num_negatives=5, exclude="none",
                     exclude_positive=False)
    neg = ls.draw_negatives(torch.from_numpy(pairs), epoch=0, batch_index=0).numpy()
    assert chisquare(np.bincount(neg.ravel(), minlength=n)).pvalue > P_MIN
    ls = LinkSampler(NeighborSampler(g, [1]), num_negatives=5, exclude="none")
    neg = ls.draw_negatives(torch.from_numpy(pairs), epoch=0, batch_index=0).numpy().ravel()
    counts = np.bincount(neg, minlength=n)
    assert counts[7] == 0
    assert chisquare(np.delete(counts, 7)).pvalue > P_MIN
    # a biased variant fails the same test: r % n over 0..n+9 favours the first 10 nodes
    drawn = ls.draw_negatives(torch.from_numpy(pairs), epoch=0, batch_index=1).numpy().ravel()
    biased = (drawn * 7 + 3) % (n + 10)
    assert chisquare(np.bincount(biased % n, minlength=n)).pvalue < P_MIN


def test_per_source_negatives_are_shared_by_a_source_across_batches():
    g = undirected_graph()
    ls = LinkSampler(NeighborSampler(g, [2]), num_negatives=8, negatives="per_source",
                     exclude_positive=False)
    a = ls.draw_negatives(torch.tensor([[5, 9], [1, 2]]), epoch=3, batch_index=0)
    b = ls.draw_negatives(torch.tensor([[9, 5, 5], [4, 4, 6]]), epoch=3, batch_index=17)
    assert torch.equal(a[0], b[1]) and torch.equal(a[0], b[2]) and torch.equal(a[1], b[0])
    assert not torch.equal(a, ls.draw_negatives(torch.tensor([[5, 9], [1, 2]]), epoch=4, batch_index=0))
    u = LinkSampler(NeighborSampler(g, [2]), num_negatives=8, exclude_positive=False)
    assert not torch.equal(u.draw_negatives(torch.tensor([[5], [1]]), epoch=3, batch_index=0),
                           u.draw_negatives(torch.tensor([[5], [1]]), epoch=3, batch_index=1))


def test_identical_across_thread_counts_and_calls():
    g = undirected_graph(num_nodes=20_000, avg_deg=10)
    pairs = seed_edges(g, 3000)
    fanouts = [6, 4]
    ref = None
    for threads in (1, 2, 3):
        ls = LinkSampler(NeighborSampler(g, fanouts, num_threads=threads, seed=5), seed=5,
                         num_negatives=2, exclude="reverse")
        mb = ls.sample(pairs, epoch=2, batch_index=4)
        got = [mb.seeds, mb.pair_index, mb.neg_index,
               *[t for b in mb.blocks for t in (b.edge_index, b.src_nodes)]]
        if ref is None:
            ref = got
        else:
            assert all(torch.equal(x, y) for x, y in zip(ref, got))
        ls.close()
    other = LinkSampler(NeighborSampler(g, fanouts, seed=5), seed=5, num_negatives=2,
                        exclude="reverse").sample(pairs, epoch=2, batch_index=5)
    assert not torch.equal(other.neg_index, ref[2])


def test_negatives_are_the_same_for_the_numba_and_torch_samplers():
    g = undirected_graph()
    pairs = seed_edges(g, 100)
    a = LinkSampler.from_graph(g, [3], sampler=node_sampler("neighbor"), seed=2, num_negatives=3).sample(pairs)
    b = LinkSampler.from_graph(g, [3], sampler=node_sampler("torch"), seed=2, num_negatives=3).sample(pairs)
    assert torch.equal(a.seeds, b.seeds)
    assert torch.equal(a.seeds[a.neg_index], b.seeds[b.neg_index])


def test_pair_table_positions_labels_and_fixed_negatives():
    g = undirected_graph()
    pairs = seed_edges(g, 50)
    labels = np.arange(50) % 2
    base = LinkSampler(NeighborSampler(g, [4, 2]), num_negatives=3)
    tab = base.with_pairs(pairs, labels)
    assert tab.num_pairs == 50 and base.num_pairs is None
    pos = torch.tensor([7, 3, 41])
    mb = tab.sample(pos, epoch=1, batch_index=2)
    check_link_batch(g, mb, pairs[:, [7, 3, 41]], 3, [4, 2])
    assert mb.pair_labels.tolist() == [1.0, 1.0, 1.0]
    ref = base.sample(pairs[:, [7, 3, 41]], epoch=1, batch_index=2)
    assert torch.equal(ref.neg_index, mb.neg_index)
    fixed = np.random.default_rng(0).integers(0, g.num_nodes, (50, 6))
    fx = base.with_pairs(pairs, fixed_negatives=fixed)
    mb = fx.sample(pos)
    assert mb.num_negatives == 6
    assert np.array_equal(mb.seeds[mb.neg_index[1]].numpy().reshape(3, 6), fixed[[7, 3, 41]])
    small = fx.with_fanouts([-1])
    assert small.fanouts == (-1,) and small.num_pairs == 50


def test_bad_input_is_a_clear_error():
    g = undirected_graph(num_nodes=30)
    ls = LinkSampler(NeighborSampler(g, [2]))
    with pytest.raises(GraphfeedError, match=r"shape \(3, 2\)"):
        ls.sample(np.zeros((3, 2), dtype=np.int64))
    with pytest.raises(GraphfeedError, match=r"seeds\[1, 0\] = 30 is out of range \[0, 30\)"):
        ls.sample(np.array([[0], [30]]))
    with pytest.raises(GraphfeedError, match="dtype"):
        ls.sample(np.zeros((2, 3), dtype=np.float32))
    with pytest.raises(GraphfeedError, match="pairs\\[0, 1\\] = -1"):
        ls.with_pairs(np.array([[0, -1], [1, 2]]))
    with pytest.raises(GraphfeedError, match="pair_labels must hold one label per pair"):
        ls.with_pairs(np.array([[0], [1]]), [1, 0])
    with pytest.raises(GraphfeedError, match="fixed_negatives\\[1, 1\\] = 99"):
        ls.with_pairs(np.array([[0], [1]]), fixed_negatives=[[3, 99]])
    with pytest.raises(GraphfeedError, match=r"pair position 5 is out of range \[0, 1\)"):
        ls.with_pairs(np.array([[0], [1]])).sample([5])
    with pytest.raises(GraphfeedError, match="negatives must be one of"):
        LinkSampler(NeighborSampler(g, [2]), negatives="global")
    with pytest.raises(GraphfeedError, match="exclude must be one of"):
        LinkSampler(NeighborSampler(g, [2]), exclude="both")
    with pytest.raises(GraphfeedError, match="num_negatives"):
        LinkSampler(NeighborSampler(g, [2]), num_negatives=-1)
    with pytest.raises(GraphfeedError, match="node Sampler"):
        LinkSampler(ls)


def test_the_loader_reads_features_of_every_endpoint():
    from graphfeed.features.memory import InMemoryFeature
    from graphfeed.loader.dataloader import DataLoader
    from graphfeed.loader.item_sampler import ItemSampler

    g = undirected_graph()
    pairs = seed_edges(g, 300)
    x = torch.arange(g.num_nodes, dtype=torch.float32).unsqueeze(1).repeat(1, 3)
    ls = LinkSampler(NeighborSampler(g, [3, 3]), num_negatives=1,
                     exclude="reverse").with_pairs(pairs)
    got = {}
    for threads in (0, 3):
        loader = DataLoader(ItemSampler(300, 64, seed=1), ls, node_features=InMemoryFeature(x),
                            num_threads=threads)
        batches = list(loader)
        assert len(batches) == 5
        for mb in batches:
            assert isinstance(mb, MiniBatch) and mb.is_link and not mb.is_typed
            assert torch.equal(mb.x[:, 0].long(), mb.input_nodes)
        got[threads] = [(mb.neg_index, mb.blocks[0].edge_index) for mb in batches]
    assert all(torch.equal(a, b) for p, q in zip(got[0], got[3]) for a, b in zip(p, q))


def test_the_numba_and_torch_filters_agree():
    from graphfeed.sampling.link import _without_keys

    rng = np.random.default_rng(0)
    ei = torch.from_numpy(rng.integers(0, 40, (2, 5000)))
    keys = torch.unique(torch.from_numpy(rng.integers(0, 20 * 20, 60)))
    a_ei, a_keep = _without_keys(ei, 20, keys, True)
    b_ei, b_keep = _without_keys(ei, 20, keys, False)
    assert torch.equal(a_ei, b_ei) and torch.equal(ei[:, a_keep], ei[:, b_keep])
    gone = ei.shape[1] - a_ei.shape[1]
    expect = sum(1 for u, v in ei.T.tolist() if u < 20 and v < 20 and u * 20 + v in
                 set(keys.tolist()))
    assert gone == expect > 0
    assert _without_keys(ei, 20, torch.tensor([10_000]), True) is None
    assert _without_keys(ei, 20, torch.tensor([10_000]), False) is None
