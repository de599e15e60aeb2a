"""Every sampling option of PyG's loaders and ``NeighborSampler`` with ``GraphfeedSampler``
(issue 41): honoured (with a check of what it does) or refused by name, never dropped.

The table below has one row per option and way of giving it (to ``GraphfeedSampler``, to the
loader, or to both); ``test_every_pyg_option_has_a_row`` reads the installed PyG's signatures,
so an option a new PyG adds fails until it has a row. With every neighbour (``-1``) PyG's
sampling is deterministic, so the subgraphs are compared with a brute-force walk of the graph
written from PyG's documented semantics (and, where pyg-lib or torch-sparse is installed, with
PyG's own sampler)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.data import Data, HeteroData  # noqa: E402
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader, NodeLoader  # noqa: E402
from torch_geometric.sampler import NegativeSampling  # noqa: E402

from graphfeed.errors import GraphfeedError, GraphfeedWarning  # noqa: E402
from graphfeed.pyg import GraphfeedSampler  # noqa: E402

#: NegativeSampling's node weights: src_weight from PyG 2.6, weight before
WEIGHT = ("src_weight" if "src_weight" in inspect.signature(NegativeSampling).parameters
          else "weight")
N = 120
SEEDS = torch.tensor([3, 17, 42, 99, 5, 64])


def _graph() -> Data:
    """120 nodes, 700 random edges (multi-edges and self-loops included, as PyG keeps them),
    node times ``t`` (a permutation: no ties), edge weights ``w`` (a third of them 0)."""
    g = torch.Generator().manual_seed(7)
    ei = torch.randint(0, N, (2, 700), generator=g)
    return Data(edge_index=ei, num_nodes=N, x=torch.arange(N, dtype=torch.float)[:, None],
                t=torch.randperm(N, generator=g),
                w=(torch.arange(700) % 3 != 0).float())


DATA = _graph()
EI = DATA.edge_index


# ---------------------------------------------------------------------- brute-force references
def in_edges(v: int) -> list:
    """PyG edge ids of the in-edges of ``v``."""
    return torch.nonzero(EI[1] == v).view(-1).tolist()


def walk(seeds, hops: int):
    """PyG's subgraph with every neighbour: ``(hop of each node, edge ids)``: a node's hop is
    the first at which it is reached; the edges are every in-edge of every node reached before
    the last hop."""
    hop = {int(s): 0 for s in seeds}
    frontier, edges = [int(s) for s in seeds], []
    for h in range(1, hops + 1):
        nxt = []
        for v in frontier:
            for e in in_edges(v):
                edges.append(e)
                u = int(EI[0, e])
                if u not in hop:
                    hop[u] = h
                    nxt.append(u)
        frontier = nxt
    return hop, sorted(edges)


def induced_count(nodes) -> int:
    """Edges of the graph with both ends in ``nodes``, counted edge by edge."""
    s = set(int(v) for v in nodes)
    return sum(1 for u, v in EI.t().tolist() if u in s and v in s)


# ---------------------------------------------------------------------- behaviour checks
def node_batch(sampler_kw=None, loader_kw=None, seeds=SEEDS, num_neighbors=(-1, -1),
               loader=NeighborLoader, data=DATA):
    sampler = GraphfeedSampler(data, list(num_neighbors), **(sampler_kw or {}))
    kw = dict(batch_size=seeds.numel(), input_nodes=seeds, neighbor_sampler=sampler)
    kw.update(loader_kw or {})
    return next(iter(loader(data, list(num_neighbors), **kw)))


def link_batch(sampler_kw=None, loader_kw=None, num_neighbors=(-1, -1), pairs=EI[:, :8]):
    sampler = GraphfeedSampler(DATA, list(num_neighbors), **(sampler_kw or {}))
    kw = dict(batch_size=pairs.shape[1], edge_label_index=pairs, neighbor_sampler=sampler)
    kw.update(loader_kw or {})
    return next(iter(LinkNeighborLoader(DATA, list(num_neighbors), **kw)))


def is_directional_pyg_subgraph(b, seeds=SEEDS, hops=2):
    hop, edges = walk(seeds, hops)
    assert torch.equal(b.n_id[: seeds.numel()], seeds)
    assert dict(zip(b.n_id.tolist(), torch.repeat_interleave(
        torch.arange(hops + 1), torch.tensor(b.num_sampled_nodes)).tolist())) == hop
    assert sorted(b.e_id.tolist()) == edges
    assert torch.equal(b.n_id[b.edge_index], EI[:, b.e_id])


def is_induced_subgraph(b, seeds=SEEDS, hops=2):
    hop, _ = walk(seeds, hops)
    assert set(b.n_id.tolist()) == set(hop)
    assert b.edge_index.shape[1] == induced_count(hop) > 0
    assert torch.equal(b.n_id[b.edge_index], EI[:, b.e_id])
    assert b.e_id.unique().numel() == b.e_id.numel()


def is_bidirectional(b):
    pairs = set(map(tuple, b.n_id[b.edge_index].t().tolist()))
    assert pairs and all((v, u) in pairs for u, v in pairs)
    hop, edges = walk(SEEDS, 2)
    sampled = set(map(tuple, EI[:, edges].t().tolist()))
    assert pairs == sampled | {(v, u) for u, v in sampled}


def is_disjoint(b, roots=SEEDS, batch_of_root=None, hops=2):
    """One subgraph per root: ``batch`` names it; each is the root's own walk (node ids repeat
    across subgraphs), its edges the walk's edges."""
    batch_of_root = torch.arange(roots.numel()) if batch_of_root is None else batch_of_root
    assert torch.equal(b.n_id[: roots.numel()], roots)
    assert torch.equal(b.batch[: roots.numel()], batch_of_root)
    assert torch.equal(b.batch[b.edge_index[0]], b.batch[b.edge_index[1]])
    assert torch.equal(b.n_id[b.edge_index], EI[:, b.e_id])
    # subgraph i's nodes sit in the node list in order; find them by walking from root i
    owner = torch.full((b.num_nodes,), -1)
    owner[: roots.numel()] = torch.arange(roots.numel())
    # every edge points into a node of its own subgraph; propagate ownership along edges
    for _ in range(hops):
        known = owner[b.edge_index[1]] >= 0
        owner[b.edge_index[0][known]] = owner[b.edge_index[1][known]]
    assert (owner >= 0).all()
    for i, r in enumerate(roots.tolist()):
        hop, edges = walk([r], hops)
        mine = owner == i
        assert sorted(b.n_id[mine].tolist()) == sorted(hop), i
        assert b.n_id[mine].unique().numel() == int(mine.sum())  # no repeat within one
        assert sorted(b.e_id[owner[b.edge_index[1]] == i].tolist()) == edges, i
        assert (b.batch[mine] == batch_of_root[i]).all()
    assert b.n_id.unique().numel() < b.n_id.numel()  # ids do repeat across subgraphs


def each_dst_has(fanout):
    def check(b):
        deg = torch.bincount(b.edge_index[1], minlength=b.num_nodes)
        first = b.num_sampled_nodes[0]
        has_in = torch.tensor([len(in_edges(int(v))) > 0 for v in b.n_id[:first]])
        assert (deg[:first][has_in] == fanout).all()  # with replacement: always the fanout
    return check


def latest_eligible(b):
    """``temporal_strategy="last"``: each seed's neighbours are its most recent eligible ones
    (a node time is its source's time), never a later one than the seed's time."""
    t = DATA.t
    first = b.batch_size
    for i in range(first):
        picked = b.n_id[b.edge_index[0][b.edge_index[1] == i]]
        eligible = [int(EI[0, e]) for e in in_edges(int(b.n_id[i])) if t[EI[0, e]] <= 90]
        if not eligible:
            assert picked.numel() == 0
            continue
        assert (t[picked] <= 90).all()
        assert picked.numel() == min(3, len(eligible))
        left = sorted(t[eligible].tolist(), reverse=True)[picked.numel():]
        assert not left or int(t[picked].min()) >= max(left)


def causal(b):
    assert (DATA.t[b.n_id] <= 90).all()


def no_zero_weight(b):
    assert b.e_id.numel() > 0 and (DATA.w[b.e_id] > 0).all()


def same_as_default():
    def check(b):
        plain = node_batch(num_neighbors=(4, 2))
        assert torch.equal(b.n_id, plain.n_id) and torch.equal(b.edge_index, plain.edge_index)
    return check


def link_disjoint(mode):
    def check(b):
        pairs = EI[:, :8]
        if mode is None:
            roots = torch.cat([pairs[0], pairs[1]])
            assert torch.equal(b.edge_label_index, torch.arange(16).view(2, -1))
            is_disjoint(b, roots, torch.arange(8).repeat(2))
        elif mode == "binary":
            eli = b.edge_label_index
            assert torch.equal(eli, torch.arange(eli.numel()).view(2, -1))
            assert torch.equal(b.n_id[eli[:, :8]], pairs)
            roots = b.n_id[eli.reshape(-1)]
            is_disjoint(b, roots, (torch.arange(eli.shape[1]) % 8).repeat(2))
            assert torch.equal(b.edge_label, torch.cat([torch.ones(8), torch.zeros(8)]))
        else:
            assert torch.equal(b.src_index, torch.arange(8))
            assert torch.equal(b.dst_pos_index, torch.arange(8, 16))
            assert b.dst_neg_index.shape == (8, 2)
            assert torch.equal(b.n_id[b.src_index], pairs[0])
            assert torch.equal(b.n_id[b.dst_pos_index], pairs[1])
            roots = b.n_id[:32]
            is_disjoint(b, roots, torch.arange(8).repeat(4))
            assert (b.n_id[b.dst_neg_index] != pairs[1][:, None]).all()
    return check


def link_labels(b):
    assert torch.equal(b.n_id[b.edge_label_index[:, :8]], EI[:, :8])
    # PyG shifts labels from 0 so that 0 means "negative"; graphfeed's negatives are 0
    assert torch.equal(b.edge_label, torch.cat([torch.arange(8) + 1,
                                                torch.zeros(8, dtype=torch.long)]))


def binary_negatives(count):
    def check(b):
        assert b.edge_label_index.shape == (2, 8 + count)
        assert torch.equal(b.edge_label, torch.cat([torch.ones(8), torch.zeros(count)]))
    return check


# ---------------------------------------------------------------------- the table
@dataclass
class Refused:
    error: type
    phrase: str


@dataclass
class Row:
    option: str
    where: str                      # "sampler", "loader", "both", "link-*"
    sampler_kw: dict
    loader_kw: dict
    outcome: object                 # a check of the batch (honoured) or Refused
    num_neighbors: tuple = (-1, -1)
    run: Optional[Callable] = None  # how to get the batch (default: node_batch / link_batch)


_outputs: list = []  # what transform_sampler_output saw


def _typed() -> HeteroData:
    g = torch.Generator().manual_seed(3)
    data = HeteroData()
    data["a"].num_nodes = 30
    data["b"].num_nodes = 20
    data["a", "r", "b"].edge_index = torch.stack([torch.randint(0, 30, (60,), generator=g),
                                                  torch.randint(0, 20, (60,), generator=g)])
    data["b", "s", "a"].edge_index = torch.stack([torch.randint(0, 20, (50,), generator=g),
                                                  torch.randint(0, 30, (50,), generator=g)])
    return data


TYPED = _typed()


def typed_batch(**kw):
    sampler = GraphfeedSampler(TYPED, [-1, -1], **kw)
    return next(iter(NeighborLoader(TYPED, [-1, -1], input_nodes=("b", torch.tensor([1, 2, 3])),
                                    batch_size=3, neighbor_sampler=sampler)))


def typed_bidirectional(b):
    """PyG's own conversion: ('a', 'r', 'b') and ('b', 's', 'a') are each other's reverse, so
    each holds the other's edges reversed, and every pair is an edge of one of them."""
    def pairs(et):
        s, _, d = et
        ei = b[et].edge_index
        return set(zip(b[s].n_id[ei[0]].tolist(), b[d].n_id[ei[1]].tolist()))

    r, s = pairs(("a", "r", "b")), pairs(("b", "s", "a"))
    assert r and r == {(v, u) for u, v in s}
    stored = set(map(tuple, TYPED["a", "r", "b"].edge_index.t().tolist())) | {
        (v, u) for u, v in TYPED["b", "s", "a"].edge_index.t().tolist()}
    assert r <= stored


ROWS = [
    # -- num_neighbors: the loader's must be the sampler's (PyG would drop the loader's)
    Row("num_neighbors", "both", {}, {}, is_directional_pyg_subgraph),
    Row("num_neighbors", "loader", {}, {}, Refused(GraphfeedError, r"num_neighbors=\[2, 2\].*"
                                                   r"differs from its neighbor_sampler"),
        run=lambda: next(iter(NeighborLoader(DATA, [2, 2], input_nodes=SEEDS, neighbor_sampler=
                                             GraphfeedSampler(DATA, [-1, -1]))))),
    # -- replace
    Row("replace", "both", {"replace": True}, {"replace": True}, each_dst_has(3), (3, 2)),
    Row("replace", "loader", {}, {"replace": True}, Refused(GraphfeedError, r"replace=True")),
    # -- subgraph_type
    Row("subgraph_type", "both", {"subgraph_type": "directional"},
        {"subgraph_type": "directional"}, is_directional_pyg_subgraph),
    Row("subgraph_type", "both", {"subgraph_type": "bidirectional"},
        {"subgraph_type": "bidirectional"}, is_bidirectional),
    Row("subgraph_type", "both", {"subgraph_type": "induced"}, {"subgraph_type": "induced"},
        is_induced_subgraph),
    Row("subgraph_type", "sampler", {"subgraph_type": "induced"}, {},
        lambda b: (b.edge_index.shape[1] == induced_count(b.n_id)) or pytest.fail("count"),
        (3, 2)),
    Row("subgraph_type", "loader", {}, {"subgraph_type": "induced"},
        Refused(GraphfeedError, r"subgraph_type='induced'.*GraphfeedSampler")),
    Row("subgraph_type", "loader", {}, {"subgraph_type": "bidirectional"},
        Refused(GraphfeedError, r"subgraph_type='bidirectional'")),
    Row("subgraph_type", "sampler", {"subgraph_type": "sideways"}, {},
        Refused(GraphfeedError, r"subgraph_type must be one of")),
    Row("subgraph_type", "sampler", {"subgraph_type": "induced", "exclude": "self"}, {},
        Refused(GraphfeedError, r"subgraph_type='induced'.*exclude='self'")),
    Row("subgraph_type", "typed", {"subgraph_type": "induced"}, {},
        Refused(GraphfeedError, r"subgraph_type='induced' is for homogeneous"),
        run=lambda: typed_batch(subgraph_type="induced")),
    Row("subgraph_type", "typed", {"subgraph_type": "bidirectional"}, {}, typed_bidirectional,
        run=lambda: typed_batch(subgraph_type="bidirectional")),
    # -- directed (deprecated): False is "induced"
    Row("directed", "both", {"directed": False}, {"directed": False}, is_induced_subgraph),
    Row("directed", "loader", {}, {"directed": False},
        Refused(GraphfeedError, r"directed=False.*subgraph_type='induced' to GraphfeedSampler")),
    Row("directed", "sampler", {"directed": False, "subgraph_type": "bidirectional"}, {},
        Refused(GraphfeedError, r"directed=False.*conflicts with subgraph_type")),
    # -- disjoint
    Row("disjoint", "both", {"disjoint": True}, {"disjoint": True}, is_disjoint),
    Row("disjoint", "loader", {}, {"disjoint": True}, Refused(GraphfeedError, r"disjoint=True")),
    Row("disjoint", "sampler", {"disjoint": True, "subgraph_type": "induced"}, {},
        Refused(GraphfeedError, r"disjoint=True with subgraph_type='induced'")),
    Row("disjoint", "typed", {"disjoint": True}, {},
        Refused(GraphfeedError, r"disjoint=True is for homogeneous"),
        run=lambda: typed_batch(disjoint=True)),
    Row("disjoint", "link-none", {"disjoint": True}, {}, link_disjoint(None)),
    Row("disjoint", "link-binary", {"disjoint": True}, {"neg_sampling": "binary"},
        link_disjoint("binary")),
    Row("disjoint", "link-triplet", {"disjoint": True},
        {"neg_sampling": NegativeSampling("triplet", 2)}, link_disjoint("triplet")),
    Row("disjoint", "link-loader", {}, {"disjoint": True},
        Refused(GraphfeedError, r"LinkNeighborLoader\(disjoint=True\)")),
    # -- time_attr, temporal_strategy (input_time needs time_attr on the loader too: PyG's rule)
    Row("time_attr", "both", {"time_attr": "t"},
        {"time_attr": "t", "input_time": torch.full((6,), 90)}, causal, (3, 3)),
    Row("time_attr", "loader", {}, {"time_attr": "t", "input_time": torch.full((6,), 90)},
        Refused(GraphfeedError, r"time_attr='t'")),
    Row("temporal_strategy", "both", {"time_attr": "t", "temporal_strategy": "last"},
        {"time_attr": "t", "temporal_strategy": "last", "input_time": torch.full((6,), 90)},
        latest_eligible, (3,)),
    Row("temporal_strategy", "loader", {"time_attr": "t"},
        {"time_attr": "t", "temporal_strategy": "last", "input_time": torch.full((6,), 90)},
        Refused(GraphfeedError, r"temporal_strategy='last'")),
    Row("temporal_strategy", "sampler", {"temporal_strategy": "last"}, {},
        Refused(GraphfeedError, r"temporal_strategy='last' is for temporal sampling")),
    Row("temporal_strategy", "sampler", {"temporal_strategy": "newest", "time_attr": "t"}, {},
        Refused(GraphfeedError, r"temporal_strategy must be one of")),
    # -- weight_attr
    Row("weight_attr", "both", {"weight_attr": "w"}, {"weight_attr": "w"}, no_zero_weight,
        (3, 2)),
    Row("weight_attr", "loader", {}, {"weight_attr": "w"}, Refused(GraphfeedError,
                                                                   r"weight_attr='w'")),
    Row("weight_attr", "sampler", {"weight_attr": "w", "time_attr": "t"}, {},
        Refused(GraphfeedError, r"weight_attr and time_attr together")),
    Row("weight_attr", "sampler", {"weight_attr": "w", "method": "labor"}, {},
        Refused(GraphfeedError, r"weight_attr='w' needs method='weighted'")),
    # -- is_sorted: a promise about the input's order, no batch changes
    Row("is_sorted", "both", {"is_sorted": True}, {"is_sorted": True},
        same_as_default(), (4, 2)),
    # -- share_memory, sample_direction: PyG NeighborSampler's, not taken
    Row("share_memory", "sampler", {"share_memory": True}, {},
        Refused(GraphfeedError, r"share_memory=True is not supported")),
    Row("sample_direction", "sampler", {"sample_direction": "backward"}, {},
        Refused(GraphfeedError, r"sample_direction='backward' is not supported")),
    # -- neighbor_sampler over other data
    Row("neighbor_sampler", "loader", {}, {}, Refused(GraphfeedError, r"is not the graph its "
                                                      r"neighbor_sampler samples"),
        run=lambda: NeighborLoader(Data(edge_index=EI[:, :10], num_nodes=50), [-1, -1],
                                   neighbor_sampler=GraphfeedSampler(DATA, [-1, -1]))),
    # -- what the loader does itself, or hands to the sampler
    Row("filter_per_worker", "loader", {}, {"filter_per_worker": True}, same_as_default(),
        (4, 2)),
    Row("transform", "loader", {}, {"transform": lambda d: d.update({"tag": 1}) or d},
        lambda b: b.tag == 1 or pytest.fail("transform")),
    Row("transform_sampler_output", "loader", {},
        {"transform_sampler_output": lambda o: _outputs.append(o) or o},
        lambda b: torch.equal(_outputs[-1].node, b.n_id) or pytest.fail("not called")),
    Row("input_time", "loader", {"time_attr": "t"}, {"input_time": torch.full((6,), 90)},
        Refused(ValueError, r"input_time")),  # PyG's own check: time_attr missing on the loader
    Row("edge_label", "link", {}, {"edge_label": torch.arange(8), "neg_sampling": "binary"},
        link_labels),
    Row("neg_sampling", "link", {}, {"neg_sampling": NegativeSampling("binary", 2)},
        binary_negatives(16)),
    Row("neg_sampling_ratio", "link", {}, {"neg_sampling_ratio": 0.5}, binary_negatives(4)),
    Row("neg_sampling", "link", {}, {"neg_sampling": NegativeSampling(
        "binary", 1, **{WEIGHT: torch.ones(N)})}, Refused(GraphfeedError, r"weighted negatives")),
    # -- a keyword neither GraphfeedSampler nor graphfeed's sampler takes
    Row("(unknown)", "sampler", {"fanout_cap": 3}, {},
        Refused(GraphfeedError, r"GraphfeedSampler: unknown option 'fanout_cap'")),
]


def _id(row: Row) -> str:
    kind = "refused" if isinstance(row.outcome, Refused) else "honoured"
    shown = [f"{k}={v}" for k, v in {**row.sampler_kw, **row.loader_kw}.items()
             if isinstance(v, (str, bool, int))]
    return "-".join([row.option, row.where, kind] + shown)


def _batch(row: Row):
    if row.run is not None:
        return row.run()
    if row.where.startswith("link"):
        return link_batch(row.sampler_kw, row.loader_kw, row.num_neighbors)
    return node_batch(row.sampler_kw, row.loader_kw, num_neighbors=row.num_neighbors)


@pytest.mark.filterwarnings("ignore:.*directed=False:graphfeed.errors.GraphfeedWarning")
@pytest.mark.parametrize("row", ROWS, ids=_id)
def test_option(row: Row):
    if isinstance(row.outcome, Refused):
        with pytest.raises(row.outcome.error, match=row.outcome.phrase) as info:
            _batch(row)
        assert "\n" not in str(info.value)
        assert not isinstance(info.value, TypeError)
    else:
        row.outcome(_batch(row))


def test_every_pyg_option_has_a_row():
    """Each parameter of the installed PyG's NeighborLoader, LinkNeighborLoader and
    NeighborSampler is in the table, or is data the loader hands over."""
    from torch_geometric.sampler import NeighborSampler

    covered = {r.option for r in ROWS} | {"self", "data", "kwargs", "input_nodes",
                                          "edge_label_index", "edge_label_time"}
    for cls in (NeighborLoader, LinkNeighborLoader, NeighborSampler):
        params = set(inspect.signature(cls.__init__).parameters)
        assert params <= covered, (cls.__name__, sorted(params - covered))


def test_the_loader_check_leaves_other_samplers_alone():
    """A sampler that is not graphfeed's gets PyG's loader exactly as PyG wrote it."""
    GraphfeedSampler(DATA, [2])  # the check is in place from here on

    class Fixed(GraphfeedSampler):
        pass

    # PyG does not look at a sampler before iterating: any object passes, options and all
    NeighborLoader(DATA, [2], neighbor_sampler=object(), disjoint=True, replace=True)
    # a subclass of GraphfeedSampler is checked like it
    with pytest.raises(GraphfeedError, match="disjoint=True"):
        NeighborLoader(DATA, [2], neighbor_sampler=Fixed(DATA, [2]), disjoint=True)


def test_directed_false_warns_as_pyg_does():
    with pytest.warns(GraphfeedWarning, match="subgraph_type='induced'"):
        s = GraphfeedSampler(DATA, [2], directed=False)
    assert s.subgraph_type == "induced"


def test_disjoint_seeds_may_repeat_and_keep_their_own_subgraph():
    seeds = torch.tensor([3, 17, 3])
    b = node_batch({"disjoint": True}, {}, seeds=seeds)
    is_disjoint(b, seeds)


def test_disjoint_with_sampled_fanouts_keeps_each_subgraph_a_tree_of_its_seed():
    b = node_batch({"disjoint": True}, {}, num_neighbors=(3, 2))
    assert torch.equal(b.batch[: SEEDS.numel()], torch.arange(SEEDS.numel()))
    assert torch.equal(b.batch[b.edge_index[0]], b.batch[b.edge_index[1]])
    for i in range(SEEDS.numel()):
        mine = b.batch == i
        assert b.n_id[mine].unique().numel() == int(mine.sum())
    deg = torch.bincount(b.edge_index[1], minlength=b.num_nodes)
    hop = torch.repeat_interleave(torch.arange(3), torch.tensor(b.num_sampled_nodes))
    assert (deg[hop == 0] <= 3).all() and (deg[hop == 1] <= 2).all() and (deg[hop == 2] == 0).all()
    assert torch.equal(b.n_id[b.edge_index], EI[:, b.e_id])


def test_induced_edge_count_matches_a_brute_force_count_on_a_real_dataset(tiny_dataset):
    from graphfeed.pyg import from_dataset

    fs, gs = from_dataset(tiny_dataset)
    sampler = GraphfeedSampler((fs, gs), [10, 5], subgraph_type="induced")
    ids = torch.from_numpy(tiny_dataset.train_ids[:64])
    b = next(iter(NodeLoader((fs, gs), node_sampler=sampler, input_nodes=ids, batch_size=64)))
    g = tiny_dataset.graph
    indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
    inside = np.zeros(g.num_nodes, dtype=bool)
    inside[b.n_id.numpy()] = True
    dst = np.repeat(np.arange(g.num_nodes), np.diff(indptr))
    want = int((inside[indices] & inside[dst]).sum())
    directional = next(iter(NodeLoader((fs, gs), node_sampler=GraphfeedSampler(
        (fs, gs), [10, 5]), input_nodes=ids, batch_size=64)))
    assert b.edge_index.shape[1] == want > directional.edge_index.shape[1]
    assert np.array_equal(indices[b.e_id.numpy()], b.n_id[b.edge_index[0]].numpy())
    assert np.array_equal(dst[b.e_id.numpy()], b.n_id[b.edge_index[1]].numpy())


@pytest.mark.parametrize("num_nodes", [N, 40])
def test_induced_edges_with_and_without_a_node_map(num_nodes):
    """The dense-map lookup (graphs up to the core's DENSE_MAP_MAX_BYTES) and the sorted search
    (larger ones) give the same edges, in the same order, and leave the map clean."""
    from graphfeed.graph.csc import CSCGraph
    from graphfeed.pyg._subgraph import induced_edges

    keep = (EI < num_nodes).all(0)
    g = CSCGraph.from_edges(EI[0, keep].numpy(), EI[1, keep].numpy(), num_nodes)
    nodes = np.random.default_rng(1).permutation(num_nodes)[: num_nodes // 2]
    node_map = np.full(num_nodes, -1, dtype=np.int32)
    a = induced_edges(g.indptr, g.indices, nodes, node_map)
    b = induced_edges(g.indptr, g.indices, nodes)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert (node_map == -1).all()
    indices = np.asarray(g.indices)
    dst = np.repeat(np.arange(num_nodes), np.diff(g.indptr))
    inside = np.isin(np.arange(num_nodes), nodes)
    assert a[2].tolist() == sorted(np.flatnonzero(inside[indices] & inside[dst]).tolist(),
                                   key=lambda p: (list(nodes).index(dst[p]), p))
    assert np.array_equal(nodes[a[0]], indices[a[2]]) and np.array_equal(nodes[a[1]], dst[a[2]])


def _pyg_can_sample() -> bool:
    import torch_geometric.typing as t

    return bool(t.WITH_PYG_LIB or t.WITH_TORCH_SPARSE)


@pytest.mark.skipif(not _pyg_can_sample(), reason="PyG's own sampler needs pyg-lib or "
                                                  "torch-sparse")
@pytest.mark.parametrize("subgraph_type", ["directional", "bidirectional", "induced"])
def test_same_subgraphs_as_pyg_own_sampler(subgraph_type):
    """With every neighbour, PyG's own NeighborLoader and GraphfeedSampler give the same node
    sets and edge sets (orders may differ)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = next(iter(NeighborLoader(DATA, [-1, -1], input_nodes=SEEDS,
                                          batch_size=SEEDS.numel(),
                                          subgraph_type=subgraph_type)))
    ours = node_batch({"subgraph_type": subgraph_type}, {"subgraph_type": subgraph_type})
    assert torch.equal(theirs.n_id[: SEEDS.numel()], ours.n_id[: SEEDS.numel()])
    assert set(theirs.n_id.tolist()) == set(ours.n_id.tolist())

    def edges(b):
        return sorted(map(tuple, b.n_id[b.edge_index].t().tolist()))

    assert edges(theirs) == edges(ours)
