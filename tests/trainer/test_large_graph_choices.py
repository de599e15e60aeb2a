"""What a papers-sized run needs from the trainer: ``--steps-per-epoch`` caps an epoch's
batches (every task, resumable, refused when changed on resume), and ``--eval auto`` samples
with the training fanouts where a layer-wise pass would dwarf the evaluation."""

from __future__ import annotations

import numpy as np
import pytest

from graphfeed.errors import GraphfeedError
from graphfeed.loader.item_sampler import ItemSampler
from graphfeed.partition.seeds import PartItemSampler
from graphfeed.trainer import evaluate as E
from graphfeed.training import TrainConfig, train


def test_item_sampler_max_batches_takes_the_first_batches_of_each_order():
    full = ItemSampler(100, 8, shuffle=True, seed=3)
    capped = ItemSampler(100, 8, shuffle=True, seed=3, max_batches=4)
    assert len(full) == 13 and len(capped) == 4
    for epoch in (0, 1):
        a = [b.seeds.tolist() for b in full.iter_epoch(epoch)][:4]
        b = [b.seeds.tolist() for b in capped.iter_epoch(epoch)]
        assert a == b
    assert [b.index for b in capped.iter_epoch(0, start=2)] == [2, 3]
    capped.max_batches = 50  # above the epoch's batches: no cap
    assert len(capped) == 13
    with pytest.raises(GraphfeedError, match="max_batches"):
        capped.max_batches = 0
    ranks = [ItemSampler(100, 8, rank=r, world_size=3, max_batches=2) for r in range(3)]
    assert [len(r) for r in ranks] == [2, 2, 2]
    part = PartItemSampler(np.arange(40), 8, num_batches=5, max_batches=3)
    assert len(part) == 3 and len(list(part.iter_epoch(0))) == 3 and part.own_batches() == 5


def test_steps_per_epoch_caps_training_batches(tmp_path):
    seen: dict = {}
    r = train(TrainConfig(dataset="tiny", epochs=2, steps_per_epoch=2, batch_size=64,
                          mlp_baseline=False, progress=False, patience=0,
                          save=str(tmp_path / "ck")),
              on_batch=lambda e, i: seen.setdefault(e, []).append(i))
    assert seen == {0: [0, 1], 1: [0, 1]}
    assert len(r.epochs) == 2
    with pytest.raises(GraphfeedError, match="steps_per_epoch"):
        train(TrainConfig(dataset="tiny", epochs=3, steps_per_epoch=3, batch_size=64,
                          mlp_baseline=False, progress=False, resume=str(tmp_path / "ck")))
    with pytest.raises(GraphfeedError, match="steps_per_epoch"):
        TrainConfig(steps_per_epoch=0).validate()


def test_layerwise_cost_note_only_for_graphs_too_large():
    # medium: 1M nodes, 18M edges, 300k evaluated nodes: layer-wise stays
    assert E.layerwise_cost_note(2, 1_000_000, 18_300_000, 300_000, (10, 10)) is None
    # papers100M: 111M nodes, 1.6B edges, 340k evaluated nodes
    note = E.layerwise_cost_note(2, 111_059_956, 1_615_685_872, 339_603, (10, 10))
    assert note is not None and "1,615,685,872 edges" in note and "--eval layerwise" in note
    # small graphs are always layer-wise, however few nodes are evaluated
    assert E.layerwise_cost_note(2, 2_708, 10_556, 1, (10, 10)) is None


def test_auto_samples_with_the_training_fanouts_when_layerwise_costs_too_much(monkeypatch):
    monkeypatch.setattr(E, "LAYERWISE_SMALL_WORK", 0)
    monkeypatch.setattr(E, "LAYERWISE_MAX_RATIO", 0.01)
    r = train(TrainConfig(dataset="tiny", epochs=1, fanouts=(4, 3), mlp_baseline=False,
                          progress=False))
    assert r.eval_method == "sampled" and r.eval_fanouts == [4, 3]
    # forcing layer-wise is still possible
    r = train(TrainConfig(dataset="tiny", epochs=1, fanouts=(4, 3), eval_method="layerwise",
                          mlp_baseline=False, progress=False))
    assert r.eval_method == "layerwise"
