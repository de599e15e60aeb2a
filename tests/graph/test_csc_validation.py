"""Bad arrays from the Python API raise a clear error, never a signal (issue 12, defect 3).

The sampling kernels read ``indptr``/``indices`` without bounds checks, so ``CSCGraph`` checks
them when it is built (unless ``trusted=True``), and the samplers refuse out-of-range seeds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import graphfeed
from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.graph.csc import CSCGraph
from graphfeed.sampling.neighbor import NeighborSampler
from graphfeed.sampling.torch_sampler import TorchNeighborSampler

I32 = np.int32
# (indptr, indices, weights, expected message fragment): each breaks one rule
BAD = {
    "indptr decreases": ([0, 3, 1, 3], np.array([0, 1, 2], I32), None,
                         r"indptr decreases at position 1 \(3 -> 1\)"),
    "indptr[0] != 0": ([1, 2, 3], np.array([0, 1, 2], I32), None, r"start at 0.*indptr\[0\]=1"),
    "indptr[-1] != E": ([0, 1, 2], np.array([0, 1, 2], I32), None, r"end at the edge count 3"),
    "index == num_nodes": ([0, 1, 3, 3], np.array([2, 3, 1], I32), None,
                           r"indices\[1\] = 3 is out of range \[0, 3\)"),
    "negative index": ([0, 1, 3, 3], np.array([2, 0, -1], np.int64), None,
                       r"indices\[2\] = -1 is out of range"),
    "uint64 id that a cast would wrap into range": (
        [0, 1, 3, 3], np.array([2, 2**32 + 1, 1], np.uint64), None,
        r"indices\[1\] = 4294967297 is out of range"),
    "uint32 id beyond int32": ([0, 1, 3, 3], np.array([2, 2**31 + 1, 1], np.uint32), None,
                               r"indices\[1\] = 2147483649 is out of range"),
    "indptr beyond int64": (np.array([0, 2**63 + 5], np.uint64), np.array([0], I32), None,
                            r"beyond int64"),
    "float indices": ([0, 1, 3, 3], np.array([2.0, 0.0, 1.0]), None, r"indices must be an integer"),
    "bool indptr": (np.array([False, True]), np.array([0], I32), None, r"indptr must be an integer"),
    "2-D indices": ([0, 1, 3, 3], np.array([[2, 0, 1]], I32), None, r"indices must be 1-D"),
    "2-D indptr": ([[0, 1, 3, 3]], np.array([2, 0, 1], I32), None, r"indptr must be 1-D"),
    "empty indptr": (np.array([], np.int64), np.array([], I32), None, r"num_nodes \+ 1"),
    "weights too short": ([0, 1, 3, 3], np.array([2, 0, 1], I32), np.ones(2),
                          r"weights must have one entry per edge"),
    "weights 2-D": ([0, 1, 3, 3], np.array([2, 0, 1], I32), np.ones((3, 1)),
                    r"weights must have one entry per edge"),
    "object weights": ([0, 1, 3, 3], np.array([2, 0, 1], I32), np.array([1, "a", None], object),
                       r"weights must be real numbers"),
    "torch indptr decreases": (torch.tensor([0, 2, 1, 3]), torch.tensor([2, 0, 1]), None,
                               r"indptr decreases at position 1"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_arrays_raise_a_clear_error(case):
    indptr, indices, weights, match = BAD[case]
    with pytest.raises(GraphfeedError, match=match) as info:
        CSCGraph(indptr, indices, weights)
    assert isinstance(info.value, ValueError)


def test_valid_arrays_are_kept_without_copy():
    indptr, indices = np.array([0, 1, 3, 3]), np.array([2, 0, 1], I32)
    g = CSCGraph(indptr, indices)
    assert g.indptr is indptr and g.indices is indices and (g.num_nodes, g.num_edges) == (3, 3)


def test_trusted_skips_only_the_content_scan():
    g = CSCGraph([0, 1, 3, 3], np.array([2, 7, 1], I32), trusted=True)  # the caller's promise
    with pytest.raises(DatasetError, match=r"g: indices\[1\] = 7"):
        g.validate(source="g")
    # the O(1) checks still run
    with pytest.raises(GraphfeedError, match="end at the edge count"):
        CSCGraph([0, 1, 2], np.array([2, 0, 1], I32), trusted=True)


def _reference_valid(indptr, indices) -> bool:
    n = len(indptr) - 1
    return (
        indptr[0] == 0
        and indptr[-1] == len(indices)
        and all(a <= b for a, b in zip(indptr, indptr[1:]))
        and all(0 <= u < n for u in indices)
    )


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 12),
    edges=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=30),
    ptr_edit=st.one_of(st.none(), st.tuples(st.integers(0, 12), st.integers(-3, 40))),
    idx_edit=st.one_of(st.none(), st.tuples(st.integers(0, 29), st.integers(-3, 15))),
    wide=st.booleans(),
)
def test_constructor_accepts_exactly_the_valid_graphs(n, edges, ptr_edit, idx_edit, wide):
    src = [s % n for s, _ in edges]
    dst = [d % n for _, d in edges]
    g = CSCGraph.from_edges(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), n)
    indptr = g.indptr.copy()
    indices = g.indices.astype(np.int64 if wide else np.int32)
    if ptr_edit is not None:
        indptr[ptr_edit[0] % len(indptr)] = ptr_edit[1]
    if idx_edit is not None and len(indices):
        indices[idx_edit[0] % len(indices)] = idx_edit[1]
    if _reference_valid(indptr.tolist(), indices.tolist()):
        CSCGraph(indptr, indices)
    else:
        with pytest.raises(GraphfeedError):
            CSCGraph(indptr, indices)


def _corrupt_dataset(tmp_path: Path, value: int) -> Path:
    from graphfeed.datasets.format import write_dataset

    rng = np.random.default_rng(0)
    n = 20
    g = CSCGraph.from_edges(rng.integers(0, n, 60), rng.integers(0, n, 60), n)
    feats = {"feat": rng.standard_normal((n, 4)).astype(np.float32), "label": rng.integers(0, 2, n)}
    splits = {"train": np.arange(10), "valid": np.arange(10, 15), "test": np.arange(15, 20)}
    path = write_dataset(tmp_path / "ds", graph=g, node_features=feats, splits=splits,
                         num_classes=2)
    files = [p for p in path.rglob("indices.npy")]
    assert len(files) == 1
    arr = np.load(files[0], mmap_mode="r+")  # same header, one bad id: only a content scan sees it
    arr[len(arr) // 2] = value
    arr.flush()
    del arr
    return files[0]


@pytest.mark.parametrize("value", [20, -5, 1 << 30])
def test_quick_open_of_a_dataset_with_bad_indices_names_the_file(tmp_path, value):
    from graphfeed.datasets.format import Dataset

    bad_file = _corrupt_dataset(tmp_path, value)
    with pytest.raises(DatasetError, match=rf"{bad_file}: indices\[\d+\] = {value} is out of range"):
        Dataset.open(tmp_path / "ds", validate="quick")
    with pytest.raises(DatasetError, match=r"indices.npy: indices\[\d+\] = .* is out of range"):
        CSCGraph.load(bad_file.parent)
    with pytest.raises(GraphfeedError, match=r"is out of range"):
        Dataset.open(tmp_path / "ds", validate="quick", in_memory=True)


@pytest.mark.parametrize("seeds", [[0, 3], [-1], [2**40], np.array([2**64 - 1], np.uint64)])
@pytest.mark.parametrize("sampler", ["numba", "torch"])
def test_samplers_refuse_out_of_range_seeds(seeds, sampler):
    g = CSCGraph([0, 1, 3, 3], np.array([2, 0, 1], I32))
    s = NeighborSampler(g, [2]) if sampler == "numba" else TorchNeighborSampler.from_graph(g, [2])
    with pytest.raises(ValueError, match="out of range"):
        s.sample(seeds)


@pytest.mark.parametrize("case", ["indptr decreases", "index == num_nodes", "negative index"])
def test_torch_sampler_checks_raw_tensors(case):
    indptr, indices, _, match = BAD[case]
    indptr = torch.as_tensor(np.asarray(indptr, dtype=np.int64))
    indices = torch.as_tensor(np.asarray(indices))
    with pytest.raises(GraphfeedError, match=match.replace(r"is out of range \[0, 3\)", "")):
        TorchNeighborSampler(indptr, indices, [2])
    TorchNeighborSampler(indptr, indices, [2], trusted=True)  # the caller's promise


def test_bad_graphs_never_crash_the_process(tmp_path):
    """In a subprocess (a crash here would kill pytest): every bad graph of the issue is built
    and, were it accepted, sampled over all its nodes by both samplers. Each must end in a
    Python exception; the process must exit normally."""
    script = tmp_path / "crash_probe.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, torch
        from graphfeed.errors import GraphfeedError
        from graphfeed.graph.csc import CSCGraph
        from graphfeed.sampling.neighbor import NeighborSampler
        from graphfeed.sampling.torch_sampler import TorchNeighborSampler

        n = 2000
        rng = np.random.default_rng(0)
        good = CSCGraph.from_edges(rng.integers(0, n, 20000), rng.integers(0, n, 20000), n)
        cases = {}
        ind = good.indices.copy(); ind[::7] = n + 10**6; cases["far out of range"] = (good.indptr, ind)
        ind = good.indices.copy(); ind[5] = n; cases["neighbour == num_nodes"] = (good.indptr, ind)
        ind = good.indices.copy(); ind[::3] = -10**6; cases["negative"] = (good.indptr, ind)
        ptr = good.indptr.copy(); ptr[n // 2] = 10**9; cases["indptr spike"] = (ptr, good.indices)
        ptr = good.indptr.copy(); ptr[1:n // 2] = ptr[1:n // 2][::-1].copy()
        cases["non-monotone indptr"] = (ptr, good.indices)
        for name, (ptr, ind) in cases.items():
            try:
                g = CSCGraph(ptr, ind)
            except GraphfeedError as e:
                print("refused", name, "|", str(e)[:80])
                continue
            for s in (NeighborSampler(g, [-1, 25]), TorchNeighborSampler.from_graph(g, [-1, 25])):
                s.sample(torch.arange(n))
            print("ACCEPTED", name)
    """))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(graphfeed.__file__).parents[1]),
                                         env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    lines = r.stdout.splitlines()
    assert len(lines) == 5 and all(ln.startswith("refused ") for ln in lines), r.stdout
