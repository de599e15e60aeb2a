"""Typed link-prediction datasets: a ``link_prediction`` task over a heterogeneous graph.

The dataset is an ordinary heterogeneous one (``hetero`` section: node types, edge types, the
fused CSC's relation ids, per-type features) whose task is ``link_prediction`` and whose splits
are edges of given relations. Each (split, edge type) is one ``node_pairs`` split named
``<split>.<src_type>.<relation>.<dst_type>``, int ``(2, P)`` in *type-local* ids (row 0 of the
source type, row 1 of the destination type), and its optional fixed negatives one
``negative_dst`` split ``<split>_neg.<src_type>.<relation>.<dst_type>``, int ``(P, k)``
type-local ids of the destination type::

    "splits": {"train.author.writes.paper": {"path": "splits/train.author.writes.paper.npy",
                                             "size": 30600, "kind": "node_pairs"}, ...},
    "task": {"type": "link_prediction"},
    "hetero": {"node_types": [...], "edge_types": [...], "edge_type": ..., ...}

No new metadata key: the edge type of a split is in its name, and the reverse relation of a
relation (``writes`` and ``written_by``; a symmetric relation is its own) is read off the graph
(:func:`~graphfeed.datasets._link_checks.infer_reverse_edge_types`: relations whose edge sets
are each other's transpose). Full validation checks that ids are in range of their types, pairs
are edges of their relation, and no edge (nor its reverse edge) is in two splits. Readers older
than typed splits refuse the file (they refused a ``hetero`` section on a link task).

As for homogeneous link datasets, the graph holds every edge, split pairs included: the trainer
removes the valid and test edges and their reverse edges (:func:`without_typed_pairs`) and the
sampler each batch's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from ..errors import DatasetError, GraphfeedError
from ._link_checks import NEG_SUFFIX, check_train_pairs, parse_typed_split_name, typed_split_name

__all__ = ["write_typed_link_dataset", "typed_link_split", "typed_link_edge_types",
           "random_relation_split", "without_typed_pairs", "reverse_edge_types",
           "is_typed_link", "split_typed_dataset"]


def is_typed_link(dataset) -> bool:
    """A ``link_prediction`` dataset with node and edge types."""
    return dataset.task_type == "link_prediction" and dataset.hetero is not None


def write_typed_link_dataset(path, *, graph, splits: Mapping, negatives: Optional[Mapping] = None,
                             type_features: Optional[Mapping] = None, name: Optional[str] = None,
                             overwrite: bool = False, extra: Optional[dict] = None,
                             node_features: Optional[Mapping] = None) -> Path:
    """Write a typed ``link_prediction`` dataset folder atomically (validated before it is
    published; an invalid input raises ``DatasetError`` naming the value and leaves nothing at
    ``path``).

    ``graph``: the ``HeteroGraph`` of every edge (split pairs included); ``splits``: split name
    (``train`` required, ``valid``, ``test``) -> edge type -> int ``(2, P)`` type-local pairs;
    ``negatives``: split name -> edge type -> int ``(P, k)`` fixed negative destinations
    (type-local ids of the destination type); ``type_features``: node type -> name -> one row
    per node of that type; ``node_features``: name -> one row per global id (e.g. the labels
    of the heterogeneous dataset the pairs were split from)."""
    from ..graph.hetero import HeteroGraph
    from .format import DatasetWriter, _feature_array, _feature_spec, _metadata, _to_numpy
    from .hetero import HeteroParts
    from .schema import (GraphSpec, SplitSpec, TaskSpec, check_json_value, check_name,
                         feature_path, split_path)

    if not isinstance(graph, HeteroGraph):
        raise GraphfeedError(f"graph must be a HeteroGraph, got {type(graph).__name__}")
    check_json_value(extra or {}, "extra")
    path, arrays = Path(path), {}

    def add(kind, sname, by_type, what):
        check_name(sname, f"{path}: split")
        if not isinstance(by_type, Mapping):
            raise DatasetError(f"{what} {sname!r} must map edge types to arrays, got "
                               f"{type(by_type).__name__}")
        for et, arr in by_type.items():
            rid = graph.edge_type_id(et)
            et = graph.edge_types[rid]
            a = _to_numpy(arr, f"{what} {sname!r} of {et}")
            if a.ndim != 2 or a.dtype.kind not in "iu":
                raise DatasetError(f"{what} {sname!r} of {et} must be a 2-D integer array, got "
                                   f"{a.dtype} {a.shape}")
            arrays[typed_split_name(sname, et)] = (kind, a.astype(np.int64, copy=False))

    for sname, by_type in splits.items():
        add("node_pairs", sname, by_type, "split")
    for sname, by_type in (negatives or {}).items():
        if sname not in splits:
            raise DatasetError(f"negatives of split {sname!r}, which is not one of the splits "
                               f"{sorted(splits)}")
        add("negative_dst", sname + NEG_SUFFIX, by_type, "negatives")
    check_train_pairs(splits, path)
    parts = HeteroParts(graph, type_features or {})
    with DatasetWriter(path, overwrite=overwrite) as w:
        w.save_array("graph/indptr.npy", np.asarray(graph.csc.indptr, dtype=np.int64))
        w.save_array("graph/indices.npy", np.asarray(graph.csc.indices))
        feats = {}
        for fname, arr in (node_features or {}).items():
            check_name(fname, f"{path}: node feature")
            arr, dt = _feature_array(arr, f"node feature {fname!r}")
            feats[fname] = _feature_spec(fname, arr, feature_path(fname), dt)
            w.save_array(feature_path(fname), arr)
        specs = {}
        for sname, (kind, arr) in arrays.items():
            rel = split_path(sname, 0, 1)
            w.save_array(rel, arr)
            specs[sname] = SplitSpec(rel, int(arr.shape[1] if kind == "node_pairs"
                                               else arr.shape[0]), kind)
        hspec = parts.write(w, _feature_array, _feature_spec)
        meta = _metadata(name or path.name, graph.num_nodes,
                         GraphSpec(graph.num_edges, "graph/indptr.npy", "graph/indices.npy"),
                         feats, specs, TaskSpec("link_prediction", "", 0), {}, dict(extra or {}),
                         hspec)
        w.finish(meta)
    return path


# --------------------------------------------------------------------------- reading
def typed_link_edge_types(dataset, split: str = "train") -> list:
    """The edge types that have pairs in split ``split``, in relation-id order."""
    ets = list(dataset.hetero.edge_types)
    have = {parse_typed_split_name(k, ets) for k in dataset.split_names}
    return [et for et in ets if (split, et) in have]


def typed_link_split(dataset, split: str) -> dict:
    """Edge type -> ``(pairs int64 (2, P), negatives int64 (P, k) or None)`` of split
    ``split``, in type-local ids (empty when the dataset has none)."""
    if not is_typed_link(dataset):
        raise GraphfeedError(f"dataset {dataset.name!r} is not a typed link_prediction dataset")
    out = {}
    for et in typed_link_edge_types(dataset, split):
        neg = typed_split_name(split + NEG_SUFFIX, et)
        out[et] = (dataset.split(typed_split_name(split, et)),
                   dataset.split(neg) if neg in dataset.split_names else None)
    return out


def reverse_edge_types(hgraph) -> dict:
    """Edge type -> its reverse edge type (relations whose edges are each other's transpose;
    a symmetric relation maps to itself), read off ``hgraph`` in O(E log E)."""
    from ._link_checks import infer_reverse_edge_types

    return infer_reverse_edge_types(hgraph.csc.indptr, hgraph.csc.indices, hgraph.edge_type,
                                    hgraph.num_nodes, hgraph.edge_types)


# --------------------------------------------------------------------------- building
def random_relation_split(hgraph, edge_types, fractions=(0.85, 0.05, 0.10), *, seed: int = 0,
                          reverse: Optional[Mapping] = None) -> dict:
    """A seeded random split of the edges of each of ``edge_types`` of ``hgraph`` into
    ``train``/``valid``/``test`` (split -> edge type -> type-local ``(2, P)`` pairs; fractions
    of each relation's distinct edges, summing to <= 1). ``reverse``: edge type -> reverse
    edge type (default: :func:`reverse_edge_types`); an edge type whose reverse is also split
    is skipped (its edges are the reverses of the other's), and a symmetric relation splits
    each edge once, as its ``src < dst`` direction, so no edge has its reverse in another
    split."""
    fr = [float(f) for f in fractions]
    if len(fr) != 3 or min(fr) < 0 or sum(fr) > 1 + 1e-9:
        raise GraphfeedError(f"fractions must be three numbers >= 0 summing to <= 1, got "
                             f"{fractions!r}")
    if reverse is None:
        reverse = reverse_edge_types(hgraph)
    wanted = [hgraph.edge_types[hgraph.edge_type_id(et)] for et in edge_types]
    if not wanted:
        raise GraphfeedError("random_relation_split: no edge type to split")
    out = {"train": {}, "valid": {}, "test": {}}
    rng = np.random.default_rng(seed)
    for et in wanted:
        rev = reverse.get(et)
        if rev is not None and rev != et and rev in wanted and wanted.index(rev) < wanted.index(et):
            continue
        src, dst = hgraph.edges_of(et)
        if rev == et:
            keep = src < dst
            src, dst = src[keep], dst[keep]
        n_d = max(1, hgraph.num_nodes_of(et[2]))
        key = np.unique(src * n_d + dst)
        e = np.stack([key // n_d, key % n_d])
        perm = rng.permutation(e.shape[1])
        n_tr, n_va = int(round(fr[0] * e.shape[1])), int(round(fr[1] * e.shape[1]))
        n_te = min(int(round(fr[2] * e.shape[1])), e.shape[1] - n_tr - n_va)
        cuts = {"train": perm[:n_tr], "valid": perm[n_tr:n_tr + n_va],
                "test": perm[n_tr + n_va:n_tr + n_va + n_te]}
        for k, v in cuts.items():
            out[k][et] = np.ascontiguousarray(e[:, np.sort(v)])
    return out


def without_typed_pairs(hgraph, pairs: Mapping, *, reverse: Optional[Mapping] = None):
    """``hgraph`` without every edge of relation ``et`` whose type-local ``(src, dst)`` is one
    of ``pairs[et]`` (int ``(2, P)``), and, for ``reverse`` (edge type -> reverse edge type),
    without the reverse edge ``(dst, src)`` of ``reverse[et]`` too: a new in-memory
    ``HeteroGraph`` (relation order per destination kept), O(E) time and memory. The
    message-passing graph of typed link training."""
    from ..graph.csc import CSCGraph
    from ..graph.hetero import HeteroGraph

    g = hgraph
    n = g.num_nodes
    off = g.node_offsets
    drop = []
    for et, pr in pairs.items():
        r = g.edge_type_id(et)
        et = g.edge_types[r]
        pr = np.asarray(pr, dtype=np.int64)
        gs = pr[0] + off[g.type_id(et[0])]
        gd = pr[1] + off[g.type_id(et[2])]
        drop.append((r * n + gs) * n + gd)
        rev = (reverse or {}).get(et)
        if rev is not None:
            drop.append((g.edge_type_id(rev) * n + gd) * n + gs)
    if not drop:
        return g
    drop = np.unique(np.concatenate(drop))
    indptr = np.asarray(g.csc.indptr)
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    et_arr = np.asarray(g.edge_type)
    keys = (et_arr.astype(np.int64) * n + np.asarray(g.csc.indices).astype(np.int64)) * n + dst
    keep = ~np.isin(keys, drop)
    new_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst[keep], minlength=n), out=new_ptr[1:])
    csc = CSCGraph(new_ptr, np.ascontiguousarray(np.asarray(g.csc.indices)[keep]), trusted=True)
    return HeteroGraph(csc, g.node_types, np.diff(off), g.edge_types,
                       np.ascontiguousarray(et_arr[keep]), trusted=True)


def split_typed_dataset(dataset, out, relations, *, fractions=(0.85, 0.05, 0.10), seed: int = 0,
                        name: Optional[str] = None, overwrite: bool = False) -> Path:
    """A typed link dataset at ``out`` from an opened heterogeneous ``Dataset``: the same graph,
    per-type and fused node features, and a seeded random split of the edges of
    ``relations`` (edge-type triples, or relation names that name one edge type each;
    :func:`random_relation_split`, reverse relations read off the graph). Returns ``out``."""
    h = dataset.hetero
    if h is None:
        raise GraphfeedError(f"dataset {dataset.name!r} has one node type: --relation applies "
                             f"to heterogeneous datasets")
    if not relations:
        raise GraphfeedError(f"dataset {dataset.name!r} is heterogeneous: name the relation(s) "
                             f"to predict (--relation), one of {[list(e) for e in h.edge_types]}")
    ets = [h.edge_types[h.edge_type_id(r)] for r in relations]
    splits = random_relation_split(h, ets, fractions, seed=seed)
    loaded = dataset.arrays.hetero["node_features"]
    return write_typed_link_dataset(
        out, graph=h, splits=splits, name=name or f"{dataset.name}-link", overwrite=overwrite,
        type_features={t: {k: np.asarray(a) for k, a in fs.items()} for t, fs in loaded.items()},
        node_features={k: np.asarray(v) for k, v in dataset.arrays.node_features.items()},
        extra={"link_split": {"from": dataset.name, "edge_types": [list(e) for e in ets],
                              "fractions": [float(f) for f in fractions], "seed": int(seed)}})
