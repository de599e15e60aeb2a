"""DataLoader: identical to a serial loop for any thread count, in order, features joined,
errors surfaced with their traceback, threads always end, buffers reused only when safe."""

from __future__ import annotations

import gc
import threading
import traceback
import warnings

import numpy as np
import pytest
import torch

from graphfeed.errors import GraphfeedError
from graphfeed.features.memory import InMemoryFeature
from graphfeed.loader import DataLoader, GraphfeedWarning, ItemSampler
from graphfeed.loader.buffers import reuse_supported, storage_use_count
from graphfeed.sampling.base import Sampler

from loader_helpers import ToySampler, loader_threads, wait_no_loader_threads

N = 500


@pytest.fixture(autouse=True)
def _no_leaks(thread_baseline):
    yield


def make_loader(num_threads=2, *, n_ids=N, batch_size=32, delay_s=0.0, **kw):
    g = torch.Generator().manual_seed(0)
    feat = InMemoryFeature(torch.randn(N, 8, generator=g))
    feat2 = InMemoryFeature(torch.randint(0, 100, (N, 2, 3), generator=g, dtype=torch.int32))
    labels = InMemoryFeature(torch.randint(0, 7, (N,), generator=g))
    items = ItemSampler(torch.arange(n_ids), batch_size, seed=1)
    kw.setdefault("node_features", {"feat": feat, "other": feat2})
    kw.setdefault("labels", labels)
    return DataLoader(items, ToySampler(N, delay_s=delay_s), num_threads=num_threads, **kw)


def serial_reference(loader, epoch):
    """What the loader must produce: a plain loop over the item sampler, sampler and reads."""
    out = []
    for sb in loader.item_sampler.iter_epoch(epoch):
        mb = loader.sampler.sample(sb.seeds, epoch=sb.epoch, batch_index=sb.index)
        feats = {k: f.read(mb.input_nodes) for k, f in loader.node_features.items()}
        labels = loader.labels.read(mb.seeds) if loader.labels is not None else None
        out.append((sb.index, mb, feats, labels))
    return out


def assert_same(mb, ref):
    index, rmb, feats, labels = ref
    assert mb.batch_index == index
    assert torch.equal(mb.seeds, rmb.seeds)
    assert len(mb.blocks) == len(rmb.blocks)
    for b, rb in zip(mb.blocks, rmb.blocks):
        assert torch.equal(b.edge_index, rb.edge_index)
        assert torch.equal(b.src_nodes, rb.src_nodes)
        assert b.num_dst == rb.num_dst
    assert sorted(mb.node_features) == sorted(feats)
    for k, v in feats.items():
        assert mb.node_features[k].dtype == v.dtype
        assert torch.equal(mb.node_features[k], v), k
    if labels is None:
        assert mb.labels is None
    else:
        assert torch.equal(mb.labels, labels)


@pytest.mark.parametrize("num_threads", [0, 1, 2, 4])
def test_identical_to_serial_reference(num_threads):
    loader = make_loader(num_threads, delay_s=0.002, prefetch=1)
    for epoch in range(2):
        ref = serial_reference(loader, epoch)
        got = list(loader)  # kept: also checks kept batches are never overwritten
        assert [mb.epoch for mb in got] == [epoch] * len(ref)
        assert [mb.batch_index for mb in got] == list(range(len(ref)))
        assert len(got) == len(ref) == len(loader)
        for mb, r in zip(got, ref):
            assert_same(mb, r)


def test_thread_counts_give_the_same_batches():
    runs = []
    for t in (1, 2, 4):
        loader = make_loader(t, delay_s=0.001)
        runs.append([(mb.seeds.clone(), mb.x.clone(), mb.labels.clone()) for mb in loader])
    for other in runs[1:]:
        assert all(torch.equal(a, b) for x, y in zip(runs[0], other) for a, b in zip(x, y))


def test_single_feature_is_named_feat_and_no_features():
    loader = make_loader(2, node_features=InMemoryFeature(torch.arange(N * 2.0).view(N, 2)),
                         labels=None)
    for mb in loader:
        assert list(mb.node_features) == ["feat"]
        assert torch.equal(mb.x, torch.arange(N * 2.0).view(N, 2)[mb.input_nodes])
        assert mb.labels is None
    bare = make_loader(2, node_features=None, labels=None)
    mbs = list(bare)
    assert len(mbs) == len(bare) and all(mb.node_features == {} for mb in mbs)


def test_break_stops_threads():
    loader = make_loader(3, delay_s=0.002)
    for i, _ in enumerate(loader):
        assert len(loader_threads()) == 3
        if i == 2:
            break
    assert wait_no_loader_threads() == []


def test_exhaustion_stops_threads():
    loader = make_loader(2)
    it = iter(loader)
    for _ in it:
        pass
    assert wait_no_loader_threads() == []
    with pytest.raises(StopIteration):
        next(it)


def test_close_stops_threads_and_ends_iteration():
    loader = make_loader(2, delay_s=0.002)
    it = iter(loader)
    next(it)
    loader.close()
    assert loader_threads() == []  # close joins
    with pytest.raises(StopIteration):
        next(it)


def test_del_and_gc_stop_threads():
    loader = make_loader(2, delay_s=0.002)
    it = iter(loader)
    next(it)
    assert loader_threads()
    del it, loader
    gc.collect()
    assert wait_no_loader_threads() == []


def test_dropped_iterator_without_gc_stops_threads():
    loader = make_loader(2)
    next(iter(loader))  # the iterator is dropped right away (refcount)
    assert wait_no_loader_threads(collect=False) == []


def test_context_manager_closes():
    with make_loader(2) as loader:
        it = iter(loader)
        next(it)
    assert loader_threads() == []


class _Boom(RuntimeError):
    pass


class FailingSampler(ToySampler):
    def __init__(self, fail_at):
        super().__init__(N)
        self.fail_at = fail_at

    def sample(self, seeds, *, epoch=0, batch_index=0, executor=None):
        if batch_index == self.fail_at:
            explode_in_sampler(batch_index)
        return super().sample(seeds, epoch=epoch, batch_index=batch_index, executor=executor)


def explode_in_sampler(batch_index):
    raise _Boom(f"sampler failed at batch {batch_index}")


class FailingFeature(InMemoryFeature):
    def __init__(self, data, fail_on_call):
        super().__init__(data)
        self.fail_on_call, self.calls = fail_on_call, 0
        self._lock = threading.Lock()

    def _read(self, ids, out, executor):
        with self._lock:
            self.calls += 1
            n = self.calls
        if n == self.fail_on_call:
            explode_in_feature()
        return super()._read(ids, out, executor)


def explode_in_feature():
    raise KeyError("feature backend lost its rows")


@pytest.mark.parametrize("num_threads", [0, 1, 3])
def test_sampler_error_reaches_caller_at_its_batch(num_threads):
    items = ItemSampler(torch.arange(N), 32, seed=1)
    loader = DataLoader(items, FailingSampler(fail_at=4), num_threads=num_threads)
    got = []
    with pytest.raises(_Boom, match="sampler failed at batch 4") as info:
        for mb in loader:
            got.append(mb.batch_index)
    assert got == [0, 1, 2, 3]  # every batch before the failing one arrived, in order
    tb = "".join(traceback.format_exception(info.value))
    assert "explode_in_sampler" in tb and "in sample" in tb  # the worker's frames are kept
    assert wait_no_loader_threads() == []


def test_feature_error_reaches_caller():
    items = ItemSampler(torch.arange(N), 32, seed=1)
    feat = FailingFeature(torch.zeros(N, 4), fail_on_call=3)
    loader = DataLoader(items, ToySampler(N), node_features=feat, num_threads=2)
    with pytest.raises(KeyError, match="lost its rows") as info:
        list(loader)
    tb = "".join(traceback.format_exception(info.value))
    assert "explode_in_feature" in tb and "_read" in tb
    assert wait_no_loader_threads() == []


def test_bad_sampler_output_is_a_clear_error():
    class Wrong(ToySampler):
        def sample(self, seeds, *, epoch=0, batch_index=0, executor=None):
            return seeds

    loader = DataLoader(ItemSampler(torch.arange(10), 4), Wrong(10), num_threads=1)
    with pytest.raises(TypeError, match="must return a MiniBatch"):
        next(iter(loader))


def test_sampler_must_implement_the_interface():
    class DuckTyped:  # has sample() but is no Sampler: the loader would guess at num_nodes
        num_nodes = 10

        def sample(self, seeds, *, epoch=0, batch_index=0, executor=None):
            return ToySampler(10).sample(seeds, epoch=epoch, batch_index=batch_index)

    with pytest.raises(GraphfeedError, match="must be a graphfeed.sampling.Sampler, got DuckTyped"):
        DataLoader(ItemSampler(torch.arange(10), 4), DuckTyped())

    class NoNumNodes(Sampler):
        fanouts = (1,)

        def sample(self, seeds, *, epoch=0, batch_index=0, executor=None):
            raise AssertionError("never called")

    with pytest.raises(TypeError, match="num_nodes"):  # the ABC refuses an incomplete sampler
        NoNumNodes()


@pytest.mark.skipif(not reuse_supported(), reason="torch lacks the storage use count")
def test_buffers_are_reused_in_a_normal_loop():
    loader = make_loader(2, n_ids=N, batch_size=16)
    for _ in range(2):
        for mb in loader:
            pass
    del mb
    s = loader.stats
    assert s.buffers_reused > 0
    # three pools (two features and labels), each holds at most max_buffers buffers
    assert s.buffers_allocated <= 3 * (loader.num_threads + loader.prefetch + 3) + 3 * 4
    assert s.batches == 2 * len(loader)


def test_kept_batches_are_never_overwritten():
    loader = make_loader(2, batch_size=16)
    kept, copies = [], []
    for mb in loader:
        kept.append(mb)
        copies.append({k: v.clone() for k, v in mb.node_features.items()})
    for mb in loader:  # a second epoch would reuse buffers if the kept ones were considered free
        pass
    for mb, c in zip(kept, copies):
        for k, v in c.items():
            assert torch.equal(mb.node_features[k], v)


def test_kept_views_and_numpy_arrays_are_never_overwritten():
    loader = make_loader(1, batch_size=16, prefetch=0)
    views, arrays, storages = [], [], []
    for i, mb in enumerate(loader):
        if i % 3 == 0:
            views.append((mb.x[1:5], mb.x[1:5].clone()))
        elif i % 3 == 1:
            arrays.append((mb.x.numpy(), mb.x.numpy().copy()))
        else:
            # keeping only the storage object (no tensor over it) must protect it too
            storages.append((mb.x.untyped_storage(), mb.x.dtype, mb.x.flatten().clone()))
    list(loader)
    for v, c in views:
        assert torch.equal(v, c)
    for st, dtype, c in storages:
        assert torch.equal(torch.tensor([], dtype=dtype).set_(st)[: c.numel()], c)
    for a, c in arrays:
        np.testing.assert_array_equal(a, c)


@pytest.mark.skipif(not reuse_supported(), reason="torch lacks the storage use count")
def test_storage_use_count_sees_views():
    t = torch.empty(10)
    base = storage_use_count(t)
    v = t[2:4]
    assert storage_use_count(t) == base + 1
    del v
    assert storage_use_count(t) == base


def test_reuse_buffers_false_allocates_every_time():
    loader = make_loader(2, reuse_buffers=False)
    list(loader)
    assert loader.stats.buffers_reused == 0 and loader.stats.buffers_allocated == 0
    assert loader.stats.batches == len(loader)


def test_stats_count_batches_and_time():
    loader = make_loader(2, delay_s=0.001)
    list(loader)
    s = loader.stats.as_dict()
    assert s["batches"] == len(loader)
    assert s["sample_s"] > 0 and s["fetch_s"] > 0 and s["wait_s"] >= 0
    loader.stats.reset()
    assert loader.stats.batches == 0


def test_num_workers_warns_once_and_uses_threads():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        loader = make_loader(2, num_workers=4)
    ours = [x for x in w if issubclass(x.category, GraphfeedWarning)]
    assert len(ours) == 1
    msg = str(ours[0].message)
    assert "num_threads" in msg and "fork" in msg and "threads" in msg
    assert ours[0].filename == __file__  # points at the caller's line
    assert len(list(loader)) == len(loader)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_loader(2, num_workers=0)
        make_loader(2, num_workers=None)


def test_cuda_on_cpu_build_is_a_clear_error(no_gpu):
    with pytest.raises(GraphfeedError, match="CUDA"):
        make_loader(1, device="cuda")
    with pytest.raises(GraphfeedError, match="device"):
        make_loader(1, device="tpu")


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(num_threads=-1), "num_threads"),
        (dict(prefetch=-1), "prefetch"),
        (dict(node_features=[1]), "node_features"),
        (dict(node_features={"a": torch.zeros(3)}), "node_features"),
        (dict(labels=torch.zeros(3)), "labels"),
    ],
)
def test_bad_arguments(kw, match):
    with pytest.raises(GraphfeedError, match=match):
        make_loader(**kw)


def test_epochs_advance_and_set_epoch():
    loader = make_loader(2)
    e0 = [mb.seeds.clone() for mb in loader]
    e1 = [mb.seeds.clone() for mb in loader]
    assert loader.epoch == 2
    assert not all(torch.equal(a, b) for a, b in zip(e0, e1))
    loader.set_epoch(0)
    assert all(torch.equal(a, mb.seeds) for a, mb in zip(e0, loader))


@pytest.mark.parametrize("num_threads", [0, 2])
def test_state_dict_resumes_mid_epoch(num_threads):
    loader = make_loader(num_threads)
    loader.set_epoch(3)
    full = [(mb.seeds.clone(), mb.x.clone()) for mb in loader]
    loader.set_epoch(3)
    for i, mb in enumerate(loader):
        if i == 4:
            break
    state = loader.state_dict()
    assert state == {"epoch": 3, "next_batch": 5}
    fresh = make_loader(num_threads)
    fresh.load_state_dict(state)
    rest = [(mb.batch_index, mb.seeds.clone(), mb.x.clone()) for mb in fresh]
    assert [r[0] for r in rest] == list(range(5, len(full)))
    for (i, s, x), (fs, fx) in zip(rest, full[5:]):
        assert torch.equal(s, fs) and torch.equal(x, fx)
    assert fresh.state_dict() == {"epoch": 4, "next_batch": 0}
    with pytest.raises(GraphfeedError):
        fresh.load_state_dict({"epoch": 0, "next_batch": len(fresh) + 1})
    with pytest.raises(GraphfeedError):
        fresh.load_state_dict({"epoch": 0})


def test_prefetch_bounds_work_ahead():
    # with a consumer that never asks, the threads take at most num_threads + prefetch batches
    loader = make_loader(2, prefetch=1)
    sampler = loader.sampler
    it = iter(loader)
    next(it)
    import time

    time.sleep(0.3)
    assert sampler.calls <= 1 + 2 + 1
    it.close()


def test_a_feature_shorter_than_the_graph_is_refused():
    import graphfeed as gf

    g = gf.CSCGraph.from_edges(np.arange(99), np.arange(1, 100), 100)
    sampler = gf.NeighborSampler(g, [2])
    with pytest.raises(gf.GraphfeedError, match="has 10 rows but the sampler's graph has 100 nodes"):
        DataLoader(ItemSampler(np.arange(10), 5), sampler, node_features=InMemoryFeature(torch.zeros(10, 3)))
    with pytest.raises(gf.GraphfeedError, match="'labels' has 50 rows"):
        DataLoader(ItemSampler(np.arange(10), 5), sampler, labels=InMemoryFeature(torch.zeros(50)))
