"""The placement modes, one registry line each: where the graph and the features live and which
sampler reads them.

A mode is a :class:`ModeSpec`: the sampler's registry name (``graphfeed.sampling.SAMPLERS``)
and the one of typed graphs,
where mini-batches end up (``"cpu"`` or ``"cuda"``), and a location for the graph and for the
features:

- ``"host"``: left where they are (RAM, memory map, disk, LMDB), read by the CPU;
- ``"pinned"``: page-locked host memory read by the GPU through UVA views (only the rows used
  cross the bus);
- ``"device"``: copied into GPU memory.

:func:`graphfeed.placement.apply_placement` builds any mode from its spec, so a new combination is
one ``MODES.add`` line here; the automatic choice (:mod:`.planner`) decides
between the modes it knows.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._registry import Registry
from ..errors import GraphfeedError

__all__ = ["ModeSpec", "MODES", "AUTO", "mode_spec", "validate_mode"]

LOCATIONS = ("host", "pinned", "device")
AUTO = "auto"


@dataclass(frozen=True)
class ModeSpec:
    sampler: str  # a name in graphfeed.sampling.SAMPLERS (a typed graph: its TYPED counterpart)
    batches: str  # "cpu" or "cuda": where the model trains
    graph: str  # one of LOCATIONS
    features: str  # one of LOCATIONS

    def __post_init__(self):
        assert self.batches in ("cpu", "cuda"), self
        assert self.graph in LOCATIONS and self.features in LOCATIONS, self
        assert self.batches == "cuda" or (self.graph, self.features) == ("host", "host"), self

    @property
    def uses_cuda(self) -> bool:
        return self.batches == "cuda"

    @property
    def samples_on_device(self) -> bool:
        return self.graph != "host"


MODES = Registry("placement mode")
MODES.add("cpu-cpu", ModeSpec(sampler="neighbor", batches="cpu", graph="host", features="host"),
          "sample and read features on CPU, train on CPU")
MODES.add("cpu-cuda", ModeSpec(sampler="neighbor", batches="cuda", graph="host", features="host"),
          "sample and read features on CPU, copy batches to the GPU")
MODES.add("pinned-cuda", ModeSpec(sampler="gpu", batches="cuda", graph="pinned",
                                  features="pinned"),
          "graph and features in pinned host memory, sampled and gathered by the GPU")
MODES.add("cuda-cuda", ModeSpec(sampler="gpu", batches="cuda", graph="device", features="device"),
          "graph and features in GPU memory")


def mode_spec(mode: str) -> ModeSpec:
    return MODES.get(mode)


def validate_mode(mode: str) -> str:
    """Normalise a mode name (``"CUDA_CUDA"`` -> ``"cuda-cuda"``); ``GraphfeedError`` listing the
    valid names (``auto`` included) when unknown."""
    if not isinstance(mode, str):
        raise GraphfeedError(f"placement mode must be a string, got {type(mode).__name__}")
    m = mode.strip().lower().replace("_", "-")
    if m != AUTO and m not in MODES:
        raise GraphfeedError(
            f"unknown placement mode {mode!r}; valid modes: {', '.join((AUTO,) + MODES.names())}"
        )
    return m
