"""LinkSampler over a typed node sampler: typed seed pairs -> negatives within the destination type -> typed
neighbourhoods of the endpoints, without the seed edges (and their reverse edges) in any
block of their batch."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from graphfeed.errors import GraphfeedError
from graphfeed.graph.hetero import HeteroGraph
from graphfeed.sampling.hetero import HeteroNeighborSampler
from graphfeed.sampling.base import MiniBatch
from graphfeed.sampling.link import LinkSampler

P_MIN = 1e-4
W = ("author", "writes", "paper")
WB = ("paper", "written_by", "author")
C = ("paper", "cites", "paper")
R = ("paper", "related", "paper")  # symmetric: its own reverse
T = ("field", "topic_of", "paper")
REV = {W: WB, WB: W, R: R}


def typed_graph(n_a=150, n_p=300, n_f=5, seed=0) -> HeteroGraph:
    rng = np.random.default_rng(seed)
    wa, wp = rng.integers(0, n_a, 1200), rng.integers(0, n_p, 1200)
    # hubs: a few papers cite and are cited a lot
    cs = np.where(rng.random(1500) < 0.2, rng.integers(0, min(5, n_p), 1500),
                  rng.integers(0, n_p, 1500))
    cd = rng.integers(0, n_p, 1500)
    ra, rb = rng.integers(0, n_p, 400), rng.integers(0, n_p, 400)
    keep_c, keep_r = cs != cd, ra != rb
    edges = {W: (wa, wp), WB: (wp, wa), C: (cs[keep_c], cd[keep_c]),
             R: (np.concatenate([ra[keep_r], rb[keep_r]]), np.concatenate([rb[keep_r], ra[keep_r]])),
             T: (rng.integers(0, n_f, n_p), np.arange(n_p))}
    return HeteroGraph.from_edges({"author": n_a, "field": n_f, "paper": n_p}, edges,
                                  drop_duplicates=True)


def pick(g, et, n, seed=1) -> np.ndarray:
    s, d = g.edges_of(et)
    key = np.unique(s * 10**6 + d)
    sel = np.random.default_rng(seed).choice(key.size, min(n, key.size), replace=False)
    return np.stack([key[sel] // 10**6, key[sel] % 10**6])


def edge_set(g, et) -> set:
    s, d = g.edges_of(et)
    return set(zip(s.tolist(), d.tolist()))


def block_edges(block, et) -> set:
    """Type-local (src, dst) of the sampled edges of ``et`` in ``block``."""
    s, _, d = et
    ei = block.edge_index_dict[et].cpu().numpy()
    assert ei.shape[1] == 0 or (ei[0].max() < block.num_src[s] and ei[1].max() < block.num_dst[d])
    src = block.src_nodes[s].cpu().numpy()[ei[0]]
    dst = block.dst_nodes[d].cpu().numpy()[ei[1]]
    return set(zip(src.tolist(), dst.tolist()))


def node_sampler(name, g, fanouts, seed=0):
    if name == "hetero":
        return HeteroNeighborSampler(g, fanouts, seed=seed)
    from graphfeed.sampling.torch_hetero import TorchHeteroSampler

    return TorchHeteroSampler(g, fanouts, seed=seed)


def check_batch(g, mb, seeds: dict, k: int):
    """Structure: the endpoints are the seeds, pair and negative indices point at them, every
    sampled edge is an edge of its relation, destinations first per type."""
    assert isinstance(mb, MiniBatch) and mb.is_typed and mb.is_link
    sd = {t: v.cpu().numpy() for t, v in mb.seed_dict.items()}
    for t, v in sd.items():
        assert np.all(np.diff(v) > 0)  # sorted, distinct
    want = {t: set() for t in g.node_types}
    for et, p in seeds.items():
        s, _, d = et
        pi = mb.pair_index[et].cpu().numpy()
        assert np.array_equal(sd[s][pi[0]], p[0]) and np.array_equal(sd[d][pi[1]], p[1])
        ni = mb.neg_index[et].cpu().numpy()
        assert ni.shape == (2, p.shape[1] * k)
        assert np.array_equal(ni[0], np.repeat(pi[0], k))
        assert ni[1].max(initial=0) < len(sd[d])
        want[s] |= set(p[0].tolist())
        want[d] |= set(p[1].tolist()) | set(sd[d][ni[1]].tolist())
    assert {t: set(v.tolist()) for t, v in sd.items()} == want
    for i, b in enumerate(mb.blocks):
        for et in g.edge_types:
            assert block_edges(b, et) <= edge_set(g, et)
        if i + 1 < len(mb.blocks):
            nxt = mb.blocks[i + 1]
            for t in g.node_types:
                assert torch.equal(b.dst_nodes[t], nxt.src_nodes[t])
        for t in g.node_types:  # the seeds lead every layer's sources of their type
            assert np.array_equal(b.src_nodes[t].cpu().numpy()[: len(sd[t])], sd[t])


@pytest.mark.parametrize("name", ["hetero", "torch-hetero"])
@pytest.mark.parametrize("exclude", ["self", "reverse"])
def test_edges_exist_and_seed_edges_are_excluded(name, exclude):
    g = typed_graph()
    seeds = {W: pick(g, W, 200), C: pick(g, C, 150), R: pick(g, R, 60)}
    ls = LinkSampler(node_sampler(name, g, [-1, -1]), num_negatives=3, exclude=exclude,
                           reverse_edge_types=REV)
    mb = ls.sample(seeds, epoch=1, batch_index=2)
    check_batch(g, mb, seeds, 3)
    for b in mb.blocks:
        for et, p in seeds.items():
            got = block_edges(b, et)
            assert not (set(zip(p[0].tolist(), p[1].tolist())) & got)
            rev = REV.get(et)
            if rev is not None:
                back = set(zip(p[1].tolist(), p[0].tolist())) & block_edges(b, rev)
                assert (len(back) == 0) == (exclude == "reverse")


def test_without_exclusion_seed_edges_do_appear():
    g = typed_graph()
    seeds = {W: pick(g, W, 200)}
    for exclude, expect in (("none", True), ("self", False)):
        ls = LinkSampler(HeteroNeighborSampler(g, [-1]), exclude=exclude)
        b = ls.sample(seeds).blocks[0]
        hits = set(zip(seeds[W][0].tolist(), seeds[W][1].tolist())) & block_edges(b, W)
        assert bool(hits) == expect
        # the reverse relation keeps its reversed seed edges unless exclude="reverse"
        back = set(zip(seeds[W][1].tolist(), seeds[W][0].tolist())) & block_edges(b, WB)
        assert back


@pytest.mark.parametrize("negatives", ["uniform", "per_source"])
def test_negatives_never_equal_the_positive_and_stay_in_the_type(negatives):
    g = typed_graph(n_p=4)
    seeds = {W: pick(g, W, 300)}
    ls = LinkSampler(HeteroNeighborSampler(g, [2]), num_negatives=20, negatives=negatives)
    neg = ls.draw_negatives(edge_type=W, pairs=torch.from_numpy(seeds[W]))
    assert neg.shape == (seeds[W].shape[1], 20)
    assert int(neg.min()) >= 0 and int(neg.max()) < 4
    assert not (neg == torch.from_numpy(seeds[W][1]).unsqueeze(1)).any()
    mb = ls.sample(seeds)
    sd = mb.seed_dict["paper"]
    ni, pi = mb.neg_index[W], mb.pair_index[W]
    assert not (sd[ni[1]] == sd[pi[1]].repeat_interleave(20)).any()
    off = LinkSampler(HeteroNeighborSampler(g, [2]), num_negatives=20, negatives=negatives,
                      exclude_positive=False).draw_negatives(
        edge_type=W, pairs=torch.from_numpy(seeds[W]))
    assert (off == torch.from_numpy(seeds[W][1]).unsqueeze(1)).any()


def test_negatives_are_uniform_over_the_destination_type():
    g = typed_graph(n_a=20, n_p=60)
    n_p = 60
    rng = np.random.default_rng(0)
    pairs = torch.from_numpy(np.stack([rng.integers(0, 20, 4000), np.full(4000, 7)]))
    ls = LinkSampler(HeteroNeighborSampler(g, [1]), num_negatives=5,
                           exclude_positive=False)
    neg = ls.draw_negatives(edge_type=W, pairs=pairs, epoch=0, batch_index=0).numpy().ravel()
    assert chisquare(np.bincount(neg, minlength=n_p)).pvalue > P_MIN
    ls = LinkSampler(HeteroNeighborSampler(g, [1]), num_negatives=5)
    counts = np.bincount(ls.draw_negatives(edge_type=W, pairs=pairs).numpy().ravel(), minlength=n_p)
    assert counts[7] == 0 and counts.size == n_p
    assert chisquare(np.delete(counts, 7)).pvalue > P_MIN
    biased = (neg * 7 + 3) % (n_p + 10) % n_p  # favours the first 10 papers: the test sees it
    assert chisquare(np.bincount(biased, minlength=n_p)).pvalue < P_MIN
    # two relations of one batch draw independently
    a = ls.draw_negatives(edge_type=C, pairs=pairs % 20)
    b = ls.draw_negatives(edge_type=R, pairs=pairs % 20)
    assert not torch.equal(a, b)


def test_per_source_negatives_are_shared_by_a_source_across_batches():
    g = typed_graph()
    ls = LinkSampler(HeteroNeighborSampler(g, [2]), num_negatives=8,
                           negatives="per_source", exclude_positive=False)
    a = ls.draw_negatives(edge_type=W, pairs=torch.tensor([[5, 9], [1, 2]]), epoch=3, batch_index=0)
    b = ls.draw_negatives(edge_type=W, pairs=torch.tensor([[9, 5], [4, 4]]), epoch=3, batch_index=17)
    assert torch.equal(a[0], b[1]) and torch.equal(a[1], b[0])
    assert not torch.equal(a, ls.draw_negatives(edge_type=W, pairs=torch.tensor([[5, 9], [1, 2]]), epoch=4))


def _flat(mb):
    out = [mb.seeds]
    for d in (mb.pair_index, mb.neg_index):
        out += [d[k] for k in sorted(d)]
    for b in mb.blocks:
        out += [b.edge_index_dict[k] for k in sorted(b.edge_index_dict)]
        out += [b.src_nodes[k] for k in sorted(b.src_nodes)]
    return out


def test_identical_across_thread_counts_and_calls():
    g = typed_graph(n_a=3000, n_p=6000)
    seeds = {W: pick(g, W, 500), C: pick(g, C, 500)}
    ls = LinkSampler(HeteroNeighborSampler(g, [6, 4], seed=5), seed=5, num_negatives=2,
                           exclude="reverse", reverse_edge_types=REV)
    ref = _flat(ls.sample(seeds, epoch=2, batch_index=4))
    old = torch.get_num_threads()
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            with ThreadPoolExecutor(threads) as ex:
                futs = [ex.submit(ls.sample, seeds, epoch=2, batch_index=4) for _ in range(3)]
                for f in futs:
                    assert all(torch.equal(x, y) for x, y in zip(ref, _flat(f.result())))
    finally:
        torch.set_num_threads(old)
    other = ls.sample(seeds, epoch=2, batch_index=5)
    assert not torch.equal(other.neg_index[W], ref[3])


def test_pair_table_positions_labels_and_fixed_negatives():
    g = typed_graph()
    tab = {C: pick(g, C, 40), W: pick(g, W, 30)}
    base = LinkSampler(HeteroNeighborSampler(g, [3]), num_negatives=2)
    ls = base.with_pairs(tab, pair_labels={W: np.arange(30) % 2, C: np.ones(40)})
    assert ls.num_pairs == 70
    # table order: relation ids, so writes (relation 0) first, then cites
    pos = torch.tensor([31, 2, 69, 5])
    mb = ls.sample(pos)
    assert np.array_equal(mb.pairs[W].numpy(), tab[W][:, [2, 5]])
    assert np.array_equal(mb.pairs[C].numpy(), tab[C][:, [1, 39]])
    assert mb.pair_labels[W].tolist() == [0.0, 1.0]
    assert {k: v.shape[0] for k, v in mb.edge_label_dict.items()} == {W: 6, C: 6}
    fixed = {W: np.full((30, 4), 3), C: np.arange(160).reshape(40, 4) % 300}
    fx = base.with_pairs(tab, fixed_negatives=fixed).sample(pos)
    assert fx.num_negatives == 4
    sd = fx.seed_dict["paper"]
    assert sd[fx.neg_index[W][1]].tolist() == [3] * 8
    assert sd[fx.neg_index[C][1]].tolist() == fixed[C][[1, 39]].ravel().tolist()


def test_bad_input_is_a_clear_error():
    g = typed_graph()
    ns = HeteroNeighborSampler(g, [2])
    with pytest.raises(GraphfeedError, match="reverse_edge_types"):
        LinkSampler(ns, exclude="reverse")
    with pytest.raises(GraphfeedError, match="cannot be the reverse"):
        LinkSampler(ns, exclude="reverse", reverse_edge_types={W: C})
    ls = LinkSampler(ns)
    with pytest.raises(GraphfeedError, match="unknown edge type"):
        ls.sample({("author", "cites", "paper"): np.zeros((2, 1), np.int64)})
    with pytest.raises(GraphfeedError, match="out of range \\[0, 150\\) of node type 'author'"):
        ls.sample({W: np.array([[150], [0]])})
    with pytest.raises(GraphfeedError, match="out of range"):
        ls.sample({W: np.array([[-1], [0]])})
    with pytest.raises(GraphfeedError, match="position 9 is out of range"):
        ls.with_pairs({W: pick(g, W, 5)}).sample([9])
    with pytest.raises(GraphfeedError, match="same k"):
        ls.with_pairs({W: pick(g, W, 2), C: pick(g, C, 2)},
                      fixed_negatives={W: np.zeros((2, 1), np.int64), C: np.zeros((2, 2), np.int64)})
    with pytest.raises(GraphfeedError, match=r"seeds must be a \(2, P\) array"):
        from graphfeed.sampling.neighbor import NeighborSampler

        LinkSampler(NeighborSampler(g.csc, [2])).sample({W: pick(g, W, 2)})


def test_the_loader_reads_type_features_of_every_endpoint():
    from graphfeed.features.memory import InMemoryFeature
    from graphfeed.loader.dataloader import DataLoader
    from graphfeed.loader.item_sampler import ItemSampler

    g = typed_graph()
    tab = {W: pick(g, W, 100), C: pick(g, C, 100)}
    feats = {t: {"feat": InMemoryFeature(np.repeat(np.arange(g.num_nodes_of(t), dtype=np.float32),
                                                   2).reshape(-1, 2))} for t in g.node_types}
    ls = LinkSampler(HeteroNeighborSampler(g, [3, 2]), num_negatives=1).with_pairs(tab)
    loader = DataLoader(ItemSampler(200, 64, shuffle=True, seed=0), ls, type_features=feats,
                        num_threads=2)
    seen = 0
    try:
        for mb in loader:
            for t, x in mb.x_dict.items():
                assert torch.equal(x[:, 0].long(), mb.input_nodes_dict[t])
            seen += mb.num_pairs
    finally:
        loader.close()
    assert seen == 200
