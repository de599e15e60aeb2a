"""``benchmarks/disk_reads.py`` (issue 38, item 4): a short run end to end, and the fio read-size
mix it builds keeps the plan's mean read length (the figures are measured on a real disk)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "disk_reads.py"


def _module():
    spec = importlib.util.spec_from_file_location("disk_reads", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_read_size_mix_keeps_the_mean(tmp_path):
    from graphfeed.features.disk import DiskFeature

    np.save(tmp_path / "a.npy", np.zeros((200_000, 64), np.uint16))
    f = DiskFeature(tmp_path / "a.npy", dtype="bfloat16")
    mix = _module().read_size_mix(f, 20_000, 0)
    parts = [tuple(int(x) for x in p.split("/")) for p in mix.split(":")]
    assert sum(q for _, q in parts) == 100 and all(b % 4096 == 0 for b, _ in parts)
    # the plan of the same batch, read by read
    ids = np.sort(np.random.default_rng(0).choice(200_000, 20_000, replace=False))
    f.direct_io = True
    f.read(ids)
    s = f.stats()
    mean = sum(b * q for b, q in parts) / 100
    assert abs(mean - s["bytes_read"] / s["reads"]) < 0.05 * mean
    f.close()


def test_short_run_without_fio(tmp_path):
    np.save(tmp_path / "a.npy", np.random.default_rng(0).integers(0, 9, (50_000, 32), np.uint16))
    out = tmp_path / "r.json"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "a.npy"), "--seconds", "0.3", "--rounds",
         "2", "--rows-per-batch", "500,2000", "--queue-depth", "8", "--io-engine", "threads",
         "--no-fio", "--json", str(out)],
        capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["results"][0]["fio"] == {"error": "not run"}
    assert [r["rows_per_batch"] for r in data["results"]] == [500, 2000]
    for r in data["results"]:
        ours = r["ours"]
        assert r["engine"] == "threads" and len(r["rounds"]["ours"]) == 2
        assert ours["reads_per_s"] > 0 and ours["rows_per_read"] >= 1
        assert ours["rows_per_s"] >= ours["reads_per_s"]  # a read holds one row or more
    assert "rows/s" in proc.stdout and "load average" in proc.stdout
