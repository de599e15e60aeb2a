"""The metrics against hand-computed values and brute force (no scikit-learn)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from graphfeed.trainer.metrics import (
    accuracy, average_ranks, compute_metrics, macro_f1, majority_class, mean_std, roc_auc, task_for,
)


def test_roc_auc_hand_computed_without_ties():
    # positives 0.35 and 0.8 against negatives 0.1 and 0.4: pairs won 1 + 0 + 1 + 1 = 3 of 4
    assert roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)
    assert roc_auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert roc_auc([1, 1, 0, 0], [0.1, 0.2, 0.3, 0.4]) == 0.0


def test_roc_auc_ties_count_one_half():
    # pairs (pos, neg): (0.5, 0.5) tie = 1/2, (0.5, 0.2) = 1, (0.9, 0.5) = 1, (0.9, 0.2) = 1 -> 3.5 / 4
    assert roc_auc([0, 1, 0, 1], [0.5, 0.5, 0.2, 0.9]) == pytest.approx(0.875)
    # every score equal: 1/2 whatever the labels
    assert roc_auc([0, 1, 1, 0, 1], [3.0] * 5) == pytest.approx(0.5)
    # 3 positives, 2 negatives; scores 1,1,2,2,2 with labels 1,0,1,0,1:
    # pos 1 vs neg 1: 1/2, vs neg 2: 0 | pos 2 (x2) vs neg 1: 1 each, vs neg 2: 1/2 each -> 0.5 + 3 = 3.5 / 6
    assert roc_auc([1, 0, 1, 0, 1], [1, 1, 2, 2, 2]) == pytest.approx(3.5 / 6)


def test_roc_auc_undefined_cases():
    assert np.isnan(roc_auc([1, 1, 1], [0.1, 0.2, 0.3]))  # one class only
    assert np.isnan(roc_auc([0, 1], [0.1, float("nan")]))
    with pytest.raises(ValueError):
        roc_auc([0, 2], [0.1, 0.2])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(-3, 3)), min_size=2, max_size=30))
def test_roc_auc_equals_the_pairwise_count(pairs):
    y = np.array([p[0] for p in pairs])
    s = np.array([p[1] for p in pairs], dtype=np.float64)
    pos, neg = s[y == 1], s[y == 0]
    if not len(pos) or not len(neg):
        assert np.isnan(roc_auc(y, s))
        return
    wins = sum((a > b) + 0.5 * (a == b) for a, b in itertools.product(pos, neg))
    assert roc_auc(y, s) == pytest.approx(wins / (len(pos) * len(neg)))


def test_average_ranks_match_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 7, size=200).astype(float)
    np.testing.assert_allclose(average_ranks(x), scipy_stats.rankdata(x, method="average"))


def test_macro_f1_hand_computed():
    y = [0, 0, 1, 1, 2, 2]
    p = [0, 1, 1, 1, 2, 0]
    # class 0: tp 1, fp 1, fn 1 -> 2/4; class 1: tp 2, fp 1, fn 0 -> 4/5; class 2: tp 1, fp 0, fn 1 -> 2/3
    assert macro_f1(y, p) == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)
    assert accuracy(y, p) == pytest.approx(4 / 6)
    # a class predicted but absent from y_true counts (F1 0), as scikit-learn does
    assert macro_f1([0, 0], [0, 3]) == pytest.approx((2 / 3 + 0) / 2)


def test_task_and_main_metric():
    assert task_for(2).main == "roc_auc" and task_for(2).metrics == ("roc_auc", "accuracy")
    assert task_for(7).main == "accuracy" and task_for(7).metrics == ("accuracy", "macro_f1")
    logits = np.array([[2.0, 0.0], [0.0, 1.0], [0.5, 0.4], [0.0, 3.0]])
    m = compute_metrics(task_for(2), [0, 1, 1, 1], logits)
    # log-odds of class 1: -2, 1, -0.1, 3; the negative (-2) is below all three positives
    assert m == {"roc_auc": 1.0, "accuracy": 0.75}


def test_majority_and_mean_std():
    assert majority_class([3, 1, 3, 2, 1]) == 1  # tie between 1 and 3: the smaller
    ms = mean_std([0.8, 0.82, float("nan")])
    assert ms["mean"] == pytest.approx(0.81) and ms["std"] == pytest.approx(np.std([0.8, 0.82], ddof=1))
