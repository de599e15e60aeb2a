"""graphfeed bench memory: argument parsing, the table (the runs themselves are the
sharing/training tests' job; a real run is minutes on the medium dataset)."""

import argparse

import pytest

from graphfeed.cli import bench_memory as bm


def test_nproc_list_parsing():
    assert bm._nproc_list("4,1,2,2") == [1, 2, 4]
    for bad in ("", "0,2", "a,b"):
        with pytest.raises(argparse.ArgumentTypeError):
            bm._nproc_list(bad)


def test_an_empty_process_count_is_refused_not_dropped(capsys):
    """Issue 29: --nproc 1,,2 measured 1 and 2 (the empty item dropped). It is a one-line
    error naming the option and the value, exit status 2."""
    from graphfeed.cli.main import main

    for bad in ("1,,2", "1,2,", ",1", " , "):
        with pytest.raises(argparse.ArgumentTypeError, match="no empty item"):
            bm._nproc_list(bad)
        with pytest.raises(SystemExit) as e:
            main(["bench", "memory", "--nproc", bad])
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--nproc" in err[0] and "no empty item" in err[0], err
        assert repr(bad) in err[0]


def test_table_reports_ratio_and_memory_per_extra_process_without_a_verdict():
    runs = [bm.MemoryRun(1, False, 1_000_000_000), bm.MemoryRun(2, False, 1_300_000_000),
            bm.MemoryRun(4, False, 2_500_000_000)]
    for r in runs:
        r.ratio = r.peak_pss_bytes / runs[0].peak_pss_bytes
    text = bm.format_table(runs, "medium", "ram")
    lines = text.splitlines()
    assert "one shared copy per machine" in lines[0]
    row2, row4 = lines[3].split(), lines[4].split()
    assert row2[0] == "2" and "1.30" in row2 and "300" in row2  # +300 MB for the extra process
    assert row4[0] == "4" and "2.50" in row4 and "500" in row4  # (2500 - 1000) / 3
    assert "budget" not in text and "NO" not in row4 and "yes" not in row2


def test_cli_is_wired_under_bench():
    from graphfeed.cli.main import build_parser

    args = build_parser().parse_args(["bench", "memory", "--nproc", "1,2", "--private-copy"])
    assert args.nproc == [1, 2] and args.private_copy and args.dataset == "medium"
