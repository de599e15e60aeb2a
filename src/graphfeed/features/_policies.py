"""Cache policy names and the codes the cache kernels know them by (light: no torch, no numba),
shared by ``CachedFeature`` and the command line's choices."""

from __future__ import annotations

from typing import Union

from ..errors import GraphfeedError

__all__ = ["POLICIES", "AUTO_POLICY", "policy_code", "resolve_policy"]

#: name -> policy code used by the kernels (see ``_cache_kernels``). ``degree`` is static: the
#: rows of the highest scores (a graph's out-degrees: how often a node is sampled) are cached
#: on their first miss and never evicted.
POLICIES: dict[str, int] = {"lru": 0, "clock": 1, "sieve": 2, "s3fifo": 3, "degree": 4}
_ALIASES = {"s3-fifo": "s3fifo", "s3_fifo": "s3fifo"}
#: the default of the caches a dataset's features get: ``degree`` where the graph gives degrees
#: (a static cache of the hubs: 75% of papers' sampled rows with 14% of them cached, against
#: SIEVE's 69%, docs/benchmarks.md), else ``sieve``
AUTO_POLICY = "auto"


def resolve_policy(policy: str, have_degrees: bool) -> str:
    """``policy``, with :data:`AUTO_POLICY` made concrete (``degree`` when degrees are known)."""
    if str(policy).lower() == AUTO_POLICY:
        return "degree" if have_degrees else "sieve"
    return policy


def policy_code(policy: Union[str, int], *, allow_auto: bool = False) -> int:
    """The kernel code of a policy name (case-insensitive); unknown names list the valid ones.
    ``allow_auto``: accept :data:`AUTO_POLICY` too (code -1), for settings resolved later."""
    if isinstance(policy, int) and policy in POLICIES.values():
        return policy
    name = _ALIASES.get(str(policy).lower(), str(policy).lower())
    if allow_auto and name == AUTO_POLICY:
        return -1
    if name not in POLICIES:
        valid = sorted(POLICIES) + ([AUTO_POLICY] if allow_auto else [])
        raise GraphfeedError(f"unknown cache policy {policy!r}; valid policies: "
                             f"{', '.join(valid)}")
    return POLICIES[name]
