"""Evaluation: how a run scores its validation and test sets (``TrainConfig.eval_method``).

Two methods, one interface (``evaluate(model, names)`` -> name -> ``(logits, labels)``,
``logits(model, name)``, ``ids``, ``under_autocast``, ``close()``), picked once per run by
:func:`resolve_eval_method` and opened by ``trainer.tasks.base.open_evaluator``:

- ``layerwise`` (:mod:`graphfeed.trainer.layerwise`, any graph, typed or not): exact, every
  neighbour, each layer computed once per node that needs it; the default for the built-in models (node classification, and the encoders of
  link prediction);
- ``sampled`` (:class:`Evaluator`): the model's forward on sampled blocks of each evaluated
  node, with its own fanouts and batch size (below); the only method on partitions, for custom
  models and for ``--sampler temporal`` (typed graphs sample with the training fanouts unless
  ``eval_fanouts`` is given).

Default evaluation fanouts (``TrainConfig.eval_fanouts=None``): every neighbour, capped at
``floor(EVAL_EDGES_PER_SEED ** (1 / L))`` per layer for an ``L``-layer model (100 for two layers,
21 for three): exact for every node whose in-degree is at most the cap, a uniform sample of that
many in-edges above it. The evaluation batch size is the training batch size (at least
``EVAL_BATCH_SIZE``), lowered until the worst case of a batch, ``batch x sum over layers of the
product of the effective fanouts`` sampled edges (effective: ``min(fanout, max in-degree)``),
fits ``EVAL_MAX_BATCH_EDGES``, and until as many input rows (one per sampled edge, plus the
seed) at the model's input width fit ``EVAL_MAX_BATCH_INPUT_BYTES`` as float32. So one
evaluation batch holds at most about 4.2M sampled edges (67 MB of ``edge_index``) and 512 MB of
input features, whatever the graph and however wide its features (a 4,714-wide input allowed
4.2M rows, 79 GB, before the second bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..errors import GraphfeedError
from ..models.layerwise import unwrap  # noqa: F401 (the tasks and evaluators read it here)

#: smallest evaluation batch when memory allows (inference amortises per-batch overhead)
EVAL_BATCH_SIZE = 1024
#: the default fanout cap: each seed's receptive field holds about this many sampled edges
EVAL_EDGES_PER_SEED = 10_000
#: worst-case sampled edges in one evaluation batch
EVAL_MAX_BATCH_EDGES = 1 << 22
#: worst-case bytes of float32 input features in one evaluation batch
EVAL_MAX_BATCH_INPUT_BYTES = 512 << 20
#: ``auto`` evaluates layer-wise while one pass (``layers x (edges + nodes)``) is at most this
#: much work, or at most LAYERWISE_MAX_RATIO times that of sampling the evaluated nodes'
#: neighbourhoods with the training fanouts; beyond both it samples (a papers100M-sized graph:
#: 3.4 billion edge visits and every node's features read per evaluation, against 37 million)
LAYERWISE_SMALL_WORK = 1 << 26
LAYERWISE_MAX_RATIO = 8


def layerwise_cost_note(num_layers: int, num_nodes: int, num_edges: int, eval_nodes: int,
                        fanouts: Sequence[int]) -> Optional[str]:
    """Why ``auto`` should not evaluate layer-wise on a graph this size (``None``: it should):
    one layer-wise pass visits every edge and node ``num_layers`` times and reads every node's
    features, sampled evaluation about ``eval_nodes`` times a seed's sampled edges under
    ``fanouts`` (see :data:`LAYERWISE_MAX_RATIO`)."""
    layerwise = num_layers * (int(num_edges) + int(num_nodes))
    per_seed, prod = 0, 1
    for f in reversed(list(fanouts)):
        prod *= max(1, f if f > 0 else 100)
        per_seed += prod
    sampled = max(1, int(eval_nodes)) * per_seed
    if layerwise <= max(LAYERWISE_SMALL_WORK, LAYERWISE_MAX_RATIO * sampled):
        return None
    return (f"layer-wise evaluation would visit {num_edges:,} edges and {num_nodes:,} nodes "
            f"{num_layers} times, {layerwise / sampled:.0f}x sampling the {eval_nodes:,} "
            f"evaluated nodes; --eval layerwise forces it")


def resolve_eval_method(cfg, *, supported: bool = True, why_not: str = "",
                        too_costly: Optional[str] = None) -> str:
    """``"layerwise"`` or ``"sampled"``: the method of ``cfg.eval_method`` for this run.
    ``supported=False`` (the trainer or model cannot evaluate layer-wise, ``why_not`` says
    why) turns ``auto`` into ``sampled`` and refuses ``layerwise`` with a ``GraphfeedError``.
    ``eval_fanouts`` (only for sampled evaluation), ``--sampler temporal`` (neighbourhoods
    bounded by each seed's time) and ``too_costly`` (a graph too large to evaluate layer-wise:
    :func:`layerwise_cost_note`) make ``auto`` sampled too."""
    method = cfg.eval_method
    if cfg.sampler == "temporal":
        supported, why_not = False, why_not or "sampler temporal bounds each seed's neighbours " \
                                               "by its time"
    if method == "sampled" or (method == "auto" and (cfg.eval_fanouts is not None or too_costly)):
        return "sampled"
    if not supported:
        if method == "layerwise":
            raise GraphfeedError(f"eval_method layerwise: {why_not}; use --eval sampled (or "
                                 f"leave --eval out)")
        return "sampled"
    return "layerwise"


def choose_evaluation(cfg, dataset, eval_nodes: int, in_dim) -> tuple:
    """``(method, EvalPlan, note)`` of a run of ``cfg`` on ``dataset`` scoring ``eval_nodes``
    nodes with inputs ``in_dim`` wide: the built-in models (the R-GCN on typed graphs too)
    evaluate layer-wise unless the graph is too large for it (``note`` says why; then sampled
    with the training fanouts, as a typed graph's sampled evaluation is, each relation sampled);
    else sampled evaluation's capped default fanouts. A custom model may still turn layer-wise
    into sampled once built (:func:`method_for_model`)."""
    note = None
    if cfg.eval_method == "auto" and cfg.eval_fanouts is None:
        note = layerwise_cost_note(len(cfg.fanouts), dataset.num_nodes, dataset.num_edges,
                                   eval_nodes, cfg.fanouts)
    method = resolve_eval_method(cfg, too_costly=note)
    graph = dataset.graph if dataset.hetero is None else dataset.hetero
    return method, sampled_plan(cfg, graph, in_dim, training_fanouts=bool(note)), note or ""


def sampled_plan(cfg, graph, in_dim, *, training_fanouts: bool = False) -> "EvalPlan":
    """Sampled evaluation's :class:`EvalPlan` on ``graph`` (a ``CSCGraph``, or a
    ``HeteroGraph``: in-degrees of its fused graph) for inputs ``in_dim`` wide (an int, or node
    type -> int): ``cfg.eval_fanouts``, else the training fanouts on a typed graph (each
    relation sampled) or with ``training_fanouts``, else the capped default."""
    from ..graph.hetero import HeteroGraph

    typed = isinstance(graph, HeteroGraph)
    csc = graph.csc if typed else graph
    if isinstance(in_dim, dict):
        in_dim = max(in_dim.values(), default=0)
    return plan_eval(len(cfg.fanouts), cfg.batch_size, int(csc.in_degrees.max(initial=0)),
                     cfg.eval_fanouts or (cfg.fanouts if training_fanouts or typed else None),
                     in_dim=in_dim)


def method_for_model(method: str, cfg, why_not: Optional[str]) -> str:
    """``method`` once the model is built: layer-wise stays layer-wise unless ``why_not`` says
    the model (a custom one) cannot be evaluated so; then ``auto`` becomes sampled and an
    explicit ``--eval layerwise`` is refused (:func:`resolve_eval_method`)."""
    if method != "layerwise" or not why_not:
        return method
    return resolve_eval_method(cfg, supported=False, why_not=why_not)


def describe_evaluation(cfg, method: str, plan, note: str = "") -> str:
    """The evaluation part of a run's header line."""
    every = f" every {cfg.eval_every} epochs" if cfg.eval_every > 1 else ""
    if method == "layerwise":
        return f"evaluation layer-wise (every neighbour){every}"
    why = f" (the training fanouts: {note})" if note else ""
    return (f"eval fanouts {list(plan.fanouts)}{why} in batches of {plan.batch_size}{every}")


def evaluates_epoch(cfg, epoch: int) -> bool:
    """Whether (0-based) ``epoch`` is evaluated: every ``cfg.eval_every``-th epoch (epochs
    ``N - 1``, ``2N - 1``, ...) and the last."""
    return (epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1


@dataclass(frozen=True)
class EvalPlan:
    fanouts: tuple[int, ...]
    batch_size: int


def default_eval_fanouts(num_layers: int) -> tuple[int, ...]:
    cap = int(math.floor(EVAL_EDGES_PER_SEED ** (1.0 / num_layers) + 1e-9))
    return (max(1, cap),) * num_layers


def plan_eval(num_layers: int, train_batch_size: int, max_in_degree: int,
              eval_fanouts: Optional[Sequence[int]] = None, in_dim: int = 0) -> EvalPlan:
    """The fanouts and batch size evaluation uses (module docstring); ``in_dim``: the model's
    input width (0: not counted)."""
    fan = tuple(eval_fanouts) if eval_fanouts is not None else default_eval_fanouts(num_layers)
    eff = [max(1, max_in_degree) if f == -1 else min(f, max(1, max_in_degree)) for f in fan]
    worst_per_seed, prod = 0, 1
    for f in reversed(eff):  # the seeds' layer first
        prod *= f
        worst_per_seed += prod
    batch = max(train_batch_size, EVAL_BATCH_SIZE)
    batch = max(1, min(batch, EVAL_MAX_BATCH_EDGES // max(1, worst_per_seed)))
    if in_dim > 0:
        row_bytes = 4 * int(in_dim)
        batch = max(1, min(batch, EVAL_MAX_BATCH_INPUT_BYTES // ((worst_per_seed + 1) * row_bytes)))
    return EvalPlan(fan, batch)


def with_fanouts(sampler, fanouts: Sequence[int]):
    """A sampler like ``sampler`` (same graph, seed, replacement) with other fanouts; shares the
    graph's arrays (no copy)."""
    if list(fanouts) == list(sampler.fanouts):
        return sampler
    try:
        return sampler.with_fanouts(fanouts)
    except NotImplementedError:
        raise GraphfeedError(
            f"evaluation fanouts need a NeighborSampler or TorchNeighborSampler, got "
            f"{type(sampler).__name__}"
        ) from None


def seed_rows(out, batch):
    """A model's output as rows of ``batch.seeds``: a tensor as it is; a typed model's dict
    (node type -> rows of its seeds) concatenated in node type order, the order a typed
    batch groups its seeds in."""
    if not isinstance(out, dict):
        return out
    import torch

    return torch.cat([out[t] for t in batch.node_types if t in out])


class Evaluator:
    """Sampled evaluation: scores node sets with one model through loaders built once (one per
    set, ``placed.loader(train=False)``; ``set_epoch(0)`` each time, so every evaluation sees
    the same sample) and closed by :meth:`close`. Any placed data (``graphfeed.placement.
    Placed``): untyped, typed (the model's dict output is taken per seed type), partitioned.

    ``sets``: name -> node ids; each rank scores its share and the rows are gathered on every
    rank. Rows come back in the order of the set's ids when every rank passed the same set;
    where each rank passed its own (a partition's), the union in increasing id order.
    :attr:`ids` says which, per set, after each evaluation."""

    #: sampled evaluation is the model's own forward pass: it runs under ``--precision``
    under_autocast = True

    def __init__(self, placed, sets: dict, plan: EvalPlan, *, seed: int, rank: int = 0,
                 world_size: int = 1, num_threads: int = 2, prefetch: int = 2,
                 labels: bool = True):
        self.world_size = world_size
        self.device = placed.device
        self.labels = labels
        self.sets = {k: np.ascontiguousarray(np.asarray(v, dtype=np.int64).reshape(-1))
                     for k, v in sets.items()}
        self.ids = dict(self.sets)
        sampler = with_fanouts(placed.sampler, plan.fanouts)
        self.loaders = {
            name: placed.loader(ids, train=False, batch_size=plan.batch_size, seed=seed,
                                sampler=sampler, labels=labels, num_threads=num_threads,
                                prefetch=prefetch, rank=rank, world_size=world_size)
            for name, ids in self.sets.items()}

    def evaluate(self, model, names=None, *, progress: bool = False, argmax: bool = False) -> dict:
        """name -> :meth:`logits` for every set in ``names`` (default: all)."""
        names = tuple(self.loaders) if names is None else tuple(names)
        return {k: self.logits(model, k, progress=progress, argmax=argmax) for k in names}

    def logits(self, model, name: str, *, progress: bool = False, argmax: bool = False):
        """``(logits (n, C) float32, labels (n,) int64 or None)`` on CPU for set ``name`` (rows
        in the order of :attr:`ids`); ``argmax=True`` keeps only each row's predicted class
        (``(n, 1)``), so predicting every node of a large graph holds 8 bytes a node instead of
        a row of logits."""
        import torch

        from .._progress import bar
        from ..models.layerwise import model_inputs

        loader = self.loaders[name]
        outs, ys, ids = [], [], []
        net = unwrap(model)  # the plain module: no DDP collectives in evaluation
        was_training = net.training
        net.eval()
        loader.set_epoch(0)
        try:
            with torch.no_grad(), bar(len(loader), f"eval {name}", enabled=progress) as pbar:
                for batch in loader:
                    pbar.update(1)
                    if not batch.seeds.numel():  # a rank past its share (partitions)
                        continue
                    batch = batch.to(self.device)
                    out = seed_rows(net(model_inputs(net, batch), batch.blocks), batch)
                    outs.append((out.argmax(-1, keepdim=True) if argmax else out.float()).cpu())
                    ids.append(batch.seeds.cpu())
                    if self.labels:
                        ys.append(batch.labels.to(torch.long).reshape(-1).cpu())
        finally:
            net.train(was_training)
        return self._in_order(name, outs, ys, ids, argmax)

    def _in_order(self, name: str, outs: list, ys: list, ids: list, argmax: bool):
        """Every rank's rows, in the order of the set (or of the ids, :attr:`ids`)."""
        import torch

        rows = torch.cat(outs) if outs else None
        cols = ([rows.double()] if rows is not None else []) + (
            [torch.cat(ys).double().reshape(-1, 1)] if ys else []) + (
            [torch.cat(ids).double().reshape(-1, 1)] if ids else [])
        local = torch.cat(cols, dim=1) if cols else None
        every = gather_rows(local, self.world_size) if self.world_size > 1 else local
        want = self.sets[name]
        if every is None or every.shape[0] == 0:
            self.ids[name] = want[:0] if want.shape[0] == 0 else want
            return None, (torch.zeros(0, dtype=torch.long) if self.labels else None)
        got = every[:, -1].long().numpy()
        if not np.array_equal(got, want):
            order = np.argsort(got, kind="stable")
            if got.shape[0] == want.shape[0]:  # every rank's share of one set: the set's order
                order = order[np.searchsorted(got[order], want)]
            every = every[torch.from_numpy(order)]
            got = got[order]
        self.ids[name] = want if got.shape[0] == want.shape[0] else got
        y = every[:, -2].long() if self.labels else None
        rows = every[:, :-2 if self.labels else -1]
        return (rows.long() if argmax else rows.float()), y

    def close(self) -> None:
        for loader in self.loaders.values():
            loader.close()
        self.loaders = {}


#: bytes of rows moved by one all_gather call of :func:`gather_strided`
GATHER_CHUNK_BYTES = 64 << 20


def gather_strided(local, n: int, world_size: int, *, dtype=None, alloc=None):
    """Every rank's strided share (rank ``r`` holds rows ``r, r + w, r + 2w, ...`` of ``n``)
    back in order, on every rank: a padded ``all_gather`` (no pickling) of at most
    ``GATHER_CHUNK_BYTES`` a call. ``local``: this rank's ``(share, d)`` rows, or ``None`` when
    it has none (the width is agreed between ranks; ``dtype`` then says the type). ``alloc(n,
    d)`` makes the output (default: a host tensor)."""
    import torch
    import torch.distributed as dist

    from ..distributed.sharing import collective_device

    w = world_size
    dev = collective_device()
    width = torch.tensor([0 if local is None else local.shape[1]], dtype=torch.long, device=dev)
    dist.all_reduce(width, op=dist.ReduceOp.MAX)
    d = int(width)
    dtype = local.dtype if local is not None else (dtype or torch.float32)
    if local is None:
        local = torch.zeros((0, d), dtype=dtype)
    share = [len(range(r, n, w)) for r in range(w)]
    m = max(share) if share else 0
    out = alloc(n, d) if alloc is not None else torch.empty((n, d), dtype=dtype)
    step = max(1, GATHER_CHUNK_BYTES // max(1, local.element_size() * d * w))
    for s in range(0, m, step):
        e = min(m, s + step)
        pad = torch.zeros((e - s, d), dtype=dtype, device=dev)
        k = max(0, min(e, local.shape[0]) - s)
        if k:
            pad[:k] = local[s:s + k].to(dev)
        got = [torch.empty_like(pad) for _ in range(w)]
        dist.all_gather(got, pad)
        for r in range(w):
            k = max(0, min(e, share[r]) - s)
            if k:
                out[r + s * w::w][:k] = got[r][:k].to(out.device)
    return out


def gather_rows(local, world_size: int):
    """Every rank's rows (``(n_r, d)``, or ``None`` for none), concatenated in rank order on
    every rank: a padded ``all_gather`` (sizes differ by rank; no pickling)."""
    import torch
    import torch.distributed as dist

    from ..distributed.sharing import collective_device

    dev = collective_device()
    n = 0 if local is None else int(local.shape[0])
    meta = torch.tensor([n, 0 if local is None else int(local.shape[1])], device=dev)
    every = [torch.zeros_like(meta) for _ in range(world_size)]
    dist.all_gather(every, meta)
    sizes = [int(m[0]) for m in every]
    d = max(int(m[1]) for m in every)
    dtype = local.dtype if local is not None else torch.float64
    pad = torch.zeros((max(sizes), d), dtype=dtype, device=dev)
    if n:
        pad[:n] = local.to(dev)
    got = [torch.empty_like(pad) for _ in range(world_size)]
    dist.all_gather(got, pad)
    return torch.cat([g[:k] for g, k in zip(got, sizes)]).cpu()
