"""One copy per machine of the sampling methods' tables (graphfeed.distributed.share_prepared):
two gloo ranks sample exactly what one process samples, from one shared segment, and a failure
on one rank makes every rank raise."""

import numpy as np
import pytest

import _table_ranks as ranks
from graphfeed.distributed import launch
from graphfeed.distributed.tables import share_prepared
from graphfeed.distributed.world import World

pytestmark = [pytest.mark.dist, pytest.mark.timeout(300)]

N, E = 100_000, 1_500_000


@pytest.fixture(scope="module")
def reference():
    """Each method's batches in one process (lazy, private tables), and the tables' bytes."""
    graph = ranks.make_graph(N, E)
    out = {}
    for kind in ranks.METHODS:
        s = ranks.make_sampler(kind, graph)
        out[kind] = (ranks.digest(s), ranks.digest(s.with_fanouts([4, 4])))
    return out


def test_two_ranks_sample_as_one_process_from_one_copy(reference, no_leftover_segments):
    out = launch(ranks.shared_tables, 2, N, E, timeout_s=120)
    for kind in ranks.METHODS:
        r0, r1 = out[0][kind], out[1][kind]
        for r in (r0, r1):
            assert r["how"] == "shm"
            # identical batches to one process with the same seed, and for with_fanouts copies
            assert (r["digest"], r["copy_digest"]) == reference[kind], kind
            assert r["copy_same_tables"], kind
            # the segment's name is gone once every rank mapped it
            assert r["segments_during"] == [], kind
        # both ranks read the same shared segment (same file, same inode), not a copy each
        path0, inode0 = r0["segment"]
        assert "graphfeed-" in path0 and "tables" in path0 and "(deleted)" in path0, path0
        assert r1["segment"] == (path0, inode0) and inode0 != 0
        # each rank's PSS counts half of the tables; together they count them once
        size = r0["table_bytes"]
        assert size > 10 << 20, size
        added = [r0["pss_added"], r1["pss_added"]]
        assert all(a < 0.75 * size for a in added), (kind, added, size)
        assert sum(added) < 1.3 * size, (kind, added, size)


def test_private_copy_costs_a_copy_per_rank(reference, no_leftover_segments):
    """The comparison point: with private_copy each rank builds and holds its own tables."""
    out = launch(ranks.shared_tables, 2, N, E, ("labor",), True, timeout_s=120)
    for r in out:
        rec = r["labor"]
        assert rec["how"] == "private"
        assert rec["digest"] == reference["labor"][0]
        assert "graphfeed-" not in rec["segment"][0]
        assert rec["pss_added"] > 0.9 * rec["table_bytes"], rec


@pytest.mark.parametrize("mode", ["build", "mismatch"])
def test_a_failing_rank_makes_every_rank_raise(mode, no_leftover_segments):
    out = launch(ranks.failing_build, 2, mode, timeout_s=60)
    assert [r["rank"] for r in out] == [0, 1]
    for r in out:
        assert r["error"] is not None, r  # no rank went on as if it had shared tables
        assert r["sum"] == 2.0  # and the group still works: nobody was left in a collective
    if mode == "build":
        assert "table build failed on purpose" in out[0]["error"]
        assert "first rank of machine 0 failed" in out[1]["error"]
    else:
        assert "another sampler" in out[1]["error"] and "seed: 7 != 8" in out[1]["error"]
        assert "another rank could not use" in out[0]["error"]
    # the sampler falls back to its own lazy tables: rank 0 samples as a fresh sampler would
    graph = ranks.make_graph(2000, 20000)
    assert out[0]["digest"] == ranks.digest(ranks.make_sampler("labor", graph, seed=7))


def test_one_process_builds_private_tables_and_uniform_has_none():
    graph = ranks.make_graph(2000, 20000)
    s = ranks.make_sampler("labor", graph)
    assert share_prepared(s, World()) == "private"
    tables = s.prepare()
    assert tables["lsrc"].shape == (graph.num_edges,) and not tables["lsrc"].flags.writeable
    assert s.prepare()["lsrc"] is tables["lsrc"]  # built once
    from graphfeed.sampling.neighbor import NeighborSampler

    u = NeighborSampler(graph, [3, 3])
    assert not u.needs_tables and share_prepared(u, World()) == "none" and dict(u.prepare()) == {}
    assert share_prepared(object(), World()) == "none"


def test_share_prepared_asks_the_sampler_whether_it_has_tables():
    """Not its class: a sampler says ``needs_tables`` (the interface's default is False)."""
    import torch

    from graphfeed.sampling.base import Sampler
    from graphfeed.sampling.torch_sampler import TorchNeighborSampler

    graph = ranks.make_graph(2000, 20000)
    t = TorchNeighborSampler.from_graph(graph, [3, 3])
    assert not t.needs_tables and share_prepared(t, World()) == "none" and dict(t.prepare()) == {}

    class WithTables(Sampler):
        needs_tables = True
        num_nodes, fanouts = graph.num_nodes, (3,)
        prepared = 0

        def sample(self, seeds, *, epoch=0, batch_index=0, executor=None):
            raise AssertionError("not sampled here")

        def prepare(self, share=None):
            WithTables.prepared += 1
            return {"table": torch.zeros(1)}

    assert share_prepared(WithTables(), World()) == "private" and WithTables.prepared == 1


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    from graphfeed.datasets.synthetic import load_builtin

    root = tmp_path_factory.mktemp("gfroot")
    for name in ("tiny", "link"):
        load_builtin(name, root)
    return str(root)


@pytest.mark.parametrize("task", ["node", "link"])
def test_training_under_two_ranks_samples_from_one_shared_copy(task, data_root,
                                                               no_leftover_segments):
    """The trainers call share_prepared under DDP: both ranks sample from the same segment."""
    from graphfeed.training import TrainConfig

    cfg = TrainConfig(dataset="tiny" if task == "node" else "link", task=task, epochs=1,
                      batch_size=256, hidden=16, fanouts=(5, 5), device="cpu", seed=0,
                      num_threads=1, nproc=2, dist_timeout=60, mlp_baseline=False,
                      progress=False, data_root=data_root, sampler="labor", eval_negatives=20)
    out = launch(ranks.train_and_look, 2, cfg, timeout_s=120)
    assert [r["epochs"] for r in out] == [1, 1]
    m0, m1 = out[0]["mapped"], out[1]["mapped"]
    assert len(m0) == 1 and "(deleted)" in m0[0], m0
    assert m1 == m0  # the same segment in both ranks


@pytest.mark.parametrize("built_on", [0, 1])
def test_tables_built_before_sharing_are_shared_all_the_same(built_on, no_leftover_segments):
    out = launch(ranks.built_before_sharing, 2, built_on, timeout_s=60)
    want = ranks.digest(ranks.make_sampler("labor", ranks.make_graph(2000, 20000)))
    assert out[built_on]["early"] == want
    for r in out:
        assert r["how"] == "shm" and r["digest"] == want
        assert "graphfeed-" in r["segment"][0]
    assert out[0]["segment"] == out[1]["segment"]
    assert out[built_on]["copy_private"] is True


def test_two_ranks_map_one_cached_copy_and_a_second_run_does_not_build(tmp_path,
                                                                        no_leftover_segments):
    want = ranks.digest(ranks.make_sampler("labor", ranks.make_graph(2000, 20000)))
    for forbid_build in (False, True):  # the first run stores, the second only maps
        out = launch(ranks.cached_tables, 2, str(tmp_path), forbid_build, timeout_s=60)
        for r in out:
            assert r["how"] == "cached" and r["digest"] == want
            path, inode = r["segment"]
            assert path.startswith(str(tmp_path)) and path.endswith("lsrc.npy"), path
        assert out[0]["segment"] == out[1]["segment"]  # the same file: one copy in the page cache
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("tables-")]) == 1
    # an empty cache and a build that fails: every rank raises, none waits, nothing is stored
    empty = tmp_path / "empty"
    out = launch(ranks.cached_tables, 2, str(empty), True, timeout_s=60)
    assert "built again" in out[0]["error"]
    assert "the first rank failed" in out[1]["error"]
    assert not empty.exists() or not any(empty.iterdir())
