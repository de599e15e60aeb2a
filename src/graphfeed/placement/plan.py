"""The data plan: one frozen answer to "where does the data live", and the one pipeline that
carries it out, **open -> share -> place**.

:meth:`DataPlan.resolve` checks every choice once (feature backend, cache size and policy,
placement mode, device, the process's place in the world) and freezes it. Then:

1. **decide** (:meth:`DataPlan.decide`): the placement mode, from the data's sizes and the
   hardware when the plan says ``auto`` (``graphfeed.placement.plan_placement``), before any
   data is read;
2. **open and share** (:meth:`DataPlan.open`): the graph and the node features on the plan's
   backend; with several ranks on a machine, one shared copy per machine
   (``graphfeed.distributed.share_dataset``), mapped so that a pinned placement can page-lock it
   in place;
3. **place** (:meth:`DataPlan.place`): graph and features where the mode's spec says, and its
   sampler (``graphfeed.placement.apply_placement``).

:meth:`DataPlan.place_dataset` runs all three on a dataset of either kind (:meth:`prepare`
untyped, :mod:`.typed` typed: the same decide, open and share, place); partitioned datasets
(:meth:`DataPlan.place_partitions`, :mod:`.partitioned`) are the plan's other kind of data.
Each returns one :class:`~graphfeed.placement.base.Placed`. ``graphfeed.place(graph, features, ...)`` and training both go through here, so no other
module decides where data lives.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Mapping, Optional, Sequence, Union

from .._units import parse_size
from ..errors import GraphfeedError
from .modes import AUTO, mode_spec, validate_mode

__all__ = ["DataPlan", "check_dataset", "place", "node_loader"]

log = logging.getLogger("graphfeed.placement")


@dataclasses.dataclass(frozen=True)
class DataPlan:
    """Where the data of one process lives; build it with :meth:`resolve`.

    - ``features``: the node features' backend (``graphfeed.features.BACKENDS``), or ``"auto"``
      until :meth:`for_sizes` chooses one from the data's size and the memory available
      (``graphfeed.placement.planner.plan_storage``); labels are always in RAM.
    - ``cache_size`` (bytes) and ``cache_policy``: a row cache in front of a ``disk``/``lmdb``
      backend (0: none; with ``features="auto"`` and features on disk, 0 sizes it to fit).
    - ``storage_reason``: why ``auto`` chose the backend and cache (empty otherwise).
    - ``mode``: a placement mode, or ``"auto"`` until :meth:`decide`.
    - ``device``: where the model trains (``"cpu"`` or ``"cuda:N"``), resolved.
    - ``world``: this process among the ranks (``graphfeed.distributed.World``).
    - ``private_copy``: with several ranks, every rank loads its own copy (the comparison point
      for memory).
    """

    features: str = "ram"
    cache_size: int = 0
    cache_policy: str = "auto"
    mode: str = AUTO
    device: str = "cpu"
    world: object = None
    private_copy: bool = False
    storage_reason: str = ""

    @classmethod
    def resolve(cls, *, features: str = "ram", cache_size=0, cache_policy: str = "auto",
                mode: str = AUTO, device: str = "auto", world=None,
                private_copy: bool = False) -> "DataPlan":
        """Check and freeze the choices. ``cache_size``: bytes or a size string (``"2GB"`` is
        2*10**9 bytes, ``"2GiB"`` 2*2**30). ``device``: ``auto``/``cpu``/``cuda``/``cuda:N``
        (``cuda`` under several ranks: the local rank's GPU); resolving it never starts CUDA.
        ``world``: default from torchrun's variables."""
        from .. import _cuda
        from ..distributed.world import World
        from ..features.registry import BACKENDS, policy_code

        if features != AUTO:
            BACKENDS.check(features)
        cache = parse_size(cache_size)
        policy_code(cache_policy, allow_auto=True)
        mode = validate_mode(mode)
        dev = str(_cuda.resolve_device(device, mode))
        if not dev.startswith("cuda") and mode != AUTO and mode_spec(mode).uses_cuda:
            raise GraphfeedError(f"mode {mode!r} trains on a GPU, but the device is {dev!r}")
        world = World.from_env() if world is None else world
        return cls(features=features, cache_size=cache, cache_policy=cache_policy, mode=mode,
                   device=dev, world=world, private_copy=bool(private_copy))

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    # ------------------------------------------------------------------ 0. storage
    def for_sizes(self, graph_bytes: int, feature_bytes: int, num_nodes: int,
                  row_bytes: int) -> "DataPlan":
        """This plan with ``features="auto"`` made concrete for data of these sizes (``row_bytes``:
        one node's input feature row): RAM when graph and features fit the memory available
        (a memory cgroup's limit counts), else disk with a cache sized to what is left
        (:func:`~graphfeed.placement.planner.plan_storage`); under several ranks rank 0's choice
        holds for every rank. A plan with a concrete backend is returned as it is."""
        if self.features != AUTO:
            return self
        from .._memory import _own_cgroup_memory
        from .._units import format_bytes
        from .hardware import Hardware, host_memory
        from .planner import plan_storage

        total, free = host_memory()
        cg = _own_cgroup_memory()
        text = (f"available memory (memory cgroup limit {format_bytes(cg[0])})" if cg is not None
                else "available memory")
        hw = Hardware(total, free, ranks_per_machine=self.world.local_world_size)
        st = plan_storage(graph_bytes, feature_bytes, num_nodes, row_bytes, hw,
                          cache_bytes=self.cache_size, memory_text=text)
        if self.world.world_size > 1:
            chosen = _rank0_storage(st.features, st.cache_bytes)
            if chosen != (st.features, st.cache_bytes):
                st = dataclasses.replace(st, features=chosen[0], cache_bytes=chosen[1],
                                         reason=f"rank 0 chose features {chosen[0]} with a "
                                                f"{format_bytes(chosen[1])} cache for every rank")
        log.info("features %s", st.reason)
        return dataclasses.replace(self, features=st.features, cache_size=st.cache_bytes,
                                   storage_reason=st.reason)

    def for_dataset(self, dataset, names: Sequence[str]) -> "DataPlan":
        """:meth:`for_sizes` of ``dataset``'s graph and its node features ``names`` (a typed
        dataset: and every per-type feature, the widest type's row as the input row)."""
        if self.features != AUTO:
            return self
        target = getattr(dataset, "target", "label")
        row = sum(int(dataset.features[n].row_nbytes) for n in names if n != target)
        typed = _typed_features(dataset)
        row = max([row] + [int(f.row_nbytes) for f in typed])
        feats = [dataset.features[n] for n in names] + typed
        return self.for_sizes(int(dataset.graph.nbytes), sum(int(f.nbytes) for f in feats),
                              int(dataset.num_nodes), row)

    @staticmethod
    def data_bytes(dataset, names: Sequence[str], graph=None) -> tuple:
        """``(graph_bytes, feature_bytes)`` a placement of ``dataset`` decides on: ``graph``
        (default the dataset's; a typed one for typed data), its node features ``names`` and,
        for a typed dataset, every per-type feature."""
        graph = (dataset.hetero if dataset.hetero is not None
                 else dataset.graph) if graph is None else graph
        feats = [dataset.features[n] for n in names if n in dataset.features]
        return int(graph.nbytes), sum(int(f.nbytes) for f in feats + _typed_features(dataset))

    # ------------------------------------------------------------------ 1. decide
    def decide(self, graph_bytes: int, feature_bytes: int, *, hw=None):
        """The :class:`~graphfeed.placement.Placement` for data of these sizes: the plan's mode
        checked against the hardware (``hw``: a ``Hardware`` to decide on instead of this
        machine's), or the automatic choice (with its reason, followed by
        :attr:`storage_reason` when ``auto`` chose where the features live). A GPU mode on a
        CPU device without ``hw`` keeps its logic on the CPU with nothing measured (the test
        bed of the GPU paths; ``resolve`` refuses it to users)."""
        from .hardware import detect_hardware
        from .planner import Placement, plan_placement

        if hw is None and not self.on_gpu and self.mode != AUTO and mode_spec(self.mode).uses_cuda:
            return Placement(self.mode, f"--mode {self.mode} on the CPU device: its sampler and "
                             f"features on the CPU (no GPU memory to check)", "cpu",
                             {"graph_bytes": int(graph_bytes), "feature_bytes": int(feature_bytes),
                              "requested": self.mode})
        if hw is None:
            hw = detect_hardware(ranks_per_machine=self.world.local_world_size,
                                 device=self.device)
        placement = plan_placement(graph_bytes, feature_bytes, hw, requested=self.mode)
        if self.mode == AUTO and self.world.world_size > 1:
            # every rank must train the same way: rank 0's automatic choice holds for all (a
            # rank whose own numbers chose otherwise checks that choice against its hardware)
            chosen = _rank0_choice(placement.mode)
            if chosen != placement.mode:
                placement = plan_placement(graph_bytes, feature_bytes, hw, requested=chosen)
                placement = dataclasses.replace(
                    placement, reason=f"rank 0 chose {chosen} for every rank: {placement.reason}")
        if self.storage_reason:
            placement = dataclasses.replace(placement,
                                            reason=f"{placement.reason}; {self.storage_reason}")
        log.info("placement %s", placement.reason)
        return placement

    # ------------------------------------------------------------------ 2. open and share
    def open(self, dataset, names: Sequence[str], *, pins_host: Optional[bool] = None):
        """``(graph, {name: Feature})`` of ``dataset`` for this process: the features in
        ``names`` on the plan's backend (the dataset's target labels always in RAM), shared once
        per machine when several ranks run on it. ``pins_host``: whether the placement will
        page-lock host memory (pinned-cuda); shared segments are then mapped so that every rank
        can pin the one copy in place. Default: the plan's device is a GPU."""
        target = getattr(dataset, "target", "label")
        if self.world.world_size > 1:  # one process: nothing to share, nothing to copy
            from ..distributed import share_dataset

            shared = share_dataset(dataset, self.world, features=self.features,
                                   private_copy=self.private_copy, cache_size=self.cache_size,
                                   cache_policy=self.cache_policy, feature_names=list(names),
                                   pinnable=self.on_gpu if pins_host is None else pins_host)
            warm_caches(shared.features)
            return shared.graph, dict(shared.features)
        feats = {}
        for name in names:
            backend = "ram" if name == target else self.features
            feats[name] = dataset.node_feature(name, backend=backend, cache_size=self.cache_size,
                                               cache_policy=self.cache_policy)
        warm_caches(feats)
        return dataset.graph, feats

    # ------------------------------------------------------------------ 3. place
    def place(self, graph, features: Mapping, fanouts: Sequence[int], *, replace: bool = False,
              seed: int = 0, placement=None, method=None):
        """Graph and features placed for training, with the mode's sampler: a
        ``graphfeed.placement.PlacedData``. ``placement``: one :meth:`decide` already made (else
        it is made here from the loaded objects' sizes); ``method``: the sampler's
        ``graphfeed.sampling.SamplingMethod`` (``None``: uniform)."""
        from .apply import apply_placement, estimate_bytes

        if placement is None:
            placement = self.decide(*estimate_bytes(graph, features))
        return apply_placement(placement, graph, features, fanouts, replace=replace, seed=seed,
                               method=method)

    def prepare(self, dataset, fanouts: Sequence[int], *, inputs: Sequence[str] = ("feat",),
                labels: bool = True, graph=None, replace: bool = False, seed: int = 0,
                method=None, hw=None):
        """Decide, open and share, place: ``dataset``'s graph, its input features ``inputs``
        and its labels (under the name ``"label"``; not with ``labels=False``), ready for
        ``graphfeed.node_loader``. ``graph(opened)``: the graph to sample, made from the
        opened one (default: itself). ``method``: a ``SamplingMethod`` (or kind name), bound
        to ``dataset``'s weights and times here (a dataset without them is a
        ``GraphfeedError`` saying how to add them)."""
        from ..sampling.method import resolve_method

        method = resolve_method(method)
        if not method.is_uniform:
            method = method.bind(dataset)
        target = getattr(dataset, "target", "label")
        names = list(dict.fromkeys([*inputs, *([target] if labels else [])]))
        plan = self.for_dataset(dataset, names)
        placement = plan.decide(*self.data_bytes(dataset, names), hw=hw)
        opened, feats = plan.open(dataset, names, pins_host=placement.spec.features == "pinned"
                                  or placement.spec.graph == "pinned")
        loader_feats = {n: feats[n] for n in inputs}
        if labels:
            loader_feats["label"] = feats[target]
        placed = plan.place(opened if graph is None else graph(opened), loader_feats, fanouts,
                            replace=replace, seed=seed, placement=placement, method=method)
        if tuple(inputs) != ("feat",):  # layer 0 reads "feat": the inputs side by side
            from ..features.joined import JoinedFeature

            parts = [placed.features.pop(n) for n in inputs]
            placed.features["feat"] = (parts[0] if len(parts) == 1 else
                                       JoinedFeature(parts, list(inputs)))
        return placed

    def open_typed(self, dataset, *, labels: bool = True, pins_host: Optional[bool] = None):
        """``(HeteroGraph, {type: {name: Feature}}, labels)`` of typed ``dataset`` for this
        process, as :meth:`open` opens untyped data: the per-type features on the plan's
        backend, shared once per machine under several ranks (with the labels, always in RAM;
        ``None`` when ``labels`` is false)."""
        from .typed import open_type_features

        target = getattr(dataset, "target", "label")
        if self.world.world_size > 1:
            from ..distributed import share_dataset

            shared = share_dataset(dataset, self.world, features=self.features,
                                   private_copy=self.private_copy, cache_size=self.cache_size,
                                   cache_policy=self.cache_policy,
                                   feature_names=[target] if labels else [],
                                   pinnable=self.on_gpu if pins_host is None else pins_host,
                                   typed=True)
            tfeats, lab = shared.type_features, shared.features.get(target) if labels else None
            hetero = shared.hetero
        else:
            from ..features.memory import InMemoryFeature

            tfeats = open_type_features(dataset, self.features, self.cache_size,
                                        self.cache_policy)
            lab = InMemoryFeature(dataset.labels) if labels else None
            hetero = dataset.hetero
        for t, fs in tfeats.items():
            warm_caches({f"{t}/{n}": f for n, f in fs.items()})
        return hetero, tfeats, lab

    # ------------------------------------------------------------------ every kind of data
    def place_dataset(self, dataset, fanouts: Sequence[int], *, graph=None,
                      inputs: Sequence[str] = ("feat",), labels: bool = True,
                      replace: bool = False, seed: int = 0, method=None, hw=None):
        """``dataset`` placed for training, whatever its kind: a
        :class:`~graphfeed.placement.base.PlacedData`, untyped (:meth:`prepare`'s pipeline)
        or typed (:func:`~graphfeed.placement.typed.place_typed`: the same decide, open and
        share, and the mode's sampler of the typed graph). ``graph(opened)``: the graph to
        sample, made from the opened one (link prediction's message-passing graph; default
        the opened graph itself); ``inputs``: the untyped node features layer 0 reads;
        ``labels``: read the target at the seeds; ``method``: a ``SamplingMethod``;
        ``hw``: decide on this ``Hardware`` instead of the machine's."""
        check_dataset(dataset, method=method, labels=labels)
        if dataset.hetero is not None:
            from .typed import place_typed

            return place_typed(self, dataset, fanouts, graph=graph, replace=replace, seed=seed,
                               labels=labels, hw=hw)
        return self.prepare(dataset, fanouts, inputs=inputs, labels=labels, graph=graph,
                            replace=replace, seed=seed, method=method, hw=hw)

    def place_partitions(self, path, fanouts: Sequence[int], *, replace: bool = False,
                         seed: int = 0, timeout_s: float = 1800.0, remote_cache: int = 0):
        """A partitioned dataset (``graphfeed partition``) for this rank: its part memory-mapped,
        the distributed sampler and features (remote rows fetched from their owners); a
        :class:`~graphfeed.placement.partitioned.PartitionPlaced`. Needs the process group."""
        from .partitioned import place_partitions

        return place_partitions(path, fanouts, replace=replace, seed=seed, timeout_s=timeout_s,
                                remote_cache=remote_cache)


def _typed_features(dataset) -> list:
    """Every per-type feature of a typed ``dataset`` (none for an untyped one): what a
    placement of typed data counts beside the named features."""
    if dataset.hetero is None:
        return []
    return [f for fs in dataset.type_features.values() for f in fs.values()]


def check_dataset(dataset, *, method=None, labels: bool = True) -> None:
    """What placing ``dataset`` refuses, before anything is read: a sampling ``method`` it
    cannot honour (typed graphs are sampled uniformly; an untyped dataset must hold the
    method's weights or times: bound here), labels of a typed dataset that names no target
    type."""
    from ..sampling.method import resolve_method

    method = resolve_method(method)
    if dataset.hetero is None:
        if not method.is_uniform:
            method.bind(dataset)
        return
    if not method.is_uniform:
        raise GraphfeedError(f"heterogeneous datasets are sampled uniformly; got "
                             f"{method.describe()}")
    if labels and dataset.metadata.hetero.target_type is None:
        raise GraphfeedError(f"dataset {dataset.name!r}: its hetero section names no target_type "
                             f"(the node type the labels and splits are of)")


def warm_caches(features: Mapping) -> None:
    """Fill the static caches among ``features`` (``Feature.warm``) before the first batch,
    saying how long it took on ``graphfeed.placement``."""
    import time

    for name, f in features.items():
        t0 = time.perf_counter()
        rows = f.warm()
        if rows:
            log.info("feature %r: warmed its cache with %d rows in %.1f s", name, rows,
                     time.perf_counter() - t0)


def _rank0_storage(features: str, cache_bytes: int) -> tuple:
    """Rank 0's ``(features, cache_bytes)``, broadcast to every rank (a collective)."""
    import torch
    import torch.distributed as dist

    from ..distributed.sharing import collective_device
    from ..features.registry import BACKENDS

    if not (dist.is_available() and dist.is_initialized()):
        return features, cache_bytes
    names = list(BACKENDS.names())
    t = torch.tensor([names.index(features), int(cache_bytes)], dtype=torch.int64,
                     device=collective_device())
    dist.broadcast(t, src=0)
    return names[int(t[0])], int(t[1])


def _rank0_choice(mode: str) -> str:
    """Rank 0's ``mode``, broadcast to every rank of the default process group (a collective);
    ``mode`` itself when no group is up."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return mode
    import torch

    from ..distributed.sharing import collective_device
    from .modes import MODES

    names = MODES.names()
    t = torch.tensor([names.index(mode)], dtype=torch.int64, device=collective_device())
    dist.broadcast(t, src=0)
    return names[int(t.item())]


def place(graph, features: Mapping, fanouts: Sequence[int], *, mode: str = AUTO,
          device: str = "auto", replace: bool = False, seed: int = 0,
          ranks_per_machine: Optional[int] = None, method=None):
    """Plan (``mode="auto"``: from data sizes, free host and GPU memory, ranks per machine) and
    apply a placement of loaded objects; returns ``graphfeed.placement.PlacedData``
    (``sampler``, ``features``, ``device``, ``placement`` with its human-readable ``reason``).
    Place once, then build as many loaders (train, valid, test) over it as needed.
    ``method``: the sampler's ``graphfeed.sampling.SamplingMethod`` (``None``: uniform; bind
    arrays that are not the graph's weights first, ``method.bind(dataset)``).

    ``graph`` may be a PyG ``Data``: its graph is built (``CSCGraph.from_pyg``) and its node
    tensors become in-memory features, ``x`` as ``"feat"`` and ``y`` as ``"label"`` (others
    by name; boolean masks left out), ``features`` adding to or replacing them."""
    from ..distributed.world import World

    graph, features = _from_pyg(graph, features)

    world = None
    if ranks_per_machine is not None:
        n = max(1, int(ranks_per_machine))
        world = World(world_size=n, local_world_size=n)
    plan = DataPlan.resolve(mode=mode, device=device, world=world)
    return plan.place(graph, features, fanouts, replace=replace, seed=seed, method=method)


def _from_pyg(graph, features):
    """``(CSCGraph, features)`` of a PyG ``Data`` given to :func:`place` (other graphs as
    given); a ``HeteroData`` is refused, naming the typed path."""
    from ..graph.from_pyg import node_tensors, pyg_kind

    kind = pyg_kind(graph)
    if kind is None:
        return graph, features
    if kind == "hetero":
        raise GraphfeedError(
            "place() takes a homogeneous graph, got a PyG HeteroData: build "
            "HeteroGraph.from_pyg(data) and sample it with build_sampler('hetero', ...), or "
            "keep PyG's loaders with graphfeed.pyg.GraphfeedSampler(data, num_neighbors)")
    from ..features.memory import InMemoryFeature
    from ..graph.csc import CSCGraph

    feats = {name: InMemoryFeature(t) for name, t in node_tensors(graph).items()}
    feats.update(features or {})
    return CSCGraph.from_pyg(graph), feats


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
    from ..loader.dataloader import DataLoader
    from ..loader.item_sampler import ItemSampler

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


def typed_placement(mode: str, graph, tfeats: dict, device, *, labels=None, hw=None,
                    ranks_per_machine: int = 1):
    """The :class:`~graphfeed.placement.Placement` of typed ``graph`` with per-type features
    ``tfeats`` and ``labels`` in ``mode`` (``auto`` or a mode name) on ``device``:
    :meth:`DataPlan.decide` of their bytes, as
    training decides (``hw``: the ``Hardware`` to decide on, else this machine's; a GPU mode
    on a CPU device keeps its logic on the CPU)."""
    from ..distributed.world import World

    feats = [f for fs in tfeats.values() for f in fs.values()]
    if labels is not None:
        feats.append(labels)
    n = max(1, int(ranks_per_machine))
    plan = DataPlan(mode=validate_mode(mode), device=str(device), world=World(
        world_size=n, local_world_size=n))
    return plan.decide(int(graph.nbytes), sum(int(f.nbytes) for f in feats), hw=hw)
