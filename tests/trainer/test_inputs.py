"""``--inputs`` (issue 42: GraphBolt's tutorial stores ``feat_0``/``feat_1`` and no ``feat``):
the model reads the named node features side by side, exactly as if one ``feat`` held them
(the same run, loss for loss); a missing name, a typed dataset and partitions are refused by
name; ``JoinedFeature`` concatenates rows of several backends and promotes the dtype."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphfeed.errors import GraphfeedError
from graphfeed.training import TrainConfig, train

pytestmark = pytest.mark.timeout(300)
N = 200


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from graphfeed.datasets import write_dataset
    from graphfeed.graph.csc import CSCGraph

    rng = np.random.default_rng(0)
    g = CSCGraph.from_edges(rng.integers(0, N, 2000), rng.integers(0, N, 2000), N,
                            add_reverse=True, drop_duplicates=True)
    a = rng.normal(size=(N, 5)).astype(np.float32)
    b = (rng.random((N, 3)) < 0.5).astype(np.uint8)
    y = rng.integers(0, 3, N)
    perm = rng.permutation(N)
    splits = {"train": perm[:100], "valid": perm[100:150], "test": perm[150:]}
    root = tmp_path_factory.mktemp("inputs")
    apart = write_dataset(root / "apart", graph=g, splits=splits, num_classes=3,
                          node_features={"feat_0": a, "feat_1": b, "label": y})
    joined = write_dataset(root / "joined", graph=g, splits=splits, num_classes=3,
                           node_features={"feat": np.hstack([a, b.astype(np.float32)]),
                                          "label": y})
    return apart, joined


def _cfg(path, **kw):
    return TrainConfig(dataset=str(path), epochs=3, hidden=8, fanouts=(4, 4), progress=False,
                       num_threads=1, device="cpu", mlp_baseline=False, **kw)


def test_inputs_side_by_side_train_as_one_feature(data):
    apart, joined = data
    a = train(_cfg(apart, inputs=("feat_0", "feat_1")))
    b = train(_cfg(joined))
    assert [e.loss for e in a.epochs] == [e.loss for e in b.epochs]
    assert a.test == b.test


def test_inputs_are_refused_by_name(data):
    apart, _ = data
    with pytest.raises(GraphfeedError, match=r"no node feature 'feat'.*feat_0.*--inputs"):
        train(_cfg(apart))
    with pytest.raises(GraphfeedError, match="no node feature 'nope'"):
        train(_cfg(apart, inputs=("feat_0", "nope")))
    for bad in ((), ("a", "a"), "feat", ("",)):
        with pytest.raises(GraphfeedError, match="inputs must be distinct node feature names"):
            _cfg(apart, inputs=bad).validate()
    with pytest.raises(GraphfeedError, match="partitioned dataset's input is its 'feat'"):
        _cfg(apart, inputs=("feat_0",), partitions=str(apart)).validate()


def test_a_typed_dataset_refuses_inputs(builtin_root):
    cfg = TrainConfig(dataset="hetero", data_root=builtin_root("hetero"), inputs=("x",),
                      epochs=1, progress=False, device="cpu")
    with pytest.raises(GraphfeedError, match="--inputs chooses an untyped dataset's input"):
        train(cfg)


def test_joined_feature_reads_and_promotes():
    from graphfeed.features.joined import JoinedFeature
    from graphfeed.features.memory import InMemoryFeature

    x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    m = torch.tensor([[1], [0], [1], [0]], dtype=torch.uint8)
    j = JoinedFeature([InMemoryFeature(x), InMemoryFeature(m)], ["x", "m"])
    assert j.shape == (4, 4) and j.dtype == torch.float32
    ids = torch.tensor([3, 0, 3])
    torch.testing.assert_close(j.read(ids), torch.cat([x[ids], m[ids].float()], dim=1))
    out = torch.empty((3, 4))
    assert j.read(ids, out=out) is out
    with pytest.raises(GraphfeedError, match="same rows and device"):
        JoinedFeature([InMemoryFeature(x), InMemoryFeature(m[:3])], ["x", "m"])


def test_the_dry_run_counts_the_inputs(data):
    from graphfeed.training import check_run

    apart, _ = data
    plan = check_run(_cfg(apart, inputs=("feat_0", "feat_1")))
    assert plan["in_dim"] == 8  # 5 float32 + 3 uint8 columns
    # the two inputs and the labels, as a run places them: 200 x (5 x 4 + 3 x 1 + 8) bytes
    assert "features 6.2 kB" in plan["placement"]
