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
    file, for messages."""
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


