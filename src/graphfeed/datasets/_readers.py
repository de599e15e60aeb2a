"""Chunked, pickle-free readers for the importers: delimited text (optionally gzipped) and
``.npy`` row ranges read with plain file reads (so the source never piles up in our RSS)."""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from ..errors import DatasetError

DEFAULT_BLOCK = 8 * 1024 * 1024


def looks_like_header(line: str) -> bool:
    """A first line is a header when one of its fields is not a number (``nan`` is a number)."""
    for tok in re.split(r"[,;\t ]+", line.strip()):
        if tok and not tok.startswith("#"):
            try:
                float(tok)
            except ValueError:
                return True
    return False


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


class TextBlocks:
    """Iterate a text file as byte blocks that end on a line boundary.

    ``bytes_done`` tracks the (compressed) bytes consumed, for progress. The first data line is
    treated as a header and skipped when one of its fields is not a number (``id_1,id_2``) and
    ``skip_header`` is ``"auto"``; ``True`` always skips it, ``False`` never.
    """

    def __init__(self, path, *, block_bytes: int = DEFAULT_BLOCK, skip_header="auto"):
        self.path = Path(path)
        if not self.path.is_file():
            raise DatasetError(f"{self.path}: file not found")
        self.block_bytes = int(block_bytes)
        self.skip_header = skip_header
        self.total_bytes = self.path.stat().st_size
        self.bytes_done = 0

    def __iter__(self) -> Iterator[tuple[np.ndarray, int]]:
        """Yields ``(block as uint8 array, line number of its first line)``.

        The block is a view of one reused buffer: it is valid until the next iteration.
        """
        raw = open(self.path, "rb")
        try:
            f = gzip.GzipFile(fileobj=raw, mode="rb") if is_gzip(self.path) else raw
            buf = bytearray(self.block_bytes)
            view = memoryview(buf)
            have = 0  # bytes of an unfinished line carried over to the front of buf
            line_no = 1
            first = True
            self.bytes_done = 0
            while True:
                if have == len(buf):  # one line longer than the buffer: grow it
                    bigger = bytearray(2 * len(buf))
                    bigger[:have] = buf
                    view.release()
                    buf, view = bigger, memoryview(bigger)
                try:
                    n = f.readinto(view[have:])
                except (OSError, EOFError, gzip.BadGzipFile) as e:
                    raise DatasetError(f"{self.path}: cannot read (corrupt or truncated gzip?): {e}") from None
                self.bytes_done = raw.tell()
                total = have + n
                if n == 0:
                    if have:
                        yield np.frombuffer(buf, dtype=np.uint8, count=have), line_no
                    return
                cut = buf.rfind(b"\n", 0, total) + 1
                if cut == 0:
                    have = total
                    continue
                if first:
                    first = self._blank_header(buf, cut)
                yield np.frombuffer(buf, dtype=np.uint8, count=cut), line_no
                line_no += buf.count(b"\n", 0, cut)
                have = total - cut
                buf[:have] = buf[cut:total]
        finally:
            raw.close()


    def _blank_header(self, buf: bytearray, end: int) -> bool:
        """Overwrite a header line with spaces (the parser skips blank lines, and line numbers
        stay right). Returns whether the first data line is still to be examined."""
        pos = 0
        while pos < end:
            nl = buf.find(b"\n", pos, end)
            nl = end if nl < 0 else nl
            line = bytes(buf[pos:nl]).strip()
            if line and not line.startswith(b"#"):
                if self.skip_header is True or (
                    self.skip_header == "auto" and looks_like_header(line.decode("utf-8", "replace"))
                ):
                    buf[pos:nl] = b" " * (nl - pos)
                return False
            pos = nl + 1
        return True


def parse_int_block(block: np.ndarray, ncols: int, path: Path, first_line: int) -> np.ndarray:
    """Integers of one block as an ``(ncols, rows)`` int64 array (each column contiguous);
    an error names the file, the line and its text."""
    from ._kernels import count_byte, parse_int_rows

    max_rows = int(count_byte(block, 10)) + 1
    out = np.empty((ncols, max_rows), dtype=np.int64)
    rows, err = parse_int_rows(block, ncols, out)
    if err >= 0:
        line = first_line + int(count_byte(block[:err], 10))
        end = err
        while end < block.shape[0] and block[end] != 10 and end - err < 80:
            end += 1
        text = bytes(block[err:end]).decode("utf-8", "replace")
        raise DatasetError(
            f"{path}: line {line}: expected {ncols} integer column(s), got {text!r}"
        )
    return out[:, :rows]


def read_int_table(path, ncols: int, *, block_bytes: int = DEFAULT_BLOCK) -> np.ndarray:
    """A whole (small) integer table, e.g. labels or split ids."""
    tb = TextBlocks(path, block_bytes=block_bytes)
    parts = [parse_int_block(b, ncols, tb.path, ln).T.copy() for b, ln in tb]
    return np.concatenate(parts) if parts else np.zeros((0, ncols), dtype=np.int64)


def read_float_blocks(path, *, block_bytes: int = DEFAULT_BLOCK, dtype=np.float32):
    """Yields float rows (2-D arrays) block by block from a delimited text file."""
    tb = TextBlocks(path, block_bytes=block_bytes)
    ncols = None
    for block, line_no in tb:
        try:
            text = bytes(block).decode("utf-8")
        except UnicodeDecodeError as e:
            raise DatasetError(f"{tb.path}: near line {line_no}: not UTF-8 text ({e})") from None
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if not lines:
            continue
        delim = "," if "," in lines[0] else ("\t" if "\t" in lines[0] else None)
        try:
            arr = np.loadtxt(lines, delimiter=delim, dtype=dtype, ndmin=2)
        except ValueError as e:
            raise DatasetError(f"{tb.path}: near line {line_no}: cannot parse numbers ({e})") from None
        if ncols is None:
            ncols = arr.shape[1]
        elif arr.shape[1] != ncols:
            raise DatasetError(f"{tb.path}: near line {line_no}: {arr.shape[1]} columns, expected {ncols}")
        yield arr, tb


# --------------------------------------------------------------------------- .npy by rows
class NpyRows:
    """Row ranges of a ``.npy`` file via ``pread`` (no mmap, no pickle).

    ``shape``/``dtype`` from the header; ``read(a, b)`` returns rows ``[a, b)`` as a fresh array.
    A Fortran-ordered 2-D array is exposed transposed (``transposed=True``) so reads stay
    sequential; callers that need (rows, cols) semantics check that flag.
    """

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_file():
            raise DatasetError(f"{self.path}: file not found")
        try:
            with open(self.path, "rb") as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                else:
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
                self.offset = f.tell()
        except (ValueError, OSError, EOFError) as e:
            raise DatasetError(f"{self.path}: not a valid .npy file ({e})") from None
        if dtype.hasobject:
            raise DatasetError(f"{self.path}: object arrays are not allowed (they would need pickle)")
        self.transposed = bool(fortran) and len(shape) > 1
        self.shape = tuple(reversed(shape)) if self.transposed else tuple(shape)
        self.dtype = dtype
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * dtype.itemsize
        need = self.offset + self.row_bytes * (self.shape[0] if self.shape else 1)
        size = self.path.stat().st_size
        if size < need:
            raise DatasetError(f"{self.path}: truncated: {size} bytes, the header promises {need}")

    def read(self, a: int, b: int) -> np.ndarray:
        n = b - a
        out = np.empty((n, *self.shape[1:]), dtype=self.dtype)
        view = memoryview(out.reshape(-1).view(np.uint8))
        fd = os.open(self.path, os.O_RDONLY)
        try:
            pos = self.offset + a * self.row_bytes
            got = 0
            while got < view.nbytes:
                k = os.preadv(fd, [view[got:]], pos + got)
                if k <= 0:
                    raise DatasetError(f"{self.path}: unexpected end of file")
                got += k
        finally:
            os.close(fd)
        return out

    def chunks(self, rows_per_chunk: int) -> Iterator[tuple[int, np.ndarray]]:
        n = self.shape[0] if self.shape else 0
        for a in range(0, n, rows_per_chunk):
            yield a, self.read(a, min(n, a + rows_per_chunk))


def load_npz(path) -> dict:
    """All arrays of an ``.npz`` (never unpickles)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError) as e:
        raise DatasetError(f"{path}: cannot read .npz without pickle ({e})") from None
    except Exception as e:  # zipfile.BadZipFile and friends
        raise DatasetError(f"{path}: corrupt .npz ({type(e).__name__}: {e})") from None


def load_array_file(path, *, what: str) -> np.ndarray:
    """A small array from ``.npy``, ``.npz`` (single array) or a text table."""
    from .._io import load_npy

    path = Path(path)
    name = path.name.lower()
    if name.endswith(".npy"):
        return np.asarray(load_npy(path, mmap=False))
    if name.endswith(".npz"):
        arrays = load_npz(path)
        if len(arrays) != 1:
            raise DatasetError(f"{path}: {what}: expected one array in the .npz, found {sorted(arrays)}")
        return next(iter(arrays.values()))
    return None  # text: caller decides the column layout


class EdgeSource:
    """A re-iterable source of COO edge chunks ``(src int64, dst int64)``.

    Accepts CSV/TSV/whitespace text (optionally gzipped; the first two integer columns are source
    and destination, a header line is skipped), ``.npy`` of shape ``(E, 2)`` or ``(2, E)`` (read
    in row ranges), ``.npz`` with ``src``/``dst`` (or ``source``/``destination``, ``row``/``col``,
    or one ``edge_index`` of shape ``(2, E)``; an ``.npz`` is loaded whole), or in-memory arrays.
    Each pass re-reads the source: the CSC build makes two passes (plus one per extra window).
    """

    def __init__(self, path=None, *, arrays=None, block_bytes: int = DEFAULT_BLOCK,
                 src_col: int = 0, dst_col: int = 1):
        self.path = Path(path) if path is not None else None
        self.block_bytes = int(block_bytes)
        self.src_col, self.dst_col = int(src_col), int(dst_col)
        self._arrays = None
        self._npy: Optional[NpyRows] = None
        self.total_bytes = 0
        self.bytes_done = 0
        if arrays is not None:
            s, d = (np.asarray(a) for a in arrays)
            self._arrays = (s.reshape(-1), d.reshape(-1))
            self.total_bytes = s.nbytes + d.nbytes
            self.kind = "arrays"
            return
        if self.path is None:
            raise DatasetError("an edge source needs a path or arrays")
        name = self.path.name.lower()
        if name.endswith(".npy"):
            self._npy = NpyRows(self.path)
            shp = self._npy.shape
            if len(shp) != 2 or (shp[1] != 2 and shp[0] != 2) or self._npy.dtype.kind not in "iu":
                raise DatasetError(f"{self.path}: an edge .npy must be integer (E, 2) or (2, E), got {self._npy.dtype} {shp}")
            self.kind = "npy"
            self.total_bytes = self.path.stat().st_size
        elif name.endswith(".npz"):
            z = load_npz(self.path)
            pair = None
            for a, b in (("src", "dst"), ("source", "destination"), ("row", "col"), ("senders", "receivers")):
                if a in z and b in z:
                    pair = (z[a], z[b])
                    break
            if pair is None and "edge_index" in z:
                ei = z["edge_index"]
                if ei.ndim != 2 or ei.shape[0] != 2:
                    raise DatasetError(f"{self.path}: edge_index must have shape (2, E), got {ei.shape}")
                pair = (ei[0], ei[1])
            if pair is None:
                raise DatasetError(
                    f"{self.path}: no edges found; expected arrays src/dst, source/destination, row/col "
                    f"or edge_index, found {sorted(z)}"
                )
            for arr in pair:
                if arr.dtype.kind not in "iu" or arr.ndim != 1 or arr.shape != pair[0].shape:
                    raise DatasetError(f"{self.path}: edge arrays must be 1-D integers of equal length")
            self._arrays = pair
            self.kind = "arrays"
            self.total_bytes = pair[0].nbytes + pair[1].nbytes
        else:
            self.kind = "text"
            self.total_bytes = self.path.stat().st_size

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        self.bytes_done = 0
        rows = max(1, self.block_bytes // 16)
        if self._arrays is not None:
            s, d = self._arrays
            for a in range(0, s.shape[0], rows):
                yield (np.ascontiguousarray(s[a : a + rows], dtype=np.int64),
                       np.ascontiguousarray(d[a : a + rows], dtype=np.int64))
                self.bytes_done = min(self.total_bytes, (a + rows) * (s.itemsize + d.itemsize))
            return
        if self._npy is not None:
            r = self._npy
            if r.shape[1] == 2:
                for a, block in r.chunks(rows):
                    yield block[:, 0].astype(np.int64), block[:, 1].astype(np.int64)
                    self.bytes_done = r.offset + (a + block.shape[0]) * r.row_bytes
            else:  # (2, E): two row-contiguous halves
                e = r.shape[1]
                item = r.dtype.itemsize
                for a in range(0, e, rows):
                    b = min(e, a + rows)
                    yield (self._read_flat(r, a, b).astype(np.int64),
                           self._read_flat(r, e + a, e + b).astype(np.int64))
                    self.bytes_done = r.offset + 2 * b * item
            return
        tb = TextBlocks(self.path, block_bytes=self.block_bytes)
        ncols = max(self.src_col, self.dst_col) + 1
        for block, line_no in tb:
            t = parse_int_block(block, ncols, self.path, line_no)
            yield t[self.src_col], t[self.dst_col]  # contiguous rows of the (ncols, rows) table
            self.bytes_done = tb.bytes_done

    @staticmethod
    def _read_flat(r: NpyRows, a: int, b: int) -> np.ndarray:
        out = np.empty(b - a, dtype=r.dtype)
        with open(r.path, "rb") as f:
            f.seek(r.offset + a * r.dtype.itemsize)
            n = f.readinto(memoryview(out.view(np.uint8)))
        if n != out.nbytes:
            raise DatasetError(f"{r.path}: unexpected end of file")
        return out
