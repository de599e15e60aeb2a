"""A prepare killed midway (SIGKILL while it writes) leaves nothing that opens; a re-run succeeds."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from graphfeed.datasets.format import Dataset
from graphfeed.errors import DatasetError

#: runs graphfeed's CLI with a delay patched around the per-chunk work of the CSC build
WRAPPER = str(Path(__file__).with_name("slow_prepare.py"))


def _inputs(tmp: Path, n=2000, e=20000):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    (tmp / "edges.csv").write_text("".join(f"{s},{d}\n" for s, d in zip(src, dst)))
    np.save(tmp / "x.npy", rng.standard_normal((n, 8)).astype(np.float32))
    np.save(tmp / "y.npy", rng.integers(0, 4, n))


def _run(tmp: Path, *, sleep: float, extra=()) -> subprocess.Popen:
    args = ["prepare", "generic", str(tmp / "out"), "--edges", str(tmp / "edges.csv"),
            "--labels", str(tmp / "y.npy"), "--features", str(tmp / "x.npy"), "--split", "0.5,0.2,0.2",
            "--undirected", "--dedupe", "--block-size", "4096", *extra]
    return subprocess.Popen([sys.executable, WRAPPER, str(sleep), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill_midway(tmp: Path, extra=()) -> None:
    proc = _run(tmp, sleep=0.05, extra=extra)
    try:
        assert proc.stdout.readline().strip() == "started"
        # wait until pass 2 is under way in the temporary folder (indices.npy is created when it starts)
        deadline = time.monotonic() + 60
        while not list(tmp.glob(".out.tmp-*/graph/indices.npy")):
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "prepare never reached pass 2"
            time.sleep(0.02)
        time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL


def test_killed_prepare_leaves_nothing_and_rerun_succeeds(tmp_path):
    _inputs(tmp_path)
    _kill_midway(tmp_path)
    assert not (tmp_path / "out").exists()
    with pytest.raises(DatasetError):
        Dataset.open(tmp_path / "out")
    assert list(tmp_path.glob(".out.tmp-*")), "expected the killed run's temporary folder"

    rerun = _run(tmp_path, sleep=0)
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    ds = Dataset.open(tmp_path / "out")
    assert ds.num_nodes == 2000 and ds.num_edges > 0
    assert not list(tmp_path.glob(".out.tmp-*")), "the re-run removes the stale temporary folder"

    # killing an --overwrite run keeps the previous complete dataset intact
    before = np.array(ds.graph.indices)
    del ds
    _kill_midway(tmp_path, extra=("--overwrite",))
    np.testing.assert_array_equal(Dataset.open(tmp_path / "out").graph.indices, before)
