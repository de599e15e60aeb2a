"""graphfeed bench memory: argument parsing, the budget, the table (the runs themselves are the
sharing/training tests' job; a real run is minutes on the medium dataset)."""

import argparse

import pytest

from graphfeed.cli import bench_memory as bm


def test_nproc_list_parsing():
    assert bm._nproc_list("4,1,2,2") == [1, 2, 4]
    for bad in ("", "0,2", "a,b"):
        with pytest.raises(argparse.ArgumentTypeError):
            bm._nproc_list(bad)


def test_budget_is_the_issues_formula():
    assert bm.budget_bytes(1_000_000_000, 1) == 1_150_000_000
    assert bm.budget_bytes(1_000_000_000, 4) == 1_150_000_000 + 3 * 200_000_000


def test_table_reports_ratio_budget_and_verdict():
    runs = [bm.MemoryRun(1, False, 1_000_000_000), bm.MemoryRun(2, False, 1_300_000_000),
            bm.MemoryRun(4, False, 2_500_000_000)]
    for r in runs:
        r.ratio = r.peak_pss_bytes / runs[0].peak_pss_bytes
        r.budget_bytes = bm.budget_bytes(runs[0].peak_pss_bytes, r.nproc)
        r.within_budget = None if r.nproc == 1 else r.peak_pss_bytes <= r.budget_bytes
    lines = bm.format_table(runs, "medium", "ram").splitlines()
    assert "one shared copy per machine" in lines[0]
    row2, row4 = lines[3].split(), lines[4].split()
    assert row2[0] == "2" and "1.30" in row2 and "yes" in row2 and "300" in row2
    assert row4[0] == "4" and "2.50" in row4 and "NO" in row4


def test_cli_is_wired_under_bench():
    from graphfeed.cli.main import build_parser

    args = build_parser().parse_args(["bench", "memory", "--nproc", "1,2", "--private-copy"])
    assert args.nproc == [1, 2] and args.private_copy and args.dataset == "medium"
