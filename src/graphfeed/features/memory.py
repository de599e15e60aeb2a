"""In-memory features over a torch tensor or numpy array (memory maps included)."""

from __future__ import annotations

import warnings
from concurrent.futures import Executor
from typing import Optional

import numpy as np
import torch

from .._io import load_npy
from ..errors import GraphfeedError
from .base import Feature


def to_tensor(data) -> torch.Tensor:
    """A CPU/any-device tensor sharing memory with ``data`` when it is a numpy array."""
    if isinstance(data, torch.Tensor):
        return data
    if isinstance(data, np.ndarray):
        if data.dtype.hasobject:
            raise GraphfeedError("object arrays cannot be features")
        if data.dtype == np.uint16 or data.dtype == np.uint32 or data.dtype == np.uint64:
            raise GraphfeedError(f"dtype {data.dtype} has no torch equivalent; cast it first")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # read-only memmaps; we never write
            return torch.from_numpy(data)
    raise GraphfeedError(f"expected a torch.Tensor or numpy.ndarray, got {type(data).__name__}")


class InMemoryFeature(Feature):
    """Rows held in a tensor (or a numpy array / read-only memory map, shared without a copy).

    ``read`` is one ``torch.index_select`` (multi-threaded, GIL released), written into ``out``
    when given. A 1-D array is treated as one scalar per row (e.g. labels).
    """

    kind = "in-memory"

    def __init__(self, data):
        t = to_tensor(data)
        if t.dim() == 0:
            raise GraphfeedError("a feature needs at least one dimension (rows)")
        self._data = t

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
        # one index_select: torch's own intra-op threads, nothing to hand to ``executor``
        if self._data.device.type != "cpu":
            ids = ids.to(self._data.device, non_blocking=True)
        if out is None:
            return torch.index_select(self._data, 0, ids)
        return torch.index_select(self._data, 0, ids, out=out)


def open_npy(path, *, mmap: bool = False) -> InMemoryFeature:
    """The ``"ram"`` backend: ``path``'s rows loaded into memory (``mmap=True``: a read-only
    memory map shared with the page cache instead of a copy)."""
    return InMemoryFeature(load_npy(path, mmap=mmap))
