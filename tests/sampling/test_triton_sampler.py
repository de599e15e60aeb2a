"""TritonNeighborSampler: the NeighborSampler invariants, uniformity and reproducibility.

Without a GPU the kernels run in Triton's CPU interpreter over CPU tensors
(``TRITON_INTERPRET=1``, set by ``tests/conftest.py`` before anything imports triton); with
one, the same tests run the compiled kernels on CUDA tensors, and the ``cuda`` tests at the end
add what only a GPU can check.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from sampling_helpers import check_minibatch, random_graph
from scipy.stats import chisquare
from test_uniformity import P_MIN, fan_graph, positions, subset_pvalue

from graphfeed import _cuda

triton = pytest.importorskip("triton")
tl = triton.language

from graphfeed.errors import GraphfeedError  # noqa: E402
from graphfeed.graph.csc import CSCGraph  # noqa: E402
from graphfeed.placement.modes import mode_spec  # noqa: E402
from graphfeed.sampling import build_sampler  # noqa: E402
from graphfeed.sampling import _triton_kernels as K  # noqa: E402
from graphfeed.sampling.torch_sampler import TorchNeighborSampler  # noqa: E402
from graphfeed.sampling.triton_sampler import GPUSampler, TritonNeighborSampler  # noqa: E402

HAS_CUDA = _cuda.cuda_available()
if not HAS_CUDA and not K.INTERPRETED:
    pytest.skip("the Triton kernels need a GPU or TRITON_INTERPRET=1", allow_module_level=True)

DEVICE = "cuda" if HAS_CUDA else "cpu"
GRAPH = random_graph()  # in-degrees 0..19, and hubs of 70 and 150 (both sampling paths)


def make(graph=GRAPH, fanouts=(5, 3), **kw):
    # large blocks by default: the interpreter's cost is per program and per operation
    kw.setdefault("block_size", 4096)
    return TritonNeighborSampler.from_graph(graph, list(fanouts), device=DEVICE, **kw)


def _same(a, b):
    assert torch.equal(a.seeds.cpu(), b.seeds.cpu())
    for x, y in zip(a.blocks, b.blocks, strict=True):
        assert torch.equal(x.edge_index.cpu(), y.edge_index.cpu())
        assert torch.equal(x.src_nodes.cpu(), y.src_nodes.cpu())
        assert x.num_dst == y.num_dst
        assert (x.edge_ids is None) == (y.edge_ids is None)
        if x.edge_ids is not None:
            assert torch.equal(x.edge_ids.cpu(), y.edge_ids.cpu())


def _differ(a, b):
    return any(not torch.equal(x.edge_index.cpu(), y.edge_index.cpu())
               or not torch.equal(x.src_nodes.cpu(), y.src_nodes.cpu())
               for x, y in zip(a.blocks, b.blocks))


# ------------------------------------------------------------------------------ invariants
@pytest.mark.parametrize("fanouts", [[5, 3], [1, -1], [15, 10, 5], [40, 2], [100]])
@pytest.mark.parametrize("replace", [False, True])
def test_invariants(fanouts, replace):
    seeds = np.random.default_rng(len(fanouts) + 7 * replace).permutation(GRAPH.num_nodes)[:40]
    seeds = np.concatenate([[0, 1], seeds[~np.isin(seeds, [0, 1])]])  # the two hubs
    s = make(fanouts=fanouts, replace=replace, seed=11, return_edge_ids=True)
    mb = s.sample(torch.from_numpy(seeds), epoch=1, batch_index=4)
    check_minibatch(GRAPH, mb, seeds, fanouts, replace)
    assert s.fanouts == tuple(fanouts) and s.device.type == DEVICE
    assert mb.input_nodes.device.type == DEVICE
    for b in mb.blocks:
        assert b.edge_index.is_contiguous() and b.src_nodes.is_contiguous()


def test_without_edge_ids_and_int64_indices():
    g64 = CSCGraph(GRAPH.indptr, GRAPH.indices.astype(np.int64))
    seeds = np.arange(0, 300, 7)
    a = make(g64, seed=2).sample(seeds, batch_index=3)
    assert all(b.edge_ids is None for b in a.blocks)
    check_minibatch(g64, a, seeds, [5, 3], False)
    _same(a, make(GRAPH, seed=2).sample(seeds, batch_index=3))  # same draws, int32 indices


def test_empty_seeds_and_edgeless_graph():
    g = CSCGraph.from_edges(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 4)
    for fanouts in ([3, -1], [-1]):
        mb = make(g, fanouts, replace=True).sample([0, 3])
        check_minibatch(g, mb, [0, 3], fanouts, True)
    mb = make(fanouts=[3], return_edge_ids=True).sample(torch.empty(0, dtype=torch.int64))
    assert mb.input_nodes.numel() == 0 and mb.blocks[0].edge_ids.numel() == 0


# -------------------------------------------------------------------- reproducibility
@pytest.mark.parametrize("replace", [False, True])
def test_same_batch_whatever_the_block_size(replace):
    """A destination's draws come from (batch key, position * fanout + draw): the block size
    (lanes per program, hence the grid and the tiles) changes nothing, nor does a new sampler."""
    seeds = np.concatenate([[1], np.arange(0, 300, 30)])  # with both hubs (degrees 70, 150)
    fanouts = [4, 3, 40]  # 40 (the seeds' layer): two lanes per program at block_size 128
    ref = make(fanouts=fanouts, replace=replace, seed=5, return_edge_ids=True).sample(
        seeds, epoch=2, batch_index=9)
    for bs in (128, 1024):
        s = make(fanouts=fanouts, replace=replace, seed=5, return_edge_ids=True, block_size=bs)
        _same(ref, s.sample(seeds, epoch=2, batch_index=9))
    _same(ref, s.sample(seeds, epoch=2, batch_index=9))  # and again on the same sampler


def test_depends_on_seed_epoch_and_batch():
    seeds = torch.from_numpy(np.flatnonzero(GRAPH.in_degrees > 8)[:30])
    s = make(seed=1)
    base = s.sample(seeds, epoch=0, batch_index=0)
    assert _differ(base, s.sample(seeds, epoch=0, batch_index=1))
    assert _differ(base, s.sample(seeds, epoch=1, batch_index=0))
    assert _differ(base, make(seed=2).sample(seeds))
    assert _differ(base, make(seed=1 << 63).sample(seeds))  # the whole 64-bit seed counts


@pytest.mark.parametrize("replace", [False, True])
def test_sample_many_equals_one_batch_at_a_time(replace, monkeypatch):
    """``sample_many`` returns exactly the batches ``sample`` gives, with one host read per
    layer for all of them."""
    rng = np.random.default_rng(2)
    batches = [rng.permutation(300)[:n] for n in (40, 1, 0, 25)]
    s = make(fanouts=[4, -1, 3], replace=replace, seed=8, return_edge_ids=True)
    one_by_one = [s.sample(torch.from_numpy(b), epoch=3, batch_index=7 + i)
                  for i, b in enumerate(batches)]
    tolist, reads = torch.Tensor.tolist, []

    def counted_tolist(t):
        reads.append(tuple(t.shape))
        return tolist(t)

    monkeypatch.setattr(torch.Tensor, "tolist", counted_tolist)
    many = s.sample_many([torch.from_numpy(b) for b in batches], epoch=3, first_batch_index=7)
    # one read per layer, every batch's sizes at once (E, new nodes, seed error, padding)
    assert reads == [(4, 4)] * 3
    assert [mb.batch_index for mb in many] == [7, 8, 9, 10]
    for mb, ref, b in zip(many, one_by_one, batches, strict=True):
        _same(mb, ref)
        check_minibatch(GRAPH, mb, b, [4, -1, 3], replace)
    assert s.sample_many([]) == []
    with pytest.raises(GraphfeedError, match=r"seed id 5 appears twice"):
        s.sample_many([torch.tensor([1, 2]), torch.tensor([5, 5])])


def test_with_fanouts_shares_the_graph():
    s = make(seed=4, replace=True, return_edge_ids=True, block_size=128)
    other = s.with_fanouts([-1])
    assert isinstance(other, TritonNeighborSampler) and other.fanouts == (-1,)
    assert (other.seed, other.replace, other.block_size) == (4, True, 128)
    assert other.indptr is s.indptr and other._host is s._host
    check_minibatch(GRAPH, other.sample([3, 4]), [3, 4], [-1], True)


def test_kernel_launches_and_host_reads_per_layer(monkeypatch):
    """Per layer: four Triton kernels, two cumsums and one host read (the output sizes); fanout
    -1 reads its edge count once more. Counted by wrapping the launches (what the profiler
    counts on a GPU is in ``test_cuda_launches_and_syncs_per_batch``)."""
    calls = {"kernels": 0, "cumsum": 0, "tolist": 0, "int": 0}

    class Counted:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            calls["kernels"] += 1
            return self.kernel[grid]

    for name in ("count_kernel", "sample_kernel", "sample_all_kernel", "flag_kernel",
                 "final_kernel"):
        monkeypatch.setattr(K, name, Counted(getattr(K, name)))
    cumsum, tolist, to_int = torch.cumsum, torch.Tensor.tolist, torch.Tensor.__int__
    # built before counting: a sampler reads the graph's largest in-degree once, when built
    per_layer, all_neighbours = make(fanouts=[15, 10, 5]), make(fanouts=[-1, 3])

    def counted_cumsum(*a, **k):
        calls["cumsum"] += 1
        return cumsum(*a, **k)

    def counted_tolist(t):
        calls["tolist"] += 1
        return tolist(t)

    def counted_int(t):
        calls["int"] += 1
        return to_int(t)

    monkeypatch.setattr(torch, "cumsum", counted_cumsum)
    monkeypatch.setattr(torch.Tensor, "tolist", counted_tolist)
    monkeypatch.setattr(torch.Tensor, "__int__", counted_int)
    seeds = torch.arange(0, 300, 9)
    per_layer.sample(seeds)
    assert calls == {"kernels": 12, "cumsum": 6, "tolist": 3, "int": 0}
    calls.update(kernels=0, cumsum=0, tolist=0)
    all_neighbours.sample(seeds)
    assert calls == {"kernels": 8, "cumsum": 4, "tolist": 2, "int": 1}


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize("seeds, match", [
    # tensors: checked by the first kernel, reported after the layer's sync
    (torch.tensor([1, 2, 1]), r"seed id 1 appears twice \(positions 0 and 2\)"),
    (torch.tensor([4, 0, 300, 4]), r"seed id 300 \(position 2\) is out of range \[0, 300\)"),
    (torch.tensor([-1, 2], dtype=torch.int32), r"seed id -1 \(position 0\) is out of range"),
    # other inputs: the torch sampler's checks
    ([1, 2, 1], r"seed id 1 appears twice \(positions 0 and 2\)"),
    ([0, 300], r"seed id 300 \(position 1\) is out of range \[0, 300\)"),
    ([[1, 2]], r"1-D"),
    (torch.tensor([1.0]), r"integer"),
])
def test_bad_seeds(seeds, match):
    s = make(fanouts=[2, 3])
    with pytest.raises(GraphfeedError, match=match):
        s.sample(seeds)
    check_minibatch(GRAPH, s.sample([4, 2]), [4, 2], [2, 3], False)  # still usable


def test_bad_construction(monkeypatch):
    indptr, indices = GRAPH.tensors()

    class Labor:
        kind = "labor"

    cases = [
        (dict(fanouts=[1025]), "fanouts must be ints between 1 and 1,024"),
        (dict(block_size=100), "block_size must be a power of two"),
        (dict(method=Labor()), "uniformly only; method kind 'labor'"),
        (dict(method=3), "method must be a SamplingMethod or None"),
    ]
    for kw, match in cases:
        with pytest.raises(GraphfeedError, match=match):
            TritonNeighborSampler(indptr, indices, **{"fanouts": [2], **kw})
    monkeypatch.setattr(K, "INTERPRETED", False)
    with pytest.raises(GraphfeedError, match="runs on a CUDA device.*TRITON_INTERPRET"):
        TritonNeighborSampler(indptr, indices, [2])


# (compiling every kernel variant for a GPU: test_triton_compile.py)


# ------------------------------------------------------------------------- placement
def test_uva_path_reads_the_pinned_host_arrays(monkeypatch):
    """``uva=True`` with pinning replaced by recorders (as the placement tests do): the sampler
    reads the graph's own host arrays through the views, nothing is copied, and it keeps the
    pinned tensors alive."""
    import graphfeed._pinning as pinning

    g = random_graph(seed=3)
    viewed = []

    def fake_uva(t, device):
        viewed.append((t.data_ptr(), torch.device(device)))
        return t

    monkeypatch.setattr(pinning, "pin_tensor", lambda t: t)
    monkeypatch.setattr(pinning, "uva_tensor", fake_uva)
    monkeypatch.setattr(pinning, "cuda_available", lambda: True)  # CSCGraph.pin_memory asks
    s = TritonNeighborSampler.from_graph(g, [4, 2], device="cuda:0", uva=True, seed=3)
    indptr, indices = g.tensors("cpu")
    assert viewed == [(indptr.data_ptr(), torch.device("cuda:0")),
                      (indices.data_ptr(), torch.device("cuda:0"))]
    assert s.indptr.data_ptr() == g.indptr.ctypes.data  # the graph's array, not a copy
    assert [t.data_ptr() for t in s._host] == [indptr.data_ptr(), indices.data_ptr()]
    assert s.with_fanouts([1])._host is s._host
    seeds = [2, 8, 0]
    check_minibatch(g, s.sample(seeds), seeds, [4, 2], False)


def test_gpu_entry_chooses_triton_only_where_it_runs(monkeypatch):
    from graphfeed import _cuda as cuda_mod
    from graphfeed.sampling import triton_sampler

    assert mode_spec("cuda-cuda").sampler == mode_spec("pinned-cuda").sampler == "gpu"

    class Labor:
        kind = "labor"

    monkeypatch.setattr(cuda_mod, "cuda_available", lambda: True)
    assert GPUSampler.uses_triton([15, 10, 5], device="cuda")
    assert GPUSampler.uses_triton([3], device="cuda:1", method=None)
    assert not GPUSampler.uses_triton([3], device="cpu")
    assert not GPUSampler.uses_triton([3], device="cuda", method=Labor())
    assert not GPUSampler.uses_triton([2000], device="cuda")
    monkeypatch.setenv("GRAPHFEED_GPU_SAMPLER", "torch")  # the escape hatch
    assert not GPUSampler.uses_triton([15, 10, 5], device="cuda")
    monkeypatch.setenv("GRAPHFEED_GPU_SAMPLER", "cuda")
    with pytest.raises(GraphfeedError, match="GRAPHFEED_GPU_SAMPLER='cuda'"):
        GPUSampler.uses_triton([15, 10, 5], device="cuda")
    monkeypatch.setenv("GRAPHFEED_GPU_SAMPLER", "auto")
    assert GPUSampler.uses_triton([15, 10, 5], device="cuda")
    monkeypatch.setattr(triton_sampler, "triton_importable", lambda: False)
    assert not GPUSampler.uses_triton([3], device="cuda")
    monkeypatch.setattr(cuda_mod, "cuda_available", lambda: False)
    monkeypatch.undo()

    # the fallback: the torch sampler with the same arguments
    s = build_sampler("gpu", GRAPH, [3, 2], device="cpu", replace=True, seed=7,
                      return_edge_ids=True)
    assert type(s) is TorchNeighborSampler
    assert (s.fanouts, s.replace, s.seed, s.return_edge_ids) == ((3, 2), True, 7, True)
    # the Triton branch, forced onto this device
    monkeypatch.setattr(GPUSampler, "uses_triton", staticmethod(lambda *a, **k: True))
    s = build_sampler("gpu", GRAPH, [3, 2], device=DEVICE, seed=7, block_size=256)
    assert isinstance(s, TritonNeighborSampler) and s.block_size == 256
    check_minibatch(GRAPH, s.sample([5, 6]), [5, 6], [3, 2], False)


def test_gpu_entry_falls_back_to_torch_once_when_the_kernels_do_not_compile(monkeypatch):
    """A kernel that does not compile here (e.g. an older triton without a ``tl`` function the
    kernels call): the warm-up at build time fails, the "gpu" entry returns the torch sampler
    with one warning naming the root error, and later builds go to torch without a warning."""
    from graphfeed.sampling import triton_sampler as ts

    class Broken:
        __name__ = "count_kernel"

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                try:
                    raise AttributeError("module 'triton.language' has no attribute 'to_tensor'")
                except AttributeError as e:
                    raise RuntimeError("at 23:19:\n    _, found = _insert(...)\n    ^") from e
            return launch

    monkeypatch.setattr(K, "count_kernel", Broken())
    monkeypatch.setattr(ts, "_triton_failure", "")
    monkeypatch.setattr(GPUSampler, "uses_triton",
                        staticmethod(lambda *a, **k: not ts._triton_failure))
    with pytest.warns(RuntimeWarning, match=r"do not work here \(triton .*RuntimeError: module "
                      r"'triton.language' has no attribute 'to_tensor'.*torch sampler instead"):
        s = build_sampler("gpu", GRAPH, [3, 2], device=DEVICE, seed=7)
    assert type(s) is TorchNeighborSampler and s.seed == 7
    assert "to_tensor" in ts.triton_failure()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = build_sampler("gpu", GRAPH, [3, 2], device=DEVICE)
    assert type(s) is TorchNeighborSampler
    # bad arguments are the caller's error, not a reason to fall back
    monkeypatch.setattr(ts, "_triton_failure", "")
    with pytest.raises(GraphfeedError, match="block_size must be a power of two"):
        build_sampler("gpu", GRAPH, [3, 2], device=DEVICE, block_size=100)


def test_fanout_minus_one_sizes_the_table_by_the_largest_in_degree():
    """The relabel table of a batch with a fanout -1 layer: bounded by the graph's largest
    in-degree, not the whole graph (a ring of 100k nodes, in-degree 2)."""
    n = 100_000
    src = np.concatenate([np.arange(n), np.arange(n)])
    dst = np.concatenate([(np.arange(n) + 1) % n, (np.arange(n) + 2) % n])
    ring = CSCGraph.from_edges(src, dst, n)
    s = make(ring, [-1, -1])
    assert s._max_degree == 2
    assert s._table_capacity(1024) == 32768  # 2 * 1024 * 3 * 3 rounded up, not 2 * 100k
    assert make(ring, [-1, 5])._table_capacity(1) == 64  # 1 * 6 * 3
    assert make(GRAPH, [-1, -1])._table_capacity(100) == 1024  # capped by the graph's 300 nodes
    seeds = np.arange(0, n, 97)[:40]
    check_minibatch(ring, s.sample(torch.from_numpy(seeds)), seeds, [-1, -1], False)


def test_choosing_on_cpu_does_not_import_triton():
    code = ("import sys; import numpy as np; from graphfeed.graph.csc import CSCGraph;"
            "from graphfeed.sampling import build_sampler;"
            "g = CSCGraph.from_edges(np.array([0, 1]), np.array([1, 0]), 2);"
            "s = build_sampler('gpu', g, [2], device='cpu'); s.sample([0]);"
            "print(type(s).__name__, 'triton' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["TorchNeighborSampler", "False"]


# ------------------------------------------------------------------------ uniformity
def triton_draws(n, k, replace, total, seed=0, block_size=4096):
    """(total, k) neighbour positions: ``total`` destinations sharing the same ``n``
    neighbours, in batches of at most 5000 (each batch its own key)."""
    num_dst = min(total, 5000)
    g = fan_graph(num_dst, n)
    s = make(g, [k], replace=replace, seed=seed, return_edge_ids=True, block_size=block_size)
    out = [positions(s.sample(np.arange(num_dst), batch_index=bi), g, k)
           for bi in range(-(-total // num_dst))]
    return np.concatenate(out)[:total]


# (n, k, draws): d <= 64 and d > 64, k from 2 to half of n, and k close to n
@pytest.mark.parametrize("n, k, total", [(6, 2, 3000), (6, 4, 3000), (7, 3, 7000),
                                         (65, 2, 42000)])
def test_without_replacement_uniform_over_subsets(n, k, total):
    assert subset_pvalue(triton_draws(n, k, False, total), n, k) > P_MIN


def test_without_replacement_large_k_marginals():
    n, k = 200, 40
    pos = triton_draws(n, k, False, 1000, block_size=8192)
    assert np.all(np.diff(np.sort(pos, 1), axis=1) > 0)
    assert chisquare(np.bincount(pos.ravel(), minlength=n)).pvalue > P_MIN


def test_with_replacement_ordered_pairs_iid():
    n, k = 6, 2
    pos = triton_draws(n, k, True, 3600)
    counts = np.bincount(pos[:, 0] * n + pos[:, 1], minlength=n * n)
    assert counts[np.arange(n) * (n + 1)].sum() > 0  # repeats happen
    assert chisquare(counts).pvalue > P_MIN


@pytest.mark.parametrize("n", [3, 70, 1000])
def test_with_replacement_per_neighbour_counts(n):
    k = 5
    pos = triton_draws(n, k, True, max(2000, 30 * n // k))
    assert chisquare(np.bincount(pos.ravel(), minlength=n)).pvalue > P_MIN


def test_neighbouring_destinations_draw_independently():
    """Pairs (destination 2i, 2i+1) of one batch: their joint draw is uniform over 15 x 15
    cells (counters shared or overlapping between neighbours would fail)."""
    n, k = 6, 2
    pos = triton_draws(n, k, False, 9000)
    cell = {c: i for i, c in enumerate(itertools.combinations(range(n), k))}
    idx = np.array([cell[tuple(sorted(r))] for r in pos.tolist()])
    joint = idx[0::2] * 15 + idx[1::2]
    assert chisquare(np.bincount(joint, minlength=225)).pvalue > P_MIN


@triton.jit
def _bounded_kernel(out, bound, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    x = K._bounded(K._philox_key(1, 2, 3), i, i * 0 + bound)
    tl.store(out + i, x, mask=i < n)


def test_bounded_draws_are_exact_for_large_bounds():
    """Lemire's rejection at a bound where plain multiply-shift is visibly biased: 3 * 2**30
    (2**32 / bound = 4/3: without rejection the first third of [0, bound) would come up twice
    as often as each other third)."""
    bound, n = 3 << 30, 30000
    out = torch.empty(n, dtype=torch.int64, device=DEVICE)
    _bounded_kernel[(triton.cdiv(n, 4096),)](out, bound, n, BLOCK=4096)
    x = out.cpu().numpy()
    assert x.min() >= 0 and x.max() < bound
    assert chisquare(np.bincount(x * 3 // bound, minlength=3)).pvalue > P_MIN


# ---------------------------------------------------------------------------- real GPU
@pytest.mark.cuda
@pytest.mark.parametrize("replace", [False, True])
def test_cuda_pinned_graph_through_uva(replace):
    g = random_graph(seed=5)
    seeds = np.arange(0, 300, 3)
    fanouts = [3, 40, -1]
    s = TritonNeighborSampler.from_graph(g, fanouts, device="cuda", uva=True, replace=replace,
                                         seed=3, return_edge_ids=True)
    assert s.indptr.is_cuda and s._host and s._host[0].is_pinned()
    mb = s.sample(torch.from_numpy(seeds).cuda(), epoch=1, batch_index=2)
    check_minibatch(g, mb, seeds, fanouts, replace)
    on_device = TritonNeighborSampler.from_graph(g, fanouts, device="cuda", replace=replace,
                                                 seed=3, return_edge_ids=True)
    _same(mb, on_device.sample(seeds, epoch=1, batch_index=2))


#: a folder put first on the interpreter child's path, e.g. one holding numpy < 2.4 where the
#: machine's numpy is newer than this triton's interpreter takes
INTERPRETER_PATH_ENV = "GRAPHFEED_INTERPRETER_PATH"


@pytest.mark.cuda
def test_cuda_batch_equals_the_interpreters(tmp_path):
    """The compiled kernels draw exactly what the CPU interpreter draws (integer Philox and the
    same counters): the batch sampled on the GPU equals the one a CPU-only process samples."""
    seeds = np.arange(0, 300, 2)
    code = ("import os, sys, torch; sys.path.insert(0, %r);"
            "from sampling_helpers import random_graph;"
            "from graphfeed.sampling.triton_sampler import TritonNeighborSampler as T;"
            "mb = T.from_graph(random_graph(), [5, 3], seed=9, return_edge_ids=True)"
            ".sample(torch.arange(0, 300, 2), epoch=1, batch_index=3);"
            "torch.save([(b.edge_index, b.src_nodes, b.edge_ids) for b in mb.blocks], %r)"
            % (os.path.dirname(__file__), str(tmp_path / "cpu.pt")))
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    extra = os.environ.get(INTERPRETER_PATH_ENV)
    if extra:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [extra, env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0 and "only 0-dimensional arrays can be converted" in proc.stderr:
        pytest.skip(f"this triton's interpreter cannot run the kernels with numpy "
                    f"{np.__version__} (it needs numpy < 2.4); set {INTERPRETER_PATH_ENV} to a "
                    "folder holding numpy < 2.4 to compare (see benchmarks/gpu_check.sh)")
    assert proc.returncode == 0, proc.stderr
    cpu = torch.load(tmp_path / "cpu.pt")
    mb = make(fanouts=[5, 3], seed=9, return_edge_ids=True).sample(seeds, epoch=1, batch_index=3)
    for b, (ei, src, eids) in zip(mb.blocks, cpu, strict=True):
        assert torch.equal(b.edge_index.cpu(), ei) and torch.equal(b.src_nodes.cpu(), src)
        assert torch.equal(b.edge_ids.cpu(), eids)


@pytest.mark.cuda
def test_cuda_launches_and_syncs_per_batch():
    """At most 40 kernel launches per batch of three layers (the issue's target) and one host
    sync per layer, counted by the torch profiler (a warm-up batch compiles the kernels)."""
    from torch.profiler import ProfilerActivity, profile

    g = random_graph(num_nodes=3000, seed=1)
    s = make(g, [15, 10, 5], seed=1)
    seeds = torch.randperm(3000, device="cuda")[:512]
    s.sample(seeds)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        s.sample(seeds, batch_index=1)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    launches = sum(n in ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx",
                         "cudaLaunchKernelExC") for n in names)
    assert 0 < launches <= 40, launches
