"""The checks of link-prediction splits (see :mod:`graphfeed.datasets.link` for the layout):
metadata (at parse time), array headers, and the O(P) contents. Imports nothing else of
``graphfeed.datasets`` (and numba only when the contents are checked), so the schema, the
validator and the CLI parser can import it."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from ..errors import DatasetError

NEG_SUFFIX = "_neg"


def check_link_metadata(splits: Mapping, err) -> None:
    """The splits of a ``link_prediction`` task: ``node_pairs`` or ``negative_dst`` kinds, one
    set each, a ``train`` split, and each ``X_neg`` sized like the pairs of ``X``. ``err(where,
    msg)`` makes the parser's ``DatasetError``."""
    for k, v in splits.items():
        where = f"splits.{k}"
        if v.kind not in ("node_pairs", "negative_dst"):
            raise err(f"{where}.kind", f"a link_prediction task needs 'node_pairs' splits (and "
                                       f"'negative_dst' negatives), got {v.kind!r}")
        if v.num_sets != 1:
            raise err(where, "link splits hold one set each")
        if v.kind == "negative_dst":
            owner = k[: -len(NEG_SUFFIX)] if k.endswith(NEG_SUFFIX) else None
            if owner not in splits or splits[owner].kind != "node_pairs":
                raise err(where, f"negatives are named after their pairs' split ('X{NEG_SUFFIX}' "
                                 f"for a node_pairs split 'X'); no node_pairs split "
                                 f"{owner or k!r}")
            if v.size != splits[owner].size:
                raise err(f"{where}.size", f"{v.size} rows of negatives for the {splits[owner].size} "
                                           f"pairs of split {owner!r}: one row per pair")
    if "train" not in splits or splits["train"].kind != "node_pairs":
        raise err("splits", "a link_prediction task needs a 'train' split of node_pairs")


def check_split_array(arr: np.ndarray, kind: str, size: int, path: Path) -> None:
    """Shape and dtype of a link split array (read from its header only)."""
    if arr.dtype.kind not in "iu" or arr.ndim != 2:
        raise DatasetError(f"{path}: {kind} must be a 2-D integer array, got {arr.dtype} "
                           f"{arr.shape}")
    if kind == "node_pairs" and (arr.shape[0] != 2 or arr.shape[1] != size):
        raise DatasetError(f"{path}: node_pairs must have shape (2, size = {size}), got "
                           f"{arr.shape}")
    if kind == "negative_dst" and (arr.shape[0] != size or arr.shape[1] < 1):
        raise DatasetError(f"{path}: negative_dst must have shape ({size}, k >= 1), got "
                           f"{arr.shape}")


def _first_out_of_range(a: np.ndarray, n: int):
    bad = (a < 0) | (a >= n)
    if bad.any():
        return np.unravel_index(int(np.flatnonzero(bad.ravel())[0]), a.shape)
    return None


def check_link_contents(meta, indptr, indices, splits: Mapping, paths: Mapping) -> None:
    """The O(P) content checks of a link dataset's splits: ids in range, pairs are edges, no
    pair (nor, in an undirected graph, its reverse) in two splits. ``paths``: split name -> its
    file, for messages. Typed splits (a ``hetero`` section) are checked by
    :func:`check_typed_link_contents` once the relation ids are open."""
    if meta.hetero is not None:
        return
    n = meta.num_nodes
    undirected = meta.graph.undirected
    keys = {}
    for name, (arr,) in splits.items():
        spec = meta.splits[name]
        p = paths[name]
        a = np.asarray(arr).astype(np.int64, copy=False)
        where = _first_out_of_range(a, n)
        if where is not None:
            raise DatasetError(f"{p}: split {name!r} node id {int(a[where])} at {tuple(int(w) for w in where)} "
                               f"is out of range [0, {n})")
        if spec.kind != "node_pairs":
            continue
        from ._link_kernels import first_missing_pair

        i = first_missing_pair(indptr, indices, np.ascontiguousarray(a[0]),
                               np.ascontiguousarray(a[1]))
        if i >= 0:
            raise DatasetError(f"{p}: split {name!r} pair {i} ({int(a[0, i])} -> {int(a[1, i])}) is "
                               f"not an edge of the graph; link splits must lie inside the edge set")
        lo, hi = (np.minimum(a[0], a[1]), np.maximum(a[0], a[1])) if undirected else (a[0], a[1])
        keys[name] = lo * n + hi
    names = list(keys)
    for x in range(len(names)):
        for y in range(x + 1, len(names)):
            both = np.intersect1d(keys[names[x]], keys[names[y]])
            if both.size:
                u, v = divmod(int(both[0]), n)
                rev = " (or its reverse: the graph is undirected)" if undirected else ""
                raise DatasetError(f"{paths[names[y]]}: edge {u} -> {v}{rev} is "
                                   f"in both split {names[x]!r} and split {names[y]!r}; link "
                                   f"splits must be disjoint")


# --------------------------------------------------------------------------- typed link splits
# A link_prediction dataset with a ``hetero`` section stores one ``node_pairs`` split per
# (split, edge type), named ``<split>.<src_type>.<relation>.<dst_type>``, in type-local ids
# (row 0 of ``src_type``, row 1 of ``dst_type``), and its fixed negatives as ``negative_dst``
# splits ``<split>_neg.<src_type>.<relation>.<dst_type>`` (type-local ids of ``dst_type``).


def typed_split_name(split: str, edge_type) -> str:
    """The stored name of split ``split`` of one edge type (see above)."""
    return ".".join((split, *edge_type))


def parse_typed_split_name(name: str, edge_types):
    """``(split, edge type)`` of a stored typed split name, or ``None`` when no edge type ends
    it (or more than one could: type names holding dots)."""
    hits = [(name[: -len(suffix) - 1], tuple(et)) for et in edge_types
            for suffix in (".".join(et),)
            if name.endswith("." + suffix) and len(name) > len(suffix) + 1]
    return hits[0] if len(hits) == 1 else None


def check_typed_link_metadata(splits: Mapping, hetero, err) -> None:
    """The splits of a ``link_prediction`` task with a ``hetero`` section: every name is a
    typed split name of an edge type of the section, ``node_pairs`` for pairs, ``negative_dst``
    for ``<split>_neg.<edge type>`` sized like their pairs, at least one ``train`` split, and
    no ``target_type`` (the splits are edges, not nodes)."""
    if hetero.target_type is not None:
        raise err("hetero.target_type", "a link_prediction dataset names no target_type (its "
                                        "splits are edges of their edge types)")
    named = {}
    for k, v in splits.items():
        where = f"splits.{k}"
        got = parse_typed_split_name(k, hetero.edge_types)
        if got is None:
            raise err(where, f"a typed link split is named <split>.<src_type>.<relation>."
                             f"<dst_type> after one edge type of {[list(e) for e in hetero.edge_types]}")
        named[k] = got
        if v.num_sets != 1:
            raise err(where, "link splits hold one set each")
        base, et = got
        want = "negative_dst" if base.endswith(NEG_SUFFIX) else "node_pairs"
        if v.kind != want:
            raise err(f"{where}.kind", f"expected {want!r} ('{NEG_SUFFIX}' names fixed "
                                       f"negatives), got {v.kind!r}")
        if want == "negative_dst":
            owner = typed_split_name(base[: -len(NEG_SUFFIX)], et)
            if owner not in splits or splits[owner].kind != "node_pairs":
                raise err(where, f"negatives of split {owner!r}, which is not a node_pairs split")
            if v.size != splits[owner].size:
                raise err(f"{where}.size", f"{v.size} rows of negatives for the "
                                           f"{splits[owner].size} pairs of split {owner!r}: one "
                                           f"row per pair")
    if not any(b == "train" for b, _ in named.values()):
        raise err("splits", "a typed link_prediction task needs a 'train.<src_type>.<relation>."
                            "<dst_type>' split of node_pairs")


def relation_keys(indptr, indices, edge_type, num_nodes: int, rel: int,
                  reverse: bool = False) -> np.ndarray:
    """Sorted distinct ``src * num_nodes + dst`` (global ids; ``reverse``: ``dst * num_nodes +
    src``) of every edge of relation ``rel`` of a fused CSC. O(E) time and memory."""
    et = np.asarray(edge_type)
    sel = np.flatnonzero(et == rel)
    dst = np.searchsorted(np.asarray(indptr), sel, side="right") - 1
    src = np.asarray(indices)[sel].astype(np.int64)
    return np.unique(dst * num_nodes + src if reverse else src * num_nodes + dst)


def infer_reverse_edge_types(indptr, indices, edge_type, num_nodes: int, edge_types) -> dict:
    """Edge type -> its reverse edge type, for every relation whose edges are exactly the
    transposed edges of a relation between the swapped types (``writes`` and ``written_by``;
    a relation that is its own transpose is symmetric and maps to itself). O(E log E)."""
    r_count = len(edge_types)
    counts = np.bincount(np.asarray(edge_type).astype(np.int64), minlength=r_count)
    keys, out = {}, {}
    for r, (s, _, d) in enumerate(edge_types):
        for q in range(r_count):
            s2, _, d2 = edge_types[q]
            if (s2, d2) != (d, s) or counts[q] != counts[r]:
                continue
            if r not in keys:
                keys[r] = relation_keys(indptr, indices, edge_type, num_nodes, r)
            if ("rev", q) not in keys:
                keys[("rev", q)] = relation_keys(indptr, indices, edge_type, num_nodes, q, True)
            if np.array_equal(keys[r], keys[("rev", q)]):
                out[r] = q
                break
    return {tuple(edge_types[r]): tuple(edge_types[q]) for r, q in out.items()}


def check_typed_link_contents(meta, indptr, indices, edge_type, splits: Mapping,
                              paths: Mapping) -> None:
    """The content checks of a typed link dataset's splits: type-local ids in range of their
    types, pairs are edges of their relation, and no edge (nor its reverse edge, in the
    relation :func:`infer_reverse_edge_types` pairs with its own) in two splits.
    ``paths``: split name -> its file, for messages."""
    from ._link_kernels import first_missing_typed_pair

    h = meta.hetero
    off = h.node_offsets
    n = meta.num_nodes
    ets = [tuple(e) for e in h.edge_types]
    if len(ets) * n * n >= 1 << 63:
        raise DatasetError(f"{paths[next(iter(splits))]}: typed link checks key edges as "
                           f"(relation * n + src) * n + dst in int64; {n:,} nodes of "
                           f"{len(ets)} relations is too many")
    per_split: dict = {}  # split -> [(keys of its edges up to reverses, stored name)]
    typed = {}
    for name, (arr,) in splits.items():
        base, et = parse_typed_split_name(name, ets)
        r = ets.index(et)
        s_t, d_t = h.node_types.index(et[0]), h.node_types.index(et[2])
        p = paths[name]
        a = np.asarray(arr).astype(np.int64, copy=False)
        rows = ((0, s_t), (1, d_t)) if meta.splits[name].kind == "node_pairs" else ((None, d_t),)
        for row, t in rows:
            sub = a if row is None else a[row]
            cnt = int(off[t + 1] - off[t])
            where = _first_out_of_range(sub, cnt)
            if where is not None:
                at = (where if row is None else (row, *where))
                raise DatasetError(f"{p}: split {name!r} id {int(sub[where])} at "
                                   f"{tuple(int(w) for w in at)} is out of range [0, {cnt}) of "
                                   f"node type {h.node_types[t]!r}")
        if meta.splits[name].kind != "node_pairs":
            continue
        gs = np.ascontiguousarray(a[0] + off[s_t])
        gd = np.ascontiguousarray(a[1] + off[d_t])
        i = first_missing_typed_pair(indptr, indices, edge_type, gs, gd, r)
        if i >= 0:
            raise DatasetError(f"{p}: split {name!r} pair {i} ({int(a[0, i])} -> "
                               f"{int(a[1, i])}) is not an edge of {et}; link splits must lie "
                               f"inside their relation's edges")
        typed[name] = (base, r, gs, gd)
    rev = infer_reverse_edge_types(indptr, indices, edge_type, n, ets)
    rev_id = {ets.index(a): ets.index(b) for a, b in rev.items()}
    for name, (base, r, gs, gd) in typed.items():
        # an edge and its reverse edge share one canonical key: the smaller of (r, s, d) and
        # (rev r, d, s)
        fwd = (r * n + gs) * n + gd
        if r in rev_id:
            back = (rev_id[r] * n + gd) * n + gs
            fwd = np.minimum(fwd, back)
        per_split.setdefault(base, []).append((fwd, name))
    bases = list(per_split)
    merged = {b: np.concatenate([k for k, _ in per_split[b]]) for b in bases}
    for x in range(len(bases)):
        for y in range(x + 1, len(bases)):
            both = np.intersect1d(merged[bases[x]], merged[bases[y]])
            if both.size:
                key = int(both[0])
                r, rest = divmod(key, n * n)
                u, v = divmod(rest, n)
                in_y = next(nm for k, nm in per_split[bases[y]] if np.isin(key, k))
                raise DatasetError(f"{paths[in_y]}: edge {u} -> {v} (global ids) of {ets[r]} "
                                   f"(or its reverse edge) is in both split {bases[x]!r} and "
                                   f"split {bases[y]!r}; link splits must be disjoint")


def check_train_pairs(splits: Mapping, path) -> None:
    """Refuse a link dataset with nothing to train on: a ``train`` split that holds no pairs
    (``splits``: split name -> ``(2, P)`` pairs, or a dict of them per edge type). A missing or
    wrongly shaped ``train`` is left to the writer's own checks and messages."""
    train = splits.get("train")
    if train is None:
        return
    parts = list(train.values()) if isinstance(train, Mapping) else [train]
    if all(np.ndim(p) == 2 and np.shape(p)[1] == 0 for p in parts):
        raise DatasetError(f"{path}: the train split holds no edge pairs; nothing to train on")
