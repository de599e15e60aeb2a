"""``--predict`` files, keyed like the sets they score: ``{None: array}`` (an untyped graph, or
the one target type of node classification) is one ``.npy``; arrays keyed by edge type are one
``.npz`` with an array per key ``"<src>.<rel>.<dst>"`` (the suffix of the dataset's split
names). Written atomically (temp file, fsync, rename) and without pickles: read back with
``np.load(path, allow_pickle=False)``."""

from __future__ import annotations

import numpy as np

from ..errors import GraphfeedError

__all__ = ["check_path", "key_name", "save"]


def key_name(key) -> str:
    """The ``.npz`` key of edge type ``key``: ``"<src>.<rel>.<dst>"``."""
    return ".".join(key)


def check_path(path, keys) -> None:
    """Refuse ``path`` for arrays keyed by ``keys`` before anything is trained: arrays per edge
    type go to one ``.npz``."""
    if list(keys) != [None] and not str(path).endswith(".npz"):
        raise GraphfeedError(f"--predict {path}: typed link prediction writes one .npz (an array "
                             f"per relation, keys <src>.<rel>.<dst>); give a path ending in .npz")


def save(path, arrays: dict) -> str:
    """Write ``arrays`` (key -> array) to ``path`` (see the module); errors name the file."""
    from .._io import atomic_write, save_npy

    check_path(path, arrays)
    try:
        if list(arrays) == [None]:
            save_npy(path, np.ascontiguousarray(arrays[None]))
        else:
            named = {key_name(k): np.ascontiguousarray(a) for k, a in arrays.items()}
            # plain numeric arrays: nothing to pickle (older numpy's np.savez has no
            # allow_pickle keyword and would store it as one more array)
            atomic_write(path, lambda f: np.savez(f, **named))
    except OSError as e:
        raise GraphfeedError(f"cannot write predictions to {path}: {e.strerror or e}") from None
    return str(path)
