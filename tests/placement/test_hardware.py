"""detect_hardware on this machine (no GPU) and with a simulated CUDA device."""

from __future__ import annotations

import pytest
import torch

import graphfeed._memory
from graphfeed import _cuda, cuda_alloc
from graphfeed.errors import GraphfeedError
from graphfeed.placement import detect_hardware, hardware, plan_placement


def test_this_machine():
    hw = detect_hardware()
    assert 0 < hw.host_free_bytes <= hw.host_total_bytes
    assert hw.ranks_per_machine == 1
    assert hw.cuda_available == (_cuda.device_count() > 0)


def test_machine_without_gpu(no_gpu):
    was_initialized = torch.cuda.is_initialized()
    hw = detect_hardware()
    assert not hw.cuda_available and hw.gpu_free_bytes is None and hw.device == "cpu"
    assert torch.cuda.is_initialized() == was_initialized  # asking started nothing
    assert plan_placement(1, 1, hw).mode == "cpu-cpu"


def test_cpu_device_is_cpu_only():
    hw = detect_hardware(device="cpu")
    assert not hw.cuda_available and hw.device == "cpu"


def test_ranks_from_torchrun_environment(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert detect_hardware(device="cpu").ranks_per_machine == 4
    assert detect_hardware(ranks_per_machine=2, device="cpu").ranks_per_machine == 2


def test_unsupported_device():
    with pytest.raises(GraphfeedError, match="meta"):
        detect_hardware(device="meta")


def test_meminfo_parsing(tmp_path):
    p = tmp_path / "meminfo"
    p.write_text("MemTotal:       24576000 kB\nMemFree:  1000 kB\nMemAvailable:   20480000 kB\n"
                 "HugePages_Total:       0\n")
    info = graphfeed._memory._meminfo(str(p))
    assert info["MemTotal"] == 24576000 * 1024
    assert info["MemAvailable"] == 20480000 * 1024
    assert info["HugePages_Total"] == 0
    assert graphfeed._memory._meminfo(str(tmp_path / "missing")) == {}


def test_cgroup_limit_caps_host_memory(monkeypatch):
    import graphfeed._memory as M

    monkeypatch.setattr(M, "_meminfo", lambda: {"MemTotal": 100 << 30, "MemAvailable": 80 << 30})
    monkeypatch.setattr(M, "_own_cgroup_memory", lambda: (16 << 30, 6 << 30))
    assert hardware.host_memory() == (16 << 30, 10 << 30)
    monkeypatch.setattr(M, "_own_cgroup_memory", lambda: None)
    assert hardware.host_memory() == (100 << 30, 80 << 30)


@pytest.fixture
def simulated_gpu(monkeypatch):
    """torch made to look like a CUDA build with 2 GPUs; records the order of calls."""
    calls = []
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(_cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)

    def mem_get_info(i):
        calls.append(("mem_get_info", i))
        return (22 * 10**9, 40 * 10**9)

    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"Fake GPU {i}")
    monkeypatch.setattr(cuda_alloc, "start_cuda", lambda: calls.append("configure") or 0)
    return calls


def test_simulated_gpu(simulated_gpu, monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    hw = detect_hardware()
    assert hw.cuda_available and hw.supports_uva
    assert (hw.gpu_free_bytes, hw.gpu_total_bytes, hw.gpu_count) == (22 * 10**9, 40 * 10**9, 2)
    assert (hw.device, hw.gpu_name) == ("cuda:0", "Fake GPU 0")
    # the allocator is configured before the first call that starts CUDA
    assert simulated_gpu == ["configure", ("mem_get_info", 0)]
    assert plan_placement(10**9, 3 * 10**9, hw).mode == "cuda-cuda"


def test_simulated_gpu_picks_the_rank_device(simulated_gpu, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert detect_hardware().device == "cuda:1"  # 3 % 2 GPUs
    assert detect_hardware(device="cuda:0").device == "cuda:0"
    with pytest.raises(GraphfeedError, match="only 2 CUDA device"):
        detect_hardware(device="cuda:5")
