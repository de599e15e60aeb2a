"""Several features read as one: the row of a node is its rows of each, side by side.

``graphfeed train --inputs feat_0,feat_1`` trains on the features a dataset stores apart (a
GraphBolt folder's ``feat_0`` and ``feat_1``): :class:`JoinedFeature` reads each at the same ids
(each through its own backend, cache or device) and concatenates them, widened to one dtype
(``torch.promote_types`` of theirs: float32 beside uint8 or bfloat16). Nothing is copied ahead
of time; a batch costs one read per feature and one concatenation of its rows.
"""

from __future__ import annotations

from concurrent.futures import Executor
from functools import reduce
from typing import Optional, Sequence

import torch

from ..errors import GraphfeedError
from .base import Feature

__all__ = ["JoinedFeature"]


class JoinedFeature(Feature):
    """``features`` (at least one, the same row count and device) read as one feature of
    ``(num_rows, sum of their row widths)`` in ``names``' order. Owns them: :meth:`close`
    closes each."""

    kind = "joined"

    def __init__(self, features: Sequence[Feature], names: Optional[Sequence[str]] = None):
        self.features = list(features)
        self.names = list(names) if names is not None else [f"#{i}" for i in
                                                                 range(len(self.features))]
        if not self.features or len(self.names) != len(self.features):
            raise GraphfeedError("JoinedFeature needs at least one feature, and one name each")
        rows = {int(f.num_rows) for f in self.features}
        devices = {str(f.device) for f in self.features}
        if len(rows) > 1 or len(devices) > 1:
            got = ", ".join(f"{n}: {f.num_rows} rows on {f.device}"
                            for n, f in zip(self.names, self.features))
            raise GraphfeedError(f"features joined as one input need the same rows and device; "
                                 f"got {got}")
        self._widths = [int(torch.Size(f.row_shape).numel()) for f in self.features]
        self._dtype = reduce(torch.promote_types, [f.dtype for f in self.features])

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self.features[0].num_rows), sum(self._widths))

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def device(self) -> torch.device:
        return self.features[0].device

    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor],
              executor: Optional[Executor]) -> torch.Tensor:
        n = int(ids.shape[0])
        if out is None:
            out = torch.empty((n, self.shape[1]), dtype=self._dtype, device=self.device)
        col = 0
        for f, w in zip(self.features, self._widths):
            out[:, col:col + w] = f.read(ids, check=False, executor=executor).reshape(n, w)
            col += w
        return out

    def close(self) -> None:
        for f in self.features:
            f.close()

    def counters(self) -> dict:
        out: dict = {}
        for f in self.features:
            for kind, c in f.counters().items():
                mine = out.setdefault(kind, {})
                for k, v in c.items():
                    mine[k] = mine.get(k, 0) + v if isinstance(v, (int, float)) else v
        return out

    def reset_counters(self) -> None:
        for f in self.features:
            f.reset_counters()

    def warm(self) -> int:
        return sum(f.warm() for f in self.features)

    def __repr__(self) -> str:
        return f"JoinedFeature({', '.join(self.names)}; shape={self.shape}, dtype={self.dtype})"
