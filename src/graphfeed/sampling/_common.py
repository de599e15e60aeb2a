"""Helpers shared by the samplers: argument checks and the counter-based batch keys."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .._checks import check_int
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
