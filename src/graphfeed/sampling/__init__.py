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


def build_sampler(name, graph, fanouts, *, device="cpu", replace=False, seed=0, uva=False):
    """TEMPORARY on main until the sampling branch lands (it replaces this with the registry)."""
    if name == "neighbor":
        from .neighbor import NeighborSampler

        return NeighborSampler(graph, fanouts, replace=replace, seed=seed)
    from .torch_sampler import TorchNeighborSampler

    if not uva:
        return TorchNeighborSampler.from_graph(graph, fanouts, device=device, replace=replace, seed=seed)
    from .._pinning import uva_tensor

    graph.pin_memory()
    indptr, indices = graph.tensors("cpu")
    s = TorchNeighborSampler(uva_tensor(indptr, device), uva_tensor(indices, device), fanouts,
                             replace=replace, seed=seed)
    s._keep = (indptr, indices)
    return s
