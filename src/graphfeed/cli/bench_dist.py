"""``graphfeed bench dist PARTITIONS``: bytes exchanged per batch, exchange time against local
work, seeds/s per rank and the remote feature cache's hit rate, over a partitioned dataset with
one gloo process per part (see :mod:`graphfeed.bench.dist`)."""

from __future__ import annotations

import argparse
import json

from . import _args


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "dist", help="sampling + feature exchange over a partitioned dataset (gloo processes)",
        description="Per rank and batch: bytes exchanged, time in all_to_all against local "
                    "work, seeds/s, and the hit rate of a cache of hot remote feature rows.")
    p.add_argument("partitions", metavar="DIR", help="a 'graphfeed partition' folder")
    p.add_argument("--nproc", type=_args.positive_int, default=None,
                   help="processes, a multiple of the parts [one per part]")
    _args.add_batch_arguments(p, seeds="seeds", batches=20,
                              timed="timed batches per rank and phase",
                              warmup="batches first (JIT, and the counts that rank rows for the "
                                     "cache)")
    p.add_argument("--cache-rows", type=int, default=0,
                   help="remote rows each rank caches for a second phase [%(default)s: no second "
                        "phase]")
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffles and the sampling [%(default)s]")
    p.add_argument("--dist-timeout", type=_args.positive_float, default=600.0,
                   help="seconds before a stuck collective fails the run [%(default)s]")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def run(args) -> int:
    from ..bench.dist import bench_dist, format_report
    from ._output import write_stdout

    r = bench_dist(args.partitions, nproc=args.nproc or 0, fanouts=args.fanouts,
                   batch_size=args.batch_size, batches=args.batches,
                   warmup=max(0, args.warmup), cache_rows=max(0, args.cache_rows),
                   seed=args.seed, timeout_s=args.dist_timeout)
    text = json.dumps(r) if args.json else format_report(r)
    return write_stdout("bench", text + "\n")
