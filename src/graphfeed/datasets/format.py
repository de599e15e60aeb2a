"""The on-disk dataset format: a folder with ``graphfeed.json`` and one ``.npy`` per array.

::

    my-dataset/
      graphfeed.json            # versioned metadata (see graphfeed.datasets.schema)
      graph/indptr.npy          # int64 (num_nodes + 1,)
      graph/indices.npy         # int32 (int64 past 2**31 nodes) (num_edges,)
      node_features/<name>.npy  # any supported dtype, one row per node (labels included)
      splits/<name>.npy         # int64 node ids (train / valid / test)

``Dataset.open`` memory-maps the arrays read-only (nothing is read until used; every process on
a machine shares one copy through the page cache); ``in_memory=True`` loads them instead.
Writers build the folder under a temporary name, validate it, fsync and rename it into place.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import sys
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from .._checks import check_int
from .._io import atomic_dir, publish_lock, save_npy
from .._io import recover_interrupted_swap as _recover_swap
from ..errors import DatasetError, GraphfeedError
from .schema import (
    FORMAT_VERSION,
    METADATA_FILE,
    ArraySpec,
    GraphSpec,
    Metadata,
    SplitSpec,
    TaskSpec,
    bits_dtype,
    check_json_value,
    check_name,
    dtype_name,
    feature_path,
    feature_role,
    parse_metadata,
    resolve_inside,
    split_path,
)

__all__ = ["Dataset", "DatasetWriter", "write_dataset", "FORMAT_VERSION", "METADATA_FILE"]

# --------------------------------------------------------------------------- writing
def recover_interrupted_swap(final: Path) -> Optional[Path]:
    """:func:`graphfeed._io.recover_interrupted_swap` for a dataset folder (complete: it holds
    ``graphfeed.json``); call it holding the folder's :func:`~graphfeed._io.publish_lock`."""
    return _recover_swap(final, (METADATA_FILE,))


class DatasetWriter:
    """Builds a dataset folder atomically. Use as a context manager::

        with DatasetWriter(out, overwrite=False) as w:
            w.save_array("node_features/feat.npy", x)      # or write into w.root / ... directly
            ...
            w.finish(metadata)                             # validates; publishes on exit

    Files go to a hidden temporary sibling of ``out``; on success it is validated, fsynced and
    renamed to ``out``. On an error (or a kill) ``out`` is untouched: a half-written dataset
    never opens, and the next writer removes the leftovers.
    """

    def __init__(self, out, *, overwrite: bool = False, validate: bool = True):
        self.out = Path(out)
        self.overwrite = overwrite
        self.validate = validate
        self.root: Optional[Path] = None
        self._finished = False
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> "DatasetWriter":
        if self.out.exists() and not self.overwrite:
            raise FileExistsError(f"{self.out} already exists (pass overwrite=True / --overwrite to replace it)")
        with self._stack as stack:
            stack.enter_context(publish_lock(self.out, (METADATA_FILE,), what="this dataset"))
            self.root = stack.enter_context(
                atomic_dir(self.out, overwrite=self.overwrite, markers=(METADATA_FILE,))
            )
            for sub in ("graph", "node_features", "splits"):
                (self.root / sub).mkdir()
            self._stack = stack.pop_all()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and not self._finished:
            exc = DatasetError(f"{self.out}: DatasetWriter closed without finish(); nothing published")
            self._stack.__exit__(DatasetError, exc, None)  # removes the temporary folder
            raise exc
        return self._stack.__exit__(exc_type, exc, tb)

    def save_array(self, rel: str, array: np.ndarray) -> Path:
        assert self.root is not None
        path = self.path_for(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_npy(path, array, fsync=False)  # atomic_dir fsyncs every file before publishing
        return path

    def save_split(self, name: str, sets) -> SplitSpec:
        """Write the node-id sets of split ``name`` (1-D integer arrays, one per split index; a
        single set serves every index) as int64 files and return the split's spec."""
        assert self.root is not None and len(sets) >= 1
        rels = tuple(split_path(name, i, len(sets)) for i in range(len(sets)))
        for rel, ids in zip(rels, sets):
            self.save_array(rel, np.asarray(ids).astype(np.int64, copy=False))
        return SplitSpec(rels, tuple(int(ids.shape[0]) for ids in sets))

    def path_for(self, rel: str) -> Path:
        """``root / rel``, refusing anything that would land outside the dataset folder."""
        assert self.root is not None
        return resolve_inside(self.root, rel, str(self.out))

    def finish(self, metadata: Metadata) -> None:
        """Write ``graphfeed.json`` and (unless ``validate=False``) check the whole folder."""
        assert self.root is not None
        tmp = self.root / (METADATA_FILE + ".tmp")
        tmp.write_text(metadata.dumps(), encoding="utf-8")
        os.replace(tmp, self.root / METADATA_FILE)  # modes follow the umask: atomic_dir applies them
        if self.validate:
            from .validate import load_folder

            try:
                load_folder(self.root, mmap=True, full=True)
            except DatasetError as e:
                raise DatasetError(f"refusing to publish {self.out}: {e}") from None
        self._finished = True


def _feature_spec(name: str, arr: np.ndarray, rel: str, dtype: Optional[str] = None) -> ArraySpec:
    """``arr``'s spec; ``dtype``: the name of the dtype its bits hold where numpy has none
    (:func:`_feature_array`)."""
    try:
        dt = dtype_name(arr.dtype if dtype is None else dtype)
    except DatasetError as e:
        raise DatasetError(f"node feature {name!r}: {e}") from None
    return ArraySpec(rel, dt, tuple(int(s) for s in arr.shape))


def _feature_array(a, what: str) -> tuple:
    """``(numpy array, dtype name or None)`` of a feature given as an array or tensor: a tensor
    of a dtype numpy lacks (bfloat16) becomes its bits and names its dtype (``BITS_DTYPES``)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        from ..features._rows import numpy_rows

        arr, name = numpy_rows(a)
        return _to_numpy(arr, what), name
    return _to_numpy(a, what), None


def write_dataset(
    path,
    *,
    graph,
    node_features: Mapping[str, np.ndarray],
    splits: Mapping[str, np.ndarray],
    num_classes: int,
    target: str = "label",
    name: Optional[str] = None,
    overwrite: bool = False,
    extra: Optional[dict] = None,
    edge_features: Optional[Mapping[str, np.ndarray]] = None,
    undirected: bool = False,
    class_names=None,
    hetero=None,
) -> Path:
    """Write an in-memory dataset to folder ``path`` atomically and return ``path``.

    ``graph``: a :class:`~graphfeed.graph.csc.CSCGraph`; ``node_features``: name -> array with one
    row per node (numpy or torch; the ``target`` labels are one of them, integer, 1-D);
    ``splits``: name -> node ids (``"train"``, ``"valid"``, ``"test"``), or a list of id arrays
    for several split sets (split indices ``0..k-1``; every split holds k sets or one shared
    set); ``edge_features``: name -> array with one row per stored edge, in ``graph.indices``
    order; ``class_names``: optional text of each class; ``hetero``: a
    :class:`~graphfeed.datasets.hetero.HeteroParts` (node/edge types, per-type features) when
    ``graph`` is its graph's fused CSC. The folder is validated before it is
    published; an invalid input raises ``DatasetError`` and leaves nothing at ``path``.
    """
    from ..graph.csc import CSCGraph

    path = Path(path)
    if not isinstance(graph, CSCGraph):
        raise GraphfeedError(f"graph must be a CSCGraph, got {type(graph).__name__}")
    num_classes = check_int("num_classes", num_classes, 1)
    if class_names is not None:
        class_names = tuple(str(c) for c in class_names)
    if target not in node_features:
        raise GraphfeedError(f"target {target!r} is not one of node_features {sorted(node_features)}")
    if extra is not None:
        check_json_value(extra, "extra")
    # names become file names: check them all before anything is written
    for kind, names in (("node feature", node_features), ("edge feature", edge_features or {}),
                        ("split", splits)):
        for n in names:
            check_name(n, f"{path}: {kind}")
    num_nodes = graph.num_nodes
    with DatasetWriter(path, overwrite=overwrite) as w:
        indptr = np.asarray(graph.indptr, dtype=np.int64)
        indices = np.asarray(graph.indices)
        w.save_array("graph/indptr.npy", indptr)
        w.save_array("graph/indices.npy", indices)
        weights_rel = None
        if graph.weights is not None:
            weights_rel = "graph/weights.npy"
            w.save_array(weights_rel, np.asarray(graph.weights))
        feats, efeats = {}, {}
        for kind, given, specs in (("node", node_features, feats), ("edge", edge_features or {}, efeats)):
            for fname, arr in given.items():
                arr, dt = _feature_array(arr, f"{kind} feature {fname!r}")
                rel = feature_path(fname, kind)
                specs[fname] = _feature_spec(fname, arr, rel, dt)
                w.save_array(rel, arr)
        split_specs = {}
        for sname, sets in splits.items():
            sets = [_split_ids(ids, sname) for ids in (sets if isinstance(sets, (list, tuple)) else [sets])]
            if not sets:
                raise DatasetError(f"split {sname!r} holds no set of ids")
            split_specs[sname] = w.save_split(sname, sets)
        hetero_spec = None if hetero is None else hetero.write(w, _feature_array, _feature_spec)
        meta = _metadata(
            name or path.name,
            num_nodes,
            GraphSpec(graph.num_edges, "graph/indptr.npy", "graph/indices.npy", weights_rel, bool(undirected)),
            feats,
            split_specs,
            TaskSpec("node_classification", target, int(num_classes), class_names),
            efeats,
            dict(extra or {}),
            hetero_spec,
        )
        w.finish(meta)
    return path


def _split_ids(ids, sname: str) -> np.ndarray:
    ids = _to_numpy(ids, f"split {sname!r}")
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise DatasetError(f"split {sname!r} must be 1-D integer node ids, got {ids.dtype} {ids.shape}")
    return ids


def _metadata(name, num_nodes, graph, feats, splits, task, efeats, extra, hetero=None) -> Metadata:
    meta = Metadata(str(name), int(num_nodes), graph, feats, splits, task, efeats, extra,
                    hetero=hetero)
    # the oldest version that holds it, so older readers keep reading plain datasets
    meta = dataclasses.replace(meta, format_version=meta.required_version())
    # round-trip through the parser so a writer can never produce a file the reader rejects
    return parse_metadata(meta.to_json(), "metadata being written")


def _to_numpy(a, what: str) -> np.ndarray:
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported
    if torch is not None and isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.dtype.hasobject:
        raise DatasetError(f"{what}: object arrays are not allowed")
    return a


# --------------------------------------------------------------------------- reading
class Dataset:
    """A prepared dataset folder, opened.

    Attributes: ``path``, ``name``, ``metadata`` (:class:`~graphfeed.datasets.schema.Metadata`),
    ``graph`` (:class:`~graphfeed.graph.csc.CSCGraph` over read-only memory maps, or loaded arrays
    with ``in_memory=True``), ``features`` (a :class:`~graphfeed.features.FeatureStore` of
    ``InMemoryFeature`` over those arrays, labels included under ``target``), ``num_classes``,
    ``target``, ``class_names`` (text of each class, or ``None``), ``train_ids`` / ``valid_ids`` /
    ``test_ids`` (int64 numpy arrays of the selected split set; empty when the dataset has no such
    split), ``split(name)``, ``node_feature(name, backend)``, ``arrays`` (the checked
    arrays without torch: :class:`~graphfeed.datasets.validate.LoadedArrays`).

    Several split sets (e.g. the 10 standard splits of a benchmark): ``num_split_sets`` says how
    many, ``split_index`` which one ``train_ids`` & co. return; choose it with
    ``Dataset.open(path, split=i)`` or ``ds.with_split(i)`` (a view sharing every array), or read
    any with ``ds.split(name, index=i)``.
    """

    def __init__(self, path: Path, arrays, in_memory: bool, split: int = 0, graph_checked: bool = False):
        from ..features.base import FeatureStore
        from ..features.memory import InMemoryFeature
        from ..graph.csc import CSCGraph

        self.path = Path(path)
        self._arrays = arrays
        self.in_memory = in_memory
        self.metadata: Metadata = arrays.metadata
        self.name = self.metadata.name
        # a full validation already scanned the graph's arrays; otherwise the graph checks them
        self.graph = CSCGraph(arrays.indptr, arrays.indices, arrays.weights, trusted=graph_checked)
        feats = {}
        for fname, arr in arrays.node_features.items():
            try:
                dtype = bits_dtype(self.metadata.node_features[fname])  # bfloat16: its bits
                feats[fname] = InMemoryFeature(arr, dtype=dtype)
            except GraphfeedError as e:
                raise DatasetError(f"{arrays.paths[feature_role(fname)]}: {e}") from None
        self.features = FeatureStore(feats)
        self.edge_features = dict(arrays.edge_features)
        self.split_index = self._check_index(split)
        #: ``HeteroGraph`` and node type -> name -> ``Feature`` of a heterogeneous dataset
        self.hetero, self.type_features = None, {}
        if arrays.hetero is not None:
            from .hetero import open_hetero

            self.hetero, self.type_features = open_hetero(self, graph_checked)

    def _check_index(self, index) -> int:
        k = self.num_split_sets
        try:
            return check_int("split index", index, 0, k - 1)
        except GraphfeedError:
            raise GraphfeedError(
                f"dataset {self.name!r} has {k} split set{'s' if k > 1 else ''} (indices 0..{k - 1}); "
                f"got split index {index!r}"
            ) from None

    @property
    def num_split_sets(self) -> int:
        """How many split sets the dataset holds (1 unless it was prepared with several)."""
        return self.metadata.num_split_sets

    def with_split(self, index: int) -> "Dataset":
        """This dataset with split set ``index`` selected (shares the graph, features and maps)."""
        index = self._check_index(index)
        other = copy.copy(self)
        other.split_index = index
        return other

    @classmethod
    def open(cls, path, *, in_memory: bool = False, validate=True, split: int = 0) -> "Dataset":
        """Open a prepared dataset folder.

        ``in_memory=False`` memory-maps every array read-only: opening reads only headers (plus
        the content checks below), and rows are paged in when used. ``in_memory=True`` reads them
        into process memory. ``validate``: ``True`` / ``"full"`` runs every check including the
        O(N + E) scans (indptr monotone, ids in range, splits disjoint, labels in range);
        ``"quick"`` checks the metadata, headers, shapes, dtypes and indptr ends only; ``False``
        is the same as ``"quick"`` (headers are always checked: a corrupt file never loads).
        ``split``: which split set ``train_ids`` / ``valid_ids`` / ``test_ids`` return, in
        ``0..num_split_sets - 1`` (datasets prepared with several stored splits).
        """
        from .validate import load_folder

        if validate not in (True, False, "full", "quick"):
            raise GraphfeedError(f"validate must be True, False, 'full' or 'quick', got {validate!r}")
        full = validate is True or validate == "full"
        arrays = load_folder(path, mmap=not in_memory, full=full)
        return cls(Path(path), arrays, in_memory, split, graph_checked=full)

    @property
    def arrays(self):
        """The checked arrays behind this dataset
        (:class:`~graphfeed.datasets.validate.LoadedArrays`: metadata, graph, features, splits and
        their paths; read-only memory maps unless opened ``in_memory``)."""
        return self._arrays

    # ------------------------------------------------------------------ task
    @property
    def num_nodes(self) -> int:
        return self.metadata.num_nodes

    @property
    def num_edges(self) -> int:
        return self.metadata.graph.num_edges

    @property
    def num_classes(self) -> int:
        return self.metadata.task.num_classes

    @property
    def target(self) -> str:
        return self.metadata.task.target

    @property
    def labels(self) -> np.ndarray:
        return self._arrays.node_features[self.target]

    @property
    def split_names(self) -> list[str]:
        return list(self.metadata.splits)

    @property
    def class_names(self) -> Optional[tuple]:
        """Text of each class (``class_names[i]`` for label ``i``) when the labels were strings."""
        return self.metadata.task.class_names

    def split(self, name: str, index: Optional[int] = None) -> np.ndarray:
        """Node ids of split ``name`` in split set ``index`` (default: the selected
        ``split_index``) as int64 numpy (a read-only memory map when int64 on disk)."""
        try:
            sets = self._arrays.splits[name]
        except KeyError:
            raise GraphfeedError(f"dataset {self.name!r} has no split {name!r}; it has {self.split_names}") from None
        i = self.split_index if index is None else self._check_index(index)
        return sets[i if len(sets) > 1 else 0].astype(np.int64, copy=False)

    def _split_or_empty(self, name: str) -> np.ndarray:
        if name in self._arrays.splits:
            return self.split(name)
        return np.zeros(0, dtype=np.int64)

    @property
    def train_ids(self) -> np.ndarray:
        return self._split_or_empty("train")

    @property
    def valid_ids(self) -> np.ndarray:
        return self._split_or_empty("valid")

    @property
    def test_ids(self) -> np.ndarray:
        return self._split_or_empty("test")

    @property
    def task_type(self) -> str:
        """``node_classification``, or ``link_prediction`` (see :mod:`graphfeed.datasets.link`)."""
        return self.metadata.task.type

    def link_split(self, name: str):
        """``(pairs, negatives)`` of link split ``name``: int64 ``(2, P)`` edges and the fixed
        negative destinations int64 ``(P, k)``, or ``None`` when the dataset stores none."""
        if self.task_type != "link_prediction":
            raise GraphfeedError(f"dataset {self.name!r} is a {self.task_type} dataset; it has no "
                                 f"link splits")
        neg = name + "_neg"
        return self.split(name), (self.split(neg) if neg in self._arrays.splits else None)

    # ------------------------------------------------------------------ features
    def feature_path(self, name: str) -> Path:
        role = feature_role(name)
        if role not in self._arrays.paths:
            raise GraphfeedError(
                f"dataset {self.name!r} has no node feature {name!r}; it has {sorted(self.metadata.node_features)}"
            )
        return self._arrays.paths[role]

    def node_feature(self, name: str, backend: str = "ram", *, cache_size=0,
                     cache_policy: str = "auto"):
        """Node feature ``name`` as a :class:`~graphfeed.features.Feature` on ``backend``.

        ``"ram"``: an ``InMemoryFeature`` over the array (the shared memory map, or the loaded
        array with ``in_memory=True``). ``"disk"`` / ``"lmdb"`` / others: delegated to
        ``graphfeed.features.registry.open_feature(npy_path, backend, cache_size=...,
        cache_policy=...)``; the ``"degree"`` policy (``"auto"``'s choice here) caches the
        nodes of the graph's highest out-degrees (``graph.out_degrees``).
        """
        path = self.feature_path(name)
        if backend == "ram":
            return self.features[name]
        from ..features.registry import open_feature

        return open_feature(path, backend, cache_size=cache_size, cache_policy=cache_policy,
                            dtype=bits_dtype(self.metadata.node_features[name]),
                            degrees=self._cache_degrees(cache_size, cache_policy))

    def _cache_degrees(self, cache_size, cache_policy: str, ntype: Optional[str] = None):
        """The ``degree``/``auto`` cache policies' scores: the graph's out-degrees (of the nodes
        of type ``ntype``, in type-local order), ``None`` for other policies or no cache."""
        if not cache_size or str(cache_policy).lower() not in ("degree", "auto"):
            return None
        if ntype is None:
            return self.graph.out_degrees
        h = self.hetero
        t = h.type_id(ntype)
        lo = int(h.node_offsets[t])
        return h.csc.out_degrees[lo:int(h.node_offsets[t + 1])]

    def type_feature(self, ntype: str, name: str, backend: str = "ram", *, cache_size=0,
                     cache_policy: str = "auto"):
        """Feature ``name`` of node type ``ntype`` of a heterogeneous dataset (one row per node
        of the type, type-local ids) as a :class:`~graphfeed.features.Feature` on ``backend``,
        as :meth:`node_feature` opens a node feature."""
        if self.hetero is None:
            raise GraphfeedError(f"dataset {self.name!r} has no node types; use node_feature()")
        if ntype not in self.type_features:
            raise GraphfeedError(f"dataset {self.name!r} has no features of node type {ntype!r}; "
                                 f"types with features: {sorted(self.type_features)}")
        if name not in self.type_features[ntype]:
            raise GraphfeedError(f"node type {ntype!r} of dataset {self.name!r} has no feature "
                                 f"{name!r}; it has {sorted(self.type_features[ntype])}")
        if backend == "ram":
            return self.type_features[ntype][name]
        from ..features.registry import open_feature
        from .hetero_schema import type_feature_role

        return open_feature(self._arrays.paths[type_feature_role(ntype, name)], backend,
                            cache_size=cache_size, cache_policy=cache_policy,
                            dtype=bits_dtype(self.metadata.hetero.node_features[ntype][name]),
                            degrees=self._cache_degrees(cache_size, cache_policy, ntype))

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}, num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
            f"features={list(self.metadata.node_features)}, num_classes={self.num_classes}, "
            f"splits={ {k: v.size_of(self.split_index) for k, v in self.metadata.splits.items()} }"
            + (f", split_index={self.split_index} of {self.num_split_sets}" if self.num_split_sets > 1 else "")
            + ")"
        )
