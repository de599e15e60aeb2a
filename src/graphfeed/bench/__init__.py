"""Benchmark functions behind ``graphfeed bench`` (reused by the scripts in benchmarks/)."""

#: what ``graphfeed bench features`` can time: feature backends, and the page-cache states of disk
FEATURE_VARIANTS = ("ram", "disk-warm", "disk-cold", "disk-direct", "lmdb", "cache")


def check_feature_variants(names) -> list:
    """``names`` if each is in :data:`FEATURE_VARIANTS`, else an error listing the valid ones."""
    from ..errors import GraphfeedError

    names = list(names)
    unknown = [b for b in names if b not in FEATURE_VARIANTS]
    if unknown:
        raise GraphfeedError(f"unknown backends {unknown}; valid: {', '.join(FEATURE_VARIANTS)}")
    return names
