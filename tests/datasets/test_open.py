"""open_dataset: a built-in name or a prepared folder, one clear error for anything else."""

from __future__ import annotations

import numpy as np
import pytest

import graphfeed.datasets as gd
from graphfeed.datasets.format import Dataset
from graphfeed.datasets.open import open_dataset
from graphfeed.errors import GraphfeedError


def test_exported_lazily_from_the_package():
    assert "open_dataset" in gd.__all__
    assert gd.open_dataset is open_dataset


def test_folder_opens_as_dataset(dataset_dir):
    ds = open_dataset(str(dataset_dir))
    assert isinstance(ds, Dataset)
    assert ds.num_nodes == Dataset.open(dataset_dir).num_nodes
    np.testing.assert_array_equal(ds.graph.indptr, Dataset.open(dataset_dir).graph.indptr)


def test_builtin_name_generates_into_data_root(tmp_path):
    ds = open_dataset("tiny", str(tmp_path))
    assert ds.name == "synthetic-tiny" and ds.num_nodes == 3000
    assert (ds.path / "graphfeed.json").is_file() and tmp_path in ds.path.parents
    again = open_dataset("tiny", str(tmp_path))  # cached: opens the same folder
    assert again.path == ds.path


@pytest.mark.parametrize("spec", ["no-such-dataset", "huge"])
def test_unknown_spec_names_builtins(spec, tmp_path):
    with pytest.raises(GraphfeedError, match=r"neither a built-in dataset \(tiny, small, medium, hetero\) nor a folder"):
        open_dataset(str(tmp_path / spec))
    with pytest.raises(GraphfeedError, match="prepare one with 'graphfeed prepare'"):
        open_dataset(spec)


def test_file_is_not_a_dataset(tmp_path):
    f = tmp_path / "x.npy"
    np.save(f, np.zeros(3))
    with pytest.raises(GraphfeedError, match="neither a built-in"):
        open_dataset(str(f))
