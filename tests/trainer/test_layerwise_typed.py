"""Layer-wise inference of the R-GCN on typed graphs (trainer/layerwise.py, on a typed graph): equal to the
model's forward with every neighbour sampled, whatever the batches, threads, widths (projected
first or not) or layers, with a featureless type, relations that reach only some destinations
and one with no edge at all; ``--eval auto`` evaluates typed node classification and typed link
prediction layer-wise, ``--eval sampled`` keeps the sampled path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.timeout(300)

#: node type -> count; ``venue`` has no features, ``paper`` is the labelled type
NUM = {"author": 37, "paper": 83, "venue": 5, "topic": 11}
DIMS = {"author": 6, "paper": 12, "topic": 3}
CLASSES = 3
EDGE_TYPES = (("author", "writes", "paper"), ("paper", "written_by", "author"),
              ("paper", "cites", "paper"), ("venue", "hosts", "paper"),
              ("paper", "in", "venue"), ("topic", "about", "paper"),
              ("topic", "unused", "author"))


def _graph_arrays(seed: int = 4):
    """Type-local edges: papers 0-9 have no author, half the papers no citation, a third no
    venue; paper 7 is cited 60 times (a hub); ``topic about paper`` reaches 6 papers and
    ``topic unused author`` holds no edge."""
    rng = np.random.default_rng(seed)
    P, A, V, T = NUM["paper"], NUM["author"], NUM["venue"], NUM["topic"]
    wp = np.repeat(np.arange(10, P), 2)
    wa = rng.integers(0, A, wp.shape[0])
    cd = np.concatenate([rng.integers(0, P // 2, 80), np.full(60, 7)])
    cs = rng.integers(0, P, cd.shape[0])
    keep = cs != cd
    vp = np.flatnonzero(np.arange(P) % 3 != 0)
    vv = rng.integers(0, V, vp.shape[0])
    tp = np.array([1, 4, 9, 20, 50, 77])
    return {
        EDGE_TYPES[0]: (wa, wp), EDGE_TYPES[1]: (wp, wa), EDGE_TYPES[2]: (cs[keep], cd[keep]),
        EDGE_TYPES[3]: (vv, vp), EDGE_TYPES[4]: (vp, vv),
        EDGE_TYPES[5]: (rng.integers(0, T, tp.shape[0]), tp),
        EDGE_TYPES[6]: (np.zeros(0, np.int64), np.zeros(0, np.int64)),
    }


def _features(rng):
    return {t: rng.normal(size=(NUM[t], d)).astype(np.float32) for t, d in DIMS.items()}


@pytest.fixture(scope="module")
def typed_dataset(tmp_path_factory):
    """The graph above as a prepared node-classification dataset (target ``paper``)."""
    import graphfeed as gf
    from graphfeed.datasets import write_dataset
    from graphfeed.datasets.hetero import HeteroParts
    from graphfeed.graph.hetero import HeteroGraph

    rng = np.random.default_rng(5)
    g = HeteroGraph.from_edges(NUM, _graph_arrays(), drop_duplicates=True)
    off = int(g.node_offsets[g.type_id("paper")])
    labels = np.full(g.num_nodes, -1, dtype=np.int64)
    labels[off:off + NUM["paper"]] = rng.integers(0, CLASSES, NUM["paper"])
    perm = rng.permutation(NUM["paper"]) + off
    path = tmp_path_factory.mktemp("typed-lw") / "typed-lw"
    write_dataset(path, graph=g.csc, node_features={"label": labels},
                  splits={"train": np.sort(perm[:40]), "valid": np.sort(perm[40:60]),
                          "test": np.sort(perm[60:])},
                  num_classes=CLASSES, target="label", name="typed-lw",
                  hetero=HeteroParts(g, {t: {"feat": a} for t, a in _features(rng).items()},
                                     target_type="paper"))
    return gf.Dataset.open(path)


def _placed(ds, fanouts=(5, 5), backend="ram", labels=True):
    from graphfeed.distributed.world import World
    from graphfeed.placement.plan import DataPlan

    plan = DataPlan(features=backend, mode="auto", device="cpu", world=World())
    return plan.place_dataset(ds, list(fanouts), labels=labels)


def _model(ds, layers=2, hidden=8, out=CLASSES, target="paper"):
    from graphfeed.models import HeteroRGCN, typed_in_dims

    h = ds.hetero
    torch.manual_seed(0)
    net = HeteroRGCN(h.node_types, h.edge_types, typed_in_dims(ds.type_features), hidden, out,
                     layers, target)
    with torch.no_grad():  # learned vectors away from zero, so the featureless type counts
        for p in net.free.values():
            p.normal_()
    return net


def _sampled(placed, ids, net, layers, batch_size=7):
    """Reference: the model's forward on typed blocks with every neighbour (fanouts -1):
    node type -> ``(rows, global ids)`` of the output types' seeds in ``ids``."""
    from graphfeed.loader.dataloader import DataLoader
    from graphfeed.loader.item_sampler import ItemSampler

    sampler = placed.sampler.with_fanouts([-1] * layers)
    ld = DataLoader(ItemSampler(np.asarray(ids), batch_size, shuffle=False), sampler,
                          type_features=placed.type_features, num_threads=1)
    off = {t: int(o) for t, o in zip(sampler.graph.node_types, sampler.graph.node_offsets)}
    rows, got = {}, {}
    net.eval()
    try:
        with torch.no_grad():
            for mb in ld:
                out = net(mb.x_dict, mb.blocks)
                out = out if isinstance(out, dict) else {net.target: out}
                for t, local in mb.seed_dict.items():
                    if local.numel():
                        rows.setdefault(t, []).append(out[t])
                        got.setdefault(t, []).append(local.numpy() + off[t])
    finally:
        ld.close()
    return {t: (torch.cat(rows[t]), np.concatenate(got[t])) for t in rows}


def _layerwise(placed, graph, sets, net, layers, **kw):
    from graphfeed.trainer.layerwise import LayerwiseEvaluator

    ev = LayerwiseEvaluator(placed, graph, sets, layers, **kw)
    try:
        return ev.evaluate(net)
    finally:
        ev.close()


def _check_against_sampled(ds, placed, ids, net, layers, **kw):
    want = _sampled(placed, ids, net, layers)
    got = _layerwise(placed, ds.hetero, {"s": ids}, net, layers, **kw)["s"][0]
    order = {int(v): i for i, v in enumerate(ids)}
    for t, (rows, gids) in want.items():
        idx = torch.tensor([order[int(v)] for v in gids])
        torch.testing.assert_close(got[idx], rows, atol=2e-5, rtol=1e-4)
    return got


@pytest.mark.parametrize("layers, hidden, max_batch, max_edges", [
    (2, 8, 1 << 16, 1 << 22),   # out 3 < hidden 8: the last layer projects first
    (2, 2, 1 << 16, 1 << 22),   # out 3 > hidden 2: aggregates the inputs
    (3, 8, 5, 17),              # batches smaller than a type, the hub alone in its batch
    (1, 8, 9, 40),              # one layer: the input rows are the sources
])
def test_equals_every_neighbour_sampled(typed_dataset, layers, hidden, max_batch, max_edges):
    ds = typed_dataset
    placed = _placed(ds)
    net = _model(ds, layers, hidden)
    off = int(ds.hetero.node_offsets[ds.hetero.type_id("paper")])
    ids = np.arange(off, off + NUM["paper"])
    _check_against_sampled(ds, placed, ids, net, layers, max_batch=max_batch,
                           max_batch_edges=max_edges, num_threads=1)


def test_a_small_set_the_labels_and_argmax(typed_dataset):
    """A few targets (layer 0 runs on their 2-hop neighbourhood only), in an unsorted order with
    a repeat; the labels and the predicted classes follow the set's order."""
    from graphfeed.trainer.layerwise import LayerwiseEvaluator

    ds = typed_dataset
    placed = _placed(ds)
    net = _model(ds)
    off = int(ds.hetero.node_offsets[ds.hetero.type_id("paper")])
    ids = np.array([off + 50, off + 7, off + 2, off + 7])
    ev = LayerwiseEvaluator(placed, ds.hetero, {"s": ids}, 2, num_threads=1)
    try:
        logits, y = ev.logits(net, "s")
        classes, _ = ev.logits(net, "s", argmax=True)
        sets = ev._plan(("s",)).sets
    finally:
        ev.close()
    assert sets[0].shape[0] < ds.hetero.num_nodes  # not the whole graph
    want = _sampled(placed, np.unique(ids), net, 2)["paper"]
    rows = {int(v): r for v, r in zip(want[1], want[0])}
    torch.testing.assert_close(logits, torch.stack([rows[int(v)] for v in ids]), atol=2e-5,
                               rtol=1e-4)
    assert torch.equal(y, torch.from_numpy(np.asarray(ds.labels)[ids]))
    assert torch.equal(classes.reshape(-1), logits.argmax(-1))


def test_the_featureless_type_counts(typed_dataset):
    """``venue`` has no features: its learned vector reaches the papers it hosts (layer-wise as
    sampled), and papers without a venue do not see it."""
    ds = typed_dataset
    placed = _placed(ds)
    net = _model(ds, 2, 8)
    off = int(ds.hetero.node_offsets[ds.hetero.type_id("paper")])
    ids = np.arange(off, off + NUM["paper"])
    before = _check_against_sampled(ds, placed, ids, net, 2, num_threads=1)
    with torch.no_grad():
        net.free["venue"].add_(1.0)
    after = _check_against_sampled(ds, placed, ids, net, 2, num_threads=1)
    changed = (before - after).abs().amax(1) > 1e-4
    assert changed.any() and not changed.all()


def test_threads_give_identical_results(typed_dataset):
    ds = typed_dataset
    placed = _placed(ds)
    net = _model(ds, 2, 8)
    off = int(ds.hetero.node_offsets[ds.hetero.type_id("paper")])
    sets = {"s": np.arange(off, off + NUM["paper"])}
    one = _layerwise(placed, ds.hetero, sets, net, 2, num_threads=1, max_batch_edges=60)
    four = _layerwise(placed, ds.hetero, sets, net, 2, num_threads=4, max_batch_edges=60)
    assert torch.equal(one["s"][0], four["s"][0])


def test_disk_features(typed_dataset):
    ds = typed_dataset
    net = _model(ds)
    off = int(ds.hetero.node_offsets[ds.hetero.type_id("paper")])
    ids = np.arange(off, off + NUM["paper"])
    ram = _layerwise(_placed(ds), ds.hetero, {"s": ids}, net, 2, num_threads=1)["s"][0]
    disk = _layerwise(_placed(ds, backend="disk"), ds.hetero, {"s": ids}, net, 2,
                      num_threads=1)["s"][0]
    assert torch.equal(ram, disk)


def test_several_output_types(typed_dataset):
    """The link encoder's shape: two output types of one width; a set mixing them comes back
    in its own order; a type the model does not output is refused."""
    from graphfeed.errors import GraphfeedError

    ds = typed_dataset
    placed = _placed(ds, labels=False)
    net = _model(ds, 2, 8, out=8, target=("author", "paper"))
    h = ds.hetero
    rng = np.random.default_rng(0)
    ids = rng.permutation(np.concatenate([
        np.arange(h.node_offsets[h.type_id("author")], h.node_offsets[h.type_id("author") + 1]),
        np.arange(h.node_offsets[h.type_id("paper")], h.node_offsets[h.type_id("paper") + 1])]))
    _check_against_sampled(ds, placed, ids, net, 2, num_threads=2, labels=False)
    venue = int(h.node_offsets[h.type_id("venue")])
    with pytest.raises(GraphfeedError, match="does not output"):
        _layerwise(placed, h, {"s": np.array([venue])}, net, 2, labels=False)


def test_training_forward_is_unchanged(typed_dataset):
    """``forward`` now runs through ``layer_output``: training steps (dropout on) give the
    same numbers as the inline code it replaced (kept here as the reference)."""
    import torch.nn.functional as F

    ds = typed_dataset
    placed = _placed(ds)
    net = _model(ds, 2, 8)
    net.train()

    def reference(x_dict, blocks):
        h = {}
        for t in net.node_types:
            n = blocks[0].num_src[t]
            if t in net.proj:
                h[t] = F.relu(net.proj[t](x_dict[t].float().reshape(n, -1)))
            elif t in net.free:
                h[t] = net.free[t].expand(n, -1)
        for i, b in enumerate(blocks):
            out = {t: lin(h[t][: b.num_dst[t]]) for t, lin in net.root[i].items()}
            for et, ei in b.edge_index_dict.items():
                if net._key(et) not in net.rel[i]:
                    continue
                n_dst = b.num_dst[et[2]]
                src = h[et[0]]
                agg = src.new_zeros((n_dst, src.shape[1])).index_add_(
                    0, ei[1], src.index_select(0, ei[0]))
                cnt = torch.bincount(ei[1], minlength=n_dst).clamp_(min=1).to(src.dtype)
                out[et[2]] = out[et[2]] + net.rel[i][net._key(et)](agg / cnt[:, None])
            if i < len(blocks) - 1:
                out = {t: F.dropout(F.relu(v), net.dropout, True) for t, v in out.items()}
            h = out
        return h[net.target]

    from graphfeed.loader.dataloader import DataLoader
    from graphfeed.loader.item_sampler import ItemSampler

    off = int(ds.hetero.node_offsets[ds.hetero.type_id("paper")])
    ld = DataLoader(ItemSampler(np.arange(off, off + 30), 30, shuffle=False),
                          placed.sampler, type_features=placed.type_features, num_threads=1)
    try:
        mb = next(iter(ld))
    finally:
        ld.close()
    torch.manual_seed(7)
    a = net(mb.x_dict, mb.blocks)
    torch.manual_seed(7)
    b = reference(mb.x_dict, mb.blocks)
    assert torch.equal(a, b)


# ---------------------------------------------------------------------------- in a run

_RUN = dict(epochs=2, hidden=8, fanouts=(3, 3), batch_size=16, device="cpu", seed=0,
            num_threads=1, progress=False, mlp_baseline=False)


def test_node_run_evaluates_layerwise_by_default(typed_dataset, tmp_path):
    """``--eval auto`` on a typed dataset is layer-wise and scores what every-neighbour sampled
    evaluation scores after the same training; ``--eval sampled`` keeps the sampled path (the
    training fanouts); ``--predict`` predicts layer-wise too."""
    from graphfeed.training import TrainConfig, check_run, train

    ds = typed_dataset
    lw = train(TrainConfig(dataset="typed-lw", predict=str(tmp_path / "lw.npy"),
                           predict_nodes="all", **_RUN), dataset=ds)
    full = train(TrainConfig(dataset="typed-lw", eval_fanouts=(-1, -1),
                             predict=str(tmp_path / "full.npy"), predict_nodes="all", **_RUN),
                 dataset=ds)
    sampled = train(TrainConfig(dataset="typed-lw", eval_method="sampled", **_RUN), dataset=ds)
    assert lw.model == "rgcn" and lw.eval_method == "layerwise" and lw.eval_fanouts == [-1, -1]
    assert full.eval_method == "sampled" and full.eval_fanouts == [-1, -1]
    assert sampled.eval_method == "sampled" and sampled.eval_fanouts == [3, 3]
    assert [e.loss for e in lw.epochs] == [e.loss for e in full.epochs]
    for a, b in zip(lw.epochs, full.epochs):
        assert a.valid == pytest.approx(b.valid, abs=1e-9)
        assert a.test == pytest.approx(b.test, abs=1e-9)
    np.testing.assert_array_equal(np.load(tmp_path / "lw.npy"), np.load(tmp_path / "full.npy"))
    assert np.load(tmp_path / "lw.npy").shape == (NUM["paper"],)
    assert check_run(TrainConfig(dataset="typed-lw", **_RUN), dataset=ds)["eval_fanouts"] == \
        [-1, -1]


@pytest.fixture(scope="module")
def typed_link_dataset(tmp_path_factory):
    """The same graph as a typed link dataset: ``author writes paper`` split 70/15/15 (its
    reverse ``written_by`` removed with it)."""
    import graphfeed as gf
    from graphfeed.datasets.hetero_link import random_relation_split, write_typed_link_dataset
    from graphfeed.graph.hetero import HeteroGraph

    g = HeteroGraph.from_edges(NUM, _graph_arrays(), drop_duplicates=True)
    splits = random_relation_split(g, [EDGE_TYPES[0]], (0.7, 0.15, 0.15), seed=1)
    path = tmp_path_factory.mktemp("typed-lw-link") / "typed-lw-link"
    write_typed_link_dataset(path, graph=g, splits=splits, name="typed-lw-link",
                             type_features={t: {"feat": a} for t, a in
                                            _features(np.random.default_rng(6)).items()})
    return gf.Dataset.open(path)


def test_link_run_evaluates_the_encoder_layerwise(typed_link_dataset):
    from graphfeed.training import TrainConfig, train

    ds = typed_link_dataset
    kw = dict(_RUN, dataset="typed-lw-link", task="link", eval_negatives=10)
    lw = train(TrainConfig(**kw), dataset=ds)
    full = train(TrainConfig(eval_fanouts=(-1, -1), **kw), dataset=ds)
    sampled = train(TrainConfig(eval_method="sampled", **kw), dataset=ds)
    assert lw.model == "rgcn+dot" and lw.eval_method == "layerwise"
    assert lw.eval_fanouts == [-1, -1] and full.eval_method == "sampled"
    assert sampled.eval_method == "sampled" and sampled.eval_fanouts == [3, 3]
    assert [e.loss for e in lw.epochs] == [e.loss for e in full.epochs]
    for a, b in zip(lw.epochs, full.epochs):
        for split in ("valid", "test"):
            x, y = getattr(a, split), getattr(b, split)
            assert x == pytest.approx(y, abs=1e-6), (split, x, y)


# ---------------------------------------------------------------------------- ranks

def rank_logits(path: str, max_batch: int):
    """This rank's world evaluating the papers of the dataset at ``path`` layer-wise (a rank
    function: spawned ranks import it from this module)."""
    import graphfeed as gf
    from graphfeed.distributed import World, init
    from graphfeed.trainer.layerwise import LayerwiseEvaluator

    w = init(World.from_env(), timeout_s=60) if World.from_env().world_size > 1 else None
    rank, world = (w.rank, w.world_size) if w is not None else (0, 1)
    ds = gf.Dataset.open(path)
    net = _model(ds, 3, 8)
    off = int(ds.hetero.node_offsets[ds.hetero.type_id("paper")])
    sets = {"a": np.arange(off, off + 50), "b": np.arange(off + 50, off + NUM["paper"])}
    ev = LayerwiseEvaluator(_placed(ds), ds.hetero, sets, 3, rank=rank, world_size=world,
                                 num_threads=1, max_batch=max_batch)
    try:
        return {k: (v.numpy(), y.numpy()) for k, (v, y) in ev.evaluate(net).items()}
    finally:
        ev.close()


@pytest.mark.dist
def test_two_ranks_compute_the_single_process_logits(typed_dataset):
    """Each rank computes a strided share of every type's table and outputs, the shares are
    gathered: every rank gets the single-process rows."""
    from graphfeed.distributed import launch

    path = str(typed_dataset.path)
    one = rank_logits(path, 7)
    two = launch(rank_logits, 2, path, 7, timeout_s=120)
    for got in two:
        for k in ("a", "b"):
            np.testing.assert_allclose(got[k][0], one[k][0], atol=1e-5, rtol=1e-5)
            np.testing.assert_array_equal(got[k][1], one[k][1])
