"""``graphfeed train``: mini-batch node classification on a graphfeed pipeline.

One function, :func:`train`, serves a single process, ``graphfeed train --nproc N`` (spawned
ranks) and ``torchrun --nproc-per-node N -m graphfeed train`` alike: when a process group is up
(``WORLD_SIZE > 1``) the model is wrapped in DistributedDataParallel, every rank takes an equal
share of the training ids each epoch, evaluation is split across ranks and gathered, and only
rank 0 prints. :func:`train_runs` repeats a run over ``cfg.runs`` seeds and reports mean and
standard deviation; :func:`tune` (``cfg.tune``) searches a few settings on the validation
set and keeps the winner. The pieces live in :mod:`graphfeed.trainer` (config, loop, evaluation,
metrics, checkpoints, the PyG adapter); this module places the data for a run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import traceback
from pathlib import Path
from typing import Callable, Optional

from ._memory import release_free_memory
from .datasets.open import open_dataset
from .errors import GraphfeedError
from .trainer.config import TrainConfig
from .trainer.evaluate import EVAL_BATCH_SIZE
from .trainer.result import EpochStats, RunsResult, TrainResult

__all__ = ["TrainConfig", "EpochStats", "TrainResult", "RunsResult", "train", "train_runs", "tune",
           "by_data", "open_dataset", "check_run", "EVAL_BATCH_SIZE"]


# ---------------------------------------------------------------------------- helpers
#: node classification with the model left to the data trains gcn where fewer than this fraction
#: of the nodes are training labels and the input features are 0/1, sage elsewhere
#: (docs/training.md, "What the defaults reach")
GCN_BELOW = 0.10
#: rows :func:`by_data` reads, evenly spaced, to tell 0/1 features
BINARY_ROWS = 4096


def _binary(dataset, inputs) -> bool:
    """Whether every input feature holds only 0 and 1 in :data:`BINARY_ROWS` rows spread over
    the nodes (bag-of-words as the files give them; row-normalised features are not)."""
    import numpy as np

    n = dataset.num_nodes
    ids = np.unique(np.linspace(0, n - 1, min(n, BINARY_ROWS)).astype(np.int64))
    for name in inputs:
        if name not in dataset.features:
            return False  # the task refuses it, naming the features there are
        x = dataset.features[name].read(ids).float()
        if not bool(((x == 0) | (x == 1)).all()):
            return False
    return True


def by_data(cfg: TrainConfig, dataset, say=None) -> TrainConfig:
    """``cfg`` with the model the data chooses when it was left to it (``cfg.model_by_data``:
    ``model=None``): gcn for node classification on an untyped graph where under
    :data:`GCN_BELOW` of the nodes are training labels and the input features are 0/1, else
    sage; ``say`` states the choice. Any other ``cfg`` (or no ``dataset``: partitions) comes
    back as it is."""
    if not cfg.model_by_data or cfg.task != "node" or dataset is None or dataset.hetero is not None:
        return cfg
    n, k = dataset.num_nodes, len(dataset.train_ids)
    binary = _binary(dataset, cfg.inputs)
    model = "gcn" if k < GCN_BELOW * n and binary else "sage"
    if say is not None:
        say(f"graphfeed train: model {model}, chosen by the data: {k:,} of {n:,} nodes "
            f"({k / max(n, 1):.1%}) are training labels, features {'' if binary else 'not '}"
            f"0/1 (gcn under {GCN_BELOW:.0%} with 0/1 features, else sage; --model chooses)")
    return dataclasses.replace(cfg, model=model)


#: what the ranks' fork server imports beyond graphfeed's core, so every rank shares those pages
PRELOAD = ("graphfeed.training", "graphfeed.models.gnn", "graphfeed.trainer.fit",
           "graphfeed.trainer.tasks.node")
#: and beyond those, for ``--partitions``
PRELOAD_PARTITIONS = PRELOAD + ("graphfeed.partition.dist",)


def _backend(cfg: TrainConfig, device: str) -> str:
    """The process-group backend: ``cfg.dist_backend``, or NCCL for GPU ranks and gloo else."""
    if cfg.dist_backend != "auto":
        if cfg.dist_backend == "nccl" and not device.startswith("cuda"):
            raise GraphfeedError("--dist-backend nccl needs GPU ranks; use --device cuda or gloo")
        return cfg.dist_backend
    from .distributed import default_backend

    return default_backend(device)


def _dist_world():
    """(rank, world_size) of an initialised process group, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


# ---------------------------------------------------------------------------- the loop
def train(cfg: TrainConfig, *, dataset=None, model: Optional[Callable] = None, on_batch=None,
          on_epoch=None) -> TrainResult:
    """Train one run as configured (``cfg.runs`` must be 1; see :func:`train_runs`).

    - ``dataset``: an opened ``Dataset`` instead of ``cfg.dataset``.
    - ``model``: ``factory(in_dim, num_classes) -> nn.Module`` called as ``module(x, blocks)``
      (e.g. ``lambda i, c: StockModel(torch_geometric.nn.models.GCN(i, 64, 2, c))``, see
      :mod:`graphfeed.models.adapter`); default: ``cfg.model`` from :mod:`graphfeed.models`.
      With ``nproc > 1`` it must be picklable (a module-level function).
    - ``on_batch(epoch, batch_index)`` after each optimizer step; ``on_epoch(stats)`` after
      each epoch (its checkpoint is written by then). Either may raise to stop the run.
    """
    cfg.validate()
    if cfg.tune is not None:
        return tune(cfg, dataset=dataset, model=model, on_batch=on_batch, on_epoch=on_epoch)
    if cfg.runs != 1:
        raise GraphfeedError(f"train() runs once; use train_runs() for runs={cfg.runs}")
    if cfg.partitions:  # refused once, before any rank starts
        from .trainer.tasks.node import check_partitions

        check_partitions(cfg)
        _check_outputs(cfg)
    if cfg.nproc > 1 and int(os.environ.get("WORLD_SIZE", "1")) == 1:
        from .distributed import check_gpus_for_ranks, launch

        # refuse here, once and before any rank starts, what NCCL would refuse in every rank
        check_gpus_for_ranks(cfg.nproc, _backend(cfg, _device(cfg)))
        results = launch(_train_rank, cfg.nproc, cfg, None, model, timeout_s=cfg.dist_timeout,
                         preload=PRELOAD_PARTITIONS if cfg.partitions else PRELOAD)
        return results[0]
    return _train_rank(cfg, dataset, model, on_batch, on_epoch)


def train_runs(cfg: TrainConfig, *, dataset=None, model: Optional[Callable] = None) -> RunsResult:
    """``cfg.runs`` independent runs (:func:`run_plan`), with the mean and sample standard
    deviation of each test metric at the best epoch and of the best validation value."""
    from .trainer.metrics import mean_std

    cfg.validate()
    if cfg.tune is not None:
        return tune(cfg, dataset=dataset, model=model)
    if dataset is None and cfg.nproc == 1 and not cfg.partitions:
        dataset = open_dataset(cfg.dataset, cfg.data_root, verbose=True)
    results = []
    for spec in run_plan(cfg, dataset):
        one = dataclasses.replace(cfg, runs=1, seed=spec.seed, split=spec.split)
        if cfg.runs > 1:
            _say(cfg)(f"graphfeed train: run {len(results) + 1}/{cfg.runs} (seed {spec.seed}"
                      + (f", split {spec.split})" if spec.split is not None else ")"))
        results.append(train(one, dataset=dataset, model=model))
        if results[-1].interrupted:  # its summary is printed; the runs after it are not run
            raise KeyboardInterrupt
        # the run's loaders are closed and freed by reference counting; hand their freed heap
        # pages back before the next run places its data
        release_free_memory()
    main = results[0].main_metric
    summary = {"best_valid": mean_std(r.best_valid for r in results)}
    for k in results[0].test:
        summary[f"test_{k}"] = mean_std(r.test.get(k, float("nan")) for r in results)
    if results[0].mlp_test is not None:
        summary["mlp_test_" + main] = mean_std(r.mlp_test[main] for r in results)
    out = RunsResult(runs=results, main_metric=main, summary=summary)
    if cfg.runs > 1:
        say = _say(cfg)
        for k, v in summary.items():
            say(f"graphfeed train: {cfg.runs} runs: {k} {v['mean']:.4f} +- {v['std']:.4f}")
    return out


def tune(cfg: TrainConfig, *, dataset=None, model=None, on_batch=None, on_epoch=None):
    """``cfg.tune`` seconds: a few settings, each a full run of ``cfg.runs`` seeds, the winner
    chosen on validation and run again as asked (:func:`graphfeed.trainer.tune.search`); its
    result (a :class:`TrainResult`, or a :class:`RunsResult` for ``runs > 1``) has the table
    in ``tune``. :func:`train` and :func:`train_runs` call it when ``cfg.tune`` is set."""
    from .trainer.tune import search

    cfg.validate()
    assert cfg.tune is not None
    for name, given in (("model", model), ("on_batch", on_batch), ("on_epoch", on_epoch)):
        if given is not None:
            raise GraphfeedError(f"tune searches graphfeed's own models and runs: drop {name}= "
                                 f"(or tune)")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise GraphfeedError("tune runs in one process: run it without torchrun (or drop --tune)")
    _check_outputs(cfg)  # a bad --save/--predict/--log path fails before the search, not after
    if dataset is None:
        dataset = open_dataset(cfg.dataset, cfg.data_root, verbose=True)
    cfg = by_data(cfg, dataset, _say(cfg))

    def run(one: TrainConfig):
        return train(one, dataset=dataset) if one.runs == 1 else train_runs(one, dataset=dataset)

    return search(cfg, run, typed=dataset.hetero is not None, say=_say(cfg))


@dataclasses.dataclass(frozen=True)
class RunSpec:
    seed: int
    split: Optional[int] = None  # a stored split index, for datasets that store several


def run_plan(cfg: TrainConfig, dataset) -> list:
    """One :class:`RunSpec` per run: run ``k`` uses seed ``cfg.seed + k``.

    Split sets: ``cfg.split`` pins every run to that stored split set. Otherwise, on a dataset
    that stores several (``dataset.num_split_sets > 1``, e.g. the 10 standard splits of a
    benchmark), run ``k`` trains on split set ``k mod num_split_sets``, so the mean/std cover the
    splits as well as the seeds.
    """
    if cfg.split is not None:
        return [RunSpec(seed=cfg.seed + k, split=cfg.split) for k in range(cfg.runs)]
    n = int(getattr(dataset, "num_split_sets", 1) or 1) if dataset is not None else 1
    return [RunSpec(seed=cfg.seed + k, split=(k % n) if n > 1 else None) for k in range(cfg.runs)]


def _say(cfg: TrainConfig):
    """Prints human lines to stdout, or to stderr when stdout carries JSON."""
    stream = sys.stderr if cfg.human_output == "stderr" else sys.stdout

    def say(msg: str) -> None:
        print(msg, file=stream, flush=True)

    return say


def _device(cfg: TrainConfig, device=None) -> str:
    """Where the run trains: ``--partitions`` on the CPU (its exchanges run on gloo).

    The exchange itself can run on GPU ranks (``partition.dist.Exchange(device=, backend=)``:
    NCCL on the rank's GPU, ``distributed.world.exchange_backend``), but the rest of the
    partitioned path is CPU-only still, hence the pin: ``placement.partitioned`` makes its
    ``Exchange`` without the ranks' device and reports ``device`` cpu, and the node task's
    partitioned branch (``trainer.tasks.node``) builds the model on ``"cpu"``. Else
    ``device`` (default ``--device``) in ``--mode``: :func:`graphfeed._cuda.resolve_device`
    (asking NVML, not starting CUDA, keeps the launcher safe to fork from), its errors naming
    ``--device``."""
    from . import _cuda

    if cfg.partitions:
        return "cpu"
    try:
        return str(_cuda.resolve_device(cfg.device if device is None else device, cfg.mode))
    except GraphfeedError as e:
        raise GraphfeedError(f"{e} (--device)") from None


def _plan(cfg: TrainConfig, world):
    """The run's :class:`~graphfeed.placement.DataPlan`. Several GPU ranks each take their local
    rank's GPU (one GPU per rank under NCCL; gloo ranks may share: local rank modulo the GPUs)."""
    from .placement.plan import DataPlan

    device = cfg.device
    if world.world_size > 1 and str(device).startswith("cuda"):
        device = "cuda"
    return DataPlan.resolve(features=cfg.features, cache_size=cfg.cache_size,
                            cache_policy=cfg.cache_policy, mode=cfg.mode,
                            device=_device(cfg, device),
                            world=world, private_copy=cfg.private_copy)


def _train_rank(cfg: TrainConfig, dataset=None, model=None, on_batch=None, on_epoch=None) -> TrainResult:
    from .distributed.world import World

    world = World.from_env()
    plan = _plan(cfg, world)
    started_group = False
    if world.world_size > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            from .distributed import init

            # gloo on CPU, NCCL when the ranks train on GPUs (unless --dist-backend says otherwise)
            init(world, backend=_backend(cfg, plan.device), device=plan.device,
                 timeout_s=cfg.dist_timeout)
            started_group = True
    try:
        return _train_loop(cfg, dataset, plan, model, on_batch, on_epoch)
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


def _train_loop(cfg: TrainConfig, dataset, plan, model=None, on_batch=None,
                on_epoch=None) -> TrainResult:
    """Check, place (the task's ``prepare`` through ``plan``) and :func:`~graphfeed.trainer.fit.fit`."""
    import torch

    from .trainer.fit import compile_notice, fit
    from .trainer.tasks import TASKS

    rank, world_size = _dist_world()
    say = _say(cfg) if rank == 0 else (lambda msg: None)
    if plan.on_gpu:
        from . import cuda_alloc

        cuda_alloc.start_cuda()  # the allocator setting first, then CUDA
        torch.cuda.set_device(torch.device(plan.device))
    held = _check_outputs(cfg)  # rank 0 holds the checkpoint folder for the run's life
    with held if rank == 0 else contextlib.nullcontext(), compile_notice(say):
        if dataset is None and not cfg.partitions:
            dataset = open_dataset(cfg.dataset, cfg.data_root, verbose=rank == 0)
        cfg = by_data(cfg, dataset, say)
        task = TASKS.get(cfg.task).prepare(cfg, dataset, plan, rank=rank, world_size=world_size,
                                           say=say, model=model)
        return fit(task, on_batch=on_batch, on_epoch=on_epoch)


# ---------------------------------------------------------------------------- checks before a run
def _check_output_path(flag: str, path) -> None:
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise GraphfeedError(f"{flag} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise GraphfeedError(f"{flag} {path}: folder {parent} is not writable")
    if Path(path).is_dir():
        raise GraphfeedError(f"{flag} {path}: is a folder, expected a file name")


def _check_outputs(cfg: TrainConfig):
    """``--predict``, ``--log``, ``--save`` and ``--resume`` paths, before any data is read.
    Returns the run's :class:`~graphfeed.trainer.checkpoint.SaveFolder` (checked; ``--save``
    is created when the run enters it to hold it), or a context doing nothing without a
    checkpoint folder."""
    from .trainer.checkpoint import SaveFolder, checkpoint_path

    for flag, path in (("--predict", cfg.predict), ("--log", cfg.log)):
        if path:
            _check_output_path(flag, path)
    if cfg.resume and not checkpoint_path(cfg.resume).is_file():
        raise GraphfeedError(f"--resume {cfg.resume}: no checkpoint.pt there")
    if cfg.save:
        return SaveFolder(cfg.save, "--save")
    if cfg.resume:
        return SaveFolder(cfg.resume, "--resume", create=False)
    return contextlib.nullcontext()


def check_run(cfg: TrainConfig, *, dataset=None) -> dict:
    """What ``graphfeed train --dry-run`` prints: every check a run makes before its first batch
    without placing data or starting ranks (arguments, output paths, dataset, the task's checks
    (``Task.check``: splits, model size, the sampling method against the dataset's weights and
    times, what typed or partitioned data refuses), the placement decision on this machine's
    memory), and the plan: placement mode and reason, evaluation method and fanouts."""
    from .trainer.tasks import TASKS

    cfg.validate()
    if cfg.partitions:
        return _check_partitions_run(cfg)
    device = _device(cfg)
    _check_outputs(cfg)
    ds = open_dataset(cfg.dataset, cfg.data_root) if dataset is None else dataset
    cfg = by_data(cfg, ds)
    info = TASKS.get(cfg.task).check(cfg, ds, device)
    return {"dataset": ds.name, "task": cfg.task, "device": device, **info,
            **_check_placement(cfg, ds)}


def _check_placement(cfg: TrainConfig, dataset) -> dict:
    """The placement a run of ``cfg`` would choose for ``dataset`` on this machine (refusals
    included), without reading the data; ranks per machine from ``--nproc``."""
    from .distributed.world import World

    n = max(1, cfg.nproc)
    plan = _plan(cfg, World(world_size=n, local_world_size=n))
    typed = dataset.hetero is not None  # typed: its per-type features
    names = ([] if typed else list(cfg.inputs)) + ([getattr(dataset, "target", "label")]
                                                   if cfg.task == "node" else [])
    names = [k for k in names if k in dataset.features]
    plan = plan.for_dataset(dataset, names)
    p = plan.decide(*plan.data_bytes(dataset, names))
    return {"mode": p.mode, "placement": p.reason}


def _check_partitions_run(cfg: TrainConfig) -> dict:
    """``--dry-run --partitions``: the run's refusals, the book and every part checked as the
    ranks open them."""
    from .partition.book import load_part, read_book
    from .trainer.tasks.node import check_partitions

    check_partitions(cfg)
    _check_outputs(cfg)
    book = read_book(cfg.partitions)
    for k in range(book.num_parts):
        load_part(book, k)
    return {"partitions": str(book.path), "parts": book.num_parts, "nodes": book.num_nodes,
            "classes": book.num_classes, "ranks": cfg.nproc, "model": cfg.model,
            "fanouts": list(cfg.fanouts), "eval": "sampled", "mode": "partitioned"}
