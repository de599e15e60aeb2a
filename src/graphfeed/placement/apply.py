"""Put the graph and features where a :class:`Placement` says, and build the matching sampler.

=============  =====================================  ==========================================
mode           sampler                                features
=============  =====================================  ==========================================
cpu-cpu        ``NeighborSampler`` (numba, CPU)       unchanged (RAM, memory map, disk, LMDB)
cpu-cuda       ``NeighborSampler`` (numba, CPU)       unchanged; the loader gathers them into
                                                      pinned buffers and copies batches to GPU
pinned-cuda    ``TorchNeighborSampler`` on the GPU    pinned host memory seen through UVA views:
               over UVA views of the pinned graph     the GPU's ``index_select`` reads only the
                                                      rows it needs across PCIe
cuda-cuda      ``TorchNeighborSampler`` on the GPU    copied to GPU memory
=============  =====================================  ==========================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import torch

from ..errors import GraphfeedError
from ..features.base import Feature
from ..features.memory import InMemoryFeature
from ..graph.csc import CSCGraph
from .planner import Placement

__all__ = ["PlacedData", "apply_placement", "estimate_bytes"]

# Rows copied per step when a feature that is not in memory (disk, LMDB) moves to the GPU or
# into pinned memory: bounds the extra host memory to about this many bytes.
_CHUNK_BYTES = 256 << 20


@dataclass
class PlacedData:
    """What the loader needs for one placement.

    - ``sampler``: a ``Sampler``; its mini-batches' ids are on ``sampling_device``.
    - ``features``: name -> ``Feature``; on CPU (cpu-*), on the GPU (cuda-cuda), or CUDA views
      of pinned host memory (pinned-cuda).
    - ``device``: where the model runs and batches must end up.
    - ``keep_alive``: pinned host tensors the UVA views alias; they must outlive the views.
    """

    placement: Placement
    sampler: Any
    features: dict[str, Feature]
    device: torch.device
    keep_alive: list = field(default_factory=list, repr=False)

    @property
    def mode(self) -> str:
        return self.placement.mode

    @property
    def sampling_device(self) -> torch.device:
        return torch.device(self.placement.sampling_device)


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
    num_threads: int = 1,
) -> PlacedData:
    """Build the sampler and place the features for ``placement`` (see the module table).

    ``num_threads`` is the CPU sampler's intra-batch parallelism (cpu-* modes).
    Costs: cpu-* modes copy nothing. cuda-cuda copies graph and features to the GPU once.
    pinned-cuda pins the graph and in-memory features in place where possible (features on
    disk or in LMDB are first read into RAM, in chunks of about 256 MB).
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
    device = torch.device(placement.device)

    if placement.mode in ("cpu-cpu", "cpu-cuda"):
        from ..sampling.neighbor import NeighborSampler

        sampler = NeighborSampler(
            graph, fanouts, replace=replace, seed=seed, num_threads=num_threads
        )
        return PlacedData(placement, sampler, feats, device)

    if device.type != "cuda":
        raise GraphfeedError(f"placement {placement.mode} needs a CUDA device, got {device}")
    from .. import _cuda

    if not _cuda.cuda_available():
        raise GraphfeedError(
            f"placement {placement.mode} needs CUDA, but no CUDA device is visible"
        )
    from ..cuda_alloc import configure_cuda_allocator

    configure_cuda_allocator()  # before the first allocation below
    if placement.mode == "cuda-cuda":
        return _cuda_cuda(placement, graph, feats, fanouts, device, replace, seed)
    return _pinned_cuda(placement, graph, feats, fanouts, device, replace, seed)


# ---------------------------------------------------------------------- helpers
def _rows_per_chunk(feat: Feature) -> int:
    return max(1, _CHUNK_BYTES // max(1, feat.row_nbytes))


def _data_tensor(feat: Feature) -> Optional[torch.Tensor]:
    """The tensor holding all rows of an in-memory feature (``InMemoryFeature``,
    ``PinnedFeature``), else ``None``."""
    data = getattr(feat, "data", None)
    if isinstance(data, torch.Tensor) and tuple(data.shape) == tuple(feat.shape):
        return data
    return None


def _host_tensor(feat: Feature) -> torch.Tensor:
    """All rows of ``feat`` as one contiguous CPU tensor: the feature's own tensor when it is
    in memory, else read in chunks (disk, LMDB)."""
    data = _data_tensor(feat)
    if data is not None and data.device.type == "cpu":
        return data.contiguous()
    out = torch.empty(feat.shape, dtype=feat.dtype)
    step = _rows_per_chunk(feat)
    for lo in range(0, feat.num_rows, step):
        hi = min(feat.num_rows, lo + step)
        out[lo:hi] = feat.read(torch.arange(lo, hi), check=False).cpu()
    return out


def _to_device(feat: Feature, device: torch.device) -> torch.Tensor:
    """All rows of ``feat`` in a new tensor on ``device`` (chunked for non-memory features, so
    host memory stays bounded)."""
    data = _data_tensor(feat)
    if data is not None:
        return data.to(device)
    out = torch.empty(feat.shape, dtype=feat.dtype, device=device)
    step = _rows_per_chunk(feat)
    for lo in range(0, feat.num_rows, step):
        hi = min(feat.num_rows, lo + step)
        out[lo:hi].copy_(feat.read(torch.arange(lo, hi), check=False))
    return out


def _torch_sampler_cls():
    try:
        from ..sampling.torch_sampler import TorchNeighborSampler
    except ImportError as e:  # the GPU sampler ships separately
        raise GraphfeedError(
            "the CUDA placement modes need graphfeed.sampling.torch_sampler.TorchNeighborSampler, "
            f"which could not be imported ({e}); use mode 'cpu-cuda'"
        ) from e
    return TorchNeighborSampler


def _cuda_cuda(placement, graph, feats, fanouts, device, replace, seed) -> PlacedData:
    cls = _torch_sampler_cls()
    sampler = cls.from_graph(graph, fanouts, device=device, replace=replace, seed=seed)
    placed = {name: InMemoryFeature(_to_device(f, device)) for name, f in feats.items()}
    return PlacedData(placement, sampler, placed, device)


def _pinned_cuda(placement, graph, feats, fanouts, device, replace, seed) -> PlacedData:
    try:
        from .._pinning import pin_tensor, uva_tensor
    except ImportError as e:
        raise GraphfeedError(
            "placement pinned-cuda needs graphfeed._pinning (pin_tensor, uva_tensor), "
            f"which could not be imported ({e}); use mode 'cpu-cuda' or 'cuda-cuda'"
        ) from e
    cls = _torch_sampler_cls()
    keep: list = []

    def uva(t: torch.Tensor) -> torch.Tensor:
        pinned = pin_tensor(t)
        keep.append(pinned)
        return uva_tensor(pinned, device)

    # Views of the graph's arrays (no copy); pinned in place where CUDA allows it, else pinned
    # copies kept alive by the result. A graph pinned earlier (CSCGraph.pin_memory) is reused.
    indptr, indices = graph.tensors("cpu")
    sampler = cls(
        uva(indptr.contiguous()), uva(indices.contiguous()), fanouts, replace=replace, seed=seed
    )
    placed = {name: InMemoryFeature(uva(_host_tensor(f))) for name, f in feats.items()}
    return PlacedData(placement, sampler, placed, device, keep_alive=keep)
