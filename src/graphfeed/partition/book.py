"""The on-disk layout of a partitioned dataset, and reading it back (one part, or the book).

::

    OUT/
      partition.json            # the book: parts, id ranges, method, features, edge cut, balance
      book/orig_ids.npy         # int64 (num_nodes,): new id -> the dataset's id
      part-00000/
        indptr.npy              # int64 (n_0 + 1,): CSC over the part's own nodes (destinations)
        indices.npy             # int32/int64 (E_0,): GLOBAL new ids of their in-neighbours
        orig_ids.npy            # int64 (n_0,): the dataset ids of the part's nodes
        node_features/<n>.npy   # one row per node of the part (labels included)
        splits/<s>.npy          # int64 GLOBAL new ids, all inside the part's range
      part-00001/ ...

Part ``k`` owns the contiguous new ids ``offsets[k]:offsets[k+1]``; the owner of id ``v`` is
``searchsorted(offsets, v, "right") - 1``. A node's in-edges are stored in the order of the
source dataset, so a sample keyed by global id picks the same edges as on the whole graph.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from .._checks import shown
from .._io import load_npy
from ..datasets.schema import storage_dtype
from ..errors import DatasetError

BOOK_FILE = "partition.json"
BOOK_FORMAT = "graphfeed-partition"
BOOK_VERSION = 1
METHODS = ("metis", "random")


def part_dir(k: int) -> str:
    return f"part-{k:05d}"


@dataclass(frozen=True)
class PartitionBook:
    """What ``partition.json`` says: ``offsets`` (int64, ``num_parts + 1``) and the rest."""

    path: Path
    name: str
    num_parts: int
    num_nodes: int
    num_edges: int
    method: str
    seed: int
    offsets: np.ndarray
    num_classes: int
    target: str
    features: dict  # name -> {"dtype": str, "row_shape": [..]}
    splits: tuple
    edge_cut: int
    stats: dict = field(default_factory=dict)

    def owner(self, ids: np.ndarray) -> np.ndarray:
        """The part owning each new id (int64 array)."""
        return np.searchsorted(self.offsets, ids, side="right") - 1

    def part_range(self, k: int) -> tuple[int, int]:
        return int(self.offsets[k]), int(self.offsets[k + 1])

    def orig_ids(self) -> np.ndarray:
        """new id -> the dataset's id (memory-mapped)."""
        return _load(self.path, "book/orig_ids.npy", (self.num_nodes,), "iu")

    @property
    def edge_cut_fraction(self) -> float:
        return self.edge_cut / self.num_edges if self.num_edges else 0.0

    def to_json(self) -> dict:
        return {
            "format": BOOK_FORMAT, "version": BOOK_VERSION, "name": self.name,
            "num_parts": self.num_parts, "num_nodes": self.num_nodes,
            "num_edges": self.num_edges, "method": self.method, "seed": self.seed,
            "offsets": [int(x) for x in self.offsets], "num_classes": self.num_classes,
            "target": self.target, "features": self.features, "splits": list(self.splits),
            "edge_cut": self.edge_cut, "stats": self.stats,
        }


def read_book(path) -> PartitionBook:
    """Parse ``path/partition.json``; ``DatasetError`` naming the file on anything wrong."""
    path = Path(path)
    f = path / BOOK_FILE
    if not f.is_file():
        raise DatasetError(f"{path}: not a partitioned dataset (no {BOOK_FILE}); make one with "
                           f"'graphfeed partition DATASET OUT --parts P'")
    try:
        data = f.read_bytes()
    except OSError as e:
        raise DatasetError(f"{f}: cannot read the partition book ({e.strerror or e})") from None
    try:
        raw = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise DatasetError(f"{f}: invalid partition book (JSON nested too deeply)") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise DatasetError(f"{f}: invalid partition book (not JSON: {e})") from None
    try:
        book = _book_from_json(path, raw)
    except (ValueError, KeyError, TypeError, OverflowError) as e:
        raise DatasetError(f"{f}: invalid partition book ({e})") from None
    offsets = book.offsets
    if book.num_parts < 1 or offsets.shape != (book.num_parts + 1,) or offsets[0] != 0 \
            or offsets[-1] != book.num_nodes or np.any(np.diff(offsets) < 0):
        raise DatasetError(f"{f}: offsets {shown(offsets.tolist())} are not a monotone cover of "
                           f"[0, {book.num_nodes}) in {book.num_parts} parts")
    if book.method not in METHODS:
        raise DatasetError(f"{f}: unknown method {book.method!r}")
    if book.target not in book.features:
        raise DatasetError(f"{f}: target {book.target!r} is not one of the features")
    return book


_INT64_MAX = 2**63 - 1


def _int_field(raw: dict, key: str, lo: int = 0) -> int:
    v = raw[key] if key in raw else _missing(key)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= _INT64_MAX:
        raise ValueError(f"{key} is {shown(v)}, expected an integer >= {lo}")
    return v


def _str_field(raw: dict, key: str) -> str:
    v = raw[key] if key in raw else _missing(key)
    if not isinstance(v, str):
        raise ValueError(f"{key} is {shown(v)}, expected a string")
    return v


def _name_ok(name) -> bool:
    """A feature or split name that is safe as a file name inside a part folder."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
            and "\\" not in name and "\0" not in name)


def _missing(key: str):
    raise ValueError(f"{key!r} is missing")


def _book_from_json(path: Path, raw) -> "PartitionBook":
    """Check the type and shape of every field of a parsed ``partition.json``; ``ValueError``
    naming the field."""
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object, got {type(raw).__name__} {shown(raw)}")
    if raw.get("format") != BOOK_FORMAT:
        raise ValueError(f"format is {shown(raw.get('format'))}, not {BOOK_FORMAT!r}")
    if raw.get("version") != BOOK_VERSION:
        raise ValueError(f"version {shown(raw.get('version'))}; this graphfeed reads version "
                         f"{BOOK_VERSION}")
    offsets = raw["offsets"] if "offsets" in raw else _missing("offsets")
    if not isinstance(offsets, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= _INT64_MAX
            for x in offsets):
        raise ValueError(f"offsets is {shown(offsets)}, expected a list of integers >= 0")
    features = raw["features"] if "features" in raw else _missing("features")
    if not isinstance(features, dict):
        raise ValueError(f"features is {shown(features)}, expected an object")
    for name, spec in features.items():
        if not _name_ok(name):
            raise ValueError(f"feature name {shown(name)} is not a plain file name")
        if not isinstance(spec, dict) or not isinstance(spec.get("dtype"), str) \
                or not isinstance(spec.get("row_shape"), list):
            raise ValueError(f"feature {name!r} is {shown(spec)}, expected "
                             f"{{\"dtype\": str, \"row_shape\": [int, ...]}}")
        try:  # bfloat16 and other dtypes numpy lacks are stored as bits, as in a dataset
            kind = storage_dtype(spec["dtype"]).kind
        except (TypeError, ValueError, SyntaxError):
            kind = None
        if kind is None or kind not in "biuf":
            raise ValueError(f"feature {name!r} has dtype {shown(spec['dtype'])}, expected a "
                             f"bool, integer or float dtype, or bfloat16")
        if not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= _INT64_MAX
                   for d in spec["row_shape"]):
            raise ValueError(f"feature {name!r} has row_shape {shown(spec['row_shape'])}, "
                             f"expected a list of integers >= 0")
    splits = raw["splits"] if "splits" in raw else _missing("splits")
    if not isinstance(splits, list) or not all(_name_ok(s) for s in splits) \
            or len(set(splits)) != len(splits):
        raise ValueError(f"splits is {shown(splits)}, expected a list of distinct plain names")
    stats = raw.get("stats", {})
    if not isinstance(stats, dict):
        raise ValueError(f"stats is {shown(stats)}, expected an object")
    return PartitionBook(
        path=path, name=_str_field(raw, "name"), num_parts=_int_field(raw, "num_parts", 1),
        num_nodes=_int_field(raw, "num_nodes"), num_edges=_int_field(raw, "num_edges"),
        method=_str_field(raw, "method"), seed=_int_field(raw, "seed"),
        offsets=np.asarray(offsets, dtype=np.int64).reshape(-1),
        num_classes=_int_field(raw, "num_classes"), target=_str_field(raw, "target"),
        features=dict(features), splits=tuple(splits), edge_cut=_int_field(raw, "edge_cut"),
        stats=dict(stats),
    )


def _load(root: Path, rel: str, shape: Optional[tuple], kinds: str, mmap: bool = True):
    p = root / rel
    a = load_npy(p, mmap=mmap)
    if a.dtype.kind not in kinds:
        raise DatasetError(f"{p}: dtype {a.dtype} is not allowed here")
    if shape is not None and a.shape != shape:
        raise DatasetError(f"{p}: shape {a.shape}, expected {shape}")
    return a


@dataclass
class Part:
    """One part, loaded: ``indptr``/``indices`` (CSC of its own nodes, global source ids),
    ``orig_ids``, ``features`` (name -> array with one row per own node), ``splits`` (name ->
    global new ids inside ``[lo, hi)``)."""

    book: PartitionBook
    index: int
    lo: int
    hi: int
    indptr: np.ndarray
    indices: np.ndarray
    orig_ids: np.ndarray
    features: dict
    splits: dict

    @property
    def num_own(self) -> int:
        return self.hi - self.lo


def load_part(book: PartitionBook, k: int, *, mmap: bool = True) -> Part:
    """Open part ``k`` (memory-mapped unless ``mmap=False``) and check it, as a dataset is
    checked when opened: shapes and dtypes, and every value the kernels and the loader index
    with (they do not check): ``indptr`` non-decreasing, in-neighbour ids in
    ``[0, num_nodes)``, ``orig_ids`` in range, split ids inside the part's range, without
    repeats and disjoint, and the labels of split nodes in ``[0, num_classes)``. One pass over
    the part's graph and splits, O(part); ``DatasetError`` naming the file and the value."""
    from ..datasets._kernels import check_labels, mark_split
    from ..graph.csc import content_error

    if not 0 <= k < book.num_parts:
        raise DatasetError(f"{book.path}: part {k} does not exist (num_parts={book.num_parts})")
    lo, hi = book.part_range(k)
    n = hi - lo
    root = book.path / part_dir(k)
    indptr = _load(root, "indptr.npy", (n + 1,), "i", mmap)
    indices = _load(root, "indices.npy", None, "i", mmap)
    if indices.ndim != 1 or int(indptr[-1]) != indices.shape[0] or int(indptr[0]) != 0:
        raise DatasetError(f"{root / 'indptr.npy'}: does not span indices.npy "
                           f"({indices.shape[0]} entries)")
    orig = _load(root, "orig_ids.npy", (n,), "i", mmap)
    feats = {}
    for name, spec in book.features.items():
        a = _load(root, f"node_features/{name}.npy", (n, *spec["row_shape"]), "biuf", mmap)
        if a.dtype != storage_dtype(spec["dtype"]):
            raise DatasetError(f"{root}/node_features/{name}.npy: dtype {a.dtype}, the book "
                               f"says {spec['dtype']} (stored as {storage_dtype(spec['dtype'])})")
        feats[name] = a
    splits = {s: _load(root, f"splits/{s}.npy", None, "i", mmap) for s in book.splits}
    bad = content_error(indptr, indices, book.num_nodes)
    if bad is not None:
        role, name, msg = bad
        raise DatasetError(f"{root / (role + '.npy')}: {name}{msg}")
    if orig.size and (int(orig.min()) < 0 or int(orig.max()) >= book.num_nodes):
        raise DatasetError(f"{root / 'orig_ids.npy'}: ids outside [0, {book.num_nodes})")
    target = feats[book.target]
    if target.ndim != 1 or target.dtype.kind not in "iu":
        raise DatasetError(f"{root}/node_features/{book.target}.npy: the target must be a 1-D "
                           f"integer array, got {target.dtype} {target.shape}")
    marks = np.zeros(n, dtype=np.uint8)
    for t, (s, ids) in enumerate(splits.items(), start=1):
        p = f"{root}/splits/{s}.npy"
        if ids.ndim != 1:
            raise DatasetError(f"{p}: split ids must be 1-D, got shape {ids.shape}")
        local = np.asarray(ids, dtype=np.int64) - lo
        code, pos, other = mark_split(local, marks, t, n)
        if code == 1:
            raise DatasetError(f"{p}: id {int(ids[pos])} (position {pos}) is outside the part's "
                               f"range [{lo}, {hi})")
        if code == 2:
            raise DatasetError(f"{p}: repeats id {int(ids[pos])} (position {pos})")
        if code == 3:
            raise DatasetError(f"{p}: id {int(ids[pos])} is also in split "
                               f"{list(splits)[other - 1]!r}; splits must be disjoint")
        at = check_labels(target, local, book.num_classes)
        if at >= 0:
            raise DatasetError(f"{root}/node_features/{book.target}.npy: label of node "
                               f"{int(ids[at])} (in split {s!r}) is {int(target[local[at]])}, "
                               f"outside [0, num_classes = {book.num_classes})")
    return Part(book, k, lo, hi, indptr, indices, orig, feats, splits)


def check_partition(path) -> PartitionBook:
    """Read every value of a partitioned dataset (what the writer runs before publishing):
    each part fully, the edge total, and that ``orig_ids`` is a permutation matching the parts."""
    book = read_book(path)
    orig = book.orig_ids()
    seen = np.zeros(book.num_nodes, dtype=bool)
    edges = 0
    for k in range(book.num_parts):
        p = load_part(book, k)
        if not np.array_equal(p.orig_ids, orig[p.lo:p.hi]):
            raise DatasetError(f"{book.path / part_dir(k) / 'orig_ids.npy'}: differs from the "
                               f"book's relabelling")
        seen[p.orig_ids] = True
        edges += p.indices.shape[0]
    if not seen.all():
        raise DatasetError(f"{book.path / 'book/orig_ids.npy'}: not a permutation of the "
                           f"dataset's {book.num_nodes} nodes")
    if edges != book.num_edges:
        raise DatasetError(f"{book.path}: the parts hold {edges} edges, the book says "
                           f"{book.num_edges}")
    return book
