"""``graphfeed train``: node classification (GraphSAGE, GCN or GAT) on a built-in or prepared dataset."""

from __future__ import annotations

import argparse
import json
import sys

from . import _args


HELP = "train node classification with neighbour sampling (defaults run the demo)"
DESCRIPTION = (
    "Mini-batch GNN training with neighbour sampling; prints per-epoch loss, the "
    "task's metrics (accuracy and macro-F1, or ROC-AUC and accuracy for 2 classes), seeds/s "
    "and memory, then an MLP baseline and the majority-class rate for comparison. The main "
    "metric (accuracy, or ROC-AUC for 2 classes) on the validation set picks the best epoch."
)


def add_parser(sub) -> argparse.ArgumentParser:
    from ..trainer import config as C

    p = sub.add_parser("train", help=HELP, description=DESCRIPTION)
    p.add_argument("--dataset", default="small",
                   help="built-in dataset (tiny, small, medium) or a prepared dataset folder [small]")
    p.add_argument("--model", default="sage", choices=list(C.MODELS),
                   help="GraphSAGE (SAGEConv), GCN (GCNConv) or GAT (GATConv) [sage]")
    p.add_argument("--fanouts", type=_args.fanouts, default=[10, 10],
                   help="neighbours per layer, input layer first, -1 = all [10,10]")
    p.add_argument("--eval", dest="eval_method", default="auto", choices=list(C.EVAL_METHODS),
                   help="evaluation and --predict: layerwise computes each layer once for every "
                        "node it needs from all its neighbours (exact); sampled runs the model on "
                        "sampled neighbourhoods of each evaluated node (--eval-fanouts); auto is "
                        "layerwise for --model sage/gcn/gat on plain datasets and sampled for "
                        "--task link, typed datasets, --partitions, --sampler temporal and "
                        "--eval-fanouts [auto]")
    p.add_argument("--eval-fanouts", type=_args.fanouts, default=None,
                   help="sampled evaluation (implies --eval sampled): neighbours per layer "
                   "[every neighbour, capped at 10000^(1/layers): 100,100 for two layers]")
    p.add_argument("--eval-every", type=_args.int_range(1, 10**9), default=1, metavar="N",
                   help="evaluate every N epochs and after the last; --patience counts "
                        "evaluations and the best epoch is an evaluated one [1]")
    p.add_argument("--batch-size", type=_args.int_range(1, 2**31 - 1), default=1024)
    p.add_argument("--epochs", type=_args.int_range(1, 10**9), default=5)
    p.add_argument("--hidden", type=_args.int_range(1, C.MAX_HIDDEN), default=128)
    p.add_argument("--heads", type=_args.int_range(1, C.MAX_HEADS), default=8,
                   help="GAT attention heads; --hidden is split across them [8]")
    p.add_argument("--lr", type=_args.positive_float, default=3e-3)
    p.add_argument("--dropout", type=_args.fraction, default=0.5)
    p.add_argument("--weight-decay", type=_args.nonnegative_float, default=0.0)
    p.add_argument("--patience", type=_args.int_range(0, 10**9), default=0,
                   help="stop after this many evaluations (epochs, unless --eval-every) without a "
                        "better validation main metric [0: never]")
    p.add_argument("--replace", action="store_true", help="sample neighbours with replacement")
    _args.add_sampler_arguments(p)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N [auto]")
    p.add_argument("--mode", default="auto", choices=_args.placement_modes(),
                   help="where the graph and features live and where sampling runs [auto]")
    p.add_argument("--features", default="ram", choices=_args.feature_backends(),
                   help="feature store backend [ram]")
    p.add_argument("--cache-size", type=_args.size, default=0,
                   help=f"CPU cache in front of disk/lmdb features, e.g. 512MB ({_args.SIZE_UNITS}) [0]")
    p.add_argument("--cache-policy", default="sieve", choices=_args.cache_policies(),
                   help="cache policy [sieve]")
    p.add_argument("--threads", type=_args.int_range(1, C.MAX_THREADS), default=2,
                   help="loader threads sampling and fetching batches in parallel [2]")
    p.add_argument("--prefetch", type=_args.int_range(1, C.MAX_PREFETCH), default=2,
                   help="finished batches queued ahead [2]")
    p.add_argument("--nproc", type=_args.int_range(1, C.MAX_NPROC), default=1,
                   help="training processes on this machine (torch.distributed, one data copy) [1]")
    p.add_argument("--dist-timeout", type=_args.positive_float, default=300.0,
                   help="seconds before a stuck collective fails the run [300]")
    p.add_argument("--dist-backend", default="auto", choices=list(C.DIST_BACKENDS),
                   help="process-group backend: auto is NCCL on GPUs (one GPU per rank) and gloo on "
                        "CPUs; gloo lets several ranks share one GPU [auto]")
    p.add_argument("--split", type=_args.int_range(0, 10**6), default=None,
                   help="stored split set to train on, for datasets that store several (e.g. the 10 "
                        "standard splits); with --runs K and no --split, run k uses split k mod "
                        "the number of sets [0]")
    p.add_argument("--private-copy", action="store_true",
                   help="each rank loads its own copy of the data (for memory comparisons)")
    p.add_argument("--table-cache", metavar="DIR", default=None,
                   help="keep the tables of --sampler weighted/labor/temporal in DIR, so that the "
                        "next run with the same graph, method and seed maps them instead of "
                        "building them (off)")
    p.add_argument("--seed", type=_args.int_range(0, C.MAX_SEED), default=0)
    p.add_argument("--runs", type=_args.int_range(1, C.MAX_RUNS), default=1,
                   help="independent runs with seeds SEED..SEED+RUNS-1; prints mean and std [1]")
    p.add_argument("--save", metavar="DIR", default=None,
                   help="write DIR/checkpoint.pt after every epoch (atomically)")
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="continue the run checkpointed in DIR (and keep checkpointing there)")
    p.add_argument("--predict", metavar="FILE", default=None,
                   help="write the best epoch's predicted classes as int64 .npy (--task link: "
                        "test-pair scores, float32 .npy; .npz per relation on typed datasets)")
    p.add_argument("--predict-nodes", default="test", choices=list(C.PREDICT_NODES),
                   help="predict the test nodes (in split order) or all nodes (in id order) [test]")
    p.add_argument("--log", metavar="FILE", default=None,
                   help="append one JSON object per epoch to FILE (JSON lines)")
    p.add_argument("--task", default="node", choices=list(C.TASKS),
                   help="node classification, or link prediction on a link_prediction dataset "
                        "(e.g. the built-in 'link') [node]")
    p.add_argument("--decoder", default="dot", choices=list(C.DECODERS),
                   help="--task link: score a pair by the dot product of its embeddings or an "
                        "MLP on their product [dot]")
    p.add_argument("--num-negatives", type=_args.int_range(1, C.MAX_NEGATIVES), default=1,
                   help="--task link: uniform negatives per training pair [1]")
    p.add_argument("--eval-negatives", type=_args.int_range(1, C.MAX_NEGATIVES), default=1000,
                   help="--task link: negatives each valid/test pair is ranked against (the "
                        "dataset's fixed ones when it has them) [1000]")
    p.add_argument("--no-mlp", action="store_true", help="skip the MLP baseline")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--data-root", default=None, help="cache folder for built-in datasets")
    p.add_argument("--json", action="store_true",
                   help="print the result as one JSON object on stdout (human lines go to stderr)")
    p.add_argument("--partitions", metavar="DIR", default=None,
                   help="train across the parts of a 'graphfeed partition' folder (--nproc: a "
                        "multiple of its parts; under torchrun WORLD_SIZE is)")
    p.add_argument("--remote-cache", type=_args.int_range(0, 2**62), default=0, metavar="ROWS",
                   help="with --partitions: remote feature rows each rank caches, the most "
                        "sampled in epoch 0 [0]")
    p.add_argument("--dry-run", action="store_true",
                   help="check the arguments and the dataset, print the plan, train nothing")
    return p


def config_from_args(args):
    from ..training import TrainConfig

    return TrainConfig(
        dataset=args.dataset,
        model=args.model,
        fanouts=tuple(args.fanouts),
        eval_fanouts=tuple(args.eval_fanouts) if args.eval_fanouts is not None else None,
        eval_method=args.eval_method,
        eval_every=args.eval_every,
        batch_size=args.batch_size,
        epochs=args.epochs,
        hidden=args.hidden,
        heads=args.heads,
        lr=args.lr,
        dropout=args.dropout,
        weight_decay=args.weight_decay,
        patience=args.patience,
        device=args.device,
        mode=args.mode,
        seed=args.seed,
        runs=args.runs,
        features=args.features,
        cache_size=args.cache_size,
        cache_policy=args.cache_policy,
        replace=args.replace,
        **_args.sampler_options(args),
        num_threads=args.threads,
        prefetch=args.prefetch,
        nproc=args.nproc,
        dist_timeout=args.dist_timeout,
        dist_backend=args.dist_backend,
        split=args.split,
        private_copy=args.private_copy,
        table_cache=args.table_cache,
        mlp_baseline=not args.no_mlp,
        progress=not args.no_progress,
        data_root=args.data_root,
        save=args.save,
        resume=args.resume,
        predict=args.predict,
        predict_nodes=args.predict_nodes,
        log=args.log,
        human_output="stderr" if args.json else "stdout",
        partitions=args.partitions,
        remote_cache=args.remote_cache,
        task=args.task,
        decoder=args.decoder,
        num_negatives=args.num_negatives,
        eval_negatives=args.eval_negatives,
    )


def run(args) -> int:
    from ..training import check_run, train, train_runs

    cfg = config_from_args(args).validate()
    if args.dry_run:
        plan = check_run(cfg)
        if args.json:
            print(json.dumps(plan))
        else:
            print("graphfeed train --dry-run: " + ", ".join(f"{k} {v}" for k, v in plan.items()))
        return 0
    result = train(cfg) if cfg.runs == 1 else train_runs(cfg)
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), allow_nan=False) + "\n")
        sys.stdout.flush()
    return 0
