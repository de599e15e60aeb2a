"""``graphfeed train --task link`` on the built-in typed link dataset ``hetero-link`` (author
writes paper): the R-GCN encoder with a dot decoder ranks held-out papers clearly above the
degree baseline; dry runs and refusals."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def data_root(builtin_root):
    return builtin_root("hetero-link")


def _cfg(data_root, **kw):
    from graphfeed.training import TrainConfig

    base = dict(dataset="hetero-link", task="link", epochs=2, batch_size=1024, hidden=64,
                fanouts=(10, 5), eval_negatives=100, device="cpu", seed=0, num_threads=1,
                progress=False, data_root=data_root)
    base.update(kw)
    return TrainConfig(**base)


def test_mrr_clearly_above_the_degree_baseline(data_root):
    from graphfeed.training import train

    r = train(_cfg(data_root))
    assert r.task == "link" and r.model == "rgcn+dot" and len(r.epochs) == 2
    base = r.baselines["degree"]["test"]
    assert set(r.test) == {"mrr", "hits@10", "hits@50", "hits@100", "roc_auc"}
    # 100 negatives per pair: a random ranking scores an MRR of about 0.05
    assert r.test["mrr"] >= 0.12, r.test
    assert r.test["mrr"] > 3 * base["mrr"], (r.test, base)
    assert r.test["roc_auc"] >= 0.8, r.test
    assert r.epochs[-1].loss < r.epochs[0].loss


def test_dry_run_and_refusals(data_root, tmp_path):
    from graphfeed.errors import GraphfeedError
    from graphfeed.training import check_run, train

    plan = check_run(_cfg(data_root))
    assert plan["edge_types"] == [["author", "writes", "paper"]] and plan["model"] == "rgcn"
    with pytest.raises(GraphfeedError, match="uniformly"):
        train(_cfg(data_root, sampler="labor"))
    from graphfeed.datasets.open import open_dataset
    from graphfeed.trainer.tasks.link import check_link_dataset as check_typed_link_dataset

    ds = open_dataset("hetero-link", data_root)
    with pytest.raises(GraphfeedError, match="ending in .npz"):  # one array per relation
        check_typed_link_dataset(_Cfg(predict=str(tmp_path / "p.npy")), ds)
    check_typed_link_dataset(_Cfg(predict=str(tmp_path / "p.npz")), ds)
    check_typed_link_dataset(_Cfg(save=str(tmp_path)), ds)  # checkpoints are
    with pytest.raises(GraphfeedError, match="--partitions"):
        check_typed_link_dataset(_Cfg(partitions=2), ds)
    node = open_dataset("hetero", data_root)  # generated next to it: a node dataset
    with pytest.raises(GraphfeedError, match="needs a link_prediction dataset.*--relation"):
        check_typed_link_dataset(_Cfg(), node)


class _Cfg:
    """What ``check_typed_link_dataset`` reads, for the refusals ``TrainConfig.validate``
    already makes on its own."""

    def __init__(self, **kw):
        from graphfeed.training import TrainConfig

        self._base = TrainConfig(task="link")
        self._kw = kw

    def __getattr__(self, name):
        return self._kw.get(name, getattr(self._base, name))


def test_typed_predictor_scores_every_relation_of_a_batch():
    import torch

    from graphfeed.graph.hetero import HeteroGraph
    from graphfeed.sampling.hetero import HeteroNeighborSampler
    from graphfeed.sampling.link import LinkSampler
    from graphfeed.models import HeteroRGCN, TypedLinkPredictor

    rng = np.random.default_rng(0)
    w = (rng.integers(0, 10, 60), rng.integers(0, 30, 60))
    c = (rng.integers(0, 30, 60), rng.integers(0, 30, 60))
    ets = [("a", "w", "p"), ("p", "wb", "a"), ("p", "c", "p")]
    g = HeteroGraph.from_edges({"a": 10, "p": 30}, {ets[0]: w, ets[1]: w[::-1], ets[2]: c},
                               drop_duplicates=True)
    mb = LinkSampler(HeteroNeighborSampler(g, [3, 3]), num_negatives=2).sample(
        {ets[0]: np.stack(g.edges_of(ets[0]))[:, :5], ets[2]: np.stack(g.edges_of(ets[2]))[:, :4]})
    x = {"a": torch.randn(mb.blocks[0].num_src["a"], 3),
         "p": torch.randn(mb.blocks[0].num_src["p"], 4)}
    for decoder in ("dot", "mlp"):
        enc = HeteroRGCN(g.node_types, g.edge_types, {"a": 3, "p": 4}, 8, 8, 2, ("a", "p"), 0.0)
        net = TypedLinkPredictor(enc, 8, decoder)
        out = net(x, mb.blocks, mb.edge_label_index_dict)
        assert {k: tuple(v.shape) for k, v in out.items()} == {ets[0]: (15,), ets[2]: (12,)}
        loss = sum(v.sum() for v in out.values())
        loss.backward()
        # every parameter on a path to the outputs got a gradient (what DDP needs)
        assert all(p.grad is not None for p in net.parameters() if p.requires_grad)


# ---------------------------------------------------------------- checkpoints (--save/--resume)
_CK = dict(epochs=3, batch_size=4096, hidden=16, eval_negatives=20, eval_fanouts=(5, 5),
           fanouts=(5, 5))


class _Killed(Exception):
    pass


def _same_weights(a, b):
    import torch

    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def _same_run(r, full):
    assert [e.loss for e in r.epochs] == [e.loss for e in full.epochs]
    assert [e.valid for e in r.epochs] == [e.valid for e in full.epochs]
    assert (r.best_epoch, r.best_valid, r.test) == (full.best_epoch, full.best_valid, full.test)


@pytest.fixture(scope="module")
def typed_uninterrupted(data_root, tmp_path_factory):
    from graphfeed.training import train

    d = tmp_path_factory.mktemp("typed-full")
    return d, train(_cfg(data_root, save=str(d / "ck"), **_CK))


def test_typed_kill_after_an_epoch_then_resume_gives_the_same_run(data_root, typed_uninterrupted,
                                                                  tmp_path):
    from graphfeed.errors import GraphfeedError
    from graphfeed.trainer.checkpoint import load_checkpoint
    from graphfeed.training import train

    full_dir, full = typed_uninterrupted
    state = load_checkpoint(full_dir / "ck")
    assert state["trainer"] == "hetero-link" and state["loader"] == {"epoch": 3, "next_batch": 0}
    assert full.checkpoint == str(full_dir / "ck" / "checkpoint.pt")

    def kill_after_epoch_0(stats):
        if stats.epoch == 0:
            raise _Killed

    with pytest.raises(_Killed):
        train(_cfg(data_root, save=str(tmp_path / "ck"), **_CK), on_epoch=kill_after_epoch_0)
    r = train(_cfg(data_root, resume=str(tmp_path / "ck"), **_CK))
    assert r.resumed_from_epoch == 1 and len(r.epochs) == 3
    _same_weights(load_checkpoint(tmp_path / "ck")["model"], state["model"])
    _same_run(r, full)
    with pytest.raises(GraphfeedError, match="num_negatives=1.*num_negatives=2"):
        train(_cfg(data_root, resume=str(tmp_path / "ck"), **{**_CK, "num_negatives": 2}))


def test_typed_signal_mid_epoch_checkpoints_and_resumes(data_root, typed_uninterrupted, tmp_path):
    import os
    import signal

    from graphfeed.trainer.checkpoint import load_checkpoint
    from graphfeed.training import train

    full_dir, full = typed_uninterrupted

    def interrupt(epoch, batch_index):
        if (epoch, batch_index) == (1, 1):
            os.kill(os.getpid(), signal.SIGINT)  # the loop stops after this batch

    stopped = train(_cfg(data_root, save=str(tmp_path / "ck"), **_CK), on_batch=interrupt)
    assert stopped.interrupted == "in epoch 1"
    state = load_checkpoint(tmp_path / "ck")
    assert state["loader"] == {"epoch": 1, "next_batch": 2} and state["partial"] is not None
    resumed = []
    r = train(_cfg(data_root, resume=str(tmp_path / "ck"), **_CK),
              on_batch=lambda e, b: resumed.append((e, b)))
    assert resumed[0] == (1, 2)
    _same_weights(load_checkpoint(tmp_path / "ck")["model"],
                  load_checkpoint(full_dir / "ck")["model"])
    _same_run(r, full)


def test_typed_resume_refuses_another_trainers_checkpoint(data_root, typed_uninterrupted):
    from graphfeed.errors import GraphfeedError
    from graphfeed.training import train

    full_dir, _ = typed_uninterrupted
    with pytest.raises(GraphfeedError, match="typed link-prediction trainer"):
        train(_cfg(data_root, dataset="hetero", task="node", resume=str(full_dir / "ck"),
                   **{**_CK, "eval_fanouts": None}))
