"""The Sampler interface both samplers implement, the SAMPLERS registry, and who runs the
chunks of a batch (the executor handed to ``sample`` or the sampler's own pool)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest
import torch
from sampling_helpers import check_minibatch, random_graph

from graphfeed import _cuda
from graphfeed.errors import GraphfeedError
from graphfeed.sampling import SAMPLERS, Sampler, build_sampler, neighbor
from graphfeed.sampling.neighbor import NeighborSampler
from graphfeed.sampling.torch_sampler import TorchNeighborSampler

GRAPH = random_graph()
SEEDS = np.arange(0, 300, 3)


def _same(a, b):
    assert torch.equal(a.seeds.cpu(), b.seeds.cpu())
    for x, y in zip(a.blocks, b.blocks, strict=True):
        assert torch.equal(x.edge_index.cpu(), y.edge_index.cpu())
        assert torch.equal(x.src_nodes.cpu(), y.src_nodes.cpu())


def test_registry_names_and_classes():
    assert SAMPLERS.names() == ("neighbor", "torch", "triton", "gpu", "hetero",
                              "torch-hetero")
    assert SAMPLERS.get("neighbor") is NeighborSampler
    assert SAMPLERS.get("torch") is TorchNeighborSampler
    with pytest.raises(GraphfeedError, match="unknown sampler 'labor'; valid: neighbor, torch"):
        build_sampler("labor", GRAPH, [2])


@pytest.mark.parametrize("name", ["neighbor", "torch"])
def test_built_alike_and_declare_the_interface(name):
    s = build_sampler(name, GRAPH, [4, 3], device="cpu", replace=True, seed=5, uva=False)
    assert isinstance(s, Sampler) and isinstance(s, SAMPLERS.get(name))
    assert (s.num_nodes, s.device, s.fanouts) == (GRAPH.num_nodes, torch.device("cpu"), (4, 3))
    assert (s.replace, s.seed) == (True, 5)
    mb = s.sample(SEEDS, epoch=1, batch_index=2, executor=None)
    check_minibatch(GRAPH, mb, SEEDS, [4, 3], True)
    other = s.with_fanouts([-1])
    assert isinstance(other, type(s)) and other.fanouts == (-1,) and other.seed == 5
    s.close()
    s.close()  # idempotent, and the sampler stays usable
    _same(mb, s.sample(SEEDS, epoch=1, batch_index=2))


@pytest.mark.parametrize("kw", [dict(device="cuda"), dict(device="cuda:0", uva=True)])
def test_numba_sampler_refuses_a_gpu(kw):
    with pytest.raises(GraphfeedError, match="use the 'torch' sampler"):
        build_sampler("neighbor", GRAPH, [2], **kw)


def test_torch_sampler_uva_needs_a_cuda_device():
    with pytest.raises(GraphfeedError, match="uva=True .* device must be a CUDA device"):
        build_sampler("torch", GRAPH, [2], device="cpu", uva=True)
    with pytest.raises(GraphfeedError, match="CSCGraph"):
        TorchNeighborSampler.from_graph((GRAPH.indptr, GRAPH.indices), [2])
    with pytest.raises(GraphfeedError, match="CSCGraph"):
        NeighborSampler.from_graph((GRAPH.indptr, GRAPH.indices), [2])


@pytest.mark.skipif(not _cuda.cuda_available(), reason="needs a CUDA device")
def test_torch_sampler_uva_samples_from_the_pinned_graph():
    g = random_graph(seed=3)
    s = build_sampler("torch", g, [5, 3], device="cuda", uva=True, seed=2)
    assert s.device.type == "cuda" and s.indptr.is_cuda
    host_indptr, host_indices = s._host
    assert host_indptr.is_pinned() and host_indices.is_pinned()
    # zero copy: the CUDA views alias the pinned host arrays the sampler keeps alive
    assert s.indptr.data_ptr() == host_indptr.data_ptr()
    assert s.indices.data_ptr() == host_indices.data_ptr()
    mb = s.sample(SEEDS, batch_index=4)
    assert mb.blocks[0].src_nodes.is_cuda
    check_minibatch(g, mb, SEEDS, [5, 3], False)
    _same(mb, build_sampler("torch", g, [5, 3], device="cuda", seed=2).sample(SEEDS, batch_index=4))
    assert s.with_fanouts([2])._host is s._host


def test_import_loads_neither_numba_nor_torch():
    code = ("import sys, json; import graphfeed.sampling as s; names = s.SAMPLERS.names(); "
            "print(json.dumps([names, sorted(m for m in sys.modules if m.split('.')[0] in "
            "('numba', 'torch', 'llvmlite'))]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    names, heavy = json.loads(proc.stdout)
    assert names == ["neighbor", "torch", "triton", "gpu", "hetero",
                     "torch-hetero"] and heavy == []


# ---------------------------------------------------------------- who runs the chunks


class RecordingExecutor(ThreadPoolExecutor):
    def __init__(self, workers=2):
        super().__init__(workers, thread_name_prefix="test-exec")
        self.submitted = 0
        self._count_lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        with self._count_lock:
            self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def _threads(prefix):
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


@pytest.mark.parametrize("replace", [False, True])
def test_chunks_go_to_the_given_executor(monkeypatch, replace):
    monkeypatch.setattr(neighbor, "_MIN_DST_PER_CHUNK", 4)  # chunk even small layers
    serial = NeighborSampler(GRAPH, [4, 40, 3], replace=replace, seed=11, return_edge_ids=True)
    expected = serial.sample(SEEDS, epoch=2, batch_index=5)
    s = NeighborSampler(GRAPH, [4, 40, 3], replace=replace, seed=11, num_threads=3,
                        return_edge_ids=True)
    before = _threads("graphfeed-sample")
    with RecordingExecutor() as ex:
        got = s.sample(SEEDS, epoch=2, batch_index=5, executor=ex)
    # two passes (count, fill) of 3 chunks for each of the 3 layers
    assert ex.submitted == 2 * 3 * 3
    assert _threads("graphfeed-sample") == before  # no pool of its own was started
    _same(expected, got)
    for x, y in zip(expected.blocks, got.blocks):
        assert torch.equal(x.edge_ids, y.edge_ids)


def test_without_an_executor_the_sampler_uses_its_own_pool_until_closed(monkeypatch):
    monkeypatch.setattr(neighbor, "_MIN_DST_PER_CHUNK", 4)
    before = set(_threads("graphfeed-sample"))
    s = NeighborSampler(GRAPH, [4, 40], seed=1, num_threads=2)
    expected = NeighborSampler(GRAPH, [4, 40], seed=1).sample(SEEDS)
    _same(expected, s.sample(SEEDS))
    assert 1 <= len(set(_threads("graphfeed-sample")) - before) <= 2
    s.close()
    assert set(_threads("graphfeed-sample")) - before == set()
    _same(expected, s.sample(SEEDS))  # restarted on demand
    s.close()


def test_one_thread_never_submits(monkeypatch):
    monkeypatch.setattr(neighbor, "_MIN_DST_PER_CHUNK", 4)
    with RecordingExecutor() as ex:
        NeighborSampler(GRAPH, [4, 40]).sample(SEEDS, executor=ex)
        TorchNeighborSampler.from_graph(GRAPH, [4, 40]).sample(SEEDS, executor=ex)
    assert ex.submitted == 0
