"""A dataset split into parts served across processes on torch.distributed (issue 17).

- :func:`partition_dataset` (``graphfeed partition``): relabel the nodes so each part owns a
  contiguous id range (METIS or random), one folder per part plus the book (:mod:`.book`).
- :func:`read_book` / :func:`load_part`: read a partitioned dataset back (one part per process).
- :class:`KeyedNeighborSampler`: uniform sampling keyed by global node id on a whole graph, the
  single-process reference of the distributed sampler.
- :class:`DistNeighborSampler` / :class:`DistFeature` (:mod:`.dist`): per-layer sampling of
  remote frontier nodes by their owners and remote feature rows, exchanged with
  ``all_to_all_single``, with a cache of hot remote rows.

Nothing here imports numba or torch.distributed until a function that needs it is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# module -> the public names it defines, each imported on first use
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".book": "PartitionBook Part read_book load_part check_partition METHODS",
    ".partitioner": "partition_dataset assign_parts write_partition describe",
    ".keyed": "KeyedNeighborSampler",
    ".dist": "Exchange DistNeighborSampler DistFeature",
    ".seeds": "PartItemSampler",
})


if TYPE_CHECKING:  # pragma: no cover
    from .book import METHODS, Part, PartitionBook, check_partition, load_part, read_book
    from .dist import DistFeature, DistNeighborSampler, Exchange
    from .keyed import KeyedNeighborSampler
    from .partitioner import assign_parts, describe, partition_dataset, write_partition
    from .seeds import PartItemSampler
