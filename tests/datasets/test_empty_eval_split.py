"""Issue 42 (5): a 2-node dataset prepared with empty valid/test splits and trained to
``roc_auc nan ... accuracy nan``, exit 0. ``prepare`` now refuses a given but empty evaluation
split (a fraction of too few nodes, a file without ids, a GraphBolt set without seeds) in one
line, for every node-classification importer (they all pass ``check_trainable``), and writes
nothing."""

from __future__ import annotations

import numpy as np
import pytest

from graphfeed.datasets.importers import SplitRule, check_trainable
from graphfeed.errors import DatasetError

from ds_helpers import assert_one_line_error, run_cli, typed_generic_inputs


def _nothing_written(out):
    assert not out.exists()
    assert not any(p.name.startswith(f".{out.name}.tmp-") for p in out.parent.iterdir())


def _two_nodes(tmp_path):
    (tmp_path / "e.csv").write_text("0,1\n1,0\n")
    np.save(tmp_path / "x.npy", np.ones((2, 4), dtype=np.float32))
    np.save(tmp_path / "y.npy", np.array([0, 1]))
    return ["prepare", "generic", "--edges", tmp_path / "e.csv", "--features",
            tmp_path / "x.npy", "--labels", tmp_path / "y.npy", "--no-progress"]


def test_a_two_node_dataset_is_refused_with_the_split_named(tmp_path, capsys):
    base = _two_nodes(tmp_path)
    out = tmp_path / "out"
    rc, _, err = run_cli(base + [out], capsys)
    assert_one_line_error(rc, err, "--split 0.8,0.1,0.1", "leaves the valid split empty",
                          "2 labelled nodes", "nothing to evaluate on")
    _nothing_written(out)
    rc, _, err = run_cli(base + ["--split", "0.5,0.5,0", out], capsys)
    assert_one_line_error(rc, err, "leaves the test split empty", "nothing to evaluate on")
    _nothing_written(out)
    rc, _, err = run_cli(base + ["--split", "per-class:1,0,0", out], capsys)
    assert_one_line_error(rc, err, "--split per-class:1,0,0", "valid split empty")
    _nothing_written(out)
    rc, out_text, err = run_cli(base + ["--split", "0.5,0.5,0.5", out], capsys)
    assert rc == 2 and "sum to" in err  # the rule itself is checked first, as before
    rc, out_text, err = run_cli(base + ["--split", "0.34,0.33,0.33", out], capsys)
    assert rc == 2 and "train split empty" in err  # train first


def test_an_empty_split_file_is_refused_naming_it(tmp_path, capsys):
    base = _two_nodes(tmp_path)
    (tmp_path / "train.txt").write_text("0\n")
    (tmp_path / "valid.txt").write_text("1\n")
    (tmp_path / "test.txt").write_text("")
    out = tmp_path / "out"
    rc, _, err = run_cli(base + ["--train", tmp_path / "train.txt", "--valid",
                                 tmp_path / "valid.txt", "--test", tmp_path / "test.txt", out],
                         capsys)
    assert_one_line_error(rc, err, "split 'test'", "test.txt", "holds no node ids",
                          "nothing to evaluate on")
    _nothing_written(out)
    # without the empty file (no test split at all) it prepares, as before
    rc, _, err = run_cli(base + ["--train", tmp_path / "train.txt", "--valid",
                                 tmp_path / "valid.txt", out], capsys)
    assert rc == 0, err


def test_every_split_set_is_checked():
    labels = np.array([0, 1, 0, 1])
    sets = {"train": [np.array([0]), np.array([1])], "valid": [np.array([2]), np.array([], int)],
            "test": [np.array([3])]}
    with pytest.raises(DatasetError, match=r"split 'valid' \(split set 1\) \(from y.npy\) holds "
                                           r"no node ids; nothing to evaluate on"):
        check_trainable(sets, labels, {"train": None}, "y.npy")
    sets["valid"][1] = np.array([3])
    check_trainable(sets, labels, {}, "y.npy")
    # an evaluation split that is not given at all stays allowed (training with train only)
    check_trainable({"train": [np.array([0])]}, labels, {}, "y.npy")
    with pytest.raises(DatasetError, match="--split 0.5,0.5,0 leaves the test split empty"):
        check_trainable({"train": [np.array([0])], "valid": [np.array([1])],
                         "test": [np.zeros(0, int)]}, labels, SplitRule.parse("0.5,0.5,0"),
                        "y.npy")


def test_a_typed_generic_dataset_is_refused_too(tmp_path, capsys):
    typed_generic_inputs(tmp_path)
    out = tmp_path / "out"
    rc, _, err = run_cli(["prepare", "generic", out, "--edges", tmp_path / "edges.csv",
                          "--labels", tmp_path / "y.npy", "--node-types", tmp_path / "types.txt",
                          "--edge-type-col", "2", "--target-type", "paper", "--split",
                          "0.96,0.02,0.02", "--no-progress"], capsys)
    assert_one_line_error(rc, err, "leaves the valid split empty", "20 labelled nodes",
                          "nothing to evaluate on")
    _nothing_written(out)


@pytest.mark.parametrize("which", ["homogeneous", "typed"])
def test_a_graphbolt_set_without_seeds_is_refused(tmp_path, capsys, which):
    pytest.importorskip("yaml")
    from test_graphbolt_importer import homogeneous, typed

    src = tmp_path / "gb"
    if which == "homogeneous":
        homogeneous(src)
        np.save(src / "nc-validation-seeds.npy", np.zeros(0, np.int64))
        np.save(src / "nc-validation-labels.npy", np.zeros(0, np.int64))
    else:
        typed(src)
        np.save(src / "user-test-seeds.npy", np.zeros(0, np.int64))
        np.save(src / "user-test-labels.npy", np.zeros(0, np.int64))
    out = tmp_path / "out"
    rc, _, err = run_cli(["prepare", "graphbolt", src, out, "--task", "0", "--no-progress"],
                         capsys)
    key = "validation_set" if which == "homogeneous" else "test_set"
    assert_one_line_error(rc, err, "metadata.yaml: tasks[0]", f"its {key} holds no seeds",
                          "nothing to evaluate on")
    _nothing_written(out)
