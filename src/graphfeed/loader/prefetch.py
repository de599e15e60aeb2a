"""``ParallelMapper``: maps a function over a source with background threads, in order.

Threads, never processes: numba kernels (``nogil``) and torch gathers release the GIL, so
threads sample and fetch in parallel without forking a CUDA context or copying the graph per
worker. Each thread takes one whole item at a time (``next(source)`` under a lock, then
``fn(item)``); results are handed back in source order, so the output equals a serial
``map(fn, source)`` whatever the thread count.

Bounds: at most ``num_threads + prefetch`` items are taken from the source and not yet handed
back (being worked on, or finished and waiting). An exception in ``fn`` or in the source is
re-raised in the caller at that item's position, with the worker's traceback attached, and the
threads then stop.

Shutdown is prompt on every path: exhaustion, an error, ``close()``, garbage collection of the
mapper (a ``weakref.finalize``; the threads hold only a shared ``_State``, never the mapper) and
interpreter exit (daemon threads, and the finalizer runs at exit). Threads poll a stop event
every ``_POLL_S`` seconds while idle; a thread inside ``fn`` finishes that item first. Closing
waits for the threads with ONE deadline for all of them (``_JOIN_TIMEOUT_S`` in total, not per
thread): a thread stuck in a slow read is left to finish that item on its own (it is a daemon;
its result is dropped), so Ctrl-C during a slow feature read returns within about a second.

``next()`` is thread-safe: several consumer threads may share one mapper; each item is handed
out exactly once, in source order (a consumer lock serialises the hand-out).
"""

from __future__ import annotations

import threading
import weakref
from itertools import count
from time import monotonic, perf_counter
from typing import Any, Callable, Optional

from .base import LoaderStats, Stage, ThreadSafeStage

__all__ = ["ParallelMapper"]

_POLL_S = 0.05
#: Total seconds ``close()`` waits for all the threads together.
_JOIN_TIMEOUT_S = 1.0
_thread_ids = count()


class _Failure:
    """An exception raised at one position of the stream."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException):
        self.exc = exc


class _State:
    """Everything the worker threads share. Holds no reference to the mapper itself."""

    def __init__(self, source: Stage, fn: Callable, in_flight: int):
        self.source = source
        self.fn = fn
        self.stop = threading.Event()
        self.slots = threading.Semaphore(in_flight)
        self.source_lock = threading.Lock()
        self.cond = threading.Condition()
        self.results: dict[int, Any] = {}
        self.next_seq = 0  # next position to take from the source (under source_lock)
        self.end: Optional[int] = None  # number of items, once the source is exhausted
        self.source_done = False

    def post(self, seq: int, result: Any) -> None:
        with self.cond:
            if not self.stop.is_set():
                self.results[seq] = result
            self.cond.notify_all()

    def post_end(self, seq: int) -> None:
        with self.cond:
            self.end = seq
            self.cond.notify_all()


def _worker(state: _State) -> None:
    while not state.stop.is_set():
        if not state.slots.acquire(timeout=_POLL_S):
            continue
        with state.source_lock:
            if state.stop.is_set() or state.source_done:
                state.slots.release()
                return
            seq = state.next_seq
            state.next_seq += 1
            try:
                item = next(state.source)
            except StopIteration:
                state.source_done = True
                state.slots.release()
                state.post_end(seq)
                return
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                state.source_done = True  # nothing after a failure will be delivered
                state.post(seq, _Failure(e))
                return
        try:
            result = state.fn(item)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            result = _Failure(e)
        del item
        state.post(seq, result)
        del result


def _shutdown(state: _State, threads: list[threading.Thread], close_source: bool = True) -> None:
    """Stop and join the threads; safe to call twice, from a finalizer, or from a worker."""
    state.stop.set()
    with state.cond:
        state.results.clear()  # drop finished batches now (their buffers return to the pool)
        state.cond.notify_all()
    me = threading.current_thread()
    if me in threads:
        # garbage collection ran the finalizer inside a worker (maybe under source_lock): the
        # stop event is set, the threads end by themselves; leave the source to the collector
        return
    deadline = monotonic() + _JOIN_TIMEOUT_S  # one deadline for all: not N x the timeout
    for t in threads:
        if t.is_alive():
            t.join(max(0.0, deadline - monotonic()))
    if close_source:
        # a thread still pulling from the source holds the lock: then it closes nothing and
        # the source (a generator) is closed when it is freed
        if state.source_lock.acquire(timeout=max(0.0, deadline - monotonic())):
            try:
                state.source.close()
            finally:
                state.source_lock.release()


class ParallelMapper(ThreadSafeStage):
    """``fn`` over ``source`` in ``num_threads`` threads (>= 1), results in source order, with at
    most ``num_threads + prefetch`` items in flight. Threads start at construction."""

    def __init__(
        self,
        source: Stage,
        fn: Callable[[Any], Any],
        *,
        num_threads: int,
        prefetch: int,
        stats: Optional[LoaderStats] = None,
        name: str = "graphfeed-loader",
    ):
        assert num_threads >= 1 and prefetch >= 0
        super().__init__()
        self.source = source
        self.num_threads = num_threads
        self.prefetch = prefetch
        self._stats = stats
        self._fn = fn
        self._name = name
        self._start()

    def _start(self) -> None:
        self._state = _State(self.source, self._fn, self.num_threads + self.prefetch)
        self._next = 0
        self._closed = False
        self._threads = [
            threading.Thread(
                target=_worker, args=(self._state,), name=f"{self._name}-{next(_thread_ids)}",
                daemon=True,
            )
            for _ in range(self.num_threads)
        ]
        self._finalizer = weakref.finalize(self, _shutdown, self._state, self._threads)
        for t in self._threads:
            t.start()

    def _next_item(self) -> Any:
        if self._closed:
            raise StopIteration
        state, seq = self._state, self._next
        t0 = perf_counter()
        with state.cond:
            while seq not in state.results:
                if state.end is not None and seq >= state.end:
                    break
                if state.stop.is_set():
                    break
                if not any(t.is_alive() for t in self._threads):
                    # cannot happen unless a thread was killed from outside; never hang on it
                    if seq not in state.results:
                        self.close()
                        raise RuntimeError("graphfeed loader threads ended without a result")
                state.cond.wait(_POLL_S)
            result = state.results.pop(seq, None) if seq in state.results else _END
        if self._stats is not None:
            self._stats.add("wait_s", perf_counter() - t0)
        if result is _END:
            self.close()
            raise StopIteration
        state.slots.release()
        self._next = seq + 1
        if isinstance(result, _Failure):
            exc = result.exc
            self.close()
            raise exc  # keeps exc.__traceback__: the worker's frames stay visible
        return result

    def reset(self) -> None:
        """Stop the threads, drop finished items, reset the source and start again."""
        self._closed = True
        self._state.stop.set()
        _shutdown(self._state, self._threads, close_source=False)
        self._finalizer.detach()
        self.source.reset()
        self._start()

    def close(self) -> None:
        """Stop the threads (each finishes the item it is on) and close the source."""
        if not self._closed:
            self._closed = True
            self._finalizer()

    @property
    def threads(self) -> list[threading.Thread]:
        return list(self._threads)


_END = object()
