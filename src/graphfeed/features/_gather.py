"""The nogil row-copy kernels of every backend and the cache, over 2-D word arrays.

Rows are copied as the widest unsigned words that divide them, through ``(rows,
words_per_row)`` views of the tensors (:func:`._rows.word_view`). Every kernel copies the rows
``[start, end)`` of its index range, so callers split one batch over threads with
:func:`graphfeed._threads.run_chunks`.
"""

from __future__ import annotations

from .._numba import kernel

@kernel
def gather_rows(src, ids, out, start, end):
    """``out[i] = src[ids[i]]`` for ``i`` in ``[start, end)``."""
    w = src.shape[1]
    for i in range(start, end):
        r = ids[i]
        for j in range(w):
            out[i, j] = src[r, j]


@kernel
def copy_rows(src, src_idx, dst, dst_idx, start, end):
    """``dst[dst_idx[k]] = src[src_idx[k]]`` for ``k`` in ``[start, end)``: rows visited in the
    order of the index arrays (ascending ``src_idx`` walks a file forwards)."""
    w = src.shape[1]
    for k in range(start, end):
        a = src_idx[k]
        b = dst_idx[k]
        for j in range(w):
            dst[b, j] = src[a, j]


@kernel
def gather_rows_at(src_u8, offsets, which, out_u8, start, end):
    """``out_u8[i] = src_u8[offsets[which[i]] : offsets[which[i]] + row_nbytes]``: rows addressed
    by byte offsets into one flat buffer (direct reads)."""
    nb = out_u8.shape[1]
    for i in range(start, end):
        o = offsets[which[i]]
        for j in range(nb):
            out_u8[i, j] = src_u8[o + j]


@kernel
def gather_chunked(src_u8, chunk_off, ids, rows_per_chunk, out_u8, start, end):
    """Rows stored in chunks: row ``r`` starts at element ``chunk_off[r // rows_per_chunk] +
    (r % rows_per_chunk) * row_len`` of the flat ``src_u8`` (LMDB values inside one map span);
    ``src_u8``/``out_u8`` may be viewed as wider words (offsets then count words)."""
    nb = out_u8.shape[1]
    for i in range(start, end):
        r = ids[i]
        c = r // rows_per_chunk
        o = chunk_off[c] + (r - c * rows_per_chunk) * nb
        for j in range(nb):
            out_u8[i, j] = src_u8[o + j]
