"""graphfeed train: GPU ranks are refused before anything starts when NCCL cannot run them;
--dist-backend; stored split sets (--split, and --runs cycling through them)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphfeed import _cuda
from graphfeed.cli.main import main
from graphfeed.errors import GraphfeedError
from graphfeed.graph.csc import CSCGraph
from graphfeed.training import TrainConfig, run_plan, train_runs


@pytest.fixture
def one_gpu(monkeypatch):
    """A CUDA build with one visible GPU, as NVML would say; starting CUDA or a rank fails."""
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(_cuda, "device_count", lambda: 1)
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)  # CUDA builds ship NCCL

    def no_launch(*a, **k):
        raise AssertionError("no rank may start")

    import graphfeed.distributed as distributed

    monkeypatch.setattr(distributed, "launch", no_launch, raising=False)


def test_more_ranks_than_gpus_is_one_line_before_any_rank(one_gpu, capsys):
    code = main(["train", "--dataset", "tiny", "--nproc", "2", "--device", "cuda", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "2 ranks per machine but 1 GPU(s) visible" in err and "--dist-backend gloo" in err


def test_nccl_needs_gpu_ranks(capsys):
    code = main(["train", "--dataset", "tiny", "--nproc", "2", "--device", "cpu",
                 "--dist-backend", "nccl", "--no-progress"])
    assert code == 2 and "needs GPU ranks" in capsys.readouterr().err


def test_bad_backend_is_refused():
    with pytest.raises(GraphfeedError, match="dist_backend"):
        TrainConfig(dist_backend="mpi").validate()
    with pytest.raises(SystemExit) as e:
        main(["train", "--dist-backend", "mpi"])
    assert e.value.code == 2


@pytest.mark.dist
@pytest.mark.timeout(300)
def test_gloo_backend_trains_two_ranks(tmp_path):
    from graphfeed.training import train

    cfg = TrainConfig(dataset="tiny", epochs=1, batch_size=64, nproc=2, dist_backend="gloo",
                      device="cpu", mlp_baseline=False, progress=False, data_root=str(tmp_path))
    r = train(cfg)
    assert r.world_size == 2


@pytest.fixture
def split_sets_dataset(tmp_path):
    """A learnable 2-class graph with three stored split sets of different training ids."""
    from graphfeed.datasets import Dataset, write_dataset

    rng = np.random.default_rng(0)
    n = 300
    y = (np.arange(n) % 2).astype(np.int64)
    src = rng.integers(0, n, 3000)
    dst = np.array([rng.choice(np.flatnonzero(y == y[s])) for s in src])  # same-class edges
    g = CSCGraph.from_edges(src, dst, n, add_reverse=True)
    x = (rng.normal(size=(n, 8)) + y[:, None]).astype(np.float32)
    perm = [rng.permutation(n) for _ in range(3)]
    splits = {"train": [p[:150] for p in perm], "valid": [p[150:225] for p in perm],
              "test": [p[225:] for p in perm]}
    write_dataset(tmp_path / "ds", graph=g, node_features={"feat": x, "label": y}, splits=splits,
                  num_classes=2)
    return Dataset.open(tmp_path / "ds"), perm


def test_run_plan_cycles_through_stored_splits(split_sets_dataset):
    ds, _ = split_sets_dataset
    assert ds.num_split_sets == 3
    plan = run_plan(TrainConfig(runs=4, seed=7), ds)
    assert [(p.seed, p.split) for p in plan] == [(7, 0), (8, 1), (9, 2), (10, 0)]
    assert [p.split for p in run_plan(TrainConfig(runs=2, split=2), ds)] == [2, 2]


def test_runs_train_on_their_split(split_sets_dataset, monkeypatch):
    import graphfeed.trainer.tasks.node as node

    ds, perm = split_sets_dataset
    seen = []
    real = node.split_ids

    def spy(dataset, split):
        out = real(dataset, split)
        seen.append((split, sorted(out[0].tolist())))
        return out

    monkeypatch.setattr(node, "split_ids", spy)
    cfg = TrainConfig(dataset=str(ds.path), runs=3, epochs=1, batch_size=64, fanouts=(5, 5),
                      mlp_baseline=False, progress=False, device="cpu")
    res = train_runs(cfg, dataset=ds)
    assert len(res.runs) == 3
    assert [s for s, _ in seen] == [0, 1, 2]
    for k, (_, ids) in enumerate(seen):
        assert ids == sorted(perm[k][:150].tolist())


def test_split_out_of_range_is_a_clear_error(split_sets_dataset, capsys):
    ds, _ = split_sets_dataset
    code = main(["train", "--dataset", str(ds.path), "--split", "5", "--epochs", "1",
                 "--no-progress", "--no-mlp", "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and "split" in err and len(err.strip().splitlines()) == 1
