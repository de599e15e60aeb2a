"""Tiny pure-Python models of the cache policies, written from the papers, independent of the
numba kernels: the same batch semantics (look every id up, then admit the distinct misses in
ascending id order, at most ``capacity`` per batch)."""

from __future__ import annotations

from collections import OrderedDict, deque


class LRU:
    def __init__(self, cap):
        self.cap = cap
        self.d = OrderedDict()  # oldest first

    def contains(self, x):
        return x in self.d

    def hit(self, x):
        self.d.move_to_end(x)

    def insert(self, x):
        if len(self.d) >= self.cap:
            self.d.popitem(last=False)
        self.d[x] = True

    def keys(self):
        return set(self.d)


class Clock:
    """Circular buffer of slots, filled in order; the hand sweeps clearing reference bits."""

    def __init__(self, cap):
        self.cap = cap
        self.slots = []  # [id, ref]
        self.hand = 0

    def contains(self, x):
        return any(s[0] == x for s in self.slots)

    def hit(self, x):
        for s in self.slots:
            if s[0] == x:
                s[1] = 1

    def insert(self, x):
        if len(self.slots) < self.cap:
            self.slots.append([x, 0])
            return
        while self.slots[self.hand][1]:
            self.slots[self.hand][1] = 0
            self.hand = (self.hand + 1) % self.cap
        self.slots[self.hand] = [x, 0]
        self.hand = (self.hand + 1) % self.cap

    def keys(self):
        return {s[0] for s in self.slots}


class Sieve:
    """SIEVE (Zhang et al., NSDI'24): a FIFO queue, new objects at the head; the hand moves
    from the tail towards the head, clearing visited bits, and evicts the first unvisited."""

    def __init__(self, cap):
        self.cap = cap
        self.q = []  # index 0 = head (newest), last = tail (oldest); entries [id, visited]
        self.hand = None  # the id the hand points at

    def contains(self, x):
        return any(e[0] == x for e in self.q)

    def hit(self, x):
        for e in self.q:
            if e[0] == x:
                e[1] = 1

    def insert(self, x):
        if len(self.q) >= self.cap:
            i = len(self.q) - 1 if self.hand is None else [e[0] for e in self.q].index(self.hand)
            while self.q[i][1]:
                self.q[i][1] = 0
                i = i - 1 if i > 0 else len(self.q) - 1
            self.hand = self.q[i - 1][0] if i > 0 else None
            del self.q[i]
        self.q.insert(0, [x, 0])

    def keys(self):
        return {e[0] for e in self.q}


class S3FIFO:
    """S3-FIFO (Yang et al., SOSP'23): small FIFO S (10%), main FIFO M, ghost FIFO G of ids.
    New ids go to S (or to M when in G); evicting from S promotes ids re-used there to M, else
    sends them to G; M re-inserts ids with frequency > 0, decrementing it."""

    def __init__(self, cap):
        self.cap = cap
        self.small_target = max(1, cap // 10)
        self.S = deque()  # left = head (newest)
        self.M = deque()
        # the ids of the last ``gcap`` evictions from S; an id that comes back is blanked out
        self.G = deque(maxlen=max(1, cap - self.small_target))
        self.freq = {}

    def contains(self, x):
        return x in self.freq

    def hit(self, x):
        self.freq[x] = min(self.freq[x] + 1, 3)

    def _evict(self):
        while True:
            if len(self.S) >= self.small_target or not self.M:
                t = self.S.pop()
                if self.freq[t] >= 1:
                    self.freq[t] = 0
                    self.M.appendleft(t)
                    continue
                del self.freq[t]
                self.G.append(t)
                return
            t = self.M.pop()
            if self.freq[t] > 0:
                self.freq[t] -= 1
                self.M.appendleft(t)
                continue
            del self.freq[t]
            return

    def insert(self, x):
        if len(self.freq) >= self.cap:
            self._evict()
        self.freq[x] = 0
        if x in self.G:
            self.G[self.G.index(x)] = None
            self.M.appendleft(x)
        else:
            self.S.appendleft(x)

    def keys(self):
        return set(self.freq)


MODELS = {"lru": LRU, "clock": Clock, "sieve": Sieve, "s3fifo": S3FIFO}


def run_batch(model, ids, state):
    """Returns the hit flags of one batch and applies it to ``model``. Which misses are admitted
    (all, or the most frequent when they exceed the per-batch budget) is the cache's documented
    ``AdmissionFilter`` rule, shared here: ``state["filter"]`` is an ``AdmissionFilter``."""
    import numpy as np

    flags = []
    for x in ids:
        if model.contains(x):
            model.hit(x)
            flags.append(True)
        else:
            flags.append(False)
    misses = sorted({x for x, h in zip(ids, flags) if not h})
    if misses:
        chosen, _ = state["filter"].select(np.array(misses, dtype=np.int64))
        for x in chosen.tolist():
            model.insert(x)
    return flags
