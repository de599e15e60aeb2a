"""numba kernels of the models, module-level functions over plain arrays, the GIL released,
callable from several threads: layer-wise inference's sums over in-edges
(``models.layerwise.aggregate``), and the CSR form of integer input rows and its transpose
(``models.gnn._csr_rows``, ``_CSRTimes``)."""

from __future__ import annotations

import numpy as np

from .._numba import kernel, prefetch

__all__ = ["csr_of_rows", "csr_sum_rows", "csr_transpose"]

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


@kernel
def csr_of_rows(x, crow):
    """The nonzeros of the rows of 2-D ``x`` (any integer dtype) in CSR form: fills ``crow``
    (``n + 1`` int64) and returns ``(cols, values)`` (int64, float32), row by row."""
    n, d = x.shape
    crow[0] = 0
    for i in range(n):
        c = 0
        for j in range(d):
            c += x[i, j] != 0
        crow[i + 1] = crow[i] + c
    cols = np.empty(crow[n], np.int64)
    vals = np.empty(crow[n], np.float32)
    for i in range(n):
        k = crow[i]
        for j in range(d):
            if x[i, j] != 0:
                cols[k] = j
                vals[k] = x[i, j]
                k += 1
    return cols, vals


@kernel
def csr_transpose(crow, cols, vals, num_cols):
    """The CSR form ``(crow, cols, values)`` of the transpose of CSR matrix ``(crow, cols,
    vals)`` with ``num_cols`` columns (a counting sort: O(nonzeros + rows + columns))."""
    n = crow.shape[0] - 1
    tcrow = np.zeros(num_cols + 1, np.int64)
    for k in range(cols.shape[0]):
        tcrow[cols[k] + 1] += 1
    for j in range(num_cols):
        tcrow[j + 1] += tcrow[j]
    pos = tcrow[:num_cols].copy()
    tcols = np.empty(cols.shape[0], np.int64)
    tvals = np.empty(cols.shape[0], vals.dtype)
    for i in range(n):
        for k in range(crow[i], crow[i + 1]):
            p = pos[cols[k]]
            tcols[p] = i
            tvals[p] = vals[k]
            pos[cols[k]] = p + 1
    return tcrow, tcols, tvals
