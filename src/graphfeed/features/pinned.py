"""Pinned features: ``PinnedFeature(feature)`` page-locks an in-memory feature's rows and writes
reads into pinned buffers (fast ``non_blocking`` host-to-device copies); ``pin_memory(obj)`` pins a
tensor, a feature or a graph. The pinning itself lives at the bottom floor
(:mod:`graphfeed._pinning`), shared with the graph and the GPU sampler.

On a build or machine without CUDA a ``PinnedFeature`` behaves exactly like the feature it wraps,
with one ``RuntimeWarning``.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Optional

import torch

from .._pinning import cuda_available, pin_tensor, unpin, uva_tensor, warn_no_cuda
from ..errors import GraphfeedError
from .base import Feature, WrappedFeature

__all__ = ["PinnedFeature", "pin_memory", "pin_tensor", "unpin", "uva_tensor"]


class PinnedFeature(WrappedFeature):
    """A feature whose rows (when in memory) are page-locked and whose reads land in pinned
    buffers, ready for ``.to("cuda", non_blocking=True)``.

    Wraps any feature; an ``InMemoryFeature``'s tensor is pinned in place (or copied once).
    ``uva(device)`` gives a CUDA view of the pinned rows for GPU-side gathers. Without CUDA it
    behaves exactly like the wrapped feature.
    """

    kind = "pinned"

    def __init__(self, feature: Feature, *, pin_outputs: bool = True):
        if not isinstance(feature, Feature):
            raise GraphfeedError(f"PinnedFeature wraps a graphfeed Feature, got {type(feature).__name__}")
        if not isinstance(pin_outputs, bool):
            raise GraphfeedError(f"pin_outputs must be True or False, got "
                                 f"{type(pin_outputs).__name__}")
        self.feature = feature
        self._cuda = cuda_available()
        self.pin_outputs = bool(pin_outputs) and self._cuda
        self._data: Optional[torch.Tensor] = None
        from .memory import InMemoryFeature

        if isinstance(feature, InMemoryFeature) and feature.device.type == "cpu":
            self._data = pin_tensor(feature.data.contiguous())
        elif not self._cuda:
            warn_no_cuda()

    @property
    def data(self) -> Optional[torch.Tensor]:
        """The pinned rows (``None`` when the wrapped feature is not in memory)."""
        return self._data

    @property
    def is_pinned(self) -> bool:
        return self._data is not None and self._data.is_pinned()

    def uva(self, device="cuda") -> torch.Tensor:
        if self._data is None:
            raise GraphfeedError(f"{self.feature!r} is not in memory; only in-memory features have a UVA view")
        return uva_tensor(self._data, device)

    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor],
              executor: Optional[Executor]) -> torch.Tensor:
        if out is None and self.pin_outputs:
            out = torch.empty((ids.shape[0], *self.row_shape), dtype=self.dtype, pin_memory=True)
        # host reads go through the wrapped feature (its prefetching gather on the executor,
        # not torch's OpenMP threads); the pinned rows serve the GPU through uva()
        return self.feature.read(ids, out=out, check=False, executor=executor)

    def close(self) -> None:
        """Unregister in-place pinned rows now (otherwise at exit; while a :meth:`uva` view is
        alive, when the last one is freed) and close the wrapped feature (the wrapper owns
        it). Idempotent; later reads still return the rows."""
        if self._data is not None:
            unpin(self._data)
        super().close()

    def __getstate__(self):
        return {"feature": self.feature, "pin_outputs": self.pin_outputs}

    def __setstate__(self, state):
        self.__init__(state["feature"], pin_outputs=state["pin_outputs"])

    def __repr__(self) -> str:
        return f"PinnedFeature({self.feature!r}, pinned={self.is_pinned})"


def pin_memory(obj):
    """Pin a tensor, an ``InMemoryFeature`` (-> ``PinnedFeature``) or a ``CSCGraph`` (in place)."""
    if isinstance(obj, torch.Tensor):
        return pin_tensor(obj)
    if isinstance(obj, Feature):
        return obj if isinstance(obj, PinnedFeature) else PinnedFeature(obj)
    if hasattr(obj, "indptr") and hasattr(obj, "indices"):
        return obj.pin_memory()
    raise GraphfeedError(f"cannot pin a {type(obj).__name__}")
