"""Neighbour sampling: samplers return ids (``MiniBatch`` of ``Block``); features come later."""

from .base import Block, MiniBatch, Sampler

__all__ = ["Block", "MiniBatch", "Sampler", "NeighborSampler"]


def __getattr__(name):
    if name == "NeighborSampler":
        from .neighbor import NeighborSampler

        return NeighborSampler
    raise AttributeError(name)
