"""One copy per machine of a sampler's derived tables.

``NeighborSampler`` builds, on its first batch, O(E) tables for its sampling method: weighted
sampling's alias records and per-node sums (about 8 B per edge), LABOR ``rotated``'s columns
sorted by base variate (12 B per edge), temporal sampling's columns sorted by time (20 B per
edge with int32 node ids). Under several ranks that would be one build and one copy per rank.
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
Scalars come back with their type (``np.uint64`` as ``np.uint64``, a Python ``bool`` as ``bool``).

:class:`TableCache` (``share_prepared(..., cache_dir=)``, ``graphfeed train --table-cache``)
keeps built tables in a folder between runs, keyed by a hash of everything they derive from.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Callable, Dict, Optional

import numpy as np

from .._io import load_npy, writing_to
from .._memory import release_free_memory
from ..errors import GraphfeedError, GraphfeedWarning, PeerFailedError
from .sharing import _agree_failed, share_arrays
from .world import World, is_initialized

__all__ = ["share_prepared", "TableCache", "TABLES_FORMAT"]

#: Version of the shared tables' layout (the manifest below); a reader refuses another one.
TABLES_FORMAT = 1

_MANIFEST = "__manifest__"
#: the option that names a table cache folder, in its errors
_FLAG = "--table-cache"
_counter = itertools.count()
_counter_lock = threading.Lock()


def share_prepared(sampler, world: Optional[World] = None, *, private_copy: bool = False,
                   cache_dir=None) -> str:
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

    ``cache_dir``: a folder of built tables kept between runs (see :class:`TableCache`); the
    result is then ``"cached"``. The machine's first rank (or the one process) maps the tables
    stored there under the key of this sampler's inputs, method, seed and format, or builds and
    stores them first; the other local ranks map the same files (the page cache holds them
    once per machine). Ignored with ``private_copy=True``.
    """
    from ..sampling.base import Sampler

    if not isinstance(sampler, Sampler) or not sampler.needs_tables:
        return "none"
    world = World.from_env() if world is None else world
    if cache_dir is not None and not private_copy:
        sampler.prepare(TableCache(cache_dir).sharer(sampler, world))
        return "cached"
    if private_copy or world.local_world_size == 1 or not world.is_distributed:
        sampler.prepare()
        return "private"
    with _counter_lock:
        key = f"tables{next(_counter)}"  # every rank calls in the same order: the same key
    expect = _fingerprint(sampler)

    def share(build, inputs):
        shared = share_arrays(key, lambda: _encode(build(), inputs, expect), world)
        return _on_every_rank(lambda: _decode(shared, inputs, expect), True,
                              f"share_prepared: another rank could not use the shared tables "
                              f"of {sampler!r} (see its error)")

    try:
        sampler.prepare(share)
    finally:
        # the first rank's private build is freed once copied; glibc would keep it resident
        release_free_memory()
    return "shm"


def _on_every_rank(step, collective: bool, others_failed: str):
    """``step()``'s result; with ``collective``, every rank learns whether any rank's step
    raised, and then every rank raises (its own error, or ``others_failed``)."""
    error: Optional[BaseException] = None
    out = None
    try:
        out = step()
    except Exception as e:  # reported to every rank below, re-raised here
        error = e
    if collective and _agree_failed(error is not None):
        if error is None:
            raise PeerFailedError(others_failed)
    if error is not None:
        raise error
    return out


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
            # a Python number comes back as the same Python type, a numpy scalar as numpy's
            entries[name] = ["scalar", "numpy" if isinstance(value, np.generic) else "python"]
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
            a = shared[name]
            tables[name] = a[()] if entry[1:] == ["numpy"] else a.item()
        else:
            tables[name] = shared[name]
    return tables


# ---------------------------------------------------------------------------- persistent cache
_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_HASH_CHUNK = 64 << 20


def _cache_key(fingerprint: dict, inputs: dict) -> str:
    """A hash of everything the tables derive from: the fingerprint (format version, method,
    seed, graph size) and the bytes, dtype and shape of every input array (O(E), read once)."""
    h = hashlib.blake2b(digest_size=20)
    h.update(json.dumps(fingerprint, sort_keys=True).encode())
    for name in sorted(inputs):
        a = np.ascontiguousarray(inputs[name])
        h.update(f"|{name}:{a.dtype.str}:{a.shape}|".encode())
        flat = a.reshape(-1).view(np.uint8)
        for i in range(0, flat.shape[0], _HASH_CHUNK):
            h.update(flat[i: i + _HASH_CHUNK])
    return h.hexdigest()


def _manifest_entries(manifest: np.ndarray) -> dict:
    """The ``entries`` of a stored manifest (a uint8 array of JSON), checked for shape:
    ``{name: ["array"] | ["scalar", "numpy" | "python"] | ["input", input name]}``, every name
    a plain file name; ``GraphfeedError`` otherwise."""
    try:
        if manifest.dtype != np.uint8 or manifest.ndim != 1:
            raise ValueError(f"a {manifest.dtype} array of shape {manifest.shape}")
        entries = json.loads(manifest.tobytes().decode())["entries"]
        ok = isinstance(entries, dict) and all(
            isinstance(n, str) and _NAME.match(n) and isinstance(e, list)
            and (e == ["array"] or (len(e) == 2 and e[0] == "scalar" and e[1] in ("numpy", "python"))
                 or (len(e) == 2 and e[0] == "input" and isinstance(e[1], str)))
            for n, e in entries.items())
        if not ok:
            raise ValueError("unexpected entries")
    except (ValueError, KeyError, TypeError) as e:
        raise GraphfeedError(f"{_MANIFEST}.npy: not a manifest of tables ({e})") from None
    return entries


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class TableCache:
    """Built sampler tables kept in ``folder`` between runs, so that a second run maps them
    instead of building them again.

    One sub-folder ``tables-<key>`` per set of tables, holding one ``.npy`` file per array and
    the manifest. ``key`` hashes the format version (:data:`TABLES_FORMAT`), the method, the
    seed, the graph's size and the full contents of every array the tables derive from (the
    graph's ``indptr`` / ``indices``, the weights or times): tables of another graph, method,
    seed or format are under another key and are never read. A sub-folder is written under a
    temporary name (``.tmp-...``, fsynced) and renamed into place in one step, so a reader sees
    a complete one or none; a crash leaves at most a ``.tmp-`` folder, which nothing reads (it
    can be deleted). Cached tables are mapped read-only from their files (shared between
    processes by the page cache). The key says what the tables were built from, not that the
    files still hold them: the sampling kernels index with the tables unchecked, so every load
    checks them (:meth:`NeighborSampler.check_tables <graphfeed.sampling.neighbor.NeighborSampler.check_tables>`:
    names, shapes, dtypes, ranges and order, O(E), no O(E) allocation), and :meth:`sharer`
    treats a damaged folder as a miss (a ``GraphfeedWarning`` names it and the problem; it is
    removed and built again). Nothing is ever evicted: delete the folder to reclaim space.
    A folder that cannot be written (a read-only mount, no permission, a full disk) is a
    ``GraphfeedError`` naming it (``--table-cache DIR: cannot write there (...)``) when a store
    or a discard needs to write; tables already stored there are read as usual.
    """

    def __init__(self, folder):
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise GraphfeedError(f"table cache {self.folder}: exists and is not a folder")

    def path(self, key: str) -> Path:
        return self.folder / f"tables-{key}"

    def load(self, key: str, inputs: dict, fingerprint: dict,
             check: Optional[Callable[[dict], None]] = None) -> Optional[dict]:
        """The tables stored under ``key`` (memory-mapped), or ``None`` if there are none.

        ``check(tables)`` raises ``GraphfeedError`` unless the tables are what the sampler
        expects (``NeighborSampler.check_tables``: shapes, dtypes, index ranges, order, O(E));
        the kernels index with them unchecked, and files can be edited or damaged after they
        were stored. A folder that cannot be read, is for another sampler or fails ``check``
        raises ``GraphfeedError`` naming it (:meth:`sharer` then rebuilds it)."""
        where = self.path(key)
        if not where.is_dir():
            return None
        try:
            manifest = load_npy(where / f"{_MANIFEST}.npy", mmap=False)
            names = _manifest_entries(manifest)
            arrays = {_MANIFEST: manifest}
            for name, entry in names.items():
                if entry[0] != "input":
                    arrays[name] = load_npy(where / f"{name}.npy").view(np.ndarray)
                    if entry[0] == "scalar" and arrays[name].shape != ():
                        raise GraphfeedError(f"{name}.npy: a scalar of shape {arrays[name].shape}")
            tables = _decode(arrays, inputs, {**fingerprint, "key": key})
            if check is not None:
                check(tables)
        except (OSError, GraphfeedError) as e:
            raise GraphfeedError(f"table cache {where}: damaged ({e})") from None
        return tables

    def discard(self, key: str) -> None:
        """Remove the folder under ``key``: renamed out of the way in one step (a process that
        maps its files keeps them), then deleted."""
        final = self.path(key)
        with writing_to(self.folder, _FLAG):
            aside = Path(tempfile.mkdtemp(prefix=f".bad-{final.name}-", dir=self.folder))
            try:
                os.rename(final, aside / final.name)
            except FileNotFoundError:
                pass  # another process discarded it first
            finally:
                shutil.rmtree(aside, ignore_errors=True)

    def store(self, key: str, tables: dict, inputs: dict, fingerprint: dict) -> Path:
        """Write ``tables`` under ``key`` atomically; a concurrent writer that finishes first
        wins (its copy is kept, this one dropped)."""
        arrays = _encode(tables, inputs, {**fingerprint, "key": key})
        for name in arrays:
            if not _NAME.match(name):
                raise GraphfeedError(f"table cache: table name {name!r} is not a file name")
        with writing_to(self.folder, _FLAG):
            return self._store(key, arrays)

    def _store(self, key: str, arrays: dict) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.path(key)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=self.folder))
        try:
            for name, a in arrays.items():
                with open(tmp / f"{name}.npy", "wb") as f:
                    np.save(f, a, allow_pickle=False)
                    f.flush()
                    os.fsync(f.fileno())
            _fsync(tmp)
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another process stored it first
            _fsync(self.folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final

    def sharer(self, sampler, world: World):
        """The ``share`` callable of ``sampler.prepare(share=)``: the machine's first rank (or
        the one process) loads the tables, building and storing them on a miss (a folder that
        fails its checks is a miss too, named in a ``GraphfeedWarning`` and removed first); then
        every other local rank loads the same files, and checks them. Every rank hashes the inputs itself (O(E) reads
        of pages the machine holds once), so a rank whose inputs differ from the first rank's
        finds no tables. Any rank failing makes every rank raise."""
        fingerprint = _fingerprint(sampler)
        collective = world.is_distributed and is_initialized()
        first = world.is_local_main or not collective

        def share(build, inputs):
            key = _cache_key(fingerprint, inputs)

            def ensure():
                try:
                    found = self.load(key, inputs, fingerprint, check=sampler.check_tables)
                except GraphfeedError as e:
                    warnings.warn(f"{e}; treated as a miss: removed, and the tables are "
                                  "built and stored again", GraphfeedWarning)
                    self.discard(key)
                    found = None
                if found is None:
                    self.store(key, build(), inputs, fingerprint)
                    release_free_memory()  # the private build, now on disk
                return found

            # the other ranks (only under a collective) wait for the first rank's store
            found = _on_every_rank(ensure if first else (lambda: None), collective,
                                   f"table cache {self.folder}: the first rank failed (see its "
                                   "error)")

            def load():
                if found is not None:  # loaded and checked above
                    return found
                tables = self.load(key, inputs, fingerprint, check=sampler.check_tables)
                if tables is None:
                    raise GraphfeedError(
                        f"table cache {self.path(key)}: not found after the first rank stored "
                        "it; give every rank of a machine the same folder (or inputs that differ "
                        "from the first rank's: the key hashes them)")
                return tables

            return _on_every_rank(load, collective,
                                  f"table cache {self.folder}: a rank could not map the tables "
                                  "(see its error)")

        return share
