"""Issue 42 (7): time limits scale with how loaded or slow the machine is (``load_scale.py``):
every pytest-timeout limit through ``tests/conftest.py``'s hook, and the inner deadlines of the
tests that ran out of time under load 5 on 2 cores through ``load_scale.scaled``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import load_scale


def _root_conftest(config):
    want = Path(__file__).with_name("conftest.py").resolve()
    for plugin in config.pluginmanager.get_plugins():
        if Path(getattr(plugin, "__file__", "") or "/").resolve() == want:
            return plugin
    raise AssertionError("tests/conftest.py is not loaded")


def test_the_factor_follows_the_load_and_the_measured_speed(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (5.0, 5.0, 5.0))
    monkeypatch.setattr(load_scale, "measured_factor", lambda: 1.2)
    assert load_scale.current_factor() == pytest.approx(2.5)  # load 5 on 2 cores
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert load_scale.current_factor() == pytest.approx(1.2)  # a slower machine, quiet
    monkeypatch.setattr(load_scale, "measured_factor", lambda: 0.5)
    assert load_scale.current_factor() == 1.0  # never below a quiet machine's limits
    monkeypatch.setattr(os, "getloadavg", lambda: (500.0, 0, 0))
    assert load_scale.current_factor() == load_scale.MAX_FACTOR
    monkeypatch.setenv(load_scale.ENV, "3")
    assert load_scale.factor() == 3.0 and load_scale.scaled(60) == 180.0
    monkeypatch.setenv(load_scale.ENV, "junk")
    assert load_scale.factor() == load_scale.MAX_FACTOR  # measured instead


def test_the_measured_reference_is_a_quiet_machines_figure():
    # the probe itself is short: 3 runs at session start cost a fraction of a second even loaded
    assert load_scale._probe() < 20 * load_scale.REFERENCE_S


def test_every_timeout_limit_is_scaled_when_the_test_starts(request, monkeypatch):
    pytest.importorskip("pytest_timeout")
    import pytest_timeout

    conftest = _root_conftest(request.config)
    seen = []
    monkeypatch.setattr(pytest_timeout, "pytest_timeout_set_timer",
                        lambda item, settings: seen.append(settings) or True)
    monkeypatch.setattr(conftest, "current_factor", lambda: 2.5)
    monkeypatch.delenv(load_scale.ENV, raising=False)
    settings = pytest_timeout.Settings(300, "signal", False, False)
    assert conftest.pytest_timeout_set_timer(item=request.node, settings=settings) is True
    assert seen == [settings._replace(timeout=750)]
    assert os.environ[load_scale.ENV] == "2.500"  # the test's deadlines and children read it
    assert load_scale.scaled(60) == 150.0


def test_this_test_runs_under_a_scaled_limit():
    # set by the hook when this very test started
    assert float(os.environ[load_scale.ENV]) >= 1.0
