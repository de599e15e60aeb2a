"""Helpers for the loader tests: a tiny deterministic reference sampler, thread accounting."""

from __future__ import annotations

import gc
import threading
import time

import torch

from graphfeed.sampling.base import Block, MiniBatch, Sampler


class ToySampler(Sampler):
    """One-layer sampler whose output depends only on (seeds, epoch, batch_index).

    Each seed gets ``fanout`` random "neighbours" in ``[0, num_nodes)``; the block's sources are
    the seeds followed by the unique new neighbours. ``delay_s`` sleeps a batch-dependent time so
    worker threads finish out of order (exercises the re-ordering).
    """

    def __init__(self, num_nodes: int, fanout: int = 3, seed: int = 0, delay_s: float = 0.0):
        self._num_nodes, self.fanout, self.seed, self.delay_s = num_nodes, fanout, seed, delay_s
        self.calls = 0
        self.executors = set()  # every executor sample() was handed

    @property
    def num_nodes(self) -> int:
        return self._num_nodes

    @property
    def fanouts(self) -> tuple[int, ...]:
        return (self.fanout,)

    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0, executor=None) -> MiniBatch:
        self.calls += 1
        self.executors.add(executor)
        if self.delay_s:
            time.sleep(self.delay_s * ((batch_index * 7 + epoch) % 4))
        seeds = torch.as_tensor(seeds, dtype=torch.int64)
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch * 10_007 + batch_index)
        nbrs = torch.randint(0, self.num_nodes, (seeds.numel(), self.fanout), generator=g)
        new = torch.unique(nbrs.flatten())
        new = new[~torch.isin(new, seeds)]
        src = torch.cat([seeds, new])
        # local ids: position in src
        pos = {int(v): i for i, v in enumerate(src.tolist())}
        rows = torch.tensor([pos[int(v)] for v in nbrs.flatten().tolist()], dtype=torch.int64)
        cols = torch.arange(seeds.numel()).repeat_interleave(self.fanout)
        return MiniBatch(seeds=seeds, blocks=[Block(torch.stack([rows, cols]), src, seeds.numel())])


def loader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("graphfeed-loader")]


def wait_no_loader_threads(timeout: float = 5.0, *, collect: bool = True) -> list[threading.Thread]:
    """Loader threads still alive after ``timeout`` seconds (empty when they all ended);
    ``collect`` runs the garbage collector once if threads are still there after 0.5 s."""
    deadline = time.monotonic() + timeout
    collected = not collect
    while True:
        alive = loader_threads()
        if not alive or time.monotonic() > deadline:
            return alive
        if not collected and time.monotonic() > deadline - timeout + 0.5:
            gc.collect()
            collected = True
        time.sleep(0.01)
