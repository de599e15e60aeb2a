"""numba kernels for preparing and validating datasets: text parsing, the streamed two-pass
CSC build, split checks. Module-level functions over plain arrays, writing into given outputs."""

from __future__ import annotations

import numpy as np

from .._numba import kernel

# --------------------------------------------------------------------------- text parsing
_NL = 10
_CR = 13


@kernel
def parse_int_rows(buf, ncols, out):
    """Parse delimited integer rows from bytes ``buf`` (uint8) into ``out`` (int64, (ncols, R):
    column-major, so each column is a contiguous array for the caller).

    Delimiters: ``,`` ``;`` tab and spaces; ``\\r`` is whitespace; empty lines and lines starting
    with ``#`` are skipped; columns past ``ncols`` are ignored. Returns ``(rows, error_pos)``
    with ``error_pos == -1`` when every line parsed, else the byte offset of the first bad one.
    """
    n = buf.shape[0]
    i = 0
    row = 0
    while i < n:
        # skip leading blanks of the line
        while i < n and (buf[i] == 32 or buf[i] == 9 or buf[i] == _CR):
            i += 1
        if i >= n:
            break
        if buf[i] == _NL:
            i += 1
            continue
        if buf[i] == 35:  # '#': comment line
            while i < n and buf[i] != _NL:
                i += 1
            continue
        line_start = i
        col = 0
        while col < ncols:
            while i < n and (buf[i] == 32 or buf[i] == 9):
                i += 1
            neg = False
            if i < n and buf[i] == 45:
                neg = True
                i += 1
            elif i < n and buf[i] == 43:
                i += 1
            start = i
            v = 0
            while i < n and buf[i] >= 48 and buf[i] <= 57:
                v = v * 10 + (buf[i] - 48)
                i += 1
            if i == start or i - start > 18:
                return row, line_start
            out[col, row] = -v if neg else v
            col += 1
            # after a number: blanks, then a delimiter, end of line or end of buffer
            blank_start = i
            while i < n and (buf[i] == 32 or buf[i] == _CR):
                i += 1
            if i < n and (buf[i] == 44 or buf[i] == 59 or buf[i] == 9):
                i += 1
            elif i >= n or buf[i] == _NL:
                if col < ncols:  # line ended early
                    return row, line_start
            elif i == blank_start:
                return row, line_start  # e.g. "12x": junk glued to the number
            # else: whitespace-separated columns
        while i < n and buf[i] != _NL:  # ignore extra columns
            i += 1
        row += 1
    return row, -1


@kernel
def count_byte(buf, value):
    n = 0
    for i in range(buf.shape[0]):
        if buf[i] == value:
            n += 1
    return n


# --------------------------------------------------------------------------- CSC build
@kernel
def accumulate_in_degrees(src, dst, counts, undirected, drop_self_loops):
    """Pass 1 of the streamed CSC build: ``counts[v + 1] += in-degree of v`` for one chunk.

    Returns the index of the first edge with an endpoint outside ``[0, len(counts) - 1)``, or -1.
    """
    num_nodes = counts.shape[0] - 1
    for e in range(src.shape[0]):
        s = src[e]
        d = dst[e]
        if s < 0 or d < 0 or s >= num_nodes or d >= num_nodes:
            return e
        if s == d:
            if drop_self_loops:
                continue
            counts[d + 1] += 1  # a reversed self loop is itself: stored once
            continue
        counts[d + 1] += 1
        if undirected:
            counts[s + 1] += 1
    return -1


@kernel
def scatter_window(src, dst, lo, hi, base, cursor, out, undirected, drop_self_loops):
    """Pass 2 for destinations ``[lo, hi)``: place each edge's source at ``cursor[d - lo]``
    (absolute edge position) in ``out``, the window of the indices file starting at ``base``.
    Stable: a column keeps its input order."""
    for e in range(src.shape[0]):
        s = src[e]
        d = dst[e]
        if s == d and drop_self_loops:
            continue
        if d >= lo and d < hi:
            p = cursor[d - lo]
            out[p - base] = s
            cursor[d - lo] = p + 1
        if undirected and s != d and s >= lo and s < hi:
            p = cursor[s - lo]
            out[p - base] = d
            cursor[s - lo] = p + 1


@kernel
def dedupe_window(local_indptr, indices, marker, new_counts):
    """Drop repeated sources within each column of a window, in place (keep the first).

    ``local_indptr`` are offsets into ``indices`` (the window); ``marker`` is an int64 array of
    ``num_nodes`` entries set to -1; writes each column's new size to ``new_counts`` and returns
    the window's new edge count. Columns stay packed from the window start.
    """
    w = 0
    for v in range(local_indptr.shape[0] - 1):
        start = w
        for p in range(local_indptr[v], local_indptr[v + 1]):
            u = indices[p]
            if marker[u] == v:
                continue
            marker[u] = v
            indices[w] = u
            w += 1
        new_counts[v] = w - start
        # reset markers of this column so the next window (v restarts at 0) sees a clean slate
        for p in range(start, w):
            marker[indices[p]] = -1
    return w


# --------------------------------------------------------------------------- validation
@kernel
def mark_split(ids, marks, tag, num_nodes):
    """Mark ``marks[ids] = tag``; returns ``(code, position, other_tag)``: code 0 ok, 1 id out of
    range, 2 id repeated within this split, 3 id already in split ``other_tag``."""
    for i in range(ids.shape[0]):
        v = ids[i]
        if v < 0 or v >= num_nodes:
            return 1, i, 0
        m = marks[v]
        if m == tag:
            return 2, i, 0
        if m != 0:
            return 3, i, m
        marks[v] = tag
    return 0, 0, 0


@kernel
def check_labels(labels, ids, num_classes):
    """First position in ``ids`` whose label is outside ``[0, num_classes)``, or -1."""
    for i in range(ids.shape[0]):
        y = labels[ids[i]]
        if y < 0 or y >= num_classes:
            return i
    return -1


def empty_marker(num_nodes: int) -> np.ndarray:
    return np.full(num_nodes, -1, dtype=np.int64)
