"""Neighbour sampling: samplers return ids (``MiniBatch`` of ``Block``); features come later.

Samplers are registered by name in :data:`SAMPLERS` and built alike with
``build_sampler(name, graph, fanouts, device=, replace=, seed=, uva=, method=)`` (``method``: a
``SamplingMethod``, uniform by default; weighted, LABOR and temporal sampling run on both):

- ``"neighbor"`` (``NeighborSampler``): numba kernels on CPU (GIL released, safe from several
  threads),
- ``"torch"`` (``TorchNeighborSampler``): the same semantics in vectorised torch, on whatever
  device the graph tensors live (CUDA, or CUDA views of pinned host memory with ``uva=True``),
- ``"triton"`` (``TritonNeighborSampler``): uniform sampling in fused Triton kernels on a CUDA
  device (triton loads when it is built),
- ``"gpu"``: the Triton sampler where it can run, else the torch sampler (the CUDA modes' entry),
- ``"hetero"`` (``HeteroNeighborSampler``): numba kernels on CPU over a ``HeteroGraph``, per edge
  type, returning typed ``MiniBatch``es (``HeteroBlock``: PyG ``edge_index_dict`` per layer),
- ``"torch-hetero"`` (``TorchHeteroSampler``): the same batches in vectorised torch on the graph
  tensors' device (CUDA, or UVA views of the pinned graph): the GPU path of ``"hetero"``.

A typed graph needs no name of its own: ``build_sampler`` given a ``HeteroGraph`` builds the
typed counterpart of the name (:data:`TYPED`: ``"neighbor"`` -> ``"hetero"``, the torch and GPU
samplers -> ``"torch-hetero"``), so a placement mode names one sampler for both kinds of graph.

``LinkSampler`` wraps any of them for link prediction (pairs keyed by edge type, ``None`` for an
untyped graph). Every sampler returns one ``MiniBatch`` class, whose typed and link fields are
optional. A new sampler is one module with a ``Sampler`` subclass that has ``from_graph`` and
one ``SAMPLERS.add`` line here. Importing this package loads neither torch nor numba; the names
below load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from .._lazy import lazy_exports
from .._registry import Registry


SAMPLERS = Registry("sampler")
SAMPLERS.add("neighbor", ".sampling.neighbor:NeighborSampler", "numba kernels, CPU")
SAMPLERS.add("torch", ".sampling.torch_sampler:TorchNeighborSampler",
             "vectorised torch, any device (GPU, or UVA views of the pinned graph)")
SAMPLERS.add("triton", ".sampling.triton_sampler:TritonNeighborSampler",
             "fused Triton kernels on a CUDA device (uniform only)")
SAMPLERS.add("gpu", ".sampling.triton_sampler:GPUSampler",
             "the Triton sampler where triton and CUDA are there, else the torch sampler")
SAMPLERS.add("hetero", ".sampling.hetero:HeteroNeighborSampler",
             "numba kernels, CPU, per edge type of a HeteroGraph")
SAMPLERS.add("torch-hetero", ".sampling.torch_hetero:TorchHeteroSampler",
             "vectorised torch per edge type of a HeteroGraph, any device (the GPU path)")


#: the sampler that samples a typed graph (``HeteroGraph``) the way a name samples an untyped one
TYPED = {"neighbor": "hetero", "torch": "torch-hetero", "triton": "torch-hetero",
         "gpu": "torch-hetero"}


def build_sampler(name: str, graph, fanouts: Optional[Sequence[int]] = None, *,
                  num_neighbors=None, **kwargs) -> "Sampler":
    """``SAMPLERS.get(name).from_graph(graph, fanouts, **kwargs)``; the common keywords are
    ``device="cpu"``, ``replace=False``, ``seed=0``, ``uva=False``. A ``HeteroGraph`` is
    sampled by the name's typed counterpart (:data:`TYPED`). ``num_neighbors`` instead of
    ``fanouts``: the same in PyG's order, the seeds' hop first (reversed here; giving both is a
    ``GraphfeedError``). An unknown ``name`` is a ``GraphfeedError`` listing the registered
    ones."""
    from ..graph.hetero import HeteroGraph
    from ._common import resolve_fanouts

    fanouts = resolve_fanouts(fanouts, num_neighbors, f"build_sampler({name!r})")
    if isinstance(graph, HeteroGraph):
        name = TYPED.get(name, name)
    return SAMPLERS.get(name).from_graph(graph, fanouts, **kwargs)


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".base": "Block HeteroBlock MiniBatch Sampler SeedPairs",
    ".link": "LinkSampler",
    ".hetero": "HeteroNeighborSampler",
    ".method": "SamplingMethod",
    ".neighbor": "NeighborSampler",
    ".torch_sampler": "TorchNeighborSampler",
    ".torch_hetero": "TorchHeteroSampler",
    ".triton_sampler": "TritonNeighborSampler",
}, eager=("SAMPLERS", "TYPED", "build_sampler"))

if TYPE_CHECKING:  # pragma: no cover
    from .base import Block, HeteroBlock, MiniBatch, Sampler, SeedPairs
    from .link import LinkSampler
    from .hetero import HeteroNeighborSampler
    from .method import SamplingMethod
    from .neighbor import NeighborSampler
    from .torch_sampler import TorchNeighborSampler
    from .torch_hetero import TorchHeteroSampler
    from .triton_sampler import TritonNeighborSampler
