"""apply_placement: the sampler and features each mode gets (CPU here; CUDA tests skip)."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pytest
import torch

from graphfeed.errors import GraphfeedError
from graphfeed.features.base import Feature
from graphfeed.features.memory import InMemoryFeature
from graphfeed.graph.csc import CSCGraph
from graphfeed.placement import Placement, apply, apply_placement, estimate_bytes

FANOUTS = [3, 2]


class RowsFeature(Feature):
    """A feature that is not in memory as one tensor (like disk/LMDB): rows built on read."""

    kind = "rows"

    def __init__(self, n: int, d: int):
        self._n, self._d = n, d
        self.reads = 0

    @property
    def shape(self):
        return (self._n, self._d)

    @property
    def dtype(self):
        return torch.float32

    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor], executor) -> torch.Tensor:
        self.reads += 1
        rows = ids.to(torch.float32)[:, None] * 10 + torch.arange(self._d, dtype=torch.float32)
        if out is not None:
            out.copy_(rows)
            return out
        return rows


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(0)
    n = 200
    src = rng.integers(0, n, 2000)
    dst = rng.integers(0, n, 2000)
    return CSCGraph.from_edges(src, dst, n)


@pytest.fixture
def features(graph):
    n = graph.num_nodes
    return {
        "feat": InMemoryFeature(torch.randn(n, 8)),
        "label": InMemoryFeature(torch.arange(n) % 5),
    }


def check_batch(graph, mb, seeds):
    """Every sampled edge exists in the graph and the seeds come out as the last destinations."""
    assert torch.equal(mb.seeds.cpu(), torch.as_tensor(seeds))
    assert torch.equal(mb.blocks[-1].dst_nodes.cpu(), torch.as_tensor(seeds))
    for b in mb.blocks:
        src = b.src_nodes.cpu()[b.edge_index[0].cpu()]
        dst = b.src_nodes.cpu()[b.edge_index[1].cpu()]
        for s, d in zip(src.tolist(), dst.tolist()):
            assert s in graph.indices[graph.indptr[d]:graph.indptr[d + 1]]


@pytest.mark.parametrize("mode,device", [("cpu-cpu", "cpu"), ("cpu-cuda", "cuda:0")])
def test_cpu_sampling_modes_use_the_numba_sampler(graph, features, mode, device):
    from graphfeed.sampling.neighbor import NeighborSampler

    placed = apply_placement(Placement(mode, "test", device), graph, features, FANOUTS,
                             replace=True, seed=7)
    assert isinstance(placed.sampler, NeighborSampler)
    assert placed.sampler.fanouts == tuple(FANOUTS) and placed.sampler.replace and placed.sampler.seed == 7
    # features are untouched: the loader reads (and for cpu-cuda copies) them
    assert placed.features["feat"] is features["feat"]
    assert placed.device == torch.device(device) and placed.sampling_device == torch.device("cpu")
    assert placed.mode == mode
    seeds = [1, 5, 9]
    check_batch(graph, placed.sampler.sample(seeds), seeds)


@pytest.mark.parametrize("mode", ["pinned-cuda", "cuda-cuda"])
def test_cuda_modes_without_cuda_raise(graph, features, mode, no_gpu):
    with pytest.raises(GraphfeedError, match="needs CUDA"):
        apply_placement(Placement(mode, "test", "cuda:0"), graph, features, FANOUTS)


def test_bad_arguments(graph, features):
    with pytest.raises(GraphfeedError, match="Placement"):
        apply_placement("cpu-cpu", graph, features, FANOUTS)
    with pytest.raises(GraphfeedError, match="CSCGraph"):
        apply_placement(Placement("cpu-cpu", "t"), "graph", features, FANOUTS)
    with pytest.raises(GraphfeedError, match="Feature"):
        apply_placement(Placement("cpu-cpu", "t"), graph, {"feat": torch.zeros(3)}, FANOUTS)


def test_estimate_bytes(graph, features):
    g, f = estimate_bytes(graph, features)
    assert g == graph.indptr.nbytes + graph.indices.nbytes
    assert f == graph.num_nodes * 8 * 4 + graph.num_nodes * 8


# --------------------------------------------------- the GPU paths' logic, run on a CPU device
def test_cuda_cuda_path_logic_on_cpu(graph, features, monkeypatch):
    """cuda-cuda's spec built with device=cpu: the torch sampler over the graph, every feature
    copied into an InMemoryFeature (chunked for a feature that is not one tensor)."""
    from graphfeed.sampling.torch_sampler import TorchNeighborSampler

    monkeypatch.setattr(apply, "_CHUNK_BYTES", 3 * 4 * 16)  # 3 rows of 16 floats per chunk
    rows = RowsFeature(graph.num_nodes, 16)
    feats = dict(features, rows=rows)
    p = Placement("cuda-cuda", "test", "cpu")
    placed = apply._build(p, graph, feats, FANOUTS, replace=False, seed=3)
    assert isinstance(placed.sampler, TorchNeighborSampler)
    assert placed.sampler.fanouts == tuple(FANOUTS) and placed.sampler.seed == 3
    for name, f in feats.items():
        assert isinstance(placed.features[name], InMemoryFeature)
        assert torch.equal(placed.features[name].data, f.read(torch.arange(graph.num_nodes)))
    assert rows.reads >= graph.num_nodes // 3  # read in chunks, not all at once
    seeds = [0, 3, 4]
    check_batch(graph, placed.sampler.sample(seeds), seeds)


def test_pinned_cuda_path_logic_on_cpu(graph, features, monkeypatch):
    """pinned-cuda's spec built with pinning replaced by recorders: the graph arrays and every
    feature's rows are pinned (disk-like features read into RAM first) and viewed through
    ``uva_tensor``."""
    import graphfeed._pinning as pinned

    pinned_ptrs, viewed = [], []

    def fake_pin(t):
        pinned_ptrs.append(t.data_ptr())
        return t

    def fake_uva(t, device):
        viewed.append((t.data_ptr(), torch.device(device)))
        return t

    monkeypatch.setattr(pinned, "pin_tensor", fake_pin)
    monkeypatch.setattr(pinned, "uva_tensor", fake_uva)
    monkeypatch.setattr(pinned, "cuda_available", lambda: True)  # CSCGraph.pin_memory asks
    rows = RowsFeature(graph.num_nodes, 4)
    feats = dict(features, rows=rows)
    p = Placement("pinned-cuda", "test", "cuda:0")  # a CUDA device: the UVA views are faked
    placed = apply._build(p, graph, feats, FANOUTS, replace=True, seed=1)
    indptr, indices = graph.tensors("cpu")
    # the graph is pinned without a copy (views of its arrays), and in-memory features too
    assert indptr.data_ptr() in pinned_ptrs and indices.data_ptr() in pinned_ptrs
    assert features["feat"].data.data_ptr() in pinned_ptrs
    assert len(pinned_ptrs) == len(viewed) == 2 + len(feats)
    assert len(placed.keep_alive) == len(feats)  # the sampler keeps the pinned graph alive itself
    assert placed.sampler.indptr.data_ptr() == indptr.data_ptr()
    assert torch.equal(placed.features["rows"].data, rows.read(torch.arange(graph.num_nodes)))
    seeds = [2, 8]
    check_batch(graph, placed.sampler.sample(seeds), seeds)


# ---------------------------------------------------------------------- real GPU
@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["cuda-cuda", "pinned-cuda"])
def test_gpu_modes(graph, features, mode):
    placed = apply_placement(Placement(mode, "test", "cuda:0"), graph, features, FANOUTS, seed=1)
    assert placed.sampling_device.type == "cuda"
    for name, f in placed.features.items():
        assert f.device.type == "cuda"
        ids = torch.tensor([0, 7, 3, 7], device="cuda")
        assert torch.equal(f.read(ids, check=False).cpu(), features[name].read(ids.cpu()))
    seeds = torch.tensor([1, 5, 9], device="cuda")
    mb = placed.sampler.sample(seeds)
    assert mb.seeds.device.type == "cuda"
    check_batch(graph, mb, [1, 5, 9])


# ---------------------------------------------------------------------- sampling methods
@pytest.mark.parametrize("mode", ["cpu-cpu", "cuda-cuda"])
def test_method_reaches_the_sampler(graph, features, mode):
    """``method=`` goes through apply_placement's build to the mode's sampler (the GPU mode's
    torch sampler built on a CPU device here), which samples by it."""
    from graphfeed.sampling import SamplingMethod

    p = Placement(mode, "test", "cpu")
    placed = apply._build(p, graph, features, FANOUTS, replace=False, seed=3,
                          method=SamplingMethod("labor", layer_dependency=True))
    assert placed.sampler.method == SamplingMethod("labor", layer_dependency=True)
    mb = placed.sampler.sample([0, 3, 4])
    assert all(b.edge_weight is not None for b in mb.blocks)
    same = placed.sampler.with_fanouts([-1] * len(FANOUTS))
    assert same.method.kind == "labor"
