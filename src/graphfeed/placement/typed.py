"""Typed graphs (node and edge types, ``graphfeed.graph.HeteroGraph``) placed by the same modes
as homogeneous ones: :meth:`graphfeed.placement.DataPlan.place_dataset` calls these for typed data.

- **decide** (``DataPlan.decide``; ``plan.typed_placement`` for loaded objects): the one
  decision of every kind of data, on the graph's bytes and every per-type feature's, so a mode
  that cannot fit is refused with the numbers, a mode past the headroom warns, ``auto`` chooses
  as it does for homogeneous graphs and rank 0's choice holds for every rank. A GPU mode on a
  CPU device runs its logic on the CPU (the test bed of the GPU path without a GPU).
- **open and share** (``DataPlan.open_typed``): the per-type features on the plan's backend,
  one copy per machine under several ranks (``graphfeed.distributed.share_dataset``).
- **sample** (``apply.mode_sampler``, shared with untyped data): the mode's sampler, whose
  typed counterpart ``build_sampler`` builds for a typed graph: the numba ``hetero`` sampler
  where the graph stays on the host, the vectorised ``torch-hetero`` sampler where the GPU reads
  it (copied there, or UVA views of pinned host memory).
- **place** (:func:`place_type_features`): each type's features (and the labels) where the
  mode's spec says, through :func:`~graphfeed.placement.apply.place_feature`, the one placing
  of homogeneous features: copied to the GPU, page-locked and read through UVA views, or left
  on the host.
"""

from __future__ import annotations

from typing import Sequence

from .apply import mode_sampler
from .base import PlacedData

__all__ = ["open_type_features", "place_type_features", "place_typed"]


def open_type_features(dataset, backend: str, cache_size: int = 0,
                       cache_policy: str = "auto") -> dict:
    """``dataset``'s per-type features on ``backend`` (type -> name -> ``Feature``,
    ``Dataset.type_feature``): the dataset's own for ``ram``, else one ``disk``/``lmdb`` store
    per type array."""
    return {t: {n: dataset.type_feature(t, n, backend, cache_size=cache_size,
                                        cache_policy=cache_policy) for n in fs}
            for t, fs in dataset.type_features.items()}


def place_type_features(placement, tfeats: dict, device, *, labels=None, sampler=None,
                        graph=None) -> PlacedData:
    """``tfeats`` and ``labels`` where ``placement`` says (``apply.place_feature``):
    ``device`` a copy of each array in GPU memory (disk and LMDB arrays read in chunks of about
    256 MB), ``pinned`` each array page-locked and read through a UVA view (only the gathered
    rows cross the bus), ``host`` unchanged. On a CPU ``device`` a GPU mode keeps the rows in
    memory on the CPU; a typed :class:`~graphfeed.placement.base.PlacedData`."""
    import torch

    from .apply import feature_location, place_feature

    dev = torch.device(str(device))
    loc, where = feature_location(placement.spec, dev)
    keep: list = []
    out = {t: {n: place_feature(f, loc, dev, keep) for n, f in fs.items()}
           for t, fs in tfeats.items()}
    lab = None if labels is None else place_feature(labels, loc, dev, keep)
    return PlacedData(placement, sampler, {}, dev, keep, type_features=out, labels=lab,
                      where=where, graph=graph)


def place_typed(plan, dataset, fanouts: Sequence[int], *, graph=None, replace: bool = False,
                seed: int = 0, labels: bool = True, hw=None) -> PlacedData:
    """:meth:`DataPlan.place_dataset` of a typed dataset: the storage and the mode decided as
    for untyped data (rank 0's choice for every rank), the per-type features opened and shared
    once per machine (:meth:`DataPlan.open_typed`), the mode's sampler of the typed graph, the
    features placed. ``graph(opened)``: the typed graph to sample, made from the opened one
    (link prediction's message-passing graph; default: itself)."""
    target = getattr(dataset, "target", "label")
    names = [target] if labels else []
    plan = plan.for_dataset(dataset, names)
    placement = plan.decide(*plan.data_bytes(dataset, names), hw=hw)
    pins = placement.spec.features == "pinned" or placement.spec.graph == "pinned"
    hetero, tfeats, lab = plan.open_typed(dataset, labels=labels, pins_host=pins)
    hetero = hetero if graph is None else graph(hetero)
    sampler = mode_sampler(placement.spec, hetero, fanouts, plan.device, replace=replace,
                           seed=seed)
    placed = place_type_features(placement, tfeats, plan.device, labels=lab, sampler=sampler,
                                 graph=hetero)
    placed.target_type = dataset.metadata.hetero.target_type if labels else None
    return placed
