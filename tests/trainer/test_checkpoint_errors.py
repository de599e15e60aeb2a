"""Issue 29: a checkpoint that loads but holds a bad ``epochs``, ``best``, ``rng``,
``bad_epochs`` (or other) value gave a traceback on ``graphfeed train --resume``; now one error
line naming the checkpoint and the field, exit 2."""

from __future__ import annotations

import pytest
import torch

from graphfeed.errors import GraphfeedError
from graphfeed.trainer.checkpoint import checkpoint_path, load_checkpoint


@pytest.fixture(scope="module")
def node_run(tmp_path_factory, builtin_root):
    from graphfeed.cli.main import main

    d = tmp_path_factory.mktemp("ck")
    root = builtin_root("tiny")
    argv = ["train", "--dataset", "tiny", "--data-root", root, "--no-mlp", "--no-progress",
            "--hidden", "8", "--fanouts", "5,5"]
    assert main(argv + ["--epochs", "1", "--save", str(d / "ck")]) == 0
    return d / "ck", argv


def _with(src, dst, key, value):
    state = torch.load(checkpoint_path(src), weights_only=True)
    if isinstance(key, tuple):
        state[key[0]][key[1]] = value
    else:
        state[key] = value
    dst.mkdir(parents=True, exist_ok=True)
    torch.save(state, checkpoint_path(dst))
    return dst


BAD = {
    "epochs-string": ("epochs", "x", "epochs"),
    "epochs-of-ints": ("epochs", [1], "epochs[0]"),
    "epochs-unknown-key": ("epochs", [{"bogus": 1}], "epochs[0]"),
    "best-int": ("best", 5, "best"),
    "best-epoch-string": ("best", {"epoch": "a", "value": 1.0, "test": {}}, "best.epoch"),
    "best-value-string": ("best", {"epoch": 0, "value": "high", "test": {}}, "best.value"),
    "best-test-list": ("best", {"epoch": 0, "value": 0.5, "test": [1]}, "best.test"),
    "rng-floats": ("rng", torch.zeros(3), "rng"),
    "rng-string": ("rng", "x", "rng"),
    "rng-short": ("rng", torch.zeros(10, dtype=torch.uint8), "rng"),
    "bad-epochs-string": ("bad_epochs", "x", "bad_epochs"),
    "bad-epochs-negative": ("bad_epochs", -3, "bad_epochs"),
    "bad-epochs-float": ("bad_epochs", 1.5, "bad_epochs"),
    "partial-int": ("partial", {"sums": 1, "seconds": 0.0}, "partial.sums"),
    "loader-negative": ("loader", {"epoch": -1, "next_batch": 0}, "loader.epoch"),
    "rank-rng-string": ("rank_rng", "x", "rank_rng"),
    "rank-rng-cpu": ("rank_rng", [{"cpu": torch.zeros(3)}], "rank_rng[0].cpu"),
}


def test_a_real_checkpoint_passes(node_run):
    from graphfeed.trainer.checkpoint import check_state

    ck, _ = node_run
    check_state(checkpoint_path(ck), load_checkpoint(ck))


@pytest.mark.parametrize("key", list(BAD))
def test_load_checkpoint_names_the_field(node_run, tmp_path, key):
    ck, _ = node_run
    field, value, name = BAD[key]
    bad = _with(ck, tmp_path / "bad", field, value)
    with pytest.raises(GraphfeedError) as e:
        load_checkpoint(bad)
    msg = str(e.value)
    assert str(checkpoint_path(bad)) in msg and f"field {name} " in msg, msg


@pytest.mark.parametrize("key", ["epochs-string", "best-int", "rng-string", "bad-epochs-string"])
def test_resume_prints_one_line(node_run, tmp_path, capsys, key):
    from graphfeed.cli.main import main

    ck, argv = node_run
    field, value, name = BAD[key]
    bad = _with(ck, tmp_path / "bad", field, value)
    capsys.readouterr()
    assert main(argv + ["--epochs", "2", "--resume", str(bad)]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and name in lines[0], err
