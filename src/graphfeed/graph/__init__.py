"""Graph structures. ``CSCGraph``, and ``HeteroGraph`` (a fused CSC with node and edge types)."""

from .csc import CSCGraph
from .hetero import HeteroGraph

__all__ = ["CSCGraph", "HeteroGraph"]
