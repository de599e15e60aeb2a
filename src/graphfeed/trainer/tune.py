"""``--tune``: a small search over a few settings, chosen on the validation set within a time
budget (``TrainConfig.tune`` seconds).

Each candidate (:data:`CANDIDATES`, in order, the configuration as given first) is a full run of
the configuration with a few fields changed: ``--runs`` seeds, early stopping, no baselines and
no ``--save``/``--predict``/``--log``. The winner is the candidate with the best validation main
metric (the mean over the runs; the earlier candidate on a tie); test figures play no part. The
winner is then run once more as asked (baselines and outputs; the same seeds, so the same run
on the CPU), and that run is the result, with the table in its ``tune`` field. The evidence
behind the list is in ``docs/training.md``, "What the defaults reach".
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Callable, Optional

from .config import TrainConfig
from .result import RunsResult, TrainResult


def _deeper(cfg: TrainConfig) -> dict:
    """One more layer (its fanout the last layer's), residual connections, lighter
    regularisation: what the heterophily benchmarks' published figures use."""
    return {"fanouts": (*cfg.fanouts, cfg.fanouts[-1]), "residual": True, "dropout": 0.5,
            "weight_decay": 0.0}


#: ``cfg -> changed fields``, tried in this order (the first: the configuration as given)
CANDIDATES: tuple = (
    lambda cfg: {},
    lambda cfg: {"dropout": 0.5, "weight_decay": 0.0},
    lambda cfg: {"lr": 0.01},
    lambda cfg: {"model": "sage" if cfg.model == "gcn" else "gcn"},
    lambda cfg: {"hidden": 256},
    _deeper,
)
#: fields a typed dataset's model (the R-GCN) does not have: candidates changing them are left out
NOT_TYPED = ("model", "residual", "norm")


@dataclass
class TuneRow:
    """One candidate: its ``changes`` to the configuration, the mean ``valid`` main metric at
    the best epochs, the mean epochs run, its wall ``seconds``; ``test`` for the winner only."""

    setting: str
    changes: dict
    valid: float
    epochs: float
    seconds: float
    winner: bool = False
    test: Optional[float] = None


def candidates(cfg: TrainConfig, *, typed: bool) -> tuple[list, list]:
    """``(changes of each candidate to run, in order; the fields kept as given)``. A field set
    away from its default (the task's, for dropout and weight decay) is kept as given: the
    candidates that would change it are left out, as are those that change nothing new."""
    default = dataclasses.replace(TrainConfig(task=cfg.task).validate(), model=cfg.model)
    if not cfg.model_by_data:
        default.model = None  # given: kept
    kept = [f for f in ("model", "lr", "hidden", "dropout", "weight_decay", "fanouts",
                        "eval_fanouts", "residual", "norm")
            if getattr(cfg, f) != getattr(default, f)]
    out, seen = [], []
    for make in CANDIDATES:
        changes = make(cfg)
        touched = set(changes) | ({"eval_fanouts"} if "fanouts" in changes else set())
        if touched & set(kept) or (typed and touched & set(NOT_TYPED)):
            continue
        one = dataclasses.replace(apply(cfg, changes), model_by_data=False).validate()
        if one not in seen:
            seen.append(one)
            out.append(changes)
    return out, kept


def apply(cfg: TrainConfig, changes: dict) -> TrainConfig:
    """``cfg`` with a candidate's ``changes``; a model it names is no longer the data's."""
    return dataclasses.replace(cfg, **changes, **({"model_by_data": False} if "model" in changes
                                                  else {}))


def setting(changes: dict) -> str:
    """A candidate's name in the table: its changes, or "as given"."""
    return ", ".join(f"{k} {_shown(v)}" for k, v in changes.items()) or "as given"


def _shown(v) -> str:
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return f"{v:g}" if isinstance(v, float) else str(v)


def _figures(r, main: str) -> tuple[float, float, float]:
    """(valid, epochs run, test) of a run or the mean over several runs."""
    if isinstance(r, RunsResult):
        runs = r.runs
        return (r.summary["best_valid"]["mean"], sum(len(x.epochs) for x in runs) / len(runs),
                r.summary[f"test_{main}"]["mean"])
    return r.best_valid, float(len(r.epochs)), r.test.get(main, float("nan"))


def search(cfg: TrainConfig, run: Callable, *, typed: bool, say: Callable,
           clock: Callable = time.monotonic):
    """Run the candidates of ``cfg`` (validated, ``cfg.tune`` seconds) through ``run(config)``
    (a :class:`TrainResult` for ``runs == 1``, else a :class:`RunsResult`), choose on
    validation, run the winner as asked and return that run's result with ``tune`` set.

    The budget: the first candidate always runs; a later one starts only while the time spent
    plus twice the longest candidate so far (it and the winner's final run) fits ``cfg.tune``.
    A candidate cut short (Ctrl-C) ends the search; its result is returned as it is."""
    assert cfg.tune is not None and cfg.tune > 0
    base = dataclasses.replace(cfg, tune=None)
    quiet = dataclasses.replace(base, save=None, predict=None, log=None, mlp_baseline=False)
    todo, kept = candidates(base, typed=typed)
    runs = f" (the mean of {cfg.runs} runs)" if cfg.runs > 1 else ""
    say(f"graphfeed train --tune: up to {len(todo)} settings within {cfg.tune:g} s, each a full "
        f"run, the winner chosen on the validation main metric{runs} and then run again as "
        f"asked; test figures play no part"
        + (f"; kept as given: {', '.join(kept)}" if kept else ""))
    rows: list = []
    start, longest = clock(), 0.0
    for i, changes in enumerate(todo):
        if rows and clock() - start + 2 * longest > cfg.tune:
            say(f"graphfeed train --tune: {len(todo) - i} setting(s) left out: the next would "
                f"pass the {cfg.tune:g} s budget")
            break
        say(f"graphfeed train --tune: setting {i + 1}/{len(todo)}: {setting(changes)}")
        t0 = clock()
        r = run(apply(quiet, changes))
        seconds = clock() - t0
        longest = max(longest, seconds)
        if isinstance(r, TrainResult) and r.interrupted:
            return r
        main = r.main_metric
        valid, epochs, test = _figures(r, main)
        rows.append((TuneRow(setting(changes), dict(changes), valid, epochs, seconds), test))
    score = [v.valid if math.isfinite(v.valid) else -math.inf for v, _ in rows]
    best = score.index(max(score))  # the earlier candidate on a tie
    row, test = rows[best]
    row.winner, row.test = True, test
    table = [r for r, _ in rows]
    for line in table_lines(table, main, cfg.runs):
        say(line)
    say(f"graphfeed train --tune: the winner, {row.setting}, runs again as asked")
    final = run(apply(base, row.changes))
    final.tune = [dataclasses.asdict(r) for r in table]
    return final


def table_lines(rows: list, main: str, runs: int) -> list:
    """The table the search prints: a line per candidate, the winner marked ``*`` with its
    test figure (the only one shown: test plays no part in the choice)."""
    mean = f" (mean of {runs})" if runs > 1 else ""
    width = max(len(r.setting) for r in rows)
    out = [f"graphfeed train --tune: valid {main}{mean}; test shown for the winner only",
           f"  {'setting':<{width}}  valid    epochs  seconds  test"]
    for r in rows:
        test = f"  {r.test:.4f}" if r.winner else ""
        out.append(f"{'*' if r.winner else ' '} {r.setting:<{width}}  {r.valid:.4f}  "
                   f"{r.epochs:6.1f}  {r.seconds:7.1f}{test}")
    return out
