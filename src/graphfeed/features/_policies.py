"""Cache policy names and the codes the cache kernels know them by (light: no torch, no numba),
shared by ``CachedFeature`` and the command line's choices."""

from __future__ import annotations

from typing import Union

from ..errors import GraphfeedError

__all__ = ["POLICIES", "policy_code"]

#: name -> policy code used by the kernels (see ``_cache_kernels``). ``degree`` is static: the
#: rows of the highest scores (a graph's out-degrees: how often a node is sampled) are cached
#: on their first miss and never evicted.
POLICIES: dict[str, int] = {"lru": 0, "clock": 1, "sieve": 2, "s3fifo": 3, "degree": 4}
_ALIASES = {"s3-fifo": "s3fifo", "s3_fifo": "s3fifo"}


def policy_code(policy: Union[str, int]) -> int:
    """The kernel code of a policy name (case-insensitive); unknown names list the valid ones."""
    if isinstance(policy, int) and policy in POLICIES.values():
        return policy
    name = _ALIASES.get(str(policy).lower(), str(policy).lower())
    if name not in POLICIES:
        raise GraphfeedError(
            f"unknown cache policy {policy!r}; valid policies: {', '.join(sorted(POLICIES))}"
        )
    return POLICIES[name]
