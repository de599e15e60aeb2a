"""The read engines' kernels against a scripted kernel side.

``uring_read`` and ``pread_reads`` call libc through addresses in their parameter block, so a
test can hand them ctypes callbacks instead: a fake ``io_uring_enter`` that consumes the SQEs
and posts CQEs out of order, with short unaligned reads, ``-EINTR``/``-EAGAIN`` results and
failed enters, on ring indices about to wrap past 2**32; and a fake ``pread`` doing the same.
What a real kernel rarely does on demand is checked here; the real ring is exercised by
``test_disk_direct.py``.
"""

from __future__ import annotations

import ctypes
import errno
import os

import numpy as np
import pytest

from graphfeed.features import _uring as U
from graphfeed.features.disk import coalesce_blocks

ALIGN = U.ALIGN
ENTER = ctypes.CFUNCTYPE(*[ctypes.c_long] * 8)  # long syscall(nr, a0..a5) -> long
PREAD = ctypes.CFUNCTYPE(*[ctypes.c_long] * 5)  # long pread(fd, buf, count, offset)
ERRNO_FN = ctypes.CFUNCTYPE(ctypes.c_void_p)


class Data:
    """A file of ``size`` known bytes and the plan of reads for ``ids`` of ``row_nbytes`` rows."""

    def __init__(self, tmp_path, ids, row_nbytes=300, offset=128, nrows=2000, max_gap=0,
                 max_read=3 * ALIGN):
        self.size = offset + nrows * row_nbytes
        self.bytes = (np.arange(self.size) * 7 % 253).astype(np.uint8)
        self.path = tmp_path / "data.bin"
        self.path.write_bytes(self.bytes.tobytes())
        self.fd = os.open(self.path, os.O_RDONLY)
        self.ids = np.unique(np.asarray(ids, dtype=np.int64))
        m = len(self.ids)
        start, length, off = (np.empty(m, np.int64) for _ in range(3))
        first = np.empty(m + 1, np.int64)
        nr = coalesce_blocks(self.ids, offset, row_nbytes, ALIGN, max_gap, max_read, start,
                             length, first, off)
        self.plan = (start[:nr], length[:nr], first[:nr + 1], off)
        self.row_nbytes, self.offset = row_nbytes, offset
        self.slot_size = max(max_read, (row_nbytes // ALIGN + 2) * ALIGN)
        self.dst = np.zeros((m, row_nbytes), np.uint8)

    def want(self):
        o = self.offset + self.ids[:, None] * self.row_nbytes + np.arange(self.row_nbytes)
        return self.bytes[o]

    def close(self):
        os.close(self.fd)


def _short(chunk: bytes, short: bool, direct: bool, rng) -> bytes:
    """``chunk`` cut short at random: at a block boundary for ``O_DIRECT`` (which stops
    mid-block only at the end of the file), else at any byte."""
    if not short:
        return chunk
    if direct:
        blocks = len(chunk) // ALIGN
        return chunk[: int(rng.integers(1, blocks)) * ALIGN] if blocks > 1 else chunk
    return chunk[: int(rng.integers(1, len(chunk)))] if len(chunk) > 1 else chunk


class FakeRing:
    """The kernel's side of a ring of ``depth`` entries, scripted by ``rng``: ``enter`` consumes
    the submitted SQEs and completes a random subset of the requests in flight in random
    order; a request fails with ``-EINTR``/``-EAGAIN`` or reads short at random (``direct``:
    at a block boundary, as ``O_DIRECT`` reads do short of the end of the file; else at any
    byte), or with ``fail_errno`` when it reads past ``fail_at``."""

    def __init__(self, data: Data, depth: int, seed: int, *, direct=True, start_index=2**32 - 3,
                 fail_at=None, fail_errno=errno.EIO, enter_errno=None):
        self.direct = direct
        self.data, self.depth = data, depth
        self.rng = np.random.default_rng(seed)
        self.sq = np.zeros(8, np.uint32)  # head, tail
        self.sq[:2] = start_index
        self.cq = np.zeros(4 + 2 * depth * U.CQE_WORDS, np.uint32)  # head, tail, -, -, cqes
        self.cq[:2] = start_index + 1
        self.sqes = np.zeros(depth * U.SQE_WORDS, np.uint64)
        self.inflight: list = []
        self.problems: list = []
        self.fail_at, self.fail_errno, self.enter_errno = fail_at, fail_errno, enter_errno
        self.errno_cell = ctypes.c_int(0)
        self.enters = self.requests = self.most_in_flight = 0
        self._enter = ENTER(self.enter)
        self._errno = ERRNO_FN(lambda: ctypes.addressof(self.errno_cell))
        arena = U.aligned_empty(depth * data.slot_size)
        self.arena = arena
        p = np.zeros(U.P_LEN, np.int64)
        p[U.P_RING_FD] = 77
        p[U.P_FILE_FD] = 5
        p[U.P_SQ_HEAD], p[U.P_SQ_TAIL], p[U.P_SQ_MASK] = 0, 1, depth - 1
        p[U.P_CQ_HEAD], p[U.P_CQ_TAIL], p[U.P_CQ_MASK], p[U.P_CQES] = 0, 1, 2 * depth - 1, 4
        p[U.P_SYSCALL] = ctypes.cast(self._enter, ctypes.c_void_p).value
        p[U.P_ERRNO] = ctypes.cast(self._errno, ctypes.c_void_p).value
        p[U.P_ARENA] = arena.ctypes.data
        p[U.P_SLOT_SIZE] = data.slot_size
        p[U.P_DEPTH] = depth
        p[U.P_FILE_END] = data.size
        p[U.P_DIRECT] = int(direct)
        self.p = p

    def fail(self, code):
        self.errno_cell.value = code
        return -1

    def enter(self, nr, ring_fd, to_submit, min_complete, flags, sig, sigsz):
        try:
            return self._enter_checked(nr, ring_fd, to_submit, min_complete, flags, sig, sigsz)
        except Exception as e:  # noqa: BLE001 - a callback cannot raise into the kernel
            self.problems.append(repr(e))
            return self.fail(errno.EFAULT)

    def _enter_checked(self, nr, ring_fd, to_submit, min_complete, flags, sig, sigsz):
        self.enters += 1
        if (nr, ring_fd, flags, sig, sigsz) != (426, 77, U.IORING_ENTER_GETEVENTS, 0, 0):
            self.problems.append(f"enter called with {(nr, ring_fd, flags, sig, sigsz)}")
        if self.enter_errno is not None and self.enters > 2:
            return self.fail(self.enter_errno)
        if self.rng.random() < 0.1:  # a signal before anything was submitted
            return self.fail(self.rng.choice([errno.EINTR, errno.EAGAIN, errno.EBUSY]))
        head, tail = int(self.sq[0]), int(self.sq[1])
        if to_submit != (tail - head) % 2**32:
            self.problems.append(f"to_submit {to_submit}, ring holds {(tail - head) % 2**32}")
        for k in range(to_submit):
            q = ((head + k) & (self.depth - 1)) * U.SQE_WORDS
            w = [int(x) for x in self.sqes[q:q + U.SQE_WORDS]]
            if (w[0] & 0xFF, (w[0] >> 8) & 0xFF, w[0] >> 32) != (U.IORING_OP_READ, 0, 5):
                self.problems.append(f"sqe word 0 is {w[0]:#x}")
            if (self.direct and (w[1] % ALIGN or w[2] % ALIGN or w[3] % ALIGN)) or any(w[5:]):
                self.problems.append(f"unaligned or dirty sqe {w}")
            self.inflight.append(w)
        self.requests += to_submit
        self.sq[0] = (head + to_submit) % 2**32
        if len(self.inflight) > self.depth:
            self.problems.append(f"{len(self.inflight)} requests in flight, depth {self.depth}")
        self.most_in_flight = max(self.most_in_flight, len(self.inflight))
        # complete a random subset, at least min_complete, in random order
        self.rng.shuffle(self.inflight)
        n = len(self.inflight)
        done = int(self.rng.integers(min(min_complete, n), n + 1)) if n else 0
        for w in self.inflight[:done]:
            self._complete(w)
        self.inflight = self.inflight[done:]
        return to_submit

    def _complete(self, w):
        off, addr, length, user = w[1], w[2], w[3] & 0xFFFFFFFF, w[4]
        u = self.rng.random()
        if self.fail_at is not None and off + length > self.fail_at:
            res = -self.fail_errno
        elif u < 0.1:
            res = -int(self.rng.choice([errno.EINTR, errno.EAGAIN]))
        else:
            chunk = _short(os.pread(self.data.fd, length, off), u < 0.3, self.direct, self.rng)
            ctypes.memmove(addr, chunk, len(chunk))
            res = len(chunk)
        tail = int(self.cq[1])
        c = 4 + (tail & (2 * self.depth - 1)) * U.CQE_WORDS
        self.cq[c], self.cq[c + 1] = user & 0xFFFFFFFF, user >> 32
        self.cq[c + 2] = np.int32(res).view(np.uint32)
        self.cq[c + 3] = 0
        self.cq[1] = (tail + 1) % 2**32

    def run(self):
        d = self.data
        start, length, first, off = d.plan
        nr = len(start)
        err = np.zeros(U.E_LEN, np.int64)
        got = np.empty(nr, np.int64)
        scratch = np.empty(2 * self.depth, np.int64)
        issued = U.uring_read(self.p, self.sq, self.sqes, self.cq, start, length, first, off,
                              d.dst, self.arena, got, scratch[:self.depth], scratch[self.depth:],
                              err)
        assert not self.problems, self.problems[:3]
        return issued, err


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("depth", [1, 2, 8])
@pytest.mark.parametrize("seed", range(3))
def test_ring_protocol_with_short_reads_retries_and_wrapping(tmp_path, depth, seed, direct):
    rng = np.random.default_rng(seed)
    d = Data(tmp_path, np.concatenate([rng.integers(0, 2000, 150), [0, 1999]]),
             max_gap=int(rng.choice([0, ALIGN])))
    ring = FakeRing(d, depth, seed, direct=direct)
    issued, err = ring.run()
    assert err[U.E_CODE] == 0, err
    np.testing.assert_array_equal(d.dst, d.want())
    assert issued == ring.requests >= len(d.plan[0])  # every request counted, retries too
    assert ring.most_in_flight == depth  # the queue was kept full
    assert not ring.inflight and ring.sq[0] == ring.sq[1] and ring.cq[0] == ring.cq[1]
    assert int(ring.sq[1]) < 2**20  # the indices wrapped past 2**32
    d.close()


def test_ring_real_error_drains_what_is_in_flight(tmp_path):
    d = Data(tmp_path, np.arange(0, 2000, 3))
    ring = FakeRing(d, 8, 0, fail_at=d.size // 2, fail_errno=errno.EIO)
    issued, err = ring.run()
    assert err[U.E_CODE] == errno.EIO and not err[U.E_BROKEN]
    start, length = d.plan[0], d.plan[1]
    r = err[U.E_READ]
    assert start[r] + length[r] > d.size // 2 and err[U.E_OFFSET] >= start[r]
    # nothing left in flight: the kernel writes into the slots no more once it returns
    assert not ring.inflight and ring.cq[0] == ring.cq[1]
    assert issued < 2 * len(start)  # stopped submitting at the failure
    d.close()


def test_ring_end_of_file_before_the_rows_is_truncation(tmp_path):
    d = Data(tmp_path, [0, 1000, 1999])
    ring = FakeRing(d, 4, 1)
    ring.p[U.P_FILE_END] = d.size + 5000  # the header promises more than the file holds
    ring.rng = np.random.default_rng(1)
    d.plan[1][-1] += 2 * ALIGN  # the last read asks past the real end
    _, err = ring.run()
    assert err[U.E_CODE] == U.TRUNCATED and err[U.E_READ] == len(d.plan[0]) - 1
    assert err[U.E_OFFSET] == d.size  # where the file really ends
    d.close()


def test_ring_failed_enter_marks_the_ring_broken(tmp_path):
    d = Data(tmp_path, np.arange(0, 2000, 5))
    ring = FakeRing(d, 8, 2, enter_errno=errno.EBADF)
    _, err = ring.run()
    assert err[U.E_CODE] == errno.EBADF and err[U.E_BROKEN] == 1
    d.close()


class FakePread:
    """``pread`` that fails with EINTR/EAGAIN or reads short at random, else reads the file."""

    def __init__(self, data: Data, seed: int, fail_at=None, direct=True):
        self.data, self.rng, self.fail_at = data, np.random.default_rng(seed), fail_at
        self.direct = direct
        self.errno_cell = ctypes.c_int(0)
        self.calls = 0
        self.problems: list = []
        self._pread = PREAD(self.pread)
        self._errno = ERRNO_FN(lambda: ctypes.addressof(self.errno_cell))

    def pread(self, fd, buf, count, offset):
        self.calls += 1
        if fd != self.data.fd or (self.direct and (offset % ALIGN or buf % ALIGN)):
            self.problems.append((fd, buf, count, offset))
        u = self.rng.random()
        if self.fail_at is not None and offset + count > self.fail_at:
            self.errno_cell.value = errno.EIO
            return -1
        if u < 0.15:
            self.errno_cell.value = int(self.rng.choice([errno.EINTR, errno.EAGAIN]))
            return -1
        chunk = _short(os.pread(fd, count, offset), u < 0.4, self.direct, self.rng)
        ctypes.memmove(buf, chunk, len(chunk))
        return len(chunk)

    def params(self, depth):
        d = self.data
        arena = U.aligned_empty(depth * d.slot_size)
        p = np.zeros(U.P_LEN, np.int64)
        p[U.P_PREAD] = ctypes.cast(self._pread, ctypes.c_void_p).value
        p[U.P_ERRNO] = ctypes.cast(self._errno, ctypes.c_void_p).value
        p[U.P_ARENA] = arena.ctypes.data
        p[U.P_SLOT_SIZE] = d.slot_size
        p[U.P_FILE_END] = d.size
        p[U.P_DIRECT] = int(self.direct)
        return p, arena


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_pread_loop_with_short_reads_and_retries(tmp_path, seed, direct):
    d = Data(tmp_path, np.random.default_rng(seed).integers(0, 2000, 200))
    fake = FakePread(d, seed, direct=direct)
    p, arena = fake.params(3)
    err = np.zeros(U.E_LEN, np.int64)
    calls = sum(U.pread_reads(p, d.fd, *d.plan, d.dst, arena, t, 3, err) for t in range(3))
    assert err[U.E_CODE] == 0 and not fake.problems
    np.testing.assert_array_equal(d.dst, d.want())
    assert calls == fake.calls > len(d.plan[0])
    fake2 = FakePread(d, seed, fail_at=d.size // 2)
    p, arena = fake2.params(1)
    U.pread_reads(p, d.fd, *d.plan, d.dst, arena, 0, 1, err)
    assert err[U.E_CODE] == errno.EIO
    d.close()


def test_probe_and_a_real_ring(tmp_path):
    ok, why = U.probe()
    assert isinstance(ok, bool) and why
    if not ok:
        pytest.skip(why)
    d = Data(tmp_path, np.arange(0, 2000, 11))
    ring = U.Ring(d.fd, 4, d.slot_size, d.size, direct=False)
    assert ring.entries >= 4 and ring.p[U.P_SQE_FLAGS] == U.IOSQE_FIXED_FILE
    for _ in range(3):  # slots and ring positions are reused batch after batch
        d.dst[:] = 0
        issued, err = ring.run(*d.plan, d.dst)
        assert err[U.E_CODE] == 0 and issued == len(d.plan[0])
        np.testing.assert_array_equal(d.dst, d.want())
    ring.close()
    ring.close()
    d.close()
