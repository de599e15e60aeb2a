"""The num_workers message: why worker processes are not needed, and what to use instead."""

from __future__ import annotations

import warnings

import pytest

from graphfeed.errors import GraphfeedError
from graphfeed.placement import MODES, NumWorkersWarning, num_workers_message, warn_num_workers


@pytest.mark.parametrize("mode", ["cpu-cuda", "pinned-cuda", "cuda-cuda"])
def test_cuda_modes_explain_the_fork_problem(mode):
    msg = num_workers_message(mode, 4)
    assert "num_workers=4" in msg and mode in msg
    assert "threads" in msg and "Cannot re-initialize CUDA in forked subprocess" in msg
    assert "num_threads=N" in msg


def test_cpu_mode_message():
    msg = num_workers_message("cpu-cpu", 2, threads_option="threads")
    assert "num_workers=2" in msg and "threads=N" in msg and "CUDA" not in msg


def test_auto_and_unknown_modes():
    assert "num_workers" in num_workers_message("auto")
    with pytest.raises(GraphfeedError, match="valid modes"):
        num_workers_message("gpu")


@pytest.mark.parametrize("mode", MODES)
def test_warns_once_per_call_only_for_positive_counts(mode):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert warn_num_workers(mode, None) is False
        assert warn_num_workers(mode, 0) is False
        assert warn_num_workers(mode, 8) is True
    assert len(caught) == 1 and caught[0].category is NumWorkersWarning
    assert str(caught[0].message) == num_workers_message(mode, 8)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "4"])
def test_bad_counts(bad):
    with pytest.raises(GraphfeedError, match="num_workers"):
        warn_num_workers("cuda-cuda", bad)
