"""One copy per machine of a sampler's derived tables.

``NeighborSampler`` builds, on its first batch, O(E) tables for its sampling method: weighted
sampling's alias records and per-node sums (about 8 B per edge), LABOR ``rotated``'s columns
sorted by base variate (12 B per edge), temporal sampling's columns sorted by time (about 24 B
per edge). Under several ranks that would be one build and one copy per rank.
:func:`share_prepared` makes it one of each per machine: the machine's first rank builds the
tables and copies them into a shared segment (:func:`~.sharing.share_arrays`), the other ranks
map that segment, and every rank samples from the mapping.

It is a collective: call it on every rank, in the same order relative to the other collectives,
right after building the sampler and before any loader thread samples (the training set-up does;
:func:`graphfeed.training.train` under ``--nproc``). A sampler used by one process needs nothing:
its first batch builds private tables as before.

What goes into the segment: every table array the build returns. Entries that are the sampler's
own inputs (the graph's ``indptr`` / ``indices``, the method's ``weights`` and times) are not
copied: each rank points them at its own inputs, already one copy per machine when the dataset
was shared (:func:`~.sharing.share_dataset`). Scalars travel as 0-d arrays. A small manifest
(format version, method, seed, graph size, what each entry is) travels with the tables; a rank
whose own sampler does not match it raises, and so do all the others.
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import Dict, Optional

import numpy as np

from .._memory import release_free_memory
from ..errors import GraphfeedError
from .sharing import _agree_failed, share_arrays
from .world import World

__all__ = ["share_prepared", "TABLES_FORMAT"]

#: Version of the shared tables' layout (the manifest below); a reader refuses another one.
TABLES_FORMAT = 1

_MANIFEST = "__manifest__"
_counter = itertools.count()
_counter_lock = threading.Lock()


def share_prepared(sampler, world: Optional[World] = None, *, private_copy: bool = False) -> str:
    """Give ``sampler`` its method's tables with one copy per machine (a collective).

    ``sampler``: any ``Sampler``; only a ``NeighborSampler`` whose method has tables (weighted,
    LABOR with rotated variates, temporal) has anything to share, and every other one returns
    ``"none"`` at once, on every rank alike (no collective). Otherwise the machine's first rank
    builds the tables (or takes the ones it has), the other local ranks map its segment, and
    the result is ``"shm"``. One process, one rank per machine, or ``private_copy=True``: the
    tables are built now in this process and the result is ``"private"``.

    If any rank fails (building, copying, mapping, or a sampler that does not match the first
    rank's), every rank raises and none is left waiting; the sampler then keeps what it had
    (it builds private tables lazily if it had none). Copies made with ``with_fanouts`` after
    this call hold the same tables. The segment's name is removed before this returns; the
    memory goes with the last rank's mapping.
    """
    from ..sampling.neighbor import NeighborSampler

    if not isinstance(sampler, NeighborSampler) or not sampler.needs_tables:
        return "none"
    world = World.from_env() if world is None else world
    if private_copy or world.local_world_size == 1 or not world.is_distributed:
        sampler.prepare()
        return "private"
    with _counter_lock:
        key = f"tables{next(_counter)}"  # every rank calls in the same order: the same key
    expect = _fingerprint(sampler)

    def share(build, inputs):
        shared = share_arrays(key, lambda: _encode(build(), inputs, expect), world)
        error: Optional[BaseException] = None
        tables = None
        try:
            tables = _decode(shared, inputs, expect)
        except Exception as e:  # reported to every rank below, re-raised here
            error = e
        if _agree_failed(error is not None):
            if error is not None:
                raise error
            raise GraphfeedError(f"share_prepared: another rank could not use the shared tables "
                                 f"of {sampler!r} (see its error)")
        return tables

    try:
        sampler.prepare(share)
    finally:
        # the first rank's private build is freed once copied; glibc would keep it resident
        release_free_memory()
    return "shm"


def _fingerprint(sampler) -> dict:
    """What must agree between the rank that built the tables and a rank that maps them."""
    return {"format": TABLES_FORMAT, "method": repr(sampler.method), "seed": int(sampler.seed),
            "num_nodes": int(sampler.graph.num_nodes), "num_edges": int(sampler.graph.num_edges)}


def _encode(tables: dict, inputs: dict, fingerprint: dict) -> Dict[str, np.ndarray]:
    """The arrays to put in the segment: the tables (inputs left out, by reference), scalars as
    0-d arrays, and the manifest as bytes."""
    entries: Dict[str, list] = {}
    out: Dict[str, np.ndarray] = {}
    for name, value in tables.items():
        if name == _MANIFEST:
            raise GraphfeedError(f"share_prepared: a table may not be named {_MANIFEST!r}")
        ref = next((k for k, a in inputs.items() if value is a), None)
        if ref is not None:
            entries[name] = ["input", ref]
            continue
        if isinstance(value, np.ndarray):
            entries[name] = ["array"]
            out[name] = value
        elif isinstance(value, (np.generic, int, float, bool)):
            entries[name] = ["scalar"]
            out[name] = np.asarray(value)
        else:
            raise GraphfeedError(f"share_prepared: table {name!r} is a {type(value).__name__}, "
                                 "not an array or a number; it cannot be shared")
    manifest = json.dumps({**fingerprint, "entries": entries}, sort_keys=True).encode()
    out[_MANIFEST] = np.frombuffer(manifest, dtype=np.uint8)
    return out


def _decode(shared, inputs: dict, fingerprint: dict) -> dict:
    """The tables back from the segment's arrays; checks the manifest against this rank's own
    sampler."""
    if _MANIFEST not in shared:
        raise GraphfeedError("share_prepared: the shared tables have no manifest")
    manifest = json.loads(bytes(shared[_MANIFEST]).decode())
    got = {k: manifest.get(k) for k in fingerprint}
    if got != fingerprint:
        diff = ", ".join(f"{k}: {got[k]!r} != {v!r}" for k, v in fingerprint.items() if got[k] != v)
        raise GraphfeedError(f"share_prepared: the first rank's tables are for another sampler "
                             f"({diff}); every rank must build the same sampler")
    tables = {}
    for name, entry in manifest["entries"].items():
        if entry[0] == "input":
            if entry[1] not in inputs:
                raise GraphfeedError(f"share_prepared: table {name!r} refers to input "
                                     f"{entry[1]!r}, which this rank's sampler lacks")
            tables[name] = inputs[entry[1]]
        elif entry[0] == "scalar":
            tables[name] = shared[name][()]
        else:
            tables[name] = shared[name]
    return tables
