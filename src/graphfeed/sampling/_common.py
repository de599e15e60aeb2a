"""Helpers shared by the samplers: argument checks and the counter-based batch keys."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .._checks import check_int, shown
from ..errors import GraphfeedError

if TYPE_CHECKING:  # pragma: no cover
    from .method import SamplingMethod

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def mix64(x: int) -> int:
    """splitmix64 step on a Python int (same constants as the numba kernels)."""
    z = (x + _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def batch_key(seed: int, epoch: int, batch_index: int, layer: int = -1) -> int:
    """A uint64 (as a Python int) that depends only on its arguments."""
    k = mix64(int(seed) & _M64)
    k = mix64(k ^ (int(epoch) & _M64))
    k = mix64(k ^ (int(batch_index) & _M64))
    return mix64(k ^ (int(layer) & _M64))


def check_fanouts(fanouts, *, name: str = "fanouts",
                  max_fanout: Optional[int] = None) -> tuple[int, ...]:
    """``fanouts`` as a non-empty tuple of ints, each ``>= 1`` (and ``<= max_fanout`` when
    given) or ``-1`` (every neighbour); ``GraphfeedError`` naming ``name`` and the bad entry."""
    if isinstance(fanouts, (str, bytes)):
        raise GraphfeedError(f"{name} must be a sequence of ints, got {fanouts!r}")
    try:
        vals = list(fanouts)
    except TypeError:
        raise GraphfeedError(f"{name} must be a sequence of ints, got {fanouts!r}") from None
    if not vals:
        raise GraphfeedError(f"{name} must not be empty (one entry per GNN layer)")
    bound = ">= 1" if max_fanout is None else f"between 1 and {max_fanout:,}"
    out = []
    for f in vals:
        try:
            v = check_int(name, f, -1, max_fanout)
        except GraphfeedError:
            v = 0
        if v == 0:
            raise GraphfeedError(
                f"{name} must be ints {bound}, or -1 for every neighbour; got {f!r} in {vals}")
        out.append(v)
    return tuple(out)


#: a sampler's seed is any uint64 (the key space of the counters; ``graphfeed train --seed``
#: takes its lower half); a negative one would alias one of them (``-1`` is ``2**64 - 1``)
MAX_SEED = _M64
#: bytes an edge sampled with replacement takes in a layer's outputs (edge_index, source, id)
EDGE_OUTPUT_BYTES = 32


def check_flag(name: str, value) -> bool:
    """``value`` when it is ``True`` or ``False``; ``bool("no")`` would be ``True``."""
    if not isinstance(value, bool):
        raise GraphfeedError(f"{name} must be True or False, got {type(value).__name__} "
                             f"{shown(value)}")
    return value


def check_seed(seed) -> int:
    """A sampler's seed: an int in ``[0, 2**64 - 1]`` (refused below 0, as the CLI does)."""
    return check_int("seed", seed, 0, MAX_SEED)


def check_batch_position(epoch, batch_index, executor) -> tuple[int, int]:
    """``sample``'s ``(epoch, batch_index)`` as ints of 64 bits (the batch's randomness derives
    from their 64 bits: ``1.5`` would be batch 1, ``2**64 + 1`` batch 1 too); ``executor`` an
    ``Executor`` or ``None``."""
    from concurrent.futures import Executor

    if executor is not None and not isinstance(executor, Executor):
        raise GraphfeedError(f"executor must be a concurrent.futures.Executor or None, got "
                             f"{type(executor).__name__}")
    return (check_int("epoch", epoch, -(1 << 63), MAX_SEED),
            check_int("batch_index", batch_index, -(1 << 63), MAX_SEED))


def kernel_fanouts(fanouts: tuple, graph, replace: bool) -> tuple:
    """The fanouts the kernels get. Without replacement, a fanout above the graph's largest
    in-degree takes every in-edge of every node, as that in-degree does, while the kernels size
    a per-destination table by the fanout (``2 * fanout`` slots past ``FLOYD_MAX_K``:
    ``10**12`` was a ``MemoryError``): such fanouts are capped there, which gives the same
    batches. ``graph.in_degrees`` (O(N) once) is only read when a fanout exceeds
    ``FLOYD_MAX_K``."""
    from ._kernels import FLOYD_MAX_K

    if replace or max(fanouts) <= FLOYD_MAX_K:
        return fanouts
    degrees = graph.in_degrees
    top = max(int(degrees.max()) if degrees.shape[0] else 0, 1)
    return tuple(min(f, top) for f in fanouts)


def check_draws(fanouts: tuple, n_dst: int, replace: bool, memory: int) -> None:
    """Refuse a layer of ``n_dst`` destinations whose draws with replacement (``fanout`` each,
    whatever their degree) would need more than ``memory`` bytes of outputs, before the kernels
    allocate them (``n_dst=1``: the fanouts themselves, at construction)."""
    if not replace or not memory:
        return
    from .._units import format_bytes

    for f in fanouts:
        need = n_dst * f * EDGE_OUTPUT_BYTES
        if need > memory:
            raise GraphfeedError(
                f"fanouts: {f:,} draws with replacement for each of {n_dst:,} destinations "
                f"need {format_bytes(need)} of outputs, more than this machine's "
                f"{format_bytes(memory)}; use a smaller fanout")


def reverse_hops(num_neighbors, *, name: str = "num_neighbors"):
    """graphfeed's ``fanouts`` of PyG's ``num_neighbors``. The two orders are opposite:
    graphfeed (as DGL/GraphBolt) lists the GNN layers in the order a model applies them,
    ``fanouts[0]`` the input layer and ``fanouts[-1]`` the seeds' layer; PyG lists the hops
    outward from the seeds, ``num_neighbors[0]`` the seeds' own neighbours. So a list is
    reversed, and a dict edge type -> list (keys: triples, or PyG's ``"src__rel__dst"``
    strings) has every list reversed. Entries are checked where the fanouts are."""
    from collections.abc import Mapping

    if isinstance(num_neighbors, Mapping):
        out = {}
        for key, hops in num_neighbors.items():
            if isinstance(key, str) and "__" in key:
                key = tuple(key.split("__"))
            out[key] = _reversed_list(hops, f"{name}[{key!r}]")
        return out
    return _reversed_list(num_neighbors, name)


def _reversed_list(values, what: str) -> list:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise GraphfeedError(f"{what} must be a list with one entry per hop, got {values!r}")
    return list(values)[::-1]


def resolve_fanouts(fanouts, num_neighbors, who: str):
    """The fanouts a sampler was given, in graphfeed's order: ``fanouts`` as they are, or
    PyG-ordered ``num_neighbors`` reversed (:func:`reverse_hops`), so PyG users can write the
    list they would give ``NeighborLoader``. Exactly one of the two: both are the same setting,
    and two lists that disagree would leave the sampler to guess (``GraphfeedError``, a
    ``ValueError``)."""
    check_one_order(fanouts, num_neighbors, who)
    return fanouts if num_neighbors is None else reverse_hops(num_neighbors)


def check_one_order(fanouts, num_neighbors, who: str) -> None:
    """Exactly one of ``fanouts`` and ``num_neighbors`` is given (:func:`resolve_fanouts`)."""
    if num_neighbors is None and fanouts is None:
        raise GraphfeedError(f"{who}: give fanouts (graphfeed's order: input layer first) "
                             f"or num_neighbors (PyG's order: the seeds' hop first)")
    if num_neighbors is not None and fanouts is not None:
        raise GraphfeedError(
            f"{who}: fanouts={_shown(fanouts)} and num_neighbors={_shown(num_neighbors)} are the "
            f"same setting in opposite orders (fanouts: input layer first; num_neighbors: "
            f"PyG's, the seeds' hop first); give one of them")


def _shown(v):
    return list(v) if isinstance(v, tuple) else v


def check_method(method: SamplingMethod, replace: bool, sampler: str) -> SamplingMethod:
    """Refuse the method/replacement pairs no definition covers."""
    if replace and method.kind == "labor":
        raise GraphfeedError(f"{sampler}: LABOR samples without replacement; drop replace=True")
    if replace and method.kind == "temporal" and method.strategy == "last":
        raise GraphfeedError(f"{sampler}: temporal strategy 'last' takes the most recent edges "
                             f"once each; drop replace=True or use strategy 'uniform'")
    return method


def labor_key(seed: int, epoch: int, batch_index: int, layer: int, method: SamplingMethod) -> int:
    """The key of LABOR's per-node variates: per layer, or one for every layer with
    ``layer_dependency`` (unused by the other kinds)."""
    layer = -1 if method.layer_dependency else layer
    return mix64(batch_key(seed, epoch, batch_index, layer) ^ 0x4C41424F52)  # "LABOR"


def labor_rotation(seed: int, node_key: int) -> tuple:
    """``(base_key32, shift32)`` of LABOR's ``variates="rotated"``: the key of the fixed
    per-node base variates (from the sampler seed alone, so the sorted columns are built once)
    and the 32-bit shift of one layer (the high half of the layer's ``labor_key``, so
    ``layer_dependency`` shares it across layers)."""
    return mix64(int(seed) ^ 0x4C41424F52424153) & 0xFFFFFFFF, (int(node_key) >> 32) & 0xFFFFFFFF
