"""numba kernels of the link-split checks (:mod:`graphfeed.datasets._link_checks`)."""

from __future__ import annotations

from .._numba import kernel


@kernel
def first_missing_pair(indptr, indices, src, dst):
    """The first ``i`` whose ``src[i] -> dst[i]`` is not an edge of the CSC graph, else -1
    (ids already checked in range). O(in-degree of ``dst[i]``) per pair."""
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        found = False
        for p in range(indptr[d], indptr[d + 1]):
            if indices[p] == s:
                found = True
                break
        if not found:
            return i
    return -1


@kernel
def first_missing_typed_pair(indptr, indices, edge_type, src, dst, rel):
    """The first ``i`` whose ``src[i] -> dst[i]`` (global ids) is not an edge of relation
    ``rel`` of the fused heterogeneous CSC (``edge_type[p]`` the relation of ``indices[p]``),
    else -1 (ids already checked in range). O(in-degree of ``dst[i]``) per pair."""
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        found = False
        for p in range(indptr[d], indptr[d + 1]):
            if indices[p] == s and edge_type[p] == rel:
                found = True
                break
        if not found:
            return i
    return -1
