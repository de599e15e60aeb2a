"""``graphfeed train`` on a heterogeneous dataset (``dataset.hetero`` set): node classification
of the dataset's target node type with an R-GCN-style model over ``HeteroMiniBatch`` layers.

``graphfeed.training`` hands a run here once its preflight checks passed. Sampling is the CPU
``HeteroNeighborSampler`` by default (fanouts for every edge type), features are the dataset's
per-type features (``--features ram``, or a ``disk``/``lmdb`` store per type array), batches are
moved to the training device by the loop. Under DDP (gloo or NCCL) every rank trains on its share
of the training ids and evaluates its share of each evaluation set; the scores are gathered. The
MLP baseline sees only the target type's own features.

``--mode cuda-cuda``/``pinned-cuda`` sample with the vectorised ``TorchHeteroSampler`` on the
training device (graph copied there, or UVA views of pinned memory; :func:`hetero_sampler`), and
place every type's features (and the labels) as the homogeneous modes place theirs
(:func:`type_placement`, :func:`place_type_features`): copied to the GPU (``cuda-cuda``) or
page-locked on the host and read by the GPU through UVA views (``pinned-cuda``), so each
batch's type-local ids, already on the device, gather there without a trip through the host.
The homogeneous planner decides whether the data fits and refuses, with the numbers, a mode it
cannot fit.

``--save``/``--resume`` use :class:`~graphfeed.trainer.checkpoint.RunState` as the other
trainers do (resume keys :data:`HETERO_RESUME_KEYS`); ``--predict`` writes the best epoch's class
of every test node of the target type (or, with ``--predict-nodes all``, of every node of that
type in type-local id order), int64 ``.npy``.

Not covered on heterogeneous datasets (refused with a message): sampling methods other than
uniform.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import GraphfeedError
from .config import TrainConfig

__all__ = ["HeteroRGCN", "hetero_in_dim", "hetero_sampler", "run_hetero", "type_placement",
           "place_type_features", "TypeFeatures"]


def hetero_in_dim(dataset) -> int:
    """The widest per-type ``feat`` (what the model's input projections read); 1 when no type
    has features."""
    dims = [int(np.prod(f["feat"].row_shape) or 1) for f in dataset.type_features.values()
            if "feat" in f]
    return max(dims, default=1)


class HeteroRGCN(nn.Module):
    """R-GCN with mean aggregation over sampled layers: per layer, every destination of
    type ``t`` gets ``W_root[t] h_t + sum over relations r into t of W_r mean(h_src)``.

    ``in_dims``: node type -> input feature size (types left out get a learned input
    vector); outputs the logits of the ``target`` type's seeds (``target`` a tuple of types:
    a dict type -> outputs of its seeds, as typed link prediction uses). Every parameter takes part
    in every step: only the types and relations on a path of ``num_layers`` relations to the
    target get parameters (empty relations add zeros), and the last layer computes only the
    target type."""

    def __init__(self, node_types, edge_types, in_dims: dict, hidden: int, out_dim: int,
                 num_layers: int, target: str, dropout: float = 0.5):
        super().__init__()
        self.node_types, self.edge_types = tuple(node_types), tuple(edge_types)
        self.target, self.dropout, self.hidden = target, dropout, hidden
        # the types whose layer-i outputs lead to the target (the last layer computes only the
        # target's): a parameter off every path would get no gradient, which DDP refuses
        needed = [set() for _ in range(num_layers + 1)]
        needed[num_layers] = {target} if isinstance(target, str) else set(target)
        for i in range(num_layers, 0, -1):
            needed[i - 1] = needed[i] | {s for s, _, d in edge_types if d in needed[i]}
        inputs = needed[0]
        self.proj = nn.ModuleDict({t: nn.Linear(in_dims[t], hidden) for t in node_types
                                   if t in in_dims and t in inputs})
        self.free = nn.ParameterDict({t: nn.Parameter(torch.zeros(hidden)) for t in node_types
                                      if t not in in_dims and t in inputs})
        dims = [hidden] * num_layers + [out_dim]

        def types(i):
            return [t for t in node_types if t in needed[i + 1]]

        self.root = nn.ModuleList(
            nn.ModuleDict({t: nn.Linear(dims[i], dims[i + 1]) for t in types(i)})
            for i in range(num_layers))
        self.rel = nn.ModuleList(
            nn.ModuleDict({self._key(et): nn.Linear(dims[i], dims[i + 1], bias=False)
                           for et in edge_types if et[2] in types(i)})
            for i in range(num_layers))

    @staticmethod
    def _key(et) -> str:
        return "__".join(et)

    def forward(self, x_dict: dict, blocks) -> torch.Tensor:
        first = blocks[0]
        h = {}
        for t in self.node_types:
            n = first.num_src[t]
            if t not in self.proj and t not in self.free:
                continue
            if t in self.proj:
                h[t] = F.relu(self.proj[t](x_dict[t].float().reshape(n, -1)))
            else:
                h[t] = self.free[t].expand(n, -1)
        for i, b in enumerate(blocks):
            out = {t: lin(h[t][: b.num_dst[t]]) for t, lin in self.root[i].items()}
            for et, ei in b.edge_index_dict.items():
                s, _, d = et
                if self._key(et) not in self.rel[i]:
                    continue
                n_dst = b.num_dst[d]
                src = h[s]
                agg = src.new_zeros((n_dst, src.shape[1]))
                agg.index_add_(0, ei[1], src.index_select(0, ei[0]))
                cnt = torch.bincount(ei[1], minlength=n_dst).clamp_(min=1).to(src.dtype)
                out[d] = out[d] + self.rel[i][self._key(et)](agg / cnt[:, None])
            if i < len(blocks) - 1:
                out = {t: F.dropout(F.relu(v), self.dropout, self.training)
                       for t, v in out.items()}
            h = out
        if isinstance(self.target, str):
            return h[self.target]
        return {t: h[t] for t in self.target}  # several output types: a dict


def _open_type_features(dataset, backend: str, cache_size, cache_policy) -> dict:
    if backend == "ram":
        return dataset.type_features
    from ..features.registry import open_feature
    from ..datasets.hetero import type_feature_role

    paths = dataset.arrays.paths
    return {t: {n: open_feature(paths[type_feature_role(t, n)], backend, cache_size=cache_size,
                                cache_policy=cache_policy) for n in fs}
            for t, fs in dataset.type_features.items()}


#: the settings a resumed run must share with its checkpoint (``--resume``; the model is
#: always the R-GCN, so ``model`` and ``heads`` do not matter)
HETERO_RESUME_KEYS = tuple(k for k in TrainConfig.RESUME_KEYS if k not in ("model", "heads"))
#: modes whose graph the GPU samples: the vectorised torch sampler (``"torch-hetero"``)
GPU_SAMPLING_MODES = ("cuda-cuda", "pinned-cuda")


def _check_cfg(cfg) -> None:
    if cfg.sampling_method().kind != "uniform":
        raise GraphfeedError(f"heterogeneous datasets are sampled uniformly; got "
                             f"{cfg.sampling_method().describe()}")
    if cfg.mode not in ("auto", "cpu-cpu", "cpu-cuda") + GPU_SAMPLING_MODES:
        raise GraphfeedError(f"--mode {cfg.mode}: heterogeneous datasets support the modes auto, "
                             f"cpu-cpu, cpu-cuda, {', '.join(GPU_SAMPLING_MODES)}")


def hetero_sampler(cfg, graph, device: str):
    """The training sampler of ``cfg.mode``: the numba ``HeteroNeighborSampler`` on the CPU, or
    for ``cuda-cuda``/``pinned-cuda`` the ``TorchHeteroSampler`` on ``device`` (the graph copied
    there, or for ``pinned-cuda`` on a CUDA device read through UVA views of pinned memory).
    The per-type features stay where they are (read by the CPU at the sampled ids)."""
    if cfg.mode in GPU_SAMPLING_MODES:
        from ..sampling.torch_hetero import TorchHeteroSampler

        uva = cfg.mode == "pinned-cuda" and str(device).startswith("cuda")
        return TorchHeteroSampler(graph, list(cfg.fanouts), device=device, replace=cfg.replace,
                                  seed=cfg.seed, uva=uva)
    from ..sampling.hetero import HeteroNeighborSampler

    return HeteroNeighborSampler(graph, list(cfg.fanouts), replace=cfg.replace, seed=cfg.seed)


def _on_cuda(device) -> bool:
    return str(device).startswith("cuda")


def type_placement(cfg, graph, tfeats: dict, device: str, *, labels=None, hw=None):
    """Where a heterogeneous run keeps its per-type features ``tfeats`` (type -> name ->
    ``Feature``) and ``labels``: ``None`` in the modes that sample on the CPU; in
    ``cuda-cuda``/``pinned-cuda`` the homogeneous planner's
    :class:`~graphfeed.placement.Placement` for that mode
    (:func:`~graphfeed.placement.plan_placement` with the graph's and every feature's bytes):
    ``GraphfeedError`` with the numbers when the data cannot fit at all (``cuda-cuda``: graph +
    features per rank > the free GPU memory; ``pinned-cuda``: > the free host memory, or no
    UVA), a ``PlacementWarning`` past the planner's headroom. ``hw``: the
    :class:`~graphfeed.placement.hardware.Hardware` to decide on; by default measured on a CUDA
    ``device`` (:func:`~graphfeed.placement.hardware.detect_hardware`). On a CPU ``device``
    (the GPU modes' logic run without a GPU) and no ``hw``, no memory is checked and the
    features stay in memory on the CPU."""
    if cfg.mode not in GPU_SAMPLING_MODES:
        return None
    from ..placement.planner import Placement, plan_placement

    feats = [f for fs in tfeats.values() for f in fs.values()]
    if labels is not None:
        feats.append(labels)
    feature_bytes = sum(int(f.nbytes) for f in feats)
    if hw is None and not _on_cuda(device):
        return Placement(cfg.mode, f"--mode {cfg.mode} on the CPU device: per-type features in "
                         f"memory on the CPU (no GPU memory to check)", "cpu",
                         {"requested": cfg.mode, "graph_bytes": int(graph.nbytes),
                          "feature_bytes": feature_bytes})
    if hw is None:
        from ..distributed.world import World
        from ..placement.hardware import detect_hardware

        hw = detect_hardware(ranks_per_machine=World.from_env().local_world_size, device=device)
    return plan_placement(int(graph.nbytes), feature_bytes, hw, requested=cfg.mode)


@dataclass
class TypeFeatures:
    """A heterogeneous run's placed features: ``features`` type -> name -> ``Feature``,
    ``labels`` (``None`` when not given), ``keep_alive`` the pinned host tensors that UVA views
    alias (held for as long as the features are used), ``where`` a phrase for the log."""

    features: dict
    labels: object = None
    keep_alive: list = field(default_factory=list, repr=False)
    where: str = "read by the CPU"


def place_type_features(placement, tfeats: dict, device: str, *, labels=None) -> TypeFeatures:
    """``tfeats`` and ``labels`` where ``placement`` (:func:`type_placement`) says, through the
    homogeneous modes' placing (``placement.apply``): ``cuda-cuda`` a copy of each array in GPU
    memory (an ``InMemoryFeature`` on ``device``; disk and LMDB arrays read in chunks of about
    256 MB), ``pinned-cuda`` each array page-locked in place where possible and read through a
    UVA view (only the gathered rows cross the bus). ``placement`` ``None``: unchanged (read by
    the CPU). On a CPU ``device`` both GPU modes keep the rows in memory on the CPU."""
    if placement is None:
        return TypeFeatures(dict(tfeats), labels)
    import torch

    from ..placement.apply import place_feature

    dev = torch.device(device)
    if dev.type == "cuda":
        loc = placement.spec.features
        where = (f"copied to {dev}" if loc == "device" else
                 f"in pinned host memory, gathered by {dev} through UVA")
    else:
        loc, where = "device", "in memory on the CPU (no GPU)"
    keep: list = []
    out = {t: {n: place_feature(f, loc, dev, keep) for n, f in fs.items()}
           for t, fs in tfeats.items()}
    lab = None if labels is None else place_feature(labels, loc, dev, keep)
    return TypeFeatures(out, lab, keep, where)


def run_hetero(cfg, dataset, splits, device: str, rank: int, world_size: int,
               say: Callable[[str], None], on_epoch=None, *, on_batch=None):
    """Train ``cfg`` on heterogeneous ``dataset`` (``splits``: global train/valid/test ids of
    the target type) and return a ``TrainResult``. ``on_epoch(stats)`` after each epoch (its
    checkpoint written), ``on_batch(epoch, batch_index)`` after each optimizer step."""
    from ..loader.hetero import HeteroDataLoader
    from ..loader.item_sampler import ItemSampler
    from .checkpoint import RunState
    from .metrics import compute_metrics, majority_class, task_for
    from .result import EpochStats, TrainResult
    from .loop import _all_reduce, _epoch_line, _majority, _warnings, save_predictions
    from .report import final_line, log_epoch
    from .._memory import current_rss_bytes, peak_rss_bytes

    _check_cfg(cfg)
    h = dataset.hetero
    spec = dataset.metadata.hetero
    target = spec.target_type
    if target is None:
        raise GraphfeedError(f"dataset {dataset.name!r}: its hetero section names no target_type "
                             f"(the node type the labels and splits are of)")
    train_ids, valid_ids, test_ids = splits
    task = task_for(dataset.num_classes)
    labels_np = np.asarray(dataset.labels)
    tfeats = _open_type_features(dataset, cfg.features, cfg.cache_size, cfg.cache_policy)
    in_dims = {t: int(np.prod(f["feat"].row_shape) or 1) for t, f in tfeats.items() if "feat" in f}
    from ..features.memory import InMemoryFeature

    labels = InMemoryFeature(dataset.labels)
    placement = type_placement(cfg, h, tfeats, device, labels=labels)  # before any copy
    sampler = hetero_sampler(cfg, h, device)
    placed = place_type_features(placement, tfeats, device, labels=labels)
    gpu_sampling = cfg.mode in GPU_SAMPLING_MODES
    eval_sampler = sampler.with_fanouts(list(cfg.eval_fanouts or cfg.fanouts))
    say(f"graphfeed train: heterogeneous dataset {dataset.name} ({h.num_nodes:,} nodes of "
        f"{h.num_node_types} types, {h.num_edges:,} edges of {h.num_edge_types} types; target "
        f"{target!r}, {dataset.num_classes} classes; train/valid/test {len(train_ids):,}/"
        f"{len(valid_ids):,}/{len(test_ids):,}); model R-GCN (mean), fanouts {list(cfg.fanouts)} "
        f"per edge type, batch {cfg.batch_size}, device {device}, features {cfg.features}, seed "
        f"{cfg.seed}" + (f", {world_size} ranks" if world_size > 1 else ""))

    def loader(ids, s, train):
        if train:  # every rank the same number of batches (DDP steps together)
            items = ItemSampler(ids, cfg.batch_size, shuffle=True, seed=cfg.seed, rank=rank,
                                world_size=world_size)
        else:  # each rank scores its contiguous share once; the scores are gathered
            share = np.array_split(np.asarray(ids), world_size)[rank]
            items = ItemSampler(share, cfg.batch_size, shuffle=False, seed=cfg.seed)
        return HeteroDataLoader(items, s, type_features=placed.features, labels=placed.labels,
                                num_threads=cfg.num_threads, prefetch=cfg.prefetch)

    torch.manual_seed(cfg.seed)
    model = HeteroRGCN(h.node_types, h.edge_types, in_dims, cfg.hidden, dataset.num_classes,
                       len(cfg.fanouts), target, cfg.dropout).to(device)
    if world_size > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[torch.device(device).index]
                    if device.startswith("cuda") else None)
    net = model.module if world_size > 1 else model  # the plain module: no DDP collectives
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    result = TrainResult(mode=cfg.mode if gpu_sampling else
                         ("cpu-cpu" if device == "cpu" else "cpu-cuda"),
                         placement_reason=f"--mode {cfg.mode}: the torch heterogeneous sampler "
                         f"on {device}, per-type features {placed.where} ({placement.reason})"
                         if gpu_sampling else "heterogeneous datasets sample on the CPU",
                         world_size=world_size, model="rgcn", seed=cfg.seed, task=task.kind,
                         main_metric=task.main, eval_fanouts=list(cfg.eval_fanouts or cfg.fanouts))
    if gpu_sampling:
        say(f"graphfeed: placement {result.placement_reason}")
    train_loader = loader(train_ids, sampler, True)
    eval_loaders = {n: loader(ids, eval_sampler, False)
                    for n, ids in (("valid", valid_ids), ("test", test_ids))}

    def step_inputs(batch):
        batch = batch.to(device)
        return {t: v for t, v in batch.x_dict.items()}, batch.blocks, batch

    def scores(ld):
        """``(logits, labels)`` of every id of evaluation loader ``ld``, all ranks' gathered."""
        net.eval()
        outs, ys = [], []
        ld.set_epoch(0)  # the same neighbourhoods every evaluation (iterating moves the epoch on)
        with torch.no_grad():
            for batch in ld:
                x, blocks, batch = step_inputs(batch)
                outs.append(net(x, blocks).float().cpu())
                ys.append(batch.labels.cpu().reshape(-1))
        net.train()
        n = dataset.num_classes
        logits = torch.cat(outs) if outs else torch.zeros(0, n)
        y = torch.cat(ys) if ys else torch.zeros(0, dtype=torch.int64)
        if world_size > 1:
            logits, y = _gather(logits, y, n)
        return logits, y

    def evaluate(name):
        logits, y = scores(eval_loaders[name])
        if not len(y):
            return {m: float("nan") for m in task.metrics}
        return compute_metrics(task, y.numpy(), logits.numpy())

    state = RunState(cfg, net, opt, result, trainer="hetero", keys=HETERO_RESUME_KEYS,
                     rank=rank, world_size=world_size, say=say)
    try:
        for epoch, sums, seconds0 in state.epochs(train_loader):
            model.train()
            t0 = time.perf_counter()
            for batch in train_loader:
                x, blocks, batch = step_inputs(batch)
                y = batch.labels.to(torch.long).reshape(-1)
                out = model(x, blocks)
                loss = F.cross_entropy(out, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sums[0] += float(loss.detach()) * len(y)
                sums[1] += float((out.detach().argmax(-1) == y).sum())
                sums[2] += len(y)
                if on_batch is not None:
                    on_batch(epoch, batch.batch_index)
                if state.stop_requested():
                    state.stop_mid_epoch(train_loader, sums,
                                         seconds0 + time.perf_counter() - t0)
            seconds = seconds0 + time.perf_counter() - t0
            tot = _all_reduce(sums) if world_size > 1 else sums
            loss_avg = tot[0] / max(tot[2], 1)
            if not math.isfinite(loss_avg):
                raise GraphfeedError(f"the training loss became {loss_avg} in epoch {epoch}")
            t1 = time.perf_counter()
            evaluated = state.evaluates(epoch)
            metrics = {n: evaluate(n) if evaluated else {} for n in ("valid", "test")}
            es = EpochStats(epoch=epoch, loss=loss_avg, train_acc=tot[1] / max(tot[2], 1),
                            valid_acc=metrics["valid"].get("accuracy", float("nan")),
                            test_acc=metrics["test"].get("accuracy", float("nan")),
                            seeds_per_s=tot[2] / max(seconds, 1e-9),
                            batches_per_s=len(train_loader) / max(seconds, 1e-9),
                            seconds=seconds, peak_rss_bytes=peak_rss_bytes(),
                            valid=metrics["valid"], test=metrics["test"],
                            eval_seconds=time.perf_counter() - t1,
                            rss_bytes=current_rss_bytes())
            if not evaluated:
                es.skip_evaluation()
            state.end_epoch(es, es.valid[task.main] if evaluated else float("nan"))
            say(_epoch_line(es, task))
            log_epoch(cfg, es, rank)
            if state.finish_epoch(train_loader, es, on_epoch):
                break
        if not result.epochs:
            raise GraphfeedError("no epoch was run")
        if cfg.predict:  # every rank scores its share; rank 0 writes
            state.load_best()
            if cfg.predict_nodes == "test":
                logits, _ = scores(eval_loaders["test"])
            else:  # every node of the target type, in type-local id order
                off = int(h.node_offsets[h.type_id(target)])
                every = np.arange(off, off + h.num_nodes_of(target), dtype=np.int64)
                with loader(every, eval_sampler, False) as ld:
                    logits, _ = scores(ld)
            if rank == 0:
                pred = logits.argmax(-1).numpy().astype(np.int64)
                result.predictions = save_predictions(cfg.predict, pred)
                say(f"graphfeed train: wrote {len(pred):,} predictions ({cfg.predict_nodes} "
                    f"{target!r} nodes) to {cfg.predict}")
    finally:
        train_loader.close()
        for ld in eval_loaders.values():
            ld.close()
    result.checkpoint = state.checkpoint

    result.best_valid_acc = result.epochs[result.best_epoch].valid_acc
    result.test_acc = result.test.get("accuracy", float("nan"))
    result.final_test_acc = result.epochs[-1].test_acc
    from types import SimpleNamespace

    ids_ns = SimpleNamespace(valid_ids=valid_ids, test_ids=test_ids)
    result.majority = _majority(labels_np, majority_class(labels_np[train_ids]), ids_ns)
    result.warnings = _warnings(result, task)
    if cfg.mlp_baseline and rank == 0 and target in tfeats and "feat" in tfeats[target]:
        result.mlp_test = mlp_baseline(cfg, task, tfeats[target]["feat"], labels_np,
                                       int(h.node_offsets[h.type_id(target)]),
                                       (train_ids, valid_ids, test_ids), dataset.num_classes)
        result.mlp_test_acc = result.mlp_test["accuracy"]
    for w in result.warnings:
        say(f"graphfeed train: warning: {w}")
    say(final_line(result))
    return result


def _gather(logits, y, num_classes):
    """Every rank's evaluation rows, concatenated in rank order (sizes differ by rank)."""
    import torch.distributed as dist

    from ..distributed.sharing import collective_device

    dev = collective_device()
    n = torch.tensor([len(y)], device=dev)
    sizes = [torch.zeros_like(n) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, n)
    m = int(max(int(s) for s in sizes))
    pad_l = torch.zeros(m, num_classes, device=dev)
    pad_l[: len(y)] = logits.to(dev)
    pad_y = torch.zeros(m, dtype=torch.int64, device=dev)
    pad_y[: len(y)] = y.to(dev)
    all_l = [torch.zeros_like(pad_l) for _ in sizes]
    all_y = [torch.zeros_like(pad_y) for _ in sizes]
    dist.all_gather(all_l, pad_l)
    dist.all_gather(all_y, pad_y)
    k = [int(s) for s in sizes]
    return (torch.cat([a[:c] for a, c in zip(all_l, k)]).cpu(),
            torch.cat([a[:c] for a, c in zip(all_y, k)]).cpu())


def mlp_baseline(cfg, task, feat, labels_np, offset: int, splits, num_classes: int) -> dict:
    """The homogeneous run's MLP baseline (``loop.train_mlp_baseline``) on the target type's
    own features: ids and labels in type-local ids (``global - offset``)."""
    from types import SimpleNamespace

    from ..features.memory import InMemoryFeature
    from .loop import train_mlp_baseline

    n = feat.num_rows
    local = [np.asarray(s, dtype=np.int64) - offset for s in splits]
    labels = InMemoryFeature(np.ascontiguousarray(labels_np[offset:offset + n]))
    setup = SimpleNamespace(cfg=cfg, placed=SimpleNamespace(features={"feat": feat,
                                                                       "label": labels}),
                            train_ids=local[0], valid_ids=local[1], test_ids=local[2],
                            num_classes=num_classes)
    return train_mlp_baseline(setup, task)
