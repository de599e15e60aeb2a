"""``graphfeed train``: GraphSAGE node classification on a built-in or prepared dataset."""

from __future__ import annotations

import argparse
import json

from . import _args


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "train",
        help="train GraphSAGE node classification (defaults run the demo)",
        description="Mini-batch GraphSAGE with neighbour sampling; prints per-epoch loss, "
        "accuracy, seeds/s and peak memory, then an MLP baseline for comparison.",
    )
    p.add_argument("--dataset", default="small",
                   help="built-in dataset (tiny, small, medium) or a prepared dataset folder [small]")
    p.add_argument("--fanouts", type=_args.fanouts, default=[10, 10],
                   help="neighbours per layer, input layer first, -1 = all [10,10]")
    p.add_argument("--batch-size", type=_args.positive_int, default=1024)
    p.add_argument("--epochs", type=_args.positive_int, default=5)
    p.add_argument("--hidden", type=_args.positive_int, default=128)
    p.add_argument("--lr", type=_args.positive_float, default=3e-3)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--replace", action="store_true", help="sample neighbours with replacement")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N [auto]")
    p.add_argument("--mode", default="auto",
                   choices=["auto", "cpu-cpu", "cpu-cuda", "pinned-cuda", "cuda-cuda"],
                   help="where the graph and features live and where sampling runs [auto]")
    p.add_argument("--features", default="ram", choices=["ram", "disk", "lmdb"],
                   help="feature store backend [ram]")
    p.add_argument("--cache-size", type=_args.size, default=0,
                   help="CPU cache in front of disk/lmdb features, e.g. 512MB [0]")
    p.add_argument("--cache-policy", default="sieve", help="cache policy (sieve, s3fifo, lru, clock)")
    p.add_argument("--threads", type=_args.positive_int, default=2,
                   help="loader threads sampling and fetching batches in parallel [2]")
    p.add_argument("--prefetch", type=_args.positive_int, default=2, help="finished batches queued ahead [2]")
    p.add_argument("--nproc", type=_args.positive_int, default=1,
                   help="training processes on this machine (torch.distributed, one data copy) [1]")
    p.add_argument("--dist-timeout", type=_args.positive_float, default=300.0,
                   help="seconds before a stuck collective fails the run [300]")
    p.add_argument("--private-copy", action="store_true",
                   help="each rank loads its own copy of the data (for memory comparisons)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-mlp", action="store_true", help="skip the MLP baseline")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--data-root", default=None, help="cache folder for built-in datasets")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object at the end")
    return p


def run(args) -> int:
    from ..training import TrainConfig, train

    cfg = TrainConfig(
        dataset=args.dataset,
        fanouts=tuple(args.fanouts),
        batch_size=args.batch_size,
        epochs=args.epochs,
        hidden=args.hidden,
        lr=args.lr,
        dropout=args.dropout,
        weight_decay=args.weight_decay,
        device=args.device,
        mode=args.mode,
        seed=args.seed,
        features=args.features,
        cache_size=args.cache_size,
        cache_policy=args.cache_policy,
        replace=args.replace,
        num_threads=args.threads,
        prefetch=args.prefetch,
        nproc=args.nproc,
        dist_timeout=args.dist_timeout,
        private_copy=args.private_copy,
        mlp_baseline=not args.no_mlp,
        progress=not args.no_progress,
        data_root=args.data_root,
    )
    result = train(cfg)
    if args.json:
        print(json.dumps(result.to_dict()))
    return 0
