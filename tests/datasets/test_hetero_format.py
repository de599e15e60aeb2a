"""The optional ``hetero`` section: write/open round trip, the built-in ``hetero`` dataset, and
fuzzed broken heterogeneous datasets that must fail with a DatasetError naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphfeed.datasets.format import Dataset, write_dataset
from graphfeed.datasets.hetero import HeteroParts
from graphfeed.errors import DatasetError
from graphfeed.graph.hetero import HeteroGraph

NUM = {"user": 7, "item": 5}
ETS = (("user", "buys", "item"), ("item", "bought_by", "user"), ("user", "follows", "user"))


def _graph():
    rng = np.random.default_rng(0)
    u, i = rng.integers(0, 7, 20), rng.integers(0, 5, 20)
    return HeteroGraph.from_edges(NUM, {ETS[0]: (u, i), ETS[1]: (i, u),
                                        ETS[2]: (rng.integers(0, 7, 10), rng.integers(0, 7, 10))},
                                  drop_duplicates=True)


def _write(path, **kw):
    g = _graph()
    labels = np.full(g.num_nodes, -1, np.int64)  # one label per global id, -1 for items
    off = int(g.node_offsets[g.type_id("user")])
    labels[off:off + 7] = np.arange(7) % 3
    feats = {"user": {"feat": np.arange(21, dtype=np.float32).reshape(7, 3)},
             "item": {"feat": np.ones((5, 2), np.float32), "price": np.arange(5.0)}}
    splits = {"train": np.array([0, 1, 2, 3]) + off, "test": np.array([5, 6]) + off}
    return write_dataset(path, graph=g.csc, node_features={"label": labels}, splits=splits,
                         num_classes=3, hetero=HeteroParts(g, feats, target_type="user"), **kw)


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("hg") / "ds")


def test_round_trip(golden):
    ds = Dataset.open(golden)
    g = _graph()
    h = ds.hetero
    assert isinstance(h, HeteroGraph)
    assert h.node_types == g.node_types and h.edge_types == g.edge_types
    assert np.array_equal(h.node_offsets, g.node_offsets)
    assert np.array_equal(np.asarray(h.edge_type), np.asarray(g.edge_type))
    for et in g.edge_types:
        assert all(np.array_equal(a, b) for a, b in zip(h.edges_of(et), g.edges_of(et)))
    assert ds.type_features["user"]["feat"].num_rows == 7
    assert np.array_equal(ds.type_features["item"]["price"].read(np.array([4])).numpy(), [4.0])
    assert ds.metadata.hetero.target_type == "user"
    # the reparsed metadata writes back identically
    from graphfeed.datasets.schema import parse_metadata

    raw = json.loads((golden / "graphfeed.json").read_text())
    assert parse_metadata(raw).to_json() == raw
    # homogeneous datasets stay without the section
    assert "hetero" not in raw["task"] and ds.metadata.format_version == 1


def test_in_memory_and_quick_open(golden):
    ds = Dataset.open(golden, in_memory=True, validate="quick")
    assert ds.hetero.num_edge_types == 3


def test_builtin_hetero_dataset(tmp_path):
    from graphfeed.datasets.open import open_dataset

    ds = open_dataset("hetero", str(tmp_path))
    h = ds.hetero
    assert h.node_types == ("author", "field", "paper") and h.num_edge_types == 4
    off = int(h.node_offsets[2])
    ids = ds.train_ids
    assert ids.min() >= off and ids.max() < h.num_nodes
    assert (ds.labels[ids] >= 0).all() and (np.asarray(ds.labels[:off]) == -1).all()
    assert {t: f["feat"].row_shape[0] for t, f in ds.type_features.items()} == {
        "author": 16, "field": 8, "paper": 32}


# --------------------------------------------------------------------------- broken datasets
def _meta(root: Path) -> dict:
    return json.loads((root / "graphfeed.json").read_text())


def _set(root: Path, m: dict) -> None:
    (root / "graphfeed.json").write_text(json.dumps(m))


def _save(path: Path, arr) -> None:
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.asarray(arr))


def b_unknown_node_type(root, draw):
    m = _meta(root)
    i = draw(st.integers(0, 2))
    j = draw(st.sampled_from([0, 2]))
    m["hetero"]["edge_types"][i][j] = "shop"
    _set(root, m)
    return "graphfeed.json", "shop"


def b_counts(root, draw):
    m = _meta(root)
    m["hetero"]["node_counts"][draw(st.integers(0, 1))] += draw(st.sampled_from([-1, 1, 5]))
    _set(root, m)
    return "graphfeed.json", "node_counts"


def b_edge_type_range(root, draw):
    p = root / "graph/edge_type.npy"
    a = np.load(p)
    a[draw(st.integers(0, a.shape[0] - 1))] = draw(st.sampled_from([-1, 3, 100]))
    _save(p, a)
    return "edge_type.npy", "out of range|not sorted"


def b_edge_type_swap(root, draw):
    # a relation id that is in range but wrong for the endpoints (or breaks the order)
    p = root / "graph/edge_type.npy"
    a = np.load(p)
    pos = draw(st.integers(0, a.shape[0] - 1))
    a[pos] = (int(a[pos]) + draw(st.integers(1, 2))) % 3
    _save(p, a)
    return "edge_type.npy", "is of type|not sorted"


def b_edge_type_dtype(root, draw):
    p = root / "graph/edge_type.npy"
    _save(p, np.load(p).astype(draw(st.sampled_from([np.float32, np.int64, np.uint8]))))
    return "edge_type.npy", "int8"


def b_edge_type_length(root, draw):
    p = root / "graph/edge_type.npy"
    _save(p, np.load(p)[: -draw(st.integers(1, 3))])
    return "edge_type.npy", "edge types"


def b_feature_rows(root, draw):
    p = root / "node_features/item/feat.npy"
    _save(p, np.ones((draw(st.sampled_from([4, 6, 7])), 2), np.float32))
    m = _meta(root)
    m["hetero"]["node_features"]["item"]["feat"]["shape"][0] = int(np.load(p).shape[0])
    _set(root, m)
    return "feat.npy", "rows"


def b_target_type(root, draw):
    m = _meta(root)
    m["hetero"]["target_type"] = draw(st.sampled_from(["shop", "item"]))
    _set(root, m)
    return "graphfeed.json|train.npy|test.npy", "target type|shop"


def b_split_type(root, draw):
    p = root / "splits/train.npy"
    a = np.load(p)
    item = draw(st.integers(7, 11))  # an item's global id, with a valid label
    a[draw(st.integers(0, a.shape[0] - 1))] = item
    _save(p, a)
    lp = root / "node_features/label.npy"
    labels = np.load(lp)
    labels[item] = 0
    _save(lp, labels)
    return "train.npy", "not a node of the target type"


def b_bad_keys(root, draw):
    m = _meta(root)
    what = draw(st.sampled_from(["extra", "types", "dup", "feattype", "path"]))
    if what == "extra":
        m["hetero"]["colour"] = 1
    elif what == "types":
        m["hetero"]["node_types"] = "user"
    elif what == "dup":
        m["hetero"]["edge_types"].append(m["hetero"]["edge_types"][0])
    elif what == "feattype":
        m["hetero"]["node_features"]["shop"] = {}
    else:
        m["hetero"]["edge_type"] = "../outside.npy"
    _set(root, m)
    return "graphfeed.json", "hetero"


BREAKERS = [b_unknown_node_type, b_counts, b_edge_type_range, b_edge_type_swap,
            b_edge_type_dtype, b_edge_type_length, b_feature_rows, b_target_type, b_split_type,
            b_bad_keys]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), breaker=st.sampled_from(BREAKERS))
def test_broken_hetero_dataset_is_a_dataset_error(golden, tmp_path_factory, data, breaker):
    root = tmp_path_factory.mktemp("broken") / "ds"
    shutil.copytree(golden, root)
    file_pat, msg_pat = breaker(root, data.draw)
    with pytest.raises(DatasetError) as e:
        Dataset.open(root)
    import re

    text = str(e.value)
    assert re.search(file_pat, text), text
    assert re.search(msg_pat, text), text


def test_writer_refuses_a_bad_hetero_part(tmp_path):
    g = _graph()
    with pytest.raises(Exception, match="unknown node type"):
        HeteroParts(g, {"shop": {}})
    with pytest.raises(DatasetError, match="HeteroGraph"):
        HeteroParts(g.csc)
    labels = np.zeros(g.num_nodes, np.int64)
    with pytest.raises(DatasetError, match="refusing to publish"):
        write_dataset(tmp_path / "x", graph=g.csc, node_features={"label": labels},
                      splits={"train": np.array([0, 1])}, num_classes=1,
                      hetero=HeteroParts(g, {"item": {"feat": np.ones((4, 2))}}))
    assert not (tmp_path / "x").exists()
