"""Heterogeneous graphs as one fused CSC with node-type offsets and a per-edge relation id.

Node ids are global and grouped by type: type ``t`` owns ``[offsets[t], offsets[t + 1])``, so a
node's type-local id is ``global - offsets[t]``. Edge types are ``(src_type, relation,
dst_type)`` triples; ``edge_type[p]`` is the relation id of the edge stored at ``indices[p]``, and
the in-edges of every destination are sorted by relation id, so the in-edges of ``v`` of one
relation are one contiguous run of its neighbour range (GraphBolt's fused layout). The
homogeneous ``CSCGraph`` underneath is an ordinary one: shared, placed and sampled by the same
machinery.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, Union

import numpy as np

from .._checks import check_int
from ..errors import DatasetError, GraphfeedError
from .csc import CSCGraph, index_dtype

EdgeType = tuple[str, str, str]

__all__ = ["HeteroGraph", "EdgeType", "edge_type_dtype", "relation_in_degrees"]


def edge_type_dtype(num_edge_types: int) -> np.dtype:
    """The smallest signed integer dtype that holds every relation id."""
    if num_edge_types <= np.iinfo(np.int8).max + 1:
        return np.dtype(np.int8)
    if num_edge_types <= np.iinfo(np.int16).max + 1:
        return np.dtype(np.int16)
    return np.dtype(np.int32)


def check_type_names(node_types, edge_types, where: str = "graph"):
    """``(node_types tuple, edge_types tuple of triples)`` after checking: distinct non-empty
    node type names, edge types as distinct 3-tuples of strings naming existing node types."""
    if isinstance(node_types, (str, bytes)):
        raise GraphfeedError(f"{where}: node_types must be a list of names, got {node_types!r}")
    nts = tuple(node_types)
    if not nts:
        raise GraphfeedError(f"{where}: node_types must not be empty")
    for t in nts:
        if not isinstance(t, str) or not t:
            raise GraphfeedError(f"{where}: node type names must be non-empty strings, got {t!r}")
    if len(set(nts)) != len(nts):
        raise GraphfeedError(f"{where}: node_types repeat a name: {list(nts)}")
    ets = []
    for et in edge_types:
        if (not isinstance(et, (tuple, list)) or len(et) != 3
                or not all(isinstance(x, str) and x for x in et)):
            raise GraphfeedError(
                f"{where}: an edge type is a (src_type, relation, dst_type) triple of names, "
                f"got {et!r}")
        et = tuple(et)
        for side, t in (("source", et[0]), ("destination", et[2])):
            if t not in nts:
                raise GraphfeedError(
                    f"{where}: edge type {et} names {side} node type {t!r}, which is not one of "
                    f"the node types {list(nts)}")
        ets.append(et)
    if not ets:
        raise GraphfeedError(f"{where}: edge_types must not be empty")
    if len(set(ets)) != len(ets):
        raise GraphfeedError(f"{where}: edge_types repeat a triple: {ets}")
    return nts, tuple(ets)


class HeteroGraph:
    """A heterogeneous graph over a fused ``CSCGraph`` (see the module docstring).

    - ``csc``: the fused graph; ``indices`` hold global source ids.
    - ``node_types``: names, type ``t`` is ``node_types[t]``; ``node_offsets``: int64
      ``(T + 1,)``, ``node_offsets[-1] == num_nodes``.
    - ``edge_types``: ``(src_type, relation, dst_type)`` triples, relation id ``r`` is
      ``edge_types[r]``; ``edge_type``: ``(num_edges,)`` int8/int16/int32 relation ids aligned
      with ``csc.indices``.

    The constructor checks the shapes always and, unless ``trusted``, the contents in one
    O(N + E) numba pass (relation ids in range, sorted per destination, endpoint types matching
    the relation): the samplers index by these arrays without further checks.
    """

    __slots__ = ("csc", "node_types", "node_offsets", "edge_types", "edge_type", "_rel_src",
                 "_rel_dst")

    def __init__(self, csc: CSCGraph, node_types: Sequence[str], node_counts, edge_types,
                 edge_type, *, trusted: bool = False, source: Optional[str] = None):
        if not isinstance(csc, CSCGraph):
            raise GraphfeedError(f"csc must be a CSCGraph, got {type(csc).__name__}")
        where = source or "HeteroGraph"
        nts, ets = check_type_names(node_types, edge_types, where)
        counts = np.asarray(node_counts)
        if counts.shape != (len(nts),) or counts.dtype.kind not in "iu" or (counts < 0).any():
            raise GraphfeedError(f"{where}: node_counts must hold one count >= 0 per node type "
                                 f"({len(nts)}), got {node_counts!r}")
        offsets = np.zeros(len(nts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        if int(offsets[-1]) != csc.num_nodes:
            raise GraphfeedError(f"{where}: the node counts add up to {int(offsets[-1])}, the "
                                 f"graph has {csc.num_nodes} nodes")
        file = getattr(edge_type, "filename", None)
        et = np.asarray(edge_type)
        if et.ndim != 1 or et.dtype not in (np.int8, np.int16, np.int32):
            raise _err(file, where, f"edge_type must be a 1-D int8/int16/int32 array, got "
                                    f"{et.dtype} {et.shape}")
        if et.shape[0] != csc.num_edges:
            raise _err(file, where, f"edge_type holds {et.shape[0]} entries, the graph has "
                                    f"{csc.num_edges} edges")
        self.csc = csc
        self.node_types = nts
        self.node_offsets = offsets
        self.edge_types = ets
        self.edge_type = et
        self._rel_src = np.array([nts.index(e[0]) for e in ets], dtype=np.int64)
        self._rel_dst = np.array([nts.index(e[2]) for e in ets], dtype=np.int64)
        if not trusted:
            self.validate(source=file or where)

    def validate(self, *, source: str = "HeteroGraph") -> None:
        """The O(N + E) content check (see the class docstring); ``DatasetError`` naming
        ``source`` and the first bad edge."""
        from ._hetero_kernels import check_typed_csc

        code, p = check_typed_csc(self.csc.indptr, self.csc.indices, self.edge_type,
                                  self.node_offsets, self._rel_src, self._rel_dst)
        if code == 0:
            return
        r = int(self.edge_type[p])
        v = int(np.searchsorted(self.csc.indptr, p, side="right") - 1)
        u = int(self.csc.indices[p])
        msg = {
            1: f"edge_type[{p}] = {r} is out of range [0, {len(self.edge_types)})",
            2: f"edge_type[{p}] = {r}: the in-edges of node {v} are not sorted by edge type",
            3: f"edge {u} -> {v} (position {p}) has edge type {self._name(r)} but node {v} is "
               f"of type {self.node_types[self.type_of(v)]!r}",
            4: f"edge {u} -> {v} (position {p}) has edge type {self._name(r)} but node {u} is "
               f"of type {self.node_types[self.type_of(u)]!r}",
        }[code]
        raise DatasetError(f"{source}: {msg}")

    def _name(self, r: int) -> str:
        return str(self.edge_types[r]) if 0 <= r < len(self.edge_types) else str(r)

    # ------------------------------------------------------------------ sizes and ids
    @property
    def num_nodes(self) -> int:
        return self.csc.num_nodes

    @property
    def num_edges(self) -> int:
        return self.csc.num_edges

    @property
    def num_node_types(self) -> int:
        return len(self.node_types)

    @property
    def num_edge_types(self) -> int:
        return len(self.edge_types)

    @property
    def relation_types(self) -> tuple[np.ndarray, np.ndarray]:
        """``(src type id, dst type id)`` per relation id, int64 arrays."""
        return self._rel_src, self._rel_dst

    def num_nodes_of(self, ntype: str) -> int:
        t = self.type_id(ntype)
        return int(self.node_offsets[t + 1] - self.node_offsets[t])

    @property
    def num_nodes_dict(self) -> dict[str, int]:
        return {t: self.num_nodes_of(t) for t in self.node_types}

    def type_id(self, ntype: str) -> int:
        try:
            return self.node_types.index(ntype)
        except ValueError:
            raise GraphfeedError(f"unknown node type {ntype!r}; the graph has "
                                 f"{list(self.node_types)}") from None

    def type_of(self, v: int) -> int:
        return int(np.searchsorted(self.node_offsets, v, side="right") - 1)

    def node_type_ids(self, ids) -> np.ndarray:
        """Type id of each global id (int64, vectorised)."""
        return np.searchsorted(self.node_offsets, np.asarray(ids), side="right") - 1

    def edge_type_id(self, key: Union[EdgeType, str]) -> int:
        """The relation id of an edge-type triple, or of a relation name used by one triple."""
        if isinstance(key, str):
            hits = [i for i, e in enumerate(self.edge_types) if e[1] == key]
            if len(hits) == 1:
                return hits[0]
            what = "names several edge types" if hits else "is no relation of the graph"
            raise GraphfeedError(f"edge type {key!r} {what}; edge types: {list(self.edge_types)}")
        if isinstance(key, (tuple, list)) and tuple(key) in self.edge_types:
            return self.edge_types.index(tuple(key))
        raise GraphfeedError(f"unknown edge type {key!r}; edge types: {list(self.edge_types)}")

    def edges_of(self, key: Union[EdgeType, str]) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` type-local ids (int64) of every edge of one edge type (O(E); for
        tests and inspection)."""
        r = self.edge_type_id(key)
        sel = np.flatnonzero(np.asarray(self.edge_type) == r)
        dst = np.searchsorted(self.csc.indptr, sel, side="right") - 1
        src = np.asarray(self.csc.indices)[sel].astype(np.int64)
        s, d = self._rel_src[r], self._rel_dst[r]
        return src - self.node_offsets[s], dst - self.node_offsets[d]

    @property
    def nbytes(self) -> int:
        return self.csc.nbytes + int(self.edge_type.nbytes)

    def __repr__(self) -> str:
        return (f"HeteroGraph(num_nodes={self.num_nodes_dict}, num_edges={self.num_edges}, "
                f"edge_types={list(self.edge_types)})")

    # ------------------------------------------------------------------ building
    @classmethod
    def from_edges(cls, num_nodes: Mapping[str, int],
                   edges: Optional[Mapping[EdgeType, tuple]] = None, *,
                   drop_duplicates: bool = False) -> "HeteroGraph":
        """Build from per-edge-type COO edges in type-local ids, in O(N * R + E).

        ``num_nodes``: node type -> count (the order fixes the type ids and global offsets);
        ``edges``: ``(src_type, relation, dst_type)`` -> ``(src, dst)`` integer arrays of
        type-local ids (the order fixes the relation ids). Reverse edges are relations of their
        own: add them as separate edge types. ``drop_duplicates`` keeps the first of repeated
        ``(src, dst)`` pairs within a relation. One counting sort over (destination, relation)
        builds the fused CSC with the in-edges of each destination grouped by relation.

        A PyG ``HeteroData`` in place of ``num_nodes`` (and no ``edges``) is
        :meth:`from_pyg`'s.
        """
        from .from_pyg import pyg_kind

        kind = pyg_kind(num_nodes)
        if kind == "hetero" and not edges:
            return cls.from_pyg(num_nodes, drop_duplicates=drop_duplicates)
        if kind is not None:
            raise GraphfeedError(
                "HeteroGraph.from_edges(data) takes a PyG HeteroData alone (no edges); got "
                + ("a HeteroData and edges" if kind == "hetero"
                   else "a homogeneous Data: build CSCGraph.from_pyg(data)"))
        if edges is None:
            raise GraphfeedError("HeteroGraph.from_edges needs edges: edge type -> (src, dst)")
        node_types = list(num_nodes)
        counts = np.array([check_int(f"num_nodes[{t!r}]", num_nodes[t], 0) for t in node_types],
                          dtype=np.int64)
        nts, ets = check_type_names(node_types, list(edges), "HeteroGraph.from_edges")
        offsets = np.zeros(len(nts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        n = int(offsets[-1])
        num_rel = len(ets)
        gsrc, vdst = [], []
        for r, et in enumerate(ets):
            pair = edges[et]
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise GraphfeedError(f"edges[{et}] must be a (src, dst) pair of arrays")
            s_t, d_t = nts.index(et[0]), nts.index(et[2])
            src = _ids(pair[0], f"edges[{et}] src")
            dst = _ids(pair[1], f"edges[{et}] dst")
            if src.shape != dst.shape:
                raise GraphfeedError(f"edges[{et}]: src and dst differ in length: "
                                     f"{src.shape[0]} != {dst.shape[0]}")
            for side, ids, t in (("src", src, s_t), ("dst", dst, d_t)):
                if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= counts[t]):
                    bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
                    raise GraphfeedError(f"edges[{et}] {side} id {bad} is out of range "
                                         f"[0, {int(counts[t])}) of node type {nts[t]!r}")
            gsrc.append(src + offsets[s_t])
            # a virtual destination per (node, relation): sorting by it groups each node's
            # in-edges by relation id
            vdst.append((dst + offsets[d_t]) * num_rel + r)
        src = np.concatenate(gsrc) if gsrc else np.zeros(0, np.int64)
        vd = np.concatenate(vdst) if vdst else np.zeros(0, np.int64)
        virt = CSCGraph.from_edges(src, vd, n * num_rel, drop_duplicates=drop_duplicates)
        vptr = virt.indptr
        indptr = np.ascontiguousarray(vptr[::num_rel])
        indices = virt.indices.astype(index_dtype(n), copy=False)
        rel_of_col = (np.arange(n * num_rel, dtype=np.int64) % num_rel).astype(
            edge_type_dtype(num_rel))
        etype = np.repeat(rel_of_col, np.diff(vptr))
        csc = CSCGraph(indptr, indices, trusted=True)
        return cls(csc, nts, counts, ets, etype, trusted=True)

    @classmethod
    def from_pyg(cls, data, *, drop_duplicates: bool = False) -> "HeteroGraph":
        """The graph of a PyG ``HeteroData``: node types in ``data.node_types`` order (with
        ``data[t].num_nodes`` nodes), an edge type per ``data.edge_types`` entry, each
        ``edge_index`` in type-local ids. ``graphfeed.graph.from_pyg.hetero_perm(graph, data)``
        maps its edge positions to PyG's edge ids (without ``drop_duplicates``)."""
        from .from_pyg import pyg_typed_edges

        num, edges = pyg_typed_edges(data)
        return cls.from_edges(num, edges, drop_duplicates=drop_duplicates)


def _ids(a, what: str) -> np.ndarray:
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise GraphfeedError(f"{what} must be a 1-D integer array, got {a.dtype} {a.shape}")
    return a.astype(np.int64, copy=False)


def _err(filename, where: str, msg: str) -> GraphfeedError:
    return DatasetError(f"{filename}: {msg}") if filename else GraphfeedError(f"{where}: {msg}")


def relation_in_degrees(graph, key=None) -> np.ndarray:
    """int64 in-degree of every destination within edge type ``key`` of typed ``graph``
    (type-local ids of its destination type), or of every node of an untyped ``CSCGraph``
    (``key`` ``None``: the one relation). O(E) for a typed graph."""
    if key is None:
        return np.asarray(graph.in_degrees, dtype=np.int64)
    et = graph.edge_types[graph.edge_type_id(key)]
    _, dst = graph.edges_of(et)
    return np.bincount(dst, minlength=graph.num_nodes_of(et[2])).astype(np.int64)
