"""Triton kernels of :class:`~graphfeed.sampling.triton_sampler.TritonNeighborSampler`.

Importing this module imports triton (the sampler imports it when it is built). Under
``TRITON_INTERPRET=1`` (read when this module is imported) the kernels run in Triton's CPU
interpreter over CPU tensors: that is how the test suite runs them without a GPU.

One layer (``L`` destinations, fanout ``K``, ``E`` sampled edges, ``cap`` an upper bound of ``E``):

1. ``count_kernel``: each destination's neighbour range and sampled count; on the seed layer it
   also inserts the seeds into the batch's hash table (value = their local id) and flags
   out-of-range or repeated seeds in ``err``.
2. ``torch.cumsum`` of the counts: every destination's first output slot (``offsets``, with
   ``offsets[L] == E`` read by later kernels on the device: no host sync).
3. ``sample_kernel``: per destination, ``K`` uniform draws (with replacement: i.i.d.; without:
   Floyd's algorithm, an exactly uniform k-subset), the global source ids written at the
   destination's slots, and each source inserted into the hash table with
   ``atomic_min(BIG + edge position)``: afterwards a new node's value is ``BIG +`` the position of
   its first appearance. ``sample_all_kernel`` is the same for fanout ``-1`` (every neighbour,
   one program per destination).
4. ``flag_kernel``: ``flags[e] = 1`` when edge ``e`` is its source's first appearance.
5. ``torch.cumsum`` of the flags: each new node's rank among the new nodes.
6. ``final_kernel``: local ids (a node already in the table keeps its value; a new node gets
   ``L + rank``), ``src_nodes``, and the table values of new nodes replaced by their local ids
   (for the next layer), plus ``sizes = (E, new nodes)``, the one host read of the layer.

The hash table (open addressing, linear probing, ``atomic_cas`` on the keys, ``-1`` = empty)
lives for the whole batch: its values are the nodes' local ids, and a layer's destinations are
the previous layer's sources with the same ids, so they are never inserted twice.

Randomness: Triton's Philox, keyed by the 64-bit ``batch_key(seed, epoch, batch_index, layer)``
(passed as three 22-bit pieces so that it never changes a kernel's signature), counter
``destination position * K + draw`` (and a rejection attempt number): a destination's draws do
not depend on the block size, the grid or the order programs run in.
"""

from __future__ import annotations

import triton
import triton.language as tl

#: Table values at or above BIG are candidates "first seen at edge ``value - BIG``"; below BIG
#: they are final local ids. A constexpr (compiled kernels read no other globals), written after
#: the tensor in sums (``e + BIG``: the interpreter makes ``constexpr + tensor`` a constexpr).
BIG = tl.constexpr(1 << 62)
#: Largest fanout the sampling kernel holds in registers (a ``(lanes, next_pow2(K))`` tile).
MAX_FANOUT = 1024
KEY_BITS = 22
KEY_MASK = (1 << KEY_BITS) - 1

#: Integer arguments that vary from batch to batch or graph to graph: kept out of Triton's value
#: specialisation (a value of 1 would otherwise become a constexpr, a multiple of 16 an
#: alignment hint), so one compiled variant serves every batch and the sampler's warm-up
#: compiles every variant it will launch. Only their type (int32/int64, by value) still varies.
_SIZES = ["n_dst", "cap", "mask_bits", "shift", "num_nodes", "fanout"]
_KEY = ["key_a", "key_b", "key_c"]


def split_key(key: int) -> tuple[int, int, int]:
    """A uint64 as three non-negative 22-bit ints (always the same kernel signature)."""
    return (key >> (2 * KEY_BITS)) & KEY_MASK, (key >> KEY_BITS) & KEY_MASK, key & KEY_MASK


@triton.jit
def _philox_key(key_a, key_b, key_c):
    # tl.cast, not tl.to_tensor (exported from triton 3.7 on only): the key pieces are
    # non-negative, so int32 -> int64 -> uint64 keeps their value
    ka = tl.cast(tl.cast(key_a, tl.int64), tl.uint64)
    kb = tl.cast(tl.cast(key_b, tl.int64), tl.uint64)
    kc = tl.cast(tl.cast(key_c, tl.int64), tl.uint64)
    return (ka << 44) | (kb << 22) | kc


@triton.jit
def _bounded(seed, ctr, bound):
    """Uniform ints in ``[0, bound)`` (``1 <= bound < 2**32``, int64 tensors) for the int64
    counters ``ctr``: Lemire's multiply-shift with rejection, so exactly uniform; a rejected
    lane draws again with the attempt number as a third counter word."""
    c0 = (ctr & 0xFFFFFFFF).to(tl.uint32)
    c1 = (ctr >> 32).to(tl.uint32)
    z = c0 * 0
    x, _, _, _ = tl.philox(seed, c0, c1, z, z)
    b = bound.to(tl.uint64)
    prod = x.to(tl.uint64) * b
    # accept when the low word >= 2**32 mod b (typed constants: no signed/unsigned mixing)
    thresh = (tl.full(b.shape, 4294967296, tl.uint64) - b) % b
    rej = prod.to(tl.uint32).to(tl.uint64) < thresh
    attempt = 0
    while tl.max(rej.to(tl.int32)) > 0:
        attempt += 1
        x2, _, _, _ = tl.philox(seed, c0, c1, z + attempt, z)
        prod = tl.where(rej, x2.to(tl.uint64) * b, prod)
        rej = rej & (prod.to(tl.uint32).to(tl.uint64) < thresh)
    return (prod >> 32).to(tl.int64)


@triton.jit
def _insert(keys, vals, key, val, active, spread, mask_bits, shift):
    """Insert int64 ``key`` (where ``active``) into the table, ``vals[slot] = min(vals[slot],
    val)``. Returns ``(slot, found)``: ``found`` where the key was already there. Inactive
    lanes compare-and-swap their own ``spread`` slot with an impossible expected value (a no-op
    that writes nothing and contends with nobody): ``atomic_cas`` takes no mask."""
    h = ((key.to(tl.uint64) * 0x9E3779B97F4A7C15) >> tl.cast(shift, tl.uint64)).to(tl.int64)
    slot = tl.where(active, h, spread & mask_bits)
    done = active == 0
    found = active & (key != key)
    while tl.max(tl.where(done, 0, 1)) > 0:
        expected = tl.where(done, -2, -1).to(tl.int64)
        prev = tl.atomic_cas(keys + slot, expected, key)
        hit = (done == 0) & ((prev == -1) | (prev == key))
        found = found | (hit & (prev == key))
        tl.atomic_min(vals + slot, val, mask=hit)
        done = done | hit
        slot = tl.where(done, slot, (slot + 1) & mask_bits)
    return slot, found


@triton.jit(do_not_specialize=_SIZES)
def count_kernel(dst, n_dst, indptr, num_nodes, fanout, counts, starts, degs, offsets,
                 keys, vals, mask_bits, shift, err,
                 REPLACE: tl.constexpr, INSERT: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    m = i < n_dst
    v = tl.load(dst + i, mask=m, other=0)
    ok = m & (v >= 0) & (v < num_nodes)
    st = tl.load(indptr + v, mask=ok, other=0)
    d = tl.load(indptr + v + 1, mask=ok, other=0) - st
    if fanout < 0:
        c = d
    elif REPLACE:
        c = tl.where(d > 0, fanout, 0).to(tl.int64)
    else:
        c = tl.minimum(d, fanout)
    tl.store(counts + i, c, mask=m)
    tl.store(starts + i, st, mask=m)
    tl.store(degs + i, d, mask=m)
    if pid == 0:
        tl.store(offsets, 0)
    if INSERT:
        _, found = _insert(keys, vals, v, i.to(tl.int64), ok, i.to(tl.int64), mask_bits, shift)
        code = tl.max(tl.where(m & (ok == 0), 1, 0) | tl.where(found, 2, 0))
        if code > 0:
            tl.atomic_or(err, code.to(tl.int64))


@triton.jit(do_not_specialize=_SIZES + _KEY)
def sample_kernel(indices, starts, degs, counts, offsets, n_dst, fanout, key_a, key_b, key_c,
                  rows, eids, eslot, keys, vals, mask_bits, shift,
                  REPLACE: tl.constexpr, WANT_EIDS: tl.constexpr, KPAD: tl.constexpr,
                  LANES: tl.constexpr):
    pid = tl.program_id(0)
    i = pid * LANES + tl.arange(0, LANES)
    m = i < n_dst
    st = tl.load(starts + i, mask=m, other=0)
    d = tl.load(degs + i, mask=m, other=0)
    c = tl.load(counts + i, mask=m, other=0)
    off = tl.load(offsets + i, mask=m, other=0)
    num_edges = tl.load(offsets + n_dst)
    seed = _philox_key(key_a, key_b, key_c)
    col = tl.arange(0, KPAD)[None, :].to(tl.int64)
    base = i.to(tl.int64) * fanout
    if REPLACE:
        pos = _bounded(seed, base[:, None] + col, tl.maximum(d, 1)[:, None] + col * 0)
    else:
        # Floyd's algorithm: for j = d-K .. d-1 draw t in [0, j]; a t already chosen becomes j.
        # Every K-subset of [0, d) is equally likely. Lanes with d <= K take every neighbour.
        chosen = col * 0 + base[:, None] * 0
        for it in range(0, fanout):
            j = d - fanout + it
            t = _bounded(seed, base + it, tl.maximum(j + 1, 1))
            seen = tl.max(tl.where((col < it) & (chosen == t[:, None]), 1, 0), axis=1) > 0
            t = tl.where(seen, j, t)
            chosen = tl.where(col == it, t[:, None], chosen)
        pos = tl.where((d > fanout)[:, None], chosen, col)
    em = m[:, None] & (col < c[:, None])
    eid = st[:, None] + pos
    src = tl.load(indices + eid, mask=em, other=0).to(tl.int64)
    e = off[:, None] + col
    tl.store(rows + e, src, mask=em)
    tl.store(rows + num_edges + e, i.to(tl.int64)[:, None] + col * 0, mask=em)
    if WANT_EIDS:
        tl.store(eids + e, eid, mask=em)
    slot, _ = _insert(keys, vals, src, e + BIG, em, e, mask_bits, shift)
    tl.store(eslot + e, slot, mask=em)


@triton.jit(do_not_specialize=_SIZES)
def sample_all_kernel(indices, starts, degs, offsets, n_dst, rows, eids, eslot, keys, vals,
                      mask_bits, shift, WANT_EIDS: tl.constexpr, BLOCK: tl.constexpr):
    """Fanout -1: every in-edge of destination ``program_id``, in order."""
    i = tl.program_id(0)
    st = tl.load(starts + i)
    d = tl.load(degs + i)
    off = tl.load(offsets + i)
    num_edges = tl.load(offsets + n_dst)
    for lo in range(0, d, BLOCK):
        q = lo + tl.arange(0, BLOCK).to(tl.int64)
        em = q < d
        src = tl.load(indices + st + q, mask=em, other=0).to(tl.int64)
        e = off + q
        tl.store(rows + e, src, mask=em)
        tl.store(rows + num_edges + e, q * 0 + i, mask=em)
        if WANT_EIDS:
            tl.store(eids + e, st + q, mask=em)
        slot, _ = _insert(keys, vals, src, e + BIG, em, e, mask_bits, shift)
        tl.store(eslot + e, slot, mask=em)


@triton.jit(do_not_specialize=_SIZES)
def flag_kernel(offsets, n_dst, cap, eslot, vals, flags, BLOCK: tl.constexpr):
    """``flags[e]`` (``e < cap``): 1 where edge ``e`` is its source node's first appearance."""
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    num_edges = tl.load(offsets + n_dst)
    m = e < num_edges
    slot = tl.load(eslot + e, mask=m, other=0)
    v = tl.load(vals + slot, mask=m, other=0)
    tl.store(flags + e, (m & (v == e + BIG)).to(tl.int64), mask=e < cap)


@triton.jit(do_not_specialize=_SIZES)
def final_kernel(offsets, n_dst, cap, dst, rows, eslot, vals, flags, rank, src_nodes, sizes,
                 BLOCK: tl.constexpr):
    """Row 0 of the edges to local ids; new nodes into ``src_nodes[n_dst + rank - 1]`` and
    their table values to those ids; ``dst`` into ``src_nodes[:n_dst]``; ``sizes[0:2] = (E,
    new nodes)``. A lane may read a new node's table value before or after the node's first
    edge replaces it: both resolve to the same local id."""
    pid = tl.program_id(0)
    e = pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    num_edges = tl.load(offsets + n_dst)
    m = e < num_edges
    slot = tl.load(eslot + e, mask=m, other=0)
    v = tl.load(vals + slot, mask=m, other=0)
    cand = m & (v >= BIG)
    first_rank = tl.load(rank + (v - BIG), mask=cand, other=0)
    local = tl.where(cand, n_dst + first_rank - 1, v)
    is_first = m & (tl.load(flags + e, mask=m, other=0) != 0)
    mine = n_dst + tl.load(rank + e, mask=m, other=0) - 1
    key = tl.load(rows + e, mask=m, other=0)
    tl.store(src_nodes + mine, key, mask=is_first)
    tl.atomic_xchg(vals + slot, mine, mask=is_first)
    tl.store(rows + e, local, mask=m)
    dm = e < n_dst
    tl.store(src_nodes + e, tl.load(dst + e, mask=dm, other=0), mask=dm)
    if pid == 0:
        tl.store(sizes, num_edges)
        tl.store(sizes + 1, tl.load(rank + cap - 1))


#: Whether the kernels run in Triton's CPU interpreter (``TRITON_INTERPRET=1`` at import).
INTERPRETED = type(count_kernel).__name__ == "InterpretedFunction"
