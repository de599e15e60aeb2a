"""The DataLoader's one intra-batch executor: handed to the sampler and to every feature read,
shared by all batches, started lazily and shut down by ``close()``."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from graphfeed.features.memory import InMemoryFeature
from graphfeed.graph.csc import CSCGraph
from graphfeed.loader import DataLoader, ItemSampler
from graphfeed.sampling import neighbor
from graphfeed.sampling.neighbor import NeighborSampler
from loader_helpers import ToySampler, wait_no_loader_threads

N = 500


@pytest.fixture(autouse=True)
def _no_leaks(thread_baseline):
    yield


class RecordingFeature(InMemoryFeature):
    """Records the executor of every read and the thread that read."""

    def __init__(self, data):
        super().__init__(data)
        self.executors, self.threads = [], set()
        self._lock = threading.Lock()

    def read(self, ids, **kw):
        with self._lock:
            self.executors.append(kw.get("executor"))
            self.threads.add(threading.current_thread().name)
        return super().read(ids, **kw)


def _loader(num_threads, sampler=None, **kw):
    feat = RecordingFeature(torch.arange(N * 2.0).view(N, 2))
    labels = RecordingFeature(torch.arange(N))
    items = ItemSampler(torch.arange(N), 50, seed=0)
    sampler = sampler if sampler is not None else ToySampler(N)
    return DataLoader(items, sampler, node_features=feat, labels=labels,
                      num_threads=num_threads, **kw), sampler, feat, labels


@pytest.mark.parametrize("num_threads", [1, 3])
def test_one_executor_reaches_sampler_and_every_read(num_threads):
    loader, sampler, feat, labels = _loader(num_threads)
    assert loader._executor is None  # lazily: a loader that is never iterated starts nothing
    first = list(loader)
    second = list(loader)
    ex = loader._executor
    assert ex is not None and ex._max_workers == num_threads
    assert sampler.executors == {ex}  # one executor for every batch of every epoch
    assert set(feat.executors) == {ex} and set(labels.executors) == {ex}
    assert len(feat.executors) == len(first) + len(second)
    loader.close()
    assert loader._executor is None
    with pytest.raises(RuntimeError, match="shutdown"):
        ex.submit(print)
    list(loader)  # iterable again: a new executor
    assert loader._executor is not None and loader._executor is not ex
    loader.close()


def test_num_threads_zero_runs_chunks_inline():
    loader, sampler, feat, _ = _loader(0)
    mbs = list(loader)
    (ex,) = sampler.executors
    assert set(feat.executors) == {ex}
    assert feat.threads == {threading.current_thread().name}
    caller = threading.current_thread()
    assert ex.submit(threading.current_thread).result() is caller
    with pytest.raises(ZeroDivisionError):
        ex.submit(lambda: 1 / 0).result()
    assert len(mbs) == len(loader)
    loader.close()


@pytest.mark.parametrize("num_threads", [0, 2])
def test_neighbor_sampler_chunks_run_on_the_loaders_threads(monkeypatch, num_threads):
    monkeypatch.setattr(neighbor, "_MIN_DST_PER_CHUNK", 8)  # chunk even these small layers
    rng = np.random.default_rng(0)
    g = CSCGraph.from_edges(rng.integers(0, N, 20 * N), rng.integers(0, N, 20 * N), N)
    ran_on = set()
    real = neighbor.run_chunks

    def spy(fn, n, parts, executor):
        def chunk(a, b):
            ran_on.add(threading.current_thread().name.rsplit("_", 1)[0])
            fn(a, b)
        real(chunk, n, parts, executor)

    monkeypatch.setattr(neighbor, "run_chunks", spy)
    serial = NeighborSampler(g, [5, 5], seed=3)
    sampler = NeighborSampler(g, [5, 5], seed=3, num_threads=4)
    loader, _, _, _ = _loader(num_threads, sampler=sampler)
    got = list(loader)
    expected = [serial.sample(mb.seeds, epoch=0, batch_index=i) for i, mb in enumerate(got)]
    for a, b in zip(got, expected, strict=True):
        for x, y in zip(a.blocks, b.blocks, strict=True):
            assert torch.equal(x.edge_index, y.edge_index)
            assert torch.equal(x.src_nodes, y.src_nodes)
    # the sampler never started its own pool: its chunks ran where the loader said
    want = {"graphfeed-loader-chunk"} if num_threads else {threading.current_thread().name}
    assert ran_on == want
    loader.close()
    sampler.close()
    assert wait_no_loader_threads() == []
