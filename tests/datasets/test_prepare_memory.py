"""``prepare`` refuses, before writing anything, a dataset whose per-node arrays do not fit the
memory this process may still use (a memory cgroup included), naming the figure and what helps;
allocations are checked against that memory, not the machine's."""

from __future__ import annotations

import pytest

import graphfeed._memory as M
from graphfeed.datasets import build
from graphfeed.errors import DatasetError


def test_check_allocation_uses_the_memory_left(monkeypatch):
    monkeypatch.setattr(M, "reclaimable_memory", lambda: 10**9)
    build.check_allocation(10**9 - 1, "a table")
    with pytest.raises(DatasetError, match=r"a table would need 2.0 GB, more than the 1.0 GB of "
                                           r"memory this process may still use; try less"):
        build.check_allocation(2 * 10**9, "a table", "try less")


@pytest.mark.parametrize("compact, per_node", [(False, 16), (True, 40)])
def test_prepare_node_bytes_and_refusal(monkeypatch, compact, per_node):
    n = 111_059_956
    assert build.prepare_node_bytes(n, compact) == per_node * (n + 1)
    monkeypatch.setattr(M, "reclaimable_memory", lambda: 2 * 10**9)
    if not compact:
        build.check_prepare_memory(n, compact, "edges.npy")  # 1.8 GB + the window: fits
        return
    with pytest.raises(DatasetError) as e:
        build.check_prepare_memory(n, compact, "edges.npy")
    msg = str(e.value)
    assert "preparing 111,059,956 nodes would need 4.5 GB" in msg
    assert "--memory-budget bounds only the edges" in msg and "16 B a node instead of 40" in msg


def test_a_small_prepare_passes(tmp_path):
    assert build.prepare_node_bytes(10, False) == 176
    build.check_prepare_memory(1000, True, str(tmp_path))


def test_prepare_generic_refuses_before_writing(tmp_path, monkeypatch):
    """The node count comes from the .npy headers, so the refusal comes before any file."""
    import numpy as np

    from graphfeed.datasets.importers import prepare
    from graphfeed.datasets._readers import EdgeSource

    n = 1000
    np.save(tmp_path / "x.npy", np.zeros((n, 4), np.float32))
    np.save(tmp_path / "y.npy", np.zeros(n, np.int64))
    monkeypatch.setattr(M, "reclaimable_memory", lambda: 20_000)
    with pytest.raises(DatasetError, match="preparing 1,000 nodes would need"):
        prepare(tmp_path / "out", edges=EdgeSource(arrays=(np.arange(5), np.arange(5))),
                features={"feat": tmp_path / "x.npy"}, labels=tmp_path / "y.npy")
    assert not (tmp_path / "out").exists()
