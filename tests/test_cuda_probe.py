"""graphfeed._cuda: asking about GPUs never starts CUDA; pinning picks the right flags and leaves
no CUDA error behind. Simulated on CPU: torch is made to look like a CUDA build, every call that
would initialise the CUDA driver raises, and the driver library is a fake that records calls."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest
import torch

from graphfeed import _cuda, cuda_alloc
from graphfeed.errors import GraphfeedError

# what initialises the CUDA driver in the asking process (and so breaks a later fork)
_DRIVER_STARTERS = [
    (torch.cuda, "is_available"),
    (torch.cuda, "init"),
    (torch.cuda, "_lazy_init"),
    (torch.cuda, "current_device"),
    (torch.cuda, "mem_get_info"),
    (torch.cuda, "set_device"),
    (torch.cuda, "cudart"),
]


@pytest.fixture
def cuda_build(monkeypatch):
    """A CUDA build of torch with NVML answering 2 devices; driver-initialising calls raise."""
    started = []

    def forbid(name):
        def f(*a, **k):
            started.append(name)
            raise AssertionError(f"{name} initialises the CUDA driver")

        return f

    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    for mod, name in _DRIVER_STARTERS:
        monkeypatch.setattr(mod, name, forbid(name))
    monkeypatch.setattr(torch._C, "_cuda_getDeviceCount", forbid("cudaGetDeviceCount"), raising=False)
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: 2, raising=False)
    monkeypatch.setattr(torch.cuda, "_cached_device_count", None, raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    return started


def test_asking_never_starts_cuda(cuda_build, monkeypatch):
    assert _cuda.device_count() == 2 and _cuda.cuda_available()
    assert _cuda.resolve_device("auto") == torch.device("cuda", 0)
    assert _cuda.resolve_device("auto", "cpu-cpu") == torch.device("cpu")  # the mode decides
    assert _cuda.resolve_device("auto", "pinned-cuda") == torch.device("cuda", 0)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert _cuda.resolve_device("cuda") == torch.device("cuda", 1)  # one rank per GPU
    assert _cuda.resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match="only 2 CUDA device"):
        _cuda.resolve_device("cuda:2")
    from graphfeed.distributed.world import check_gpus_for_ranks

    check_gpus_for_ranks(2, "nccl")
    check_gpus_for_ranks(8, "gloo")
    from graphfeed.placement import detect_hardware

    detect_hardware(device="cpu")
    assert cuda_build == []


def test_allocator_decision_never_starts_cuda(cuda_build, monkeypatch):
    for v in cuda_alloc.USER_VARS + (cuda_alloc.OPT_OUT_VAR,):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(cuda_alloc, "_apply_runtime", lambda torch, conf: True)
    monkeypatch.setattr(cuda_alloc, "_current_settings", lambda torch: "")
    monkeypatch.setattr(cuda_alloc, "_done", False)
    monkeypatch.setattr(cuda_alloc, "_result", None)
    try:
        with pytest.warns(cuda_alloc.GraphfeedAllocatorWarning, match="enabled expandable"):
            assert cuda_alloc.configure_cuda_allocator() == cuda_alloc.EXPANDABLE
    finally:
        monkeypatch.setattr(cuda_alloc, "_done", False)
        monkeypatch.setattr(cuda_alloc, "_result", None)
    assert cuda_build == []


def test_without_nvml_a_child_process_answers(cuda_build, monkeypatch):
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: -1)
    monkeypatch.setattr(_cuda, "_probe_cache", {})
    seen = []

    def fake_run(cmd, **kw):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout="3\n", stderr="")

    monkeypatch.setattr(_cuda.subprocess, "run", fake_run)
    assert _cuda.device_count() == 3
    assert _cuda.device_count() == 3  # asked once per process
    assert len(seen) == 1 and seen[0][0] == sys.executable
    assert cuda_build == []


def test_cpu_build_answers_without_torch_cuda(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert _cuda.device_count() == 0 and not _cuda.cuda_available()
    assert _cuda.resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match="no CUDA support"):
        _cuda.resolve_device("cuda")
    with pytest.raises(ValueError, match="unknown device 'gpu0'"):
        _cuda.resolve_device("gpu0")


def test_ranks_beyond_gpus_is_one_clear_line(cuda_build):
    from graphfeed.distributed.world import check_gpus_for_ranks

    with pytest.raises(GraphfeedError) as e:
        check_gpus_for_ranks(3, "nccl")
    msg = str(e.value)
    assert "3 ranks per machine but 2 GPU(s)" in msg and "--nproc 2" in msg and "gloo" in msg
    assert "\n" not in msg


def test_no_gpu_for_nccl(no_gpu):
    from graphfeed.distributed.world import check_gpus_for_ranks

    with pytest.raises(GraphfeedError, match="no CUDA device is visible"):
        check_gpus_for_ranks(1, "nccl")


def test_rank_forked_from_a_tainted_server_refuses(cuda_build, monkeypatch):
    from graphfeed.distributed.world import check_gpus_for_ranks

    fake = types.ModuleType("graphfeed.distributed._preload")
    fake.CUDA_TAINTED_BY = "some_lib"
    monkeypatch.setitem(sys.modules, "graphfeed.distributed._preload", fake)
    with pytest.raises(GraphfeedError, match="'some_lib' initialised the CUDA driver"):
        check_gpus_for_ranks(1, "nccl")


def test_start_cuda_in_a_rank_forked_from_a_tainted_server_refuses(monkeypatch):
    """Any rank that starts CUDA (gloo ranks on a GPU too), not only NCCL's check."""
    from graphfeed import cuda_alloc

    fake = types.ModuleType("graphfeed.distributed._preload")
    fake.CUDA_TAINTED_BY = "some_lib"
    monkeypatch.setitem(sys.modules, "graphfeed.distributed._preload", fake)
    with pytest.raises(GraphfeedError, match="'some_lib' initialised the CUDA driver"):
        cuda_alloc.start_cuda()


def test_preload_skips_an_import_that_starts_the_driver(tmp_path):
    """A module whose import initialises the driver is probed in a forked child and left out of
    the server (the ranks import it after the fork); the server's driver stays untouched. The
    driver is a fake whose ``cuInit`` state lives in the process, as the real one's does."""
    (tmp_path / "starts_cuda.py").write_text("import graphfeed._cuda as c\nc._driver().init()\n")
    (tmp_path / "harmless.py").write_text("X = 1\n")
    code = (
        "import sys, graphfeed._cuda as c\n"
        "class D:\n"
        "    up = False\n"
        "    def init(self): D.up = True\n"
        "    def initialized(self): return D.up\n"
        "c._driver_factory = D\n"
        "import graphfeed.distributed._preload as p\n"
        "print(p.SKIPPED_FOR_CUDA, p.CUDA_TAINTED_BY, c.driver_initialized(),"
        " 'harmless' in sys.modules, 'starts_cuda' in sys.modules)\n"
    )
    env = dict(os.environ, GRAPHFEED_PRELOAD="starts_cuda,harmless",
               PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["['starts_cuda']", "None", "False", "True", "False"]


def test_preloaded_graphfeed_modules_import_no_other_package():
    """The preload imports graphfeed's modules without a probe (``_CORE``); that is safe while
    they pull in no third-party package beyond numpy, torch and numba (PyG's import, for one,
    starts the driver on torch 2.11 + PyG 2.8). PyG is blocked here, as a probe that found it
    starting the driver would leave it out."""
    code = (
        "import sys; sys.modules['torch_geometric'] = None;"
        "import graphfeed.distributed._preload as p;"
        "print(sorted(m for m in ('torch_geometric', 'triton', 'cupy', 'jax', 'transformers',"
        " 'accelerate', 'lmdb', 'pymetis') if sys.modules.get(m) is not None))"
    )
    env = dict(os.environ, GRAPHFEED_PRELOAD="")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_fork_server_preload_leaves_the_driver_alone():
    """The real preload, in a fresh interpreter: NVML-based checks on, the driver untouched."""
    code = (
        "import os, graphfeed.distributed._preload as p, graphfeed._cuda as c;"
        "print(p.CUDA_TAINTED_BY, os.environ['PYTORCH_NVML_BASED_CUDA_CHECK'],"
        " c.driver_initialized())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "1", "False"]


# ---------------------------------------------------------------------- pinning flags
class FakeDriver:
    """Stands in for graphfeed._cuda._Driver; ``refuse`` lists flag sets to refuse."""

    def __init__(self, refuse=()):
        self.calls = []
        self.refuse = set(refuse)
        self.refuse_ptrs = set()  # addresses refused whatever the flags

    def initialized(self):
        return True

    def error_name(self, code):
        return f"CUDA_ERROR_{code}"

    def register(self, ptr, nbytes, flags, device):
        self.calls.append(("register", ptr, nbytes, flags, device))
        return 1 if flags in self.refuse or ptr in self.refuse_ptrs else 0

    def unregister(self, ptr, device):
        self.calls.append(("unregister", ptr, device))
        return 0


RW = _cuda.REGISTER_PORTABLE | _cuda.REGISTER_DEVICEMAP
RO = RW | _cuda.REGISTER_READ_ONLY


@pytest.fixture
def fake_driver(monkeypatch):
    drv = FakeDriver()
    monkeypatch.setattr(_cuda, "_driver_factory", lambda: drv)
    monkeypatch.setattr(_cuda, "device_count", lambda: 1)
    monkeypatch.setattr(cuda_alloc, "start_cuda", lambda: 0)
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self: False)

    def no_cudart():
        raise AssertionError("torch's cudart binding must not be used")

    monkeypatch.setattr(torch.cuda, "cudart", no_cudart)
    return drv


def test_read_only_mapping_registers_read_only_first(fake_driver, tmp_path):
    from graphfeed import _pinning as pinned

    np.save(tmp_path / "a.npy", np.arange(4096, dtype=np.float32))
    m = np.load(tmp_path / "a.npy", mmap_mode="r")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: the array is not writable (once)
        t = torch.from_numpy(m)
    assert pinned.pin_tensor(t) is t
    assert fake_driver.calls == [("register", t.data_ptr(), 4096 * 4, RO, 0)]
    assert pinned.is_registered(t)
    pinned.unpin(t)
    assert fake_driver.calls[-1] == ("unregister", t.data_ptr(), 0)
    assert not pinned.is_registered(t)


def test_writable_memory_registers_read_write(fake_driver):
    from graphfeed import _pinning as pinned

    t = torch.zeros(10_000)
    assert pinned.pin_tensor(t) is t
    assert fake_driver.calls == [("register", t.data_ptr(), 40_000, RW, 0)]
    pinned.unpin(t)


def test_refused_registration_falls_back_to_a_copy(fake_driver, monkeypatch):
    from graphfeed import _pinning as pinned

    fake_driver.refuse = {RW, RO}
    copies = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: copies.append(1) or self.clone())
    t = torch.zeros(1000)
    out = pinned.pin_tensor(t)
    assert out is not t and copies == [1]
    # in place: the right flags first, then the other; then the same for an exact-size copy;
    # only then torch's pinned allocator
    assert [c[3] for c in fake_driver.calls] == [RW, RO, RW, RO]
    assert fake_driver.calls[2][1] != t.data_ptr()
    assert not pinned.is_registered(t)


def test_refused_in_place_registration_pins_an_exact_size_copy(fake_driver, monkeypatch):
    """Where a tensor's own pages cannot be registered, the copy is host memory of exactly its
    size registered through the driver, not torch's pinned allocator (which rounds a block up
    to a power of two: 9 GB would take 16 GB); it is unregistered when it is freed."""
    import gc

    from graphfeed import _pinning as pinned

    monkeypatch.setattr(torch.Tensor, "pin_memory",
                        lambda self: pytest.fail("torch's pinned allocator must not be used"))
    t = torch.arange(9000, dtype=torch.float32)
    fake_driver.refuse_ptrs = {t.data_ptr()}
    out = pinned.pin_tensor(t)
    assert out is not t and torch.equal(out, t)
    assert out.untyped_storage().nbytes() == t.untyped_storage().nbytes() == 36_000
    assert fake_driver.calls[-1] == ("register", out.data_ptr(), 36_000, RW, 0)
    assert pinned.is_registered(out) and not pinned.is_registered(t)
    ptr = out.data_ptr()
    del out
    gc.collect()
    assert fake_driver.calls[-1] == ("unregister", ptr, 0)
    assert ptr not in pinned._registered


def test_register_pinned_reports_the_refusal(fake_driver, tmp_path):
    from graphfeed.distributed import register_pinned

    a = np.ones(1000)
    with register_pinned(a) as region:
        assert fake_driver.calls[-1][3] == RW and region.nbytes == 8000
    assert fake_driver.calls[-1][0] == "unregister"
    fake_driver.refuse = {RO, RW}
    a.flags.writeable = False
    with pytest.raises(GraphfeedError, match="CUDA_ERROR_1.*read-only registration"):
        register_pinned(a)


def test_mapping_writable_reads_proc_maps(tmp_path):
    a = np.zeros(1 << 16)
    assert _cuda.mapping_writable(a.ctypes.data, a.nbytes) is True
    np.save(tmp_path / "z.npy", np.zeros(1 << 16))
    m = np.load(tmp_path / "z.npy", mmap_mode="r")
    assert _cuda.mapping_writable(m.ctypes.data, m.nbytes) is False
    maps = tmp_path / "maps"
    maps.write_text("1000-2000 rw-p 0 0:0 0\n2000-3000 r--s 0 0:0 0 /x\n5000-6000 rw-p 0 0:0 0\n")
    assert _cuda.mapping_writable(0x1000, 0x1000, str(maps)) is True
    assert _cuda.mapping_writable(0x1800, 0x1000, str(maps)) is False
    assert _cuda.mapping_writable(0x4000, 0x100, str(maps)) is None  # unmapped: unknown
    assert _cuda.mapping_writable(0x1000, 0x10, str(tmp_path / "missing")) is None


# ---------------------------------------------------------------------- the ctypes wrapper
class FakeLib:
    """libcuda's entry points as Python callables (ctypes passes byref() objects through)."""

    def __init__(self, initialized=True, register_result=0):
        self.log = []
        self._init = initialized
        self._reg = register_result
        for name in ("cuCtxGetCurrent", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2",
                     "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuMemHostRegister_v2",
                     "cuMemHostUnregister", "cuGetErrorName"):
            setattr(self, name, self._fn(name))

    def _fn(self, name):
        def f(*args):
            self.log.append(name)
            if name == "cuCtxGetCurrent":
                return 0 if self._init else 3
            if name == "cuMemHostRegister_v2":
                return self._reg
            if name == "cuGetErrorName":
                return 1
            return 0

        return f


def test_driver_wrapper_pushes_and_pops_the_primary_context():
    lib = FakeLib(register_result=201)
    drv = _cuda._Driver(lib)
    assert drv.register(0x1000, 4096, RW, 0) == 201
    assert lib.log == ["cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxPushCurrent_v2", "cuMemHostRegister_v2",
                       "cuCtxPopCurrent_v2", "cuDevicePrimaryCtxRelease_v2"]
    assert drv.error_name(201) == "CUresult 201"
    assert drv.initialized()
    assert not _cuda._Driver(FakeLib(initialized=False)).initialized()
    assert lib.cuMemHostRegister_v2.argtypes[1] is ctypes.c_size_t


def test_a_registration_keeps_the_primary_context_retained_until_unregistered():
    """Releasing the primary context right after cuMemHostRegister would reset it where torch
    had not created it yet, and the registration would silently go with it: a successful
    registration holds its retain until it is unregistered; a refused one holds nothing."""
    lib = FakeLib()
    drv = _cuda._Driver(lib)

    def balance():
        return lib.log.count("cuDevicePrimaryCtxRetain") - lib.log.count("cuDevicePrimaryCtxRelease_v2")

    assert drv.register(0x1000, 4096, RW, 0) == 0
    assert balance() == 1 and drv.held() == 1
    assert lib.log[-2:] == ["cuMemHostRegister_v2", "cuCtxPopCurrent_v2"]  # no release after it
    assert drv.register(0x9000, 4096, RW, 0) == 0
    assert balance() == 2
    assert drv.unregister(0x1000, 0) == 0
    assert balance() == 1 and drv.held() == 1
    assert drv.unregister(0x9000, 0) == 0
    assert balance() == 0 and drv.held() == 0
    lib._reg = 201  # refused: the retain taken for the call is given back at once
    assert drv.register(0x5000, 4096, RW, 0) == 201
    assert balance() == 0 and drv.held() == 0
    assert drv.unregister(0x5000, 0) == 0  # never registered: nothing held to release
    assert balance() == 0
