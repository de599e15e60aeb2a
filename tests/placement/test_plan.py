"""DataPlan: every choice checked once and frozen; decide -> open/share -> place on a dataset."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from graphfeed.errors import GraphfeedError
from graphfeed.features.disk import DiskFeature
from graphfeed.features.memory import InMemoryFeature
from graphfeed.placement import DataPlan, node_loader
from graphfeed.sampling.neighbor import NeighborSampler


def test_resolve_checks_every_choice_once(no_gpu):
    plan = DataPlan.resolve(features="disk", cache_size="2GB", cache_policy="lru", mode="auto",
                            device="auto")
    assert (plan.features, plan.cache_size, plan.cache_policy, plan.mode, plan.device) == (
        "disk", 2 * 10**9, "lru", "auto", "cpu")
    assert DataPlan.resolve(cache_size="2GiB").cache_size == 2 * 2**30
    assert plan.world.world_size == 1 and not plan.on_gpu
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.mode = "cpu-cpu"
    for bad, match in [(dict(features="s3"), "valid: ram, disk, lmdb"),
                       (dict(cache_size="lots"), "not a size"),
                       (dict(cache_policy="fifo"), "valid policies"),
                       (dict(mode="gpu"), "valid modes: auto, cpu-cpu"),
                       (dict(mode="cuda-cuda", device="cpu"), "trains on a GPU"),
                       (dict(device="tpu"), "device")]:
        with pytest.raises(GraphfeedError, match=match):
            DataPlan.resolve(**bad)


@pytest.mark.parametrize("backend,kind", [("ram", InMemoryFeature), ("disk", DiskFeature)])
def test_prepare_places_inputs_and_labels_for_the_loader(tiny_dataset, backend, kind, no_gpu):
    plan = DataPlan.resolve(features=backend, mode="cpu-cpu")
    placed = plan.prepare(tiny_dataset, [5, 5], seed=3)
    assert placed.mode == "cpu-cpu" and "cpu-cpu" in placed.placement.reason
    assert isinstance(placed.sampler, NeighborSampler) and placed.sampler.fanouts == (5, 5)
    assert set(placed.features) == {"feat", "label"}
    assert isinstance(placed.features["feat"], kind)
    assert isinstance(placed.features["label"], InMemoryFeature)  # labels always in RAM
    ids = np.asarray(tiny_dataset.train_ids)[:64]
    loader = node_loader(ids, placed, batch_size=32, shuffle=False)
    try:
        mb = next(iter(loader))
    finally:
        loader.close()
    want = torch.as_tensor(np.asarray(tiny_dataset.labels)[ids[:32]])
    assert torch.equal(mb.labels.to(want.dtype), want)
    rows = torch.as_tensor(np.asarray(tiny_dataset.features["feat"].read(mb.input_nodes)))
    assert torch.equal(mb.node_features["feat"], rows)


def test_auto_decides_before_opening_from_the_datasets_sizes(tiny_dataset, no_gpu):
    plan = DataPlan.resolve()
    g = int(tiny_dataset.graph.nbytes)
    f = sum(int(tiny_dataset.features[n].nbytes) for n in ("feat", tiny_dataset.target))
    placement = plan.decide(g, f)
    assert placement.mode == "cpu-cpu" and placement.details["graph_bytes"] == g
    assert plan.prepare(tiny_dataset, [2]).placement.details["feature_bytes"] == f
