"""numba kernels for preparing and validating datasets: text parsing and split checks.
Module-level functions over plain arrays, writing into given outputs. (The CSC build's kernels
are the graph's: :mod:`graphfeed.graph._kernels`.)"""

from __future__ import annotations

import numpy as np

from .._numba import kernel

# --------------------------------------------------------------------------- text parsing
_NL = 10
_CR = 13


#: column kinds of :func:`parse_rows`
COL_INT, COL_FLOAT, COL_SKIP = 0, 1, 2


@kernel
def _is_blank(c):
    return c == 32 or c == 9


@kernel
def _bare_cr(buf, i, n):
    """A ``\\r`` not followed by ``\\n``: an old-Mac line end, which would glue lines together."""
    return buf[i] == _CR and i + 1 < n and buf[i + 1] != _NL


@kernel
def _is_delim(c):
    return c == 44 or c == 59 or c == 9  # , ; tab


@kernel
def _parse_float(buf, i, n):
    """``[+-]digits[.digits][e[+-]digits]``, ``nan``, ``inf`` at ``buf[i]``. Returns
    ``(value, end, ok)``. Exact (one rounding) while the mantissa has <= 15 digits and the
    decimal exponent is within 22; otherwise within a few ulps."""
    neg = False
    if i < n and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    # nan / inf, any case
    if i + 3 <= n:
        a, b, c = buf[i] | 32, buf[i + 1] | 32, buf[i + 2] | 32
        if a == 110 and b == 97 and c == 110:
            return np.nan, i + 3, True
        if a == 105 and b == 110 and c == 102:
            j = i + 3
            if j + 5 <= n and (buf[j] | 32) == 105 and (buf[j + 1] | 32) == 110 and (buf[j + 2] | 32) == 105 \
                    and (buf[j + 3] | 32) == 116 and (buf[j + 4] | 32) == 121:
                j += 5
            return (-np.inf if neg else np.inf), j, True
    mant = 0
    digits = 0  # significant digits kept in mant
    exp10 = 0
    seen = False
    while i < n and buf[i] >= 48 and buf[i] <= 57:
        seen = True
        if digits < 18:
            mant = mant * 10 + (buf[i] - 48)
            if mant > 0:
                digits += 1
        else:
            exp10 += 1
        i += 1
    if i < n and buf[i] == 46:  # '.'
        i += 1
        while i < n and buf[i] >= 48 and buf[i] <= 57:
            seen = True
            if digits < 18:
                mant = mant * 10 + (buf[i] - 48)
                exp10 -= 1
                if mant > 0:
                    digits += 1
            i += 1
    if not seen:
        return 0.0, i, False
    if i < n and (buf[i] == 101 or buf[i] == 69):  # e E
        i += 1
        eneg = False
        if i < n and (buf[i] == 45 or buf[i] == 43):
            eneg = buf[i] == 45
            i += 1
        e = 0
        start = i
        while i < n and buf[i] >= 48 and buf[i] <= 57:
            if i - start < 6:
                e = e * 10 + (buf[i] - 48)
            i += 1
        if i == start:
            return 0.0, i, False
        exp10 += -e if eneg else e
    v = float(mant)
    if exp10 > 0:
        v = v * 10.0 ** min(exp10, 400)
    elif exp10 < 0:
        if exp10 < -300:  # avoid 10**-exp10 overflowing before the division
            v = v / 1e300
            exp10 += 300
        v = v / 10.0 ** min(-exp10, 400)
    return (-v if neg else v), i, True


@kernel
def parse_rows(buf, kinds, iout, fout):
    """Parse delimited rows from bytes ``buf`` (uint8). Column ``c`` is parsed as ``kinds[c]``:
    ``COL_INT`` (int64, into the next row of ``iout``), ``COL_FLOAT`` (float64, into ``fout``) or
    ``COL_SKIP`` (any token without a delimiter). ``iout``/``fout`` are column-major
    ``(columns of that kind, R)`` so each column is contiguous for the caller.

    Delimiters: ``,`` ``;`` tab and spaces; ``\\r\\n`` line ends; empty lines and lines starting
    with ``#`` are skipped; columns past ``len(kinds)`` are ignored. A bare ``\\r`` (old-Mac line
    end) is an error, never a silent merge of lines. Returns ``(rows, error_pos)`` with
    ``error_pos == -1`` when every line parsed, else the byte offset of the first bad line.
    """
    n = buf.shape[0]
    ncols = kinds.shape[0]
    i = 0
    row = 0
    while i < n:
        line_start = i
        # skip leading blanks of the line
        while i < n and (_is_blank(buf[i]) or buf[i] == _CR):
            if _bare_cr(buf, i, n):
                return row, line_start
            i += 1
        if i >= n:
            break
        if buf[i] == _NL:
            i += 1
            continue
        if buf[i] == 35:  # '#': comment line
            while i < n and buf[i] != _NL:
                if _bare_cr(buf, i, n):
                    return row, line_start
                i += 1
            continue
        line_start = i
        ci = 0
        cf = 0
        for col in range(ncols):
            while i < n and _is_blank(buf[i]):
                i += 1
            k = kinds[col]
            start = i
            if k == 2:
                while i < n and not (_is_delim(buf[i]) or _is_blank(buf[i]) or buf[i] == _NL
                                     or buf[i] == _CR):
                    i += 1
            elif k == 1:
                v, i, ok = _parse_float(buf, i, n)
                if not ok:
                    return row, line_start
                fout[cf, row] = v
                cf += 1
            else:
                neg = False
                if i < n and buf[i] == 45:
                    neg = True
                    i += 1
                elif i < n and buf[i] == 43:
                    i += 1
                dstart = i
                v = 0
                while i < n and buf[i] >= 48 and buf[i] <= 57:
                    v = v * 10 + (buf[i] - 48)
                    i += 1
                if i == dstart or i - dstart > 18:
                    return row, line_start
                iout[ci, row] = -v if neg else v
                ci += 1
            # after a value: blanks, then a delimiter, end of line or end of buffer
            blank_start = i
            while i < n and (buf[i] == 32 or buf[i] == _CR):
                if _bare_cr(buf, i, n):
                    return row, line_start
                i += 1
            if i < n and _is_delim(buf[i]):
                i += 1
            elif i >= n or buf[i] == _NL:
                if col < ncols - 1:  # line ended early
                    return row, line_start
            elif i == blank_start:
                return row, line_start  # e.g. "12x": junk glued to the number
            # else: whitespace-separated columns
        while i < n and buf[i] != _NL:  # ignore extra columns
            if _bare_cr(buf, i, n):
                return row, line_start
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

