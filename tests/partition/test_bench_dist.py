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


def test_bench_dist_refuses_a_part_with_out_of_range_ids(tiny_dataset, tmp_path, capsys):
    """Issue 29: ids past the node count written into a part's indices.npy were sampled as if
    valid (bench dist printed throughput and exited 0; train --partitions died by SIGABRT).
    The rank opening the part refuses it, naming the file; the command exits 2."""
    import numpy as np

    from graphfeed.cli.main import main
    from graphfeed.partition import partition_dataset

    book = partition_dataset(tiny_dataset, tmp_path / "p", 2, method="random")
    f = tmp_path / "p" / "part-00001" / "indices.npy"
    a = np.load(f)
    a[::50] = book.num_nodes + 3
    np.save(f, a)
    assert main(["bench", "dist", str(book.path), "--batches", "2", "--warmup", "0",
                 "--batch-size", "64", "--fanouts", "4,3"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("graphfeed bench: error: rank 1 of 2 failed")
    assert f"{f}: indices[0] = {book.num_nodes + 3} is out of range [0, {book.num_nodes})" in last
