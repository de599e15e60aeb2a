"""Pinned memory: a clear no-op without CUDA; in-place registration, UVA views and clean exit
with CUDA (those tests run on a GPU machine)."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import graphfeed.features.pinned as pinned
import graphfeed._pinning as _pinning
from graphfeed.errors import GraphfeedError
from graphfeed.features.memory import InMemoryFeature
from graphfeed.graph.csc import CSCGraph

cuda = pytest.mark.cuda


@pytest.fixture
def fresh_warning(monkeypatch):
    monkeypatch.setattr(_pinning, "_warned", False)


def test_cpu_only_is_a_noop_with_one_warning(fresh_warning, no_gpu):
    t = torch.arange(10.0)
    g = CSCGraph.from_edges([0, 1, 2], [1, 2, 0])
    indptr = g.indptr
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert pinned.pin_tensor(t) is t
        assert pinned.pin_memory(t) is t
        assert g.pin_memory() is g
        f = pinned.PinnedFeature(InMemoryFeature(t.reshape(5, 2)))
    msgs = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]
    assert len(msgs) == 1 and "needs CUDA" in msgs[0]
    assert g.indptr is indptr
    assert not f.is_pinned
    assert torch.equal(f.read([4, 0]), t.reshape(5, 2)[[4, 0]])
    with pytest.raises(GraphfeedError, match="CUDA"):
        pinned.uva_tensor(t)


def test_argument_checks():
    with pytest.raises(GraphfeedError, match="torch.Tensor"):
        pinned.pin_tensor(np.zeros(3))
    with pytest.raises(GraphfeedError, match="cannot pin"):
        pinned.pin_memory("x")
    with pytest.raises(GraphfeedError, match="wraps a graphfeed Feature"):
        pinned.PinnedFeature(torch.zeros(3))


@cuda
def test_pin_in_place_and_uva_gather():
    t = torch.randn(1000, 16)
    ptr = t.data_ptr()
    p = pinned.pin_tensor(t)
    assert p.is_pinned()
    assert p.data_ptr() == ptr  # registered in place, no copy
    assert _pinning.is_registered(p)
    u = pinned.uva_tensor(p, "cuda")
    assert u.device.type == "cuda" and u.shape == t.shape
    idx = torch.randint(0, 1000, (300,), device="cuda")
    assert torch.equal(u[idx].cpu(), t[idx.cpu()])
    t[0, 0] = 123.0  # the GPU view aliases host memory
    assert float(u[0, 0]) == 123.0
    pinned.unpin(p)
    assert _pinning.is_registered(p)  # the UVA view may still be read by a kernel
    del u
    gc.collect()
    assert not _pinning.is_registered(p)  # unregistered with the last view


@cuda
def test_read_only_memmap_is_pinned_and_cuda_keeps_working(tmp_path):
    """Issue 10's reproduction: a refused registration once poisoned the next CUDA call."""
    a = np.arange(4096, dtype=np.float32).reshape(256, 16)
    np.save(tmp_path / "a.npy", a)
    m = np.load(tmp_path / "a.npy", mmap_mode="r")
    f = pinned.PinnedFeature(InMemoryFeature(m))
    assert f.is_pinned  # in place with the read-only flag, or a pinned copy where refused
    assert float(torch.ones(3, device="cuda").sum()) == 3.0
    assert torch.equal(f.read([3, 1]), torch.from_numpy(a[[3, 1]]))
    assert f.read([3]).is_pinned()
    idx = torch.tensor([5, 0, 255], device="cuda")
    assert torch.equal(f.uva("cuda")[idx].cpu(), torch.from_numpy(a[[5, 0, 255]]))
    model = torch.nn.Linear(16, 4).to("cuda")  # where pinned-cuda training crashed
    assert model(torch.ones(2, 16, device="cuda")).shape == (2, 4)


@cuda
def test_graph_pin_memory():
    g = CSCGraph.from_edges([0, 1, 2, 3], [1, 2, 3, 0])
    before = g.indices.copy()
    assert g.pin_memory() is g
    indptr, indices = g.tensors("cpu")
    assert indptr.is_pinned() and indices.is_pinned()
    np.testing.assert_array_equal(g.indices, before)


@cuda
def test_clean_exit_with_registered_memory():
    """Registrations left at exit are released without the 'PyCapsule ... cudaHostUnregister'
    crash, also when the tensor dies first."""
    code = textwrap.dedent(
        """
        import torch
        from graphfeed.features.pinned import pin_tensor, uva_tensor
        a = pin_tensor(torch.randn(1 << 20))
        b = pin_tensor(torch.randn(100, 10))
        u = uva_tensor(b)
        torch.cuda.synchronize()
        print("ok")
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout
    assert "Error" not in r.stderr and "Exception" not in r.stderr


# ------------------------------------------------------------------ unpin waits for UVA views
def _fake_registration(monkeypatch, t):
    """Record ``t`` as registered in place (as pin_tensor would on a GPU machine) and capture
    the unregister calls, so the bookkeeping runs without CUDA."""
    from graphfeed import _pinning

    calls = []
    monkeypatch.setattr(_pinning._cuda, "host_unregister",
                        lambda ptr, device=None: calls.append(ptr))
    monkeypatch.setitem(_pinning._registered, t.data_ptr(), (t.numel() * t.element_size(), 0, t))
    return _pinning, calls


def test_unpin_waits_for_the_last_uva_view(monkeypatch):
    import gc

    t = torch.arange(64, dtype=torch.float32)
    P, calls = _fake_registration(monkeypatch, t)
    views = [P._HostArrayInterface(t), P._HostArrayInterface(t)]  # what uva_tensor's result holds
    P.unpin(t)
    assert calls == [] and P.is_registered(t)  # a view may still be read by a kernel
    views.pop()
    gc.collect()
    assert calls == [] and P.is_registered(t)
    views.pop()
    gc.collect()
    assert calls == [t.data_ptr()] and not P.is_registered(t)
    P.unpin(t)  # idempotent
    assert calls == [t.data_ptr()]


def test_unpin_without_views_is_immediate_and_views_after_do_not_unpin(monkeypatch):
    import gc

    t = torch.arange(32, dtype=torch.int64)
    P, calls = _fake_registration(monkeypatch, t)
    v = P._HostArrayInterface(t)
    del v
    gc.collect()
    assert calls == [] and P.is_registered(t)  # a freed view alone unregisters nothing
    P.unpin(t)
    assert calls == [t.data_ptr()]
