"""``graphfeed bench features``: feature-read throughput per backend, ids from sampled batches."""

from __future__ import annotations

import argparse
import json
import sys

from . import _args

from ..bench import FEATURE_VARIANTS, check_feature_variants


HELP = "feature reads: RAM vs disk (warm, cold, direct) vs LMDB vs cached"
DESCRIPTION = (
    "Rows/s and GB/s of feature reads for the input nodes of real sampled "
    "mini-batches, on every backend, each also as a ratio to the RAM ceiling "
    "(torch.index_select in process memory) measured in the same run."
)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("features", help=HELP, description=DESCRIPTION)
    _args.add_data_source(p, _args.builtin_datasets(plain_node=True), "indptr.npy, indices.npy "
                          "and features.npy (optional train_ids.npy)")
    p.add_argument("--feature", default="feat", help="node feature name in a prepared dataset [feat]")
    _args.add_batch_arguments(p, seeds="seeds (of the sampled batches)", batches=20,
                              timed="timed batches", warmup="untimed batches (cache warm-up)")
    p.add_argument("--cold-batches", type=_args.positive_int, default=5,
                   help="batches timed for the cold backends [5]")
    p.add_argument("--backends", default=",".join(FEATURE_VARIANTS),
                   help="comma-separated feature variants to time [%(default)s]")
    p.add_argument("--cache-fraction", type=_args.positive_float, default=0.2,
                   help="cache capacity as a fraction of the rows [0.2]")
    p.add_argument("--cache-policy", default="sieve,s3fifo", help="comma-separated policies [sieve,s3fifo]")
    p.add_argument("--threads", type=_args.positive_int, default=2, help="read threads per backend [2]")
    p.add_argument("--repeats", type=_args.positive_int, default=3,
                   help="timed passes per warm backend, the best one reported [%(default)s]")
    p.add_argument("--rows-per-chunk", type=_args.positive_int, default=None,
                   help="LMDB chunking [the store's default]")
    p.add_argument("--workdir", default=None, help="where the LMDB copy is built [a temp folder]")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled batches [%(default)s]")
    p.add_argument("--data-root", default=None, help="cache folder for built-in datasets")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def run(args) -> int:
    from ..bench.features import bench_features, format_report, sampled_id_batches
    from ..bench.sample import load_bench_data
    from ..errors import GraphfeedError

    try:
        backends = check_feature_variants(b.strip() for b in args.backends.split(",") if b.strip())
    except GraphfeedError as e:
        raise GraphfeedError(f"--backends: {e}") from None
    policies = [s.strip() for s in args.cache_policy.split(",") if s.strip()]
    from ..features.registry import policy_code

    for pol in policies:
        policy_code(pol)  # unknown names fail now, listing the valid ones

    log = (lambda m: print(f"graphfeed bench features: {m}", file=sys.stderr, flush=True))
    data = load_bench_data(args.dataset, args.graph, args.data_root)
    dtype = None  # a bfloat16 feature's file holds bits: the metadata says what they are
    if data.dataset is not None:
        path = data.dataset.feature_path(args.feature)
        from ..datasets.schema import bits_dtype

        dtype = bits_dtype(data.dataset.metadata.node_features[args.feature])
    elif data.feature_path is not None:
        path = data.feature_path
    else:
        raise GraphfeedError(f"{args.graph}: no features.npy to benchmark")
    warmup = max(1, args.warmup)  # at least one untimed batch compiles the kernels
    log(f"sampling {warmup + args.batches} batches of {args.batch_size} seeds, fanouts {args.fanouts}")
    batches = sampled_id_batches(data.graph, data.seed_pool, num_batches=warmup + args.batches,
                                 batch_size=args.batch_size, fanouts=args.fanouts, seed=args.seed)
    report = bench_features(
        path, batches, backends=backends, cache_fraction=args.cache_fraction,
        cache_policies=policies, warmup_batches=warmup,
        repeats=args.repeats, cold_batches=args.cold_batches, num_threads=args.threads,
        rows_per_chunk=args.rows_per_chunk, workdir=args.workdir, log=log, dtype=dtype,
    )
    report["dataset"] = data.name
    report["sampling"] = {"batch_size": args.batch_size, "fanouts": list(args.fanouts), "seed": args.seed}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return 0
