"""Placement: where the graph and features live and where sampling runs.

- :class:`DataPlan` (:mod:`.plan`): the frozen choices of one process (feature backend, cache,
  mode, device, world) and the pipeline open -> share -> place; :func:`place` and
  :func:`node_loader` are its one-call forms for loaded objects,
- ``MODES`` (:mod:`.modes`): the placement modes, a registry of :class:`ModeSpec`,
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
from .modes import AUTO, MODES, ModeSpec, mode_spec, validate_mode
from .planner import (
    DEFAULT_HEADROOM,
    DEFAULT_SAMPLING_WORKSPACE,
    Placement,
    PlacementWarning,
    plan_placement,
)
from .workers import NumWorkersWarning, num_workers_message, warn_num_workers

_LAZY = {"apply_placement": ".apply", "PlacedData": ".apply", "estimate_bytes": ".apply",
         "DataPlan": ".plan", "place": ".plan", "node_loader": ".plan"}

__all__ = [
    "AUTO",
    "DataPlan",
    "DEFAULT_HEADROOM",
    "DEFAULT_SAMPLING_WORKSPACE",
    "MODES",
    "Hardware",
    "ModeSpec",
    "NumWorkersWarning",
    "PlacedData",
    "Placement",
    "PlacementWarning",
    "apply_placement",
    "detect_hardware",
    "estimate_bytes",
    "mode_spec",
    "node_loader",
    "place",
    "num_workers_message",
    "plan_placement",
    "validate_mode",
    "warn_num_workers",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


if TYPE_CHECKING:  # pragma: no cover
    from .apply import PlacedData, apply_placement, estimate_bytes
    from .plan import DataPlan, node_loader, place
