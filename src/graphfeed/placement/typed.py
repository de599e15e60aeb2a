"""Typed graphs (node and edge types, ``graphfeed.graph.HeteroGraph``) placed by the same modes
as homogeneous ones: :meth:`graphfeed.placement.DataPlan.place_typed` calls these.

- **decide** (:func:`typed_placement`): the homogeneous planner's
  :class:`~graphfeed.placement.Placement` for the graph's bytes and every per-type feature's
  (``plan_placement``), so a mode that cannot fit is refused with the numbers, a mode past the
  headroom warns, and ``auto`` chooses as it does for homogeneous graphs. On a CPU device
  nothing is measured: the CPU modes sample on the CPU, and a GPU mode runs its logic on the
  CPU (the test bed of the GPU path without a GPU).
- **sample** (:func:`typed_sampler`): the mode's :attr:`ModeSpec.typed_sampler`
  (``graphfeed.sampling.SAMPLERS``): the numba ``hetero`` sampler where the graph stays on the
  host, the vectorised ``torch-hetero`` sampler where the GPU reads it (copied there, or UVA
  views of pinned host memory).
- **place** (:func:`place_type_features`): each type's features (and the labels) where the
  mode's spec says, through :func:`~graphfeed.placement.apply.place_feature`, the one placing
  of homogeneous features: copied to the GPU, page-locked and read through UVA views, or left
  on the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from .modes import AUTO, mode_spec, validate_mode

__all__ = ["TypedPlaced", "open_type_features", "typed_placement", "typed_sampler",
           "place_type_features"]


@dataclass
class TypedPlaced:
    """A typed graph placed for training: ``sampler`` (typed, returns typed ``MiniBatch``es),
    ``features`` node type -> name -> ``Feature``, ``labels`` (the target type's, or
    ``None``), ``device`` where batches end up, ``placement`` the decision (``mode``,
    ``reason``), ``keep_alive`` the pinned host tensors UVA views alias, ``where`` a phrase
    for the log."""

    placement: object
    sampler: object
    features: dict
    device: object
    labels: object = None
    keep_alive: list = field(default_factory=list, repr=False)
    where: str = "read by the CPU"

    @property
    def mode(self) -> str:
        return self.placement.mode


def open_type_features(dataset, backend: str, cache_size: int = 0,
                       cache_policy: str = "auto") -> dict:
    """``dataset``'s per-type features on ``backend`` (type -> name -> ``Feature``,
    ``Dataset.type_feature``): the dataset's own for ``ram``, else one ``disk``/``lmdb`` store
    per type array."""
    return {t: {n: dataset.type_feature(t, n, backend, cache_size=cache_size,
                                        cache_policy=cache_policy) for n in fs}
            for t, fs in dataset.type_features.items()}


def _on_cuda(device) -> bool:
    return str(device).startswith("cuda")


def typed_placement(mode: str, graph, tfeats: dict, device, *, labels=None, hw=None,
                    ranks_per_machine: int = 1):
    """The :class:`~graphfeed.placement.Placement` of typed ``graph`` with per-type features
    ``tfeats`` and ``labels`` in ``mode`` (``auto`` or a mode name) on ``device``.

    ``hw``: the :class:`~graphfeed.placement.hardware.Hardware` to decide on; by default
    measured on a CUDA ``device``. On a CPU ``device`` and no ``hw``, nothing is measured: the
    CPU modes (and ``auto``) sample and read on the CPU; a GPU mode keeps its logic (the torch
    typed sampler, features "placed" in memory on the CPU)."""
    from .planner import Placement, plan_placement

    mode = validate_mode(mode)
    feats = [f for fs in tfeats.values() for f in fs.values()]
    if labels is not None:
        feats.append(labels)
    sizes = {"graph_bytes": int(graph.nbytes),
             "feature_bytes": sum(int(f.nbytes) for f in feats), "requested": mode}
    if hw is None and not _on_cuda(device):
        if mode == AUTO or not mode_spec(mode).uses_cuda:
            return Placement("cpu-cpu", "a typed graph on the CPU device: sampled by the CPU, "
                             "per-type features read by the CPU", "cpu", sizes)
        return Placement(mode, f"--mode {mode} on the CPU device: the torch typed sampler on "
                         f"the CPU, per-type features in memory on the CPU (no GPU memory to "
                         f"check)", "cpu", sizes)
    if hw is None:
        from .hardware import detect_hardware

        hw = detect_hardware(ranks_per_machine=ranks_per_machine, device=str(device))
    return plan_placement(sizes["graph_bytes"], sizes["feature_bytes"], hw, requested=mode)


def typed_sampler(placement, graph, fanouts: Sequence[int], device, *, replace: bool = False,
                  seed: int = 0):
    """The typed sampler of ``placement``'s mode (:attr:`ModeSpec.typed_sampler`) over
    ``graph``: on the host for the CPU modes, on ``device`` for the GPU ones (``pinned``
    graphs read through UVA views on a CUDA device)."""
    from ..sampling import build_sampler

    spec = placement.spec
    if not spec.samples_on_device:
        return build_sampler(spec.typed_sampler, graph, list(fanouts), replace=replace,
                             seed=seed)
    uva = spec.graph == "pinned" and _on_cuda(device)
    return build_sampler(spec.typed_sampler, graph, list(fanouts), device=str(device),
                         replace=replace, seed=seed, uva=uva)


def place_type_features(placement, tfeats: dict, device, *, labels=None,
                        sampler=None) -> TypedPlaced:
    """``tfeats`` and ``labels`` where ``placement`` says (``apply.place_feature``):
    ``device`` a copy of each array in GPU memory (disk and LMDB arrays read in chunks of about
    256 MB), ``pinned`` each array page-locked and read through a UVA view (only the gathered
    rows cross the bus), ``host`` unchanged. On a CPU ``device`` a GPU mode keeps the rows in
    memory on the CPU."""
    import torch

    from .apply import place_feature

    dev = torch.device(str(device))
    loc = placement.spec.features
    if loc == "host":
        return TypedPlaced(placement, sampler, dict(tfeats), dev, labels)
    if dev.type == "cuda":
        where = (f"copied to {dev}" if loc == "device" else
                 f"in pinned host memory, gathered by {dev} through UVA")
    else:
        loc, where = "device", "in memory on the CPU (no GPU)"
    keep: list = []
    out = {t: {n: place_feature(f, loc, dev, keep) for n, f in fs.items()}
           for t, fs in tfeats.items()}
    lab = None if labels is None else place_feature(labels, loc, dev, keep)
    return TypedPlaced(placement, sampler, out, dev, lab, keep, where)


def describe(placed: TypedPlaced) -> str:
    """The ``graphfeed: placement ...`` line of a typed run."""
    spec = placed.placement.spec
    if not spec.samples_on_device:
        return f"{placed.placement.reason}"
    return (f"{placed.mode}: the torch typed sampler on {placed.device}, per-type features "
            f"{placed.where} ({placed.placement.reason})")


def place_typed(plan, dataset, fanouts: Sequence[int], *, graph=None, replace: bool = False,
                seed: int = 0, labels: bool = True, hw=None) -> TypedPlaced:
    """:meth:`DataPlan.place_typed`: decide, open, sample, place (module docstring).
    ``graph``: the typed graph to sample (default the dataset's; link prediction passes the
    message-passing graph)."""
    graph = dataset.hetero if graph is None else graph
    if plan.features == "auto":  # the typed graph and every per-type feature
        arrays = [f for fs in dataset.type_features.values() for f in fs.values()]
        plan = plan.for_sizes(int(graph.nbytes), sum(int(f.nbytes) for f in arrays),
                              int(dataset.num_nodes), max((int(f.row_nbytes) for f in arrays),
                                                          default=0))
    tfeats = open_type_features(dataset, plan.features, plan.cache_size, plan.cache_policy)
    lab = None
    if labels:
        from ..features.memory import InMemoryFeature

        lab = InMemoryFeature(dataset.labels)
    world = plan.world
    placement = typed_placement(plan.mode, graph, tfeats, plan.device, labels=lab, hw=hw,
                                ranks_per_machine=getattr(world, "local_world_size", 1) or 1)
    sampler = typed_sampler(placement, graph, fanouts, plan.device, replace=replace, seed=seed)
    return place_type_features(placement, tfeats, plan.device, labels=lab, sampler=sampler)

