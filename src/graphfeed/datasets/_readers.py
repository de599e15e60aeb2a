"""Chunked, pickle-free readers for the importers: delimited text (optionally gzipped) and
``.npy`` row ranges read with plain file reads (so the source never piles up in our RSS).

Every reader checks its input first (:func:`check_input_file`): a missing path, a folder, a FIFO
or a device gets its own message, never a misleading "file not found".
"""

from __future__ import annotations

import gzip
import os
import re
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Optional

import numpy as np

from .._checks import check_int
from .._io import npy_header
from ..errors import DatasetError

DEFAULT_BLOCK = 8 * 1024 * 1024
#: the largest read block (the buffer is allocated whole)
MAX_BLOCK = 1 << 30
INT64_MAX = int(np.iinfo(np.int64).max)
_SPLIT_RE = re.compile(r"[,;\t ]+")


def check_input_file(path, what: str = "input") -> Path:
    """``path`` as a ``Path`` if it is a regular file we can read again; else a
    ``DatasetError`` that says what it is (missing, a folder, a FIFO, a device, unreadable).
    Inputs are read more than once (the CSC build makes two passes), so a pipe will not do."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise DatasetError(f"{path}: {what} file not found") from None
    except OSError as e:
        raise DatasetError(f"{path}: cannot access the {what} file ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise DatasetError(f"{path}: is a folder; the {what} must be a file")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise DatasetError(
            f"{path}: is {kind}; the {what} must be a regular file (it is read more than once)"
        )
    if not os.access(path, os.R_OK):
        raise DatasetError(f"{path}: the {what} file is not readable (permission denied)")
    return path


def check_block_bytes(block_bytes) -> int:
    """The read block size in bytes: an integer in ``[1, 1 GiB]`` (a line longer than the block
    grows the buffer, so any size in range reads everything; 0 would read nothing)."""
    return check_int("block size (bytes)", block_bytes, 1, MAX_BLOCK)


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _fields(line: str) -> list:
    return [t for t in _SPLIT_RE.split(line.strip()) if t]


def looks_like_header(line: str, min_fields: int = 1, num_fields: Optional[int] = None) -> bool:
    """A first line is a header when it has the columns of a data line (at least
    ``min_fields``, the columns the reader reads; exactly ``num_fields``, the fields of the data
    line after it, when known) and every field is a name: not a number, with a letter in it
    (``src,dst``, ``id,target``). Anything else is a malformed data line, which the parser
    reports with its line number instead of dropping it: ``1,2x``, ``1:2`` (one field for two
    columns), ``src`` alone above ``src dst`` lines."""
    toks = _fields(line)
    if not toks or toks[0].startswith("#") or len(toks) < min_fields:
        return False
    if num_fields is not None and len(toks) != num_fields:
        return False
    return all(not _is_number(t) and any(c.isalpha() for c in t) for t in toks)


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


class TextBlocks:
    """Iterate a text file as byte blocks that end on a line boundary.

    ``bytes_done`` tracks the (compressed) bytes consumed, for progress. The first data line is
    treated as a header and skipped when ``skip_header`` is ``"auto"`` and it looks like one
    (:func:`looks_like_header`: names, at least ``columns`` of them, as many as the next data
    line's fields; ``id_1,id_2``); ``True`` always skips it, ``False`` never. A first line that
    does not look like a header is data, so a malformed one is an error naming line 1.
    """

    def __init__(self, path, *, block_bytes: int = DEFAULT_BLOCK, skip_header="auto",
                 columns: int = 1):
        self.path = check_input_file(path)
        self.block_bytes = check_block_bytes(block_bytes)
        self.skip_header = skip_header
        self.columns = columns
        self.total_bytes = self.path.stat().st_size
        self.bytes_done = 0
        self.header: Optional[str] = None

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
                except (OSError, EOFError, zlib.error) as e:
                    raise DatasetError(f"{self.path}: cannot read (corrupt or truncated gzip?): {e}") from None
                self.bytes_done = raw.tell()
                total = have + n
                if n == 0:
                    if have:
                        if first:
                            first = self._blank_header(buf, have)
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
                text = line.decode("utf-8", "replace")
                if self.skip_header is True or (self.skip_header == "auto" and looks_like_header(
                        text, self.columns, self._next_fields(buf, nl + 1, end))):
                    self.header = text
                    buf[pos:nl] = b" " * (nl - pos)
                return False
            pos = nl + 1
        return True

    @staticmethod
    def _next_fields(buf: bytearray, pos: int, end: int) -> Optional[int]:
        """How many fields the first data line of ``buf[pos:end]`` has (``None``: none there)."""
        while pos < end:
            nl = buf.find(b"\n", pos, end)
            nl = end if nl < 0 else nl
            line = bytes(buf[pos:nl]).strip()
            if line and not line.startswith(b"#"):
                return len(_fields(line.decode("utf-8", "replace")))
            pos = nl + 1
        return None


def _bad_line_reason(text: str) -> str:
    if "\r" in text.rstrip("\r"):
        return "a bare carriage return (old Mac line ends?); convert the file to \\n line ends"
    for tok in _SPLIT_RE.split(text.strip()):
        digits = tok.lstrip("+-")
        if digits.isdigit() and len(digits) > 18:
            return f"the integer {tok} is too large (ids must be below 10^18)"
    return ""


def parse_block(block: np.ndarray, kinds: np.ndarray, path: Path, first_line: int):
    """One block's rows as ``(ints (n_int, rows) int64, floats (n_float, rows) float64)``, the
    columns of each kind in order (see :func:`~graphfeed.datasets._kernels.parse_rows`); an
    error names the file, the line and its text."""
    from ._kernels import COL_FLOAT, COL_INT, count_byte, parse_rows

    max_rows = int(count_byte(block, 10)) + 1
    iout = np.empty((int(np.count_nonzero(kinds == COL_INT)), max_rows), dtype=np.int64)
    fout = np.empty((int(np.count_nonzero(kinds == COL_FLOAT)), max_rows), dtype=np.float64)
    rows, err = parse_rows(block, kinds, iout, fout)
    if err >= 0:
        line = first_line + int(count_byte(block[:err], 10))
        end = err
        while end < block.shape[0] and block[end] != 10 and end - err < 80:
            end += 1
        text = bytes(block[err:end]).decode("utf-8", "replace")
        want = ", ".join({COL_INT: "int", COL_FLOAT: "number"}.get(int(k), "any") for k in kinds)
        why = _bad_line_reason(text)
        if not why and line == 1:
            why = ("nor is it a header, which names every column (as many names as the data "
                   "lines have fields, e.g. 'src,dst')")
        raise DatasetError(
            f"{path}: line {line}: expected {len(kinds)} column(s) ({want}), got {text!r}"
            + (f": {why}" if why else "")
        )
    return iout[:, :rows], fout[:, :rows]


def parse_int_block(block: np.ndarray, ncols: int, path: Path, first_line: int) -> np.ndarray:
    """Integers of one block as an ``(ncols, rows)`` int64 array (each column contiguous)."""
    return parse_block(block, np.zeros(ncols, dtype=np.int64), path, first_line)[0]


def read_int_table(path, ncols: int, *, block_bytes: int = DEFAULT_BLOCK) -> np.ndarray:
    """A whole (small) integer table, e.g. labels or split ids."""
    tb = TextBlocks(path, block_bytes=block_bytes, columns=ncols)
    parts = [parse_int_block(b, ncols, tb.path, ln).T.copy() for b, ln in tb]
    return np.concatenate(parts) if parts else np.zeros((0, ncols), dtype=np.int64)


def numbered_lines(block: np.ndarray, first_line: int, path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of the data lines of a block (blank and ``#`` lines dropped)."""
    try:
        text = bytes(block).decode("utf-8")
    except UnicodeDecodeError as e:
        bad = first_line + bytes(block[: e.start]).count(b"\n")
        raise DatasetError(f"{path}: line {bad}: not UTF-8 text ({e.reason})") from None
    out = []
    for i, ln in enumerate(text.split("\n")):
        ln = ln.rstrip("\r")
        if ln.strip() and not ln.lstrip().startswith("#"):
            out.append((first_line + i, ln))
    return out


def sniff_delimiter(line: str) -> Optional[str]:
    """``","``, ``"\\t"``, ``";"`` or ``None`` (whitespace), from one data line."""
    for d in (",", "\t", ";"):
        if d in line:
            return d
    return None


def data_lines(tb: TextBlocks) -> Iterator[tuple[list, Optional[str]]]:
    """``(numbered data lines of one block, delimiter)`` for each block of ``tb`` that holds data
    lines (see :func:`numbered_lines`); the delimiter is sniffed once, from the first data line."""
    delim = None
    first = True
    for block, line_no in tb:
        lines = numbered_lines(block, line_no, tb.path)
        if not lines:
            continue
        if first:
            delim, first = sniff_delimiter(lines[0][1]), False
        yield lines, delim


def read_float_blocks(path, *, block_bytes: int = DEFAULT_BLOCK, dtype=np.float32):
    """Yields float rows (2-D arrays) block by block from a delimited text file; an error names
    the exact line."""
    tb = TextBlocks(path, block_bytes=block_bytes)
    ncols = None
    for lines, delim in data_lines(tb):
        try:
            arr = np.loadtxt([t for _, t in lines], delimiter=delim, dtype=dtype, ndmin=2)
        except ValueError as e:
            raise _float_line_error(tb.path, lines, delim, ncols, e) from None
        if ncols is None:
            ncols = arr.shape[1]
        elif arr.shape[1] != ncols:
            raise DatasetError(f"{tb.path}: line {lines[0][0]}: {arr.shape[1]} columns, expected {ncols}")
        yield arr, tb


def _float_line_error(path: Path, lines, delim, ncols, err: Exception) -> DatasetError:
    """The first line of ``lines`` that does not parse, found on the error path only."""
    want = ncols
    for no, text in lines:
        toks = [t.strip() for t in (text.split(delim) if delim else text.split())]
        if want is None:
            want = len(toks)
        bad = next((t for t in toks if not _is_number(t)), None)
        if bad is not None:
            why = _bad_line_reason(text)
            return DatasetError(f"{path}: line {no}: cannot parse {bad!r} as a number"
                                + (f" ({why})" if why else "") + f": {text[:80]!r}")
        if len(toks) != want:
            return DatasetError(f"{path}: line {no}: {len(toks)} columns, expected {want}: {text[:80]!r}")
    return DatasetError(f"{path}: line {lines[0][0]}..{lines[-1][0]}: cannot parse numbers ({err})")


# --------------------------------------------------------------------------- .npy by rows
class NpyRows:
    """Row ranges of a ``.npy`` file via ``pread`` (no mmap, no pickle).

    ``shape``/``dtype`` from the header; ``read(a, b)`` returns rows ``[a, b)`` as a fresh array.
    A Fortran-ordered 2-D array is exposed transposed (``transposed=True``) so reads stay
    sequential; callers that need (rows, cols) semantics check that flag.
    """

    def __init__(self, path):
        self.path = check_input_file(path)
        dtype, shape, fortran, self.offset = npy_header(self.path)
        self.transposed = fortran and len(shape) > 1
        self.shape = tuple(reversed(shape)) if self.transposed else shape
        self.dtype = dtype
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * dtype.itemsize

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


# --------------------------------------------------------------------------- .npz
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def split_npz_key(source) -> tuple:
    """``"g.npz:train_mask"`` -> ``(Path("g.npz"), "train_mask")``; anything else ->
    ``(source, None)``. A path that exists as written is never split."""
    if not isinstance(source, (str, os.PathLike)):
        return source, None
    text = os.fspath(source)
    m = re.match(r"^(.*\.npz):([^/\\]+)$", text, re.IGNORECASE)
    if m and not os.path.exists(text):
        return Path(m.group(1)), m.group(2)
    return source, None


def _read_npz(path, use):
    """``use(z)`` on the opened ``.npz`` archive ``path``, never unpickling; errors name the file."""
    path = check_input_file(path)
    with open(path, "rb") as f:
        head = f.read(4)
    if head not in _ZIP_MAGIC:
        looks = "text (CSV?)" if head and all(32 <= c < 127 or c in (9, 10, 13) for c in head) else \
            ".npy" if head.startswith(b"\x93NUM") else "something else"
        raise DatasetError(f"{path}: not an .npz archive (no zip signature; it looks like {looks})")
    try:
        with np.load(path, allow_pickle=False) as z:
            return use(z)
    except DatasetError:
        raise
    except (ValueError, OSError, EOFError) as e:
        raise DatasetError(f"{path}: cannot read .npz without pickle ({e})") from None
    except Exception as e:  # zipfile.BadZipFile and friends
        raise DatasetError(f"{path}: corrupt .npz ({type(e).__name__}: {e})") from None


def npz_names(path) -> list:
    """The array names of an ``.npz`` (reads only the archive's directory)."""
    return _read_npz(path, lambda z: list(z.files))


def load_npz(path, keys=None) -> dict:
    """Arrays of an ``.npz`` (all, or only ``keys``), never unpickling."""

    def use(z):
        if keys is not None:
            missing = [k for k in keys if k not in z.files]
            if missing:
                raise DatasetError(f"{path}: no array named {missing[0]!r}; it holds {sorted(z.files)}")
        return {k: z[k] for k in (z.files if keys is None else keys)}

    return _read_npz(path, use)


def load_array_file(path, *, what: str) -> Optional[np.ndarray]:
    """A small array from ``.npy``, ``.npz`` (one array, or ``FILE.npz:KEY``) or ``None`` for a
    text table (the caller decides its column layout)."""
    from .._io import load_npy

    path, key = split_npz_key(path)
    path = Path(path)
    name = path.name.lower()
    if name.endswith(".npy"):
        check_input_file(path, what)
        return np.asarray(load_npy(path, mmap=False))
    if name.endswith(".npz"):
        arrays = load_npz(path, None if key is None else [key])
        if key is None and len(arrays) != 1:
            raise DatasetError(f"{path}: {what}: expected one array in the .npz, found {sorted(arrays)}; "
                               f"name one as {path.name}:KEY")
        return next(iter(arrays.values()))
    check_input_file(path, what)
    return None


@dataclass(frozen=True)
class SparseRows:
    """A sparse ``(n, m)`` table in CSR parts: row ``i`` has ``data[indptr[i]:indptr[i+1]]`` at
    columns ``indices[...]`` (int64 / int64 / float64). Built by :meth:`checked`."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple

    @classmethod
    def checked(cls, indptr, indices, data, shape, where: str) -> "SparseRows":
        """Validate CSR parts (consistent lengths, monotone ``indptr``, columns in range)."""
        shape = tuple(int(x) for x in np.asarray(shape).reshape(-1))
        if len(shape) != 2 or min(shape) < 0:
            raise DatasetError(f"{where}: a sparse table needs a 2-D shape, got {shape}")
        n, m = shape
        indptr, indices, data = (np.asarray(x) for x in (indptr, indices, data))
        if indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu" or data.dtype.kind not in "biuf":
            raise DatasetError(f"{where}: sparse parts must be integer indptr/indices and numeric data")
        indptr, indices = as_int64_ids(indptr, where), as_int64_ids(indices, where)
        if indptr.shape != (n + 1,) or indices.ndim != 1 or data.shape != indices.shape \
                or int(indptr[0]) != 0 or int(indptr[-1]) != indices.shape[0] or np.any(np.diff(indptr) < 0):
            raise DatasetError(f"{where}: inconsistent sparse (CSR) parts for shape {shape}")
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= m):
            raise DatasetError(f"{where}: a column index lies outside [0, {m})")
        return cls(indptr, indices, data.astype(np.float64, copy=False), (n, m))

    @classmethod
    def from_coo(cls, rows, cols, data, shape, where: str) -> "SparseRows":
        rows, cols = as_int64_ids(np.asarray(rows), where), as_int64_ids(np.asarray(cols), where)
        n = int(shape[0])
        if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= n):
            raise DatasetError(f"{where}: a row index lies outside [0, {n})")
        order = np.argsort(rows, kind="stable")
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        return cls.checked(indptr, cols[order], np.asarray(data)[order], shape, where)

    def dense_rows(self, a: int, b: int) -> np.ndarray:
        """Rows ``[a, b)`` as a dense float64 array (repeated entries add up, as in scipy)."""
        out = np.zeros((b - a, self.shape[1]), dtype=np.float64)
        lo, hi = int(self.indptr[a]), int(self.indptr[b])
        r = np.repeat(np.arange(b - a), np.diff(self.indptr[a : b + 1]))
        np.add.at(out, (r, self.indices[lo:hi]), self.data[lo:hi])
        return out


def read_sparse(path, *, num_nodes: Optional[int] = None, num_features: Optional[int] = None
                ) -> Optional[SparseRows]:
    """A sparse feature table from a ``.json`` file (``{"<node id>": [feature ids]}``,
    ``{"<node id>": {"<feature id>": value}}`` or a list with one such entry per node; listed
    ids have value 1) or a scipy sparse ``.npz`` (``scipy.sparse.save_npz``: csr, csc or coo;
    read without scipy and without pickle). ``None`` for an ``.npz`` that is not sparse.
    Rows: ``num_nodes`` or the largest node id + 1; columns: ``num_features`` or the largest
    feature id + 1."""
    path = check_input_file(path, "feature")
    where = str(path)
    if path.name.lower().endswith(".npz"):
        if not {"shape", "data"} <= set(npz_names(path)):
            return None  # a dense archive: its arrays are read once, by the caller
        z = load_npz(path)
        fmt = bytes(np.asarray(z.get("format", b"csr")).reshape(-1)[0]).decode("ascii", "replace") \
            if "format" in z else ("coo" if "row" in z else "csr")
        if fmt == "coo" and {"row", "col"} <= set(z):
            return SparseRows.from_coo(z["row"], z["col"], z["data"], z["shape"], where)
        if fmt in ("csr", "csc") and {"indptr", "indices"} <= set(z):
            if fmt == "csr":
                return SparseRows.checked(z["indptr"], z["indices"], z["data"], z["shape"], where)
            shape = tuple(int(x) for x in z["shape"])
            csc = SparseRows.checked(z["indptr"], z["indices"], z["data"], shape[::-1], where)
            cols = np.repeat(np.arange(shape[1], dtype=np.int64), np.diff(csc.indptr))
            return SparseRows.from_coo(csc.indices, cols, csc.data, shape, where)
        raise DatasetError(f"{where}: unsupported sparse format {fmt!r} (csr, csc or coo); arrays {sorted(z)}")
    raw = load_json(path)
    if isinstance(raw, list):
        raw = {i: v for i, v in enumerate(raw)}
    if not isinstance(raw, dict):
        raise DatasetError(f"{where}: expected an object of node id -> feature ids (or a list of them)")
    rows, cols, vals = [], [], []
    try:
        for k, v in raw.items():
            node = int(k)
            if isinstance(v, dict):
                items = [(int(f), float(x)) for f, x in v.items()]
            elif isinstance(v, list):
                items = [(int(f), 1.0) for f in v]
            else:
                raise TypeError
            rows.extend([node] * len(items))
            cols.extend(f for f, _ in items)
            vals.extend(x for _, x in items)
    except (TypeError, ValueError, OverflowError):
        raise DatasetError(f"{where}: entry {k!r} is not node id -> list of feature ids "
                           f"(or feature id -> value)") from None
    rows_a, cols_a = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    keys = np.asarray([int(k) for k in raw], dtype=np.int64)
    if keys.size and int(keys.min()) < 0:
        raise DatasetError(f"{where}: negative node id {int(keys.min())}")
    if cols_a.size and int(cols_a.min()) < 0:
        raise DatasetError(f"{where}: negative feature id {int(cols_a.min())}")
    n = int(num_nodes) if num_nodes is not None else (int(keys.max()) + 1 if keys.size else 0)
    if keys.size and int(keys.max()) >= n:
        raise DatasetError(f"{where}: node id {int(keys.max())} is out of range [0, {n})")
    m = int(num_features) if num_features else (int(cols_a.max()) + 1 if cols_a.size else 1)
    if cols_a.size and int(cols_a.max()) >= m:
        raise DatasetError(f"{where}: feature id {int(cols_a.max())} >= the number of features {m}")
    return SparseRows.from_coo(rows_a, cols_a, np.asarray(vals, dtype=np.float64), (n, m), where)


def load_json(path: Path):
    """A JSON document, with a ``DatasetError`` for malformed, non-UTF-8 or absurdly nested
    input (never a ``RecursionError``)."""
    import json

    try:
        with open(path, "rb") as f:
            return json.load(f)
    except RecursionError:
        raise DatasetError(f"{path}: JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: malformed JSON ({e})") from None


def as_int64_ids(a: np.ndarray, where: str) -> np.ndarray:
    """Integer ids as int64, refusing unsigned values that int64 cannot hold (they would wrap to
    negative numbers)."""
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size:
        hi = int(a.max())
        if hi > INT64_MAX:
            raise DatasetError(f"{where}: id {hi} is too large (ids must be below 2^63)")
    return a.astype(np.int64, copy=False)


# --------------------------------------------------------------------------- edges
class EdgeSource:
    """A re-iterable source of COO edge chunks ``(src int64, dst int64, values float64 (k, R))``.

    Accepts CSV/TSV/whitespace text (optionally gzipped; columns ``src_col``/``dst_col``, a
    header line is skipped; ``value_cols`` name extra numeric columns such as
    ``{"weight": 2, "timestamp": 3}``), ``.npy`` of shape ``(E, 2)`` or ``(2, E)`` (read in row
    ranges), ``.npz`` with ``src``/``dst`` (or ``source``/``destination``, ``row``/``col``,
    ``senders``/``receivers``, ``edge_index`` of shape ``(2, E)``, or the arrays named by
    ``edge_key``: one ``(2, E)``/``(E, 2)`` array or ``"SRC,DST"``; ``value_keys`` names 1-D value
    arrays; an ``.npz`` is loaded whole), or in-memory ``arrays=(src, dst)`` with ``values``.
    ``value_names`` lists the value rows in order. Each pass re-reads the source: the CSC build
    makes two passes (plus one per extra window).
    """

    def __init__(self, path=None, *, arrays=None, values: Optional[Mapping] = None,
                 block_bytes: int = DEFAULT_BLOCK, src_col: int = 0, dst_col: int = 1,
                 value_cols: Optional[Mapping[str, int]] = None, edge_key: Optional[str] = None,
                 value_keys: Optional[Mapping[str, str]] = None):
        self.path = Path(path) if path is not None else None
        self.block_bytes = check_block_bytes(block_bytes)
        self._arrays = None
        self._values: tuple = ()
        self._npy: Optional[NpyRows] = None
        self.total_bytes = 0
        self.bytes_done = 0
        value_cols = dict(value_cols or {})
        value_keys = dict(value_keys or {})
        self.value_names = tuple(values or value_cols or value_keys)
        where = str(self.path) if self.path is not None else "edges"
        if arrays is not None:
            s, d = (np.asarray(a) for a in arrays)
            self._set_arrays(s.reshape(-1), d.reshape(-1), dict(values or {}), where)
            self.kind = "arrays"
            return
        if self.path is None:
            raise DatasetError("an edge source needs a path or arrays")
        name = self.path.name.lower()
        if not name.endswith(".npz") and (edge_key or value_keys):
            raise DatasetError(f"{self.path}: --edge-key/--weight-key/--time-key name arrays in an .npz file")
        if name.endswith(".npy"):
            if value_cols:
                raise DatasetError(f"{self.path}: weight/timestamp columns need a text edge list "
                                   f"or arrays in an .npz (--weight-key/--time-key)")
            self._npy = NpyRows(self.path)
            shp = self._npy.shape
            if len(shp) != 2 or (shp[1] != 2 and shp[0] != 2) or self._npy.dtype.kind not in "iu":
                raise DatasetError(f"{self.path}: an edge .npy must be integer (E, 2) or (2, E), got {self._npy.dtype} {shp}")
            self.kind = "npy"
            self.total_bytes = self.path.stat().st_size
        elif name.endswith(".npz"):
            if value_cols:
                raise DatasetError(f"{self.path}: in an .npz, name value arrays with --weight-key/--time-key")
            s, d = self._npz_pair(edge_key)
            z = load_npz(self.path, list(value_keys.values())) if value_keys else {}
            self._set_arrays(s, d, {n: z[k] for n, k in value_keys.items()}, where)
            self.kind = "arrays"
        elif name.endswith((".yaml", ".yml")):
            raise DatasetError(
                f"{self.path}: a YAML file, not an edge list" + (
                    "; a GraphBolt OnDiskDataset's metadata: import its folder with 'graphfeed "
                    "prepare graphbolt FOLDER OUT'" if name in ("metadata.yaml", "metadata.yml")
                    else ""))
        else:
            if value_keys or edge_key:
                raise DatasetError(f"{self.path}: --edge-key/--weight-key/--time-key are for .npz edge files")
            self._kinds = self._column_kinds(int(src_col), int(dst_col), value_cols)
            self._cols = (int(src_col), int(dst_col))
            # float columns come out in column order; rows of the yielded values follow value_names
            ranks = sorted(value_cols.values())
            self._value_rows = np.array([ranks.index(value_cols[n]) for n in self.value_names], dtype=np.int64)
            self.kind = "text"
            check_input_file(self.path, "edge list")
            self.total_bytes = self.path.stat().st_size

    @staticmethod
    def _column_kinds(src_col: int, dst_col: int, value_cols: Mapping[str, int]) -> np.ndarray:
        from ._kernels import COL_FLOAT, COL_INT, COL_SKIP

        cols = {"source": src_col, "destination": dst_col, **{f"{k} column": v for k, v in value_cols.items()}}
        for what, c in cols.items():
            check_int(f"the {what} (a column index)", c, 0, 1023)
        seen: dict = {}
        for what, c in cols.items():
            if c in seen:
                raise DatasetError(f"the {seen[c]} and the {what} are both column {c}; they must differ")
            seen[c] = what
        kinds = np.full(max(cols.values()) + 1, COL_SKIP, dtype=np.int64)
        # the parser returns int columns in column order; __iter__ swaps them when dst_col < src_col
        kinds[src_col] = kinds[dst_col] = COL_INT
        for c in value_cols.values():
            kinds[c] = COL_FLOAT
        return kinds

    def _npz_pair(self, edge_key: Optional[str]):
        if edge_key:
            keys = [k.strip() for k in edge_key.split(",")]
            if len(keys) not in (1, 2) or not all(keys):
                raise DatasetError(f"edge key {edge_key!r}: give one array name or SRC,DST")
            z = load_npz(self.path, keys)
            if len(keys) == 2:
                return z[keys[0]], z[keys[1]]
            ei = z[keys[0]]
            if ei.ndim == 2 and ei.shape[0] == 2:
                return ei[0], ei[1]
            if ei.ndim == 2 and ei.shape[1] == 2:
                return ei[:, 0], ei[:, 1]
            raise DatasetError(f"{self.path}: array {keys[0]!r} must have shape (2, E) or (E, 2), got {ei.shape}")
        z = load_npz(self.path)
        for a, b in (("src", "dst"), ("source", "destination"), ("row", "col"), ("senders", "receivers")):
            if a in z and b in z:
                return z[a], z[b]
        if "edge_index" in z:
            ei = z["edge_index"]
            if ei.ndim != 2 or ei.shape[0] != 2:
                raise DatasetError(f"{self.path}: edge_index must have shape (2, E), got {ei.shape}")
            return ei[0], ei[1]
        raise DatasetError(
            f"{self.path}: no edges found; expected arrays src/dst, source/destination, row/col "
            f"or edge_index, found {sorted(z)}; name yours with --edge-key"
        )

    def _set_arrays(self, s, d, values: dict, where: str) -> None:
        for arr in (s, d):
            if arr.dtype.kind not in "iu" or arr.ndim != 1 or arr.shape != s.shape:
                raise DatasetError(f"{where}: edge arrays must be 1-D integers of equal length, "
                                   f"got {s.dtype} {s.shape} and {d.dtype} {d.shape}")
        vals = []
        for n, v in values.items():
            v = np.asarray(v)
            if v.ndim != 1 or v.shape != s.shape or v.dtype.kind not in "iuf b":
                raise DatasetError(f"{where}: edge {n} must be 1-D numbers, one per edge ({s.shape[0]}), "
                                   f"got {v.dtype} {v.shape}")
            vals.append(v)
        self._arrays = (as_int64_ids(s, f"{where}: source"), as_int64_ids(d, f"{where}: destination"))
        self._values = tuple(vals)
        self.total_bytes = sum(a.nbytes for a in (*self._arrays, *vals))

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        self.bytes_done = 0
        rows = max(1, self.block_bytes // 16)
        k = len(self.value_names)
        if self._arrays is not None:
            s, d = self._arrays
            for a in range(0, s.shape[0], rows):
                vals = np.empty((k, min(rows, s.shape[0] - a)), dtype=np.float64)
                for j, v in enumerate(self._values):
                    vals[j] = v[a : a + rows]
                yield (np.ascontiguousarray(s[a : a + rows]), np.ascontiguousarray(d[a : a + rows]), vals)
                self.bytes_done = min(self.total_bytes, (a + rows) * self.total_bytes // max(1, s.shape[0]))
            return
        if self._npy is not None:
            r = self._npy
            if r.shape[1] == 2:
                for a, block in r.chunks(rows):
                    yield (as_int64_ids(block[:, 0], str(r.path)), as_int64_ids(block[:, 1], str(r.path)),
                           np.zeros((0, block.shape[0])))
                    self.bytes_done = r.offset + (a + block.shape[0]) * r.row_bytes
            else:  # (2, E): two row-contiguous halves
                e = r.shape[1]
                item = r.dtype.itemsize
                for a in range(0, e, rows):
                    b = min(e, a + rows)
                    yield (as_int64_ids(self._read_flat(r, a, b), str(r.path)),
                           as_int64_ids(self._read_flat(r, e + a, e + b), str(r.path)), np.zeros((0, b - a)))
                    self.bytes_done = r.offset + 2 * b * item
            return
        tb = TextBlocks(self.path, block_bytes=self.block_bytes, columns=len(self._kinds))
        swap = self._cols[0] > self._cols[1]  # int columns come out in column order
        for block, line_no in tb:
            ints, floats = parse_block(block, self._kinds, self.path, line_no)
            s, d = (ints[1], ints[0]) if swap else (ints[0], ints[1])
            yield s, d, floats[self._value_rows]
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
