"""``DataLoader``: seed batches -> sampled, feature-joined mini-batches, overlapped with training.

The pipeline, one stage per module::

    IterStage(item_sampler epoch)                      item_sampler.py, base.py
      -> ParallelMapper(SampleNeighbors + FetchFeatures [+ stage_for_device])   prefetch.py, fetch.py
      -> DeviceStage (CUDA only)                                                device.py

``num_threads`` background threads each sample AND fetch one whole batch at a time (numba kernels
and torch gathers release the GIL), results come back in batch order, and a batch's randomness
derives only from ``(epoch, batch_index)``: the batches are identical to a serial loop whatever
``num_threads`` is. ``num_threads=0`` runs every stage in the caller's thread.

Intra-batch work (a sampler layer or a feature read split into chunks) runs on ONE executor the
loader owns and hands to ``sampler.sample(..., executor=)`` and ``feature.read(...,
executor=)``: ``num_threads`` threads started on the first iteration (``num_threads=0``: the
chunks run inline in the caller's thread), so no sampler or feature starts a pool of its own
under the loader's threads.
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from functools import partial
from typing import Any, Mapping, Optional, Union

import torch

from .._checks import check_int
from ..errors import GraphfeedError
from ..features.base import Feature
from ..sampling.base import MiniBatch, Sampler
from .base import IterStage, LoaderStats, MapStage, Stage, ThreadSafeStage
from .device import DeviceStage, output_device, stage_for_device
from .fetch import FetchFeatures, SampleNeighbors
from .item_sampler import ItemSampler
from .prefetch import ParallelMapper

__all__ = ["DataLoader"]

#: Name prefix of the loader's intra-batch threads (its batch threads are "graphfeed-loader-N").
_CHUNK_THREAD_PREFIX = "graphfeed-loader-chunk"


class _InlineExecutor(Executor):
    """Runs each task inside ``submit``, in the submitting thread (``num_threads=0``: the chunks
    of a batch stay in the caller's thread like everything else)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        fut: Future = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - re-raised by fut.result()
            fut.set_exception(e)
        return fut


def _named_features(node_features) -> dict[str, Feature]:
    if node_features is None:
        return {}
    if isinstance(node_features, Feature):
        return {"feat": node_features}
    if isinstance(node_features, Mapping):
        out = {}
        for name, f in node_features.items():
            if not isinstance(f, Feature):
                raise GraphfeedError(
                    f"node_features[{name!r}] must be a graphfeed Feature, got {type(f).__name__}"
                )
            out[str(name)] = f
        return out
    raise GraphfeedError(
        "node_features must be a Feature or a mapping of names to Features, "
        f"got {type(node_features).__name__}"
    )


def _type_features(sampler: Sampler, type_features) -> dict:
    """``{type: {name: Feature}}`` checked against the sampler's typed graph: known types, one
    row per node of the type."""
    if not type_features:
        return {}
    g = sampler.hetero
    if g is None:
        raise GraphfeedError(f"type_features are per node type: they need a typed sampler, got "
                             f"{type(sampler).__name__}")
    out = {}
    for t, feats in type_features.items():
        n = g.num_nodes_of(t)  # an unknown type is an error naming the graph's types
        if not isinstance(feats, Mapping):
            raise GraphfeedError(f"type_features[{t!r}] must map names to Features, got "
                                 f"{type(feats).__name__}")
        out[t] = {}
        for name, f in feats.items():
            if not isinstance(f, Feature):
                raise GraphfeedError(f"type_features[{t!r}][{name!r}] must be a graphfeed "
                                     f"Feature, got {type(f).__name__}")
            if f.num_rows < n:
                raise GraphfeedError(f"feature {name!r} of node type {t!r} has {f.num_rows} rows "
                                     f"but the type has {n} nodes: every node needs a row")
            out[t][str(name)] = f
    return out


def _check_rows(sampler: Sampler, node_features: dict, labels) -> None:
    """Every sampled id must be a row: a feature shorter than the graph would be read out of
    bounds (the loader reads with ``check=False`` for speed), so refuse it up front."""
    n = sampler.num_nodes
    named = dict(node_features)
    if labels is not None:
        named["labels"] = labels
    for name, f in named.items():
        if f.num_rows < n:
            raise GraphfeedError(
                f"feature {name!r} has {f.num_rows} rows but the sampler's graph has {n} nodes: "
                f"every node needs a row"
            )


class _Progress:
    """Where one iteration is: shared by the iterator and its loader (not the loader itself, so
    a dropped loader does not keep an iterator alive or the other way round)."""

    __slots__ = ("epoch", "delivered", "finished", "__weakref__")

    def __init__(self, epoch: int, start: int):
        self.epoch = epoch
        self.delivered = start
        self.finished = False


class _LoaderIterator(ThreadSafeStage):
    """One epoch of a ``DataLoader``. Closing it (or dropping it) stops its threads.

    ``next()`` may be called from several threads: each batch is handed out exactly once, in
    order (a consumer waits while another one waits for its batch)."""

    def __init__(self, pipeline: Stage, progress: _Progress, stats: LoaderStats):
        super().__init__()
        self.source = pipeline
        self._progress = progress
        self._stats = stats
        self._closed = False

    def _next_item(self) -> MiniBatch:
        if self._closed:
            raise StopIteration
        try:
            mb = next(self.source)
        except StopIteration:
            self._progress.finished = True
            self.close()
            raise
        except BaseException:
            self.close()
            raise
        self._progress.delivered += 1
        self._stats.add("batches", 1)
        return mb

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.source.close()

    def __del__(self) -> None:
        # the mapper has its own finalizer; this closes the device stage's events promptly too
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from __del__ (interpreter exit)
            pass


class DataLoader:
    """Iterates ``MiniBatch``es for the seed batches of ``item_sampler``.

    - ``sampler``: a ``graphfeed.sampling.Sampler`` (ids only; the loader uses only what that
      interface declares); ``node_features``: a ``Feature`` (named ``"feat"``)
      or a mapping name -> ``Feature``, read at ``minibatch.input_nodes`` into
      ``minibatch.node_features[name]``; ``labels``: a ``Feature`` read at ``minibatch.seeds``
      into ``minibatch.labels``; ``type_features`` (a typed sampler): node type -> name ->
      ``Feature`` (one row per node of the type), read at the type-local
      ``input_nodes_dict[type]`` into ``minibatch.type_features`` (``x_dict``). Typed batches
      are made on the CPU (``device`` must be the CPU; move one with ``batch.to(device)``).
    - ``device``: ``"cpu"``, or a CUDA device: features are gathered into pinned buffers and
      copied on a side stream, overlapped with the caller's compute (see ``loader/device.py``).
    - ``num_threads`` background threads (0: everything in the caller's thread), each doing
      whole batches; batches come back in order and equal a serial loop's. The loader also owns
      one executor of ``num_threads`` threads for the chunks of large samples and reads (see
      the module docstring), started on the first iteration and stopped by :meth:`close`.
      ``prefetch``: finished batches allowed to wait; at most ``num_threads + prefetch``
      batches are in flight besides the one the caller holds.
    - ``reuse_buffers``: feature rows go into pooled buffers that are reused once no batch
      references them (kept batches are never overwritten).
    - ``num_workers``: accepted for drop-in compatibility; graphfeed never forks workers, a
      value > 0 warns once (``GraphfeedWarning``) and threads are used.

    Each ``iter(loader)`` runs one epoch of ``item_sampler`` (which then advances its epoch);
    ``set_epoch`` picks one explicitly; ``state_dict()`` / ``load_state_dict()`` resume
    mid-epoch with the same batches. ``stats`` accumulates per-stage times.
    """

    def __init__(
        self,
        item_sampler: ItemSampler,
        sampler: Sampler,
        *,
        node_features: Union[Feature, Mapping[str, Feature], None] = None,
        labels: Optional[Feature] = None,
        type_features: Optional[Mapping] = None,
        device="cpu",
        num_threads: int = 2,
        prefetch: int = 2,
        reuse_buffers: bool = True,
        num_workers: Optional[int] = None,
    ):
        if not isinstance(item_sampler, ItemSampler):
            raise GraphfeedError(
                f"item_sampler must be an ItemSampler, got {type(item_sampler).__name__}"
            )
        if not isinstance(sampler, Sampler):
            raise GraphfeedError(
                f"sampler must be a graphfeed.sampling.Sampler, got {type(sampler).__name__}"
            )
        if labels is not None and not isinstance(labels, Feature):
            raise GraphfeedError(f"labels must be a graphfeed Feature, got {type(labels).__name__}")
        self.item_sampler = item_sampler
        self.sampler = sampler
        self.node_features = _named_features(node_features)
        self.labels = labels
        self.num_threads = check_int("num_threads", num_threads, 0)
        self.prefetch = check_int("prefetch", prefetch, 0)
        self.device = output_device(device)
        self.reuse_buffers = bool(reuse_buffers)
        if num_workers is not None:
            from .workers import warn_num_workers

            gpu = self.device.type == "cuda"
            warn_num_workers("cpu-cuda" if gpu else "cpu-cpu", num_workers, on_gpu=gpu,
                             stacklevel=3)  # points at the caller's line
        _check_rows(sampler, self.node_features, labels)
        self.type_features = _type_features(sampler, type_features)
        if self.type_features and self.device.type != "cpu":
            raise GraphfeedError(f"a typed loader produces CPU batches; got device="
                                 f"{self.device} (call batch.to(device) in the loop)")
        self.stats = LoaderStats()
        cuda = self.device.type == "cuda"
        self._sample = SampleNeighbors(sampler, self.stats)
        self._fetch = FetchFeatures(
            self.node_features,
            labels,
            type_features=self.type_features,
            reuse_buffers=self.reuse_buffers,
            pin_memory=cuda,
            # in flight: threads + prefetch, the caller's batch, one copying ahead, one margin
            max_buffers=self.num_threads + self.prefetch + 3,
            stats=self.stats,
        )
        self._executor: Optional[Executor] = None  # started by the first iteration
        self._executor_lock = threading.Lock()
        self._resume: Optional[tuple[int, int]] = None
        self._progress: Optional[_Progress] = None
        self._iterators: "weakref.WeakSet[_LoaderIterator]" = weakref.WeakSet()

    # -- sizes and epochs --------------------------------------------------------------------
    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        return len(self.item_sampler)

    @property
    def epoch(self) -> int:
        """The epoch the next ``iter(loader)`` runs."""
        return self._resume[0] if self._resume is not None else self.item_sampler.epoch

    def set_epoch(self, epoch: int) -> None:
        """Run ``epoch`` on the next ``iter(loader)`` (from its first batch)."""
        self.item_sampler.set_epoch(epoch)
        self._resume = None

    # -- iteration ---------------------------------------------------------------------------
    def __iter__(self) -> _LoaderIterator:
        if self._resume is not None:
            epoch, start = self._resume
            self._resume = None
        else:
            epoch, start = self.item_sampler.epoch, 0
        self.item_sampler.set_epoch(epoch + 1)
        progress = _Progress(epoch, start)
        pipeline: Stage = IterStage(partial(self.item_sampler.iter_epoch, epoch, start))
        work = _Work(self._sample, self._fetch, self.device, self._intra_batch_executor())
        if self.num_threads == 0:
            pipeline = MapStage(pipeline, work)
        else:
            pipeline = ParallelMapper(
                pipeline, work, num_threads=self.num_threads, prefetch=self.prefetch,
                stats=self.stats,
            )
        if self.device.type == "cuda":
            pipeline = DeviceStage(pipeline, self.device, ahead=1, stats=self.stats)
        it = _LoaderIterator(pipeline, progress, self.stats)
        self._progress = progress
        self._iterators.add(it)
        return it

    def _intra_batch_executor(self) -> Executor:
        """The loader's one executor for chunks of a batch, created on first use."""
        with self._executor_lock:
            if self._executor is None:
                self._executor = (
                    _InlineExecutor() if self.num_threads == 0
                    else ThreadPoolExecutor(self.num_threads,
                                            thread_name_prefix=_CHUNK_THREAD_PREFIX)
                )
            return self._executor

    def close(self) -> None:
        """Stop every running iteration of this loader, its intra-batch executor, and let go of
        its pooled feature buffers (threads end, within about a second in total even if a read
        is slow: the executor's threads finish the chunk they are on, queued chunks are
        dropped; batches already returned stay valid). The loader can be iterated again; it
        then starts threads and allocates anew.

        Dropping a loader frees the same things by reference counting alone: no part of it is
        in a reference cycle, so nothing waits for the cycle collector."""
        for it in list(self._iterators):
            it.close()
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        self._fetch.clear_buffers()

    def __enter__(self) -> "DataLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- resuming ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"epoch", "next_batch"}``: where the latest iteration stopped (a finished epoch
        points at the start of the next one). ``load_state_dict`` of it in a fresh process,
        with the same item sampler settings, continues with the same batches."""
        if self._resume is not None:
            epoch, nxt = self._resume
        elif self._progress is None:
            epoch, nxt = self.item_sampler.epoch, 0
        elif self._progress.finished or self._progress.delivered >= len(self):
            epoch, nxt = self._progress.epoch + 1, 0
        else:
            epoch, nxt = self._progress.epoch, self._progress.delivered
        return {"epoch": int(epoch), "next_batch": int(nxt)}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        try:
            epoch, nxt = state["epoch"], state["next_batch"]
        except (KeyError, TypeError):
            raise GraphfeedError(
                f"a DataLoader state needs 'epoch' and 'next_batch', got {state!r}"
            ) from None
        epoch = check_int("state['epoch']", epoch, 0)
        nxt = check_int("state['next_batch']", nxt, 0)
        if nxt > len(self):
            raise GraphfeedError(
                f"state['next_batch']={nxt} is past this loader's {len(self)} batches per epoch"
            )
        self._resume = (epoch, nxt)

    def __repr__(self) -> str:
        return (
            f"DataLoader(batches={len(self)}, features={sorted(self.node_features)}, "
            f"labels={self.labels is not None}, device={self.device}, "
            f"num_threads={self.num_threads}, prefetch={self.prefetch}, "
            f"reuse_buffers={self.reuse_buffers})"
        )


class _Work:
    """What one worker does for one batch: sample, fetch, and stage for the device. Holds the
    loader's steps and executor, not the loader (worker threads must never keep the loader
    alive)."""

    __slots__ = ("sample", "fetch", "device", "executor")

    def __init__(self, sample: SampleNeighbors, fetch: FetchFeatures, device: torch.device,
                 executor: Executor):
        self.sample, self.fetch, self.device = sample, fetch, device
        self.executor = executor

    def __call__(self, item) -> Any:
        mb = self.fetch(self.sample(item, self.executor), self.executor)
        if self.device.type == "cuda":
            with self.fetch.stats.timer("copy_s"):
                return stage_for_device(mb, self.device)
        return mb
