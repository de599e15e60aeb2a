"""``graphfeed bench <what>``: throughput and memory measurements."""

from __future__ import annotations

import argparse
import importlib
import json

from . import _args

# bench name -> module with add_parser(subparsers) and run(args); "sample" lives here
BENCHES = {
    "features": "graphfeed.cli.bench_features",
    "memory": "graphfeed.cli.bench_memory",
    "dist": "graphfeed.cli.bench_dist",
}


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("bench", help="measure sampling, feature and memory throughput")
    bsub = p.add_subparsers(dest="bench", metavar="WHAT")
    bsub.required = True

    s = bsub.add_parser("sample", help="sampling alone and sampling + feature fetch",
                        description="Seeds/s, sampled edges/s, batches/s and peak RSS of the loader's "
                        "sampling stage, alone and with feature fetch.")
    _args.add_data_source(s, _args.builtin_datasets(), "indptr.npy and indices.npy (optional "
                          "features.npy, train_ids.npy)")
    _args.add_batch_arguments(s, seeds="seeds (or pairs, --task link)", batches=100,
                              timed="timed batches", warmup="untimed batches first (JIT, caches)")
    s.add_argument("--threads", type=_args.positive_int, default=2,
                   help="loader threads [%(default)s]")
    s.add_argument("--prefetch", type=_args.positive_int, default=2,
                   help="finished batches queued ahead [%(default)s]")
    s.add_argument("--replace", action="store_true", help="sample neighbours with replacement")
    _args.add_sampler_arguments(s)
    s.add_argument("--random-weights", action="store_true",
                   help="weighted: seeded random weights in (0, 1] instead of the graph's own")
    s.add_argument("--random-times", action="store_true",
                   help="temporal: seeded random node times in [0, 10^6) (seeds' times: theirs)")
    s.add_argument("--rounds", type=_args.positive_int, default=3,
                   help="non-uniform --sampler: alternate it with uniform sampling this many "
                        "times and report the median ratio; uniform with --features: alternate "
                        "sampling alone and sampling + fetch the same way [3]")
    s.add_argument("--features", default="ram",
                   choices=["auto", *_args.feature_backends(), "none"],
                   help="feature store the fetch reads from: auto chooses as graphfeed train does "
                        "(RAM when it fits the memory available, else disk with a cache sized to "
                        "what is left); none: sampling alone [%(default)s]")
    s.add_argument("--cache-size", type=_args.size, default=0,
                   help=f"CPU cache in front of disk/lmdb features ({_args.SIZE_UNITS}) [%(default)s]")
    s.add_argument("--cache-policy", default="auto", choices=_args.cache_policies(),
                   help="cache policy: auto is degree (a static cache of the nodes sampled most, "
                        "the graph's highest out-degrees, filled before the first batch) for a "
                        "dataset's features; sieve, s3fifo, lru and clock evict [%(default)s]")
    s.add_argument("--mode", default="cpu-cpu", choices=_args.placement_modes(),
                   help="placement, as in graphfeed train [cpu-cpu]")
    s.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N [auto]")
    s.add_argument("--baselines", action="store_true",
                   help="also time a vectorised torch sampler and the 1-thread numba kernel")
    s.add_argument("--seed", type=int, default=0, help="seed of the shuffles and the sampling [%(default)s]")
    s.add_argument("--data-root", default=None, help="cache folder for built-in datasets")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--task", default="node", choices=["node", "link"],
                   help="link: batches of --batch-size seed pairs (a link dataset's training "
                        "pairs, else edges of the graph) with --num-negatives each, next to node "
                        "sampling in the same run [node]")
    s.add_argument("--num-negatives", type=_args.positive_int, default=1,
                   help="--task link: uniform negatives per pair [1]")
    s.add_argument("--exclude", default="auto", choices=["auto", "none", "self", "reverse"],
                   help="--task link: sampled edges removed from the blocks: the seed pairs "
                        "(self), also their reverses, or none; auto: reverse when the dataset "
                        "is marked undirected, else self [%(default)s]")
    s.set_defaults(_bench_run=run_sample)

    for name, modname in BENCHES.items():
        mod = importlib.import_module(modname)
        bp = mod.add_parser(bsub)
        bp.set_defaults(_bench_run=mod.run)
    return p


def run(args) -> int:
    return int(args._bench_run(args) or 0)


def run_sample(args) -> int:
    from ..bench.sample import bench_sample, format_report, load_bench_data

    data = load_bench_data(args.dataset, args.graph, args.data_root)
    if args.task == "link":
        from ..bench.link import bench_link_sample, format_link_report

        r = bench_link_sample(data, fanouts=args.fanouts, batch_size=args.batch_size,
                              num_negatives=args.num_negatives, num_batches=args.batches,
                              warmup=max(args.warmup, 0), replace=args.replace,
                              num_threads=args.threads, prefetch=args.prefetch, seed=args.seed,
                              mode=args.mode, device=args.device, rounds=args.rounds,
                              exclude=args.exclude)
        print(json.dumps(r) if args.json else format_link_report(r))
        return 0
    if getattr(data.dataset, "hetero", None) is not None:  # node and edge types
        from ..bench.hetero_sample import bench_hetero_sample, format_hetero_report

        r = bench_hetero_sample(data.dataset, fanouts=args.fanouts, batch_size=args.batch_size,
                                num_batches=args.batches, warmup=max(args.warmup, 1),
                                replace=args.replace, num_threads=args.threads,
                                prefetch=args.prefetch, features=args.features != "none",
                                seed=args.seed, rounds=args.rounds)
        print(json.dumps(r) if args.json else format_hetero_report(r))
        return 0
    r = bench_sample(
        data,
        fanouts=args.fanouts,
        batch_size=args.batch_size,
        num_batches=args.batches,
        warmup=max(args.warmup, 0),
        replace=args.replace,
        num_threads=args.threads,
        prefetch=args.prefetch,
        features=None if args.features == "none" else args.features,
        cache_size=args.cache_size,
        cache_policy=args.cache_policy,
        baselines=args.baselines,
        seed=args.seed,
        mode=args.mode,
        device=args.device,
        method=_method(args),
        random_weights=args.random_weights,
        random_times=args.random_times,
        rounds=args.rounds,
    )
    print(json.dumps(r) if args.json else format_report(r))
    return 0


def _method(args):
    from ..trainer.config import TrainConfig

    return TrainConfig(**_args.sampler_options(args)).sampling_method()
