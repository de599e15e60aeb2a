"""launch(): torchrun-like environment, results in rank order, fail fast, clean /dev/shm."""

import signal

import pytest

import _dist_ranks as ranks
from graphfeed.distributed import RankFailedError, launch
from graphfeed.errors import GraphfeedError

pytestmark = [pytest.mark.dist, pytest.mark.timeout(120)]


def test_exception_in_one_rank_names_it_and_cleans_up(no_leftover_segments):
    with pytest.raises(RankFailedError) as info:
        launch(ranks.fail_on_rank, 2, 1, timeout_s=60)
    err = info.value
    assert isinstance(err, GraphfeedError)
    assert err.rank == 1
    assert "rank 1 of 2 failed: ValueError: boom on rank 1" in str(err)
    assert "Traceback" in err.failure.traceback
    # rank 0 was in a collective whose peer died: it failed too (by itself or stopped), after
    assert [f.rank for f in err.failures] == [1, 0]


def test_sigkilled_rank_is_reported_and_its_orphan_segment_removed(no_leftover_segments):
    with pytest.raises(RankFailedError) as info:
        launch(ranks.kill_in_window, 2, 0, timeout_s=60)
    err = info.value
    assert err.rank == 0 and err.failure.exitcode == -signal.SIGKILL
    assert "killed by SIGKILL" in str(err)
    # the fixture checks that the segment rank 0 created (and never unlinked) is gone


def test_hung_rank_makes_the_others_fail_on_the_collective_timeout(no_leftover_segments):
    # Rank 1 sleeps without failing, so the launcher stops nobody until a rank fails: the first
    # failure can only be rank 0 ending by itself, with the collective's timeout error (if the
    # timeout did not work, rank 0 would hang and the test's own timeout would fail it).
    with pytest.raises(RankFailedError) as info:
        launch(ranks.hang_on_rank, 2, 1, 5.0, timeout_s=5.0)
    err = info.value
    assert err.rank == 0
    assert "collective failed after" in err.failure.error
    assert [f.rank for f in err.failures] == [0, 1]
    assert err.failures[1].error == "stopped by the launcher" or err.failures[1].error.startswith(
        "SystemExit"
    )


def test_rejects_bad_arguments():
    with pytest.raises(GraphfeedError):
        launch(ranks.report_world, 0)
    with pytest.raises(GraphfeedError):
        launch(ranks.report_world, 1, timeout_s=0)
