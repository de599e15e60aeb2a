"""``graphfeed partition``: no edge, feature row or split id is lost; ids relabel consistently;
the output is atomic and validated."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.partition import (assign_parts, check_partition, load_part, partition_dataset,
                                 read_book)

METHODS = ["random", pytest.param("metis", marks=pytest.mark.filterwarnings("ignore"))]


def _edges(indptr, indices, dst_map=None, src_map=None):
    """Every edge as (src, dst) pairs in dataset ids, sorted."""
    indptr = np.asarray(indptr)
    dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    src = np.asarray(indices, dtype=np.int64)
    if dst_map is not None:
        dst = dst_map[dst]
    if src_map is not None:
        src = src_map[src]
    e = np.stack([src, dst], 1)
    return e[np.lexsort((e[:, 1], e[:, 0]))]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("parts", [1, 3, 4])
def test_read_back_loses_nothing(tiny_dataset, tmp_path, method, parts):
    if method == "metis":
        pytest.importorskip("pymetis")
    ds = tiny_dataset
    book = partition_dataset(ds, tmp_path / "p", parts, method=method)
    assert book.num_parts == parts and book.num_nodes == ds.num_nodes
    orig = book.orig_ids()
    assert np.array_equal(np.sort(orig), np.arange(ds.num_nodes))  # a permutation
    whole = _edges(ds.graph.indptr, ds.graph.indices)
    got, cut = [], 0
    for k in range(parts):
        p = load_part(book, k)
        assert (p.lo, p.hi) == (int(book.offsets[k]), int(book.offsets[k + 1]))
        assert np.array_equal(p.orig_ids, orig[p.lo:p.hi])
        # each part owns its range: destinations local, sources global (new ids)
        got.append(_edges(p.indptr, p.indices, dst_map=p.orig_ids, src_map=orig))
        owner = book.owner(np.asarray(p.indices, dtype=np.int64))
        cut += int(np.count_nonzero(owner != k))
        # in-edges keep the dataset's order per node (keyed sampling depends on it)
        for j in (0, p.num_own // 2, p.num_own - 1):
            v = p.orig_ids[j]
            mine = orig[np.asarray(p.indices[p.indptr[j]:p.indptr[j + 1]])]
            assert np.array_equal(mine, ds.graph.indices[ds.graph.indptr[v]:ds.graph.indptr[v + 1]])
        for name in book.features:
            assert np.array_equal(p.features[name], np.asarray(ds.arrays.node_features[name])[p.orig_ids])
        for s in book.splits:
            assert np.all((p.splits[s] >= p.lo) & (p.splits[s] < p.hi))
    got = np.concatenate(got)
    got = got[np.lexsort((got[:, 1], got[:, 0]))]
    assert np.array_equal(got, whole)  # no edge lost or added
    assert cut == book.edge_cut
    for s in book.splits:
        ids = np.concatenate([load_part(book, k).splits[s] for k in range(parts)])
        assert np.array_equal(np.sort(orig[ids]), np.sort(ds.split(s)))


def test_random_is_balanced_and_seeded(tiny_dataset):
    a = assign_parts(tiny_dataset, 4, "random", seed=1)
    assert np.bincount(a).max() - np.bincount(a).min() <= 1
    assert np.array_equal(a, assign_parts(tiny_dataset, 4, "random", seed=1))
    assert not np.array_equal(a, assign_parts(tiny_dataset, 4, "random", seed=2))


def test_metis_cuts_less_and_balances_train_ids(tiny_dataset, tmp_path):
    pytest.importorskip("pymetis")
    r = partition_dataset(tiny_dataset, tmp_path / "r", 4, method="random")
    m = partition_dataset(tiny_dataset, tmp_path / "m", 4, method="metis")
    assert m.edge_cut < 0.7 * r.edge_cut
    assert m.stats["train_imbalance"] < 1.1
    assert m.stats["node_imbalance"] < 1.1


def test_metis_without_pymetis_names_the_extra(tiny_dataset, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pymetis", None)
    with pytest.raises(ImportError, match=r"graphfeed\[partition\]"):
        partition_dataset(tiny_dataset, tmp_path / "m", 2, method="metis")
    assert not (tmp_path / "m").exists()


def test_bad_arguments(tiny_dataset, tmp_path):
    with pytest.raises(GraphfeedError, match="method"):
        assign_parts(tiny_dataset, 2, "spectral")
    with pytest.raises(GraphfeedError, match="parts"):
        assign_parts(tiny_dataset, 0, "random")
    partition_dataset(tiny_dataset, tmp_path / "p", 2, method="random")
    with pytest.raises(FileExistsError):
        partition_dataset(tiny_dataset, tmp_path / "p", 2, method="random")
    with pytest.raises(DatasetError, match="not a partitioned dataset"):
        read_book(tmp_path)


def test_a_failed_write_publishes_nothing(tiny_dataset, tmp_path, monkeypatch):
    from graphfeed.partition import partitioner

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(partitioner, "_copy_rows", boom)
    with pytest.raises(OSError):
        partition_dataset(tiny_dataset, tmp_path / "p", 2, method="random")
    # only the writers' lock file (.p.lock, as prepare leaves .OUT.lock) remains
    assert [p.name for p in tmp_path.iterdir()] == [".p.lock"]


def test_a_disk_without_room_is_refused_before_writing(tiny_dataset, tmp_path, monkeypatch):
    import os

    real = os.statvfs

    class Full:
        def __init__(self, st):
            self.f_bavail, self.f_frsize = 1, st.f_frsize

    monkeypatch.setattr(os, "statvfs", lambda p: Full(real(p)))
    with pytest.raises(DatasetError, match="partitioning 'synthetic-tiny' into 2 parts would "
                                           "need .* on disk"):
        partition_dataset(tiny_dataset, tmp_path / "p", 2, method="random")
    assert list(tmp_path.iterdir()) == []


def test_check_finds_a_corrupt_part(tiny_dataset, tmp_path):
    book = partition_dataset(tiny_dataset, tmp_path / "p", 2, method="random")
    ind = tmp_path / "p" / "part-00001" / "indices.npy"
    a = np.load(ind)
    a[0] = book.num_nodes + 5
    np.save(ind, a)
    with pytest.raises(DatasetError, match="indices.npy"):
        check_partition(tmp_path / "p")
    raw = json.loads((tmp_path / "p" / "partition.json").read_text())
    raw["offsets"][1] += 1
    raw["offsets"][2] += 5
    (tmp_path / "p" / "partition.json").write_text(json.dumps(raw))
    with pytest.raises(DatasetError, match="offsets"):
        read_book(tmp_path / "p")


def test_cli(tiny_dataset, tmp_path, capsys):
    from graphfeed.cli.main import main

    assert main(["partition", str(tiny_dataset.path), str(tmp_path / "p"), "--parts", "2",
                 "--method", "random", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_parts"] == 2 and out["method"] == "random" and out["edge_cut"] > 0
    assert main(["partition", str(tiny_dataset.path), str(tmp_path / "p"), "--parts", "2"]) == 2
    assert "already exists" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["hetero", "link"])
def test_refuses_what_it_cannot_split(name, tmp_path):
    """A heterogeneous or a link-prediction dataset is refused before anything is written (their
    types and pair splits have no place in a part yet)."""
    from graphfeed.datasets.synthetic import load_builtin

    ds = load_builtin(name, tmp_path / "data")
    with pytest.raises(GraphfeedError, match="partitioning supports"):
        partition_dataset(ds, tmp_path / "out", 2, method="random")
    assert not (tmp_path / "out").exists()



def _set(i, value):
    return lambda a, root: a.__setitem__(i, value)


def _train_id(j):
    return lambda a, root: a.__setitem__(0, np.load(root / "splits" / "train.npy")[j])


# (file of part 1, edit, what the error says): each reached the kernels or the loader unchecked
# (issue 29: train --partitions died with SIGABRT, bench dist reported throughput)
_PART_DAMAGE = [
    ("indices.npy", _set(0, 2**31 - 5), r"indices\[0\] = 2147483643 is out of range \[0, 3000\)"),
    ("indices.npy", _set(3, 3000), r"indices\[3\] = 3000 is out of range"),
    ("indices.npy", _set(4, -1), r"indices\[4\] = -1 is out of range"),
    ("indptr.npy", _set(5, 10**6), r"indptr decreases at position 5"),
    ("orig_ids.npy", _set(1, 3000), r"ids outside \[0, 3000\)"),
    ("splits/train.npy", _set(0, 0), r"id 0 \(position 0\) is outside the part's range"),
    ("splits/train.npy", _train_id(1), r"repeats id .* \(position 1\)"),
    ("splits/valid.npy", _train_id(0), "is also in split 'train'; splits must be disjoint"),
    ("node_features/label.npy", lambda a, root: a.fill(99),
     r"label of node .* is 99, outside \[0, num_classes = 5\)"),
]


@pytest.mark.parametrize("file,edit,msg", _PART_DAMAGE,
                         ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(_PART_DAMAGE)])
def test_load_part_checks_every_value_the_kernels_index_with(tiny_dataset, tmp_path, file, edit,
                                                             msg):
    book = partition_dataset(tiny_dataset, tmp_path / "p", 2, method="random")
    root = tmp_path / "p" / "part-00001"
    load_part(book, 1)  # the part as written opens
    a = np.load(root / file)
    edit(a, root)
    np.save(root / file, a)
    load_part(book, 0)  # the other part is untouched
    with pytest.raises(DatasetError, match=msg) as e:
        load_part(book, 1)
    assert str(e.value).startswith(f"{root / file}: ")  # names the file
    with pytest.raises(DatasetError, match=f"{root / file}: "):
        check_partition(tmp_path / "p")
