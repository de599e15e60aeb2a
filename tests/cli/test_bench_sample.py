"""graphfeed bench sample on tiny data: the figures exist and are consistent."""

from __future__ import annotations

import json

import numpy as np

from graphfeed.cli.main import main
from graphfeed.graph.csc import CSCGraph


def test_bench_sample_builtin_json(capsys):
    assert main(["bench", "sample", "--dataset", "tiny", "--batches", "3", "--warmup", "1",
                 "--batch-size", "64", "--baselines", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    for key in ("sample", "sample_fetch", "baseline_numba_1thread", "baseline_torch_vectorised"):
        f = r[key]
        assert f["batches"] == 3
        assert 0 < f["seeds_per_s"] < float("inf")
        assert 0 < f["edges_per_s"] < float("inf") and f["edges_per_batch"] > 0
    assert r["sample_fetch"]["feature_gb_per_s"] > 0
    assert r["peak_rss_bytes"] > 0


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
