"""How much slower than a quiet machine the tests run right now, so that their time limits scale
with it instead of failing on a loaded one (issue 42.7: under load 5 on 2 cores a fresh-clone
``make test`` took 73 minutes and three tests that pass alone ran out of time).

:func:`factor` is the larger of two measures, at least 1 and at most :data:`MAX_FACTOR`:

- the load: the 1-minute load average per CPU this process may run on, read when each test
  starts (a run beside others' timing runs slows by about that much);
- a measured reference: a fixed piece of Python and numpy work, timed (best of 3) once per
  session against :data:`REFERENCE_S`, what it takes on the 2-core machine ``make test`` is
  timed on when quiet (a slower machine scales its limits by how much slower it is).

``tests/conftest.py`` multiplies every pytest-timeout limit by it when a test starts, and
exports the value in :data:`ENV` so that child processes (ranks, compile runs) read the same
one; inner deadlines of a test (a ``launch(timeout_s=)``, a ``subprocess.run(timeout=)``)
take :func:`scaled` of the quiet figure.
"""

from __future__ import annotations

import functools
import os
import time

#: the factor of the test running now, set by ``tests/conftest.py`` (inherited by children)
ENV = "GRAPHFEED_TEST_SLOWNESS"
#: seconds :func:`_probe` takes on the quiet reference machine (best of 3)
REFERENCE_S = 0.036
MAX_FACTOR = 10.0


def _probe() -> float:
    import numpy as np

    t0 = time.perf_counter()
    x = 0
    for i in range(300_000):
        x += i * i
    np.sort(np.random.default_rng(0).random(400_000))
    return time.perf_counter() - t0


@functools.lru_cache(maxsize=None)
def measured_factor() -> float:
    """How much slower than the reference machine the probe ran, once per process."""
    return min(_probe() for _ in range(3)) / REFERENCE_S


def load_factor() -> float:
    """The 1-minute load average per CPU this process may use (1 where unknown)."""
    try:
        cpus = len(os.sched_getaffinity(0))
        return os.getloadavg()[0] / max(cpus, 1)
    except (AttributeError, OSError):
        return 1.0


def current_factor() -> float:
    """:func:`measured_factor` and :func:`load_factor` now, clamped to ``[1, MAX_FACTOR]``."""
    return min(max(1.0, measured_factor(), load_factor()), MAX_FACTOR)


def factor() -> float:
    """The factor of the test running now (:data:`ENV`, as its start set it), else measured."""
    try:
        return min(max(1.0, float(os.environ[ENV])), MAX_FACTOR)
    except (KeyError, ValueError):
        return current_factor()


def scaled(seconds: float) -> float:
    """``seconds`` (a limit that holds on a quiet machine) times :func:`factor`."""
    return seconds * factor()
