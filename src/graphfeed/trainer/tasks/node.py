"""Node classification, the ``node`` task, on any placed data (``graphfeed.placement.Placed``):
one graph, untyped or typed (a dataset with node and edge types), or this rank's part of a
partitioned dataset (``--partitions``).

The data says what differs: its model (``graphfeed.models.node_model``: the R-GCN on typed
data, ``--model`` on untyped), its loaders (``Placed.loader``), its placement line, its epoch
hooks (a partition's exchange counters), the dataset ids of its node ids. Evaluation is one
call (``trainer.tasks.base.open_evaluator``: layer-wise, exact, for the built-in models, else
sampled); this module turns its rows into metrics, predictions and baselines (the MLP on the
seeds' own features, the majority class) where the data can be read by one rank.

Refused with a message before data is placed: what the data cannot do (a sampling method a
typed graph does not honour, GCN over partitions, layer-wise evaluation of partitions).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ...errors import GraphfeedError
from ...placement.partitioned import check_partitions
from ..config import TrainConfig
from ..evaluate import (choose_evaluation, describe_evaluation, method_for_model, plan_eval,
                        resolve_eval_method)
from ..metrics import compute_metrics, is_better, majority_class, task_for
from ..predictions import save
from ..result import TrainResult
from .base import Task, describe_dataset

#: bytes per parameter while training with Adam: the weight, its gradient and two moments
_BYTES_PER_PARAM = 16


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
    from ...models import check_options, input_width
    from ...placement.plan import check_dataset

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
    in_dim = input_width(dataset, cfg.inputs)
    check_model_fits(cfg, in_dim, num_classes, device)
    check_options(cfg, dataset)
    check_dataset(dataset, method=cfg.sampling_method())
    method, plan, note = choose_evaluation(cfg, dataset, len(splits[1]) + len(splits[2]),
                                           in_dim)
    return Preflight(splits, num_classes, in_dim, plan, method, note)


#: the checkpoint's trainer tag and the settings a resume must share, by the data's kind (the
#: typed model is always the R-GCN: --model and --heads do not matter)
TRAINERS = {"plain": "node", "typed": "hetero", "partitioned": "partitioned"}
RESUME_KEYS = {"typed": tuple(k for k in TrainConfig.RESUME_KEYS if k not in ("model", "heads"))}


class NodeTask(Task):
    """Node classification (module docstring). Build it with :meth:`prepare`."""

    #: chosen on Cora's and CiteSeer's validation sets (docs/training.md, "What the defaults
    #: reach"): their 120-140 labelled nodes overfit within a few steps without it
    defaults = {"dropout": 0.7, "weight_decay": 5e-3}

    def __init__(self, cfg, *, data, splits, num_classes: int, device: str, rank: int = 0,
                 world_size: int = 1, say=print, model_factory=None,
                 eval_method: str = "sampled", eval_plan=None):
        super().__init__(cfg, device=device, rank=rank, world_size=world_size, say=say)
        self.data = data
        self.train_ids, self.valid_ids, self.test_ids = (np.asarray(s) for s in splits)
        self.num_classes = num_classes
        self.kind = task_for(num_classes)
        self.main = self.kind.main
        self.factory, self.eval_method, self.eval_plan = model_factory, eval_method, eval_plan
        self.evaluator = None
        self.trainer = TRAINERS[data.kind]
        self.resume_keys = RESUME_KEYS.get(data.kind, TrainConfig.RESUME_KEYS)
        self.model_name = cfg.model

    # ------------------------------------------------------------------ building
    @classmethod
    def check(cls, cfg, dataset, device: str) -> dict:
        """``--dry-run``: :func:`preflight`, and what the run would train and evaluate."""
        from ...models import model_name

        pre = preflight(cfg, dataset, device)
        return {
            "model": model_name(cfg, dataset.hetero is not None),
            "in_dim": pre.in_dim, "num_classes": pre.num_classes,
            "train/valid/test": "/".join(str(len(s)) for s in pre.splits),
            "fanouts": list(cfg.fanouts), "eval": pre.eval_method,
            "eval_fanouts": ([-1] * len(cfg.fanouts) if pre.eval_method == "layerwise"
                             else list(pre.eval_plan.fanouts)),
            "eval_batch_size": pre.eval_plan.batch_size,
            "eval_every": cfg.eval_every,
        }

    @classmethod
    def prepare(cls, cfg, dataset, plan, *, rank: int, world_size: int, say, model=None):
        """Check (:func:`preflight`) and place ``dataset`` (or ``cfg.partitions``) with ``plan``;
        the task, ready for ``fit``."""
        if cfg.partitions:
            return cls._prepare_partitions(cfg, plan, rank=rank, world_size=world_size, say=say,
                                           model=model)
        from ...models import model_name

        pre = preflight(cfg, dataset, plan.device)
        placed = plan.place_dataset(dataset, list(cfg.fanouts), inputs=cfg.inputs,
                                    replace=cfg.replace,
                                    seed=cfg.seed, method=cfg.sampling_method())
        # the method's tables: once per machine under several ranks (or mapped from
        # --table-cache), before any loader thread samples
        if world_size > 1 or cfg.table_cache:
            from ...distributed.tables import share_prepared

            share_prepared(placed.sampler, plan.world, private_copy=plan.private_copy,
                           cache_dir=cfg.table_cache)
        say(f"graphfeed: placement {placed.describe()}")
        tr, va, te = pre.splits
        typed = placed.hetero is not None
        feat = next(iter(placed.input_features.values()), None)
        dtype = "" if feat is None else f" ({str(feat.dtype).replace('torch.', '')})"
        evaluation = describe_evaluation(cfg, pre.eval_method, pre.eval_plan, pre.eval_note)
        say(f"graphfeed train: {describe_dataset(dataset)}, {pre.in_dim} features{dtype}, "
            f"{pre.num_classes} classes; train/valid/test {len(tr):,}/{len(va):,}/{len(te):,}); "
            f"model {model_name(cfg, typed)}, fanouts {placed.describe_fanouts(cfg.fanouts)}, "
            f"{evaluation}, "
            f"batch {cfg.batch_size}, sampler {cfg.sampling_method().describe()}, device "
            f"{placed.device}, features {cfg.features}, seed {cfg.seed}"
            + (f", {world_size} ranks" if world_size > 1 else ""))
        task = cls(cfg, data=placed, splits=pre.splits, num_classes=pre.num_classes,
                   device=str(placed.device), rank=rank, world_size=world_size, say=say,
                   model_factory=model, eval_method=pre.eval_method, eval_plan=pre.eval_plan)
        task.dataset = dataset
        return task

    @classmethod
    def _prepare_partitions(cls, cfg, plan, *, rank, world_size, say, model):
        check_partitions(cfg)
        placed = plan.place_partitions(cfg.partitions, list(cfg.fanouts), replace=cfg.replace,
                                       seed=cfg.seed, timeout_s=cfg.dist_timeout,
                                       remote_cache=cfg.remote_cache)
        book = placed.book
        # no rank holds every in-degree: the evaluation plan assumes the fanouts are reached
        eval_plan = plan_eval(len(cfg.fanouts), cfg.batch_size, 1 << 31, cfg.eval_fanouts,
                              in_dim=placed.in_dims)
        say(f"graphfeed: placement {placed.describe()}")
        say(f"graphfeed train: partitions {book.path} ({book.num_parts} parts, {book.method}, "
            f"edge cut {100 * book.edge_cut_fraction:.1f}%), {book.num_nodes:,} nodes, "
            f"{placed.exchange.size} ranks ({placed.per_part} per part), model {cfg.model}, "
            f"fanouts {list(cfg.fanouts)}, eval fanouts {list(eval_plan.fanouts)} in batches "
            f"of {eval_plan.batch_size}, batch {cfg.batch_size}, seed {cfg.seed}"
            + (f", remote cache {cfg.remote_cache} rows" if cfg.remote_cache else ""))
        s = placed.splits
        return cls(cfg, data=placed, splits=(s["train"], s["valid"], s["test"]),
                   num_classes=int(book.num_classes), device="cpu", rank=rank,
                   world_size=world_size, say=say, model_factory=model, eval_plan=eval_plan,
                   eval_method=resolve_eval_method(cfg, supported=False,
                                                   why_not=placed.layerwise_refusal))

    def build_model(self):
        from ...models import model_name, node_model
        from ...models.layerwise import layerwise_refusal

        net = node_model(self.cfg, self.data, self.num_classes, self.factory)
        self.model_name = (type(net).__name__ if self.factory is not None
                           else model_name(self.cfg, self.data.hetero is not None))
        why = self.data.layerwise_refusal or layerwise_refusal(net)
        self.eval_method = method_for_model(self.eval_method, self.cfg, why)
        return net

    def result(self) -> TrainResult:
        layerwise = self.eval_method == "layerwise"
        fanouts = [-1] * len(self.cfg.fanouts) if layerwise else list(self.eval_plan.fanouts)
        return TrainResult(mode=self.data.mode, placement_reason=self.data.describe(),
                           model=self.model_name, task=self.kind.kind, main_metric=self.main,
                           eval_fanouts=fanouts, eval_method=self.eval_method)

    def train_loader(self):
        cfg = self.cfg
        return self.data.loader(self.train_ids, train=True, batch_size=cfg.batch_size,
                                seed=cfg.seed, num_threads=cfg.num_threads,
                                prefetch=cfg.prefetch, rank=self.rank,
                                world_size=self.world_size)

    def step(self, model, batch):
        import torch
        import torch.nn.functional as F

        from ...models.layerwise import model_inputs

        batch = batch.to(self.device)
        out = model(model_inputs(model, batch), batch.blocks)
        y = batch.labels.to(torch.long).reshape(-1)
        n = int(y.shape[0])
        # an empty batch (a partitioned rank out of seeds) still joins DDP's all-reduce
        loss = F.cross_entropy(out, y) if n else out.sum() * 0.0
        return loss, (out.detach().argmax(-1) == y).sum(), n

    def before_epoch(self, epoch: int) -> None:
        self.data.before_epoch(epoch)

    def after_epoch(self, epoch: int) -> str:
        return self.data.after_epoch(epoch)

    # ------------------------------------------------------------------ evaluation
    def _evaluator(self, sets: dict, net, *, labels: bool = True):
        from .base import open_evaluator

        cfg = self.cfg
        return open_evaluator(self.eval_method, self.data, sets,
                              num_layers=len(cfg.fanouts), plan=self.eval_plan,
                              seed=cfg.seed, rank=self.rank, world_size=self.world_size,
                              num_threads=cfg.num_threads, prefetch=cfg.prefetch, labels=labels)

    def open_evaluation(self, net) -> None:
        self.evaluator = self._evaluator({"valid": self.valid_ids, "test": self.test_ids}, net)

    def evaluates_under_autocast(self) -> bool:
        from ..evaluate import Evaluator

        return self.eval_method != "layerwise" and Evaluator.under_autocast

    def evaluate(self, model, *, progress: bool = False) -> dict:
        names = ("valid", "test")
        # both sets from one pass (layer-wise: each layer once for both)
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
        ids = self.test_ids if cfg.predict_nodes == "test" else self.data.node_ids()
        ev = self._evaluator({"predict": ids}, model, labels=False)
        try:
            classes, _ = ev.logits(model, "predict", progress=cfg.progress and self.rank == 0,
                                   argmax=True)
            got = ev.ids["predict"]
        finally:
            ev.close()
        pred = classes.reshape(-1).numpy() if classes is not None else np.zeros(0, np.int64)
        orig = self.data.original_ids(got)
        what = f"{cfg.predict_nodes} nodes"
        if orig is not got:  # relabelled: every part's nodes, by dataset id
            pred = pred[np.argsort(orig, kind="stable")]
            what = "test nodes, in increasing dataset id"
        elif self.data.target_type is not None:
            what = f"{cfg.predict_nodes} {self.data.target_type!r} nodes"
        if self.rank != 0:
            return str(path)
        save(path, {None: np.asarray(pred).astype(np.int64)})
        self.say(f"graphfeed train: wrote {len(pred):,} predictions ({what}) to {path}")
        return str(path)

    # ------------------------------------------------------------------ the end
    def finish(self, result) -> None:
        cfg = self.cfg
        labels = {k: self.data.seed_labels(ids) for k, ids in
                  (("train", self.train_ids), ("valid", self.valid_ids), ("test", self.test_ids))}
        if labels["train"] is None:  # no rank reads every label: no baselines
            result.warnings = _warnings(result, self.kind)
            return
        cls = majority_class(labels["train"])

        def rate(y):
            return float(np.mean(y == cls)) if len(y) else float("nan")

        result.majority = {"class": cls, "valid_acc": rate(labels["valid"]),
                           "test_acc": rate(labels["test"])}
        result.warnings = _warnings(result, self.kind, labels["valid"])
        rows = [self.data.seed_features(ids) for ids in
                (self.train_ids, self.valid_ids, self.test_ids)]
        if not cfg.mlp_baseline or self.rank != 0 or rows[0] is None:
            return
        from ...features.memory import InMemoryFeature

        feat = rows[0][0]
        lab = InMemoryFeature(np.concatenate([labels["train"], labels["valid"], labels["test"]]))
        cut = np.cumsum([0] + [len(r[1]) for r in rows])
        ids = [np.arange(cut[i], cut[i + 1]) for i in range(3)]
        result.mlp_test = train_mlp_baseline(cfg, self.kind, _Rows(feat, rows), lab, ids,
                                             self.num_classes)
        result.mlp_test_acc = result.mlp_test["accuracy"]


class _Rows:
    """The baseline's input rows: the seeds' own rows of ``feat`` (train, valid, test in turn),
    read at positions into their concatenation."""

    def __init__(self, feat, rows):
        self.feat = feat
        self.index = np.concatenate([np.asarray(r[1], dtype=np.int64) for r in rows])

    def read(self, pos):
        import torch

        return self.feat.read(torch.from_numpy(self.index[np.asarray(pos)]))


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
    from ...sampling.base import float_rows

    def rows(i):
        t = torch.as_tensor(np.asarray(i), dtype=torch.int64)
        return float_rows(feat.read(t)).cpu(), labels.read(t).to(torch.long).reshape(-1).cpu()

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


__all__ = ["NodeTask", "check_model_fits", "check_partitions", "train_mlp_baseline"]
