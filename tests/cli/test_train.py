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
