"""The heterogeneous loaders' join with features that live on the sampling device (``--mode
cuda-cuda``/``pinned-cuda``): each type's rows are read at the batch's own type-local id tensors
(no copy to the host, no pooled host buffer), while features on the CPU still get their ids on
the CPU. Checked without a GPU through a feature that says it lives on one."""

from __future__ import annotations

import numpy as np
import torch

from graphfeed.features.base import Feature
from graphfeed.features.memory import InMemoryFeature
from graphfeed.loader.dataloader import DataLoader
from graphfeed.loader.fetch import FetchFeatures
from graphfeed.loader.item_sampler import ItemSampler
from graphfeed.sampling.torch_hetero import TorchHeteroSampler

from test_hetero_loader import NUM, setup  # noqa: F401 (the module's fixture)


class OnDevice(Feature):
    """Rows in CPU memory behind a feature that reports ``device`` (a GPU's name: nothing
    touches CUDA); records the id tensors it is given."""

    kind = "on-device"

    def __init__(self, data, device="cuda:0"):
        self.data_ = torch.as_tensor(data)
        self._device = torch.device(device)
        self.seen = []

    @property
    def shape(self):
        return tuple(self.data_.shape)

    @property
    def dtype(self):
        return self.data_.dtype

    @property
    def device(self):
        return self._device

    def _read(self, ids, out, executor):
        assert out is None  # no host buffer for a feature on a device
        self.seen.append(ids)
        return torch.index_select(self.data_, 0, ids)


def test_device_features_read_at_the_batchs_own_ids(setup):  # noqa: F811
    g, _, _, xu, xi, _ = setup
    user, item = OnDevice(xu), OnDevice(xi)
    fetch = FetchFeatures({}, None, type_features={"user": {"feat": user},
                                                          "item": {"feat": item}})
    assert not any(k.startswith("type:") for k in fetch.pools)  # no host buffers for them
    s = TorchHeteroSampler(g, [4, 3], seed=5)
    off = int(g.node_offsets[g.type_id("user")])
    for b in range(3):
        mb = fetch(s.sample(torch.arange(off + 64 * b, off + 64 * (b + 1)), epoch=0,
                            batch_index=b))
        ids = mb.input_nodes_dict
        # the very tensors of the batch: nothing copied on the way
        assert user.seen[-1] is ids["user"] and item.seen[-1] is ids["item"]
        assert torch.equal(mb.x_dict["user"], torch.from_numpy(xu[ids["user"].numpy()]))
        assert torch.equal(mb.x_dict["item"], torch.from_numpy(xi[ids["item"].numpy()]))


def test_the_loader_joins_placed_features_like_host_ones(setup):  # noqa: F811
    """Features placed for a GPU mode on the CPU device (in-memory copies) give the loader the
    same batches as the dataset's own, with either sampler."""
    from graphfeed.placement.apply import place_feature
    from graphfeed.sampling.hetero import HeteroNeighborSampler

    g, feats, labels, *_ = setup
    keep: list = []
    placed = {t: {n: place_feature(f, "device", torch.device("cpu"), keep)
                  for n, f in fs.items()} for t, fs in feats.items()}
    assert all(isinstance(f, InMemoryFeature) for fs in placed.values() for f in fs.values())
    off = int(g.node_offsets[g.type_id("user")])
    for sampler in (HeteroNeighborSampler(g, [4, 3], seed=5), TorchHeteroSampler(g, [4, 3], seed=5)):
        out = []
        for tf in (feats, placed):
            items = ItemSampler(np.arange(200) + off, 64, shuffle=True, seed=3)
            with DataLoader(items, sampler, type_features=tf, labels=labels,
                                  num_threads=2) as ld:
                out.append([{t: dict(v) for t, v in mb.type_features.items()} for mb in ld])
        assert len(out[0]) == len(out[1]) == 4
        for a, b in zip(*out):
            assert a.keys() == b.keys()
            for t in a:
                for n in a[t]:
                    assert torch.equal(a[t][n], b[t][n]), (t, n)
