"""numba bookkeeping for ``CachedFeature``: lookups, hit updates and admissions per policy.

State lives in plain arrays owned by the cache (see ``cache.CacheState``):

- ``slot_of[node]``: int32 slot holding ``node``, or -1.
- ``node_of[slot]``: int64 node held in ``slot``, or -1.
- ``nxt`` / ``prv``: int32 doubly linked lists over slots; ``prv`` points towards the head
  (newer), ``nxt`` towards the tail (older).
- ``bits``: uint8 per slot (SIEVE visited, CLOCK reference, S3-FIFO frequency 0..3).
- ``qid``: uint8 per slot, the S3-FIFO queue (0 small, 1 main).
- ``st``: int64 scalars, see the ``ST_*`` indices.
- ``gring`` / ``gpos``: the S3-FIFO ghost queue, a ring of node ids and, per node, its ring
  position + 1 (0: not in the ghost queue).

Slots fill in order ``0, 1, ...`` while the cache has room; afterwards every admission first
evicts one slot and reuses it, so ``st[ST_SIZE]`` only grows.

The static ``degree`` policy reserves a slot for each of the highest-scored rows up front and
never evicts: ``slot_of[node] = -2 - slot`` marks a reserved slot not filled yet (a miss), which
:func:`admit_static` fills on the row's first miss.
"""

from __future__ import annotations

import numpy as np

from .._numba import kernel

ST_SIZE = 0  # occupied slots
ST_HAND = 1  # CLOCK / SIEVE hand (-1: none)
ST_GPTR = 2  # next ghost ring position
ST_SMALL = 3  # S3-FIFO small-queue target length
ST_LIST = 4  # list k: head at ST_LIST + 3k, tail at +1, length at +2
ST_LEN = ST_LIST + 6

POLICY_LRU = 0
POLICY_CLOCK = 1
POLICY_SIEVE = 2
POLICY_S3FIFO = 3
POLICY_DEGREE = 4


def new_state() -> np.ndarray:
    st = np.zeros(ST_LEN, dtype=np.int64)
    st[ST_HAND] = -1
    for k in range(2):
        st[ST_LIST + 3 * k] = -1
        st[ST_LIST + 3 * k + 1] = -1
    return st


# ------------------------------------------------------------------------------ lists
@kernel
def _push_head(st, k, s, nxt, prv):
    h = ST_LIST + 3 * k
    head = st[h]
    prv[s] = -1
    nxt[s] = head
    if head != -1:
        prv[head] = s
    else:
        st[h + 1] = s
    st[h] = s
    st[h + 2] += 1


@kernel
def _unlink(st, k, s, nxt, prv):
    h = ST_LIST + 3 * k
    p = prv[s]
    q = nxt[s]
    if p != -1:
        nxt[p] = q
    else:
        st[h] = q
    if q != -1:
        prv[q] = p
    else:
        st[h + 1] = p
    st[h + 2] -= 1
    nxt[s] = -1
    prv[s] = -1


# ------------------------------------------------------------------------------ lookups
@kernel
def lookup(ids, slot_of, hit_pos, hit_slot, miss_pos):
    """Split positions of ``ids`` into hits (with their slots) and misses; returns
    ``(num_hits, num_misses)``."""
    nh = 0
    nm = 0
    for i in range(ids.shape[0]):
        s = slot_of[ids[i]]
        if s >= 0:
            hit_pos[nh] = i
            hit_slot[nh] = s
            nh += 1
        else:
            miss_pos[nm] = i
            nm += 1
    return nh, nm


@kernel
def on_hits(policy, hit_slot, n, st, nxt, prv, bits):
    """Record hits, in batch order."""
    for k in range(n):
        s = hit_slot[k]
        if policy == POLICY_LRU:
            _unlink(st, 0, s, nxt, prv)
            _push_head(st, 0, s, nxt, prv)
        elif policy == POLICY_S3FIFO:
            if bits[s] < 3:
                bits[s] += 1
        else:  # CLOCK, SIEVE
            bits[s] = 1


# ------------------------------------------------------------------------------ admissions
@kernel
def _ghost_insert(st, gring, gpos, x):
    g = gring.shape[0]
    p = st[ST_GPTR]
    old = gring[p]
    if old >= 0 and gpos[old] == p + 1:
        gpos[old] = 0
    gring[p] = x
    gpos[x] = p + 1
    st[ST_GPTR] = (p + 1) % g


@kernel
def _evict(policy, st, node_of, slot_of, nxt, prv, bits, qid, gring, gpos):
    """Free one slot of a full cache according to ``policy``; returns it (unlinked, empty)."""
    cap = node_of.shape[0]
    if policy == POLICY_LRU:
        s = st[ST_LIST + 1]
        _unlink(st, 0, s, nxt, prv)
    elif policy == POLICY_CLOCK:
        s = st[ST_HAND]
        if s < 0:
            s = 0
        while bits[s] != 0:
            bits[s] = 0
            s = (s + 1) % cap
        st[ST_HAND] = (s + 1) % cap
    elif policy == POLICY_SIEVE:
        s = st[ST_HAND]
        if s < 0:
            s = st[ST_LIST + 1]
        while bits[s] != 0:
            bits[s] = 0
            s = prv[s]
            if s < 0:
                s = st[ST_LIST + 1]
        st[ST_HAND] = prv[s]
        _unlink(st, 0, s, nxt, prv)
    else:  # S3-FIFO
        while True:
            if st[ST_LIST + 2] >= st[ST_SMALL] or st[ST_LIST + 3 + 2] == 0:
                s = st[ST_LIST + 1]
                _unlink(st, 0, s, nxt, prv)
                if bits[s] >= 1:  # re-used while in the small queue: promote to main
                    bits[s] = 0
                    qid[s] = 1
                    _push_head(st, 1, s, nxt, prv)
                    continue
                _ghost_insert(st, gring, gpos, node_of[s])
                break
            s = st[ST_LIST + 3 + 1]
            _unlink(st, 1, s, nxt, prv)
            if bits[s] > 0:  # main queue: one more lap per remaining frequency
                bits[s] -= 1
                _push_head(st, 1, s, nxt, prv)
                continue
            break
    slot_of[node_of[s]] = -1
    node_of[s] = -1
    return s


@kernel
def admit(policy, new_ids, limit, st, node_of, slot_of, nxt, prv, bits, qid, gring, gpos,
          out_rows, out_slots):
    """Admit up to ``limit`` of ``new_ids`` (distinct, in order), evicting as needed.

    Ids already cached (another thread admitted them meanwhile) are skipped. Writes the index in
    ``new_ids`` and the slot of each admitted id to ``out_rows`` / ``out_slots``; returns the
    count.
    """
    cap = node_of.shape[0]
    na = 0
    for r in range(new_ids.shape[0]):
        if na >= limit:
            break
        x = new_ids[r]
        if slot_of[x] >= 0:
            continue
        if st[ST_SIZE] < cap:
            s = st[ST_SIZE]
            st[ST_SIZE] += 1
        else:
            s = _evict(policy, st, node_of, slot_of, nxt, prv, bits, qid, gring, gpos)
        node_of[s] = x
        slot_of[x] = s
        bits[s] = 0
        if policy == POLICY_LRU or policy == POLICY_SIEVE:
            _push_head(st, 0, s, nxt, prv)
        elif policy == POLICY_S3FIFO:
            if gpos[x] != 0:  # seen recently: straight into the main queue
                gpos[x] = 0
                qid[s] = 1
                _push_head(st, 1, s, nxt, prv)
            else:
                qid[s] = 0
                _push_head(st, 0, s, nxt, prv)
        out_rows[na] = r
        out_slots[na] = s
        na += 1
    return na


@kernel
def reserve_static(hot, slot_of, node_of):
    """Reserve slot ``i`` for row ``hot[i]`` (sorted, distinct): ``slot_of = -2 - i``."""
    for i in range(hot.shape[0]):
        slot_of[hot[i]] = -2 - i
        node_of[i] = hot[i]


@kernel
def admit_static(new_ids, st, slot_of, out_rows, out_slots):
    """The static policy's admission: each id of ``new_ids`` with a reserved, unfilled slot
    takes it (``out_rows``: its index in ``new_ids``, ``out_slots``: the slot); the others are
    never cached. Returns the count; ``st[ST_SIZE]`` counts the filled slots."""
    na = 0
    for r in range(new_ids.shape[0]):
        x = new_ids[r]
        s = slot_of[x]
        if s <= -2:
            slot_of[x] = -2 - s
            out_rows[na] = r
            out_slots[na] = -2 - s
            na += 1
    st[ST_SIZE] += na
    return na


@kernel
def collect_top(scores, t, ties, out):
    """Into ``out`` (in id order): every row scoring above ``t`` and the first ``ties`` rows
    scoring exactly ``t``."""
    n = 0
    for i in range(scores.shape[0]):
        v = scores[i]
        if v > t or (v == t and ties > 0):
            if v == t:
                ties -= 1
            out[n] = i
            n += 1

