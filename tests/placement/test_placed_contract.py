"""One contract, run against every implementation of ``placement.base.Placed``: a plain graph
placed by a mode, a typed graph placed by a mode, and one rank's part of a partitioned dataset
(a one-part partition under a one-rank gloo group). What a task and the evaluators rely on:

- ``describe()`` is one line; ``in_dims`` is the width of ``input_features``' rows;
- an evaluation loader (``train=False``) yields every id once, in order, with the rows of its
  inputs joined and the labels ``label_feature`` reads at its seeds;
- a training loader covers the ids once per epoch, in another order per epoch;
- ``original_ids`` keeps the count and order; ``close`` may be called twice;
- ``join`` gives the loader keywords, or is refused in one line by data that only its own
  loader can feed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphfeed.errors import GraphfeedError

pytestmark = pytest.mark.timeout(300)

KINDS = ["plain", "typed", "partitioned"]


@pytest.fixture(params=KINDS)
def placed(request, builtin_root, tmp_path):
    from graphfeed.datasets import open_dataset
    from graphfeed.placement.plan import DataPlan

    kind = request.param
    plan = DataPlan.resolve(mode="cpu-cpu", device="cpu")
    if kind != "partitioned":
        name = "tiny" if kind == "plain" else "hetero"
        p = plan.place_dataset(open_dataset(name, builtin_root(name)), [4, 3])
        yield p
        p.close()
        return
    import torch.distributed as dist

    from graphfeed.partition import partition_dataset

    out = tmp_path / "parts"
    partition_dataset(open_dataset("tiny", builtin_root("tiny")), out, 1, method="random")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        p = plan.place_partitions(out, [4, 3])
        yield p
        p.close()
    finally:
        dist.destroy_process_group()


def _ids(p) -> np.ndarray:
    ids = p.node_ids()
    if ids is None:  # no process holds every node: the part's own training seeds
        ids = p.splits["train"]
    return np.asarray(ids, dtype=np.int64)[:60]


def test_describe_and_widths(placed):
    line = placed.describe()
    assert line and "\n" not in line
    assert placed.kind in ("plain", "typed", "partitioned")
    feats = placed.input_features
    assert feats
    dims = placed.in_dims
    widths = {t: int(np.prod(f.row_shape)) for t, f in feats.items()}
    assert (dims == widths[None]) if placed.hetero is None else (dims == widths)


def test_an_evaluation_loader_yields_every_id_once_in_order(placed):
    ids = _ids(placed)
    loader = placed.loader(ids, train=False, batch_size=7, seed=0, num_threads=1)
    seeds, labels = [], []
    try:
        loader.set_epoch(0)
        for batch in loader:
            seeds.append(batch.seeds.cpu().numpy())
            labels.append(batch.labels.cpu().numpy())
            inputs = batch.inputs
            rows = inputs if isinstance(inputs, torch.Tensor) else next(iter(inputs.values()))
            assert rows.shape[0] > 0
    finally:
        loader.close()
    got = np.concatenate(seeds)
    assert got.tolist() == ids.tolist()
    want = placed.label_feature.read(torch.from_numpy(ids)).cpu().numpy().reshape(-1)
    assert np.concatenate(labels).reshape(-1).tolist() == want.tolist()


def test_a_training_loader_covers_the_ids_once_per_epoch(placed):
    ids = _ids(placed)
    loader = placed.loader(ids, train=True, batch_size=8, seed=3, labels=False, num_threads=1)
    orders = []
    try:
        for epoch in (0, 1):
            loader.set_epoch(epoch)
            orders.append(np.concatenate([b.seeds.cpu().numpy() for b in loader]))
    finally:
        loader.close()
    for order in orders:
        assert sorted(order.tolist()) == sorted(ids.tolist())
    assert orders[0].tolist() != orders[1].tolist()


def test_original_ids_join_and_close(placed):
    ids = _ids(placed)
    orig = np.asarray(placed.original_ids(ids))
    assert orig.shape == ids.shape
    if placed.kind == "partitioned":
        with pytest.raises(GraphfeedError, match="partitioned data feeds batches only through"):
            placed.join()
    else:
        kw = placed.join(labels=False)
        assert kw["labels"] is None
        assert ("type_features" in kw) == (placed.hetero is not None)
    placed.close()
    placed.close()
