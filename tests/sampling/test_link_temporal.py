"""LinkSampler with pair times over a temporal node sampler: every endpoint sampled at the
earliest time of its pairs (negatives at their pair's), so no pair's batch holds an edge later
than the pair's time; errors for times without a temporal sampler or of the wrong shape."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphfeed.errors import GraphfeedError
from graphfeed.sampling import LinkSampler, SamplingMethod, build_sampler

from test_methods import edge_time, temporal_graph

SAMPLERS = ("neighbor", "torch")


def _limits(pairs, times, neg_dst):
    """node -> the earliest time of the pairs it is an endpoint of (negatives included)."""
    lim = {}
    k = neg_dst.shape[1]
    for i in range(pairs.shape[1]):
        for u in [pairs[0, i], pairs[1, i], *neg_dst[i].tolist()]:
            lim[int(u)] = min(lim.get(int(u), 1 << 62), int(times[i]))
    assert k == 0 or neg_dst.shape[0] == pairs.shape[1]
    return lim


@pytest.mark.parametrize("name", SAMPLERS)
@pytest.mark.parametrize("use", [("edge",), ("edge", "node")])
@pytest.mark.parametrize("strict", [False, True])
def test_no_sampled_edge_after_its_pairs_time(name, use, strict):
    g, nt, et = temporal_graph()
    arrays = {"edge_times": et}
    if "node" in use:
        arrays["node_times"] = nt
    m = SamplingMethod("temporal", strict=strict).bind(arrays)
    inner = build_sampler(name, g, [5, 4], method=m, return_edge_ids=True)
    rng = np.random.default_rng(2)
    pairs = rng.integers(0, g.num_nodes, (2, 80))
    pairs[:, 40:50] = pairs[:, :10]  # repeated endpoints with other times
    times = rng.integers(100, 1000, 80)
    ls = LinkSampler(inner, num_negatives=2, seed=3).with_pairs(pairs, pair_times=times)
    pos = np.arange(80)
    mb = ls.sample(pos, batch_index=4)
    assert torch.equal(mb.pair_times.cpu(), torch.as_tensor(times))
    neg_dst = mb.seeds[mb.neg_index[1]].cpu().numpy().reshape(80, 2)
    limit = _limits(pairs, times, neg_dst)
    seeds = mb.seeds.cpu().numpy()
    assert sorted(limit) == seeds.tolist()
    checked = 0
    for blk in reversed(mb.blocks):  # from the endpoints outwards
        src = blk.src_nodes.cpu().numpy()
        ei = blk.edge_index.cpu().numpy()
        t = edge_time(nt, et, g, blk.edge_ids.cpu().numpy(), use)
        lim = np.array([limit[v] for v in src[ei[1]]])
        assert np.all(t < lim) if strict else np.all(t <= lim)
        checked += len(t)
        new = {}
        for u, v in zip(src[ei[0]], src[ei[1]]):
            new[u] = min(new.get(u, limit.get(u, 1 << 62)), limit[v])
        limit = {**limit, **new}
    assert checked > 200
    # the node sampler got exactly those times: without exclusion, its own batch at them
    plain = LinkSampler(inner, num_negatives=2, seed=3, exclude="none").with_pairs(
        pairs, pair_times=times).sample(pos, batch_index=4)
    first = _limits(pairs, times, neg_dst)
    direct = inner.sample(mb.seeds, batch_index=4,
                          seed_times=np.array([first[v] for v in seeds]))
    for a, b in zip(plain.blocks, direct.blocks):
        assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.src_nodes, b.src_nodes)


def test_pair_times_without_a_table_and_the_batch_keeps_them():
    g, nt, et = temporal_graph()
    inner = build_sampler("neighbor", g, [3], method=SamplingMethod("temporal").bind(
        {"edge_times": et}))
    ls = LinkSampler(inner, num_negatives=1)
    pairs = np.array([[1, 2, 3], [4, 5, 6]])
    mb = ls.sample(pairs, pair_times=np.array([10, 500, 900]))
    assert mb.pair_times.tolist() == [10, 500, 900]
    assert mb.to("cpu").pair_times.tolist() == [10, 500, 900]
    # over edge times only, the node sampler needs the times: without them it says so
    with pytest.raises(GraphfeedError, match="seed_times"):
        ls.sample(pairs)


def test_pair_time_errors():
    g, nt, et = temporal_graph()
    uniform = build_sampler("neighbor", g, [3])
    pairs = np.array([[1, 2], [3, 4]])
    with pytest.raises(GraphfeedError, match="temporal node sampler"):
        LinkSampler(uniform).with_pairs(pairs, pair_times=[1, 2])
    with pytest.raises(GraphfeedError, match="temporal node sampler"):
        LinkSampler(uniform).sample(pairs, pair_times=[1, 2])
    temporal = build_sampler("neighbor", g, [3], method=SamplingMethod("temporal").bind(
        {"node_times": nt}))
    with pytest.raises(GraphfeedError, match="one time per pair"):
        LinkSampler(temporal).with_pairs(pairs, pair_times=[1, 2, 3])
    with pytest.raises(GraphfeedError, match="finite"):
        LinkSampler(temporal).sample(pairs, pair_times=[1.0, np.nan])
    with pytest.raises(GraphfeedError, match="pass pairs= too"):
        LinkSampler(temporal, pair_times=[1, 2])
    table = LinkSampler(temporal).with_pairs(pairs, pair_times=[5, 6])
    with pytest.raises(GraphfeedError, match="bound table"):
        table.sample(np.array([0]), pair_times=[3])
    assert table.with_fanouts([2]).sample(np.array([0, 1])).pair_times.tolist() == [5, 6]


def test_link_trainer_refuses_temporal_without_node_times():
    from graphfeed.trainer.tasks.link import check_link_method

    g, nt, et = temporal_graph()
    check_link_method(SamplingMethod("temporal").bind({"node_times": nt}), "d")
    check_link_method(SamplingMethod("uniform"), "d")
    with pytest.raises(GraphfeedError, match="edge times only.*pair_times"):
        check_link_method(SamplingMethod("temporal").bind({"edge_times": et}), "d")
