"""One copy of the data per machine.

Rules (``share_dataset``):

- Arrays memory-mapped from the dataset's files (the graph, and features opened from ``.npy``)
  are already one copy per machine: the page cache backs every process's mapping. They are kept
  as they are for the graph; no rank reads them into private memory.
- ``features="ram"``: every node feature (and the labels) is copied ONCE per machine into a
  shared-memory segment by the machine's first rank (``local_rank == 0``); the other ranks map it
  after a collective, then the creator unlinks its name (see :mod:`.shm`: nothing stays in
  ``/dev/shm`` even if processes are killed later). Each rank's PSS then counts ``1/N`` of it.
- A graph held in private memory (not file-backed, e.g. a generated dataset) is shared the same
  way.
- ``features="disk"`` / ``"lmdb"``: each rank opens the store itself (``pread`` / LMDB's
  read-only ``mmap``), so the bytes live once in the page cache; each rank's row cache
  (``cache_size``) is private to it.
- ``private_copy=True``: every rank loads its own in-memory copy of graph and features (the
  comparison point for ``graphfeed bench memory --private-copy``).
- A typed dataset (``typed=True``): its per-type features follow the same rules as node
  features (``ram``: one segment per machine, beside the node features'; ``disk``/``lmdb``:
  each rank opens the store), and its relation ids travel with the graph.

All ranks must call these functions in the same order (they contain collectives).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from typing import Callable, Dict, Mapping, Optional, Union

import numpy as np

from ..errors import GraphfeedError, PeerFailedError
from .shm import RUN_ID_ENV, SharedArrays, segment_path
from .world import World, is_initialized

__all__ = ["run_id", "share_arrays", "share_dataset", "SharedDataset", "is_file_backed"]

_run_id: Optional[str] = None


# ---------------------------------------------------------------------------- collectives
def collective_device():
    """Where tensors for the default group's collectives must live: this rank's current CUDA
    device under NCCL (it moves only CUDA tensors), the CPU under gloo."""
    import torch
    import torch.distributed as dist

    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _agree_failed(failed: bool) -> bool:
    """All-reduce (MAX) of a failure flag: True on every rank if any rank failed. Every rank
    must reach this call, failed or not, so one rank's error cannot leave the others waiting."""
    import torch
    import torch.distributed as dist

    t = torch.tensor([1 if failed else 0], dtype=torch.int32, device=collective_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(int(t.item()))


def run_id(world: Optional[World] = None) -> str:
    """An id shared by every rank of this run, naming its shared-memory segments.

    ``launch`` sets ``GRAPHFEED_RUN_ID``; under torchrun, rank 0 draws a random id and broadcasts
    it (a collective: all ranks must call this, which ``share_arrays`` does). Cached per process.
    """
    global _run_id
    if _run_id is not None:
        return _run_id
    env = os.environ.get(RUN_ID_ENV)
    if env:
        _run_id = env
        return _run_id
    world = World.from_env() if world is None else world
    if not world.is_distributed or not is_initialized():
        _run_id = f"{os.getpid()}x{secrets.token_hex(4)}"
        return _run_id
    import torch
    import torch.distributed as dist

    n = 16
    if world.rank == 0:
        token = f"t{secrets.token_hex(n // 2 - 1)}x"[:n].encode()
        buf = torch.tensor(list(token), dtype=torch.uint8)
    else:
        buf = torch.zeros(n, dtype=torch.uint8)
    dev = collective_device()
    buf = buf.to(dev)
    dist.broadcast(buf, src=0)
    _run_id = bytes(buf.cpu().tolist()).decode()
    return _run_id


# ---------------------------------------------------------------------------- arrays
def is_file_backed(a) -> bool:
    """True if ``a`` (ndarray or CPU tensor) lies in shared file mappings (a memory-mapped
    dataset file, or a shared segment): already one copy per machine, so it needs no shm copy."""
    from .shm import in_shared_file_mapping

    return in_shared_file_mapping(a)


def _private(arrays: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Load each array into this process's own memory (``np.array`` copy of a memmap); the source
    mapping's pages are then dropped from this process's page tables, so its PSS counts the
    private copy once, not the file pages on top."""
    from .shm import _drop_source_pages

    out = {}
    for k, v in arrays.items():
        out[k] = np.array(v, copy=True, order="C")
        _drop_source_pages(v)
    return out


def share_arrays(
    key: str,
    produce: Union[Mapping[str, np.ndarray], Callable[[], Mapping[str, np.ndarray]]],
    world: Optional[World] = None,
    *,
    private_copy: bool = False,
    pinnable: bool = False,
) -> Mapping[str, np.ndarray]:
    """Named arrays with one copy per machine; a collective (every rank calls it, same ``key``).

    ``produce`` is a mapping, or a callable returning one; a callable is called only on the
    machine's first rank (the others never build the arrays). That rank copies them into the
    segment ``graphfeed-<run id>-g<machine>-<key>``; after a collective the other local ranks map
    it read-only; after a second one the creator unlinks the name, and a third makes sure no rank
    returns before it has (nothing of this call is left in ``/dev/shm`` once it returns). If any
    rank fails on the way, every rank raises (no rank is left waiting) and the segment is removed.

    One process (or one per machine), or ``private_copy=True``: returns private in-memory copies.
    Returned arrays are read-only views of the segment, valid for as long as they are referenced.
    ``pinnable=True`` maps the segment read-write at the OS level in every rank (the numpy arrays
    stay read-only) so CUDA can page-lock it in place (see :mod:`.pinned`).
    """
    world = World.from_env() if world is None else world
    if private_copy or world.local_world_size == 1 or not world.is_distributed:
        arrays = produce() if callable(produce) else produce
        return _private(arrays)
    if not is_initialized():
        raise GraphfeedError(
            f"share_arrays({key!r}): {world.world_size} ranks but no process group; "
            "call graphfeed.distributed.init() first"
        )
    path = segment_path(run_id(world), f"g{world.group_rank}-{key}")
    seg: Optional[SharedArrays] = None
    error: Optional[BaseException] = None
    try:
        if world.is_local_main:
            arrays = produce() if callable(produce) else produce
            seg = SharedArrays.create(path, arrays)
    except Exception as e:  # reported to every rank below, re-raised here
        error = e
    try:
        if _agree_failed(error is not None):
            if error is not None:
                raise error
            raise PeerFailedError(
                f"share_arrays({key!r}): the first rank of machine {world.group_rank} failed "
                "to create the shared segment (see its error)"
            )
        try:
            if not world.is_local_main:
                seg = SharedArrays.attach(path, writable_mapping=pinnable)
        except Exception as e:
            error = e
        if _agree_failed(error is not None):
            if error is not None:
                raise error
            raise PeerFailedError(f"share_arrays({key!r}): a rank failed to attach {path}")
    finally:
        if world.is_local_main and seg is not None:
            seg.unlink()  # every local rank has mapped it (or we are failing): drop the name
    # a third step, so that on every rank the name is gone once this returns
    if _agree_failed(False):  # pragma: no cover - nobody reports failure here
        raise PeerFailedError(f"share_arrays({key!r}): a rank failed")
    return dict(seg)


# ---------------------------------------------------------------------------- dataset
@dataclass
class SharedDataset:
    """What one rank trains on: the graph, the features, and where each lives.

    - ``graph``: a ``CSCGraph`` (file memory map, shared segment, or a private copy).
    - ``features``: a ``FeatureStore`` (``"feat"``, ``"label"``, ...).
    - ``placement``: for each of ``"graph"`` and each feature name (a typed feature's:
      ``"<type>/<name>"``), one of ``"mmap"`` (file mapping, shared by the page cache),
      ``"shm"`` (one shared segment per machine), ``"private"`` (this rank's own copy),
      ``"disk"`` / ``"lmdb"`` (store opened by this rank).
    - typed (``share_dataset(typed=True)``): ``hetero`` the ``HeteroGraph`` over ``graph``,
      ``type_features`` node type -> name -> ``Feature``; else ``None``.
    """

    graph: object
    features: object
    placement: Dict[str, str] = field(default_factory=dict)
    hetero: object = None
    type_features: Optional[dict] = None


def _feature_array(feature):
    """The array behind an in-memory feature (numpy view of its tensor), or None."""
    data = getattr(feature, "data", None)
    if data is None:
        return None
    import torch

    if isinstance(data, torch.Tensor):
        if data.device.type != "cpu":
            return None
        if data.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits, viewed back after
            return data.view(torch.int16).numpy().view(np.uint16)
        return data.numpy()
    return np.asarray(data)


def share_dataset(
    dataset,
    world: Optional[World] = None,
    *,
    features: str = "ram",
    private_copy: bool = False,
    cache_size: int = 0,
    cache_policy: str = "auto",
    feature_names=None,
    pinnable: bool = False,
    typed: bool = False,
) -> SharedDataset:
    """Graph and features for this rank with ONE copy per machine (a collective).

    ``dataset`` is a ``graphfeed.datasets.format.Dataset`` (or anything with ``.graph`` and
    ``.features``, plus ``node_feature(name, backend, cache_size=, cache_policy=)`` for ``"disk"``
    / ``"lmdb"``). ``features`` picks the backend of every node feature except the labels
    (``dataset.target``), which are always held in RAM (shared). See the module docstring for
    what is shared how; ``private_copy=True`` loads a private copy of graph and every feature in
    each rank instead (the comparison point). ``feature_names`` limits which features are
    returned (default: all). ``placement`` in the result says where each one lives.
    ``pinnable=True`` (pass it in CUDA modes that pin host memory): shared segments are mapped
    read-write by every rank so that each rank's in-place ``cudaHostRegister`` of the one shared
    copy succeeds with default flags, instead of falling back to a pinned copy per rank.
    ``typed=True``: also the typed graph and every per-type feature of a typed dataset
    (``dataset.hetero``, ``dataset.type_features``, ``dataset.type_feature``).
    """
    from ..features.base import FeatureStore
    from ..features.memory import InMemoryFeature
    from ..graph.csc import CSCGraph

    from ..features.registry import BACKENDS

    BACKENDS.check(features)
    world = World.from_env() if world is None else world
    sharing = world.is_distributed and world.local_world_size > 1 and not private_copy
    placement: Dict[str, str] = {}
    names = list(dataset.features) if feature_names is None else list(feature_names)
    target = getattr(dataset, "target", None)

    # -- graph: file mappings stay (page cache = one copy); private arrays go to shm
    g = dataset.graph
    hetero = dataset.hetero if typed else None
    garrays = {"indptr": g.indptr, "indices": g.indices}
    if g.weights is not None:
        garrays["weights"] = g.weights
    if hetero is not None:
        garrays["edge_type"] = hetero.edge_type
    mapped = all(is_file_backed(a) for a in garrays.values())
    if private_copy:
        loaded = _private(garrays)
        placement["graph"] = "private"
    elif mapped or not sharing:
        loaded = None
        placement["graph"] = "mmap" if mapped else "private"
    else:
        loaded = share_arrays("graph", garrays, world, pinnable=pinnable)
        placement["graph"] = "shm"
    graph = g
    if loaded is not None:  # a copy of a checked graph
        graph = CSCGraph(loaded["indptr"], loaded["indices"], loaded.get("weights"), trusted=True)
        if hetero is not None:
            from ..graph.hetero import HeteroGraph

            hetero = HeteroGraph(graph, hetero.node_types, np.diff(hetero.node_offsets),
                                 hetero.edge_types, loaded["edge_type"], trusted=True)

    # -- features
    # every feature by key: a node feature's name, a typed one's "<type>/<name>"
    stored, opener = {}, {}
    for name in names:
        stored[name] = dataset.features[name]
        opener[name] = (lambda b, n=name: dataset.node_feature(
            n, b, cache_size=cache_size, cache_policy=cache_policy))
    type_keys = {}
    if hetero is not None:
        for t, fs in dataset.type_features.items():
            for name, f in fs.items():
                key = type_keys[(t, name)] = f"{t}/{name}"
                stored[key] = f
                opener[key] = (lambda b, t=t, n=name: dataset.type_feature(
                    t, n, b, cache_size=cache_size, cache_policy=cache_policy))
    store = FeatureStore()
    ram_names = []
    for name in stored:
        if features == "ram" or private_copy or name == target:
            ram_names.append(name)
            continue
        if not hasattr(dataset, "node_feature"):
            raise GraphfeedError(f"dataset {dataset!r} cannot open features on {features!r}")
        # each rank opens the store: reads go through the page cache (one copy per machine);
        # the row cache in front of it is this rank's own
        store[name] = opener[name](features)
        placement[name] = features
    if ram_names:
        arrays = {}
        for name in ram_names:
            a = _feature_array(stored[name])
            if a is None:
                raise GraphfeedError(
                    f"feature {name!r} ({type(stored[name]).__name__}) has no in-memory "
                    "array to share; use features='disk' or 'lmdb' for it"
                )
            arrays[name] = a
        if sharing:
            loaded = share_arrays("features", arrays, world, pinnable=pinnable)
            kind = "shm"
        elif private_copy:
            loaded = _private(arrays)
            kind = "private"
        else:  # one process: as opened (memory map or loaded), nothing to share with
            loaded = arrays
            kind = "mmap" if all(is_file_backed(a) for a in arrays.values()) else "private"
        for name in ram_names:
            bits = "bfloat16" if str(stored[name].dtype) == "torch.bfloat16" else None
            store[name] = InMemoryFeature(loaded[name], dtype=bits)
            placement[name] = kind
    if hetero is None:
        return SharedDataset(graph=graph, features=store, placement=placement)
    tfeats: dict = {}
    for (t, name), key in type_keys.items():
        tfeats.setdefault(t, {})[name] = store[key]
    nodes = FeatureStore()
    for name in names:
        nodes[name] = store[name]
    return SharedDataset(graph=graph, features=nodes, placement=placement, hetero=hetero,
                         type_features=tfeats)
