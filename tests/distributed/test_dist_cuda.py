"""CUDA: the machine's one shared copy is page-locked in place by each rank (run on a GPU)."""

import pytest

torch = pytest.importorskip("torch")

import _dist_ranks as ranks  # noqa: E402
from graphfeed.distributed import launch  # noqa: E402

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.dist,
    pytest.mark.timeout(180),
]


def test_shared_segment_is_pinned_in_place_by_every_rank(no_leftover_segments):
    out = launch(ranks.pin_shared_in_place, 2, timeout_s=60)
    n = 1 << 20
    for r in out:
        assert r["in_place"] and r["is_pinned"]
        assert r["gpu_sum"] == pytest.approx(n * (n - 1) / 2, rel=1e-6)
        assert r["read_only"] is True or "read-only registration" in r["read_only"]
