"""The epoch loop of one run on placed data: train, evaluate, select, checkpoint, predict.

Loaders (one for training, one per evaluation set) are built once and reused every epoch with
``set_epoch``; they are closed when the run ends, however it ends, so memory stays flat over any
number of epochs.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._memory import current_rss_bytes, peak_rss_bytes, release_free_memory
from .._units import format_bytes
from ..errors import GraphfeedError
from . import checkpoint as ckpt
from .config import TrainConfig
from .evaluate import Evaluator, EvalPlan, features_as_float, resolve_eval_method, unwrap
from .metrics import Task, compute_metrics, format_metrics, is_better, majority_class, task_for
from .._progress import bar
from .report import final_line, log_epoch
from .result import EpochStats, TrainResult

#: bytes per parameter while training with Adam: the weight, its gradient and two moments
_BYTES_PER_PARAM = 16


@dataclass
class RunSetup:
    """What one run trains on (built by ``graphfeed.training``)."""

    cfg: TrainConfig
    dataset: object
    placed: object  # graphfeed.placement.PlacedData
    device: str
    rank: int
    world_size: int
    in_dim: int
    num_classes: int
    train_ids: np.ndarray
    valid_ids: np.ndarray
    test_ids: np.ndarray
    eval_plan: EvalPlan
    say: Callable[[str], None]
    #: "layerwise" or "sampled" (``resolve_eval_method``); a custom model that cannot be
    #: evaluated layer-wise turns an ``auto`` layerwise into sampled when it is built
    eval_method: str = "sampled"


def check_model_fits(cfg: TrainConfig, in_dim: int, num_classes: int, device: str) -> None:
    """Refuse, before allocating anything, a model whose training state cannot fit in memory."""
    from ..models import parameter_count

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
            f"{format_bytes(have)} of {where}; use a smaller --hidden"
        )


#: kept for callers of the old name
_GracefulStop = ckpt.GracefulStop


def _all_reduce(values: list) -> list:
    import torch
    import torch.distributed as dist

    from ..distributed.sharing import collective_device

    t = torch.tensor(values, dtype=torch.float64, device=collective_device())
    dist.all_reduce(t)
    return t.cpu().tolist()


def run(setup: RunSetup, model_factory=None, *, on_batch=None, on_epoch=None) -> TrainResult:
    """Train one run as ``setup.cfg`` says and return its figures (rank 0 prints them)."""
    import torch
    import torch.nn.functional as F

    from ..placement.plan import node_loader
    from ..models import build_model

    cfg, placed, device, rank, world = setup.cfg, setup.placed, setup.device, setup.rank, setup.world_size
    say = setup.say
    task = task_for(setup.num_classes)
    labels_np = np.asarray(setup.dataset.labels)
    majority = majority_class(labels_np[setup.train_ids])

    torch.manual_seed(cfg.seed)  # the model's initial weights (check_model_fits ran in preflight)
    if model_factory is None:
        model = build_model(cfg.model, setup.in_dim, cfg.hidden, setup.num_classes, len(cfg.fanouts),
                            dropout=cfg.dropout, heads=cfg.heads,
                            in_degrees=setup.dataset.graph.in_degrees if cfg.model == "gcn" else None)
    else:
        model = model_factory(setup.in_dim, setup.num_classes)
    model = model.to(device)
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[torch.device(device).index] if device.startswith("cuda") else None)
    net = unwrap(model)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    setup.eval_method = _eval_method_for(setup, net)

    result = TrainResult(mode=placed.mode, placement_reason=placed.placement.reason, world_size=world,
                         model=cfg.model if model_factory is None else type(net).__name__,
                         seed=cfg.seed, task=task.kind, main_metric=task.main,
                         eval_fanouts=_eval_fanouts(setup, len(cfg.fanouts)),
                         eval_method=setup.eval_method)
    state = ckpt.RunState(cfg, net, opt, result, trainer="node", keys=TrainConfig.RESUME_KEYS,
                          rank=rank, world_size=world, say=say)

    loader = node_loader(setup.train_ids, placed, batch_size=cfg.batch_size, shuffle=True,
                         seed=cfg.seed, rank=rank, world_size=world, num_threads=cfg.num_threads,
                         prefetch=cfg.prefetch)
    evaluator = None
    try:
        evaluator = make_evaluator(setup, {"valid": setup.valid_ids, "test": setup.test_ids},
                                   net, rank=rank, world_size=world)
        for epoch, sums, seconds0 in state.epochs(loader):
            model.train()
            t0 = time.perf_counter()
            total_loss = torch.tensor(sums[0], dtype=torch.float64, device=device)
            correct = torch.tensor(sums[1], dtype=torch.float64, device=device)
            seen = int(sums[2])
            first = int(loader.state_dict()["next_batch"])  # > 0 when resumed mid-epoch
            with bar(len(loader), f"epoch {epoch}", enabled=cfg.progress and rank == 0) as pbar:
                pbar.update(first)
                for batch in loader:
                    y = batch.labels.to(torch.long).reshape(-1)
                    out = model(features_as_float(batch.x), batch.blocks)
                    loss = F.cross_entropy(out, y)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    n = int(y.shape[0])
                    total_loss += loss.detach().double() * n
                    correct += (out.detach().argmax(-1) == y).sum().double()
                    seen += n
                    pbar.update(1)
                    if on_batch is not None:
                        on_batch(epoch, batch.batch_index)
                    if state.stop_requested():
                        state.stop_mid_epoch(loader, [float(total_loss), float(correct), seen],
                                             seconds0 + time.perf_counter() - t0)
            seconds = seconds0 + time.perf_counter() - t0
            local = [float(total_loss), float(correct), float(seen)]
            tot = _all_reduce(local) if world > 1 else local
            loss_avg = tot[0] / max(tot[2], 1)
            if not math.isfinite(loss_avg):
                raise GraphfeedError(
                    f"the training loss became {loss_avg} in epoch {epoch}: check the input "
                    f"features for NaN or infinite values, or lower --lr (now {cfg.lr:g})"
                )
            t1 = time.perf_counter()
            metrics = {"valid": None, "test": None}
            if state.evaluates(epoch):
                for name, (logits, y) in evaluator.evaluate(
                        model, ("valid", "test"), progress=cfg.progress and rank == 0).items():
                    metrics[name] = (compute_metrics(task, y.numpy(), logits.numpy())
                                     if logits is not None and len(y)
                                     else {m: float("nan") for m in task.metrics})
            eval_seconds = time.perf_counter() - t1
            release_free_memory()
            nan = float("nan")
            es = EpochStats(
                epoch=epoch, loss=loss_avg, train_acc=tot[1] / max(tot[2], 1),
                valid_acc=(metrics["valid"] or {}).get("accuracy", nan),
                test_acc=(metrics["test"] or {}).get("accuracy", nan),
                seeds_per_s=tot[2] / max(seconds, 1e-9), batches_per_s=len(loader) / max(seconds, 1e-9),
                seconds=seconds, peak_rss_bytes=peak_rss_bytes(), valid=metrics["valid"],
                test=metrics["test"], eval_seconds=eval_seconds, rss_bytes=current_rss_bytes(),
            )
            if device.startswith("cuda"):
                es.peak_gpu_bytes = int(torch.cuda.max_memory_allocated(device))
                es.peak_gpu_reserved_bytes = int(torch.cuda.max_memory_reserved(device))
            if not es.evaluated:
                es.skip_evaluation()
            state.end_epoch(es, es.valid[task.main] if es.evaluated else nan)
            say(_epoch_line(es, task))
            log_epoch(cfg, es, rank)
            if state.finish_epoch(loader, es, on_epoch):
                break
    finally:
        loader.close()
        if evaluator is not None:
            evaluator.close()

    if not result.epochs:
        raise GraphfeedError("no epoch was run")
    result.best_valid_acc = result.epochs[result.best_epoch].valid_acc if result.best_epoch >= 0 else float("nan")
    result.test_acc = result.test.get("accuracy", float("nan"))
    result.final_test_acc = result.epochs[-1].test_acc
    result.checkpoint = state.checkpoint
    result.majority = _majority(labels_np, majority, setup)
    result.warnings = _warnings(result, task)
    if cfg.mlp_baseline and rank == 0:
        result.mlp_test = train_mlp_baseline(setup, task)
        result.mlp_test_acc = result.mlp_test["accuracy"]
    if cfg.predict and rank == 0:
        state.load_best()
        result.predictions = write_predictions(setup, model, cfg.predict, cfg.predict_nodes)
    for w in result.warnings:
        say(f"graphfeed train: warning: {w}")
    say(final_line(result))
    return result


def _epoch_line(es: EpochStats, task: Task) -> str:
    gpu = ""
    if es.peak_gpu_bytes is not None:
        gpu = (f"  peak GPU {format_bytes(es.peak_gpu_bytes)} allocated, "
               f"{format_bytes(es.peak_gpu_reserved_bytes)} reserved")
    scores = (f"valid {format_metrics(es.valid)}  test {format_metrics(es.test)}  "
              if es.evaluated else "(not evaluated)  ")
    return (
        f"epoch {es.epoch:2d}  loss {es.loss:.4f}  train acc {es.train_acc:.4f}  {scores}"
        f"{es.seeds_per_s:,.0f} seeds/s  {es.batches_per_s:.1f} batches/s  {es.seconds:.1f}s "
        f"+ eval {es.eval_seconds:.1f}s  RSS {format_bytes(es.rss_bytes)} (peak "
        f"{format_bytes(es.peak_rss_bytes)}){gpu}"
    )


def _eval_method_for(setup: RunSetup, net) -> str:
    """``setup.eval_method``, or sampled when a custom model cannot be evaluated layer-wise
    (refused when ``--eval layerwise`` asked for it)."""
    from .layerwise import supports_layerwise

    if setup.eval_method != "layerwise" or supports_layerwise(net):
        return setup.eval_method
    return resolve_eval_method(
        setup.cfg, supported=False,
        why_not=f"model {type(net).__name__} is not a graphfeed BlockGNN whose every layer "
                f"depends only on its destinations' in-edges (layerwise_exact)")


def _eval_fanouts(setup: RunSetup, num_layers: int) -> list:
    """What ``TrainResult.eval_fanouts`` reports: every neighbour (-1) for layer-wise."""
    if setup.eval_method == "layerwise":
        return [-1] * num_layers
    return list(setup.eval_plan.fanouts)


def make_evaluator(setup: RunSetup, sets: dict, net, *, rank: int = 0, world_size: int = 1,
                   labels: bool = True):
    """The evaluator of ``setup.eval_method`` for node sets ``sets`` (name -> ids)."""
    cfg = setup.cfg
    if setup.eval_method == "layerwise":
        from .layerwise import LayerwiseEvaluator

        return LayerwiseEvaluator(setup.placed, setup.dataset.graph, sets, unwrap(net).num_layers,
                                  rank=rank, world_size=world_size, num_threads=cfg.num_threads,
                                  prefetch=cfg.prefetch, labels=labels)
    return Evaluator(setup.placed, sets, setup.eval_plan, seed=cfg.seed, rank=rank,
                     world_size=world_size, num_threads=cfg.num_threads, prefetch=cfg.prefetch,
                     labels=labels)


def _majority(labels: np.ndarray, cls: int, setup: RunSetup) -> dict:
    def rate(ids):
        return float(np.mean(labels[ids] == cls)) if len(ids) else float("nan")

    return {"class": cls, "valid_acc": rate(setup.valid_ids), "test_acc": rate(setup.test_ids)}


def _warnings(r: TrainResult, task: Task) -> list:
    out = []
    if r.best_epoch < 0:
        return out
    best = r.epochs[r.best_epoch]
    maj = r.majority.get("valid_acc", float("nan"))
    if math.isfinite(best.valid_acc) and math.isfinite(maj) and best.valid_acc <= maj + 1e-9:
        out.append(
            f"the model does no better than always answering the majority class "
            f"{r.majority['class']}: valid accuracy {best.valid_acc:.4f} vs {maj:.4f}"
        )
    auc = best.valid.get("roc_auc", float("nan"))
    if task.kind == "binary" and math.isfinite(auc) and auc <= 0.5 + 1e-9:
        out.append(f"valid ROC-AUC {auc:.4f}: no better than chance")
    return out


def train_mlp_baseline(setup: RunSetup, task: Task) -> dict:
    """An MLP of the same width and depth on each node's own features, trained on the same
    split (best epoch on the main validation metric): what the graph adds over the features."""
    import torch
    import torch.nn.functional as F

    from ..models import MLP

    cfg = setup.cfg
    feat, labels = setup.placed.features["feat"], setup.placed.features["label"]

    def rows(ids):
        ids_t = torch.as_tensor(np.asarray(ids), dtype=torch.int64)
        x = features_as_float(feat.read(ids_t))
        return x.cpu(), labels.read(ids_t).to(torch.long).reshape(-1).cpu()

    x_tr, y_tr = rows(setup.train_ids)
    x_va, y_va = rows(setup.valid_ids)
    x_te, y_te = rows(setup.test_ids)
    torch.manual_seed(cfg.seed)
    mlp = MLP(x_tr.shape[1], cfg.hidden, setup.num_classes, num_layers=len(cfg.fanouts), dropout=cfg.dropout)
    opt = torch.optim.Adam(mlp.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    g = torch.Generator().manual_seed(cfg.seed)
    best_va, best_te = float("nan"), {m: float("nan") for m in task.metrics}
    epochs = max(cfg.epochs, 20)  # cheap: give the baseline every chance

    def score(x, y):
        if not len(y):
            return {m: float("nan") for m in task.metrics}
        with torch.no_grad():
            return compute_metrics(task, y.numpy(), mlp(x).numpy())

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
            va = score(x_va, y_va)[task.main]
            if is_better(va, best_va):
                best_va, best_te = va, score(x_te, y_te)
            pbar.update(1)
    return best_te


def write_predictions(setup: RunSetup, model, path, nodes: str) -> str:
    """The predicted class of every test node (in ``dataset.test_ids`` order) or of every node
    (``nodes="all"``, node id order), int64 ``.npy`` written atomically."""
    ids = setup.test_ids if nodes == "test" else np.arange(setup.dataset.num_nodes, dtype=np.int64)
    ev = make_evaluator(setup, {"predict": ids}, model, labels=False)
    try:
        classes, _ = ev.logits(model, "predict", progress=setup.cfg.progress, argmax=True)
    finally:
        ev.close()
    pred = (classes.reshape(-1).numpy() if classes is not None else np.zeros(0)).astype(np.int64)
    save_predictions(path, pred)
    setup.say(f"graphfeed train: wrote {pred.shape[0]:,} predictions ({nodes} nodes) to {path}")
    return str(path)


def save_predictions(path, array: np.ndarray) -> str:
    """Write ``array`` to ``.npy`` file ``path`` atomically; errors name the file."""
    from .._io import save_npy

    try:
        save_npy(path, array)
    except OSError as e:
        raise GraphfeedError(f"cannot write predictions to {path}: {e.strerror or e}") from None
    return str(path)
