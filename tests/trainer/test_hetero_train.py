"""``graphfeed train`` on the built-in heterogeneous dataset: the R-GCN over sampled typed
neighbourhoods clearly beats an MLP on the papers' own features."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def data_root(builtin_root):
    return builtin_root("hetero")


def _cfg(data_root, **kw):
    from graphfeed.training import TrainConfig

    base = dict(dataset="hetero", epochs=4, batch_size=512, hidden=64, fanouts=(10, 5),
                device="cpu", seed=0, num_threads=1, progress=False, data_root=data_root)
    base.update(kw)
    return TrainConfig(**base)


def run_on_cpu(cfg, ds, say=print):
    """``cfg``'s task through the one loop, ``cfg.mode``'s logic with the device forced to the
    CPU (``train()`` refuses a GPU mode on a CPU device before it gets there)."""
    from graphfeed.distributed.world import World
    from graphfeed.placement.plan import DataPlan
    from graphfeed.trainer.fit import fit
    from graphfeed.trainer.tasks import TASKS

    cfg = cfg.validate()  # as train() does: fills the task's defaults (dropout, weight decay)
    plan = DataPlan(features=cfg.features, mode=cfg.mode, device="cpu", world=World())
    task = TASKS.get(cfg.task).prepare(cfg, ds, plan, rank=0, world_size=1, say=say)
    return fit(task)


def test_gnn_clearly_above_mlp(data_root):
    from graphfeed.training import train

    r = train(_cfg(data_root))
    assert r.model == "rgcn" and len(r.epochs) == 4
    assert r.mlp_test_acc is not None
    # the class lives in the paper's field and authors, not in its own features
    assert r.test_acc >= 0.8, r.test_acc
    assert r.test_acc > r.mlp_test_acc + 0.3, (r.test_acc, r.mlp_test_acc)
    assert r.epochs[-1].loss < r.epochs[0].loss


def test_dry_run_and_refusals(data_root, tmp_path):
    from graphfeed.errors import GraphfeedError
    from graphfeed.training import check_run, train

    info = check_run(_cfg(data_root))
    assert info["in_dim"] == 32 and info["num_classes"] == 6
    with pytest.raises(GraphfeedError, match="sampled uniformly"):
        train(_cfg(data_root, sampler="labor"))


def test_disk_features(data_root):
    from graphfeed.training import train

    r = train(_cfg(data_root, epochs=1, features="disk", mlp_baseline=False))
    assert len(r.epochs) == 1 and r.test_acc > 0.3
