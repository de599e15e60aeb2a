"""Classification metrics over numpy arrays (no scikit-learn): accuracy, macro-F1, ROC-AUC.

The task decides the metrics and the *main* metric, the one that selects the best epoch and stops
early: ``binary`` tasks (2 classes) report ROC-AUC (main) and accuracy; ``multiclass`` tasks
report accuracy (main, the Planetoid/OGB convention) and macro-F1. Every function takes
``y_true`` as int labels ``(n,)``; an empty input gives ``nan``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

__all__ = [
    "Task", "task_for", "accuracy", "macro_f1", "roc_auc", "average_ranks", "majority_class",
    "compute_metrics", "mean_std",
]


@dataclass(frozen=True)
class Task:
    """``kind``: ``"binary"`` or ``"multiclass"``; ``metrics``: what is reported, main first."""

    kind: str
    num_classes: int

    @property
    def metrics(self) -> tuple[str, ...]:
        return ("roc_auc", "accuracy") if self.kind == "binary" else ("accuracy", "macro_f1")

    @property
    def main(self) -> str:
        return self.metrics[0]


def task_for(num_classes: int) -> Task:
    """Two classes make a binary task, more a multi-class one."""
    if num_classes < 2:
        raise ValueError(f"a classification task needs at least 2 classes, got {num_classes}")
    return Task("binary" if num_classes == 2 else "multiclass", int(num_classes))


def _labels(y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or y.dtype.kind not in "iub":
        raise ValueError(f"labels must be a 1-D integer array, got shape {y.shape}, dtype {y.dtype}")
    return y.astype(np.int64, copy=False)


def accuracy(y_true, y_pred) -> float:
    y_true, y_pred = _labels(y_true), _labels(y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred differ in shape: {y_true.shape} != {y_pred.shape}")
    return float(np.mean(y_true == y_pred)) if y_true.size else float("nan")


def macro_f1(y_true, y_pred) -> float:
    """Unweighted mean of the per-class F1 over the classes present in ``y_true`` or ``y_pred``
    (scikit-learn's default); a class with no true positive scores 0."""
    y_true, y_pred = _labels(y_true), _labels(y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred differ in shape: {y_true.shape} != {y_pred.shape}")
    if not y_true.size:
        return float("nan")
    classes = np.union1d(y_true, y_pred)
    # per class: tp, count in y_true (tp + fn), count in y_pred (tp + fp); F1 = 2tp / (2tp+fp+fn)
    idx_true = np.searchsorted(classes, y_true)
    idx_pred = np.searchsorted(classes, y_pred)
    n = classes.size
    tp = np.bincount(idx_true[y_true == y_pred], minlength=n).astype(np.float64)
    denom = np.bincount(idx_true, minlength=n) + np.bincount(idx_pred, minlength=n)
    return float(np.mean(2 * tp / denom))  # denom >= 1 for every class in the union


def average_ranks(x) -> np.ndarray:
    """1-based ranks of ``x`` with ties sharing the mean of their ranks (``scipy.stats.rankdata``'s
    ``"average"`` method). O(n log n)."""
    x = np.asarray(x)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    n = xs.size
    # start of each run of equal values, and the run it belongs to
    new = np.ones(n, dtype=bool)
    new[1:] = xs[1:] != xs[:-1]
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], n)  # exclusive
    run_rank = (starts + 1 + ends) / 2.0  # mean of ranks starts+1 .. ends
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.repeat(run_rank, ends - starts)
    return ranks


def roc_auc(y_true, scores) -> float:
    """Area under the ROC curve of binary labels ``y_true`` (0/1) against real ``scores`` (higher
    means class 1): the Mann-Whitney statistic, (sum of the positives' ranks - P(P+1)/2) / (P N),
    with tied scores given their average rank (a tie between a positive and a negative counts
    one half). ``nan`` when one class is absent or a score is not finite."""
    y = _labels(y_true)
    s = np.asarray(scores, dtype=np.float64)
    if s.shape != y.shape:
        raise ValueError(f"y_true and scores differ in shape: {y.shape} != {s.shape}")
    if y.size and (y.min() < 0 or y.max() > 1):
        raise ValueError(f"roc_auc needs labels 0/1, got values in [{y.min()}, {y.max()}]")
    pos = int(y.sum())
    neg = y.size - pos
    if pos == 0 or neg == 0 or not np.all(np.isfinite(s)):
        return float("nan")
    r = average_ranks(s)
    return float((r[y == 1].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def majority_class(y_train) -> int:
    """The most frequent training label (the smallest on a tie)."""
    y = _labels(y_train)
    if not y.size:
        raise ValueError("no training labels")
    return int(np.argmax(np.bincount(y - y.min())) + y.min())


def compute_metrics(task: Task, y_true, logits) -> dict[str, float]:
    """The task's metrics of ``logits`` ``(n, num_classes)`` against ``y_true`` ``(n,)``.

    Binary ROC-AUC ranks ``logits[:, 1] - logits[:, 0]`` (the log-odds of class 1, so the same
    order as its softmax probability)."""
    logits = np.asarray(logits, dtype=np.float64)
    y = _labels(y_true)
    if logits.ndim != 2 or logits.shape[0] != y.shape[0]:
        raise ValueError(f"logits must be (n, classes) with n = {y.shape[0]}, got {logits.shape}")
    pred = logits.argmax(axis=1) if logits.shape[0] else np.zeros(0, dtype=np.int64)
    out = {}
    for name in task.metrics:
        if name == "accuracy":
            out[name] = accuracy(y, pred)
        elif name == "macro_f1":
            out[name] = macro_f1(y, pred)
        else:
            out[name] = roc_auc(y, logits[:, 1] - logits[:, 0])
    return out


def mean_std(values) -> dict:
    """``{"mean", "std", "values"}`` over the finite values (sample standard deviation, n-1;
    0 for one value, ``nan`` for none)."""
    vals = [float(v) for v in values]
    fin = np.asarray([v for v in vals if math.isfinite(v)], dtype=np.float64)
    mean = float(fin.mean()) if fin.size else float("nan")
    std = float(fin.std(ddof=1)) if fin.size > 1 else (0.0 if fin.size == 1 else float("nan"))
    return {"mean": mean, "std": std, "values": vals}


def is_better(value: float, best: float) -> bool:
    """``value`` improves on ``best`` (every metric here is higher-is-better; a finite value
    beats ``nan``, and the first epoch, whose best is ``nan``, always counts)."""
    if math.isnan(best):
        return True
    return value > best


def format_metrics(values: Mapping[str, float]) -> str:
    return "  ".join(f"{k} {v:.4f}" for k, v in values.items())
