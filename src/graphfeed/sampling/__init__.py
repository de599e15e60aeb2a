"""Neighbour sampling: samplers return ids (``MiniBatch`` of ``Block``); features come later.

- ``NeighborSampler``: numba kernels on CPU (GIL released, safe from several threads),
- ``TorchNeighborSampler``: the same semantics in vectorised torch, on whatever device the graph
  tensors live (CUDA, or CUDA views of pinned host memory).
"""

from .._lazy import lazy_exports


from .base import Block, MiniBatch, Sampler

__all__ = ["Block", "MiniBatch", "Sampler", "NeighborSampler", "TorchNeighborSampler"]

_LAZY = {"NeighborSampler": ".neighbor", "TorchNeighborSampler": ".torch_sampler"}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
