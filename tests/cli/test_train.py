"""graphfeed train end to end on the tiny built-in dataset, and its argument errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from graphfeed.cli.main import main
from graphfeed.training import TrainConfig, train


def test_train_tiny_beats_mlp(tiny_dataset):
    r = train(TrainConfig(dataset="tiny", epochs=8, fanouts=(10, 10), batch_size=256,
                          progress=False), dataset=tiny_dataset)
    assert len(r.epochs) == 8
    assert r.mode == "cpu-cpu"
    assert r.epochs[-1].loss < r.epochs[0].loss
    assert r.mlp_test_acc is not None
    # the dataset is built so that neighbours carry the signal an MLP cannot see
    assert r.test_acc > r.mlp_test_acc + 0.1, (r.test_acc, r.mlp_test_acc)


def test_train_is_reproducible_across_thread_counts(tiny_dataset):
    kw = dict(dataset="tiny", epochs=2, fanouts=(5, 5), batch_size=200, progress=False, mlp_baseline=False)
    a = train(TrainConfig(num_threads=1, **kw), dataset=tiny_dataset)
    b = train(TrainConfig(num_threads=2, **kw), dataset=tiny_dataset)
    assert [e.loss for e in a.epochs] == pytest.approx([e.loss for e in b.epochs], rel=1e-5)
    assert [e.valid_acc for e in a.epochs] == [e.valid_acc for e in b.epochs]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["train", "--fanouts", "0,3"], "fanouts"),
        (["train", "--batch-size", "-4"], "integer between 1 and"),
        (["train", "--lr", "abc"], "positive number"),
        (["train", "--features", "tape"], "invalid choice"),
        (["train", "--dataset", "/definitely/not/here"], "neither a built-in dataset"),
        (["train", "--device", "tpu"], "device"),
        (["train", "--mode", "cuda-cuda", "--device", "cpu", "--dataset", "tiny"], "cuda"),
        (["bench", "sample", "--graph", "/definitely/not/here"], "not a folder"),
        # issue 12: accepted silently, or a traceback, before
        (["train", "--fanouts", "15,,5"], "no empty item"),
        (["train", "--fanouts", "15,5,"], "no empty item"),
        (["train", "--fanouts", "99999999999999999999,5"], "between 1 and 100,000"),
        (["train", "--eval-fanouts", "0,5"], "between 1 and 100,000"),
        (["train", "--seed", "-1"], "between 0 and"),
        (["train", "--seed", "9" * 30], "between 0 and"),
        (["train", "--weight-decay=-1"], ">= 0"),
        (["train", "--weight-decay", "nan"], "finite"),
        (["train", "--lr", "inf"], "positive number"),
        (["train", "--dropout", "1"], "[0, 1)"),
        (["train", "--hidden", "100000000"], "between 1 and 65,536"),
        (["train", "--dist-timeout", "1e300"], "dist_timeout"),
        (["train", "--dataset", "tiny", "--features", "ram", "--cache-size", "1MB"],
         "cache_size applies to features on disk"),
        (["train", "--dataset", "tiny", "--fanouts", "5,5", "--eval-fanouts", "5"], "one entry per layer"),
        (["train", "--dataset", "tiny", "--model", "gat", "--hidden", "30"], "multiple of heads"),
        (["train", "--dataset", "tiny", "--runs", "2", "--save", "/tmp/x"], "one run"),
        (["train", "--dataset", "tiny", "--predict", "/definitely/not/here/p.npy"], "does not exist"),
        (["train", "--dataset", "tiny", "--resume", "/definitely/not/here"], "no checkpoint"),
    ],
)
def test_bad_arguments_give_one_line_error(argv, fragment, capsys):
    with pytest.raises(SystemExit) as e:
        rc = main(argv)
        raise SystemExit(rc)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert fragment in err


def test_cli_train_json_subprocess(tmp_path):
    env = dict(os.environ)
    out = subprocess.run(
        [sys.executable, "-m", "graphfeed", "train", "--dataset", "tiny", "--epochs", "1",
         "--no-progress", "--no-mlp", "--json"],
        capture_output=True, text=True, env=env, timeout=240,
    )
    assert out.returncode == 0, out.stderr
    # stdout is exactly one JSON object (what `| python -m json.tool` and `| jq` need); the
    # human lines went to stderr
    res = json.loads(out.stdout)
    assert out.stdout.count("\n") == 1
    assert res["mode"] == "cpu-cpu" and len(res["epochs"]) == 1
    assert any(l.startswith("epoch  0") for l in out.stderr.splitlines()), out.stderr
    tool = subprocess.run([sys.executable, "-m", "json.tool"], input=out.stdout, capture_output=True,
                          text=True, timeout=60)
    assert tool.returncode == 0, tool.stderr


@pytest.mark.parametrize("features, cache_size", [("disk", 0), ("disk", 200_000), ("lmdb", 0)])
def test_feature_backends_train_identically_to_ram(tiny_dataset, features, cache_size):
    kw = dict(dataset="tiny", epochs=2, fanouts=(5, 5), batch_size=256, progress=False, mlp_baseline=False)
    ram = train(TrainConfig(features="ram", **kw), dataset=tiny_dataset)
    other = train(TrainConfig(features=features, cache_size=cache_size, **kw), dataset=tiny_dataset)
    # same seed, same batches, same rows: bit-identical losses and accuracies
    assert [(e.loss, e.valid_acc, e.test_acc) for e in other.epochs] == [
        (e.loss, e.valid_acc, e.test_acc) for e in ram.epochs
    ]


def test_negative_fanouts_parse_with_a_space():
    from graphfeed.cli.main import _join_negative_values, build_parser

    args = build_parser().parse_args(_join_negative_values(["train", "--fanouts", "-1,-1"]))
    assert args.fanouts == [-1, -1]
    args = build_parser().parse_args(_join_negative_values(["bench", "sample", "--fanouts", "-1,5"]))
    assert args.fanouts == [-1, 5]


def test_nan_features_exit_2_with_one_line(tmp_path, capsys):
    import numpy as np

    from graphfeed.datasets import write_dataset
    from graphfeed.graph.csc import CSCGraph

    rng = np.random.default_rng(0)
    n = 300
    g = CSCGraph.from_edges(rng.integers(0, n, 1500), rng.integers(0, n, 1500), n, add_reverse=True)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    x[5, 2] = np.nan
    y = rng.integers(0, 3, n)
    write_dataset(tmp_path / "nan", graph=g, node_features={"feat": x, "label": y}, num_classes=3,
                  splits={"train": np.arange(200), "valid": np.arange(200, 250), "test": np.arange(250, 300)})
    rc = main(["train", "--dataset", str(tmp_path / "nan"), "--epochs", "2", "--no-progress", "--no-mlp"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "loss became nan" in err, err


def test_dry_run_checks_without_training(capsys):
    rc = main(["train", "--dataset", "tiny", "--dry-run", "--json", "--fanouts", "5,5,5"])
    assert rc == 0
    plan = json.loads(capsys.readouterr().out)
    # layer-wise evaluation by default: every neighbour
    assert plan["eval"] == "layerwise" and plan["eval_fanouts"] == [-1, -1, -1]
    assert plan["model"] == "sage" and plan["num_classes"] == 5 and plan["eval_every"] == 1
    rc = main(["train", "--dataset", "tiny", "--dry-run", "--json", "--fanouts", "5,5,5",
               "--eval", "sampled"])
    plan = json.loads(capsys.readouterr().out)
    # three layers: the default sampled evaluation cap is floor(10000 ** (1/3)) = 21 per layer
    assert rc == 0 and plan["eval"] == "sampled" and plan["eval_fanouts"] == [21, 21, 21]


def test_a_closed_pipe_ends_quietly():
    """`graphfeed train ... | head -1`: the reader leaves after one line; no traceback."""
    proc = subprocess.run(
        f"{sys.executable} -m graphfeed train --dataset tiny --epochs 4 --no-mlp --no-progress | head -1",
        shell=True, capture_output=True, text=True, timeout=240, env=dict(os.environ),
    )
    assert proc.stdout.count("\n") == 1
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
