"""The generic importer: an edge list, node features, labels, and split files or a seeded split.

Edges: CSV / TSV / whitespace text (optionally gzipped; optional weight and timestamp columns),
``.npy`` of shape ``(E, 2)`` or ``(2, E)``, or ``.npz`` with ``src``/``dst``, ``edge_index`` or
arrays you name (``--edge-key``, ``--weight-key``, ``--time-key``). Features: ``.npy``, CSV,
sparse JSON (feature ids per node) or a scipy sparse ``.npz``, one row per node, as many named
tables as you like. Labels: ``.npy`` or text (one per line, or ``id,label``; string labels become
classes). Splits: ``--train/--valid/--test`` id files or boolean masks (repeat a flag, or give an
``(N, k)`` mask, for k stored splits), or a seeded ``--split 0.8,0.1,0.1``.
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from ...errors import DatasetError
from .._readers import EdgeSource, load_array_file
from . import PrepareReport, prepare


def prepare_generic(
    out,
    *,
    edges,
    labels,
    features: Optional[Mapping[str, object]] = None,
    splits=None,
    src_col: int = 0,
    dst_col: int = 1,
    weight_col: Optional[int] = None,
    time_col: Optional[int] = None,
    edge_key: Optional[str] = None,
    weight_key: Optional[str] = None,
    time_key: Optional[str] = None,
    node_times=None,
    block_bytes: int = 8 * 1024 * 1024,
    node_types=None,
    edge_type_col: Optional[int] = None,
    edge_type_key: Optional[str] = None,
    **kw,
) -> PrepareReport:
    """Library form of ``graphfeed prepare generic``; ``**kw`` go to :func:`prepare`.

    ``weight_col`` / ``time_col`` (text) or ``weight_key`` / ``time_key`` (``.npz``) add edge
    weights (``graph/weights.npy``, float32) and timestamps (edge feature ``timestamp``, int64
    when every value is whole, else float64), both in ``indices`` order. ``node_times``: an
    array or a file (``.npy``, or text with one number per line) of one time per node, stored
    as the node feature ``timestamp`` (int64 when every value is whole, else float64; finite).
    ``node_types`` / ``edge_type_col`` / ``edge_type_key`` (and ``node_type_names``,
    ``edge_type_names``, ``target_type`` in ``**kw``) make a heterogeneous dataset instead:
    see :mod:`.generic_hetero`.
    """
    typed = ("node_type_names", "edge_type_names", "target_type")
    if node_types is not None or edge_type_col is not None or edge_type_key or \
            any(kw.get(k) is not None for k in typed):
        from .generic_hetero import prepare_generic_hetero

        if node_times is not None or weight_col is not None or time_col is not None \
                or weight_key or time_key:
            raise DatasetError("edge weights and node/edge times are not supported with node or "
                               "edge type columns yet")
        return prepare_generic_hetero(out, edges=edges, labels=labels, features=features,
                                      splits=splits, node_types=node_types,
                                      edge_type_col=edge_type_col, edge_type_key=edge_type_key,
                                      src_col=src_col, dst_col=dst_col, edge_key=edge_key,
                                      block_bytes=block_bytes, **kw)
    for k in typed:
        kw.pop(k, None)
    if node_times is not None:
        from ..schema import TIME_FEATURE

        features = dict(features or {})
        if TIME_FEATURE in features:
            raise DatasetError(f"node_times is stored as the node feature {TIME_FEATURE!r}; "
                               f"a feature of that name is given too")
        features[TIME_FEATURE] = _node_times(node_times)
    cols = {n: c for n, c in (("weight", weight_col), ("timestamp", time_col)) if c is not None}
    keys = {n: k for n, k in (("weight", weight_key), ("timestamp", time_key)) if k}
    source = EdgeSource(edges, block_bytes=block_bytes, src_col=src_col, dst_col=dst_col,
                        value_cols=cols, edge_key=edge_key, value_keys=keys)
    return prepare(out, edges=source, features=features, labels=labels, splits=splits, **kw)


def _node_times(source) -> np.ndarray:
    """Node times as a 1-D int64 (whole values) or float64 array, every value finite."""
    what = str(source) if not hasattr(source, "shape") else "node_times"
    a = np.asarray(source) if hasattr(source, "shape") else load_array_file(source, what="node times")
    if a is None:
        a = np.loadtxt(source, dtype=np.float64, ndmin=1)
    if a.ndim != 1 or a.dtype.kind not in "fiu":
        raise DatasetError(f"{what}: node times must be 1-D numbers, got {a.dtype} {a.shape}")
    if a.dtype.kind == "f":
        if not np.isfinite(a).all():
            pos = int(np.flatnonzero(~np.isfinite(a))[0])
            raise DatasetError(f"{what}: node {pos} has time {a[pos]}; times must be finite")
        if np.all(a == np.floor(a)) and np.abs(a).max(initial=0) <= 2.0**53:
            return a.astype(np.int64)
        return a.astype(np.float64)
    return a.astype(np.int64)
