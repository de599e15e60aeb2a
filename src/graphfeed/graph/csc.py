"""Compressed sparse column (CSC) graph: for each destination node, its in-neighbours."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import numpy as np

from .._io import atomic_dir, load_npy, save_npy
from .._checks import check_int
from ..errors import DatasetError, GraphfeedError

INT32_MAX = np.iinfo(np.int32).max
INT64_MAX = np.iinfo(np.int64).max


def index_dtype(num_nodes: int) -> np.dtype:
    """int32 when every node id fits, else int64."""
    return np.dtype(np.int32) if num_nodes <= INT32_MAX else np.dtype(np.int64)


def _as_int_array(name: str, a) -> np.ndarray:
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported
    if torch is not None and isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.ndim != 1:
        raise GraphfeedError(f"{name} must be 1-D, got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise GraphfeedError(f"{name} must be an integer array, got dtype {a.dtype}")
    return a


def _error(filename, name: str, msg: str) -> GraphfeedError:
    """A :class:`DatasetError` naming the file for an array mapped from disk (a dataset's
    ``.npy``: ``np.memmap.filename``), else a :class:`GraphfeedError`."""
    if filename:
        return DatasetError(f"{filename}: {name}{msg}")
    return GraphfeedError(f"{name}{msg}")


def content_error(indptr: np.ndarray, indices: np.ndarray, num_nodes: int):
    """The O(N + E) scan (one numba pass, no allocation): ``None`` if ``indptr`` is
    non-decreasing and every index is in ``[0, num_nodes)``, else ``(array role, name,
    message)`` with role ``"indptr"`` or ``"indices"``."""
    from ._kernels import check_csc

    code, pos = check_csc(indptr, indices, num_nodes)
    if code == 1:
        return "indptr", "indptr", (
            f" decreases at position {pos} ({int(indptr[pos])} -> {int(indptr[pos + 1])})"
        )
    if code == 2:
        return "indices", f"indices[{pos}]", (
            f" = {int(indices[pos])} is out of range [0, {num_nodes})"
        )
    return None


class CSCGraph:
    """A graph stored column-wise: the in-neighbours of node ``v`` are
    ``indices[indptr[v]:indptr[v + 1]]``.

    - ``indptr``: int64, shape ``(num_nodes + 1,)``, non-decreasing, ``indptr[0] == 0``,
      ``indptr[-1] == num_edges``.
    - ``indices``: int32 when ``num_nodes`` fits in int32, else int64; shape ``(num_edges,)``;
      every entry in ``[0, num_nodes)``.
    - ``weights``: optional real-valued per-edge array aligned with ``indices``.

    Arrays are numpy arrays and may be read-only memory maps (``CSCGraph.load``), so every process
    on a machine shares one copy through the page cache. The sampling kernels read them directly,
    without bounds checks, so the constructor checks everything they rely on (see ``__init__``).
    """

    __slots__ = ("indptr", "indices", "weights", "_in_degrees", "_out_degrees", "_tensors", "_pinned")

    def __init__(self, indptr, indices, weights=None, *, trusted: bool = False):
        """Check and wrap the arrays (no copy when they already have the stored dtypes).

        Shapes, dtypes, ``indptr[0] == 0`` and ``indptr[-1] == len(indices)`` are always checked.
        Unless ``trusted``, the contents are checked too, in O(N + E) (one numba pass over both
        arrays, reading a memory-mapped graph once): ``indptr`` non-decreasing and every index in
        ``[0, num_nodes)``. Bad arrays raise :class:`GraphfeedError` (:class:`DatasetError`
        naming the file for a memory-mapped array) instead of corrupting memory when sampled.
        ``trusted=True`` is for arrays known to be valid (a copy of an already checked graph).
        """
        # np.asarray drops np.memmap (and its filename): note the files first, for the errors
        files = {"indptr": getattr(indptr, "filename", None),
                 "indices": getattr(indices, "filename", None),
                 "weights": getattr(weights, "filename", None)}
        indptr = _as_int_array("indptr", indptr)
        indices = _as_int_array("indices", indices)
        if indptr.shape[0] < 1:
            raise GraphfeedError("indptr must have num_nodes + 1 >= 1 entries")
        num_nodes = indptr.shape[0] - 1
        if indptr.dtype != np.int64:
            if indptr.dtype == np.uint64 and int(indptr.max()) > INT64_MAX:
                raise _error(files["indptr"], "indptr", f" holds {int(indptr.max())}, beyond int64")
            indptr = indptr.astype(np.int64)
        if indices.dtype not in (np.int32, np.int64):
            # a cast could wrap an out-of-range id into range: check before casting
            if indices.dtype.kind == "u" and indices.shape[0] and int(indices.max()) >= num_nodes:
                pos = int(np.argmax(indices))
                raise _error(files["indices"], f"indices[{pos}]",
                             f" = {int(indices[pos])} is out of range [0, {num_nodes})")
            indices = indices.astype(index_dtype(num_nodes))
        if indices.dtype == np.int32 and num_nodes > INT32_MAX + 1:
            raise GraphfeedError(f"{num_nodes} nodes do not fit int32 indices; use int64")
        if int(indptr[0]) != 0 or int(indptr[-1]) != indices.shape[0]:
            raise _error(files["indptr"], "indptr",
                f" must start at 0 and end at the edge count {indices.shape[0]}, "
                f"got indptr[0]={int(indptr[0])}, indptr[-1]={int(indptr[-1])}"
            )
        if weights is not None:
            weights = np.asarray(weights)
            if weights.shape != indices.shape:
                raise _error(files["weights"], "weights",
                    f" must have one entry per edge: shape {weights.shape} != {indices.shape}"
                )
            if weights.dtype.kind not in "fiu":
                raise _error(files["weights"], "weights",
                             f" must be real numbers, got dtype {weights.dtype}")
        if not trusted:
            bad = content_error(indptr, indices, num_nodes)
            if bad is not None:
                raise _error(files[bad[0]], *bad[1:])
        self.indptr = indptr
        self.indices = indices
        self.weights = weights
        self._in_degrees = None
        self._out_degrees = None
        self._tensors = {}
        self._pinned = None

    # ------------------------------------------------------------------ properties
    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    @property
    def in_degrees(self) -> np.ndarray:
        """int64 array of shape ``(num_nodes,)`` (computed once, O(N))."""
        if self._in_degrees is None:
            self._in_degrees = np.diff(self.indptr)
        return self._in_degrees

    @property
    def out_degrees(self) -> np.ndarray:
        """How many columns each node is a source in, shape ``(num_nodes,)``: int32 while the
        edges fit int32, else int64 (computed once, O(E)): how often uniform sampling reaches a
        node, the static cache's score (``CachedFeature(policy="degree")``)."""
        if self._out_degrees is None:
            from .._threads import ChunkPool, run_chunks
            from ._kernels import count_sources

            dt = np.int32 if self.num_edges <= np.iinfo(np.int32).max else np.int64
            out = np.zeros(self.num_nodes, dtype=dt)
            indices = np.asarray(self.indices)
            pool = ChunkPool(max(1, min(8, os.cpu_count() or 1)), "gf-degrees")
            try:  # each thread counts one id range (half the random writes each on 2 cores)
                run_chunks(lambda a, b: count_sources(indices, out[a:b], a, b), self.num_nodes,
                           pool.num_threads, pool.get(), serial_below=1 << 20)
            finally:
                pool.close()
            self._out_degrees = out
        return self._out_degrees

    @property
    def nbytes(self) -> int:
        n = self.indptr.nbytes + self.indices.nbytes
        return n + (self.weights.nbytes if self.weights is not None else 0)

    def __repr__(self) -> str:
        w = ", weighted" if self.weights is not None else ""
        return (
            f"CSCGraph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
            f"indices={self.indices.dtype}{w})"
        )

    # ------------------------------------------------------------------ checks
    def validate(self, *, source: str = "graph") -> None:
        """Full O(N + E) check: indptr non-decreasing, every index in ``[0, num_nodes)``
        (the constructor runs it unless ``trusted``); raises :class:`DatasetError` naming
        ``source``."""
        bad = content_error(self.indptr, self.indices, self.num_nodes)
        if bad is not None:
            raise DatasetError(f"{source}: {bad[1]}{bad[2]}")

    # ------------------------------------------------------------------ building
    @classmethod
    def from_edges(
        cls,
        src,
        dst,
        num_nodes: Optional[int] = None,
        *,
        weights=None,
        add_reverse: bool = False,
        drop_self_loops: bool = False,
        drop_duplicates: bool = False,
    ) -> "CSCGraph":
        """Build from COO edges ``src[i] -> dst[i]`` in O(E + N) (a numba counting sort).

        ``add_reverse`` also adds ``dst -> src`` (making the graph undirected) unless the input
        holds ``dst -> src`` itself (a symmetric input is kept as given, each edge once);
        ``drop_self_loops`` removes ``v -> v``; ``drop_duplicates`` keeps the first of repeated
        ``(src, dst)`` pairs. Neighbours keep their input order within each column. Extra peak
        memory beyond the output arrays is one int64 cursor per node.
        """
        from ._kernels import (accumulate_in_degrees, dedupe_window, drop_present_reverses,
                               empty_marker, scatter_window)
        from .from_pyg import pyg_kind

        if pyg_kind(src) is not None:
            raise GraphfeedError(f"src is a PyG {type(src).__name__}: build its graph with "
                                 f"CSCGraph.from_pyg(data)" if pyg_kind(src) == "data" else
                                 f"src is a PyG HeteroData: build HeteroGraph.from_pyg(data)")
        src = _as_int_array("src", src)
        dst = _as_int_array("dst", dst)
        if src.shape != dst.shape:
            raise GraphfeedError(f"src and dst differ in length: {src.shape[0]} != {dst.shape[0]}")
        if num_nodes is None:
            num_nodes = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
        num_nodes = check_int("num_nodes", num_nodes, 0)
        if src.shape[0]:
            lo = min(int(src.min()), int(dst.min()))
            hi = max(int(src.max()), int(dst.max()))
            if lo < 0 or hi >= num_nodes:
                bad = lo if lo < 0 else hi
                raise GraphfeedError(f"edge endpoint {bad} is out of range [0, {num_nodes})")
        has_w = weights is not None
        if has_w:
            weights = np.asarray(weights)
            if weights.shape != src.shape:
                raise GraphfeedError(
                    f"weights must have one entry per edge: {weights.shape} != {src.shape}"
                )
        # numba specialises per dtype; normalise to keep the number of compiled variants small.
        src = src.astype(np.int64, copy=False)
        dst = dst.astype(np.int64, copy=False)
        indptr = np.zeros(num_nodes + 1, dtype=np.int64)
        bad_edge = accumulate_in_degrees(src, dst, indptr, add_reverse, drop_self_loops)
        assert bad_edge < 0, "endpoints were checked above"
        np.cumsum(indptr, out=indptr)
        num_edges = int(indptr[-1])
        indices = np.empty(num_edges, dtype=index_dtype(num_nodes))
        # the kernels carry k value columns per edge: the weights (k = 1, their dtype) or none
        vals = weights.reshape(1, -1) if has_w else np.zeros((0, src.shape[0]))
        out_w = np.empty((num_edges, 1 if has_w else 0), dtype=vals.dtype)
        scatter_window(src, dst, vals, 0, num_nodes, 0, indptr[:num_nodes].copy(), indices, out_w,
                       add_reverse, drop_self_loops, add_reverse)
        if add_reverse:  # a reverse the input holds already is not added again
            counts = np.zeros(num_nodes, dtype=np.int64)
            num_edges, _ = drop_present_reverses(indptr, indices, out_w, empty_marker(num_nodes), counts)
            indptr = np.zeros(num_nodes + 1, dtype=np.int64)
            np.cumsum(counts, out=indptr[1:])
            num_edges = int(num_edges)
            indices = indices[:num_edges].copy()
            out_w = out_w[:num_edges].copy()
        if drop_duplicates:
            counts = np.zeros(num_nodes, dtype=np.int64)
            num_edges = int(dedupe_window(indptr, indices, out_w, empty_marker(num_nodes), counts))
            indptr = np.zeros(num_nodes + 1, dtype=np.int64)
            np.cumsum(counts, out=indptr[1:])
            indices = indices[:num_edges].copy()
            out_w = out_w[:num_edges].copy()
        return cls(indptr, indices, out_w[:, 0] if has_w else None, trusted=True)  # valid by construction

    # ------------------------------------------------------------------ storage
    @classmethod
    def from_pyg(cls, data) -> "CSCGraph":
        """The graph of a PyG ``Data`` (edges ``edge_index[0] -> edge_index[1]``, in-neighbours
        per destination, ``data.num_nodes`` nodes), O(N + E).
        ``graphfeed.graph.from_pyg.csc_perm(data)`` maps its edge positions to PyG's edge ids."""
        from .from_pyg import pyg_edges

        n, src, dst = pyg_edges(data)
        return cls.from_edges(src, dst, n)

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write ``indptr.npy``, ``indices.npy`` (and ``weights.npy``) into folder ``path``,
        atomically: the folder appears only once every file is complete."""
        path = Path(path)
        with atomic_dir(path, overwrite=overwrite, markers=("indptr.npy",)) as tmp:
            save_npy(tmp / "indptr.npy", self.indptr, fsync=False)
            save_npy(tmp / "indices.npy", self.indices, fsync=False)
            if self.weights is not None:
                save_npy(tmp / "weights.npy", self.weights, fsync=False)
        return path

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        *,
        mmap: bool = True,
        trusted: bool = False,
        validate: Optional[bool] = None,
    ) -> "CSCGraph":
        """Open a folder written by :meth:`save` (or any folder with ``indptr.npy`` and
        ``indices.npy``). With ``mmap=True`` the arrays are read-only memory maps. The contents
        are checked as in the constructor (reading the files once) unless ``trusted``;
        ``validate`` is accepted for compatibility and changes nothing. Errors are
        :class:`DatasetError` naming the folder or file."""
        del validate  # the contents are always checked unless trusted
        path = Path(path)
        indptr = load_npy(path / "indptr.npy", mmap=mmap)
        indices = load_npy(path / "indices.npy", mmap=mmap)
        wpath = path / "weights.npy"
        weights = load_npy(wpath, mmap=mmap) if wpath.exists() else None
        try:
            return cls(indptr, indices, weights, trusted=trusted)
        except DatasetError:
            raise
        except GraphfeedError as e:
            raise DatasetError(f"{path}: {e}") from None

    # ------------------------------------------------------------------ torch views
    def pin_memory(self) -> "CSCGraph":
        """Page-lock ``indptr``/``indices`` (and weights) for GPU access: in place where CUDA
        allows it, else the graph switches to pinned copies. A no-op with one warning without
        CUDA. Returns ``self``."""
        from .._pinning import cuda_available, pin_tensor, torch_view, warn_no_cuda

        if not cuda_available():
            warn_no_cuda()
            return self
        pinned = {}
        for name in ("indptr", "indices", "weights"):
            a = getattr(self, name)
            if a is None:
                continue
            t = pin_tensor(torch_view(np.ascontiguousarray(a)))
            pinned[name] = t
            if t.data_ptr() != torch_view(a).data_ptr():  # a copy: the graph uses it from now on
                setattr(self, name, t.numpy())
        self._pinned = pinned
        self._tensors["cpu"] = (pinned["indptr"], pinned["indices"])
        return self

    def tensors(self, device="cpu"):
        """``(indptr, indices)`` as torch tensors on ``device``. On CPU they share memory with
        the numpy arrays (no copy); other devices get a cached copy."""
        import torch

        from .._pinning import torch_view

        key = str(torch.device(device))
        if key not in self._tensors:
            if torch.device(device).type == "cpu":
                t = (torch_view(self.indptr), torch_view(self.indices))
            else:
                t = (
                    torch_view(self.indptr).to(device),
                    torch_view(self.indices).to(device),
                )
            self._tensors[key] = t
        return self._tensors[key]
