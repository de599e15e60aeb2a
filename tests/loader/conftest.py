"""Loader test fixtures."""

from __future__ import annotations

import threading

import pytest

from loader_helpers import wait_no_loader_threads


@pytest.fixture
def thread_baseline():
    """Fails the test if it leaves threads behind (compares ``threading.enumerate()``)."""
    before = set(threading.enumerate())
    yield before
    left = wait_no_loader_threads()
    after = set(threading.enumerate()) - before
    assert not left and not after, f"leaked threads: {left or after}"
