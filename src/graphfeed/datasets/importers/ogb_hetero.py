"""The OGB heterogeneous node-property raw layout, as ``ogbn-mag`` is downloaded::

    SRC/raw/num-node-dict.csv.gz                     header of node types, one row of counts
    SRC/raw/triplet-type-list.csv.gz                 "src_type,relation,dst_type" per line (optional:
                                                     else the relations/ folder names)
    SRC/raw/relations/<src>___<rel>___<dst>/edge.csv.gz   "src,dst" type-local ids, no header
    SRC/raw/node-feat/<type>/node-feat.csv.gz        one float row per node of the type (optional)
    SRC/raw/node-label/<type>/node-label.csv.gz      labels of the labelled (target) type
    SRC/split/<name>/<type>/{train,valid,test}.csv.gz   type-local ids of the target type

The graph is built in memory (``HeteroGraph.from_edges``: one counting sort), unlike the
streamed homogeneous importers. ``undirected=True`` adds, for every relation ``(s, r, d)``, a
reverse relation ``(d, "rev_" + r, s)`` (R-GCN and ``to_hetero`` models need every type to
receive messages).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np

from ..._memory import peak_rss_bytes
from ...errors import DatasetError
from .._readers import read_float_blocks, read_int_table
from . import PrepareReport, check_trainable, load_ids, read_labels
from .ogb import _find, split_files


def _names_and_counts(raw: Path):
    f = _find(raw, "num-node-dict")
    if f is None:
        raise DatasetError(f"{raw}: needs num-node-dict.csv.gz (node types and their counts)")
    import gzip

    opener = gzip.open if f.suffix == ".gz" else open
    with opener(f, "rt") as fh:
        lines = [ln.strip() for ln in fh if ln.strip()]
    if len(lines) != 2:
        raise DatasetError(f"{f}: expected a header of node types and one row of counts, got "
                           f"{len(lines)} lines")
    names = lines[0].split(",")
    try:
        counts = [int(x) for x in lines[1].split(",")]
    except ValueError:
        raise DatasetError(f"{f}: line 2: counts must be integers, got {lines[1][:60]!r}") from None
    if len(counts) != len(names) or any(c < 0 for c in counts):
        raise DatasetError(f"{f}: {len(names)} node types but {len(counts)} counts (>= 0)")
    return dict(zip(names, counts))


def prepare_ogb_hetero(src, out, *, split_name: Optional[str] = None, split=None,
                       undirected: bool = False, dedupe: bool = False,
                       num_classes: Optional[int] = None, overwrite: bool = False,
                       name: Optional[str] = None, block_bytes: int = 8 * 1024 * 1024,
                       **ignored) -> PrepareReport:
    """Prepare the OGB heterogeneous folder ``src`` (layout above) into dataset folder ``out``.

    The labelled type is the one with ``raw/node-label/<type>/``; splits come from
    ``split/<split_name>/<type>/`` (default: the first split folder), or ``split`` (a
    :class:`~graphfeed.datasets.importers.SplitRule`) over the labelled nodes. ``dedupe`` drops
    repeated pairs within a relation. Options of the streamed importers (``memory_budget``,
    ``progress``, ``drop_self_loops``, ...) are accepted and have no effect here."""
    from ...graph.hetero import HeteroGraph
    from ..format import write_dataset
    from ..hetero import HeteroParts

    del ignored
    t0 = time.perf_counter()
    src = Path(src)
    raw = src / "raw"
    if not raw.is_dir():
        raise DatasetError(f"{src}: not an OGB node-property folder (no raw/ inside)")
    counts = _names_and_counts(raw)
    rel_root = raw / "relations"
    if not rel_root.is_dir():
        raise DatasetError(f"{raw}: no relations/ folder (one <src>___<rel>___<dst>/ per edge type)")
    edges, input_edges = {}, 0
    for d in sorted(p for p in rel_root.iterdir() if p.is_dir()):
        parts = d.name.split("___")
        if len(parts) != 3:
            raise DatasetError(f"{d}: relation folders are named <src>___<relation>___<dst>")
        et = tuple(parts)
        for t in (et[0], et[2]):
            if t not in counts:
                raise DatasetError(f"{d}: node type {t!r} is not in num-node-dict ({list(counts)})")
        f = _find(d, "edge")
        if f is None:
            raise DatasetError(f"{d}: missing edge.csv.gz")
        e = read_int_table(f, 2, block_bytes=block_bytes)
        for col, t in ((0, et[0]), (1, et[2])):
            if e.shape[0] and (int(e[:, col].min()) < 0 or int(e[:, col].max()) >= counts[t]):
                bad = int(e[:, col].max()) if int(e[:, col].min()) >= 0 else int(e[:, col].min())
                raise DatasetError(f"{f}: {'source' if col == 0 else 'destination'} id {bad} is "
                                   f"out of range [0, {counts[t]}) of node type {t!r}")
        edges[et] = (e[:, 0], e[:, 1])
        input_edges += e.shape[0]
        if undirected:
            edges[(et[2], f"rev_{et[1]}", et[0])] = (e[:, 1], e[:, 0])
    if not edges:
        raise DatasetError(f"{rel_root}: no relation folders")
    label_root = raw / "node-label"
    targets = sorted(p.name for p in label_root.iterdir() if p.is_dir()) if label_root.is_dir() else []
    if len(targets) != 1 or targets[0] not in counts:
        raise DatasetError(f"{label_root}: expected one folder named after the labelled node type "
                           f"(one of {list(counts)}), found {targets}")
    target = targets[0]
    lf = _find(label_root / target, "node-label")
    if lf is None:
        raise DatasetError(f"{label_root / target}: missing node-label.csv.gz")
    lab = read_labels(lf, counts[target])
    y = np.asarray(lab.values, dtype=np.int64)
    feats = {}
    froot = raw / "node-feat"
    for t in counts:
        ff = _find(froot / t, "node-feat") if froot.is_dir() else None
        if ff is not None:
            x = np.concatenate([a for a, _ in read_float_blocks(ff, block_bytes=block_bytes)])
            if x.shape[0] != counts[t]:
                raise DatasetError(f"{ff}: {x.shape[0]} rows, node type {t!r} has {counts[t]}")
            feats[t] = {"feat": x}
    g = HeteroGraph.from_edges(counts, edges, drop_duplicates=dedupe)
    off = int(g.node_offsets[g.type_id(target)])
    if num_classes is None:
        num_classes = int(y.max()) + 1 if y.size and y.max() >= 0 else 1
    if split is not None:
        local = split.apply(y, num_classes)
    else:
        local = {}
        for k, f in split_files(src, split_name, target).items():
            ids = load_ids(f, f"split {k}")
            if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= counts[target]):
                raise DatasetError(f"{f}: ids must be in [0, {counts[target]}) of node type "
                                   f"{target!r}")
            local[k] = ids
    check_trainable({k: [v] for k, v in local.items()}, y,
                    split if split is not None else split_files(src, split_name, target), str(lf))
    labels = np.full(g.num_nodes, -1, dtype=np.int64)
    labels[off:off + counts[target]] = y
    path = write_dataset(out, graph=g.csc, node_features={"label": labels},
                         splits={k: np.asarray(v, dtype=np.int64) + off for k, v in local.items()},
                         num_classes=num_classes, name=name or src.name, overwrite=overwrite,
                         hetero=HeteroParts(g, feats, target_type=target))
    size = sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
    return PrepareReport(Path(path), g.num_nodes, g.num_edges, input_edges, num_classes,
                         {k: len(v) for k, v in local.items()}, time.perf_counter() - t0,
                         peak_rss_bytes(), size)
