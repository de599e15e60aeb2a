"""Importers: turn raw graph data into a prepared dataset folder.

:func:`prepare` is the one driver every importer ends in: it streams node features into the
dataset, builds the CSC graph in two bounded-memory passes, writes labels and splits, validates
the folder and publishes it atomically. The format-specific importers only locate and decode
their inputs:

- ``generic``: :func:`graphfeed.datasets.importers.generic.prepare_generic`
- ``ogb``: the OGB node-property raw layout (:mod:`.ogb`)
- ``ogb-hetero``: its heterogeneous variant, ogbn-mag (:mod:`.ogb_hetero`; in memory)
- ``cora-text``, ``planetoid-npz``, ``csr-npz``: the files in ``shared/datasets`` (:mod:`.shared`)
- ``ogbl``, ``link-split``: link-prediction datasets (:mod:`.link`)
- ``graphbolt``: a DGL GraphBolt ``OnDiskDataset`` folder (:mod:`.graphbolt`)
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Union

import numpy as np

from ...errors import DatasetError
from ..schema import MAX_NUM_CLASSES, SPLIT_NAMES
from ..._checks import check_int
from ..._registry import Registry
from ..._memory import peak_rss_bytes
from ..._units import format_bytes
from ..build import (DEFAULT_MEMORY_BUDGET, Progress, build_csc_streaming, check_prepare_memory,
                     compact_binary, write_feature)
from ..build import feature_dtype as as_feature_dtype

__all__ = ["IMPORTERS", "Labels", "MAX_NUM_CLASSES", "PrepareReport", "SplitRule", "prepare", "load_labels",
           "load_ids", "load_split_sets", "read_labels"]

#: importer name -> the library function that prepares a dataset from that input layout (the CLI
#: adds one ``graphfeed prepare NAME`` subcommand per entry)
IMPORTERS = Registry("importer")
for _name, _target, _help in (
    ("generic", "generic:prepare_generic", "edge list + feature/label/split files (CSV, TSV, .gz, .npy, .npz)"),
    ("ogb", "ogb:prepare_ogb", "OGB node-property raw layout (raw/*.csv.gz, split/<name>/*.csv.gz)"),
    ("ogb-hetero", "ogb_hetero:prepare_ogb_hetero",
     "OGB heterogeneous node-property raw layout (ogbn-mag: raw/relations/*/edge.csv.gz, ...)"),
    ("cora-text", "shared:prepare_cora_text", "Cora text layout: *_edges.csv, *_features.json, *_target.csv"),
    ("planetoid-npz", "shared:prepare_planetoid_npz",
     ".npz with x, y, edge_index, train_idx/val_idx/test_idx (Planetoid order)"),
    ("csr-npz", "shared:prepare_csr_npz", "gnn-benchmark .npz of CSR parts (adj_*, attr_*, labels)"),
    ("ogbl", "link:prepare_ogbl", "OGB link-property raw layout (raw/edge.csv.gz, split/<name>/"
                                  "{train,valid,test}.csv.gz pairs): a link-prediction dataset"),
    ("link-split", "link:prepare_link_split",
     "a prepared dataset folder -> a link-prediction dataset with a seeded random edge split"),
    ("synthetic", "synthetic:prepare_synthetic",
     "a built-in dataset (tiny, small, medium, papers, ...) written into OUT, --scale to shrink it"),
    ("graphbolt", "graphbolt:prepare_graphbolt",
     "a DGL GraphBolt OnDiskDataset folder (metadata.yaml; csv/numpy edges, numpy/torch "
     "features, a node classification or link prediction task)"),
):
    IMPORTERS.add(_name, f".datasets.importers.{_target}", _help)
del _name, _target, _help


@dataclass(frozen=True)
class SplitRule:
    """A seeded split of the labelled nodes (label >= 0).

    ``kind="random"``: ``sizes`` are fractions ``(train, valid, test)`` summing to <= 1.
    ``kind="per-class"``: ``sizes`` are ``(train per class, valid, test)`` counts, the
    Planetoid-style random split.
    """

    kind: str
    sizes: tuple
    seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "seed", check_int("split seed", self.seed, 0))

    @classmethod
    def parse(cls, text: str, seed: int = 0) -> "SplitRule":
        """``"0.8,0.1,0.1"`` or ``"per-class:20,500,1000"``."""
        t = str(text).strip()
        kind = "random"
        if t.startswith("per-class:"):
            kind, t = "per-class", t[len("per-class:"):]
        try:
            vals = tuple(float(x) for x in t.split(","))
        except ValueError:
            raise DatasetError(f"cannot parse split {text!r}; use e.g. 0.8,0.1,0.1 or per-class:20,500,1000") from None
        if len(vals) != 3 or not all(math.isfinite(v) and v >= 0 for v in vals):
            raise DatasetError(f"split {text!r} needs three finite non-negative numbers (train, valid, test)")
        if kind == "random" and sum(vals) > 1.0 + 1e-9:
            raise DatasetError(f"split fractions {text!r} sum to {sum(vals):g} > 1")
        if kind == "per-class":
            if any(v != int(v) or v > 2**62 for v in vals):
                raise DatasetError(f"per-class split {text!r} needs three whole counts")
            vals = tuple(int(v) for v in vals)
        return cls(kind, vals, seed)

    def apply(self, labels: np.ndarray, num_classes: int) -> dict:
        rng = np.random.default_rng(self.seed)
        labelled = np.flatnonzero(labels >= 0)
        perm = labelled[rng.permutation(labelled.shape[0])]
        if self.kind == "random":
            n = perm.shape[0]
            a = int(n * self.sizes[0])
            b = a + int(n * self.sizes[1])
            c = b + int(n * self.sizes[2])
            parts = perm[:a], perm[a:b], perm[b:c]
        else:
            per, n_va, n_te = self.sizes
            train = []
            for k in range(num_classes):
                cls_ids = perm[labels[perm] == k]
                if cls_ids.shape[0] < per:
                    raise DatasetError(f"class {k} has {cls_ids.shape[0]} labelled nodes, fewer than {per} per class")
                train.append(cls_ids[:per])
            train = np.concatenate(train) if train else np.zeros(0, np.int64)
            rest = perm[~np.isin(perm, train)]
            if rest.shape[0] < n_va + n_te:
                raise DatasetError(f"only {rest.shape[0]} labelled nodes left for valid {n_va} + test {n_te}")
            parts = train, rest[:n_va], rest[n_va : n_va + n_te]
        return {k: np.sort(v).astype(np.int64) for k, v in zip(SPLIT_NAMES, parts)}


def check_trainable(split_sets: Mapping[str, list], labels: np.ndarray, splits, what: str) -> None:
    """Refuse a node-classification dataset with nothing to train on: no labelled node
    (``labels`` int64, -1 = unlabelled), or an empty ``train`` split in any split set; and one
    with nothing to evaluate on: a ``valid`` or ``test`` split that is given but empty (a
    fraction of too few nodes, a file without ids), which trains to ``nan`` metrics.
    ``split_sets``: split name -> list of id arrays; ``splits``: what the caller was given (a
    :class:`SplitRule` or files), for the message; ``what``: where the labels came from."""
    if not (labels >= 0).any():
        raise DatasetError(f"{what}: no node has a label ({labels.shape[0]} nodes, every label "
                           f"missing); nothing to train on")
    for name in SPLIT_NAMES:
        why = "nothing to train on" if name == "train" else "nothing to evaluate on"
        for i, ids in enumerate(split_sets.get(name, ())):
            if ids.shape[0]:
                continue
            n = int((labels >= 0).sum())
            at = f" (split set {i})" if len(split_sets[name]) > 1 else ""
            if isinstance(splits, SplitRule):
                rule = ",".join(f"{v:g}" for v in splits.sizes)
                raise DatasetError(f"--split {splits.kind + ':' if splits.kind != 'random' else ''}"
                                   f"{rule} leaves the {name} split empty ({n} labelled nodes); "
                                   f"{why}")
            given = splits.get(name) if isinstance(splits, Mapping) else None
            given = given if isinstance(given, (list, tuple)) else [given]
            src = ", ".join(str(g) for g in given if isinstance(g, (str, os.PathLike))) or \
                f"from {what}"
            raise DatasetError(f"split {name!r}{at} ({src}) holds no node ids; {why}")


@dataclass(frozen=True)
class Labels:
    """Node labels as int64 (``-1`` = unlabelled) and, for string labels, the class names
    (``class_names[i]`` is the text of class ``i``; sorted)."""

    values: np.ndarray
    class_names: Optional[tuple] = None


@dataclass
class PrepareReport:
    path: Path
    num_nodes: int
    num_edges: int
    input_edges: int
    num_classes: int
    split_sizes: dict
    seconds: float
    peak_rss_bytes: int
    dataset_bytes: int
    windows: int = 1
    num_split_sets: int = 1
    notes: list = field(default_factory=list)
    #: ``--undirected``: reverse edges not added because the input held them already
    reverses_present: int = 0
    #: bytes of edges held in memory at once when less memory was available than
    #: ``memory_budget`` asked for, else 0
    budget_capped: int = 0

    def _reverses_note(self) -> str:
        if self.reverses_present >= self.input_edges:
            return (f"the input already holds both directions of its edges; the {self.reverses_present} "
                    f"reverses were not added again (each directed edge is stored once)")
        return (f"{self.reverses_present} input edges already had their reverse in the input; "
                f"those reverses were not added again (each directed edge is stored once)")

    def summary(self) -> str:
        ratio = self.peak_rss_bytes / max(1, self.dataset_bytes)
        splits = ", ".join(f"{k} {v}" for k, v in self.split_sizes.items())
        source = f" (from {self.input_edges} input edges)" if self.input_edges else " (generated)"
        classes = f"{self.num_classes} classes, " if self.num_classes else ""
        return (
            f"prepared {self.path}: {self.num_nodes} nodes, {self.num_edges} edges{source}, "
            f"{classes}splits: {splits}\n"
            f"time {self.seconds:.1f} s, dataset {format_bytes(self.dataset_bytes)}, peak RSS "
            f"{format_bytes(self.peak_rss_bytes)} ({ratio:.2f}x the dataset)"
            + (f", {self.windows} windows" if self.windows > 1 else "")
            + (f" (--memory-budget capped at {format_bytes(self.budget_capped)}, half the memory "
               f"available)" if self.budget_capped else "")
            + (f"\n{self.num_split_sets} split sets (choose one with Dataset.open(path, split=i))"
               if self.num_split_sets > 1 else "")
            + (f"\n--undirected: {self._reverses_note()}" if self.reverses_present else "")
            + "".join(f"\n{n}" for n in self.notes)
        )


ArraySource = Union[np.ndarray, str, os.PathLike]
LABEL_NAMES = ("target", "label", "labels", "class", "y", "category")
ID_NAMES = ("id", "node", "node_id", "nodeid", "node_idx", "index", "idx")
_MISSING = ("", "nan", "NaN", "NAN")


def _source_name(source, what: str) -> str:
    return str(source) if isinstance(source, (str, os.PathLike)) else what


def load_split_sets(source: ArraySource, what: str, num_nodes: Optional[int] = None) -> list:
    """Node-id sets of one split (``what``), one per split index.

    From an array or a file (``.npy``, ``.npz`` with one array or ``FILE.npz:KEY``, or text with
    one id per line): 1-D integer ids (one set); a 1-D boolean mask of one entry per node (one
    set); a 2-D boolean mask ``(num_nodes, k)`` (PyG's layout) or ``(k, num_nodes)``: ``k`` sets,
    one per column (row); a 2-D integer array ``(k, m)``: ``k`` sets of ``m`` ids.
    """
    from .._readers import as_int64_ids, load_array_file, read_int_table

    name = _source_name(source, what)
    if isinstance(source, (str, os.PathLike)):
        a = load_array_file(source, what=what)
        if a is None:
            a = read_int_table(source, 1)[:, 0]
    else:
        a = np.asarray(source)
    if a.ndim == 2 and a.shape[1] == 1 and a.dtype.kind != "b":
        a = a[:, 0]
    if a.dtype.kind == "b":
        if num_nodes is None:
            raise DatasetError(f"{name}: a boolean {what} mask needs the node count (features, labels or --num-nodes)")
        if a.ndim == 1:
            a = a[None, :] if a.shape[0] == num_nodes else a
        elif a.ndim == 2 and a.shape[0] == num_nodes:
            a = a.T
        if a.ndim != 2 or a.shape[1] != num_nodes:
            raise DatasetError(f"{name}: a boolean {what} mask must have one entry per node ({num_nodes}) "
                               f"(shape (N,) or (N, k) for k splits), got shape {a.shape}")
        return [np.flatnonzero(row).astype(np.int64) for row in a]
    if a.dtype.kind not in "iu" or a.ndim not in (1, 2):
        raise DatasetError(f"{name}: {what} must be integer node ids or a boolean mask, got {a.dtype} {a.shape}")
    rows = a[None, :] if a.ndim == 1 else a
    return [as_int64_ids(np.ascontiguousarray(r), name) for r in rows]


def load_ids(source: ArraySource, what: str) -> np.ndarray:
    """Node ids (one set) from an array, ``.npy``/``.npz`` or a text file with one id per line."""
    sets = load_split_sets(source, what)
    if len(sets) != 1:
        raise DatasetError(f"{_source_name(source, what)}: {what}: expected one set of ids, found {len(sets)}")
    return sets[0]


def read_labels(source: ArraySource, num_nodes: Optional[int] = None, *, label_col=None, id_col=None,
                count_from: str = "") -> Labels:
    """Labels of every node.

    ``source``: an array or a ``.npy``/``.npz`` file (integers; floats where NaN means
    unlabelled; strings, which become classes; shape ``(N,)`` or ``(N, 1)``), or a text table:
    one label per line in node order, or a node id column and a label column. A header line
    names the columns: the label column is the one named ``target``/``label``/``labels``/
    ``class``/``y``/``category`` (or ``label_col``, a name or a 0-based index), the id column the
    one named ``id``/``node``/``node_id``/... (or ``id_col``); without names, two columns are
    ``id,label``. A table whose label column is ambiguous is an error listing the columns.
    Labels that are not numbers (``"Neural_Networks"``) map to classes ``0..C-1`` in sorted
    order and ``class_names`` keeps the text. Empty fields and ``nan`` mean unlabelled (-1).
    A node listed twice, an id outside ``[0, num_nodes)`` or a label below -1 is an error.
    ``count_from`` names where ``num_nodes`` came from, for messages.
    """
    from .._readers import load_array_file

    name = _source_name(source, "labels")
    ids = lines = None
    if isinstance(source, (str, os.PathLike)):
        a = load_array_file(source, what="labels")
        if a is None:
            ids, a, lines = _read_label_text(Path(source), label_col, id_col)
    else:
        a = np.asarray(source)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise DatasetError(f"{name}: labels must be 1-D (one per node), got shape {a.shape}")
    values, class_names = _label_values(a, name, lines)
    if ids is None:
        if num_nodes is not None and values.shape[0] != num_nodes:
            raise DatasetError(f"{name} has {values.shape[0]} labels but {count_from or 'num_nodes'} says "
                               f"{num_nodes} nodes; they must agree (one label per node; pass --num-nodes "
                               f"if one of them is right)")
        return Labels(values, class_names)
    return Labels(_scatter_by_id(ids, values, lines, num_nodes, name, count_from), class_names)


def load_labels(source: ArraySource, num_nodes: Optional[int] = None) -> np.ndarray:
    """Labels as int64 with -1 for "no label" (see :func:`read_labels`; string labels map to
    their sorted class index)."""
    return read_labels(source, num_nodes).values


def _label_values(a: np.ndarray, name: str, lines: Optional[np.ndarray] = None):
    """``(int64 labels, class names or None)`` of 1-D labels ``a``; ``lines``: the text line of
    each label (for messages), when they come from a table."""
    if a.dtype.kind in "US":
        text = a.astype(str)
        missing = np.isin(text, _MISSING)
        try:
            a = np.where(missing, "nan", text).astype(np.float64)
        except ValueError:  # not numbers: classes by name
            names, inv = np.unique(text[~missing], return_inverse=True)
            numeric = np.array([_is_int(t) for t in names], dtype=bool)
            if numeric.any() and not numeric.all():
                _refuse_mixed_labels(text, missing, names, numeric, numeric[inv].mean() >= 0.5,
                                     name, lines)
            rank = _class_order(names, numeric)
            out = np.full(text.shape[0], -1, dtype=np.int64)
            out[~missing] = rank[inv]
            return out, tuple(str(x) for x in names[np.argsort(rank)])
    if a.dtype.kind == "f":
        bad = ~np.isnan(a) & ((a != np.floor(a)) | (np.abs(a) > 2.0**62))
        if bad.any():
            raise DatasetError(f"{name}: label {a[np.flatnonzero(bad)[0]]} is not an integer")
        a = np.where(np.isnan(a), -1, a).astype(np.int64)
    elif a.dtype.kind in "iu":
        from .._readers import as_int64_ids

        a = as_int64_ids(a, f"{name}: labels")
    else:
        raise DatasetError(f"{name}: labels must be integers or text, got dtype {a.dtype}")
    if a.size and a.min() < -1:
        raise DatasetError(f"{name}: label {int(a.min())} is negative (use -1 for unlabelled nodes)")
    return a, None


def _class_order(names: np.ndarray, numeric: np.ndarray) -> np.ndarray:
    """The class index of each of the sorted unique ``names``: text order, except that names
    that are all integers are ordered by value ('2' before '10'), so a class keeps its number."""
    if names.size and numeric.all():
        order = np.argsort(np.array([int(t) for t in names], dtype=object), kind="stable")
    else:
        order = np.arange(names.size)
    rank = np.empty(names.size, dtype=np.int64)
    rank[order] = np.arange(names.size, dtype=np.int64)
    return rank


def _refuse_mixed_labels(text, missing, names, numeric, mostly_int: bool, name: str, lines) -> None:
    """Labels that mix integers and text: an error naming the first token of the minority kind
    and its line (or position), never a class of its own (one stray ``x`` among integer labels
    would otherwise make every label a string class)."""
    bad_names = names[~numeric] if mostly_int else names[numeric]
    good = (names[numeric] if mostly_int else names[~numeric])[0]
    i = int(np.flatnonzero(np.isin(text, bad_names) & ~missing)[0])
    at = f"line {int(lines[i])}" if lines is not None else f"node {i}"
    what = ("is not an integer, but the other labels are" if mostly_int
            else "is an integer, but the other labels are class names")
    raise DatasetError(f"{name}: {at}: label {str(text[i])!r} {what} (e.g. {str(good)!r}); fix it, or "
                       f"leave the field empty for an unlabelled node")


def _scatter_by_id(ids, values, lines, num_nodes, name: str, count_from: str) -> np.ndarray:
    from ..build import check_allocation

    if ids.size:
        order = np.argsort(ids, kind="stable")
        same = np.flatnonzero(ids[order][1:] == ids[order][:-1])
        if same.size:
            i, j = order[same[0]], order[same[0] + 1]
            raise DatasetError(f"{name}: node {int(ids[i])} is listed twice (lines {int(lines[i])} and "
                               f"{int(lines[j])}); give each node one label")
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0:
            raise DatasetError(f"{name}: line {int(lines[int(np.argmin(ids))])}: negative node id {lo}")
    n = int(num_nodes) if num_nodes is not None else (int(ids.max()) + 1 if ids.size else 0)
    if ids.size and hi >= n:
        raise DatasetError(f"{name}: line {int(lines[int(np.argmax(ids))])}: node id {hi} is out of range "
                           f"[0, {n})" + (f" ({count_from})" if count_from else ""))
    check_allocation(n * 8, f"{name}: labels of {n} nodes", "is the id column right? pass --num-nodes")
    out = np.full(n, -1, dtype=np.int64)
    out[ids] = values
    return out


def _read_label_text(path: Path, label_col, id_col, strings: bool = False):
    """``(ids or None, labels, line numbers)`` of a label table. Labels are float64 (NaN for a
    missing one) block by block while they are numbers; the first block that is not makes the
    whole table re-read as strings (classes by name)."""
    import csv

    from .._readers import TextBlocks, data_lines, looks_like_header

    ids_parts, lab_parts, line_parts = [], [], []
    lab_i = id_i = None
    need = 0
    for lines, delim in data_lines(TextBlocks(path, skip_header=False)):
        split = (lambda ts: list(csv.reader(ts, delimiter=delim))) if delim else \
            (lambda ts: [t.split() for t in ts])
        rows = split([t for _, t in lines])
        if lab_i is None:
            first = [f.strip() for f in rows[0]]
            named = any(isinstance(c, str) and not c.lstrip("-").isdigit() for c in (label_col, id_col))
            header = named or (looks_like_header(",".join(first)) if len(first) > 1
                               else first[0].lower() in LABEL_NAMES)
            lab_i, id_i = _label_columns(path, first, header, label_col, id_col)
            need = max(lab_i, -1 if id_i is None else id_i) + 1
            if header:
                rows, lines = rows[1:], lines[1:]
        for (no, text), r in zip(lines, rows):
            if len(r) < need:
                raise DatasetError(f"{path}: line {no}: {len(r)} column(s), expected at least {need}: {text[:80]!r}")
        labs = np.array([r[lab_i].strip() for r in rows], dtype=str)
        if not strings:
            try:  # keep 8 bytes per label, not the text
                labs = np.where(np.isin(labs, _MISSING), "nan", labs).astype(np.float64)
            except ValueError:
                return _read_label_text(path, label_col, id_col, strings=True)
        lab_parts.append(labs)
        line_parts.append(np.fromiter((no for no, _ in lines), dtype=np.int64, count=len(lines)))
        if id_i is not None:
            col = [r[id_i].strip() for r in rows]
            try:
                ids_parts.append(np.array(col, dtype=str).astype(np.int64))
            except (ValueError, OverflowError):
                k = next(i for i, t in enumerate(col) if not _is_int(t))
                raise DatasetError(f"{path}: line {lines[k][0]}: node id {col[k]!r} is not an integer "
                                   f"(column {id_i})") from None
    if lab_i is None:
        raise DatasetError(f"{path}: no labels found")
    cat = lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dt)  # noqa: E731
    ids = cat(ids_parts, np.int64) if id_i is not None else None
    return ids, cat(lab_parts, str if strings else np.float64), cat(line_parts, np.int64)


def _is_int(t: str) -> bool:
    try:
        int(t)
        return abs(int(t)) < 2**63
    except ValueError:
        return False


def _label_columns(path: Path, first: list, header: bool, label_col, id_col):
    """(label column, id column or None) of a label table whose first line is ``first``."""
    ncols = len(first)
    names = [f.lower() for f in first] if header else None

    def pick(col, what):
        if isinstance(col, str) and not col.lstrip("-").isdigit():
            if names is None or col.lower() not in names:
                raise DatasetError(f"{path}: no column named {col!r} for the {what}; columns: {first}")
            return names.index(col.lower())
        c = int(col)
        if not 0 <= c < ncols:
            raise DatasetError(f"{path}: {what} column {c} is out of range; the table has {ncols} column(s)"
                               + (f": {first}" if header else ""))
        return c

    if label_col is not None:
        lab = pick(label_col, "label")
    elif names is not None and any(n in LABEL_NAMES for n in names):
        lab = next(i for i, n in enumerate(names) if n in LABEL_NAMES)
    elif ncols <= 2:
        lab = ncols - 1
    else:
        raise DatasetError(
            f"{path}: {ncols} columns {first if header else ''} and none is named "
            f"{'/'.join(LABEL_NAMES[:4])}; say which holds the label with --label-col (name or 0-based index)"
        )
    if id_col is not None:
        idc = pick(id_col, "node id")
    elif names is not None and any(n in ID_NAMES for i, n in enumerate(names) if i != lab):
        idc = next(i for i, n in enumerate(names) if n in ID_NAMES and i != lab)
    elif ncols == 2:
        idc = 1 - lab
    else:
        idc = None
    if idc == lab:
        raise DatasetError(f"{path}: the label and the node id cannot both be column {lab}")
    return lab, idc


def check_num_classes(num_classes, num_nodes: Optional[int] = None, where: str = "num_classes") -> int:
    """``num_classes`` as an int in ``[1, MAX_NUM_CLASSES]`` and at most the node count."""
    num_classes = check_int(where, num_classes, 1)
    if num_classes > MAX_NUM_CLASSES:
        raise DatasetError(f"{where} = {num_classes} is above the limit of {MAX_NUM_CLASSES:,} classes; "
                           f"is the label column right?")
    if num_nodes is not None and num_classes > max(1, num_nodes):
        raise DatasetError(f"{where} = {num_classes} is more than the {num_nodes} nodes; is the label column right?")
    return int(num_classes)


def prepare(
    out,
    *,
    edges,
    features: Optional[Mapping[str, ArraySource]] = None,
    labels: Optional[ArraySource] = None,
    splits: Union[Mapping[str, object], SplitRule, None] = None,
    num_classes: Optional[int] = None,
    num_nodes: Optional[int] = None,
    undirected: bool = False,
    drop_self_loops: bool = False,
    dedupe: bool = False,
    name: Optional[str] = None,
    overwrite: bool = False,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    feature_dtype=None,
    target: str = "label",
    extra: Optional[dict] = None,
    progress: Optional[Progress] = None,
    label_col=None,
    id_col=None,
) -> PrepareReport:
    """Build dataset folder ``out`` from an edge source, features, labels and splits.

    ``edges``: a :class:`~graphfeed.datasets._readers.EdgeSource` (file or arrays; its value
    columns ``weight`` become ``graph/weights.npy`` (float32) and any other (``timestamp``) an
    edge feature, in ``indices`` order); ``features``: name -> array or file (``.npy``
    copied/streamed, CSV parsed in blocks, sparse JSON / scipy ``.npz`` densified); ``labels``:
    see :func:`read_labels` (stored as int64 ``target``, -1 = unlabelled; string labels keep their
    class names in the metadata); ``splits``: name -> ids, masks or a list of them (see
    :func:`load_split_sets`; several sets make split indices ``0..k-1``), or a
    :class:`SplitRule`. ``num_nodes`` defaults to the feature rows, else the label count, else
    ``max edge id + 1``. Peak memory is O(num_nodes) plus one block plus the indices window
    (``memory_budget``), never the whole edge list. Any error leaves ``out`` untouched.
    """
    try:
        return _prepare(out, edges=edges, features=features, labels=labels, splits=splits,
                        num_classes=num_classes, num_nodes=num_nodes, undirected=undirected,
                        drop_self_loops=drop_self_loops, dedupe=dedupe, name=name, overwrite=overwrite,
                        memory_budget=memory_budget, feature_dtype=feature_dtype, target=target, extra=extra,
                        progress=progress, label_col=label_col, id_col=id_col)
    except FileExistsError:
        raise
    except OSError as e:  # a full or read-only disk, a vanished folder: one clear line
        where = e.filename or out
        raise DatasetError(f"cannot prepare {out}: {where}: {e.strerror or e}") from None


def _prepare(out, *, edges, features, labels, splits, num_classes, num_nodes, undirected, drop_self_loops,
             dedupe, name, overwrite, memory_budget, feature_dtype, target, extra, progress, label_col,
             id_col) -> PrepareReport:
    from ..format import DatasetWriter, _metadata
    from ..schema import (ArraySpec, GraphSpec, TaskSpec, check_json_value, check_name, dtype_name,
                          feature_path)

    t0 = time.perf_counter()
    progress = progress or Progress(False)
    out = Path(out)
    if labels is None:
        raise DatasetError("labels are required for a node classification dataset")
    if extra is not None:
        check_json_value(extra, "extra")
    if num_classes is not None:
        check_num_classes(num_classes, where="num_classes")
    if num_nodes is not None:
        num_nodes = check_int("num_nodes", num_nodes, 0)
    if feature_dtype is not None:
        feature_dtype = as_feature_dtype(feature_dtype)  # a numpy dtype, or "bfloat16"
    check_int("memory budget (bytes)", memory_budget, 1)
    features = dict(features or {})
    if target in features:
        raise DatasetError(f"feature name {target!r} is reserved for the labels")
    for fname in features:  # names become file names: check them before anything is written
        check_name(fname, f"{out}: node feature")
    count_from = "--num-nodes" if num_nodes is not None else ""
    known = num_nodes if num_nodes is not None else _rows_in_header(features, labels)
    if known is not None:  # before anything is written: what no --memory-budget can window
        check_prepare_memory(known, undirected or dedupe, str(out))
    notes = []
    with DatasetWriter(out, overwrite=overwrite) as w:
        specs = {}
        for fname, src in features.items():
            rel = feature_path(fname)
            shape, dt = write_feature(src, w.path_for(rel), dtype=feature_dtype, progress=progress,
                                      num_nodes=num_nodes)
            if (feature_dtype is None and isinstance(dt, np.dtype)
                    and np.issubdtype(dt, np.floating) and compact_binary(w.path_for(rel))):
                notes.append(f"feature {fname!r} holds only 0 and 1: stored as uint8, "
                             f"{dt.itemsize}x smaller, read back as the same 0/1 values "
                             f"(--feature-dtype float32 keeps floats)")
                dt = np.dtype(np.uint8)
            specs[fname] = ArraySpec(rel, dtype_name(dt), tuple(int(x) for x in shape))
            what = _source_name(src, f"feature {fname!r}")
            if num_nodes is None:
                num_nodes, count_from = specs[fname].shape[0], f"{what} has {specs[fname].shape[0]} rows"
            elif specs[fname].shape[0] != num_nodes:
                raise DatasetError(f"{what} has {specs[fname].shape[0]} rows but {count_from or 'num_nodes'} "
                                   f"says {num_nodes} nodes; every feature needs one row per node")
        lab = read_labels(labels, num_nodes, label_col=label_col, id_col=id_col, count_from=count_from)
        y = lab.values
        num_nodes = int(y.shape[0])
        top = int(y.max()) + 1 if y.size and y.max() >= 0 else 1
        lname = _source_name(labels, "labels")
        if lab.class_names is not None:
            if num_classes is not None and num_classes != len(lab.class_names):
                raise DatasetError(f"{lname}: {len(lab.class_names)} class names {_preview(lab.class_names)}, "
                                   f"but num_classes = {num_classes}")
            num_classes = len(lab.class_names)
        if num_classes is None:
            check_num_classes(top, num_nodes, f"{lname}: the largest label + 1 (number of classes)")
            num_classes = top
        else:
            check_num_classes(num_classes, num_nodes)
            if top > num_classes:
                raise DatasetError(f"{lname}: labels go up to {top - 1}, but num_classes = {num_classes}")
        if isinstance(splits, SplitRule):
            split_sets = {k: [v] for k, v in splits.apply(y, int(num_classes)).items()}
        else:
            split_sets = {}
            for k, v in (splits or {}).items():
                check_name(k, f"{out}: split")
                srcs = v if isinstance(v, (list, tuple)) else [v]
                split_sets[k] = [ids for src in srcs for ids in load_split_sets(src, f"split {k!r}", num_nodes)]
        check_trainable(split_sets, y, splits, lname)
        rel = feature_path(target)
        w.save_array(rel, y)
        specs[target] = ArraySpec(rel, "int64", (num_nodes,))

        value_rels = {n: "graph/weights.npy" if n == "weight" else feature_path(n, "edge")
                      for n in edges.value_names}
        value_paths = {n: w.path_for(rel) for n, rel in value_rels.items()}
        for n in value_paths:
            check_name(n, f"{out}: edge value")
        res = build_csc_streaming(
            edges, w.root / "graph", num_nodes=num_nodes, undirected=undirected,
            drop_self_loops=drop_self_loops, dedupe=dedupe, memory_budget=memory_budget, progress=progress,
            value_paths=value_paths,
        )
        efeats = {n: ArraySpec(value_rels[n], dtype_name(dt), (res.num_edges,))
                  for n, (_, dt) in res.values.items() if n != "weight"}
        num_sets = max((len(v) for v in split_sets.values()), default=1)
        split_specs = {}
        for sname, sets in split_sets.items():
            if len(sets) not in (1, num_sets):
                raise DatasetError(f"split {sname!r} has {len(sets)} sets, the others {num_sets}; "
                                   f"give every split {num_sets} sets (or one shared by all)")
            split_specs[sname] = w.save_split(sname, sets)
        meta = _metadata(
            name or out.name, num_nodes,
            GraphSpec(res.num_edges, "graph/indptr.npy", "graph/indices.npy",
                      "graph/weights.npy" if "weight" in res.values else None, bool(undirected)),
            specs, split_specs,
            TaskSpec("node_classification", target, int(num_classes), lab.class_names),
            efeats, dict(extra or {}),
        )
        progress.note("validating ...")
        w.finish(meta)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return PrepareReport(
        path=out, num_nodes=num_nodes, num_edges=res.num_edges, input_edges=res.input_edges,
        num_classes=int(num_classes),
        split_sizes={k: int(v[0].shape[0]) for k, v in split_sets.items()},
        seconds=time.perf_counter() - t0, peak_rss_bytes=peak_rss_bytes(), dataset_bytes=size,
        windows=res.windows, num_split_sets=num_sets, reverses_present=res.reverses_present,
        budget_capped=res.budget_capped, notes=notes,
    )


def _rows_in_header(features: Mapping, labels) -> Optional[int]:
    """The node count an ``.npy`` feature's or labels' header gives (read without the data),
    or ``None`` when no input is such a file."""
    from .._readers import NpyRows

    for src in [*features.values(), labels]:
        if isinstance(src, (str, os.PathLike)) and str(src).endswith(".npy") and \
                os.path.isfile(src):
            try:
                shape = NpyRows(src).shape
            except DatasetError:
                continue  # its own read reports what is wrong with it
            if shape:
                return int(shape[0])
    return None


def _preview(names, k: int = 5) -> str:
    return str(list(names[:k]))[:-1] + (", ...]" if len(names) > k else "]")
