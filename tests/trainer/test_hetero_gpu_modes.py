"""``--mode cuda-cuda``/``pinned-cuda`` on a heterogeneous dataset pick the vectorised torch
sampler (``TorchHeteroSampler``); checked on CPU tensors with the device forced to the CPU."""

from __future__ import annotations

import pytest

from test_hetero_train import _cfg, data_root, run_on_cpu  # noqa: F401 (the module's fixture)

pytestmark = pytest.mark.timeout(300)


def test_modes_pick_the_sampler(data_root):
    from graphfeed.sampling.hetero import HeteroNeighborSampler
    from graphfeed.sampling.torch_hetero import TorchHeteroSampler
    from graphfeed.placement.plan import typed_placement
    from graphfeed.placement.apply import mode_sampler
    from graphfeed.placement.typed import open_type_features
    from graphfeed.training import open_dataset

    ds = open_dataset("hetero", data_root, verbose=False)
    h, tfeats = ds.hetero, open_type_features(ds, "ram")

    def sampler(mode):
        return mode_sampler(typed_placement(mode, h, tfeats, "cpu").spec, h, (10, 5), "cpu")

    for mode in ("cuda-cuda", "pinned-cuda"):  # the mode's spec names the torch typed sampler
        s = sampler(mode)
        assert isinstance(s, TorchHeteroSampler) and s.device.type == "cpu" and not s.uva
        assert s.fanouts == (10, 5)
    for mode in ("auto", "cpu-cpu", "cpu-cuda"):
        assert isinstance(sampler(mode), HeteroNeighborSampler)


def test_cuda_cuda_trains_with_the_torch_sampler(data_root):
    """The node task on a typed graph with the device forced to the CPU (``train()`` refuses a
    GPU mode on a CPU device before it gets there)."""
    from graphfeed.training import open_dataset

    cfg = _cfg(data_root, mode="cuda-cuda", epochs=3, mlp_baseline=False)
    ds = open_dataset("hetero", data_root, verbose=False)
    lines = []
    r = run_on_cpu(cfg, ds, lines.append)
    assert r.mode == "cuda-cuda" and "torch typed sampler" in r.placement_reason
    assert len(r.epochs) == 3 and r.epochs[-1].loss < r.epochs[0].loss
    # the same task as the numba sampler's run: the neighbours' types carry the class
    assert r.test_acc >= 0.7, r.test_acc
