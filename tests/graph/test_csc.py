"""CSCGraph: from_edges against a naive reference, storage round trip, validation, dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.graph.csc import INT32_MAX, CSCGraph, index_dtype


def reference_columns(src, dst, num_nodes, weights, add_reverse, drop_self_loops, drop_duplicates):
    """Per destination, the (source, weight) list in the documented order: input order, each
    edge's reverse right after it unless the input holds that reverse itself, first copy kept
    when dropping duplicates."""
    tagged = [[] for _ in range(num_nodes)]
    for e, (s, d) in enumerate(zip(src, dst)):
        w = None if weights is None else weights[e]
        if s == d and drop_self_loops:
            continue
        tagged[d].append((s, w, False))
        if add_reverse and s != d:
            tagged[s].append((d, w, True))
    cols = []
    for col in tagged:
        given = {s for s, _, rev in col if not rev}
        cols.append([(s, w) for s, w, rev in col if not (rev and s in given)])
    if drop_duplicates:
        deduped = []
        for col in cols:
            seen, keep = set(), []
            for s, w in col:
                if s not in seen:
                    seen.add(s)
                    keep.append((s, w))
            deduped.append(keep)
        cols = deduped
    return cols


@st.composite
def edge_lists(draw):
    n = draw(st.integers(1, 12))
    m = draw(st.integers(0, 40))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    extra = draw(st.integers(0, 3))  # trailing nodes without edges
    return n + extra, src, dst


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edges=edge_lists(),
    add_reverse=st.booleans(),
    drop_self_loops=st.booleans(),
    drop_duplicates=st.booleans(),
    weighted=st.booleans(),
    as_tensor=st.booleans(),
)
def test_from_edges_matches_reference(
    edges, add_reverse, drop_self_loops, drop_duplicates, weighted, as_tensor
):
    n, src, dst = edges
    weights = np.arange(len(src), dtype=np.float32) * 0.5 + 1 if weighted else None
    s, d = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    if as_tensor:
        s, d = torch.from_numpy(s).int(), torch.from_numpy(d)
    g = CSCGraph.from_edges(
        s, d, n, weights=weights, add_reverse=add_reverse,
        drop_self_loops=drop_self_loops, drop_duplicates=drop_duplicates,
    )
    cols = reference_columns(src, dst, n, weights, add_reverse, drop_self_loops, drop_duplicates)
    assert g.num_nodes == n
    assert g.indptr.dtype == np.int64 and g.indices.dtype == np.int32
    assert g.indptr.tolist() == np.cumsum([0] + [len(c) for c in cols]).tolist()
    assert g.indices.tolist() == [s_ for c in cols for s_, _ in c]
    assert g.num_edges == len(g.indices)
    if weighted:
        assert g.weights.dtype == np.float32
        assert g.weights.tolist() == [w for c in cols for _, w in c]
    else:
        assert g.weights is None
    assert g.in_degrees.tolist() == [len(c) for c in cols]
    g.validate()


def test_from_edges_infers_num_nodes_and_handles_empty():
    g = CSCGraph.from_edges([0, 4], [1, 2])
    assert g.num_nodes == 5 and g.indices.tolist() == [0, 4]
    e = CSCGraph.from_edges(np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert e.num_nodes == 0 and e.num_edges == 0 and e.indptr.tolist() == [0]
    e = CSCGraph.from_edges(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 3)
    assert e.indptr.tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(src=[0, 1], dst=[1]), "differ in length"),
        (dict(src=[0, 5], dst=[1, 2], num_nodes=5), "endpoint 5 is out of range"),
        (dict(src=[0, -1], dst=[1, 2], num_nodes=5), "endpoint -1 is out of range"),
        (dict(src=[0.5], dst=[1]), "integer"),
        (dict(src=[[0]], dst=[[1]]), "1-D"),
        (dict(src=[0, 1], dst=[1, 0], weights=[1.0]), "one entry per edge"),
    ],
)
def test_from_edges_rejects_bad_input(kwargs, match):
    with pytest.raises(GraphfeedError, match=match):
        CSCGraph.from_edges(**kwargs)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("mmap", [True, False])
def test_save_load_round_trip(tmp_path, weighted, mmap):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 50, 300), rng.integers(0, 50, 300)
    w = rng.random(300).astype(np.float32) if weighted else None
    g = CSCGraph.from_edges(src, dst, 50, weights=w)
    path = g.save(tmp_path / "g")
    assert sorted(p.name for p in path.iterdir()) == (
        ["indices.npy", "indptr.npy"] + (["weights.npy"] if weighted else [])
    )
    h = CSCGraph.load(path, mmap=mmap)
    assert np.array_equal(h.indptr, g.indptr) and np.array_equal(h.indices, g.indices)
    assert h.indices.dtype == g.indices.dtype
    assert (h.weights is None) == (not weighted)
    if weighted:
        assert np.array_equal(h.weights, g.weights)
    if mmap:
        assert not h.indices.flags.writeable and not h.indptr.flags.writeable
    with pytest.raises(FileExistsError):
        g.save(tmp_path / "g")
    g.save(tmp_path / "g", overwrite=True)
    # a torch view of the (possibly memory-mapped) arrays shares memory, no copy
    indptr_t, indices_t = h.tensors()
    assert indptr_t.data_ptr() == h.indptr.ctypes.data
    assert indices_t.dtype == torch.int32


def test_load_missing_file_is_a_dataset_error(tmp_path):
    (tmp_path / "g").mkdir()
    np.save(tmp_path / "g" / "indptr.npy", np.array([0, 0]))
    with pytest.raises(DatasetError, match="indices.npy"):
        CSCGraph.load(tmp_path / "g")


def test_load_inconsistent_arrays_is_a_dataset_error(tmp_path):
    (tmp_path / "g").mkdir()
    np.save(tmp_path / "g" / "indptr.npy", np.array([0, 2, 5]))
    np.save(tmp_path / "g" / "indices.npy", np.array([0, 1], dtype=np.int32))
    with pytest.raises(DatasetError, match="end at the edge count 2"):
        CSCGraph.load(tmp_path / "g")


def test_validate_catches_decreasing_indptr():
    # trusted=True skips the constructor's scan; validate() still runs it on demand
    g = CSCGraph(np.array([0, 3, 1, 3]), np.array([0, 1, 2], dtype=np.int32), trusted=True)
    with pytest.raises(DatasetError, match=r"indptr decreases at position 1 \(3 -> 1\)"):
        g.validate()
    with pytest.raises(GraphfeedError, match=r"indptr decreases at position 1 \(3 -> 1\)"):
        CSCGraph(np.array([0, 3, 1, 3]), np.array([0, 1, 2], dtype=np.int32))


@pytest.mark.parametrize("bad", [3, -1, 1000])
def test_validate_catches_out_of_range_index(bad):
    g = CSCGraph(np.array([0, 1, 3, 3]), np.array([0, bad, 2], dtype=np.int64), trusted=True)
    with pytest.raises(DatasetError, match=rf"indices\[1\] = {bad} is out of range \[0, 3\)"):
        g.validate(source="mygraph")


def test_validate_accepts_valid_graph():
    CSCGraph(np.array([0, 1, 3, 3]), np.array([2, 0, 1], dtype=np.int32)).validate()


def test_index_dtype_choice():
    assert index_dtype(0) == np.int32
    assert index_dtype(INT32_MAX) == np.int32
    assert index_dtype(INT32_MAX + 1) == np.int64
    # given indices keep their dtype when it is int32/int64; other ints are narrowed/widened
    g = CSCGraph(np.array([0, 1]), np.array([0], dtype=np.int64))
    assert g.indices.dtype == np.int64
    g = CSCGraph(np.array([0, 1], dtype=np.int32), np.array([0], dtype=np.uint16))
    assert g.indices.dtype == np.int32 and g.indptr.dtype == np.int64


def test_constructor_checks():
    with pytest.raises(GraphfeedError, match="start at 0"):
        CSCGraph(np.array([1, 2]), np.array([0, 0], dtype=np.int32))
    with pytest.raises(GraphfeedError, match="num_nodes \\+ 1"):
        CSCGraph(np.array([], dtype=np.int64), np.array([], dtype=np.int32))
    with pytest.raises(GraphfeedError, match="weights"):
        CSCGraph(np.array([0, 1]), np.array([0], dtype=np.int32), weights=np.ones(2))
