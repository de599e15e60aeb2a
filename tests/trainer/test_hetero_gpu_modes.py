"""``--mode cuda-cuda``/``pinned-cuda`` on a heterogeneous dataset pick the vectorised torch
sampler (``TorchHeteroSampler``); checked on CPU tensors with the device forced to the CPU."""

from __future__ import annotations

import pytest

from test_hetero_train import _cfg, data_root  # noqa: F401 (the module's fixture)

pytestmark = pytest.mark.timeout(300)


def test_modes_pick_the_sampler(data_root):
    from graphfeed.sampling.hetero import HeteroNeighborSampler
    from graphfeed.sampling.torch_hetero import TorchHeteroSampler
    from graphfeed.trainer.hetero import hetero_sampler
    from graphfeed.training import open_dataset

    h = open_dataset("hetero", data_root, verbose=False).hetero
    for mode in ("cuda-cuda", "pinned-cuda"):
        s = hetero_sampler(_cfg(data_root, mode=mode, mlp_baseline=False), h, "cpu")
        assert isinstance(s, TorchHeteroSampler) and s.device.type == "cpu" and not s.uva
        assert s.fanouts == (10, 5)
    for mode in ("auto", "cpu-cpu", "cpu-cuda"):
        assert isinstance(hetero_sampler(_cfg(data_root, mode=mode, mlp_baseline=False), h, "cpu"),
                          HeteroNeighborSampler)


def test_cuda_cuda_trains_with_the_torch_sampler(data_root):
    """The hetero trainer itself with the device forced to the CPU (``train()`` refuses a GPU
    mode on a CPU device before it gets there)."""
    from graphfeed.trainer.hetero import run_hetero
    from graphfeed.training import _split_ids, open_dataset

    cfg = _cfg(data_root, mode="cuda-cuda", epochs=3, mlp_baseline=False)
    ds = open_dataset("hetero", data_root, verbose=False)
    lines = []
    r = run_hetero(cfg, ds, _split_ids(ds, cfg.split), "cpu", 0, 1, lines.append)
    assert r.mode == "cuda-cuda" and "torch heterogeneous sampler" in r.placement_reason
    assert len(r.epochs) == 3 and r.epochs[-1].loss < r.epochs[0].loss
    # the same task as the numba sampler's run: the neighbours' types carry the class
    assert r.test_acc >= 0.7, r.test_acc
