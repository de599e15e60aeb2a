"""How a rank's error reaches the user (issue 29): a user error (``GraphfeedError``) in a rank of
``launch`` (``train --nproc``, ``train --partitions``, ``bench dist``) is one line, the rank's
message, printed once by the parent (exit status 2 on the command line), with no traceback; an
unexpected exception keeps its traceback; a rank that only failed because another one did
(``PeerFailedError``), or was stopped, never hides the cause."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import _dist_ranks as ranks
import graphfeed
from graphfeed.distributed import RankFailedError, RankFailure, launch

pytestmark = [pytest.mark.dist, pytest.mark.timeout(300)]

TESTS_DIR = Path(__file__).resolve().parent
SRC_DIR = Path(graphfeed.__file__).resolve().parents[1]


def _run(argv, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC_DIR), str(TESTS_DIR), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True,
                          timeout=240, **kw)


def test_a_user_error_in_a_rank_is_its_message(no_leftover_segments):
    with pytest.raises(RankFailedError) as info:
        launch(ranks.user_error_on_rank, 2, 1, timeout_s=60)
    err = info.value
    assert str(err) == "rank 1 of 2 failed: part 1: bad input (a user error)"
    assert err.failure.kind == "user" and "Traceback" in err.failure.traceback


def test_the_cause_comes_before_a_peer_failure(no_leftover_segments):
    with pytest.raises(RankFailedError) as info:
        launch(ranks.first_rank_cannot_share, 2, timeout_s=60)
    err = info.value
    assert str(err) == "rank 0 of 2 failed: dataset x: no such array (a user error)"
    # rank 1 raised PeerFailedError, or the launcher stopped it first: either way, after
    assert [(f.rank, f.kind) for f in err.failures] == [(0, "user"), (1, "stopped")]


def test_failures_are_ordered_causes_first_whatever_arrived_first():
    peer = RankFailure(1, 1, "the first rank failed (see its error)", None, "stopped")
    cause = RankFailure(0, 1, "part 0: damaged", None, "user")
    err = RankFailedError([peer, cause], 2)
    assert err.rank == 0 and err.failures == [cause, peer]
    assert str(err) == "rank 0 of 2 failed: part 0: damaged"
    bug = RankFailure(0, 1, "ValueError: boom", "Traceback ...", "error")
    assert str(RankFailedError([peer, bug], 2)) == (
        "rank 0 of 2 failed: ValueError: boom; then rank 1: the first rank failed (see its error)")


SCRIPT = textwrap.dedent("""
    import sys
    import _dist_ranks
    from graphfeed.distributed import launch
    from graphfeed.errors import GraphfeedError

    if __name__ == "__main__":  # the ranks re-import this file
        try:
            launch(getattr(_dist_ranks, sys.argv[1]), 2, 1, timeout_s=60)
        except GraphfeedError as e:
            print(f"launcher: {e}", file=sys.stderr)
            sys.exit(2)
""")


@pytest.mark.parametrize("fn", ["user_error_on_rank", "fail_on_rank"])
def test_only_an_unexpected_exception_prints_a_traceback(fn, tmp_path):
    script = tmp_path / "launcher.py"
    script.write_text(SCRIPT)
    proc = _run([str(script), fn])
    assert proc.returncode == 2, proc.stderr
    if fn == "user_error_on_rank":
        assert proc.stderr.strip().splitlines() == [
            "launcher: rank 1 of 2 failed: part 1: bad input (a user error)"]
    else:
        assert "[graphfeed rank 1] Traceback" in proc.stderr
        assert "ValueError: boom on rank 1" in proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith(
            "launcher: rank 1 of 2 failed: ValueError: boom on rank 1")


def test_train_partitions_with_a_damaged_part_is_one_line(tiny_dataset, tmp_path):
    """The reproduction: a part whose indices.npy holds an id out of range, trained with
    ``--partitions --nproc 2``: the rank opening it refuses it; the user sees that one line."""
    import numpy as np

    from graphfeed.partition import partition_dataset

    book = partition_dataset(tiny_dataset, tmp_path / "p", 2, method="random")
    f = tmp_path / "p" / "part-00001" / "indices.npy"
    a = np.load(f)
    a[7] = -1
    np.save(f, a)
    proc = _run(["-m", "graphfeed", "train", "--partitions", str(book.path), "--nproc", "2",
                 "--epochs", "1", "--no-progress", "--no-mlp"])
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"graphfeed train: error: rank 1 of 2 failed: {f}: indices[7] = -1 is out of range "
        f"[0, {book.num_nodes})"], proc.stderr


def test_a_collective_broken_by_a_dead_peer_is_a_consequence():
    """A rank whose collective breaks because its peer died is no cause: listed after it, and its
    traceback is not printed (the CI failure of stop 33: gloo's "Connection closed by peer" on
    rank 0 printed a traceback above rank 1's one-line user error)."""
    from graphfeed.distributed.launcher import _failure_kind

    gloo = RuntimeError("[../gloo/transport/tcp/pair.cc:553] Connection closed by peer "
                        "[127.0.0.1]:30091. This is typically caused by a remote worker crashing.")
    assert _failure_kind(gloo) == "peer"
    assert _failure_kind(RuntimeError("boom")) == "error"
    peer = RankFailure(0, 1, "RuntimeError: Connection closed by peer", "Traceback ...", "peer")
    cause = RankFailure(1, 1, "part 1: damaged", None, "user")
    err = RankFailedError([peer, cause], 2)
    assert str(err) == "rank 1 of 2 failed: part 1: damaged"
    assert [f.rank for f in err.failures] == [1, 0]


def test_a_dead_peer_under_a_collective_is_reported_as_the_cause(capfd):
    """Rank 1 dies without a word while rank 0 waits in an all-reduce: the death is the cause and
    rank 0's broken collective comes after it, printed by nobody."""
    with pytest.raises(RankFailedError) as info:
        launch(ranks.die_before_all_reduce, 2, timeout_s=60, grace_s=30)
    err = info.value
    assert err.rank == 1 and err.failure.kind == "error", str(err)
    assert [(f.rank, f.kind) for f in err.failures][1:] == [(0, "peer")], err.failures
    assert "Traceback" not in capfd.readouterr().err
