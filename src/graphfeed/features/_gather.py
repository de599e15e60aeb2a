"""The nogil row-copy kernels of every backend and the cache, over 2-D word arrays.

Rows are copied as the widest unsigned words that divide them, through ``(rows,
words_per_row)`` views of the tensors (:func:`._rows.word_view`). Every kernel copies the rows
``[start, end)`` of its index range, so callers split one batch over threads with
:func:`graphfeed._threads.run_chunks`.

A random row is a cache miss (and often a TLB miss) whatever holds it, RAM or a warm memory
map, so the gathers are latency-bound: the random-order kernels prefetch the first and last
cache line of the row ``PREFETCH_ROWS`` ahead (the adjacent-line prefetcher fetches the rest),
which keeps several misses in flight on one thread. That is what lets one loader thread gather
at about ``torch.index_select``'s two-thread speed.
"""

from __future__ import annotations

from .._numba import kernel, prefetch

#: How many rows ahead the random-order gathers prefetch (measured on 400-byte rows of a 400 MB
#: feature: 4-8 rows ahead gain 20-40% on one thread; further ahead evicts what it fetched).
#: Re-measured on the sampled input nodes of ``medium`` batches (one thread, interleaved): 4
#: and 16 rows ahead cost 6-7% more than 8, a third prefetched line per row gains nothing,
#: prefetching every line of the row costs 1.4x, and non-temporal stores (no read for
#: ownership of the output) 2.5x.
PREFETCH_ROWS = 8


@kernel
def gather_rows(src, ids, out, start, end):
    """``out[i] = src[ids[i]]`` for ``i`` in ``[start, end)``."""
    w = src.shape[1]
    last = w - 1
    for i in range(start, end):
        if i + PREFETCH_ROWS < end:
            ahead = src[ids[i + PREFETCH_ROWS]]
            prefetch(ahead, 0)
            prefetch(ahead, last)
        r = ids[i]
        for j in range(w):
            out[i, j] = src[r, j]


@kernel
def copy_rows(src, src_idx, dst, dst_idx, start, end):
    """``dst[dst_idx[k]] = src[src_idx[k]]`` for ``k`` in ``[start, end)``: rows visited in the
    order of the index arrays (ascending ``src_idx`` walks a file forwards), each source row
    prefetched ``PREFETCH_ROWS`` ahead as in :func:`gather_rows`."""
    w = src.shape[1]
    last = w - 1
    for k in range(start, end):
        if k + PREFETCH_ROWS < end and w > 0:
            ahead = src[src_idx[k + PREFETCH_ROWS]]
            prefetch(ahead, 0)
            prefetch(ahead, last)
        a = src_idx[k]
        b = dst_idx[k]
        for j in range(w):
            dst[b, j] = src[a, j]


@kernel
def gather_chunked(src, chunk_off, ids, rows_per_chunk, out, start, end):
    """Rows stored in chunks: row ``r`` starts at element ``chunk_off[r // rows_per_chunk] +
    (r % rows_per_chunk) * row_len`` of the flat ``src`` (LMDB values inside one map span);
    ``src``/``out`` are bytes or wider words (offsets then count words).

    Rows are copied through slice views: indexing the flat array at ``o + j`` makes numba check
    every element's sign, which keeps LLVM from vectorising the copy (measured 2-3x slower)."""
    nb = out.shape[1]
    for i in range(start, end):
        if i + PREFETCH_ROWS < end:
            ra = ids[i + PREFETCH_ROWS]
            ca = ra // rows_per_chunk
            oa = chunk_off[ca] + (ra - ca * rows_per_chunk) * nb
            prefetch(src, oa)
            prefetch(src, oa + nb - 1)
        r = ids[i]
        c = r // rows_per_chunk
        o = chunk_off[c] + (r - c * rows_per_chunk) * nb
        row = src[o:o + nb]
        dst = out[i]
        for j in range(nb):
            dst[j] = row[j]
