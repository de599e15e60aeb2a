"""Graph structures. ``CSCGraph`` is the one sampling graph today."""

from .csc import CSCGraph

__all__ = ["CSCGraph"]
