"""The optional ``hetero`` section of a dataset: node and edge types over the fused graph.

A heterogeneous dataset is an ordinary dataset whose graph is the fused CSC of a
:class:`~graphfeed.graph.hetero.HeteroGraph` (global ids, type ``t`` owning ``[offset[t],
offset[t + 1])``), plus::

    "hetero": {
      "node_types": ["paper", "author", "field"],
      "node_counts": [1000, 600, 40],                     # offsets are their prefix sums
      "edge_types": [["author", "writes", "paper"], ...],  # relation id = position
      "edge_type": "graph/edge_type.npy",                  # int8/16/32, one per stored edge
      "node_features": {"paper": {"feat": {"path": ..., "dtype": ..., "shape": [1000, 64]}}},
      "target_type": "paper"                               # the type the splits and labels are of
    }

Per-type features have one row per node of their type (type-local ids). The labels stay the
top-level ``task.target`` feature, one row per global id (nodes of other types hold ``-1``), and
split ids are global ids of ``target_type``, so every reader of a homogeneous dataset still
reads the fused graph, labels and splits. Readers older than this section refuse the file
(unknown top-level key), which is right: they would train on the graph as if it had one type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from ..errors import DatasetError
from .hetero_schema import EDGE_TYPE_PATH, HeteroSpec, type_feature_path, type_feature_role
from .schema import bits_dtype, check_name

__all__ = ["HeteroSpec", "load_hetero", "HeteroParts", "open_hetero"]

def load_hetero(root: Path, meta, open_array, check_spec, full: bool, arrays) -> dict:
    """Open and check the arrays of the ``hetero`` section: ``{"edge_type": array,
    "node_features": {type: {name: array}}}``. ``open_array(rel, role)`` and
    ``check_spec(arr, spec, path, rows, word)`` are the folder loader's. With ``full``, the
    O(N + E) checks: relation ids in range and sorted within each destination's in-edges,
    endpoint types matching the relation, split ids of the target type."""
    h = meta.hetero
    paths = arrays["paths"]
    et = open_array(h.edge_type, "hetero.edge_type")
    p = paths["hetero.edge_type"]
    if et.ndim != 1 or et.dtype not in (np.int8, np.int16, np.int32):
        raise DatasetError(f"{p}: edge types must be a 1-D int8/int16/int32 array, got "
                           f"{et.dtype} {et.shape}")
    if et.shape[0] != meta.graph.num_edges:
        raise DatasetError(f"{p}: holds {et.shape[0]} edge types, metadata says num_edges = "
                           f"{meta.graph.num_edges}")
    feats = {}
    for t, fs in h.node_features.items():
        n_t = h.node_counts[h.node_types.index(t)]
        feats[t] = {}
        for name, spec in fs.items():
            role = type_feature_role(t, name)
            arr = open_array(spec.path, role)
            check_spec(arr, spec, paths[role], n_t, f"node of type {t!r}")
            feats[t][name] = arr
    if full:
        from ..graph.hetero import HeteroGraph
        from ..graph.csc import CSCGraph

        csc = CSCGraph(arrays["indptr"], arrays["indices"], trusted=True)
        try:
            HeteroGraph(csc, h.node_types, np.array(h.node_counts, dtype=np.int64),
                        h.edge_types, et, source=str(p))
        except DatasetError:
            raise
        except Exception as e:  # noqa: BLE001 - any other refusal, named by file
            raise DatasetError(f"{p}: {e}") from None
        if h.target_type is not None:
            off = h.node_offsets
            t = h.node_types.index(h.target_type)
            lo, hi = int(off[t]), int(off[t + 1])
            for name, sets in arrays["splits"].items():
                for i, ids in enumerate(sets):
                    a = np.asarray(ids)
                    bad = np.flatnonzero((a < lo) | (a >= hi))
                    if bad.size:
                        where = [r for r, q in paths.items() if r.startswith(f"splits.{name}")]
                        raise DatasetError(
                            f"{paths[where[min(i, len(where) - 1)]]}: split {name!r} id "
                            f"{int(a[bad[0]])} (position {int(bad[0])}) is not a node of the "
                            f"target type {h.target_type!r} (global ids [{lo}, {hi}))")
    return {"edge_type": et, "node_features": feats}


class HeteroParts:
    """What ``write_dataset(..., hetero=HeteroParts(...))`` writes besides the fused graph:
    the type metadata and per-edge relation ids of ``graph`` (a ``HeteroGraph``), the per-type
    features (node type -> name -> array with one row per node of that type) and the target
    type."""

    def __init__(self, graph, type_features: Optional[Mapping] = None,
                 target_type: Optional[str] = None):
        from ..graph.hetero import HeteroGraph

        if not isinstance(graph, HeteroGraph):
            raise DatasetError(f"hetero: graph must be a HeteroGraph, got {type(graph).__name__}")
        self.graph = graph
        self.type_features = {t: dict(f) for t, f in (type_features or {}).items()}
        for t in self.type_features:
            graph.type_id(t)
        if target_type is not None:
            graph.type_id(target_type)
        self.target_type = target_type

    def write(self, writer, to_numpy, feature_spec) -> HeteroSpec:
        g = self.graph
        writer.save_array(EDGE_TYPE_PATH, np.asarray(g.edge_type))
        specs = {}
        for t, fs in self.type_features.items():
            check_name(t, "hetero node type")
            specs[t] = {}
            for name, arr in fs.items():
                check_name(name, f"hetero feature of {t!r}")
                arr, dt = to_numpy(arr, f"feature {name!r} of node type {t!r}")
                rel = type_feature_path(t, name)
                specs[t][name] = feature_spec(name, arr, rel, dt)
                writer.save_array(rel, arr)
        counts = tuple(int(x) for x in np.diff(g.node_offsets))
        return HeteroSpec(g.node_types, counts, g.edge_types, EDGE_TYPE_PATH, specs,
                          self.target_type)


def open_hetero(dataset, graph_checked: bool):
    """``(HeteroGraph over the dataset's fused graph, {type: {name: InMemoryFeature}})``."""
    from ..features.memory import InMemoryFeature
    from ..graph.hetero import HeteroGraph

    h = dataset.metadata.hetero
    loaded = dataset.arrays.hetero
    graph = HeteroGraph(dataset.graph, h.node_types, np.array(h.node_counts, dtype=np.int64),
                        h.edge_types, loaded["edge_type"], trusted=graph_checked,
                        source=str(dataset.arrays.paths["hetero.edge_type"]))
    feats = {t: {k: InMemoryFeature(a, dtype=bits_dtype(h.node_features[t][k]))
                 for k, a in fs.items()}
             for t, fs in loaded["node_features"].items()}
    return graph, feats
