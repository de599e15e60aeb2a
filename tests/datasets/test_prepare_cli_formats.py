"""``graphfeed prepare FORMAT``: each importer's subcommand turns its arguments into the library
call (the importers take plain keywords; the CLI converts the parsed arguments)."""

from __future__ import annotations

import gzip

import numpy as np

from graphfeed.datasets.format import Dataset
from graphfeed.datasets.importers import IMPORTERS

from ds_helpers import assert_one_line_error, run_cli

N = 30


def _edges(seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, N, 120), rng.integers(0, N, 120)


def _ogb(tmp):
    src, dst = _edges()
    root = tmp / "ogbn_toy"
    for sub in ("raw", "split/a", "split/b"):
        (root / sub).mkdir(parents=True)

    def gz(path, lines):
        with gzip.open(root / path, "wt") as f:
            f.write("\n".join(lines) + "\n")

    gz("raw/edge.csv.gz", [f"{s},{d}" for s, d in zip(src, dst)])
    gz("raw/node-label.csv.gz", [str(i % 3) for i in range(N)])
    for name, (a, b, c) in (("a", (10, 20, 30)), ("b", (5, 15, 30))):
        gz(f"split/{name}/train.csv.gz", [str(i) for i in range(0, a)])
        gz(f"split/{name}/valid.csv.gz", [str(i) for i in range(a, b)])
        gz(f"split/{name}/test.csv.gz", [str(i) for i in range(b, c)])
    return root


def test_every_importer_has_a_subcommand(capsys):
    assert set(IMPORTERS.names()) == {"generic", "ogb", "ogb-hetero", "cora-text", "planetoid-npz",
                                      "csr-npz", "ogbl", "link-split", "graphbolt", "synthetic"}
    rc, out, _ = run_cli(["prepare", "--help"], capsys)
    assert rc == 0
    for fmt in IMPORTERS.names():
        assert fmt in out
        rc, out_fmt, _ = run_cli(["prepare", fmt, "--help"], capsys)
        # link-split takes the graph as stored (its SRC is prepared with --undirected); a
        # generated dataset has no input to shape
        assert rc == 0 and ("  --undirected" in out_fmt) == (fmt not in ("link-split", "synthetic"))
        assert "OUT" in out_fmt


def test_ogb_split_name_and_seeded_split(tmp_path, capsys):
    root = _ogb(tmp_path)
    rc, out, err = run_cli(["prepare", "ogb", root, tmp_path / "o1", "--split-name", "b", "--no-progress",
                            "--undirected"], capsys)
    assert rc == 0, err
    ds = Dataset.open(tmp_path / "o1")
    assert (ds.train_ids.size, ds.valid_ids.size, ds.test_ids.size) == (5, 10, 15)
    assert ds.metadata.graph.undirected and ds.name == "ogbn_toy"
    rc, out, err = run_cli(["prepare", "ogb", root, tmp_path / "o2", "--split", "0.5,0.2,0.2", "--seed", "3",
                            "--no-progress", "--name", "toy"], capsys)
    assert rc == 0, err
    ds = Dataset.open(tmp_path / "o2")
    assert (ds.train_ids.size, ds.valid_ids.size, ds.test_ids.size) == (15, 6, 6) and ds.name == "toy"
    rc, _, err = run_cli(["prepare", "ogb", root, tmp_path / "o3", "--split-name", "zz"], capsys)
    assert_one_line_error(rc, err, "no split named 'zz'")


def test_planetoid_and_csr_npz(tmp_path, capsys):
    src, dst = _edges(1)
    rng = np.random.default_rng(0)
    x = rng.random((N, 4)).astype(np.float32)
    y = np.arange(N) % 3
    np.savez(tmp_path / "toy_planetoid.npz", x=x, y=y, edge_index=np.stack([src, dst]),
             train_idx=np.arange(6), val_idx=np.arange(6, 12), test_idx=np.arange(12, 30))
    rc, _, err = run_cli(["prepare", "planetoid-npz", tmp_path / "toy_planetoid.npz", tmp_path / "p",
                          "--normalize-features", "--no-progress"], capsys)
    assert rc == 0, err
    ds = Dataset.open(tmp_path / "p")
    assert ds.train_ids.tolist() == list(range(6)) and ds.test_ids.size == 18
    feat = ds.features["feat"].data.numpy()
    np.testing.assert_allclose(feat.sum(axis=1), 1.0, rtol=1e-5)  # --normalize-features reached the importer

    order = np.argsort(src, kind="stable")
    indptr = np.zeros(N + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=N), out=indptr[1:])
    np.savez(tmp_path / "toy_csr.npz", adj_indices=dst[order], adj_indptr=indptr, adj_shape=np.array([N, N]),
             adj_data=np.ones(len(src)), labels=y)
    rc, _, err = run_cli(["prepare", "csr-npz", tmp_path / "toy_csr.npz", tmp_path / "c", "--split",
                          "per-class:2,3,4", "--no-progress"], capsys)
    assert rc == 0, err
    ds = Dataset.open(tmp_path / "c")
    assert (ds.train_ids.size, ds.valid_ids.size, ds.test_ids.size) == (6, 3, 4)
    assert ds.num_edges == len(src)
