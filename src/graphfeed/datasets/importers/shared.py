"""Importers for the small real datasets in ``shared/datasets`` (and files laid out the same way).

- ``cora-text``: a folder with ``*_edges.csv`` (``id_1,id_2``), ``*_features.json``
  (``{"<node id>": [indices of features equal to 1]}``) and ``*_target.csv`` (``id,target``).
  For Cora (2,708 nodes) the default split is the standard Planetoid one (train 0..139,
  valid 140..639, test 1708..2707).
- ``planetoid-npz``: an ``.npz`` with ``x``, ``y``, optional ``has_label``, ``edge_index``
  ``(2, E)`` and ``train_idx`` / ``val_idx`` / ``test_idx`` (e.g. CiteSeer's ``derived/`` file,
  Planetoid order and split).
- ``csr-npz``: the gnn-benchmark ``.npz`` of CSR parts (``adj_data/indices/indptr/shape``,
  ``attr_*``, ``labels``); edges follow the adjacency rows (row -> column). No standard split:
  default ``per-class:20,500,1000`` (seeded).

These inputs are small; they are decoded in memory (features become dense float32) and then
written through the same :func:`~graphfeed.datasets.importers.prepare` driver as the others.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import DatasetError
from .._readers import DEFAULT_BLOCK, EdgeSource, SparseRows, load_npz, read_sparse
from . import PrepareReport, SplitRule, prepare, read_labels

CORA_PLANETOID = {"train": (0, 140), "valid": (140, 640), "test": (1708, 2708)}


def _one(folder: Path, suffix: str) -> Path:
    found = sorted(folder.glob(f"*{suffix}"))
    if len(found) != 1:
        raise DatasetError(f"{folder}: expected exactly one *{suffix} file, found {[p.name for p in found]}")
    return found[0]


def row_normalize(x: np.ndarray) -> np.ndarray:
    """Divide each row by its sum (GCN's preprocessing of bag-of-words features); zero rows stay 0."""
    x = x.astype(np.float32, copy=True)
    s = x.sum(axis=1, keepdims=True)
    np.divide(x, s, out=x, where=s != 0)
    return x


def prepare_cora_text(src, out, *, split=None, num_features=None, normalize_features: bool = False,
                      label_col=None, **kw) -> PrepareReport:
    """A folder with ``*_edges.csv``, ``*_features.json`` and ``*_target.csv``. The label is the
    target file's column named ``target``/``label``/``class`` (or ``label_col``); a table whose
    label column is ambiguous (``id,facebook_id,page_name,page_type``) is an error listing its
    columns, never a silent pick of the second one. String labels become classes."""
    from ..build import check_allocation

    src = Path(src)
    if not src.is_dir():
        raise DatasetError(f"{src}: expected a folder with *_edges.csv, *_features.json, *_target.csv")
    edges_f, feats_f, target_f = _one(src, "_edges.csv"), _one(src, "_features.json"), _one(src, "_target.csv")
    n = read_labels(target_f, label_col=label_col).values.shape[0]
    sp = read_sparse(feats_f, num_nodes=n, num_features=num_features)
    check_allocation(n * sp.shape[1] * 4, f"{feats_f}: dense features {n} x {sp.shape[1]}")
    x = sp.dense_rows(0, n).astype(np.float32)
    if normalize_features:
        x = row_normalize(x)
    if split is None:
        if n != 2708:
            raise DatasetError(f"{src}: no standard split known for {n} nodes; pass --split")
        split = {k: np.arange(a, b, dtype=np.int64) for k, (a, b) in CORA_PLANETOID.items()}
    kw.setdefault("name", src.parent.name if src.name == "text" else src.name)
    block_bytes = kw.pop("block_bytes", DEFAULT_BLOCK)
    return prepare(out, edges=EdgeSource(edges_f, block_bytes=block_bytes), features={"feat": x},
                   labels=target_f, label_col=label_col, splits=split, num_nodes=n, **kw)


def prepare_planetoid_npz(src, out, *, split=None, normalize_features: bool = False, **kw) -> PrepareReport:
    src = Path(src)
    z = load_npz(src)
    need = ("x", "y", "edge_index")
    missing = [k for k in need if k not in z]
    if missing:
        raise DatasetError(f"{src}: missing arrays {missing}; found {sorted(z)}")
    x, y, ei = z["x"], z["y"], z["edge_index"]
    if ei.ndim != 2 or ei.shape[0] != 2 or ei.dtype.kind not in "iu":
        raise DatasetError(f"{src}: edge_index must be integer (2, E), got {ei.dtype} {ei.shape}")
    if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise DatasetError(f"{src}: x {x.shape} and y {y.shape} must have one row per node")
    y = y.astype(np.int64)
    if "has_label" in z:
        y = np.where(z["has_label"].astype(bool), y, -1)
    if split is None:
        split = {}
        for k, names in (("train", ("train_idx", "train_mask")), ("valid", ("val_idx", "val_mask")),
                         ("test", ("test_idx", "test_mask"))):
            found = [z[nm] for nm in names if nm in z]
            if not found:
                raise DatasetError(f"{src}: no {names[0]} or {names[1]} inside; pass --split")
            split[k] = found[0]  # ids, a boolean mask, or an (N, k) mask for k stored splits
    kw.setdefault("name", src.stem.split("_")[0])
    kw.pop("block_bytes", None)
    # prepare converts (checked; bfloat16 too): float32 unless --feature-dtype says otherwise
    kw["feature_dtype"] = kw.get("feature_dtype") or np.float32
    if normalize_features:
        x = row_normalize(x)
    return prepare(out, edges=EdgeSource(arrays=(ei[0], ei[1])), features={"feat": x},
                   labels=y, splits=split, num_nodes=x.shape[0], **kw)


def _csr_dense(z, prefix: str, src: Path, dtype) -> np.ndarray:
    from ..build import check_allocation

    try:
        parts = [z[f"{prefix}_{k}"] for k in ("indptr", "indices", "data", "shape")]
    except KeyError:
        raise DatasetError(f"{src}: missing {prefix}_data/indices/indptr/shape") from None
    sp = SparseRows.checked(*parts, f"{src}: {prefix!r}")
    n, m = sp.shape
    check_allocation(n * m * np.dtype(dtype).itemsize, f"{src}: dense {prefix} {n} x {m}")
    return sp.dense_rows(0, n).astype(dtype)


def prepare_csr_npz(src, out, *, split=None, normalize_features: bool = False, **kw) -> PrepareReport:
    src = Path(src)
    z = load_npz(src)
    for k in ("adj_indices", "adj_indptr", "adj_shape", "labels"):
        if k not in z:
            raise DatasetError(f"{src}: missing {k!r}; found {sorted(z)}")
    n = int(z["adj_shape"][0])
    indptr, indices = z["adj_indptr"].astype(np.int64), z["adj_indices"].astype(np.int64)
    if indptr.shape[0] != n + 1 or int(indptr[-1]) != indices.shape[0]:
        raise DatasetError(f"{src}: inconsistent adjacency CSR parts")
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    kw["feature_dtype"] = kw.get("feature_dtype") or np.float32  # prepare converts (checked)
    feats = {"feat": _csr_dense(z, "attr", src, np.float32)} if "attr_shape" in z else {}
    if normalize_features and feats:
        feats["feat"] = row_normalize(feats["feat"])
    if split is None:
        split = SplitRule("per-class", (20, 500, 1000), 0)
    kw.setdefault("name", src.stem)
    kw.pop("block_bytes", None)
    return prepare(out, edges=EdgeSource(arrays=(rows, indices)), features=feats,
                   labels=z["labels"], splits=split, num_nodes=n, **kw)
