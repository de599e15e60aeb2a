"""``SamplingMethod``: how a sampler picks each destination's neighbours.

A frozen, validated value object (no torch, no numba). ``method=`` of ``Sampler.from_graph``
takes one; ``None`` or ``SamplingMethod()`` is uniform sampling.

==========  ===============================================================================
kind        what is sampled
==========  ===============================================================================
uniform     every ``min(fanout, degree)``-subset of in-edges equally likely (i.i.d. draws with
            ``replace=True``)
weighted    probability proportional to a non-negative per-edge weight. Without replacement:
            successive draws without replacement (the exponential-keys / A-Res scheme of
            Efraimidis and Spirakis: the ``k`` smallest ``E_j / w_j``, ``E_j ~ Exp(1)``);
            with replacement: i.i.d. draws. Zero-weight edges are never drawn; a destination
            whose weights are all zero gets no neighbours. A mask is weights of 0 and 1.
labor       LABOR-0 (Balin and Catalyurek, NeurIPS 2023): one uniform variate ``r_t`` per source
            node and layer (a 32-bit hash of the node id keyed by seed, epoch, batch and layer),
            shared by every destination; edge ``t -> s`` is kept when
            ``r_t < min(1, fanout / deg(s))``, so each destination keeps ``fanout`` in-edges in
            expectation. ``layer_dependency=True`` uses the same variates
            in every layer. ``Block.edge_weight`` holds ``1 / (deg(s) * pi_ts)`` with
            ``pi_ts = min(1, fanout / deg(s))``: summing ``edge_weight * h_t`` over a
            destination's sampled edges is an unbiased estimate of the mean of its in-neighbours'
            ``h`` (Horvitz-Thompson). ``variates`` picks how ``r_t`` is drawn:
            ``"iid"``: a fresh hash of the node id per batch and layer (the paper's LABOR-0;
            every in-edge of every destination is read, O(degree)); ``"rotated"`` (default):
            ``r_t = frac(b_t + shift)`` with ``b_t`` a fixed seeded uniform per node (drawn once
            per sampler seed) and ``shift`` one uniform per seed, epoch, batch and layer (the
            same in every layer with ``layer_dependency``). For any fixed ``b`` the variates
            are still shared by every destination of a layer and each edge's inclusion
            probability over the shift is exactly ``min(1, fanout / deg(s))`` (so the same
            weights are unbiased); with each in-neighbour list sorted by ``b`` once, the kept
            sources are one circular arc of it: two binary searches and a copy,
            O(log degree + fanout). Its weakness: ``b`` does not change between batches, so a
            destination sees at most ``2 deg(s)`` distinct neighbour subsets (its arcs); the
            count per destination is the number of ``b`` values in an arc (random, mean
            ``fanout``) as in LABOR-0.
temporal    only in-edges whose time is ``<=`` the destination's time (``<`` with
            ``strict=True``) are eligible; the time of an edge is its edge time, its source
            node's time, or the later of the two when both are given (both must pass). ``strategy="uniform"``: a
            uniform subset of the eligible edges; ``"last"``: the ``fanout`` most recent ones
            (ties: the later stored edge). Seeds' times: ``sample(..., seed_times=)``, by
            default the seeds' node times. Propagation: a sampled node's time is the minimum of
            the times of the destinations that sampled it (and its own when it is itself a
            destination), i.e. the seed's time passed down as in PyG and GraphBolt, taking the
            earliest when seeds of one batch share a node, so no seed sees edges after its time.
==========  ===============================================================================

Where the arrays come from: the method names them, :meth:`SamplingMethod.bind` attaches them.

- ``weights``: ``"graph"`` (default) is ``CSCGraph.weights`` (a dataset's ``graph/weights.npy``,
  written by ``graphfeed prepare generic --weight-col/--weight-key``); any other name is an edge
  feature of the dataset (one row per stored edge, in ``indices`` order).
- ``node_times`` / ``edge_times``: the node feature / edge feature holding the times; ``None``
  (default) takes the one named ``"timestamp"`` when the dataset has it.

``method.bind(dataset)`` returns the method with those arrays attached (``bind({"weights": a})``
attaches arrays directly, under the keys ``weights``, ``node_times``, ``edge_times``). Samplers
check the arrays when built: weights finite and ``>= 0`` with one per edge; times int64 or float
(finite), one per node / edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional

from ..datasets.schema import TIME_FEATURE  # the feature name the importer gives times
from ..errors import GraphfeedError

__all__ = ["SamplingMethod", "KINDS", "TEMPORAL_STRATEGIES", "LABOR_VARIATES", "resolve_method"]

KINDS = ("uniform", "weighted", "labor", "temporal")
TEMPORAL_STRATEGIES = ("uniform", "last")
LABOR_VARIATES = ("iid", "rotated")
#: array keys of :meth:`SamplingMethod.bind`
ARRAY_KEYS = ("weights", "node_times", "edge_times")


@dataclass(frozen=True)
class SamplingMethod:
    """How neighbours are picked (see the module docstring for every kind).

    - ``kind``: ``"uniform"``, ``"weighted"``, ``"labor"`` or ``"temporal"``.
    - ``weights`` (weighted): ``"graph"`` or an edge feature name.
    - ``layer_dependency`` (labor): the same per-node variates in every layer.
    - ``variates`` (labor): ``"rotated"`` (default: a fixed per-node base rotated by a
      per-batch shift, O(log degree + fanout) per destination; measured 2-3x faster than
      ``"iid"`` on ``medium`` with the same input-node saving, see docs/benchmarks.md) or
      ``"iid"`` (fresh per batch: the paper's LABOR-0, O(degree)).
    - ``strategy`` (temporal): ``"uniform"`` or ``"last"``; ``strict``: only strictly earlier
      edges; ``node_times`` / ``edge_times``: feature names (``None``: ``"timestamp"`` if any).
    - ``arrays``: the attached arrays (:meth:`bind`); not part of equality or the repr.
    """

    kind: str = "uniform"
    weights: str = "graph"
    layer_dependency: bool = False
    variates: str = "rotated"
    strategy: str = "uniform"
    strict: bool = False
    node_times: Optional[str] = None
    edge_times: Optional[str] = None
    arrays: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise GraphfeedError(f"sampling method kind must be one of {', '.join(KINDS)}; "
                                 f"got {self.kind!r}")
        if self.strategy not in TEMPORAL_STRATEGIES:
            raise GraphfeedError(f"temporal strategy must be one of "
                                 f"{', '.join(TEMPORAL_STRATEGIES)}; got {self.strategy!r}")
        if self.variates not in LABOR_VARIATES:
            raise GraphfeedError(f"labor variates must be one of {', '.join(LABOR_VARIATES)}; "
                                 f"got {self.variates!r}")
        for name in ("layer_dependency", "strict"):
            if not isinstance(getattr(self, name), bool):
                raise GraphfeedError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not isinstance(self.weights, str) or not self.weights:
            raise GraphfeedError(f"weights must be 'graph' or an edge feature name, got {self.weights!r}")
        for name in ("node_times", "edge_times"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, str) or not v):
                raise GraphfeedError(f"{name} must be a feature name or None, got {v!r}")
        bad = set(self.arrays) - set(ARRAY_KEYS)
        if bad:
            raise GraphfeedError(f"arrays keys must be among {ARRAY_KEYS}, got {sorted(bad)}")
        object.__setattr__(self, "arrays", dict(self.arrays))

    @property
    def is_uniform(self) -> bool:
        return self.kind == "uniform"

    def describe(self) -> str:
        """A short text for logs and reports (``"weighted (graph)"``, ``"temporal last"``)."""
        if self.kind == "weighted":
            return f"weighted ({self.weights})"
        if self.kind == "labor":
            return (f"labor {self.variates}"
                    + (" (layer dependency)" if self.layer_dependency else ""))
        if self.kind == "temporal":
            return f"temporal {self.strategy}" + (" strict" if self.strict else "")
        return "uniform"

    # ------------------------------------------------------------------ arrays
    def bind(self, source) -> "SamplingMethod":
        """This method with its arrays attached from ``source``: a ``Dataset`` (its graph
        weights, edge features and node features, looked up by the names above) or a mapping
        with keys among ``weights``, ``node_times``, ``edge_times``. A missing array is a
        ``GraphfeedError`` naming the dataset and how to add it."""
        if isinstance(source, Mapping):
            return replace(self, arrays={**self.arrays, **source})
        return replace(self, arrays={**self.arrays, **self._from_dataset(source)})

    def _from_dataset(self, ds) -> dict:
        name = getattr(ds, "name", "?")
        edge = dict(getattr(ds, "edge_features", {}) or {})
        arrays = getattr(ds, "arrays", None)
        node = dict(arrays.node_features) if arrays is not None else {}
        out: dict = {}
        if self.kind == "weighted":
            if self.weights == "graph":
                w = ds.graph.weights
                if w is None and "weight" in edge:
                    w = edge["weight"]
                if w is None:
                    raise GraphfeedError(
                        f"--sampler weighted: dataset {name!r} has no edge weights; add them with "
                        f"'graphfeed prepare generic --weight-col N' (text edges) or "
                        f"'--weight-key KEY' (.npz), or name an edge feature with --weight-feature")
                out["weights"] = w
            else:
                if self.weights not in edge:
                    raise GraphfeedError(
                        f"--weight-feature {self.weights!r}: dataset {name!r} has no such edge "
                        f"feature; it has {sorted(edge) or 'none'}")
                out["weights"] = edge[self.weights]
        elif self.kind == "temporal":
            for key, given, pool, what in (("node_times", self.node_times, node, "node"),
                                           ("edge_times", self.edge_times, edge, "edge")):
                if given is not None and given not in pool:
                    raise GraphfeedError(
                        f"--{what}-times {given!r}: dataset {name!r} has no {what} feature "
                        f"{given!r}; it has {sorted(pool) or 'none'}")
                pick = given if given is not None else TIME_FEATURE
                if pick in pool:
                    out[key] = pool[pick]
            if not out:
                raise GraphfeedError(
                    f"--sampler temporal: dataset {name!r} has no node or edge times; add edge "
                    f"times with 'graphfeed prepare generic --time-col N' (or --time-key) and node "
                    f"times with '--node-times PATH'")
        return out


def resolve_method(method) -> SamplingMethod:
    """``method`` as a ``SamplingMethod``: ``None`` is uniform, a kind name is that kind with
    its defaults; anything else is a ``GraphfeedError``."""
    if method is None:
        return SamplingMethod()
    if isinstance(method, str):
        return SamplingMethod(kind=method)
    if not isinstance(method, SamplingMethod):
        raise GraphfeedError(f"method must be a SamplingMethod, a kind name or None, "
                             f"got {type(method).__name__}")
    return method


@dataclass(frozen=True)
class MethodArrays:
    """The checked arrays a sampler reads for a method (numpy, CPU; ``None`` when unused):
    ``weights`` float32/float64 ``(E,)``, ``node_times`` ``(N,)`` and ``edge_times`` ``(E,)``
    of one dtype, int64 or float64."""

    weights: Any = None
    node_times: Any = None
    edge_times: Any = None

    @property
    def time_dtype(self):
        t = self.node_times if self.node_times is not None else self.edge_times
        return None if t is None else t.dtype


def method_arrays(method: SamplingMethod, graph, sampler: str) -> MethodArrays:
    """Check and return the arrays ``method`` needs on ``graph`` (O(E) once, when a sampler is
    built). ``sampler`` names the sampler in errors. Weights: ``method.arrays['weights']``, else
    ``graph.weights`` for ``weights="graph"``; times: ``method.arrays`` (see :meth:`bind`)."""
    import numpy as np

    if method.kind == "weighted":
        w = method.arrays.get("weights")
        if w is None and method.weights == "graph":
            w = graph.weights
        if w is None:
            what = ("the graph has no weights" if method.weights == "graph"
                    else f"edge feature {method.weights!r} is not attached")
            raise GraphfeedError(
                f"{sampler}: weighted sampling needs edge weights, but {what}; build the graph "
                f"with weights, or attach them with SamplingMethod.bind(dataset)")
        w = _array("weights", w, (graph.num_edges,), "one per edge")
        if w.dtype.kind != "f":
            w = w.astype(np.float64)
        elif w.dtype not in (np.float32, np.float64):
            w = w.astype(np.float32)
        bad = ~(np.isfinite(w) & (w >= 0))
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise GraphfeedError(f"{sampler}: weights[{pos}] = {w[pos]!r}; edge weights must be "
                                 f"finite and >= 0")
        return MethodArrays(weights=_readonly(w))
    if method.kind == "temporal":
        nt = method.arrays.get("node_times")
        et = method.arrays.get("edge_times")
        if nt is None and et is None:
            raise GraphfeedError(
                f"{sampler}: temporal sampling needs node and/or edge times; attach them with "
                f"SamplingMethod.bind(dataset) (features named 'timestamp') or "
                f"bind({{'node_times': ..., 'edge_times': ...}})")
        out = {}
        for key, a, n, what in (("node_times", nt, graph.num_nodes, "one per node"),
                                ("edge_times", et, graph.num_edges, "one per edge")):
            if a is None:
                continue
            a = _array(key, a, (n,), what)
            a = a.astype(np.float64 if a.dtype.kind == "f" else np.int64, copy=False)
            if a.dtype.kind == "f" and not np.isfinite(a).all():
                pos = int(np.flatnonzero(~np.isfinite(a))[0])
                raise GraphfeedError(f"{sampler}: {key}[{pos}] = {a[pos]!r}; times must be finite")
            out[key] = a
        if len(out) == 2 and out["node_times"].dtype != out["edge_times"].dtype:
            out = {k: v.astype(np.float64) for k, v in out.items()}
        return MethodArrays(**{k: _readonly(v) for k, v in out.items()})
    return MethodArrays()


def _array(name: str, a, shape: tuple, what: str):
    import sys

    import numpy as np

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.shape != shape:
        raise GraphfeedError(f"{name} must have shape {shape} ({what}), got {a.shape}")
    if a.dtype.kind not in "fiu":
        raise GraphfeedError(f"{name} must be numbers (int or float), got dtype {a.dtype}")
    return a


def _readonly(a):
    import numpy as np

    a = np.ascontiguousarray(a).view(np.ndarray)
    a.flags.writeable = False
    return a
