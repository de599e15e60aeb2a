"""Link-prediction datasets: edge splits in the dataset format, their checks, and helpers.

A ``link_prediction`` dataset (``task: {"type": "link_prediction"}``, no target) stores its
splits as ``node_pairs`` arrays, int ``(2, P)`` (row 0 sources, row 1 destinations), one file
each (``splits/train.npy``, ``valid``, ``test``), and optionally fixed negatives as
``negative_dst`` arrays ``X_neg``, int ``(P, k)``: ``k`` negative destinations for each pair of
split ``X`` (sharing its source; what OGB's ranking evaluations use).

**Every split pair is an edge of the stored graph.** The graph is the whole edge set, so the
trainer builds its message-passing graph without the valid and test pairs
(:func:`without_pairs`; with their reverses when the graph is undirected), and the sampler
removes each batch's own pairs (``graphfeed.sampling.LinkSampler``). Full validation checks
that pairs are in range, are edges (O(sum of the destinations' in-degrees)), and that no pair
(nor, in an undirected graph, its reverse) is in two splits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from ..errors import DatasetError, GraphfeedError
from ._link_checks import NEG_SUFFIX, check_train_pairs

__all__ = ["LINK_SPLITS", "check_train_pairs", "write_link_dataset", "random_edge_split", "without_pairs",
           "graph_pairs", "link_pairs", "reverse_keys", "without_held"]

#: the splits a link trainer reads (``train`` required)
LINK_SPLITS = ("train", "valid", "test")


# --------------------------------------------------------------------------- writing
def write_link_dataset(path, *, graph, node_features: Mapping, splits: Mapping,
                       negatives: Optional[Mapping] = None, name: Optional[str] = None,
                       overwrite: bool = False, undirected: bool = False,
                       extra: Optional[dict] = None) -> Path:
    """Write a ``link_prediction`` dataset folder atomically (validated before it is published;
    an invalid input raises ``DatasetError`` and leaves nothing at ``path``).

    ``graph``: the ``CSCGraph`` of every edge (split pairs included); ``node_features``: name ->
    one row per node; ``splits``: ``train`` (required), ``valid``, ``test`` -> int ``(2, P)``
    pairs; ``negatives``: split name -> int ``(P, k)`` fixed negative destinations;
    ``undirected``: every edge is stored in both directions.
    """
    from ..graph.csc import CSCGraph
    from .format import DatasetWriter, _feature_array, _feature_spec, _metadata, _to_numpy
    from .schema import (GraphSpec, SplitSpec, TaskSpec, check_json_value, check_name,
                         feature_path, split_path)

    path = Path(path)
    if not isinstance(graph, CSCGraph):
        raise GraphfeedError(f"graph must be a CSCGraph, got {type(graph).__name__}")
    if extra is not None:
        check_json_value(extra, "extra")
    arrays = {}
    for sname, pairs in splits.items():
        check_name(sname, f"{path}: split")
        arrays[sname] = ("node_pairs", _to_numpy(pairs, f"split {sname!r}"))
    for sname, neg in (negatives or {}).items():
        if sname not in splits:
            raise DatasetError(f"negatives of split {sname!r}, which is not one of the splits "
                               f"{sorted(splits)}")
        arrays[sname + NEG_SUFFIX] = ("negative_dst", _to_numpy(neg, f"negatives {sname!r}"))
    for fname in node_features:
        check_name(fname, f"{path}: node feature")
    check_train_pairs({k: a for k, (kind, a) in arrays.items() if kind == "node_pairs"}, path)
    with DatasetWriter(path, overwrite=overwrite) as w:
        w.save_array("graph/indptr.npy", np.asarray(graph.indptr, dtype=np.int64))
        w.save_array("graph/indices.npy", np.asarray(graph.indices))
        weights_rel = None
        if graph.weights is not None:
            weights_rel = "graph/weights.npy"
            w.save_array(weights_rel, np.asarray(graph.weights))
        feats = {}
        for fname, arr in node_features.items():
            arr, dt = _feature_array(arr, f"node feature {fname!r}")
            feats[fname] = _feature_spec(fname, arr, feature_path(fname), dt)
            w.save_array(feature_path(fname), arr)
        specs = {}
        for sname, (kind, arr) in arrays.items():
            if arr.ndim != 2 or arr.dtype.kind not in "iu":
                raise DatasetError(f"split {sname!r} ({kind}) must be a 2-D integer array, got "
                                   f"{arr.dtype} {arr.shape}")
            rel = split_path(sname, 0, 1)
            w.save_array(rel, arr.astype(np.int64, copy=False))
            specs[sname] = SplitSpec(rel, int(arr.shape[1] if kind == "node_pairs"
                                               else arr.shape[0]), kind)
        meta = _metadata(name or path.name, graph.num_nodes,
                         GraphSpec(graph.num_edges, "graph/indptr.npy", "graph/indices.npy",
                                   weights_rel, bool(undirected)),
                         feats, specs, TaskSpec("link_prediction", "", 0), {}, dict(extra or {}))
        w.finish(meta)
    return path


# --------------------------------------------------------------------------- graph helpers
def graph_pairs(graph) -> np.ndarray:
    """Every edge of a ``CSCGraph`` as int64 ``(2, E)`` ``(src, dst)`` pairs, in ``indices``
    order (O(E) memory)."""
    indptr = np.asarray(graph.indptr)
    dst = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(indptr))
    return np.stack([np.asarray(graph.indices).astype(np.int64), dst])


def random_edge_split(graph, fractions=(0.85, 0.05, 0.10), *, seed: int = 0,
                      undirected: bool = False) -> dict:
    """A seeded random split of the edges of ``graph`` into ``train``/``valid``/``test`` pairs
    (fractions of the edges, summing to <= 1; the rest are in none). ``undirected``: the graph
    stores each edge both ways; each edge is split once, as its ``src < dst`` direction (self
    loops are left out), so no edge has its reverse in another split."""
    fr = [float(f) for f in fractions]
    if len(fr) != 3 or min(fr) < 0 or sum(fr) > 1 + 1e-9:
        raise GraphfeedError(f"fractions must be three numbers >= 0 summing to <= 1, got "
                             f"{fractions!r}")
    e = graph_pairs(graph)
    if undirected:
        e = e[:, e[0] < e[1]]
    # one copy of parallel edges: a pair in two splits would be a leak
    key = np.unique(e[0] * graph.num_nodes + e[1])
    e = np.stack([key // graph.num_nodes, key % graph.num_nodes])
    perm = np.random.default_rng(seed).permutation(e.shape[1])
    n_tr, n_va = int(round(fr[0] * e.shape[1])), int(round(fr[1] * e.shape[1]))
    n_te = min(int(round(fr[2] * e.shape[1])), e.shape[1] - n_tr - n_va)
    cuts = {"train": perm[:n_tr], "valid": perm[n_tr:n_tr + n_va],
            "test": perm[n_tr + n_va:n_tr + n_va + n_te]}
    return {k: np.ascontiguousarray(e[:, np.sort(v)]) for k, v in cuts.items()}


def without_pairs(graph, pairs, *, reverse: bool = False):
    """``graph`` (a ``CSCGraph``) without every edge whose ``(src, dst)`` is one of ``pairs``
    (int ``(2, P)``; with ``reverse`` also ``(dst, src)``): a new in-memory ``CSCGraph`` (edge
    weights kept), O(E) time and memory. The message-passing graph of link training."""
    from ..graph.csc import CSCGraph

    pairs = np.asarray(pairs, dtype=np.int64)
    n = graph.num_nodes
    e = graph_pairs(graph)
    drop = pairs[0] * n + pairs[1]
    if reverse:
        drop = np.concatenate([drop, pairs[1] * n + pairs[0]])
    keep = ~np.isin(e[0] * n + e[1], drop)
    w = None if graph.weights is None else np.asarray(graph.weights)[keep]
    return CSCGraph.from_edges(e[0][keep], e[1][keep], n, weights=w)


# --------------------------------------------------------------------------- built-in dataset
def build_synthetic(spec, arrays, path: Path, *, overwrite: bool = False,
                    extra: Optional[dict] = None) -> Path:
    """The built-in link-prediction dataset of ``spec`` (a ``synthetic.SyntheticSpec`` with
    ``task="link"``) from its generated ``arrays``: the degree-corrected block model of the node datasets (communities,
    power-law popularity, features = community centroid + noise), symmetrised, with a seeded
    random edge split (``spec``'s train/valid/test fractions of the edges). Edges favour
    popular nodes, so a degree baseline ranks well, but a pair is mostly inside one community,
    which only the features and neighbourhoods tell: a GNN ranks far better."""
    from ..graph.csc import CSCGraph

    a = arrays
    graph = CSCGraph.from_edges(a.src, a.dst, a.num_nodes, add_reverse=True,
                                drop_self_loops=True, drop_duplicates=True)
    splits = random_edge_split(graph, (spec.train_fraction, spec.valid_fraction,
                                       spec.test_fraction), seed=spec.seed, undirected=True)
    return write_link_dataset(
        path, graph=graph, node_features={"feat": a.features, "community": a.labels},
        splits=splits, name=f"synthetic-{spec.name}", overwrite=overwrite, undirected=True,
        extra=extra)


# --------------------------------------------------------------------------- by key
# A link dataset's pairs keyed as the LinkSampler keys them: ``None`` for an untyped graph, an
# edge type for a typed one (type-local ids), so training and evaluation have one shape.
def link_pairs(dataset, split: str) -> dict:
    """Key -> ``(pairs int64 (2, P), fixed negatives int64 (P, k) or None)`` of split ``split``
    (empty when the dataset has none)."""
    if dataset.hetero is not None:
        from .hetero_link import typed_link_split

        return {et: (np.ascontiguousarray(p, dtype=np.int64), n)
                for et, (p, n) in typed_link_split(dataset, split).items()}
    if split not in dataset.split_names:
        return {}
    pairs, fixed = dataset.link_split(split)
    return {None: (np.ascontiguousarray(pairs, dtype=np.int64), fixed)}


def reverse_keys(dataset, graph) -> dict:
    """Key -> the key of its reverse edges in ``graph`` (the dataset's graph or one like it):
    ``{None: None}`` for an undirected untyped graph (``{}`` for a directed one); each typed
    relation whose edges are another's transpose (``hetero_link.reverse_edge_types``)."""
    if dataset.hetero is not None:
        from .hetero_link import reverse_edge_types

        return reverse_edge_types(graph)
    return {None: None} if dataset.metadata.graph.undirected else {}


def without_held(graph, held: Mapping, reverse: Mapping):
    """The message-passing graph: ``graph`` without the pairs ``held`` (key -> int ``(2, P)``)
    and, for a key of ``reverse`` (:func:`reverse_keys`), their reverse edges; ``graph`` itself
    when nothing is held. O(E)."""
    held = {k: np.asarray(p, dtype=np.int64) for k, p in held.items() if np.shape(p)[-1]}
    if not held:
        return graph
    if None in held:
        return without_pairs(graph, held[None], reverse=None in reverse)
    from .hetero_link import without_typed_pairs

    return without_typed_pairs(graph, held, reverse=reverse)
