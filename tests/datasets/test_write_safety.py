"""Writers never touch anything outside their output, and never delete a user's folder."""

from __future__ import annotations

import numpy as np
import pytest

from graphfeed import CSCGraph, DatasetError
from graphfeed._io import atomic_dir
from graphfeed.datasets.format import write_dataset


def _graph():
    return CSCGraph.from_edges(np.arange(9), np.arange(1, 10), 10)


@pytest.mark.parametrize("where", ["node_features", "splits"])
@pytest.mark.parametrize("name", ["../../evil", "/abs", ".hidden", "a/b", ""])
def test_hostile_names_are_refused_before_anything_is_written(tmp_path, where, name):
    feats = {"label": np.zeros(10, np.int64)}
    splits = {"train": np.arange(3)}
    (feats if where == "node_features" else splits)[name] = (
        np.zeros((10, 2), np.float32) if where == "node_features" else np.arange(2)
    )
    with pytest.raises(DatasetError, match="names may hold"):
        write_dataset(tmp_path / "out" / "ds", graph=_graph(), node_features=feats, splits=splits,
                      num_classes=2)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert written == []


def test_overwrite_refuses_a_folder_graphfeed_did_not_make(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.txt").write_text("years of work")
    with pytest.raises(FileExistsError, match="does not\\s+look like something graphfeed made"):
        write_dataset(precious, graph=_graph(), node_features={"label": np.zeros(10, np.int64)},
                      splits={"train": np.arange(3)}, num_classes=2, overwrite=True)
    assert (precious / "thesis.txt").read_text() == "years of work"


def test_overwrite_replaces_a_dataset_and_an_empty_folder(tmp_path):
    kw = dict(graph=_graph(), node_features={"label": np.zeros(10, np.int64)},
              splits={"train": np.arange(3)}, num_classes=2)
    write_dataset(tmp_path / "ds", **kw)
    write_dataset(tmp_path / "ds", overwrite=True, **kw)
    (tmp_path / "empty").mkdir()
    with atomic_dir(tmp_path / "empty", overwrite=True, markers=("graphfeed.json",)) as t:
        (t / "x").write_text("1")
    assert (tmp_path / "empty" / "x").read_text() == "1"
