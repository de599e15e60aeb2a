"""A result even when a run is cut short (issue 41, 3): a Ctrl-C or SIGTERM after an evaluated
epoch ends the run with the summary of the best epoch so far (no ``--predict``, no baselines),
``TrainResult.interrupted`` saying where, ``--json`` still written and exit status 130; one cut
during the baselines keeps the summary without them; one before any evaluation is a plain
interrupt. Under torchrun only rank 0 says ``interrupted``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from graphfeed.training import TrainConfig, train

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from graphfeed.datasets import write_dataset
    from graphfeed.graph.csc import CSCGraph

    n = 300
    rng = np.random.default_rng(0)
    g = CSCGraph.from_edges(rng.integers(0, n, 3000), rng.integers(0, n, 3000), n,
                            add_reverse=True, drop_duplicates=True)
    perm = rng.permutation(n)
    return write_dataset(tmp_path_factory.mktemp("int") / "d", graph=g,
                         splits={"train": perm[:150], "valid": perm[150:225],
                                 "test": perm[225:]},
                         node_features={"feat": rng.normal(size=(n, 6)).astype(np.float32),
                                        "label": rng.integers(0, 3, n)},
                         num_classes=3)


def _cfg(data, **kw):
    base = dict(dataset=str(data), epochs=20, patience=0, hidden=8, fanouts=(5, 5),
                progress=False, num_threads=1, device="cpu")
    return TrainConfig(**{**base, **kw})


def test_a_stop_after_an_evaluated_epoch_reports_the_best_so_far(data, tmp_path, capsys):
    def stop_at_2(stats):
        if stats.epoch == 2:
            raise KeyboardInterrupt

    r = train(_cfg(data, predict=str(tmp_path / "p.npy")), on_epoch=stop_at_2)
    assert r.interrupted == "after epoch 2"
    assert [e.epoch for e in r.epochs] == [0, 1, 2]
    assert 0 <= r.best_epoch <= 2 and r.test == r.epochs[r.best_epoch].test
    assert r.mlp_test is None and r.predictions is None  # no baselines, no --predict
    assert not (tmp_path / "p.npy").exists()
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].endswith("; interrupted after epoch 2: the best epoch so far")
    assert f"at epoch {r.best_epoch}" in out[-1]


def test_a_stop_before_any_evaluation_is_a_plain_interrupt(data):
    def stop(epoch, batch_index):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(_cfg(data), on_batch=stop)


def test_a_stop_during_the_baselines_keeps_the_summary(data, monkeypatch, capsys):
    from graphfeed.trainer.tasks.node import NodeTask

    def interrupted_baselines(self, result):
        raise KeyboardInterrupt

    monkeypatch.setattr(NodeTask, "finish", interrupted_baselines)
    r = train(_cfg(data, epochs=2))
    assert r.interrupted == "during the baselines"
    assert len(r.epochs) == 2 and r.mlp_test is None
    assert "interrupted during the baselines" in capsys.readouterr().out


def test_sigterm_on_the_command_line(data):
    """SIGTERM (a time limit) mid-run: the summary on stderr, the JSON on stdout, exit 130,
    one ``interrupted`` line."""
    cmd = [sys.executable, "-m", "graphfeed", "train", "--dataset", str(data), "--epochs",
           "100000", "--patience", "0", "--hidden", "8", "--fanouts", "5,5", "--threads", "1",
           "--no-progress", "--device", "cpu", "--json"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "RANK": "0"})
    err = []
    for line in p.stderr:
        err.append(line)
        if line.startswith("epoch  2"):
            p.send_signal(signal.SIGTERM)
            break
    rest_err = p.stderr.read()
    out = p.stdout.read()
    assert p.wait(timeout=120) == 130, "".join(err) + rest_err
    err_lines = ("".join(err) + rest_err).strip().splitlines()
    assert err_lines[-1].startswith("graphfeed train: interrupted ")
    assert sum("interrupted" in line for line in err_lines) == 2  # the summary and the end
    assert "the best epoch so far" in err_lines[-2]
    result = json.loads(out)
    assert result["interrupted"].startswith(("in epoch", "after epoch"))
    assert result["best_epoch"] >= 0


def test_under_torchrun_only_rank_0_says_interrupted(monkeypatch, capsys):
    from graphfeed.cli import inspect as inspect_cmd
    from graphfeed.cli.main import main

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(inspect_cmd, "run", interrupted)
    for rank, said in (("1", False), ("0", True)):
        monkeypatch.setenv("RANK", rank)
        assert main(["inspect", "tiny"]) == 130
        assert ("interrupted" in capsys.readouterr().err) == said


def test_the_first_kernel_compile_is_said_once():
    """A slow epoch 0 is explained: numba's first compile in a run says so, once; code numba
    has compiled already says nothing."""
    import numba

    from graphfeed.trainer.fit import compile_notice

    said = []

    @numba.njit
    def twice(x):
        return 2 * x

    with compile_notice(said.append):
        assert twice(2) == 4  # compiles
        assert twice(3.0) == 6.0  # compiles another signature: not said again
    assert len(said) == 1 and "compiling numba kernels" in said[0]
    with compile_notice(said.append):
        assert twice(5) == 10  # compiled already
    assert len(said) == 1
