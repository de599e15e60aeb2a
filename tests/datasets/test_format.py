"""Round trips of the on-disk format: write_dataset -> Dataset.open, memory maps, in_memory."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from graphfeed.datasets.format import Dataset, DatasetWriter, write_dataset
from graphfeed.datasets.schema import METADATA_FILE, parse_metadata
from graphfeed.errors import DatasetError, GraphfeedError

from ds_helpers import is_memory_mapped, small_arrays


def test_round_trip_is_memory_mapped(dataset_dir):
    g, feats, splits = small_arrays()
    ds = Dataset.open(dataset_dir)
    assert ds.num_nodes == g.num_nodes and ds.num_edges == g.num_edges
    assert ds.num_classes == 3 and ds.target == "label"
    np.testing.assert_array_equal(ds.graph.indptr, g.indptr)
    np.testing.assert_array_equal(ds.graph.indices, g.indices)
    for arr in (ds.graph.indptr, ds.graph.indices, ds.labels, ds.train_ids):
        assert is_memory_mapped(arr), type(arr)
        assert not arr.flags.writeable
    np.testing.assert_array_equal(ds.train_ids, splits["train"])
    np.testing.assert_array_equal(ds.split("valid"), splits["valid"])
    assert ds.test_ids.dtype == np.int64
    rows = ds.features["feat"].read(torch.tensor([3, 0, 3]))
    np.testing.assert_array_equal(rows.numpy(), feats["feat"][[3, 0, 3]])
    assert ds.node_feature("label").read([1]).item() == feats["label"][1]
    with pytest.raises(GraphfeedError, match="no split"):
        ds.split("nope")
    with pytest.raises(GraphfeedError, match="no node feature"):
        ds.node_feature("nope")


def test_in_memory_loads_arrays(dataset_dir):
    ds = Dataset.open(dataset_dir, in_memory=True)
    assert not is_memory_mapped(ds.graph.indices)
    assert not is_memory_mapped(ds.labels)
    assert ds.features["feat"].shape == (12, 5)


def test_metadata_is_versioned_json(dataset_dir):
    raw = json.loads((dataset_dir / METADATA_FILE).read_text())
    assert raw["format_version"] == 1
    assert raw["task"] == {"type": "node_classification", "target": "label", "num_classes": 3}
    assert raw["node_features"]["feat"]["dtype"] == "float32"
    assert raw["edge_features"] == {}
    # the writer's output parses back to the same metadata
    assert parse_metadata(raw).to_json() == raw


def test_write_refuses_existing_and_overwrites(dataset_dir):
    g, feats, splits = small_arrays(seed=1)
    with pytest.raises(FileExistsError):
        write_dataset(dataset_dir, graph=g, node_features=feats, splits=splits, num_classes=3)
    write_dataset(dataset_dir, graph=g, node_features=feats, splits=splits, num_classes=3, overwrite=True)
    np.testing.assert_array_equal(Dataset.open(dataset_dir).graph.indices, g.indices)


def test_write_validates_before_publishing(tmp_path):
    g, feats, splits = small_arrays()
    bad = dict(splits, valid=np.array([splits["train"][0]]))  # overlaps train
    with pytest.raises(DatasetError, match="both split"):
        write_dataset(tmp_path / "x", graph=g, node_features=feats, splits=bad, num_classes=3)
    assert not (tmp_path / "x").exists()
    assert not list(tmp_path.glob(".x.tmp-*"))
    short = dict(feats, feat=feats["feat"][:-1])
    with pytest.raises(DatasetError, match="rows"):
        write_dataset(tmp_path / "x", graph=g, node_features=short, splits=splits, num_classes=3)
    with pytest.raises(DatasetError, match="outside"):  # label 2 with 2 classes
        write_dataset(tmp_path / "x", graph=g, node_features=feats, splits=splits, num_classes=2)
    assert not (tmp_path / "x").exists()


def test_edge_features_and_extra_round_trip(tmp_path):
    g, feats, splits = small_arrays()
    ew = np.arange(g.num_edges, dtype=np.float32)
    p = write_dataset(tmp_path / "e", graph=g, node_features=feats, splits=splits, num_classes=3,
                      edge_features={"w": ew}, extra={"source": "test"}, name="named")
    ds = Dataset.open(p)
    assert ds.name == "named" and ds.metadata.extra == {"source": "test"}
    np.testing.assert_array_equal(ds.edge_features["w"], ew)


def test_writer_without_finish_publishes_nothing(tmp_path):
    with pytest.raises(DatasetError, match="without finish"):
        with DatasetWriter(tmp_path / "w") as w:
            w.save_array("graph/indptr.npy", np.zeros(1, np.int64))
    assert not (tmp_path / "w").exists()


def test_memory_estimate(dataset_dir):
    from graphfeed.placement.estimate import estimate_memory

    ds = Dataset.open(dataset_dir)
    est = estimate_memory(dataset_dir, nproc=4, cache_bytes=100)
    assert est.graph_bytes == ds.graph.indptr.nbytes + ds.graph.indices.nbytes
    assert est.feature_bytes == 12 * 5 * 4 + 12 * 8
    d = est.data_bytes
    assert est.placement("cpu-cpu").host_bytes == d
    assert est.placement("ram-private").host_bytes == 4 * d
    assert est.placement("disk-cache").host_bytes == est.graph_bytes + 4 * 100
    assert est.placement("cuda-cuda").gpu_bytes == d and est.placement("cuda-cuda").host_bytes == 0
    assert est.placement("pinned-cuda").gpu_bytes == 0
    assert est.placement("pinned-cuda").host_bytes == d
    # one row per placement mode, from the modes table, then the CPU modes' storage rows
    from graphfeed.placement.modes import MODES

    assert [p.placement for p in est.placements] == [*MODES, "ram-private", "disk-cache"]
    assert estimate_memory(ds).graph_bytes == est.graph_bytes
    # arrays already opened are used as they are (inspect opens the folder once)
    from graphfeed.datasets.validate import load_folder

    arrays = load_folder(dataset_dir, full=False)
    assert estimate_memory(arrays, nproc=4, cache_bytes=100) == est
    assert ds.arrays.metadata == arrays.metadata
    with pytest.raises(GraphfeedError):
        estimate_memory(dataset_dir, nproc=0)


def test_inspect_cli(dataset_dir, capsys):
    import argparse

    from graphfeed.cli import inspect as ins

    parser = argparse.ArgumentParser()
    ins.add_parser(parser.add_subparsers())
    assert ins.run(parser.parse_args(["inspect", str(dataset_dir), "--nproc", "3", "--json"])) == 0
    info = json.loads(capsys.readouterr().out)
    deg = np.diff(Dataset.open(dataset_dir).graph.indptr)
    assert info["num_nodes"] == 12 and info["in_degree"]["max"] == deg.max()
    assert info["in_degree"]["median"] == float(np.median(deg))
    assert [e["nproc"] for e in info["estimates"]] == [1, 3]
    assert ins.run(parser.parse_args(["inspect", str(dataset_dir), "--cache-size", "1KB"])) == 0
    text = capsys.readouterr().out
    assert "in-degree" in text and "cuda-cuda" in text and "feat" in text
