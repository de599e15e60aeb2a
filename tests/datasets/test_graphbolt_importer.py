"""``graphfeed prepare graphbolt``: a DGL GraphBolt ``OnDiskDataset`` folder, written the way
GraphBolt's documentation and tutorials write one (``np.savetxt`` csv edges, ``np.save`` and
``torch.save`` features, a ``metadata.yaml`` of graph, feature_data and tasks), imported, opened
and sampled; bad metadata gets one-line errors and leaves nothing behind."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest
import torch

yaml = pytest.importorskip("yaml")

from graphfeed.datasets.format import Dataset  # noqa: E402
from graphfeed.datasets.importers.graphbolt import prepare_graphbolt  # noqa: E402
from graphfeed.errors import DatasetError  # noqa: E402
from graphfeed.sampling import build_sampler  # noqa: E402

from ds_helpers import assert_one_line_error, run_cli  # noqa: E402

N, E = 200, 1500


def homogeneous(root, *, edge_format="csv"):
    """The homograph tutorial's layout: csv edges, a numpy and a torch node feature, an edge
    feature, a node classification task and a link prediction task."""
    rng = np.random.default_rng(0)
    root.mkdir(parents=True)
    edges = rng.integers(0, N, (E, 2))
    if edge_format == "csv":
        np.savetxt(root / "edges.csv", edges, delimiter=",", fmt="%d")
    else:
        np.save(root / "edges.npy", edges.T.copy())
    np.save(root / "node-feat-0.npy", rng.random((N, 5)).astype(np.float32))
    torch.save(torch.rand(N, 3), root / "node-feat-1.pt")
    np.save(root / "edge-weight.npy", rng.random(E).astype(np.float32) + 0.5)
    labels = rng.integers(0, 10, N)
    ids = rng.permutation(N)
    nc = {"train": ids[:100], "validation": ids[100:140], "test": ids[140:180]}
    for k, v in nc.items():
        np.save(root / f"nc-{k}-seeds.npy", v)
        np.save(root / f"nc-{k}-labels.npy", labels[v])
    # link prediction: train pairs are edges; validation/test: positives, 2 negatives each
    pos = edges[rng.permutation(E)[:60]]
    np.save(root / "lp-train-seeds.npy", pos[:40])
    for k, p in (("validation", pos[40:50]), ("test", pos[50:60])):
        neg = np.stack([np.repeat(p[:, 0], 2), rng.integers(0, N, 2 * p.shape[0])], 1)
        seeds = np.concatenate([p, neg])
        np.save(root / f"lp-{k}-seeds.npy", seeds)
        np.save(root / f"lp-{k}-labels.npy", np.r_[np.ones(len(p)), np.zeros(len(neg))])
        np.save(root / f"lp-{k}-indexes.npy", np.r_[np.arange(len(p)),
                                                    np.repeat(np.arange(len(p)), 2)])
    edge_entry = {"format": edge_format,
                  "path": "edges.csv" if edge_format == "csv" else "edges.npy"}
    meta = {
        "dataset_name": "homogeneous_graph_nc_lp",
        "graph": {"nodes": [{"num": N}], "edges": [edge_entry]},
        "feature_data": [
            {"domain": "node", "name": "feat_0", "format": "numpy", "in_memory": False,
             "path": "node-feat-0.npy"},
            {"domain": "node", "name": "feat_1", "format": "torch", "in_memory": True,
             "path": "node-feat-1.pt"},
            {"domain": "edge", "name": "weight", "format": "numpy", "path": "edge-weight.npy"},
        ],
        "tasks": [
            {"name": "node_classification", "num_classes": 10, **{
                f"{k}_set": [{"data": [
                    {"name": "seeds", "format": "numpy", "path": f"nc-{k}-seeds.npy"},
                    {"name": "labels", "format": "numpy", "path": f"nc-{k}-labels.npy"}]}]
                for k in nc}},
            {"name": "link_prediction", "num_classes": 2,
             "train_set": [{"data": [{"name": "seeds", "format": "numpy",
                                      "path": "lp-train-seeds.npy"}]}],
             **{f"{k}_set": [{"data": [
                 {"name": n, "format": "numpy", "path": f"lp-{k}-{n}.npy"}
                 for n in ("seeds", "labels", "indexes")]}] for k in ("validation", "test")}},
        ],
    }
    (root / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return dict(edges=edges, labels=labels, nc=nc, pos=pos, meta=meta)


def typed(root):
    """The heterograph tutorial's layout with numpy (2, E) edges: users and items, a torch
    feature, a node classification task on users and a link task on user:like:item."""
    rng = np.random.default_rng(1)
    root.mkdir(parents=True)
    n = {"user": 120, "item": 80}
    ets = {"user:like:item": ("user", "item", 600), "user:follow:user": ("user", "user", 400)}
    edges = {}
    for et, (s, d, e) in ets.items():
        a = np.stack([rng.integers(0, n[s], e), rng.integers(0, n[d], e)])
        np.save(root / f"{et.replace(':', '-')}.npy", a)
        edges[et] = a
    np.save(root / "user-feat.npy", rng.random((120, 4)).astype(np.float32))
    torch.save(torch.rand(80, 6), root / "item-feat.pt")
    labels = rng.integers(0, 3, 120)
    ids = rng.permutation(120)
    nc = {"train": ids[:60], "validation": ids[60:80], "test": ids[80:100]}
    for k, v in nc.items():
        np.save(root / f"user-{k}-seeds.npy", v)
        np.save(root / f"user-{k}-labels.npy", labels[v])
    like = edges["user:like:item"].T
    np.save(root / "like-train.npy", like[:100])
    meta = {
        "dataset_name": "heterogeneous_graph_nc_lp",
        "graph": {"nodes": [{"type": "user", "num": 120}, {"type": "item", "num": 80}],
                  "edges": [{"type": et, "format": "numpy",
                             "path": f"{et.replace(':', '-')}.npy"} for et in ets]},
        "feature_data": [
            {"domain": "node", "type": "user", "name": "feat", "format": "numpy",
             "path": "user-feat.npy"},
            {"domain": "node", "type": "item", "name": "feat", "format": "torch",
             "path": "item-feat.pt"}],
        "tasks": [
            {"name": "node_classification", "num_classes": 3, **{
                f"{k}_set": [{"type": "user", "data": [
                    {"name": "seeds", "format": "numpy", "path": f"user-{k}-seeds.npy"},
                    {"name": "labels", "format": "numpy", "path": f"user-{k}-labels.npy"}]}]
                for k in nc}},
            {"name": "link_prediction",
             "train_set": [{"type": "user:like:item", "data": [
                 {"name": "seeds", "format": "numpy", "path": "like-train.npy"}]}]},
        ],
    }
    (root / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return dict(edges=edges, labels=labels, nc=nc, n=n, meta=meta)


def edge_set(graph) -> set:
    dst = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    return set(zip(np.asarray(graph.indices).tolist(), dst.tolist()))


@pytest.mark.parametrize("edge_format", ["csv", "numpy"])
def test_homogeneous_node_classification(tmp_path, edge_format):
    src = tmp_path / "gb"
    made = homogeneous(src, edge_format=edge_format)
    prepare_graphbolt(src, tmp_path / "out", task="node_classification")
    ds = Dataset.open(tmp_path / "out")
    assert ds.name == "homogeneous_graph_nc_lp" and ds.num_classes == 10
    e = made["edges"]
    assert ds.num_edges == E and edge_set(ds.graph) == set(zip(e[:, 0].tolist(),
                                                                 e[:, 1].tolist()))
    assert np.array_equal(ds.arrays.node_features["feat_0"], np.load(src / "node-feat-0.npy"))
    assert torch.equal(ds.features["feat_1"].read(torch.arange(N)),
                       torch.load(src / "node-feat-1.pt"))
    # the edge weights follow their edges into CSC order
    w = np.load(src / "edge-weight.npy")
    order = np.argsort(e[:, 1], kind="stable")
    assert np.allclose(ds.graph.weights, w[order])
    for k, name in (("train", "train"), ("validation", "valid"), ("test", "test")):
        ids = made["nc"][k]
        assert np.array_equal(np.sort(ds.split(name)), np.sort(ids))
        assert np.array_equal(ds.labels[ids], made["labels"][ids])
    unlabelled = np.setdiff1d(np.arange(N), np.concatenate(list(made["nc"].values())))
    assert (ds.labels[unlabelled] == -1).all()
    mb = build_sampler("neighbor", ds.graph, [3, 3]).sample(torch.from_numpy(ds.train_ids[:20]))
    assert mb.seeds.numel() == 20 and mb.num_sampled_edges > 0


def test_homogeneous_link_prediction(tmp_path):
    src = tmp_path / "gb"
    made = homogeneous(src)
    meta = made["meta"]
    del meta["feature_data"][2]  # edge features do not come with a link task
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    prepare_graphbolt(src, tmp_path / "out", task="link_prediction")
    ds = Dataset.open(tmp_path / "out")
    assert ds.task_type == "link_prediction"
    pos = made["pos"]
    train, neg = ds.link_split("train")
    assert np.array_equal(train, pos[:40].T) and neg is None
    valid, neg = ds.link_split("valid")
    assert np.array_equal(valid, pos[40:50].T) and neg.shape == (10, 2)
    seeds = np.load(src / "lp-validation-seeds.npy")
    assert np.array_equal(neg.reshape(-1), seeds[10:, 1])
    assert set(map(tuple, pos.tolist())) <= edge_set(ds.graph)


def test_typed_node_classification_and_link(tmp_path):
    src = tmp_path / "gb"
    made = typed(src)
    prepare_graphbolt(src, tmp_path / "out", task="node_classification")
    ds = Dataset.open(tmp_path / "out")
    g = ds.hetero
    assert g.node_types == ("item", "user")  # GraphBolt numbers types by name
    assert g.edge_types == (("user", "follow", "user"), ("user", "like", "item"))
    for et in ("user:like:item", "user:follow:user"):
        s, d = g.edges_of(tuple(et.split(":")))
        want = made["edges"][et]
        assert sorted(zip(s.tolist(), d.tolist())) == sorted(zip(*want.tolist()))
    assert torch.equal(ds.type_features["item"]["feat"].read(torch.arange(80)),
                       torch.load(src / "item-feat.pt"))
    assert np.array_equal(ds.arrays.hetero["node_features"]["user"]["feat"],
                          np.load(src / "user-feat.npy"))
    off = int(g.node_offsets[g.type_id("user")])
    assert ds.metadata.hetero.target_type == "user"
    assert np.array_equal(np.sort(ds.train_ids - off), np.sort(made["nc"]["train"]))
    assert np.array_equal(ds.labels[ds.train_ids], made["labels"][ds.train_ids - off])
    mb = build_sampler("hetero", g, [2, 2]).sample({"user": torch.arange(10)})
    assert mb.num_seeds_dict["user"] == 10
    prepare_graphbolt(src, tmp_path / "link", task=1)
    lk = Dataset.open(tmp_path / "link")
    assert lk.task_type == "link_prediction" and lk.hetero is not None


def test_the_cli(tmp_path, capsys):
    src = tmp_path / "gb"
    homogeneous(src)
    rc, out, err = run_cli(["prepare", "graphbolt", src, tmp_path / "out", "--task",
                            "node_classification", "--no-progress"], capsys)
    assert rc == 0, err
    assert "prepared" in out and Dataset.open(tmp_path / "out").num_nodes == N
    rc, _, err = run_cli(["prepare", "graphbolt", src, tmp_path / "o2", "--no-progress"], capsys)
    assert_one_line_error(rc, err, "2 tasks", "--task")
    # the generic importer names the format instead of a column count
    np.save(tmp_path / "y.npy", np.zeros(N, dtype=np.int64))
    rc, _, err = run_cli(["prepare", "generic", "--edges", src / "metadata.yaml", "--labels",
                          tmp_path / "y.npy", tmp_path / "o3", "--no-progress"], capsys)
    assert_one_line_error(rc, err, "GraphBolt", "prepare graphbolt")
    assert not (tmp_path / "o2").exists() and not (tmp_path / "o3").exists()


def _edit(meta, path, value):
    node = meta
    for k in path[:-1]:
        node = node[k]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value


@pytest.mark.parametrize("path,value,fragment", [
    (("graph",), KeyError, "no 'graph' section"),
    (("graphs",), 1, "unknown key 'graphs'"),
    (("graph", "nodes"), [], "graph.nodes: expected a non-empty list"),
    (("graph", "nodes", 0, "num"), -3, "num must be an integer >= 0"),
    (("graph", "edges", 0, "format"), "parquet", "format must be one of csv, numpy"),
    (("graph", "edges", 0, "path"), "../outside.csv", "outside"),
    (("graph", "edges", 0, "path"), "missing.csv", "missing.csv"),
    (("graph", "edges", 0, "type"), "a:b:c", "typed edge entry on a graph whose nodes"),
    (("feature_data", 0, "format"), "pickle", "format must be one of numpy, torch"),
    (("feature_data", 0, "domain"), "graph", "graph-level features"),
    (("feature_data", 1, "path"), "node-feat-0.npy.pt", "torch file not found"),
    (("tasks", 0, "num_classes"), 3, "labels go up to 9, but num_classes = 3"),
    (("tasks", 0, "train_set", 0, "data", 0, "name"), "nodes", "name must be one of"),
])
def test_bad_metadata_is_one_line(tmp_path, capsys, path, value, fragment):
    src = tmp_path / "gb"
    made = homogeneous(src)
    meta = made["meta"]
    _edit(meta, path, value)
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    rc, _, err = run_cli(["prepare", "graphbolt", src, tmp_path / "out", "--task", "0",
                          "--no-progress"], capsys)
    assert_one_line_error(rc, err, fragment)
    assert not (tmp_path / "out").exists()


def test_bad_files_are_one_line(tmp_path):
    src = tmp_path / "gb"
    made = homogeneous(src)
    (src / "metadata.yaml").write_text("graph: [nodes\n")
    with pytest.raises(DatasetError, match=r"not valid YAML \(line \d+\)"):
        prepare_graphbolt(src, tmp_path / "out")
    meta = made["meta"]
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta))
    np.save(src / "node-feat-0.npy", np.array([{"a": 1}] * N, dtype=object), allow_pickle=True)
    with pytest.raises(DatasetError, match="pickle-free|object"):
        prepare_graphbolt(src, tmp_path / "out", task=0)
    homogeneous(tmp_path / "gb2")
    torch.save({"not": "a tensor"}, tmp_path / "gb2" / "node-feat-1.pt")
    with pytest.raises(DatasetError, match="holds a dict"):
        prepare_graphbolt(tmp_path / "gb2", tmp_path / "out", task=0)

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    torch.save(Evil(), tmp_path / "gb2" / "node-feat-1.pt")
    with pytest.raises(DatasetError, match=r"weights_only=True"):
        prepare_graphbolt(tmp_path / "gb2", tmp_path / "out", task=0)
    made = homogeneous(tmp_path / "gb3", edge_format="numpy")
    np.save(tmp_path / "gb3" / "edges.npy", made["edges"])  # (E, 2), not GraphBolt's (2, E)
    with pytest.raises(DatasetError, match=r"must be \(2, num_edges\)"):
        prepare_graphbolt(tmp_path / "gb3", tmp_path / "out", task=0)
    meta = homogeneous(tmp_path / "gb4")["meta"]
    np.save(tmp_path / "gb4" / "nc-test-labels.npy", np.full(40, 11))
    with pytest.raises(DatasetError, match="labels go up to 11"):
        prepare_graphbolt(tmp_path / "gb4", tmp_path / "out", task="node_classification")
    assert not (tmp_path / "out").exists()
    text = textwrap.dedent("""
        graph_topology: {type: FusedCSCSamplingGraph, path: preprocessed/g.pt}
        feature_data: []
    """)
    (tmp_path / "gb4" / "metadata.yaml").write_text(text)
    with pytest.raises(DatasetError, match="preprocessed"):
        prepare_graphbolt(tmp_path / "gb4", tmp_path / "out")


def test_an_imported_folder_feeds_pyg_loaders(tmp_path):
    pytest.importorskip("torch_geometric")
    from torch_geometric.loader import NodeLoader

    from graphfeed.pyg import GraphfeedSampler, from_dataset

    typed(tmp_path / "gb")
    prepare_graphbolt(tmp_path / "gb", tmp_path / "out", task="node_classification")
    ds = Dataset.open(tmp_path / "out")
    data = from_dataset(ds)
    off = int(ds.hetero.node_offsets[ds.hetero.type_id("user")])
    loader = NodeLoader(data, node_sampler=GraphfeedSampler(data, [3, 3]), batch_size=16,
                        input_nodes=("user", torch.from_numpy(ds.train_ids - off)))
    b = next(iter(loader))
    assert torch.equal(b["user"].y[:16], torch.from_numpy(ds.labels[ds.train_ids[:16]]))
    assert b["item"].x.shape[1] == 6 and b["user"].x.shape[1] == 4
