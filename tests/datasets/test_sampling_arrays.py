"""Weights and times for the sampling methods: imported (edge weights, edge and node times),
validated (finite, weights >= 0, int64 or float) and used by ``graphfeed train --sampler``."""

from __future__ import annotations

import numpy as np
import pytest

from graphfeed.datasets.format import Dataset, write_dataset
from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.graph.csc import CSCGraph
from graphfeed.sampling import SamplingMethod, build_sampler

from ds_helpers import run_cli

N = 40


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, N, 300), rng.integers(0, N, 300)
    w = rng.random(300).round(3)
    t = rng.integers(0, 1000, 300)
    (tmp_path / "e.csv").write_text("".join(f"{a},{b},{c},{d}\n" for a, b, c, d in zip(src, dst, w, t)))
    np.save(tmp_path / "x.npy", rng.standard_normal((N, 4)).astype(np.float32))
    np.save(tmp_path / "y.npy", rng.integers(0, 3, N))
    np.save(tmp_path / "nt.npy", rng.integers(0, 1000, N))
    return tmp_path


def test_node_times_imported_and_sampled(files, capsys):
    rc, _, err = run_cli(["prepare", "generic", files / "ds", "--no-progress", "--edges", files / "e.csv",
                          "--features", files / "x.npy", "--labels", files / "y.npy", "--weight-col", "2",
                          "--time-col", "3", "--node-times", files / "nt.npy"], capsys)
    assert rc == 0, err
    ds = Dataset.open(files / "ds")
    assert ds.arrays.node_features["timestamp"].dtype == np.int64
    np.testing.assert_array_equal(ds.arrays.node_features["timestamp"], np.load(files / "nt.npy"))
    m = SamplingMethod("temporal").bind(ds)
    assert set(m.arrays) == {"node_times", "edge_times"}
    mb = build_sampler("neighbor", ds.graph, [3, 3], method=m).sample(np.arange(10))
    assert mb.num_layers == 2
    w = SamplingMethod("weighted").bind(ds)
    assert w.arrays["weights"] is ds.graph.weights


def test_negative_weight_refused_by_the_importer(files, capsys):
    (files / "neg.csv").write_text("0,1,0.5\n1,2,-1\n")
    rc, _, err = run_cli(["prepare", "generic", files / "o", "--edges", files / "neg.csv", "--labels",
                          files / "y.npy", "--weight-col", "2"], capsys)
    assert rc == 2 and "weights must be >= 0" in err


@pytest.mark.parametrize("bad,msg", [
    (("weights", np.array([1.0, -2.0, 1.0])), "edge weights must be finite and >= 0"),
    (("weights", np.array([1.0, np.inf, 1.0])), "edge weights must be finite"),
    (("edge_times", np.array([1.0, np.nan, 2.0])), "edge times must be finite"),
    (("edge_times", np.array([1, 2, 3], np.int32)), "edge times must be 1-D int64 or float"),
    (("node_times", np.array([1.0, np.nan, 2.0, 4.0])), "node times must be finite"),
])
def test_format_validates_weights_and_times(tmp_path, bad, msg):
    key, arr = bad
    g = CSCGraph.from_edges(np.array([1, 2, 3]), np.array([0, 0, 1]), 4,
                            weights=arr if key == "weights" else None)
    node = {"label": np.array([0, 1, 0, 1])}
    edge = {}
    if key == "node_times":
        node["timestamp"] = arr
    if key == "edge_times":
        edge["timestamp"] = arr
    with pytest.raises(DatasetError, match=msg):
        write_dataset(tmp_path / "d", graph=g, node_features=node, splits={"train": np.array([0])},
                      num_classes=2, edge_features=edge)


def test_train_sampler_errors_name_the_dataset(files, capsys):
    rc, _, err = run_cli(["prepare", "generic", files / "plain", "--no-progress", "--edges", files / "e.csv",
                          "--features", files / "x.npy", "--labels", files / "y.npy"], capsys)
    assert rc == 0, err
    for sampler, fix in (("weighted", "--weight-col"), ("temporal", "--time-col")):
        rc, _, err = run_cli(["train", "--dataset", str(files / "plain"), "--epochs", "1",
                              "--sampler", sampler, "--device", "cpu", "--no-mlp"], capsys)
        assert rc != 0 and "plain" in err and fix in err, err


@pytest.mark.parametrize("extra", [["--sampler", "weighted"], ["--sampler", "labor"],
                                   ["--sampler", "temporal", "--temporal-strategy", "last"]])
def test_train_runs_with_each_sampler(files, capsys, extra):
    rc, _, err = run_cli(["prepare", "generic", files / "ds", "--no-progress", "--edges", files / "e.csv",
                          "--features", files / "x.npy", "--labels", files / "y.npy", "--weight-col", "2",
                          "--time-col", "3", "--node-times", files / "nt.npy", "--overwrite"], capsys)
    assert rc == 0, err
    rc, out, err = run_cli(["train", "--dataset", str(files / "ds"), "--epochs", "1", "--device", "cpu",
                            "--no-mlp", "--fanouts", "3,3", *extra], capsys)
    assert rc == 0, err
    assert "sampler " + extra[1] in out + err
