"""``graphfeed train --partitions DIR``: training over a partitioned dataset, one part per
machine (``graphfeed partition``), on torch.distributed.

Rank ``r`` of ``W`` holds part ``r // (W / P)`` (the ranks of one machine share its part: the
arrays are memory-mapped, so the page cache holds one copy), samples its batches with
``DistNeighborSampler`` and reads features and labels with ``DistFeature`` (remote frontier
nodes and rows fetched from their owners with ``all_to_all_single`` on a gloo group of its
own). A ``DataLoader`` with one worker thread prepares batch ``i + 1`` (its exchanges
included) while the main thread trains batch ``i`` and DDP all-reduces its gradients on the
default group. Every rank runs the same number of steps per epoch (``PartItemSampler``).

Launch: ``--nproc W`` on one machine (gloo processes standing for machines), or torchrun with
``WORLD_SIZE`` a multiple of the number of parts. A rank that dies ends the job through the
launcher's fail-fast path (``RankFailedError``), or, under torchrun, its peers' collectives
time out after ``--dist-timeout``.

What it does not do (yet): models other than ``sage``/``gat`` (GCN's normalisation needs every
source's in-degree), sampling methods other than uniform, checkpoints, predictions, the MLP
baseline, metrics other than accuracy.
"""

from __future__ import annotations

import os
import time
import traceback
from typing import Callable, Optional

import numpy as np

from ..errors import GraphfeedError
from .config import TrainConfig
from .evaluate import default_eval_fanouts, evaluates_epoch
from .report import final_line, log_epoch
from .result import EpochStats, TrainResult

#: what the fork server imports for the ranks besides graphfeed's core
PRELOAD = ("graphfeed.models.gnn", "graphfeed.trainer.partitioned", "graphfeed.partition.dist")


def check_config(cfg: TrainConfig) -> None:
    """Refuse what a partitioned run does not support, naming the option."""
    from ..partition.book import read_book

    if cfg.model == "gcn":
        raise GraphfeedError("--partitions trains sage or gat: gcn's normalisation needs the "
                             "in-degree of every source node, which no part holds")
    if cfg.sampler != "uniform":
        raise GraphfeedError(f"--partitions samples uniformly; got --sampler {cfg.sampler}")
    for flag, value in (("--save", cfg.save), ("--resume", cfg.resume),
                        ("--predict", cfg.predict)):
        if value:
            raise GraphfeedError(f"{flag} is not supported with --partitions yet")
    book = read_book(cfg.partitions)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    n = world if world > 1 else cfg.nproc
    if n % book.num_parts:
        raise GraphfeedError(f"--partitions {cfg.partitions} has {book.num_parts} parts: run a "
                             f"multiple of {book.num_parts} processes (--nproc), got {n}")
    if "feat" not in book.features:
        raise GraphfeedError(f"--partitions {cfg.partitions}: no node feature 'feat'")


def train_partitioned(cfg: TrainConfig, *, model: Optional[Callable] = None,
                      on_epoch=None) -> TrainResult:
    """One run over ``cfg.partitions``: launches ``cfg.nproc`` ranks unless already inside a
    process group (torchrun); returns rank 0's result."""
    check_config(cfg)
    if cfg.nproc > 1 and int(os.environ.get("WORLD_SIZE", "1")) == 1:
        from ..distributed import launch

        return launch(_rank_main, cfg.nproc, cfg, model, timeout_s=cfg.dist_timeout,
                      preload=PRELOAD)[0]
    return _rank_main(cfg, model, on_epoch)


def _rank_main(cfg: TrainConfig, model=None, on_epoch=None) -> TrainResult:
    from ..distributed import World, init, shutdown

    world = World.from_env()
    started = False
    if world.world_size > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            init(world, backend="gloo", timeout_s=cfg.dist_timeout)
            started = True
    try:
        return _loop(cfg, world, model, on_epoch)
    except BaseException as e:
        traceback.clear_frames(e.__traceback__)  # free the DDP model before the group goes
        raise
    finally:
        if started:
            shutdown()


def _sum(values: list, world) -> list:
    if world.world_size == 1:
        return list(values)
    import torch
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def _max(value: int, world) -> int:
    if world.world_size == 1:
        return value
    import torch
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def _loader(ids, sampler, feat, labels, cfg, world, per_part, *, shuffle: bool, wrap: bool,
            batch_size: int):
    from ..loader.dataloader import DataLoader
    from ..partition.seeds import PartItemSampler

    local, g = world.rank % per_part, per_part
    own = PartItemSampler(ids, batch_size, num_batches=0, shuffle=shuffle, seed=cfg.seed,
                          rank=local, world_size=g).own_batches()
    items = PartItemSampler(ids, batch_size, num_batches=_max(own, world), wrap=wrap,
                            shuffle=shuffle, seed=cfg.seed, rank=local, world_size=g)
    # one worker thread: the exchanges of a rank are collectives and must stay in order
    return DataLoader(items, sampler, node_features={"feat": feat}, labels=labels,
                      num_threads=1, prefetch=cfg.prefetch)


def _loop(cfg: TrainConfig, world, model_factory, on_epoch) -> TrainResult:
    import torch
    import torch.nn.functional as F

    from .._memory import current_rss_bytes, peak_rss_bytes
    from ..models import build_model
    from ..partition.book import load_part, read_book
    from ..partition.dist import (CacheStats, DistFeature, DistNeighborSampler, Exchange,
                                  ExchangeStats, ranks_per_part)

    say = (lambda m: print(m, flush=True)) if world.rank == 0 else (lambda m: None)
    book = read_book(cfg.partitions)
    ex = Exchange(timeout_s=cfg.dist_timeout)
    g = max(1, ex.size // book.num_parts)
    part = load_part(book, ex.rank // g)
    per_part = ranks_per_part(part, ex)
    sampler = DistNeighborSampler(part, cfg.fanouts, ex, replace=cfg.replace, seed=cfg.seed)
    feat = DistFeature(part, "feat", ex)
    labels = DistFeature(part, book.target, ex, count=False)
    in_dim = int(np.prod(feat.row_shape)) if feat.row_shape else 1
    eval_fanouts = tuple(cfg.eval_fanouts or default_eval_fanouts(len(cfg.fanouts)))
    splits = {s: np.asarray(part.splits.get(s, np.empty(0, np.int64))) for s in
              ("train", "valid", "test")}
    say(f"graphfeed train: partitions {book.path} ({book.num_parts} parts, {book.method}, edge "
        f"cut {100 * book.edge_cut_fraction:.1f}%), {book.num_nodes:,} nodes, "
        f"{ex.size} ranks ({per_part} per part), model {cfg.model}, fanouts "
        f"{list(cfg.fanouts)}, eval fanouts {list(eval_fanouts)}, batch {cfg.batch_size}, "
        f"seed {cfg.seed}" + (f", remote cache {cfg.remote_cache} rows" if cfg.remote_cache
                              else ""))

    torch.manual_seed(cfg.seed)
    if model_factory is None:
        model = build_model(cfg.model, in_dim, cfg.hidden, book.num_classes, len(cfg.fanouts),
                            dropout=cfg.dropout, heads=cfg.heads)
    else:
        model = model_factory(in_dim, book.num_classes)
    if world.world_size > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    result = TrainResult(mode="partitioned", placement_reason=f"--partitions {book.path}",
                         world_size=world.world_size, model=cfg.model, seed=cfg.seed,
                         task="multiclass", main_metric="accuracy",
                         eval_fanouts=list(eval_fanouts))
    train_loader = _loader(splits["train"], sampler, feat, labels, cfg, world, per_part,
                           shuffle=True, wrap=True, batch_size=cfg.batch_size)
    eval_sampler = sampler.with_fanouts(eval_fanouts)
    eval_loaders = {s: _loader(splits[s], eval_sampler, feat, labels, cfg, world, per_part,
                               shuffle=False, wrap=False, batch_size=cfg.batch_size)
                    for s in ("valid", "test")}

    net = model.module if world.world_size > 1 else model  # evaluation needs no DDP sync

    def evaluate(name: str) -> float:
        net.eval()
        correct = total = 0
        with torch.no_grad():
            for mb in eval_loaders[name]:
                if mb.seeds.numel():
                    out = net(mb.node_features["feat"].float(), mb.blocks)
                    correct += int((out.argmax(1) == mb.labels.long()).sum())
                    total += int(mb.seeds.numel())
        c, t = _sum([correct, total], world)
        return c / t if t else float("nan")

    try:
        for epoch in range(cfg.epochs):
            model.train()
            train_loader.set_epoch(epoch)
            t0 = time.perf_counter()
            ex0 = ExchangeStats(**vars(ex.stats))
            feat.cache_stats = CacheStats()
            loss_sum = correct = seen = batches = 0
            for mb in train_loader:
                x = mb.node_features["feat"].float()
                y = mb.labels.long()
                out = model(x, mb.blocks)
                # an empty batch still joins DDP's all-reduce, with zero gradients
                loss = F.cross_entropy(out, y) if y.numel() else out.sum() * 0.0
                opt.zero_grad()
                loss.backward()
                opt.step()
                loss_sum += float(loss.detach()) * int(y.numel())
                correct += int((out.argmax(1) == y).sum()) if y.numel() else 0
                seen += int(y.numel())
                batches += 1
            secs = time.perf_counter() - t0
            ex_s = ex.stats.seconds - ex0.seconds
            mb_in = (ex.stats.bytes_received - ex0.bytes_received) / 1e6
            hit_rate = feat.cache_stats.hit_rate
            if epoch == 0 and cfg.remote_cache:
                feat.build_cache(cfg.remote_cache)  # the hottest rows of the first epoch
            loss_all, correct_all, seen_all = _sum([loss_sum, correct, seen], world)
            t1 = time.perf_counter()
            evaluated = evaluates_epoch(cfg, epoch)
            valid, test = ((evaluate("valid"), evaluate("test")) if evaluated
                           else (float("nan"), float("nan")))
            es = EpochStats(
                epoch=epoch, loss=loss_all / max(1, seen_all),
                train_acc=correct_all / max(1, seen_all), valid_acc=valid, test_acc=test,
                seeds_per_s=seen / secs if secs else 0.0,
                batches_per_s=batches / secs if secs else 0.0, seconds=secs,
                peak_rss_bytes=peak_rss_bytes(), valid={"accuracy": valid},
                test={"accuracy": test}, eval_seconds=time.perf_counter() - t1,
                rss_bytes=current_rss_bytes())
            if not evaluated:
                es.skip_evaluation()
            result.epochs.append(es)
            if evaluated and not valid <= result.best_valid_acc:  # NaN-safe: the first counts
                result.best_epoch, result.best_valid_acc, result.test_acc = epoch, valid, test
                result.best_valid, result.test = valid, {"accuracy": test}
            say(f"epoch {epoch}: loss {es.loss:.4f} train_acc {es.train_acc:.4f} valid_acc "
                f"{valid:.4f} test_acc {test:.4f} | rank 0 training: {es.seeds_per_s:,.0f} "
                f"seeds/s, {ex_s:.1f} s in exchanges (loader thread) in {secs:.1f} s, "
                f"{mb_in:,.1f} MB received, remote feature cache hit rate {hit_rate:.1%}")
            log_epoch(cfg, es, world.rank)
            if on_epoch is not None:
                on_epoch(es)
        result.final_test_acc = result.epochs[-1].test_acc if result.epochs else float("nan")
        say(final_line(result))
        return result
    finally:
        train_loader.close()
        for lo in eval_loaders.values():
            lo.close()
