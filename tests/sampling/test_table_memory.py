"""A sampling method whose tables would not fit the memory left is refused before it allocates
them, naming the size and the way out (at papers' 1.6 billion edges they are 13 to 32 GB)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import graphfeed._memory as M
from graphfeed.errors import GraphfeedError
from graphfeed.sampling import SamplingMethod, build_sampler


@pytest.mark.parametrize("kind, hint", [("labor", "--labor-variates iid"),
                                        ("weighted", "more memory")])
def test_tables_larger_than_the_memory_left_are_refused(tiny_dataset, monkeypatch, kind, hint):
    g = tiny_dataset.graph
    method = SamplingMethod(kind)
    if kind == "weighted":
        method = method.bind({"weights": np.ones(g.num_edges, dtype=np.float32)})
    s = build_sampler("neighbor", g, [5, 5], method=method)
    monkeypatch.setattr(M, "reclaimable_memory", lambda: 1000)
    with pytest.raises(GraphfeedError, match=f"tables for {g.num_edges:,} edges.*{hint}"):
        s.sample(torch.arange(10))
    monkeypatch.setattr(M, "reclaimable_memory", lambda: 10**12)
    assert s.sample(torch.arange(10)).seeds.shape[0] == 10  # room again: built and sampled
