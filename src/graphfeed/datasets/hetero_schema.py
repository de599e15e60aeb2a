"""The schema of the optional ``hetero`` section of ``graphfeed.json`` (see
:mod:`graphfeed.datasets.hetero` for the layout). Imports nothing of the schema module, which
parses the section through :func:`parse_hetero` with its own parsing context."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

EDGE_TYPE_PATH = "graph/edge_type.npy"
MAX_TYPES = 10_000


def type_feature_path(ntype: str, name: str) -> str:
    return f"node_features/{ntype}/{name}.npy"


def type_feature_role(ntype: str, name: str) -> str:
    return f"hetero.node_features.{ntype}.{name}"


@dataclass(frozen=True)
class HeteroSpec:
    node_types: tuple
    node_counts: tuple
    edge_types: tuple
    edge_type: str
    node_features: dict = field(default_factory=dict)  # type -> name -> ArraySpec
    target_type: Optional[str] = None

    @property
    def node_offsets(self) -> np.ndarray:
        out = np.zeros(len(self.node_counts) + 1, dtype=np.int64)
        np.cumsum(self.node_counts, out=out[1:])
        return out

    def to_json(self) -> dict:
        d = {
            "node_types": list(self.node_types),
            "node_counts": list(self.node_counts),
            "edge_types": [list(e) for e in self.edge_types],
            "edge_type": self.edge_type,
            "node_features": {t: {k: v.to_json() for k, v in f.items()}
                              for t, f in self.node_features.items()},
        }
        if self.target_type is not None:
            d["target_type"] = self.target_type
        return d

    def paths(self) -> dict:
        out = {"hetero.edge_type": self.edge_type}
        for t, feats in self.node_features.items():
            for k, v in feats.items():
                out[type_feature_role(t, k)] = v.path
        return out


def parse_hetero(raw, c, num_nodes: int, num_edges: int) -> HeteroSpec:
    """The ``hetero`` section, checked (``c``: the schema's parsing context, whose errors name
    the file and key): type names valid and distinct, counts adding up to ``num_nodes``, edge
    types naming existing node types, per-type features and the target type existing."""
    d = c.obj(raw, "hetero", ("node_types", "node_counts", "edge_types", "edge_type"),
              ("node_features", "target_type"))
    nts, cnts, ets = d["node_types"], d["node_counts"], d["edge_types"]
    for key, v in (("node_types", nts), ("node_counts", cnts), ("edge_types", ets)):
        if not isinstance(v, list) or not v or len(v) > MAX_TYPES:
            raise c.err(f"hetero.{key}", f"expected a non-empty list (at most {MAX_TYPES}), "
                                         f"got {type(v).__name__}")
    nts = tuple(c.name(t, f"hetero.node_types[{i}]") for i, t in enumerate(nts))
    if len(set(nts)) != len(nts):
        raise c.err("hetero.node_types", f"names repeat: {list(nts)}")
    if len(cnts) != len(nts):
        raise c.err("hetero.node_counts", f"{len(cnts)} counts for {len(nts)} node types")
    cnts = tuple(c.int_(x, f"hetero.node_counts[{i}]") for i, x in enumerate(cnts))
    if sum(cnts) != num_nodes:
        raise c.err("hetero.node_counts", f"add up to {sum(cnts)}, num_nodes is {num_nodes}")
    out_ets = []
    for i, et in enumerate(ets):
        where = f"hetero.edge_types[{i}]"
        if not isinstance(et, list) or len(et) != 3:
            raise c.err(where, "expected [src_type, relation, dst_type]")
        s, r, t = (c.name(x, where) for x in et)
        for side, x in (("source", s), ("destination", t)):
            if x not in nts:
                raise c.err(where, f"{side} node type {x!r} is not one of node_types {list(nts)}")
        out_ets.append((s, r, t))
    if len(set(out_ets)) != len(out_ets):
        raise c.err("hetero.edge_types", "an edge type is listed twice")
    feats_raw = d.get("node_features", {})
    if not isinstance(feats_raw, dict):
        raise c.err("hetero.node_features", "expected a JSON object of node type -> features")
    feats = {}
    for t, fs in feats_raw.items():
        if t not in nts:
            raise c.err("hetero.node_features", f"node type {t!r} is not one of {list(nts)}")
        if not isinstance(fs, dict):
            raise c.err(f"hetero.node_features.{t}", "expected a JSON object of name -> array")
        feats[t] = {c.name(k, f"hetero.node_features.{t} key"):
                    c.array(v, f"hetero.node_features.{t}.{k}") for k, v in fs.items()}
    target = d.get("target_type")
    if target is not None and target not in nts:
        raise c.err("hetero.target_type", f"{target!r} is not one of node_types {list(nts)}")
    return HeteroSpec(nts, cnts, tuple(out_ets), c.path(d["edge_type"], "hetero.edge_type"),
                      feats, target)
