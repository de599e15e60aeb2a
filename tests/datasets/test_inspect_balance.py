"""Class balance: ``class_balance`` counts, and ``graphfeed inspect`` shows it and warns when the
majority class makes plain accuracy misleading."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from graphfeed import _io
from graphfeed.datasets import estimate
from graphfeed.datasets.estimate import IMBALANCE_WARN_SHARE, ClassBalance, class_balance
from graphfeed.datasets.format import write_dataset
from graphfeed.errors import GraphfeedError
from graphfeed.graph.csc import CSCGraph

from ds_helpers import assert_one_line_error, run_cli


def _reference(y, num_classes):
    y = np.asarray(y).astype(np.int64)
    ok = (y >= 0) & (y < num_classes)
    return np.bincount(y[ok], minlength=num_classes), int((y < 0).sum()), int((y >= num_classes).sum())


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.uint64, np.uint16])
def test_class_balance_matches_a_reference_count(dtype):
    rng = np.random.default_rng(1)
    y = rng.integers(-1 if np.dtype(dtype).kind == "i" else 0, 6, 5000).astype(dtype)
    ids = rng.choice(5000, 700, replace=False)
    for sel in (None, ids):
        b = class_balance(y, 5, ids=sel)  # label 5 is out of range on purpose
        counts, neg, high = _reference(y if sel is None else y[sel], 5)
        assert b.counts == tuple(counts)
        assert (b.unlabelled, b.out_of_range, b.labelled) == (neg, high, counts.sum())
        assert b.majority_class == int(np.argmax(counts))
        assert b.majority_share == pytest.approx(counts.max() / counts.sum())
        assert sum(b.shares) == pytest.approx(1.0)


def test_class_balance_reads_a_memory_map_block_by_block(tmp_path, monkeypatch):
    y = np.random.default_rng(2).integers(-1, 4, 1001)
    _io.save_npy(tmp_path / "y.npy", y)
    mapped = _io.load_npy(tmp_path / "y.npy", mmap=True)
    whole = class_balance(y, 4, ids=np.arange(0, 1001, 3))
    monkeypatch.setattr(estimate, "_BALANCE_BLOCK", 7)  # many blocks, a partial last one
    assert class_balance(mapped, 4) == class_balance(y, 4)
    assert class_balance(mapped, 4, ids=np.arange(0, 1001, 3)) == whole


def test_class_balance_refuses_bad_input():
    y = np.array([0, 1, 1])
    for bad in (np.array([0.5, 1.0]), np.zeros((2, 2), np.int64)):
        with pytest.raises(GraphfeedError, match="1-D integer"):
            class_balance(bad, 2)
    with pytest.raises(GraphfeedError, match="num_classes"):
        class_balance(y, 0)
    with pytest.raises(GraphfeedError, match=r"node ids must lie in \[0, 3\)"):
        class_balance(y, 2, ids=np.array([0, 3]))
    with pytest.raises(GraphfeedError, match="3 class names for 2 classes"):
        class_balance(y, 2, class_names=("a", "b", "c"))


def test_class_balance_without_labels():
    b = class_balance(np.full(4, -1), 3)
    assert (b.labelled, b.unlabelled, b.majority_class, b.majority_share) == (0, 4, -1, 0.0)
    assert not b.imbalanced()
    assert b.to_json()["majority_name"] is None


def test_imbalanced_threshold():
    assert ClassBalance((71, 29)).imbalanced() and not ClassBalance((70, 30)).imbalanced()
    assert IMBALANCE_WARN_SHARE == 0.7


# --------------------------------------------------------------------------- inspect
def _write(path, labels, train, num_classes, class_names=None):
    n = len(labels)
    src = np.arange(n)
    g = CSCGraph.from_edges(src, (src + 1) % n, n, add_reverse=True)
    feats = {"feat": np.ones((n, 2), np.float32), "label": np.asarray(labels, np.int64)}
    rest = np.setdiff1d(np.arange(n), train)
    splits = {"train": np.asarray(train), "valid": rest[:2], "test": rest[2:4]}
    return write_dataset(path, graph=g, node_features=feats, splits=splits, num_classes=num_classes,
                         class_names=class_names)


def test_inspect_shows_balance_and_warns_on_a_78_22_binary_task(tmp_path, capsys):
    labels = np.array([0] * 78 + [1] * 22)
    labels[[97, 99]] = -1  # two unlabelled nodes (in no split)
    train = np.arange(0, 100, 2)  # 50 nodes: 39 of class 0, 11 of class 1
    ds = _write(tmp_path / "ds", labels, train, 2, class_names=("ordinary", "fraud"))
    want_train = _reference(labels[train], 2)[0]
    assert want_train.tolist() == [39, 11]
    want_all = _reference(labels, 2)[0]

    rc, out, err = run_cli(["inspect", ds, "--json"], capsys)
    assert rc == 0, err
    info = json.loads(out)
    bal = info["class_balance"]
    assert bal["train"]["counts"] == want_train.tolist()
    assert bal["labelled"]["counts"] == want_all.tolist() == [78, 20]
    assert bal["labelled"]["unlabelled"] == 2 and info["task"]["labelled"] == 98
    assert bal["labelled"]["majority_name"] == "ordinary"
    assert bal["labelled"]["majority_share"] == pytest.approx(78 / 98, abs=1e-6)
    assert len(info["warnings"]) == 1
    assert "'ordinary'" in info["warnings"][0] and "ROC-AUC" in info["warnings"][0]

    rc, out, err = run_cli(["inspect", ds], capsys)
    assert rc == 0, err
    lines = out.splitlines()
    row = next(line for line in lines if line.strip().startswith("fraud"))
    assert row.split() == ["fraud", str(want_train[1]), f"{want_train[1] / want_train.sum():.1%}",
                           "20", f"{20 / 98:.1%}"]
    assert f"training split ({want_train.sum()})" in out and "labelled nodes (98)" in out
    warning = [line for line in lines if line.strip().startswith("warning:")]
    assert len(warning) == 1 and f"{78 / 98:.1%}" in warning[0] and "macro-F1" in warning[0]


def test_inspect_balanced_task_has_no_warning(tmp_path, capsys):
    labels = np.arange(30) % 3
    ds = _write(tmp_path / "ds", labels, np.arange(12), 3)
    rc, out, _ = run_cli(["inspect", ds, "--json"], capsys)
    info = json.loads(out)
    assert rc == 0 and info["warnings"] == []
    assert info["class_balance"]["train"]["counts"] == [4, 4, 4]
    assert info["class_balance"]["labelled"]["shares"] == pytest.approx([1 / 3] * 3, abs=1e-6)
    rc, out, _ = run_cli(["inspect", ds], capsys)
    assert "warning" not in out and "class balance" in out


def test_inspect_warns_when_only_the_training_split_is_skewed(tmp_path, capsys):
    labels = np.arange(40) % 2  # 50/50 overall
    train = np.array([0, 2, 4, 6, 8, 10, 12, 14, 1])  # 8 of class 0, 1 of class 1
    ds = _write(tmp_path / "ds", labels, train, 2)
    rc, out, _ = run_cli(["inspect", ds, "--json"], capsys)
    (w,) = json.loads(out)["warnings"]
    assert "training split" in w and f"{8 / 9:.1%}" in w


def test_inspect_many_classes_lists_the_largest(tmp_path, capsys):
    labels = np.repeat(np.arange(12), np.arange(1, 13))  # class c has c + 1 nodes
    ds = _write(tmp_path / "ds", labels, np.arange(0, labels.size, 2), 12,
                class_names=[f"c{i}" for i in range(12)])
    rc, out, _ = run_cli(["inspect", ds], capsys)
    assert rc == 0
    rows = [line.split()[0] for line in out.splitlines() if re.match(r"    c\d+ ", line)]
    assert rows == [f"c{i}" for i in range(11, 1, -1)]
    assert "... and 2 smaller classes" in out


def test_inspect_no_validate_reports_bad_labels_and_split_ids(tmp_path, capsys):
    labels = np.arange(20) % 2
    ds = _write(tmp_path / "ds", labels, np.arange(6), 2)
    bad = labels.copy()
    bad[[3, 9]] = 7  # beyond num_classes: refused with validation, counted without
    np.save(ds / "node_features" / "label.npy", bad)
    rc, _, err = run_cli(["inspect", ds], capsys)
    assert rc == 2 and "label" in err
    rc, out, err = run_cli(["inspect", ds, "--no-validate", "--json"], capsys)
    assert rc == 0, err
    info = json.loads(out)
    assert info["class_balance"]["labelled"]["out_of_range"] == 2
    assert any("2 labels are >= num_classes (2)" in w for w in info["warnings"])

    np.save(ds / "node_features" / "label.npy", labels)
    np.save(ds / "splits" / "train.npy", np.array([0, 1, 2, 3, 4, 20], np.int64))
    rc, _, err = run_cli(["inspect", ds, "--no-validate"], capsys)
    assert_one_line_error(rc, err, "train.npy", "node ids must lie in [0, 20)")
