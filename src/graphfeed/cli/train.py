"""``graphfeed train``: node classification or link prediction (GraphSAGE, GCN or GAT; an R-GCN on
typed graphs), on a built-in or prepared dataset or across the parts of a partitioned one."""

from __future__ import annotations

import argparse
import json
import sys

from . import _args


HELP = ("train a GNN with neighbour sampling: node classification or link prediction, on plain "
        "or typed graphs, in one process, several, or across partitions (defaults run the demo)")
DESCRIPTION = (
    "Mini-batch GNN training with neighbour sampling: node classification (--task node) or link "
    "prediction (--task link), on homogeneous or typed (heterogeneous) datasets, in one process, "
    "in --nproc ranks sharing one copy of the data, or across the parts of a 'graphfeed "
    "partition' folder (--partitions). Prints per-epoch loss, the task's metrics (accuracy and "
    "macro-F1, or ROC-AUC and accuracy for 2 classes; MRR, Hits@K and ROC-AUC for links), seeds/s "
    "and memory, then the baselines (an MLP and the majority class; the degree baseline for "
    "links). The main metric (accuracy, ROC-AUC for 2 classes, MRR for links) on the validation "
    "set picks the best epoch. Defaults are in [brackets]."
)


def add_parser(sub) -> argparse.ArgumentParser:
    from ..trainer import config as C

    D = C.TrainConfig()  # the defaults: one place for the Python API and the command line

    def per_task(field: str) -> str:  # a default each task sets (TrainConfig field left None)
        return ", ".join(f"{t} {C.TASKS.get(t).defaults[field]:g}" for t in C.TASKS.names())
    p = sub.add_parser("train", help=HELP, description=DESCRIPTION)
    p.add_argument("--dataset", default=D.dataset,
                   help=f"built-in dataset ({_args.builtin_datasets()}) or a prepared dataset "
                        f"folder [%(default)s]")
    p.add_argument("--model", default=D.model, choices=list(C.MODELS),
                   help="GraphSAGE (SAGEConv), GCN (GCNConv) or GAT (GATConv) [by the data: "
                        "gcn for --task node where under 10%% of the nodes are training labels "
                        "and the features are 0/1, else sage; the run says which]")
    p.add_argument("--fanouts", type=_args.fanouts, default=list(D.fanouts),
                   help=f"neighbours per layer, input layer first, -1 = all "
                        f"[{_args.shown(D.fanouts)}]")
    p.add_argument("--eval", dest="eval_method", default=D.eval_method, choices=list(C.EVAL_METHODS),
                   help="evaluation and --predict: layerwise computes each layer once for every "
                        "node it needs from all its neighbours (exact); sampled runs the model on "
                        "sampled neighbourhoods of each evaluated node (--eval-fanouts); auto is "
                        "layerwise for --model sage/gcn/gat and the R-GCN of typed datasets (node "
                        "and link tasks) and sampled for --partitions, --sampler temporal and "
                        "--eval-fanouts [%(default)s]")
    p.add_argument("--eval-fanouts", type=_args.fanouts, default=D.eval_fanouts,
                   help="sampled evaluation (implies --eval sampled): neighbours per layer "
                   "[every neighbour, capped at 10000^(1/layers): 100,100 for two layers]")
    p.add_argument("--eval-every", type=_args.int_range(1, 10**9), default=D.eval_every, metavar="N",
                   help="evaluate every N epochs and after the last; --patience counts "
                        "evaluations and the best epoch is an evaluated one [%(default)s]")
    p.add_argument("--batch-size", type=_args.int_range(1, 2**31 - 1), default=D.batch_size,
                   help="seeds per training batch (node ids, or pairs for --task link) "
                        "[%(default)s]")
    p.add_argument("--epochs", type=_args.int_range(1, 10**9), default=D.epochs,
                   help="at most this many passes over the training seeds; --patience ends "
                        "the run earlier once the validation metric stops improving "
                        "[%(default)s]")
    p.add_argument("--steps-per-epoch", type=_args.int_range(1, 10**9), default=None, metavar="N",
                   help="at most N training batches an epoch, the first N of its shuffled order "
                        "(each epoch reshuffles; for graphs whose full epoch takes too long) "
                        "[every batch]")
    p.add_argument("--hidden", type=_args.int_range(1, C.MAX_HIDDEN), default=D.hidden,
                   help="width of the hidden layers [%(default)s]")
    p.add_argument("--heads", type=_args.int_range(1, C.MAX_HEADS), default=D.heads,
                   help="GAT attention heads; --hidden is split across them [%(default)s]")
    p.add_argument("--norm", default=D.norm, choices=list(C.NORMS),
                   help="normalisation between layers: auto is the model's own (LayerNorm for "
                        "sage, none for gcn and gat), layer (LayerNorm), batch (BatchNorm) "
                        "[%(default)s]")
    p.add_argument("--residual", action="store_true",
                   help="residual connections: add each layer's input to its output (a linear "
                        "map where the widths differ) [off]")
    p.add_argument("--lr", type=_args.positive_float, default=D.lr,
                   help="Adam learning rate [%(default)s]")
    p.add_argument("--dropout", type=_args.fraction, default=D.dropout,
                   help="dropout probability between layers and on input features wider "
                        f"than --hidden, in [0, 1) [by task: {per_task('dropout')}]")
    p.add_argument("--weight-decay", type=_args.nonnegative_float, default=D.weight_decay,
                   help=f"Adam weight decay (L2 penalty) [by task: {per_task('weight_decay')}]")
    p.add_argument("--precision", default=D.precision, choices=list(C.PRECISIONS),
                   help="32: float32 throughout; bf16-mixed / fp16-mixed: the forward pass, the "
                        "loss and evaluation under autocast in bfloat16 / float16, weights and "
                        "optimiser in float32 (fp16 with a gradient scaler); on the CPU too, "
                        "faster only where it has bf16/fp16 instructions [%(default)s]")
    p.add_argument("--patience", type=_args.int_range(0, 10**9), default=D.patience,
                   help="stop after this many evaluations (epochs, unless --eval-every) without a "
                        "better validation main metric; 0: never [%(default)s]")
    p.add_argument("--replace", action="store_true", help="sample neighbours with replacement")
    _args.add_sampler_arguments(p)
    p.add_argument("--device", default=D.device, help="auto, cpu, cuda or cuda:N [%(default)s]")
    p.add_argument("--mode", default=D.mode, choices=_args.placement_modes(),
                   help="where the graph and features live and where sampling runs [%(default)s]")
    p.add_argument("--features", default=D.features, choices=["auto", *_args.feature_backends()],
                   help="feature store backend: auto keeps the features in RAM (memory-mapped) "
                        "when graph and features fit 70%% of the memory available (a memory "
                        "cgroup's limit counts), else reads them from disk through a cache sized "
                        "to the rest; the run's placement line says which and why [%(default)s]")
    p.add_argument("--cache-size", type=_args.size, default=D.cache_size,
                   help=f"CPU cache in front of disk/lmdb features, e.g. 512MB ({_args.SIZE_UNITS}) "
                        f"[%(default)s]")
    p.add_argument("--cache-policy", default=D.cache_policy, choices=_args.cache_policies(),
                   help="cache policy: auto is degree (a static cache of the nodes sampled most, "
                        "the graph's highest out-degrees, filled before the first batch) for a "
                        "dataset's features; sieve, s3fifo, lru and clock evict [%(default)s]")
    p.add_argument("--threads", type=_args.int_range(1, C.MAX_THREADS), default=D.num_threads,
                   help="loader threads sampling and fetching batches in parallel [%(default)s]")
    p.add_argument("--prefetch", type=_args.int_range(1, C.MAX_PREFETCH), default=D.prefetch,
                   help="finished batches queued ahead [%(default)s]")
    p.add_argument("--nproc", type=_args.int_range(1, C.MAX_NPROC), default=D.nproc,
                   help="training processes on this machine (torch.distributed, one data copy) "
                        "[%(default)s]")
    p.add_argument("--dist-timeout", type=_args.positive_float, default=D.dist_timeout,
                   help="seconds before a stuck collective fails the run [%(default)s]")
    p.add_argument("--dist-backend", default=D.dist_backend, choices=list(C.DIST_BACKENDS),
                   help="process-group backend: auto is NCCL on GPUs (one GPU per rank) and gloo on "
                        "CPUs; gloo lets several ranks share one GPU [%(default)s]")
    p.add_argument("--split", type=_args.int_range(0, 10**6), default=D.split,
                   help="stored split set to train on, for datasets that store several (e.g. the 10 "
                        "standard splits); with --runs K and no --split, run k uses split k mod "
                        "the number of sets [0]")
    p.add_argument("--private-copy", action="store_true",
                   help="each rank loads its own copy of the data (for memory comparisons)")
    p.add_argument("--table-cache", metavar="DIR", default=D.table_cache,
                   help="keep the tables of --sampler weighted/labor/temporal in DIR, so that the "
                        "next run with the same graph, method and seed maps them instead of "
                        "building them (off)")
    p.add_argument("--seed", type=_args.int_range(0, C.MAX_SEED), default=D.seed,
                   help="seed of the weights, the shuffles and the sampling [%(default)s]")
    p.add_argument("--runs", type=_args.int_range(1, C.MAX_RUNS), default=D.runs,
                   help="independent runs with seeds SEED..SEED+RUNS-1; prints mean and std "
                        "[%(default)s]")
    p.add_argument("--save", metavar="DIR", default=D.save,
                   help="write DIR/checkpoint.pt after every epoch (atomically)")
    p.add_argument("--resume", metavar="DIR", default=D.resume,
                   help="continue the run checkpointed in DIR (and keep checkpointing there)")
    p.add_argument("--predict", metavar="FILE", default=D.predict,
                   help="write the best epoch's predicted classes as int64 .npy (--task link: "
                        "test-pair scores, float32 .npy; .npz per relation on typed datasets)")
    p.add_argument("--predict-nodes", default=D.predict_nodes, choices=list(C.PREDICT_NODES),
                   help="predict the test nodes (in split order) or all nodes (in id order) "
                        "[%(default)s]")
    p.add_argument("--log", metavar="FILE", default=D.log,
                   help="append one JSON object per epoch to FILE (JSON lines; "
                        "'graphfeed report FILE' summarises and plots them)")
    p.add_argument("--task", default=D.task, choices=list(C.TASKS),
                   help="node classification, or link prediction on a link_prediction dataset "
                        "(e.g. the built-in 'link' or 'hetero-link') [%(default)s]")
    p.add_argument("--decoder", default=D.decoder, choices=list(C.DECODERS),
                   help="--task link: score a pair by the dot product of its embeddings or an "
                        "MLP on their product [%(default)s]")
    p.add_argument("--num-negatives", type=_args.int_range(1, C.MAX_NEGATIVES),
                   default=D.num_negatives,
                   help="--task link: uniform negatives per training pair [%(default)s]")
    p.add_argument("--eval-negatives", type=_args.int_range(1, C.MAX_NEGATIVES),
                   default=D.eval_negatives,
                   help="--task link: negatives each valid/test pair is ranked against (the "
                        "dataset's fixed ones when it has them) [%(default)s]")
    p.add_argument("--inputs", type=_input_names, default=D.inputs, metavar="NAME[,NAME...]",
                   help="the node features the model reads, side by side (e.g. feat_0,feat_1 of "
                        "a GraphBolt folder); an untyped dataset's [feat]")
    p.add_argument("--no-mlp", action="store_true", help="skip the MLP baseline")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--data-root", default=D.data_root,
                   help="cache folder for built-in datasets [$GRAPHFEED_HOME/datasets, else "
                        "~/.cache/graphfeed/datasets]")
    p.add_argument("--json", action="store_true",
                   help="print the result as one JSON object on stdout (human lines go to stderr)")
    p.add_argument("--partitions", metavar="DIR", default=D.partitions,
                   help="train across the parts of a 'graphfeed partition' folder (--nproc: a "
                        "multiple of its parts; under torchrun WORLD_SIZE is)")
    p.add_argument("--remote-cache", type=_args.int_range(0, 2**62), default=D.remote_cache,
                   metavar="ROWS",
                   help="with --partitions: remote feature rows each rank caches, the most "
                        "sampled in epoch 0 [%(default)s]")
    p.add_argument("--tune", type=_args.duration, default=D.tune, metavar="TIME",
                   help="search a few settings within TIME (600, 90s, 10m, 1.5h): the options "
                        "as given, then dropout 0.5 with weight decay 0, lr 0.01, the other of "
                        "sage and gcn, hidden 256, one more layer with residuals (dropout 0.5, weight decay 0), each "
                        "a full run (--runs seeds, early stopping); prints the table and keeps "
                        "the setting with the best validation main metric, run again as asked "
                        "(baselines, --save, --predict, --log, --json: the winner's). An option "
                        "you set away from its default is kept: the settings changing it are "
                        "left out. Not with --resume, --partitions or --nproc > 1 [off]")
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
        steps_per_epoch=args.steps_per_epoch,
        hidden=args.hidden,
        heads=args.heads,
        norm=args.norm,
        residual=args.residual,
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
        inputs=args.inputs,
        precision=args.precision,
        tune=args.tune,
    )


def _input_names(text: str) -> tuple:
    names = tuple(n.strip() for n in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"a comma-separated list of feature names, got "
                                         f"{text!r}")
    return names


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
    if cfg.runs == 1 and result.interrupted:  # cut short: the summary is of the epochs run
        print(f"graphfeed train: interrupted {result.interrupted}", file=sys.stderr)
        return 130
    return 0
