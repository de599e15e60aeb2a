"""Rows as bytes: the torch dtype of a stored numpy dtype (or of the bits of one numpy lacks,
such as bfloat16), word views for the copy kernels (:mod:`._gather`), and
:class:`StoredFeature`, the base of the backends over stored rows.

Importing this module loads no numba (the kernels load with the backends that use them).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from .._threads import PoolOwner, ProcessLocal
from .._dtypes import BITS_DTYPES
from ..errors import DatasetError
from .base import Feature

#: Batches smaller than this many rows are gathered on the calling thread.
PARALLEL_MIN_ROWS = 4096

_TORCH_DTYPES = {
    np.dtype(np.float16): torch.float16,
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
    np.dtype(np.int8): torch.int8,
    np.dtype(np.int16): torch.int16,
    np.dtype(np.int32): torch.int32,
    np.dtype(np.int64): torch.int64,
    np.dtype(np.uint8): torch.uint8,
    np.dtype(np.bool_): torch.bool,
    np.dtype(np.complex64): torch.complex64,
    np.dtype(np.complex128): torch.complex128,
}


def torch_dtype(dtype: np.dtype, *, source: str = "array", as_dtype=None) -> torch.dtype:
    """The torch dtype of rows stored as numpy ``dtype``, or a ``DatasetError`` naming
    ``source``.

    ``as_dtype`` (a name such as ``"bfloat16"``, or a torch dtype): what the rows are, where
    the stored dtype cannot say: a dtype numpy lacks is stored as the bits of a numpy dtype of
    the same width (``graphfeed._dtypes.BITS_DTYPES``: bfloat16 as uint16), which only
    the dataset's metadata tells apart from plain integers. Every backend reads rows as bytes,
    so a dtype is this one table entry, not a code path per backend. The stored dtype must be
    the one ``as_dtype`` is stored as (or ``as_dtype`` itself)."""
    dtype = np.dtype(dtype)
    dtype = dtype.newbyteorder("=") if dtype.byteorder == ">" else dtype
    if as_dtype is not None:
        name = str(as_dtype).removeprefix("torch.")
        if name in BITS_DTYPES:
            if dtype != np.dtype(BITS_DTYPES[name]):
                raise DatasetError(f"{source}: holds {dtype}, but {name} rows are stored as "
                                   f"{BITS_DTYPES[name]} bits")
            return getattr(torch, name)
        want = getattr(torch, name, None)
        if _TORCH_DTYPES.get(dtype) != want or want is None:
            raise DatasetError(f"{source}: holds {dtype}, not {name}")
        return want
    try:
        return _TORCH_DTYPES[dtype]
    except KeyError:
        held = [k for k, v in BITS_DTYPES.items() if np.dtype(v) == dtype]
        hint = f"; if it holds {held[0]} bits, say so (dtype={held[0]!r})" if held else ""
        raise DatasetError(f"{source}: dtype {dtype} cannot be a feature (no torch "
                           f"equivalent){hint}") from None


def held_as_bits(dtype: torch.dtype) -> bool:
    """Whether numpy holds ``dtype``'s values only as bits (bfloat16: ``BITS_DTYPES``)."""
    return str(dtype).removeprefix("torch.") in BITS_DTYPES


def numpy_rows(t: torch.Tensor) -> tuple[np.ndarray, Optional[str]]:
    """``(rows, dtype name)``: a tensor as numpy (on the CPU, no copy when it is there and
    contiguous), and the name of its dtype where numpy has none: then the rows are its bits
    (``BITS_DTYPES``: a bfloat16 tensor gives uint16 bits and ``"bfloat16"``), else ``None``."""
    name = str(t.dtype).removeprefix("torch.")
    t = t.detach().cpu()
    if not held_as_bits(t.dtype):
        return t.numpy(), None
    t = t.contiguous()
    bits = t.view(torch.uint8).numpy().view(BITS_DTYPES[name])  # torch < 2.3 has no uint16
    return bits.reshape(tuple(t.shape)), name


def word_dtype(row_nbytes: int) -> np.dtype:
    """The widest unsigned integer type that divides a row, so kernels copy words, not bytes."""
    for w in (8, 4, 2):
        if row_nbytes % w == 0:
            return np.dtype(f"u{w}")
    return np.dtype(np.uint8)


def word_view(t: torch.Tensor, word: np.dtype) -> np.ndarray:
    """A 2-D word view ``(rows, words_per_row)`` of a contiguous CPU tensor (no copy)."""
    return t.view(torch.uint8).numpy().reshape(t.shape[0], -1).view(word)


def array_words(a) -> np.ndarray:
    """:func:`word_view` of a C-contiguous numpy array of rows (a memory map included), in the
    widest word that divides a row (:func:`word_dtype`), sharing its memory; an array of no
    rows keeps its row width, and rows of no bytes are ``(rows, 0)`` bytes."""
    a = np.asarray(a)
    n = a.shape[0]
    b = a.reshape(n, int(np.prod(a.shape[1:], dtype=np.int64))).view(np.uint8)
    return b.view(word_dtype(b.shape[1])) if b.shape[1] else b


def tensor_words(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor of rows on any device as ``(rows, words)``, sharing its memory: int32
    words where a row's bytes are a multiple of 4, else bytes (what the GPU cache's gather
    kernel copies: two word types, so few compiled variants)."""
    b = t.reshape(t.shape[0], int(np.prod(t.shape[1:], dtype=np.int64))).view(torch.uint8)
    return b.view(torch.int32) if b.shape[1] % 4 == 0 else b


def gather_words(src: np.ndarray, ids: np.ndarray, out: torch.Tensor, parts: int,
                 executor) -> None:
    """``out[i] = rows[ids[i]]`` where ``src`` is the rows' ``(rows, words)`` view (RAM or a
    memory map): the prefetching gather kernel, in up to ``parts`` chunks on ``executor``
    (batches under ``PARALLEL_MIN_ROWS`` rows on the calling thread). ``ids`` are in range."""
    from .._threads import run_chunks
    from ._gather import gather_rows

    n = int(ids.shape[0])
    if n == 0 or src.shape[1] == 0:
        return
    dst = word_view(out, src.dtype)
    run_chunks(lambda s, e: gather_rows(src, ids, dst, s, e), n, parts, executor,
               serial_below=PARALLEL_MIN_ROWS)


class StoredFeature(PoolOwner, ProcessLocal, Feature):
    """Base of the backends over rows stored as bytes of one numpy dtype (``DiskFeature``,
    ``LMDBFeature``).

    The layout is read once from the store (:meth:`_set_layout`); per-process handles (maps,
    descriptors, environments) follow :class:`~graphfeed._threads.ProcessLocal`; large reads
    run in chunks on the executor a read is given, else on the own ``_pool``.
    """

    def _set_layout(self, np_dtype, shape, source: str, as_dtype=None) -> None:
        """``as_dtype``: see :func:`torch_dtype` (the rows' dtype where the stored one is the
        bits of a dtype numpy lacks)."""
        self._np_dtype = np.dtype(np_dtype)
        self._dtype = torch_dtype(self._np_dtype, source=source, as_dtype=as_dtype)
        self._shape = tuple(int(s) for s in shape)
        self._row_nbytes = int(np.prod(self._shape[1:], dtype=np.int64)) * self._np_dtype.itemsize

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    def _output(self, n: int, out: Optional[torch.Tensor]) -> torch.Tensor:
        """``out``, or a new ``(n, *row_shape)`` tensor."""
        return torch.empty((n, *self._shape[1:]), dtype=self._dtype) if out is None else out
