"""The host-to-device stage: overlapped copies of finished batches to a CUDA device.

How a batch reaches the GPU (``cpu-cuda`` placement):

1. A worker thread gathers feature rows straight into PINNED pooled buffers and pins the
   sampler's small id tensors (``stage_for_device``). If the batch already holds CUDA tensors
   (a GPU sampler, GPU-resident features), the worker records a "ready" event on its stream.
2. The caller's thread, in ``DeviceStage.__next__``, issues ``minibatch.to(device,
   non_blocking=True)`` on a dedicated side stream (after waiting on the ready event), records a
   "copied" event, and keeps ONE batch copying ahead of the one it returns, so the copy of batch
   i + 1 runs while the model computes on batch i.
3. Before returning a batch, the caller's current stream waits on its "copied" event
   (``wait_event``: a GPU-side wait, the CPU does not block) and every GPU tensor of the batch is
   ``record_stream``-ed on the caller's stream, so the caching allocator does not hand its memory
   to the side stream while the caller's kernels still read it.
4. The pinned host batch is kept referenced until its "copied" event completes; the buffer pool
   only reuses buffers nobody references, so a staging buffer is never overwritten mid-copy.

When every tensor is already on the device (``cuda-cuda``), nothing is copied and no side stream
work is issued.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import torch

from .. import _cuda
from ..sampling.base import MiniBatch
from .base import LoaderStats, Stage

__all__ = ["output_device", "stage_for_device", "DeviceStage", "batch_tensors"]


def output_device(device) -> torch.device:
    """The loader's output device (:func:`graphfeed._cuda.resolve_device`), with the CUDA
    allocator configured before the loader's first CUDA allocation."""
    d = _cuda.resolve_device(device)
    if d.type == "cuda":
        from ..cuda_alloc import configure_cuda_allocator

        configure_cuda_allocator()  # must precede the first CUDA call that initialises the allocator
    return d


def batch_tensors(mb: MiniBatch) -> Iterator[torch.Tensor]:
    """Every tensor a ``MiniBatch`` holds."""
    yield mb.seeds
    for b in mb.blocks:
        yield b.edge_index
        yield b.src_nodes
        if b.edge_ids is not None:
            yield b.edge_ids
    yield from mb.node_features.values()
    if mb.labels is not None:
        yield mb.labels


@dataclass
class _Staged:
    """A batch ready for the device stage: CPU tensors pinned, ``ready`` recorded after the
    worker's GPU work (``None`` when it did none)."""

    mb: MiniBatch
    ready: Optional["torch.cuda.Event"]


def _pin(t: torch.Tensor) -> torch.Tensor:
    return t.pin_memory() if t.device.type == "cpu" and not t.is_pinned() else t


def stage_for_device(mb: MiniBatch, device: torch.device) -> _Staged:
    """Worker side of the CUDA path: pin the CPU tensors (pooled feature buffers already are)
    and record an event after any GPU work this thread queued for the batch."""
    mb.seeds = _pin(mb.seeds)
    for b in mb.blocks:
        b.edge_index = _pin(b.edge_index)
        b.src_nodes = _pin(b.src_nodes)
        if b.edge_ids is not None:
            b.edge_ids = _pin(b.edge_ids)
    mb.node_features = {k: _pin(v) for k, v in mb.node_features.items()}
    if mb.labels is not None:
        mb.labels = _pin(mb.labels)
    ready = None
    if any(t.is_cuda for t in batch_tensors(mb)):
        ready = torch.cuda.Event()
        ready.record(torch.cuda.current_stream(device))
    return _Staged(mb, ready)


@dataclass
class _Pending:
    mb: MiniBatch  # what the caller gets (on the device)
    event: Optional["torch.cuda.Event"]  # the caller's stream waits on it
    host: Optional[MiniBatch]  # the pinned source, kept alive until ``event`` completes


class DeviceStage(Stage):
    """``_Staged`` batches in, batches on ``device`` out, ``ahead`` copies issued in advance.

    An exception from the source while copying ahead is raised only after the batches before
    it were returned, so errors surface at their own batch.
    """

    def __init__(
        self,
        source: Stage,
        device: torch.device,
        *,
        ahead: int = 1,
        stats: Optional[LoaderStats] = None,
    ):
        assert device.type == "cuda" and ahead >= 0
        self.source = source
        self.device = device
        self.ahead = ahead
        self.stats = stats if stats is not None else LoaderStats()
        self._stream = torch.cuda.Stream(device)
        self._pending: deque[_Pending] = deque()
        self._inflight: deque[tuple[Any, MiniBatch]] = deque()
        self._error: Optional[BaseException] = None
        self._exhausted = False

    def _issue(self, staged: _Staged) -> _Pending:
        mb = staged.mb
        if all(t.device == self.device for t in batch_tensors(mb)):
            return _Pending(mb, staged.ready, None)
        with torch.cuda.stream(self._stream):
            if staged.ready is not None:
                self._stream.wait_event(staged.ready)
            gpu = mb.to(self.device, non_blocking=True)
            copied = torch.cuda.Event()
            copied.record(self._stream)
        return _Pending(gpu, copied, mb)

    def _release_copied(self) -> None:
        while self._inflight and self._inflight[0][0].query():
            self._inflight.popleft()

    def __next__(self) -> MiniBatch:
        self._release_copied()
        while not self._exhausted and self._error is None and len(self._pending) <= self.ahead:
            try:
                staged = next(self.source)
            except StopIteration:
                self._exhausted = True
                break
            except BaseException as e:  # noqa: BLE001 - raised at its own batch below
                self._error = e
                break
            with self.stats.timer("copy_s"):
                self._pending.append(self._issue(staged))
        if not self._pending:
            if self._error is not None:
                err, self._error = self._error, None
                self.close()
                raise err
            raise StopIteration
        p = self._pending.popleft()
        if p.event is not None:
            consumer = torch.cuda.current_stream(self.device)
            consumer.wait_event(p.event)
            for t in batch_tensors(p.mb):
                if t.is_cuda:
                    t.record_stream(consumer)
        if p.host is not None:
            self._inflight.append((p.event, p.host))
        return p.mb

    def _drain(self) -> None:
        """Wait for issued copies (their pinned sources must outlive them) and drop them."""
        for p in self._pending:
            if p.event is not None:
                p.event.synchronize()
        for event, _ in self._inflight:
            event.synchronize()
        self._pending.clear()
        self._inflight.clear()
        self._error = None
        self._exhausted = False

    def reset(self) -> None:
        self._drain()
        self.source.reset()

    def close(self) -> None:
        self._drain()
        super().close()
