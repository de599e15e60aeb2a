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

from pathlib import Path
from typing import Mapping, Optional

from ...errors import DatasetError
from .._readers import EdgeSource
from . import PrepareReport, SplitRule, parse_features_arg, prepare

HELP = "edge list + feature/label/split files (CSV, TSV, .gz, .npy, .npz)"


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


def add_arguments(p) -> None:
    p.add_argument("out", metavar="OUT", help="dataset folder to create")
    p.add_argument("--edges", required=True, help="edge list: .csv/.tsv/.txt[.gz], .npy (E,2)/(2,E), .npz")
    p.add_argument("--features", action="append", default=[], metavar="[NAME=]PATH",
                   help="node features, one row per node: .npy, CSV, sparse .json (feature ids per node) "
                        "or scipy sparse .npz (stored dense); repeat for more (default name: feat)")
    p.add_argument("--labels", required=True,
                   help="labels: .npy, or text with one label per line or id,label (strings become classes)")
    p.add_argument("--label-col", help="label column of a text label table (name or 0-based index)")
    p.add_argument("--id-col", help="node id column of a text label table (name or 0-based index)")
    for k, what in (("train", "train"), ("valid", "validation"), ("test", "test")):
        p.add_argument(f"--{k}", action="append", metavar="PATH",
                       help=f"{what} node ids or boolean mask (.npy, FILE.npz:KEY, one id per line); "
                            f"repeat, or give an (N, k) mask, for k stored splits")
    p.add_argument("--num-nodes", type=int, help="number of nodes (default: feature rows / label count)")
    p.add_argument("--src-col", type=int, default=0, help="column of the source id in a text edge list (default 0)")
    p.add_argument("--dst-col", type=int, default=1, help="column of the destination id (default 1)")
    p.add_argument("--weight-col", type=int, help="column of an edge weight in a text edge list")
    p.add_argument("--time-col", type=int, help="column of an edge timestamp in a text edge list")
    p.add_argument("--edge-key", help="edges in an .npz: one (2, E) or (E, 2) array, or SRC,DST")
    p.add_argument("--weight-key", help="edge weights in an .npz (1-D, one per edge)")
    p.add_argument("--time-key", help="edge timestamps in an .npz (1-D, one per edge)")


def run(args, common: dict) -> PrepareReport:
    files = {k: getattr(args, k) for k in ("train", "valid", "test") if getattr(args, k)}
    if files and args.split:
        raise DatasetError("give either --train/--valid/--test files or --split, not both")
    if files:
        splits = files
    else:
        splits = SplitRule.parse(args.split or "0.8,0.1,0.1", args.seed)
    return prepare_generic(
        Path(args.out), edges=args.edges, labels=args.labels,
        features=parse_features_arg(args.features), splits=splits,
        src_col=args.src_col, dst_col=args.dst_col, weight_col=args.weight_col, time_col=args.time_col,
        edge_key=args.edge_key, weight_key=args.weight_key, time_key=args.time_key,
        num_nodes=args.num_nodes, label_col=args.label_col, id_col=args.id_col, **common,
    )
