"""Threads for intra-batch work, and per-process state that survives fork and pickling.

- :func:`split` cuts ``range(n)`` into contiguous chunks; :func:`run_chunks` runs ``fn(start,
  stop)`` over them on an executor and waits (chunks are leaf work: they never submit more).
- :class:`ChunkPool` is a lazily started ``ThreadPoolExecutor`` owned by one object (a sampler
  or a feature used outside a loader); the loader's own executor is handed down instead when
  there is one, so pools never nest under the loader's threads. :class:`PoolOwner` gives its
  owner ``num_threads`` and ``_executor(given)``.
- :class:`ProcessLocal` is the one fork-safe base: state named in ``_process_state`` (open file
  descriptors, memory maps, locks, pools) is dropped when the object is pickled (spawned ranks)
  and rebuilt lazily in a forked child, never shared with the parent.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Executor, ThreadPoolExecutor, wait
from typing import Callable, Optional

from ._checks import check_int

__all__ = ["split", "run_chunks", "ChunkPool", "PoolOwner", "ProcessLocal"]


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]``: ``range(n)`` in at most ``parts`` contiguous chunks."""
    if n <= 0:
        return []
    step = -(-n // max(1, parts))
    return [(s, min(n, s + step)) for s in range(0, n, step)]


def run_chunks(fn: Callable[[int, int], object], n: int, parts: int,
               executor: Optional[Executor], *, serial_below: int = 0) -> None:
    """``fn(start, stop)`` over ``split(n, parts)``: on ``executor`` when given and there is more
    than one chunk, else in the calling thread. ``n < serial_below`` runs as one chunk in the
    calling thread (handing small work to threads costs more than it saves). Waits for every
    chunk and re-raises the first chunk's error."""
    chunks = split(n, 1 if n < serial_below else parts)
    if executor is None or len(chunks) <= 1:
        for s, e in chunks:
            fn(s, e)
        return
    futs = [executor.submit(fn, s, e) for s, e in chunks]
    wait(futs)  # all of them, even when one failed: the others write into the caller's buffers
    for f in futs:
        f.result()


class ChunkPool:
    """A thread pool of ``num_threads`` started on first use, for one owner's chunked work.

    ``get()`` returns the executor (``None`` when ``num_threads == 1``: run serially);
    ``close()`` shuts it down (restarted on the next ``get``). A pool copied into a forked child
    or unpickled starts empty: threads never cross a fork.
    """

    def __init__(self, num_threads: int, name: str):
        self.num_threads = int(num_threads)
        self.name = name
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._pool: Optional[ThreadPoolExecutor] = None

    def get(self) -> Optional[Executor]:
        if self.num_threads <= 1:
            return None
        if self._pid != os.getpid():
            self._reset()
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.num_threads, thread_name_prefix=self.name)
            return self._pool

    def resize(self, num_threads: int) -> None:
        """Use ``num_threads`` threads from now on (a running pool of another size stops)."""
        if int(num_threads) != self.num_threads:
            self.close()
            self.num_threads = int(num_threads)

    def close(self) -> None:
        if self._pid != os.getpid():  # the parent's threads are not ours to join
            self._reset()
            return
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def __getstate__(self):
        return {"num_threads": self.num_threads, "name": self.name}

    def __setstate__(self, state):
        self.num_threads, self.name = state["num_threads"], state["name"]
        self._reset()


class PoolOwner:
    """Mixin for objects whose chunked work runs on ``self._pool`` (a :class:`ChunkPool`):
    ``num_threads`` reads and resizes it, and ``_executor(given)`` is the executor to use, the
    one a caller handed down or the own pool's."""

    _pool: ChunkPool

    @property
    def num_threads(self) -> int:
        return self._pool.num_threads

    @num_threads.setter
    def num_threads(self, n: int) -> None:
        self._pool.resize(check_int("num_threads", n, 1))

    def _executor(self, given: Optional[Executor] = None) -> Optional[Executor]:
        return given if given is not None else self._pool.get()


class ProcessLocal:
    """Base of objects holding per-process resources (file descriptors, memory maps, locks).

    Subclasses list those attributes in ``_process_state`` and build them in
    ``_open_process_state()`` (called at construction, after unpickling, and in a forked child
    before first use through :meth:`_check_process`). Pickling drops them, so a spawned rank
    opens its own; a forked child never uses its parent's.
    """

    _process_state: tuple[str, ...] = ()

    def _open_process_state(self) -> None:
        """Set every attribute of ``_process_state`` to its unopened value."""
        raise NotImplementedError

    def _init_process_state(self) -> None:
        self._pid = os.getpid()
        self._open_process_state()

    def _check_process(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's descriptors and threads are not ours
            self._init_process_state()

    def __getstate__(self):
        state = self.__dict__.copy()
        for k in self._process_state + ("_pid",):
            state.pop(k, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_process_state()
