"""PyG's remote-backend interfaces over graphfeed data: a ``torch_geometric.data.FeatureStore``
of graphfeed ``Feature``s and a ``GraphStore`` of a graphfeed graph.

``NodeLoader(data=(feature_store, graph_store), node_sampler=GraphfeedSampler(...), ...)``
joins the sampled node ids with :meth:`GraphfeedFeatureStore.multi_get_tensor`, which reads
each feature at the batch's ids with the feature's own batched ``read`` (in memory, disk, LMDB,
cached: whatever backend the ``Feature`` is), so PyG code is fed from the same stores as
graphfeed's loader.

Keys follow PyG: ``TensorAttr(group_name, attr_name)``, ``group_name`` ``None`` on a
homogeneous graph and the node type on a typed one; graphfeed's ``"feat"`` is PyG's ``"x"``
and the label feature is ``"y"`` (other names are kept). The graph store holds one edge type
(``None``) for a ``CSCGraph`` and every ``(src, rel, dst)`` of a ``HeteroGraph``, in CSC layout
natively; COO and CSR are made on request (O(E)).
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np
import torch

from . import _require  # noqa: F401  (PyG, or a message naming the extra)
from torch_geometric.data import EdgeAttr, FeatureStore, GraphStore, TensorAttr
from torch_geometric.data.graph_store import EdgeLayout

from ..errors import GraphfeedError
from ..features.base import Feature
from ..features.memory import InMemoryFeature
from ..graph.csc import CSCGraph
from ..graph.from_pyg import PYG_TO_GRAPHFEED
from ..graph.hetero import HeteroGraph

__all__ = ["GraphfeedFeatureStore", "GraphfeedGraphStore", "from_dataset", "pyg_name"]

_GRAPHFEED_TO_PYG = {v: k for k, v in PYG_TO_GRAPHFEED.items()}


def pyg_name(name: str, target: str = "label") -> str:
    """PyG's name of graphfeed feature ``name``: ``"feat"`` is ``"x"``, the labels (``target``)
    are ``"y"``, others keep theirs."""
    return "y" if name == target else _GRAPHFEED_TO_PYG.get(name, name)


def _as_feature(value, where: str) -> Feature:
    if isinstance(value, Feature):
        return value
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return InMemoryFeature(value)
    raise GraphfeedError(f"{where} must be a graphfeed Feature, a tensor or an array, got "
                         f"{type(value).__name__}")


class GraphfeedFeatureStore(FeatureStore):
    """A PyG ``FeatureStore`` whose tensors are graphfeed ``Feature``s.

    ``features``: PyG name -> ``Feature`` (homogeneous: ``group_name`` ``None``), or node type
    -> PyG name -> ``Feature`` (typed); tensors and arrays are wrapped as in-memory features.
    ``get_tensor(group, name, index=ids)`` is ``feature.read(ids)``: only the requested rows
    are read, in the order given (``index``: int64 ids, a boolean mask, a slice, or ``None``
    for every row). The stored features are read-only: ``put_tensor`` adds a whole table,
    ``remove_tensor`` drops one.
    """

    def __init__(self, features: Mapping):
        super().__init__()
        table = {}
        for key, value in dict(features).items():
            if isinstance(value, Mapping):
                for name, f in value.items():
                    table[(key, name)] = _as_feature(f, f"features[{key!r}][{name!r}]")
            else:
                table[(None, key)] = _as_feature(value, f"features[{key!r}]")
        self.__dict__["_features"] = table

    # ------------------------------------------------------------------ PyG hooks
    def _feature(self, attr: TensorAttr) -> Feature:
        key = (attr.group_name, attr.attr_name)
        try:
            return self._features[key]
        except KeyError:
            raise KeyError(f"no feature {key}; the store has {sorted(self._features, key=str)}"
                           ) from None

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        f = self._feature(attr)
        return f.read(_ids(attr.index, f.num_rows))

    def _get_tensor_size(self, attr: TensorAttr) -> tuple:
        return tuple(self._feature(attr).shape)

    def get_all_tensor_attrs(self) -> list:
        return [TensorAttr(group, name) for group, name in self._features]

    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        if attr.index is not None:
            raise GraphfeedError("graphfeed features are read-only tables: put a whole tensor "
                                 "(index=None), not rows")
        self._features[(attr.group_name, attr.attr_name)] = _as_feature(tensor, "tensor")
        return True

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return self._features.pop((attr.group_name, attr.attr_name), None) is not None

    # ------------------------------------------------------------------ graphfeed side
    def feature(self, group_name: Optional[str], attr_name: str) -> Feature:
        """The graphfeed ``Feature`` behind ``(group_name, attr_name)``."""
        return self._feature(TensorAttr(group_name, attr_name))

    def close(self) -> None:
        """Close every feature (files, maps, threads); a later read reopens them."""
        for f in self._features.values():
            f.close()

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}: {tuple(f.shape)} {f.kind}" for k, f in self._features.items())
        return f"GraphfeedFeatureStore({inner})"


def _ids(index, num_rows: int) -> torch.Tensor:
    """A feature read's ids from PyG's ``index``: ``None`` (every row), a slice, a boolean mask
    or integer ids (tensor, array, list)."""
    if index is None:
        return torch.arange(num_rows)
    if isinstance(index, slice):
        return torch.arange(*index.indices(num_rows))
    t = index if isinstance(index, torch.Tensor) else torch.as_tensor(np.asarray(index))
    if t.dtype == torch.bool:
        if t.shape != (num_rows,):
            raise GraphfeedError(f"a boolean index needs one entry per row ({num_rows}), got "
                                 f"shape {tuple(t.shape)}")
        return torch.nonzero(t).view(-1)
    return t.cpu() if t.device.type != "cpu" else t


class GraphfeedGraphStore(GraphStore):
    """A PyG ``GraphStore`` of a graphfeed ``CSCGraph`` (edge type ``None``) or ``HeteroGraph``
    (every ``(src, rel, dst)``; ids type-local). Edges are in-edges per destination, PyG's
    ``edge_index[0] -> edge_index[1]``. ``get_edge_index(edge_type, "csc")`` is
    ``(row, colptr)`` (int64 copies of the stored arrays for a ``CSCGraph``; per relation an
    O(E) scan of the fused graph); ``"coo"`` and ``"csr"`` are derived. Read-only.

    :attr:`graph` is the graphfeed graph, which ``GraphfeedSampler`` samples.
    """

    def __init__(self, graph):
        super().__init__()
        if not isinstance(graph, (CSCGraph, HeteroGraph)):
            raise GraphfeedError(f"graph must be a CSCGraph or HeteroGraph, got "
                                 f"{type(graph).__name__}")
        self.__dict__["graph"] = graph

    @property
    def is_hetero(self) -> bool:
        return isinstance(self.graph, HeteroGraph)

    def get_all_edge_attrs(self) -> list:
        g = self.graph
        if not self.is_hetero:
            return [EdgeAttr(None, EdgeLayout.CSC, size=(g.num_nodes, g.num_nodes))]
        return [EdgeAttr(et, EdgeLayout.CSC, size=(g.num_nodes_of(et[0]), g.num_nodes_of(et[2])))
                for et in g.edge_types]

    def _csc(self, edge_type) -> tuple:
        """``(row, colptr)`` int64 tensors of one edge type (local ids of its node types)."""
        g = self.graph
        if not self.is_hetero:
            if edge_type is not None:
                raise KeyError(f"a homogeneous graph store has the edge type None, not "
                               f"{edge_type!r}")
            return (torch.from_numpy(np.asarray(g.indices, dtype=np.int64)),
                    torch.from_numpy(np.asarray(g.indptr, dtype=np.int64)))
        if edge_type is None or tuple(edge_type) not in g.edge_types:
            raise KeyError(f"no edge type {edge_type!r}; the graph has {list(g.edge_types)}")
        r = g.edge_types.index(tuple(edge_type))
        s, _, d = edge_type
        sel = np.flatnonzero(np.asarray(g.edge_type) == r)
        row = np.asarray(g.csc.indices)[sel].astype(np.int64) - g.node_offsets[g.type_id(s)]
        dst = np.searchsorted(g.csc.indptr, sel, side="right") - 1 - g.node_offsets[g.type_id(d)]
        colptr = np.zeros(g.num_nodes_of(d) + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=g.num_nodes_of(d)), out=colptr[1:])
        return torch.from_numpy(row), torch.from_numpy(colptr)

    def _get_edge_index(self, edge_attr: EdgeAttr):
        row, colptr = self._csc(edge_attr.edge_type)
        layout = EdgeLayout(edge_attr.layout)
        if layout == EdgeLayout.CSC:
            return row, colptr
        col = torch.repeat_interleave(torch.arange(colptr.numel() - 1), colptr.diff())
        if layout == EdgeLayout.COO:
            return row, col
        order = torch.argsort(row, stable=True)
        num_rows = (self.graph.num_nodes if not self.is_hetero
                    else self.graph.num_nodes_of(edge_attr.edge_type[0]))
        rowptr = torch.zeros(num_rows + 1, dtype=torch.int64)
        rowptr[1:] = torch.cumsum(torch.bincount(row, minlength=num_rows), 0)
        return rowptr, col[order]

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        raise GraphfeedError("a graphfeed graph store is read-only (its graph is a prepared "
                             "dataset's or a built CSCGraph/HeteroGraph)")

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        raise GraphfeedError("a graphfeed graph store is read-only")

    def __repr__(self) -> str:
        return f"GraphfeedGraphStore({self.graph!r})"


def from_dataset(dataset, *, backend: str = "ram", cache_size=0, cache_policy: str = "auto",
                 data_root: Optional[str] = None) -> tuple:
    """``(GraphfeedFeatureStore, GraphfeedGraphStore)`` of a graphfeed dataset: a ``Dataset``,
    or a built-in name (``"tiny"``, ``"small"``, ``"hetero"``, ...) or prepared folder opened
    with :func:`graphfeed.datasets.open.open_dataset` (``data_root`` as there).

    Every node feature goes into the feature store on ``backend`` (``"ram"``, ``"disk"``,
    ``"lmdb"``; ``cache_size``/``cache_policy``: a row cache in front of disk or LMDB), the
    labels in RAM as ``"y"``. A typed dataset's features are per node type (``"feat"`` as
    ``"x"``) and the target type also gets ``"y"``, its rows of the labels.
    """
    from ..datasets.format import Dataset
    from ..datasets.open import open_dataset

    ds = dataset if isinstance(dataset, Dataset) else open_dataset(str(dataset), data_root)
    opts = dict(cache_size=cache_size, cache_policy=cache_policy)
    target = ds.target
    if ds.hetero is None:
        feats = {pyg_name(n, target): ds.node_feature(n, "ram" if n == target else backend,
                                                      **opts)
                 for n in ds.metadata.node_features}
        return GraphfeedFeatureStore(feats), GraphfeedGraphStore(ds.graph)
    g = ds.hetero
    feats = {t: {pyg_name(n): ds.type_feature(t, n, backend, **opts) for n in fs}
             for t, fs in ds.type_features.items()}
    tt = ds.metadata.hetero.target_type
    if tt is not None:
        t = g.type_id(tt)
        lo, hi = int(g.node_offsets[t]), int(g.node_offsets[t + 1])
        feats.setdefault(tt, {})["y"] = InMemoryFeature(ds.labels[lo:hi])
    return GraphfeedFeatureStore(feats), GraphfeedGraphStore(g)
