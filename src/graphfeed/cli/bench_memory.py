"""``graphfeed bench memory``: summed PSS of all training ranks, for 1, 2, 4 ... processes.

For each process count N the same short training runs in N ranks spawned by
:func:`graphfeed.distributed.launch` (the 1-process figure too, so every run pays the same
interpreter and torch overhead). While the ranks run, the parent reads each rank's proportional
set size from ``/proc/<pid>/smaps_rollup`` every ``--interval`` seconds and keeps the peak of
their sum. PSS splits a shared page between the processes mapping it, so the sum is the memory
the ranks use together: one shared copy of the data counts once, N private copies N times.

Each row shows N ranks against the 1-process figure (ratio, and memory per extra process);
judging the figures is for the benchmark notes (docs/benchmarks.md), not for the tool.
``--private-copy`` makes every rank load its own copy of the data, to show what sharing saves.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Optional

from . import _args

_process_counts = _args.positive_int_list("process counts (like 1,2,4)")


def _nproc_list(text: str) -> list[int]:
    """``--nproc``: process counts, each once, in increasing order; an empty item (``1,,2``)
    is an error."""
    return sorted(set(_process_counts(text)))


HELP = "summed PSS of all ranks during training, for 1, 2, 4 ... processes"
DESCRIPTION = (
    "Runs a short training with N processes for each N in --nproc and prints the "
    "peak summed PSS (proportional set size) of the ranks against the 1-process figure."
)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("memory", help=HELP, description=DESCRIPTION)
    p.add_argument("--nproc", type=_nproc_list, default=[1, 2, 4],
                   help="process counts, comma-separated; 1 is always measured [1,2,4]")
    p.add_argument("--dataset", default="medium",
                   help=f"built-in dataset ({_args.builtin_datasets(plain_node=True)}) or a "
                        f"prepared folder [%(default)s]")
    p.add_argument("--features", default="ram", choices=_args.feature_backends(),
                   help="feature store backend [%(default)s]")
    p.add_argument("--cache-size", type=_args.size, default=0,
                   help=f"CPU cache in front of disk/lmdb features ({_args.SIZE_UNITS}) [%(default)s]")
    p.add_argument("--private-copy", action="store_true",
                   help="every rank loads its own copy of graph and features (for comparison)")
    p.add_argument("--epochs", type=_args.positive_int, default=1,
                   help="epochs of each measured run [%(default)s]")
    p.add_argument("--fanouts", type=_args.fanouts, default=[10, 5],
                   help="neighbours per layer, input layer first [10,5]")
    p.add_argument("--batch-size", type=_args.positive_int, default=1024,
                   help="seeds per batch [%(default)s]")
    p.add_argument("--hidden", type=_args.positive_int, default=64,
                   help="width of the hidden layers [%(default)s]")
    p.add_argument("--threads", type=_args.positive_int, default=1,
                   help="loader threads per rank [%(default)s]")
    p.add_argument("--interval", type=_args.positive_float, default=0.25,
                   help="seconds between PSS samples [%(default)s]")
    p.add_argument("--dist-timeout", type=_args.positive_float, default=600.0,
                   help="seconds before a stuck collective fails the run [%(default)s]")
    p.add_argument("--data-root", default=None, help="cache folder for built-in datasets")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


@dataclass
class MemoryRun:
    nproc: int
    private_copy: bool
    peak_pss_bytes: int = 0
    # the breakdown of the summed PSS at its peak (smaps_rollup fields, summed over ranks)
    peak_breakdown: dict = field(default_factory=dict)
    samples: int = 0
    seconds: float = 0.0
    test_acc: float = float("nan")
    ratio: Optional[float] = None


class _PssSampler:
    """``launch``'s monitor: sums the ranks' PSS at each call and keeps the peak."""

    FIELDS = ("Pss", "Pss_Anon", "Pss_File", "Pss_Shmem", "Rss")

    def __init__(self, run: MemoryRun):
        self.run = run

    def __call__(self, pids) -> None:
        from ..distributed.pss import memory_breakdown
        from ..errors import GraphfeedError

        total = dict.fromkeys(self.FIELDS, 0)
        for pid in pids:
            try:
                m = memory_breakdown(pid)
            except (GraphfeedError, OSError):
                continue  # exiting
            for k in self.FIELDS:
                total[k] += int(m.get(k, 0))
        self.run.samples += 1
        if total["Pss"] > self.run.peak_pss_bytes:
            self.run.peak_pss_bytes = total["Pss"]
            self.run.peak_breakdown = total


def _rank_train(cfg):
    """Runs in each spawned rank: one training as configured; returns the test accuracy."""
    from ..training import train

    return float(train(cfg).final_test_acc)


def measure(cfg, nproc: int, *, interval_s: float = 0.25) -> MemoryRun:
    """Peak summed PSS of ``nproc`` ranks training with ``cfg`` (``cfg.nproc`` is overridden)."""
    import dataclasses

    from ..distributed import launch

    run = MemoryRun(nproc=nproc, private_copy=bool(cfg.private_copy))
    cfg = dataclasses.replace(cfg, nproc=nproc)
    t0 = time.perf_counter()
    # The 1-process reference is one plain process (spawn: no fork server, as when training in
    # one process). N ranks come from launch's fork server, which is counted with them.
    from ..training import PRELOAD

    accs = launch(_rank_train, nproc, cfg, timeout_s=cfg.dist_timeout, preload=PRELOAD,
                  monitor=_PssSampler(run), monitor_interval_s=interval_s,
                  start_method="spawn" if nproc == 1 else None)
    run.seconds = time.perf_counter() - t0
    run.test_acc = accs[0]
    return run


def _mb(n) -> str:
    return f"{n / 1e6:,.0f} MB"


def format_table(runs: list[MemoryRun], dataset: str, features: str) -> str:
    base = runs[0]
    lines = [
        f"graphfeed bench memory: dataset {dataset}, features {features}, "
        f"{'PRIVATE copy per rank' if base.private_copy else 'one shared copy per machine'}",
        f"{'nproc':>5}  {'peak summed PSS':>16}  {'x 1-proc':>8}  {'+ per extra proc':>16}  "
        f"{'anon':>9}  {'file':>9}  {'shmem':>9}  {'seconds':>7}  {'test acc':>8}",
    ]
    for r in runs:
        b = r.peak_breakdown
        extra = (
            _mb((r.peak_pss_bytes - base.peak_pss_bytes) / (r.nproc - 1)) if r.nproc > 1 else "-"
        )
        lines.append(
            f"{r.nproc:>5}  {_mb(r.peak_pss_bytes):>16}  {r.ratio:>8.2f}  {extra:>16}  "
            f"{_mb(b.get('Pss_Anon', 0)):>9}  "
            f"{_mb(b.get('Pss_File', 0)):>9}  {_mb(b.get('Pss_Shmem', 0)):>9}  "
            f"{r.seconds:>7.1f}  {r.test_acc:>8.4f}"
        )
    lines.append("PSS sampled in every rank; the peak of their sum")
    return "\n".join(lines)


def run(args) -> int:
    from ..datasets.open import open_dataset
    from ..training import TrainConfig

    cfg = TrainConfig(
        dataset=args.dataset,
        fanouts=tuple(args.fanouts),
        batch_size=args.batch_size,
        epochs=args.epochs,
        hidden=args.hidden,
        device="cpu",
        features=args.features,
        cache_size=args.cache_size,
        num_threads=args.threads,
        dist_timeout=args.dist_timeout,
        private_copy=args.private_copy,
        mlp_baseline=False,
        progress=False,
        data_root=args.data_root,
    ).validate()
    # generate / check the dataset once, outside the measured runs
    open_dataset(cfg.dataset, cfg.data_root, verbose=not args.json)
    counts = sorted(set([1] + list(args.nproc)))
    runs = []
    for n in counts:
        if not args.json:
            print(f"graphfeed bench memory: {n} process{'es' if n > 1 else ''} ...", file=sys.stderr, flush=True)
        runs.append(measure(cfg, n, interval_s=args.interval))
    one = runs[0].peak_pss_bytes
    for r in runs:
        r.ratio = r.peak_pss_bytes / one if one else float("nan")
    if args.json:
        print(json.dumps({
            "dataset": args.dataset,
            "features": args.features,
            "private_copy": bool(args.private_copy),
            "runs": [asdict(r) for r in runs],
        }))
    else:
        print(format_table(runs, args.dataset, args.features))
    return 0
