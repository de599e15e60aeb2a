"""Importers on small generated inputs, the streamed CSC build against the in-memory one, and the
real Cora / CiteSeer files (skipped when ../shared/datasets is absent)."""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np
import pytest

from graphfeed._units import parse_size
from graphfeed.datasets.build import Progress, build_csc_streaming
from graphfeed.datasets.format import Dataset
from graphfeed.datasets.importers import SplitRule, prepare
from graphfeed.datasets.importers.generic import prepare_generic
from graphfeed.datasets.importers.ogb import prepare_ogb
from graphfeed.datasets._readers import EdgeSource
from graphfeed.errors import DatasetError
from graphfeed.graph.csc import CSCGraph
from shared_paths import shared_datasets_dir



def random_edges(n=50, e=400, seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, e)
    dst = rng.integers(0, n, e)
    dst[:20] = src[:20]  # some self loops
    src[20:40], dst[20:40] = src[40:60], dst[40:60]  # some duplicates
    return src, dst


def write_inputs(tmp: Path, n=50, seed=0):
    rng = np.random.default_rng(seed)
    src, dst = random_edges(n, seed=seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = rng.integers(0, 3, n)
    np.save(tmp / "x.npy", x)
    np.save(tmp / "y.npy", y)
    return src, dst, x, y


def write_edge_file(path: Path, src, dst, kind: str) -> Path:
    if kind in ("csv", "tsv", "csv.gz", "txt"):
        delim = {"csv": ",", "tsv": "\t", "csv.gz": ",", "txt": " "}[kind]
        text = ("src" + delim + "dst\n") + "".join(f"{s}{delim}{d}\n" for s, d in zip(src, dst))
        data = text.encode()
        if kind.endswith(".gz"):
            data = gzip.compress(data)
        path = path.with_name(f"edges.{kind}")
        path.write_bytes(data)
    elif kind == "npy":
        path = path.with_name("edges.npy")
        np.save(path, np.stack([src, dst], axis=1))
    elif kind == "npy-2xE":
        path = path.with_name("edges.npy")
        np.save(path, np.stack([src, dst]).astype(np.int32))
    elif kind == "npy-fortran":
        path = path.with_name("edges.npy")
        np.save(path, np.asfortranarray(np.stack([src, dst], axis=1)))
    elif kind == "npz":
        path = path.with_name("edges.npz")
        np.savez(path, src=src, dst=dst)
    return path


@pytest.mark.parametrize("kind", ["csv", "tsv", "csv.gz", "txt", "npy", "npy-2xE", "npy-fortran", "npz"])
@pytest.mark.parametrize("undirected,drop_self_loops,dedupe", [(False, False, False), (True, True, True)])
def test_generic_matches_in_memory_build(tmp_path, kind, undirected, drop_self_loops, dedupe):
    src, dst, x, y = write_inputs(tmp_path)
    edges = write_edge_file(tmp_path / "edges", src, dst, kind)
    rep = prepare_generic(
        tmp_path / "out", edges=edges, labels=tmp_path / "y.npy", features={"feat": tmp_path / "x.npy"},
        splits=SplitRule.parse("0.5,0.2,0.2", seed=3), undirected=undirected,
        drop_self_loops=drop_self_loops, dedupe=dedupe, block_bytes=64,  # many tiny chunks
    )
    ref = CSCGraph.from_edges(src, dst, 50, add_reverse=undirected, drop_self_loops=drop_self_loops,
                              drop_duplicates=dedupe)
    ds = Dataset.open(tmp_path / "out")
    np.testing.assert_array_equal(ds.graph.indptr, ref.indptr)
    np.testing.assert_array_equal(ds.graph.indices, ref.indices)
    np.testing.assert_array_equal(ds.features["feat"].data.numpy(), x)
    np.testing.assert_array_equal(ds.labels, y)
    assert rep.num_edges == ref.num_edges and rep.input_edges == 400
    assert (ds.train_ids.size, ds.valid_ids.size, ds.test_ids.size) == (25, 10, 10)
    assert rep.peak_rss_bytes > 0 and "peak RSS" in rep.summary()


@pytest.mark.parametrize("budget_edges", [1, 7, 64])
@pytest.mark.parametrize("dedupe", [False, True])
def test_windowed_build_equals_single_pass(tmp_path, budget_edges, dedupe):
    src, dst = random_edges(80, 1000, seed=5)
    ref = CSCGraph.from_edges(src, dst, 80, add_reverse=True, drop_duplicates=dedupe)
    (tmp_path / "g").mkdir()
    res = build_csc_streaming(
        EdgeSource(arrays=(src, dst), block_bytes=16 * 37), tmp_path / "g", num_nodes=80,
        undirected=True, dedupe=dedupe, memory_budget=budget_edges * 4,
    )
    assert res.windows > 1
    g = CSCGraph.load(tmp_path / "g", validate=True)
    np.testing.assert_array_equal(g.indptr, ref.indptr)
    np.testing.assert_array_equal(g.indices, ref.indices)
    assert not (tmp_path / "g" / ".indices.raw").exists()


def test_num_nodes_inferred_from_edges_and_isolated_tail(tmp_path):
    src, dst = np.array([0, 5]), np.array([5, 9])
    (tmp_path / "g").mkdir()
    res = build_csc_streaming(EdgeSource(arrays=(src, dst)), tmp_path / "g")
    assert res.num_nodes == 10 and res.num_edges == 2
    (tmp_path / "h").mkdir()
    res = build_csc_streaming(EdgeSource(arrays=(src, dst)), tmp_path / "h", num_nodes=12)
    g = CSCGraph.load(tmp_path / "h")
    assert g.num_nodes == 12 and list(g.in_degrees[9:]) == [1, 0, 0]


def test_bad_edge_inputs_name_file_and_line(tmp_path):
    src, dst, x, y = write_inputs(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2\n3,4\n5,x\n")
    with pytest.raises(DatasetError, match=r"bad.csv: line 3"):
        prepare_generic(tmp_path / "o", edges=bad, labels=tmp_path / "y.npy", splits=SplitRule.parse("0.5,0.2,0.2"))
    oob = tmp_path / "oob.csv"
    oob.write_text("1,2\n3,50\n")
    with pytest.raises(DatasetError, match=r"oob.csv: node id 50 is out of range \[0, 50\)"):
        prepare_generic(tmp_path / "o", edges=oob, labels=tmp_path / "y.npy", splits=SplitRule.parse("0.5,0.2,0.2"))
    gz = tmp_path / "trunc.csv.gz"
    gz.write_bytes(gzip.compress(b"1,2\n" * 1000)[:-20])
    with pytest.raises(DatasetError, match="trunc.csv.gz"):
        prepare_generic(tmp_path / "o", edges=gz, labels=tmp_path / "y.npy", splits=SplitRule.parse("0.5,0.2,0.2"))
    np.save(tmp_path / "x_short.npy", x[:-1])
    ok = write_edge_file(tmp_path / "e", src, dst, "csv")
    # the message names both files: the features are the short ones here, not the labels
    with pytest.raises(DatasetError, match=r"y.npy has 50 labels but .*x_short.npy has 49 rows"):
        prepare_generic(tmp_path / "o", edges=ok, labels=tmp_path / "y.npy", features={"feat": tmp_path / "x_short.npy"},
                        splits=SplitRule.parse("0.5,0.2,0.2"))
    assert not (tmp_path / "o").exists() and not list(tmp_path.glob(".o.tmp-*"))


def test_text_features_labels_and_split_files(tmp_path):
    src, dst, x, y = write_inputs(tmp_path)
    edges = write_edge_file(tmp_path / "e", src, dst, "tsv")
    (tmp_path / "x.csv").write_text("\n".join(",".join(f"{v:.6g}" for v in row) for row in x) + "\n")
    # labels as id,label with a header, some nodes unlabelled
    lab = [f"{i},{y[i]}" for i in range(50) if i % 10]
    (tmp_path / "y.csv").write_text("id,label\n" + "\n".join(lab) + "\n")
    (tmp_path / "train.txt").write_text("\n".join(str(i) for i in range(1, 10)) + "\n")
    np.save(tmp_path / "valid.npy", np.arange(11, 15, dtype=np.int32))
    with gzip.open(tmp_path / "test.csv.gz", "wt") as f:
        f.write("\n".join(str(i) for i in range(21, 30)) + "\n")
    prepare_generic(tmp_path / "out", edges=edges, labels=tmp_path / "y.csv", features={"feat": tmp_path / "x.csv"},
                    splits={"train": tmp_path / "train.txt", "valid": tmp_path / "valid.npy",
                            "test": tmp_path / "test.csv.gz"}, num_classes=3)
    ds = Dataset.open(tmp_path / "out")
    np.testing.assert_allclose(ds.features["feat"].data.numpy(), x, rtol=1e-5)
    expect = np.where(np.arange(50) % 10 == 0, -1, y)
    np.testing.assert_array_equal(ds.labels, expect)
    np.testing.assert_array_equal(ds.valid_ids, np.arange(11, 15))
    assert ds.test_ids.size == 9 and ds.num_classes == 3
    # a split holding an unlabelled node is refused (label -1 outside [0, 3))
    (tmp_path / "bad_train.txt").write_text("0\n1\n")
    with pytest.raises(DatasetError, match="label of node 0"):
        prepare_generic(tmp_path / "out2", edges=edges, labels=tmp_path / "y.csv",
                        splits={"train": tmp_path / "bad_train.txt"}, num_classes=3)


def test_per_class_split_rule():
    y = np.repeat(np.arange(4), 30)
    y[:5] = -1
    s = SplitRule.parse("per-class:5,20,30", seed=1).apply(y, 4)
    assert np.bincount(y[s["train"]], minlength=4).tolist() == [5, 5, 5, 5]
    assert s["valid"].size == 20 and s["test"].size == 30
    allids = np.concatenate(list(s.values()))
    assert np.unique(allids).size == allids.size and (y[allids] >= 0).all()
    with pytest.raises(DatasetError):
        SplitRule.parse("0.9,0.2,0.1")


def test_ogb_layout(tmp_path):
    src, dst, x, y = write_inputs(tmp_path)
    root = tmp_path / "ogbn_toy"
    (root / "raw").mkdir(parents=True)
    (root / "split" / "time").mkdir(parents=True)

    def gz(path, lines):
        with gzip.open(path, "wt") as f:
            f.write("\n".join(lines) + "\n")

    gz(root / "raw/edge.csv.gz", [f"{s},{d}" for s, d in zip(src, dst)])
    gz(root / "raw/node-feat.csv.gz", [",".join(f"{v:.7g}" for v in row) for row in x])
    gz(root / "raw/node-label.csv.gz", [str(v) if i != 7 else "nan" for i, v in enumerate(y)])
    gz(root / "raw/num-node-list.csv.gz", ["50"])
    gz(root / "split/time/train.csv.gz", [str(i) for i in range(0, 30) if i != 7])
    gz(root / "split/time/valid.csv.gz", [str(i) for i in range(30, 40)])
    gz(root / "split/time/test.csv.gz", [str(i) for i in range(40, 50)])
    rep = prepare_ogb(root, tmp_path / "out", undirected=True, block_bytes=100)
    ds = Dataset.open(tmp_path / "out")
    ref = CSCGraph.from_edges(src, dst, 50, add_reverse=True)
    np.testing.assert_array_equal(ds.graph.indices, ref.indices)
    np.testing.assert_allclose(ds.features["feat"].data.numpy(), x, rtol=1e-6)
    assert ds.labels[7] == -1 and ds.labels[8] == y[8]
    assert ds.name == "ogbn_toy" and ds.train_ids.size == 29 and rep.num_nodes == 50
    with pytest.raises(DatasetError, match="no split named"):
        prepare_ogb(root, tmp_path / "out2", split_name="nope")


def test_prepare_cli(tmp_path, capsys):
    from graphfeed.cli import prepare as prep

    src, dst, x, y = write_inputs(tmp_path)
    edges = write_edge_file(tmp_path / "e", src, dst, "csv.gz")
    parser = argparse.ArgumentParser()
    prep.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["prepare", "generic", str(tmp_path / "out"), "--edges", str(edges), "--features",
                              f"emb={tmp_path / 'x.npy'}", "--labels", str(tmp_path / "y.npy"), "--split",
                              "0.6,0.2,0.2", "--undirected", "--dedupe", "--drop-self-loops", "--no-progress"])
    assert prep.run(args) == 0
    assert "peak RSS" in capsys.readouterr().out
    ds = Dataset.open(tmp_path / "out")
    assert set(ds.features) == {"emb", "label"} and ds.metadata.graph.undirected
    assert parse_size("2GiB") == 2 * 1024**3 and parse_size("512MiB") == 512 * 1024**2


def test_progress_bar_writes_to_stream():
    import io

    buf = io.StringIO()
    p = Progress(True, stream=buf)
    p.start("pass 1/2", 100)
    p.update(50, force=True)
    p.done()
    assert "pass 1/2" in buf.getvalue() and "100%" in buf.getvalue()


# --------------------------------------------------------------------------- real data
SHARED = shared_datasets_dir()
needs_cora = pytest.mark.skipif(not (SHARED / "cora").is_dir(), reason="shared/datasets/cora absent")
needs_citeseer = pytest.mark.skipif(not (SHARED / "citeseer").is_dir(), reason="shared/datasets/citeseer absent")


@needs_cora
def test_cora_text(tmp_path):
    from graphfeed.datasets.importers.shared import prepare_cora_text

    prepare_cora_text(SHARED / "cora" / "text", tmp_path / "cora")
    ds = Dataset.open(tmp_path / "cora")
    assert (ds.num_nodes, ds.num_edges, ds.num_classes) == (2708, 10556, 7)
    assert ds.features["feat"].shape == (2708, 1433)
    assert float(ds.features["feat"].data.sum()) == 49216
    assert (ds.train_ids.size, ds.valid_ids.size, ds.test_ids.size) == (140, 500, 1000)
    np.testing.assert_array_equal(ds.train_ids, np.arange(140))
    np.testing.assert_array_equal(ds.test_ids, np.arange(1708, 2708))
    assert np.bincount(ds.labels).tolist() == [351, 217, 418, 818, 426, 298, 180]
    assert np.bincount(ds.labels[ds.train_ids]).tolist() == [20] * 7
    assert ds.name == "cora"


@needs_cora
def test_cora_csr_npz(tmp_path):
    from graphfeed.datasets.importers.shared import prepare_csr_npz

    rep = prepare_csr_npz(SHARED / "cora" / "linqs_npz" / "cora.npz", tmp_path / "c", undirected=True,
                          drop_self_loops=True, dedupe=True)
    ds = Dataset.open(tmp_path / "c")
    assert rep.input_edges == 5429 and ds.num_edges == 10556 and ds.num_nodes == 2708
    assert np.bincount(ds.labels[ds.train_ids]).tolist() == [20] * 7


@needs_citeseer
def test_citeseer_planetoid_npz(tmp_path):
    from graphfeed.datasets.importers.shared import prepare_planetoid_npz

    prepare_planetoid_npz(SHARED / "citeseer" / "derived" / "citeseer_planetoid_derived.npz", tmp_path / "cs")
    ds = Dataset.open(tmp_path / "cs")
    assert (ds.num_nodes, ds.num_edges, ds.num_classes) == (3327, 9104, 6)
    assert ds.features["feat"].shape == (3327, 3703)
    assert (ds.train_ids.size, ds.valid_ids.size, ds.test_ids.size) == (120, 500, 1000)
    assert int((ds.labels < 0).sum()) == 15
    np.testing.assert_array_equal(ds.train_ids, np.arange(120))


def test_text_blocks_lines_longer_than_the_buffer(tmp_path):
    from graphfeed.datasets._readers import read_int_table

    p = tmp_path / "ids.csv"
    lines = ["# comment", "node,label", "123456789,1", "", "  7 ,\t2", "8;3\r"]
    p.write_text("\n".join(lines))  # no trailing newline on the last line
    for block in (3, 5, 64):
        from graphfeed.datasets._readers import TextBlocks

        t = read_int_table(p, 2, block_bytes=block)
        np.testing.assert_array_equal(t, [[123456789, 1], [7, 2], [8, 3]])
        assert isinstance(TextBlocks(p, block_bytes=block).total_bytes, int)
