"""Direct reads at the drive's queue depth: io_uring through raw syscalls, or a pool of threads.

:class:`DiskFeature` (``direct_io=True``) plans a batch as a list of reads (file offset,
length, and the rows each read holds: :func:`graphfeed.features.disk.coalesce_blocks`) and hands
it to an engine from this module, which keeps ``queue_depth`` reads in flight until the batch is
done and copies each read's rows to their places as it completes:

- :class:`Ring` (engine ``"uring"``): one io_uring instance, set up with ``io_uring_setup``
  (syscall 425), its SQ/CQ rings and SQE array mmapped and viewed as numpy arrays, the file
  registered (``io_uring_register``, 427). The whole batch runs in one nogil numba kernel
  (:func:`uring_read`): fill SQEs (``IORING_OP_READ``), ``io_uring_enter`` (426) to submit them and
  wait for at least one completion, reap the CQEs, copy the finished reads' rows out, refill.
  One syscall submits every free slot's read and returns whatever has completed (completions
  come in bursts: on the project's VM one ``io_uring_enter`` per ~50 reads), so a read costs
  about 0.3 us of user time and 3-4 us in all, nearly all of it the kernel's filesystem, block
  layer and driver (fio: 5-6 us; ``benchmarks/disk_reads.py`` measures both), and the GIL is
  free for the whole batch.
- :class:`ThreadReads` (engine ``"threads"``, where io_uring is missing or blocked): ``queue_depth``
  threads each run :func:`pread_reads` (a nogil numba loop of blocking ``pread`` calls) over
  every ``queue_depth``-th read, so the drive still sees ``queue_depth`` requests at once.

No dependency beyond numba: libc's ``syscall``, ``pread`` and ``__errno_location`` are called
from the kernels through their addresses (:func:`_call` returns ``-errno`` on failure, read in
the same thread right after the call), and the ring's shared head/tail words are read with
acquire and written with release atomics (:func:`_load_acquire`, :func:`_store_release`), which is
what the kernel's side of the protocol expects on every architecture.

Both engines handle short reads (the rest is read again, from the aligned position at or below
where it stopped: ``O_DIRECT`` needs aligned offsets), the end of the file (the last block is
short; a read is complete once it holds the bytes of its rows), ``EINTR``/``EAGAIN`` (retried),
a file shorter than its header says (:data:`TRUNCATED`) and real errors (``errno``): the first
failure stops new reads, the ones in flight are drained (they write into the engine's buffer),
and the caller raises (``DiskFeature`` a ``DatasetError`` naming the file).

Memory: each engine owns ``queue_depth`` slots of ``slot_size`` bytes (a read's buffer, reused
batch after batch; ``O_DIRECT`` needs them aligned), plus for a ring about 4 KiB of rings per 64
entries in the kernel.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import mmap
import os
import sys
import threading
from concurrent.futures import Executor, wait
from typing import Optional

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .._numba import kernel

__all__ = ["probe", "Ring", "ThreadReads", "uring_read", "pread_reads", "TRUNCATED",
           "aligned_empty", "ALIGN"]

#: O_DIRECT needs offsets, lengths and buffer addresses aligned to the logical block size; 4096
#: covers every common device.
ALIGN = 4096

SYS_IO_URING_SETUP = 425  # the same number on every architecture (the unified syscall table)
SYS_IO_URING_ENTER = 426
SYS_IO_URING_REGISTER = 427
IORING_OFF_SQ_RING = 0
IORING_OFF_CQ_RING = 0x8000000
IORING_OFF_SQES = 0x10000000
IORING_FEAT_SINGLE_MMAP = 1 << 0
IORING_SETUP_CLAMP = 1 << 4
IORING_SETUP_COOP_TASKRUN = 1 << 8  # 5.19: no IPI to interrupt the task for completions
IORING_ENTER_GETEVENTS = 1 << 0
IORING_REGISTER_FILES = 2
IORING_REGISTER_PROBE = 8
IORING_OP_READ = 22  # 5.6
IO_URING_OP_SUPPORTED = 1 << 0
IOSQE_FIXED_FILE = 1 << 0
SQE_WORDS = 8  # 64-byte SQEs as uint64 words
CQE_WORDS = 4  # 16-byte CQEs as uint32 words: user_data (lo, hi), res, flags

EINTR = _errno.EINTR
EAGAIN = _errno.EAGAIN
EBUSY = _errno.EBUSY
#: ``err[0]`` of a read that hit the end of the file before its rows' bytes: the file is shorter
#: than its header says (truncated after it was opened)
TRUNCATED = -1
#: EINTR/EAGAIN/EBUSY in a row (``io_uring_enter`` or reads, no read completing between them)
#: before an engine gives up
MAX_RETRIES = 100_000

# the kernels' parameter block (an int64 array), so the kernel signatures stay short
P_RING_FD = 0
P_FILE_FD = 1  # the registered index (with IOSQE_FIXED_FILE) or the descriptor
P_SQE_FLAGS = 2
P_SQ_HEAD = 3  # word indices into the SQ ring's uint32 view
P_SQ_TAIL = 4
P_SQ_MASK = 5
P_CQ_HEAD = 6  # word indices into the CQ ring's uint32 view
P_CQ_TAIL = 7
P_CQ_MASK = 8
P_CQES = 9
P_SYSCALL = 10  # libc function addresses
P_ERRNO = 11
P_PREAD = 12
P_ARENA = 13  # the slots' base address
P_SLOT_SIZE = 14
P_DEPTH = 15
P_FILE_END = 16  # bytes a read may need at most: the end of the rows in the file
P_DIRECT = 17  # 1: O_DIRECT (a resumed short read starts at an aligned offset)
P_LEN = 18

# err: what failed (for the caller's message)
E_CODE = 0  # 0: none; an errno; or TRUNCATED
E_READ = 1  # the read's index in the plan
E_OFFSET = 2  # the file offset of the request that failed
E_GOT = 3  # bytes the read held when it failed
E_BROKEN = 4  # 1: io_uring_enter itself failed; requests may still be in flight in this ring
E_LEN = 5


# ---------------------------------------------------------------------------------- intrinsics
def _emit_call(context, builder, sig, args, var_arg):
    """Call the C function at ``args[0]`` with int64 ``args[2:]``; where it returns -1, return
    ``-errno`` instead (``args[1]``: ``__errno_location``, called right away in this thread)."""
    i64 = ir.IntType(64)
    vals = [context.cast(builder, v, t, types.int64) for v, t in zip(args, sig.args)]
    fixed = 1 if var_arg else len(vals) - 2
    fnty = ir.FunctionType(i64, [i64] * fixed, var_arg=var_arg)
    result = builder.call(builder.inttoptr(vals[0], fnty.as_pointer()), vals[2:])
    slot = cgutils.alloca_once_value(builder, result)
    with builder.if_then(builder.icmp_signed("==", result, ir.Constant(i64, -1)), likely=False):
        errno_fn = ir.FunctionType(ir.IntType(32).as_pointer(), [])
        err = builder.load(builder.call(builder.inttoptr(vals[1], errno_fn.as_pointer()), []))
        builder.store(builder.neg(builder.sext(err, i64)), slot)
    return builder.load(slot)


def _all_ints(*tys) -> bool:
    return all(isinstance(t, types.Integer) for t in tys)


@intrinsic
def _syscall(typingctx, fn, errno_fn, nr, a0, a1, a2, a3, a4, a5):
    """``syscall(nr, a0, ..., a5)`` through libc's variadic ``syscall`` at address ``fn``:
    the result, or ``-errno``."""
    if not _all_ints(fn, errno_fn, nr, a0, a1, a2, a3, a4, a5):
        return None
    sig = types.int64(fn, errno_fn, nr, a0, a1, a2, a3, a4, a5)
    return sig, lambda c, b, s, a: _emit_call(c, b, s, a, True)


@intrinsic
def _call(typingctx, fn, errno_fn, a0, a1, a2, a3):
    """``fn(a0, a1, a2, a3)`` for a C function of four integer or pointer arguments returning a
    ``long``/``ssize_t`` (``pread``): the result, or ``-errno``."""
    if not _all_ints(fn, errno_fn, a0, a1, a2, a3):
        return None
    sig = types.int64(fn, errno_fn, a0, a1, a2, a3)
    return sig, lambda c, b, s, a: _emit_call(c, b, s, a, False)


def _item_pointer(context, builder, aryty, ary_val, idx_val, idx_ty):
    ary = context.make_array(aryty)(context, builder, ary_val)
    i = context.cast(builder, idx_val, idx_ty, types.intp)
    return cgutils.get_item_pointer(context, builder, aryty, ary, [i], wraparound=False)


@intrinsic
def _load_acquire(typingctx, arr, idx):
    """``arr[idx]`` with an acquire load (a ring tail the kernel publishes with release)."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        ptr = _item_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        return builder.load_atomic(ptr, "acquire", sig.args[0].dtype.bitwidth // 8)

    return arr.dtype(arr, idx), codegen


@intrinsic
def _store_release(typingctx, arr, idx, val):
    """``arr[idx] = val`` with a release store (a ring index the kernel reads with acquire)."""
    if not isinstance(arr, types.Array) or not _all_ints(idx, val):
        return None

    def codegen(context, builder, sig, args):
        ptr = _item_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        v = context.cast(builder, args[2], sig.args[2], sig.args[0].dtype)
        builder.store_atomic(v, ptr, "release", sig.args[0].dtype.bitwidth // 8)
        return context.get_dummy_value()

    return types.void(arr, idx, val), codegen


# ------------------------------------------------------------------------------------- kernels
@kernel
def _copy_read_rows(arena, base, r, first_row, row_off, dst):
    """Copy the rows of finished read ``r`` (``first_row[r]`` up to ``first_row[r + 1]``, at
    ``row_off`` bytes into the read) from its slot at ``arena[base:]`` to their rows of ``dst``."""
    nb = dst.shape[1]
    for k in range(first_row[r], first_row[r + 1]):
        o = base + row_off[k]
        src = arena[o:o + nb]
        out = dst[k]
        for j in range(nb):
            out[j] = src[j]


@kernel
def _needed(p, plan_start, plan_len, r):
    """Bytes read ``r`` must hold: its length, less what lies past the rows' end (the last
    block of the file may be short)."""
    return min(plan_len[r], p[P_FILE_END] - plan_start[r])


@kernel
def _resume_at(p, got):
    """Where a read that holds ``got`` bytes goes on: there, or with ``O_DIRECT`` at the aligned
    offset at or below. A read that then gets no further than ``got`` has met the end of the
    file: a buffered read stops short only there or on a signal (with progress), an
    ``O_DIRECT`` one mid-block only there (its last block is short), so reading that block
    again ends where it ended before."""
    return got - got % ALIGN if p[P_DIRECT] else got


@kernel
def uring_read(p, sq, sqes, cq, plan_start, plan_len, first_row, row_off, dst, arena,
               got, slots, retry, err):
    """Every read of the plan through one io_uring, ``p[P_DEPTH]`` in flight; returns the
    number of requests issued (retries included).

    ``p``: the parameter block (``P_*``); ``sq``/``cq``: the rings as uint32 words; ``sqes``:
    the SQE array as uint64 words. Read ``r`` is ``plan_len[r]`` bytes at file offset
    ``plan_start[r]``, into a free slot of ``arena`` (``p[P_SLOT_SIZE]`` bytes each); when it
    completes, its rows are copied to ``dst`` (:func:`_copy_read_rows`) and its slot is reused.
    Scratch (any contents): ``got`` (one per read: the furthest byte it reached), ``slots``
    and ``retry`` (``p[P_DEPTH]`` each). On failure ``err`` says what (``E_*``); reads in
    flight are drained first, except when ``io_uring_enter`` itself fails (``err[E_BROKEN]``:
    the ring must not be reused). ``MAX_RETRIES`` EINTR/EAGAIN/EBUSY in a row, with no read
    completing between them, are a failure too.
    Cost: one ``io_uring_enter`` per refill (it submits every free slot and returns what has
    completed), a few dozen stores per read, no allocation, no GIL.
    """
    nr = plan_start.shape[0]
    depth = p[P_DEPTH]
    slot_size = p[P_SLOT_SIZE]
    arena_addr = p[P_ARENA]
    sq_mask = p[P_SQ_MASK]
    cq_mask = p[P_CQ_MASK]
    cqes = p[P_CQES]
    w0 = (IORING_OP_READ | (p[P_SQE_FLAGS] << 8)) | ((p[P_FILE_FD] & 0xFFFFFFFF) << 32)
    for s in range(depth):
        slots[s] = s
    nfree = depth
    nretry = 0
    nxt = 0  # position in the interleaved order below
    started = 0
    per = (nr + depth - 1) // depth
    inflight = 0
    issued = 0
    failures = 0
    for i in range(E_LEN):
        err[i] = 0
    tail = np.int64(sq[p[P_SQ_TAIL]])  # only this thread moves the SQ tail
    while True:
        if err[E_CODE] == 0:
            while inflight < depth and (nretry > 0 or started < nr):
                if nretry > 0:
                    nretry -= 1
                    r = retry[nretry] & 0xFFFFFFFF
                    s = retry[nretry] >> 32
                else:
                    # the plan is in ascending offsets; the reads in flight come from ``depth``
                    # interleaved stretches of it (read k*per + j, j = 0, 1, ...), not from one
                    # ascending run: this VM's disk served an ascending run at 0.6x fio's
                    # random-order rate, interleaved stretches at fio's (docs/benchmarks.md)
                    r = nr
                    while r >= nr:
                        r = (nxt % depth) * per + nxt // depth
                        nxt += 1
                    started += 1
                    nfree -= 1
                    s = slots[nfree]
                    got[r] = 0
                at = _resume_at(p, got[r])
                q = (tail & sq_mask) * SQE_WORDS
                sqes[q] = w0
                sqes[q + 1] = plan_start[r] + at
                sqes[q + 2] = arena_addr + s * slot_size + at
                sqes[q + 3] = plan_len[r] - at  # rw_flags (high word) 0
                sqes[q + 4] = r | (s << 32)  # user_data
                sqes[q + 5] = 0
                sqes[q + 6] = 0
                sqes[q + 7] = 0
                tail = (tail + 1) & 0xFFFFFFFF
                inflight += 1
                issued += 1
            _store_release(sq, p[P_SQ_TAIL], tail)
        if inflight == 0:
            break
        pending = (tail - np.int64(_load_acquire(sq, p[P_SQ_HEAD]))) & 0xFFFFFFFF
        ret = _syscall(p[P_SYSCALL], p[P_ERRNO], SYS_IO_URING_ENTER, p[P_RING_FD], pending, 1,
                       IORING_ENTER_GETEVENTS, 0, 0)
        if ret < 0:
            failures += 1
            if (ret != -EINTR and ret != -EAGAIN and ret != -EBUSY) or failures > MAX_RETRIES:
                err[E_CODE] = -ret
                err[E_BROKEN] = 1
                return issued
        head = np.int64(cq[p[P_CQ_HEAD]])  # only this thread moves the CQ head
        ctail = np.int64(_load_acquire(cq, p[P_CQ_TAIL]))
        while head != ctail:
            c = cqes + (head & cq_mask) * CQE_WORDS
            r = np.int64(cq[c])
            s = np.int64(cq[c + 1])
            res = np.int64(np.int32(cq[c + 2]))
            head = (head + 1) & 0xFFFFFFFF
            inflight -= 1
            if err[E_CODE] != 0:
                continue  # draining
            if res < 0:
                failures += 1
                if (res == -EINTR or res == -EAGAIN) and failures <= MAX_RETRIES:
                    retry[nretry] = r | (s << 32)
                    nretry += 1
                else:
                    err[E_CODE] = -res
                    err[E_READ] = r
                    err[E_OFFSET] = plan_start[r] + got[r]
                    err[E_GOT] = got[r]
                continue
            failures = 0
            end = _resume_at(p, got[r]) + res
            if end >= _needed(p, plan_start, plan_len, r):
                _copy_read_rows(arena, s * slot_size, r, first_row, row_off, dst)
                slots[nfree] = s
                nfree += 1
            elif end <= got[r]:  # no further than before: the end of the file
                err[E_CODE] = TRUNCATED
                err[E_READ] = r
                err[E_OFFSET] = plan_start[r] + end
                err[E_GOT] = got[r]
            else:  # short: read the rest
                got[r] = end
                retry[nretry] = r | (s << 32)
                nretry += 1
        _store_release(cq, p[P_CQ_HEAD], head)
    return issued


@kernel
def pread_reads(p, fd, plan_start, plan_len, first_row, row_off, dst, arena, slot, step, err):
    """Reads ``slot``, ``slot + step``, ... of the plan, one blocking ``pread`` at a time into
    slot ``slot`` of ``arena``, each read's rows copied to ``dst`` when it is complete. Returns
    the number of ``pread`` calls; ``err`` as in :func:`uring_read` (this task stops at its
    first failure). Run ``step`` of them on as many threads for a queue depth of ``step``."""
    nr = plan_start.shape[0]
    slot_size = p[P_SLOT_SIZE]
    base = slot * slot_size
    addr = p[P_ARENA] + base
    calls = 0
    failures = 0
    for i in range(E_LEN):
        err[i] = 0
    for r in range(slot, nr, step):
        need = _needed(p, plan_start, plan_len, r)
        got = 0
        while True:
            at = _resume_at(p, got)
            k = _call(p[P_PREAD], p[P_ERRNO], fd, addr + at, plan_len[r] - at, plan_start[r] + at)
            calls += 1
            if k < 0 and (k == -EINTR or k == -EAGAIN) and failures < MAX_RETRIES:
                failures += 1
                continue
            if k >= 0:
                failures = 0
            end = at + k
            if k >= 0 and end >= need:
                break
            if k < 0 or end <= got:
                err[E_CODE] = -k if k < 0 else TRUNCATED
                err[E_READ] = r
                err[E_OFFSET] = plan_start[r] + (at if k < 0 else end)
                err[E_GOT] = got
                return calls
            got = end
        _copy_read_rows(arena, base, r, first_row, row_off, dst)
    return calls


# -------------------------------------------------------------------------------- host side
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _addr(fn) -> int:
    return int(ctypes.cast(fn, ctypes.c_void_p).value)


#: libc's ``syscall``, ``__errno_location`` and ``pread`` (the same in a forked child; found
#: again by a spawned one at import)
LIBC_SYSCALL = _addr(_libc.syscall)
LIBC_ERRNO = _addr(_libc.__errno_location)
LIBC_PREAD = _addr(_libc.pread)


def _sys(nr: int, *args) -> int:
    """A syscall from Python: its result, or ``OSError`` with its errno."""
    ret = _libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a
                                           for a in args])
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


class _SQOffsets(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in
                ("head", "tail", "ring_mask", "ring_entries", "flags", "dropped", "array",
                 "resv1")] + [("user_addr", ctypes.c_uint64)]


class _CQOffsets(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in
                ("head", "tail", "ring_mask", "ring_entries", "overflow", "cqes", "flags",
                 "resv1")] + [("user_addr", ctypes.c_uint64)]


class _Params(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in
                ("sq_entries", "cq_entries", "flags", "sq_thread_cpu", "sq_thread_idle",
                 "features", "wq_fd")] + [("resv", ctypes.c_uint32 * 3),
                                          ("sq_off", _SQOffsets), ("cq_off", _CQOffsets)]


def _setup(entries: int) -> tuple[int, _Params]:
    """``io_uring_setup`` with the cheapest flags this kernel accepts."""
    last = None
    for flags in (IORING_SETUP_CLAMP | IORING_SETUP_COOP_TASKRUN, IORING_SETUP_CLAMP, 0):
        params = _Params()
        params.flags = flags
        try:
            return _sys(SYS_IO_URING_SETUP, int(entries), ctypes.byref(params)), params
        except OSError as e:
            if e.errno != _errno.EINVAL:
                raise
            last = e
    raise last  # type: ignore[misc]


_probe_lock = threading.Lock()
_probed: dict[int, tuple[bool, str]] = {}


def probe() -> tuple[bool, str]:
    """``(available, why)``: whether this process can read through io_uring (a ring can be set
    up and supports ``IORING_OP_READ``), and in words why (not). Probed once per process (a
    forked child probes again: seccomp or a cgroup may differ), about 100 us."""
    pid = os.getpid()
    with _probe_lock:
        if pid not in _probed:
            _probed[pid] = _probe()
        return _probed[pid]


def _probe() -> tuple[bool, str]:
    if not sys.platform.startswith("linux"):
        return False, f"io_uring is Linux-only (this is {sys.platform})"
    if sys.byteorder != "little":
        return False, "the ring kernels pack SQEs little-endian"
    try:
        fd, _ = _setup(2)
    except OSError as e:
        if e.errno == _errno.ENOSYS:
            why = "the kernel has no io_uring (ENOSYS: older than 5.1, or compiled out)"
        elif e.errno == _errno.EPERM:
            why = f"io_uring is not permitted here (EPERM: {_disabled_reason()})"
        else:
            why = f"io_uring_setup failed: [Errno {e.errno}] {e.strerror}"
        return False, why
    try:
        ops = _supported_ops(fd)
    finally:
        os.close(fd)
    if ops is None:
        return False, ("the kernel's io_uring has no opcode probe (older than 5.6: no "
                       "IORING_OP_READ)")
    if IORING_OP_READ not in ops:
        return False, "the kernel's io_uring lacks IORING_OP_READ"
    return True, f"IORING_OP_READ on Linux {os.uname().release}"


def _disabled_reason() -> str:
    try:
        with open("/proc/sys/kernel/io_uring_disabled") as f:
            v = f.read().strip()
    except OSError:
        return "a seccomp filter or a container policy blocks it"
    if v == "2":
        return "/proc/sys/kernel/io_uring_disabled is 2"
    if v == "1":
        return ("/proc/sys/kernel/io_uring_disabled is 1 and this process is not in "
                "kernel.io_uring_group")
    return "a seccomp filter or a container policy blocks it"


def _supported_ops(fd: int) -> Optional[set]:
    n = 256
    buf = (ctypes.c_uint8 * (16 + 8 * n))()
    try:
        _sys(SYS_IO_URING_REGISTER, fd, IORING_REGISTER_PROBE, ctypes.byref(buf), n)
    except OSError:
        return None
    raw = np.frombuffer(buf, dtype=np.uint8)
    ops_len = int(raw[1])
    table = raw[16:16 + 8 * ops_len].reshape(ops_len, 8)
    return {int(op) for op, flags in zip(table[:, 0], table[:, 2])
            if flags & IO_URING_OP_SUPPORTED}


def aligned_empty(nbytes: int, align: int = ALIGN) -> np.ndarray:
    """``nbytes`` uninitialised bytes starting at a multiple of ``align``."""
    raw = np.empty(nbytes + align, dtype=np.uint8)
    shift = (-raw.ctypes.data) % align
    return raw[shift:shift + nbytes]


#: arenas of rings whose ``io_uring_enter`` failed with reads in flight: the kernel may still
#: write into them, so they are never freed
_GRAVEYARD: list = []


class _Engine:
    """What both engines share: ``depth`` slots of ``slot_size`` aligned bytes and the
    parameter block of the kernels."""

    name = ""

    def __init__(self, fd: int, depth: int, slot_size: int, file_end: int, direct: bool):
        assert slot_size % ALIGN == 0 and depth >= 1
        self.pid = os.getpid()
        self.depth = int(depth)
        self.slot_size = int(slot_size)
        self.arena = aligned_empty(self.depth * self.slot_size)
        self.p = np.zeros(P_LEN, dtype=np.int64)
        self.p[P_FILE_FD] = fd
        self.p[P_SYSCALL] = LIBC_SYSCALL
        self.p[P_ERRNO] = LIBC_ERRNO
        self.p[P_PREAD] = LIBC_PREAD
        self.p[P_ARENA] = self.arena.ctypes.data
        self.p[P_SLOT_SIZE] = self.slot_size
        self.p[P_DEPTH] = self.depth
        self.p[P_FILE_END] = int(file_end)
        self.p[P_DIRECT] = int(bool(direct))
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Ring(_Engine):
    """One io_uring of ``depth`` entries over the descriptor ``fd`` (registered as fixed file 0
    where the kernel allows), with ``depth`` read slots. Not thread-safe: one batch at a time
    (``DiskFeature`` keeps a pool, one ring per thread reading at once). ``close()`` unmaps
    the rings and closes the ring's descriptor; a forked child must not use its parent's ring
    (``DiskFeature`` makes its own there)."""

    name = "uring"

    def __init__(self, fd: int, depth: int, slot_size: int, file_end: int, direct: bool):
        super().__init__(fd, depth, slot_size, file_end, direct)
        self.ring_fd, params = _setup(self.depth)
        self._maps: list = []
        try:
            self._map_rings(params)
            self.p[P_RING_FD] = self.ring_fd
            try:
                files = (ctypes.c_int32 * 1)(fd)
                _sys(SYS_IO_URING_REGISTER, self.ring_fd, IORING_REGISTER_FILES,
                     ctypes.byref(files), 1)
                self.p[P_FILE_FD] = 0
                self.p[P_SQE_FLAGS] = IOSQE_FIXED_FILE
            except OSError:
                pass  # unregistered: the kernel looks the descriptor up per read
        except BaseException:
            self.close()
            raise

    def _map_rings(self, params: _Params) -> None:
        so, co = params.sq_off, params.cq_off
        sq_bytes = so.array + params.sq_entries * 4
        cq_bytes = co.cqes + params.cq_entries * CQE_WORDS * 4
        single = bool(params.features & IORING_FEAT_SINGLE_MMAP)
        if single:
            sq_bytes = cq_bytes = max(sq_bytes, cq_bytes)
        sq_map = self._mmap(sq_bytes, IORING_OFF_SQ_RING)
        cq_map = sq_map if single else self._mmap(cq_bytes, IORING_OFF_CQ_RING)
        sqe_map = self._mmap(params.sq_entries * SQE_WORDS * 8, IORING_OFF_SQES)
        self.sq = np.frombuffer(sq_map, dtype=np.uint32)
        self.cq = np.frombuffer(cq_map, dtype=np.uint32)
        self.sqes = np.frombuffer(sqe_map, dtype=np.uint64)
        self.entries = int(params.sq_entries)
        assert self.entries >= self.depth and params.cq_entries >= self.depth
        # SQE i always sits at ring position i: the indirection array is the identity
        self.sq[so.array // 4: so.array // 4 + self.entries] = np.arange(self.entries)
        p = self.p
        p[P_SQ_HEAD], p[P_SQ_TAIL] = so.head // 4, so.tail // 4
        p[P_SQ_MASK] = self.sq[so.ring_mask // 4]
        p[P_CQ_HEAD], p[P_CQ_TAIL] = co.head // 4, co.tail // 4
        p[P_CQ_MASK] = self.cq[co.ring_mask // 4]
        p[P_CQES] = co.cqes // 4

    def _mmap(self, length: int, offset: int) -> mmap.mmap:
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        m = mmap.mmap(self.ring_fd, length, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE,
                      offset=offset)
        self._maps.append(m)
        return m

    def run(self, plan_start, plan_len, first_row, row_off, dst) -> tuple[int, np.ndarray]:
        """Every read of the plan (see :func:`uring_read`); ``(requests issued, err)``."""
        assert not self.closed and self.pid == os.getpid()
        nr = plan_start.shape[0]
        err = np.zeros(E_LEN, dtype=np.int64)
        got = np.empty(nr, dtype=np.int64)
        scratch = np.empty(2 * self.depth, dtype=np.int64)
        issued = uring_read(self.p, self.sq, self.sqes, self.cq, plan_start, plan_len, first_row,
                            row_off, dst, self.arena, got, scratch[:self.depth],
                            scratch[self.depth:], err)
        if err[E_BROKEN]:
            _GRAVEYARD.append(self.arena)
            self.close()
        return int(issued), err

    def __del__(self):
        # a forked child leaves its copy of the parent's ring alone (the number may be reused)
        if getattr(self, "pid", None) == os.getpid() and not getattr(self, "closed", True):
            self.close()

    def close(self) -> None:
        """Unmap the rings and close the ring (idempotent)."""
        super().close()
        self.sq = self.cq = self.sqes = None  # views first: an exported mmap cannot close
        for m in self._maps:
            m.close()
        self._maps = []
        if getattr(self, "ring_fd", -1) >= 0:
            os.close(self.ring_fd)
            self.ring_fd = -1


class ThreadReads(_Engine):
    """The fallback engine: ``depth`` blocking ``pread`` loops at once (:func:`pread_reads`) on
    ``executor`` (a pool of at least ``depth`` threads), so the drive still sees ``depth``
    requests. Each call needs its own ``ThreadReads`` (the slots are per call); a thread's
    switch into the kernel and back costs a few microseconds a read more than a ring."""

    name = "threads"

    def run(self, plan_start, plan_len, first_row, row_off, dst,
            executor: Optional[Executor]) -> tuple[int, np.ndarray]:
        assert not self.closed
        nr = plan_start.shape[0]
        tasks = max(1, min(self.depth, nr))
        errs = np.zeros((tasks, E_LEN), dtype=np.int64)
        fd = int(self.p[P_FILE_FD])

        def task(t: int) -> int:
            return pread_reads(self.p, fd, plan_start, plan_len, first_row, row_off, dst,
                               self.arena, t, tasks, errs[t])

        if tasks == 1 or executor is None:
            calls = sum(task(t) for t in range(tasks))
        else:
            futs = [executor.submit(task, t) for t in range(tasks)]
            wait(futs)  # all of them: they write into the slots and dst
            calls = sum(f.result() for f in futs)
        failed = np.flatnonzero(errs[:, E_CODE])
        return int(calls), (errs[failed[0]] if failed.size else errs[0])
