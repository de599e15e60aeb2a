"""``graphfeed prepare generic`` with type columns (``--node-types``, ``--edge-type-col`` /
``--edge-type-key``): a heterogeneous dataset, node ids relabelled per type."""

from __future__ import annotations

import numpy as np
import pytest

from graphfeed.cli.main import main
from graphfeed.datasets.format import Dataset
from graphfeed.datasets.importers.generic import prepare_generic
from graphfeed.errors import DatasetError

TYPES = ["paper", "author", "venue"]


def _graph(seed=0, n=60, e=400):
    """Interleaved node types, edges whose type follows their endpoint types: ``writes``
    author->paper, ``cites`` paper->paper and author->author (one edge type, two type pairs),
    ``in`` paper->venue."""
    rng = np.random.default_rng(seed)
    ntype = rng.integers(0, 3, n)
    ntype[:3] = [0, 1, 2]
    by = {t: np.flatnonzero(ntype == i) for i, t in enumerate(TYPES)}
    kinds = [("author", "writes", "paper"), ("paper", "cites", "paper"),
             ("author", "cites", "author"), ("paper", "in", "venue")]
    rows = []
    for k in range(e):
        st, r, dt = kinds[k % len(kinds)]
        rows.append((int(rng.choice(by[st])), int(rng.choice(by[dt])), r))
    x = rng.standard_normal((n, 5)).astype(np.float32)
    y = np.where(ntype == 0, rng.integers(0, 3, n), -1)
    return ntype, rows, x, y


def _write(tmp_path, ntype, rows, x, y, header=True, names=True):
    tmp_path.mkdir(parents=True, exist_ok=True)
    ef = tmp_path / "edges.csv"
    lines = (["src,dst,etype"] if header else []) + [f"{s},{d},{r}" for s, d, r in rows]
    ef.write_text("\n".join(lines) + "\n")
    nf = tmp_path / "types.txt"
    nf.write_text("\n".join(TYPES[t] if names else str(t) for t in ntype) + "\n")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return ef, nf


def _cli(tmp_path, ef, nf, *extra):
    return main(["prepare", "generic", str(tmp_path / "out"), "--edges", str(ef),
                 "--features", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"),
                 "--node-types", str(nf), "--edge-type-col", "2", "--split", "0.5,0.25,0.25",
                 *extra])


def test_round_trip(tmp_path):
    ntype, rows, x, y = _graph()
    ef, nf = _write(tmp_path, ntype, rows, x, y)
    assert _cli(tmp_path, ef, nf) == 0
    ds = Dataset.open(tmp_path / "out")
    h = ds.hetero
    assert set(h.node_types) == set(TYPES)
    assert h.num_nodes_dict == {t: int((ntype == i).sum()) for i, t in enumerate(TYPES)}
    assert set(h.edge_types) == {("author", "writes", "paper"), ("paper", "cites", "paper"),
                                 ("author", "cites", "author"), ("paper", "in", "venue")}
    orig = np.asarray(ds.features["orig_id"].read(np.arange(h.num_nodes)))
    assert sorted(orig.tolist()) == list(range(len(ntype)))
    # each type a contiguous range, input order kept inside it
    for t in h.node_types:
        lo, hi = int(h.node_offsets[h.type_id(t)]), int(h.node_offsets[h.type_id(t) + 1])
        assert all(TYPES[ntype[v]] == t for v in orig[lo:hi])
        assert np.all(np.diff(orig[lo:hi]) > 0)
        rows_t = np.asarray(ds.type_features[t]["feat"].read(np.arange(hi - lo)))
        np.testing.assert_array_equal(rows_t, x[orig[lo:hi]])
    # every input edge is stored once, with its relation and endpoint types
    got = []
    for et in h.edge_types:
        s, d = h.edges_of(et)
        so, do = int(h.node_offsets[h.type_id(et[0])]), int(h.node_offsets[h.type_id(et[2])])
        got += [(int(orig[a + so]), int(orig[b + do]), et[1]) for a, b in zip(s.tolist(), d.tolist())]
        assert all(TYPES[ntype[orig[a + so]]] == et[0] for a in s.tolist())
        assert all(TYPES[ntype[orig[b + do]]] == et[2] for b in d.tolist())
    assert sorted(got) == sorted(rows)
    # labels and splits on the target type (the labelled one)
    assert ds.metadata.hetero.target_type == "paper"
    lab = np.asarray(ds.labels)
    np.testing.assert_array_equal(lab, np.where(ntype[orig] == 0, y[orig], -1))
    p = h.type_id("paper")
    for ids in (ds.train_ids, ds.valid_ids, ds.test_ids):
        assert len(ids) and np.all((ids >= h.node_offsets[p]) & (ids < h.node_offsets[p + 1]))


def test_ids_npz_and_names(tmp_path):
    ntype, rows, x, y = _graph(1)
    rel = ["writes", "cites", "in"]
    ef = tmp_path / "e.npz"
    np.savez(ef, src=np.array([r[0] for r in rows]), dst=np.array([r[1] for r in rows]),
             et=np.array([rel.index(r[2]) for r in rows], dtype=np.int32))
    np.save(tmp_path / "nt.npy", ntype.astype(np.int16))
    r = prepare_generic(tmp_path / "out", edges=str(ef), labels=y, features={"feat": x},
                        node_types=str(tmp_path / "nt.npy"), edge_type_key="et",
                        node_type_names="paper,author,venue", edge_type_names=rel,
                        splits={"train": np.flatnonzero(ntype == 0)[:5]}, undirected=True)
    ds = Dataset.open(r.path)
    assert ds.hetero.node_types == tuple(TYPES)
    assert ("venue", "rev_in", "paper") in ds.hetero.edge_types
    assert ds.hetero.num_edges == 2 * len(rows)
    orig = np.asarray(ds.features["orig_id"].read(np.arange(len(ntype))))
    np.testing.assert_array_equal(orig[ds.train_ids], np.flatnonzero(ntype == 0)[:5])
    # an "id,type" table in any row order gives the same dataset
    tf = tmp_path / "types.csv"
    order = np.random.default_rng(0).permutation(len(ntype))
    tf.write_text("id,type\n" + "".join(f"{i},{TYPES[ntype[i]]}\n" for i in order))
    r3 = prepare_generic(tmp_path / "out3", edges=str(ef), labels=y, features={"feat": x},
                         node_types=str(tf), edge_type_key="et",
                         node_type_names="paper,author,venue", edge_type_names=rel,
                         splits={"train": np.flatnonzero(ntype == 0)[:5]}, undirected=True)
    np.testing.assert_array_equal(
        np.asarray(Dataset.open(r3.path).features["orig_id"].read(np.arange(len(ntype)))), orig)
    # without declared names, ids are named type<k> / rel<k>
    r2 = prepare_generic(tmp_path / "out2", edges=str(ef), labels=y, features={"feat": x},
                         node_types=ntype, edge_type_key="et", target_type="type0")
    h2 = Dataset.open(r2.path).hetero
    assert h2.node_types == ("type0", "type1", "type2")
    assert ("type1", "rel0", "type0") in h2.edge_types


def test_errors(tmp_path):
    ntype, rows, x, y = _graph(2)
    ef, nf = _write(tmp_path, ntype, rows, x, y)
    kw = dict(edges=str(ef), labels=y, features={"feat": x}, edge_type_col=2)
    out = tmp_path / "out"
    bad = tmp_path / "bad_types.txt"
    bad.write_text("\n".join(["paper"] * (len(ntype) - 1) + ["journal"]) + "\n")
    with pytest.raises(DatasetError, match=rf"{bad.name}.*line {len(ntype)}.*'journal'"):
        prepare_generic(out, node_types=str(bad), node_type_names=TYPES, **kw)
    with pytest.raises(DatasetError, match=r"type id 3 is out of range \[0, 3\)"):
        prepare_generic(out, node_types=np.r_[ntype[:-1], 3], node_type_names=TYPES, **kw)
    with pytest.raises(DatasetError, match=r"59 node types for 60 nodes \(feature 'feat' has 60 rows\)"):
        prepare_generic(out, node_types=ntype[:-1], **kw)
    with pytest.raises(DatasetError, match=r"edges.csv.*edge type 'owns' has no edges"):
        prepare_generic(out, node_types=str(nf), edge_type_names="writes,cites,in,owns", **kw)
    with pytest.raises(DatasetError, match=r"edges.csv.*unknown type name 'in'"):
        prepare_generic(out, node_types=str(nf), edge_type_names="writes,cites", **kw)
    ids_f = tmp_path / "ids.csv"  # numeric edge types in a text list: the compiled parser
    ids_f.write_text("".join(f"{a},{b},{['writes', 'cites', 'in'].index(r)}\n" for a, b, r in rows)
                     + "0,1,7\n")
    with pytest.raises(DatasetError, match=r"ids.csv: edge 400: type id 7 is out of range \[0, 3\)"):
        prepare_generic(out, node_types=str(nf), edge_type_names="writes,cites,in",
                        **{**kw, "edges": str(ids_f)})
    dup = tmp_path / "dup.csv"
    dup.write_text("".join(f"{min(i, 5)},paper\n" for i in range(len(ntype))))
    with pytest.raises(DatasetError, match=r"dup.csv: a node-type table must list every node"):
        prepare_generic(out, node_types=str(dup), **kw)
    author = int(np.flatnonzero(ntype == 1)[0])
    sf = tmp_path / "train.txt"
    sf.write_text(f"{int(np.flatnonzero(ntype == 0)[0])}\n{author}\n")
    with pytest.raises(DatasetError, match=rf"train.txt.*node {author} of type 'author'.*'paper'"):
        prepare_generic(out, node_types=str(nf), splits={"train": str(sf)}, **kw)
    with pytest.raises(DatasetError, match="labelled nodes are of 3 node types"):
        prepare_generic(out, node_types=str(nf), **{**kw, "labels": np.zeros(len(ntype), int)})
    with pytest.raises(DatasetError, match="edge-type-key"):
        prepare_generic(out, node_types=str(nf), edge_type_key="et", **{**kw, "edge_type_col": None})
    with pytest.raises(DatasetError, match="not supported"):
        prepare_generic(out, node_types=str(nf), weight_col=3, **kw)
    assert not out.exists()


def test_train_on_imported(tmp_path, capsys):
    ntype, rows, x, y = _graph(3, n=300, e=3000)
    ef, nf = _write(tmp_path, ntype, rows, x, y, header=False, names=False)
    assert _cli(tmp_path, ef, nf, "--node-type-names", "paper,author,venue",
                "--undirected") == 0
    assert main(["train", "--dataset", str(tmp_path / "out"), "--epochs", "1", "--fanouts", "5,5",
                 "--batch-size", "32", "--hidden", "8", "--device", "cpu", "--threads", "1"]) == 0
    out = capsys.readouterr()
    assert "heterogeneous dataset out (300 nodes of 3 types" in out.out + out.err
    assert "target 'paper'" in out.out + out.err


def test_string_labels_keep_class_names(tmp_path):
    ntype, rows, x, y = _graph(4)
    ef, nf = _write(tmp_path, ntype, rows, x, y)
    lf = tmp_path / "labels.txt"
    lf.write_text("".join(f"{'abc'[v] if v >= 0 else 'nan'}\n" for v in y))
    r = prepare_generic(tmp_path / "o", edges=str(ef), labels=str(lf), features={"feat": x},
                        node_types=str(nf), edge_type_col=2)
    ds = Dataset.open(r.path)
    assert ds.metadata.task.class_names == ("a", "b", "c") and ds.num_classes == 3
