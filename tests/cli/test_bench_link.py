"""graphfeed bench sample --task link on tiny data: the figures exist and are consistent."""

from __future__ import annotations

import json
import math

from graphfeed.cli.main import main


def test_bench_sample_link_json(capsys):
    assert main(["bench", "sample", "--task", "link", "--dataset", "tiny", "--batches", "3",
                 "--warmup", "1", "--batch-size", "128", "--num-negatives", "2", "--rounds", "2",
                 "--exclude", "reverse", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["task"] == "link" and r["exclude"] == "reverse" and r["num_negatives"] == 2
    for stage in ("link_sample", "node_sample"):
        f = r[stage]
        assert f["batches"] == 3
        for name in ("seeds_per_s", "edges_per_s", "batches_per_s", "edges_per_batch"):
            assert math.isfinite(f[name]) and f[name] > 0, (stage, name)
    link = r["link_sample"]
    # 128 pairs a batch; their endpoints and negatives are the sampled seeds (at most 4 each)
    assert link["pairs_per_s"] == 128 * link["batches_per_s"]
    assert 128 < link["seeds_per_s"] / link["batches_per_s"] <= 4 * 128
    assert len(r["edges_per_s_ratios"]) == 2 and r["edges_per_s_ratio"] > 0


def test_bench_sample_link_report(capsys):
    assert main(["bench", "sample", "--task", "link", "--dataset", "tiny", "--batches", "2",
                 "--warmup", "0", "--batch-size", "64", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "pairs/s" in out and "link / node sampled edges/s" in out and "exclude self" in out
