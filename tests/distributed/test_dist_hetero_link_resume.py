"""Typed link training under DDP (two gloo ranks on the built-in ``hetero-link``) resumes to the
run straight through: stopped after an epoch (``--epochs 1``), or killed (SIGKILL to the
``graphfeed train --nproc 2`` launcher once the first epoch's checkpoint is on disk, the ranks
ending by themselves), then ``--resume`` with two ranks ends with the same weights, losses and
metrics, and the same ``--predict`` file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import graphfeed

pytestmark = [pytest.mark.dist, pytest.mark.timeout(900)]

SRC_DIR = Path(graphfeed.__file__).resolve().parents[1]
CK = dict(task="link", batch_size=4096, hidden=16, fanouts=(5, 5), eval_fanouts=(5, 5),
          eval_negatives=20, device="cpu", seed=0, num_threads=1, progress=False,
          dist_timeout=120, nproc=2)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    from graphfeed.datasets.synthetic import load_builtin

    d = tmp_path_factory.mktemp("gf-tl-resume")
    load_builtin("hetero-link", d)
    return str(d)


def _cfg(root, **kw):
    from graphfeed.training import TrainConfig

    return TrainConfig(dataset="hetero-link", data_root=root, **{**CK, **kw})


@pytest.fixture(scope="module")
def full(root, tmp_path_factory):
    """Two ranks, two epochs straight through: its checkpoint folder and result."""
    from graphfeed.training import train

    d = tmp_path_factory.mktemp("tl-full")
    r = train(_cfg(root, epochs=2, save=str(d / "ck"), predict=str(d / "p.npz")))
    assert r.world_size == 2 and len(r.epochs) == 2
    return d, r


def _assert_same(d, r, full):
    import torch

    from graphfeed.trainer.checkpoint import load_checkpoint

    full_dir, fr = full
    a, b = load_checkpoint(d / "ck")["model"], load_checkpoint(full_dir / "ck")["model"]
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert r.world_size == 2 and r.resumed_from_epoch == 1
    assert [e.loss for e in r.epochs] == [e.loss for e in fr.epochs]
    assert [e.valid for e in r.epochs] == [e.valid for e in fr.epochs]
    assert (r.best_epoch, r.best_valid, r.test) == (fr.best_epoch, fr.best_valid, fr.test)
    with np.load(d / "p.npz", allow_pickle=False) as x, \
            np.load(full_dir / "p.npz", allow_pickle=False) as y:
        assert x.files == y.files == ["author.writes.paper"]
        assert np.array_equal(x[x.files[0]], y[y.files[0]])


def test_stopped_after_an_epoch_resumes_to_the_same_run(root, full, tmp_path,
                                                        no_leftover_segments):
    from graphfeed.trainer.checkpoint import load_checkpoint
    from graphfeed.training import train

    train(_cfg(root, epochs=1, save=str(tmp_path / "ck")))
    state = load_checkpoint(tmp_path / "ck")
    assert state["trainer"] == "hetero-link"
    assert state["loader"] == {"epoch": 1, "next_batch": 0}
    r = train(_cfg(root, epochs=2, resume=str(tmp_path / "ck"),
                   predict=str(tmp_path / "p.npz")))
    _assert_same(tmp_path, r, full)


def _group_alive(pgid: int) -> list:
    """Live (not zombie) processes of process group ``pgid``, from /proc."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(int(name))
    return out


def _epoch_of(ck: Path):
    from graphfeed.trainer.checkpoint import checkpoint_path, load_checkpoint

    if not checkpoint_path(ck).is_file():
        return None
    return load_checkpoint(ck)["loader"]["epoch"]


def test_killed_after_an_epoch_resumes_to_the_same_run(root, full, tmp_path,
                                                       no_leftover_segments):
    from graphfeed.training import train

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC_DIR), env.get("PYTHONPATH", "")])
    ck = tmp_path / "ck"
    # --epochs 3: the kill lands in the second epoch, with a third still to come
    cmd = [sys.executable, "-m", "graphfeed", "train", "--dataset", "hetero-link",
           "--data-root", root, "--task", "link", "--nproc", "2", "--epochs", "3",
           "--batch-size", "4096", "--hidden", "16", "--fanouts", "5,5", "--eval-fanouts", "5,5",
           "--eval-negatives", "20", "--seed", "0", "--threads", "1", "--no-progress",
           "--dist-timeout", "120", "--save", str(ck)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while _epoch_of(ck) is None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, f"the run ended first: {proc.stderr.read()}"
        proc.kill()  # the launcher dies without a word; its ranks must notice and end
        proc.wait(timeout=30)
        end = time.monotonic() + 30
        while _group_alive(proc.pid) and time.monotonic() < end:
            time.sleep(0.1)
        assert not _group_alive(proc.pid), "the ranks outlived their launcher"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
    # the kill landed before the second epoch ended: its checkpoint is the first epoch's
    assert _epoch_of(ck) == 1
    r = train(_cfg(root, epochs=2, resume=str(ck), predict=str(tmp_path / "p.npz")))
    _assert_same(tmp_path, r, full)
