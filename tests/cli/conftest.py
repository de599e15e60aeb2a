"""Fixtures of this folder."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _same_run_on_every_machine(request):
    """These tests check the trainer's behaviour on CPU, also where a GPU is visible; those
    marked ``cuda`` are the exception: they run on the GPU they ask for."""
    if request.node.get_closest_marker("cuda") is None:
        request.getfixturevalue("cpu_only")
