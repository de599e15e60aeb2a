"""``GraphfeedSampler``: a PyG ``BaseSampler`` that samples with graphfeed, so that PyG's own
``NodeLoader``/``LinkLoader`` (and ``NeighborLoader``/``LinkNeighborLoader`` given it as
``neighbor_sampler``/``link_sampler``) build their ``Data``/``HeteroData`` batches without
pyg-lib or torch-sparse.

What it does per batch:

1. **seeds**: node seeds go to the graphfeed node sampler (``NeighborSampler``, or the typed
   ``HeteroNeighborSampler``, or any registered one); seed edges to graphfeed's
   ``LinkSampler`` around it (negatives drawn by graphfeed, see below);
2. **layers**: graphfeed samples message-flow blocks, ``fanouts`` in GraphBolt order (last
   layer first): :func:`graphfeed_fanouts` reverses PyG's ``num_neighbors`` (hop 1 first);
3. **PyG's subgraph**: a block samples every destination of its layer, the seeds again in the
   deeper layers; PyG samples each node once, at the hop that reached it. The output keeps,
   per hop ``h``, only the edges into the nodes first reached at hop ``h - 1`` (and only the
   nodes those edges reach), ordered seeds first, then hop by hop: PyG's ``node``/``row``/
   ``col`` with ``num_sampled_nodes``/``num_sampled_edges`` per hop, so each node has at most
   its hop's fanout of in-edges and ``trim_to_layer`` works. O(sampled nodes + edges) torch ops.

Randomness is graphfeed's: a pure function of ``(seed, epoch, batch)``, where the batch is
keyed by its input ids (``input_id``: the positions the loader drew), never by global RNG
state. The same seed and the same batches give the same subgraphs in any worker, thread or
run; :meth:`GraphfeedSampler.set_epoch` gives another epoch other neighbourhoods for the same
batch (PyG's loaders do not call it: call it each epoch, before iterating).

Negatives (``neg_sampling``): ``k = ceil(amount)`` uniform destinations per seed edge sharing
its source (graphfeed's and GraphBolt's corrupted-destination negatives; never the pair's own
destination); "binary" keeps the first ``ceil(P * amount)`` of them, one per pair in turn
(PyG's binary sampler corrupts both ends instead), "triplet" gives ``dst_neg_index`` of
``(P, k)``. Seed edges stay in the sampled graph unless ``exclude="self"``/``"reverse"``.
"""

from __future__ import annotations

import math
import re
from typing import Mapping, Optional

import numpy as np
import torch

from . import _require  # noqa: F401  (PyG, or a message naming the extra)
from torch_geometric.sampler import (BaseSampler, EdgeSamplerInput, HeteroSamplerOutput,
                                     NegativeSampling, NodeSamplerInput, SamplerOutput)

from ..errors import GraphfeedError
from ..graph.csc import CSCGraph
from ..graph.from_pyg import csc_perm, hetero_perm, pyg_kind
from ..graph.hetero import HeteroGraph
from ..sampling import build_sampler
from ..sampling._common import check_one_order, reverse_hops
from ._options import (PygOptions, install_loader_checks, pyg_method, refuse_unsupported,
                       resolve_subgraph_type)
from ._subgraph import disjoint_output, induced_edges

__all__ = ["GraphfeedSampler", "graphfeed_fanouts"]

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def graphfeed_fanouts(num_neighbors):
    """graphfeed's ``fanouts`` (GraphBolt order: ``fanouts[0]`` is the input layer, the last
    entry the seeds' layer) of PyG's ``num_neighbors`` (hop 1, the seeds' neighbours, first):
    a list reversed, or a dict edge type -> list with every list reversed (keys: triples or
    PyG's ``"src__rel__dst"`` strings); a PyG ``NumNeighbors`` is read through its values
    (its ``default`` fills the edge types it leaves out: pass ``graph`` types with it)."""
    from torch_geometric.sampler.base import NumNeighbors

    default = None
    if isinstance(num_neighbors, NumNeighbors):
        default, num_neighbors = num_neighbors.default, num_neighbors.values
    out = reverse_hops(num_neighbors)
    if default is None or not isinstance(out, Mapping):
        return out
    return out, reverse_hops(default, name="default")


def _content_key(ids: torch.Tensor) -> int:
    """A 64-bit key of a batch's ids, order included (splitmix64 of each (position, id),
    xor-folded): the ``batch_index`` of graphfeed's counters, the same in any process."""
    a = ids.detach().cpu().numpy().astype(np.int64).view(np.uint64)
    if a.size == 0:
        return 0
    with np.errstate(over="ignore"):
        z = a * np.uint64(0x9E3779B97F4A7C15) + (np.arange(1, a.size + 1, dtype=np.uint64)
                                                 * np.uint64(0xBF58476D1CE4E5B9))
        z ^= z >> np.uint64(30)
        z *= np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return int(np.bitwise_xor.reduce(z) & _M64)


class GraphfeedSampler(BaseSampler):
    """A PyG ``BaseSampler`` backed by graphfeed's samplers (see the module docstring).

    - ``data``: a PyG ``Data``/``HeteroData`` (its graph is built once, O(E log E) with the
      edge permutation that maps graphfeed's edge ids back to PyG's), a
      ``(feature_store, graph_store)`` pair or a graph store from
      :func:`graphfeed.pyg.from_dataset`, a graphfeed ``Dataset``, ``CSCGraph`` or
      ``HeteroGraph``.
    - ``num_neighbors``: PyG's, hop 1 first (a list, or a dict edge type -> list on a typed
      graph; ``-1``: every neighbour; in a dict, ``0``: not sampled); or ``fanouts=`` instead,
      the same in graphfeed's order (input layer first, as graphfeed's samplers and ``graphfeed
      train --fanouts`` take it). Exactly one of the two (both: ``GraphfeedError``, a
      ``ValueError``).
    - ``method``: a ``graphfeed.sampling.SamplingMethod`` or kind name: ``"uniform"``,
      ``"weighted"``, ``"labor"``, ``"temporal"`` (typed graphs: uniform). Its arrays come from
      a ``Dataset`` (``method.bind``), or from a PyG ``Data``'s ``weight_attr`` (edge weights)
      and ``time_attr`` (node or edge times), which also choose ``"weighted"``/``"temporal"``
      when ``method`` is not given, as in PyG's ``NeighborSampler``. Seed times:
      ``NodeLoader(input_time=)``, ``LinkLoader(edge_label_time=)``. LABOR's importance
      weights have no field in PyG's batch and are dropped.
    - ``replace``, ``seed``: graphfeed's; ``sampler``: a ``graphfeed.sampling.SAMPLERS`` name
      (default ``"neighbor"``, typed ``"hetero"``), built on ``device`` with ``options``.
    - link seeds: ``exclude`` (``"none"``, ``"self"``, ``"reverse"``; typed ``"reverse"`` needs
      ``reverse_edge_types``) and ``negatives`` (``"uniform"`` or ``"per_source"``) are
      ``LinkSampler``'s.
    - PyG's ``NeighborSampler`` options (what ``NeighborLoader`` would have passed on):
      ``subgraph_type`` (``"directional"``, the default; ``"bidirectional"``: PyG's own
      ``SamplerOutput.to_bidirectional``; ``"induced"``: every stored edge between the sampled
      nodes, homogeneous graphs, not with ``exclude``), ``disjoint=True`` (one subgraph per
      seed node or seed edge, PyG's ``batch`` vector; homogeneous graphs), ``directed=False``
      (PyG's deprecated ``"induced"``), ``temporal_strategy`` (the temporal method's
      ``strategy``), ``is_sorted`` (accepted: it spares PyG a sort, graphfeed sorts anyway).
      ``share_memory=True`` and ``sample_direction="backward"`` are refused by name, as is
      any keyword neither this class nor the graphfeed sampler takes.

    Batches are on the CPU with the CPU samplers; ``edge`` holds graphfeed's edge ids (CSC
    positions), :attr:`edge_permutation` maps them to PyG's for ``Data``/``HeteroData`` input.
    Building one also makes PyG's ``NeighborLoader``/``LinkNeighborLoader`` refuse, by name,
    their own sampling options that differ from this sampler's (they would drop them:
    ``graphfeed.pyg._options``).
    """

    def __init__(self, data, num_neighbors=None, *, fanouts=None, method=None,
                 replace: bool = False, seed: int = 0, sampler: Optional[str] = None,
                 device="cpu", exclude: str = "none", negatives: str = "uniform",
                 reverse_edge_types=None, weight_attr: Optional[str] = None,
                 time_attr: Optional[str] = None, subgraph_type="directional",
                 disjoint: bool = False, temporal_strategy: Optional[str] = None,
                 is_sorted: bool = False, share_memory: bool = False, directed: bool = True,
                 sample_direction: str = "forward", **options):
        # checked before the graph is built (O(E log E) for a Data): a wrong call fails fast
        check_one_order(fanouts, num_neighbors, "GraphfeedSampler")
        install_loader_checks(GraphfeedSampler)
        refuse_unsupported(share_memory=share_memory, sample_direction=sample_direction)
        subgraph_type = resolve_subgraph_type(subgraph_type, directed)
        disjoint = bool(disjoint)
        if disjoint and subgraph_type == "induced":
            raise GraphfeedError("GraphfeedSampler: disjoint=True with subgraph_type='induced' is "
                                 "not supported (nor by PyG): choose one")
        if subgraph_type == "induced" and exclude != "none":
            raise GraphfeedError(f"GraphfeedSampler: subgraph_type='induced' would bring back the "
                                 f"seed edges exclude={exclude!r} removes: choose one")
        del is_sorted  # a promise about the input's order; graphfeed's CSC build sorts anyway
        method = pyg_method(method, weight_attr, time_attr, temporal_strategy)
        graph, perm, method = _resolve(data, method, weight_attr, time_attr)
        self.graph = graph
        self.is_hetero = isinstance(graph, HeteroGraph)
        if self.is_hetero and (disjoint or subgraph_type == "induced"):
            what = "disjoint=True" if disjoint else "subgraph_type='induced'"
            raise GraphfeedError(f"GraphfeedSampler: {what} is for homogeneous graphs; on a "
                                 f"typed graph use subgraph_type 'directional' or 'bidirectional'")
        if num_neighbors is None:  # graphfeed's order already; num_neighbors is shown in PyG's
            num_neighbors = reverse_hops(fanouts, name="fanouts")
        else:
            fanouts = self._fanouts_of(num_neighbors)
        self.num_neighbors = num_neighbors
        self._fanouts = fanouts
        options.setdefault("return_edge_ids", True)
        kw = dict(device=device, replace=replace, seed=seed, **options)
        if not method.is_uniform:
            kw["method"] = method
        name = sampler or ("hetero" if self.is_hetero else "neighbor")
        try:
            self._node = build_sampler(name, graph, fanouts, **kw)
        except TypeError as e:  # a keyword the graphfeed sampler does not take
            bad = re.search(r"unexpected keyword argument '(\w+)'", str(e))
            if bad is None or bad.group(1) not in options:
                raise
            raise GraphfeedError(f"GraphfeedSampler: unknown option {bad.group(1)!r} (neither "
                                 f"GraphfeedSampler nor graphfeed's {name!r} sampler takes "
                                 f"it)") from None
        from ..sampling.link import EXCLUDE, NEGATIVES

        if exclude not in EXCLUDE:
            raise GraphfeedError(f"exclude must be one of {', '.join(EXCLUDE)}, got {exclude!r}")
        if negatives not in NEGATIVES:
            raise GraphfeedError(f"negatives must be one of {', '.join(NEGATIVES)}, got "
                                 f"{negatives!r}")
        if reverse_edge_types is not None and not self.is_hetero:
            raise GraphfeedError("reverse_edge_types is for typed graphs")
        self.seed = int(seed)
        self.exclude = exclude
        self.negatives = negatives
        self.reverse_edge_types = reverse_edge_types
        self.pyg_options = PygOptions(
            num_neighbors=num_neighbors, replace=bool(replace), subgraph_type=subgraph_type,
            disjoint=disjoint,
            temporal_strategy=method.strategy if method.kind == "temporal" else "uniform",
            time_attr=time_attr, weight_attr=weight_attr)
        self.epoch = 0
        self._perm = perm
        self._links: dict = {}
        self._maps = None  # the induced subgraph's node maps (_induced_maps)

    def _fanouts_of(self, num_neighbors):
        """graphfeed's fanouts of PyG's ``num_neighbors`` for this graph (a ``NumNeighbors``'
        ``default`` fills the edge types it leaves out)."""
        fanouts, default = graphfeed_fanouts(num_neighbors), None
        if isinstance(fanouts, tuple):  # a NumNeighbors with a default for the other types
            fanouts, default = fanouts
        if default is not None:
            given = fanouts
            if not self.is_hetero:
                raise GraphfeedError("num_neighbors: a dict is for typed graphs")
            fanouts = {et: given.get(et, default) for et in self.graph.edge_types}
        if isinstance(fanouts, Mapping) and not self.is_hetero:
            raise GraphfeedError("num_neighbors: a dict of edge types is for typed graphs; "
                                 "give a list (hop 1 first)")
        return fanouts

    def same_num_neighbors(self, num_neighbors) -> bool:
        """Whether PyG's ``num_neighbors`` (a list, dict or ``NumNeighbors``) samples as this
        sampler does (a loader's, checked against the sampler's)."""
        try:
            theirs = self._fanouts_of(num_neighbors)
        except (GraphfeedError, TypeError, AttributeError):
            return False
        if not self.is_hetero:
            return not isinstance(theirs, Mapping) and [int(f) for f in theirs] == [
                int(f) for f in self._fanouts]
        from ..sampling.hetero import resolve_hetero_fanouts

        try:
            return np.array_equal(resolve_hetero_fanouts(self.graph, theirs),
                                  resolve_hetero_fanouts(self.graph, self._fanouts))
        except GraphfeedError:
            return False

    def check_data(self, data, loader: str) -> None:
        """Refuse a PyG loader whose ``data`` has other nodes than the graph this sampler
        samples (the loader would join features of one graph to the ids of another)."""
        kind = pyg_kind(data)
        if kind == "data" and not self.is_hetero:
            theirs, ours = int(data.num_nodes), int(self.graph.num_nodes)
        elif kind == "hetero" and self.is_hetero:
            theirs = {t: int(data[t].num_nodes) for t in data.node_types}
            ours = {t: int(n) for t, n in self.graph.num_nodes_dict.items()}
        elif kind is not None:
            theirs, ours = ("typed" if kind == "hetero" else "homogeneous",
                            "typed" if self.is_hetero else "homogeneous")
        else:
            return  # a (feature store, graph store): PyG asks the stores, not the sampler
        if theirs != ours:
            raise GraphfeedError(f"{loader}: its data ({theirs} nodes) is not the graph its "
                                 f"neighbor_sampler samples ({ours} nodes): build "
                                 f"GraphfeedSampler over the loader's data")

    # ------------------------------------------------------------------ PyG interface
    @property
    def edge_permutation(self):
        """PyG edge id of each graphfeed edge id (``None`` when the graph is graphfeed's own:
        its edge ids are the dataset's edge-feature rows); a dict per edge type when typed."""
        if self._perm is None:
            return None
        if self.is_hetero:
            return {et: self._perm for et in self.graph.edge_types}
        return self._perm

    @property
    def subgraph_type(self) -> str:
        """PyG's ``subgraph_type``: ``"directional"``, ``"bidirectional"`` or ``"induced"``."""
        return self.pyg_options.subgraph_type

    @property
    def disjoint(self) -> bool:
        """PyG's ``disjoint``: one subgraph per seed node or seed edge (a ``batch`` vector)."""
        return self.pyg_options.disjoint

    def set_epoch(self, epoch: int) -> None:
        """Sample epoch ``epoch``'s neighbourhoods from now on (a batch's randomness is keyed by
        ``(seed, epoch, its input ids)``)."""
        self.epoch = int(epoch)

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs):
        """PyG's node sampling: the seeds ``index.node`` (type ``index.input_type`` on a typed
        graph) first in the output's nodes, in the order given."""
        key = _content_key(index.input_id if index.input_id is not None else index.node)
        if self.is_hetero:
            if index.input_type is None:
                raise GraphfeedError("a typed graph samples typed seeds: pass input_nodes as "
                                     "(node type, ids)")
            if index.time is not None:
                raise GraphfeedError("seed times need temporal sampling, which typed graphs "
                                     "do not have yet")
            mb = self._node.sample({index.input_type: index.node}, epoch=self.epoch,
                                   batch_index=key)
            out = _hetero_output(mb, self.graph)
        else:
            if index.input_type is not None:
                raise GraphfeedError(f"a homogeneous graph has no node type "
                                     f"{index.input_type!r}")
            seeds, times, roots = index.node, index.time, None
            if self.disjoint:  # one subgraph per seed: a seed given twice is sampled once
                seeds, times, roots = _distinct_seeds(seeds, times)
            kw = {} if times is None else {"seed_times": times}
            mb = self._node.sample(seeds, epoch=self.epoch, batch_index=key, **kw)
            out = _output(mb) if roots is None else disjoint_output(mb, roots)
        out = self._shape(out)
        out.metadata = (index.input_id, index.time)
        return out

    def sample_from_edges(self, index: EdgeSamplerInput,
                          neg_sampling: Optional[NegativeSampling] = None):
        """PyG's link sampling: the endpoints of the seed edges (and negatives) first in the
        output's nodes; ``metadata`` as PyG's ``LinkLoader`` reads it (binary:
        ``edge_label_index``, ``edge_label``, ``edge_label_time``; triplet: ``src_index``,
        ``dst_pos_index``, ``dst_neg_index``, ``seed_time``)."""
        key = _content_key(index.input_id if index.input_id is not None else index.row)
        mode, k, num_neg = _negatives(neg_sampling, int(index.row.numel()))
        pairs = torch.stack([index.row, index.col]).to(torch.int64)
        if self.is_hetero:
            et = index.input_type
            if et is None:
                raise GraphfeedError("a typed graph samples typed seed edges: pass "
                                     "edge_label_index as (edge type, (2, P) ids)")
            if index.time is not None:
                raise GraphfeedError("seed edge times need temporal sampling, which typed "
                                     "graphs do not have yet")
            et = self.graph.edge_types[self.graph.edge_type_id(tuple(et))]
            mb = self._link(k).sample({et: pairs}, epoch=self.epoch, batch_index=key)
            out = _hetero_output(mb, self.graph)
            # the endpoints are the seeds, which keep their local ids: the indices hold
            pair_index, neg_index = mb.pair_index[et], mb.neg_index[et]
        else:
            if index.input_type is not None:
                raise GraphfeedError(f"a homogeneous graph has no edge type "
                                     f"{index.input_type!r}")
            times = {} if index.time is None else {"pair_times": index.time}
            mb = self._link(k).sample(pairs, epoch=self.epoch, batch_index=key, **times)
            pair_index, neg_index = mb.pair_index, mb.neg_index
            if self.disjoint:
                roots, owner, metadata = _disjoint_link(index, mode, k, num_neg, pair_index,
                                                        neg_index)
                out = self._shape(disjoint_output(mb, roots, owner))
                out.metadata = metadata
                return out
            out = _output(mb)
        out = self._shape(out)
        out.metadata = _link_metadata(index, mode, k, num_neg, pair_index, neg_index)
        return out

    # ------------------------------------------------------------------ internals
    def _shape(self, out):
        """PyG's ``subgraph_type`` applied to a directional output: ``"induced"`` replaces the
        edges with every stored edge between the sampled nodes (per-hop edge counts then mean
        nothing: ``None``, as PyG gives them), ``"bidirectional"`` is PyG's own conversion."""
        if self.subgraph_type == "induced":
            g, maps = self.graph, self._induced_maps()
            node_map = None if maps is None else maps.acquire()
            try:
                row, col, edge = induced_edges(g.indptr, g.indices, _np(out.node), node_map)
            finally:
                if node_map is not None:
                    maps.release(node_map)
            t = torch.from_numpy
            out.row, out.col = t(row), t(col)
            out.edge = None if out.edge is None else t(edge)
            out.num_sampled_edges = None
        elif self.subgraph_type == "bidirectional":
            out = out.to_bidirectional()
        return out

    def _induced_maps(self):
        """The dense node maps of the induced subgraph's lookups (4 bytes per graph node, one
        per batch in flight, made on first use), or ``None`` on graphs whose map would pass
        the core's ``DENSE_MAP_MAX_BYTES`` (the lookups then search the sorted batch)."""
        from ..sampling._cpu_common import MapPool, choose_node_map

        if self._maps is None and choose_node_map(self.graph.num_nodes) == "dense":
            self._maps = MapPool(self.graph.num_nodes, "dense")
        return self._maps

    def _link(self, k: int):
        """The link sampler with ``k`` negatives per pair around the node sampler (cached)."""
        if k not in self._links:
            from ..sampling.link import LinkSampler

            rev = self.reverse_edge_types if self.is_hetero else None
            self._links[k] = LinkSampler(self._node, num_negatives=k, negatives=self.negatives,
                                         exclude=self.exclude, reverse_edge_types=rev,
                                         seed=self.seed)
        return self._links[k]

    def close(self) -> None:
        """Release the graphfeed sampler's threads (it stays usable)."""
        self._node.close()

    def __repr__(self) -> str:
        return (f"GraphfeedSampler({self._node!r}, num_neighbors={self.num_neighbors}, "
                f"epoch={self.epoch})")


# ---------------------------------------------------------------------- inputs
def _resolve(data, method, weight_attr, time_attr):
    """``(graph, edge permutation tensor or None, method with its arrays)``; ``method``: a
    ``SamplingMethod`` (:func:`graphfeed.pyg._options.pyg_method`)."""
    from ..datasets.format import Dataset
    from .stores import GraphfeedGraphStore

    if (weight_attr or time_attr) and pyg_kind(data) != "data":
        raise GraphfeedError("weight_attr and time_attr name attributes of a PyG Data; bind "
                             "other arrays with SamplingMethod.bind")
    if isinstance(data, (tuple, list)) and len(data) == 2:
        data = data[1]
    if isinstance(data, GraphfeedGraphStore):
        return data.graph, None, method
    if isinstance(data, Dataset):
        if not method.is_uniform:
            method = method.bind(data)
        return (data.hetero if data.hetero is not None else data.graph), None, method
    if isinstance(data, (CSCGraph, HeteroGraph)):
        return data, None, method
    kind = pyg_kind(data)
    if kind == "data":
        graph = CSCGraph.from_pyg(data)
        perm = csc_perm(data)
        arrays = {}
        if weight_attr:
            arrays["weights"] = _attr(data, weight_attr, "weight_attr", edge=True)[perm]
        if time_attr:
            if time_attr in data.node_attrs():
                arrays["node_times"] = _attr(data, time_attr, "time_attr")
            else:
                arrays["edge_times"] = _attr(data, time_attr, "time_attr", edge=True)[perm]
        if arrays:
            method = method.bind(arrays)
        return graph, torch.from_numpy(perm), method
    if kind == "hetero":
        graph = HeteroGraph.from_pyg(data)
        return graph, torch.from_numpy(hetero_perm(graph, data)), method
    if hasattr(data, "get_all_edge_attrs"):
        raise GraphfeedError(f"a {type(data).__name__} graph store cannot be sampled by "
                             f"graphfeed: use graphfeed.pyg.from_dataset's stores, or a Data")
    raise GraphfeedError(f"data must be a PyG Data/HeteroData, graphfeed's (feature store, "
                         f"graph store), a Dataset, CSCGraph or HeteroGraph; got "
                         f"{type(data).__name__}")


def _attr(data, name: str, what: str, edge: bool = False) -> np.ndarray:
    keys = data.edge_attrs() if edge else data.node_attrs()
    if name not in keys:
        kind = "edge" if edge else "node"
        raise GraphfeedError(f"{what}={name!r} is no {kind} attribute of the Data; it has "
                             f"{sorted(k for k in keys if k != 'edge_index')}")
    return data[name].detach().cpu().numpy().reshape(-1)


def _negatives(neg: Optional[NegativeSampling], num_pos: int) -> tuple:
    """``(mode, k per pair, negatives kept)`` of PyG's negative sampling option."""
    if neg is None:
        return None, 0, 0
    neg = NegativeSampling.cast(neg)
    # PyG 2.6+: src_weight/dst_weight; 2.4 and 2.5: one weight
    if any(getattr(neg, f, None) is not None for f in ("src_weight", "dst_weight", "weight")):
        raise GraphfeedError("graphfeed draws negative destinations uniformly: weighted "
                             "negatives (src_weight/dst_weight, weight) are not supported")
    k = max(1, math.ceil(neg.amount))
    if neg.is_triplet():
        return "triplet", k, num_pos * k
    return "binary", k, math.ceil(num_pos * neg.amount)


def _link_metadata(index: EdgeSamplerInput, mode, k: int, num_neg: int, pair_index,
                   neg_index) -> tuple:
    """PyG's ``metadata`` of a link batch from graphfeed's local pair and negative indices
    (``neg_index`` pair-major: pair ``i``'s negatives are columns ``i * k .. i * k + k - 1``)."""
    num_pos = int(pair_index.shape[1])
    time = index.time
    if mode == "triplet":
        dst_neg = neg_index[1].view(num_pos, k)
        return (index.input_id, pair_index[0], pair_index[1],
                dst_neg.squeeze(-1) if k == 1 else dst_neg, time)
    label = index.label
    if mode is None:
        return index.input_id, pair_index, label, time
    # binary: one negative per pair in turn (round j of every pair before round j + 1)
    by_round = neg_index.view(2, num_pos, k).transpose(1, 2).reshape(2, -1)[:, :num_neg]
    owner = torch.arange(num_neg) % max(num_pos, 1)
    if label is None:
        label = torch.ones(num_pos)
    label = torch.cat([label, label.new_zeros((num_neg,) + tuple(label.shape[1:]))])
    if time is not None:
        time = torch.cat([time, time[owner]])
    return index.input_id, torch.cat([pair_index, by_round], dim=1), label, time


def _distinct_seeds(seeds: torch.Tensor, times):
    """``(distinct seeds in first-seen order, their times, root of each given seed)``: a
    disjoint batch samples a seed given twice once and grows both subgraphs from it (its time:
    the earlier of the two, so neither sees a later edge)."""
    a = _np(seeds).astype(np.int64, copy=False)
    uniq, first, inverse = np.unique(a, return_index=True, return_inverse=True)
    if uniq.shape[0] == a.shape[0]:
        return seeds, times, np.arange(a.shape[0], dtype=np.int64)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(uniq.shape[0], dtype=np.int64)
    rank[by_first] = np.arange(uniq.shape[0])
    roots = rank[inverse.reshape(-1)]
    if times is not None:
        t = _np(times)
        earliest = np.full(uniq.shape[0], np.inf if t.dtype.kind == "f" else np.iinfo(
            t.dtype).max, dtype=t.dtype)
        np.minimum.at(earliest, roots, t)
        times = torch.from_numpy(earliest)
    return torch.from_numpy(a[first[by_first]]), times, roots


def _disjoint_link(index: EdgeSamplerInput, mode, k: int, num_neg: int, pair_index,
                   neg_index) -> tuple:
    """``(roots, pair of each root, metadata)`` of a disjoint link batch, laid out as PyG's
    ``edge_sample(disjoint=True)``: one subgraph per endpoint, binary: sources then
    destinations of the positives and then the negatives (``edge_label_index`` is
    ``arange(2 * (P + N)).view(2, -1)``); triplet: sources, positive destinations, then the
    negative destinations round by round. ``batch`` is the seed pair a subgraph belongs to (a
    negative's: the pair it was drawn for, one per pair in turn)."""
    num_pos = int(pair_index.shape[1])
    pos = _np(pair_index).astype(np.int64, copy=False)
    pairs = np.arange(num_pos, dtype=np.int64)
    if mode == "triplet":
        negs = _np(neg_index[1]).reshape(num_pos, k).T.reshape(-1)  # round-major
        roots = np.concatenate([pos[0], pos[1], negs])
        owner = np.concatenate([pairs, pairs, np.tile(pairs, k)])
        dst_neg = torch.arange(2 * num_pos, 2 * num_pos + num_pos * k).view(k, num_pos).t()
        metadata = (index.input_id, torch.arange(num_pos), torch.arange(num_pos, 2 * num_pos),
                    dst_neg.squeeze(-1) if k == 1 else dst_neg, index.time)
        return roots, owner, metadata
    _, eli, label, time = _link_metadata(index, mode, k, num_neg, pair_index, neg_index)
    ends = _np(eli).astype(np.int64, copy=False)
    roots = np.concatenate([ends[0], ends[1]])
    per_end = np.arange(ends.shape[1], dtype=np.int64) % max(num_pos, 1)
    owner = np.concatenate([per_end, per_end])
    eli = torch.arange(roots.shape[0]).view(2, -1)
    return roots, owner, (index.input_id, eli, label, time)


# ---------------------------------------------------------------------- outputs
def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _output(mb) -> SamplerOutput:
    """An untyped ``MiniBatch`` (node or link seeds) as PyG's ``SamplerOutput``: the
    edges of hop ``h`` kept only into the nodes first reached at hop ``h - 1`` (the module
    docstring, step 3); the seeds keep their local ids ``0..B-1``. In numpy, on the CPU:
    torch's indexing goes through its intra-op thread pool, which costs milliseconds per call
    on a busy machine."""
    blocks = mb.blocks
    if not blocks:
        empty = torch.zeros(0, dtype=torch.int64)
        return SamplerOutput(node=mb.seeds.cpu(), row=empty, col=empty, edge=None,
                             num_sampled_nodes=[int(mb.seeds.numel())], num_sampled_edges=[])
    nodes = _np(blocks[0].src_nodes)
    hop = np.full(nodes.shape[0], -1, dtype=np.int32)
    hop[: blocks[-1].num_dst] = 0
    rows, cols, eids = [], [], []
    for h, b in enumerate(reversed(blocks), start=1):
        ei = _np(b.edge_index)
        keep = hop[ei[1]] == h - 1
        r, c = ei[0][keep], ei[1][keep]
        hop[r[hop[r] < 0]] = h
        rows.append(r)
        cols.append(c)
        eids.append(None if b.edge_ids is None else _np(b.edge_ids)[keep])
    order, relabel, counts = _order(hop, len(blocks))
    t = torch.from_numpy
    return SamplerOutput(
        node=t(nodes[order]), row=t(relabel[np.concatenate(rows)]),
        col=t(relabel[np.concatenate(cols)]),
        edge=None if eids[0] is None else t(np.concatenate(eids).astype(np.int64, copy=False)),
        num_sampled_nodes=counts, num_sampled_edges=[int(r.shape[0]) for r in rows])


def _order(hop: np.ndarray, num_hops: int):
    """``(order, relabel, counts)``: kept nodes (``hop >= 0``) seeds first, then hop by hop
    (each in local-id order); ``relabel[old] = new`` (int64); nodes per hop."""
    parts = [np.flatnonzero(hop == h) for h in range(num_hops + 1)]
    order = np.concatenate(parts)
    relabel = np.full(hop.shape[0], -1, dtype=np.int64)
    relabel[order] = np.arange(order.shape[0])
    return order, relabel, [int(p.shape[0]) for p in parts]


def _hetero_output(mb, graph: HeteroGraph) -> HeteroSamplerOutput:
    """A typed ``MiniBatch`` (node or link seeds) as PyG's ``HeteroSamplerOutput``:
    every node type and edge type present (empty where the batch has none); the rule and the
    numpy of :func:`_output`, per node type."""
    blocks = mb.blocks
    types, ets = graph.node_types, graph.edge_types
    if not blocks:
        raise GraphfeedError("num_neighbors must name at least one hop")
    first, last = blocks[0], blocks[-1]
    hop = {}
    for t in types:
        h = np.full(int(first.src_nodes[t].numel()), -1, dtype=np.int32)
        h[: last.num_dst[t]] = 0
        hop[t] = h
    rows = {et: [] for et in ets}
    cols = {et: [] for et in ets}
    eids = {et: [] for et in ets}
    for h, b in enumerate(reversed(blocks), start=1):
        for et in ets:
            s, _, d = et
            ei = _np(b.edge_index_dict[et])
            keep = hop[d][ei[1]] == h - 1
            r, c = ei[0][keep], ei[1][keep]
            hop[s][r[hop[s][r] < 0]] = h
            rows[et].append(r)
            cols[et].append(c)
            if b.edge_ids is not None:
                eids[et].append(_np(b.edge_ids[et])[keep])
    node, relabel, num_nodes = {}, {}, {}
    for t in types:
        order, relabel[t], num_nodes[t] = _order(hop[t], len(blocks))
        node[t] = torch.from_numpy(_np(first.src_nodes[t])[order])
    t_ = torch.from_numpy
    return HeteroSamplerOutput(
        node=node,
        row={et: t_(relabel[et[0]][np.concatenate(rows[et])]) for et in ets},
        col={et: t_(relabel[et[2]][np.concatenate(cols[et])]) for et in ets},
        edge=({et: t_(np.concatenate(eids[et]).astype(np.int64, copy=False)) for et in ets}
              if first.edge_ids is not None else None),
        num_sampled_nodes=num_nodes,
        num_sampled_edges={et: [int(r.shape[0]) for r in rows[et]] for et in ets})
