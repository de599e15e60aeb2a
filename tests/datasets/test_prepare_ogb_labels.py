"""Issue 29 (6): ``prepare ogb`` read one ``x`` among integer labels as a class of its own,
and the string class order then renumbered every class past 9 ('10' sorts before '2'). A
non-integer token among integer labels is now refused (naming its line and value), and class
names that are all integers keep their numeric order."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from graphfeed.datasets.format import Dataset
from graphfeed.datasets.importers import _class_order, read_labels
from graphfeed.errors import DatasetError

from ds_helpers import assert_one_line_error, run_cli

N = 36


def _ogb(tmp, labels):
    root = tmp / "ogbn_toy"
    for sub in ("raw", "split/s"):
        (root / sub).mkdir(parents=True, exist_ok=True)

    def gz(path, lines):
        with gzip.open(root / path, "wt") as f:
            f.write("\n".join(lines) + "\n")

    rng = np.random.default_rng(0)
    gz("raw/edge.csv.gz", [f"{s},{d}" for s, d in rng.integers(0, N, (100, 2))])
    gz("raw/node-label.csv.gz", labels)
    gz("split/s/train.csv.gz", [str(i) for i in range(0, 24)])
    gz("split/s/valid.csv.gz", [str(i) for i in range(24, 30)])
    gz("split/s/test.csv.gz", [str(i) for i in range(30, N)])
    return root


def test_ogb_twelve_integer_classes_keep_their_numbers(tmp_path, capsys):
    labels = [str(i % 12) for i in range(N)]
    rc, _, err = run_cli(["prepare", "ogb", _ogb(tmp_path, labels), tmp_path / "o",
                          "--no-progress"], capsys)
    assert rc == 0, err
    ds = Dataset.open(tmp_path / "o")
    assert ds.num_classes == 12 and ds.class_names is None
    assert np.asarray(ds.labels).tolist() == [i % 12 for i in range(N)]


def test_ogb_refuses_a_text_token_among_integer_labels(tmp_path, capsys):
    labels = [str(i % 12) for i in range(N)]
    labels[7] = "x"
    out = tmp_path / "o"
    rc, _, err = run_cli(["prepare", "ogb", _ogb(tmp_path, labels), out, "--no-progress"], capsys)
    assert_one_line_error(rc, err, "node-label.csv.gz", "line 8", "'x'", "is not an integer")
    assert not out.exists()


def test_label_arrays_mixing_integers_and_text():
    with pytest.raises(DatasetError, match=r"labels: node 2: label 'x' is not an integer.*'1'"):
        read_labels(np.array(["1", "10", "x", "2", ""]))
    with pytest.raises(DatasetError, match=r"node 0: label '5' is an integer, but the other "
                                           r"labels are class names"):
        read_labels(np.array(["5", "cat", "dog", "cat"]))
    lab = read_labels(np.array(["b", "a", "", "c"]))  # text classes: sorted names, as before
    assert lab.class_names == ("a", "b", "c") and lab.values.tolist() == [1, 0, -1, 2]


def test_integer_class_names_are_ordered_by_value():
    names = np.array(sorted(str(i) for i in range(12)))  # '0', '1', '10', '11', '2', ...
    rank = _class_order(names, np.ones(12, bool))
    assert [int(n) for n in names] == rank.tolist()
    text = np.array(["a", "b", "c"])
    assert _class_order(text, np.zeros(3, bool)).tolist() == [0, 1, 2]
