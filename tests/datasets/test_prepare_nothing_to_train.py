"""Issue 29 (5): ``graphfeed prepare`` exited 0 with a dataset that has nothing to train on
(a target type without labels, ``--split 0,0,0``, a link split of a graph with no edges, an
empty ``train.csv.gz`` of an OGB link folder). Each is now one line on stderr, exit 2, and
nothing at OUT."""

from __future__ import annotations

import gzip

import numpy as np

from graphfeed.datasets.format import write_dataset
from graphfeed.graph.csc import CSCGraph

from ds_helpers import assert_one_line_error, run_cli, typed_generic_inputs


def _nothing_written(out):
    assert not out.exists()
    assert not any(p.name.startswith(f".{out.name}.tmp-") for p in out.parent.iterdir())


def _generic_inputs(tmp_path, n=30):
    rng = np.random.default_rng(0)
    ef = tmp_path / "edges.csv"
    ef.write_text("".join(f"{s},{d}\n" for s, d in rng.integers(0, n, (80, 2))))
    np.save(tmp_path / "y.npy", rng.integers(0, 3, n))
    return ef, tmp_path / "y.npy"


def test_generic_split_zero(tmp_path, capsys):
    ef, y = _generic_inputs(tmp_path)
    out = tmp_path / "out"
    rc, _, err = run_cli(["prepare", "generic", out, "--edges", ef, "--labels", y,
                          "--split", "0,0,0", "--no-progress"], capsys)
    assert_one_line_error(rc, err, "--split 0,0,0", "train split empty", "nothing to train on")
    _nothing_written(out)
    # a train fraction too small for the labelled nodes is the same empty train split
    rc, _, err = run_cli(["prepare", "generic", out, "--edges", ef, "--labels", y,
                          "--split", "0.01,0.5,0.4", "--no-progress"], capsys)
    assert_one_line_error(rc, err, "train split empty", "30 labelled nodes")
    _nothing_written(out)


def test_generic_no_labels_and_empty_train_file(tmp_path, capsys):
    ef, _ = _generic_inputs(tmp_path)
    np.save(tmp_path / "none.npy", np.full(30, -1))
    out = tmp_path / "out"
    rc, _, err = run_cli(["prepare", "generic", out, "--edges", ef, "--labels",
                          tmp_path / "none.npy", "--no-progress"], capsys)
    assert_one_line_error(rc, err, "no node has a label", "nothing to train on")
    _nothing_written(out)
    (tmp_path / "train.txt").write_text("")
    (tmp_path / "test.txt").write_text("1\n2\n")
    rc, _, err = run_cli(["prepare", "generic", out, "--edges", ef, "--labels", tmp_path / "y.npy",
                          "--train", tmp_path / "train.txt", "--test", tmp_path / "test.txt",
                          "--no-progress"], capsys)
    assert_one_line_error(rc, err, "split 'train'", "train.txt", "holds no node ids")
    _nothing_written(out)


def test_target_type_without_labels(tmp_path, capsys):
    typed_generic_inputs(tmp_path)
    out = tmp_path / "out"
    base = ["prepare", "generic", out, "--edges", tmp_path / "edges.csv", "--labels",
            tmp_path / "y.npy", "--node-types", tmp_path / "types.txt", "--edge-type-col", "2",
            "--no-progress"]
    rc, _, err = run_cli(base + ["--target-type", "author"], capsys)
    assert_one_line_error(rc, err, "target type 'author' has a label", "['paper']",
                          "nothing to train on")
    _nothing_written(out)
    rc, _, err = run_cli(base + ["--target-type", "paper", "--split", "0,0.5,0.5"], capsys)
    assert_one_line_error(rc, err, "train split empty", "nothing to train on")
    _nothing_written(out)
    assert run_cli(base + ["--target-type", "paper"], capsys)[0] == 0


def _node_dataset(tmp_path, src, dst, n=20):
    g = CSCGraph.from_edges(np.asarray(src, np.int64), np.asarray(dst, np.int64), n)
    return write_dataset(tmp_path / "node", graph=g,
                         node_features={"label": np.zeros(n, np.int64)},
                         splits={"train": np.arange(5)}, num_classes=1)


def test_link_split_zero_split_and_no_edges(tmp_path, capsys):
    node = _node_dataset(tmp_path, np.arange(19), np.arange(1, 20))
    out = tmp_path / "ls"
    rc, _, err = run_cli(["prepare", "link-split", node, out, "--split", "0,0,0"], capsys)
    assert_one_line_error(rc, err, "--split 0,0,0", "nothing to train on")
    _nothing_written(out)
    empty = _node_dataset(tmp_path / "e", [], [])
    rc, _, err = run_cli(["prepare", "link-split", empty, out], capsys)
    assert_one_line_error(rc, err, "has 0 edges", "nothing to train on")
    _nothing_written(out)
    # one edge: 40% of it rounds to no train pair
    one = _node_dataset(tmp_path / "one", [0], [1])
    rc, _, err = run_cli(["prepare", "link-split", one, out, "--split", "0.4,0.3,0.3"], capsys)
    assert_one_line_error(rc, err, "train split holds no edge pairs", "nothing to train on")
    _nothing_written(out)


def test_ogbl_empty_train_file(tmp_path, capsys):
    src = tmp_path / "ogbl_toy"
    (src / "raw").mkdir(parents=True)
    (src / "split" / "s").mkdir(parents=True)

    def gz(rel, rows):
        with gzip.open(src / rel, "wt") as f:
            f.write("".join(f"{a},{b}\n" for a, b in rows))

    gz("raw/edge.csv.gz", [(0, 1), (1, 2), (2, 3)])
    gz("split/s/train.csv.gz", [])
    gz("split/s/valid.csv.gz", [(3, 4)])
    gz("split/s/test.csv.gz", [(4, 5)])
    out = tmp_path / "o"
    rc, _, err = run_cli(["prepare", "ogbl", src, out], capsys)
    assert_one_line_error(rc, err, "train.csv.gz", "train split is empty", "nothing to train on")
    _nothing_written(out)
