"""Placement: where the graph and features live and where sampling runs.

- :func:`detect_hardware` -> :class:`Hardware` (host/GPU memory, ranks per machine),
- :func:`plan_placement` -> :class:`Placement` (``mode``, ``reason``, ``device``),
- :func:`apply_placement` -> :class:`PlacedData` (sampler and features ready for the loader),
- :func:`num_workers_message` / :func:`warn_num_workers`: why graphfeed needs no worker
  processes.

Importing this package imports neither torch nor numba; ``apply_placement`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

from .hardware import Hardware, detect_hardware
from .planner import (
    AUTO,
    DEFAULT_HEADROOM,
    DEFAULT_SAMPLING_WORKSPACE,
    MODES,
    Placement,
    PlacementWarning,
    plan_placement,
    validate_mode,
)
from .workers import NumWorkersWarning, num_workers_message, warn_num_workers

_LAZY = {"apply_placement": ".apply", "PlacedData": ".apply", "estimate_bytes": ".apply"}

__all__ = [
    "AUTO",
    "DEFAULT_HEADROOM",
    "DEFAULT_SAMPLING_WORKSPACE",
    "MODES",
    "Hardware",
    "NumWorkersWarning",
    "PlacedData",
    "Placement",
    "PlacementWarning",
    "apply_placement",
    "detect_hardware",
    "estimate_bytes",
    "num_workers_message",
    "plan_placement",
    "validate_mode",
    "warn_num_workers",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


if TYPE_CHECKING:  # pragma: no cover
    from .apply import PlacedData, apply_placement, estimate_bytes
