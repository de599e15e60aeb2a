"""Issue 30, item 6: the partitioned exchange's backend follows the ranks' device (NCCL on
GPU ranks, gloo on CPU ranks), chosen by one function; CPU ranks still exchange on gloo."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from graphfeed.distributed.world import exchange_backend
from graphfeed.errors import GraphfeedError
from graphfeed.partition.dist import Exchange

sys.path.insert(0, os.path.dirname(__file__))

CPU = torch.device("cpu")


@pytest.fixture
def nccl_built(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)


def test_cpu_ranks_exchange_on_gloo():
    assert exchange_backend() == ("gloo", CPU)
    assert exchange_backend("cpu") == ("gloo", CPU)
    assert exchange_backend("cpu", "gloo") == ("gloo", CPU)


def test_gpu_ranks_exchange_on_nccl_on_their_gpu(nccl_built, monkeypatch):
    assert exchange_backend("cuda:1") == ("nccl", torch.device("cuda", 1))
    assert exchange_backend(torch.device("cuda", 0), "nccl") == ("nccl", torch.device("cuda", 0))
    # no index: the rank's GPU, LOCAL_RANK (what init makes current)
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    assert exchange_backend("cuda") == ("nccl", torch.device("cuda", 2))


def test_gpu_ranks_on_gloo_exchange_cpu_tensors(nccl_built):
    # --dist-backend gloo (ranks sharing a GPU): the exchange stays on the CPU
    assert exchange_backend("cuda:0", "gloo") == ("gloo", CPU)


def test_a_torch_without_nccl_keeps_gpu_ranks_on_gloo(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_nccl_available", lambda: False)
    assert exchange_backend("cuda:0") == ("gloo", CPU)


def test_what_cannot_be_exchanged_is_refused():
    with pytest.raises(GraphfeedError, match="'nccl' exchanges CUDA tensors.*gloo"):
        exchange_backend("cpu", "nccl")
    with pytest.raises(GraphfeedError, match="unknown backend 'mpi'"):
        exchange_backend("cpu", "mpi")
    with pytest.raises(GraphfeedError, match="'cpu' or 'cuda'"):
        exchange_backend("meta")


def test_one_process_without_a_group():
    ex = Exchange()
    assert (ex.group, ex.backend, ex.device, ex.size) == (None, "gloo", CPU, 1)
    import numpy as np

    out, counts = ex.alltoallv(np.arange(3), np.array([3]))
    assert out.tolist() == [0, 1, 2] and counts.tolist() == [3]


def _expected(size):
    """What ``exchange_roundtrip`` delivers to each rank."""
    import numpy as np

    want = []
    for r in range(size):
        counts = [(s + r) % 3 for s in range(size)]
        ids = [100 * s + r for s in range(size) for _ in range((s + r) % 3)]
        want.append((ids, counts, np.repeat(np.array(ids, np.float32)[:, None], 4, 1).tolist()))
    return want


@pytest.mark.parametrize("device,staged", [(None, False), ("cpu", False), ("cpu", True)])
def test_cpu_ranks_still_run_on_gloo(device, staged):
    """Three CPU ranks: a gloo group, the rows where they belong. ``staged``: the copies the
    NCCL path makes (to the exchange's device and back), run on the CPU."""
    from graphfeed.distributed import launch

    from _partition_ranks import exchange_roundtrip

    out = launch(exchange_roundtrip, 3, device, None, staged, timeout_s=120)
    for r, (ids, counts, rows) in zip(out, _expected(3)):
        assert (r["backend"], r["device"]) == ("gloo", "cpu")
        assert (r["ids"], r["counts"], r["rows"]) == (ids, counts, rows)
        assert r["calls"] == 3  # sizes, ids, rows


@pytest.mark.cuda
def test_nccl_exchange_on_one_gpu():
    """One rank, its own NCCL group (a one-rank world has no default group, so the rank
    function makes one): the NCCL path's copies to and from the GPU round-trip."""
    from graphfeed.distributed import launch

    from _partition_ranks import exchange_roundtrip

    (r,) = launch(exchange_roundtrip, 1, "cuda:0", "nccl", timeout_s=120)
    ids, counts, rows = _expected(1)[0]
    assert (r["backend"], r["device"]) == ("nccl", "cuda:0")
    assert (r["ids"], r["counts"], r["rows"]) == (ids, counts, rows)


@pytest.mark.cuda
def test_nccl_exchange_between_two_gpus():
    from graphfeed import _cuda
    from graphfeed.distributed import launch

    from _partition_ranks import exchange_roundtrip

    if _cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices (NCCL: one GPU per rank)")
    out = launch(exchange_roundtrip, 2, "cuda", "nccl", timeout_s=120)
    for k, (r, (ids, counts, rows)) in enumerate(zip(out, _expected(2))):
        assert (r["backend"], r["device"]) == ("nccl", f"cuda:{k}")
        assert (r["ids"], r["counts"], r["rows"]) == (ids, counts, rows)
