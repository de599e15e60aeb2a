"""graphfeed bench sample --task link on the built-in typed link dataset: typed link sampling
next to homogeneous link sampling of the same graph, figures consistent."""

from __future__ import annotations

import json
import math

from graphfeed.cli.main import main


def test_bench_sample_typed_link(builtin_root, capsys):
    root = builtin_root("hetero-link")
    assert main(["bench", "sample", "--task", "link", "--dataset", "hetero-link", "--data-root",
                 root, "--batches", "3", "--warmup", "1", "--batch-size", "128",
                 "--num-negatives", "2", "--rounds", "2", "--fanouts", "5,5", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["typed"] and r["exclude"] == "reverse" and r["num_negatives"] == 2
    assert r["edge_types"] == [["author", "writes", "paper"]]
    for stage in ("typed_link_sample", "link_sample"):
        f = r[stage]
        assert f["batches"] == 3
        for name in ("pairs_per_s", "seeds_per_s", "edges_per_s", "batches_per_s"):
            assert math.isfinite(f[name]) and f[name] > 0, (stage, name)
        # 128 pairs a batch: their endpoints and negatives are the seeds (at most 4 each)
        assert 128 < f["seeds_per_s"] / f["batches_per_s"] <= 4 * 128
    assert len(r["edges_per_s_ratios"]) == 2 and r["edges_per_s_ratio"] > 0
    assert main(["bench", "sample", "--task", "link", "--dataset", "hetero-link", "--data-root",
                 root, "--batches", "2", "--warmup", "0", "--batch-size", "64", "--rounds",
                 "1", "--fanouts", "3"]) == 0
    out = capsys.readouterr().out
    assert "typed link sampling" in out and "typed / homogeneous sampled edges/s" in out
