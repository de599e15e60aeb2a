"""Placed data: the one interface every kind of data a run trains on implements.

:class:`Placed` is all a task, an evaluator or a benchmark asks of placed data, whatever its kind:
its ``sampler``, the ``device`` batches end up on, the host ``graph`` it samples (what
layer-wise evaluation walks), a :meth:`~Placed.loader` over any node ids (training: shuffled,
every rank the same number of batches; evaluation: this rank's share, in order), the input
widths (:attr:`~Placed.in_dims`), the features layer 0 reads (:attr:`~Placed.input_features`,
by node type), the labels, the loader keywords joining them (:meth:`~Placed.join`), a line
for the log (:meth:`~Placed.describe`), the epoch hooks (:meth:`~Placed.before_epoch`,
:meth:`~Placed.after_epoch`), the dataset ids of its node ids (:meth:`~Placed.original_ids`)
and :meth:`~Placed.close`. Two implementations:

- :class:`PlacedData` (here): one graph placed by a mode (:mod:`.apply`), untyped (features by
  name) or typed (``type_features``: node type -> name -> ``Feature``; a typed sampler);
- :class:`~graphfeed.placement.partitioned.PartitionPlaced`: this rank's part of a partitioned
  dataset (the distributed sampler and features).

A new kind of data is one class implementing this interface (and, for ``graphfeed train``, the
``DataPlan`` method that places it).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

__all__ = ["Placed", "PlacedData"]


class Placed(abc.ABC):
    """Data placed for training (module docstring). Attributes every implementation has:
    ``mode`` (the placement mode's name), ``sampler`` (the ``graphfeed.sampling.Sampler``
    batches are sampled with), ``device`` (the ``torch.device`` the model trains on) and
    ``graph`` (the host ``CSCGraph`` or ``HeteroGraph`` the sampler samples; ``None`` where no
    process holds all of it)."""

    mode: str
    sampler: object
    device: object
    graph: object = None

    @property
    def hetero(self):
        """The typed graph (``graphfeed.graph.HeteroGraph``) of typed data, else ``None``."""
        return None

    @property
    @abc.abstractmethod
    def input_features(self) -> dict:
        """What layer 0 reads: node type -> its input ``Feature`` (``None`` -> the feature of
        untyped data; typed: each type's ``"feat"`` or only feature, types without one left
        out)."""

    @property
    def in_dims(self):
        """The input width: an int for untyped data, node type -> int for typed data (types
        without features left out)."""
        dims = {t: int(np.prod(f.row_shape) or 1) for t, f in self.input_features.items()}
        return dims[None] if self.hetero is None else dims

    def describe_fanouts(self, fanouts) -> str:
        """The fanouts as a run's first line shows them."""
        return f"{list(fanouts)}" + (" per edge type" if self.hetero is not None else "")

    @property
    @abc.abstractmethod
    def label_feature(self):
        """The labels, a ``Feature`` read at global seed ids (``None``: no labels)."""

    @abc.abstractmethod
    def loader(self, ids, *, train: bool, batch_size: int, seed: int, sampler=None,
               labels: bool = True, num_threads: int = 2, prefetch: int = 2, rank: int = 0,
               world_size: int = 1):
        """A ``DataLoader`` over node ``ids`` (every rank passes the same ones). ``train``:
        shuffled by ``(seed, epoch)``, split between the ranks with the same number of batches
        on each (DDP steps together); else this rank's share, in order, for evaluation (each
        id on one rank; batches carry their ``seeds``). ``sampler``: another sampler of the same
        graph (evaluation fanouts); ``labels``: read the labels at the seeds."""

    def join(self, labels: bool = True) -> dict:
        """The ``DataLoader`` keywords that join this data's features (and, with ``labels``,
        its labels) to batches of its sampler, for a loader a task builds itself (link
        prediction's pairs); data that only :meth:`loader` can feed refuses."""
        from ..errors import GraphfeedError

        raise GraphfeedError(f"{self.kind} data feeds batches only through its own loader")

    @abc.abstractmethod
    def describe(self) -> str:
        """The ``graphfeed: placement ...`` line: the mode and why."""

    @property
    def layerwise_refusal(self) -> Optional[str]:
        """Why this data cannot be evaluated layer-wise (``None``: it can, over
        :attr:`graph`)."""
        return None if self.graph is not None else "no process holds the whole graph"

    def before_epoch(self, epoch: int) -> None:
        """Before an epoch's training: counters the epoch line reports start here."""

    def after_epoch(self, epoch: int) -> str:
        """After an epoch's training: what the epoch line ends with ("" for nothing)."""
        return ""

    @property
    def kind(self) -> str:
        """``"plain"``, ``"typed"`` or ``"partitioned"``: what a checkpoint records."""
        return "typed" if self.hetero is not None else "plain"

    def node_ids(self) -> Optional[np.ndarray]:
        """Every node a seed can be, ascending (typed: the target type's global ids); ``None``
        where no process holds them all."""
        return None

    def seed_features(self, ids: np.ndarray):
        """``(Feature, rows)``: the feature holding seeds ``ids``' own input rows and their rows
        in it (the MLP baseline's input), read by this process alone; ``None`` where that is
        not possible or the seeds have no features."""
        return None

    def seed_labels(self, ids: np.ndarray) -> Optional[np.ndarray]:
        """The labels of seeds ``ids`` read by this process alone (``None``: not possible)."""
        return None

    def original_ids(self, ids: np.ndarray) -> np.ndarray:
        """The dataset's ids of node ids ``ids`` (every rank calls it: a collective where the
        mapping is spread over the ranks); the ids themselves unless the data was
        relabelled."""
        return ids

    def close(self) -> None:
        """Release what the placed data holds (threads of its sampler); idempotent."""
        self.sampler.close()


@dataclass
class PlacedData(Placed):
    """One graph placed by a mode (``graphfeed.placement.apply``).

    - ``placement``: the decision (``mode``, ``reason``); ``sampler``: its ``Sampler``, whose
      mini-batches' ids are on ``sampling_device``; ``device``: where the model runs and
      batches end up.
    - ``features``: name -> ``Feature`` (untyped data; the labels under ``"label"``), on the CPU
      (cpu-*), on the GPU (cuda-cuda), or CUDA views of pinned host memory (pinned-cuda).
    - ``type_features``: typed data: node type -> name -> ``Feature`` (type-local rows);
      ``labels``: the typed data's labels over global ids; ``where``: where the per-type
      features are, for the log.
    - ``keep_alive``: pinned host tensors the UVA views alias; they must outlive the views.
    - ``graph``: the host graph the sampler samples (``CSCGraph``, or ``HeteroGraph`` for
      typed data); ``target_type``: typed data's seed (label) type, ``None`` otherwise.
    """

    placement: object
    sampler: object
    features: dict
    device: object
    keep_alive: list = field(default_factory=list, repr=False)
    type_features: Optional[dict] = None
    labels: object = None
    where: str = "read by the CPU"
    graph: object = None
    target_type: Optional[str] = None

    @property
    def mode(self) -> str:
        return self.placement.mode

    @property
    def sampling_device(self):
        import torch

        return torch.device(self.placement.sampling_device)

    @property
    def hetero(self):
        return self.graph if self.type_features is not None else None

    @property
    def input_features(self) -> dict:
        if self.type_features is None:
            return {None: self.features["feat"]} if "feat" in self.features else {}
        from ..sampling.base import input_of

        rows = {t: input_of(feats) for t, feats in self.type_features.items()}
        return {t: f for t, f in rows.items() if f is not None}

    @property
    def label_feature(self):
        return self.labels if self.type_features is not None else self.features.get("label")

    def _target_range(self) -> tuple:
        """``(offset, count)`` of the seeds' ids: the target type's in a typed graph."""
        h = self.hetero
        if h is None:
            return 0, int(self.graph.num_nodes)
        j = h.type_id(self.target_type)
        return int(h.node_offsets[j]), int(h.num_nodes_of(self.target_type))

    def node_ids(self) -> np.ndarray:
        off, n = self._target_range()
        return np.arange(off, off + n, dtype=np.int64)

    def seed_features(self, ids: np.ndarray):
        f = self.input_features.get(self.target_type)
        return None if f is None else (f, np.asarray(ids, dtype=np.int64) - self._target_range()[0])

    def seed_labels(self, ids: np.ndarray) -> Optional[np.ndarray]:
        import torch

        lab = self.label_feature
        if lab is None:
            return None
        return lab.read(torch.from_numpy(np.asarray(ids, dtype=np.int64))).cpu().numpy()

    def loader(self, ids, *, train: bool, batch_size: int, seed: int, sampler=None,
               labels: bool = True, num_threads: int = 2, prefetch: int = 2, rank: int = 0,
               world_size: int = 1):
        from ..loader.dataloader import DataLoader
        from ..loader.item_sampler import ItemSampler

        if train:
            items = ItemSampler(ids, batch_size, shuffle=True, seed=seed, rank=rank,
                                world_size=world_size)
        else:
            share = np.ascontiguousarray(np.asarray(ids, dtype=np.int64)[rank::world_size])
            items = ItemSampler(share, batch_size, shuffle=False, seed=seed)
        return DataLoader(items, sampler or self.sampler, **self.join(labels),
                          num_threads=num_threads, prefetch=prefetch)

    def join(self, labels: bool = True) -> dict:
        """The ``DataLoader`` keywords that join this data's features (and, with ``labels``,
        its labels) to a batch of its sampler's: per-type features for typed data (its batches
        are made on the CPU), else the node features and the device batches go to."""
        lab = self.label_feature if labels else None
        if self.type_features is not None:
            return {"type_features": self.type_features, "labels": lab}
        feats = {k: f for k, f in self.features.items() if k != "label"}
        return {"node_features": feats, "labels": lab, "device": self.device}

    def describe(self) -> str:
        if self.type_features is None or not self.placement.spec.samples_on_device:
            return self.placement.reason
        return (f"{self.mode}: the torch typed sampler on {self.device}, per-type features "
                f"{self.where} ({self.placement.reason})")
