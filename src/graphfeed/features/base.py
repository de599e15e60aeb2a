"""The feature interface: a table of rows addressed by node id, read in batches.

Backends (in memory, disk, LMDB) implement the protected hook ``_read``; wrappers (caches,
pinning) wrap any ``Feature``. The public ``read`` validates ids once, at the boundary.
``close()`` releases what a feature holds (files, maps, threads; a no-op by default) and
``with feature:`` closes it at the end of the block.
"""

from __future__ import annotations

import abc
from concurrent.futures import Executor
from typing import Iterator, Mapping, Optional

import numpy as np
import torch

from ..errors import GraphfeedError


#: integer dtypes ids may come in (as int64 after :func:`as_id_tensor`)
_ID_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8)
#: torch's wider unsigned dtypes (torch >= 2.3), read through numpy: torch has few ops for them
_UNSIGNED = tuple(d for d in (getattr(torch, n, None) for n in ("uint16", "uint32", "uint64"))
                  if d is not None)
_INT64_MAX = (1 << 63) - 1


def as_id_tensor(ids, *, name: str = "ids", num_rows: Optional[int] = None,
                 what: Optional[str] = None) -> torch.Tensor:
    """Normalise ids (tensor, ndarray, list) to a 1-D int64 tensor without copying when they
    already are one (a tensor stays on its device). Unsigned ids are accepted; one past int64
    is refused with the value given (not its wrapped negative), in ``[0, num_rows)`` ``for
    what`` when the caller names them."""
    if isinstance(ids, torch.Tensor) and ids.dtype in _UNSIGNED:
        ids = ids.detach().cpu().numpy()
    if isinstance(ids, torch.Tensor):
        t = ids
    else:
        if isinstance(ids, (str, bytes)) or ids is None:
            raise GraphfeedError(f"{name} must be 1-D integers, got {type(ids).__name__}")
        try:
            a = np.asarray(ids)
        except (ValueError, TypeError):  # a ragged list
            raise GraphfeedError(f"{name} must be 1-D integers, got a {type(ids).__name__} "
                                 f"numpy cannot make an array of") from None
        if a.size == 0:
            a = a.astype(np.int64)
        if a.dtype.kind not in "iu":
            raise GraphfeedError(f"{name} must be integers, got dtype {a.dtype}")
        if a.ndim != 1:
            raise GraphfeedError(f"{name} must be 1-D, got shape {a.shape}")
        if a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size and int(a.max()) > _INT64_MAX:
            bound = f"[0, {num_rows})" if num_rows is not None else "[0, 2**63)"
            raise GraphfeedError(f"id {int(a.max())} is out of range {bound}"
                                 + (f" for {what}" if what else f" ({name} are int64)"))
        if a.dtype.kind == "u" and a.dtype.itemsize >= 2:  # torch lacks most ops on these
            a = a.astype(np.int64)
        a = np.ascontiguousarray(a)
        if not a.flags.writeable:  # a read-only map (a part's splits): torch wants writable
            a = a.copy()
        t = torch.from_numpy(a)
    if t.dim() != 1:
        raise GraphfeedError(f"{name} must be 1-D, got shape {tuple(t.shape)}")
    if t.dtype not in _ID_DTYPES:
        raise GraphfeedError(f"{name} must be an integer tensor, got {t.dtype}")
    if t.dtype != torch.int64:
        t = t.to(torch.int64)
    return t


def check_id_range(ids: torch.Tensor, num_rows: int, *, what: str = "feature") -> None:
    """Raise a ``GraphfeedError`` naming the first bad id if any is outside ``[0, num_rows)``."""
    if ids.numel() == 0:
        return
    lo = int(ids.min())
    hi = int(ids.max())
    if lo < 0 or hi >= num_rows:
        bad = lo if lo < 0 else hi
        raise GraphfeedError(f"id {bad} is out of range [0, {num_rows}) for {what}")


class Feature(abc.ABC):
    """Rows of a fixed shape and dtype, indexed by integer id.

    ``read(ids)`` returns a tensor of shape ``(len(ids), *row_shape)`` on CPU (or on the device a
    GPU-side backend lives on), in the order of ``ids``; duplicated and unsorted ids are allowed.
    Implementations override ``_read(ids, out, executor)``, which receives validated int64 ids,
    and ``close()`` when they hold files, maps or threads.
    """

    #: A short name for messages ("in-memory", "disk", "lmdb", ...).
    kind: str = "feature"

    @property
    @abc.abstractmethod
    def shape(self) -> tuple[int, ...]:
        """``(num_rows, *row_shape)``."""

    @property
    @abc.abstractmethod
    def dtype(self) -> torch.dtype:
        ...

    @property
    def num_rows(self) -> int:
        return int(self.shape[0])

    @property
    def row_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[1:])

    @property
    def row_nbytes(self) -> int:
        n = torch.empty((), dtype=self.dtype).element_size()
        for s in self.row_shape:
            n *= int(s)
        return n

    @property
    def nbytes(self) -> int:
        return self.row_nbytes * self.num_rows

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def __len__(self) -> int:
        return self.num_rows

    def read(self, ids, *, out: Optional[torch.Tensor] = None, check: bool = True,
             executor: Optional[Executor] = None) -> torch.Tensor:
        """Rows for ``ids`` (1-D integers), shape ``(len(ids), *row_shape)``.

        ``out``, if given, must be a contiguous torch tensor of exactly that shape, this dtype and
        on this feature's device; the rows are written into it (lets the loader reuse buffers).
        Ids on a GPU given to a CPU feature are read through a CPU copy. ``check=False`` skips
        the id range check when the caller already guarantees it (the sampler's ids always are
        in range).
        ``executor``: where a backend that splits a large read into chunks runs them (the
        loader's intra-batch executor; chunks never submit further work). ``None``: the
        feature's own threads (``num_threads``), started on first use, or the calling thread.
        """
        what = f"{self.kind} feature of {self.num_rows} rows"
        ids = as_id_tensor(ids, num_rows=self.num_rows, what=what)
        if not isinstance(check, bool):
            raise GraphfeedError(f"check must be True or False, got {type(check).__name__}")
        if executor is not None and not isinstance(executor, Executor):
            raise GraphfeedError(f"executor must be a concurrent.futures.Executor or None, got "
                                 f"{type(executor).__name__}")
        if ids.device != self.device and self.device.type == "cpu":
            ids = ids.cpu()  # a GPU sampler's ids for a CPU feature (the hook reads CPU ids)
        if check:
            check_id_range(ids, self.num_rows, what=what)
        if out is not None:
            want = (ids.shape[0], *self.row_shape)
            if not isinstance(out, torch.Tensor) or tuple(out.shape) != want or \
                    out.dtype != self.dtype or out.device != self.device or \
                    not out.is_contiguous():
                got = (f"{'' if out.is_contiguous() else 'a non-contiguous '}{out.dtype} "
                       f"{tuple(out.shape)} on {out.device}" if isinstance(out, torch.Tensor)
                       else f"a {type(out).__module__}.{type(out).__name__}")
                raise GraphfeedError(f"out must be a contiguous torch tensor of dtype "
                                     f"{self.dtype}, shape {want} on {self.device}, got {got}")
        return self._read(ids, out, executor)

    @abc.abstractmethod
    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor],
              executor: Optional[Executor]) -> torch.Tensor:
        """Backend hook: ``ids`` is a validated 1-D int64 CPU tensor, ``out`` a checked buffer
        or ``None``; ``executor`` as in :meth:`read`."""

    def close(self) -> None:
        """Release files, memory maps and threads this feature holds (no-op here). Idempotent;
        a later ``read`` reopens what it needs."""

    def counters(self) -> dict:
        """What this feature and every feature it wraps counted since they were made or
        :meth:`reset_counters`, by kind: ``{"cached": {"hits": ..., ...}, "disk": {"reads":
        ..., ...}}`` for a cache over direct disk reads. A feature that counts nothing gives
        ``{}`` (a wrapper: what it wraps)."""
        return {}

    def reset_counters(self) -> None:
        """Zero :meth:`counters` (this feature's and what it wraps)."""

    def warm(self) -> int:
        """Fill what a static cache in this feature (or in what it wraps) will hold, now rather
        than on first misses; returns the rows filled (0: nothing to warm)."""
        return 0

    def __enter__(self) -> "Feature":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype})"


class WrappedFeature(Feature):
    """Base of wrappers that add behaviour (caching, pinning) around any ``Feature``: the rows'
    shape and dtype are the wrapped feature's; subclasses implement ``_read``.

    A wrapper owns the feature it wraps: ``close()`` closes it too (subclasses release their
    own resources, then call ``super().close()``).
    """

    feature: Feature

    def close(self) -> None:
        self.feature.close()

    def counters(self) -> dict:
        return self.feature.counters()

    def reset_counters(self) -> None:
        self.feature.reset_counters()

    def warm(self) -> int:
        return self.feature.warm()

    @property
    def shape(self) -> tuple[int, ...]:
        return self.feature.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.feature.dtype


class FeatureStore(Mapping[str, Feature]):
    """Named features of one graph (``"feat"``, ``"label"``, ...). Labels are a feature like any
    other."""

    def __init__(self, features: Optional[Mapping[str, Feature]] = None):
        self._features: dict[str, Feature] = dict(features or {})

    def __getitem__(self, name: str) -> Feature:
        try:
            return self._features[name]
        except KeyError:
            raise KeyError(
                f"no feature named {name!r}; available: {sorted(self._features)}"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._features)

    def __len__(self) -> int:
        return len(self._features)

    def __setitem__(self, name: str, feature: Feature) -> None:
        if not isinstance(feature, Feature):
            raise GraphfeedError(f"feature {name!r} must be a graphfeed Feature, got {type(feature)}")
        self._features[name] = feature

    def read(self, name: str, ids, **kw) -> torch.Tensor:
        return self[name].read(ids, **kw)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._features.items())
        return f"FeatureStore({inner})"
