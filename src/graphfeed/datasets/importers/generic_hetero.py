"""The generic importer with type columns: a heterogeneous dataset from an edge list whose edges
carry an edge type and a node-type file of one type per node.

Inputs are those of :mod:`.generic` (same edge, feature, label and split files, in the input's
own node ids) plus:

- ``node_types``: one type name or id per node (``.npy``/``.npz``, or text with one per line);
- the edge type of every edge: column ``edge_type_col`` of a text edge list, or the 1-D array
  ``edge_type_key`` of an ``.npz`` edge file (names or ids);
- optionally ``node_type_names`` / ``edge_type_names``: the declared types, in order (ids index
  them; a name outside them is an error; a declared edge type with no edges is an error).
  Without them, the types are the distinct values found (sorted); an id ``k`` is named
  ``type<k>`` (nodes) or ``rel<k>`` (edges).

Node ids are relabelled so that each type is a contiguous range (types in order, nodes of a
type in their input order); the node feature ``orig_id`` keeps the input id of every global id.
An edge of type ``r`` from a node of type ``s`` to one of type ``d`` belongs to the relation
``(s, r, d)``, so an edge type joining several type pairs becomes one relation per pair (the
triples tell them apart). Each global feature table is split by type into per-type features;
labels and splits are of the target type (``target_type``, else the type of the labelled
nodes). Built in memory, like :mod:`.ogb_hetero`; ``undirected`` adds ``(d, "rev_" + r, s)``.
"""

from __future__ import annotations

import csv
import tempfile
import time
from pathlib import Path
from typing import Mapping, Optional, Sequence

import numpy as np

from ..._memory import peak_rss_bytes
from ...errors import DatasetError
from .._readers import (EdgeSource, TextBlocks, data_lines, load_array_file, load_npz,
                        looks_like_header, split_npz_key)
from . import PrepareReport, SplitRule, check_trainable, load_split_sets, read_labels

ORIG_ID = "orig_id"


def _names_arg(value, what: str) -> Optional[list]:
    if value is None:
        return None
    names = [s.strip() for s in value.split(",")] if isinstance(value, str) else [str(s) for s in value]
    if not names or not all(names) or len(set(names)) != len(names):
        raise DatasetError(f"{what}: expected distinct non-empty names, got {value!r}")
    return names


def _is_int_text(a: np.ndarray) -> bool:
    return all(t.lstrip("-").isdigit() for t in a.tolist())


def _type_ids(values: np.ndarray, names: Optional[list], prefix: str, where: str,
              lines: Optional[np.ndarray] = None, unit: str = "entry"):
    """``(type id per entry int64, type names)``: ``values`` are names (strings) or ids."""
    def at(i: int) -> str:
        return f"line {int(lines[i])}" if lines is not None else f"{unit} {i}"

    if values.dtype.kind in "US" and _is_int_text(values.astype(str)):
        values = values.astype(str).astype(np.int64)
    if values.dtype.kind in "iu":
        v = values.astype(np.int64)
        if v.size and int(v.min()) < 0:
            i = int(np.argmin(v))
            raise DatasetError(f"{where}: {at(i)}: type id {int(v[i])} is negative")
        if names is not None:
            bad = np.flatnonzero(v >= len(names))
            if bad.size:
                i = int(bad[0])
                raise DatasetError(f"{where}: {at(i)}: type id {int(v[i])} is out of range "
                                   f"[0, {len(names)}) of the declared types {names}")
            return v, list(names)
        found = np.unique(v)
        return np.searchsorted(found, v), [f"{prefix}{int(k)}" for k in found]
    if values.dtype.kind not in "US":
        raise DatasetError(f"{where}: types must be names or integer ids, got {values.dtype}")
    text = values.astype(str)
    found, inv = np.unique(text, return_inverse=True)
    if names is None:
        return inv.astype(np.int64), [str(x) for x in found]
    unknown = [str(x) for x in found if str(x) not in names]
    if unknown:
        i = int(np.flatnonzero(text == unknown[0])[0])
        raise DatasetError(f"{where}: {at(i)}: unknown type name {unknown[0]!r}; the declared "
                           f"types are {names}")
    remap = np.array([names.index(str(x)) for x in found], dtype=np.int64)
    return remap[inv], list(names)


def _read_column_file(source) -> tuple:
    """``(values, line numbers or None)`` of a one-per-node file: an array, ``.npy``/``.npz``,
    text with one value per line (a header ``type``/``node_type``/``ntype`` is skipped), or a
    delimited ``id,type`` table listing every node once."""
    if hasattr(source, "shape") or isinstance(source, (list, tuple)):
        return np.asarray(source), None
    a = load_array_file(source, what="node types")
    if a is not None:
        if a.ndim == 2 and a.shape[1] == 1:
            a = a[:, 0]
        if a.ndim != 1:
            raise DatasetError(f"{source}: node types must be 1-D (one per node), got {a.shape}")
        return a, None
    vals, nos, delim = [], [], None
    for lines, delim in data_lines(TextBlocks(source, skip_header=False)):
        for no, t in lines:
            vals.append(t.strip())
            nos.append(no)
    if vals and delim is not None:  # an "id,type" table
        return _scatter_types(source, vals, nos, delim)
    if vals and vals[0].lower() in TYPE_HEADERS:
        vals, nos = vals[1:], nos[1:]
    return np.array(vals, dtype=str), np.array(nos, dtype=np.int64)


TYPE_HEADERS = ("type", "node_type", "ntype")


def _scatter_types(source, vals: list, nos: list, delim: str) -> tuple:
    """``(type per node, line of each)`` from the rows ``id<delim>type`` of a node-type table
    (an ``id,type`` header line skipped); every node listed once."""
    rows = list(csv.reader(vals, delimiter=delim))
    if rows and len(rows[0]) == 2 and rows[0][1].strip().lower() in TYPE_HEADERS:
        rows, nos = rows[1:], nos[1:]
    ids = np.empty(len(rows), dtype=np.int64)
    for i, (r, no) in enumerate(zip(rows, nos)):
        if len(r) != 2 or not r[0].strip().isdigit():
            raise DatasetError(f"{source}: line {no}: expected 'node id{delim}type', got "
                               f"{delim.join(r)[:80]!r}")
        ids[i] = int(r[0])
    n = len(rows)
    if n and (int(ids.max()) >= n or np.unique(ids).size != n):
        raise DatasetError(f"{source}: a node-type table must list every node 0..{n - 1} once "
                           f"({n} rows, ids {int(ids.min())}..{int(ids.max())}, "
                           f"{np.unique(ids).size} distinct)")
    out = np.empty(n, dtype=object)
    lines = np.empty(n, dtype=np.int64)
    out[ids] = [r[1].strip() for r in rows]
    lines[ids] = nos
    return out.astype(str), lines


def _read_text_edges(path, src_col: int, dst_col: int, type_col: int, block_bytes: int):
    """``(src, dst, type values (str), line numbers)`` of a text edge list (a header line skipped)."""
    need = max(src_col, dst_col, type_col) + 1
    if len({src_col, dst_col, type_col}) != 3:
        raise DatasetError(f"{path}: the source, destination and edge type columns must differ, got "
                           f"{src_col}, {dst_col}, {type_col}")
    s_parts, d_parts, t_parts, n_parts = [], [], [], []
    first = True
    for lines, delim in data_lines(TextBlocks(path, block_bytes=block_bytes, skip_header=False)):
        rows = (list(csv.reader([t for _, t in lines], delimiter=delim)) if delim
                else [t.split() for _, t in lines])
        if first:
            first = False
            r0 = rows[0]
            if len(r0) >= need and looks_like_header(",".join(r0[c] for c in (src_col, dst_col))):
                rows, lines = rows[1:], lines[1:]
        for (no, text), r in zip(lines, rows):
            if len(r) < need:
                raise DatasetError(f"{path}: line {no}: {len(r)} column(s), expected at least "
                                   f"{need}: {text[:80]!r}")
        try:
            s_parts.append(np.array([r[src_col].strip() for r in rows], dtype=str).astype(np.int64))
            d_parts.append(np.array([r[dst_col].strip() for r in rows], dtype=str).astype(np.int64))
        except (ValueError, OverflowError):
            for (no, text), r in zip(lines, rows):
                for c in (src_col, dst_col):
                    try:
                        int(r[c])
                    except ValueError:
                        raise DatasetError(f"{path}: line {no}: node id {r[c]!r} is not an integer "
                                           f"(column {c})") from None
            raise
        t_parts.append(np.array([r[type_col].strip() for r in rows], dtype=str))
        n_parts.append(np.array([no for no, _ in lines], dtype=np.int64))
    cat = lambda ps, dt: np.concatenate(ps) if ps else np.zeros(0, dt)  # noqa: E731
    return cat(s_parts, np.int64), cat(d_parts, np.int64), cat(t_parts, str), cat(n_parts, np.int64)


def _numeric_type_column(path, src_col: int, dst_col: int, col: int, block_bytes: int):
    """``(src, dst, type ids int64)`` when the type column of a text edge list holds whole
    numbers (the compiled parser, fast), else ``None`` (names: parsed as text)."""
    try:
        source = EdgeSource(path, block_bytes=block_bytes, src_col=src_col, dst_col=dst_col,
                            value_cols={"edge_type": col})
        parts = [(a.copy(), b.copy(), v[0].copy()) for a, b, v in source]
    except DatasetError:
        return None
    cat = lambda i, dt: (np.concatenate([p[i] for p in parts]) if parts  # noqa: E731
                         else np.zeros(0, dt))
    t = cat(2, np.float64)
    if t.size and not np.all(t == np.floor(t)):
        return None
    return cat(0, np.int64), cat(1, np.int64), t.astype(np.int64)


def _read_edges(edges, *, src_col, dst_col, edge_type_col, edge_key, edge_type_key, block_bytes):
    """``(src, dst, edge type values or None, line numbers or None, where)``."""
    where = str(edges) if not isinstance(edges, tuple) else "edges"
    name = where.lower()
    if edge_type_col is not None and edge_type_key:
        raise DatasetError("give the edge type as --edge-type-col (text) or --edge-type-key (.npz), "
                           "not both")
    if edge_type_key and not name.endswith(".npz"):
        raise DatasetError(f"{where}: --edge-type-key names an array in an .npz edge file")
    if edge_type_col is not None:
        if name.endswith((".npy", ".npz")):
            raise DatasetError(f"{where}: --edge-type-col is for text edge lists; in an .npz use "
                               f"--edge-type-key")
        from ..._checks import check_int

        col = check_int("the edge type column (a column index)", edge_type_col, 0, 1023)
        ids = _numeric_type_column(edges, int(src_col), int(dst_col), col, block_bytes)
        if ids is not None:
            return (*ids, None, where)
        s, d, t, nos = _read_text_edges(edges, int(src_col), int(dst_col), col, block_bytes)
        return s, d, t, nos, where
    source = EdgeSource(edges, block_bytes=block_bytes, src_col=src_col, dst_col=dst_col,
                        edge_key=edge_key)
    parts = [(a.copy(), b.copy()) for a, b, _ in source]
    s = np.concatenate([a for a, _ in parts]) if parts else np.zeros(0, np.int64)
    d = np.concatenate([b for _, b in parts]) if parts else np.zeros(0, np.int64)
    t = None
    if edge_type_key:
        path, _ = split_npz_key(edges)
        t = load_npz(path, [edge_type_key])[edge_type_key]
        if t.ndim != 1 or t.shape[0] != s.shape[0]:
            raise DatasetError(f"{where}: edge type array {edge_type_key!r} must be 1-D with one "
                               f"entry per edge ({s.shape[0]}), got shape {t.shape}")
    return s, d, t, None, where


def _load_feature(src, name: str, tmp: Path, dtype, num_nodes: Optional[int]):
    """The feature's rows as numpy, converted to ``dtype``; a dtype numpy lacks (bfloat16)
    as a torch tensor over its bits, which ``write_dataset`` stores as such."""
    from ..build import write_feature

    f = tmp / f"{name}.npy"
    _, dt = write_feature(src, f, dtype=dtype, num_nodes=num_nodes)
    x = np.load(f)
    if isinstance(dt, str):  # the bits of a dtype numpy lacks
        from ...features.memory import to_tensor

        return to_tensor(x, dt)
    return x


def _rows_of(x, ids: np.ndarray):
    """Rows ``ids`` of a feature (numpy, or a tensor of a dtype numpy lacks), contiguous."""
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x[ids])
    return x[ids].contiguous()


def prepare_generic_hetero(
    out, *, edges, labels, features: Optional[Mapping[str, object]] = None, splits=None,
    node_types=None, edge_type_col: Optional[int] = None, edge_type_key: Optional[str] = None,
    node_type_names: Optional[Sequence[str]] = None, edge_type_names: Optional[Sequence[str]] = None,
    target_type: Optional[str] = None, src_col: int = 0, dst_col: int = 1,
    edge_key: Optional[str] = None, num_nodes: Optional[int] = None,
    num_classes: Optional[int] = None, undirected: bool = False, drop_self_loops: bool = False,
    dedupe: bool = False, name: Optional[str] = None, overwrite: bool = False,
    feature_dtype=None, label_col=None, id_col=None, block_bytes: int = 8 * 1024 * 1024,
    **ignored,
) -> PrepareReport:
    """A heterogeneous dataset from the generic inputs plus type columns (module docstring).
    ``memory_budget`` and ``progress`` of the streamed importers are accepted and unused."""
    from ...graph.hetero import HeteroGraph
    from ..format import write_dataset
    from ..hetero import HeteroParts
    from ..schema import check_name

    del ignored
    t0 = time.perf_counter()
    out = Path(out)
    if labels is None:
        raise DatasetError("labels are required for a node classification dataset")
    nt_names = _names_arg(node_type_names, "node type names")
    et_names = _names_arg(edge_type_names, "edge type names")
    for nm in (nt_names or []) + (et_names or []):
        check_name(nm, "type name")
    features = dict(features or {})
    if ORIG_ID in features or "label" in features:
        raise DatasetError(f"feature names {ORIG_ID!r} and 'label' are reserved in a "
                           f"heterogeneous import")
    s, d, et_vals, et_lines, ewhere = _read_edges(
        edges, src_col=src_col, dst_col=dst_col, edge_type_col=edge_type_col, edge_key=edge_key,
        edge_type_key=edge_type_key, block_bytes=block_bytes)
    input_edges = int(s.shape[0])
    count_from = "--num-nodes" if num_nodes is not None else ""
    with tempfile.TemporaryDirectory(prefix=".gf-hetero-", dir=out.parent if out.parent.is_dir()
                                     else None) as tmp:
        feats = {}
        for fname, src in features.items():
            check_name(fname, f"{out}: node feature")
            x = _load_feature(src, fname, Path(tmp), feature_dtype, num_nodes)
            what = str(src) if isinstance(src, (str, Path)) else f"feature {fname!r}"
            if num_nodes is None:
                num_nodes, count_from = x.shape[0], f"{what} has {x.shape[0]} rows"
            elif x.shape[0] != num_nodes:
                raise DatasetError(f"{what} has {x.shape[0]} rows but {count_from} says {num_nodes} "
                                   f"nodes; every feature needs one row per node")
            feats[fname] = x
    lab = read_labels(labels, num_nodes, label_col=label_col, id_col=id_col, count_from=count_from)
    y = lab.values
    n = int(y.shape[0])
    lname = str(labels) if isinstance(labels, (str, Path)) else "labels"
    # node types
    if node_types is not None:
        nvals, nlines = _read_column_file(node_types)
        nwhere = str(node_types) if isinstance(node_types, (str, Path)) else "node_types"
        if nvals.shape[0] != n:
            raise DatasetError(f"{nwhere}: {nvals.shape[0]} node types for {n} nodes "
                               f"({count_from or lname}); give one type per node")
        ntype, ntypes = _type_ids(nvals, nt_names, "type", nwhere, nlines, "node")
    else:
        ntypes = nt_names[:1] if nt_names else ["node"]
        ntype = np.zeros(n, dtype=np.int64)
    # edges: ids in range, then types
    for side, ids in (("source", s), ("destination", d)):
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
            i = int(np.argmin(ids)) if int(ids.min()) < 0 else int(np.argmax(ids))
            at = f"line {int(et_lines[i])}: " if et_lines is not None else ""
            raise DatasetError(f"{ewhere}: {at}{side} id {int(ids[i])} is out of range [0, {n}) "
                               f"({count_from or lname})")
    if et_vals is not None:
        etype, etypes = _type_ids(et_vals, et_names, "rel", ewhere, et_lines, "edge")
    else:
        etypes = et_names[:1] if et_names else ["edge"]
        etype = np.zeros(s.shape[0], dtype=np.int64)
    for t in ntypes + etypes:
        check_name(t, f"{out}: type name")
    counts_e = np.bincount(etype, minlength=len(etypes))
    if counts_e.size and (counts_e == 0).any():
        raise DatasetError(f"{ewhere}: edge type {etypes[int(np.flatnonzero(counts_e == 0)[0])]!r} "
                           f"has no edges")
    if drop_self_loops:
        keep = s != d
        s, d, etype = s[keep], d[keep], etype[keep]
    # relabel: types contiguous, input order within a type
    orig = np.argsort(ntype, kind="stable").astype(np.int64)
    new = np.empty(n, dtype=np.int64)
    new[orig] = np.arange(n, dtype=np.int64)
    counts_n = np.bincount(ntype, minlength=len(ntypes))
    offsets = np.zeros(len(ntypes) + 1, dtype=np.int64)
    np.cumsum(counts_n, out=offsets[1:])
    st, dt = ntype[s], ntype[d]
    rel_edges = {}
    key = (etype * len(ntypes) + st) * len(ntypes) + dt
    for k in np.unique(key):
        sel = key == k
        r, rest = divmod(int(k), len(ntypes) * len(ntypes))
        a, b = divmod(rest, len(ntypes))
        ls, ld = new[s[sel]] - offsets[a], new[d[sel]] - offsets[b]
        rel_edges[(ntypes[a], etypes[r], ntypes[b])] = (ls, ld)
        if undirected:
            rel_edges[(ntypes[b], f"rev_{etypes[r]}", ntypes[a])] = (ld, ls)
    if not rel_edges:
        raise DatasetError(f"{ewhere}: no edges")
    g = HeteroGraph.from_edges(dict(zip(ntypes, (int(c) for c in counts_n))), rel_edges,
                               drop_duplicates=dedupe)
    # target type, labels
    labelled = np.unique(ntype[y >= 0])
    if target_type is not None:
        if target_type not in ntypes:
            raise DatasetError(f"target type {target_type!r} is not one of the node types {ntypes}")
        tt = ntypes.index(target_type)
    elif labelled.size == 1:
        tt = int(labelled[0])
    else:
        raise DatasetError(f"{lname}: labelled nodes are of {len(labelled)} node types "
                           f"{[ntypes[int(i)] for i in labelled]}; name the target with "
                           f"--target-type")
    y = np.where(ntype == tt, y, -1)
    if not (y >= 0).any():
        raise DatasetError(f"{lname}: no node of the target type {ntypes[tt]!r} has a label "
                           f"(labelled nodes are of types {[ntypes[int(i)] for i in labelled]}); "
                           f"nothing to train on")
    if num_classes is None:
        num_classes = len(lab.class_names) if lab.class_names else (
            int(y.max()) + 1 if y.size and y.max() >= 0 else 1)
    labels_new = y[orig]
    # splits, in input ids -> global ids of the target type
    if isinstance(splits, SplitRule):
        split_sets = {k: [new[v]] for k, v in splits.apply(y, int(num_classes)).items()}
    else:
        split_sets = {}
        for k, v in (splits or {}).items():
            check_name(k, f"{out}: split")
            srcs = v if isinstance(v, (list, tuple)) else [v]
            split_sets[k] = []
            for src in srcs:
                for ids in load_split_sets(src, f"split {k!r}", n):
                    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
                        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
                        raise DatasetError(f"{src}: split {k!r} id {bad} is out of range [0, {n})")
                    other = np.flatnonzero(ntype[ids] != tt)
                    if other.size:
                        v0 = int(ids[other[0]])
                        raise DatasetError(
                            f"{src}: split {k!r} names node {v0} of type {ntypes[int(ntype[v0])]!r}"
                            f"; splits must be nodes of the target type {ntypes[tt]!r}")
                    split_sets[k].append(np.sort(new[ids]))
    num_sets = max((len(v) for v in split_sets.values()), default=1)
    if num_sets > 1:
        raise DatasetError("a heterogeneous import takes one set per split")
    check_trainable(split_sets, y, splits, lname)
    type_feats = {}
    for tname, a, b in zip(ntypes, offsets[:-1], offsets[1:]):
        if b > a:
            type_feats[tname] = {fname: _rows_of(x, orig[a:b]) for fname, x in feats.items()}
    path = write_dataset(out, graph=g.csc, node_features={"label": labels_new, ORIG_ID: orig},
                         splits={k: v[0] for k, v in split_sets.items()},
                         num_classes=int(num_classes), name=name or out.name, overwrite=overwrite,
                         class_names=lab.class_names, hetero=HeteroParts(g, type_feats,
                                                              target_type=ntypes[tt]))
    size = sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
    return PrepareReport(Path(path), g.num_nodes, g.num_edges, input_edges, int(num_classes),
                         {k: len(v[0]) for k, v in split_sets.items()}, time.perf_counter() - t0,
                         peak_rss_bytes(), size)
