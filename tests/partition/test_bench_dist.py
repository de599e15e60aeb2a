"""``graphfeed bench dist``: the figures it reports are consistent."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.timeout(300)]


def test_bench_dist_reports_traffic_and_cache(tiny_dataset, tmp_path):
    from graphfeed.bench.dist import bench_dist, format_report
    from graphfeed.partition import partition_dataset

    book = partition_dataset(tiny_dataset, tmp_path / "p", 2, method="random")
    r = bench_dist(book.path, fanouts=[4, 3], batch_size=64, batches=3, warmup=2,
                   cache_rows=200, timeout_s=120)
    assert [x["rank"] for x in r["ranks"]] == [0, 1]
    plain, cached = r["mean"]["plain"], r["mean"]["cached"]
    # 4 calls per sampling layer (header, ids, counts, sources) + 3 for the feature rows
    assert plain["calls_per_batch"] == 4 * 2 + 3
    assert plain["bytes_received_per_batch"] > 0 and plain["cache_hit_rate"] == 0
    assert 0 < cached["cache_hit_rate"] <= 1
    assert all(x["cache_rows"] == 200 for x in r["ranks"])
    assert "cache hit rate" in format_report(r)
