"""The OGB heterogeneous raw layout (ogbn-mag style) importer: ``graphfeed prepare ogb-hetero``."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from graphfeed.cli.main import main
from graphfeed.datasets.format import Dataset
from graphfeed.errors import DatasetError

COUNTS = {"author": 6, "paper": 8, "field_of_study": 3}


def _gz(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)


def mag_like(root: Path) -> Path:
    rng = np.random.default_rng(0)
    raw = root / "raw"
    _gz(raw / "num-node-dict.csv.gz", ",".join(COUNTS) + "\n" + ",".join(map(str, COUNTS.values())) + "\n")
    rels = {("author", "writes", "paper"): (rng.integers(0, 6, 15), rng.integers(0, 8, 15)),
            ("paper", "cites", "paper"): (rng.integers(0, 8, 12), rng.integers(0, 8, 12)),
            ("paper", "has_topic", "field_of_study"): (np.arange(8), rng.integers(0, 3, 8))}
    for (s, r, d), (a, b) in rels.items():
        _gz(raw / "relations" / f"{s}___{r}___{d}" / "edge.csv.gz",
            "".join(f"{x},{y}\n" for x, y in zip(a, b)))
    _gz(raw / "node-feat" / "paper" / "node-feat.csv.gz",
        "".join(",".join(f"{v:.3f}" for v in row) + "\n" for row in rng.standard_normal((8, 4))))
    _gz(raw / "node-label" / "paper" / "node-label.csv.gz", "".join(f"{i % 3}\n" for i in range(8)))
    for k, ids in (("train", [0, 1, 2, 3]), ("valid", [4, 5]), ("test", [6, 7])):
        _gz(root / "split" / "time" / "paper" / f"{k}.csv.gz", "".join(f"{i}\n" for i in ids))
    return root


def test_import_mag_like(tmp_path):
    src = mag_like(tmp_path / "mag")
    assert main(["prepare", "ogb-hetero", str(src), str(tmp_path / "out"), "--undirected"]) == 0
    ds = Dataset.open(tmp_path / "out")
    h = ds.hetero
    assert h.num_nodes_dict == COUNTS
    assert ("paper", "rev_writes", "author") in h.edge_types and h.num_edge_types == 6
    off = int(h.node_offsets[h.type_id("paper")])
    assert ds.train_ids.tolist() == [off + i for i in range(4)]
    assert ds.metadata.hetero.target_type == "paper" and ds.num_classes == 3
    assert ds.type_features["paper"]["feat"].num_rows == 8 and "author" not in ds.type_features
    # every stored edge is one of the input file's, in type-local ids
    lines = gzip.open(src / "raw/relations/author___writes___paper/edge.csv.gz", "rt").read().split()
    pairs = {tuple(map(int, ln.split(","))) for ln in lines}
    s, d = h.edges_of(("author", "writes", "paper"))
    assert set(zip(s.tolist(), d.tolist())) == pairs


def test_import_errors(tmp_path):
    from graphfeed.datasets.importers.ogb_hetero import prepare_ogb_hetero

    src = mag_like(tmp_path / "mag")
    bad = src / "raw/relations/author___writes___venue"
    _gz(bad / "edge.csv.gz", "0,0\n")
    with pytest.raises(DatasetError, match="node type 'venue' is not in num-node-dict"):
        prepare_ogb_hetero(src, tmp_path / "o1")
    for p in bad.iterdir():
        p.unlink()
    bad.rmdir()
    _gz(src / "raw/relations/paper___cites___paper/edge.csv.gz", "0,9\n")
    with pytest.raises(DatasetError, match="out of range"):
        prepare_ogb_hetero(src, tmp_path / "o2")
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()
    with pytest.raises(DatasetError, match="no raw/"):
        prepare_ogb_hetero(tmp_path, tmp_path / "o3")
