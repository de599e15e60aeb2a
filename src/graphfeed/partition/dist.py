"""Sampling and feature reads over a partitioned graph, one part per process, on
torch.distributed.

Each process holds one part (``book.load_part``): the in-edges of the nodes it owns (global
source ids) and their feature rows. Per sampling layer, a process sends each frontier node to
its owner, the owners sample them (keyed by the node's dataset id, ``keyed.sample_keyed``) and
send the sampled sources back; the input nodes' rows are fetched the same way. Each exchange is
``all_to_all_single`` calls (the sizes, then the payload), on a process group of its own, so a
loader thread can exchange batch i+1 while the training thread all-reduces batch i's gradients
on the default group. gloo implements ``all_to_all_single`` on CPU tensors, NCCL on CUDA
tensors; nothing is emulated. The group is gloo for CPU ranks and NCCL for GPU ranks
(``Exchange(device=...)``, :func:`graphfeed.distributed.world.exchange_backend`).

Every process must make the same calls in the same order (collectives): sample one batch per
step on every rank, with the same fanouts, and read the same features in the same order. The
batch rank ``r`` of ``W`` gets as its batch ``i`` equals ``KeyedNeighborSampler``'s batch
``i * W + r`` over the whole graph for the same seeds and epoch, in the partition's relabelled ids (``book.orig_ids()`` maps them back).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from .._checks import check_int
from .._dtypes import BITS_DTYPES
from ..errors import GraphfeedError
from ..features._rows import array_words, numpy_rows, torch_dtype
from ..features.base import Feature
from ..features.memory import to_tensor
from .book import Part
from .keyed import KeyedSamplerBase, sample_keyed


@dataclass
class ExchangeStats:
    """What one process's exchanges cost: ``calls`` (all_to_all_single calls), ``bytes_sent`` /
    ``bytes_received`` (to and from OTHER processes; its own share is a local copy), ``seconds``
    (wall time inside the calls, waiting for the slowest peer included)."""

    calls: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict:
        return dict(calls=self.calls, bytes_sent=self.bytes_sent,
                    bytes_received=self.bytes_received, seconds=round(self.seconds, 6))


class Exchange:
    """Variable-size all-to-all of numpy arrays over a process group of its own.

    ``device`` / ``backend``: where the ranks train and the run's backend choice; they pick
    the group's backend and where the exchanged tensors live
    (:func:`graphfeed.distributed.world.exchange_backend`): gloo over CPU tensors for CPU
    ranks (the default), NCCL over tensors on the rank's GPU for GPU ranks. ``group``: a
    torch.distributed group to use instead (its backend then decides). Without either, the
    constructor makes a new group over every rank, so it is a collective call; one group for
    every exchange of the run, apart from the default group's DDP all-reduce so that both can
    be in flight at once. Without an initialised process group it is a one-process exchange (a
    one-part partition, tests): every row stays here. Calls from several threads are
    serialised by a lock (they must still come in the same order on every rank).

    The arrays come and go as numpy on the host (the sampler's kernels and the parts' rows
    are there): on NCCL each call copies what it sends to the GPU once and what it received
    back once; on gloo the tensors wrap the arrays, no copy."""

    def __init__(self, group=None, *, timeout_s: Optional[float] = None, device=None,
                 backend: Optional[str] = None):
        import datetime

        import torch.distributed as dist

        from ..distributed.world import exchange_backend

        self.group = group
        self.rank, self.size = 0, 1
        if group is not None and backend is None:
            backend = dist.get_backend(group)
        self.backend, self.device = exchange_backend(device, backend)
        if group is not None or (dist.is_available() and dist.is_initialized()):
            if group is None:
                kw = {} if timeout_s is None else {"timeout": datetime.timedelta(seconds=timeout_s)}
                self.group = dist.new_group(backend=self.backend, **kw)
            self.rank = dist.get_rank(self.group)
            self.size = dist.get_world_size(self.group)
        # tensors staged on the exchange's device (CUDA under NCCL), else wrapping the arrays
        self._staged = self.device.type != "cpu"
        self.stats = ExchangeStats()
        self._lock = threading.Lock()

    def _a2a(self, out: np.ndarray, send: np.ndarray, out_splits=None, in_splits=None) -> None:
        """``all_to_all_single`` of numpy arrays on the group's device, received into ``out``."""
        import contextlib

        import torch.distributed as dist

        out, send = _on_the_wire(out), _on_the_wire(send)
        if not self._staged:  # gloo: the tensors share the arrays' memory
            dist.all_to_all_single(torch.from_numpy(out), torch.from_numpy(send), out_splits,
                                   in_splits, group=self.group)
            return
        # NCCL: one copy to the GPU, one back; the device made current for a loader thread too
        ctx = torch.cuda.device(self.device) if self.device.type == "cuda" else \
            contextlib.nullcontext()
        with ctx:
            got = torch.empty(out.shape, dtype=torch.from_numpy(out[:0]).dtype,
                              device=self.device)
            dist.all_to_all_single(got, torch.from_numpy(send).to(self.device), out_splits,
                                   in_splits, group=self.group)
            torch.from_numpy(out).copy_(got)  # into the array; waits for the collective

    def alltoallv(self, send: np.ndarray, send_counts: np.ndarray,
                  recv_counts: Optional[np.ndarray] = None, *, out=None):
        """Send ``send[segment j]`` to rank ``j`` (segments of ``send_counts[j]`` rows, in rank
        order) and return ``(received rows, recv_counts)``, the rows from rank ``j`` in segment
        ``j``. ``recv_counts`` when the caller knows them (saves one call). ``out(rows)``: a
        function giving the receive array of ``rows`` rows (a caller's reused buffer), else a
        new one."""
        send = np.ascontiguousarray(send)
        send_counts = np.asarray(send_counts, dtype=np.int64)
        if self.group is None:  # one process: everything stays here
            return send.copy(), send_counts.copy()
        with self._lock:
            t0 = time.perf_counter()
            if recv_counts is None:
                rc = np.empty(self.size, np.int64)
                self._a2a(rc, send_counts)
                self.stats.calls += 1
                self.stats.bytes_sent += 8 * (self.size - 1)
                self.stats.bytes_received += 8 * (self.size - 1)
                recv_counts = rc
            recv_counts = np.asarray(recv_counts, dtype=np.int64)
            n = int(recv_counts.sum())
            out = np.empty((n, *send.shape[1:]), dtype=send.dtype) if out is None else out(n)
            assert out.shape == (n, *send.shape[1:]) and out.dtype == send.dtype
            self._a2a(out, send, recv_counts.tolist(), send_counts.tolist())
            row = send.dtype.itemsize * int(np.prod(send.shape[1:], dtype=np.int64))
            self.stats.calls += 1
            self.stats.bytes_sent += row * int(send_counts.sum() - send_counts[self.rank])
            self.stats.bytes_received += row * int(recv_counts.sum() - recv_counts[self.rank])
            self.stats.seconds += time.perf_counter() - t0
        return out, recv_counts


#: dtypes every exchange backend carries as they are (gloo has no 16-bit integers, for one)
_WIRE_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int8, np.uint8,
                                                np.int32, np.int64))


def _on_the_wire(a: np.ndarray) -> np.ndarray:
    """``a`` (C-contiguous) as rows of a dtype gloo and NCCL both carry, sharing its memory:
    itself, or its rows' words (:func:`~graphfeed.features._rows.array_words`) as signed int64
    or int32, else as bytes (bfloat16 rows are uint16 bits, and gloo has no 16-bit integers).
    Row ``i`` stays row ``i``, so the row splits of the all-to-all hold."""
    if a.dtype in _WIRE_DTYPES:
        return a
    w = array_words(a)
    return w.view(np.dtype(f"i{w.itemsize}")) if w.itemsize >= 4 else w.view(np.uint8)


def _group_by_owner(offsets: np.ndarray, ids: np.ndarray, ex: "Exchange", per_part: int):
    """``(order, counts)``: ``ids[order]`` grouped by owner (stable); ``counts[r]`` ids sent to
    rank ``r``. With ``per_part`` ranks per part (several ranks of a machine sharing its part),
    part ``k``'s ids go to its rank of the same local index, ``k * per_part + rank % per_part``
    (a monotone map, so grouping by part groups by rank)."""
    parts = offsets.shape[0] - 1
    owner = np.searchsorted(offsets, ids, side="right") - 1
    order = np.argsort(owner, kind="stable")
    counts = np.zeros(ex.size, np.int64)
    counts[np.arange(parts) * per_part + ex.rank % per_part] = np.bincount(owner, minlength=parts)
    return order, counts


def ranks_per_part(part: Part, exchange: "Exchange") -> int:
    """How many ranks share each part (``world / parts``); checks that ``part`` is this rank's:
    rank ``r`` holds part ``r // ranks_per_part``."""
    parts = part.book.num_parts
    if exchange.size % parts:
        raise GraphfeedError(f"{part.book.path}: {parts} parts need a multiple of {parts} "
                             f"processes, got {exchange.size}")
    g = exchange.size // parts
    if exchange.rank // g != part.index:
        raise GraphfeedError(f"rank {exchange.rank} ({g} per part) must hold part "
                             f"{exchange.rank // g}, got part {part.index}")
    return g


class DistNeighborSampler(KeyedSamplerBase):
    """Uniform neighbour sampling of a partitioned graph, this process holding ``part``.

    ``sample`` is collective: every rank calls it once per step (its own seeds, possibly empty;
    ids are the partition's global ids). Rank ``r`` of ``W`` keys batch ``i`` as the whole
    graph's batch ``i * W + r``. Per layer four ``all_to_all_single`` calls (request
    sizes with the batch's layer key, request ids, per-destination counts, sampled sources);
    the owner samples each request with its sender's key; randomness is keyed by the
    destinations' dataset ids, so the batch equals ``KeyedNeighborSampler`` on the whole graph
    (mapped through ``book.orig_ids()``) for any number of parts.

    Memory: the relabelling map (``node_map``, as ``NeighborSampler``'s) is an int32 array of
    the GLOBAL node count per batch in flight up to 32M global nodes, and a hash table sized by
    the batch above (``"dense"`` / ``"hash"`` force one); the part's CSC is memory-mapped."""

    def __init__(self, part: Part, fanouts: Sequence[int], exchange: Exchange, *,
                 replace: bool = False, seed: int = 0, node_map: str = "auto"):
        self._per_part = ranks_per_part(part, exchange)
        super().__init__(part.book.num_nodes, fanouts, replace=replace, seed=seed,
                         node_map=node_map)
        self.part = part
        self.exchange = exchange
        self._offsets = np.asarray(part.book.offsets, dtype=np.int64)
        self._indptr = np.asarray(part.indptr)
        self._indices = np.asarray(part.indices)
        self._orig = np.asarray(part.orig_ids, dtype=np.int64)

    def with_fanouts(self, fanouts: Sequence[int]) -> "DistNeighborSampler":
        return DistNeighborSampler(self.part, fanouts, self.exchange, replace=self.replace,
                                   seed=self.seed, node_map=self.node_map)

    def _key_index(self, batch_index: int) -> int:
        # ranks sample different batches at the same step: key them apart
        return int(batch_index) * self.exchange.size + self.exchange.rank

    def _layer_edges(self, dst, fanout, key):
        from . import _kernels as K

        ex = self.exchange
        order, counts = _group_by_owner(self._offsets, dst, ex, self._per_part)
        # each request carries its batch's layer key: the ranks sample different batches
        ones = np.ones(ex.size, np.int64)
        header = np.stack([counts, np.full(ex.size, np.uint64(key).view(np.int64))], axis=1)
        heads, _ = ex.alltoallv(header, ones, recv_counts=ones)
        asked_counts = np.ascontiguousarray(heads[:, 0])
        asked, _ = ex.alltoallv(dst[order], counts, recv_counts=asked_counts)
        local = asked - self.part.lo
        bounds = np.concatenate([[0], np.cumsum(asked_counts)])
        seg_offs, seg_rows, total = [np.zeros(1, np.int64)], [], 0
        for j in range(ex.size):
            a, b = int(bounds[j]), int(bounds[j + 1])
            o, r = sample_keyed(self._indptr, self._indices, local[a:b], self._orig[local[a:b]],
                                fanout, self.replace, np.int64(heads[j, 1]).view(np.uint64))
            seg_offs.append(o[1:] + total)
            seg_rows.append(r)
            total += int(o[-1])
        offs = np.concatenate(seg_offs)
        rows = np.concatenate(seg_rows)
        per_dst = np.diff(offs)
        # replies: per destination counts (segments as the requests), then the sources
        got_per_dst, _ = ex.alltoallv(per_dst, asked_counts, recv_counts=counts)
        reply_counts = offs[bounds[1:]] - offs[bounds[:-1]]
        seg = np.concatenate([[0], np.cumsum(counts)])
        grouped_off = np.concatenate([[0], np.cumsum(got_per_dst)])
        got_counts = grouped_off[seg[1:]] - grouped_off[seg[:-1]]
        got_rows, _ = ex.alltoallv(rows, reply_counts, recv_counts=got_counts)
        dst_counts = np.empty(dst.shape[0], np.int64)
        dst_counts[order] = got_per_dst
        dst_off = np.concatenate([[0], np.cumsum(dst_counts)]).astype(np.int64)
        out = np.empty(int(dst_off[-1]), np.int64)
        K.scatter_segments(got_rows, grouped_off.astype(np.int64), order.astype(np.int64),
                           dst_off, out)
        return dst_off, out

    def __repr__(self) -> str:
        return (f"DistNeighborSampler(part={self.part.index}/{self.part.book.num_parts}, "
                f"fanouts={self.fanouts}, replace={self.replace}, seed={self.seed})")


class RequestCounts:
    """How often each remote id was requested, in memory bounded by the DISTINCT ids requested
    (a counter over every global node was 4 B per node on every rank: 2 GB at 500M nodes, plus
    an int64 argsort of it, 10 GB, when the cache was built).

    ``add`` appends a read's ids to a log; once the log holds more ids than are counted (and at
    least ``fold_at``), it is folded into ``(ids, counts)``: sorted by id, unique, counts summed.
    Each id is sorted O(log) times overall (the log grows with the counted ids), and the memory
    is a few int64 arrays of at most ``distinct + log`` entries, never the global node count."""

    def __init__(self, fold_at: int = 1 << 20):
        self.fold_at = check_int("fold_at", fold_at, 1)
        self._ids = np.empty(0, np.int64)
        self._counts = np.empty(0, np.int64)
        self._log: list = []
        self._logged = 0

    def add(self, ids: np.ndarray) -> None:
        if not ids.shape[0]:
            return
        self._log.append(np.array(ids, dtype=np.int64))  # a copy: the caller's buffer changes
        self._logged += int(ids.shape[0])
        if self._logged >= max(self.fold_at, self._ids.shape[0]):
            self._fold()

    def _fold(self) -> None:
        if not self._log:
            return
        new, c = np.unique(np.concatenate(self._log), return_counts=True)
        self._log, self._logged = [], 0
        if self._ids.shape[0]:
            ids = np.concatenate([self._ids, new])
            counts = np.concatenate([self._counts, c.astype(np.int64)])
            order = np.argsort(ids, kind="stable")  # two sorted runs: a merge
            ids, counts = ids[order], counts[order]
            first = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]]))
            self._ids, self._counts = ids[first], np.add.reduceat(counts, first)
        else:
            self._ids, self._counts = new, c.astype(np.int64)

    def totals(self) -> tuple:
        """``(ids, counts)``: every id requested so far, increasing, and how often."""
        self._fold()
        return self._ids, self._counts

    @property
    def distinct(self) -> int:
        return int(self.totals()[0].shape[0])

    def top(self, k: int) -> np.ndarray:
        """The ``k`` ids requested most often (ties: the lower id), increasing; fewer when fewer
        were requested. A threshold by ``np.partition`` (O(distinct)), not a full sort: the ids
        counted more often than the ``k``-th largest count, then those counted exactly as
        often in increasing id until there are ``k``, which is the order a stable descending
        sort by count would give."""
        ids, counts = self.totals()
        d = ids.shape[0]
        if k <= 0:
            return np.empty(0, np.int64)
        if k >= d:
            return ids.copy()
        kth = counts[np.argpartition(counts, d - k)[d - k]]  # the k-th largest count
        above = counts > kth
        tied = np.flatnonzero(counts == kth)[:k - int(np.count_nonzero(above))]
        above[tied] = True
        out = ids[above]
        assert out.shape[0] == k
        return out

    def clear(self) -> None:
        self._ids = np.empty(0, np.int64)
        self._counts = np.empty(0, np.int64)
        self._log, self._logged = [], 0


@dataclass
class CacheStats:
    """Remote rows looked up in the cache (``lookups``) and found there (``hits``)."""

    lookups: int = 0
    hits: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0

    def to_json(self) -> dict:
        return dict(lookups=self.lookups, hits=self.hits, hit_rate=round(self.hit_rate, 4))


class DistFeature(Feature):
    """Feature ``name`` of a partitioned dataset, read by global id from any process.

    ``read`` is collective (every rank reads once per step, in the same order): rows this part
    owns are copied locally, the others requested from their owners with three
    ``all_to_all_single`` calls (sizes, ids, rows back), except rows held by the cache
    of hot remote rows (:meth:`build_cache`). Counting the remote ids it is asked for
    (``count=True``, the default) is what :meth:`build_cache` ranks the rows by."""

    kind = "partitioned"

    def __init__(self, part: Part, name: str, exchange: Exchange, *, count: bool = True):
        if name not in part.features:
            raise GraphfeedError(f"{part.book.path}: no feature {name!r}; the partition holds "
                                 f"{sorted(part.features)}")
        self.part = part
        self.name = name
        self.exchange = exchange
        self._per_part = ranks_per_part(part, exchange)
        self._rows = part.features[name]
        self._words = array_words(self._rows)  # the rows as machine words, for the copy kernels
        self._offsets = np.asarray(part.book.offsets, dtype=np.int64)
        # bfloat16 rows are stored as uint16 bits, as in a dataset; read back as bfloat16
        named = str(part.book.features.get(name, {}).get("dtype", self._rows.dtype))
        self._as = named if named in BITS_DTYPES else None
        self._dtype = torch_dtype(self._rows.dtype, source=f"{part.book.path} feature {name!r}",
                                  as_dtype=self._as)
        # how often each remote id was asked for: sized by the ids asked for, not the graph
        self._requests = RequestCounts() if count else None
        self._cache_ids = np.empty(0, np.int64)
        self._cache_rows = np.empty((0, *self._rows.shape[1:]), self._rows.dtype)
        self.cache_stats = CacheStats()
        # per-thread scratch rows reused across reads (a fresh 30-50 MB array per batch costs
        # its page faults: a third of a rank's feature time on medium)
        self._local = threading.local()

    def _scratch(self, name: str, rows: int) -> np.ndarray:
        """``rows`` rows of this thread's reused buffer ``name`` (grown by a quarter when
        short). Valid until the next read on this thread."""
        bufs = self._local.__dict__.setdefault("bufs", {})
        b = bufs.get(name)
        if b is None or b.shape[0] < rows:
            b = bufs[name] = np.empty((rows + rows // 4, *self._rows.shape[1:]),
                                      self._rows.dtype)
        return b[:rows]

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.part.book.num_nodes, *self._rows.shape[1:])

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def cache_rows(self) -> int:
        return int(self._cache_ids.shape[0])

    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor],
              executor: Optional[Executor]) -> torch.Tensor:
        from ..features._gather import copy_rows

        ids_np = np.ascontiguousarray(ids.numpy(), dtype=np.int64)
        res = np.empty((ids_np.shape[0], *self._rows.shape[1:]), self._rows.dtype) \
            if out is None else numpy_rows(out)[0]  # bfloat16: a view of its bits
        res_words = array_words(res)
        lo, hi = self.part.lo, self.part.hi
        mine = (ids_np >= lo) & (ids_np < hi)
        own = np.flatnonzero(mine)
        # own rows straight from the part's map into their places (the prefetching copy: a
        # numpy fancy index of a memory map was most of a rank's time)
        copy_rows(self._words, ids_np[own] - lo, res_words, own, 0, own.shape[0])
        remote = np.flatnonzero(~mine)
        rids = ids_np[remote]
        if self._requests is not None:
            self._requests.add(rids)
        if self._cache_ids.shape[0] and rids.shape[0]:
            pos = np.minimum(np.searchsorted(self._cache_ids, rids), self._cache_ids.shape[0] - 1)
            hit = self._cache_ids[pos] == rids
            at = remote[hit]
            copy_rows(array_words(self._cache_rows), pos[hit], res_words, at, 0, at.shape[0])
            self.cache_stats.hits += int(hit.sum())
            remote, rids = remote[~hit], rids[~hit]
        self.cache_stats.lookups += int(ids_np.shape[0] - mine.sum())
        got, order = self._fetch(rids)
        # received row k is that of rids[order[k]]: straight into its place in the result
        at = np.ascontiguousarray(remote[order], dtype=np.int64)
        copy_rows(array_words(got), np.arange(got.shape[0], dtype=np.int64), res_words, at,
                  0, got.shape[0])
        return to_tensor(res, self._as) if out is None else out

    def _fetch(self, rids: np.ndarray) -> tuple:
        """Rows of remote ids ``rids`` from their owners (collective): ``(rows, order)``, row
        ``k`` being that of ``rids[order[k]]`` (grouped by owner, as they arrive), in a scratch
        buffer valid until the next read on this thread."""
        from ..features._gather import gather_rows

        ex = self.exchange
        order, counts = _group_by_owner(self._offsets, rids, ex, self._per_part)
        asked, asked_counts = ex.alltoallv(rids[order], counts)
        # the rows others asked for, gathered from the part's map by the prefetching kernel
        local = np.ascontiguousarray(asked - self.part.lo, dtype=np.int64)
        send = self._scratch("send", local.shape[0])
        gather_rows(self._words, local, array_words(send), 0, local.shape[0])
        rows, _ = ex.alltoallv(send, asked_counts, recv_counts=counts,
                               out=lambda n: self._scratch("recv", n))
        return rows, order

    def build_cache(self, capacity_rows: int) -> int:
        """Keep the ``capacity_rows`` remote rows read most often so far (ties: lower id) in a
        local cache; fetch them now (collective) and reset the counts. Returns the rows cached.
        ``0`` empties the cache. Memory: the counts of the remote ids requested since the last
        build (:class:`RequestCounts`), then the rows cached; nothing per global node."""
        capacity_rows = check_int("capacity_rows", capacity_rows, 0)
        if self._requests is None:
            raise GraphfeedError("build_cache ranks rows by sampled frequency: make the "
                                 "feature with count=True")
        top = self._requests.top(capacity_rows)
        self._cache_ids = np.empty(0, np.int64)  # fetch everything, not from the old cache
        rows, order = self._fetch(top)
        cache = np.empty((top.shape[0], *self._rows.shape[1:]), self._rows.dtype)
        cache[order] = rows
        self._cache_rows = cache
        self._cache_ids = top
        self._requests.clear()
        self.cache_stats = CacheStats()
        return int(top.shape[0])

    def __repr__(self) -> str:
        return (f"DistFeature({self.name!r}, part={self.part.index}/{self.part.book.num_parts}, "
                f"shape={self.shape}, cache_rows={self.cache_rows})")
