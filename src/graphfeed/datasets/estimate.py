"""A dataset's sizes as stored (:func:`data_sizes`: from the ``.npy`` headers, never reading the
arrays), and how its labels are spread over the classes (:func:`class_balance`). The memory each
placement mode needs is ``graphfeed.placement.estimate_memory``, derived from these sizes and
the modes table."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np

from .._checks import check_int
from ..errors import GraphfeedError
from .format import Dataset
from .validate import LoadedArrays, load_folder


@dataclass(frozen=True)
class DataSizes:
    """A dataset's sizes in bytes, as stored (the placements' memory per mode:
    ``graphfeed.placement.estimate_memory``).

    ``graph_bytes``: indptr + indices (+ weights, + a typed graph's relation ids);
    ``feature_bytes``: every node feature, labels included (a typed graph's per-type features
    named ``type/name``); ``feature_sizes``: name -> ``{"dtype", "shape", "bytes"}``.
    """

    name: str
    num_nodes: int
    num_edges: int
    graph_bytes: int
    feature_bytes: int
    feature_sizes: dict

    @property
    def data_bytes(self) -> int:
        return self.graph_bytes + self.feature_bytes


def data_sizes(dataset_or_path: Union[Dataset, LoadedArrays, str, os.PathLike]) -> DataSizes:
    """The :class:`DataSizes` of a dataset. ``dataset_or_path``: an opened
    :class:`~graphfeed.datasets.format.Dataset`, the arrays of a folder already opened with
    :func:`~graphfeed.datasets.validate.load_folder` (nothing is re-read), or a dataset folder
    (only its metadata and ``.npy`` headers are read)."""
    if isinstance(dataset_or_path, Dataset):
        arrays = dataset_or_path.arrays
    elif isinstance(dataset_or_path, LoadedArrays):
        arrays = dataset_or_path
    else:
        arrays = load_folder(Path(dataset_or_path), mmap=True, full=False)
    meta = arrays.metadata
    g = int(arrays.indptr.nbytes + arrays.indices.nbytes
            + (arrays.weights.nbytes if arrays.weights is not None else 0))
    # the metadata's dtype: a bfloat16 feature's file holds uint16 bits (2 bytes a value too)
    feats = {k: (a, meta.node_features[k].dtype) for k, a in arrays.node_features.items()}
    if arrays.hetero is not None:  # the relation ids, and the per-type features as "type/name"
        g += int(arrays.hetero["edge_type"].nbytes)
        feats.update({f"{t}/{k}": (a, meta.hetero.node_features[t][k].dtype)
                      for t, fs in arrays.hetero["node_features"].items() for k, a in fs.items()})
    sizes = {k: {"dtype": dt, "shape": list(a.shape), "bytes": int(a.nbytes)}
             for k, (a, dt) in feats.items()}
    return DataSizes(name=meta.name, num_nodes=meta.num_nodes, num_edges=meta.graph.num_edges,
                     graph_bytes=g, feature_bytes=sum(v["bytes"] for v in sizes.values()),
                     feature_sizes=sizes)


#: majority-class share above which ``inspect`` warns that plain accuracy misleads
IMBALANCE_WARN_SHARE = 0.7
_BALANCE_BLOCK = 1 << 22  # labels read per step: bounds the temporaries on a memory map


@dataclass(frozen=True)
class ClassBalance:
    """How many nodes of a population (a split, or every node) hold each class.

    ``counts[c]``: nodes with label ``c``; ``unlabelled``: nodes with a negative label (-1);
    ``out_of_range``: labels ``>= num_classes`` (only in a dataset opened without the content
    checks). ``class_names``: text of each class, or ``None``.
    """

    counts: tuple
    unlabelled: int = 0
    out_of_range: int = 0
    class_names: Optional[tuple] = None

    @property
    def labelled(self) -> int:
        return int(sum(self.counts))

    @property
    def shares(self) -> tuple:
        n = self.labelled
        return tuple(c / n if n else 0.0 for c in self.counts)

    @property
    def majority_class(self) -> int:
        """The most frequent class (the lowest index on a tie); -1 without labelled nodes."""
        return int(np.argmax(self.counts)) if self.labelled else -1

    @property
    def majority_share(self) -> float:
        """The accuracy of always answering the majority class (0.0 without labelled nodes)."""
        return max(self.shares, default=0.0)

    def name(self, c: int) -> str:
        return self.class_names[c] if self.class_names is not None else str(c)

    def imbalanced(self, threshold: float = IMBALANCE_WARN_SHARE) -> bool:
        return self.majority_share > threshold

    def to_json(self) -> dict:
        return {
            "labelled": self.labelled, "unlabelled": self.unlabelled, "out_of_range": self.out_of_range,
            "counts": list(self.counts), "shares": [round(x, 6) for x in self.shares],
            "majority_class": self.majority_class,
            "majority_name": self.name(self.majority_class) if self.labelled else None,
            "majority_share": round(self.majority_share, 6),
        }


def class_balance(labels: np.ndarray, num_classes: int, *, ids: Optional[np.ndarray] = None,
                  class_names: Optional[tuple] = None) -> ClassBalance:
    """Count each class among ``labels`` (1-D integer, one per node; a memory map is read in
    blocks of 4M labels, so temporaries stay bounded) or among ``labels[ids]`` when node ids
    ``ids`` are given. O(N) with ``np.bincount``; negative labels count as unlabelled."""
    labels = np.asanyarray(labels)
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise GraphfeedError(f"labels must be a 1-D integer array, got {labels.dtype} {labels.shape}")
    num_classes = check_int("num_classes", num_classes, 1)
    if class_names is not None and len(class_names) != num_classes:
        raise GraphfeedError(f"{len(class_names)} class names for {num_classes} classes")
    if ids is not None:
        ids = np.asanyarray(ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise GraphfeedError(f"ids must be a 1-D integer array, got {ids.dtype} {ids.shape}")
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= labels.shape[0]):
            raise GraphfeedError(f"node ids must lie in [0, {labels.shape[0]}), got "
                                 f"{int(ids.min())}..{int(ids.max())}")
    n = labels.shape[0] if ids is None else ids.shape[0]
    counts = np.zeros(int(num_classes), dtype=np.int64)
    unlabelled = out_of_range = 0
    for s in range(0, n, _BALANCE_BLOCK):
        block = np.asarray(labels[s:s + _BALANCE_BLOCK] if ids is None else labels[ids[s:s + _BALANCE_BLOCK]])
        negative = block < 0
        high = block >= num_classes
        unlabelled += int(np.count_nonzero(negative))
        out_of_range += int(np.count_nonzero(high))
        valid = block[~(negative | high)].astype(np.intp, copy=False)  # bincount refuses uint64
        counts += np.bincount(valid, minlength=int(num_classes))
    return ClassBalance(tuple(int(c) for c in counts), unlabelled, out_of_range,
                        tuple(class_names) if class_names is not None else None)
