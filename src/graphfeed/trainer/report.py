"""What every run reports, in one form whatever the task and the data (``fit.py`` calls these
for node classification and link prediction, homogeneous, typed or partitioned).

- :func:`log_epoch`: ``--log FILE``, one JSON object per epoch (``EpochStats.to_dict()``: the
  same keys for every task; ``valid``/``test`` hold the task's metrics), appended by rank 0;
- :func:`final_line`: the last line of a run, ``"<model>: best valid <main metric> <value> at
  epoch <n>; test there: <metric> <value>, ..."`` and the baselines the run has.
"""

from __future__ import annotations

import json

from ..errors import GraphfeedError
from .result import EpochStats, TrainResult


def log_epoch(cfg, stats: EpochStats, rank: int = 0) -> None:
    """Append epoch ``stats`` to ``cfg.log`` as one line of strict JSON (non-finite numbers are
    ``null``), flushed at once so that a killed run keeps its finished epochs. Only rank 0
    writes (the figures are already reduced over the ranks); nothing without ``cfg.log``. An
    epoch that a resumed run repeats is appended again."""
    if not cfg.log or rank != 0:
        return
    try:
        with open(cfg.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(stats.to_dict(), allow_nan=False) + "\n")
            f.flush()
    except OSError as e:
        raise GraphfeedError(f"cannot write the epoch log {cfg.log}: {e.strerror or e}") from None


def final_line(r: TrainResult) -> str:
    """The summary every trainer prints last: the best validation epoch on ``r.main_metric``,
    the test metrics there, then what the run compared itself with (the MLP baseline and the
    majority class of node classification, the degree baseline of link prediction), and where
    a run cut short stopped."""
    test = ", ".join(f"{k} {v:.4f}" for k, v in r.test.items())
    line = (f"{r.model}: best valid {r.main_metric} {r.best_valid:.4f} at epoch {r.best_epoch}; "
            f"test there: {test}")
    if r.mlp_test is not None:
        line += "; MLP baseline test: " + ", ".join(f"{k} {v:.4f}" for k, v in r.mlp_test.items())
    if r.majority:
        line += (f"; always class {r.majority['class']}: test accuracy "
                 f"{r.majority['test_acc']:.4f}")
    degree = r.baselines.get("degree", {}).get("test")
    if degree:
        line += f"; degree baseline test: mrr {degree['mrr']:.4f}, roc_auc {degree['roc_auc']:.4f}"
    if r.interrupted:
        line += f"; interrupted {r.interrupted}: the best epoch so far"
    return line
