"""Mini-batch GraphSAGE node classification on a graphfeed pipeline (what ``graphfeed train`` runs).

One function, :func:`train`, serves a single process, ``graphfeed train --nproc N`` (spawned
ranks) and ``torchrun --nproc-per-node N -m graphfeed train`` alike: when a process group is up
(``WORLD_SIZE > 1``) the model is wrapped in DistributedDataParallel, every rank takes an equal
share of the training ids each epoch, evaluation is split across ranks and summed, and only
rank 0 prints.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ._memory import peak_rss_bytes, release_free_memory
from ._units import format_bytes
from .errors import GraphfeedError


#: smallest batch used for evaluation (sampled inference)
EVAL_BATCH_SIZE = 1024


@dataclass
class TrainConfig:
    dataset: str = "small"  # a built-in name (tiny, small, medium) or a prepared dataset folder
    fanouts: Sequence[int] = (10, 10)
    batch_size: int = 1024
    epochs: int = 5
    hidden: int = 128
    lr: float = 3e-3
    dropout: float = 0.5
    weight_decay: float = 0.0
    device: str = "auto"  # auto, cpu, cuda, cuda:N
    mode: str = "auto"  # auto, cpu-cpu, cpu-cuda, pinned-cuda, cuda-cuda
    seed: int = 0
    features: str = "ram"  # ram, disk, lmdb
    cache_size: int = 0  # bytes of CPU cache in front of disk/lmdb features
    cache_policy: str = "sieve"
    replace: bool = False
    num_threads: int = 2
    prefetch: int = 2
    nproc: int = 1
    dist_timeout: float = 300.0
    private_copy: bool = False  # for memory comparisons: each rank loads its own copy
    mlp_baseline: bool = True
    progress: bool = True
    data_root: Optional[str] = None  # where built-in datasets are cached

    def validate(self) -> "TrainConfig":
        fan = list(self.fanouts)
        if not fan or any((not isinstance(f, (int, np.integer))) or (f < 1 and f != -1) for f in fan):
            raise GraphfeedError(f"fanouts must be a non-empty list of ints >= 1 or -1, got {fan}")
        for name in ("batch_size", "epochs", "hidden", "num_threads", "nproc"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise GraphfeedError(f"{name} must be an integer >= 1, got {v!r}")
        if self.prefetch < 1:
            raise GraphfeedError(f"prefetch must be >= 1, got {self.prefetch}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise GraphfeedError(f"lr must be a positive number, got {self.lr}")
        if not 0 <= self.dropout < 1:
            raise GraphfeedError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.features not in ("ram", "disk", "lmdb"):
            raise GraphfeedError(f"features must be ram, disk or lmdb, got {self.features!r}")
        if self.cache_size < 0:
            raise GraphfeedError(f"cache_size must be >= 0, got {self.cache_size}")
        from .placement import validate_mode

        validate_mode(self.mode)
        return self


@dataclass
class EpochStats:
    epoch: int
    loss: float
    train_acc: float
    valid_acc: float
    test_acc: float
    seeds_per_s: float
    batches_per_s: float
    seconds: float
    peak_rss_bytes: int
    peak_gpu_bytes: Optional[int] = None


@dataclass
class TrainResult:
    epochs: list = field(default_factory=list)
    best_epoch: int = -1
    best_valid_acc: float = float("nan")
    test_acc: float = float("nan")  # at the best validation epoch
    final_test_acc: float = float("nan")
    mlp_test_acc: Optional[float] = None
    mode: str = "cpu-cpu"
    placement_reason: str = ""
    world_size: int = 1

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------- helpers
def open_dataset(spec: str, data_root: Optional[str] = None, *, verbose: bool = False):
    """A built-in name (``tiny``, ``small``, ``medium``) or a prepared dataset folder."""
    from .datasets import synthetic

    if spec in synthetic.SPECS:
        return synthetic.load_builtin(spec, Path(data_root) if data_root else None, verbose=verbose)
    path = Path(spec)
    if path.is_dir():
        from .datasets.format import Dataset

        return Dataset.open(path)
    raise GraphfeedError(
        f"dataset {spec!r} is neither a built-in dataset ({', '.join(synthetic.SPECS)}) nor a "
        f"folder; prepare one with 'graphfeed prepare'"
    )


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        d = torch.device(device)
    except (RuntimeError, TypeError):
        raise GraphfeedError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N") from None
    if d.type == "cuda" and not torch.cuda.is_available():
        raise GraphfeedError(
            f"device {device!r} needs CUDA, but this torch build ({torch.__version__}) has no "
            f"usable CUDA device; use --device cpu"
        )
    if d.type not in ("cpu", "cuda"):
        raise GraphfeedError(f"unsupported device {device!r}; use cpu or cuda[:N]")
    return str(d)


def _dist_world():
    """(rank, world_size) of an initialised process group, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class _Log:
    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, msg: str) -> None:
        if self.enabled:
            print(msg, flush=True)


# ---------------------------------------------------------------------------- the loop
def train(cfg: TrainConfig, *, dataset=None) -> TrainResult:
    """Train GraphSAGE as configured; returns per-epoch figures and test accuracies."""
    cfg.validate()
    if cfg.nproc > 1 and int(os.environ.get("WORLD_SIZE", "1")) == 1:
        from .distributed import launch

        results = launch(_train_rank, cfg.nproc, cfg, timeout_s=cfg.dist_timeout)
        return results[0]
    return _train_rank(cfg, dataset=dataset)


def _train_rank(cfg: TrainConfig, dataset=None) -> TrainResult:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    device = resolve_device(cfg.device)
    if not device.startswith("cuda") and cfg.mode not in ("auto", "cpu-cpu"):
        raise GraphfeedError(f"mode {cfg.mode!r} trains on a GPU, but the device is {device!r}")
    started_group = False
    if world_size > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            from .distributed import World, init

            # gloo on CPU, NCCL when the ranks train on GPUs
            init(World.from_env(), device=device, timeout_s=cfg.dist_timeout)
            started_group = True
    rank, world_size = _dist_world()
    try:
        return _train_loop(cfg, dataset, device, rank, world_size)
    except BaseException as e:
        # the traceback keeps _train_loop's frame, and with it the DDP model, alive: clear it so
        # the model is freed while the process group still exists (see the finally below)
        traceback.clear_frames(e.__traceback__)
        raise
    finally:
        # Destroy the group only after the DDP model is gone. If the model's Reducer held the last
        # reference, ~ProcessGroupGloo would run with the GIL held while gloo's run-loop thread
        # waits for the GIL to free a tensor: a deadlock at exit (seen in testing).
        if started_group:
            from .distributed import shutdown

            shutdown()


def _train_loop(cfg: TrainConfig, dataset, device: str, rank: int, world_size: int) -> TrainResult:
    import torch
    import torch.nn.functional as F

    from .models import GraphSAGE

    log = _Log(rank == 0)
    if device.startswith("cuda"):
        from .cuda_alloc import configure_cuda_allocator

        configure_cuda_allocator()
        if world_size > 1:
            local_rank = int(os.environ.get("LOCAL_RANK", "0"))
            device = f"cuda:{local_rank}"
            torch.cuda.set_device(local_rank)

    if dataset is None:
        dataset = open_dataset(cfg.dataset, cfg.data_root, verbose=rank == 0)
    graph, feat, labels = _data_for_rank(dataset, cfg, world_size, device)
    from .loader import node_loader, place

    placed = place(graph, {"feat": feat, "label": labels}, list(cfg.fanouts), mode=cfg.mode,
                   device=device, replace=cfg.replace, seed=cfg.seed,
                   ranks_per_machine=int(os.environ.get("LOCAL_WORLD_SIZE", world_size)))
    device = str(placed.device)
    feat, labels = placed.features["feat"], placed.features["label"]
    log(f"graphfeed: placement {placed.placement.reason}")

    num_classes = int(dataset.num_classes)
    in_dim = int(np.prod(feat.row_shape)) if feat.row_shape else 1
    train_ids, valid_ids, test_ids = dataset.train_ids, dataset.valid_ids, dataset.test_ids
    if len(train_ids) == 0:
        raise GraphfeedError(f"dataset {cfg.dataset!r} has no training ids")
    log(
        f"graphfeed train: dataset {getattr(dataset, 'name', cfg.dataset)} "
        f"({graph.num_nodes:,} nodes, {graph.num_edges:,} edges, {in_dim} features, "
        f"{num_classes} classes; train/valid/test {len(train_ids):,}/{len(valid_ids):,}/"
        f"{len(test_ids):,}); fanouts {list(cfg.fanouts)}, batch {cfg.batch_size}, "
        f"device {device}, features {cfg.features}"
        + (f", {world_size} ranks" if world_size > 1 else "")
    )

    torch.manual_seed(cfg.seed)
    model = GraphSAGE(in_dim, cfg.hidden, num_classes, len(cfg.fanouts), cfg.dropout).to(device)
    if world_size > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[torch.device(device).index] if device.startswith("cuda") else None)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    loader = node_loader(train_ids, placed, batch_size=cfg.batch_size, shuffle=True, seed=cfg.seed,
                         rank=rank, world_size=world_size, num_threads=cfg.num_threads,
                         prefetch=cfg.prefetch)

    result = TrainResult(mode=placed.mode, placement_reason=placed.placement.reason,
                         world_size=world_size)
    from ._progress import Progress

    for epoch in range(cfg.epochs):
        model.train()
        t0 = time.perf_counter()
        total_loss = torch.zeros((), device=device)
        correct = torch.zeros((), dtype=torch.long, device=device)
        seen = 0
        with Progress(len(loader), f"epoch {epoch:2d}", unit="batches",
                      enabled=cfg.progress and rank == 0) as bar:
            loader.set_epoch(epoch)
            for batch in loader:
                x = batch.x.to(torch.float32).reshape(batch.x.shape[0], -1)
                y = batch.labels.to(torch.long).reshape(-1)
                out = model(x, batch.blocks)
                loss = F.cross_entropy(out, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                n = y.shape[0]
                total_loss += loss.detach() * n
                correct += (out.argmax(-1) == y).sum()
                seen += n
                bar.update(1)
        seconds = time.perf_counter() - t0
        train_seen = torch.tensor([seen], dtype=torch.float64)
        stats = torch.stack([total_loss.double().cpu(), correct.double().cpu()])
        if world_size > 1:
            import torch.distributed as dist

            both = torch.cat([stats, train_seen])
            dist.all_reduce(both)
            stats, train_seen = both[:2], both[2:]
        seen_all = float(train_seen[0])
        valid_acc = evaluate(model, placed, valid_ids, cfg, rank, world_size)
        test_acc = evaluate(model, placed, test_ids, cfg, rank, world_size)
        release_free_memory()  # eval loaders' buffers: give them back before the next epoch
        peak_gpu = torch.cuda.max_memory_allocated() if device.startswith("cuda") else None
        es = EpochStats(
            epoch=epoch,
            loss=float(stats[0]) / max(seen_all, 1),
            train_acc=float(stats[1]) / max(seen_all, 1),
            valid_acc=valid_acc,
            test_acc=test_acc,
            seeds_per_s=seen_all / seconds,
            batches_per_s=len(loader) / seconds,
            seconds=seconds,
            peak_rss_bytes=peak_rss_bytes(),
            peak_gpu_bytes=peak_gpu,
        )
        result.epochs.append(es)
        if not (es.valid_acc <= result.best_valid_acc):  # also true for the first (nan) epoch
            result.best_valid_acc, result.best_epoch, result.test_acc = es.valid_acc, epoch, es.test_acc
        log(
            f"epoch {epoch:2d}  loss {es.loss:.4f}  train {es.train_acc:.4f}  valid {es.valid_acc:.4f}  "
            f"test {es.test_acc:.4f}  {es.seeds_per_s:,.0f} seeds/s  {es.batches_per_s:.1f} batches/s  "
            f"{seconds:.1f}s  peak RSS {format_bytes(es.peak_rss_bytes)}"
            + (f"  peak GPU {format_bytes(peak_gpu)}" if peak_gpu is not None else "")
        )
    loader.close()
    result.final_test_acc = result.epochs[-1].test_acc
    if cfg.mlp_baseline and rank == 0:
        result.mlp_test_acc = train_mlp_baseline(dataset, feat, labels, cfg, device, num_classes)
    log(
        f"GraphSAGE test accuracy {result.test_acc:.4f} (best valid {result.best_valid_acc:.4f} at "
        f"epoch {result.best_epoch})"
        + (f"; MLP baseline on the same features {result.mlp_test_acc:.4f}" if result.mlp_test_acc is not None else "")
    )
    return result


def evaluate(model, placed, ids, cfg: TrainConfig, rank: int, world_size: int) -> float:
    """Sampled mini-batch inference on ``ids``; ranks take strided shares and sum their counts."""
    import torch

    from .loader import node_loader

    ids = np.asarray(ids)
    if ids.shape[0] == 0:
        return float("nan")
    share = ids[rank::world_size]
    net = model.module if hasattr(model, "module") else model  # no DDP collectives in eval
    net.eval()
    correct = torch.zeros((), dtype=torch.float64)
    total = torch.zeros((), dtype=torch.float64)
    if share.shape[0]:
        # inference needs no small batches: larger ones amortise per-batch overhead
        loader = node_loader(share, placed, batch_size=max(cfg.batch_size, EVAL_BATCH_SIZE),
                             shuffle=False, seed=cfg.seed,
                             num_threads=cfg.num_threads, prefetch=cfg.prefetch)
        loader.set_epoch(0)  # the same evaluation sample every epoch
        with torch.no_grad():
            for batch in loader:
                x = batch.x.to(torch.float32).reshape(batch.x.shape[0], -1)
                y = batch.labels.to(torch.long).reshape(-1)
                correct += (net(x, batch.blocks).argmax(-1) == y).sum().double().cpu()
                total += y.shape[0]
        loader.close()
    if world_size > 1:
        import torch.distributed as dist

        both = torch.stack([correct, total])
        dist.all_reduce(both)
        correct, total = both[0], both[1]
    return float(correct / total) if float(total) > 0 else float("nan")


def train_mlp_baseline(dataset, feat, labels, cfg: TrainConfig, device, num_classes: int) -> float:
    """An MLP of the same width on each node's own features: what the graph adds over it."""
    import torch
    import torch.nn.functional as F

    from .models import MLP

    def rows(ids):
        ids_t = torch.as_tensor(np.asarray(ids), dtype=torch.int64)
        x = feat.read(ids_t).to(torch.float32).reshape(len(ids_t), -1).cpu()
        y = labels.read(ids_t).to(torch.long).reshape(-1).cpu()
        return x, y

    x_tr, y_tr = rows(dataset.train_ids)
    x_va, y_va = rows(dataset.valid_ids)
    x_te, y_te = rows(dataset.test_ids)
    torch.manual_seed(cfg.seed)
    mlp = MLP(x_tr.shape[1], cfg.hidden, num_classes, num_layers=len(cfg.fanouts), dropout=cfg.dropout)
    opt = torch.optim.Adam(mlp.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    g = torch.Generator().manual_seed(cfg.seed)
    best_va, best_te = -1.0, float("nan")
    epochs = max(cfg.epochs, 20)  # cheap: give the baseline every chance
    for _ in range(epochs):
        mlp.train()
        perm = torch.randperm(x_tr.shape[0], generator=g)
        for i in range(0, len(perm), cfg.batch_size):
            idx = perm[i : i + cfg.batch_size]
            loss = F.cross_entropy(mlp(x_tr[idx]), y_tr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        mlp.eval()
        with torch.no_grad():
            va = (mlp(x_va).argmax(-1) == y_va).double().mean().item() if len(y_va) else float("nan")
            te = (mlp(x_te).argmax(-1) == y_te).double().mean().item() if len(y_te) else float("nan")
        if not va <= best_va:
            best_va, best_te = va, te
    return best_te


# ---------------------------------------------------------------------------- data + placement
def _data_for_rank(dataset, cfg: TrainConfig, world_size: int, device: str):
    """The graph, input feature and label feature this process reads from."""
    target = getattr(dataset, "target", "label")
    if world_size > 1:
        from .distributed import World, share_dataset

        # pinnable: segments that a pinned-cuda placement can page-lock in place (one copy per
        # machine; each rank registers the same pages)
        shared = share_dataset(dataset, World.from_env(), features=cfg.features,
                               private_copy=cfg.private_copy, cache_size=cfg.cache_size,
                               cache_policy=cfg.cache_policy,
                               pinnable=device.startswith("cuda"))
        return shared.graph, shared.features["feat"], shared.features[target]
    feat = dataset.node_feature("feat", backend=cfg.features, cache_size=cfg.cache_size,
                                cache_policy=cfg.cache_policy)
    labels = dataset.node_feature(target, backend="ram")
    return dataset.graph, feat, labels
