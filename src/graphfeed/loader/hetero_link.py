"""Loading typed link-prediction batches: ``HeteroLinkDataLoader``, the heterogeneous loader's
per-type feature stage over a :class:`~graphfeed.sampling.hetero_link.HeteroLinkSampler`."""

from __future__ import annotations

from ..errors import GraphfeedError
from ..sampling.hetero_link import HeteroLinkSampler
from .dataloader import DataLoader
from .hetero import FetchHeteroFeatures, HeteroDataLoader, _type_features

__all__ = ["HeteroLinkDataLoader"]


class HeteroLinkDataLoader(HeteroDataLoader):
    """A ``HeteroDataLoader`` whose sampler is a ``HeteroLinkSampler`` (its items are
    positions into the sampler's table of typed pairs): every batch is a
    ``HeteroLinkMiniBatch`` with ``type_features`` read at the endpoints' neighbourhoods.
    No labels (the pairs carry theirs); CPU batches, as ``HeteroDataLoader``."""

    def __init__(self, item_sampler, sampler, *, type_features=None, num_threads: int = 2,
                 prefetch: int = 2, reuse_buffers: bool = True):
        if not isinstance(sampler, HeteroLinkSampler):
            raise GraphfeedError(f"HeteroLinkDataLoader needs a HeteroLinkSampler, got "
                                 f"{type(sampler).__name__}")
        # the base DataLoader's setup; the per-type stage is the heterogeneous loader's
        DataLoader.__init__(self, item_sampler, sampler, num_threads=num_threads,
                            prefetch=prefetch, reuse_buffers=reuse_buffers)
        self.type_features = _type_features(sampler, type_features)
        self._fetch = FetchHeteroFeatures(
            self.node_features, None, type_features=self.type_features,
            reuse_buffers=self.reuse_buffers, max_buffers=self.num_threads + self.prefetch + 3,
            stats=self.stats)
