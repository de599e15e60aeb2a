"""graphfeed bench sample on the built-in heterogeneous dataset: hetero and homogeneous figures
of the same run, consistent with each other."""

from __future__ import annotations

import json
import math

from graphfeed.cli.main import main


def test_bench_sample_hetero_json(tmp_path, capsys):
    assert main(["bench", "sample", "--dataset", "hetero", "--data-root", str(tmp_path),
                 "--batches", "3", "--warmup", "1", "--batch-size", "64", "--rounds", "2",
                 "--fanouts", "5,3", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    for stage in ("sample", "homogeneous_sample", "sample_fetch"):
        f = r[stage]
        assert f["batches"] == 3
        for name in ("seeds_per_s", "edges_per_s", "batches_per_s", "edges_per_batch"):
            assert math.isfinite(f[name]) and f[name] > 0, (stage, name)
    assert len(r["per_edge_cost_ratios"]) == 2 and r["per_edge_cost_ratio"] > 0
    assert r["node_types"] == {"author": 4000, "field": 60, "paper": 12000}
    assert "feature_gb_per_s" in r["sample_fetch"]
    # fanouts per relation: a paper seed gets up to 3 of each of its 3 in-relations
    assert r["sample"]["edges_per_batch"] > r["homogeneous_sample"]["edges_per_batch"]
    main(["bench", "sample", "--dataset", "hetero", "--data-root", str(tmp_path), "--batches",
          "1", "--warmup", "1", "--batch-size", "64", "--rounds", "1", "--features", "none"])
    out = capsys.readouterr().out
    assert "per sampled edge, hetero costs" in out and "per-type fetch" not in out
