"""numba kernels that check the typed arrays of a fused heterogeneous CSC in O(N + E)."""

from __future__ import annotations

from .._numba import bucket_of, kernel


@kernel
def type_of(offsets, v):
    """The node type of global id ``v``: the ``t`` with ``offsets[t] <= v < offsets[t + 1]``
    (binary search over the few type offsets)."""
    return bucket_of(offsets, v)


@kernel
def check_typed_csc(indptr, indices, etype, offsets, rel_src, rel_dst):
    """``(0, 0)`` when every edge's type is a valid relation id, the in-edges of each
    destination are sorted by relation id, and both endpoints have the relation's node types;
    else ``(code, edge position)``: 1 relation id out of range, 2 not sorted by relation, 3 the
    destination's type is not the relation's, 4 the source's type is not the relation's."""
    num_rel = rel_src.shape[0]
    num_types = offsets.shape[0] - 1
    for t in range(num_types):
        for v in range(offsets[t], offsets[t + 1]):
            prev = -1
            for p in range(indptr[v], indptr[v + 1]):
                r = etype[p]
                if r < 0 or r >= num_rel:
                    return 1, p
                if r < prev:
                    return 2, p
                prev = r
                if rel_dst[r] != t:
                    return 3, p
                if type_of(offsets, indices[p]) != rel_src[r]:
                    return 4, p
    return 0, 0
