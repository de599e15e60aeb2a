"""In-memory features over a torch tensor or numpy array (memory maps included)."""

from __future__ import annotations

import warnings
from concurrent.futures import Executor
from typing import Optional

import numpy as np
import torch

from .._checks import check_int
from .._io import load_npy
from .._threads import ChunkPool, PoolOwner
from ..errors import GraphfeedError
from ._rows import gather_words, word_dtype
from .base import Feature


def to_tensor(data, dtype=None) -> torch.Tensor:
    """A CPU/any-device tensor sharing memory with ``data`` when it is a numpy array.

    ``dtype`` (e.g. ``"bfloat16"``): the rows' dtype where ``data`` holds the bits of one numpy
    lacks (a uint16 array of bf16 bits, as a dataset stores them): the tensor is a view of those
    bits as ``dtype``, no copy (:func:`._rows.torch_dtype` checks the pair)."""
    if isinstance(data, np.ndarray):
        if data.dtype.hasobject:
            raise GraphfeedError("object arrays cannot be features")
        if dtype is not None:
            from ._rows import torch_dtype

            want = torch_dtype(data.dtype, source="feature array", as_dtype=dtype)
            if data.dtype.kind == "u" and data.dtype.itemsize > 1:  # torch < 2.3 has no uint16
                data = data.view(np.dtype(f"i{data.dtype.itemsize}"))
            return to_tensor(data).view(want)
        if data.dtype == np.uint16 or data.dtype == np.uint32 or data.dtype == np.uint64:
            raise GraphfeedError(f"dtype {data.dtype} has no torch equivalent; cast it first "
                                 f"(or, for bfloat16 bits, pass dtype='bfloat16')")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # read-only memmaps; we never write
            return torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        if dtype is not None and str(data.dtype) != f"torch.{str(dtype).removeprefix('torch.')}":
            raise GraphfeedError(f"a {data.dtype} tensor given with dtype={dtype!r}: the "
                                 f"dtype option is for numpy arrays of bits")
        return data
    raise GraphfeedError(f"expected a torch.Tensor or numpy.ndarray, got {type(data).__name__}")


def _word_rows(t: torch.Tensor) -> Optional[np.ndarray]:
    """The ``(rows, words)`` view the CPU gather reads, or ``None`` where ``index_select`` is
    used (a tensor on a device, non-contiguous or empty)."""
    if t.device.type != "cpu" or not t.is_contiguous() or t.numel() == 0:
        return None
    nb = t.element_size() * (t.numel() // t.shape[0])
    return t.view(torch.uint8).numpy().reshape(t.shape[0], nb).view(word_dtype(nb))


class InMemoryFeature(PoolOwner, Feature):
    """Rows held in a tensor (or a numpy array / read-only memory map, shared without a copy).

    On CPU, ``read`` gathers with the same prefetching numba kernel as the disk and LMDB
    backends (GIL released), in chunks on the ``executor`` it is given (the loader's) or on
    ``num_threads`` threads of its own: never through torch's intra-op (OpenMP) threads, which
    under a loader's threads would oversubscribe the cores and spin. A tensor on a GPU (or a
    UVA view of pinned rows) is read with ``torch.index_select`` on that device, as is a
    non-contiguous CPU tensor. Rows go into ``out`` when given. A 1-D array is treated as one
    scalar per row (e.g. labels).

    ``huge_pages``: a table of 32 MB or more is backed by transparent huge pages where the
    kernel allows (:func:`._hugepages.advise_huge_pages`), which spares the gather a TLB miss
    per row: private anonymous memory is collapsed into huge pages now (numpy already asks for
    them on its large arrays); a memory map of a file is marked, so that pages read into the
    page cache through it arrive as 2 MiB folios. Shared anonymous memory is left as it is.

    ``dtype``: the rows' dtype where ``data`` is a numpy array of the bits of one numpy lacks
    (``"bfloat16"`` over uint16 bits, as a dataset stores them; :func:`to_tensor`).
    """

    kind = "in-memory"

    def __init__(self, data, *, num_threads: int = 2, huge_pages: bool = True, dtype=None):
        if not isinstance(huge_pages, bool):
            raise GraphfeedError(f"huge_pages must be True or False, got "
                                 f"{type(huge_pages).__name__}")
        t = to_tensor(data, dtype)
        if t.layout != torch.strided:  # reads gather rows of a dense table
            raise GraphfeedError(f"data must be a dense tensor, got a "
                                 f"{str(t.layout).removeprefix('torch.')} one; call .to_dense()")
        if t.device.type == "meta":
            raise GraphfeedError("data is on the meta device: it holds no values to read")
        if t.dim() == 0:
            raise GraphfeedError("a feature needs at least one dimension (rows)")
        self._data = t
        self._pool = ChunkPool(check_int("num_threads", num_threads, 1), "gf-ram")
        self.huge_pages = bool(huge_pages)
        self._words = _word_rows(t)
        self._advise()

    def _advise(self) -> None:
        if self.huge_pages and self._words is not None:
            from ._hugepages import advise_huge_pages

            advise_huge_pages(self._data)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_words"] = None  # a view of _data: pickling it would copy the rows twice
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.huge_pages = state.get("huge_pages", True)
        self._words = _word_rows(self._data)
        self._advise()  # unpickled rows are new memory

    @property
    def data(self) -> torch.Tensor:
        return self._data

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self._data.dtype

    @property
    def device(self) -> torch.device:
        return self._data.device

    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor],
              executor: Optional[Executor]) -> torch.Tensor:
        if self._words is not None:
            if out is None:
                out = torch.empty((ids.shape[0], *self._data.shape[1:]), dtype=self._data.dtype)
            gather_words(self._words, ids.numpy(), out, self.num_threads,
                         self._executor(executor))
            return out
        if self._data.device.type != "cpu":
            ids = ids.to(self._data.device, non_blocking=True)
        if out is None:
            return torch.index_select(self._data, 0, ids)
        return torch.index_select(self._data, 0, ids, out=out)

    def close(self) -> None:
        """Stop the feature's own gather threads (if started); the rows stay."""
        self._pool.close()


def open_npy(path, *, mmap: bool = False, dtype=None) -> InMemoryFeature:
    """The ``"ram"`` backend: ``path``'s rows loaded into memory (``mmap=True``: a read-only
    memory map shared with the page cache instead of a copy); ``dtype``: as
    :class:`InMemoryFeature`'s (``"bfloat16"`` for a file of bf16 bits)."""
    try:
        return InMemoryFeature(load_npy(path, mmap=mmap), dtype=dtype)
    except GraphfeedError as e:
        raise type(e)(f"{path}: {e}") from None
