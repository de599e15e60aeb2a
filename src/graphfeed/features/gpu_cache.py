"""A GPU cache in front of a host feature: the hottest rows in GPU memory, the rest read on demand.

``GPUCachedFeature(feature, capacity_bytes, device="cuda", policy=...)`` keeps up to
``capacity_bytes // row_nbytes`` rows of ``feature`` in one tensor on ``device``; every read
returns rows on ``device``. Policies:

- ``"degree"`` (static): the rows of the highest ``degrees`` (e.g. ``graph.in_degrees``: the
  nodes sampled most often), filled once at construction;
- ``"frequency"`` (static): the rows read most often during :meth:`GPUCachedFeature.warm_up`
  (a pass over some batches' ids, counting accesses only), filled then; empty before;
- ``"clock"`` (dynamic): CLOCK over the slots, run with torch ops on the device: a hit sets the
  slot's reference bit; of a batch's distinct missed rows, at most ``admit_fraction`` of the
  capacity (1/8 by default) are admitted, the rows missed most often first (a saturating
  one-byte count per row, halved once the counted misses reach ``AGE_AFTER`` times the
  capacity; ties: the lower id), into free slots, then into the slots the hand finds with a
  clear bit, clearing the bits it passes. Admitting every miss (``admit_fraction=1``) turns the
  cache over each batch when a batch reads more rows than it holds: on ``medium`` (10% of the
  rows cached, batches of about 123k input nodes) the hit rate was 0.245 that way and 0.394
  bounded, near ``"frequency"``'s 0.38, and each batch writes an eighth as many rows into the
  cache.

Misses are read through UVA where the wrapped feature's rows are pinned host memory (a
``PinnedFeature``, or an in-memory feature whose tensor is pinned or already visible from
``device``): one ``index_select`` on the device reads only the missed rows across the bus.
Otherwise the wrapped feature's ``read`` serves them and they are copied to ``device``. On a CPU
``device`` (how the tests run it) an in-memory CPU feature's tensor is gathered directly, the
stand-in for UVA.

Reads: with ``"degree"`` and ``"frequency"`` over a UVA source, one Triton kernel
(:mod:`._gpu_cache_kernels`) copies each row from its slot or across the bus, and counts the
misses on the device: one launch, no host sync (``stats()`` waits for the reads it counts).
Otherwise (CLOCK, which admits misses; no UVA source; no Triton) torch ops split hits from
misses, which syncs with the host.

Costs: ``num_rows`` int32 slot indices on ``device`` (4 bytes per row; CLOCK adds its one-byte
miss counts) plus the cached rows; a read of ``n`` ids is O(n) device work plus O(capacity) for
a CLOCK sweep that evicts.

Statistics count positions of ``ids``: ``hits`` served from the GPU rows, ``misses`` from the
host (a row missed twice in one read counts twice); ``bytes_moved`` is what crossed from the host
to serve reads and fill the cache: every missed position for the static policies (a sampler's
input nodes are distinct anyway), the distinct missed rows for CLOCK (which admits them), plus
every row filled.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Executor
from typing import Iterable, Optional

import numpy as np
import torch

from .._checks import check_int
from .._units import parse_size
from ..errors import GraphfeedError
from ._rows import tensor_words
from .base import Feature, WrappedFeature, as_id_tensor, check_id_range

__all__ = ["GPUCachedFeature", "GPU_POLICIES"]

GPU_POLICIES = ("degree", "frequency", "clock")
#: CLOCK halves its miss counts once it has counted this many times its capacity in misses
AGE_AFTER = 10
# Rows per step when the cache is filled from a feature without a UVA view (bounds host memory).
_FILL_CHUNK_BYTES = 64 << 20


class GPUCachedFeature(WrappedFeature):
    """Wraps a host ``feature`` with ``capacity_bytes`` (an int or ``"2GB"``) of its rows on
    ``device``, chosen by ``policy`` (see the module docstring). ``degrees`` (one number per
    row) is required by, and only used by, ``"degree"``. Thread-safe: concurrent reads serialise
    on the cache's bookkeeping. The cache owns ``feature``: ``close()`` closes it too.
    ``admit_fraction`` (``"clock"`` only): the most rows one read admits, as a fraction of the
    capacity, in (0, 1]; 1/8 when not given."""

    kind = "gpu-cached"

    def __init__(self, feature: Feature, capacity_bytes, *, device="cuda",
                 policy: str = "clock", degrees=None, admit_fraction=None):
        if not isinstance(feature, Feature):
            raise GraphfeedError(
                f"GPUCachedFeature wraps a graphfeed Feature, got {type(feature).__name__}")
        self.feature = feature
        self.policy = str(policy).lower()
        if self.policy not in GPU_POLICIES:
            raise GraphfeedError(
                f"unknown GPU cache policy {policy!r}; valid policies: {', '.join(GPU_POLICIES)}")
        self._device = torch.device(device)
        self.capacity_bytes = parse_size(capacity_bytes)
        self.capacity = int(min(self.capacity_bytes // max(1, feature.row_nbytes),
                                feature.num_rows))
        if self.capacity >= np.iinfo(np.int32).max:
            raise GraphfeedError(f"GPU cache of {self.capacity} rows is too large (max 2**31 - 2)")
        dev = self._device
        self._rows = torch.empty((self.capacity, *feature.row_shape), dtype=feature.dtype,
                                 device=dev)
        self._slot_of = torch.full((feature.num_rows,), -1, dtype=torch.int32, device=dev)
        self._node_of = torch.full((self.capacity,), -1, dtype=torch.int64, device=dev)
        self._ref = torch.zeros(self.capacity, dtype=torch.bool, device=dev)
        if admit_fraction is not None and self.policy != "clock":
            raise GraphfeedError(f"admit_fraction= is for the 'clock' policy, not {self.policy!r}")
        try:
            frac = float(0.125 if admit_fraction is None else admit_fraction)
        except (TypeError, ValueError):
            frac = float("nan")
        if not 0 < frac <= 1:
            raise GraphfeedError(f"admit_fraction must be in (0, 1], got {admit_fraction!r}")
        self.admit_max = max(1, int(frac * self.capacity))
        # CLOCK: how often each row was missed (saturating at 255, halved now and then)
        self._missed = torch.zeros(feature.num_rows if self.policy == "clock" else 0,
                                   dtype=torch.uint8, device=dev)
        self._counted = 0
        self._size = 0  # slots in use (they fill 0, 1, ... before anything is evicted)
        self._hand = 0
        self._lock = threading.Lock()
        self._source = _uva_source(feature, dev)
        # the counts of reads on the host, plus those of gather-kernel reads, whose misses are
        # counted on the device (read back only when asked: no sync per read)
        self._hits = self._misses = self._bytes = 0
        self._kernel_reads = 0
        self._kernel_misses = torch.zeros(1, dtype=torch.int64, device=dev)
        self._kernel = None  # the gather kernel's module once chosen; False: the torch path
        if self.policy == "degree":
            if degrees is None:
                raise GraphfeedError("GPU cache policy 'degree' needs degrees= (one per row)")
            self._fill(_top_rows(_as_scores(degrees, feature.num_rows, dev), self.capacity))
        elif degrees is not None:
            raise GraphfeedError(f"degrees= is for the 'degree' policy, not {self.policy!r}")

    # -------------------------------------------------------------- Feature
    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def uses_uva(self) -> bool:
        """Whether misses are gathered on the device from the wrapped feature's rows (UVA, or
        the CPU stand-in) rather than through its ``read``."""
        return self._source is not None

    def _counts(self) -> tuple[int, int, int]:
        """``(hits, misses, bytes_moved)``: the host's counts plus the gather kernel's, whose
        misses are read from the device once (not at all when no read took the kernel)."""
        kernel_misses = int(self._kernel_misses.item()) if self._kernel_reads else 0
        return (self._hits + self._kernel_reads - kernel_misses, self._misses + kernel_misses,
                self._bytes + kernel_misses * self.row_nbytes)

    @property
    def hits(self) -> int:
        """Positions of ids served from the GPU rows."""
        return self._counts()[0]

    @property
    def misses(self) -> int:
        """Positions of ids served from the host."""
        return self._counts()[1]

    @property
    def bytes_moved(self) -> int:
        """Bytes read from the host to serve reads and fill the cache."""
        return self._counts()[2]

    @property
    def uses_gather_kernel(self) -> bool:
        """Whether reads go through the one-launch gather kernel (``"degree"`` and
        ``"frequency"`` over a UVA source, where Triton runs): decided at the first read."""
        return bool(self._kernel)

    @property
    def hit_rate(self) -> float:
        return _rate(*self._counts()[:2])

    @property
    def num_cached(self) -> int:
        return self._size

    def stats(self) -> dict:
        """``hits``, ``misses``, ``hit_rate``, ``bytes_moved``, ``cached_rows``, ``capacity``
        (the gather kernel counts misses on the device: reading them waits for the reads
        queued on the calling thread's stream)."""
        hits, misses, moved = self._counts()
        return {"hits": hits, "misses": misses, "hit_rate": _rate(hits, misses),
                "bytes_moved": moved, "cached_rows": self._size, "capacity": self.capacity}

    def reset_stats(self) -> None:
        with self._lock:
            self._hits = self._misses = self._bytes = self._kernel_reads = 0
            self._kernel_misses.zero_()

    def counters(self) -> dict:
        return {**self.feature.counters(), "gpu_cached": self.stats()}

    def reset_counters(self) -> None:
        self.reset_stats()
        self.feature.reset_counters()

    def cached_ids(self) -> torch.Tensor:
        """Sorted ids held right now (on ``device``)."""
        with self._lock:
            ids = self._node_of[: self._size]
            return torch.sort(ids[ids >= 0]).values

    def warm_up(self, id_batches: Iterable) -> int:
        """``"frequency"``: count how often each row is read over ``id_batches`` (no rows are
        read), then fill the cache with the most read rows (ties: lower ids). Returns the
        number of ids counted."""
        if self.policy != "frequency":
            raise GraphfeedError(f"warm_up is for the 'frequency' policy, not {self.policy!r}")
        n = self.num_rows
        counts = torch.zeros(n, dtype=torch.int64, device=self._device)
        seen = 0
        for ids in id_batches:
            ids = as_id_tensor(ids)
            check_id_range(ids, n, what=f"{self.kind} feature of {n} rows")
            counts += torch.bincount(ids.to(self._device), minlength=n)
            seen += int(ids.numel())
        with self._lock:
            self._clear()
            self._fill(_top_rows(counts, self.capacity))
        return seen

    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor],
              executor: Optional[Executor]) -> torch.Tensor:
        dev = self._device
        ids = ids.to(dev)
        n = int(ids.shape[0])
        if out is None:
            out = torch.empty((n, *self.row_shape), dtype=self.dtype, device=dev)
        if n == 0:
            return out
        with self._lock:
            if self._gather_kernel() is None or not self._kernel_gather(ids, out):
                self._torch_read(ids, out, executor)
        return out

    def _torch_read(self, ids: torch.Tensor, out: torch.Tensor,
                    executor: Optional[Executor]) -> None:
        """A read with torch ops: hits and misses split on the host, CLOCK's admission."""
        slots = self._slot_of[ids]
        hit = slots >= 0
        hit_pos = torch.nonzero(hit).squeeze(1)
        miss_pos = torch.nonzero(~hit).squeeze(1)
        hit_slots = slots[hit_pos].long()
        _put(out, hit_pos, self._rows[hit_slots])
        if self.policy == "clock":
            self._ref[hit_slots] = True
        self._hits += int(hit_pos.numel())
        self._misses += int(miss_pos.numel())
        if miss_pos.numel() == 0:
            return
        if self.policy != "clock":  # nothing to admit: no need for the distinct ids
            _put(out, miss_pos, self._fetch(ids[miss_pos], executor))
            return
        uniq, inv = torch.unique(ids[miss_pos], return_inverse=True)
        rows = self._fetch(uniq, executor)
        _put(out, miss_pos, rows[inv])
        self._admit(uniq, rows)

    def close(self) -> None:
        """Close the wrapped feature (the GPU rows stay until the cache is dropped)."""
        super().close()

    def __repr__(self) -> str:
        return (f"GPUCachedFeature({self.feature!r}, capacity={self.capacity} rows, "
                f"policy={self.policy!r}, device={self._device}, hit_rate={self.hit_rate:.3f})")

    # -------------------------------------------------------------- internals
    def _gather_kernel(self):
        """The gather kernel's module when reads can take it, else ``None``: a static policy
        over a UVA source (CLOCK admits misses, which needs their ids on the host), on a CUDA
        device with Triton (or CPU tensors under Triton's interpreter, as in the tests).
        Chosen once; a kernel that fails to compile or launch is reported once and the torch
        path used from then on (``out`` is contiguous: ``Feature.read`` refuses others)."""
        if self._kernel is None:
            self._kernel = False
            cpu = self._device.type == "cpu"
            if (self._source is not None and self.policy != "clock"
                    and not (cpu and os.environ.get("TRITON_INTERPRET") != "1")):
                try:
                    from . import _gpu_cache_kernels as K
                except ImportError:  # no triton: the torch path
                    K = None
                if K is not None and (self._device.type == "cuda" or (cpu and K.INTERPRETED)):
                    self._kernel = K
        return self._kernel or None

    def _kernel_gather(self, ids: torch.Tensor, out: torch.Tensor) -> bool:
        """One launch: every position's row from its slot or through UVA, the misses counted
        on the device. ``False`` (after one warning) when the kernel fails to compile or
        launch: the caller reads with torch ops, as every later read will."""
        K = self._kernel
        n = int(ids.shape[0])
        ids = ids.to(torch.int64).contiguous()
        cache, source, dest = (tensor_words(self._rows), tensor_words(self._source),
                               tensor_words(out))
        words = int(dest.shape[1])
        block_r, block_w = K.blocks(words)
        grid = ((n + block_r - 1) // block_r, (words + block_w - 1) // block_w)
        try:
            K.cached_gather_kernel[grid](ids, self._slot_of, cache, source, dest, n, words,
                                         self._kernel_misses, BLOCK_R=block_r, BLOCK_W=block_w)
        except Exception as e:  # noqa: BLE001 - a compiler/driver failure: the torch path
            import warnings

            self._kernel = False
            warnings.warn(f"graphfeed: GPUCachedFeature's gather kernel does not work here "
                          f"({type(e).__name__}: {str(e)[:200]}); reading with torch ops",
                          RuntimeWarning, stacklevel=5)
            return False
        self._kernel_reads += n
        return True

    def _fetch(self, ids: torch.Tensor, executor: Optional[Executor] = None) -> torch.Tensor:
        """Rows of ``ids`` (on the device) from the host, on the device."""
        self._bytes += int(ids.numel()) * self.row_nbytes
        if self._source is not None:
            return torch.index_select(self._source, 0, ids)
        rows = self.feature.read(ids.cpu(), check=False, executor=executor)
        return rows.to(self._device, non_blocking=rows.is_pinned())

    def _clear(self) -> None:
        self._slot_of.fill_(-1)
        self._node_of.fill_(-1)
        self._ref.zero_()
        self._missed.zero_()
        self._size = self._hand = self._counted = 0

    def _fill(self, ids: torch.Tensor) -> None:
        """Put rows ``ids`` (distinct, at most the capacity) into slots ``0..len(ids)-1``."""
        m = int(ids.numel())
        step = max(1, _FILL_CHUNK_BYTES // max(1, self.row_nbytes))
        for lo in range(0, m, step):
            self._rows[lo: lo + step] = self._fetch(ids[lo: lo + step])
        slots = torch.arange(m, device=self._device)
        self._node_of[:m] = ids
        self._slot_of[ids] = slots.to(torch.int32)
        self._size = m

    def _admit(self, ids: torch.Tensor, rows: torch.Tensor) -> None:
        """CLOCK admission of distinct missed ``ids`` (sorted) with their ``rows`` (both on the
        device): at most ``admit_max`` of them, those missed most often before (ties: the lower
        id), into free slots first, then victims of the hand."""
        before = self._missed[ids]
        self._missed[ids] = torch.where(before < 255, before + 1, before)
        self._counted += int(ids.numel())
        if self._counted >= AGE_AFTER * self.capacity:  # the counts follow what is hot now
            self._missed.bitwise_right_shift_(1)
            self._counted = 0
        m = min(int(ids.numel()), self.admit_max, self.capacity)
        if m == 0:
            return
        if m < ids.numel():
            top = torch.argsort(before.to(torch.int16), descending=True, stable=True)[:m]
            ids, rows = ids[top], rows[top]
        held = self._size
        take = min(m, self.capacity - held)
        slots = torch.arange(held, held + take, device=self._device)
        if m > take:  # victims among the slots held before this batch (m - take <= held)
            victims = self._clock_victims(m - take, held)
            self._slot_of[self._node_of[victims]] = -1
            slots = torch.cat([slots, victims])
        self._size = held + take
        self._node_of[slots] = ids
        self._slot_of[ids] = slots.to(torch.int32)
        self._ref[slots] = False
        self._rows[slots] = rows

    def _clock_victims(self, k: int, ring: int) -> torch.Tensor:
        """The next ``k`` slots CLOCK evicts among slots ``0..ring-1`` (``k <= ring``), moving the
        hand and clearing the reference bits it passes, as ``k`` single evictions would, except
        that a slot refilled by this batch is not taken again by it (when a full turn finds
        fewer than ``k`` clear bits, the second turn takes the slots that had theirs set)."""
        cap = ring
        order = (self._hand % cap + torch.arange(cap, device=self._device)) % cap
        ref = self._ref[order]
        clear = torch.nonzero(~ref).squeeze(1)
        if clear.numel() >= k:
            passed = int(clear[k - 1]) + 1
            chosen = clear[:k]
            self._ref[order[:passed]] = False
        else:  # a full turn clears every bit; the second turn takes slots in hand order
            second = torch.nonzero(ref).squeeze(1)[: k - clear.numel()]
            passed = int(second[-1]) + 1
            chosen = torch.cat([clear, second])
            self._ref[:cap] = False
        self._hand = (self._hand % cap + passed) % cap
        return order[chosen]


def _rate(hits: int, misses: int) -> float:
    return hits / (hits + misses) if hits + misses else 0.0


def _put(out: torch.Tensor, pos: torch.Tensor, rows: torch.Tensor) -> None:
    if pos.numel():
        out.index_copy_(0, pos, rows)


def _as_scores(degrees, num_rows: int, device: torch.device) -> torch.Tensor:
    t = degrees if isinstance(degrees, torch.Tensor) else torch.as_tensor(np.asarray(degrees))
    if t.dim() != 1 or t.shape[0] != num_rows:
        raise GraphfeedError(
            f"degrees must have one entry per row ({num_rows}), got shape {tuple(t.shape)}")
    if t.dtype.is_complex or t.dtype == torch.bool:
        raise GraphfeedError(f"degrees must be real numbers, got dtype {t.dtype}")
    return t.to(device)


def _top_rows(scores: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` ids with the highest scores (ties: lower ids first)."""
    order = torch.sort(scores, descending=True, stable=True).indices
    return order[: check_int("capacity", k, 0)]


def _uva_source(feature: Feature, device: torch.device) -> Optional[torch.Tensor]:
    """A tensor of all of ``feature``'s rows that kernels on ``device`` can gather from: the
    rows themselves when they are on ``device`` (a UVA view placed earlier, or CPU rows for a
    CPU device), a UVA view when they are pinned host memory, else ``None``."""
    from .memory import InMemoryFeature
    from .pinned import PinnedFeature

    if isinstance(feature, PinnedFeature):
        data = feature.data
    elif isinstance(feature, InMemoryFeature):
        data = feature.data
    else:
        return None
    if data is None or not data.is_contiguous():
        return None
    if data.device.type == device.type and (data.device.index or 0) == (device.index or 0):
        return data
    if device.type == "cuda" and data.device.type == "cpu" and data.is_pinned():
        from .._pinning import uva_tensor

        return uva_tensor(data, device)
    return None
