"""Neighbour sampling: samplers return ids (``MiniBatch`` of ``Block``); features come later.

- ``NeighborSampler``: numba kernels on CPU (GIL released, safe from several threads),
- ``TorchNeighborSampler``: the same semantics in vectorised torch, on whatever device the graph
  tensors live (CUDA, or CUDA views of pinned host memory).
"""

from .base import Block, MiniBatch, Sampler

__all__ = ["Block", "MiniBatch", "Sampler", "NeighborSampler", "TorchNeighborSampler"]

_LAZY = {"NeighborSampler": ".neighbor", "TorchNeighborSampler": ".torch_sampler"}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'graphfeed.sampling' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value
