"""Per-type features in ``--mode cuda-cuda``/``pinned-cuda`` (heterogeneous node classification
and typed link prediction): the homogeneous planner decides whether the graph and every type's
features fit, with its reasons and refusals; the homogeneous placing puts each array on the GPU
or in pinned memory behind a UVA view; the loader gathers at the sampled ids where they are.

Without a GPU the decision runs on a made-up :class:`Hardware`, and the placing and training run
with the device forced to the CPU (both GPU modes then keep the rows in memory on the CPU). The
tests marked ``cuda`` run the real thing on a GPU machine."""

from __future__ import annotations

import warnings

import pytest
import torch

from test_hetero_train import _cfg, data_root, run_on_cpu  # noqa: F401 (the module's fixture)

pytestmark = pytest.mark.timeout(600)

GiB = 1 << 30


def _hw(gpu_free=40 * GiB, host_free=100 * GiB, uva=True, ranks=1):
    from graphfeed.placement.hardware import Hardware

    return Hardware(host_total_bytes=128 * GiB, host_free_bytes=host_free, gpu_name="made-up",
                    gpu_total_bytes=80 * GiB, gpu_free_bytes=gpu_free, gpu_count=1,
                    ranks_per_machine=ranks, cuda_available=True, supports_uva=uva,
                    device="cuda:0")


@pytest.fixture(scope="module")
def hetero(data_root):  # noqa: F811
    from graphfeed.features.memory import InMemoryFeature
    from graphfeed.placement.typed import open_type_features
    from graphfeed.training import open_dataset

    ds = open_dataset("hetero", data_root, verbose=False)
    return ds, open_type_features(ds, "ram", 0, "sieve"), InMemoryFeature(ds.labels)


def test_the_cpu_sampling_modes_leave_the_features_alone(data_root, hetero):  # noqa: F811
    from graphfeed.placement.planner import plan_placement
    from graphfeed.placement.plan import typed_placement
    from graphfeed.placement.typed import place_type_features
    from graphfeed.sampling import TYPED

    ds, tfeats, labels = hetero
    for mode in ("cpu-cpu", "cpu-cuda"):
        p = typed_placement(mode, ds.hetero, tfeats, "cuda:0", labels=labels, hw=_hw())
        assert p.mode == mode and p.spec.features == "host" and TYPED[p.spec.sampler] == "hetero"
        placed = place_type_features(p, tfeats, "cuda:0", labels=labels)
        assert placed.labels is labels and placed.where == "read by the CPU"
        assert all(placed.type_features[t][n] is f for t, fs in tfeats.items() for n, f in fs.items())
    # auto decides as for a homogeneous graph of the same bytes
    need = sum(int(f.nbytes) for fs in tfeats.values() for f in fs.values()) + labels.nbytes
    p = typed_placement("auto", ds.hetero, tfeats, "cuda:0", labels=labels, hw=_hw())
    assert p.mode == plan_placement(ds.hetero.nbytes, need, _hw()).mode
    # on a CPU device, auto samples on the CPU
    assert typed_placement("auto", ds.hetero, tfeats, "cpu", labels=labels).mode == "cpu-cpu"


def test_the_decision_counts_the_graph_every_type_and_the_labels(data_root, hetero):  # noqa: F811
    from graphfeed.placement.plan import typed_placement

    ds, tfeats, labels = hetero
    feat_bytes = sum(int(f.nbytes) for fs in tfeats.values() for f in fs.values())
    assert feat_bytes > 0 and len(tfeats) == 3  # author, field, paper
    for mode, where in (("cuda-cuda", "device"), ("pinned-cuda", "pinned")):
        p = typed_placement(mode, ds.hetero, tfeats, "cuda:0",
                           labels=labels, hw=_hw())
        assert (p.mode, p.reason, p.device) == (mode, f"requested {mode}", "cuda:0")
        assert p.spec.features == where
        assert p.details["graph_bytes"] == ds.hetero.nbytes
        assert p.details["feature_bytes"] == feat_bytes + labels.nbytes
        assert p.details["requested"] == mode
    # without labels (typed link prediction): the features alone
    p = typed_placement("cuda-cuda", ds.hetero, tfeats, "cuda:0", hw=_hw())
    assert p.details["feature_bytes"] == feat_bytes


def test_refusals_name_the_numbers(data_root, hetero):  # noqa: F811
    from graphfeed.errors import GraphfeedError
    from graphfeed.placement.planner import PlacementWarning
    from graphfeed.placement.plan import typed_placement

    ds, tfeats, labels = hetero
    need = ds.hetero.nbytes + labels.nbytes + sum(int(f.nbytes) for fs in tfeats.values()
                                                  for f in fs.values())
    cuda, pinned = "cuda-cuda", "pinned-cuda"
    with pytest.raises(GraphfeedError, match=r"'cuda-cuda' cannot fit: graph .* \+ features .* > "
                                             r"free GPU memory .* on cuda:0; use 'pinned-cuda'"):
        typed_placement(cuda, ds.hetero, tfeats, "cuda:0", labels=labels,
                       hw=_hw(gpu_free=need - 1))
    with pytest.raises(GraphfeedError, match="2 ranks per GPU x"):  # each rank its own copy
        typed_placement(cuda, ds.hetero, tfeats, "cuda:0", labels=labels,
                       hw=_hw(gpu_free=2 * need - 1, ranks=2))
    with pytest.raises(GraphfeedError, match=r"'pinned-cuda' cannot fit: .* > free host memory"):
        typed_placement(pinned, ds.hetero, tfeats, "cuda:0", labels=labels,
                       hw=_hw(host_free=need - 1))
    with pytest.raises(GraphfeedError, match=r"pinned-cuda' needs a GPU that reads pinned host "
                                             r"memory \(UVA\)"):
        typed_placement(pinned, ds.hetero, tfeats, "cuda:0", labels=labels, hw=_hw(uva=False))
    # fits, but not beside the model within the planner's headroom: honoured, with a warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = typed_placement(cuda, ds.hetero, tfeats, "cuda:0", labels=labels,
                           hw=_hw(gpu_free=need + 1))
    assert p.mode == "cuda-cuda" and p.reason.startswith("requested cuda-cuda (")
    assert any(issubclass(w.category, PlacementWarning) for w in caught)


def test_the_cpu_device_keeps_the_rows_in_memory(data_root, hetero, builtin_root):  # noqa: F811
    """The GPU modes' logic with the device forced to the CPU: no memory check, and every
    array (a disk one too) an in-memory feature with the same rows."""
    from graphfeed.features.memory import InMemoryFeature
    from graphfeed.placement.plan import typed_placement
    from graphfeed.placement.typed import open_type_features, place_type_features

    ds, tfeats, labels = hetero
    disk = open_type_features(ds, "disk", 0, "sieve")
    for mode in ("cuda-cuda", "pinned-cuda"):
        p = typed_placement(mode, ds.hetero, disk, "cpu", labels=labels)
        assert p.mode == mode and p.device == "cpu" and "no GPU memory to check" in p.reason
        placed = place_type_features(p, disk, "cpu", labels=labels)
        assert placed.where == "in memory on the CPU (no GPU)" and placed.keep_alive == []
        assert set(placed.type_features) == set(disk)
        for t, fs in disk.items():
            for n, f in fs.items():
                g = placed.type_features[t][n]
                assert isinstance(g, InMemoryFeature) and g.device.type == "cpu"
                ids = torch.arange(f.num_rows)
                assert torch.equal(g.read(ids), f.read(ids)), (t, n)
        assert torch.equal(placed.labels.read(torch.arange(labels.num_rows)),
                           labels.read(torch.arange(labels.num_rows)))


def test_node_classification_reports_where_the_features_are(data_root):  # noqa: F811
    from graphfeed.training import open_dataset

    ds = open_dataset("hetero", data_root, verbose=False)
    for mode in ("cuda-cuda", "pinned-cuda"):
        cfg = _cfg(data_root, mode=mode, epochs=1, mlp_baseline=False)
        lines = []
        r = run_on_cpu(cfg, ds, lines.append)
        assert r.mode == mode
        assert r.placement_reason == (
            f"{mode}: the torch typed sampler on cpu, per-type features in memory on the CPU "
            f"(no GPU) (--mode {mode} on the CPU device: its sampler and features on the CPU "
            f"(no GPU memory to check))")
        assert f"graphfeed: placement {r.placement_reason}" in lines


def test_typed_link_trains_with_placed_features(builtin_root):
    """Typed link prediction in ``--mode cuda-cuda`` with the device forced to the CPU: the
    torch sampler, the placed features, and the same task learnt."""
    from graphfeed.training import TrainConfig, open_dataset

    root = builtin_root("hetero-link")
    cfg = TrainConfig(dataset="hetero-link", task="link", epochs=1, batch_size=4096, hidden=16,
                      fanouts=(5, 5), eval_fanouts=(5, 5), eval_negatives=20, device="cpu",
                      seed=0, num_threads=1, progress=False, data_root=root, mode="cuda-cuda")
    lines = []
    r = run_on_cpu(cfg, open_dataset("hetero-link", root, verbose=False), lines.append)
    assert r.mode == "cuda-cuda"  # the mode's logic, on the CPU device
    assert "per-type features in memory on the CPU (no GPU)" in r.placement_reason
    assert r.test["mrr"] > r.baselines["degree"]["test"]["mrr"], (r.test, r.baselines)


# ------------------------------------------------------------------------- on a GPU
@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["cuda-cuda", "pinned-cuda"])
def test_gpu_features_gather_on_the_device_without_a_host_sync(data_root, hetero, mode):  # noqa: F811
    from graphfeed.features.memory import InMemoryFeature
    from graphfeed.loader.fetch import FetchFeatures
    from graphfeed.placement.plan import typed_placement
    from graphfeed.placement.apply import mode_sampler
    from graphfeed.placement.typed import place_type_features

    ds, tfeats, labels = hetero
    p = typed_placement(mode, ds.hetero, tfeats, "cuda:0")
    placed = place_type_features(p, tfeats, "cuda:0")
    for fs in placed.type_features.values():
        for f in fs.values():
            assert isinstance(f, InMemoryFeature) and f.device.type == "cuda"
    if mode == "pinned-cuda":  # UVA views of page-locked host rows, kept alive
        assert placed.keep_alive and all(t.is_pinned() for t in placed.keep_alive)
    s = mode_sampler(p.spec, ds.hetero, (10, 5), "cuda:0")
    off = int(ds.hetero.node_offsets[ds.hetero.type_id("paper")])
    mb = s.sample(torch.arange(off, off + 256, device="cuda:0"), epoch=0, batch_index=0)
    fetch = FetchFeatures({}, None, type_features=placed.type_features)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # a .cpu() of the ids would sync
    try:
        mb = fetch(mb)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for t, fs in tfeats.items():
        ids = mb.input_nodes_dict[t]
        got = mb.type_features[t]["feat"]
        assert got.device.type == "cuda"
        assert torch.equal(got.cpu(), fs["feat"].read(ids.cpu())), t


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["cuda-cuda", "pinned-cuda"])
def test_gpu_modes_train_with_features_on_the_device(data_root, builtin_root, mode):  # noqa: F811
    from graphfeed.training import TrainConfig, train

    r = train(_cfg(data_root, mode=mode, device="cuda", epochs=3, mlp_baseline=False))
    assert r.mode == mode and "per-type features " in r.placement_reason
    assert ("copied to cuda" if mode == "cuda-cuda" else "through UVA") in r.placement_reason
    assert r.test_acc >= 0.7, r.test_acc
    root = builtin_root("hetero-link")
    t = train(TrainConfig(dataset="hetero-link", task="link", epochs=2, batch_size=1024,
                          hidden=64, fanouts=(10, 5), eval_negatives=100, device="cuda",
                          mode=mode, seed=0, num_threads=1, progress=False, data_root=root))
    assert t.mode == mode and "per-type features " in t.placement_reason
    assert t.test["mrr"] > 3 * t.baselines["degree"]["test"]["mrr"], (t.test, t.baselines)
