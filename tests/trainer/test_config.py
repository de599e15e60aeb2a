"""TrainConfig bounds, the model-size guard and the evaluation plan."""

from __future__ import annotations

import pytest

from graphfeed.errors import GraphfeedError
from graphfeed.trainer.config import TrainConfig
from graphfeed.trainer.evaluate import (EVAL_MAX_BATCH_EDGES, EVAL_MAX_BATCH_INPUT_BYTES,
                                       default_eval_fanouts, plan_eval)
from graphfeed.trainer.tasks.node import check_model_fits


@pytest.mark.parametrize("field, value, fragment", [
    ("fanouts", (15, 0, 5), "fanouts"),
    ("fanouts", (), "empty"),
    ("fanouts", (10**20,), "100,000"),
    ("fanouts", "10,10", "sequence"),
    ("seed", -1, "seed"),
    ("seed", True, "integer"),
    ("hidden", 100_000_000, "hidden"),
    ("weight_decay", -1.0, "weight_decay"),
    ("lr", float("nan"), "lr"),
    ("dropout", 1.0, "dropout"),
    ("dist_timeout", 1e300, "dist_timeout"),
    ("num_threads", 10**6, "num_threads"),
    ("model", "gin", "unknown model"),
    ("predict_nodes", "train", "predict_nodes"),
])
def test_bad_values_are_refused(field, value, fragment):
    with pytest.raises(GraphfeedError, match=fragment):
        TrainConfig(**{field: value}).validate()


def test_cache_size_needs_a_store_that_can_use_it():
    with pytest.raises(GraphfeedError, match="cache_size"):
        TrainConfig(cache_size=1 << 20, features="ram").validate()
    TrainConfig(cache_size=1 << 20, features="disk").validate()


def test_a_model_too_big_for_memory_is_refused_before_allocation():
    cfg = TrainConfig(hidden=65_536).validate()
    # 10M input features x 65,536 hidden x 2 weights x 16 bytes: 21 TB, more than any host
    with pytest.raises(GraphfeedError, match="parameters.*smaller --hidden"):
        check_model_fits(cfg, 10_000_000, 10, "cpu")
    check_model_fits(TrainConfig().validate(), 100, 10, "cpu")


def test_eval_plan_caps_fanouts_and_bounds_the_batch():
    assert default_eval_fanouts(1) == (10_000,)
    assert default_eval_fanouts(2) == (100, 100)
    assert default_eval_fanouts(3) == (21, 21, 21)
    # a graph whose largest in-degree is 4: the cap never binds, batches stay large
    p = plan_eval(2, 256, max_in_degree=4)
    assert p.fanouts == (100, 100) and p.batch_size == 1024
    # a power-law graph: the worst case per seed is 100 + 100 * 100 sampled edges
    p = plan_eval(2, 256, max_in_degree=50_000)
    assert p.batch_size == EVAL_MAX_BATCH_EDGES // 10_100
    # every neighbour on a hub-heavy graph: tiny batches, bounded memory
    p = plan_eval(2, 1024, max_in_degree=5_000, eval_fanouts=(-1, -1))
    assert p.fanouts == (-1, -1) and p.batch_size == max(1, EVAL_MAX_BATCH_EDGES // (5_000 + 5_000**2))
    # wide features (issue 29.11: 4,714 0/1 features): the input rows' bytes bound the batch too
    p = plan_eval(2, 4096, max_in_degree=50, in_dim=4_714)
    rows = 4096 * (1 + 50 + 50 * 50)
    assert rows * 4_714 * 4 > 40e9  # what a batch of 4096 seeds could have held
    assert p.batch_size == EVAL_MAX_BATCH_INPUT_BYTES // ((50 + 50 * 50 + 1) * 4_714 * 4)
    assert p.batch_size * (1 + 50 + 2500) * 4_714 * 4 <= EVAL_MAX_BATCH_INPUT_BYTES
    # narrow features: the edge bound alone, as before
    assert plan_eval(2, 4096, max_in_degree=50, in_dim=8) == plan_eval(2, 4096, max_in_degree=50)


def test_sampler_fields_build_the_method():
    from graphfeed.sampling import SamplingMethod

    cfg = TrainConfig(sampler="temporal", temporal_strategy="last", strict_time=True,
                      edge_times="t").validate()
    assert cfg.sampling_method() == SamplingMethod("temporal", strategy="last", strict=True,
                                                   edge_times="t")
    assert TrainConfig(sampler="weighted", weight_feature="w").sampling_method().weights == "w"
    assert TrainConfig().sampling_method().is_uniform
    with pytest.raises(GraphfeedError, match="kind"):
        TrainConfig(sampler="random").validate()
    with pytest.raises(GraphfeedError, match="labor samples without replacement"):
        TrainConfig(sampler="labor", replace=True).validate()
    with pytest.raises(GraphfeedError, match="last"):
        TrainConfig(sampler="temporal", temporal_strategy="last", replace=True).validate()
