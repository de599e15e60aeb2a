"""The Triton sampler's kernels compile, for every variant it launches, on the triton the GPU
machines carry, and its warm-up compiles them all before the first batch; so do the variants of
the GPU feature cache's gather kernel (``features/_gpu_cache_kernels.py``).

Variants are recorded from real sampler runs (``triton_specs.recording``): without a GPU under
Triton's interpreter (``TRITON_INTERPRET=1``, set by ``conftest.py``), with one on the device.
Then ``triton_compile.py``, in a child process without the interpreter, compiles each recorded
variant for sm_90 through Triton's own argument binder (no GPU or driver needed, only triton's
bundled ``ptxas``). ``make test`` installs ``TRITON_TEST_SPEC`` (the Makefile) on CPU machines;
``make triton-compile TRITON=X.Y.Z`` runs the compile test against another release.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from load_scale import scaled
from sampling_helpers import random_graph
from triton_specs import recording, to_json

from graphfeed import _cuda

triton = pytest.importorskip("triton")

from graphfeed.sampling import _triton_kernels as K  # noqa: E402
from graphfeed.sampling.triton_sampler import TritonNeighborSampler  # noqa: E402

HAS_CUDA = _cuda.cuda_available()
if not HAS_CUDA and not K.INTERPRETED:
    pytest.skip("the Triton kernels need a GPU or TRITON_INTERPRET=1", allow_module_level=True)

DEVICE = "cuda" if HAS_CUDA else "cpu"
ROOT = Path(__file__).resolve().parents[2]
COMPILE = Path(__file__).with_name("triton_compile.py")

# Every tile shape of the sampling kernel at the default block size: next_pow2(fanout) draws per
# destination, 2 to 1024 (the fanout itself is not specialised on, so the smallest fanout of
# each shape stands for all), with and without replacement, int32 and int64 indices (the
# interpreter runs Floyd's loop once per draw: the widest shapes without replacement on int32
# indices only); the training/evaluation shapes (several layers, fanouts 1 and -1) also with
# edge ids; and the other block sizes the tests use.
_TILES = [2, 3, 5, 9, 17, 33, 65, 129, 257, 513]
_WIDE = 129  # from here on, fewer and smaller batches under the interpreter
CONFIGS = (
    [(dt, True, False, [f], 1024) for dt in ("int32", "int64") for f in _TILES]
    + [(dt, False, False, [f], 1024) for dt in ("int32", "int64") for f in _TILES
       if f < _WIDE or dt == "int32"]
    + [(dt, rep, eids, fo, 1024) for dt in ("int32", "int64") for rep in (False, True)
       for eids in (False, True) for fo in ([15, 10, 5], [1, -1], [-1, 3])]
    + [("int32", rep, eids, fo, bs) for bs in (64, 4096) for rep in (False, True)
       for eids in (False, True) for fo in ([15, 10, 5], [-1])]
)


def _graphs():
    g32 = random_graph()
    return {"int32": g32, "int64": random_graph(index_dtype=np.int64)}


@pytest.fixture(scope="module")
def runs():
    """Per config: the variants its warm-up launched, and those of real batches after it (a
    seed without in-edges, 6 random seeds, and ``sample_many`` of three batches of other
    sizes; the widest tiles without replacement only the first): few seeds, for the
    interpreter's sake (it pays per program and per draw; the variants do not depend on the
    batch size, only on argument types)."""
    graphs = _graphs()
    assert graphs["int64"].indices.dtype == np.int64 and graphs["int32"].indices.dtype == np.int32
    rng = np.random.default_rng(3)
    n = graphs["int32"].num_nodes
    isolated = n - 1  # random_graph's last nodes have no in-edges
    out = []
    for dt, rep, eids, fanouts, bs in CONFIGS:
        warm, real = set(), set()
        with recording(warm):
            s = TritonNeighborSampler.from_graph(graphs[dt], fanouts, device=DEVICE,
                                                 replace=rep, return_edge_ids=eids,
                                                 block_size=bs, seed=5, warm_up=True)
        with recording(real):
            s.sample(torch.tensor([isolated]), epoch=1, batch_index=3)
            if max(fanouts) < _WIDE or rep:
                s.sample(torch.from_numpy(rng.permutation(n)[:6]), epoch=1, batch_index=2)
                s.sample_many([torch.from_numpy(rng.permutation(n)[:k]) for k in (1, 3, 2)],
                              epoch=2, first_batch_index=0)
        out.append(((dt, rep, eids, tuple(fanouts), bs), warm, real))
    return out


def test_warm_up_launches_every_variant_that_batches_launch(runs):
    """Whatever a batch launches later was compiled by the warm-up when the sampler was built
    (so no batch compiles, and no two loader threads compile the same kernel at once)."""
    for cfg, warm, real in runs:
        missing = real - warm
        assert not missing, f"{cfg}: batches launched variants the warm-up did not: {missing}"
        assert {name for name, _, _ in warm} >= {"count_kernel", "flag_kernel", "final_kernel"}


def _compile_env() -> dict:
    """The child's environment: no interpreter, graphfeed's sources, and the triton of
    ``GRAPHFEED_COMPILE_TRITON`` (a folder with another release, from ``make triton-compile``)
    first on the path when it is set."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    path = [str(ROOT / "src")]
    extra = os.environ.get("GRAPHFEED_COMPILE_TRITON", "").strip()
    if extra:
        path.insert(0, str(Path(extra).resolve()))
    env["PYTHONPATH"] = os.pathsep.join(path + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("TRITON_CACHE_DIR", str(ROOT / ".triton-envs" / "cache"))
    return env


@pytest.mark.timeout(1800)
def test_every_launched_variant_compiles_for_sm90(runs, tmp_path):
    specs = set().union(*(warm | real for _, warm, real in runs))
    kernels = {name for name, _, _ in specs}
    assert kernels == {"count_kernel", "sample_kernel", "sample_all_kernel", "flag_kernel",
                       "final_kernel"}
    # the tile shapes and index types the configs were chosen to reach
    tiles = {dict(c)["KPAD"] for name, _, c in specs if name == "sample_kernel"}
    assert tiles >= {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
    index_types = {args[0][1] for name, args, _ in specs if name == "sample_kernel"}
    assert index_types == {"int32", "int64"}

    compiled, tail = _compile_for_sm90(specs, tmp_path, timeout=scaled(1700))
    assert compiled >= len(specs), tail


def _compile_for_sm90(specs, tmp_path, *, timeout: float) -> tuple[int, str]:
    """``triton_compile.py`` over ``specs`` in a child process without the interpreter:
    ``(variants compiled, the output's tail)``; fails the test naming a variant that does not
    compile (skips where triton has no CUDA backend, except on Linux x86-64)."""
    path = tmp_path / "specs.json"
    path.write_text(to_json(specs))
    p = subprocess.run([sys.executable, str(COMPILE), str(path)], env=_compile_env(),
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode == 77:
        if sys.platform == "linux" and platform.machine() == "x86_64":
            pytest.fail("this triton has no CUDA backend; the kernels cannot be checked")
        pytest.skip("triton has no CUDA backend on this platform")
    tail = (p.stdout[-3000:] + p.stderr[-3000:]).strip()
    assert p.returncode == 0, f"a kernel variant does not compile for sm_90:\n{tail}"
    return json.loads(p.stdout.strip().splitlines()[-1])["compiled"], tail


def _pinned_triton() -> str:
    spec = re.search(r"^TRITON_TEST_SPEC \?= triton==(\S+)", (ROOT / "Makefile").read_text(),
                     re.M)
    assert spec, "the Makefile names the triton the tests compile with"
    return spec.group(1)


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="checks CI's environment")
def test_ci_compiles_with_the_triton_of_the_gpu_machines():
    """CI's environment (CPU torch) carries the pinned triton, so the compile test above checks
    the release the GPU machines have, not whatever pip would pick."""
    if torch.version.cuda is not None:
        pytest.skip("a CUDA torch build brings its own triton")
    assert triton.__version__ == _pinned_triton()


def _gpu_cache_variants() -> set:
    """Every variant ``GPUCachedFeature``'s gather kernel can launch: rows as int32 words or as
    bytes, each word block of ``BLOCK_WS``, ids and ``out`` 16-byte aligned or not (a slice of a
    larger tensor); the other tensors are the cache's own allocations (aligned) and ``n`` and
    ``words`` are not specialised on their values."""
    from graphfeed.features import _gpu_cache_kernels as C

    out = set()
    for word in ("int32", "uint8"):
        for bw in C.BLOCK_WS:
            for ids_aligned in (True, False):
                for out_aligned in (True, False):
                    args = (("tensor", "int64", ids_aligned), ("tensor", "int32", True),
                            ("tensor", word, True), ("tensor", word, True),
                            ("tensor", word, out_aligned), ("int", "i32"), ("int", "i32"),
                            ("tensor", "int64", True))
                    out.add(("cached_gather_kernel", args,
                             (("BLOCK_R", C.TILE_WORDS // bw), ("BLOCK_W", bw))))
    return out


@pytest.mark.timeout(900)
def test_gpu_cache_gather_kernel_compiles_for_sm90(tmp_path):
    """The GPU cache's gather kernel: the variants its reads launch (recorded under the
    interpreter: float rows, byte rows, wide rows, an unaligned ``out``) are among the listed
    ones, and every listed variant compiles for sm_90."""
    from graphfeed.features import _gpu_cache_kernels as C
    from graphfeed.features.gpu_cache import GPUCachedFeature
    from graphfeed.features.memory import InMemoryFeature

    listed = _gpu_cache_variants()
    seen: set = set()
    rng = np.random.default_rng(0)
    with recording(seen, module=C, names=("cached_gather_kernel",)):
        for dtype, shape in ((torch.float32, (100,)), (torch.uint8, (3,)),
                             (torch.float64, (300,)), (torch.bfloat16, (40,))):
            data = torch.zeros((50, *shape), dtype=dtype)
            cache = GPUCachedFeature(InMemoryFeature(data), 10 * data[0].numel()
                                     * data.element_size(), device="cpu", policy="degree",
                                     degrees=rng.random(50))
            ids = torch.from_numpy(rng.integers(0, 50, 21))
            cache.read(ids)
            buf = torch.empty((21, *shape), dtype=dtype)
            cache.read(ids[1:], out=buf[1:])  # a slice: not 16-byte aligned
            assert cache.uses_gather_kernel
    assert seen and seen <= listed, seen - listed
    compiled, tail = _compile_for_sm90(listed, tmp_path, timeout=scaled(850))
    assert compiled == len(listed), tail
