"""Placement: where the graph and features live and where sampling runs.

- :class:`DataPlan` (:mod:`.plan`): the frozen choices of one process (feature backend, cache,
  mode, device, world) and the pipeline open -> share -> place; :func:`place` and
  :func:`node_loader` are its one-call forms for loaded objects,
- ``MODES`` (:mod:`.modes`): the placement modes, a registry of :class:`ModeSpec`,
- :func:`detect_hardware` -> :class:`Hardware` (host/GPU memory, ranks per machine),
- :func:`plan_placement` -> :class:`Placement` (``mode``, ``reason``, ``device``),
- :class:`Placed` (:mod:`.base`): the one interface of placed data (loaders, input widths,
  labels, the placement line), implemented by :class:`PlacedData` (one graph, untyped or typed)
  and ``PartitionPlaced`` (this rank's part of a partitioned dataset),
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

# module -> the public names it defines, each imported on first use (torch comes with them)
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".apply": "apply_placement estimate_bytes",
    ".base": "Placed PlacedData",
    ".estimate": "MemoryEstimate PlacementMemory estimate_memory",
    ".plan": "DataPlan place node_loader",
    ".workers": "NumWorkersWarning num_workers_message warn_num_workers",
}, eager=("AUTO", "DEFAULT_HEADROOM", "DEFAULT_SAMPLING_WORKSPACE", "MODES", "Hardware",
          "ModeSpec", "Placement", "PlacementWarning", "detect_hardware", "mode_spec",
          "plan_placement", "validate_mode"))


if TYPE_CHECKING:  # pragma: no cover
    from .apply import apply_placement, estimate_bytes
    from .base import Placed, PlacedData
    from .estimate import MemoryEstimate, PlacementMemory, estimate_memory
    from .plan import DataPlan, node_loader, place
    from .workers import NumWorkersWarning, num_workers_message, warn_num_workers
