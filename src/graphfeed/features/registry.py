"""Open a ``.npy`` feature with a chosen backend: ``open_feature(path, "disk", cache_size="2GB")``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from .._io import file_lock
from .._units import parse_size
from ..errors import DatasetError, GraphfeedError
from .base import Feature

from .._registry import Registry

BACKENDS = Registry("feature backend")  # TEMPORARY on main: the features branch fills the targets
BACKENDS.add("ram", "graphfeed.features.memory:InMemoryFeature")
BACKENDS.add("disk", "graphfeed.features.disk:DiskFeature")
BACKENDS.add("lmdb", "graphfeed.features.lmdb_store:LMDBFeature")

__all__ = ["BACKENDS", "open_feature", "parse_size", "lmdb_path_for"]


def lmdb_path_for(npy_path: str | os.PathLike) -> Path:
    """Where the LMDB copy of ``<dir>/<name>.npy`` lives: ``<dir>/<name>.lmdb/``."""
    p = Path(npy_path)
    return p.with_name(p.stem + ".lmdb")


#: beside the LMDB files: which .npy (size, mtime) the store was built from
_SOURCE_FILE = "graphfeed-source.json"


def _fingerprint(npy_path: Path) -> dict:
    st = npy_path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _lmdb_matches(store, npy_path: Path, store_path: Path) -> bool:
    """Same shape and dtype, and (for stores built here) built from this very file version."""
    import json

    from .disk import read_npy_header

    dtype, shape, _, _ = read_npy_header(npy_path)
    if store.shape != shape or store._np_dtype != dtype:
        return False
    side = store_path / _SOURCE_FILE
    if not side.exists():
        return True  # a store the user built: nothing to compare against
    try:
        return json.loads(side.read_text()) == _fingerprint(npy_path)
    except (OSError, ValueError):
        return False


def _record_source(store_path: Path, npy_path: Path) -> None:
    import json

    tmp = store_path / (_SOURCE_FILE + ".tmp")
    tmp.write_text(json.dumps(_fingerprint(npy_path)))
    os.replace(tmp, store_path / _SOURCE_FILE)


def open_feature(
    npy_path: str | os.PathLike,
    backend: str = "ram",
    *,
    cache_size=0,
    cache_policy: str = "sieve",
    lmdb_path: Optional[str | os.PathLike] = None,
    **kw,
) -> Feature:
    """A ``Feature`` over the rows of ``npy_path``.

    - ``"ram"``: loaded into memory (``InMemoryFeature``; ``mmap=True`` in ``kw`` shares a read-only
      map instead).
    - ``"disk"``: ``DiskFeature`` (``kw``: ``num_threads``, ``direct_io``, ``sort_ids``).
    - ``"lmdb"``: ``LMDBFeature`` at ``lmdb_path`` (default ``<name>.lmdb`` beside the file), built
      atomically from the ``.npy`` on first use; a store whose dtype or shape does not match the
      ``.npy`` is rebuilt (``kw``: ``rows_per_chunk``).

    ``cache_size`` (bytes, or a string such as ``"512MB"``/``"2GiB"``) > 0 wraps the store in a
    ``CachedFeature`` with ``cache_policy`` (ignored for ``"ram"``, which needs no cache).
    """
    path = Path(npy_path)
    name = str(backend).lower()
    if name not in BACKENDS:
        raise GraphfeedError(f"unknown feature backend {backend!r}; valid backends: {', '.join(BACKENDS.names())}")
    cache_bytes = parse_size(cache_size)
    if name == "ram":
        from .._io import load_npy
        from .memory import InMemoryFeature

        mmap = bool(kw.pop("mmap", False))
        _no_extra(kw, name)
        return InMemoryFeature(load_npy(path, mmap=mmap))
    if name == "disk":
        from .disk import DiskFeature

        allowed = {"num_threads", "direct_io", "sort_ids", "max_gap", "max_read"}
        _no_extra({k: v for k, v in kw.items() if k not in allowed}, name)
        feature: Feature = DiskFeature(path, **kw)
    else:
        from .lmdb_store import open_or_build

        rpc = kw.pop("rows_per_chunk", None)
        num_threads = kw.pop("num_threads", 2)
        _no_extra(kw, name)
        store_path = Path(lmdb_path) if lmdb_path is not None else lmdb_path_for(path)
        # several ranks may open the same store first: one builds, the others wait and reuse it;
        # a read-only dataset folder opens an existing store without a lock file
        feature = open_or_build(store_path, path, rows_per_chunk=rpc, num_threads=num_threads,
                                is_current=lambda s: _lmdb_matches(s, path, store_path),
                                on_built=lambda: _record_source(store_path, path))
    if cache_bytes > 0:
        from .cache import CachedFeature

        feature = CachedFeature(feature, cache_bytes, policy=cache_policy)
    return feature


def _no_extra(kw: dict, backend: str) -> None:
    if kw:
        raise GraphfeedError(f"unexpected options for the {backend!r} backend: {sorted(kw)}")
