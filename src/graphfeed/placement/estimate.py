"""How much memory a dataset needs under each placement mode, for 1 or N processes per machine.

Derived from the modes table (:data:`~graphfeed.placement.modes.MODES`): a mode's graph and
features cost host RAM once per machine where they stay on the host or are pinned there (memory
maps and shared memory: every local process reads the one copy), and GPU memory on every GPU
where they are copied to the device. Two more rows show the feature storage choices of the
CPU modes: ``ram-private`` (every process loads its own copy, ``in_memory=True``) and
``disk-cache`` (features read from disk through a per-process cache).

Only the data is counted (graph arrays, node features, labels; ``graphfeed.datasets.estimate.
data_sizes`` reads them from the ``.npy`` headers); mini-batches, the model and the sampler's
workspace come on top (the placement planner adds its own workspace term).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Union

from .._checks import check_int
from .._units import format_bytes
from ..errors import GraphfeedError
from .modes import MODES, mode_spec

__all__ = ["PlacementMemory", "MemoryEstimate", "estimate_memory", "mode_memory"]


@dataclass(frozen=True)
class PlacementMemory:
    """One placement's data footprint for ``nproc`` processes on one machine."""

    placement: str
    description: str
    host_bytes: int  # RAM on the machine (shared copies counted once)
    gpu_bytes: int  # on each GPU, with one process per GPU
    disk_bytes: int  # data read from disk at run time (not held in RAM)


@dataclass(frozen=True)
class MemoryEstimate:
    """A dataset's sizes (``graphfeed.datasets.estimate.DataSizes``' fields) and its footprint
    per placement (``placements``) for ``nproc`` processes per machine and ``cache_bytes`` of
    feature cache per process."""

    name: str
    num_nodes: int
    num_edges: int
    graph_bytes: int
    feature_bytes: int
    feature_sizes: dict  # name -> {"dtype", "shape", "bytes"}
    nproc: int
    cache_bytes: int
    placements: tuple = field(default_factory=tuple)

    @property
    def data_bytes(self) -> int:
        return self.graph_bytes + self.feature_bytes

    def placement(self, name: str) -> PlacementMemory:
        for p in self.placements:
            if p.placement == name:
                return p
        raise GraphfeedError(f"no placement {name!r}; have "
                             f"{[p.placement for p in self.placements]}")

    def to_json(self) -> dict:
        d = asdict(self)
        d["placements"] = [asdict(p) for p in self.placements]
        return d

    def table(self) -> str:
        rows = [("placement", "host RAM / machine", "per GPU", "read from disk", "")]
        for p in self.placements:
            rows.append((p.placement, format_bytes(p.host_bytes), format_bytes(p.gpu_bytes),
                         format_bytes(p.disk_bytes) if p.disk_bytes else "-", p.description))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        return "\n".join("  ".join(r[i].ljust(widths[i]) if i == 0 else r[i].rjust(widths[i])
                                   for i in range(4)) + "  " + r[4] for r in rows)


def mode_memory(mode: str, graph_bytes: int, feature_bytes: int) -> PlacementMemory:
    """Mode ``mode``'s footprint from its ``ModeSpec``: host RAM once for what stays on the host
    or is pinned there, GPU memory on every GPU for what is copied to the device."""
    spec = mode_spec(mode)
    parts = ((spec.graph, int(graph_bytes)), (spec.features, int(feature_bytes)))
    host = sum(b for where, b in parts if where in ("host", "pinned"))
    gpu = sum(b for where, b in parts if where == "device")
    return PlacementMemory(mode, MODES.entry(mode).help, host, gpu, 0)


def estimate_memory(dataset_or_path: Union[object, str, os.PathLike], *, nproc: int = 1,
                    cache_bytes: int = 0) -> MemoryEstimate:
    """The data footprint of a dataset per placement for ``nproc`` processes per machine with
    ``cache_bytes`` of feature cache per process: every mode of :data:`MODES`
    (:func:`mode_memory`), then the CPU modes' ``ram-private`` and ``disk-cache`` storage.
    ``dataset_or_path``: what ``graphfeed.datasets.estimate.data_sizes`` takes (an opened
    ``Dataset``, a folder's loaded arrays, or a folder: only headers are read)."""
    from ..datasets.estimate import data_sizes

    nproc = check_int("nproc", nproc, 1)
    cache_bytes = check_int("cache_bytes", cache_bytes, 0)
    s = data_sizes(dataset_or_path)
    g, f = s.graph_bytes, s.feature_bytes
    rows = tuple(mode_memory(m, g, f) for m in MODES) + (
        PlacementMemory("ram-private", "cpu-cpu, each process loads its own copy "
                        "(in_memory=True)", nproc * (g + f), 0, 0),
        PlacementMemory("disk-cache", f"cpu-cpu, features on disk, {format_bytes(cache_bytes)} "
                        f"cache per process", g + nproc * min(cache_bytes, f), 0, f),
    )
    return MemoryEstimate(name=s.name, num_nodes=s.num_nodes, num_edges=s.num_edges,
                          graph_bytes=g, feature_bytes=f, feature_sizes=s.feature_sizes,
                          nproc=nproc, cache_bytes=cache_bytes, placements=rows)
