"""A CPU cache in front of any feature: a fixed byte budget, a named eviction policy.

``CachedFeature(feature, capacity_bytes, policy="sieve")`` keeps up to
``capacity_bytes // row_nbytes`` rows in one preallocated tensor. Bookkeeping (which row is in
which slot, the policy's queues and bits) lives in numpy arrays updated by numba kernels
(``_cache_kernels``); rows are copied by a nogil kernel.

A batched read:

1. under the lock: look every id up, record the hits with the policy, copy the hit rows out;
2. without the lock: read the distinct missed ids from the backing feature (so other threads
   keep reading the cache meanwhile) and scatter them to their positions;
3. under the lock: admit the missed ids (ascending id order), evicting as the policy says, and
   copy their rows into the freed slots.

One batch admits at most ``admit_fraction`` of the capacity (default a quarter); when it misses
more rows than that, the most frequently missed ones are admitted (``AdmissionFilter``). A batch may miss more distinct rows than the cache holds: the
rows that are not admitted are served straight from the backing store, so the read always
completes with correct rows (GraphBolt's cache can hang in that case, dmlc/dgl#7646), and the
cache is not swept clean by every large batch, so hot rows survive.

Statistics count positions of ``ids``: ``hits`` were served from the cache, ``misses`` from the
backing feature (a row missed twice in one batch counts twice).
"""

from __future__ import annotations

import threading
from concurrent.futures import Executor
from typing import Optional

import numpy as np
import torch

from .._checks import check_float, check_int
from .._threads import ChunkPool, PoolOwner, ProcessLocal, run_chunks
from .._units import parse_size
from ..errors import GraphfeedError
from ._rows import PARALLEL_MIN_ROWS, word_dtype, word_view
from .base import Feature, WrappedFeature
from ._policies import _ALIASES, POLICIES, policy_code  # noqa: F401 - re-exported

class AdmissionFilter:
    """Which distinct missed ids (sorted) a batch admits, at most ``budget`` of them.

    Every miss bumps a saturating per-row counter (1 byte per row, halved every
    ``age_every`` batches, so it tracks recent frequency). When a batch misses more rows than the
    budget, the most frequently missed win; ties are broken by a random draw from
    ``(seed, batch)``. Admitting every miss of a batch larger than the cache would sweep the
    whole cache every batch, so nothing hot survives; frequency-ranked admission lets the rows
    that recur batch after batch accumulate (TinyLFU's idea, with exact counts).
    """

    def __init__(self, num_rows: int, budget: int, seed: int = 0, age_every: int = 16):
        self.counts = np.zeros(num_rows, dtype=np.uint8)
        self.budget = int(budget)
        self.seed = int(seed)
        self.age_every = int(age_every)
        self.batches = 0

    def select(self, uniq: np.ndarray):
        """``(ids_to_admit, their positions in uniq, or None when all are admitted)``."""
        self.batches += 1
        c = self.counts[uniq]
        self.counts[uniq] = np.minimum(c.astype(np.int64) + 1, 255).astype(np.uint8)
        if self.batches % self.age_every == 0:
            self.counts >>= 1
        m = uniq.shape[0]
        if m <= self.budget:
            return uniq, None
        rng = np.random.default_rng((self.seed, self.batches))
        score = c.astype(np.float64) + rng.random(m)  # count first, random among equals
        sel = np.sort(np.argpartition(-score, self.budget - 1)[: self.budget])
        return uniq[sel], sel


def top_rows(scores, k: int, num_rows: int) -> np.ndarray:
    """The ``k`` rows of the highest ``scores`` (non-negative integers, one per row; ties go to
    the lower id), sorted by id: a histogram of the scores, not a sort, so the temporary memory
    is the histogram and the ``k`` ids."""
    from . import _cache_kernels as K

    if scores is None:
        raise GraphfeedError("cache policy 'degree' needs degrees=: one non-negative integer per "
                             "row (e.g. graph.out_degrees)")
    a = np.asarray(scores)
    if a.ndim != 1 or a.shape[0] != num_rows or a.dtype.kind not in "iu":
        raise GraphfeedError(f"degrees must be 1-D integers, one per row ({num_rows}), got "
                             f"{a.dtype} {a.shape}")
    k = min(int(k), num_rows)
    if k == 0:
        return np.empty(0, dtype=np.int64)
    if a.dtype.kind == "i" and int(a.min()) < 0:
        raise GraphfeedError(f"degrees must be >= 0, got {int(a.min())}")
    counts = np.bincount(a, minlength=1) if a.shape[0] else np.zeros(1, np.int64)
    above = np.cumsum(counts[::-1])[::-1]  # above[t]: rows scoring >= t
    t = int(np.searchsorted(-above, -k, side="right")) - 1  # the largest t with above[t] >= k
    strict = int(above[t + 1]) if t + 1 < above.shape[0] else 0
    out = np.empty(k, dtype=np.int64)
    K.collect_top(a, t, k - strict, out)
    return out


class CacheState:
    """Bookkeeping arrays for ``capacity`` slots over ``num_rows`` ids (see ``_cache_kernels``).

    Memory: 4 bytes per id (``slot_of``, plus 4 more for S3-FIFO's ghost index) and ~18 bytes
    per slot; the admission filter adds 1 byte per id.
    """

    def __init__(self, num_rows: int, capacity: int, policy: int):
        from . import _cache_kernels as K

        self.policy = policy
        self.capacity = capacity
        self.slot_of = np.full(num_rows, -1, dtype=np.int32)
        self.node_of = np.full(capacity, -1, dtype=np.int64)
        self.nxt = np.full(capacity, -1, dtype=np.int32)
        self.prv = np.full(capacity, -1, dtype=np.int32)
        self.bits = np.zeros(capacity, dtype=np.uint8)
        self.qid = np.zeros(capacity, dtype=np.uint8)
        self.st = K.new_state()
        if policy == K.POLICY_S3FIFO:
            small = max(1, capacity // 10)
            self.st[K.ST_SMALL] = small
            self.gring = np.full(max(1, capacity - small), -1, dtype=np.int64)
            self.gpos = np.zeros(num_rows, dtype=np.int32)
        else:
            self.gring = np.full(1, -1, dtype=np.int64)
            self.gpos = np.zeros(1, dtype=np.int32)

    def cached_ids(self) -> np.ndarray:
        """Sorted ids currently cached."""
        from . import _cache_kernels as K

        if self.policy == K.POLICY_DEGREE:  # every slot is reserved; the filled ones count
            held = self.node_of[self.node_of >= 0]
            return np.sort(held[self.slot_of[held] >= 0])
        n = int(self.st[0])
        return np.sort(self.node_of[:n][self.node_of[:n] >= 0])


class CachedFeature(PoolOwner, ProcessLocal, WrappedFeature):
    """Wraps ``feature`` with a CPU cache of ``capacity_bytes`` (an int or "512MB"-style string).

    ``policy``: ``"sieve"`` (default), ``"s3fifo"``, ``"lru"`` or ``"clock"``, or the static
    ``"degree"``: the ``capacity`` rows of the highest ``degrees`` (non-negative integers, one
    per row: a graph's ``out_degrees``, how often each node is sampled) are cached on their
    first miss and never evicted, with no per-read bookkeeping beyond a lookup; :meth:`warm`
    fills them at once. Thread-safe: many
    loader threads may read at once; backing reads run outside the lock. ``num_threads`` copies
    large batches when ``read`` gets no ``executor``. The cache owns ``feature``: ``close()``
    closes it too. A forked child keeps a copy of the cache; a pickled one (spawned workers)
    arrives empty, with the same configuration.
    """

    kind = "cached"
    _process_state = ("_lock",)
    #: what a pickled cache keeps (its contents are rebuilt empty)
    _CONFIG = ("feature", "capacity_bytes", "policy_name", "_policy", "capacity",
               "admit_fraction", "seed", "_pool", "_hot")

    def __init__(self, feature: Feature, capacity_bytes, policy: str = "sieve", *,
                 admit_fraction: float = 0.25, seed: int = 0, num_threads: int = 2,
                 degrees=None):
        if not isinstance(feature, Feature):
            raise GraphfeedError(f"CachedFeature wraps a graphfeed Feature, got {type(feature).__name__}")
        if feature.device.type != "cpu":
            raise GraphfeedError(f"CachedFeature caches CPU features; this one is on {feature.device}")
        self.feature = feature
        self.capacity_bytes = parse_size(capacity_bytes)
        self.policy_name = _ALIASES.get(str(policy).lower(), str(policy).lower())
        self._policy = policy_code(policy)
        self.admit_fraction = check_float("admit_fraction", admit_fraction, 0.0, 1.0, lo_open=True)
        self.seed = int(seed)
        self._pool = ChunkPool(check_int("num_threads", num_threads, 1), "gf-cache")
        row = max(1, feature.row_nbytes)
        self.capacity = int(min(self.capacity_bytes // row, feature.num_rows))
        if self.capacity >= np.iinfo(np.int32).max:
            raise GraphfeedError(f"cache of {self.capacity} rows is too large (max 2**31 - 2 rows)")
        self._hot = None
        if self.policy_name == "degree":
            self._hot = top_rows(degrees, self.capacity, feature.num_rows)
        elif degrees is not None:
            raise GraphfeedError(f"degrees are for cache policy 'degree', not {self.policy_name!r}")
        self._init_storage()

    def _init_storage(self) -> None:
        f = self.feature
        self._word = word_dtype(f.row_nbytes) if f.row_nbytes else np.dtype(np.uint8)
        self._slots = torch.empty((self.capacity, *f.row_shape), dtype=f.dtype)
        self._slot_words = word_view(self._slots, self._word) if self.capacity and f.row_nbytes else None
        self._state = CacheState(f.num_rows, self.capacity, self._policy)
        self.hits = 0
        self.misses = 0
        if self._hot is not None:
            from . import _cache_kernels as K

            K.reserve_static(self._hot, self._state.slot_of, self._state.node_of)
            self._admission = None
        else:
            self._admission = AdmissionFilter(f.num_rows, self.admit_budget, self.seed)
        self._init_process_state()

    def _open_process_state(self) -> None:
        # forked: the parent's lock may have been held at the fork
        self._lock = threading.Lock()

    @property
    def admit_budget(self) -> int:
        """Most rows one batch may admit: ``admit_fraction`` of the capacity (at least 1)."""
        return max(1, int(self.capacity * self.admit_fraction))

    def __getstate__(self):
        return {k: self.__dict__[k] for k in self._CONFIG}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_storage()

    def close(self) -> None:
        """Stop the copy threads and close the wrapped feature; the cached rows stay (a later
        read restarts what it needs). Idempotent."""
        self._pool.close()
        super().close()

    # -------------------------------------------------------------- Feature
    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def reset_stats(self) -> None:
        with self._lock:
            self.hits = 0
            self.misses = 0

    def counters(self) -> dict:
        with self._lock:
            own = {"hits": self.hits, "misses": self.misses, "hit_rate": self.hit_rate,
                   "cached_rows": self.num_cached, "capacity": self.capacity}
        return {**self.feature.counters(), "cached": own}

    def reset_counters(self) -> None:
        self.reset_stats()
        self.feature.reset_counters()

    def cached_ids(self) -> np.ndarray:
        """Sorted ids held right now (for tests and inspection)."""
        with self._lock:
            return self._state.cached_ids()

    @property
    def num_cached(self) -> int:
        return int(self._state.st[0])

    def _copy(self, src, src_idx, dst, dst_idx, n: int, executor: Optional[Executor]) -> None:
        """Row copies by the nogil kernel, split over ``num_threads`` chunks for large ``n``."""
        from ._gather import copy_rows

        run_chunks(lambda a, b: copy_rows(src, src_idx, dst, dst_idx, a, b), n, self.num_threads,
                   executor, serial_below=4 * PARALLEL_MIN_ROWS)

    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor],
              executor: Optional[Executor]) -> torch.Tensor:
        from . import _cache_kernels as K

        self._check_process()
        n = int(ids.shape[0])
        f = self.feature
        if out is None:
            out = torch.empty((n, *f.row_shape), dtype=f.dtype)
        if n == 0:
            return out
        if self.capacity == 0 or f.row_nbytes == 0:
            with self._lock:
                self.misses += n
            return f.read(ids, out=out, check=False, executor=executor)
        ids_np = ids.numpy()
        copies = self._executor(executor)
        st = self._state
        hit_pos = np.empty(n, dtype=np.int64)
        hit_slot = np.empty(n, dtype=np.int64)
        miss_pos = np.empty(n, dtype=np.int64)
        out_w = word_view(out, self._word)
        static = self._admission is None
        with self._lock:
            nh, nm = K.lookup(ids_np, st.slot_of, hit_pos, hit_slot, miss_pos)
            if not static:
                K.on_hits(st.policy, hit_slot, nh, st.st, st.nxt, st.prv, st.bits)
            self._copy(self._slot_words, hit_slot, out_w, hit_pos, nh, copies)
            self.hits += nh
            self.misses += nm
        if nm == 0:
            return out
        miss_pos = miss_pos[:nm]
        uniq, inv = np.unique(ids_np[miss_pos], return_inverse=True)
        rows = f.read(torch.from_numpy(uniq), check=False, executor=executor)
        rows_w = word_view(rows, self._word)
        self._copy(rows_w, inv.reshape(-1).astype(np.int64, copy=False), out_w, miss_pos, nm, copies)
        if static:
            self._fill(uniq, rows_w, copies)
            return out
        with self._lock:
            uniq, sel = self._admission.select(uniq)
        m = uniq.shape[0]
        out_rows = np.empty(m, dtype=np.int64)
        out_slots = np.empty(m, dtype=np.int64)
        with self._lock:
            na = K.admit(
                st.policy, uniq, m, st.st, st.node_of, st.slot_of, st.nxt, st.prv,
                st.bits, st.qid, st.gring, st.gpos, out_rows, out_slots,
            )
            if sel is not None:
                out_rows[:na] = sel[out_rows[:na]]  # back to positions in ``rows``
            self._copy(rows_w, out_rows, self._slot_words, out_slots, na, copies)
        return out

    def _fill(self, ids: np.ndarray, rows_w, executor) -> None:
        """The static policy: copy the rows of ``ids`` (sorted, distinct) whose slots are
        reserved and empty into them."""
        from . import _cache_kernels as K

        m = ids.shape[0]
        out_rows = np.empty(m, dtype=np.int64)
        out_slots = np.empty(m, dtype=np.int64)
        with self._lock:
            na = K.admit_static(ids, self._state.st, self._state.slot_of, out_rows, out_slots)
            self._copy(rows_w, out_rows, self._slot_words, out_slots, na, executor)

    def warm(self, rows_per_read: int = 1 << 20) -> int:
        """The ``degree`` policy: read every reserved row not cached yet from the backing
        feature, in ascending id order (``rows_per_read`` at a time: on disk, nearby rows
        share reads, so this runs near the drive's sequential speed) and cache it; returns the
        rows filled. The other policies admit rows as they are read: nothing to warm (0)."""
        if self._hot is None:
            return 0
        self._check_process()
        rows_per_read = check_int("rows_per_read", rows_per_read, 1)
        st = self._state
        filled = 0
        for a in range(0, self._hot.shape[0], rows_per_read):
            ids = self._hot[a : a + rows_per_read]
            ids = ids[st.slot_of[ids] <= -2]
            if ids.shape[0] == 0:
                continue
            rows = self.feature.read(torch.from_numpy(ids), check=False)
            before = int(st.st[0])
            self._fill(ids, word_view(rows, self._word), self._executor(None))
            filled += int(st.st[0]) - before
        return filled

    def __repr__(self) -> str:
        return (
            f"CachedFeature({self.feature!r}, capacity={self.capacity} rows, "
            f"policy={self.policy_name!r}, hit_rate={self.hit_rate:.3f})"
        )
