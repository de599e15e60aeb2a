"""``graphfeed report LOG [LOG ...]``: what ``graphfeed train --log`` wrote, as a summary table and
learning curves.

A log holds one JSON object per epoch (``trainer/report.py``: ``EpochStats.to_dict()``), appended
run after run, so one file may hold several runs: a line with epoch 0 starts a new one, and a
line that repeats an earlier epoch of the same run (a resumed run redoing it) replaces it and the
epochs after it. Every line is checked before anything is printed or drawn; a bad one is a
one-line error naming the file and the line.

Per run, the table gives the epochs, the best epoch (the highest validation value of the metric,
the first on ties, as the trainer picks it), that value, the test value there, the final loss
and the mean training seconds per epoch (the log's ``seconds``, evaluation excluded). The metric
is the run's main one (the first of its validation metrics: accuracy, ROC-AUC for two classes,
MRR for links) unless ``--metric`` names another. ``--out FILE.png`` also draws loss,
validation and test curves per epoch, every run overlaid, one colour per log; it needs
matplotlib (``pip install 'graphfeed[report]'``), imported only then.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from . import _args

HELP = "summarise 'graphfeed train --log' files: a table, and learning curves as a PNG"
DESCRIPTION = (
    "Reads the JSON-lines files of 'graphfeed train --log' (one object per epoch; a file may "
    "hold several runs) and prints, per run: epochs, best epoch (highest validation metric), "
    "that value, the test value there, final loss and mean training seconds per epoch. With "
    "--out, also draws loss, validation and test curves per epoch, every run overlaid, one "
    "colour per log (needs matplotlib: pip install 'graphfeed[report]')."
)

#: the ``EpochStats`` fields the report reads; a line without one of them is refused
FIELDS = ("epoch", "loss", "seconds", "valid", "test")
#: ``--size`` bounds, pixels per side
MIN_SIDE, MAX_SIDE = 200, 10_000
DPI = 100


@dataclass
class Run:
    """One run of a log: its epochs in order (each a validated log line), ``index`` its place
    in the file (1-based) and ``runs_in_file`` how many the file holds."""

    log: str
    index: int
    epochs: list = field(default_factory=list)
    runs_in_file: int = 1

    @property
    def label(self) -> str:
        return self.log if self.runs_in_file == 1 else f"{self.log} #{self.index}"

    def main_metric(self) -> Optional[str]:
        """The first validation metric of its first evaluated epoch (the trainer reports the
        main metric first)."""
        for e in self.epochs:
            if e["valid"]:
                return next(iter(e["valid"]))
        return None

    def summary(self, metric: str) -> dict:
        from ..trainer.metrics import is_better

        best, best_epoch, test_there = math.nan, None, None
        for e in self.epochs:
            v = (e["valid"] or {}).get(metric)
            if v is not None and is_better(v, best):
                best, best_epoch, test_there = v, e["epoch"], (e["test"] or {}).get(metric)
        seconds = [e["seconds"] for e in self.epochs if e["seconds"] is not None]
        return {
            "log": self.log, "run": self.index, "epochs": len(self.epochs),
            "metric": metric, "best_epoch": best_epoch,
            "best_valid": None if best_epoch is None else best,
            "test_at_best": test_there,
            "final_loss": self.epochs[-1]["loss"],
            "mean_seconds": sum(seconds) / len(seconds) if seconds else None,
        }


# --------------------------------------------------------------------------- reading
def _error(path, line: Optional[int], what: str):
    from ..errors import GraphfeedError

    where = f"{path}:{line}" if line is not None else str(path)
    return GraphfeedError(f"{where}: {what}")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_line(path, n: int, rec) -> dict:
    """``rec`` (line ``n`` of ``path``, parsed) as an epoch, or an error naming the line."""
    from .._checks import shown

    if not isinstance(rec, dict):
        raise _error(path, n, f"expected a JSON object (one epoch of 'graphfeed train --log'), "
                              f"got {shown(rec)}")
    for k in FIELDS:
        if k not in rec:
            raise _error(path, n, f"missing field {k!r} (not a 'graphfeed train --log' line?)")
    if not isinstance(rec["epoch"], int) or isinstance(rec["epoch"], bool) or rec["epoch"] < 0:
        raise _error(path, n, f"field 'epoch' must be an integer >= 0, got {shown(rec['epoch'])}")
    for k in ("loss", "seconds"):  # null: a non-finite value
        if rec[k] is not None and not _is_number(rec[k]):
            raise _error(path, n, f"field {k!r} must be a number or null, got {shown(rec[k])}")
    for k in ("valid", "test"):  # null: an epoch --eval-every skipped
        metrics = rec[k]
        if metrics is None:
            continue
        if not isinstance(metrics, dict):
            raise _error(path, n, f"field {k!r} must be an object of metrics or null, got "
                                  f"{shown(metrics)}")
        for name, v in metrics.items():
            if v is not None and not _is_number(v):
                raise _error(path, n, f"metric {k}.{name} must be a number or null, got "
                                      f"{shown(v)}")
    return rec


def read_log(path) -> list[Run]:
    """The runs of one ``--log`` file, every line checked (see the module doc)."""
    path = str(path)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise _error(path, None, "no such file") from None
    except IsADirectoryError:
        raise _error(path, None, "a folder, not a log file") from None
    except UnicodeDecodeError as e:
        raise _error(path, None, f"not a text file ({e.reason})") from None
    except OSError as e:
        raise _error(path, None, f"cannot read it ({e.strerror or e})") from None
    runs: list[Run] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise _error(path, n, f"not JSON ({e.msg} at column {e.colno})") from None
        rec = _check_line(path, n, rec)
        if not runs or rec["epoch"] == 0:
            runs.append(Run(path, len(runs) + 1))
        epochs = runs[-1].epochs
        while epochs and epochs[-1]["epoch"] >= rec["epoch"]:
            epochs.pop()  # a resumed run redoing epochs: the later lines hold
        epochs.append(rec)
    if not runs:
        raise _error(path, None, "empty: no epoch lines (is it the file given to "
                                 "'graphfeed train --log'?)")
    for r in runs:
        r.runs_in_file = len(runs)
    return runs


def summarise(runs: list, metric: Optional[str] = None) -> list[dict]:
    """One summary per run (:meth:`Run.summary`) on ``metric``, else on each run's main metric;
    a run that never reports ``metric`` is an error listing the ones it has."""
    rows = []
    for r in runs:
        name = metric or r.main_metric()
        if name is None:  # no evaluated epoch at all
            name = metric or "-"
        elif metric is not None and not any(metric in (e["valid"] or {}) for e in r.epochs):
            have = sorted({k for e in r.epochs for k in (e["valid"] or {})})
            raise _error(r.label, None, f"no validation metric {metric!r}; it has "
                                        f"{', '.join(have) or 'none'}")
        rows.append(r.summary(name))
    return rows


def _fmt(v, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def format_table(rows: list[dict], labels: list[str]) -> str:
    head = ("log", "epochs", "best epoch", "metric", "best valid", "test there", "final loss",
            "s/epoch")
    body = [(label, str(r["epochs"]), _fmt(r["best_epoch"], "d"), r["metric"],
             _fmt(r["best_valid"], ".4f"), _fmt(r["test_at_best"], ".4f"),
             _fmt(r["final_loss"], ".4f"), _fmt(r["mean_seconds"], ".2f"))
            for r, label in zip(rows, labels)]
    widths = [max(len(row[i]) for row in (head, *body)) for i in range(len(head))]
    fmt = lambda row: "  ".join(  # noqa: E731 - the log column left, the figures right
        c.ljust(w) if i in (0, 3) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
    return "\n".join(fmt(row).rstrip() for row in (head, *body))


# --------------------------------------------------------------------------- drawing
def _matplotlib():
    """``matplotlib``, or the one-line refusal naming the extra (imported only to draw)."""
    from ..errors import MissingDependencyError

    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError("matplotlib", "report", "graphfeed report --out") from None
    return Figure, FigureCanvasAgg


def plot(runs: list, rows: list[dict], out, size: tuple) -> None:
    """Loss, validation and test metric per epoch side by side, one line per run, one colour
    per log (its runs in other dash styles); a dot marks each run's best epoch. Written
    atomically to ``out`` as a ``size`` = (width, height) pixel PNG."""
    from .._io import atomic_write

    Figure, FigureCanvasAgg = _matplotlib()
    fig = Figure(figsize=(size[0] / DPI, size[1] / DPI), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3)
    metrics = sorted({r["metric"] for r in rows})
    metric = metrics[0] if len(metrics) == 1 else " / ".join(metrics)
    for ax, title in zip(axes, ("training loss", f"valid {metric}", f"test {metric}")):
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.grid(True, alpha=0.3)
    logs = list(dict.fromkeys(r.log for r in runs))
    colours = [f"C{i % 10}" for i in range(len(logs))]
    styles = ("-", "--", ":", "-.")
    for r, row in zip(runs, rows):
        colour = colours[logs.index(r.log)]
        style = styles[(r.index - 1) % len(styles)]
        kw = dict(color=colour, linestyle=style, linewidth=1.5)
        ep = [e["epoch"] for e in r.epochs]
        axes[0].plot(ep, [math.nan if e["loss"] is None else e["loss"] for e in r.epochs],
                     label=r.label, **kw)
        for ax, split in ((axes[1], "valid"), (axes[2], "test")):
            pts = [(e["epoch"], (e[split] or {}).get(row["metric"])) for e in r.epochs]
            pts = [(x, y) for x, y in pts if y is not None]
            if pts:
                ax.plot(*zip(*pts), marker="." if len(pts) < 30 else None, **kw)
        if row["best_epoch"] is not None:
            axes[1].plot([row["best_epoch"]], [row["best_valid"]], "o", color=colour)
            if row["test_at_best"] is not None:
                axes[2].plot([row["best_epoch"]], [row["test_at_best"]], "o", color=colour)
    axes[0].legend(fontsize="small")
    atomic_write(out, lambda f: fig.savefig(f, format="png", dpi=DPI))


# --------------------------------------------------------------------------- command
def pixel_size(text: str) -> tuple:
    """``--size WxH``: two integers in ``[MIN_SIDE, MAX_SIDE]`` pixels."""
    parts = text.lower().replace(" ", "").split("x")
    try:
        w, h = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels like 1500x450, got "
                                         f"{text!r}") from None
    if not (MIN_SIDE <= w <= MAX_SIDE and MIN_SIDE <= h <= MAX_SIDE):
        raise argparse.ArgumentTypeError(f"each side must be {MIN_SIDE} to {MAX_SIDE} pixels, "
                                         f"got {text!r}")
    return w, h


def _check_out(out: str) -> None:
    from ..errors import GraphfeedError

    p = Path(out)
    if p.suffix.lower() != ".png":
        raise GraphfeedError(f"--out {out}: the curves are written as PNG; name a .png file")
    if p.is_dir():
        raise GraphfeedError(f"--out {out}: is a folder; name a .png file")
    if not p.parent.is_dir():
        raise GraphfeedError(f"--out {out}: folder {p.parent} does not exist")
    if not os.access(p.parent, os.W_OK):
        raise GraphfeedError(f"--out {out}: cannot write in folder {p.parent}")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("report", help=HELP, description=DESCRIPTION)
    p.add_argument("logs", metavar="LOG", nargs="+", help="a file written by 'graphfeed train --log'")
    p.add_argument("--out", metavar="FILE.png", default=None,
                   help="also draw the learning curves into this PNG (needs matplotlib)")
    p.add_argument("--metric", metavar="NAME", default=None,
                   help="the validation/test metric to rank epochs by and draw (e.g. macro_f1, "
                        "hits@10) [each run's main metric: accuracy, roc_auc or mrr]")
    p.add_argument("--size", type=pixel_size, default=(1500, 450), metavar="WxH",
                   help="size of the PNG in pixels [1500x450]")
    p.add_argument("--json", action="store_true",
                   help="print the summary as one JSON object on stdout instead of the table")
    return p


def run(args) -> int:
    from ..trainer.result import json_safe
    from ._output import write_stdout

    if args.out is not None:  # refused before any log is read
        _check_out(args.out)
        _matplotlib()
    runs = [r for path in args.logs for r in read_log(path)]
    rows = summarise(runs, args.metric)
    if args.out is not None:
        plot(runs, rows, args.out, args.size)
    if args.json:
        text = json.dumps(json_safe({"runs": rows, "plot": args.out}), allow_nan=False)
    else:
        text = format_table(rows, [r.label for r in runs])
        if args.out is not None:
            text += f"\nlearning curves: {args.out}"
    return write_stdout("report", text + "\n")
