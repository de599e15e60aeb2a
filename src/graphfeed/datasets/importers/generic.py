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

from .._readers import EdgeSource
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
    block_bytes: int = 8 * 1024 * 1024,
    **kw,
) -> PrepareReport:
    """Library form of ``graphfeed prepare generic``; ``**kw`` go to :func:`prepare`.

    ``weight_col`` / ``time_col`` (text) or ``weight_key`` / ``time_key`` (``.npz``) add edge
    weights (``graph/weights.npy``, float32) and timestamps (edge feature ``timestamp``, int64
    when every value is whole, else float64), both in ``indices`` order.
    """
    cols = {n: c for n, c in (("weight", weight_col), ("timestamp", time_col)) if c is not None}
    keys = {n: k for n, k in (("weight", weight_key), ("timestamp", time_key)) if k}
    source = EdgeSource(edges, block_bytes=block_bytes, src_col=src_col, dst_col=dst_col,
                        value_cols=cols, edge_key=edge_key, value_keys=keys)
    return prepare(out, edges=source, features=features, labels=labels, splits=splits, **kw)
