"""One copy per machine: shared segments are created once, attached by the other ranks, counted
once in the summed PSS, and removed from /dev/shm."""

import os

import numpy as np
import pytest

import _dist_ranks as ranks
from graphfeed.distributed import launch
from load_scale import scaled
from graphfeed.distributed.sharing import share_arrays, share_dataset
from graphfeed.distributed.world import World

pytestmark = [pytest.mark.dist, pytest.mark.timeout(180)]

MB = 1 << 20


def test_two_ranks_share_one_copy_and_a_private_copy_costs_double(no_leftover_segments):
    size = 48 * MB
    out = launch(ranks.share_then_private, 2, size, timeout_s=scaled(60))
    # launch: results in rank order, torchrun's variables, a working process group
    assert [r["world"].rank for r in out] == [0, 1]
    assert [r["world"].local_rank for r in out] == [0, 1]
    assert all(r["world"].world_size == 2 == r["world"].local_world_size for r in out)
    assert all(r["sum"] == 3 for r in out)
    assert out[0]["pid"] != out[1]["pid"] != os.getpid()
    shared = tuple(r["shared"] for r in out)
    private = tuple(r["private"] for r in out)
    n = size // 8
    for r in shared + private:
        assert r["first_last"] == (0, n - 1)
        assert r["checksum"] == int(np.arange(n, dtype=np.int64)[:: 4096 // 8].sum())
        assert r["writeable"] is False or r in private
    # the name is gone as soon as every rank has mapped it
    assert all(r["segments_during"] == [] for r in shared)
    # each rank's PSS counts half of the shared pages; a private copy counts whole
    assert all(r["pss_added"] < 0.75 * size for r in shared), [r["pss_added"] for r in shared]
    assert sum(r["pss_added"] for r in shared) < 1.3 * size
    assert all(r["pss_added"] > 0.9 * size for r in private), [r["pss_added"] for r in private]


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    from graphfeed.datasets.synthetic import builtin_path, load_builtin

    root = tmp_path_factory.mktemp("gfroot")
    load_builtin("tiny", root)
    return str(builtin_path("tiny", root))


def test_share_dataset_places_each_array_once_per_machine(tiny_path, no_leftover_segments):
    from graphfeed.datasets.format import Dataset

    ds = Dataset.open(tiny_path)
    want_feat = float(np.asarray(ds.features["feat"].data, dtype=np.float64).sum())
    want_label = int(np.asarray(ds.labels, dtype=np.int64).sum())
    want_graph = (int(ds.graph.indptr.sum()), int(ds.graph.indices.astype(np.int64).sum()))
    target = ds.target

    out = launch(ranks.share_dataset_everywhere, 2, tiny_path, timeout_s=scaled(60))
    for r in out:
        for label in ("mapped", "in_memory", "private", "disk"):
            rec = r[label]
            assert rec["feat_sum"] == pytest.approx(want_feat), label
            assert rec["label_sum"] == want_label, label
            assert tuple(rec["graph"]) == want_graph, label
            assert rec["segments"] == [], label  # names unlinked once attached
        # memory-mapped dataset: graph stays a file mapping, features go to one shm segment
        m = r["mapped"]
        assert m["placement"] == {"graph": "mmap", "feat": "shm", target: "shm"}
        assert any(p.endswith("indices.npy") for p in m["graph_maps"])
        assert any("graphfeed-" in p and "(deleted)" in p for p in m["feat_maps"]), m["feat_maps"]
        # graph loaded into private memory: shared through shm too
        im = r["in_memory"]
        assert im["placement"]["graph"] == "shm"
        assert any("graphfeed-" in p for p in im["graph_maps"])
        # private copies: nothing shared, the data is in anonymous memory
        pv = r["private"]
        assert set(pv["placement"].values()) == {"private"}
        assert not any("graphfeed-" in p or p.endswith(".npy") for p in pv["feat_maps"])
        # disk features: each rank opens the store; labels stay shared in RAM
        assert r["disk"]["placement"]["feat"] == "disk" and r["disk"]["placement"][target] == "shm"


def test_one_process_uses_the_arrays_as_opened(tiny_path):
    from graphfeed.datasets.format import Dataset

    ds = Dataset.open(tiny_path)
    s = share_dataset(ds, World())
    assert s.graph is ds.graph
    assert s.placement["graph"] == "mmap" and s.placement["feat"] == "mmap"
    got = share_arrays("k", lambda: {"a": np.arange(5)}, World())
    assert got["a"].tolist() == [0, 1, 2, 3, 4]


def test_unknown_backend_is_rejected(tiny_path):
    from graphfeed.datasets.format import Dataset
    from graphfeed.errors import GraphfeedError

    with pytest.raises(GraphfeedError, match="unknown feature backend"):
        share_dataset(Dataset.open(tiny_path), World(), features="nvme")


def test_ranks_agree_on_rank_0s_automatic_mode():
    """Ranks with different free GPU memory would pick different modes on their own numbers;
    the plan makes rank 0's choice everyone's, checked against each rank's hardware."""
    out = launch(ranks.decide_with_rank_hardware, 2, [40 * 10**9, 12 * 10**9], timeout_s=scaled(60))
    (own0, mode0, _), (own1, mode1, reason1) = out
    assert (own0, own1) == ("cuda-cuda", "pinned-cuda")  # what each would choose alone
    assert mode0 == mode1 == "cuda-cuda"
    assert "rank 0 chose cuda-cuda" in reason1


@pytest.fixture(scope="module")
def typed_path(tmp_path_factory):
    """A typed dataset whose per-type features (12 MB) dwarf its graph."""
    from graphfeed.datasets import write_dataset
    from graphfeed.datasets.hetero import HeteroParts
    from graphfeed.graph.hetero import HeteroGraph

    rng = np.random.default_rng(0)
    num = {"paper": 20_000, "author": 15_000, "venue": 50}
    et = {("author", "writes", "paper"): (rng.integers(0, 15_000, 40_000),
                                          rng.integers(0, 20_000, 40_000)),
          ("paper", "cites", "paper"): (rng.integers(0, 20_000, 40_000),
                                        rng.integers(0, 20_000, 40_000)),
          ("venue", "hosts", "paper"): (rng.integers(0, 50, 20_000), np.arange(20_000))}
    g = HeteroGraph.from_edges(num, et, drop_duplicates=True)
    labels = np.full(g.num_nodes, -1, dtype=np.int64)
    off = int(g.node_offsets[g.type_id("paper")])
    labels[off:off + num["paper"]] = rng.integers(0, 4, num["paper"])
    ids = rng.permutation(num["paper"]) + off
    feats = {"paper": rng.normal(size=(20_000, 96)).astype(np.float32),
             "author": rng.normal(size=(15_000, 72)).astype(np.float32)}
    path = tmp_path_factory.mktemp("typed-share") / "typed"
    write_dataset(path, graph=g.csc, node_features={"label": labels},
                  splits={"train": np.sort(ids[:10_000]), "valid": np.sort(ids[10_000:15_000]),
                          "test": np.sort(ids[15_000:])},
                  num_classes=4, target="label", name="typed-share",
                  hetero=HeteroParts(g, {t: {"feat": a} for t, a in feats.items()},
                                     target_type="paper"))
    return str(path)


def test_typed_data_takes_rank_0s_mode_and_one_copy_per_machine(typed_path,
                                                                no_leftover_segments):
    """A typed dataset placed by the one data plan: ranks whose own numbers would choose
    different modes take rank 0's, and the per-type features are one shared segment per
    machine, counted once in the ranks' summed shared-memory PSS."""
    out = launch(ranks.place_typed_everywhere, 2, typed_path, [40 * 10**9, 10**9],
                 timeout_s=120)
    (r0, r1) = out
    assert (r0["own"], r1["own"]) == ("cuda-cuda", "pinned-cuda")  # what each would choose
    assert r0["mode"] == r1["mode"] == "cuda-cuda"
    assert "rank 0 chose cuda-cuda" in r1["reason"]
    assert r0["sums"] == r1["sums"] and set(r0["sums"]) == {"paper", "author"}
    for r in out:
        for t, maps in r["maps"].items():
            assert any("graphfeed-" in m and "(deleted)" in m for m in maps), (t, maps)
    size = r0["bytes"]
    assert size >= 12 * 10**6
    assert all(r["shmem_added"] < 0.75 * size for r in out), [r["shmem_added"] for r in out]
    assert 0.8 * size < sum(r["shmem_added"] for r in out) < 1.3 * size
