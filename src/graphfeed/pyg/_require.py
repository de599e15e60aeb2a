"""PyG is this package's one optional dependency: a clear message where it is missing."""

from __future__ import annotations

from ..errors import MissingDependencyError

try:
    import torch_geometric  # noqa: F401
except ImportError:  # pragma: no cover - PyG is in the test environment
    raise MissingDependencyError("torch_geometric", "pyg", "graphfeed.pyg") from None
