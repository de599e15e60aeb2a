"""The one training loop: :func:`fit` runs any task (:mod:`graphfeed.trainer.tasks`) on any
kind of placed data (homogeneous, typed, partitioned), with the same resume, save, graceful
stop, progress, loss checks, epoch statistics (time, seeds/s, RSS and GPU peaks), ``--log``,
early stopping, ``--predict`` and final line for all of them.

Loaders (training and evaluation) are built once and reused every epoch with ``set_epoch``;
they are closed when the run ends, however it ends, so memory stays flat over any number of
epochs.
"""

from __future__ import annotations

import contextlib
import math
import time

from .._memory import current_rss_bytes, peak_rss_bytes, release_free_memory
from .._progress import bar
from .._units import format_bytes
from ..errors import GraphfeedError
from . import checkpoint as ckpt
from .metrics import format_metrics
from .report import final_line, log_epoch
from .result import EpochStats, TrainResult

__all__ = ["fit", "all_reduce", "epoch_line", "budget_line", "autocast_for", "compile_notice"]

#: ``--precision`` -> the dtype autocast computes in (``None``: no autocast, float32), and
#: whether the loss is scaled: float16's 5 exponent bits underflow small gradients, so its
#: backward runs on a scaled loss (``GradScaler``, which also skips a step whose gradients
#: overflowed); bfloat16 has float32's exponent and needs no scaler
PRECISION_DTYPES = {"32": (None, False), "bf16-mixed": ("bfloat16", False),
                    "fp16-mixed": ("float16", True)}


def all_reduce(values: list) -> list:
    """The element-wise sum of ``values`` over the ranks of the default process group."""
    import torch
    import torch.distributed as dist

    from ..distributed.sharing import collective_device

    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=collective_device())
    dist.all_reduce(t)
    return t.cpu().tolist()


def _wrap(net, device: str, world_size: int):
    if world_size == 1:
        return net
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(net, device_ids=[torch.device(device).index] if device.startswith("cuda") else None)


def autocast_for(precision: str, device: str):
    """``(context factory, GradScaler or None)`` of ``--precision`` on ``device``: each call of
    the factory returns the context the forward pass and the loss (and evaluation, see
    :meth:`Task.evaluates_under_autocast`) run in: autocast in the precision's dtype, or a
    no-op for "32". Weights, gradients and the optimiser's state stay float32 ("mixed"):
    autocast casts each op's inputs (matrix products in the low precision, reductions such
    as the loss's softmax in float32). Both run on the CPU too (torch's CPU autocast and
    GradScaler); whether they are faster there depends on the CPU's bfloat16/float16
    instructions (docs/training.md has the figures of one without). A torch that lacks one
    is refused here, in one line, before the first batch."""
    import torch

    low, scaled = PRECISION_DTYPES[precision]
    if low is None:
        return contextlib.nullcontext, None
    kind = torch.device(device).type
    dtype = getattr(torch, low)
    try:
        scaler = torch.amp.GradScaler(kind) if scaled else None
        with torch.autocast(kind, dtype=dtype):
            pass
    except (AttributeError, RuntimeError, TypeError, ValueError) as e:
        raise GraphfeedError(f"--precision {precision} is not supported on {kind} by torch "
                             f"{torch.__version__} ({e}); use --precision 32") from None
    return (lambda: torch.autocast(kind, dtype=dtype)), scaler


def fit(task, *, on_batch=None, on_epoch=None) -> TrainResult:
    """Train ``task`` (a :class:`~graphfeed.trainer.tasks.base.Task`) for ``cfg.epochs`` and
    return its figures; rank 0 prints them. ``on_batch(epoch, batch_index)`` after each
    optimizer step, ``on_epoch(stats)`` after each epoch (its checkpoint written); either may
    raise to stop the run."""
    import torch

    cfg, device, rank, world = task.cfg, task.device, task.rank, task.world_size
    say = task.say
    torch.manual_seed(cfg.seed)  # the model's initial weights
    net = task.build_model().to(device)
    model = _wrap(net, device, world)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    result = task.result()
    result.world_size, result.seed = world, cfg.seed
    result.precision = cfg.precision
    autocast, scaler = autocast_for(cfg.precision, str(device))
    eval_autocast = autocast if task.evaluates_under_autocast() else contextlib.nullcontext
    state = ckpt.RunState(cfg, net, opt, result, trainer=task.trainer, keys=task.resume_keys,
                          rank=rank, world_size=world, say=say, scaler=scaler,
                          dataset=task.dataset)
    loader = task.train_loader()
    loader.item_sampler.max_batches = cfg.steps_per_epoch
    say(budget_line(cfg, task.main))
    nan = float("nan")
    epochs = state.epochs(loader)
    interrupted = None  # where a Ctrl-C or SIGTERM stopped the run, if one did
    epoch = -1
    try:
        task.open_evaluation(net)
        try:
            for epoch, sums, seconds0 in epochs:
                model.train()
                task.before_epoch(epoch)
                t0 = time.perf_counter()
                acc = torch.tensor(sums, dtype=torch.float64, device=device)  # loss, correct, rows
                first = int(loader.state_dict()["next_batch"])  # > 0 when resumed mid-epoch
                with bar(len(loader), f"epoch {epoch}", enabled=cfg.progress and rank == 0) as pbar:
                    pbar.update(first)
                    for batch in loader:
                        with autocast():  # the forward pass and the loss; backward outside
                            loss, correct, n = task.step(model, batch)
                        opt.zero_grad(set_to_none=True)
                        if scaler is None:
                            loss.backward()
                            opt.step()
                        else:
                            scaler.scale(loss).backward()
                            scaler.step(opt)  # skipped when the scaled gradients overflowed
                            scaler.update()
                        acc[0] += loss.detach().double() * n
                        acc[1] += correct.double()
                        acc[2] += n
                        pbar.update(1)
                        if on_batch is not None:
                            on_batch(epoch, batch.batch_index)
                        if state.stop_requested():
                            state.stop_mid_epoch(loader, acc.cpu().tolist(),
                                                 seconds0 + time.perf_counter() - t0)
                seconds = seconds0 + time.perf_counter() - t0
                tot = acc.cpu().tolist()
                if world > 1:
                    tot = all_reduce(tot)
                loss_avg = tot[0] / max(tot[2], 1)
                if not math.isfinite(loss_avg):
                    raise GraphfeedError(
                        f"the training loss became {loss_avg} in epoch {epoch}: check the input "
                        f"features for NaN or infinite values, or lower --lr (now {cfg.lr:g})")
                extra = task.after_epoch(epoch)
                t1 = time.perf_counter()
                with eval_autocast():
                    metrics = (task.evaluate(model, progress=cfg.progress and rank == 0)
                               if state.evaluates(epoch) else None)
                eval_seconds = time.perf_counter() - t1
                release_free_memory()
                valid = (metrics or {}).get("valid") or {}
                test = (metrics or {}).get("test") or {}
                es = EpochStats(
                    epoch=epoch, loss=loss_avg, train_acc=tot[1] / max(tot[2], 1),
                    valid_acc=valid.get("accuracy", nan), test_acc=test.get("accuracy", nan),
                    seeds_per_s=tot[2] / task.rows_per_seed / max(seconds, 1e-9),
                    batches_per_s=len(loader) / max(seconds, 1e-9), seconds=seconds,
                    peak_rss_bytes=peak_rss_bytes(), valid=dict(valid), test=dict(test),
                    eval_seconds=eval_seconds, rss_bytes=current_rss_bytes())
                if str(device).startswith("cuda"):
                    es.peak_gpu_bytes = int(torch.cuda.max_memory_allocated(device))
                    es.peak_gpu_reserved_bytes = int(torch.cuda.max_memory_reserved(device))
                if metrics is None:
                    es.skip_evaluation()
                state.end_epoch(es, es.valid.get(task.main, nan) if es.evaluated else nan)
                say(epoch_line(es, task.unit) + (f"  {extra}" if extra else ""))
                log_epoch(cfg, es, rank)
                if state.finish_epoch(loader, es, on_epoch):
                    break
        except KeyboardInterrupt:
            # a result even when cut short: the best evaluated epoch so far, as a run that
            # ended there would report it (no --predict, no baselines); else nothing to report
            if not any(e.evaluated for e in result.epochs):
                raise
            done = bool(result.epochs) and result.epochs[-1].epoch == epoch
            interrupted = f"{'after' if done else 'in'} epoch {epoch}"
        if not result.epochs:
            raise GraphfeedError("no epoch was run")
        if cfg.predict and interrupted is None:  # the best epoch's weights; every rank
            # scores its share, rank 0 writes
            state.load_best()
            with eval_autocast():
                written = task.predict(model, cfg.predict)
            if rank == 0:
                result.predictions = written
    finally:
        # restores the Ctrl-C/SIGTERM handlers now: after an early stop's break or an exception
        # the generator would otherwise live on (in a traceback someone keeps) with them installed
        epochs.close()
        loader.close()
        task.close()
    result.checkpoint = state.checkpoint
    best = result.epochs[result.best_epoch] if result.best_epoch >= 0 else None
    result.best_valid_acc = best.valid_acc if best is not None else nan
    result.test_acc = result.test.get("accuracy", nan)
    result.final_test_acc = result.epochs[-1].test_acc
    if interrupted is None:
        try:  # the baselines: a Ctrl-C or SIGTERM here still gets the summary
            with ckpt.GracefulStop(False, say, one_process=world == 1):
                task.finish(result)
        except KeyboardInterrupt:
            if world > 1:  # the other ranks may be inside a collective of the baselines
                raise
            interrupted = "during the baselines"
    result.interrupted = interrupted
    for w in result.warnings:
        say(f"graphfeed train: warning: {w}")
    say(final_line(result) + ("" if cfg.precision == "32" else f"; precision {cfg.precision}"))
    return result


@contextlib.contextmanager
def compile_notice(say):
    """While active: the first time numba compiles a kernel (none of its compiled code cached
    yet for this source and machine), say once that the run is compiling, so a slow epoch 0 is
    explained; nothing when every kernel comes from numba's cache (``graphfeed train`` holds
    it from placing the data to the last epoch). Where numba is not installed
    (``importlib.util.find_spec`` answers without importing it) there is nothing to compile;
    else numba's event module is imported here, before the first kernel is."""
    import importlib.util

    if importlib.util.find_spec("numba") is None:
        yield
        return
    from numba.core import event

    class _Once(event.Listener):
        said = False

        def on_start(self, ev) -> None:
            if not self.said:
                self.said = True
                say("graphfeed train: compiling numba kernels on their first use on this "
                    "machine (seconds, once: cached for later runs)")

        def on_end(self, ev) -> None:
            pass

    with event.install_listener("numba:compile", _Once()):
        yield


def budget_line(cfg, main: str) -> str:
    """What the run will train for, said before the first epoch: the ``--epochs`` budget and the
    ``--patience`` that ends it early once the validation metric stops improving."""
    every = f" (every {cfg.eval_every} epochs)" if cfg.eval_every > 1 else ""
    steps = ("" if cfg.steps_per_epoch is None else
             f"; an epoch is at most {cfg.steps_per_epoch} batches (--steps-per-epoch)")
    if not cfg.patience:
        return (f"graphfeed train: {cfg.epochs} epoch(s), no early stopping (--patience 0); "
                f"the best epoch by valid {main}{every} is kept{steps}")
    return (f"graphfeed train: up to {cfg.epochs} epochs, stopping when valid {main} has not "
            f"improved for {cfg.patience} evaluations{every} (--epochs, --patience); the best "
            f"epoch is kept{steps}")


def epoch_line(es: EpochStats, unit: str = "seeds") -> str:
    """The line every task prints after an epoch."""
    gpu = ""
    if es.peak_gpu_bytes is not None:
        gpu = (f"  peak GPU {format_bytes(es.peak_gpu_bytes)} allocated, "
               f"{format_bytes(es.peak_gpu_reserved_bytes)} reserved")
    scores = (f"valid {format_metrics(es.valid)}  test {format_metrics(es.test)}  "
              if es.evaluated else "(not evaluated)  ")
    return (
        f"epoch {es.epoch:2d}  loss {es.loss:.4f}  train acc {es.train_acc:.4f}  {scores}"
        f"{es.seeds_per_s:,.0f} {unit}/s  {es.batches_per_s:.1f} batches/s  {es.seconds:.1f}s "
        f"+ eval {es.eval_seconds:.1f}s  RSS {format_bytes(es.rss_bytes)} (peak "
        f"{format_bytes(es.peak_rss_bytes)}){gpu}"
    )
