"""Link-prediction datasets: node_pairs splits round-trip, broken ones are clear errors, the
built-in synthetic one, the OGB link layout and Cora's 85/5/10 edge split."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from graphfeed.datasets.format import Dataset, write_dataset
from graphfeed.datasets.link import (graph_pairs, random_edge_split, without_pairs,
                                     write_link_dataset)
from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.graph.csc import CSCGraph



def small_graph(n=60, seed=0) -> CSCGraph:
    rng = np.random.default_rng(seed)
    s, d = rng.integers(0, n, 300), rng.integers(0, n, 300)
    return CSCGraph.from_edges(s, d, n, add_reverse=True, drop_self_loops=True,
                               drop_duplicates=True)


def write_small(tmp_path, **kw):
    g = small_graph()
    splits = random_edge_split(g, (0.7, 0.1, 0.2), seed=1, undirected=True)
    args = dict(graph=g, node_features={"feat": np.ones((g.num_nodes, 4), np.float32)},
                splits=splits, undirected=True)
    args.update(kw)
    return write_link_dataset(tmp_path / "ds", **args), g, splits


def test_round_trip(tmp_path):
    path, g, splits = write_small(tmp_path)
    neg = np.random.default_rng(0).integers(0, 60, (splits["test"].shape[1], 5))
    path, g, splits = write_small(tmp_path, negatives={"test": neg}, overwrite=True)
    ds = Dataset.open(path)
    assert ds.task_type == "link_prediction" and ds.num_classes == 0
    for k in ("train", "valid", "test"):
        pairs, n = ds.link_split(k)
        assert np.array_equal(pairs, splits[k]) and pairs.dtype == np.int64
        assert (n is None) == (k != "test")
    assert np.array_equal(ds.link_split("test")[1], neg)
    assert np.array_equal(np.asarray(ds.graph.indices), np.asarray(g.indices))
    assert ds.metadata.graph.undirected
    meta = json.loads((path / "graphfeed.json").read_text())
    assert meta["task"] == {"type": "link_prediction"}
    assert meta["splits"]["test_neg"]["kind"] == "negative_dst"
    # node datasets do not answer link questions
    nd = write_dataset(tmp_path / "nd", graph=g, node_features={"label": np.zeros(60, np.int64)},
                       splits={"train": np.arange(3)}, num_classes=2)
    with pytest.raises(GraphfeedError, match="node_classification dataset; it has no link"):
        Dataset.open(nd).link_split("train")


def test_random_edge_split_is_disjoint_and_covers_each_edge_once():
    g = small_graph()
    sp = random_edge_split(g, (0.85, 0.05, 0.10), seed=3, undirected=True)
    keys = [set(zip(*np.sort(v, axis=0).tolist())) for v in sp.values()]
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    e = graph_pairs(g)
    undirected = set(zip(*np.sort(e[:, e[0] != e[1]], axis=0).tolist()))
    assert set().union(*keys) == undirected
    assert abs(sp["train"].shape[1] / len(undirected) - 0.85) < 0.01
    assert np.array_equal(random_edge_split(g, seed=3, undirected=True)["valid"], sp["valid"])


def test_without_pairs_removes_exactly_those_edges():
    g = small_graph()
    e = graph_pairs(g)
    drop = e[:, :10]
    h = without_pairs(g, drop, reverse=True)
    left = set(zip(*graph_pairs(h).tolist()))
    banned = set(zip(*drop.tolist())) | set(zip(drop[1].tolist(), drop[0].tolist()))
    assert left == set(zip(*e.tolist())) - banned
    assert set(zip(*graph_pairs(without_pairs(g, drop)).tolist())) == \
        set(zip(*e.tolist())) - set(zip(*drop.tolist()))


def _edit_split(path: Path, name: str, arr: np.ndarray, size=None) -> None:
    np.save(path / "splits" / f"{name}.npy", arr)
    meta = json.loads((path / "graphfeed.json").read_text())
    meta["splits"][name]["size"] = int(arr.shape[1] if size is None else size)
    (path / "graphfeed.json").write_text(json.dumps(meta))


def test_broken_link_splits_are_clear_errors(tmp_path):
    path, g, splits = write_small(tmp_path)
    e = graph_pairs(g)
    non_edge = next((u, v) for u in range(60) for v in range(60)
                    if u != v and not ((e[0] == u) & (e[1] == v)).any())
    bad = splits["valid"].copy()
    bad[:, 2] = non_edge
    _edit_split(path, "valid", bad)
    with pytest.raises(DatasetError, match=rf"valid.npy: split 'valid' pair 2 \({non_edge[0]} -> "
                                           rf"{non_edge[1]}\) is not an edge of the graph"):
        Dataset.open(path)
    bad[:, 2] = (0, 60)
    _edit_split(path, "valid", bad)
    with pytest.raises(DatasetError, match=r"valid.npy: split 'valid' node id 60 at \(1, 2\) "
                                           r"is out of range \[0, 60\)"):
        Dataset.open(path)
    _edit_split(path, "valid", splits["valid"][:, :3].T.copy(), size=3)
    with pytest.raises(DatasetError, match=r"valid.npy: node_pairs must have shape \(2, size = 3\)"):
        Dataset.open(path)
    _edit_split(path, "valid", splits["test"][::-1, :4].copy())  # reverses of test edges
    with pytest.raises(DatasetError, match=r"test.npy: edge .* \(or its reverse: the graph is "
                                           r"undirected\) is in both split 'valid' and split 'test'"):
        Dataset.open(path)
    _edit_split(path, "valid", splits["valid"].astype(np.float32))
    with pytest.raises(DatasetError, match="valid.npy: node_pairs must be a 2-D integer array"):
        Dataset.open(path)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m["splits"]["train"].update(kind="node_ids"),
     r"splits.train.kind: a link_prediction task needs 'node_pairs' splits"),
    (lambda m: m["splits"].pop("train"), "needs a 'train' split of node_pairs"),
    (lambda m: m["splits"]["valid"].update(kind="negative_dst"),
     r"splits.valid: negatives are named after their pairs' split"),
    (lambda m: m["splits"].update(test_neg={"path": "splits/test.npy", "kind": "negative_dst",
                                            "size": 1}),
     r"splits.test_neg.size: 1 rows of negatives for the \d+ pairs of split 'test'"),
    (lambda m: m["task"].update(target="feat"), r"task: unknown key\(s\) \['target'\]"),
    (lambda m: m["task"].update(type="node_classification", target="feat", num_classes=2)
     or m["splits"]["valid"].update(kind="node_ids"),
     "splits.train.kind: 'node_pairs' splits belong to a link_prediction task"),
])
def test_broken_link_metadata_is_a_clear_error(tmp_path, edit, message):
    path, _, _ = write_small(tmp_path)
    meta = json.loads((path / "graphfeed.json").read_text())
    edit(meta)
    (path / "graphfeed.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match=message):
        Dataset.open(path)


def test_writer_refuses_bad_input_and_publishes_nothing(tmp_path):
    g = small_graph()
    with pytest.raises(DatasetError, match="not an edge of the graph"):
        write_link_dataset(tmp_path / "x", graph=g, node_features={},
                           splits={"train": np.array([[0], [0]])})
    assert not (tmp_path / "x").exists()
    with pytest.raises(DatasetError, match="negatives of split 'valid'"):
        write_link_dataset(tmp_path / "x", graph=g, node_features={},
                           splits={"train": graph_pairs(g)[:, :3]},
                           negatives={"valid": np.zeros((3, 2), np.int64)})
    with pytest.raises(DatasetError, match="must be a 2-D integer array"):
        write_link_dataset(tmp_path / "x", graph=g, node_features={},
                           splits={"train": graph_pairs(g)[0]})


def test_builtin_synthetic_link_dataset(tmp_path):
    from graphfeed.datasets.open import open_dataset

    ds = open_dataset("link", str(tmp_path))
    assert ds.task_type == "link_prediction" and ds.metadata.graph.undirected
    tr, va, te = (ds.link_split(k)[0].shape[1] for k in ("train", "valid", "test"))
    total = tr + va + te
    assert abs(tr / total - 0.85) < 0.01 and abs(te / total - 0.10) < 0.01
    assert ds.features["feat"].row_shape == (32,)


def _gz(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        for r in rows:
            f.write(",".join(str(int(v)) for v in r) + "\n")


def test_ogbl_layout(tmp_path):
    from graphfeed.datasets.importers.link import prepare_ogbl

    g = small_graph()
    sp = random_edge_split(g, (0.8, 0.1, 0.1), seed=0, undirected=True)
    src = tmp_path / "ogbl_toy"
    _gz(src / "raw" / "edge.csv.gz", sp["train"].T)
    _gz(src / "raw" / "num-node-list.csv.gz", [[60]])
    _gz(src / "raw" / "node-feat.csv.gz", np.arange(120).reshape(60, 2))
    for k in ("train", "valid", "test"):
        _gz(src / "split" / "time" / f"{k}.csv.gz", sp[k].T)
    neg = np.random.default_rng(0).integers(0, 60, (sp["test"].shape[1], 3))
    _gz(src / "split" / "time" / "test_neg.csv.gz", neg)
    rep = prepare_ogbl(src, tmp_path / "out", undirected=True)
    ds = Dataset.open(rep.path)
    assert rep.split_sizes["test_neg"] == sp["test"].shape[1] and "prepared" in rep.summary()
    assert ds.name == "ogbl_toy" and ds.num_nodes == 60
    for k in ("train", "valid", "test"):
        assert np.array_equal(ds.link_split(k)[0], sp[k])
    assert np.array_equal(ds.link_split("test")[1], neg)
    assert ds.num_edges == g.num_edges  # train edges + valid/test pairs, both ways
    assert np.array_equal(np.asarray(ds.features["feat"].read(np.array([3]))), [[6.0, 7.0]])
    _gz(src / "split" / "time" / "test_neg.csv.gz", neg[:-1])
    with pytest.raises(DatasetError, match="test_neg.csv.gz: .* lines of negatives"):
        prepare_ogbl(src, tmp_path / "out2", undirected=True)
    _gz(src / "split" / "time" / "test_neg.csv.gz", neg)
    _gz(src / "raw" / "num-node-list.csv.gz", [[10]])
    with pytest.raises(DatasetError, match=r"out of range \[0, 10\)"):
        prepare_ogbl(src, tmp_path / "out3")


def test_cora_85_5_10_edge_split(cora_link):
    out = cora_link
    ds = Dataset.open(out)
    sizes = [ds.link_split(k)[0].shape[1] for k in ("train", "valid", "test")]
    assert ds.num_nodes == 2708 and abs(sum(sizes) - 5278) < 60
    assert [round(s / sum(sizes), 2) for s in sizes] == [0.85, 0.05, 0.10]


def test_prepare_cli_link_split_and_ogbl(tmp_path, capsys):
    from graphfeed.cli.main import main

    g = small_graph()
    node = write_dataset(tmp_path / "node", graph=g,
                         node_features={"feat": np.ones((60, 2), np.float32),
                                        "label": np.zeros(60, np.int64)},
                         splits={"train": np.arange(5)}, num_classes=2, undirected=True)
    assert main(["prepare", "link-split", str(node), str(tmp_path / "ls"), "--split",
                 "0.8,0.1,0.1", "--seed", "4"]) == 0
    assert "prepared" in capsys.readouterr().out
    ds = Dataset.open(tmp_path / "ls")
    want = random_edge_split(g, (0.8, 0.1, 0.1), seed=4, undirected=True)
    assert all(np.array_equal(ds.link_split(k)[0], want[k]) for k in want)
    with pytest.raises(SystemExit) as e:  # a node-classification option: not offered
        main(["prepare", "link-split", str(node), str(tmp_path / "ls2"), "--num-classes", "3"])
    assert e.value.code == 2
    assert "unrecognized arguments: --num-classes 3" in capsys.readouterr().err
    src = tmp_path / "toy"
    _gz(src / "raw" / "edge.csv.gz", want["train"].T)
    for k in ("train", "valid", "test"):
        _gz(src / "split" / "s" / f"{k}.csv.gz", want[k].T)
    assert main(["prepare", "ogbl", str(src), str(tmp_path / "o"), "--undirected"]) == 0
    assert np.array_equal(Dataset.open(tmp_path / "o").link_split("valid")[0], want["valid"])


def test_inspect_describes_a_link_dataset(tmp_path, capsys):
    """Issue 29: inspect on any link-prediction dataset died with KeyError: '' (it looked up
    the labels of a task that has none). It now summarises the pairs and fixed negatives."""
    from graphfeed.cli.main import main

    g = small_graph()
    splits = random_edge_split(g, (0.7, 0.1, 0.2), seed=1, undirected=True)
    neg = np.random.default_rng(0).integers(0, 60, (splits["test"].shape[1], 5))
    path, g, splits = write_small(tmp_path, negatives={"test": neg})
    assert main(["inspect", str(path), "--json", "--nproc", "2"]) == 0
    info = json.loads(capsys.readouterr().out)
    P = {k: int(v.shape[1]) for k, v in splits.items()}
    assert info["task"] == {"type": "link_prediction", "target": None, "num_classes": None,
                            "labelled": None, "pairs": P, "negatives_per_pair": {"test": 5},
                            "relations": None}
    assert info["types"] is None and info["class_balance"] == {} and info["warnings"] == []
    assert info["splits"] == {**P, "test_neg": P["test"]}
    assert info["features"] == {"feat": {"dtype": "float32", "shape": [60, 4], "bytes": 960}}
    assert [e["nproc"] for e in info["estimates"]] == [1, 2]
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert (f"task link_prediction: pairs train {P['train']}, valid {P['valid']}, test "
            f"{P['test']}; fixed negatives per pair: test 5\n") in out
    assert "class balance" not in out and "memory estimate" in out
