"""Streamed, bounded-memory building blocks of ``graphfeed prepare``.

- :func:`build_csc_streaming`: a two-pass CSC build from re-iterable COO edge chunks. Pass 1
  counts in-degrees (one int64 per node); pass 2 scatters each edge's source into an in-memory
  *window* of the indices. Memory is O(num_nodes) plus one chunk plus one window: when the
  indices exceed ``memory_budget`` bytes (or half the memory available), pass 2 runs once per
  window of destination nodes (re-reading the edges each time), so a graph larger than RAM can be
  built. Duplicates are removed per column inside each window (a numba kernel), and each window
  is appended to the final file: every byte of the edge arrays is written once, sequentially
  (issue 30, item 7: a memory-mapped indices file scattered into at random was written back by
  the kernel again and again).
- :func:`write_feature`: streams a node-feature table (``.npy`` or text) into the dataset.
- :class:`Progress` (from :mod:`graphfeed._progress`): the stderr progress bar.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from .._checks import check_int
from .._io import save_npy
from .._progress import Progress
from .._units import format_bytes
from ..errors import DatasetError

INT32_MAX = int(np.iinfo(np.int32).max)
DEFAULT_MEMORY_BUDGET = 2 * 1024**3


def check_allocation(nbytes: int, what: str, hint: str = "") -> None:
    """Refuse an allocation (or a file) larger than the memory this process may still use before
    it is attempted (``graphfeed._memory.reclaimable_memory``: free memory and page cache,
    capped by a memory cgroup's limit; the machine's memory where that is unknown): a wrong
    column, a stray huge id or a graph too large for the container must be a clear error, not
    an OOM kill."""
    from .._memory import reclaimable_memory

    avail = reclaimable_memory()
    where = "this process may still use"
    if avail is None:
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            where = "this machine has"
        except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
            return
    if nbytes > avail:
        raise DatasetError(f"{what} would need {format_bytes(nbytes)}, more than the "
                           f"{format_bytes(avail)} of memory {where}" + (f"; {hint}" if hint else ""))


#: bytes per node ``prepare`` holds whatever the edge window (:func:`prepare_node_bytes`)
NODE_BYTES = 16
NODE_BYTES_COMPACT = 40


def prepare_node_bytes(num_nodes: int, compact: bool) -> int:
    """What ``prepare`` of a node-classification dataset holds per node, which no
    ``--memory-budget`` can window: the labels and the in-degree counts that become ``indptr``
    (16 B a node), and with ``--undirected``/``--dedupe`` (``compact``) the kept counts, the
    column marker and the new ``indptr`` too (40 B a node)."""
    return (NODE_BYTES_COMPACT if compact else NODE_BYTES) * (int(num_nodes) + 1)


def check_prepare_memory(num_nodes: int, compact: bool, where: str) -> None:
    """Refuse, before anything is written, a ``prepare`` whose per-node arrays
    (:func:`prepare_node_bytes`) and smallest edge window cannot fit the memory left."""
    need = prepare_node_bytes(num_nodes, compact) + MIN_WINDOW_BUDGET
    hint = ("the per-node arrays cannot be split into windows (--memory-budget bounds only the "
            "edges held at once)"
            + ("; without --undirected and --dedupe they take 16 B a node instead of 40"
               if compact else "") + "; run it with more memory")
    check_allocation(need, f"{where}: preparing {int(num_nodes):,} nodes", hint)


def check_disk_space(nbytes: int, folder: Path, what: str) -> None:
    """Refuse to write ``nbytes`` into ``folder`` when its file system has less free space."""
    try:
        st = os.statvfs(folder)
    except OSError:  # pragma: no cover
        return
    free = st.f_bavail * st.f_frsize
    if nbytes > free:
        raise DatasetError(f"{what} would need {format_bytes(nbytes)} on disk, but only "
                           f"{format_bytes(free)} is free in {folder}")


@dataclass
class CSCBuildResult:
    num_nodes: int
    num_edges: int
    index_dtype: np.dtype
    windows: int
    input_edges: int
    #: edge value name -> (path of its .npy in indices order, dtype)
    values: dict = field(default_factory=dict)
    #: ``undirected``: reverse edges not added because the input held them already
    reverses_present: int = 0
    #: the bytes of edges held in memory at once when less memory was available than the
    #: budget asked for (:func:`window_budget`), else 0
    budget_capped: int = 0


def value_dtype(name: str, integral: bool) -> np.dtype:
    """Storage dtype of an edge value column: ``weight`` is float32 (what GNN layers take);
    other columns (timestamps) are int64 when every value is an integer, else float64."""
    if name == "weight":
        return np.dtype(np.float32)
    return np.dtype(np.int64) if integral else np.dtype(np.float64)


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
    value_paths: Optional[dict] = None,
) -> CSCBuildResult:
    """Write ``indptr.npy`` and ``indices.npy`` into ``out_dir`` from ``edges`` (re-iterable,
    yielding ``(src, dst, values)`` chunks: int64 ids and a float64 ``(k, R)`` array of the
    ``edges.value_names`` columns; ``edges.total_bytes`` / ``bytes_done`` for progress).

    Edges ``src -> dst`` put ``src`` into column ``dst``; ``undirected`` also adds ``dst -> src``
    (a self loop once) with the same values, unless the input holds ``dst -> src`` itself (an
    input that already has both directions is stored as given, each directed edge once; the
    result's ``reverses_present`` counts the reverses not added); ``drop_self_loops`` removes ``v -> v``; ``dedupe``
    keeps the first of repeated ``(src, dst)`` pairs (and its values). Neighbours keep their input
    order within a column. With ``num_nodes=None`` it is ``max id + 1``. At most
    :func:`window_budget` bytes of edges are held in memory at once; ``indices.npy`` and the value
    files are written front to back, each byte once, with no temporary copy. An id outside
    ``[0, num_nodes)`` is a ``DatasetError`` naming the source and the id. Each value column is
    written to ``value_paths[name]`` (default ``out_dir/<name>.npy``) in ``indices`` order, with
    :func:`value_dtype`; a non-finite value is an error.
    """
    from ..graph._kernels import (accumulate_in_degrees, dedupe_window, drop_present_reverses,
                                  empty_marker, scatter_window)

    progress = progress or Progress(False)
    out_dir = Path(out_dir)
    src_name = str(getattr(edges, "path", None) or "edges")
    names = tuple(getattr(edges, "value_names", ()))
    k = len(names)
    fixed = num_nodes is not None
    if fixed:
        num_nodes = check_int("num_nodes", num_nodes, 0)
        check_allocation((num_nodes + 1) * 8 * (3 if dedupe or undirected else 2), f"{num_nodes} nodes")
    cap = num_nodes if fixed else 1024
    counts = np.zeros(cap + 1, dtype=np.int64)
    input_edges = 0
    max_seen = -1
    integral = [True] * k

    # pass 1: in-degrees (and the value columns' checks)
    progress.start("pass 1/2: counting degrees", getattr(edges, "total_bytes", 0))
    for s, d, vals in edges:
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
            check_allocation((new_cap + 1) * 8 * (3 if dedupe or undirected else 2), f"{src_name}: node id {hi}",
                             "node ids must be 0 .. num_nodes - 1 (renumber the nodes, or check the columns)")
            grown = np.zeros(new_cap + 1, dtype=np.int64)
            grown[: cap + 1] = counts
            counts, cap = grown, new_cap
        for j in range(k):
            v = vals[j]
            fin = np.isfinite(v)
            if not fin.all():
                e = int(np.flatnonzero(~fin)[0])
                raise DatasetError(f"{src_name}: edge {input_edges - s.shape[0] + e} ({int(s[e])} -> {int(d[e])}) "
                                   f"has {names[j]} {v[e]}; values must be finite numbers")
            if names[j] == "weight" and (v < 0).any():
                e = int(np.flatnonzero(v < 0)[0])
                raise DatasetError(f"{src_name}: edge {input_edges - s.shape[0] + e} ({int(s[e])} -> "
                                   f"{int(d[e])}) has weight {v[e]}; weights must be >= 0")
            top = float(np.abs(v).max())
            if names[j] == "weight" and top > np.finfo(np.float32).max:
                raise DatasetError(f"{src_name}: a weight of {top:g} does not fit float32")
            if integral[j] and not np.all(v == np.floor(v)):
                integral[j] = False
            if names[j] != "weight" and top > 2.0**53:
                # values travel as float64: past 2^53 an integer (a ns timestamp) would be rounded
                raise DatasetError(f"{src_name}: {names[j]} {top:.0f} is above 2^53 and cannot "
                                   f"be kept exactly; rescale it (e.g. nanoseconds to seconds)")
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

    # windows of destination nodes whose indices (and values) fit the budget
    budget = window_budget(memory_budget)
    budget_edges = max(1, budget // (item + 8 * k))
    bounds = [0]
    while bounds[-1] < num_nodes:
        lo = bounds[-1]
        hi = int(np.searchsorted(indptr, indptr[lo] + budget_edges, side="right")) - 1
        bounds.append(min(num_nodes, max(hi, lo + 1)))
    windows = list(zip(bounds[:-1], bounds[1:]))

    # Each window is placed in private memory and then appended to the final files, front to
    # back: every byte of indices.npy and of the value files is written once. (A shared memory
    # map of the file, scattered into at random, had the kernel write its pages back while pass 2
    # was still dirtying them, again and again on a long pass or when memory was short.)
    compact = dedupe or undirected  # both drop edges from the placed windows
    value_paths = dict(value_paths or {})
    value_outs = [(Path(value_paths.get(n, out_dir / f"{n}.npy")), value_dtype(n, integral[j]))
                  for j, n in enumerate(names)]
    widest = max((int(indptr[hi]) - int(indptr[lo]) for lo, hi in windows), default=0)
    buf = np.empty(widest, dtype=idx_dtype)
    vbuf = np.empty((widest, k), dtype=np.float64)
    new_counts = np.zeros(num_nodes, dtype=np.int64) if compact else None
    marker = empty_marker(num_nodes) if compact else None
    reverses_present = 0
    with contextlib.ExitStack() as files:
        idx_file = files.enter_context(NpyAppender(out_dir / "indices.npy", idx_dtype, rows_bound=num_edges))
        val_files = [files.enter_context(NpyAppender(path, dt, rows_bound=num_edges))
                     for path, dt in value_outs]
        for wi, (lo, hi) in enumerate(windows):
            base, end = int(indptr[lo]), int(indptr[hi])
            label = "pass 2/2: placing edges" if len(windows) == 1 else f"pass 2/2: window {wi + 1}/{len(windows)}"
            progress.start(label, getattr(edges, "total_bytes", 0))
            out, vout = buf[: end - base], vbuf[: end - base]
            cursor = indptr[lo:hi].copy()
            if end > base:
                for s, d, vals in edges:
                    scatter_window(s, d, vals, lo, hi, base, cursor, out, vout, undirected, drop_self_loops,
                                   undirected)
                    progress.update(getattr(edges, "bytes_done", 0))
            assert np.array_equal(cursor, indptr[lo + 1 : hi + 1]), "pass 2 disagrees with pass 1"
            w = end - base
            if compact:
                local = indptr[lo : hi + 1] - base
                w = 0
                if end > base and undirected:
                    w, dropped = drop_present_reverses(local, out, vout, marker, new_counts[lo:hi])
                    reverses_present += int(dropped)
                    local = np.zeros(hi - lo + 1, dtype=np.int64)
                    np.cumsum(new_counts[lo:hi], out=local[1:])
                if end > base and dedupe:
                    w = dedupe_window(local, out, vout, marker, new_counts[lo:hi])
            idx_file.write(out[: int(w)])
            for j, f in enumerate(val_files):
                f.write_converted(vout[: int(w), j])
            progress.done()
    del buf, vbuf

    if compact:
        new_indptr = np.zeros(num_nodes + 1, dtype=np.int64)
        np.cumsum(new_counts, out=new_indptr[1:])
        num_edges = int(new_indptr[-1])
        indptr = new_indptr
    assert idx_file.rows == num_edges, "pass 2 wrote a different number of edges"
    values = {n: value_outs[j] for j, n in enumerate(names)}
    save_npy(out_dir / "indptr.npy", indptr, fsync=False)
    return CSCBuildResult(num_nodes, num_edges, idx_dtype, len(windows), input_edges, values,
                          reverses_present, budget if budget < memory_budget else 0)


#: the smallest window :func:`window_budget` leaves when memory is short
MIN_WINDOW_BUDGET = 64 * 1024**2


def window_budget(memory_budget: int) -> int:
    """Bytes of edges :func:`build_csc_streaming` holds in memory at once: ``memory_budget``,
    capped at half the memory available now (``MemAvailable``, and a memory cgroup's limit less
    its anonymous memory), but not below :data:`MIN_WINDOW_BUDGET`. The window lives in process
    memory, which cannot be paged out to the dataset file: a window bigger than what is free would
    swap or be killed, where more windows only re-read the edges."""
    from .._memory import reclaimable_memory

    avail = reclaimable_memory()
    if avail is None:
        return int(memory_budget)
    return int(min(memory_budget, max(MIN_WINDOW_BUDGET, avail // 2)))


def npy_header(dtype: np.dtype, shape: tuple) -> bytes:
    """The bytes of the version 1.0 ``.npy`` header ``np.save`` writes for ``dtype``/``shape``."""
    b = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        b, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
            "shape": tuple(shape)})
    return b.getvalue()


class NpyAppender:
    """A C-order ``.npy`` file written front to back whose first dimension is known only at the
    end: rows are appended (each byte written once, sequentially) after room for the header of
    ``rows_bound`` rows, and the header is written on a clean exit. numpy pads its header so that
    its length does not depend on the first dimension (room to grow), so the file is byte for
    byte what ``np.save`` writes; a header that came out shorter anyway is padded with spaces
    (still a valid ``.npy``). Use as a context manager; on an error the file is left incomplete
    (it lives in a temporary folder that is never published)."""

    #: bytes handed to one ``write`` call (``os.write`` moves at most ~2 GiB at a time)
    CHUNK = 64 * 1024**2

    def __init__(self, path, dtype, *, row_shape: tuple = (), rows_bound: int = 0):
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.row_shape = tuple(int(x) for x in row_shape)
        self.rows = 0
        self._reserved = len(npy_header(self.dtype, (int(rows_bound), *self.row_shape)))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "wb")
        self._f.seek(self._reserved)

    def __enter__(self) -> "NpyAppender":
        return self

    def write(self, block: np.ndarray) -> None:
        """Append rows ``block`` (already of this file's dtype and row shape)."""
        a = np.ascontiguousarray(block)
        assert a.dtype == self.dtype and a.shape[1:] == self.row_shape, (a.dtype, a.shape)
        flat = a.reshape(-1).view(np.uint8)
        for i in range(0, flat.shape[0], self.CHUNK):
            self._f.write(flat[i : i + self.CHUNK])
        self.rows += a.shape[0]

    def write_converted(self, block: np.ndarray) -> None:
        """Append rows ``block`` converted to this file's dtype, a bounded slice at a time."""
        rows = max(1, self.CHUNK // 4 // max(1, block.itemsize * int(np.prod(self.row_shape))))
        for a in range(0, block.shape[0], rows):
            self.write(np.ascontiguousarray(block[a : a + rows]).astype(self.dtype, copy=False))

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                hdr = npy_header(self.dtype, (self.rows, *self.row_shape))
                if len(hdr) > self._reserved:
                    raise AssertionError(f"{self.path}: {self.rows} rows, more than its header was "
                                         f"sized for")
                if len(hdr) < self._reserved:  # not with numpy's room to grow; still a valid header
                    pad = self._reserved - len(hdr)
                    text = hdr[10:-1] + b" " * pad + b"\n"
                    hdr = hdr[:8] + len(text).to_bytes(2, "little") + text
                self._f.seek(0)
                self._f.write(hdr)
        finally:
            self._f.close()
        return False


# --------------------------------------------------------------------------- features
def bfloat16_bits(a: np.ndarray) -> np.ndarray:
    """The uint16 bits of ``a`` rounded to bfloat16 (round to nearest, ties to even, through
    float32: torch's own rounding, bit for bit; NaN becomes torch's quiet NaN ``0x7FC0``).
    numpy has no bfloat16, and ``prepare`` runs without torch."""
    f = np.ascontiguousarray(a, dtype=np.float32)
    u = f.view(np.uint32)
    with np.errstate(over="ignore"):
        bits = ((u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))))
                >> np.uint32(16)).astype(np.uint16)
    bits[np.isnan(f)] = 0x7FC0
    return bits


def bfloat16_values(bits: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 ``bits`` (exact: bfloat16 is float32's upper half)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


#: dtypes numpy lacks (``schema.BITS_DTYPES``) -> ``(encode to bits, decode to float32, the
#: largest finite value)``: the one place ``prepare`` learns a new such dtype
BITS_CODECS = {"bfloat16": (bfloat16_bits, bfloat16_values, 3.3895313892515355e38)}


def convert_checked(block: np.ndarray, want, where: str, row0: int = 0) -> np.ndarray:
    """``block`` as ``want``, refusing values the conversion would change beyond rounding: a
    finite value that overflows to inf (``1e300`` as float16), a fraction, NaN or out-of-range
    value stored as an integer, anything but 0/1 as bool. The error names the row and value.
    ``want``: a numpy dtype, or the name of one numpy lacks (``"bfloat16"``), whose bits are
    returned (``BITS_CODECS``)."""
    if isinstance(want, str) and want in BITS_CODECS:
        encode, decode, top = BITS_CODECS[want]
        with np.errstate(over="ignore", invalid="ignore"):
            out = encode(block)
            back = decode(out)
            bad = ~np.isfinite(back) & (np.isfinite(block) if block.dtype.kind == "f" else True)
        return _refuse_bad(block, out, np.asarray(bad), want, f"it overflows {want} (largest "
                           f"{top:g})", where, row0)
    want = np.dtype(want)
    if block.dtype == want:
        return block
    with np.errstate(over="ignore", invalid="ignore"):
        out = block.astype(want)
        if want.kind == "f":
            bad = ~np.isfinite(out) & (np.isfinite(block) if block.dtype.kind == "f" else True)
            why = f"it overflows {want} (largest {np.finfo(want).max:g})"
        elif want.kind in "iu":
            if block.dtype.kind == "f":
                bad = ~np.isfinite(block) | (out.astype(np.float64) != block)
            else:
                bad = out != block
            why = f"{want} holds only integers in [{np.iinfo(want).min}, {np.iinfo(want).max}]"
        elif want.kind == "b":
            bad = (block != 0) & (block != 1)
            why = "bool holds only 0 and 1"
        else:  # pragma: no cover - dtype_name refuses other dtypes earlier
            return out
    return _refuse_bad(block, out, np.asarray(bad), want, why, where, row0)


def _refuse_bad(block, out, bad, want, why: str, where: str, row0: int) -> np.ndarray:
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        at = f"row {row0 + pos[0]}" + (f", column {pos[1]}" if len(pos) > 1 else "")
        value = block[pos]
        value = value.item() if hasattr(value, "item") else value  # 1e+39, not np.float64(1e+39)
        raise DatasetError(f"{where}: value {value!r} at {at} cannot be stored as {want}: {why}; "
                           f"choose a wider --feature-dtype")
    return out


def storage_dtype(want) -> np.dtype:
    """The numpy dtype of a ``.npy`` holding features of :func:`feature_dtype` ``want``."""
    from .schema import storage_dtype as stored

    return stored(want) if isinstance(want, str) else np.dtype(want)


def feature_dtype(value):
    """What features are stored as, from a dtype or its name: a numpy dtype, or the name of a
    dtype numpy lacks (``"bfloat16"``; ``schema.BITS_DTYPES``), which ``convert_checked``
    encodes; ``DatasetError`` for anything a dataset cannot hold."""
    from .schema import BITS_DTYPES, dtype_name

    if isinstance(value, str) and value in BITS_DTYPES:
        return value
    name = str(value).removeprefix("torch.")
    if name in BITS_DTYPES:  # torch.bfloat16 itself
        return name
    try:
        return np.dtype(dtype_name(np.dtype(value)))
    except TypeError:
        raise DatasetError(f"unknown dtype {value!r}") from None


def write_feature(source, out_path: Path, *, dtype=None, progress: Optional[Progress] = None,
                  block_bytes: int = 8 * 1024 * 1024, num_nodes: Optional[int] = None
                  ) -> tuple[tuple[int, ...], np.dtype]:
    """Write one node-feature table to ``out_path`` (.npy) and return ``(shape, dtype)``.

    ``source``: an array, a ``.npy`` path (copied by the kernel when no conversion is needed,
    else converted in row chunks), a CSV/TSV text path (optionally gzipped; parsed in blocks,
    default ``float32``), or a sparse table: a JSON file of feature ids per node
    (``{"<node>": [ids]}`` or ``[[ids], ...]``) or a scipy sparse ``.npz`` (``save_npz``),
    stored dense (default ``float32``, refused when it would not fit on the disk).
    ``FILE.npz:KEY`` takes one dense array from an ``.npz``. Memory stays at one block (the
    sparse inputs and ``.npz`` members are read whole). A conversion to ``dtype`` that would
    change a value (overflow, fraction to integer) is an error naming the row. ``dtype`` may be
    one numpy lacks (``"bfloat16"``): the file holds its bits, and the returned dtype is its
    name (:func:`feature_dtype`).
    """
    from ._readers import NpyRows, load_array_file, read_float_blocks, read_sparse, split_npz_key

    progress = progress or Progress(False)
    out_path = Path(out_path)
    dtype = None if dtype is None else feature_dtype(dtype)
    where = str(source) if isinstance(source, (str, os.PathLike)) else "features"
    if not isinstance(source, (str, os.PathLike)):
        arr = np.asarray(source)
        if dtype is not None:
            arr = convert_checked(arr, dtype, where)
        save_npy(out_path, arr, fsync=False)
        return tuple(arr.shape), arr.dtype if dtype is None else dtype
    path, key = split_npz_key(source)
    path = Path(path)
    lower = path.name.lower()
    sparse = read_sparse(path, num_nodes=num_nodes) if key is None and lower.endswith((".json", ".npz")) else None
    if sparse is not None:
        return write_dense_from_csr(sparse, out_path, dtype or np.dtype(np.float32), where,
                                    block_bytes, progress)
    if lower.endswith(".npz"):
        arr = load_array_file(source, what="features")
        return write_feature(arr, out_path, dtype=dtype, progress=progress, block_bytes=block_bytes)
    if lower.endswith(".npy"):
        r = NpyRows(path)
        want = dtype if dtype is not None else r.dtype.newbyteorder("=")
        if (not r.transposed and isinstance(want, np.dtype) and r.dtype == want
                and r.dtype.byteorder in "=|<"):
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
        mm = np.lib.format.open_memmap(out_path, mode="w+", dtype=storage_dtype(want), shape=shape)
        hdr = int(mm.offset)
        del mm
        rows = max(1, block_bytes // max(1, r.row_bytes))
        progress.start(f"converting {path.name}", shape[0], unit="rows")
        with open(out_path, "r+b") as f:
            f.seek(hdr)
            for a in range(0, shape[0], rows):
                block = convert_checked(get(a, min(shape[0], a + rows)), want, where, a)
                f.write(np.ascontiguousarray(block).tobytes())
                progress.update(a)
        progress.done()
        return tuple(shape), want
    # text table: appended to the .npy as it is parsed (each byte written once, no copy)
    want = dtype if dtype is not None else np.dtype(np.float32)
    nrows, ncols = 0, None
    progress.start(f"parsing {path.name}", path.stat().st_size)
    with contextlib.ExitStack() as stack:
        out = None
        for block, tb in read_float_blocks(path, block_bytes=block_bytes, dtype=np.float64):
            if out is None:
                ncols = block.shape[1]
                out = stack.enter_context(NpyAppender(
                    out_path, storage_dtype(want), row_shape=(ncols,) if ncols > 1 else (),
                    rows_bound=2**63 - 1))
            rows = np.ascontiguousarray(convert_checked(block, want, where, nrows))
            out.write(rows.reshape((rows.shape[0], *out.row_shape)))
            nrows += block.shape[0]
            progress.update(tb.bytes_done)
    progress.done()
    if ncols is None:
        raise DatasetError(f"{path}: no feature rows found")
    shape = (nrows, ncols) if ncols > 1 else (nrows,)
    return shape, want


def compact_binary(path: Path, block_bytes: int = 1 << 26) -> bool:
    """Rewrite the floating-point ``.npy`` at ``path`` as uint8 when every value is 0 or 1 (a
    bag of words, a one-hot encoding): the same values in a quarter (float32) of the bytes, read
    back as float 0/1 by the model's input. True when it did; the file is replaced atomically
    (a temporary beside it, then a rename). Reads the file block by block (two passes)."""
    from .._io import load_npy

    src = load_npy(path, mmap=True)
    if not np.issubdtype(src.dtype, np.floating) or src.size == 0:
        return False
    rows = max(1, block_bytes // max(1, src.itemsize * int(np.prod(src.shape[1:], dtype=np.int64))))
    for a in range(0, src.shape[0], rows):
        block = np.asarray(src[a:a + rows])
        if not np.all((block == 0) | (block == 1)):
            return False
    tmp = path.with_name(path.name + ".uint8.tmp")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=src.shape)
    for a in range(0, src.shape[0], rows):
        out[a:a + rows] = src[a:a + rows]
    out.flush()
    del out, src
    os.replace(tmp, path)
    return True


def write_dense_from_csr(sp, out_path: Path, want, where: str, block_bytes: int,
                         progress: Progress) -> tuple[tuple[int, int], np.dtype]:
    """Write sparse rows ``sp`` (:class:`~graphfeed.datasets._readers.SparseRows`) as a dense
    ``(n, m)`` ``.npy``, one block of rows at a time. Dense costs ``n * m * itemsize`` bytes on
    disk (and in RAM when loaded whole) whatever the sparsity; it is refused when it would not fit
    on the disk. ``want``: as :func:`convert_checked`'s."""
    n, m = sp.shape
    store = storage_dtype(want)
    nbytes = n * m * store.itemsize
    check_disk_space(nbytes, out_path.parent, f"{where}: dense features {n} x {m} {want}")
    mm = np.lib.format.open_memmap(out_path, mode="w+", dtype=store, shape=(n, m))
    hdr = int(mm.offset)
    del mm
    rows = max(1, block_bytes // max(1, m * store.itemsize))
    progress.start(f"densifying {Path(where).name}", n, unit="rows")
    with open(out_path, "r+b") as f:
        f.seek(hdr)
        for a in range(0, n, rows):
            b = min(n, a + rows)
            f.write(np.ascontiguousarray(convert_checked(sp.dense_rows(a, b), want, where, a)).tobytes())
            progress.update(b)
    progress.done()
    return (n, m), want
