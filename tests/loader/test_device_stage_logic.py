"""The device stage's control flow with a fake ``torch.cuda`` (runs without a GPU): copies are
issued one batch ahead on the side stream, the caller's stream waits on each batch's event,
tensors are ``record_stream``-ed, pinned sources stay referenced until their copy completed,
errors surface at their own batch. The real CUDA path is exercised by test_cuda.py on a GPU."""

from __future__ import annotations

import contextlib

import pytest
import torch

import graphfeed.loader.device as D
from graphfeed.loader.base import IterStage


class FakeStream:
    def __init__(self, name="side"):
        self.name = name
        self.waited = []

    def wait_event(self, event):
        self.waited.append(event)


class FakeEvent:
    def __init__(self):
        self.stream = None
        self.done = False

    def record(self, stream):
        self.stream = stream

    def query(self):
        return self.done

    def synchronize(self):
        self.done = True


class FakeTensor:
    def __init__(self, batch):
        self.batch = batch
        self.recorded = []

    @property
    def is_cuda(self):
        return self.batch.on_gpu

    @property
    def device(self):
        return torch.device("cuda", 0) if self.batch.on_gpu else torch.device("cpu")

    def record_stream(self, stream):
        self.recorded.append(stream)


class FakeBatch:
    def __init__(self, i, on_gpu=False, host=None, copied_on=None):
        self.i, self.on_gpu, self.host, self.copied_on = i, on_gpu, host, copied_on
        self.tensor = FakeTensor(self)

    def to(self, device, non_blocking=False):
        assert non_blocking and device == torch.device("cuda", 0)
        return FakeBatch(self.i, True, host=self, copied_on=FakeCuda.current)


class FakeCuda:
    main = FakeStream("main")
    current = main


@pytest.fixture
def fake_cuda(monkeypatch):
    FakeCuda.main = FakeStream("main")
    FakeCuda.current = FakeCuda.main

    @contextlib.contextmanager
    def stream(s):
        prev, FakeCuda.current = FakeCuda.current, s
        try:
            yield
        finally:
            FakeCuda.current = prev

    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None: FakeStream("side"))
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "stream", stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: FakeCuda.current)
    monkeypatch.setattr(D, "batch_tensors", lambda mb: [mb.tensor])
    return FakeCuda


def staged_source(items, issued):
    def gen():
        for x in items:
            if isinstance(x, BaseException):
                raise x
            issued.append(x)
            yield D._Staged(FakeBatch(x), None)
    return IterStage(gen)


def test_copies_one_ahead_on_side_stream_and_caller_waits(fake_cuda):
    issued = []
    stage = D.DeviceStage(staged_source(range(4), issued), torch.device("cuda", 0), ahead=1)
    out = []
    for k in range(4):
        mb = next(stage)
        out.append(mb)
        assert mb.on_gpu and mb.i == k
        assert mb.copied_on is stage._stream  # copied on the side stream, not the caller's
        assert len(issued) == min(k + 2, 4)  # the next batch's copy is already issued
        ev = fake_cuda.main.waited[-1]  # the caller's stream waits on this batch's copy
        assert ev.stream is stage._stream and mb.tensor.recorded == [fake_cuda.main]
        # the pinned host batch stays referenced until its copy completed
        assert any(host is mb.host for _, host in stage._inflight)
    ev0 = fake_cuda.main.waited[0]
    ev0.done = True
    with pytest.raises(StopIteration):
        next(stage)
    assert all(host is not out[0].host for _, host in stage._inflight)
    stage.close()
    assert not stage._inflight and not stage._pending
    assert all(e.done for e in fake_cuda.main.waited)  # close waited for every copy


def test_error_surfaces_at_its_own_batch(fake_cuda):
    issued = []
    stage = D.DeviceStage(staged_source([0, 1, OSError("gone")], issued),
                          torch.device("cuda", 0), ahead=1)
    assert next(stage).i == 0
    assert next(stage).i == 1
    with pytest.raises(OSError, match="gone"):
        next(stage)


def test_already_on_device_is_not_copied(fake_cuda):
    ready = FakeEvent()
    gpu = FakeBatch(0, on_gpu=True)

    def gen():
        yield D._Staged(gpu, ready)

    stage = D.DeviceStage(IterStage(gen), torch.device("cuda", 0), ahead=1)
    got = next(stage)
    assert got is gpu  # no copy
    assert fake_cuda.main.waited == [ready]  # the caller waits for the worker's GPU work
    assert not stage._inflight
    stage.close()
