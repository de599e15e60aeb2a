"""The Triton kernel of :class:`~graphfeed.features.gpu_cache.GPUCachedFeature`'s reads.

Importing this module imports triton (the cache imports it on its first read through the
kernel). Under ``TRITON_INTERPRET=1`` (read when triton is imported) it runs in Triton's CPU
interpreter over CPU tensors: that is how the tests run it without a GPU.

``cached_gather_kernel``: for each position ``r`` of ``ids``, row ``ids[r]`` from its cache slot
(``slot_of[ids[r]] >= 0``: a row of ``cache`` in GPU memory) or else from ``source`` (every row
of the feature: a UVA view of pinned host memory, read across the bus), into ``out[r]``; the
number of positions read from ``source`` is added to ``misses[0]``. One launch a read, and no
host sync: a miss reads only its own row across the bus, a hit none (the loads are masked).

Rows are copied as words (int32 where a row's bytes are a multiple of 4, else bytes), so one
compiled variant serves every feature dtype of a row width class. The grid is ``(row blocks,
word blocks)``: ``BLOCK_R`` rows and ``BLOCK_W`` words a program.
"""

from __future__ import annotations

import triton
import triton.language as tl

#: Sizes that vary from read to read or feature to feature: kept out of Triton's value
#: specialisation, so one compiled variant serves every read of a cache.
_SIZES = ["n", "words"]
#: Words a program copies at most (rows times words per row)
TILE_WORDS = 4096
#: Widest word block (a row wider than this takes several programs across the grid's axis 1)
MAX_BLOCK_W = 256


@triton.jit(do_not_specialize=_SIZES)
def cached_gather_kernel(ids, slot_of, cache, source, out, n, words, misses,
                         BLOCK_R: tl.constexpr, BLOCK_W: tl.constexpr):
    pid_r = tl.program_id(0)
    pid_w = tl.program_id(1)
    r = pid_r.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    in_rows = r < n
    node = tl.load(ids + r, mask=in_rows, other=0).to(tl.int64)
    slot = tl.load(slot_of + node, mask=in_rows, other=-1).to(tl.int64)
    hit = slot >= 0
    w = pid_w.to(tl.int64) * BLOCK_W + tl.arange(0, BLOCK_W)
    cell = in_rows[:, None] & (w < words)[None, :]
    cached = tl.load(cache + slot[:, None] * words + w[None, :], mask=cell & hit[:, None],
                     other=0)
    fetched = tl.load(source + node[:, None] * words + w[None, :], mask=cell & ~hit[:, None],
                      other=0)
    tl.store(out + r[:, None] * words + w[None, :], tl.where(hit[:, None], cached, fetched),
             mask=cell)
    if pid_w == 0:
        missed = tl.sum((in_rows & ~hit).to(tl.int64), axis=0)
        tl.atomic_add(misses, missed)


#: The word blocks a launch can take (a row of ``words`` words takes the smallest that holds it,
#: else the widest): few compiled variants, all checked for sm_90 by the tests.
BLOCK_WS = (32, 64, 128, MAX_BLOCK_W)


def blocks(words: int) -> tuple[int, int]:
    """``(BLOCK_R, BLOCK_W)`` for rows of ``words`` words: the smallest of :data:`BLOCK_WS`
    that holds a row (else the widest), and as many rows as fill :data:`TILE_WORDS`."""
    bw = next((b for b in BLOCK_WS if b >= words), MAX_BLOCK_W)
    return TILE_WORDS // bw, bw


INTERPRETED = type(cached_gather_kernel).__name__ == "InterpretedFunction"
