"""Validation of a dataset folder: metadata, every array's header, and (``full``) its contents.

Used by ``Dataset.open`` and after every write. Pure numpy + numba (no torch), so ``prepare``
validates without paying torch's import. Every problem is a ``DatasetError`` naming the file and
the offending value; nothing is unpickled (``allow_pickle=False`` throughout).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from .._io import load_npy
from ..errors import DatasetError
from .schema import (
    BITS_DTYPES, TIME_FEATURE, ArraySpec, Metadata, feature_role, read_metadata, resolve_inside,
    split_role, storage_dtype,
)

INT32_MAX = int(np.iinfo(np.int32).max)


@dataclass
class LoadedArrays:
    """The arrays of a dataset folder, opened (memory-mapped unless ``mmap=False``)."""

    metadata: Metadata
    indptr: np.ndarray
    indices: np.ndarray
    weights: Optional[np.ndarray]
    node_features: dict
    edge_features: dict
    splits: dict  # name -> list of id arrays, one per split set (a single one is shared)
    paths: dict  # role -> absolute Path
    hetero: Optional[dict] = None  # graphfeed.datasets.hetero.load_hetero's arrays


def _open(root: Path, rel: str, role: str, mmap: bool, paths: dict) -> np.ndarray:
    from ._readers import check_input_file

    where = f"{root / 'graphfeed.json'}: {role}"
    path = resolve_inside(root, rel, where)
    paths[role] = path
    check_input_file(path, "dataset array")  # a FIFO or a folder is named as such
    arr = load_npy(path, mmap=mmap)
    return arr


def _check_spec(arr: np.ndarray, spec: ArraySpec, path: Path, rows: int, row_word: str) -> None:
    if arr.dtype.hasobject:  # pragma: no cover - load_npy refuses these already
        raise DatasetError(f"{path}: object arrays are not allowed")
    name = "bool" if arr.dtype == np.bool_ else arr.dtype.name
    stored = storage_dtype(spec.dtype)
    if name != ("bool" if stored == np.bool_ else stored.name):
        held = f" (held as {stored.name} bits)" if spec.dtype in BITS_DTYPES else ""
        raise DatasetError(f"{path}: dtype is {arr.dtype}, metadata says {spec.dtype}{held}")
    if tuple(arr.shape) != tuple(spec.shape):
        raise DatasetError(f"{path}: shape is {tuple(arr.shape)}, metadata says {tuple(spec.shape)}")
    if arr.ndim < 1 or arr.shape[0] != rows:
        raise DatasetError(
            f"{path}: has {arr.shape[0] if arr.ndim else 0} rows, expected one per {row_word} ({rows})"
        )
    if arr.dtype.byteorder == ">":
        raise DatasetError(f"{path}: big-endian arrays are not supported (dtype {arr.dtype.str})")


def load_folder(folder, *, mmap: bool = True, full: bool = True) -> LoadedArrays:
    """Open and check every array of dataset ``folder``.

    Always: metadata schema and version, paths inside the folder, ``.npy`` headers (dtype,
    shape, file size: a truncated file is an error), one feature row per node, ``indptr[0] == 0``
    and ``indptr[-1] == num_edges``. With ``full`` also the O(N + E) content checks: ``indptr``
    non-decreasing, every neighbour id and split id in range, splits disjoint without repeats,
    labels of split nodes in ``[0, num_classes)``, edge weights finite and ``>= 0``, times
    (node and edge features named ``timestamp``) finite. ``full`` reads every array once.
    Always: weights and times are 1-D, int64 or float.
    """
    root = Path(folder)
    meta = read_metadata(root)
    paths: dict = {}
    n = meta.num_nodes
    g = meta.graph
    indptr = _open(root, g.indptr, "graph.indptr", mmap, paths)
    indices = _open(root, g.indices, "graph.indices", mmap, paths)
    p_ptr, p_idx = paths["graph.indptr"], paths["graph.indices"]
    if indptr.dtype != np.int64 or indptr.ndim != 1:
        raise DatasetError(f"{p_ptr}: indptr must be a 1-D int64 array, got {indptr.dtype} {indptr.shape}")
    if indptr.shape[0] != n + 1:
        raise DatasetError(f"{p_ptr}: indptr has {indptr.shape[0]} entries, expected num_nodes + 1 = {n + 1}")
    if indices.ndim != 1 or indices.dtype not in (np.int32, np.int64):
        raise DatasetError(f"{p_idx}: indices must be 1-D int32 or int64, got {indices.dtype} {indices.shape}")
    if indices.dtype == np.int32 and n > INT32_MAX + 1:
        raise DatasetError(f"{p_idx}: int32 indices cannot address {n} nodes")
    if indices.shape[0] != g.num_edges:
        raise DatasetError(f"{p_idx}: holds {indices.shape[0]} edges, metadata says num_edges = {g.num_edges}")
    if int(indptr[0]) != 0:
        raise DatasetError(f"{p_ptr}: indptr[0] = {int(indptr[0])}, expected 0")
    if int(indptr[-1]) != g.num_edges:
        raise DatasetError(f"{p_ptr}: indptr[-1] = {int(indptr[-1])}, expected the edge count {g.num_edges}")
    weights = None
    if g.weights is not None:
        weights = _open(root, g.weights, "graph.weights", mmap, paths)
        if weights.shape != indices.shape or not _value_dtype(weights.dtype):
            raise DatasetError(
                f"{paths['graph.weights']}: weights must be int64 or float with one entry per "
                f"edge ({g.num_edges}), got {weights.dtype} {weights.shape}"
            )

    node_features = {}
    for name, spec in meta.node_features.items():
        role = feature_role(name)
        arr = _open(root, spec.path, role, mmap, paths)
        _check_spec(arr, spec, paths[role], n, "node")
        node_features[name] = arr
    edge_features = {}
    for name, spec in meta.edge_features.items():
        role = feature_role(name, "edge")
        arr = _open(root, spec.path, role, mmap, paths)
        _check_spec(arr, spec, paths[role], g.num_edges, "edge")
        edge_features[name] = arr

    link = meta.task.type == "link_prediction"
    target = None if link else node_features[meta.task.target]
    p_tgt = None if link else paths[feature_role(meta.task.target)]
    tgt_dtype = None if link else meta.node_features[meta.task.target].dtype
    if not link and (target.ndim != 1 or target.dtype.kind not in "iu" or tgt_dtype in BITS_DTYPES):
        raise DatasetError(
            f"{p_tgt}: the node classification target must be a 1-D integer array, "
            f"got {tgt_dtype if tgt_dtype in BITS_DTYPES else target.dtype} {target.shape}"
        )

    splits = {}
    for name, spec in meta.splits.items():
        sets = []
        for i, (rel, size) in enumerate(zip(spec.paths, spec.sizes)):
            role = split_role(name, i, spec.num_sets)
            arr = _open(root, rel, role, mmap, paths)
            if spec.kind != "node_ids":  # link prediction's pairs and negatives
                from ._link_checks import check_split_array

                check_split_array(arr, spec.kind, size, paths[role])
            elif arr.ndim != 1 or arr.dtype.kind not in "iu":
                raise DatasetError(f"{paths[role]}: split ids must be a 1-D integer array, got {arr.dtype} {arr.shape}")
            elif arr.shape[0] != size:
                raise DatasetError(f"{paths[role]}: holds {arr.shape[0]} ids, metadata says size = {size}")
            sets.append(arr)
        splits[name] = sets

    values = []  # (array, path, what, non-negative): the arrays samplers weigh or time by
    if weights is not None:
        values.append((weights, paths["graph.weights"], "edge weights", True))
    for kind, feats in (("node", node_features), ("edge", edge_features)):
        if TIME_FEATURE in feats:
            arr = feats[TIME_FEATURE]
            p = paths[feature_role(TIME_FEATURE, kind)]
            if arr.ndim != 1 or not _value_dtype(arr.dtype):
                raise DatasetError(f"{p}: {kind} times must be 1-D int64 or float, got "
                                   f"{arr.dtype} {arr.shape}")
            values.append((arr, p, f"{kind} times", False))
    if full:
        _check_contents(meta, indptr, indices, target, splits, paths)
        for arr, p, what, nonneg in values:
            _check_values(arr, p, what, nonneg)
    hetero = None
    if meta.hetero is not None:
        from .hetero import load_hetero

        hetero = load_hetero(root, meta, lambda rel, role: _open(root, rel, role, mmap, paths),
                             _check_spec, full, {"paths": paths, "indptr": indptr,
                                                 "indices": indices, "splits": splits})
        if full and meta.task.type == "link_prediction":  # typed link splits
            from ._link_checks import check_typed_link_contents

            check_typed_link_contents(meta, indptr, indices, hetero["edge_type"], splits,
                                      {k: paths[split_role(k, 0, 1)] for k in splits})
    return LoadedArrays(meta, indptr, indices, weights, node_features, edge_features, splits, paths,
                        hetero)


def _check_contents(meta, indptr, indices, target, splits, paths) -> None:
    from ..graph.csc import content_error
    from ._kernels import check_labels, mark_split

    n = meta.num_nodes
    bad = content_error(indptr, indices, n)
    if bad is not None:
        role, name, msg = bad
        raise DatasetError(f"{paths['graph.' + role]}: {name}{msg}")
    if meta.task.type == "link_prediction":
        from ._link_checks import check_link_contents

        return check_link_contents(meta, indptr, indices, splits,
                                   {k: paths[split_role(k, 0, 1)] for k in splits})
    if len(splits) > 250:
        raise DatasetError(f"{paths.get('graph.indptr')}: too many splits ({len(splits)})")
    tgt = np.asarray(target)
    names = list(splits)
    marks = np.zeros(n, dtype=np.uint8)
    for index in range(meta.num_split_sets):
        # within one split set the splits are disjoint; different sets may overlap
        if index:
            marks[:] = 0
        for t, name in enumerate(names, start=1):
            sets = splits[name]
            shared = len(sets) == 1  # one set used by every split index
            ids = np.asarray(sets[0 if shared else index]).astype(np.int64, copy=False)
            role = split_role(name, index, len(sets))
            p = paths[role]
            label = repr(name) + ("" if meta.num_split_sets == 1 else f" (split set {index})")
            code, pos, other = mark_split(ids, marks, t, n)
            if code == 1:
                raise DatasetError(f"{p}: split {label} id {int(ids[pos])} (position {pos}) is out of range [0, {n})")
            if code == 2:
                raise DatasetError(f"{p}: split {label} repeats node id {int(ids[pos])} (position {pos})")
            if code == 3:
                raise DatasetError(
                    f"{p}: node id {int(ids[pos])} is in both split {names[other - 1]!r} and split {label}; "
                    f"splits must be disjoint"
                )
            if shared and index:
                continue  # labels of a shared set were checked at index 0
            bad = check_labels(tgt, ids, meta.task.num_classes)
            if bad >= 0:
                v = int(ids[bad])
                raise DatasetError(
                    f"{paths[feature_role(meta.task.target)]}: label of node {v} (in split {label}) is "
                    f"{int(tgt[v])}, outside [0, num_classes = {meta.task.num_classes})"
                )


def _value_dtype(dt: np.dtype) -> bool:
    """Weights and times are stored as int64 or a float."""
    return dt == np.int64 or dt.kind == "f"


def _check_values(arr, path, what: str, nonneg: bool) -> None:
    """Weights and times: finite (floats), weights ``>= 0``; in blocks (memory maps stay
    bounded)."""
    step = 1 << 22
    for lo in range(0, arr.shape[0], step):
        a = np.asarray(arr[lo:lo + step])
        bad = ~np.isfinite(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
        if nonneg:
            bad |= a < 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            need = "finite and >= 0" if nonneg else "finite"
            raise DatasetError(f"{path}: {what} must be {need}; entry {lo + i} is {a[i]!r}")
