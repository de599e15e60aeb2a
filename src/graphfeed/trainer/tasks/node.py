"""Node classification, the ``node`` task, on the three kinds of data the plan places:

- **homogeneous** (``PlacedData``): ``--model`` (GraphSAGE, GCN, GAT, or a factory) over the
  blocks; layer-wise (exact) or sampled evaluation (:mod:`..evaluate`, :mod:`..layerwise`);
  ``--predict`` the class of every test node (or every node), the MLP baseline, the majority
  class;
- **typed** (``TypedPlaced``, a dataset with node and edge types): the R-GCN
  (``graphfeed.models.HeteroRGCN``) on the target type's seeds; layer-wise (exact,
  :mod:`..layerwise_typed`) or sampled evaluation (with the training fanouts unless
  ``--eval-fanouts``); predictions of the target type (type-local ids for ``--predict-nodes
  all``), the MLP baseline on the target type's own features;
- **partitioned** (``PartitionPlaced``, ``--partitions``): the model over the distributed
  sampler and features; each rank evaluates its part's share, the scores are gathered;
  ``--predict`` writes the class of every test node in increasing dataset id order.

Refused with a message: what a kind cannot do (sampling methods other than uniform on typed
graphs and partitions, GCN over partitions, layer-wise evaluation of partitions).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ...errors import GraphfeedError
from ..config import TrainConfig
from ..evaluate import (Evaluator, default_eval_fanouts, features_as_float, gather_rows,
                        layerwise_cost_note, plan_eval, resolve_eval_method, unwrap)
from ..metrics import compute_metrics, is_better, majority_class, task_for
from ..result import TrainResult
from .base import Task

#: bytes per parameter while training with Adam: the weight, its gradient and two moments
_BYTES_PER_PARAM = 16
#: the settings a resumed typed run must share with its checkpoint (the model is the R-GCN)
TYPED_RESUME_KEYS = tuple(k for k in TrainConfig.RESUME_KEYS if k not in ("model", "heads"))


def check_model_fits(cfg, in_dim: int, num_classes: int, device: str) -> None:
    """Refuse, before allocating anything, a model whose training state cannot fit in memory."""
    from ...models import parameter_count
    from ..._units import format_bytes

    params = parameter_count(cfg.model, in_dim, cfg.hidden, num_classes, len(cfg.fanouts))
    need = params * _BYTES_PER_PARAM
    if device.startswith("cuda"):
        import torch

        have, where = torch.cuda.get_device_properties(torch.device(device)).total_memory, device
    else:
        have, where = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "host memory"
    if need > have:
        raise GraphfeedError(
            f"model {cfg.model} with hidden={cfg.hidden} on {in_dim} input features has about "
            f"{params:,} parameters, {format_bytes(need)} to train with Adam, more than the "
            f"{format_bytes(have)} of {where}; use a smaller --hidden")


def check_partitions(cfg) -> None:
    """Refuse what a partitioned run does not support, naming the option."""
    from ...partition.book import read_book

    if cfg.model == "gcn":
        raise GraphfeedError("--partitions trains sage or gat: gcn's normalisation needs the "
                             "in-degree of every source node, which no part holds")
    if cfg.sampler != "uniform":
        raise GraphfeedError(f"--partitions samples uniformly; got --sampler {cfg.sampler}")
    if cfg.predict and cfg.predict_nodes != "test":
        raise GraphfeedError("--partitions --predict writes the test nodes' classes; "
                             "--predict-nodes all is for one graph")
    book = read_book(cfg.partitions)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    n = world if world > 1 else cfg.nproc
    if n % book.num_parts:
        raise GraphfeedError(f"--partitions {cfg.partitions} has {book.num_parts} parts: run a "
                             f"multiple of {book.num_parts} processes (--nproc), got {n}")
    if "feat" not in book.features:
        raise GraphfeedError(f"--partitions {cfg.partitions}: no node feature 'feat'")


def check_typed(cfg, dataset) -> str:
    """What node classification on a typed dataset refuses; returns the target type."""
    refuse_rgcn_options(cfg)
    if cfg.sampling_method().kind != "uniform":
        raise GraphfeedError(f"heterogeneous datasets are sampled uniformly; got "
                             f"{cfg.sampling_method().describe()}")
    target = dataset.metadata.hetero.target_type
    if target is None:
        raise GraphfeedError(f"dataset {dataset.name!r}: its hetero section names no target_type "
                             f"(the node type the labels and splits are of)")
    return target


def refuse_rgcn_options(cfg) -> None:
    """Typed graphs train the R-GCN: the options of the homogeneous models are refused by name."""
    if cfg.norm != "auto" or cfg.residual:
        flag = f"--norm {cfg.norm}" if cfg.norm != "auto" else "--residual"
        raise GraphfeedError(f"{flag}: typed (heterogeneous) datasets train the R-GCN, which has "
                             f"no norm or residual options; drop {flag}")


def save_predictions(path, array: np.ndarray) -> str:
    """Write ``array`` to ``.npy`` file ``path`` atomically; errors name the file."""
    from ..._io import save_npy

    try:
        save_npy(path, array)
    except OSError as e:
        raise GraphfeedError(f"cannot write predictions to {path}: {e.strerror or e}") from None
    return str(path)


def split_ids(dataset, split):
    """``(train, valid, test)`` node ids of stored split set ``split`` (``None``: the one the
    dataset has selected, set 0 unless opened otherwise). An index out of range is an error
    naming the range."""
    if split is not None:
        dataset = dataset.with_split(split)
    return (np.asarray(dataset.train_ids), np.asarray(dataset.valid_ids),
            np.asarray(dataset.test_ids))


@dataclass
class Preflight:
    """What node classification checked before placing data: the splits, classes, input width,
    the evaluation plan and method."""

    splits: tuple
    num_classes: int
    in_dim: int
    eval_plan: object
    eval_method: str = "sampled"
    eval_note: str = ""  # why auto evaluates by sampling with the training fanouts


def preflight(cfg, dataset, device: str) -> Preflight:
    """Everything node classification refuses before the data is placed or a model allocated."""
    splits = split_ids(dataset, cfg.split)
    if len(splits[0]) == 0:
        raise GraphfeedError(f"dataset {cfg.dataset!r} has no training ids")
    if getattr(dataset, "task_type", "node_classification") == "link_prediction":
        raise GraphfeedError(f"dataset {dataset.name!r} is a link-prediction dataset: train it "
                             f"with --task link")
    num_classes = int(dataset.num_classes)
    if num_classes < 2:
        raise GraphfeedError(
            f"dataset {cfg.dataset!r} has {num_classes} class(es); classification needs 2 or more")
    typed = getattr(dataset, "hetero", None) is not None
    row_shape = dataset.features["feat"].row_shape if "feat" in dataset.features else None
    if row_shape is None and typed:
        from ...models.rgcn import hetero_in_dim  # per-type features

        row_shape = (hetero_in_dim(dataset),)
    if row_shape is None:
        raise GraphfeedError(f"dataset {cfg.dataset!r} has no node feature 'feat'")
    in_dim = int(np.prod(row_shape)) if row_shape else 1
    check_model_fits(cfg, in_dim, num_classes, device)
    if typed:
        check_typed(cfg, dataset)
    elif not cfg.sampling_method().is_uniform:
        cfg.sampling_method().bind(dataset)  # the dataset's weights or times, as placing binds
    # the built-in models (the R-GCN on typed graphs too) evaluate layer-wise, unless the graph
    # is too large for it (then sampled, with the training fanouts); a custom model may turn
    # that into sampled once built (_eval_method_for)
    note = None
    if cfg.eval_method == "auto" and cfg.eval_fanouts is None:
        note = layerwise_cost_note(len(cfg.fanouts), dataset.num_nodes, dataset.num_edges,
                                   len(splits[1]) + len(splits[2]), cfg.fanouts)
    method = resolve_eval_method(cfg, too_costly=note)
    plan = plan_eval(len(cfg.fanouts), cfg.batch_size,
                     int(dataset.graph.in_degrees.max(initial=0)),
                     cfg.fanouts if note else cfg.eval_fanouts, in_dim=in_dim)
    return Preflight(splits, num_classes, in_dim, plan, method, note or "")


class ShareEvaluator:
    """Sampled evaluation where each rank scores its own share of a set (typed graphs: a
    contiguous slice; partitions: its part's share) through loaders built once, and the rows are
    gathered in rank order (:func:`~graphfeed.trainer.evaluate.gather_rows`). ``loaders``: name
    -> loader; ``infer(net, batch)`` -> ``(logits, labels, ids)`` of a batch (or ``None`` for
    an empty one)."""

    def __init__(self, loaders: dict, infer, world_size: int):
        self.loaders, self.infer, self.world_size = loaders, infer, world_size

    def scores(self, model, name: str, *, progress: bool = False):
        """``(logits float32 (n, C), labels int64 (n,), ids int64 (n,))`` on the CPU over every
        rank's share, in rank order."""
        import torch

        from ..._progress import bar

        net = unwrap(model)
        was = net.training
        net.eval()
        ld = self.loaders[name]
        ld.set_epoch(0)  # the same neighbourhoods every evaluation
        rows = []
        with torch.no_grad(), bar(len(ld), f"eval {name}", enabled=progress) as pbar:
            for batch in ld:
                got = self.infer(net, batch)
                if got is not None:
                    logits, y, ids = got
                    rows.append(torch.cat([logits.double().cpu(), y.double().cpu().reshape(-1, 1),
                                           ids.double().cpu().reshape(-1, 1)], dim=1))
                pbar.update(1)
        net.train(was)
        local = torch.cat(rows) if rows else None
        out = gather_rows(local, self.world_size) if self.world_size > 1 else local
        if out is None or out.shape[0] == 0:
            return None, torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)
        return out[:, :-2].float(), out[:, -2].long(), out[:, -1].long()

    def close(self) -> None:
        for ld in self.loaders.values():
            ld.close()
        self.loaders = {}


class NodeTask(Task):
    """Node classification (module docstring). Build it with :meth:`prepare`."""

    #: chosen on Cora's and CiteSeer's validation sets (docs/training.md, "What the defaults
    #: reach"): their 120-140 labelled nodes overfit within a few steps without it
    defaults = {"dropout": 0.7, "weight_decay": 5e-3}

    def __init__(self, cfg, *, data, dataset, splits, num_classes: int, in_dim, device: str,
                 rank: int = 0, world_size: int = 1, say=print, model_factory=None,
                 eval_method: str = "sampled", eval_plan=None):
        super().__init__(cfg, device=device, rank=rank, world_size=world_size, say=say)
        self.data, self.dataset = data, dataset
        self.train_ids, self.valid_ids, self.test_ids = (np.asarray(s) for s in splits)
        self.num_classes, self.in_dim = num_classes, in_dim
        self.kind = task_for(num_classes)
        self.main = self.kind.main
        self.factory, self.eval_method, self.eval_plan = model_factory, eval_method, eval_plan
        self.evaluator = None
        self.graph = ("partitioned" if getattr(data, "mode", None) == "partitioned" else
                      "typed" if getattr(dataset, "hetero", None) is not None else "homogeneous")
        self.trainer = {"homogeneous": "node", "typed": "hetero",
                        "partitioned": "partitioned"}[self.graph]
        self.resume_keys = (TYPED_RESUME_KEYS if self.graph == "typed"
                            else TrainConfig.RESUME_KEYS)
        self._epoch_start = None

    # ------------------------------------------------------------------ building
    @classmethod
    def check(cls, cfg, dataset, device: str) -> dict:
        """``--dry-run``: :func:`preflight`, and what the run would train and evaluate."""
        pre = preflight(cfg, dataset, device)
        typed = getattr(dataset, "hetero", None) is not None
        return {
            "model": "rgcn" if typed else cfg.model, "in_dim": pre.in_dim,
            "num_classes": pre.num_classes,
            "train/valid/test": "/".join(str(len(s)) for s in pre.splits),
            "fanouts": list(cfg.fanouts), "eval": pre.eval_method,
            "eval_fanouts": ([-1] * len(cfg.fanouts) if pre.eval_method == "layerwise"
                             else list(cfg.eval_fanouts or cfg.fanouts) if typed  # the R-GCN's
                             else list(pre.eval_plan.fanouts)),
            "eval_batch_size": cfg.batch_size if typed else pre.eval_plan.batch_size,
            "eval_every": cfg.eval_every,
        }

    @classmethod
    def prepare(cls, cfg, dataset, plan, *, rank: int, world_size: int, say, model=None):
        """Check (:func:`preflight`) and place ``dataset`` (or ``cfg.partitions``) with ``plan``;
        the task, ready for ``fit``."""
        if cfg.partitions:
            return cls._prepare_partitions(cfg, plan, rank=rank, world_size=world_size, say=say,
                                           model=model)
        pre = preflight(cfg, dataset, plan.device)
        if getattr(dataset, "hetero", None) is not None:
            return cls._prepare_typed(cfg, dataset, plan, pre, rank=rank, world_size=world_size,
                                      say=say)
        placed = plan.prepare(dataset, list(cfg.fanouts), replace=cfg.replace, seed=cfg.seed,
                              method=cfg.sampling_method())
        # the method's tables: once per machine under several ranks (or mapped from
        # --table-cache), before any loader thread samples
        if world_size > 1 or cfg.table_cache:
            from ...distributed.tables import share_prepared

            share_prepared(placed.sampler, plan.world, private_copy=plan.private_copy,
                           cache_dir=cfg.table_cache)
        device = str(placed.device)
        feat = placed.features["feat"]
        say(f"graphfeed: placement {placed.placement.reason}")
        tr, va, te = pre.splits
        say(f"graphfeed train: dataset {dataset.name} ({dataset.num_nodes:,} nodes, "
            f"{dataset.num_edges:,} edges, {pre.in_dim} features "
            f"({str(feat.dtype).replace('torch.', '')}), {pre.num_classes} classes; "
            f"train/valid/test {len(tr):,}/{len(va):,}/{len(te):,}); model {cfg.model}, fanouts "
            f"{list(cfg.fanouts)}, {describe_eval(cfg, pre)}, batch {cfg.batch_size}, sampler "
            f"{cfg.sampling_method().describe()}, device {device}, features {cfg.features}, "
            f"seed {cfg.seed}" + (f", {world_size} ranks" if world_size > 1 else ""))
        return cls(cfg, data=placed, dataset=dataset, splits=pre.splits,
                   num_classes=pre.num_classes, in_dim=pre.in_dim, device=device, rank=rank,
                   world_size=world_size, say=say, model_factory=model,
                   eval_method=pre.eval_method, eval_plan=pre.eval_plan)

    @classmethod
    def _prepare_typed(cls, cfg, dataset, plan, pre, *, rank, world_size, say):
        from ...models import typed_in_dims

        target = check_typed(cfg, dataset)
        h = dataset.hetero
        placed = plan.place_typed(dataset, list(cfg.fanouts), replace=cfg.replace, seed=cfg.seed)
        tr, va, te = pre.splits
        say(f"graphfeed train: heterogeneous dataset {dataset.name} ({h.num_nodes:,} nodes of "
            f"{h.num_node_types} types, {h.num_edges:,} edges of {h.num_edge_types} types; "
            f"target {target!r}, {dataset.num_classes} classes; train/valid/test {len(tr):,}/"
            f"{len(va):,}/{len(te):,}); model R-GCN (mean), fanouts {list(cfg.fanouts)} per edge "
            f"type, {describe_typed_eval(cfg, pre.eval_method)}, batch {cfg.batch_size}, device "
            f"{plan.device}, features {cfg.features}, seed {cfg.seed}"
            + (f", {world_size} ranks" if world_size > 1 else ""))
        from ...placement.typed import describe

        say(f"graphfeed: placement {describe(placed)}")
        task = cls(cfg, data=placed, dataset=dataset, splits=pre.splits,
                   num_classes=pre.num_classes, in_dim=typed_in_dims(placed.features),
                   device=str(plan.device), rank=rank, world_size=world_size, say=say,
                   eval_method=pre.eval_method)
        task.target = target
        return task

    @classmethod
    def _prepare_partitions(cls, cfg, plan, *, rank, world_size, say, model):
        check_partitions(cfg)
        placed = plan.place_partitions(cfg.partitions, list(cfg.fanouts), replace=cfg.replace,
                                       seed=cfg.seed, timeout_s=cfg.dist_timeout,
                                       remote_cache=cfg.remote_cache)
        book, feat = placed.book, placed.features["feat"]
        in_dim = int(np.prod(feat.row_shape)) if feat.row_shape else 1
        eval_fanouts = tuple(cfg.eval_fanouts or default_eval_fanouts(len(cfg.fanouts)))
        say(f"graphfeed: placement {placed.reason}")
        say(f"graphfeed train: partitions {book.path} ({book.num_parts} parts, {book.method}, "
            f"edge cut {100 * book.edge_cut_fraction:.1f}%), {book.num_nodes:,} nodes, "
            f"{placed.exchange.size} ranks ({placed.per_part} per part), model {cfg.model}, "
            f"fanouts {list(cfg.fanouts)}, eval fanouts {list(eval_fanouts)}, batch "
            f"{cfg.batch_size}, seed {cfg.seed}"
            + (f", remote cache {cfg.remote_cache} rows" if cfg.remote_cache else ""))
        s = placed.splits
        from ..evaluate import EvalPlan

        return cls(cfg, data=placed, dataset=None, splits=(s["train"], s["valid"], s["test"]),
                   num_classes=int(book.num_classes), in_dim=in_dim, device="cpu", rank=rank,
                   world_size=world_size, say=say, model_factory=model,
                   eval_plan=EvalPlan(eval_fanouts, cfg.batch_size))

    def build_model(self):
        cfg = self.cfg
        if self.graph == "typed":
            from ...models import HeteroRGCN

            h = self.dataset.hetero
            return HeteroRGCN(h.node_types, h.edge_types, self.in_dim, cfg.hidden,
                              self.num_classes, len(cfg.fanouts), self.target, cfg.dropout)
        if self.factory is not None:
            net = self.factory(self.in_dim, self.num_classes)
            self.custom_name = type(net).__name__
        else:
            from ...models import build_model

            degrees = (self.dataset.graph.in_degrees if cfg.model == "gcn"
                       and self.graph == "homogeneous" else None)
            net = build_model(cfg.model, self.in_dim, cfg.hidden, self.num_classes,
                              len(cfg.fanouts), dropout=cfg.dropout, heads=cfg.heads,
                              in_degrees=degrees, norm=cfg.norm, residual=cfg.residual)
        if self.graph == "homogeneous":
            self.eval_method = _eval_method_for(cfg, self.eval_method, net)
        return net

    def result(self) -> TrainResult:
        cfg, d = self.cfg, self.data
        if self.graph == "partitioned":
            mode, reason = "partitioned", d.reason
        elif self.graph == "typed":
            from ...placement.typed import describe

            mode, reason = d.mode, describe(d)
        else:
            mode, reason = d.mode, d.placement.reason
        if self.graph == "typed":
            name = "rgcn"
        else:
            name = cfg.model if self.factory is None else self.custom_name
        layerwise = self.eval_method == "layerwise"
        fanouts = ([-1] * len(cfg.fanouts) if layerwise else
                   list(self.eval_plan.fanouts) if self.eval_plan is not None else
                   list(cfg.eval_fanouts or cfg.fanouts))
        return TrainResult(mode=mode, placement_reason=reason, model=name, task=self.kind.kind,
                           main_metric=self.main, eval_fanouts=fanouts,
                           eval_method=self.eval_method)

    def train_loader(self):
        cfg = self.cfg
        if self.graph == "partitioned":
            return self.data.loader(self.train_ids, train=True, batch_size=cfg.batch_size,
                                    seed=cfg.seed, prefetch=cfg.prefetch)
        if self.graph == "typed":
            return self._typed_loader(self.train_ids, train=True)
        from ...placement.plan import node_loader

        return node_loader(self.train_ids, self.data, batch_size=cfg.batch_size, shuffle=True,
                           seed=cfg.seed, rank=self.rank, world_size=self.world_size,
                           num_threads=cfg.num_threads, prefetch=cfg.prefetch)

    def _typed_loader(self, ids, *, train: bool, sampler=None):
        from ...loader.dataloader import DataLoader
        from ...loader.item_sampler import ItemSampler

        cfg = self.cfg
        if train:  # every rank the same number of batches (DDP steps together)
            items = ItemSampler(ids, cfg.batch_size, shuffle=True, seed=cfg.seed, rank=self.rank,
                                world_size=self.world_size)
        else:  # each rank scores its contiguous share once; the scores are gathered
            share = np.array_split(np.asarray(ids), self.world_size)[self.rank]
            items = ItemSampler(share, cfg.batch_size, shuffle=False, seed=cfg.seed)
        return DataLoader(items, sampler or self.data.sampler,
                          type_features=self.data.features, labels=self.data.labels,
                          num_threads=cfg.num_threads, prefetch=cfg.prefetch)

    def _forward(self, model, batch):
        """``(logits, labels)`` of a batch on the training device."""
        import torch

        if self.graph == "typed":
            batch = batch.to(self.device)
            out = model(batch.x_dict, batch.blocks)
        elif self.graph == "partitioned":
            out = model(batch.node_features["feat"].float(), batch.blocks)
        else:
            out = model(features_as_float(batch.x), batch.blocks)
        return out, batch.labels.to(torch.long).reshape(-1)

    def step(self, model, batch):
        import torch.nn.functional as F

        out, y = self._forward(model, batch)
        n = int(y.shape[0])
        # an empty batch (a partitioned rank out of seeds) still joins DDP's all-reduce
        loss = F.cross_entropy(out, y) if n else out.sum() * 0.0
        return loss, (out.detach().argmax(-1) == y).sum(), n

    def before_epoch(self, epoch: int) -> None:
        if self.graph == "partitioned":  # the epoch line counts this epoch's training only
            self._epoch_start = self.data.epoch_stats()

    def after_epoch(self, epoch: int) -> str:
        if self.graph != "partitioned":
            return ""
        line = self.data.epoch_line(self._epoch_start)
        self.data.after_epoch(epoch)
        return line

    # ------------------------------------------------------------------ evaluation
    def _infer(self, net, batch):
        if self.graph == "partitioned" and not batch.seeds.numel():
            return None
        out, y = self._forward(net, batch)
        ids = batch.seeds if self.graph == "partitioned" else y.new_zeros(y.shape)
        return out, y, ids

    def _share_evaluator(self, sets: dict):
        cfg = self.cfg
        if self.graph == "typed":
            s = self.data.sampler.with_fanouts(list(cfg.eval_fanouts or cfg.fanouts))
            loaders = {n: self._typed_loader(ids, train=False, sampler=s) for n, ids in sets.items()}
        else:
            s = self.data.sampler.with_fanouts(list(self.eval_plan.fanouts))
            loaders = {n: self.data.loader(ids, train=False, batch_size=cfg.batch_size,
                                           seed=cfg.seed, prefetch=cfg.prefetch, sampler=s)
                       for n, ids in sets.items()}
        return ShareEvaluator(loaders, self._infer, self.world_size)

    def _evaluator(self, sets: dict, net, *, labels: bool = True):
        cfg = self.cfg
        if self.graph == "typed" and self.eval_method == "layerwise":
            from ..layerwise_typed import TypedLayerwiseEvaluator

            return TypedLayerwiseEvaluator(self.data, self.dataset.hetero, sets,
                                           unwrap(net).num_layers, rank=self.rank,
                                           world_size=self.world_size,
                                           num_threads=cfg.num_threads, labels=labels)
        if self.graph != "homogeneous":
            return self._share_evaluator(sets)
        if self.eval_method == "layerwise":
            from ..layerwise import LayerwiseEvaluator

            return LayerwiseEvaluator(self.data, self.dataset.graph, sets, unwrap(net).num_layers,
                                      rank=self.rank, world_size=self.world_size,
                                      num_threads=cfg.num_threads, prefetch=cfg.prefetch,
                                      labels=labels)
        return Evaluator(self.data, sets, self.eval_plan, seed=cfg.seed, rank=self.rank,
                         world_size=self.world_size, num_threads=cfg.num_threads,
                         prefetch=cfg.prefetch, labels=labels)

    def open_evaluation(self, net) -> None:
        self.net = net
        self.evaluator = self._evaluator({"valid": self.valid_ids, "test": self.test_ids}, net)

    def _scores(self, evaluator, model, name, progress):
        if isinstance(evaluator, ShareEvaluator):
            logits, y, _ = evaluator.scores(model, name, progress=progress)
            return logits, y
        return evaluator.logits(model, name, progress=progress)

    def evaluate(self, model, *, progress: bool = False) -> dict:
        names = ("valid", "test")
        if isinstance(self.evaluator, ShareEvaluator):
            got = {n: self._scores(self.evaluator, model, n, progress) for n in names}
        else:  # both sets from one pass (layer-wise: each layer once for both)
            got = self.evaluator.evaluate(model, names, progress=progress)
        out = {}
        for name in names:
            logits, y = got[name]
            out[name] = (compute_metrics(self.kind, y.numpy(), logits.numpy())
                         if logits is not None and len(y)
                         else {m: float("nan") for m in self.kind.metrics})
        return out

    def predict(self, model, path) -> str:
        cfg = self.cfg
        typed = self.graph == "typed"
        if self.graph == "homogeneous" or (typed and self.eval_method == "layerwise"):
            if cfg.predict_nodes == "test":
                ids = self.test_ids
            elif typed:  # every node of the target type, in type-local id order
                h = self.dataset.hetero
                off = int(h.node_offsets[h.type_id(self.target)])
                ids = np.arange(off, off + h.num_nodes_of(self.target), dtype=np.int64)
            else:
                ids = np.arange(self.dataset.num_nodes, dtype=np.int64)
            ev = self._evaluator({"predict": ids}, model, labels=False)
            try:
                classes, _ = ev.logits(model, "predict", progress=cfg.progress and self.rank == 0,
                                       argmax=True)
            finally:
                ev.close()
            pred = (classes.reshape(-1).numpy() if classes is not None else np.zeros(0))
            what = (f"{cfg.predict_nodes} {self.target!r} nodes" if typed
                    else f"{cfg.predict_nodes} nodes")
        elif typed:
            h = self.dataset.hetero
            if cfg.predict_nodes == "test":
                logits, _, _ = self.evaluator.scores(model, "test")
            else:  # every node of the target type, in type-local id order
                off = int(h.node_offsets[h.type_id(self.target)])
                every = np.arange(off, off + h.num_nodes_of(self.target), dtype=np.int64)
                ev = self._share_evaluator({"all": every})
                try:
                    logits, _, _ = ev.scores(model, "all")
                finally:
                    ev.close()
            pred = logits.argmax(-1).numpy() if logits is not None else np.zeros(0)
            what = f"{cfg.predict_nodes} {self.target!r} nodes"
        else:  # partitions: every part's test nodes, in increasing dataset (original) id
            logits, _, ids = self.evaluator.scores(model, "test")
            orig = self._original_ids(ids.numpy())
            order = np.argsort(orig, kind="stable")
            pred = logits.argmax(-1).numpy()[order] if logits is not None else np.zeros(0)
            what = "test nodes, in increasing dataset id"
        if self.rank != 0:
            return str(path)
        pred = np.asarray(pred).astype(np.int64)
        save_predictions(path, pred)
        self.say(f"graphfeed train: wrote {len(pred):,} predictions ({what}) to {path}")
        return str(path)

    def _original_ids(self, ids: np.ndarray) -> np.ndarray:
        """Dataset ids of partitioned (relabelled) global ids: every rank's own part maps its
        nodes, the sum over ranks of one part each gives all (a collective)."""
        import torch

        part = self.data.part
        mine = np.zeros(ids.shape[0], dtype=np.int64)
        own = (ids >= part.lo) & (ids < part.hi)
        first_of_part = self.data.exchange.rank % self.data.per_part == 0
        if first_of_part:
            mine[own] = np.asarray(part.orig_ids)[ids[own] - part.lo]
        if self.world_size > 1:
            from .. import fit

            t = torch.from_numpy(mine.astype(np.float64))
            return np.asarray(fit.all_reduce(t.tolist()), dtype=np.int64)
        return mine

    def close(self) -> None:
        if self.evaluator is not None:
            self.evaluator.close()
            self.evaluator = None

    # ------------------------------------------------------------------ the end
    def finish(self, result) -> None:
        cfg = self.cfg
        if self.graph == "partitioned":  # labels and features live in the parts
            result.warnings = _warnings(result, self.kind)
            return
        labels = np.asarray(self.dataset.labels)
        cls = majority_class(labels[self.train_ids])

        def rate(ids):
            return float(np.mean(labels[ids] == cls)) if len(ids) else float("nan")

        result.majority = {"class": cls, "valid_acc": rate(self.valid_ids),
                           "test_acc": rate(self.test_ids)}
        result.warnings = _warnings(result, self.kind, labels[self.valid_ids])
        if not cfg.mlp_baseline or self.rank != 0:
            return
        if self.graph == "homogeneous":
            feat, lab = self.data.features["feat"], self.data.features["label"]
            ids = (self.train_ids, self.valid_ids, self.test_ids)
        else:
            tf = self.data.features.get(self.target, {})
            if "feat" not in tf:
                return
            from ...features.memory import InMemoryFeature

            h = self.dataset.hetero
            feat = tf["feat"]
            off = int(h.node_offsets[h.type_id(self.target)])
            lab = InMemoryFeature(np.ascontiguousarray(labels[off:off + feat.num_rows]))
            ids = tuple(np.asarray(s, dtype=np.int64) - off for s in
                        (self.train_ids, self.valid_ids, self.test_ids))
        result.mlp_test = train_mlp_baseline(cfg, self.kind, feat, lab, ids, self.num_classes)
        result.mlp_test_acc = result.mlp_test["accuracy"]


def _eval_method_for(cfg, method: str, net) -> str:
    """``method``, or sampled when a custom model cannot be evaluated layer-wise (refused when
    ``--eval layerwise`` asked for it)."""
    from ..layerwise import supports_layerwise

    if method != "layerwise" or supports_layerwise(net):
        return method
    return resolve_eval_method(
        cfg, supported=False,
        why_not=f"model {type(net).__name__} is not a graphfeed BlockGNN whose every layer "
                f"depends only on its destinations' in-edges (layerwise_exact)")


def describe_typed_eval(cfg, method: str) -> str:
    """The evaluation part of a typed run's first line."""
    every = f" every {cfg.eval_every} epochs" if cfg.eval_every > 1 else ""
    if method == "layerwise":
        return f"evaluation layer-wise (every neighbour){every}"
    return f"eval fanouts {list(cfg.eval_fanouts or cfg.fanouts)} per edge type{every}"


def describe_eval(cfg, pre) -> str:
    every = f" every {cfg.eval_every} epochs" if cfg.eval_every > 1 else ""
    if pre.eval_method == "layerwise":
        return f"evaluation layer-wise (every neighbour){every}"
    why = f" (the training fanouts: {pre.eval_note})" if pre.eval_note else ""
    return (f"eval fanouts {list(pre.eval_plan.fanouts)}{why} in batches of "
            f"{pre.eval_plan.batch_size}{every}")


def _warnings(r: TrainResult, kind, valid_labels=None) -> list:
    """What the run should be told about its best epoch, judged on the main metric: a
    multiclass model whose valid accuracy is no better than always answering the majority class;
    a binary model whose valid ROC-AUC is within noise of a constant answer's 0.5 (two standard
    errors of the AUC of a random scorer on the valid set's positives and negatives), where
    comparing accuracies would wrongly blame an imbalanced task."""
    out = []
    if r.best_epoch < 0:
        return out
    best = r.epochs[r.best_epoch]
    maj = r.majority.get("valid_acc", float("nan")) if r.majority else float("nan")
    if kind.main == "accuracy":
        if math.isfinite(best.valid_acc) and math.isfinite(maj) and best.valid_acc <= maj + 1e-9:
            out.append(
                f"the model does no better than always answering the majority class "
                f"{r.majority['class']}: valid accuracy {best.valid_acc:.4f} vs {maj:.4f}")
        return out
    auc = (best.valid or {}).get("roc_auc", float("nan"))
    if not math.isfinite(auc):
        return out
    bound = 0.5
    if valid_labels is not None and len(valid_labels):
        pos = int(np.count_nonzero(valid_labels == 1))
        neg = int(len(valid_labels) - pos)
        if pos and neg:
            bound = 0.5 + 2.0 * math.sqrt((pos + neg + 1) / (12.0 * pos * neg))
    if auc <= bound + 1e-9:
        what = (f"always answering the majority class {r.majority['class']}"
                if r.majority else "a constant answer")
        out.append(f"the model does no better than {what}: valid ROC-AUC {auc:.4f}, within "
                   f"noise of the 0.5 of a constant answer (below {bound:.4f}, two standard "
                   f"errors on this valid set)")
    return out


def train_mlp_baseline(cfg, kind, feat, labels, ids, num_classes: int) -> dict:
    """An MLP of the same width and depth on each node's own features ``feat`` (labels
    ``labels``, train/valid/test ``ids`` rows of both), trained on the same split (best epoch on
    the main validation metric): what the graph adds over the features."""
    import torch
    import torch.nn.functional as F

    from ..._progress import bar
    from ...models import MLP

    def rows(i):
        t = torch.as_tensor(np.asarray(i), dtype=torch.int64)
        return features_as_float(feat.read(t)).cpu(), labels.read(t).to(torch.long).reshape(-1).cpu()

    (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = (rows(i) for i in ids)
    torch.manual_seed(cfg.seed)
    mlp = MLP(x_tr.shape[1], cfg.hidden, num_classes, num_layers=len(cfg.fanouts),
              dropout=cfg.dropout)
    opt = torch.optim.Adam(mlp.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    g = torch.Generator().manual_seed(cfg.seed)
    best_va, best_te = float("nan"), {m: float("nan") for m in kind.metrics}
    # cheap: give the baseline every chance, and the GNN's budget: --patience stops it too
    epochs = max(cfg.epochs, 20)
    bad = 0

    def score(x, y):
        if not len(y):
            return {m: float("nan") for m in kind.metrics}
        with torch.no_grad():
            return compute_metrics(kind, y.numpy(), mlp(x).numpy())

    with bar(epochs, "MLP baseline", enabled=cfg.progress, unit="epoch") as pbar:
        for _ in range(epochs):
            mlp.train()
            perm = torch.randperm(x_tr.shape[0], generator=g)
            for i in range(0, len(perm), cfg.batch_size):
                idx = perm[i: i + cfg.batch_size]
                loss = F.cross_entropy(mlp(x_tr[idx]), y_tr[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            mlp.eval()
            va = score(x_va, y_va)[kind.main]
            pbar.update(1)
            if is_better(va, best_va):
                best_va, best_te, bad = va, score(x_te, y_te), 0
            else:
                bad += 1
                if cfg.patience and bad >= max(cfg.patience, 20):
                    break
    return best_te


__all__ = ["NodeTask", "ShareEvaluator", "check_model_fits", "check_partitions", "check_typed",
           "save_predictions", "train_mlp_baseline", "describe_eval"]
