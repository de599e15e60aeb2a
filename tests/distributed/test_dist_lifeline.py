"""Processes the launcher starts die with it (issue 12, defect 2).

A real launcher runs in a subprocess with two ranks that never end on their own. It is then sent
SIGTERM (a clean stop: ranks stopped, segments removed, a one-line error, non-zero exit) or
SIGKILL (no cleanup possible in the launcher: the ranks must notice and end themselves, and the
fork server must follow). Either way, within a few seconds no rank, no fork server and nothing
of the run in /dev/shm may remain.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import graphfeed
from graphfeed.distributed.shm import list_segments

pytestmark = [pytest.mark.dist, pytest.mark.timeout(240)]

TESTS_DIR = Path(__file__).resolve().parent
SRC_DIR = Path(graphfeed.__file__).resolve().parents[1]

SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import _dist_ranks
from graphfeed.distributed import launch

if __name__ == "__main__":
    launch(_dist_ranks.run_until_killed, 2, sys.argv[1], timeout_s=60)
"""


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC_DIR), env.get("PYTHONPATH", "")])
    return env


def _running(pid: int) -> bool:
    """Alive and not a zombie (orphans are reparented to a PID 1 that may never reap them)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _children() -> dict:
    """parent pid -> [child pids], from /proc."""
    out: dict = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(name))
    return out


def _descendants(pid: int) -> set:
    tree, todo, seen = _children(), [pid], set()
    while todo:
        for c in tree.get(todo.pop(), []):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def _wait_until(cond, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for: {what}")
        time.sleep(0.05)


def _start_launcher(tmp_path: Path):
    script = tmp_path / "launcher_script.py"
    script.write_text(SCRIPT.format(tests=str(TESTS_DIR)))
    out = tmp_path / "ranks"
    out.mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(script), str(out)],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"launcher ended early ({proc.returncode}): {proc.stderr.read()}")
        return all((out / f"{r}.json").exists() for r in (0, 1))

    _wait_until(ready, 180, "both ranks to start")
    infos = [json.loads((out / f"{r}.json").read_text()) for r in (0, 1)]
    ranks = [i["pid"] for i in infos]
    server = infos[0]["ppid"]
    run_id = infos[0]["run_id"]
    assert infos[1]["ppid"] == server != proc.pid  # forked by the fork server, not the launcher
    assert list_segments(run_id), "rank 0 should have created a segment"
    return proc, ranks, server, run_id


def _assert_nothing_left(pids, run_id: str) -> None:
    _wait_until(lambda: not any(_running(p) for p in pids), 10, f"processes {pids} to end")
    assert list_segments(run_id) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_sigterm_to_the_launcher_stops_everything_cleanly(tmp_path, sig):
    proc, ranks, server, run_id = _start_launcher(tmp_path)
    spawned = _descendants(proc.pid)
    assert set(ranks) | {server} <= spawned
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode not in (0, None)
    # the error is the last thing graphfeed prints; native extensions may add exit notices
    # after it (nanobind's leak report, once PyG has imported triton), which are not ours
    ours = err.split("\nnanobind:")[0].strip().splitlines()
    assert f"LaunchTerminated: stopped by {signal.Signals(sig).name}" in ours[-1]
    assert "rank(s) stopped, shared memory removed" in err
    _assert_nothing_left(spawned, run_id)


def test_sigkill_to_the_launcher_leaves_no_rank_no_server_no_segment(tmp_path):
    proc, ranks, server, run_id = _start_launcher(tmp_path)
    spawned = _descendants(proc.pid)
    proc.kill()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    _assert_nothing_left(spawned, run_id)
    assert "the launcher (pid" in err and "is gone: stopping" in err


def test_a_killed_fork_server_takes_its_ranks_along(tmp_path):
    # the other end of the chain: the ranks' parent-death signal is armed on the fork server
    proc, ranks, server, run_id = _start_launcher(tmp_path)
    spawned = _descendants(proc.pid)
    os.kill(server, signal.SIGKILL)
    _wait_until(lambda: not any(_running(p) for p in ranks), 10, "the ranks to follow the server")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "RankFailedError" in err
    _assert_nothing_left(spawned, run_id)


def test_train_cli_sigterm_gives_one_line_and_leaves_nothing(tmp_path):
    """The reproduction of the issue: `graphfeed train --nproc 2` on tiny, killed mid-run."""
    env = _env()
    env["GRAPHFEED_HOME"] = os.environ.get("GRAPHFEED_HOME", str(tmp_path / "home"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphfeed", "train", "--dataset", "tiny", "--nproc", "2",
         "--epochs", "400", "--batch-size", "32", "--no-progress", "--no-mlp", "--threads", "1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline()  # the first epoch line: both ranks are training
    while line and not line.startswith("epoch"):
        line = proc.stdout.readline()
    assert line, f"no epoch line; stderr: {proc.stderr.read()}"
    spawned = _descendants(proc.pid)
    assert len(spawned) >= 3, spawned  # fork server + 2 ranks (+ resource tracker)
    before = set(list_segments())
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    errors = [ln for ln in err.splitlines() if ln.startswith("graphfeed train:")]
    assert errors == ["graphfeed train: error: stopped by SIGTERM: 2 rank(s) stopped, "
                      "shared memory removed"], err
    assert "Traceback" not in err
    _wait_until(lambda: not any(_running(p) for p in spawned), 10, f"{spawned} to end")
    assert not (set(list_segments()) - before)
