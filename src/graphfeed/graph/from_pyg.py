"""What graphfeed reads of PyG graphs: a ``torch_geometric.data.Data``'s edges and node tensors
(``CSCGraph.from_pyg``), a ``HeteroData``'s typed edges (``HeteroGraph.from_pyg``), and the
permutation from graphfeed's edge positions back to PyG's edge order.

PyG is never imported here: an object can only be a PyG ``Data`` once ``torch_geometric.data``
is loaded, so :func:`pyg_kind` asks ``sys.modules`` (importing graphfeed stays cheap).

Edge direction is PyG's: ``edge_index[0]`` is the source, ``edge_index[1]`` the destination,
and the CSC holds each destination's in-neighbours (what messages flow along). The CSC keeps
the input order of a destination's in-edges, so ``perm`` is a stable sort by destination.
"""

from __future__ import annotations

import sys
from typing import Optional

import numpy as np

from ..errors import GraphfeedError

__all__ = ["pyg_kind", "pyg_edges", "pyg_typed_edges", "csc_perm", "hetero_perm", "node_tensors"]

#: PyG's node-level names that graphfeed calls otherwise (its loaders read "feat" and "label")
PYG_TO_GRAPHFEED = {"x": "feat", "y": "label"}


def pyg_kind(obj) -> Optional[str]:
    """``"data"`` for a PyG ``Data``, ``"hetero"`` for a ``HeteroData``, else ``None``."""
    mod = sys.modules.get("torch_geometric.data")
    if mod is None:
        return None
    if isinstance(obj, mod.HeteroData):
        return "hetero"
    if isinstance(obj, mod.Data):
        return "data"
    return None


def _numpy(a, what: str) -> np.ndarray:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[0] != 2 or (a.size and a.dtype.kind not in "iu"):
        raise GraphfeedError(f"{what} must be a (2, E) integer tensor, got {a.dtype} {a.shape}")
    return a.astype(np.int64, copy=False)


def _edge_index(store, what: str) -> np.ndarray:
    if "edge_index" in store:
        return _numpy(store["edge_index"], f"{what}.edge_index")
    if "adj_t" in store or "adj" in store:
        raise GraphfeedError(f"{what} holds a sparse adjacency (adj_t); graphfeed reads "
                             f"edge_index: drop ToSparseTensor or convert back with "
                             f"torch_geometric.utils.to_edge_index")
    raise GraphfeedError(f"{what} has no edge_index")


def _num_nodes(value, what: str) -> int:
    if value is None:
        raise GraphfeedError(f"{what}.num_nodes is unknown; set it (data.num_nodes = N)")
    return int(value)


def pyg_edges(data) -> tuple:
    """``(num_nodes, src, dst)`` (int64 arrays) of a PyG ``Data``."""
    if pyg_kind(data) != "data":
        raise GraphfeedError(f"expected a torch_geometric.data.Data, got {type(data).__name__}")
    ei = _edge_index(data, "data")
    return _num_nodes(data.num_nodes, "data"), ei[0], ei[1]


def pyg_typed_edges(data) -> tuple:
    """``(num_nodes dict, edges dict)`` of a PyG ``HeteroData``, as
    ``HeteroGraph.from_edges`` takes them: node types in ``data.node_types`` order, edge types
    in ``data.edge_types`` order, ``(src, dst)`` type-local int64 arrays."""
    if pyg_kind(data) != "hetero":
        raise GraphfeedError(f"expected a torch_geometric.data.HeteroData, got "
                             f"{type(data).__name__}")
    num = {t: _num_nodes(data[t].num_nodes, f"data[{t!r}]") for t in data.node_types}
    if not data.edge_types:
        raise GraphfeedError("the HeteroData has no edge types")
    edges = {}
    for et in data.edge_types:
        ei = _edge_index(data[et], f"data[{et}]")
        edges[tuple(et)] = (ei[0], ei[1])
    return num, edges


def csc_perm(data) -> np.ndarray:
    """int64 ``perm`` of ``CSCGraph.from_pyg(data)``: ``perm[p]`` is the PyG edge id of the
    edge at CSC position ``p`` (``indices[p] == edge_index[0, perm[p]]``). O(E log E). An edge
    attribute in CSC order is ``attr[perm]`` (e.g. a weighted ``SamplingMethod``'s
    ``weights``)."""
    _, _, dst = pyg_edges(data)
    return np.argsort(dst, kind="stable")


def hetero_perm(graph, data) -> np.ndarray:
    """int64 ``perm`` of ``graph = HeteroGraph.from_pyg(data)`` (built without
    ``drop_duplicates``): ``perm[p]`` is the PyG edge id, within its edge type, of the edge at
    fused position ``p``. O(E log E)."""
    num, edges = pyg_typed_edges(data)
    if list(edges) != list(graph.edge_types) or int(graph.num_edges) != sum(
            e[0].shape[0] for e in edges.values()):
        raise GraphfeedError("hetero_perm: the graph was not built from this HeteroData "
                             "(or was built with drop_duplicates)")
    # the fused build sorts edges by (destination, relation), stably: the same sort here
    offsets = graph.node_offsets
    num_rel = len(edges)
    keys, starts = [], [0]
    for r, et in enumerate(graph.edge_types):
        dst = edges[et][1] + offsets[graph.type_id(et[2])]
        keys.append(dst * num_rel + r)
        starts.append(starts[-1] + dst.shape[0])
    order = np.argsort(np.concatenate(keys), kind="stable")
    rel = np.asarray(graph.edge_type).astype(np.int64)
    return order - np.asarray(starts[:-1], dtype=np.int64)[rel]


def node_tensors(store) -> dict:
    """The node-level tensors of a PyG ``Data`` (or of one node type's store, ``data[t]``), by
    graphfeed name: ``x`` is ``"feat"``, ``y`` is ``"label"``, others keep theirs. Boolean
    masks (``train_mask``) are splits, not features, and are left out."""
    torch = sys.modules["torch"]
    out = {}
    for key in store.node_attrs():
        value = store[key]
        if isinstance(value, torch.Tensor) and value.dtype != torch.bool:
            out[PYG_TO_GRAPHFEED.get(key, key)] = value
    return out
