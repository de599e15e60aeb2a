"""``graphfeed train --task link --predict FILE.npz`` on typed link datasets: one float32
``(P_r, 1 + k)`` array per predicted relation (key ``<src>.<rel>.<dst>``), the best epoch's test
scores, from which the reported test metrics are recomputed; the file is pickle-free and written
atomically; other suffixes and settings are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.timeout(600)

RELATIONS = [("paper", "cites", "paper"), ("author", "writes", "paper")]
K = 20


@pytest.fixture(scope="module")
def two_relation_link(small_hetero_dataset, tmp_path_factory):
    """The small heterogeneous dataset with two relations split 85/5/10 (``writes`` has a
    reverse relation, ``written_by``; ``cites`` has none)."""
    from graphfeed.datasets.hetero_link import split_typed_dataset
    from graphfeed.datasets.open import open_dataset

    out = tmp_path_factory.mktemp("two-rel") / "two-rel"
    return str(split_typed_dataset(open_dataset(small_hetero_dataset), out, RELATIONS, seed=1))


def _cfg(path, **kw):
    from graphfeed.training import TrainConfig

    base = dict(dataset=path, task="link", epochs=2, batch_size=1024, hidden=16, fanouts=(5, 5),
                eval_fanouts=(5, 5), eval_negatives=K, device="cpu", seed=0, num_threads=1,
                progress=False)
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def predicted(two_relation_link, tmp_path_factory):
    """``(file, result, what the run printed)``."""
    import contextlib
    import io

    from graphfeed.training import train

    d = tmp_path_factory.mktemp("typed-pred")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        r = train(_cfg(two_relation_link, predict=str(d / "pred.npz")))
    return d / "pred.npz", r, out.getvalue()


def test_one_array_per_relation_in_split_order(two_relation_link, predicted):
    from graphfeed.datasets.hetero_link import typed_link_split
    from graphfeed.datasets.open import open_dataset

    path, r, _ = predicted
    assert r.predictions == str(path)
    ds = open_dataset(two_relation_link)
    test = typed_link_split(ds, "test")
    with np.load(path, allow_pickle=False) as z:
        assert sorted(z.files) == sorted(".".join(et) for et in RELATIONS)
        for et in RELATIONS:
            a = z[".".join(et)]
            assert a.dtype == np.float32 and a.shape == (test[et][0].shape[1], 1 + K), et
            assert np.isfinite(a).all()
    # no temporary file left beside it
    assert sorted(p.name for p in path.parent.iterdir()) == ["pred.npz"]


def test_metrics_recomputed_from_the_file_are_the_reported_ones(two_relation_link, predicted):
    from graphfeed.datasets.hetero_link import typed_link_edge_types
    from graphfeed.datasets.open import open_dataset
    from graphfeed.trainer.tasks.link import link_metrics

    path, r, printed = predicted
    order = typed_link_edge_types(open_dataset(two_relation_link), "test")  # relation-id order
    assert set(order) == set(RELATIONS)
    with np.load(path, allow_pickle=False) as z:
        per = {et: z[".".join(et)] for et in order}
    # the reported test metrics are over every relation's pairs, in relation-id order
    every = np.concatenate(list(per.values()))
    assert link_metrics(every[:, 0], every[:, 1:]) == pytest.approx(r.test, abs=1e-6)
    # each relation's rows alone give the metrics the run printed for that relation
    for et, a in per.items():
        line = next(ln for ln in printed.splitlines()
                    if ln.startswith(f"  test {'.'.join(et)}: "))
        words = line.split(": ", 1)[1].split()
        shown = {k: float(v) for k, v in zip(words[::2], words[1::2])}
        assert shown == pytest.approx(link_metrics(a[:, 0], a[:, 1:]), abs=6e-5), (et, line)
        assert 0.0 < shown["mrr"] <= 1.0


def test_predictions_are_the_best_epochs_after_a_resume(two_relation_link, predicted, tmp_path):
    """A run resumed from its first epoch writes the same file as the run straight through."""
    from graphfeed.training import train

    path, full, _ = predicted
    train(_cfg(two_relation_link, epochs=1, save=str(tmp_path / "ck")))
    r = train(_cfg(two_relation_link, resume=str(tmp_path / "ck"),
                   predict=str(tmp_path / "p.npz")))
    assert (r.best_epoch, r.test) == (full.best_epoch, full.test)
    with np.load(path, allow_pickle=False) as a, np.load(tmp_path / "p.npz",
                                                         allow_pickle=False) as b:
        assert a.files == b.files
        for k in a.files:
            assert np.array_equal(a[k], b[k]), k


def test_refusals(two_relation_link, tmp_path):
    from graphfeed.errors import GraphfeedError
    from graphfeed.training import check_run

    bad = tmp_path / "p.npy"
    with pytest.raises(GraphfeedError, match=f"--predict {bad}: .*ending in .npz"):
        check_run(_cfg(two_relation_link, predict=str(bad)))
    with pytest.raises(GraphfeedError, match="predict-nodes all"):
        check_run(_cfg(two_relation_link, predict=str(tmp_path / "p.npz"), predict_nodes="all"))
    with pytest.raises(GraphfeedError, match="does not exist"):
        check_run(_cfg(two_relation_link, predict="/definitely/not/here/p.npz"))
    plan = check_run(_cfg(two_relation_link, predict=str(tmp_path / "p.npz")))
    assert sorted(map(tuple, plan["edge_types"])) == sorted(RELATIONS)


def test_writer_is_atomic_and_pickle_free(tmp_path, monkeypatch):
    import zipfile

    from graphfeed.errors import GraphfeedError
    from graphfeed.trainer.predictions import save

    scores = {("a", "r", "b"): np.arange(6, dtype=np.float32).reshape(2, 3),
              ("b", "s", "b"): np.zeros((0, 3), np.float32)}
    path = tmp_path / "s.npz"
    save(path, scores)
    with np.load(path, allow_pickle=False) as z:
        assert z["a.r.b"].dtype == np.float32 and z["a.r.b"].tolist() == [[0, 1, 2], [3, 4, 5]]
        assert z["b.s.b"].shape == (0, 3)
    # a failed write leaves the old file in place and no temporary file
    before = path.read_bytes()

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(GraphfeedError, match=f"cannot write predictions to {path}: No space"):
        save(path, {("a", "r", "b"): np.ones((1, 2))})
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["s.npz"]
    assert zipfile.is_zipfile(path)
    with pytest.raises(GraphfeedError, match="ending in .npz"):
        save(tmp_path / "s.npy", scores)
