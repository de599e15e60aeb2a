"""Checkpoints, resume and predictions of link prediction (``--task link``) and of node
classification on heterogeneous datasets: the same guarantees as the node trainer's
(tests/trainer/test_runs.py): a run killed after an epoch or stopped by a signal mid-epoch and
resumed ends with the same weights, losses and metrics as one run straight through; settings
that change what a run computes are refused by name; predictions are the best epoch's."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import torch

from graphfeed.datasets.open import open_dataset
from graphfeed.errors import GraphfeedError
from graphfeed.trainer.checkpoint import checkpoint_path, load_checkpoint
from graphfeed.training import TrainConfig, train

pytestmark = pytest.mark.timeout(600)

COMMON = dict(epochs=3, hidden=16, progress=False, mlp_baseline=False, num_threads=1,
              device="cpu", seed=0)
TASKS = {
    "link": dict(task="link", fanouts=(5, 5), batch_size=512, num_negatives=2,
                 eval_negatives=50, eval_fanouts=(10, 10), **COMMON),
    "hetero": dict(fanouts=(5, 5), batch_size=128, eval_fanouts=(10, 10), **COMMON),
}


class Killed(Exception):
    pass


@pytest.fixture(scope="module")
def datasets(small_link_dataset, small_hetero_dataset):
    return {"link": small_link_dataset, "hetero": small_hetero_dataset}


def _cfg(kind, path, **kw):
    return TrainConfig(dataset=path, **{**TASKS[kind], **kw})


@pytest.fixture(scope="module")
def uninterrupted(datasets, tmp_path_factory):
    """Each task run straight through, with a checkpoint and predictions."""
    out = {}
    for kind, path in datasets.items():
        d = tmp_path_factory.mktemp(f"full-{kind}")
        r = train(_cfg(kind, path, save=str(d / "ck"), predict=str(d / "pred.npy")),
                  dataset=open_dataset(path))
        out[kind] = (d, r)
    return out


def _assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def _assert_same_run(r, full):
    assert [e.loss for e in r.epochs] == [e.loss for e in full.epochs]
    assert [e.valid for e in r.epochs] == [e.valid for e in full.epochs]
    assert (r.best_epoch, r.best_valid, r.test) == (full.best_epoch, full.best_valid, full.test)


@pytest.mark.parametrize("kind", ["link", "hetero"])
def test_checkpoint_is_plain_data(kind, uninterrupted):
    d, r = uninterrupted[kind]
    state = torch.load(checkpoint_path(d / "ck"), weights_only=True)
    assert state["trainer"] == kind and state["loader"] == {"epoch": 3, "next_batch": 0}
    assert len(state["epochs"]) == 3 and state["partial"] is None
    assert state["best"]["epoch"] == r.best_epoch and state["best_model"] is not None
    assert r.checkpoint == str(checkpoint_path(d / "ck"))
    assert os.listdir(d / "ck") == ["checkpoint.pt"]  # no temporary left


@pytest.mark.parametrize("kind", ["link", "hetero"])
def test_kill_after_an_epoch_then_resume_gives_the_same_run(kind, datasets, uninterrupted,
                                                            tmp_path):
    full_dir, full = uninterrupted[kind]
    ds = open_dataset(datasets[kind])

    def kill_after_epoch_0(stats):
        if stats.epoch == 0:
            raise Killed  # the process dies after the epoch's checkpoint is on disk

    with pytest.raises(Killed):
        train(_cfg(kind, datasets[kind], save=str(tmp_path / "ck")), dataset=ds,
              on_epoch=kill_after_epoch_0)
    assert load_checkpoint(tmp_path / "ck")["loader"] == {"epoch": 1, "next_batch": 0}
    r = train(_cfg(kind, datasets[kind], resume=str(tmp_path / "ck"),
                   predict=str(tmp_path / "pred.npy")), dataset=ds)
    assert r.resumed_from_epoch == 1 and len(r.epochs) == 3
    _assert_same_weights(load_checkpoint(tmp_path / "ck")["model"],
                         load_checkpoint(full_dir / "ck")["model"])
    _assert_same_run(r, full)
    np.testing.assert_array_equal(np.load(tmp_path / "pred.npy"), np.load(full_dir / "pred.npy"))


@pytest.mark.parametrize("kind, sig", [("link", signal.SIGINT), ("hetero", signal.SIGTERM)])
def test_signal_mid_epoch_checkpoints_and_resumes_with_the_same_batches(kind, sig, datasets,
                                                                        uninterrupted, tmp_path):
    full_dir, full = uninterrupted[kind]
    ds = open_dataset(datasets[kind])

    def interrupt(epoch, batch_index):
        if (epoch, batch_index) == (1, 1):
            os.kill(os.getpid(), sig)  # the loop stops after this batch

    stopped = train(_cfg(kind, datasets[kind], save=str(tmp_path / "ck")), dataset=ds,
                    on_batch=interrupt)
    assert stopped.interrupted == "in epoch 1" and len(stopped.epochs) == 1
    state = load_checkpoint(tmp_path / "ck")
    assert state["loader"] == {"epoch": 1, "next_batch": 2} and state["partial"] is not None
    assert len(state["epochs"]) == 1
    resumed = []
    r = train(_cfg(kind, datasets[kind], resume=str(tmp_path / "ck")), dataset=ds,
              on_batch=lambda e, b: resumed.append((e, b)))
    assert resumed[0] == (1, 2)  # the next batch of the interrupted epoch
    _assert_same_weights(load_checkpoint(tmp_path / "ck")["model"],
                         load_checkpoint(full_dir / "ck")["model"])
    _assert_same_run(r, full)


def test_a_signal_on_an_epochs_last_batch_ends_that_epoch_first(datasets, uninterrupted,
                                                               tmp_path):
    full_dir, full = uninterrupted["hetero"]
    ds = open_dataset(datasets["hetero"])
    last = -(-len(ds.train_ids) // TASKS["hetero"]["batch_size"]) - 1

    def interrupt(epoch, batch_index):
        if (epoch, batch_index) == (1, last):
            os.kill(os.getpid(), signal.SIGINT)

    stopped = train(_cfg("hetero", datasets["hetero"], save=str(tmp_path / "ck")), dataset=ds,
                    on_batch=interrupt)
    assert stopped.interrupted == "after epoch 1" and len(stopped.epochs) == 2
    state = load_checkpoint(tmp_path / "ck")
    # epoch 1 evaluated and checkpointed whole, not skipped
    assert state["loader"] == {"epoch": 2, "next_batch": 0} and state["partial"] is None
    assert [e["epoch"] for e in state["epochs"]] == [0, 1]
    r = train(_cfg("hetero", datasets["hetero"], resume=str(tmp_path / "ck")), dataset=ds)
    _assert_same_run(r, full)


@pytest.mark.parametrize("kind, setting", [
    ("link", {"decoder": "mlp"}), ("link", {"num_negatives": 3}),
    ("link", {"eval_negatives": 20}), ("link", {"hidden": 32}),
    ("hetero", {"fanouts": (4, 4), "eval_fanouts": None}), ("hetero", {"batch_size": 64}),
])
def test_resume_refuses_other_settings(kind, setting, datasets, uninterrupted):
    full_dir, _ = uninterrupted[kind]
    name = next(iter(setting))
    with pytest.raises(GraphfeedError, match=f"{name}="):
        train(_cfg(kind, datasets[kind], resume=str(full_dir / "ck"), **setting),
              dataset=open_dataset(datasets[kind]))


def test_resume_refuses_another_trainers_checkpoint(datasets, uninterrupted):
    with pytest.raises(GraphfeedError, match="written by the heterogeneous node-classification "
                                             "trainer; this run is link-prediction"):
        train(_cfg("link", datasets["link"], resume=str(uninterrupted["hetero"][0] / "ck")),
              dataset=open_dataset(datasets["link"]))
    with pytest.raises(GraphfeedError, match="written by the link-prediction trainer"):
        train(_cfg("hetero", datasets["hetero"], resume=str(uninterrupted["link"][0] / "ck")),
              dataset=open_dataset(datasets["hetero"]))


def test_link_predictions_are_the_best_epochs_test_scores(datasets, uninterrupted):
    from graphfeed.trainer.tasks.link import link_metrics

    d, r = uninterrupted["link"]
    ds = open_dataset(datasets["link"])
    pred = np.load(d / "pred.npy", allow_pickle=False)
    pairs = ds.link_split("test")[0]
    assert pred.dtype == np.float32 and pred.shape == (pairs.shape[1], 1 + 50)
    # column 0 the test pair, columns 1.. its negatives: the test metrics of the best epoch
    assert link_metrics(pred[:, 0], pred[:, 1:]) == pytest.approx(r.test, abs=1e-6)
    assert r.predictions == str(d / "pred.npy")


def test_hetero_predictions_are_the_best_epochs_classes(datasets, uninterrupted, tmp_path):
    d, r = uninterrupted["hetero"]
    ds = open_dataset(datasets["hetero"])
    pred = np.load(d / "pred.npy", allow_pickle=False)
    test_ids = np.asarray(ds.test_ids)
    assert pred.dtype == np.int64 and pred.shape == test_ids.shape
    assert np.mean(pred == np.asarray(ds.labels)[test_ids]) == pytest.approx(r.test_acc)
    # every paper, in type-local id order: the test papers' rows are the same predictions
    train(_cfg("hetero", datasets["hetero"], epochs=1, predict=str(tmp_path / "all.npy"),
               predict_nodes="all"), dataset=ds)
    every = np.load(tmp_path / "all.npy")
    h = ds.hetero
    off = int(h.node_offsets[h.type_id("paper")])
    assert every.shape == (h.num_nodes_of("paper"),)
    assert set(np.unique(every)) <= set(range(ds.num_classes))


def test_link_prediction_arguments(datasets, tmp_path):
    from graphfeed.training import check_run

    with pytest.raises(GraphfeedError, match="predict-nodes all"):
        check_run(_cfg("link", datasets["link"], predict=str(tmp_path / "p.npy"),
                       predict_nodes="all"))
    with pytest.raises(GraphfeedError, match="does not exist"):
        check_run(_cfg("link", datasets["link"], predict="/definitely/not/here/p.npy"))
    with pytest.raises(GraphfeedError, match="no checkpoint"):
        check_run(_cfg("link", datasets["link"], resume=str(tmp_path)))


@pytest.mark.dist
@pytest.mark.parametrize("kind", ["link", "hetero"])
def test_two_gloo_ranks_resume(kind, datasets, tmp_path):
    """Rank 0 writes the checkpoints; two ranks resume from one and end where a run straight
    through ends."""
    kw = dict(nproc=2, dist_timeout=120, epochs=2)
    full = train(_cfg(kind, datasets[kind], save=str(tmp_path / "full"), **kw))
    train(_cfg(kind, datasets[kind], save=str(tmp_path / "ck"), **{**kw, "epochs": 1}))
    assert load_checkpoint(tmp_path / "ck")["loader"] == {"epoch": 1, "next_batch": 0}
    r = train(_cfg(kind, datasets[kind], resume=str(tmp_path / "ck"), **kw))
    assert r.world_size == 2 and r.resumed_from_epoch == 1
    _assert_same_weights(load_checkpoint(tmp_path / "ck")["model"],
                         load_checkpoint(tmp_path / "full")["model"])
    _assert_same_run(r, full)
