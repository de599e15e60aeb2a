"""``benchmarks/traffic_model.py`` (issue 30, item 1): its chunked generator draws the built-in
generator's graph, its no-overlap ceiling is what the formula says, and a small run, the fit
and the tables work end to end (the figures are the lead's to measure at 250k-10M nodes)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "traffic_model.py"


def _module():
    spec = importlib.util.spec_from_file_location("traffic_model", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_chunked_generator_is_the_synthetic_generator_in_one_chunk():
    from graphfeed.datasets.synthetic import SyntheticSpec, generate_arrays
    from graphfeed.graph.csc import CSCGraph

    T = _module()
    a = generate_arrays(SyntheticSpec("x", 5_000, 13.0, 1, 16, seed=13))
    want = CSCGraph.from_edges(a.src, a.dst, a.num_nodes, add_reverse=True,
                               drop_self_loops=True, drop_duplicates=True)
    got = T.generate_graph(5_000, 13.0, seed=13)
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got.indices, want.indices)
    # in several chunks: another draw of the same law (edge count within 1%)
    chunked = T.generate_graph(5_000, 13.0, seed=13, chunk=10_000)
    assert abs(int(chunked.indptr[-1]) - int(want.indptr[-1])) < 0.01 * int(want.indptr[-1])


def test_ceiling_formula():
    T = _module()
    deg = np.array([1, 2, 20, 40])
    c = T.degree_ceiling(deg, [10, 3])  # the seeds get 3, then 10
    m_seed = np.minimum(deg, 3).mean()
    m_edge = (deg * np.minimum(deg, 10)).sum() / deg.sum()
    assert np.isclose(c["ceiling"], 1024 * (1 + m_seed + m_seed * m_edge))
    assert c["flat_bound"] == 1024 * (1 + 3 + 30)


def test_small_run_fit_and_tables(tmp_path):
    out = tmp_path / "t.json"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    run = [sys.executable, str(SCRIPT)]
    proc = subprocess.run(run + ["--sizes", "20000,40000", "--batches", "2", "--learn", "2",
                                 "--json", str(out)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert [s["nodes"] for s in data["sizes"]] == [20_000, 40_000]
    for s in data["sizes"]:
        assert set(s["runs"]) == {f"{m} {f}" for m in ("uniform", "labor")
                                  for f in ("15,10,5", "10,10", "25,10")}
        for key, r in s["runs"].items():
            fan = key.split(" ")[1]
            assert 1024 < r["input_nodes_mean"] <= s["ceiling"][fan]["flat_bound"]
            assert 0.0 <= min(r["cache_hit"].values()) <= max(r["cache_hit"].values()) <= 1.0
            # seeds are rank 0's own rows: at most (P - 1) / P of the rows are remote
            assert r["remote_share"]["4"] <= 0.75 and r["remote_share"]["16"] <= 15 / 16
    for flag in ("--fit", "--table"):
        proc = subprocess.run(run + [flag, str(out)], capture_output=True, text=True,
                              timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr
        assert ("MB/rank" if flag == "--fit" else "| gen:20000:13 |") in proc.stdout
