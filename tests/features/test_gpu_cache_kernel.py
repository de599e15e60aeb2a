"""GPUCachedFeature's one-launch gather (``features/_gpu_cache_kernels.py``): the static
policies' reads over a UVA source go through it, with the same rows and statistics as the torch
ops they replace, and fall back to those ops where it cannot run. Run under Triton's interpreter
on CPU tensors (``tests/conftest.py`` sets it where there is no GPU); the sm_90 compile check of
its variants is in ``tests/sampling/test_triton_compile.py``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_gpu_cache import cache_over

from graphfeed.features.disk import DiskFeature
from graphfeed.features.gpu_cache import GPUCachedFeature
from graphfeed.features.memory import InMemoryFeature

triton = pytest.importorskip("triton")
from graphfeed.features import _gpu_cache_kernels as K  # noqa: E402

if not K.INTERPRETED:
    pytest.skip("runs the kernel on CPU tensors under TRITON_INTERPRET=1",
                allow_module_level=True)

N = 300


def _cache(data: torch.Tensor, policy: str, kernel: bool = True):
    c = cache_over(InMemoryFeature(data), policy, 40)
    if not kernel:
        c._kernel = False  # the torch ops the kernel replaces
    return c


def _data(dtype, shape):
    g = torch.Generator().manual_seed(1)
    x = torch.randn((N, *shape), generator=g) * 50
    return x.to(dtype)


@pytest.mark.parametrize("policy", ["degree", "frequency"])
@pytest.mark.parametrize("dtype,shape", [
    (torch.float32, (100,)),   # int32 words, one word block
    (torch.float64, (300,)),   # 600 words: three word blocks of 256
    (torch.bfloat16, (3,)),    # 6 bytes a row: byte words
    (torch.uint8, (1,)),
    (torch.int64, ()),         # scalar rows
    (torch.float16, (2, 5)),   # 2-D rows
    (torch.bool, (7,)),
])
def test_same_rows_and_counts_as_the_torch_read(policy, dtype, shape):
    data = _data(dtype, shape)
    fast, slow = _cache(data, policy), _cache(data, policy, kernel=False)
    rng = np.random.default_rng(7)
    for n in (1, 13, 700):
        ids = torch.from_numpy(rng.integers(0, N, n))
        a, b = fast.read(ids), slow.read(ids)
        assert fast.uses_gather_kernel and not slow.uses_gather_kernel
        assert a.dtype == dtype and a.shape == (n, *shape)
        assert torch.equal(a, data[ids]) and torch.equal(b, data[ids])
    assert fast.stats() == slow.stats()
    assert 0 < fast.hits < fast.hits + fast.misses
    fast.reset_stats()
    assert (fast.hits, fast.misses, fast.bytes_moved) == (0, 0, 0)
    ids = torch.from_numpy(rng.integers(0, N, 50))
    fast.read(ids)
    held = set(fast.cached_ids().tolist())
    hits = sum(int(i) in held for i in ids.tolist())
    assert (fast.hits, fast.misses) == (hits, 50 - hits)
    assert fast.bytes_moved == (50 - hits) * fast.row_nbytes


def test_into_out():
    data = _data(torch.float32, (16,))
    c = _cache(data, "degree")
    ids = torch.tensor([5, 0, 299, 5, 17])
    buf = torch.full((6, 16), -1.0)
    assert c.read(ids, out=buf[1:]).data_ptr() == buf[1:].data_ptr()  # unaligned: still the kernel
    assert torch.equal(buf[1:], data[ids]) and torch.equal(buf[0], torch.full((16,), -1.0))
    assert c.uses_gather_kernel and c.hits + c.misses == 5


def test_clock_and_sources_without_uva_keep_the_torch_read(tmp_path):
    data = _data(torch.float32, (8,))
    clock = GPUCachedFeature(InMemoryFeature(data), 40 * 32, device="cpu", policy="clock")
    clock.read(torch.arange(20))
    assert not clock.uses_gather_kernel and clock.num_cached > 0  # CLOCK admits its misses
    np.save(tmp_path / "f.npy", data.numpy())
    on_disk = GPUCachedFeature(DiskFeature(tmp_path / "f.npy"), 40 * 32, device="cpu",
                               policy="degree", degrees=np.arange(N))
    ids = torch.tensor([299, 3, 298, 3])
    assert torch.equal(on_disk.read(ids), data[ids])
    assert not on_disk.uses_gather_kernel and (on_disk.hits, on_disk.misses) == (2, 2)


def test_a_kernel_that_fails_warns_once_and_reads_with_torch(monkeypatch):
    data = _data(torch.float32, (8,))
    c = _cache(data, "degree")

    class Broken:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                raise RuntimeError("no such instruction")
            return launch

    monkeypatch.setattr(K, "cached_gather_kernel", Broken())
    ids = torch.tensor([3, 1, 4, 1, 5])
    with pytest.warns(RuntimeWarning, match="gather kernel does not work here.*no such"):
        out = c.read(ids)
    assert torch.equal(out, data[ids]) and not c.uses_gather_kernel
    assert torch.equal(c.read(ids), data[ids])  # torch from now on, no second warning
    assert c.hits + c.misses == 10
