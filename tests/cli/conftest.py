"""Fixtures of this folder."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _same_run_on_every_machine(cpu_only):
    """These tests check the trainer's behaviour on CPU, also where a GPU is visible."""
