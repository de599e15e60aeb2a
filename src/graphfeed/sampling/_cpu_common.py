"""Plumbing shared by the CPU (numba) samplers: the homogeneous ``NeighborSampler``, the
heterogeneous ``HeteroNeighborSampler`` and the partitioned ``KeyedSampler``: read-only array
views for the kernels, seed arrays, and the pool of per-batch node maps."""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import torch

from ..errors import GraphfeedError

__all__ = ["MapPool", "choose_node_map", "readonly_view", "seeds_to_numpy"]


def readonly_view(a: np.ndarray) -> np.ndarray:
    """A plain, C-contiguous, read-only ndarray view of ``a`` (memmaps included), so numba
    compiles one variant per dtype whether the graph was built in RAM or memory-mapped."""
    a = np.ascontiguousarray(np.asarray(a))
    v = a.view(np.ndarray)
    v.flags.writeable = False
    return v


def seeds_to_numpy(seeds, num_nodes: int) -> np.ndarray:
    """Seeds as a 1-D int64 numpy array (no copy when already one). Range and duplicate checks
    happen in the sampling kernel."""
    if isinstance(seeds, torch.Tensor):
        seeds = seeds.detach()
        if seeds.device.type != "cpu":
            seeds = seeds.cpu()
        seeds = seeds.numpy()
    a = np.asarray(seeds)
    if a.ndim != 1:
        raise GraphfeedError(f"seeds must be a 1-D array of node ids, got shape {a.shape}")
    if a.dtype.kind not in "iu":
        if a.size == 0:
            a = a.astype(np.int64)
        else:
            raise GraphfeedError(f"seeds must be integer node ids, got dtype {a.dtype}")
    if a.dtype.kind == "u" and a.size and int(a.max()) >= num_nodes:
        bad = int(a.max())
        raise GraphfeedError(f"seed id {bad} is out of range [0, {num_nodes})")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if not a.flags.writeable:  # e.g. a slice of a memory-mapped id file: keep one kernel variant
        a = a.copy()
    return a


NODE_MAPS = ("auto", "dense", "hash")
#: ``node_map="auto"`` keeps the dense map (4 bytes per node, per batch in flight) up to this
#: many bytes and uses the batch-sized hash map above it (docs/benchmarks.md, issue 30 item 5).
DENSE_MAP_MAX_BYTES = 128 << 20


def choose_node_map(num_nodes: int, node_map: str = "auto") -> str:
    """``"dense"`` or ``"hash"``: the structure a sampler over ``num_nodes`` nodes relabels
    with. ``"auto"``: dense while its ``num_nodes`` int32 entries take at most
    ``DENSE_MAP_MAX_BYTES``, else hash."""
    if node_map not in NODE_MAPS:
        raise GraphfeedError(f"node_map must be one of {', '.join(map(repr, NODE_MAPS))}; "
                             f"got {node_map!r}")
    if node_map != "auto":
        return node_map
    return "dense" if 4 * int(num_nodes) <= DENSE_MAP_MAX_BYTES else "hash"


class _Box(list):
    """A leased map (:meth:`MapPool.lease`): ``[map]`` and whether it is clean."""

    clean = True


class MapPool:
    """Per-batch ``node -> local id`` maps; one map per batch in flight, so concurrent ``sample``
    calls never share one. A map is clean whenever it is in the pool.

    ``kind="dense"``: int32 arrays of ``num_nodes`` entries (``-1`` = absent); a batch resets
    only the entries it touched. ``kind="hash"``: the batch-sized hash tables of
    ``_kernels.relabel_layer_hash`` (int64, ``2 * capacity`` entries, nothing of size
    ``num_nodes``); they start at ``HASH_MIN_CAP`` slots and a batch that grows one hands the
    grown table back (cleared by :meth:`clear_hash`).
    """

    def __init__(self, num_nodes: int, kind: str = "dense"):
        if kind not in ("dense", "hash"):
            raise GraphfeedError(f"MapPool kind must be 'dense' or 'hash', got {kind!r}")
        self._num_nodes = num_nodes
        self.kind = kind
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def acquire(self) -> np.ndarray:
        with self._lock:
            if self._free:
                return self._free.pop()
        if self.kind == "hash":
            from ._kernels import HASH_MIN_CAP

            return np.full(2 * HASH_MIN_CAP, -1, dtype=np.int64)
        return np.full(self._num_nodes, -1, dtype=np.int32)

    def release(self, m: np.ndarray) -> None:
        with self._lock:
            self._free.append(m)

    @contextlib.contextmanager
    def lease(self):
        """A batch's map as ``box`` (``box[0]``; a list, as a grown hash table replaces it),
        back in the pool when the batch ends if it is clean: the batch sets ``box.clean =
        False`` once it has written into the map and :meth:`reset` cleans it; a map an
        exception leaves dirty is dropped, not reused."""
        box = _Box([self.acquire()])
        try:
            yield box
        finally:
            if box.clean:
                self.release(box[0])

    @staticmethod
    def clear_hash(table: np.ndarray, used: int) -> np.ndarray:
        """A clean hash table to pool after a batch whose table held ``used`` keys: ``table``
        cleared, or, when it is more than 4x the capacity ``used`` keys need (grown by an
        unusually large batch), a new one of that capacity, so a pooled table stays sized by
        recent batches."""
        from ._kernels import hash_capacity

        need = int(hash_capacity(used))
        if table.shape[0] // 2 > 4 * need:
            return np.full(2 * need, -1, dtype=np.int64)
        table.fill(-1)
        return table

    # the three steps of a batch over its map ``box[0]`` (a list: a hash table that grows is
    # replaced in it), the same for both kinds
    def insert_seeds(self, box: list, seeds: np.ndarray):
        """Map ``seeds[i] -> i``: ``(code, pos)`` as ``_kernels.insert_seeds`` (0 ok, 1 out of
        range, 2 repeated, at position ``pos``; the map is left clean on an error)."""
        from . import _kernels as K

        if self.kind == "hash":
            code, pos, box[0] = K.insert_seeds_hash(seeds, box[0], self._num_nodes)
            return code, pos
        return K.insert_seeds(seeds, box[0], self._num_nodes)

    def relabel(self, box: list, edge_index: np.ndarray, src: np.ndarray, n_dst: int) -> int:
        """Global -> local ids of ``edge_index[0]``, new nodes appended to ``src``; the new
        ``n_src`` (``_kernels.relabel_layer`` / ``relabel_layer_hash``)."""
        from . import _kernels as K

        if self.kind == "hash":
            n_src, box[0] = K.relabel_layer_hash(edge_index[0], box[0], src, n_dst)
            return n_src
        return K.relabel_layer(edge_index[0], box[0], src, n_dst)

    def reset(self, box: list, nodes: np.ndarray) -> None:
        """Clean ``box[0]`` after a batch whose nodes (every one it mapped) are ``nodes``."""
        from . import _kernels as K

        if self.kind == "hash":
            box[0] = self.clear_hash(box[0], int(nodes.shape[0]))
        else:
            K.reset_map(box[0], nodes)
        box.clean = True
