"""Layer-wise inference (trainer/layerwise.py): equal to evaluating with every neighbour sampled,
whatever the batches, the widths (projected first or not), the path (direct or through blocks)
or the feature backend; --eval / --eval-every in a run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

N, IN_DIM, CLASSES = 157, 12, 4


@pytest.fixture(scope="module")
def varied_dataset(tmp_path_factory):
    """157 nodes: nodes 0-9 have no in-edge, node 20 has 80, the rest 1-6 (random sources)."""
    from graphfeed.datasets import write_dataset
    from graphfeed.graph.csc import CSCGraph

    rng = np.random.default_rng(3)
    deg = rng.integers(1, 7, size=N)
    deg[:10] = 0
    deg[20] = 80
    dst = np.repeat(np.arange(N), deg)
    src = rng.integers(0, N, size=dst.shape[0])
    g = CSCGraph.from_edges(src, dst, N, drop_self_loops=True, drop_duplicates=True)
    assert (g.in_degrees[:10] == 0).all() and g.in_degrees[20] > 50
    feat = rng.normal(size=(N, IN_DIM)).astype(np.float32)
    labels = rng.integers(0, CLASSES, size=N)
    perm = rng.permutation(N)
    path = tmp_path_factory.mktemp("varied") / "varied"
    write_dataset(path, graph=g, node_features={"feat": feat, "label": labels},
                  splits={"train": perm[:60], "valid": perm[60:100], "test": perm[100:]},
                  num_classes=CLASSES)
    import graphfeed as gf

    return gf.Dataset.open(path)


def _placed(ds, backend="ram"):
    import graphfeed as gf

    return gf.place(ds.graph, {"feat": ds.node_feature("feat", backend=backend),
                               "label": ds.node_feature("label")}, fanouts=[5, 5], mode="cpu-cpu",
                    device="cpu")


def _model(name, ds, layers=2, hidden=16):
    from graphfeed.models import build_model

    torch.manual_seed(0)
    return build_model(name, IN_DIM, hidden, CLASSES, layers, heads=4,
                       in_degrees=ds.graph.in_degrees if name == "gcn" else None)


def _sampled(placed, ids, model, layers, batch_size=7):
    """Reference: the model's forward on blocks with every neighbour (fanouts -1)."""
    from graphfeed.trainer.evaluate import EvalPlan, Evaluator

    ev = Evaluator(placed, {"s": ids}, EvalPlan((-1,) * layers, batch_size), seed=0)
    try:
        return ev.logits(model, "s")
    finally:
        ev.close()


def _layerwise(placed, ds, sets, model, layers, **kw):
    from graphfeed.trainer.layerwise import LayerwiseEvaluator

    ev = LayerwiseEvaluator(placed, ds.graph, sets, layers, **kw)
    try:
        return ev.evaluate(model)
    finally:
        ev.close()


@pytest.mark.parametrize("name, layers, hidden", [
    ("sage", 2, 16), ("gcn", 2, 16), ("gat", 2, 16), ("sage", 3, 16), ("gcn", 3, 16),
    # hidden 8 < IN_DIM 12: layer 0 projects its inputs first (SAGE's lin_l, GCN's lin)
    ("sage", 2, 8), ("gcn", 2, 8), ("gat", 2, 8), ("sage", 3, 8),
])
@pytest.mark.parametrize("max_batch, max_edges", [(7, 1 << 22), (1 << 16, 23)])
def test_layerwise_equals_full_neighbour_sampled_evaluation(varied_dataset, name, layers, hidden,
                                                            max_batch, max_edges):
    """Every node, and a small set whose receptive field is not the whole graph: batches (and
    source-table chunks) of 7 nodes (157 = 22 x 7 + 3), or batches cut by in-edges (the hub
    alone)."""
    from graphfeed.models.layerwise import direct_layer

    ds = varied_dataset
    placed = _placed(ds)
    model = _model(name, ds, layers, hidden)
    widths = [IN_DIM] + [hidden] * (layers - 1)
    assert all(direct_layer(model, i, widths[i]) is not None for i in range(layers))
    if name != "gat":  # a layer projects first exactly when its output is narrower
        assert [direct_layer(model, i, widths[i]).project for i in range(layers)] == \
            [hidden < IN_DIM] + [False] * (layers - 2) + [True]
    everyone = np.arange(N)
    few = np.array([20, 3, 150, 0, 77])  # the hub, nodes without in-edges, unsorted
    got = _layerwise(placed, ds, {"all": everyone, "few": few}, model, layers,
                     max_batch=max_batch, max_batch_edges=max_edges)
    only_few = _layerwise(placed, ds, {"few": few}, model, layers, max_batch=max_batch,
                          max_batch_edges=max_edges)
    ref_all, y_all = _sampled(placed, everyone, model, layers)
    ref_few, y_few = _sampled(placed, few, model, layers, batch_size=2)
    assert got["all"][0].shape == (N, CLASSES)
    torch.testing.assert_close(got["all"][0], ref_all, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got["few"][0], ref_few, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(only_few["few"][0], ref_few, atol=1e-4, rtol=1e-4)
    assert torch.equal(got["all"][1], y_all) and torch.equal(got["few"][1], y_few)
    # the model is left in the mode it was in, and its output is not trivially constant
    assert model.training
    assert float(ref_all.std(0).min()) > 1e-3


def test_disk_features_give_the_same_logits(varied_dataset):
    ds = varied_dataset
    model = _model("sage", ds)
    ram = _layerwise(_placed(ds, "ram"), ds, {"all": np.arange(N)}, model, 2, max_batch=11)
    disk = _layerwise(_placed(ds, "disk"), ds, {"all": np.arange(N)}, model, 2, max_batch=11)
    torch.testing.assert_close(disk["all"][0], ram["all"][0], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name", ["sage", "gcn", "gat"])
def test_residual_and_batch_norm_models(varied_dataset, name):
    """--residual adds each layer's input (Identity or a Linear) to its convolution and --norm
    batch normalises with running statistics: both per node, so the direct layers (which add
    the skip on the destinations' input rows) stay exact. Runs where build_model has them."""
    import inspect

    from graphfeed.models import build_model

    if "residual" not in inspect.signature(build_model).parameters:
        pytest.skip("this build_model has no residual / norm options")
    ds = varied_dataset
    placed = _placed(ds)
    for hidden in (16, 12, 8):  # skips: Linear, Identity (layer 0 with hidden == IN_DIM), Linear
        torch.manual_seed(0)
        model = build_model(name, IN_DIM, hidden, CLASSES, 3, heads=4, norm="batch",
                            residual=True,
                            in_degrees=ds.graph.in_degrees if name == "gcn" else None)
        for bn in model.norms:  # running statistics other than the initial 0 / 1
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
        got = _layerwise(placed, ds, {"all": np.arange(N), "few": [20, 3]}, model, 3,
                         max_batch=11)
        ref, _ = _sampled(placed, np.arange(N), model, 3)
        torch.testing.assert_close(got["all"][0], ref, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(got["few"][0], ref[[20, 3]], atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def multigraph_dataset(tmp_path_factory):
    """60 nodes with self-loops and repeated edges kept (GATConv drops a graph's self-loops and
    adds its own; SAGE and GCN count every edge); node 5 has no in-edge."""
    from graphfeed.datasets import write_dataset
    from graphfeed.graph.csc import CSCGraph

    n = 60
    rng = np.random.default_rng(7)
    dst = rng.integers(0, n, size=400)
    src = rng.integers(0, n, size=400)
    dst = np.concatenate([dst, np.arange(0, n, 3), [7, 7, 7]])
    src = np.concatenate([src, np.arange(0, n, 3), [9, 9, 9]])  # self-loops, a repeated edge
    keep = dst != 5
    g = CSCGraph.from_edges(src[keep], dst[keep], n)
    assert g.in_degrees[5] == 0
    assert any(v in g.indices[g.indptr[v]:g.indptr[v + 1]] for v in range(n))
    feat = rng.normal(size=(n, IN_DIM)).astype(np.float32)
    path = tmp_path_factory.mktemp("multi") / "multi"
    write_dataset(path, graph=g, node_features={"feat": feat,
                                                "label": rng.integers(0, CLASSES, size=n)},
                  splits={"train": np.arange(20), "valid": np.arange(20, 40),
                          "test": np.arange(40, 60)}, num_classes=CLASSES)
    import graphfeed as gf

    return gf.Dataset.open(path)


@pytest.mark.parametrize("name", ["sage", "gcn", "gat"])
@pytest.mark.parametrize("hidden", [16, 8])
def test_direct_and_block_paths_agree_on_a_multigraph(multigraph_dataset, name, hidden):
    """The direct layers and the model's own code on sampled blocks (forced by a forward hook,
    which a direct layer would skip) give the full-neighbour logits, self-loops and repeated
    edges included; the block path's loaders are reused by a second evaluation."""
    from graphfeed.models.layerwise import direct_layer

    ds = multigraph_dataset
    n = ds.graph.num_nodes
    placed = _placed(ds)
    model = _model(name, ds, 2, hidden)
    ref, _ = _sampled(placed, np.arange(n), model, 2, batch_size=9)
    direct = _layerwise(placed, ds, {"all": np.arange(n)}, model, 2, max_batch=5,
                        max_batch_edges=30)
    torch.testing.assert_close(direct["all"][0], ref, atol=1e-4, rtol=1e-4)
    handles = [c.register_forward_hook(lambda *a: None) for c in model.convs]
    try:
        assert all(direct_layer(model, i, 16) is None for i in range(2))
        from graphfeed.trainer.layerwise import LayerwiseEvaluator

        ev = LayerwiseEvaluator(placed, ds.graph, {"all": np.arange(n), "few": [5, 7]}, 2,
                                max_batch=5, max_batch_edges=30)
        try:
            first = ev.evaluate(model)
            again = ev.evaluate(model)
        finally:
            ev.close()
    finally:
        for hd in handles:
            hd.remove()
    torch.testing.assert_close(first["all"][0], ref, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(first["few"][0], ref[[5, 7]], atol=1e-4, rtol=1e-4)
    assert torch.equal(again["all"][0], first["all"][0])


def test_only_the_reference_layers_run_directly(varied_dataset):
    """A subclass, or an option the direct layers do not reproduce, keeps the model's code."""
    from torch_geometric.nn import SAGEConv

    from graphfeed.models import BlockGNN
    from graphfeed.models.layerwise import direct_layer

    class Custom(BlockGNN):
        pass

    torch.manual_seed(0)
    assert direct_layer(BlockGNN([SAGEConv(IN_DIM, 4)]), 0, IN_DIM) is not None
    assert direct_layer(Custom([SAGEConv(IN_DIM, 4)]), 0, IN_DIM) is None
    assert direct_layer(BlockGNN([SAGEConv(IN_DIM, 4, aggr="max")]), 0, IN_DIM) is None
    assert direct_layer(BlockGNN([SAGEConv(IN_DIM, 4, project=True)]), 0, IN_DIM) is None
    # such models still evaluate exactly: through blocks, or one layer each way
    ds = varied_dataset
    placed = _placed(ds)
    for net in (Custom([SAGEConv(IN_DIM, 16), SAGEConv(16, CLASSES)], [torch.nn.LayerNorm(16)]),
                BlockGNN([SAGEConv(IN_DIM, 16, aggr="max"), SAGEConv(16, CLASSES)],
                         [torch.nn.LayerNorm(16)]),
                BlockGNN([SAGEConv(IN_DIM, 16), SAGEConv(16, CLASSES, aggr="max")],
                         [torch.nn.LayerNorm(16)])):
        got = _layerwise(placed, ds, {"all": np.arange(N), "few": [20, 3]}, net, 2, max_batch=11)
        ref, _ = _sampled(placed, np.arange(N), net, 2)
        torch.testing.assert_close(got["all"][0], ref, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(got["few"][0], ref[[20, 3]], atol=1e-4, rtol=1e-4)


def test_csr_sum_rows_weights_per_edge_and_per_head():
    from graphfeed.models._kernels import csr_sum_rows

    rng = np.random.default_rng(0)
    crow = np.array([0, 3, 3, 7], dtype=np.int64)  # the middle row has no edge
    col = rng.integers(0, 10, size=7).astype(np.int32)
    table = rng.normal(size=(10, 6)).astype(np.float32)
    want_plain = np.stack([table[col[crow[v]:crow[v + 1]]].sum(0) for v in range(3)])
    out = np.zeros((3, 6), np.float32)
    csr_sum_rows(crow, col, np.zeros((0, 0), np.float32), table, out, 0, 3)
    np.testing.assert_allclose(out, want_plain, rtol=1e-6, atol=1e-6)
    heads = rng.normal(size=(7, 2)).astype(np.float32)  # two blocks of 2 columns, of 4
    want = np.zeros((3, 4), np.float32)
    for v in range(3):
        for e in range(crow[v], crow[v + 1]):
            want[v, :2] += heads[e, 0] * table[col[e], :2]
            want[v, 2:] += heads[e, 1] * table[col[e], 2:4]
    out = np.zeros((3, 4), np.float32)
    csr_sum_rows(crow, col, heads, table, out, 0, 3)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("heads", [None, 1, 3])
def test_host_and_sparse_aggregations_agree(heads):
    """The host kernel (split over threads or not) and the CSR x dense products that run on a
    GPU (here on the CPU) sum the same rows: a slice of int32 sources, a gathered batch of
    int64 rows, rows without edges."""
    from concurrent.futures import ThreadPoolExecutor

    from graphfeed.models import layerwise as lw

    rng = np.random.default_rng(1)
    deg = rng.integers(0, 5, size=40)
    deg[[0, 17, 39]] = 0
    crow = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    table = torch.from_numpy(rng.normal(size=(30, 6)).astype(np.float32))
    values = None if heads is None else torch.from_numpy(
        rng.normal(size=(int(crow[-1]), heads)).astype(np.float32))
    dst = np.arange(40, dtype=np.int64)
    for col in (rng.integers(0, 30, size=int(crow[-1])).astype(np.int32),
                rng.integers(0, 30, size=int(crow[-1])).astype(np.int64)):
        edges = lw.Edges(dst, dst, crow, col, col)
        want = lw.aggregate(edges, table, values)
        with ThreadPoolExecutor(2) as pool:
            split = lw.aggregate(edges, table, values, threads=lw.Threads(pool, 3))
        sparse = lw._sparse_sum_rows(edges, table, values, 6)
        torch.testing.assert_close(split, want, rtol=0, atol=0)
        torch.testing.assert_close(sparse, want, rtol=1e-5, atol=1e-5)
        assert float(want[17].abs().sum()) == 0.0


def test_edge_batches_bound_every_batch(varied_dataset):
    from graphfeed.graph.neighbourhood import edge_batches

    deg = np.asarray(varied_dataset.graph.in_degrees, dtype=np.int64)
    runs = edge_batches(deg, max_edges=23, max_rows=9)
    assert runs[0][0] == 0 and runs[-1][1] == N
    assert all(a[1] == b[0] for a, b in zip(runs, runs[1:]))
    for a, b in runs:
        assert 1 <= b - a <= 9
        assert b - a == 1 or deg[a:b].sum() <= 23
    assert (20, 21) in runs  # the hub (80 in-edges) comes alone
    assert edge_batches(np.zeros(0, np.int64), 5, 5) == []


def test_needed_nodes_is_the_in_neighbourhood(varied_dataset):
    from graphfeed.graph.neighbourhood import needed_nodes

    g = varied_dataset.graph
    targets = np.array([20, 5, 33])
    sets = needed_nodes(g, targets, 3)
    assert sets[-1].tolist() == [5, 20, 33]

    def expand(nodes):
        out = set(nodes)
        for v in nodes:
            out.update(int(u) for u in g.indices[g.indptr[v]:g.indptr[v + 1]])
        return out

    hop1 = expand(set(targets.tolist()))
    assert sets[1].tolist() == sorted(hop1)
    assert sets[0].tolist() == sorted(expand(hop1))
    assert len(sets[0]) < N  # a small set does not need every node
    # the in-neighbours are gathered in chunks when there are many edges
    from graphfeed.graph import neighbourhood

    mask = np.zeros(N, dtype=bool)
    neighbourhood._in_neighbours(g.indptr, g.indices, np.arange(N), mask, chunk_edges=5)
    assert np.flatnonzero(mask).tolist() == sorted(set(g.indices.tolist()))


def test_degree_groups_bound_every_batch(varied_dataset):
    from graphfeed.graph.neighbourhood import degree_groups

    deg = varied_dataset.graph.in_degrees
    groups = degree_groups(np.arange(N), deg, max_batch_edges=40, max_batch=9)
    assert sorted(np.concatenate([ids for ids, _ in groups]).tolist()) == list(range(N))
    for ids, bs in groups:
        assert 1 <= bs <= 9
        assert bs == 1 or bs * int(deg[ids].max()) <= 40


def test_stock_gcn_is_not_exact_layer_by_layer(varied_dataset):
    """Stock GCNConv on a block's union node set normalises with in-block degrees: a node's
    output depends on which other nodes share its batch, so layer-wise is not offered."""
    from graphfeed.errors import GraphfeedError
    from graphfeed.trainer.config import TrainConfig
    from graphfeed.trainer.evaluate import resolve_eval_method
    from graphfeed.models.layerwise import supports_layerwise

    from graphfeed.models import BlockGNN, build_model

    ds = varied_dataset
    torch.manual_seed(0)
    plain = build_model("gcn", IN_DIM, 16, CLASSES, 2)  # no in_degrees: stock GCNConv
    assert isinstance(plain, BlockGNN) and not supports_layerwise(plain)
    assert all(supports_layerwise(_model(m, ds)) for m in ("sage", "gcn", "gat"))
    placed = _placed(ds)
    one, _ = _sampled(placed, np.arange(N), plain, 2, batch_size=1)
    many, _ = _sampled(placed, np.arange(N), plain, 2, batch_size=N)
    assert not torch.allclose(one, many, atol=1e-4)
    cfg = TrainConfig(eval_method="layerwise").validate()
    with pytest.raises(GraphfeedError, match="eval_method layerwise: custom"):
        resolve_eval_method(cfg, supported=False, why_not="custom")
    assert resolve_eval_method(TrainConfig().validate(), supported=False) == "sampled"


@pytest.mark.parametrize("kw, fragment", [
    (dict(eval_method="layerwise", eval_fanouts=(5, 5)), "drop --eval-fanouts"),
    (dict(eval_method="layerwise", sampler="temporal"), "sampler temporal"),
    (dict(eval_method="layerwise", partitions="parts"), "partitions evaluate with sampled"),
    (dict(eval_method="sideways"), "eval_method must be one of"),
    (dict(eval_every=0), "eval_every"),
])
def test_contradictory_evaluation_settings_are_refused(kw, fragment):
    from graphfeed.errors import GraphfeedError
    from graphfeed.trainer.config import TrainConfig

    with pytest.raises(GraphfeedError, match=fragment):
        TrainConfig(**kw).validate()


def test_resolution_of_auto():
    from graphfeed.trainer.config import TrainConfig
    from graphfeed.trainer.evaluate import resolve_eval_method

    assert resolve_eval_method(TrainConfig().validate()) == "layerwise"
    assert resolve_eval_method(TrainConfig(eval_fanouts=(4, 4)).validate()) == "sampled"
    assert resolve_eval_method(TrainConfig(eval_method="sampled").validate()) == "sampled"
    assert resolve_eval_method(TrainConfig(sampler="temporal").validate()) == "sampled"


def test_patience_counts_evaluations_only():
    from types import SimpleNamespace

    from graphfeed.trainer.checkpoint import RunState
    from graphfeed.trainer.config import TrainConfig
    from graphfeed.trainer.result import EpochStats, TrainResult

    cfg = TrainConfig(epochs=9, eval_every=3, patience=2).validate()
    net = torch.nn.Linear(1, 1)
    state = RunState(cfg, net, SimpleNamespace(), TrainResult(), trainer="node",
                     keys=TrainConfig.RESUME_KEYS, say=lambda m: None)
    assert [e for e in range(9) if state.evaluates(e)] == [2, 5, 8]
    values = [0.5, 0.1, 0.4]  # of the evaluated epochs 2, 5, 8
    for e in range(9):
        es = EpochStats(epoch=e, loss=1.0, train_acc=0.0, valid_acc=0.0, test_acc=0.0,
                        seeds_per_s=0, batches_per_s=0, seconds=0, peak_rss_bytes=0,
                        valid={"accuracy": 0.0}, test={"accuracy": 0.0})
        if state.evaluates(e):
            v = values[[2, 5, 8].index(e)]
            es.valid = {"accuracy": v}
            state.end_epoch(es, v)
        else:
            state.end_epoch(es.skip_evaluation(), float("nan"))
        if e < 8:
            assert not state.patience_spent(), e
    assert state.result.best_epoch == 2 and state.bad_epochs == 2 and state.patience_spent()
    assert len(state.result.epochs) == 9


def test_eval_every_logs_null_metrics_between_evaluations(tiny_dataset, tmp_path, capsys):
    """--eval-every 2 over 5 epochs evaluates the 2nd, 4th and 5th (epochs 1, 3, 4 counted from
    0); the other log lines hold null metrics, and the best epoch is an evaluated one."""
    from graphfeed.cli.main import main

    log = tmp_path / "log.jsonl"
    rc = main(["train", "--dataset", "tiny", "--epochs", "5", "--eval-every", "2", "--no-mlp",
               "--no-progress", "--fanouts", "5,5", "--log", str(log), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    lines = [json.loads(s) for s in log.read_text().splitlines()]
    assert [e["epoch"] for e in lines] == [0, 1, 2, 3, 4]
    assert [e["epoch"] for e in lines if e["valid"] is not None] == [1, 3, 4]
    for e in lines:
        if e["valid"] is None:
            assert e["test"] is None and e["valid_acc"] is None and e["test_acc"] is None
            assert e["eval_seconds"] == 0
        else:
            assert set(e["valid"]) == {"accuracy", "macro_f1"} and e["valid_acc"] is not None
    assert out["best_epoch"] in (1, 3, 4)
    assert out["eval_method"] == "layerwise" and out["eval_fanouts"] == [-1, -1]
    assert out["test_acc"] == lines[out["best_epoch"]]["test_acc"]


def test_layerwise_and_full_sampled_runs_score_alike(tiny_dataset):
    """The same training run (same seed) evaluated both ways: the metrics agree, and
    --eval sampled still reports its fanouts."""
    from graphfeed.training import TrainConfig, train

    kw = dict(dataset="tiny", epochs=1, fanouts=(5, 5), batch_size=256, progress=False,
              mlp_baseline=False)
    lw = train(TrainConfig(**kw), dataset=tiny_dataset)
    full = train(TrainConfig(eval_fanouts=(-1, -1), **kw), dataset=tiny_dataset)
    capped = train(TrainConfig(eval_method="sampled", **kw), dataset=tiny_dataset)
    assert lw.eval_method == "layerwise" and full.eval_method == "sampled"
    assert capped.eval_method == "sampled" and capped.eval_fanouts == [100, 100]
    assert lw.epochs[0].loss == pytest.approx(full.epochs[0].loss, rel=1e-6)
    assert lw.epochs[0].valid == pytest.approx(full.epochs[0].valid, abs=1e-9)
    assert lw.epochs[0].test == pytest.approx(full.epochs[0].test, abs=1e-9)


def test_cli_refuses_eval_fanouts_with_layerwise(capsys):
    from graphfeed.cli.main import main

    rc = main(["train", "--dataset", "tiny", "--eval", "layerwise", "--eval-fanouts", "5,5"])
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and "--eval-fanouts" in err
