"""The OGB node-property raw layout, as users download it (e.g. ``ogbn-arxiv``)::

    SRC/raw/edge.csv.gz            one "src,dst" per line, no header
    SRC/raw/node-feat.csv.gz       one comma-separated float row per node (optional)
    SRC/raw/node-label.csv.gz      one label per line (may be "nan")
    SRC/raw/num-node-list.csv.gz   the node count (optional)
    SRC/split/<name>/{train,valid,test}.csv.gz   one node id per line

OGB stores ``ogbn-arxiv`` edges in one direction; pass ``--undirected`` to add reverse edges as
the OGB leaderboard examples do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ...errors import DatasetError
from .._readers import EdgeSource, is_gzip, read_int_table
from ..schema import SPLIT_NAMES
from . import PrepareReport, prepare


def _find(folder: Path, stem: str) -> Optional[Path]:
    for suffix in (".csv.gz", ".csv"):
        p = folder / f"{stem}{suffix}"
        if p.is_file():
            return p
    return None


def _first_line(path: Path) -> str:
    """The first non-blank line of ``path`` (gzip or plain), shortened, for error messages."""
    import gzip

    try:
        opener = gzip.open if is_gzip(path) else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for _, line in zip(range(1000), f):
                if line.strip():
                    line = line.strip()
                    return line if len(line) <= 60 else line[:57] + "..."
    except (OSError, EOFError, ValueError):
        pass
    return ""


def read_num_nodes(path: Path) -> int:
    """The node count of an OGB ``num-node-list.csv[.gz]``: one line, one integer >= 0;
    ``DatasetError`` naming the file and the value otherwise."""
    t = read_int_table(path, 1)
    if t.shape[0] == 0:  # a lone non-number ('many') reads as a header
        raise DatasetError(f"{path}: expected the node count (one integer >= 0), got "
                           f"{_first_line(path)!r}")
    if t.shape[0] != 1:
        raise DatasetError(f"{path}: expected one graph (one line), found {t.shape[0]}; "
                           f"graph-property datasets are not node-property datasets")
    n = int(t[0, 0])
    if n < 0:
        raise DatasetError(f"{path}: the node count is {n}, expected an integer >= 0")
    return n


def split_files(src: Path, split_name: Optional[str], sub: str = "") -> dict:
    """``{train, valid, test: file}`` of ``src/split/<split_name>/<sub>`` (default: the first
    split folder); ``sub`` is the node type folder of the heterogeneous layout."""
    split_root = src / "split"
    names = sorted(p.name for p in split_root.iterdir() if p.is_dir()) if split_root.is_dir() else []
    if not names:
        raise DatasetError(f"{src}: no split/<name>/ folder; pass --split 0.8,0.1,0.1 for a random split")
    chosen = split_name or names[0]
    if chosen not in names:
        raise DatasetError(f"{split_root}: no split named {chosen!r}; found {names}")
    folder = split_root / chosen / sub if sub else split_root / chosen
    splits = {}
    for k in SPLIT_NAMES:
        f = _find(folder, k)
        if f is None:
            raise DatasetError(f"{folder}: missing {k}.csv.gz")
        splits[k] = f
    return splits


def prepare_ogb(src, out, *, split_name: Optional[str] = None, split=None,
                block_bytes: int = 8 * 1024 * 1024, **kw) -> PrepareReport:
    """Prepare the OGB node-property folder ``src`` (layout above) into dataset folder ``out``.

    Splits: the folder's ``split/<split_name>/`` (default: the first), or ``split`` instead (a
    :class:`~graphfeed.datasets.importers.SplitRule` or name -> ids, as :func:`prepare` takes).
    The node count comes from ``raw/num-node-list.csv.gz`` unless ``num_nodes`` is given;
    ``**kw`` go to :func:`prepare`.
    """
    src = Path(src)
    raw = src / "raw"
    if not raw.is_dir():
        raise DatasetError(f"{src}: not an OGB node-property folder (no raw/ inside)")
    edge_file = _find(raw, "edge")
    label_file = _find(raw, "node-label")
    if edge_file is None or label_file is None:
        raise DatasetError(f"{raw}: needs edge.csv.gz and node-label.csv.gz")
    feat_file = _find(raw, "node-feat")
    num_nodes = kw.pop("num_nodes", None)
    nn_file = _find(raw, "num-node-list")
    if num_nodes is None and nn_file is not None:
        num_nodes = read_num_nodes(nn_file)
    if split is not None:
        splits = split
    else:
        splits = split_files(src, split_name)
    edges = EdgeSource(edge_file, block_bytes=block_bytes)
    kw.setdefault("name", src.name)
    return prepare(out, edges=edges, features={"feat": feat_file} if feat_file else {}, labels=label_file,
                   splits=splits, num_nodes=num_nodes, **kw)
