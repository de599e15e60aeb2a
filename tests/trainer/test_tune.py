"""``--tune`` (``trainer/tune.py``): the winner is the candidate with the best validation main
metric, the budget stops new candidates, the winner's run is the result (its --save, --predict
and --log, its --json with the table), options that conflict are refused by name, and both
tasks search."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from graphfeed.cli.main import main
from graphfeed.datasets.open import open_dataset
from graphfeed.errors import GraphfeedError
from graphfeed.trainer import tune as T
from graphfeed.trainer.checkpoint import load_checkpoint
from graphfeed.trainer.result import TrainResult
from graphfeed.training import TrainConfig, by_data, train, train_runs

pytest.importorskip("torch_geometric")

KW = dict(epochs=1, fanouts=(5, 5), batch_size=1024, progress=False, mlp_baseline=False,
          num_threads=1, device="cpu")
#: two candidates, so a search is two runs and the winner's: the defaults and a learning rate
#: that fits this data much faster in one epoch
TWO = (lambda cfg: {}, lambda cfg: {"lr": 0.03})


@pytest.fixture
def two(monkeypatch):
    monkeypatch.setattr(T, "CANDIDATES", TWO)


@pytest.fixture(scope="module")
def searched(uint8_dataset, tmp_path_factory):
    """A search of TWO on uint8 with every output, and the plain run of the winner's setting."""
    d = tmp_path_factory.mktemp("tune")
    mp = pytest.MonkeyPatch()
    mp.setattr(T, "CANDIDATES", TWO)
    try:
        r = train(TrainConfig(dataset=str(uint8_dataset), tune=600, save=str(d / "ck"),
                              predict=str(d / "pred.npy"), log=str(d / "log.jsonl"), **KW))
    finally:
        mp.undo()
    plain = train(TrainConfig(dataset=str(uint8_dataset), lr=0.03, predict=str(d / "plain.npy"),
                              **KW))
    return d, r, plain


def test_the_winner_is_the_best_validation_not_the_defaults(searched):
    _, r, plain = searched
    rows = r.tune
    assert [row["setting"] for row in rows] == ["as given", "lr 0.03"]
    assert rows[1]["valid"] > rows[0]["valid"]  # the defaults lose on this data
    assert [row["winner"] for row in rows] == [False, True]
    assert rows[0]["test"] is None and rows[1]["test"] == pytest.approx(r.test["accuracy"])
    # the result is the winner's run: the same figures as training its setting directly
    assert r.best_valid == rows[1]["valid"] == plain.best_valid
    assert (r.best_epoch, r.test) == (plain.best_epoch, plain.test)


def test_outputs_hold_the_winners_run_only(searched):
    d, r, _ = searched
    np.testing.assert_array_equal(np.load(d / "pred.npy"), np.load(d / "plain.npy"))
    assert load_checkpoint(d / "ck")["config"]["lr"] == 0.03
    lines = (d / "log.jsonl").read_text().splitlines()
    assert len(lines) == len(r.epochs) == 1  # not the losing candidate's epochs too
    assert [json.loads(x)["valid"] for x in lines] == [e.valid for e in r.epochs]


def test_the_budget_stops_new_candidates():
    """Each run takes 10 s on a fake clock: a candidate starts only while the time spent plus
    twice the longest so far fits (it and the winner's final run)."""
    now = [0.0]
    seen = []

    def run(cfg):
        seen.append(cfg)
        now[0] += 10
        return TrainResult(best_valid=cfg.lr, test={"accuracy": 0.5}, epochs=[None] * 4)

    def tried(budget):
        seen.clear()
        cfg = TrainConfig(tune=budget).validate()
        r = T.search(cfg, run, typed=False, say=lambda m: None, clock=lambda: now[0])
        return [row["setting"] for row in r.tune], seen[-1]

    assert tried(35)[0] == ["as given", "dropout 0.5, weight_decay 0"]  # 10 + 2 * 10 > 35 stops
    assert tried(1)[0] == ["as given"]  # the first always runs
    names, final = tried(10_000)
    assert len(names) == len(T.CANDIDATES)
    # the winner (best "valid" = the highest lr here) runs again, as asked (no tune)
    assert names[2] == "lr 0.01" and final.lr == 0.01 and final.tune is None


def test_an_option_set_away_from_its_default_is_kept():
    def names(typed=False, **kw):
        todo, kept = T.candidates(TrainConfig(**kw).validate(), typed=typed)
        return [T.setting(c) for c in todo], kept

    every, kept = names()
    assert len(every) == len(T.CANDIDATES) and kept == []
    got, kept = names(dropout=0.6)
    assert kept == ["dropout"] and not any("dropout" in s for s in got)
    got, kept = names(model="gat", fanouts=(15, 10))
    assert kept == ["model", "fanouts"] and got == ["as given", "dropout 0.5, weight_decay 0",
                                                     "lr 0.01", "hidden 256"]
    assert "model gcn" in names()[0]  # the model left to the data: the other one is tried
    # typed data train the R-GCN: no model, residual or norm to vary
    assert not any("model" in s or "residual" in s for s in names(typed=True)[0])
    # link prediction's defaults are already dropout 0.5, weight decay 0: not tried twice
    assert "dropout 0.5, weight_decay 0" not in names(task="link")[0]


@pytest.mark.parametrize("kw, name", [
    (dict(resume="somewhere"), "resume"),
    (dict(partitions="somewhere"), "partitions"),
    (dict(nproc=2), "nproc"),
    (dict(tune=0), "tune"),
    (dict(tune=float("inf")), "tune"),
])
def test_conflicting_options_are_refused_by_name(kw, name):
    with pytest.raises(GraphfeedError, match=name):
        TrainConfig(**{"tune": 60, **kw}).validate()


def test_custom_models_and_callbacks_are_refused_by_name(uint8_dataset):
    cfg = TrainConfig(dataset=str(uint8_dataset), tune=60, **KW)
    for kw, name in ((dict(model=lambda i, c: torch.nn.Linear(i, c)), "model="),
                     (dict(on_epoch=print), "on_epoch=")):
        with pytest.raises(GraphfeedError, match=name):
            train(cfg, **kw)


@pytest.mark.parametrize("text, seconds", [("600", 600), ("90s", 90), ("10m", 600),
                                           ("1.5h", 5400), (" 2M ", 120)])
def test_the_budget_syntax(text, seconds):
    from graphfeed.cli._args import duration

    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["0", "-5", "10x", "m", "", "inf", "nans", "1e309"])
def test_a_bad_budget_is_a_one_line_error(text, capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--dataset", "tiny", "--tune", text])
    assert e.value.code == 2 and "--tune" in capsys.readouterr().err


def test_json_is_the_winners_with_the_table(uint8_dataset, two, capsys):
    rc = main(["train", "--dataset", str(uint8_dataset), "--tune", "10m", "--epochs", "1",
               "--fanouts", "5,5", "--batch-size", "1024", "--no-mlp", "--no-progress",
               "--threads", "1", "--device", "cpu", "--runs", "2", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0
    d = json.loads(out)
    rows = d["tune"]
    assert [row["setting"] for row in rows] == ["as given", "lr 0.03"] and rows[1]["winner"]
    assert d["summary"]["best_valid"]["mean"] == rows[1]["valid"]  # the mean of the 2 runs
    assert "test shown for the winner only" in err and "* lr 0.03" in err
    assert err.strip().splitlines()[-1].startswith("graphfeed train: 2 runs: ")


def test_link_prediction_chooses_on_mrr(small_link_dataset, two):
    cfg = TrainConfig(dataset=small_link_dataset, task="link", tune=600, epochs=1, hidden=16,
                      fanouts=(5, 5), batch_size=4096, eval_negatives=20, progress=False,
                      mlp_baseline=False, num_threads=1, device="cpu")
    r = train_runs(cfg, dataset=open_dataset(small_link_dataset))
    assert r.main_metric == "mrr" and len(r.tune) == 2
    best = max(r.tune, key=lambda row: row["valid"])
    assert best["winner"] and r.best_valid == best["valid"]


def _data(train: int, nodes: int = 1000, hetero=None, binary=True):
    from graphfeed.features import FeatureStore, InMemoryFeature

    x = (np.arange(nodes * 4).reshape(nodes, 4) % 3 == 0).astype(np.float32)
    if not binary:
        x /= np.maximum(x.sum(1, keepdims=True), 1)
    return SimpleNamespace(num_nodes=nodes, train_ids=np.arange(train), hetero=hetero,
                           features=FeatureStore({"feat": InMemoryFeature(x)}))


def test_the_model_left_to_the_data_is_gcn_where_few_nodes_are_labelled_with_0_1_features():
    said = []
    sparse = by_data(TrainConfig().validate(), _data(52), said.append)
    assert sparse.model == "gcn" and "52 of 1,000 nodes (5.2%)" in said[0]
    assert by_data(TrainConfig().validate(), _data(600)).model == "sage"
    # row-normalised features: gcn (no norm) collapses there (docs/training.md)
    assert by_data(TrainConfig().validate(), _data(52, binary=False)).model == "sage"
    # a model that is given, link prediction and typed graphs are left as they are
    assert by_data(TrainConfig(model="sage").validate(), _data(52)).model == "sage"
    assert by_data(TrainConfig(task="link").validate(), _data(52)).model == "sage"
    assert by_data(TrainConfig().validate(), _data(52, hetero=object())).model == "sage"
    # --tune then tries the other model; a given model is kept
    todo, kept = T.candidates(sparse, typed=False)
    assert {"model": "sage"} in todo and "model" not in kept
    assert "model" in T.candidates(TrainConfig(model="gcn").validate(), typed=False)[1]
