"""Streamed, bounded-memory building blocks of ``graphfeed prepare``.

- :func:`build_csc_streaming`: a two-pass CSC build from re-iterable COO edge chunks. Pass 1
  counts in-degrees (one int64 per node); pass 2 scatters each edge's source into a memory-mapped
  indices file. Memory is O(num_nodes) plus one chunk plus the mapped *window* of the indices
  file: when the indices exceed ``memory_budget`` bytes, pass 2 runs once per window of
  destination nodes (re-reading the edges each time), so a graph larger than RAM can be built.
  Duplicates are removed per column inside each window (a numba kernel), then the windows are
  compacted into the final file.
- :func:`write_feature`: streams a node-feature table (``.npy`` or text) into the dataset.
- :class:`Progress`: a small stderr progress bar.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from .._io import save_npy
from ..errors import DatasetError

INT32_MAX = int(np.iinfo(np.int32).max)
DEFAULT_MEMORY_BUDGET = 2 * 1024**3
_TEST_SLEEP_ENV = "GRAPHFEED_TEST_PREPARE_SLEEP"  # test hook: seconds to sleep per edge chunk


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def parse_bytes(text) -> int:
    """``"2GB"``, ``"512MiB"``, ``"1e9"``, ``123`` -> bytes (binary units for K/M/G/T)."""
    if isinstance(text, (int, np.integer)):
        return int(text)
    s = str(text).strip().upper().replace(" ", "")
    mult = 1
    for suffixes, m in ((("TIB", "TB", "T"), 1024**4), (("GIB", "GB", "G"), 1024**3),
                        (("MIB", "MB", "M"), 1024**2), (("KIB", "KB", "K"), 1024), (("B",), 1)):
        for suf in suffixes:
            if s.endswith(suf):
                s, mult = s[: -len(suf)], m
                break
        else:
            continue
        break
    try:
        v = float(s) * mult
    except ValueError:
        raise DatasetError(f"cannot parse a size from {text!r} (try 2GB, 512MiB, 1e9)") from None
    if v < 0:
        raise DatasetError(f"size must be >= 0, got {text!r}")
    return int(v)


class Progress:
    """``label  42% 1.2/2.9 GiB  35.1 MiB/s`` on stderr, redrawn at most 5 times a second.
    Disabled (silent) when ``enabled`` is False; by default only when stderr is a terminal."""

    def __init__(self, enabled: Optional[bool] = None, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else bool(enabled)
        self._label = ""
        self._total = 0
        self._t0 = time.perf_counter()
        self._last = 0.0

    def start(self, label: str, total: int) -> None:
        self._label, self._total = label, int(total)
        self._t0 = time.perf_counter()
        self._last = 0.0
        self.update(0)

    def update(self, done: int, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.2:
            return
        self._last = now
        rate = done / max(now - self._t0, 1e-9)
        pct = f"{100.0 * done / self._total:5.1f}%" if self._total else "     "
        self.stream.write(
            f"\r{self._label:<28} {pct} {format_bytes(done)}/{format_bytes(self._total)}"
            f"  {format_bytes(rate)}/s   "
        )
        self.stream.flush()

    def done(self, done: Optional[int] = None) -> None:
        if self.enabled:
            self.update(self._total if done is None else done, force=True)
            self.stream.write("\n")
            self.stream.flush()

    def note(self, text: str) -> None:
        if self.enabled:
            self.stream.write(text + "\n")
            self.stream.flush()


@dataclass
class CSCBuildResult:
    num_nodes: int
    num_edges: int
    index_dtype: np.dtype
    windows: int
    input_edges: int


def _test_sleep() -> float:
    v = os.environ.get(_TEST_SLEEP_ENV)
    return float(v) if v else 0.0


def build_csc_streaming(
    edges,
    out_dir: Path,
    *,
    num_nodes: Optional[int] = None,
    undirected: bool = False,
    drop_self_loops: bool = False,
    dedupe: bool = False,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    progress: Optional[Progress] = None,
) -> CSCBuildResult:
    """Write ``indptr.npy`` and ``indices.npy`` into ``out_dir`` from ``edges`` (re-iterable,
    yielding ``(src, dst)`` int64 chunks; ``edges.total_bytes`` / ``bytes_done`` for progress).

    Edges ``src -> dst`` put ``src`` into column ``dst``; ``undirected`` also adds ``dst -> src``
    (a self loop once); ``drop_self_loops`` removes ``v -> v``; ``dedupe`` keeps the first of
    repeated ``(src, dst)`` pairs. Neighbours keep their input order within a column. With
    ``num_nodes=None`` it is ``max id + 1``. An id outside ``[0, num_nodes)`` is a
    ``DatasetError`` naming the source and the id.
    """
    from ._kernels import accumulate_in_degrees, dedupe_window, empty_marker, scatter_window

    progress = progress or Progress(False)
    out_dir = Path(out_dir)
    src_name = str(getattr(edges, "path", None) or "edges")
    fixed = num_nodes is not None
    cap = int(num_nodes) if fixed else 1024
    counts = np.zeros(cap + 1, dtype=np.int64)
    input_edges = 0
    max_seen = -1

    # pass 1: in-degrees
    progress.start("pass 1/2: counting degrees", getattr(edges, "total_bytes", 0))
    for s, d in edges:
        if s.shape[0] == 0:
            continue
        input_edges += s.shape[0]
        lo = min(int(s.min()), int(d.min()))
        hi = max(int(s.max()), int(d.max()))
        max_seen = max(max_seen, hi)
        if lo < 0:
            raise DatasetError(f"{src_name}: negative node id {lo} in the edge list")
        if hi >= cap:
            if fixed:
                raise DatasetError(f"{src_name}: node id {hi} is out of range [0, {cap}) (num_nodes = {cap})")
            new_cap = max(hi + 1, 2 * cap)
            grown = np.zeros(new_cap + 1, dtype=np.int64)
            grown[: cap + 1] = counts
            counts, cap = grown, new_cap
        bad = accumulate_in_degrees(s, d, counts, undirected, drop_self_loops)
        assert bad < 0, "range was checked above"
        progress.update(getattr(edges, "bytes_done", 0))
    progress.done()
    if not fixed:
        num_nodes = max_seen + 1
        counts = counts[: num_nodes + 1]
    num_nodes = int(num_nodes)
    indptr = np.cumsum(counts, out=counts)
    num_edges = int(indptr[-1])
    idx_dtype = np.dtype(np.int32) if num_nodes <= INT32_MAX else np.dtype(np.int64)
    item = idx_dtype.itemsize

    # windows of destination nodes whose indices fit the budget
    budget_edges = max(1, int(memory_budget) // item)
    bounds = [0]
    while bounds[-1] < num_nodes:
        lo = bounds[-1]
        hi = int(np.searchsorted(indptr, indptr[lo] + budget_edges, side="right")) - 1
        bounds.append(min(num_nodes, max(hi, lo + 1)))
    windows = list(zip(bounds[:-1], bounds[1:]))

    final = out_dir / "indices.npy"
    target = out_dir / ".indices.raw" if dedupe else final
    if dedupe:
        with open(target, "wb") as f:
            f.truncate(num_edges * item)
        header = 0
    else:
        mm = np.lib.format.open_memmap(final, mode="w+", dtype=idx_dtype, shape=(num_edges,))
        header = int(mm.offset)
        del mm
    sleep = _test_sleep()
    new_counts = np.zeros(num_nodes, dtype=np.int64) if dedupe else None
    kept = []  # (window base, kept edges) for compaction
    marker = empty_marker(num_nodes) if dedupe else None
    for wi, (lo, hi) in enumerate(windows):
        base, end = int(indptr[lo]), int(indptr[hi])
        label = "pass 2/2: placing edges" if len(windows) == 1 else f"pass 2/2: window {wi + 1}/{len(windows)}"
        progress.start(label, getattr(edges, "total_bytes", 0))
        if end > base:
            out = np.memmap(target, dtype=idx_dtype, mode="r+", offset=header + base * item, shape=(end - base,))
        else:
            out = np.zeros(0, dtype=idx_dtype)
        cursor = indptr[lo:hi].copy()
        if end > base:
            for s, d in edges:
                scatter_window(s, d, lo, hi, base, cursor, out, undirected, drop_self_loops)
                progress.update(getattr(edges, "bytes_done", 0))
                if sleep:
                    time.sleep(sleep)
        assert np.array_equal(cursor, indptr[lo + 1 : hi + 1]), "pass 2 disagrees with pass 1"
        if dedupe:
            local = indptr[lo : hi + 1] - base
            w = dedupe_window(local, out, marker, new_counts[lo:hi]) if end > base else 0
            kept.append((base, int(w)))
        if isinstance(out, np.memmap):
            out.flush()
        del out
        progress.done()

    if dedupe:
        new_indptr = np.zeros(num_nodes + 1, dtype=np.int64)
        np.cumsum(new_counts, out=new_indptr[1:])
        num_edges = int(new_indptr[-1])
        _compact(target, final, idx_dtype, num_edges, kept)
        os.unlink(target)
        indptr = new_indptr
    save_npy(out_dir / "indptr.npy", indptr, fsync=False)
    return CSCBuildResult(num_nodes, num_edges, idx_dtype, len(windows), input_edges)


def _compact(raw: Path, final: Path, dtype: np.dtype, num_edges: int, kept) -> None:
    """Write ``final`` (.npy) from the kept prefix of every window of ``raw``, sequentially."""
    item = dtype.itemsize
    with open(final, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (num_edges,)}
        )
        with open(raw, "rb") as r:
            for base, w in kept:
                r.seek(base * item)
                left = w * item
                while left:
                    buf = r.read(min(left, 16 * 1024 * 1024))
                    if not buf:
                        raise DatasetError(f"{raw}: unexpected end of file while compacting")
                    f.write(buf)
                    left -= len(buf)


# --------------------------------------------------------------------------- features
def write_feature(source, out_path: Path, *, dtype=None, progress: Optional[Progress] = None,
                  block_bytes: int = 8 * 1024 * 1024) -> tuple[tuple[int, ...], np.dtype]:
    """Write one node-feature table to ``out_path`` (.npy) and return ``(shape, dtype)``.

    ``source``: an array, a ``.npy`` path (copied by the kernel when no conversion is needed,
    else converted in row chunks), or a CSV/TSV text path (optionally gzipped; parsed in
    blocks, default ``float32``). Memory stays at one block.
    """
    from ._readers import NpyRows, read_float_blocks

    progress = progress or Progress(False)
    out_path = Path(out_path)
    if not isinstance(source, (str, os.PathLike)):
        arr = np.asarray(source)
        if dtype is not None:
            arr = arr.astype(dtype, copy=False)
        save_npy(out_path, arr, fsync=False)
        return tuple(arr.shape), arr.dtype
    path = Path(source)
    if path.name.lower().endswith(".npy"):
        r = NpyRows(path)
        want = np.dtype(dtype) if dtype is not None else r.dtype.newbyteorder("=")
        if not r.transposed and r.dtype == want and r.dtype.byteorder in "=|<":
            progress.start(f"copying {path.name}", path.stat().st_size)
            shutil.copyfile(path, out_path)  # sendfile: never passes through our memory
            progress.done()
            return r.shape, r.dtype
        if r.transposed:
            from .._io import load_npy

            src = load_npy(path, mmap=True)
            shape = src.shape
            get = lambda a, b: np.ascontiguousarray(src[a:b])  # noqa: E731
        else:
            shape = r.shape
            get = r.read
        mm = np.lib.format.open_memmap(out_path, mode="w+", dtype=want, shape=shape)
        hdr = int(mm.offset)
        del mm
        rows = max(1, block_bytes // max(1, r.row_bytes))
        progress.start(f"converting {path.name}", shape[0])
        with open(out_path, "r+b") as f:
            f.seek(hdr)
            for a in range(0, shape[0], rows):
                f.write(np.ascontiguousarray(get(a, min(shape[0], a + rows)), dtype=want).tobytes())
                progress.update(a)
        progress.done()
        return tuple(shape), want
    # text table
    want = np.dtype(dtype) if dtype is not None else np.dtype(np.float32)
    raw = out_path.with_name(f".{out_path.name}.raw")
    nrows, ncols = 0, None
    progress.start(f"parsing {path.name}", path.stat().st_size)
    with open(raw, "wb") as f:
        for block, tb in read_float_blocks(path, block_bytes=block_bytes, dtype=np.float64):
            ncols = block.shape[1]
            f.write(np.ascontiguousarray(block, dtype=want).tobytes())
            nrows += block.shape[0]
            progress.update(tb.bytes_done)
    progress.done()
    if ncols is None:
        raise DatasetError(f"{path}: no feature rows found")
    shape = (nrows, ncols) if ncols > 1 else (nrows,)
    with open(out_path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(want), "fortran_order": False, "shape": shape}
        )
        with open(raw, "rb") as r:
            shutil.copyfileobj(r, f, 16 * 1024 * 1024)
    os.unlink(raw)
    return shape, want
