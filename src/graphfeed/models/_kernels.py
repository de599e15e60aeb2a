"""The numba kernel of layer-wise inference's sums over in-edges (``models.layerwise.aggregate``):
a module-level function over plain arrays, the GIL released, callable from several threads."""

from __future__ import annotations

from .._numba import kernel, prefetch

__all__ = ["csr_sum_rows"]

#: source rows prefetched ahead by the CPU aggregation (as ``features._gather.PREFETCH_ROWS``)
_PREFETCH_EDGES = 8


@kernel
def csr_sum_rows(crow, col, values, table, out, start, end):
    """``out[v, k] += sum over e in [crow[v], crow[v + 1]) of values[e, k // c] *
    table[col[e], k]`` for the rows ``v`` in ``[start, end)`` and the columns ``k`` below
    ``out.shape[1]``, with ``c = out.shape[1] // values.shape[1]`` (one weight per edge and
    block of columns: GAT's heads); ``values`` of shape ``(0, 0)``: every weight 1. float32
    ``table`` and ``out``, ``out`` zeroed by the caller; reads only the rows ``col`` names."""
    d = out.shape[1]
    if d == 0:
        return
    weighted = values.shape[0] > 0
    heads = values.shape[1] if weighted else 1
    c = d // heads
    stop = crow[end]
    for v in range(start, end):
        for e in range(crow[v], crow[v + 1]):
            if e + _PREFETCH_EDGES < stop:
                ahead = table[col[e + _PREFETCH_EDGES]]
                prefetch(ahead, 0)
                prefetch(ahead, d - 1)
            u = col[e]
            if weighted:
                for h in range(heads):
                    w = values[e, h]
                    for k in range(h * c, (h + 1) * c):
                        out[v, k] += w * table[u, k]
            else:
                for k in range(d):
                    out[v, k] += table[u, k]
