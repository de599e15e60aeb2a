"""Importers: turn raw graph data into a prepared dataset folder.

:func:`prepare` is the one driver every importer ends in: it streams node features into the
dataset, builds the CSC graph in two bounded-memory passes, writes labels and splits, validates
the folder and publishes it atomically. The format-specific importers only locate and decode
their inputs:

- ``generic``: :func:`graphfeed.datasets.importers.generic.prepare_generic`
- ``ogb``: the OGB node-property raw layout (:mod:`.ogb`)
- ``cora-text``, ``planetoid-npz``, ``csr-npz``: the files in ``shared/datasets`` (:mod:`.shared`)
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from ...errors import DatasetError
from ..._memory import peak_rss_bytes
from ..build import DEFAULT_MEMORY_BUDGET, Progress, build_csc_streaming, format_bytes, write_feature

__all__ = ["IMPORTERS", "PrepareReport", "SplitRule", "prepare", "load_labels", "load_ids"]

#: importer name -> module (each has ``add_arguments(parser)`` and ``run(args, progress)``)
IMPORTERS = {
    "generic": "graphfeed.datasets.importers.generic",
    "ogb": "graphfeed.datasets.importers.ogb",
    "cora-text": "graphfeed.datasets.importers.shared",
    "planetoid-npz": "graphfeed.datasets.importers.shared",
    "csr-npz": "graphfeed.datasets.importers.shared",
}


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

    @classmethod
    def parse(cls, text: str, seed: int = 0) -> "SplitRule":
        """``"0.8,0.1,0.1"`` or ``"per-class:20,500,1000"``."""
        t = text.strip()
        kind = "random"
        if t.startswith("per-class:"):
            kind, t = "per-class", t[len("per-class:"):]
        try:
            vals = tuple(float(x) for x in t.split(","))
        except ValueError:
            raise DatasetError(f"cannot parse split {text!r}; use e.g. 0.8,0.1,0.1 or per-class:20,500,1000") from None
        if len(vals) != 3 or any(v < 0 for v in vals):
            raise DatasetError(f"split {text!r} needs three non-negative numbers (train, valid, test)")
        if kind == "random" and sum(vals) > 1.0 + 1e-9:
            raise DatasetError(f"split fractions {text!r} sum to {sum(vals):g} > 1")
        if kind == "per-class":
            vals = tuple(int(v) for v in vals)
        return cls(kind, vals, int(seed))

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
        return {k: np.sort(v).astype(np.int64) for k, v in zip(("train", "valid", "test"), parts)}


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
    notes: list = field(default_factory=list)

    def summary(self) -> str:
        ratio = self.peak_rss_bytes / max(1, self.dataset_bytes)
        splits = ", ".join(f"{k} {v}" for k, v in self.split_sizes.items())
        return (
            f"prepared {self.path}: {self.num_nodes} nodes, {self.num_edges} edges "
            f"(from {self.input_edges} input edges), {self.num_classes} classes, splits: {splits}\n"
            f"time {self.seconds:.1f} s, dataset {format_bytes(self.dataset_bytes)}, peak RSS "
            f"{format_bytes(self.peak_rss_bytes)} ({ratio:.2f}x the dataset)"
            + (f", {self.windows} windows" if self.windows > 1 else "")
        )


ArraySource = Union[np.ndarray, str, os.PathLike]


def load_ids(source: ArraySource, what: str) -> np.ndarray:
    """Node ids from an array, ``.npy``/``.npz`` or a text file with one id per line."""
    from .._readers import load_array_file, read_int_table

    if not isinstance(source, (str, os.PathLike)):
        a = np.asarray(source)
    else:
        a = load_array_file(source, what=what)
        if a is None:
            a = read_int_table(source, 1)[:, 0]
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise DatasetError(f"{source if isinstance(source, (str, os.PathLike)) else what}: "
                           f"{what} must be 1-D integer ids, got {a.dtype} {a.shape}")
    return a.astype(np.int64, copy=False)


def load_labels(source: ArraySource, num_nodes: Optional[int] = None) -> np.ndarray:
    """Labels as int64 with -1 for "no label".

    From an array, ``.npy``/``.npz`` (integers, or floats where NaN means no label; shape
    ``(N,)`` or ``(N, 1)``) or text: one label per line in node order (``nan`` or empty allowed),
    or two columns ``node_id,label`` (nodes not listed get -1).
    """
    from .._readers import load_array_file, read_float_blocks

    name = str(source) if isinstance(source, (str, os.PathLike)) else "labels"
    if isinstance(source, (str, os.PathLike)):
        a = load_array_file(source, what="labels")
        if a is None:
            parts = [b for b, _ in read_float_blocks(source, dtype=np.float64)]
            if not parts:
                raise DatasetError(f"{name}: no labels found")
            a = np.concatenate(parts)
            if a.shape[1] == 2:
                ids, vals = a[:, 0], a[:, 1]
                if np.any(ids != np.floor(ids)) or (ids.size and ids.min() < 0):
                    raise DatasetError(f"{name}: first column must be node ids")
                n = int(num_nodes) if num_nodes is not None else int(ids.max()) + 1
                if ids.size and ids.max() >= n:
                    raise DatasetError(f"{name}: node id {int(ids.max())} is out of range [0, {n})")
                out = np.full(n, np.nan)
                out[ids.astype(np.int64)] = vals
                a = out
            elif a.shape[1] != 1:
                raise DatasetError(f"{name}: expected one label per line or node_id,label; got {a.shape[1]} columns")
            else:
                a = a[:, 0]
    else:
        a = np.asarray(source)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise DatasetError(f"{name}: labels must be 1-D (one per node), got shape {a.shape}")
    if a.dtype.kind == "f":
        bad = ~np.isnan(a) & (a != np.floor(a))
        if bad.any():
            raise DatasetError(f"{name}: label {a[np.flatnonzero(bad)[0]]} is not an integer")
        a = np.where(np.isnan(a), -1, a).astype(np.int64)
    elif a.dtype.kind in "iu":
        a = a.astype(np.int64, copy=False)
    else:
        raise DatasetError(f"{name}: labels must be integers, got dtype {a.dtype}")
    if a.size and a.min() < -1:
        raise DatasetError(f"{name}: label {int(a.min())} is negative (use -1 for unlabelled nodes)")
    return a


def prepare(
    out,
    *,
    edges,
    features: Optional[Mapping[str, ArraySource]] = None,
    labels: Optional[ArraySource] = None,
    splits: Union[Mapping[str, ArraySource], SplitRule, None] = None,
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
) -> PrepareReport:
    """Build dataset folder ``out`` from an edge source, features, labels and splits.

    ``edges``: a :class:`~graphfeed.datasets._readers.EdgeSource` (file or arrays);
    ``features``: name -> array or file (``.npy`` copied/streamed, CSV parsed in blocks);
    ``labels``: see :func:`load_labels` (stored as int64 ``target``, -1 = unlabelled);
    ``splits``: name -> ids (array or file), or a :class:`SplitRule`; ``num_nodes`` defaults to
    the feature rows, else the label count, else ``max edge id + 1``. Peak memory is O(num_nodes)
    plus one block plus the indices window (``memory_budget``), never the whole edge list.
    """
    from ..format import DatasetWriter, _metadata
    from ..schema import ArraySpec, GraphSpec, SplitSpec, TaskSpec, check_json_value, dtype_name

    t0 = time.perf_counter()
    progress = progress or Progress(False)
    out = Path(out)
    if labels is None:
        raise DatasetError("labels are required for a node classification dataset")
    if extra is not None:
        check_json_value(extra, "extra")
    features = dict(features or {})
    if target in features:
        raise DatasetError(f"feature name {target!r} is reserved for the labels")
    from ..schema import check_name

    for fname in features:  # names become file names: check them before anything is written
        check_name(fname, f"{out}: node feature")
    with DatasetWriter(out, overwrite=overwrite) as w:
        specs = {}
        for fname, src in features.items():
            rel = f"node_features/{fname}.npy"
            shape, dt = write_feature(src, w.path_for(rel), dtype=feature_dtype, progress=progress)
            specs[fname] = ArraySpec(rel, dtype_name(dt), tuple(int(x) for x in shape))
        y = load_labels(labels, num_nodes)
        if num_nodes is None:
            num_nodes = next(iter(specs.values())).shape[0] if specs else y.shape[0]
        num_nodes = int(num_nodes)
        for fname, spec in specs.items():
            if spec.shape[0] != num_nodes:
                raise DatasetError(
                    f"{features[fname]}: feature {fname!r} has {spec.shape[0]} rows, expected one per node ({num_nodes})"
                )
        if y.shape[0] != num_nodes:
            raise DatasetError(f"{labels if isinstance(labels, (str, os.PathLike)) else 'labels'}: "
                               f"{y.shape[0]} labels, expected one per node ({num_nodes})")
        if num_classes is None:
            num_classes = int(y.max()) + 1 if y.size and y.max() >= 0 else 1
        rel = f"node_features/{target}.npy"
        w.save_array(rel, y)
        specs[target] = ArraySpec(rel, "int64", (num_nodes,))

        res = build_csc_streaming(
            edges, w.root / "graph", num_nodes=num_nodes, undirected=undirected,
            drop_self_loops=drop_self_loops, dedupe=dedupe, memory_budget=memory_budget, progress=progress,
        )
        if isinstance(splits, SplitRule):
            split_arrays = splits.apply(y, int(num_classes))
        else:
            split_arrays = {k: load_ids(v, f"split {k!r}") for k, v in (splits or {}).items()}
        split_specs = {}
        for sname, ids in split_arrays.items():
            srel = f"splits/{sname}.npy"
            w.save_array(srel, ids)
            split_specs[sname] = SplitSpec(srel, int(ids.shape[0]))
        meta = _metadata(
            name or out.name, num_nodes,
            GraphSpec(res.num_edges, "graph/indptr.npy", "graph/indices.npy", None, bool(undirected)),
            specs, split_specs, TaskSpec("node_classification", target, int(num_classes)), {},
            dict(extra or {}),
        )
        progress.note("validating ...")
        w.finish(meta)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return PrepareReport(
        path=out, num_nodes=num_nodes, num_edges=res.num_edges, input_edges=res.input_edges,
        num_classes=int(num_classes), split_sizes={k: int(v.shape[0]) for k, v in split_arrays.items()},
        seconds=time.perf_counter() - t0, peak_rss_bytes=peak_rss_bytes(), dataset_bytes=size,
        windows=res.windows,
    )


def parse_features_arg(values: Sequence[str]) -> dict:
    """``["x.npy"]`` -> ``{"feat": "x.npy"}``; ``["feat=x.npy", "emb=e.csv"]`` -> by name."""
    out = {}
    for v in values or ():
        if "=" in v and not os.path.exists(v):
            k, p = v.split("=", 1)
        else:
            k, p = ("feat" if "feat" not in out else f"feat{len(out)}"), v
        out[k] = p
    return out
