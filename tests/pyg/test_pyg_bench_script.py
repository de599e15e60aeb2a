"""``benchmarks/pyg_loader.py`` runs end to end on ``tiny`` (its numbers are the lead's to
measure on ``medium``; here only that it runs and reports every path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch_geometric")

REPO = Path(__file__).resolve().parents[2]


def test_the_pyg_loader_benchmark_runs_on_tiny(tmp_path, tiny_dataset):
    out = tmp_path / "report.json"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "pyg_loader.py"), "--dataset", "tiny",
         "--batches", "2", "--rounds", "1", "--batch-size", "64", "--num-neighbors", "5,5",
         "--json", str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert {"graphfeed", "pyg"} <= set(report["paths"])
    for path in report["paths"].values():
        assert path["seeds_per_s"] > 0 and path["nodes_per_batch"] > 0
    assert report["paths"]["graphfeed"]["ratio_to_graphfeed"] == 1.0
    assert "seeds/s" in proc.stdout
