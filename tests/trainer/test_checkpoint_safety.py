"""Issue 42 (3, 4): ``--resume`` from a checkpoint whose optimizer (or model) state is garbage
gave ``TypeError: object of type 'int' has no len()``; a 1 kB checkpoint of shared references
hung its error message; a resume onto an edited dataset of the same name was accepted with the
old test figure; two ``train --save DIR`` into one folder both exited 0; a run that failed left
the folder it made. Now: one line naming the file and field; the checkpoint records the data's
fingerprint and a resume onto other data is refused naming both; a run holds its folder (a
second is refused at once, a SIGKILL leaves no stale lock); a failed run removes the folder it
made when it holds no checkpoint."""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from graphfeed.errors import GraphfeedError
from graphfeed.trainer.checkpoint import (SaveFolder, checkpoint_path, dataset_fingerprint,
                                          load_checkpoint)
from graphfeed.training import TrainConfig, train

pytestmark = pytest.mark.timeout(600)

ARGS = ["--no-mlp", "--no-progress", "--hidden", "8", "--fanouts", "5,5", "--threads", "1"]


def _write(path, *, seed: int = 0, n: int = 300):
    from graphfeed.datasets import write_dataset
    from graphfeed.graph.csc import CSCGraph

    rng = np.random.default_rng(seed)
    g = CSCGraph.from_edges(rng.integers(0, n, 3000), rng.integers(0, n, 3000), n,
                            add_reverse=True, drop_duplicates=True)
    perm = rng.permutation(n)
    return write_dataset(path, graph=g, splits={"train": perm[:150], "valid": perm[150:225],
                                                "test": perm[225:]},
                         node_features={"feat": rng.normal(size=(n, 6)).astype(np.float32),
                                        "label": rng.integers(0, 3, n)},
                         num_classes=3, overwrite=True)


def _cli(argv, capsys):
    from graphfeed.cli.main import main

    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line(rc, err, *fragments):
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A dataset folder and a one-epoch checkpoint trained on it."""
    from graphfeed.cli.main import main

    d = tmp_path_factory.mktemp("safety")
    data = _write(d / "data")
    argv = ["train", "--dataset", str(data), *ARGS]
    assert main(argv + ["--epochs", "1", "--save", str(d / "ck")]) == 0
    return d, data, argv


def _with(src, dst, edit):
    state = torch.load(checkpoint_path(src), weights_only=True)
    edit(state)
    dst.mkdir(parents=True, exist_ok=True)
    torch.save(state, checkpoint_path(dst))
    return dst


def _set(path, value):
    def edit(state):
        node = state
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value(node[path[-1]]) if callable(value) else value
    return edit


def _bomb(levels: int = 9):
    a = ["lol"] * 9
    for _ in range(levels - 1):
        a = [a] * 9  # pickled through the memo: 9 ** levels items in about 1 kB
    return a


# table: checkpoint edit -> the field the one-line error names (checked on load)
LOAD = {
    "optimizer-int": (_set(("optimizer",), 5), "field optimizer "),
    "param-groups-int": (_set(("optimizer", "param_groups"), 5), "optimizer.param_groups "),
    "state-int": (_set(("optimizer", "state"), 5), "optimizer.state "),
    "params-int": (_set(("optimizer", "param_groups"), [{"params": 3}]),
                   "optimizer.param_groups[0] "),
    "params-str": (_set(("optimizer", "param_groups"), [{"params": ["a"]}]),
                   "optimizer.param_groups[0].params[0] "),
    "params-twice": (_set(("optimizer", "param_groups"), [{"params": [0, 0]}]),
                     "optimizer.param_groups[0].params[1] "),
    "setting-dict": (_set(("optimizer", "param_groups", 0, "lr"), {"a": 1}),
                     "optimizer.param_groups[0].'lr' "),
    "state-key-str": (_set(("optimizer", "state"), {"x": {}}), "optimizer.state['x'] "),
    "moment-str": (_set(("optimizer", "state", 0, "exp_avg"), "x"),
                   "optimizer.state[0].'exp_avg' "),
    "model-value": (_set(("model",), {"w": 5}), "field model['w'] "),
    "model-list": (_set(("model",), [1, 2]), "field model "),
    "optimizer-bomb": (_set(("optimizer",), _bomb()), "field optimizer is a list of 9 items"),
    "dataset-int": (_set(("dataset",), 5), "field dataset "),
}


@pytest.mark.parametrize("key", sorted(LOAD))
def test_garbage_state_is_one_line_naming_file_and_field(run, tmp_path, key):
    d, _, _ = run
    edit, field = LOAD[key]
    bad = _with(d / "ck", tmp_path / "bad", edit)
    t0 = time.thread_time()
    with pytest.raises(GraphfeedError) as e:
        load_checkpoint(bad)
    assert time.thread_time() - t0 < 2.0  # the bomb is described, not printed
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 500 and str(checkpoint_path(bad)) in msg, msg
    assert field in msg, msg


def _first_param(state):
    return next(iter(state["model"].values()))


# table: checkpoint edit -> what the one-line error of `train --resume` says
RESUME = {
    "groups-size": (lambda s: (s["optimizer"]["param_groups"][0].update(params=[0]),
                               s["optimizer"].update(state={0: s["optimizer"]["state"][0]})),
                    "field optimizer does not fit"),
    "moment-shape": (_set(("optimizer", "state", 0, "exp_avg"), lambda t: t.reshape(-1)[:3]),
                     "optimizer.state[0].'exp_avg' is a torch.float32 tensor of shape (3,)"),
    "moment-shape-2": (_set(("optimizer", "state", 0, "exp_avg_sq"), lambda t: t[:1]),
                       "optimizer.state[0].'exp_avg_sq' is a torch.float32 tensor of shape (1,"),
    "step-vector": (_set(("optimizer", "state", 0, "step"), torch.ones(5)),
                    "optimizer.state[0].'step'"),
    "model-shape": (lambda s: s["model"].update({k: v[:1] for k, v in
                                                 list(s["model"].items())[:1]}),
                    "field model["),
    "model-missing": (lambda s: s["model"].pop(next(iter(s["model"]))), "field model lacks"),
    "best-shape": (lambda s: s["best_model"].update({k: v[:1] for k, v in
                                                     list(s["best_model"].items())[:1]}),
                   "field best_model["),
    "config-bomb": (_set(("config", "fanouts"), _bomb()),
                    "fanouts=a list of 9 items, but this run has fanouts=[5, 5]"),
}


@pytest.mark.parametrize("key", sorted(RESUME))
def test_resume_of_state_that_does_not_fit_is_one_line(run, tmp_path, capsys, key):
    d, _, argv = run
    edit, fragment = RESUME[key]
    bad = _with(d / "ck", tmp_path / "bad", edit)
    rc, _, err = _cli(argv + ["--epochs", "2", "--resume", bad], capsys)
    _one_line(rc, err, str(checkpoint_path(bad)), fragment)


def test_a_checkpoint_records_its_data_and_refuses_other_data(run, tmp_path, capsys):
    d, data, argv = run
    state = load_checkpoint(d / "ck")
    from graphfeed.datasets import open_dataset

    assert state["dataset"] == {"name": open_dataset(data).name, "path": str(data.absolute()),
                                "fingerprint": dataset_fingerprint(data)}
    # a copy of the same data elsewhere is the same data
    copy = shutil.copytree(data, tmp_path / "copy")
    rc, _, err = _cli(["train", "--dataset", copy, *ARGS, "--epochs", "2", "--resume",
                       shutil.copytree(d / "ck", tmp_path / "ck1")], capsys)
    assert rc == 0, err
    # the same folder prepared again with other data (same name, same sizes)
    edited = shutil.copytree(data, tmp_path / "edited")
    _write(edited, seed=1)
    assert dataset_fingerprint(edited) != dataset_fingerprint(data)
    rc, _, err = _cli(["train", "--dataset", edited, *ARGS, "--epochs", "2", "--resume",
                       shutil.copytree(d / "ck", tmp_path / "ck2")], capsys)
    _one_line(rc, err, "was trained on dataset", str(data), str(edited.absolute()),
              "holds other data", "fingerprint")
    # only a split edited, in place: still other data
    split = np.load(edited / "splits" / "test.npy")
    shutil.copytree(data, tmp_path / "split-edit")
    np.save(tmp_path / "split-edit" / "splits" / "test.npy", split)
    assert dataset_fingerprint(tmp_path / "split-edit") != dataset_fingerprint(data)
    # a checkpoint from before the record resumes anywhere, as before
    old = _with(d / "ck", tmp_path / "old", lambda s: s.pop("dataset"))
    rc, _, err = _cli(["train", "--dataset", edited, *ARGS, "--epochs", "2", "--resume", old],
                      capsys)
    assert rc == 0, err


def test_the_fingerprint_ignores_locks_and_lmdb_copies_and_samples_large_files(tmp_path):
    data = _write(tmp_path / "data")
    fp = dataset_fingerprint(data)
    (data / ".lock").write_text("x")
    (data / "node_features" / "feat.lmdb").mkdir()
    (data / "node_features" / "feat.lmdb" / "data.mdb").write_bytes(b"x" * 100)
    assert dataset_fingerprint(data) == fp
    big = np.zeros(1 << 19)  # 4 MiB: sampled
    np.save(data / "big.npy", big)
    fp_big = dataset_fingerprint(data)
    big[-1] = 1.0  # the last chunk is always read
    np.save(data / "big.npy", big)
    assert dataset_fingerprint(data) != fp_big


_HOLD = ("import sys, time; from graphfeed.trainer.checkpoint import SaveFolder; "
         "f = SaveFolder(sys.argv[1]).__enter__(); print('held', flush=True); time.sleep(600)")


def test_a_second_run_saving_into_a_held_folder_is_refused_at_once(tmp_path, capsys, run):
    _, data, argv = run
    ck = tmp_path / "ck"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(ck)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.thread_time()
        rc, _, err = _cli(["train", "--dataset", tmp_path / "not-read", *ARGS, "--save", ck],
                          capsys)
        _one_line(rc, err, f"--save {ck}", "another graphfeed train is saving there")
        assert time.thread_time() - t0 < 2.0  # refused before any data is opened
        rc, _, err = _cli(argv + ["--epochs", "1", "--resume", run[0] / "ck", "--save", ck],
                          capsys)
        _one_line(rc, err, "another graphfeed train is saving there")
    finally:
        holder.kill()  # SIGKILL: the kernel drops its flock
        holder.wait()
    rc, _, err = _cli(argv + ["--epochs", "1", "--save", ck], capsys)
    assert rc == 0, err
    assert sorted(p.name for p in ck.iterdir()) == ["checkpoint.pt"]  # no lock file left


def test_two_train_runs_saving_into_one_folder(tmp_path, capsys, run):
    """The issue's case end to end: a second ``graphfeed train --save DIR`` while a first runs
    into DIR is refused at once; killed, the first leaves no lock behind."""
    _, data, argv = run
    ck = tmp_path / "ck"
    first = subprocess.Popen([sys.executable, "-m", "graphfeed", *argv[:1], "--dataset",
                              str(data), *ARGS, "--epochs", "100000", "--patience", "0",
                              "--save", str(ck)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not checkpoint_path(ck).exists():  # it runs: its first epoch is saved
            assert first.poll() is None, first.stderr.read()
            assert time.monotonic() < deadline, "the first run saved nothing in 120 s"
            time.sleep(0.2)
        rc, _, err = _cli(argv + ["--epochs", "1", "--save", ck], capsys)
        _one_line(rc, err, f"--save {ck}", "another graphfeed train is saving there")
        assert first.poll() is None  # untouched
    finally:
        first.kill()
        first.wait()
    rc, _, err = _cli(argv + ["--epochs", "1", "--save", ck], capsys)
    assert rc == 0, err


def test_the_folder_is_held_for_the_run_and_released_after(tmp_path, run):
    _, data, _ = run
    ck = tmp_path / "ck"
    seen = []

    def on_epoch(stats):
        with pytest.raises(GraphfeedError, match="another graphfeed train is saving there"):
            with SaveFolder(ck):
                pass
        seen.append(stats.epoch)

    cfg = TrainConfig(dataset=str(data), epochs=2, hidden=8, fanouts=(5, 5), progress=False,
                      mlp_baseline=False, num_threads=1, device="cpu", save=str(ck))
    train(cfg, on_epoch=on_epoch)
    assert seen == [0, 1]
    with SaveFolder(ck):  # released when the run ended
        pass
    # --resume DIR without --save writes there, so it holds DIR too
    resumed = TrainConfig(**{**cfg.__dict__, "save": None, "resume": str(ck), "epochs": 3})
    seen.clear()
    train(resumed, on_epoch=on_epoch)
    assert seen == [2]


def _disk_full(monkeypatch):
    import graphfeed.trainer.checkpoint as ckpt

    def full(path, write, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(ckpt, "atomic_write", full)


def test_a_failed_run_removes_the_folder_it_made(tmp_path, run, monkeypatch, capsys):
    _, data, argv = run
    _disk_full(monkeypatch)
    made = tmp_path / "a" / "b" / "ck"
    rc, _, err = _cli(argv + ["--epochs", "1", "--save", made], capsys)
    _one_line(rc, err, "cannot write checkpoint", "No space left on device")
    assert not (tmp_path / "a").exists()
    # a folder that existed stays, with what was in it
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    rc, _, err = _cli(argv + ["--epochs", "1", "--save", tmp_path / "mine"], capsys)
    assert rc == 2
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    # a made folder in which the user put something meanwhile stays
    (tmp_path / "x").mkdir()
    folder = SaveFolder(tmp_path / "x" / "new")
    with pytest.raises(RuntimeError):
        with folder:
            (tmp_path / "x" / "new" / "theirs.txt").write_text("x")
            raise RuntimeError
    assert (tmp_path / "x" / "new" / "theirs.txt").exists()


def test_a_dry_run_or_a_refused_run_creates_no_folder(tmp_path, run, capsys):
    _, data, argv = run
    made = tmp_path / "a" / "ck"
    rc, out, _ = _cli(argv + ["--dry-run", "--save", made], capsys)
    assert rc == 0 and "graphfeed train --dry-run" in out
    rc, _, err = _cli(argv + ["--save", made, "--dataset", tmp_path / "none"], capsys)
    _one_line(rc, err, "none")
    assert not (tmp_path / "a").exists()
    (tmp_path / "file").write_text("x")
    rc, _, err = _cli(argv + ["--dry-run", "--save", tmp_path / "file" / "ck"], capsys)
    _one_line(rc, err, "is a file, not a folder")


def test_a_failed_run_keeps_a_folder_holding_a_checkpoint(tmp_path, run):
    _, data, _ = run
    ck = tmp_path / "new" / "ck"

    class Stop(Exception):
        pass

    def stop_after_epoch_0(stats):
        raise Stop  # after the epoch's checkpoint: it is what --resume continues

    cfg = TrainConfig(dataset=str(data), epochs=2, hidden=8, fanouts=(5, 5), progress=False,
                      mlp_baseline=False, num_threads=1, device="cpu", save=str(ck))
    with pytest.raises(Stop):
        train(cfg, on_epoch=stop_after_epoch_0)
    assert load_checkpoint(ck)["loader"]["epoch"] == 1
