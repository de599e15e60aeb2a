"""graphfeed bench sample on tiny data: the figures exist and are consistent."""

from __future__ import annotations

import json
import math

import numpy as np

from graphfeed.cli.main import main
from graphfeed.graph.csc import CSCGraph


def test_bench_sample_builtin_json(capsys):
    assert main(["bench", "sample", "--dataset", "tiny", "--batches", "3", "--warmup", "1",
                 "--batch-size", "64", "--baselines", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    figures = ("seeds_per_s", "edges_per_s", "batches_per_s", "edges_per_batch", "seconds")
    for stage in ("sample", "sample_fetch", "baseline_numba_1thread", "baseline_torch_vectorised"):
        f = r[stage]
        assert f["batches"] == 3
        for name in figures:  # every figure reported, as a finite positive number
            assert math.isfinite(f[name]) and f[name] > 0, (stage, name, f[name])
    assert "feature_gb_per_s" in r["sample_fetch"] and r["mode"] == "cpu-cpu"


def test_bench_sample_plain_csc_folder(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 500
    g = CSCGraph.from_edges(rng.integers(0, n, 4000), rng.integers(0, n, 4000), n)
    g.save(tmp_path / "g")
    np.save(tmp_path / "g" / "features.npy", rng.standard_normal((n, 8)).astype(np.float32))
    np.save(tmp_path / "g" / "train_ids.npy", np.arange(100, dtype=np.int64))
    assert main(["bench", "sample", "--graph", str(tmp_path / "g"), "--batches", "2", "--warmup", "0",
                 "--batch-size", "32", "--fanouts", "5,5", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["num_nodes"] == n and r["feature_shape"] == [n, 8]


def test_bench_sample_rejects_out_of_range_train_ids(tmp_path, capsys):
    n = 50
    g = CSCGraph.from_edges(np.arange(n - 1), np.arange(1, n), n)
    g.save(tmp_path / "g")
    np.save(tmp_path / "g" / "train_ids.npy", np.array([0, n + 5], dtype=np.int64))
    assert main(["bench", "sample", "--graph", str(tmp_path / "g"), "--batches", "1"]) == 2
    err = capsys.readouterr().err
    assert "train_ids.npy" in err and str(n + 5) in err


def test_bench_sample_methods_next_to_uniform(capsys):
    """A non-uniform --sampler is timed next to uniform sampling in the same run, with the
    ratio and the input-node counts (LABOR draws fewer)."""
    for extra in (["--sampler", "weighted", "--random-weights"], ["--sampler", "labor"],
                  ["--sampler", "temporal", "--random-times", "--temporal-strategy", "last"]):
        assert main(["bench", "sample", "--dataset", "tiny", "--batches", "3", "--warmup", "1",
                     "--batch-size", "64", "--features", "none", "--rounds", "2", "--json", *extra]) == 0
        r = json.loads(capsys.readouterr().out)
        assert r["sampler"].startswith(extra[1])
        assert len(r["ratios_vs_uniform"]) == 2 and r["ratio_vs_uniform"] > 0
        assert r["uniform_sample"]["batches"] == r["sample"]["batches"] == 3
        if extra[1] == "labor":
            assert r["input_nodes_ratio"] < 1
    assert main(["bench", "sample", "--dataset", "tiny", "--batches", "2", "--sampler", "weighted"]) != 0
    assert "weight" in capsys.readouterr().err


def test_bench_sample_fetch_alternates_with_sampling_alone(capsys):
    """Uniform sampling with features: sampling alone and sampling + fetch alternate --rounds
    times; the reported pair is the round with the median ratio, and CPU per batch is given."""
    assert main(["bench", "sample", "--dataset", "tiny", "--batches", "3", "--warmup", "1",
                 "--batch-size", "64", "--rounds", "3", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    ratios = r["fetch_ratios"]
    assert len(ratios) == 3 and all(x > 0 for x in ratios)
    assert r["fetch_ratio"] == sorted(ratios)[1]
    assert math.isclose(r["sample_fetch"]["seeds_per_s"] / r["sample"]["seeds_per_s"], r["fetch_ratio"])
    for stage in ("sample", "sample_fetch"):
        assert r[stage]["batches"] == 3 and r[stage]["cpu_ms_per_batch"] >= 0
    assert r["fetch_cpu_ratio"] > 0
    assert main(["bench", "sample", "--dataset", "tiny", "--batches", "3", "--warmup", "1",
                 "--batch-size", "64", "--rounds", "2"]) == 0
    assert "alternating rounds" in capsys.readouterr().out
