"""``graphfeed prepare FORMAT ... OUT``: convert raw graph data into a dataset folder.

Examples::

    graphfeed prepare generic --edges e.csv.gz --features x.npy --labels y.npy \\
        --split 0.8,0.1,0.1 --undirected --dedupe data/mygraph
    graphfeed prepare ogb ~/ogb/ogbn_arxiv data/arxiv --undirected
    graphfeed prepare cora-text ../shared/datasets/cora/text data/cora
    graphfeed prepare planetoid-npz ../shared/datasets/citeseer/derived/citeseer_planetoid_derived.npz data/citeseer
"""

from __future__ import annotations

import argparse
import sys


def _common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("graph and output options")
    g.add_argument("--undirected", action="store_true", help="add the reverse of every edge")
    g.add_argument("--drop-self-loops", action="store_true", help="remove edges v -> v")
    g.add_argument("--dedupe", action="store_true", help="remove repeated (src, dst) pairs")
    g.add_argument("--split", help="seeded split of labelled nodes: fractions 0.8,0.1,0.1 or per-class:20,500,1000")
    g.add_argument("--seed", type=int, default=0, help="seed of --split (default 0)")
    g.add_argument("--num-classes", type=int, help="number of classes (default: max label + 1)")
    g.add_argument("--name", help="dataset name (default: from the input)")
    g.add_argument("--feature-dtype", help="store features as this dtype (e.g. float16, float32)")
    g.add_argument("--memory-budget", default="2GiB",
                   help="bytes of the indices file mapped at once; bigger graphs build in windows (default 2GiB)")
    g.add_argument("--block-size", default="8MiB", help="bytes read per chunk (default 8MiB)")
    g.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")


def add_parser(subparsers) -> argparse.ArgumentParser:
    from ..datasets.importers import IMPORTERS  # light: no numpy-heavy work at import

    p = subparsers.add_parser(
        "prepare",
        help="convert raw graph data (edge lists, OGB, Cora/CiteSeer files) into a dataset folder",
        description="Convert raw graph data into a graphfeed dataset folder (streamed, atomic, validated).",
    )
    sub = p.add_subparsers(dest="format", metavar="FORMAT")
    sub.required = True
    for fmt, modname in IMPORTERS.items():
        mod = __import__(modname, fromlist=["add_arguments"])
        help_ = mod.HELP[fmt] if isinstance(mod.HELP, dict) else mod.HELP
        sp = sub.add_parser(fmt, help=help_, description=(mod.__doc__ or "").strip().split("\n\n")[0])
        if fmt in ("cora-text", "planetoid-npz", "csr-npz"):
            mod.add_arguments(sp, fmt)
        else:
            mod.add_arguments(sp)
        _common(sp)
        sp.set_defaults(_importer=modname)
    return p


def run(args) -> int:
    import importlib

    from ..datasets.build import Progress, parse_bytes

    mod = importlib.import_module(args._importer)
    common = dict(
        undirected=args.undirected,
        drop_self_loops=args.drop_self_loops,
        dedupe=args.dedupe,
        num_classes=args.num_classes,
        overwrite=args.overwrite,
        memory_budget=parse_bytes(args.memory_budget),
        feature_dtype=args.feature_dtype,
        progress=Progress(args.progress),
        block_bytes=parse_bytes(args.block_size),
    )
    if args.name:
        common["name"] = args.name
    report = mod.run(args, common)
    print(report.summary(), file=sys.stdout)
    return 0
