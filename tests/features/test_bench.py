"""The feature benchmark runs every backend and reports consistent figures (no timing
assertions: only structure and internal consistency)."""

from __future__ import annotations

import json

import numpy as np
import torch

from graphfeed.bench.features import bench_features, format_report


def test_bench_features_small(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5000, 8)).astype(np.float32)
    batches = [torch.from_numpy((rng.zipf(1.3, 3000) % 5000).astype(np.int64)) for _ in range(4)]
    rep = bench_features(a, batches, warmup_batches=2, repeats=1, cold_batches=1,
                         cache_policies=("sieve", "lru"), workdir=tmp_path)
    res = rep["results"]
    assert set(res) == {"ceiling", "ram", "ram-fresh", "disk-warm", "disk-cold", "disk-direct",
                        "lmdb", "cache-sieve", "cache-lru"}
    assert res["ceiling"]["ratio_to_ceiling"] == 1.0
    for name, r in res.items():
        assert r["rows_per_s"] > 0 and r["gb_per_s"] > 0
        assert abs(r["gb_per_s"] * 1e9 / r["rows_per_s"] - 32) < 1e-6  # 8 float32 per row
        assert r["ratio_to_ceiling"] == r["rows_per_s"] / res["ceiling"]["rows_per_s"]
    assert res["disk-warm"]["rows"] == sum(len(b) for b in batches[2:])
    assert res["disk-cold"]["rows"] == len(batches[2])
    for p in ("sieve", "lru"):
        assert 0.0 < res[f"cache-{p}"]["hit_rate"] <= 1.0  # zipf ids repeat: some hits
        assert res[f"cache-{p}"]["capacity_rows"] == 1000
    json.dumps(rep)
    assert "cache-sieve" in format_report(rep)


def test_cli_on_tiny_dataset(tiny_dataset, capsys):
    import argparse

    from graphfeed.cli import bench_features

    parser = argparse.ArgumentParser()
    bench_features.add_parser(parser.add_subparsers())
    args = parser.parse_args(["features", "--graph", str(tiny_dataset.path), "--batches", "2",
                              "--warmup", "1", "--cold-batches", "1", "--repeats", "1",
                              "--backends", "ram,disk-warm,lmdb,cache", "--json"])
    assert bench_features.run(args) == 0
    rep = json.loads(capsys.readouterr().out)
    assert set(rep["results"]) == {"ceiling", "ram", "ram-fresh", "disk-warm", "lmdb",
                                   "cache-sieve", "cache-s3fifo"}
    assert rep["feature"]["shape"][0] == tiny_dataset.num_nodes


def test_bench_seed_batches_never_repeat_an_id_within_a_batch():
    """A pool that is not a multiple of the batch size (Cora's 140 training ids in batches of 64)
    once produced a batch crossing two shuffles, with an id twice, which the sampler refused."""
    import numpy as np

    from graphfeed.bench.sample import _seed_batches

    pool = np.arange(1000, 1140)
    ids = _seed_batches(pool, 64, 20, seed=3)
    assert ids.shape == (64 * 20,) and set(ids.tolist()) <= set(pool.tolist())
    for b in ids.reshape(20, 64):
        assert len(set(b.tolist())) == 64
    small = _seed_batches(np.arange(5), 8, 2, seed=0)  # a pool smaller than a batch: repeats
    assert small.shape == (16,) and set(small.tolist()) == set(range(5))
