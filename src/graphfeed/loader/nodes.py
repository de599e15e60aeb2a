"""The one-call entry point: place the data for a mode, then load node mini-batches.

``place(...)`` decides where the graph and features live and where sampling runs (``mode``:
``auto``, ``cpu-cpu``, ``cpu-cuda``, ``pinned-cuda``, ``cuda-cuda``) and builds the matching
sampler; ``node_loader(...)`` turns ids into a ``DataLoader`` over that placement. Place once,
then build as many loaders (train, valid, test) as needed over the same placed data.
"""

from __future__ import annotations

import logging
from typing import Mapping, Optional, Sequence, Union

from ..errors import GraphfeedError
from ..features.base import Feature

log = logging.getLogger("graphfeed.placement")


def place(
    graph,
    features: Mapping[str, Feature],
    fanouts: Sequence[int],
    *,
    mode: str = "auto",
    device: str = "auto",
    replace: bool = False,
    seed: int = 0,
    ranks_per_machine: Optional[int] = None,
):
    """Plan (``mode="auto"``: from data sizes, free host and GPU memory, ranks per machine) and
    apply a placement; returns ``graphfeed.placement.PlacedData`` (``sampler``, ``features``,
    ``device``, ``placement`` with its human-readable ``reason``)."""
    import torch

    from ..placement import apply_placement, detect_hardware, estimate_bytes, plan_placement

    from .. import _cuda

    if device == "auto" and mode == "cpu-cpu":
        device = "cpu"
    dev = _cuda.resolve_device(device)
    device = str(dev)
    if dev.type == "cpu" and mode not in ("auto", "cpu-cpu"):
        raise GraphfeedError(f"mode {mode!r} trains on a GPU, but device is {device!r}")
    hw = detect_hardware(ranks_per_machine=ranks_per_machine, device=device)
    graph_bytes, feature_bytes = estimate_bytes(graph, features)
    placement = plan_placement(graph_bytes, feature_bytes, hw, requested=mode)
    log.info("placement %s", placement.reason)
    return apply_placement(placement, graph, features, fanouts, replace=replace, seed=seed)


def node_loader(
    ids,
    placed,
    *,
    batch_size: int = 1024,
    shuffle: bool = True,
    drop_last: bool = False,
    seed: int = 0,
    rank: int = 0,
    world_size: int = 1,
    feature_names: Union[Sequence[str], None] = ("feat",),
    label_name: Optional[str] = "label",
    num_threads: int = 2,
    prefetch: int = 2,
):
    """A ``DataLoader`` over node ``ids`` for data placed by :func:`place`.

    ``feature_names`` are read at each batch's ``input_nodes``, ``label_name`` at its seeds.
    With ``world_size > 1`` every rank gets an equal share of the ids each epoch.
    """
    from .dataloader import DataLoader
    from .item_sampler import ItemSampler

    feats = placed.features
    names = list(feature_names) if feature_names is not None else [k for k in feats if k != label_name]
    missing = [n for n in names + ([label_name] if label_name else []) if n not in feats]
    if missing:
        raise GraphfeedError(f"placed data has no feature(s) {missing}; it has {sorted(feats)}")
    items = ItemSampler(ids, batch_size, shuffle=shuffle, drop_last=drop_last, seed=seed,
                        rank=rank, world_size=world_size)
    return DataLoader(
        items,
        placed.sampler,
        node_features={n: feats[n] for n in names},
        labels=feats[label_name] if label_name else None,
        device=placed.device,
        num_threads=num_threads,
        prefetch=prefetch,
    )
