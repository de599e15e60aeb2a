"""Typed link-prediction datasets: per-edge-type node_pairs splits round-trip, the reverse
relation is read off the graph, the message-passing graph loses exactly the held-out edges,
and fuzzed broken datasets fail with a DatasetError naming the file and the value."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphfeed.datasets.format import Dataset
from graphfeed.datasets.hetero_link import (random_relation_split, reverse_edge_types,
                                            typed_link_edge_types, typed_link_split,
                                            without_typed_pairs, write_typed_link_dataset)
from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.graph.hetero import HeteroGraph

NUM = {"user": 30, "item": 20}
B = ("user", "buys", "item")
BB = ("item", "bought_by", "user")
F = ("user", "follows", "user")  # directed
K = ("user", "knows", "user")  # symmetric


def _graph(seed=0):
    rng = np.random.default_rng(seed)
    u, i = rng.integers(0, 30, 120), rng.integers(0, 20, 120)
    a, b = rng.integers(0, 30, 60), rng.integers(0, 30, 60)
    c, d = rng.integers(0, 30, 40), rng.integers(0, 30, 40)
    ka, kb = c[c != d], d[c != d]
    return HeteroGraph.from_edges(NUM, {B: (u, i), BB: (i, u), F: (a[a != b], b[a != b]),
                                        K: (np.r_[ka, kb], np.r_[kb, ka])},
                                  drop_duplicates=True)


def _write(path, g=None, **kw):
    g = g or _graph()
    splits = random_relation_split(g, [B, K], (0.6, 0.2, 0.2), seed=3)
    feats = {"user": {"feat": np.ones((30, 3), np.float32)},
             "item": {"feat": np.arange(40, dtype=np.float32).reshape(20, 2)}}
    args = dict(graph=g, splits=splits, type_features=feats)
    args.update(kw)
    return write_typed_link_dataset(path, **args), g, splits


def test_reverse_relations_are_read_off_the_graph():
    assert reverse_edge_types(_graph()) == {B: BB, BB: B, K: K}


def test_round_trip(tmp_path):
    g = _graph()
    splits = random_relation_split(g, [B, K], (0.6, 0.2, 0.2), seed=3)
    neg = {B: np.random.default_rng(0).integers(0, 20, (splits["test"][B].shape[1], 4))}
    path, g, splits = _write(tmp_path / "ds", negatives={"test": neg})
    ds = Dataset.open(path)
    assert ds.task_type == "link_prediction" and ds.hetero is not None
    assert typed_link_edge_types(ds) == [B, K]
    for name in ("train", "valid", "test"):
        got = typed_link_split(ds, name)
        assert set(got) == {B, K}
        for et in (B, K):
            assert np.array_equal(got[et][0], splits[name][et])
        assert (got[B][1] is None) == (name != "test")
    assert np.array_equal(typed_link_split(ds, "test")[B][1], neg[B])
    assert np.array_equal(ds.type_features["item"]["feat"].read(np.arange(20)).numpy(),
                          np.arange(40, dtype=np.float32).reshape(20, 2))
    meta = json.loads((path / "graphfeed.json").read_text())
    assert meta["splits"]["test_neg.user.buys.item"]["kind"] == "negative_dst"
    assert "target_type" not in meta["hetero"]
    # the whole folder again, through the full validation
    from graphfeed.datasets.validate import load_folder

    load_folder(path, mmap=True, full=True)


def test_relation_split_covers_each_edge_once_and_skips_reverses():
    g = _graph()
    sp = random_relation_split(g, [B, BB, K], (0.5, 0.25, 0.25), seed=0)
    assert set(sp["train"]) == {B, K}  # bought_by holds the reverses of buys
    for et in (B, K):
        got = np.concatenate([sp[k][et] for k in sp], axis=1)
        s, d = g.edges_of(et)
        keys = set(zip(s.tolist(), d.tolist()))
        if et == K:
            keys = {(a, b) for a, b in keys if a < b}  # one direction of the symmetric one
        pairs = set(zip(got[0].tolist(), got[1].tolist()))
        assert pairs <= keys and len(pairs) == got.shape[1]  # distinct, in no two splits
        assert got.shape[1] >= len(keys) - 1  # all of them, but for rounding


def test_without_typed_pairs_removes_exactly_those_edges_and_their_reverses():
    g = _graph()
    sp = random_relation_split(g, [B, K], (0.6, 0.2, 0.2), seed=3)
    held = {et: np.concatenate([sp["valid"][et], sp["test"][et]], axis=1) for et in (B, K)}
    mp = without_typed_pairs(g, held, reverse=reverse_edge_types(g))
    mp.validate()

    def es(graph, et):
        s, d = graph.edges_of(et)
        return set(zip(s.tolist(), d.tolist()))

    for et, rev in ((B, BB), (K, K)):
        gone = set(zip(held[et][0].tolist(), held[et][1].tolist()))
        back = {(b, a) for a, b in gone}
        assert es(mp, et) == es(g, et) - gone - (back if rev == et else set())
        assert es(mp, rev) == es(g, rev) - back - (gone if rev == et else set())
    assert es(mp, F) == es(g, F)
    plain = without_typed_pairs(g, held)
    assert es(plain, BB) == es(g, BB)


def test_writer_refuses_bad_input_and_publishes_nothing(tmp_path):
    g = _graph()
    s, d = g.edges_of(F)
    non_edge = next((a, b) for a in range(30) for b in range(30)
                    if not ((s == a) & (d == b)).any())
    with pytest.raises(DatasetError, match=r"pair 0 \(.*\) is not an edge of \('user', "
                                           r"'follows', 'user'\)"):
        write_typed_link_dataset(tmp_path / "x", graph=g,
                                 splits={"train": {F: np.array([[non_edge[0]], [non_edge[1]]])}})
    assert not (tmp_path / "x").exists()
    with pytest.raises(GraphfeedError, match="unknown edge type"):
        write_typed_link_dataset(tmp_path / "x", graph=g,
                                 splits={"train": {("user", "sells", "item"): np.zeros((2, 1))}})
    with pytest.raises(DatasetError, match="negatives of split 'valid'"):
        write_typed_link_dataset(tmp_path / "x", graph=g, splits={"train": {F: np.stack([s, d])}},
                                 negatives={"valid": {F: np.zeros((1, 1), np.int64)}})
    with pytest.raises(DatasetError, match="must be a 2-D integer array"):
        write_typed_link_dataset(tmp_path / "x", graph=g, splits={"train": {F: s}})
    with pytest.raises(DatasetError, match="needs a 'train"):
        write_typed_link_dataset(tmp_path / "x", graph=g, splits={"valid": {F: np.stack([s, d])}})
    with pytest.raises(GraphfeedError, match="HeteroGraph"):
        write_typed_link_dataset(tmp_path / "x", graph=g.csc, splits={})
    assert not (tmp_path / "x").exists()


def test_a_homogeneous_link_dataset_reads_as_before(tmp_path):
    from graphfeed.datasets.link import random_edge_split, write_link_dataset

    g = _graph().csc
    sp = random_edge_split(g, seed=0)
    ds = Dataset.open(write_link_dataset(tmp_path / "h", graph=g, node_features={}, splits=sp))
    assert ds.hetero is None and np.array_equal(ds.link_split("train")[0], sp["train"])


# --------------------------------------------------------------------------- fuzzed breakage
@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    g = _graph()
    splits = random_relation_split(g, [B, K], (0.6, 0.2, 0.2), seed=3)
    neg = {B: np.random.default_rng(0).integers(0, 20, (splits["valid"][B].shape[1], 3))}
    path, _, _ = _write(tmp_path_factory.mktemp("golden") / "ds", negatives={"valid": neg})
    return path


def _meta(root):
    return json.loads((root / "graphfeed.json").read_text())


def _set(root, m):
    (root / "graphfeed.json").write_text(json.dumps(m))


def _split_file(root, name):
    return root / "splits" / f"{name}.npy"


def b_out_of_range(root, draw):
    name = draw(st.sampled_from(["train.user.buys.item", "valid.user.knows.user"]))
    a = np.load(_split_file(root, name))
    row = draw(st.integers(0, 1))
    limit = 30 if row == 0 or name.endswith("knows.user") else 20
    a[row, draw(st.integers(0, a.shape[1] - 1))] = draw(st.sampled_from([limit, limit + 7, -1]))
    np.save(_split_file(root, name), a)
    return re.escape(name) + r"\.npy", r"out of range \[0, \d+\) of node type"


def b_not_an_edge(root, draw):
    name = "test.user.buys.item"
    a = np.load(_split_file(root, name))
    g = _graph()
    s, d = g.edges_of(B)
    have = set(zip(s.tolist(), d.tolist()))
    u = draw(st.integers(0, 29))
    v = next(x for x in range(20) if (u, x) not in have)
    a[:, draw(st.integers(0, a.shape[1] - 1))] = (u, v)
    np.save(_split_file(root, name), a)
    return re.escape(name) + r"\.npy", rf"\({u} -> {v}\) is not an edge of \('user', 'buys'"


def b_overlap(root, draw):
    # a test edge, or its reverse (knows is symmetric), also in valid: a leak
    name = draw(st.sampled_from(["user.buys.item", "user.knows.user"]))
    test = np.load(_split_file(root, "test." + name))
    valid = np.load(_split_file(root, "valid." + name))
    col = test[:, draw(st.integers(0, test.shape[1] - 1))]
    if name.endswith("knows.user") and draw(st.booleans()):
        col = col[::-1]
    valid[:, 0] = col
    np.save(_split_file(root, "valid." + name), valid)
    return r"\.npy", "is in both split 'valid' and split 'test'|is in both split 'test' and split 'valid'"


def b_negatives(root, draw):
    name = "valid_neg.user.buys.item"
    a = np.load(_split_file(root, name))
    what = draw(st.sampled_from(["range", "shape"]))
    if what == "range":
        a[0, 0] = 20
        np.save(_split_file(root, name), a)
        return re.escape(name) + r"\.npy", r"id 20 .* out of range \[0, 20\) of node type 'item'"
    np.save(_split_file(root, name), a[:-1])
    return re.escape(name) + r"\.npy", "negative_dst must have shape"


def b_names(root, draw):
    m = _meta(root)
    what = draw(st.sampled_from(["untyped", "unknown", "kind", "target", "notrain", "negowner"]))
    s = m["splits"]
    if what == "untyped":
        s["train"] = s.pop("train.user.buys.item")
        return "graphfeed.json", r"splits.train: a typed link split is named", _set(root, m)
    if what == "unknown":
        s["train.user.sells.item"] = s.pop("train.user.buys.item")
        return "graphfeed.json", "after one edge type", _set(root, m)
    if what == "kind":
        s["train.user.buys.item"]["kind"] = "negative_dst"
        return "graphfeed.json", r"expected 'node_pairs'", _set(root, m)
    if what == "target":
        m["hetero"]["target_type"] = "user"
        return "graphfeed.json", "names no target_type", _set(root, m)
    if what == "notrain":
        for k in [k for k in s if k.startswith("train.")]:
            s.pop(k)
        return "graphfeed.json", "needs a 'train", _set(root, m)
    s["train_neg.user.buys.item"] = dict(s.pop("valid_neg.user.buys.item"))
    return "graphfeed.json", r"rows of negatives for the \d+ pairs|one row per pair", _set(root, m)


BREAKERS = [b_out_of_range, b_not_an_edge, b_overlap, b_negatives, b_names]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), breaker=st.sampled_from(BREAKERS))
def test_broken_typed_link_dataset_is_a_dataset_error(golden, tmp_path_factory, data, breaker):
    root = tmp_path_factory.mktemp("broken") / "ds"
    shutil.copytree(golden, root)
    file_pat, msg_pat, *_ = breaker(root, data.draw)
    with pytest.raises(DatasetError) as e:
        Dataset.open(root)
    text = str(e.value)
    assert re.search(file_pat, text), text
    assert re.search(msg_pat, text), text


def test_prepare_link_split_of_a_relation(builtin_root, tmp_path, capsys):
    from graphfeed.cli.main import main

    src = f"{builtin_root('hetero')}/synthetic-hetero-v2"
    assert main(["prepare", "link-split", src, str(tmp_path / "w"), "--relation", "writes",
                 "--split", "0.8,0.1,0.1", "--seed", "4"]) == 0
    ds = Dataset.open(tmp_path / "w")
    et = ("author", "writes", "paper")
    assert typed_link_edge_types(ds) == [et]
    sizes = {k: typed_link_split(ds, k)[et][0].shape[1] for k in ("train", "valid", "test")}
    assert sizes["train"] > 7 * sizes["valid"] > 0 and abs(sizes["valid"] - sizes["test"]) <= 1
    assert set(ds.type_features) == {"author", "field", "paper"} and "label" in ds.features
    assert ds.metadata.extra["link_split"]["edge_types"] == [list(et)]
    # a heterogeneous source needs the relation; a homogeneous one refuses it
    with pytest.raises(GraphfeedError, match="name the relation"):
        from graphfeed.datasets.importers.link import prepare_link_split

        prepare_link_split(src, tmp_path / "x")
    assert main(["prepare", "link-split", src, str(tmp_path / "y"), "--relation",
                 "paper:sells:paper"]) != 0
    assert "unknown edge type" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_prepare_link_split_of_a_builtin_name(builtin_root, tmp_path, capsys):
    """The README's typed-link example splits the built-in ``hetero`` by name (it once named a
    folder nothing created): SRC may be a built-in name, cached under --data-root."""
    from graphfeed.cli.main import main

    root = builtin_root("hetero")
    before = sorted(Path(root).iterdir())
    assert main(["prepare", "link-split", "hetero", str(tmp_path / "c"), "--relation",
                 "paper:cites:paper", "--data-root", root]) == 0, capsys.readouterr().err
    ds = Dataset.open(tmp_path / "c")
    et = ("paper", "cites", "paper")
    assert typed_link_edge_types(ds) == [et] and ds.metadata.extra["link_split"]["from"] == (
        "synthetic-hetero")
    assert sorted(Path(root).iterdir()) == before  # the cached one was used, not rebuilt


def test_inspect_describes_a_typed_link_dataset(tmp_path, capsys):
    """Issue 29: inspect on a typed link dataset died with KeyError: ''. It now shows the node
    and edge types, the pairs per predicted relation and the per-type features (counted in the
    memory estimate)."""
    from graphfeed.cli.main import main

    g = _graph()
    splits = random_relation_split(g, [B, K], (0.6, 0.2, 0.2), seed=3)
    neg = {B: np.random.default_rng(0).integers(0, 20, (splits["test"][B].shape[1], 4))}
    path, g, splits = _write(tmp_path / "ds", negatives={"test": neg})
    assert main(["inspect", str(path), "--json", "--nproc", "1"]) == 0
    info = json.loads(capsys.readouterr().out)
    rels = {".".join(et): {"pairs": {s: int(splits[s][et].shape[1]) for s in splits},
                           "negatives_per_pair": {"test": 4} if et == B else {}}
            for et in (B, K)}
    t = info["task"]
    assert t["type"] == "link_prediction" and t["relations"] == rels
    assert t["pairs"] == {s: sum(int(splits[s][et].shape[1]) for et in (B, K)) for s in splits}
    assert t["negatives_per_pair"] == {"test": 4}
    et = np.asarray(g.edge_type)
    assert info["types"] == {
        "node_types": {"user": 30, "item": 20},
        "edge_types": {".".join(e): int(np.count_nonzero(et == i))
                       for i, e in enumerate(g.edge_types)},
        "target_type": None}
    assert info["features"]["user/feat"] == {"dtype": "float32", "shape": [30, 3], "bytes": 360}
    assert info["features"]["item/feat"]["bytes"] == 160
    assert info["estimates"][0]["feature_bytes"] == 520
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  node types user 30, item 20\n" in out
    assert "task link_prediction over 2 relations\n" in out
    b = rels["user.buys.item"]["pairs"]
    assert (f"    user.buys.item: pairs train {b['train']}, valid {b['valid']}, test {b['test']}; "
            f"fixed negatives per pair: test 4\n") in out
    assert "    user.knows.user: pairs " in out and "negatives drawn while training" in out
