"""The CUDA device stage (needs a GPU; skipped without one)."""

from __future__ import annotations

import pytest
import torch

from graphfeed.features.memory import InMemoryFeature
from graphfeed.loader import DataLoader, ItemSampler
from graphfeed.sampling.base import MiniBatch

from loader_helpers import ToySampler

pytestmark = [
    pytest.mark.cuda,
]

N = 3000


@pytest.fixture(autouse=True)
def _no_leaks(thread_baseline):
    yield


def data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(N, 64, generator=g), torch.randint(0, 9, (N,), generator=g)


def loader_on(device, feat, labels, sampler=None, **kw):
    items = ItemSampler(torch.arange(N), 128, seed=3)
    return DataLoader(items, sampler or ToySampler(N), node_features=InMemoryFeature(feat),
                      labels=InMemoryFeature(labels), device=device, **kw)


@pytest.mark.parametrize("num_threads", [0, 2])
def test_cpu_cuda_equals_cpu_and_kept_batches_stay_intact(num_threads):
    feat, labels = data()
    cpu = [mb for mb in loader_on("cpu", feat, labels, num_threads=num_threads)]
    loader = loader_on("cuda", feat, labels, num_threads=num_threads)
    assert all(p.pin_memory for p in loader._fetch.pools.values())
    kept = []
    for mb in loader:
        assert mb.x.is_cuda and mb.labels.is_cuda and mb.seeds.is_cuda
        assert all(b.edge_index.is_cuda and b.src_nodes.is_cuda for b in mb.blocks)
        mb.x.mul_(1.0)  # some work on the caller's stream
        kept.append(mb)
    torch.cuda.synchronize()
    assert len(kept) == len(cpu)
    for g, c in zip(kept, cpu):
        assert torch.equal(g.x.cpu(), c.x) and torch.equal(g.labels.cpu(), c.labels)
        assert torch.equal(g.seeds.cpu(), c.seeds)
        assert torch.equal(g.blocks[0].edge_index.cpu(), c.blocks[0].edge_index)


def test_consumer_on_a_side_stream_sees_complete_copies():
    feat, labels = data()
    cpu = [mb.x.clone() for mb in loader_on("cpu", feat, labels)]
    stream = torch.cuda.Stream()
    sums = []
    with torch.cuda.stream(stream):
        for mb in loader_on("cuda", feat, labels, num_threads=2):
            sums.append((mb.x * 2).sum())
    torch.cuda.synchronize()
    for s, x in zip(sums, cpu):
        assert torch.allclose(s.cpu(), (x * 2).sum())


class CudaSampler(ToySampler):
    def sample(self, seeds, *, epoch=0, batch_index=0, executor=None):
        mb = super().sample(seeds, epoch=epoch, batch_index=batch_index, executor=executor)
        return mb.to("cuda")


def test_cuda_cuda_needs_no_copy():
    feat, labels = data()
    cpu = [mb for mb in loader_on("cpu", feat, labels)]
    loader = loader_on("cuda", feat.cuda(), labels.cuda(), sampler=CudaSampler(N), num_threads=2)
    assert loader._fetch.pools == {}  # GPU features: no host buffers
    got = list(loader)
    assert loader.stats.batches == len(cpu)
    for g, c in zip(got, cpu):
        assert g.x.is_cuda and torch.equal(g.x.cpu(), c.x)
        assert torch.equal(g.labels.cpu(), c.labels)


def test_cuda_index_device():
    feat, labels = data()
    loader = loader_on("cuda:0", feat, labels, num_threads=1)
    mb = next(iter(loader))
    assert isinstance(mb, MiniBatch) and mb.x.device == torch.device("cuda", 0)
    loader.close()
