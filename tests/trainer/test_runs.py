"""Runs you can keep: checkpoints, resume (after a kill at an epoch end, and mid-epoch after
Ctrl-C), predictions, the JSON-lines log, early stopping, several seeds."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
import torch

from graphfeed.errors import GraphfeedError
from graphfeed.trainer.checkpoint import checkpoint_path, load_checkpoint
from graphfeed.training import TrainConfig, train, train_runs

pytest.importorskip("torch_geometric")

# device="cpu": the module-scoped fixtures below cannot use the folder's autouse cpu_only
KW = dict(dataset="tiny", epochs=4, fanouts=(5, 5), batch_size=128, hidden=32, progress=False,
          mlp_baseline=False, num_threads=1, eval_fanouts=(10, 10), device="cpu")


class Killed(Exception):
    pass


def _weights(folder):
    return load_checkpoint(folder)["model"]


def _assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.fixture(scope="module")
def uninterrupted(tiny_dataset, tmp_path_factory):
    d = tmp_path_factory.mktemp("full")
    r = train(TrainConfig(save=str(d / "ck"), predict=str(d / "pred.npy"), log=str(d / "log.jsonl"), **KW),
              dataset=tiny_dataset)
    return d, r


def test_checkpoint_is_plain_data(uninterrupted):
    d, r = uninterrupted
    # weights_only=True: tensors, numbers, strings, lists, dicts; no pickled objects
    state = torch.load(checkpoint_path(d / "ck"), weights_only=True)
    assert state["loader"] == {"epoch": 4, "next_batch": 0}
    assert len(state["epochs"]) == 4 and state["partial"] is None
    assert state["best"]["epoch"] == r.best_epoch
    assert r.checkpoint == str(checkpoint_path(d / "ck"))
    assert not [p for p in os.listdir(d / "ck") if p != "checkpoint.pt"]  # no temporary left


def test_kill_after_an_epoch_then_resume_gives_the_same_weights(tiny_dataset, uninterrupted, tmp_path):
    full_dir, full = uninterrupted

    def kill_after_epoch_1(stats):
        if stats.epoch == 1:
            raise Killed  # the process dies after the epoch's checkpoint is on disk

    with pytest.raises(Killed):
        train(TrainConfig(save=str(tmp_path / "ck"), **KW), dataset=tiny_dataset, on_epoch=kill_after_epoch_1)
    assert load_checkpoint(tmp_path / "ck")["loader"] == {"epoch": 2, "next_batch": 0}
    r = train(TrainConfig(resume=str(tmp_path / "ck"), predict=str(tmp_path / "pred.npy"), **KW),
              dataset=tiny_dataset)
    assert r.resumed_from_epoch == 2 and len(r.epochs) == 4
    _assert_same_weights(_weights(tmp_path / "ck"), _weights(full_dir / "ck"))
    assert [e.loss for e in r.epochs] == [e.loss for e in full.epochs]
    assert (r.best_epoch, r.test) == (full.best_epoch, full.test)
    np.testing.assert_array_equal(np.load(tmp_path / "pred.npy"), np.load(full_dir / "pred.npy"))


def test_ctrl_c_mid_epoch_checkpoints_and_resumes_with_the_same_batches(tiny_dataset, uninterrupted, tmp_path):
    full_dir, full = uninterrupted
    seen = []

    def interrupt(epoch, batch_index):
        seen.append((epoch, batch_index))
        if (epoch, batch_index) == (2, 1):
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C: the loop stops after this batch

    stopped = train(TrainConfig(save=str(tmp_path / "ck"), **KW), dataset=tiny_dataset,
                    on_batch=interrupt)
    assert stopped.interrupted == "in epoch 2"  # the summary of epochs 0 and 1
    assert len(stopped.epochs) == 2 and stopped.best_epoch in (0, 1)
    state = load_checkpoint(tmp_path / "ck")
    assert state["loader"] == {"epoch": 2, "next_batch": 2} and state["partial"] is not None
    resumed = []
    r = train(TrainConfig(resume=str(tmp_path / "ck"), **KW), dataset=tiny_dataset,
              on_batch=lambda e, b: resumed.append((e, b)))
    assert resumed[0] == (2, 2)  # continues with the next batch of the interrupted epoch
    _assert_same_weights(_weights(tmp_path / "ck"), _weights(full_dir / "ck"))
    assert r.epochs[2].loss == pytest.approx(full.epochs[2].loss, rel=1e-12)
    assert [e.valid_acc for e in r.epochs] == [e.valid_acc for e in full.epochs]


def test_resume_refuses_other_settings(tiny_dataset, uninterrupted):
    full_dir, _ = uninterrupted
    with pytest.raises(GraphfeedError, match="hidden"):
        train(TrainConfig(resume=str(full_dir / "ck"), **{**KW, "hidden": 64}), dataset=tiny_dataset)
    with pytest.raises(GraphfeedError, match="sampler='uniform'.*sampler='labor'"):
        train(TrainConfig(resume=str(full_dir / "ck"), **{**KW, "sampler": "labor"}),
              dataset=tiny_dataset)
    with pytest.raises(GraphfeedError, match="no checkpoint"):
        train(TrainConfig(resume=str(full_dir), **KW), dataset=tiny_dataset)


def test_predictions_and_log(tiny_dataset, uninterrupted):
    d, r = uninterrupted
    pred = np.load(d / "pred.npy", allow_pickle=False)
    assert pred.dtype == np.int64 and pred.shape == tiny_dataset.test_ids.shape
    labels = np.asarray(tiny_dataset.labels)[tiny_dataset.test_ids]
    # the best epoch's model predicts the test nodes with the accuracy reported for that epoch
    assert np.mean(pred == labels) == pytest.approx(r.test_acc)
    lines = [json.loads(l) for l in (d / "log.jsonl").read_text().splitlines()]
    assert [l["epoch"] for l in lines] == [0, 1, 2, 3]
    assert lines[1]["valid"]["accuracy"] == r.epochs[1].valid_acc and "rss_bytes" in lines[1]


def test_predict_all_nodes(tiny_dataset, tmp_path):
    r = train(TrainConfig(predict=str(tmp_path / "all.npy"), predict_nodes="all", **{**KW, "epochs": 1}),
              dataset=tiny_dataset)
    pred = np.load(tmp_path / "all.npy")
    assert pred.shape == (tiny_dataset.num_nodes,) and r.predictions == str(tmp_path / "all.npy")
    assert set(np.unique(pred)) <= set(range(tiny_dataset.num_classes))


def test_early_stopping_on_the_main_metric(tiny_dataset):
    r = train(TrainConfig(patience=2, **{**KW, "epochs": 40, "lr": 0.02}), dataset=tiny_dataset)
    assert r.stopped_early and len(r.epochs) < 40
    assert len(r.epochs) - 1 - r.best_epoch == 2
    valid = [e.valid_acc for e in r.epochs]
    assert r.best_valid == max(valid) and valid.index(max(valid)) == r.best_epoch


def test_runs_report_mean_and_std(tiny_dataset):
    rr = train_runs(TrainConfig(runs=3, **{**KW, "epochs": 2}), dataset=tiny_dataset)
    assert [r.seed for r in rr.runs] == [0, 1, 2]
    accs = [r.test_acc for r in rr.runs]
    s = rr.summary["test_accuracy"]
    assert s["values"] == accs and s["mean"] == pytest.approx(np.mean(accs))
    assert s["std"] == pytest.approx(np.std(accs, ddof=1))
    assert len(set(accs)) > 1 or len({r.epochs[0].loss for r in rr.runs}) > 1  # seeds differ
    with pytest.raises(GraphfeedError, match="train_runs"):
        train(TrainConfig(runs=2, **KW), dataset=tiny_dataset)


def test_a_setting_older_than_the_checkpoint_is_not_compared(tmp_path):
    from graphfeed.trainer.checkpoint import check_compatible

    saved = {"hidden": 32}  # written before "labor_variates" existed
    check_compatible(tmp_path, saved, {"hidden": 32, "labor_variates": "rotated"},
                     ("hidden", "labor_variates"))
    with pytest.raises(GraphfeedError, match="hidden=32"):
        check_compatible(tmp_path, saved, {"hidden": 64}, ("hidden",))


def test_signal_handlers_are_restored_when_the_run_fails_or_stops_early(tiny_dataset, tmp_path):
    """With --save the loop catches Ctrl-C/SIGTERM; its handlers must be gone when train returns
    or raises (the caller still holding the exception) and after an early stop's break: a
    handler left behind would turn a later Ctrl-C into "stop after this batch"."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    def fail(stats):
        raise Killed

    with pytest.raises(Killed) as info:
        train(TrainConfig(save=str(tmp_path / "a"), **KW), dataset=tiny_dataset, on_epoch=fail)
    assert info.value is not None  # the traceback is still held here
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    r = train(TrainConfig(save=str(tmp_path / "b"), **{**KW, "epochs": 30, "patience": 1,
                                                       "lr": 1e-6}), dataset=tiny_dataset)
    assert r.stopped_early
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
