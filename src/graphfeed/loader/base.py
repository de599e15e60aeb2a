"""Pipeline stages: small iterators that wrap their source, with an explicit lifecycle.

In the spirit of ``torchdata.nodes``: a stage is created around its source, yields with
``__next__``, ``close()`` releases what it holds (threads, CUDA events) and closes its source, and
``reset()`` starts over from the beginning of the source (after releasing what it held).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Callable, Iterable, Iterator, Optional

from ..errors import GraphfeedWarning

__all__ = ["GraphfeedWarning", "Stage", "ThreadSafeStage", "IterStage", "MapStage",
           "LoaderStats"]


class Stage:
    """Base class: ``iter(stage) is stage``; subclasses implement ``__next__`` and ``close``."""

    source: Optional["Stage"] = None

    def __iter__(self) -> "Stage":
        return self

    def __next__(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def reset(self) -> None:
        """Start over from the beginning of the source. Stages without state just reset the
        source; stages with threads or buffered items release them first."""
        if self.source is not None:
            self.source.reset()

    def close(self) -> None:
        """Release resources and close the source. Idempotent."""
        if self.source is not None:
            self.source.close()

    def __enter__(self) -> "Stage":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ThreadSafeStage(Stage):
    """A stage whose ``next()`` several consumer threads may share: a lock lets one caller at a
    time into ``_next_item``, so each item is handed out exactly once, in order."""

    def __init__(self) -> None:
        self._consumer = threading.Lock()

    def __next__(self) -> Any:
        with self._consumer:
            return self._next_item()

    def _next_item(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class IterStage(Stage):
    """The root of a pipeline: iterates ``make()`` (e.g. one epoch of the item sampler);
    ``reset()`` calls ``make()`` again."""

    def __init__(self, make: Callable[[], Iterable]):
        self._make = make
        self._it: Optional[Iterator] = iter(make())

    def reset(self) -> None:
        self.close()
        self._it = iter(self._make())

    def __next__(self) -> Any:
        if self._it is None:
            raise StopIteration
        return next(self._it)

    def close(self) -> None:
        it, self._it = self._it, None
        if it is not None and hasattr(it, "close"):
            it.close()  # a generator: runs its finally blocks now, not at garbage collection


class MapStage(Stage):
    """Applies ``fn`` to each item of ``source`` in the calling thread (the serial path and the
    reference the threaded ``ParallelMapper`` must match)."""

    def __init__(self, source: Stage, fn: Callable[[Any], Any]):
        self.source = source
        self.fn = fn

    def __next__(self) -> Any:
        return self.fn(next(self.source))


@dataclass
class LoaderStats:
    """Cumulative counters of a ``DataLoader`` (all threads together), for benchmarks and
    progress bars. Times are wall seconds summed over the threads that spent them, so with
    several threads ``sample_s + fetch_s`` can exceed the elapsed time.

    - ``sample_s``: inside ``sampler.sample``; ``fetch_s``: reading features and labels;
      ``copy_s``: pinning and issuing host-to-device copies; ``wait_s``: the caller blocked in
      ``next()`` waiting for a batch (the pipeline did not keep up when this grows).
    - ``batches``: batches handed to the caller.
    - ``buffers_reused`` / ``buffers_allocated``: pooled feature reads served by a free pooled
      buffer / by a new allocation (both stay 0 with ``reuse_buffers=False``).
    """

    sample_s: float = 0.0
    fetch_s: float = 0.0
    copy_s: float = 0.0
    wait_s: float = 0.0
    batches: int = 0
    buffers_reused: int = 0
    buffers_allocated: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, value) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + value)

    def timer(self, name: str) -> "_Timer":
        """``with stats.timer("fetch_s"): ...`` adds the elapsed time to ``name``."""
        return _Timer(self, name)

    def as_dict(self) -> dict:
        with self._lock:
            return {
                k: getattr(self, k)
                for k in (
                    "sample_s", "fetch_s", "copy_s", "wait_s",
                    "batches", "buffers_reused", "buffers_allocated",
                )
            }

    def reset(self) -> None:
        with self._lock:
            self.sample_s = self.fetch_s = self.copy_s = self.wait_s = 0.0
            self.batches = self.buffers_reused = self.buffers_allocated = 0


class _Timer:
    __slots__ = ("_stats", "_name", "_t0")

    def __init__(self, stats: LoaderStats, name: str):
        self._stats, self._name = stats, name

    def __enter__(self) -> None:
        self._t0 = perf_counter()

    def __exit__(self, *exc) -> None:
        self._stats.add(self._name, perf_counter() - self._t0)
