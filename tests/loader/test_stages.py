"""One contract for every pipeline stage (serial and threaded), plus the buffer pool and
interpreter exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

from graphfeed.loader.base import IterStage, MapStage
from graphfeed.loader.buffers import BufferPool, reuse_supported
from graphfeed.loader.prefetch import ParallelMapper

from loader_helpers import loader_threads


@pytest.fixture(autouse=True)
def _no_leaks(thread_baseline):
    yield


def slow_square(x):
    time.sleep(0.001 * (x % 3))
    return x * x


def explode(x):
    raise ValueError(f"bad item {x}")


def build(kind, n=20, fn=slow_square, source=None):
    root = IterStage(source or (lambda: iter(range(n))))
    if kind == "serial":
        return MapStage(root, fn)
    threads = {"threads1": 1, "threads3": 3}[kind]
    return ParallelMapper(root, fn, num_threads=threads, prefetch=2)


KINDS = ["serial", "threads1", "threads3"]


@pytest.mark.parametrize("kind", KINDS)
def test_stage_contract_full_pass_reset_close(kind):
    stage = build(kind)
    assert iter(stage) is stage
    assert list(stage) == [x * x for x in range(20)]
    stage.reset()
    assert [next(stage) for _ in range(5)] == [0, 1, 4, 9, 16]
    stage.reset()  # mid-way: starts over
    assert list(stage) == [x * x for x in range(20)]
    stage.close()
    stage.close()  # idempotent
    with pytest.raises(StopIteration):
        next(stage)


@pytest.mark.parametrize("kind", KINDS)
def test_stage_contract_error_in_fn_at_its_position(kind):
    def fn(x):
        return explode(x) if x == 6 else x

    stage = build(kind, fn=fn)
    got = []
    with pytest.raises(ValueError, match="bad item 6"):
        for v in stage:
            got.append(v)
    assert got == list(range(6))
    stage.close()


@pytest.mark.parametrize("kind", KINDS)
def test_stage_contract_error_in_source(kind):
    def gen():
        yield from range(4)
        raise OSError("disk gone")

    stage = build(kind, fn=lambda x: x, source=gen)
    got = []
    with pytest.raises(OSError, match="disk gone"):
        for v in stage:
            got.append(v)
    assert got == [0, 1, 2, 3]
    stage.close()


def test_parallel_mapper_bounds_items_in_flight():
    taken = []

    def source():
        for i in range(100):
            taken.append(i)
            yield i

    def settle(expected):
        deadline = time.monotonic() + 10
        while len(taken) < expected and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # give the threads a chance to overshoot the bound
        return len(taken)

    stage = ParallelMapper(IterStage(source), lambda x: x, num_threads=3, prefetch=2)
    # the caller is busy: threads run ahead up to the bound and no further
    assert settle(3 + 2) == 3 + 2
    assert next(stage) == 0
    assert settle(3 + 2 + 1) == 3 + 2 + 1
    stage.close()
    assert loader_threads() == []


def test_parallel_mapper_threads_run_concurrently():
    # each item blocks until 3 items are being worked on at once: deadlocks (times out)
    # unless 3 threads really work in parallel
    barrier = threading.Barrier(3, timeout=10)

    def fn(x):
        if x < 3:
            barrier.wait()
        return x

    stage = ParallelMapper(IterStage(lambda: iter(range(6))), fn, num_threads=3, prefetch=0)
    assert list(stage) == list(range(6))


def test_buffer_pool_grows_caps_and_never_shares():
    pool = BufferPool((4,), torch.float32, max_buffers=3)
    taken = [pool.take(n) for n in (5, 7, 6)]
    ptrs = {t.untyped_storage().data_ptr() for t in taken}
    assert len(ptrs) == 3 and pool.num_buffers == (3 if reuse_supported() else 0)
    extra = pool.take(2)  # all busy, at the cap: a fresh allocation, not pooled
    assert extra.untyped_storage().data_ptr() not in ptrs
    assert pool.num_buffers <= 3
    if reuse_supported():
        p0 = taken[0].untyped_storage().data_ptr()
        del taken[0]
        again = pool.take(3)
        assert again.untyped_storage().data_ptr() == p0  # freed buffer reused
        del again
        big = pool.take(50)  # free but too small: regrown
        assert big.shape == (50, 4) and pool.num_buffers <= 3


def test_buffer_pool_concurrent_takes_get_distinct_memory():
    pool = BufferPool((8,), torch.int64, max_buffers=4)
    errors = []

    def work(tid):
        for i in range(200):
            t = pool.take(16)
            t.fill_(tid * 1000 + i)
            time.sleep(0)
            if not bool((t == tid * 1000 + i).all()):
                errors.append((tid, i))
            del t

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_interpreter_exit_with_running_loader_does_not_hang():
    code = textwrap.dedent(
        """
        import torch, time
        from graphfeed.loader import DataLoader, ItemSampler
        from graphfeed.sampling.base import Block, MiniBatch, Sampler

        class Slow(Sampler):
            num_nodes, fanouts = 10_000, ()

            def sample(self, seeds, *, epoch=0, batch_index=0, executor=None):
                time.sleep(0.05)
                return MiniBatch(seeds=seeds, blocks=[])

        loader = DataLoader(ItemSampler(torch.arange(10_000), 4), Slow(), num_threads=2)
        it = iter(loader)
        next(it)
        print("ok", flush=True)
        # exit with the threads running and the iterator alive
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
