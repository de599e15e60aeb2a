"""Issue 42 (6): the Python API validates its arguments where they enter, one table per module:
``NeighborSampler`` (constructor, ``sample``, ``with_fanouts``), ``Feature.read`` (every
backend) and the feature backends' constructors. Each bad value gets a ``GraphfeedError`` (a
``ValueError``) naming the argument, never a ``MemoryError``, ``AttributeError`` or ``TypeError``
from deep inside, and never a silently reinterpreted value (``bool("no")``, a seed of ``-1``, a
uint64 id printed negative)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.features import DiskFeature, InMemoryFeature, PinnedFeature
from graphfeed.graph.csc import CSCGraph
from graphfeed.sampling import NeighborSampler

N = 60


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(0)
    return CSCGraph.from_edges(rng.integers(0, N, 600), rng.integers(0, N, 600), N)


def _refused(call, error, phrase):
    with pytest.raises(error) as e:
        call()
    msg = str(e.value)
    assert phrase in msg, msg
    assert "\n" not in msg and len(msg) < 400, msg


# ----------------------------------------------------------------------- NeighborSampler
S = NeighborSampler
SEEDS = torch.arange(10)
SAMPLER = {
    "graph": (lambda g: S("g", [5]), "graph must be a CSCGraph, got str"),
    "fanouts-empty": (lambda g: S(g, []), "fanouts must not be empty"),
    "fanouts-zero": (lambda g: S(g, [5, 0]), "fanouts must be ints >= 1, or -1"),
    "fanouts-float": (lambda g: S(g, [2.5]), "fanouts must be ints"),
    "fanouts-str": (lambda g: S(g, "10"), "fanouts must be a sequence of ints"),
    "fanouts-none": (lambda g: S(g), "give fanouts"),
    "fanouts-both": (lambda g: S(g, [5], num_neighbors=[5]), "give one of them"),
    "replace-str": (lambda g: S(g, [5], replace="no"), "replace must be True or False, got str"),
    "replace-int": (lambda g: S(g, [5], replace=1), "replace must be True or False, got int"),
    "seed-negative": (lambda g: S(g, [5], seed=-1), "seed must be an integer between 0 and"),
    "seed-too-big": (lambda g: S(g, [5], seed=2 ** 64), "seed must be an integer between 0"),
    "seed-float": (lambda g: S(g, [5], seed=1.5), "seed must be an integer, got 1.5"),
    "seed-str": (lambda g: S(g, [5], seed="0"), "seed must be an integer"),
    "num-threads": (lambda g: S(g, [5], num_threads=0), "num_threads must be an integer >= 1"),
    "return-edge-ids": (lambda g: S(g, [5], return_edge_ids="yes"),
                        "return_edge_ids must be True or False"),
    "method": (lambda g: S(g, [5], method="nope"), "nope"),
    "node-map": (lambda g: S(g, [5], node_map="sparse"), "node_map must be one of"),
    "replace-absurd": (lambda g: S(g, [10 ** 12], replace=True),
                       "1,000,000,000,000 draws with replacement"),
    "replace-layer-too-big": (lambda g: S(g, [10 ** 8], replace=True).sample(torch.arange(N)),
                              f"draws with replacement for each of {N} destinations"),
    "seeds-2d": (lambda g: S(g, [5]).sample(torch.zeros(50, 2, dtype=torch.long)),
                 "got shape (50, 2)"),
    "seeds-float": (lambda g: S(g, [5]).sample(np.zeros(3)), "seeds must be integer node ids"),
    "seeds-uint64": (lambda g: S(g, [5]).sample(np.array([2 ** 63 + 5], np.uint64)),
                     f"seed id {2 ** 63 + 5} is out of range [0, {N})"),
    "seeds-negative": (lambda g: S(g, [5]).sample([3, -1]), f"seed id -1 (position 1) is out of "
                                                            f"range [0, {N})"),
    "seeds-twice": (lambda g: S(g, [5]).sample([3, 4, 3]), "appears twice"),
    "epoch-float": (lambda g: S(g, [5]).sample(SEEDS, epoch=1.5), "epoch must be an integer"),
    "epoch-huge": (lambda g: S(g, [5]).sample(SEEDS, epoch=2 ** 64),
                   "epoch must be an integer between"),
    "batch-index-str": (lambda g: S(g, [5]).sample(SEEDS, batch_index="3"),
                        "batch_index must be an integer"),
    "executor": (lambda g: S(g, [5]).sample(SEEDS, executor=4),
                 "executor must be a concurrent.futures.Executor or None, got int"),
    "seed-times": (lambda g: S(g, [5]).sample(SEEDS, seed_times=[1.0] * 10),
                   "seed_times is for temporal sampling"),
    "with-fanouts": (lambda g: S(g, [5]).with_fanouts([0]), "fanouts must be ints"),
    "prepare-share": (lambda g: S(g, [5]).prepare(share=5), "share must be a callable"),
    "check-tables": (lambda g: S(g, [5]).check_tables([1]), "tables must be a mapping"),
    "from-graph-device": (lambda g: S.from_graph(g, [5], device="meta"), "device"),
    "from-graph-seed": (lambda g: S.from_graph(g, [5], seed=-3), "seed must be an integer"),
}


@pytest.mark.parametrize("case", sorted(SAMPLER))
def test_neighbor_sampler_arguments(graph, case):
    call, phrase = SAMPLER[case]
    _refused(lambda: call(graph), GraphfeedError, phrase)


def test_absurd_fanouts_without_replacement_take_every_neighbour(graph):
    # a fanout of 10**12 sized a kernel table of 2 * 10**12 slots (MemoryError): it is capped
    # by the largest in-degree, which gives the batches of fanout -1
    huge = NeighborSampler(graph, [10 ** 12] * 2).sample(SEEDS)
    every = NeighborSampler(graph, [-1, -1]).sample(SEEDS)
    assert NeighborSampler(graph, [10 ** 12] * 2).fanouts == (10 ** 12, 10 ** 12)
    for a, b in zip(huge.blocks, every.blocks):
        assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.src_nodes, b.src_nodes)
    mid = NeighborSampler(graph, [40, 40], seed=3).sample(SEEDS)  # below every degree cap
    assert all(torch.equal(a.edge_index, b.edge_index)
               for a, b in zip(mid.blocks, NeighborSampler(graph, [40, 40], seed=3)
                               .sample(SEEDS).blocks))


# ----------------------------------------------------------------------- Feature.read
def _features(tmp_path):
    pytest.importorskip("lmdb")
    from graphfeed.features.lmdb_store import open_npy

    rows = np.arange(N * 3, dtype=np.float32).reshape(N, 3)
    np.save(tmp_path / "x.npy", rows)
    return {"memory": InMemoryFeature(torch.from_numpy(rows.copy())),
            "disk": DiskFeature(tmp_path / "x.npy"),
            "lmdb": open_npy(tmp_path / "x.npy", lmdb_path=tmp_path / "x.lmdb"),
            "pinned": PinnedFeature(InMemoryFeature(torch.from_numpy(rows.copy())))}


IDS = torch.arange(3)
READ = {
    "ids-2d": (lambda f: f.read(np.zeros((50, 2), np.int64)), "ids must be 1-D, got shape (50, 2)"),
    "ids-2d-tensor": (lambda f: f.read(torch.zeros(50, 2, dtype=torch.long)),
                      "ids must be 1-D, got shape (50, 2)"),
    "ids-float": (lambda f: f.read(np.zeros(3)), "ids must be integers, got dtype float64"),
    "ids-float-tensor": (lambda f: f.read(torch.zeros(3)), "ids must be an integer tensor"),
    "ids-bool": (lambda f: f.read(torch.ones(3, dtype=torch.bool)), "ids must be an integer"),
    "ids-str": (lambda f: f.read("012"), "ids must be 1-D integers, got str"),
    "ids-none": (lambda f: f.read(None), "ids must be 1-D integers, got NoneType"),
    "ids-ragged": (lambda f: f.read([[1], [1, 2]]), "numpy cannot make an array of"),
    "ids-uint64": (lambda f: f.read(np.array([1, 2 ** 63 + 5], np.uint64)),
                   f"id {2 ** 63 + 5} is out of range [0, {N})"),
    "ids-negative": (lambda f: f.read([1, -1]), f"id -1 is out of range [0, {N})"),
    "ids-past-end": (lambda f: f.read([N]), f"id {N} is out of range [0, {N})"),
    "out-numpy": (lambda f: f.read(IDS, out=np.zeros((3, 3), np.float32)),
                  "out must be a contiguous torch tensor of dtype torch.float32, shape (3, 3) "
                  "on cpu, got a numpy.ndarray"),
    "out-shape": (lambda f: f.read(IDS, out=torch.zeros(4, 3)), "got torch.float32 (4, 3) on cpu"),
    "out-dtype": (lambda f: f.read(IDS, out=torch.zeros(3, 3, dtype=torch.float64)),
                  "got torch.float64 (3, 3)"),
    "out-strided": (lambda f: f.read(IDS, out=torch.zeros(3, 6)[:, ::2]),
                    "got a non-contiguous torch.float32"),
    "check": (lambda f: f.read(IDS, check="no"), "check must be True or False, got str"),
    "executor": (lambda f: f.read(IDS, executor="pool"),
                 "executor must be a concurrent.futures.Executor or None, got str"),
}


@pytest.mark.filterwarnings("ignore:pin_memory:RuntimeWarning")  # no CUDA here
def test_feature_read_arguments(tmp_path):
    feats = _features(tmp_path)
    try:
        for kind, f in feats.items():
            for case in sorted(READ):
                call, phrase = READ[case]
                try:
                    _refused(lambda: call(f), GraphfeedError, phrase)
                except AssertionError as e:
                    raise AssertionError(f"{kind} feature, {case}: {e}") from None
            # what passes still reads, unsigned ids included
            want = torch.arange(N * 3, dtype=torch.float32).reshape(N, 3)[[1, 5]]
            assert torch.equal(f.read(np.array([1, 5], np.uint64)), want), kind
            assert torch.equal(f.read(torch.tensor([1, 5], dtype=torch.int32)), want), kind
    finally:
        for f in feats.values():
            f.close()


# ----------------------------------------------------------------------- backend constructors
def _backends(tmp_path):
    pytest.importorskip("lmdb")
    from graphfeed.features.lmdb_store import LMDBFeature, open_npy

    x = tmp_path / "x.npy"
    np.save(x, np.zeros((10, 3), np.float32))
    np.save(tmp_path / "scalar.npy", np.float32(1.0))
    d = torch.zeros(3, 3)
    return {
        # InMemoryFeature
        "memory-data-list": (lambda: InMemoryFeature([[1.0]]),
                             "expected a torch.Tensor or numpy.ndarray, got list"),
        "memory-data-0d": (lambda: InMemoryFeature(torch.tensor(1.0)),
                           "at least one dimension"),
        "memory-sparse": (lambda: InMemoryFeature(d.to_sparse()),
                          "data must be a dense tensor, got a sparse_coo one"),
        "memory-meta": (lambda: InMemoryFeature(torch.zeros(3, 3, device="meta")),
                        "data is on the meta device"),
        "memory-uint32": (lambda: InMemoryFeature(np.zeros((3, 3), np.uint32)),
                          "dtype uint32 has no torch equivalent"),
        "memory-threads": (lambda: InMemoryFeature(d, num_threads=0),
                           "num_threads must be an integer >= 1"),
        "memory-huge-pages": (lambda: InMemoryFeature(d, huge_pages="no"),
                              "huge_pages must be True or False, got str"),
        "memory-dtype": (lambda: InMemoryFeature(np.zeros((3, 3), np.uint16), dtype="float7"),
                         "not float7"),
        # DiskFeature
        "disk-path-int": (lambda: DiskFeature(5), "path must be a str or os.PathLike"),
        "disk-path-none": (lambda: DiskFeature(None), "path must be a str or os.PathLike"),
        "disk-missing": (lambda: DiskFeature(tmp_path / "none.npy"), "file not found"),
        "disk-folder": (lambda: DiskFeature(tmp_path), "not a regular file"),
        "disk-scalar": (lambda: DiskFeature(tmp_path / "scalar.npy"), "at least one dimension"),
        "disk-threads": (lambda: DiskFeature(x, num_threads=0), "num_threads must be"),
        "disk-direct-io": (lambda: DiskFeature(x, direct_io="yes"),
                           "direct_io must be True, False or 'auto'"),
        "disk-sort-ids": (lambda: DiskFeature(x, sort_ids="no"),
                          "sort_ids must be True or False, got str"),
        "disk-max-gap": (lambda: DiskFeature(x, max_gap=-1), "max_gap must be an integer >= 0"),
        "disk-max-read": (lambda: DiskFeature(x, max_read=1), "max_read must be an integer"),
        "disk-queue-depth": (lambda: DiskFeature(x, queue_depth=0), "queue_depth must be"),
        "disk-io-engine": (lambda: DiskFeature(x, io_engine="fast"), "io_engine must be one of"),
        "disk-dtype": (lambda: DiskFeature(x, dtype="bfloat16"), "holds float32"),
        # LMDBFeature and the lmdb backend (open_npy)
        "lmdb-path-int": (lambda: LMDBFeature(5), "path must be a str or os.PathLike"),
        "lmdb-missing": (lambda: LMDBFeature(tmp_path / "none"), "not an LMDB feature store"),
        "lmdb-readonly": (lambda: LMDBFeature(tmp_path, readonly="no"),
                          "readonly must be True or False, got str"),
        "lmdb-threads": (lambda: LMDBFeature(tmp_path, num_threads=0), "num_threads must be"),
        "lmdb-build-rows": (lambda: LMDBFeature.build(tmp_path / "b", x, rows_per_chunk=0),
                            "rows_per_chunk must be an integer >= 1, got 0"),
        "lmdb-build-rows-str": (lambda: LMDBFeature.build(tmp_path / "b", x, rows_per_chunk="5"),
                                "rows_per_chunk must be an integer, got '5'"),
        "lmdb-build-map-size": (lambda: LMDBFeature.build(tmp_path / "b", x, map_size=0),
                                "map_size must be an integer >= 1"),
        "lmdb-build-overwrite": (lambda: LMDBFeature.build(tmp_path / "b", x, overwrite="yes"),
                                 "overwrite must be True or False"),
        "open-npy-rows": (lambda: open_npy(x, lmdb_path=tmp_path / "o", rows_per_chunk=0),
                          "rows_per_chunk must be an integer >= 1, got 0"),
        "open-npy-path": (lambda: open_npy(3), "npy_path must be a str or os.PathLike"),
        "open-npy-lmdb-path": (lambda: open_npy(x, lmdb_path=3.5),
                               "lmdb_path must be a str or os.PathLike"),
        "open-npy-threads": (lambda: open_npy(x, lmdb_path=tmp_path / "o", num_threads=0),
                             "num_threads must be an integer >= 1"),
        # PinnedFeature
        "pinned-tensor": (lambda: PinnedFeature(d), "PinnedFeature wraps a graphfeed Feature"),
        "pinned-pin-outputs": (lambda: PinnedFeature(InMemoryFeature(d), pin_outputs="no"),
                               "pin_outputs must be True or False, got str"),
    }


@pytest.mark.filterwarnings("ignore:pin_memory:RuntimeWarning")  # no CUDA here
def test_feature_backend_constructor_arguments(tmp_path):
    for case, (call, phrase) in sorted(_backends(tmp_path).items()):
        try:
            _refused(call, GraphfeedError, phrase)  # DatasetError is one (a file's problem)
        except AssertionError as e:
            raise AssertionError(f"{case}: {e}") from None
    assert issubclass(DatasetError, GraphfeedError) and issubclass(GraphfeedError, ValueError)
    assert not (tmp_path / "o").exists() and not (tmp_path / "b").exists()


# ----------------------------------------------------------------------- every other sampler
def _hetero(g):
    from graphfeed.graph.hetero import HeteroGraph

    return HeteroGraph.from_edges({"a": N, "b": N}, {("a", "r", "b"): (np.arange(N), np.arange(N)),
                                                     ("b", "s", "a"): (np.arange(N), np.arange(N))})


def _make(name, g, **kw):
    from graphfeed.sampling import HeteroNeighborSampler, TorchHeteroSampler, TorchNeighborSampler

    if name == "torch":
        return TorchNeighborSampler.from_graph(g, [5], **kw)
    if name == "triton":
        from graphfeed.sampling import _triton_kernels as K
        from graphfeed.sampling import TritonNeighborSampler

        if not K.INTERPRETED:
            pytest.skip("the Triton sampler needs a GPU or TRITON_INTERPRET=1")
        return TritonNeighborSampler.from_graph(g, [5], device="cpu", **kw)
    cls = HeteroNeighborSampler if name == "hetero" else TorchHeteroSampler
    return cls(_hetero(g), [5], **kw)


def _seeds(name):
    return SEEDS if name in ("torch", "triton") else {"b": SEEDS}


#: the checks every sampler shares with NeighborSampler (``sampling._common``), one wording
COMMON = {
    "replace-str": (dict(replace="no"), None, "replace must be True or False, got str"),
    "seed-negative": (dict(seed=-1), None, "seed must be an integer between 0 and"),
    "seed-float": (dict(seed=1.5), None, "seed must be an integer, got 1.5"),
    "return-edge-ids": (dict(return_edge_ids="yes"), None, "return_edge_ids must be True or False"),
    "epoch-float": ({}, dict(epoch=1.5), "epoch must be an integer"),
    "epoch-huge": ({}, dict(epoch=2 ** 64), "epoch must be an integer between"),
    "batch-index-str": ({}, dict(batch_index="3"), "batch_index must be an integer"),
    "executor": ({}, dict(executor=4), "executor must be a concurrent.futures.Executor or None"),
}


@pytest.mark.parametrize("name", ["torch", "triton", "hetero", "torch-hetero"])
@pytest.mark.parametrize("case", sorted(COMMON))
def test_every_sampler_checks_the_common_arguments(graph, name, case):
    built, sample, phrase = COMMON[case]
    if sample is None:
        _refused(lambda: _make(name, graph, **built), GraphfeedError, phrase)
    else:
        s = _make(name, graph)
        s.sample(_seeds(name))  # good arguments sample
        _refused(lambda: s.sample(_seeds(name), **sample), GraphfeedError, phrase)
