"""Broken datasets (hypothesis-generated) always give a DatasetError naming the file, never a
crash and never a silent load."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphfeed.datasets.format import Dataset, write_dataset
from graphfeed.datasets.schema import FORMAT_VERSION
from graphfeed.errors import DatasetError

from ds_helpers import small_arrays

N = 12


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    g, feats, splits = small_arrays(N)
    return write_dataset(tmp_path_factory.mktemp("golden") / "ds", graph=g, node_features=feats,
                         splits=splits, num_classes=3)


def _meta(root: Path) -> dict:
    return json.loads((root / "graphfeed.json").read_text())


def _set_meta(root: Path, m: dict) -> None:
    (root / "graphfeed.json").write_text(json.dumps(m))


def _save(path: Path, arr, **kw) -> None:
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.asarray(arr), **kw)


def _load(path: Path) -> np.ndarray:
    return np.array(np.load(path, allow_pickle=False))


ARRAYS = ["graph/indptr.npy", "graph/indices.npy", "node_features/feat.npy", "node_features/label.npy",
          "splits/train.npy", "splits/valid.npy", "splits/test.npy"]


# --------------------------------------------------------------------------- mutations
# each takes (root, draw) and returns the file name the error must mention
def m_truncate(root, draw):
    rel = draw(st.sampled_from(ARRAYS))
    p = root / rel
    size = p.stat().st_size
    cut = draw(st.integers(0, size - 1))
    with open(p, "r+b") as f:
        f.truncate(cut)
    return rel


def m_corrupt_header(root, draw):
    rel = draw(st.sampled_from(ARRAYS))
    p = root / rel
    data = bytearray(p.read_bytes())
    pos = draw(st.integers(0, 9))  # magic + version + header length
    data[pos] = (data[pos] + draw(st.integers(1, 255))) % 256
    p.write_bytes(bytes(data))
    return rel


def m_wrong_dtype(root, draw):
    rel, dtype = draw(st.sampled_from([
        ("graph/indptr.npy", np.int32), ("graph/indptr.npy", np.float64), ("graph/indices.npy", np.float32),
        ("graph/indices.npy", np.uint8), ("node_features/feat.npy", np.float64),
        ("node_features/label.npy", np.float32), ("splits/train.npy", np.float64),
    ]))
    p = root / rel
    _save(p, _load(p).astype(dtype))
    return rel


def m_indices_out_of_range(root, draw):
    p = root / "graph/indices.npy"
    a = _load(p)
    pos = draw(st.integers(0, a.shape[0] - 1))
    a[pos] = draw(st.one_of(st.integers(N, 2**31 - 1), st.integers(-(2**31), -1)))
    _save(p, a)
    return "indices.npy"


def m_split_out_of_range(root, draw):
    name = draw(st.sampled_from(["train", "valid", "test"]))
    p = root / f"splits/{name}.npy"
    a = _load(p)
    a[draw(st.integers(0, a.shape[0] - 1))] = draw(st.one_of(st.integers(N, 2**62), st.integers(-(2**62), -1)))
    _save(p, a)
    return f"{name}.npy"


def m_split_overlap(root, draw):
    a_name, b_name = draw(st.permutations(["train", "valid", "test"]))[:2]
    a = _load(root / f"splits/{a_name}.npy")
    b = _load(root / f"splits/{b_name}.npy")
    b[draw(st.integers(0, b.shape[0] - 1))] = a[draw(st.integers(0, a.shape[0] - 1))]
    _save(root / f"splits/{b_name}.npy", b)
    return ".npy"


def m_split_repeat(root, draw):
    p = root / "splits/train.npy"
    a = _load(p)
    i, j = draw(st.lists(st.integers(0, a.shape[0] - 1), min_size=2, max_size=2, unique=True))
    a[j] = a[i]
    _save(p, a)
    return "train.npy"


def m_feature_rows(root, draw):
    rel = draw(st.sampled_from(["node_features/feat.npy", "node_features/label.npy"]))
    p = root / rel
    a = _load(p)
    k = draw(st.integers(-3, 3).filter(lambda k: k != 0))
    a = a[:k] if k < 0 else np.concatenate([a, a[:k]])
    _save(p, a)
    m = _meta(root)
    if draw(st.booleans()):  # also make the metadata agree: still not one row per node
        name = Path(rel).stem
        m["node_features"][name]["shape"][0] = a.shape[0]
        _set_meta(root, m)
    return Path(rel).name


def m_indptr(root, draw):
    p = root / "graph/indptr.npy"
    a = _load(p)
    kind = draw(st.sampled_from(["decrease", "end", "start", "length"]))
    if kind == "decrease":
        i = draw(st.integers(1, a.shape[0] - 2))
        a[i] = a[i + 1] + draw(st.integers(1, 5))
    elif kind == "end":
        a[-1] += draw(st.integers(1, 5))
    elif kind == "start":
        a[0] = draw(st.integers(1, 3))
    else:
        a = a[:-1]
    _save(p, a)
    return "indptr.npy"


def m_pickled_object(root, draw):
    rel = draw(st.sampled_from(ARRAYS))
    obj = np.empty(N, dtype=object)
    obj[:] = [{"evil": i} for i in range(N)]
    _save(root / rel, obj, allow_pickle=True)
    return rel


def m_hostile_path(root, draw):
    m = _meta(root)
    kind = draw(st.sampled_from(["dotdot", "absolute", "symlink_file", "symlink_dir", "backslash"]))
    role = draw(st.sampled_from(["graph.indices", "feat", "label", "train"]))
    outside = root.parent / "outside"
    outside.mkdir(exist_ok=True)
    shutil.copy(root / "node_features/feat.npy", outside / "feat.npy")
    if kind == "dotdot":
        new = "../outside/feat.npy"
    elif kind == "absolute":
        new = str(outside / "feat.npy")
    elif kind == "backslash":
        new = "node_features\\..\\..\\outside\\feat.npy"
    elif kind == "symlink_file":
        os.symlink(outside / "feat.npy", root / "link.npy")
        new = "link.npy"
    else:
        os.symlink(outside, root / "linkdir")
        new = "linkdir/feat.npy"
    if role == "graph.indices":
        m["graph"]["indices"] = new
    elif role == "train":
        m["splits"]["train"]["path"] = new
    else:
        m["node_features"][role]["path"] = new
    _set_meta(root, m)
    return "graphfeed.json"


def m_metadata(root, draw):
    m = _meta(root)
    kind = draw(st.sampled_from([
        "version_new", "version_str", "version_missing", "unknown_key", "nested_unknown", "num_nodes_neg",
        "num_nodes_str", "task_type", "target_missing", "num_classes_zero", "num_edges", "dtype_name",
        "shape_type", "split_size", "malformed", "not_object", "nan", "layout", "bool_as_int",
    ]))
    if kind == "version_new":
        m["format_version"] = draw(st.integers(FORMAT_VERSION + 1, 10**6))
    elif kind == "version_str":
        m["format_version"] = "1"
    elif kind == "version_missing":
        del m["format_version"]
    elif kind == "unknown_key":
        m[draw(st.text("abcxyz_", min_size=1, max_size=8).filter(lambda s: s not in m))] = 1
    elif kind == "nested_unknown":
        m["graph"]["indptrr"] = "graph/indptr.npy"
    elif kind == "num_nodes_neg":
        m["num_nodes"] = -1
    elif kind == "num_nodes_str":
        m["num_nodes"] = str(N)
    elif kind == "task_type":
        m["task"]["type"] = draw(st.text(min_size=1, max_size=10).filter(lambda s: s != "node_classification"))
    elif kind == "target_missing":
        m["task"]["target"] = "nope"
    elif kind == "num_classes_zero":
        m["task"]["num_classes"] = 0
    elif kind == "num_edges":
        m["graph"]["num_edges"] += draw(st.integers(1, 100))
    elif kind == "dtype_name":
        m["node_features"]["feat"]["dtype"] = draw(st.sampled_from(["object", "O", "float128", "complex64", "V8"]))
    elif kind == "shape_type":
        m["node_features"]["feat"]["shape"] = draw(st.sampled_from([[], "12,5", [12.0, 5], None]))
    elif kind == "split_size":
        m["splits"]["test"]["size"] += 1
    elif kind == "layout":
        m["graph"]["layout"] = "csr"
    elif kind == "bool_as_int":
        m["num_nodes"] = True
    if kind == "malformed":
        text = json.dumps(m)
        cut = draw(st.integers(1, len(text) - 1))
        (root / "graphfeed.json").write_text(text[:cut])
    elif kind == "not_object":
        (root / "graphfeed.json").write_text(json.dumps([1, 2, 3]))
    elif kind == "nan":
        (root / "graphfeed.json").write_text(json.dumps(m).replace('"num_nodes": 12', '"num_nodes": NaN'))
    else:
        _set_meta(root, m)
    return ""  # the error may name graphfeed.json or the array whose header disagrees


MUTATIONS = [m_truncate, m_corrupt_header, m_wrong_dtype, m_indices_out_of_range, m_split_out_of_range,
             m_split_overlap, m_split_repeat, m_feature_rows, m_indptr, m_pickled_object, m_hostile_path,
             m_metadata]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), mutation=st.sampled_from(MUTATIONS), in_memory=st.booleans())
def test_broken_dataset_is_a_dataset_error(golden, data, mutation, in_memory):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ds"
        shutil.copytree(golden, root)
        expect = mutation(root, data.draw)
        with pytest.raises(DatasetError) as info:
            Dataset.open(root, in_memory=in_memory)
        msg = str(info.value)
        assert str(root) in msg and expect in msg, (mutation.__name__, msg)


def test_golden_opens(golden):
    assert Dataset.open(golden).num_nodes == N


def test_pickled_array_is_never_unpickled(tmp_path, golden, monkeypatch):
    """Loading must refuse before any object is constructed."""
    import pickle

    root = tmp_path / "ds"
    shutil.copytree(golden, root)
    obj = np.empty(N, dtype=object)
    _save(root / "node_features/label.npy", obj, allow_pickle=True)

    def boom(*a, **k):  # pragma: no cover - reaching it is the failure
        raise AssertionError("unpickling attempted")

    monkeypatch.setattr(pickle, "load", boom)
    monkeypatch.setattr(pickle, "loads", boom)
    with pytest.raises(DatasetError, match="label.npy"):
        Dataset.open(root)


def test_quick_validation_still_checks_the_graph_and_headers(tmp_path, golden):
    root = tmp_path / "ds"
    shutil.copytree(golden, root)
    a = _load(root / "graph/indices.npy")
    a[0] = N + 5
    _save(root / "graph/indices.npy", a)
    # quick skips the dataset's content scan, but the graph checks its own arrays (O(N + E)):
    # out-of-range ids would crash the sampler
    with pytest.raises(DatasetError, match="indices.npy"):
        Dataset.open(root, validate="quick")
    with pytest.raises(DatasetError, match=r"indices\[0\] = 17"):
        Dataset.open(root)
    with open(root / "graph/indices.npy", "r+b") as f:
        f.truncate(100)
    with pytest.raises(DatasetError, match="indices.npy"):
        Dataset.open(root, validate="quick")


def test_missing_folder_and_metadata(tmp_path):
    with pytest.raises(DatasetError, match="not a dataset folder"):
        Dataset.open(tmp_path / "missing")
    with pytest.raises(DatasetError, match="metadata file not found"):
        Dataset.open(tmp_path)
