"""Each form real datasets come in, imported with `graphfeed prepare` alone: an npz edge array
under a user-chosen key, boolean split masks, several stored splits, string labels, sparse JSON
and scipy-sparse features, edge weights and timestamps."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphfeed.datasets.format import Dataset, write_dataset
from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.graph.csc import CSCGraph

from ds_helpers import run_cli, small_arrays

N = 30


@pytest.fixture
def base(tmp_path):
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, N, 120), rng.integers(0, N, 120)
    np.save(tmp_path / "x.npy", rng.standard_normal((N, 4)).astype(np.float32))
    y = rng.integers(0, 3, N)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "e.csv").write_text("".join(f"{s},{d}\n" for s, d in zip(src, dst)))
    return tmp_path, src, dst, y


def _prep(capsys, tmp, *args):
    rc, out, err = run_cli(["prepare", "generic", tmp / "out", "--no-progress", *args], capsys)
    assert rc == 0, err
    return Dataset.open(tmp / "out"), out


def test_npz_edges_under_a_named_key(base, capsys):
    tmp, src, dst, _ = base
    np.savez(tmp / "g.npz", adjacency=np.stack([src, dst]), other=np.zeros(3))
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "g.npz", "--edge-key", "adjacency", "--labels", tmp / "y.npy")
    np.testing.assert_array_equal(ds.graph.indices, CSCGraph.from_edges(src, dst, N).indices)
    np.savez(tmp / "h.npz", a=src.astype(np.uint32), b=dst.astype(np.uint32))
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "h.npz", "--edge-key", "a,b", "--labels", tmp / "y.npy",
                  "--overwrite")
    np.testing.assert_array_equal(ds.graph.indices, CSCGraph.from_edges(src, dst, N).indices)
    rc, _, err = run_cli(["prepare", "generic", tmp / "o2", "--edges", tmp / "g.npz", "--edge-key", "nope",
                          "--labels", tmp / "y.npy"], capsys)
    assert rc == 2 and "no array named 'nope'" in err and "adjacency" in err


def test_boolean_split_masks(base, capsys):
    tmp, _, _, y = base
    idx = np.arange(N)
    masks = {"train": idx < 15, "valid": (idx >= 15) & (idx < 20), "test": idx >= 20}
    np.savez(tmp / "masks.npz", **{f"{k}_mask": v for k, v in masks.items()})
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "e.csv", "--labels", tmp / "y.npy",
                  *[a for k in masks for a in (f"--{k}", f"{tmp / 'masks.npz'}:{k}_mask")])
    for k, m in masks.items():
        np.testing.assert_array_equal(ds.split(k), np.flatnonzero(m))
    np.save(tmp / "short_mask.npy", np.ones(N - 1, bool))
    rc, _, err = run_cli(["prepare", "generic", tmp / "o2", "--edges", tmp / "e.csv", "--labels", tmp / "y.npy",
                          "--train", tmp / "short_mask.npy"], capsys)
    assert rc == 2 and "one entry per node (30)" in err


def test_several_stored_splits_are_one_dataset_with_split_indices(base, capsys):
    tmp, _, _, y = base
    rng = np.random.default_rng(0)
    k = 10
    train = np.zeros((N, k), bool)  # PyG layout: one column per split
    valid = np.zeros((N, k), bool)
    for i in range(k):
        perm = rng.permutation(N)
        train[perm[:12], i] = True
        valid[perm[12:18], i] = True
    test = np.zeros(N, bool)  # one test set shared by the 10 splits: taken from what no split uses
    np.save(tmp / "train.npy", train)
    np.save(tmp / "valid.npy", valid)
    ds, out = _prep(capsys, tmp, "--edges", tmp / "e.csv", "--labels", tmp / "y.npy",
                    "--train", tmp / "train.npy", "--valid", tmp / "valid.npy")
    assert ds.num_split_sets == k and ds.split_index == 0 and "10 split sets" in out
    assert ds.metadata.format_version == 2
    for i in (0, 3, 9):
        d = Dataset.open(tmp / "out", split=i)
        np.testing.assert_array_equal(d.train_ids, np.flatnonzero(train[:, i]))
        np.testing.assert_array_equal(d.valid_ids, np.flatnonzero(valid[:, i]))
        np.testing.assert_array_equal(ds.with_split(i).train_ids, d.train_ids)
        np.testing.assert_array_equal(ds.split("valid", index=i), d.valid_ids)
    assert ds.with_split(4).graph is ds.graph and ds.train_ids.size == 12
    for bad in (10, -1, "3"):
        with pytest.raises(GraphfeedError, match=r"10 split sets \(indices 0..9\)"):
            Dataset.open(tmp / "out", split=bad)
    rc, out, _ = run_cli(["inspect", tmp / "out"], capsys)
    assert rc == 0 and "split set 0 of 10" in out
    # splits of one set must be disjoint; different sets may overlap
    valid[np.flatnonzero(train[:, 7])[0], 7] = True
    np.save(tmp / "valid.npy", valid)
    rc, _, err = run_cli(["prepare", "generic", tmp / "o3", "--edges", tmp / "e.csv", "--labels", tmp / "y.npy",
                          "--train", tmp / "train.npy", "--valid", tmp / "valid.npy"], capsys)
    assert rc == 2 and "(split set 7)" in err and "disjoint" in err
    # repeated flags are split sets too; a single set is shared by every index
    np.save(tmp / "t0.npy", np.arange(0, 5))
    np.save(tmp / "t1.npy", np.arange(5, 10))
    np.save(tmp / "te.npy", np.arange(20, 30))
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "e.csv", "--labels", tmp / "y.npy", "--overwrite",
                  "--train", tmp / "t0.npy", "--train", tmp / "t1.npy", "--test", tmp / "te.npy")
    assert ds.num_split_sets == 2 and ds.with_split(1).train_ids.tolist() == list(range(5, 10))
    assert ds.with_split(1).test_ids.tolist() == list(range(20, 30)) == ds.test_ids.tolist()
    # and from Python
    g, feats, splits = small_arrays()
    p = write_dataset(tmp / "py", graph=g, node_features=feats, num_classes=3,
                      splits={"train": [np.array([0, 1]), np.array([2, 3])], "test": np.array([5, 6])})
    assert Dataset.open(p, split=1).train_ids.tolist() == [2, 3]


def test_string_labels_are_mapped_and_the_mapping_stored(base, capsys):
    tmp, _, _, _ = base
    names = ["Neural_Networks", "Theory", "Case_Based"]
    lines = ["node,subject"] + [f"{i},{names[i % 3]}" for i in range(N) if i != 4]
    (tmp / "y.csv").write_text("\n".join(lines) + "\n")
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "e.csv", "--labels", tmp / "y.csv", "--label-col", "subject",
                  "--features", tmp / "x.npy")
    assert ds.class_names == ("Case_Based", "Neural_Networks", "Theory") and ds.num_classes == 3
    want = [-1 if i == 4 else sorted(names).index(names[i % 3]) for i in range(N)]
    assert ds.labels.tolist() == want
    assert json.loads((tmp / "out" / "graphfeed.json").read_text())["task"]["class_names"][0] == "Case_Based"
    # one label per line, in node order, as text
    (tmp / "y1.txt").write_text("\n".join(names[i % 3] for i in range(N)) + "\n")
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "e.csv", "--labels", tmp / "y1.txt", "--overwrite")
    assert ds.class_names == ("Case_Based", "Neural_Networks", "Theory") and ds.labels[0] == 1
    # a dataset without string labels stays format_version 1 (older readers still open it)
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "e.csv", "--labels", tmp / "y.npy", "--overwrite")
    assert ds.metadata.format_version == 1 and ds.class_names is None


def test_sparse_json_features(base, capsys):
    tmp, _, _, _ = base
    rng = np.random.default_rng(1)
    dense = (rng.random((N, 9)) < 0.3).astype(np.float32)
    dense[:, 8] = 0
    dense[0, 8] = 1
    (tmp / "f.json").write_text(json.dumps({str(i): np.flatnonzero(r).tolist() for i, r in enumerate(dense)}))
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "e.csv", "--labels", tmp / "y.npy",
                  "--features", f"bow={tmp / 'f.json'}", "--block-size", "64")
    np.testing.assert_array_equal(ds.features["bow"].data.numpy(), dense)
    (tmp / "w.json").write_text(json.dumps([{"1": 0.5}, {"0": 2.0, "2": -1}] + [[]] * (N - 2)))
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "e.csv", "--labels", tmp / "y.npy", "--overwrite",
                  "--features", tmp / "w.json")
    assert ds.features["feat"].data.numpy()[:2].tolist() == [[0, 0.5, 0], [2, 0, -1]]


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_scipy_sparse_npz_features(base, capsys, fmt):
    sp = pytest.importorskip("scipy.sparse")
    tmp, _, _, _ = base
    m = sp.random(N, 50, density=0.1, random_state=2, format=fmt, dtype=np.float64)
    sp.save_npz(tmp / "f.npz", m)
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "e.csv", "--labels", tmp / "y.npy",
                  "--features", tmp / "f.npz", "--feature-dtype", "float64")
    np.testing.assert_array_equal(ds.features["feat"].data.numpy(), m.toarray())


def test_sparse_features_too_big_for_the_disk_are_refused(base, capsys):
    tmp, _, _, _ = base
    np.savez(tmp / "huge.npz", format=np.array(b"csr"), shape=np.array([N, 10**15]), data=np.ones(1),
             indices=np.array([5]), indptr=np.r_[0, np.ones(N, int)])
    rc, _, err = run_cli(["prepare", "generic", tmp / "o", "--edges", tmp / "e.csv", "--labels", tmp / "y.npy",
                          "--features", tmp / "huge.npz"], capsys)
    assert rc == 2 and "on disk" in err and not (tmp / "o").exists()


def test_edge_weights_and_timestamps(base, capsys):
    tmp, src, dst, _ = base
    rng = np.random.default_rng(5)
    w = rng.random(src.size).round(3)
    t = rng.integers(0, 10**9, src.size)
    (tmp / "we.csv").write_text("u,v,note,ts,weight\n" + "".join(
        f"{a},{b},x{i},{c},{d}\n" for i, (a, b, c, d) in enumerate(zip(src, dst, t, w))))
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "we.csv", "--labels", tmp / "y.npy", "--weight-col", "4",
                  "--time-col", "3", "--undirected", "--dedupe")
    # reference: every (dst <- src) entry, reverse edges with the same values, first one kept
    ref = CSCGraph.from_edges(src, dst, N, add_reverse=True, drop_duplicates=True)
    np.testing.assert_array_equal(ds.graph.indices, ref.indices)
    first = {}
    for a, b, c, d in zip(src, dst, t, w):
        first.setdefault((a, b), (c, d))
    for a, b, c, d in zip(src, dst, t, w):  # a reverse only where the input lacks the pair
        if a != b:
            first.setdefault((b, a), (c, d))
    cols = np.repeat(np.arange(N), np.diff(ref.indptr))
    want = [first[(int(u), int(v))] for u, v in zip(ref.indices, cols)]
    assert ds.graph.weights.dtype == np.float32 and ds.edge_features["timestamp"].dtype == np.int64
    np.testing.assert_allclose(ds.graph.weights, [x[1] for x in want], rtol=1e-6)
    np.testing.assert_array_equal(ds.edge_features["timestamp"], [x[0] for x in want])
    # the same from an .npz, with fractional timestamps (stored float64)
    np.savez(tmp / "we.npz", edge_index=np.stack([src, dst]), w=w, t=t + 0.5)
    ds, _ = _prep(capsys, tmp, "--edges", tmp / "we.npz", "--labels", tmp / "y.npy", "--weight-key", "w",
                  "--time-key", "t", "--overwrite")
    ref = CSCGraph.from_edges(src, dst, N, weights=w)
    np.testing.assert_allclose(ds.graph.weights, ref.weights, rtol=1e-6)
    assert ds.edge_features["timestamp"].dtype == np.float64
    (tmp / "ns.csv").write_text("0,1,1700000000123456789\n")
    rc, _, err = run_cli(["prepare", "generic", tmp / "o", "--edges", tmp / "ns.csv", "--labels", tmp / "y.npy",
                          "--time-col", "2"], capsys)
    assert rc == 2 and "above 2^53" in err
    (tmp / "nan.csv").write_text("0,1,nan\n")
    rc, _, err = run_cli(["prepare", "generic", tmp / "o", "--edges", tmp / "nan.csv", "--labels", tmp / "y.npy",
                          "--weight-col", "2"], capsys)
    assert rc == 2 and "weight nan" in err


def test_unlabelled_mask_errors_are_clear(base):
    tmp, _, _, _ = base
    from graphfeed.datasets.importers import load_split_sets

    with pytest.raises(DatasetError, match="needs the node count"):
        load_split_sets(np.ones(5, bool), "train")
