"""Issue 29: ``graphfeed prepare ogbl`` with a ``num-node-list.csv.gz`` that holds no node count
('many', nothing, a negative number, two lines) printed a traceback; now one error line naming
the file and the value, exit 2, nothing at OUT."""

from __future__ import annotations

import gzip

import pytest

from ds_helpers import assert_one_line_error, run_cli


def _ogbl(src, num_node_list: str):
    (src / "raw").mkdir(parents=True)
    (src / "split" / "s").mkdir(parents=True)

    def gz(rel, text):
        with gzip.open(src / rel, "wt") as f:
            f.write(text)

    gz("raw/edge.csv.gz", "0,1\n1,2\n2,3\n3,4\n")
    gz("split/s/train.csv.gz", "0,1\n1,2\n")
    gz("split/s/valid.csv.gz", "3,4\n")
    gz("split/s/test.csv.gz", "2,3\n")
    gz("raw/num-node-list.csv.gz", num_node_list)


@pytest.mark.parametrize("text, fragments", [
    ("many\n", ["expected the node count", "'many'"]),
    ("\n", ["expected the node count"]),
    ("-5\n", ["node count is -5"]),
    ("5\n6\n", ["found 2"]),
])
def test_ogbl_bad_num_node_list(tmp_path, capsys, text, fragments):
    src = tmp_path / "ogbl_toy"
    _ogbl(src, text)
    out = tmp_path / "o"
    rc, _, err = run_cli(["prepare", "ogbl", src, out], capsys)
    assert_one_line_error(rc, err, "num-node-list.csv.gz", *fragments)
    assert not out.exists()


def test_ogbl_good_num_node_list(tmp_path, capsys):
    src = tmp_path / "ogbl_toy"
    _ogbl(src, "9\n")
    rc, _, err = run_cli(["prepare", "ogbl", src, tmp_path / "o"], capsys)
    assert rc == 0, err
