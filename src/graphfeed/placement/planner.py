"""Choose where the graph and features live and where sampling runs (the placement mode).

Modes (``MODES``):

- ``cpu-cpu``: everything on CPU; mini-batches stay on CPU.
- ``cpu-cuda``: sampling and feature reads on CPU (features may stay on disk or in LMDB) into
  pinned staging buffers, then an asynchronous copy to the GPU.
- ``pinned-cuda``: graph and features in pinned host memory, one copy per machine; GPU kernels
  sample and gather reading host memory directly (UVA), so only the rows used cross PCIe.
- ``cuda-cuda``: graph and features in GPU memory; sampling and gathering on the GPU.

``auto`` (:func:`plan_placement`) applies these rules, first match wins:

1. No CUDA device -> ``cpu-cpu``.
2. Per rank, graph + features + sampling workspace fit in ``headroom`` x the free GPU memory
   (divided among the ranks sharing a GPU) -> ``cuda-cuda``. Each rank keeps its own copy on
   its GPU; the remaining ``1 - headroom`` is left for the model and activations.
3. The GPU can read pinned host memory (UVA) and graph + features fit in ``headroom`` x the
   free host memory, counted once per machine since the ranks share the host copy ->
   ``pinned-cuda``.
4. Otherwise -> ``cpu-cuda``: features are read on CPU (from memory maps, disk or LMDB) and
   only the mini-batch is copied.

An explicit mode is validated: an unknown name raises ``GraphfeedError`` listing the valid
ones; a CUDA mode without CUDA (or ``pinned-cuda`` without UVA) raises. A mode whose data cannot
fit at all (``cuda-cuda``: graph + features > the free GPU memory per rank; ``pinned-cuda``:
graph + features > the free host memory) raises with the numbers, because it would only fail
later with an out-of-memory error; a mode that fits but exceeds the headroom is honoured with
a ``PlacementWarning`` (the user knows their model's footprint better than the planner).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping

from .._checks import check_float, check_int
from .._units import format_bytes
from ..errors import GraphfeedError
from .hardware import Hardware
from .modes import AUTO, MODES, mode_spec, validate_mode

__all__ = [
    "Storage",
    "plan_storage",
    "MODES",
    "AUTO",
    "DEFAULT_HEADROOM",
    "DEFAULT_SAMPLING_WORKSPACE",
    "Placement",
    "PlacementWarning",
    "plan_placement",
    "validate_mode",
]

log = logging.getLogger("graphfeed.placement")

DEFAULT_HEADROOM = 0.7
#: GPU memory one rank needs beyond the data: sampled ids, per-batch maps, gathered features.
DEFAULT_SAMPLING_WORKSPACE = 1 << 30


class PlacementWarning(UserWarning):
    """An explicitly requested placement exceeds the planner's headroom but may still fit."""


@dataclass(frozen=True)
class Placement:
    """The chosen mode, why, and the device mini-batches end up on.

    ``details`` holds the numbers the decision used (bytes; ``None`` when not applicable):
    ``graph_bytes``, ``feature_bytes``, ``workspace_bytes``, ``gpu_need_bytes``,
    ``gpu_budget_bytes``, ``host_need_bytes``, ``host_budget_bytes``, ``requested``.
    """

    mode: str
    reason: str
    device: str = "cpu"
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        MODES.check(self.mode)

    @property
    def spec(self):
        """The mode's :class:`~graphfeed.placement.modes.ModeSpec` (sampler, locations)."""
        return mode_spec(self.mode)

    @property
    def uses_cuda(self) -> bool:
        return self.spec.uses_cuda

    @property
    def sampling_device(self) -> str:
        """Where neighbour sampling runs: ``"cpu"`` or the CUDA device."""
        return self.device if self.spec.samples_on_device else "cpu"

    def __str__(self) -> str:
        return f"{self.mode} on {self.device}: {self.reason}"


def plan_placement(
    graph_bytes: int,
    feature_bytes: int,
    hw: Hardware,
    *,
    requested: str = AUTO,
    headroom: float = DEFAULT_HEADROOM,
    sampling_workspace_bytes: int = DEFAULT_SAMPLING_WORKSPACE,
) -> Placement:
    """Choose a placement mode for a graph of ``graph_bytes`` (CSC arrays) and features of
    ``feature_bytes`` (all features the loader reads) on hardware ``hw``.

    ``requested="auto"`` applies the module's rules; a mode name is validated against ``hw``.
    ``headroom`` is the fraction of free GPU and host memory the data may take.
    ``sampling_workspace_bytes`` is the per-rank GPU memory the sampler and batches need beyond
    the data. The decision and its reason are logged on ``graphfeed.placement`` (INFO).
    """
    requested = validate_mode(requested)
    graph_bytes = check_int("graph_bytes", graph_bytes, 0)
    feature_bytes = check_int("feature_bytes", feature_bytes, 0)
    workspace = check_int("sampling_workspace_bytes", sampling_workspace_bytes, 0)
    headroom = check_float("headroom", headroom, 0.0, 1.0, lo_open=True)

    n = _Numbers.compute(graph_bytes, feature_bytes, workspace, hw, headroom)
    if requested != AUTO:
        return _explicit(requested, hw, n)

    if not hw.cuda_available:
        return _done(Placement("cpu-cpu", "no CUDA device: cpu-cpu", "cpu", n.details))
    if n.fits_gpu:
        reason = f"{n.gpu_sum} fits in {n.gpu_text}: cuda-cuda"
        return _done(Placement("cuda-cuda", reason, hw.device, n.details))
    over = f"{n.gpu_sum} > {n.gpu_text}"
    if not hw.supports_uva:
        reason = f"{over}; the GPU cannot read pinned host memory (no UVA): cpu-cuda"
        return _done(Placement("cpu-cuda", reason, hw.device, n.details))
    if n.fits_host:
        reason = f"{over}; {n.data_text} fits in {n.host_text}, one copy per machine: pinned-cuda"
        return _done(Placement("pinned-cuda", reason, hw.device, n.details))
    reason = (
        f"{over}; {n.data_text} > {n.host_text}: cpu-cuda "
        "(features read on CPU from storage, mini-batches copied to the GPU)"
    )
    return _done(Placement("cpu-cuda", reason, hw.device, n.details))


@dataclass(frozen=True)
class _Numbers:
    """The sizes a decision compares, and their human-readable forms."""

    data: int  # graph + features: one host copy per machine, one GPU copy per rank
    gpu_need: int  # per GPU: ranks sharing it x (data + workspace)
    gpu_budget: int
    host_budget: int
    fits_gpu: bool
    fits_host: bool
    data_text: str
    gpu_sum: str
    gpu_text: str
    host_text: str
    details: dict

    @classmethod
    def compute(cls, graph: int, feat: int, workspace: int, hw: Hardware, headroom: float):
        data = graph + feat
        host_budget = int(headroom * hw.host_free_bytes)
        pct = f"{headroom * 100:.0f}%"
        data_text = (
            f"graph {format_bytes(graph)} + features {format_bytes(feat)} = {format_bytes(data)}"
        )
        host_text = (
            f"{pct} of free host memory {format_bytes(hw.host_free_bytes)} "
            f"({format_bytes(host_budget)})"
        )
        gpu_need = gpu_budget = None
        gpu_sum = gpu_text = ""
        if hw.cuda_available:
            k = hw.ranks_per_gpu
            gpu_need = k * (data + workspace)
            gpu_budget = int(headroom * hw.gpu_free_bytes)
            per_rank = (
                f"graph {format_bytes(graph)} + features {format_bytes(feat)} "
                f"+ workspace {format_bytes(workspace)}"
            )
            gpu_sum = (
                f"{k} ranks per GPU x ({per_rank}) = {format_bytes(gpu_need)}"
                if k > 1
                else f"{per_rank} = {format_bytes(gpu_need)}"
            )
            gpu_text = (
                f"{pct} of free GPU memory {format_bytes(hw.gpu_free_bytes)} "
                f"({format_bytes(gpu_budget)}) on {hw.device}"
            )
        details = {
            "requested": AUTO,
            "graph_bytes": graph,
            "feature_bytes": feat,
            "workspace_bytes": workspace,
            "ranks_per_machine": hw.ranks_per_machine,
            "gpu_need_bytes": gpu_need,
            "gpu_budget_bytes": gpu_budget,
            "host_need_bytes": data,
            "host_budget_bytes": host_budget,
        }
        return cls(
            data=data,
            gpu_need=gpu_need or 0,
            gpu_budget=gpu_budget or 0,
            host_budget=host_budget,
            fits_gpu=gpu_need is not None and gpu_need <= gpu_budget,
            fits_host=data <= host_budget,
            data_text=data_text,
            gpu_sum=gpu_sum,
            gpu_text=gpu_text,
            host_text=host_text,
            details=details,
        )


# ------------------------------------------------------------------------ where features live
#: bytes of cache bookkeeping per node (``CachedFeature``: a slot index and an admission count)
#: and per cached row (its queue links, id and bits)
CACHE_BYTES_PER_NODE = 5
CACHE_BYTES_PER_ROW = 18
#: memory a training process keeps for itself beside the graph and the feature cache (its
#: libraries, the batches in flight, the model and its activations): this share of what is
#: available, and at least WORKING_MIN_BYTES
WORKING_SHARE = 0.15
WORKING_MIN_BYTES = 3 * 2**29


@dataclass(frozen=True)
class Storage:
    """Where node features are read from (``features="auto"`` made concrete): a backend of
    ``graphfeed.features.BACKENDS``, the cache in front of it per process (bytes) and why."""

    features: str
    cache_bytes: int
    reason: str


def plan_storage(graph_bytes: int, feature_bytes: int, num_nodes: int, row_bytes: int,
                 hw: Hardware, *, cache_bytes: int = 0, headroom: float = DEFAULT_HEADROOM,
                 memory_text: str = "") -> Storage:
    """``features="auto"``: the features stay in RAM (memory maps, one copy per machine) when
    graph + features fit in ``headroom`` x the host memory available (a memory cgroup's limit
    counts: ``hw.host_free_bytes``). Otherwise they are read from disk (``O_DIRECT``) through a
    cache per process of ``cache_bytes``, or, when that is 0, of what is left of the available
    memory after the graph (which sampling needs resident), each process's working memory
    (:data:`WORKING_SHARE`, at least :data:`WORKING_MIN_BYTES`) and the cache's bookkeeping
    (:data:`CACHE_BYTES_PER_NODE`, :data:`CACHE_BYTES_PER_ROW`), split between the ranks of the
    machine. ``memory_text`` names the memory in the reason (default: "available memory")."""
    graph_bytes = check_int("graph_bytes", graph_bytes, 0)
    feature_bytes = check_int("feature_bytes", feature_bytes, 0)
    free = int(hw.host_free_bytes)
    budget = int(headroom * free)
    pct = f"{headroom * 100:.0f}%"
    where = memory_text or "available memory"
    data = (f"graph {format_bytes(graph_bytes)} + features {format_bytes(feature_bytes)} = "
            f"{format_bytes(graph_bytes + feature_bytes)}")
    room = f"{pct} of {where} {format_bytes(free)} ({format_bytes(budget)})"
    if graph_bytes + feature_bytes <= budget:
        unused = " (every row is in memory: the --cache-size is not used)" if cache_bytes else ""
        return Storage("ram", 0, f"{data} fits in {room}: features in RAM (memory-mapped, one "
                                 f"copy per machine){unused}")
    k = max(1, hw.ranks_per_machine)
    working = k * max(WORKING_MIN_BYTES, int(WORKING_SHARE * free / k))
    if cache_bytes:
        cache, how = int(cache_bytes), "--cache-size"
    else:
        left = free - graph_bytes - working - k * CACHE_BYTES_PER_NODE * int(num_nodes)
        per_row = max(1, int(row_bytes))
        cache = max(0, int(left / k / (1 + CACHE_BYTES_PER_ROW / per_row)))
        cache = min(cache, feature_bytes) // 10**6 * 10**6
        how = (f"what is left after the graph, {format_bytes(working)} of working memory and "
               f"the cache's bookkeeping" + (f", split by {k} ranks" if k > 1 else ""))
    reason = (f"{data} > {room}: features read from disk (O_DIRECT), "
              + (f"a {format_bytes(cache)} cache per process in front ({how})" if cache
                 else "no room left for a cache"))
    if graph_bytes + working > free:
        reason += (f"; the graph and the working memory alone exceed the {format_bytes(free)}, "
                   f"so sampling pages the graph in from disk (slow: give the process more "
                   f"memory)")
    return Storage("disk", cache, reason)


def _done(p: Placement) -> Placement:
    log.info("graphfeed placement: %s", p.reason)
    return p


def _explicit(mode: str, hw: Hardware, n: _Numbers) -> Placement:
    """Validate a requested mode against the hardware (see the module docstring)."""
    details = dict(n.details, requested=mode)
    if mode == "cpu-cpu":
        return _done(Placement(mode, "requested cpu-cpu", "cpu", details))
    if not hw.cuda_available:
        raise GraphfeedError(
            f"placement mode {mode!r} needs a CUDA device, but none is available "
            "(CPU-only build of torch, or no visible GPU); use mode 'cpu-cpu' or 'auto'"
        )
    if mode == "cpu-cuda":
        return _done(Placement(mode, "requested cpu-cuda", hw.device, details))
    if mode == "pinned-cuda":
        if not hw.supports_uva:
            raise GraphfeedError(
                "placement mode 'pinned-cuda' needs a GPU that reads pinned host memory (UVA), "
                f"which {hw.device} does not; use 'cpu-cuda' or 'auto'"
            )
        if n.data > hw.host_free_bytes:
            raise GraphfeedError(
                f"placement mode 'pinned-cuda' cannot fit: {n.data_text} > free host memory "
                f"{format_bytes(hw.host_free_bytes)} (it must be pinned in RAM); use 'cpu-cuda' "
                "or 'auto'"
            )
        reason = "requested pinned-cuda"
        if not n.fits_host:
            reason += f" ({n.data_text} > {n.host_text})"
            warnings.warn(
                f"graphfeed: {reason}; pinning this much RAM may starve the OS and other "
                "processes",
                PlacementWarning,
                stacklevel=3,
            )
        return _done(Placement(mode, reason, hw.device, details))
    # cuda-cuda
    k = hw.ranks_per_gpu
    if k * n.data > int(hw.gpu_free_bytes):
        who = f"{k} ranks per GPU x ({n.data_text})" if k > 1 else n.data_text
        raise GraphfeedError(
            f"placement mode 'cuda-cuda' cannot fit: {who} > free GPU memory "
            f"{format_bytes(hw.gpu_free_bytes)} on {hw.device}; use 'pinned-cuda', "
            "'cpu-cuda' or 'auto'"
        )
    reason = "requested cuda-cuda"
    if not n.fits_gpu:
        reason += f" ({n.gpu_sum} > {n.gpu_text})"
        warnings.warn(
            f"graphfeed: {reason}; the model and activations may not fit beside the data",
            PlacementWarning,
            stacklevel=3,
        )
    return _done(Placement(mode, reason, hw.device, details))
