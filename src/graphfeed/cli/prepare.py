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

from . import _args, _output

DEFAULTS = (
    "Defaults: edges are kept only in their stored direction (src -> dst; --undirected adds the "
    "reverse of every edge); self loops and repeated edges are kept (--drop-self-loops, --dedupe); "
    "the generic format splits the labelled nodes 80/10/10 at random with seed 0 (--split, "
    "--train/--valid/--test); the other formats use their dataset's standard split."
)


# --------------------------------------------------------------------------- argument types
def feature_dtype(text: str) -> str:
    from ..datasets.schema import FEATURE_DTYPES

    if text not in FEATURE_DTYPES:
        raise argparse.ArgumentTypeError(f"unknown dtype {text!r}; choose one of {', '.join(FEATURE_DTYPES)}")
    return text


def split_rule(text: str) -> str:
    from ..datasets.importers import SplitRule
    from ..errors import GraphfeedError

    try:
        SplitRule.parse(text)
    except GraphfeedError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


# --------------------------------------------------------------------------- parser
def _common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("graph and output options")
    g.add_argument("--undirected", action="store_true",
                   help="add the reverse of every edge (default: keep only the stored direction src -> dst)")
    g.add_argument("--drop-self-loops", action="store_true", help="remove edges v -> v (default: keep them)")
    g.add_argument("--dedupe", action="store_true", help="remove repeated (src, dst) pairs, keeping the first")
    g.add_argument("--split", type=split_rule,
                   help="seeded split of labelled nodes: fractions 0.8,0.1,0.1 or per-class:20,500,1000 "
                        "(default for generic: 0.8,0.1,0.1)")
    from ..datasets.schema import MAX_NUM_CLASSES

    g.add_argument("--seed", type=_args.int_range(0, 2**63 - 1), default=0,
                   help="seed of --split (default 0)")
    g.add_argument("--num-classes", type=_args.int_range(1, MAX_NUM_CLASSES),
                   help="number of classes (default: max label + 1)")
    g.add_argument("--name", help="dataset name (default: from the input)")
    g.add_argument("--feature-dtype", type=feature_dtype,
                   help="store features as this dtype (e.g. float16, float32; default: as given, "
                        "float32 for text); a value that does not fit is an error")
    g.add_argument("--memory-budget", default=2**31, type=_args.size_range(2**20, 2**50, "--memory-budget", "1MiB and 1PiB"),
                   help="bytes of the indices file mapped at once; bigger graphs build in windows (default 2GiB)")
    g.add_argument("--block-size", default=2**23, type=_args.size_range(1, 2**30, "--block-size", "1B and 1GiB"),
                   help="bytes read per chunk, 1 B to 1 GiB (default 8MiB)")
    g.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")


def add_parser(subparsers) -> argparse.ArgumentParser:
    from ..datasets.importers import IMPORTERS  # light: no numpy-heavy work at import

    p = subparsers.add_parser(
        "prepare",
        help="convert raw graph data (edge lists, OGB, Cora/CiteSeer files) into a dataset folder",
        description="Convert raw graph data into a graphfeed dataset folder (streamed, atomic, validated). "
                    + DEFAULTS,
    )
    sub = p.add_subparsers(dest="format", metavar="FORMAT")
    sub.required = True
    for fmt, modname in IMPORTERS.items():
        mod = __import__(modname, fromlist=["add_arguments"])
        help_ = mod.HELP[fmt] if isinstance(mod.HELP, dict) else mod.HELP
        sp = sub.add_parser(fmt, help=help_,
                            description=(mod.__doc__ or "").strip().split("\n\n")[0] + "\n\n" + DEFAULTS)
        if fmt in ("cora-text", "planetoid-npz", "csr-npz"):
            mod.add_arguments(sp, fmt)
        else:
            mod.add_arguments(sp)
        _common(sp)
        sp.set_defaults(_importer=modname)
    return p


# --------------------------------------------------------------------------- errors
def run(args) -> int:
    import importlib

    from ..datasets.build import Progress

    mod = importlib.import_module(args._importer)
    common = dict(
        undirected=args.undirected,
        drop_self_loops=args.drop_self_loops,
        dedupe=args.dedupe,
        num_classes=args.num_classes,
        overwrite=args.overwrite,
        memory_budget=args.memory_budget,
        feature_dtype=args.feature_dtype,
        progress=Progress(args.progress),
        block_bytes=args.block_size,
    )
    if args.name:
        common["name"] = args.name
    with _output.one_line_errors("prepare", args.out):
        report = mod.run(args, common)
    return _output.write_stdout("prepare", report.summary() + "\n")
