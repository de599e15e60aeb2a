"""Put the graph and features where a :class:`Placement` says, and build the matching sampler.

Every mode is built the same way from its :class:`~graphfeed.placement.modes.ModeSpec`: the
sampler by name through ``graphfeed.sampling.build_sampler`` (the graph pinned or copied as the
spec says), each feature left on the host, pinned and viewed through UVA, or copied to the GPU.

=============  =====================================  ==========================================
mode           sampler                                features
=============  =====================================  ==========================================
cpu-cpu        ``NeighborSampler`` (numba, CPU)       unchanged (RAM, memory map, disk, LMDB)
cpu-cuda       ``NeighborSampler`` (numba, CPU)       unchanged; the loader gathers them into
                                                      pinned buffers and copies batches to GPU
pinned-cuda    the ``"gpu"`` sampler (Triton kernels, pinned host memory seen through UVA views:
               else torch) over UVA views of the      the GPU's ``index_select`` reads only the
               pinned graph                           rows it needs across PCIe
cuda-cuda      the ``"gpu"`` sampler on the GPU       copied to GPU memory
=============  =====================================  ==========================================
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import torch

from ..errors import GraphfeedError
from ..features.base import Feature
from ..features.memory import InMemoryFeature
from ..graph.csc import CSCGraph
from .base import PlacedData
from .modes import ModeSpec
from .planner import Placement

__all__ = ["PlacedData", "apply_placement", "estimate_bytes", "feature_location", "mode_sampler",
           "place_feature"]

# Rows copied per step when a feature that is not in memory (disk, LMDB) moves to the GPU or
# into pinned memory: bounds the extra host memory to about this many bytes.
_CHUNK_BYTES = 256 << 20


def estimate_bytes(graph: CSCGraph, features: Mapping[str, Feature]) -> tuple[int, int]:
    """``(graph_bytes, feature_bytes)`` of loaded objects, the inputs of ``plan_placement``."""
    return int(graph.nbytes), int(sum(int(f.nbytes) for f in features.values()))


def apply_placement(
    placement: Placement,
    graph: CSCGraph,
    features: Mapping[str, Feature],
    fanouts: Sequence[int],
    *,
    replace: bool = False,
    seed: int = 0,
    method=None,
) -> PlacedData:
    """Build the sampler and place the features for ``placement`` (see the module table).

    Costs: cpu-* modes copy nothing. cuda-cuda copies graph and features to the GPU once.
    pinned-cuda pins the graph and in-memory features in place where possible (features on
    disk or in LMDB are first read into RAM, in chunks of about 256 MB).
    ``method``: the sampler's ``graphfeed.sampling.SamplingMethod`` (``None``: uniform).
    """
    if not isinstance(placement, Placement):
        raise GraphfeedError(f"placement must be a Placement, got {type(placement).__name__}")
    if not isinstance(graph, CSCGraph):
        raise GraphfeedError(f"graph must be a CSCGraph, got {type(graph).__name__}")
    feats = dict(features or {})
    for name, f in feats.items():
        if not isinstance(f, Feature):
            raise GraphfeedError(
                f"features[{name!r}] must be a graphfeed Feature, got {type(f).__name__}"
            )
    spec: ModeSpec = placement.spec
    device = torch.device(placement.device)
    if spec.samples_on_device or spec.features != "host":
        if device.type != "cuda":
            raise GraphfeedError(f"placement {placement.mode} needs a CUDA device, got {device}")
        from .. import _cuda

        if not _cuda.cuda_available():
            raise GraphfeedError(
                f"placement {placement.mode} needs CUDA, but no CUDA device is visible"
            )
        from ..cuda_alloc import configure_cuda_allocator

        configure_cuda_allocator()  # before the first allocation below
    return _build(placement, graph, feats, fanouts, replace=replace, seed=seed, method=method)


def _build(placement: Placement, graph: CSCGraph, feats: dict, fanouts, *, replace: bool,
           seed: int, method=None) -> PlacedData:
    """The sampler and features of ``placement``'s spec (no device checks: tests run the GPU
    modes' logic with a CPU device through this)."""
    spec: ModeSpec = placement.spec
    device = torch.device(placement.device)
    sampler = mode_sampler(spec, graph, fanouts, device, replace=replace, seed=seed,
                           method=method)
    keep: list = []
    loc, where = feature_location(spec, device)
    placed = {name: place_feature(f, loc, device, keep) for name, f in feats.items()}
    return PlacedData(placement, sampler, placed, device, keep_alive=keep, graph=graph,
                      where=where)


def mode_sampler(spec: ModeSpec, graph, fanouts, device, *, replace: bool = False, seed: int = 0,
                 method=None):
    """The sampler of mode ``spec`` over ``graph`` (a ``HeteroGraph``: ``build_sampler`` builds
    the typed counterpart of ``spec.sampler``): on the host for the modes that sample there,
    else on ``device``, a pinned graph read through UVA views where ``device`` is a GPU (on a
    CPU device, the test bed of the GPU modes, the graph stays as it is)."""
    from ..sampling import build_sampler

    dev = torch.device(device) if spec.samples_on_device else torch.device("cpu")
    return build_sampler(spec.sampler, graph, list(fanouts), device=dev, replace=replace,
                         seed=seed, uva=spec.graph == "pinned" and dev.type == "cuda",
                         method=method)


def feature_location(spec: ModeSpec, device) -> tuple:
    """``(location, where)`` of mode ``spec``'s features on ``device`` (:func:`place_feature`'s
    location, and words for the placement line): ``host`` (read by the CPU), ``device`` (a
    copy in GPU memory) or ``pinned`` (page-locked host rows gathered through UVA); on a CPU
    device a GPU mode keeps an in-memory copy on the CPU (the test bed of the GPU modes)."""
    dev = torch.device(device)
    loc = spec.features
    if loc == "host":
        return "host", "read by the CPU"
    if dev.type != "cuda":
        return "device", "in memory on the CPU (no GPU)"
    if loc == "device":
        return "device", f"copied to {dev}"
    return "pinned", f"in pinned host memory, gathered by {dev} through UVA"


# ---------------------------------------------------------------------- helpers
def place_feature(feat: Feature, location: str, device: torch.device, keep: list) -> Feature:
    """``feat`` where ``location`` says: as it is (``host``), pinned host rows seen through a UVA
    view (``pinned``; the pinned tensor goes to ``keep``), or a copy in GPU memory (``device``)."""
    if location == "host":
        return feat
    if location == "device":
        return InMemoryFeature(_to_device(feat, device))
    from .._pinning import pin_tensor, uva_tensor

    pinned = pin_tensor(_host_tensor(feat))
    keep.append(pinned)
    return InMemoryFeature(uva_tensor(pinned, device))


def _rows_per_chunk(feat: Feature) -> int:
    return max(1, _CHUNK_BYTES // max(1, feat.row_nbytes))


def _data_tensor(feat: Feature) -> Optional[torch.Tensor]:
    """The tensor holding all rows of an in-memory feature (``InMemoryFeature``,
    ``PinnedFeature``), else ``None``."""
    data = getattr(feat, "data", None)
    if isinstance(data, torch.Tensor) and tuple(data.shape) == tuple(feat.shape):
        return data
    return None


def _copy_rows(feat: Feature, out: torch.Tensor) -> torch.Tensor:
    """All rows of ``feat`` into ``out`` in chunks of about 256 MB (disk, LMDB: host memory
    stays bounded)."""
    step = _rows_per_chunk(feat)
    for lo in range(0, feat.num_rows, step):
        hi = min(feat.num_rows, lo + step)
        out[lo:hi].copy_(feat.read(torch.arange(lo, hi), check=False))
    return out


def _host_tensor(feat: Feature) -> torch.Tensor:
    """All rows of ``feat`` as one contiguous CPU tensor: the feature's own tensor when it is
    in memory, else read in chunks (disk, LMDB)."""
    data = _data_tensor(feat)
    if data is not None and data.device.type == "cpu":
        return data.contiguous()
    return _copy_rows(feat, torch.empty(feat.shape, dtype=feat.dtype))


def _to_device(feat: Feature, device: torch.device) -> torch.Tensor:
    """All rows of ``feat`` in a new tensor on ``device``."""
    data = _data_tensor(feat)
    if data is not None:
        return data.to(device)
    return _copy_rows(feat, torch.empty(feat.shape, dtype=feat.dtype, device=device))
