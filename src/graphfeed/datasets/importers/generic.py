"""The generic importer: an edge list, node features, labels, and split files or a seeded split.

Edges: CSV / TSV / whitespace text (optionally gzipped), ``.npy`` of shape ``(E, 2)`` or
``(2, E)``, or ``.npz`` with ``src``/``dst`` (or ``edge_index``). Features: ``.npy`` or CSV, one
row per node, as many named tables as you like. Labels: ``.npy`` or text (one per line, or
``node_id,label``). Splits: ``--train/--valid/--test`` id files or ``--split 0.8,0.1,0.1``.
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
    block_bytes: int = 8 * 1024 * 1024,
    **kw,
) -> PrepareReport:
    """Library form of ``graphfeed prepare generic``; ``**kw`` go to :func:`prepare`."""
    source = EdgeSource(edges, block_bytes=block_bytes, src_col=src_col, dst_col=dst_col)
    return prepare(out, edges=source, features=features, labels=labels, splits=splits, **kw)


def add_arguments(p) -> None:
    p.add_argument("out", metavar="OUT", help="dataset folder to create")
    p.add_argument("--edges", required=True, help="edge list: .csv/.tsv/.txt[.gz], .npy (E,2)/(2,E), .npz")
    p.add_argument("--features", action="append", default=[], metavar="[NAME=]PATH",
                   help="node features (.npy or CSV), one row per node; repeat for more (default name: feat)")
    p.add_argument("--labels", required=True, help="labels: .npy, or text with one label per line or id,label")
    p.add_argument("--train", help="train node ids (.npy or one id per line)")
    p.add_argument("--valid", help="validation node ids")
    p.add_argument("--test", help="test node ids")
    p.add_argument("--num-nodes", type=int, help="number of nodes (default: feature rows / label count)")
    p.add_argument("--src-col", type=int, default=0, help="column of the source id in a text edge list")
    p.add_argument("--dst-col", type=int, default=1, help="column of the destination id")


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
        src_col=args.src_col, dst_col=args.dst_col, num_nodes=args.num_nodes, **common,
    )
