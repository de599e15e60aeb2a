"""Run a function in N local processes, as torchrun would, with fail-fast error handling.

``launch(fn, nproc, *args)`` starts ``nproc`` processes with ``torch.multiprocessing``'s
*forkserver* start method (spawn where the platform lacks it; never a plain fork of the caller:
forking a process that has torch threads or CUDA state is unsafe). The fork server is a clean,
single-threaded process that imports torch, PyG, numba and graphfeed's kernels once
(:mod:`._preload`) and never touches CUDA, so the ranks share those pages copy-on-write rather
than each paying ~250 MB of private import memory. It sets
the variables torchrun sets (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``GROUP_RANK``, ``MASTER_ADDR=127.0.0.1``, a free ``MASTER_PORT``) plus graphfeed's run id and
collective timeout, and calls ``fn(*args)`` in each. The parent returns the ranks' results in
rank order, or, as soon as one rank fails, stops the others and raises :class:`RankFailedError`
naming the failed rank and its error. A rank that fails with a user error (``GraphfeedError``,
:data:`graphfeed.errors.USER_ERRORS`) prints nothing and the error is its one-line message, as
in one process; any other exception is printed with its traceback by the rank, except a
collective broken by a peer that went away, which is the consequence of another rank's failure
and printed by the launcher only when no other cause turns up. Every shared-memory segment of the run is removed at the
end, whatever happened (see :mod:`graphfeed.distributed.shm`).

Processes we start die with us. The chain is launcher -> fork server -> ranks, and each link is
covered:

- **Launcher dies, even by SIGKILL:** every rank holds the read end of a pipe whose only write end
  is in the launcher (multiprocessing's parent sentinel). A watchdog thread in each rank waits on
  it; at EOF it removes the run's ``/dev/shm`` segments and ends the rank. A parent-death signal
  cannot do this job: with a fork server, the ranks' parent is the server, not the launcher.
- **Fork server:** it exits by itself once no launcher and no rank holds its "alive" pipe, so it
  follows the ranks (it is kept single-threaded and is not touched here).
- **Fork server dies first** (killed by someone): the ranks have ``PR_SET_PDEATHSIG`` = SIGKILL
  (Linux), so they follow it, and the launcher reports them.
- **SIGTERM / SIGHUP to the launcher** while ranks run: it stops the ranks (SIGTERM, then SIGKILL
  after :data:`TERMINATE_GRACE_S`), removes the segments and raises :class:`LaunchTerminated`,
  which the CLI prints as one line (exit status 2).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Sequence

from .._checks import check_int
from ..errors import USER_ERRORS, GraphfeedError, PeerFailedError
from .shm import RUN_ID_ENV, remove_segments
from .world import DEFAULT_TIMEOUT_S, TIMEOUT_ENV

__all__ = ["launch", "RankFailedError", "RankFailure", "LaunchTerminated", "free_port"]

#: Seconds a rank gets between SIGTERM and SIGKILL when the parent stops it.
TERMINATE_GRACE_S = 5.0


#: :attr:`RankFailure.kind`: an unexpected exception (its traceback went to the rank's stderr)
#: or a death without a word; a user error (``error`` is its message, nothing was printed); a
#: collective that broke because a peer's connection ended (gloo's "Connection closed by peer",
#: NCCL's remote errors: what a rank sees when another one died first; the launcher prints its
#: traceback only if no other rank turns out to be the cause); the rank was stopped (by the
#: launcher, a signal, or the failure of another rank it learnt of:
#: :class:`~graphfeed.errors.PeerFailedError`), which is no cause of its own
FAILURE_KINDS = ("error", "user", "peer", "stopped")

#: the order :class:`RankFailedError` lists failures in: causes first (stable within a kind)
_KIND_ORDER = {"error": 0, "user": 0, "peer": 1, "stopped": 2}

#: Seconds the launcher waits for the cause when the only failures so far are consequences (a
#: rank that learnt of a peer's failure reports it before the failed rank's own report arrives)
#: before it stops the ranks still running.
CAUSE_WAIT_S = 10.0

#: what a broken collective says when the rank at the other end is gone
_PEER_LOST = ("Connection closed by peer", "Connection reset by peer", "Broken pipe",
              "ncclRemoteError", "NCCL communicator was aborted")


@dataclass(frozen=True)
class RankFailure:
    """How one rank ended badly: its exit code (negative: killed by that signal) and, if it
    raised, the exception line (``"ValueError: boom"``; a user error's message alone) and the
    full traceback text; ``kind``: one of :data:`FAILURE_KINDS`."""

    rank: int
    exitcode: Optional[int]
    error: Optional[str] = None
    traceback: Optional[str] = None
    kind: str = "error"

    def __post_init__(self):
        assert self.kind in FAILURE_KINDS, self.kind

    def describe(self) -> str:
        if self.error:
            return self.error
        if self.exitcode is not None and self.exitcode < 0:
            try:
                name = signal.Signals(-self.exitcode).name
            except ValueError:
                name = f"signal {-self.exitcode}"
            return f"killed by {name}"
        return f"exited with code {self.exitcode} without reporting an error"


class RankFailedError(GraphfeedError):
    """A rank of a :func:`launch` run failed; ``failure`` is the first failure, ``failures`` all
    of them (ranks that failed because a peer had failed come after the first, and so do the
    ranks that were stopped, whenever they reported). When the first is a user error the
    message is ``rank R of N failed: <its message>`` and nothing more: one line, as the same error
    reads in one process."""

    def __init__(self, failures: Sequence[RankFailure], nproc: int):
        # the causes first: a rank whose collective broke, that was stopped, or only reports
        # its peer's failure, says nothing new
        self.failures = sorted(failures, key=lambda f: _KIND_ORDER[f.kind])
        self.failure = self.failures[0]
        self.rank = self.failure.rank
        msg = f"rank {self.rank} of {nproc} failed: {self.failure.describe()}"
        others = [f for f in self.failures[1:]]
        if others and self.failure.kind != "user":
            msg += "; then " + ", ".join(f"rank {f.rank}: {f.describe()}" for f in others)
        super().__init__(msg)


class LaunchTerminated(GraphfeedError):
    """The launcher got SIGTERM or SIGHUP while its ranks ran: they were stopped and the run's
    shared-memory segments removed. ``signum`` is the signal."""

    def __init__(self, signum: int, nproc: int):
        self.signum = int(signum)
        super().__init__(
            f"stopped by {signal.Signals(signum).name}: {nproc} rank(s) stopped, "
            "shared memory removed"
        )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the usual small race applies)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _exception_line(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    text = "".join(lines).strip().splitlines()
    return text[-1] if text else type(exc).__name__


#: prctl(2) option: the signal a process gets when the thread that forked it ends (Linux).
_PR_SET_PDEATHSIG = 1


def _set_parent_death_signal(sig: int) -> bool:
    """``prctl(PR_SET_PDEATHSIG, sig)`` through libc; False where unsupported (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - no prctl symbol
        return False


def _follow_parents(rank: int, run_id: str) -> None:
    """Rank side: end this rank when its launcher or its fork server dies (see the module doc).

    The launcher is watched through multiprocessing's parent sentinel (the read end of a pipe
    whose write end only the launcher holds: it reads EOF when the launcher dies, however it
    died). The watchdog is a daemon thread blocked in ``wait``; it removes the run's segments and
    calls ``os._exit``, which needs neither the main thread nor a working process group.
    """
    import multiprocessing
    import multiprocessing.connection as mpc

    forker = os.getppid()
    # the fork server (or, with spawn, the launcher's thread): SIGKILL us when it ends
    if _set_parent_death_signal(signal.SIGKILL) and os.getppid() != forker:
        os._exit(1)  # it ended before the signal was armed
    parent = multiprocessing.parent_process()
    if parent is None:  # pragma: no cover - always set for spawned / forkserver children
        return

    def watch() -> None:
        mpc.wait([parent.sentinel])
        with contextlib.suppress(Exception):
            sys.stderr.write(
                f"[graphfeed rank {rank}] the launcher (pid {parent.pid}) is gone: stopping\n"
            )
            sys.stderr.flush()
        with contextlib.suppress(Exception):
            remove_segments(run_id)
        os._exit(1)

    threading.Thread(target=watch, name=f"graphfeed-rank{rank}-lifeline", daemon=True).start()


def _rank_main(rank: int, nproc: int, env: dict, conn, fn, args) -> None:
    """Entry point of each spawned rank: set torchrun's variables, run ``fn``, report."""
    _follow_parents(rank, env[RUN_ID_ENV])
    os.environ.update(env)
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(nproc),
        LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK="0",
        ROLE_RANK=str(rank),
        ROLE_WORLD_SIZE=str(nproc),
    )
    if "torch" in sys.modules and env.get("OMP_NUM_THREADS", "").isdigit():
        # torch was imported while unpickling this process's arguments: apply the thread count
        sys.modules["torch"].set_num_threads(max(1, int(env["OMP_NUM_THREADS"])))
    code = 0
    try:
        result = fn(*args)
        conn.send(("ok", result))
    except BaseException as e:  # noqa: BLE001 - everything is reported to the parent
        code = 1
        tb = traceback.format_exc()
        kind = _failure_kind(e)
        # only a bug's traceback is printed here: a user error is one line, which the parent
        # prints; a rank that was stopped (SIGTERM -> SystemExit, Ctrl-C, a peer's failure) is
        # named in the parent's error when it matters
        if kind == "error":
            with contextlib.suppress(OSError):
                sys.stderr.write(f"[graphfeed rank {rank}] {tb}")
                sys.stderr.flush()
        try:
            conn.send(("error", str(e) if kind == "user" else _exception_line(e), tb, kind))
        except Exception:  # pragma: no cover - parent gone or unpicklable
            pass
    finally:
        try:
            from .world import shutdown

            shutdown()
        except Exception:  # pragma: no cover
            pass
        conn.close()
    if code:
        sys.exit(code)


def _failure_kind(e: BaseException) -> str:
    """:data:`FAILURE_KINDS` of the exception a rank raised."""
    if isinstance(e, (PeerFailedError, SystemExit, KeyboardInterrupt)):
        return "stopped"
    if isinstance(e, USER_ERRORS):
        return "user"
    return "peer" if _lost_peer(e) else "error"


def _lost_peer(e: BaseException) -> bool:
    """True for the error of a collective whose peer went away (torch raises gloo's as a plain
    ``RuntimeError``; the message is all there is to tell it by)."""
    dist = sys.modules.get("torch.distributed")
    net = getattr(dist, "DistNetworkError", None)
    if net is not None and isinstance(e, net):
        return True
    return isinstance(e, RuntimeError) and any(m in str(e) for m in _PEER_LOST)


#: extra modules the fork server imports (``launch(preload=...)``), comma-separated
PRELOAD_ENV = "GRAPHFEED_PRELOAD"


def _context(tmp, start_method: Optional[str], preload: Sequence[str] = ()):
    import multiprocessing as mp

    if start_method is None:
        start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    if start_method not in ("forkserver", "spawn"):
        raise GraphfeedError(f"start_method must be 'forkserver' or 'spawn', got {start_method!r}")
    ctx = tmp.get_context(start_method)
    if start_method == "forkserver":
        # takes effect when the server starts (the first launch in this process); later launches
        # reuse the running server. The server inherits the environment, and with it the list.
        os.environ[PRELOAD_ENV] = ",".join(preload)
        ctx.set_forkserver_preload(["graphfeed.distributed._preload"])
    return ctx


def _server_pids(ctx) -> list:
    """The fork server's pid (it holds the preloaded pages the ranks share), if one runs."""
    if ctx.get_start_method() != "forkserver":
        return []
    import multiprocessing.forkserver as fs

    pid = getattr(getattr(fs, "_forkserver", None), "_forkserver_pid", None)
    return [pid] if pid else []


def launch(
    fn: Callable[..., Any],
    nproc: int,
    *args,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    grace_s: float = 0.0,
    env: Optional[dict] = None,
    monitor: Optional[Callable[[list], None]] = None,
    monitor_interval_s: float = 0.2,
    start_method: Optional[str] = None,
    preload: Sequence[str] = (),
) -> list:
    """Run ``fn(*args)`` in ``nproc`` spawned processes; return their results in rank order.

    - ``fn`` and ``args`` must be picklable (a module-level function). Each rank sees torchrun's
      variables, so ``World.from_env()`` and ``graphfeed.distributed.init()`` work unchanged.
    - ``timeout_s`` is passed to the ranks as their collective timeout (``GRAPHFEED_DIST_TIMEOUT``).
    - When a rank fails (raises, or dies), the parent waits ``grace_s`` seconds for the others to
      end on their own (they fail on their next collective, at the latest after ``timeout_s``),
      then sends SIGTERM, and SIGKILL after 5 s more. It then raises :class:`RankFailedError`.
      While the only failures are consequences (a rank that learnt of a peer's failure, or whose
      collective broke), it waits up to :data:`CAUSE_WAIT_S` for the cause to be reported.
    - ``env``: extra environment variables for the ranks.
    - ``monitor(pids)``: called in the parent every ``monitor_interval_s`` while ranks run (for
      example to sample memory) with the pids of the live ranks and of the fork server, whose
      preloaded pages the ranks share; an exception from it stops the run.
    - ``start_method``: ``"forkserver"`` (default where available: preloaded imports shared by
      the ranks) or ``"spawn"`` (every rank imports everything itself).
    - ``preload``: modules of the caller (e.g. its training code) for the fork server to import
      after graphfeed's own, so the ranks share them too; the first launch's list is the one the
      server keeps.
    - Every ``/dev/shm`` segment of this run (``graphfeed-<run id>-*``) is removed before
      returning or raising, including after SIGKILL of a rank. ``KeyboardInterrupt`` in the parent
      stops every rank; so does SIGTERM or SIGHUP (called from the main thread), which then raises
      :class:`LaunchTerminated`. If the launcher is killed outright (SIGKILL), each rank sees it
      and ends itself within a moment, removing the segments; the fork server follows.
    """
    import multiprocessing.connection as mpc

    import torch.multiprocessing as tmp

    nproc = check_int("nproc", nproc, 1)
    if timeout_s <= 0:
        raise GraphfeedError(f"timeout_s must be > 0, got {timeout_s}")
    run_id = f"{os.getpid()}x{secrets.token_hex(4)}"
    child_env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        RUN_ID_ENV: run_id,
        TIMEOUT_ENV: repr(float(timeout_s)),
        # the ranks share 127.0.0.1: make gloo use the loopback device, not the hostname's address
        "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", _loopback_ifname()),
        # one rank per core is the norm; torch's default would oversubscribe N-fold
        "OMP_NUM_THREADS": os.environ.get(
            "OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc))
        ),
    }
    child_env.update(env or {})
    ctx = _context(tmp, start_method, preload)
    procs, conns = [], []
    results: dict = {}
    failures: list[RankFailure] = []
    reported: set = set()
    signals = _StopSignals(nproc)
    signals.install()
    try:
        for rank in range(nproc):
            parent_conn, child_conn = ctx.Pipe(duplex=False)
            conns.append(parent_conn)
            p = ctx.Process(
                target=_rank_main,
                args=(rank, nproc, child_env, child_conn, fn, args),
                name=f"graphfeed-rank{rank}",
                daemon=False,
            )
            procs.append(p)  # before start: a signal during start() must still stop it
            p.start()
            child_conn.close()
        by_conn = {c: r for r, c in enumerate(conns)}
        by_sentinel = {p.sentinel: r for r, p in enumerate(procs)}
        open_conns = set(conns)
        alive = set(range(nproc))
        first_failure_at = None
        stopped: set = set()
        killed_by_us: set = set()  # pids the launcher sent SIGKILL
        last_monitor = 0.0
        while alive:
            now = time.monotonic()
            if monitor is not None and now - last_monitor >= monitor_interval_s:
                last_monitor = now
                monitor([procs[r].pid for r in sorted(alive)] + _server_pids(ctx))
            # with no cause in yet, the others get CAUSE_WAIT_S to report theirs
            wait_s = grace_s if any(_KIND_ORDER[f.kind] == 0 for f in failures) else max(
                grace_s, CAUSE_WAIT_S)
            if first_failure_at is not None and now - first_failure_at >= wait_s:
                # only those still running are stopped by us; one that already died (its
                # sentinel not yet handled) keeps its own cause
                running = [r for r in alive if procs[r].exitcode is None]
                stopped.update(running)
                killed_by_us |= _stop([procs[r] for r in running])
            wait_for = list(open_conns) + [procs[r].sentinel for r in alive]
            timeout = monitor_interval_s if monitor is not None else 0.5
            if first_failure_at is not None:
                timeout = min(timeout, max(0.01, first_failure_at + wait_s - now))
            for obj in mpc.wait(wait_for, timeout=timeout):
                if obj in by_conn:
                    r = by_conn[obj]
                    try:
                        msg = obj.recv()
                    except (EOFError, OSError):
                        open_conns.discard(obj)
                        continue
                    open_conns.discard(obj)
                    reported.add(r)
                    if msg[0] == "ok":
                        results[r] = msg[1]
                    else:
                        failures.append(RankFailure(r, None, *msg[1:]))
                else:
                    r = by_sentinel[obj]
                    procs[r].join()
                    alive.discard(r)
                    # drain a report that raced with the exit
                    c = conns[r]
                    if c in open_conns:
                        try:
                            if c.poll(0):
                                msg = c.recv()
                                reported.add(r)
                                if msg[0] == "ok":
                                    results[r] = msg[1]
                                else:
                                    failures.append(RankFailure(r, None, *msg[1:]))
                        except (EOFError, OSError):
                            pass
                        open_conns.discard(c)
                    code = procs[r].exitcode
                    # A rank counts as stopped by us only if it died of a signal we sent it. With
                    # the fork server, a rank killed by someone else may still look alive for a
                    # moment (its status comes through the server) when we stop the others.
                    # (A stopped rank may also exit through its SIGTERM handler with a code.)
                    ours = r in stopped and not (
                        code == -signal.SIGKILL and procs[r].pid not in killed_by_us
                    )
                    if code != 0 and r not in reported:
                        if ours:
                            failures.append(RankFailure(r, code, "stopped by the launcher",
                                                        kind="stopped"))
                        else:
                            # died without a word (signal, os._exit): the cause, so listed first
                            failures.insert(0, RankFailure(r, code))
                    elif code != 0:
                        failures[:] = [replace(f, exitcode=code) if f.rank == r else f
                                       for f in failures]
                    elif r not in results:
                        failures.append(RankFailure(r, 0, "exited without returning a result"))
            if failures and first_failure_at is None:
                first_failure_at = time.monotonic()
    finally:
        signals.hold()  # a signal from here on waits until the cleanup below is done
        _stop(procs)
        for c in conns:
            c.close()
        remove_segments(run_id)
        signals.restore()  # raises LaunchTerminated for a signal that came during the cleanup
    if failures:
        err = RankFailedError(failures, nproc)
        head = err.failure
        if head.kind == "peer" and head.traceback:
            # no rank turned out to be the cause: this broken collective is the news
            with contextlib.suppress(OSError):
                sys.stderr.write(f"[graphfeed rank {head.rank}] {head.traceback}")
                sys.stderr.flush()
        raise err
    return [results[r] for r in range(nproc)]


class _StopSignals:
    """SIGTERM / SIGHUP to the launcher while ranks run: raise :class:`LaunchTerminated` in the
    main thread, so that ``launch``'s ``finally`` stops the ranks and removes the segments (the
    default action would kill the launcher and leave both behind). Only the first signal raises;
    after :meth:`hold` one is remembered and raised by :meth:`restore`, which puts the previous
    handlers back and then defers to a previous Python handler. Signals set to be ignored stay
    ignored. Outside the main thread nothing is installed (Python only allows it there)."""

    def __init__(self, nproc: int):
        self.nproc = nproc
        self.received: Optional[int] = None
        self._holding = False
        self._raised = False
        self._previous: dict = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is None:
                continue
            prev = signal.getsignal(sig)
            if prev is signal.SIG_IGN or prev is None:  # ignored, or set outside Python
                continue
            self._previous[sig] = prev
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:
        if self.received is not None:
            return  # already stopping
        self.received = signum
        if not self._holding:
            self._raised = True
            raise LaunchTerminated(signum, self.nproc)

    def hold(self) -> None:
        self._holding = True

    def restore(self) -> None:
        previous, self._previous = self._previous, {}
        for sig, prev in previous.items():
            signal.signal(sig, prev)
        if self.received is None:
            return
        prev = previous.get(self.received)
        if callable(prev):
            prev(self.received, None)
        if not self._raised:
            raise LaunchTerminated(self.received, self.nproc)


def _stop(procs) -> set:
    """SIGTERM every live process, SIGKILL those still alive after ``TERMINATE_GRACE_S``.
    Returns the pids that were sent SIGKILL (so a SIGKILL death can be told apart from one
    the launcher did not cause)."""
    killed: set = set()
    live = [p for p in procs if p.exitcode is None and p.pid is not None]
    if not live:
        return killed
    for p in live:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + TERMINATE_GRACE_S
    for p in live:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in live:
        if p.is_alive():
            killed.add(p.pid)
            p.kill()
            p.join()
    return killed


def _loopback_ifname() -> str:
    try:
        for _, name in socket.if_nameindex():
            if name == "lo" or name.startswith("lo"):
                return name
    except OSError:  # pragma: no cover
        pass
    return "lo"
