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
import os
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Sequence

from . import _args, _output

#: the defaults of the formats that build a node-classification dataset (the link formats say
#: their own in their description)
DEFAULTS = (
    "Defaults: edges are kept only in their stored direction (src -> dst; --undirected adds the "
    "reverse of every edge that the input does not hold already); self loops and repeated edges "
    "are kept (--drop-self-loops, --dedupe); the generic format splits the labelled nodes "
    "80/10/10 at random with seed 0 (--split, --train/--valid/--test); the other formats use "
    "their dataset's standard split."
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
#: which of the shared options a format takes: ``node`` (every one: a node-classification build),
#: ``ogbl`` and ``link-split`` (link prediction: the options that shape node-classification data
#: or tune the streamed build do not apply, so they are not offered), ``synthetic`` (a generated
#: dataset: only --overwrite and --progress)
COMMON_KINDS = ("node", "graphbolt", "ogbl", "link-split", "synthetic")


def _common(p: argparse.ArgumentParser, kind: str) -> None:
    assert kind in COMMON_KINDS, kind
    node = kind in ("node", "graphbolt")  # graphbolt: the node options but its own splits
    g = p.add_argument_group("graph and output options")
    if kind == "synthetic":
        g.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
        g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bar on stderr (default: when stderr is a terminal)")
        return
    if node:
        g.add_argument("--undirected", action="store_true",
                       help="add the reverse of every edge, unless the input holds it already (each "
                            "directed edge is stored once; default: keep only the stored direction "
                            "src -> dst)")
        g.add_argument("--drop-self-loops", action="store_true",
                       help="remove edges v -> v (default: keep them)")
        g.add_argument("--dedupe", action="store_true",
                       help="remove repeated (src, dst) pairs, keeping the first")
    if kind == "node":
        g.add_argument("--split", type=split_rule,
                       help="seeded split of labelled nodes: fractions 0.8,0.1,0.1 or "
                            "per-class:20,500,1000 (default for generic: 0.8,0.1,0.1)")
    elif kind == "ogbl":
        g.add_argument("--undirected", action="store_true",
                       help="store every edge in both directions (ogbl-collab, ppa and ddi are "
                            "undirected; default: as in the files)")
    elif kind == "link-split":
        g.add_argument("--split", type=split_rule,
                       help="seeded split of the edges: fractions train,valid,test (default "
                            "0.85,0.05,0.1)")
    if kind not in ("ogbl", "graphbolt"):
        g.add_argument("--seed", type=_args.int_range(0, 2**63 - 1), default=0,
                       help="seed of --split [%(default)s]")
    if node:
        from ..datasets.schema import MAX_NUM_CLASSES

        g.add_argument("--num-classes", type=_args.int_range(1, MAX_NUM_CLASSES),
                       help="number of classes (default: max label + 1)")
    g.add_argument("--name", help="dataset name (default: from the input)")
    if node:
        g.add_argument("--feature-dtype", type=feature_dtype,
                       help="store features as this dtype (e.g. float16, bfloat16, float32; "
                            "default: as given, float32 for text); a value that does not fit is "
                            "an error. bfloat16 (2 bytes, float32's range) is stored as its "
                            "uint16 bits and read back as torch.bfloat16")
        g.add_argument("--memory-budget", default=2**31,
                       type=_args.size_range(2**20, 2**50, "--memory-budget", "1MiB and 1PiB"),
                       help=f"bytes of edges (indices and edge values) held in memory at once, "
                            f"at most half the memory available; bigger graphs build in windows "
                            f"({_args.SIZE_UNITS}) [2GiB]")
        g.add_argument("--block-size", default=2**23,
                       type=_args.size_range(1, 2**30, "--block-size", "1B and 1GiB"),
                       help="bytes read per chunk, 1 B to 1 GiB [8MiB]")
    g.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    if node:
        g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bar on stderr (default: when stderr is a terminal)")


def _common_kwargs(args) -> dict:
    """The importer keywords of the shared options this format's subcommand has."""
    from ..datasets.build import Progress

    given = vars(args)
    kw = {k: given[k] for k in ("undirected", "drop_self_loops", "dedupe", "num_classes",
                                "overwrite", "memory_budget", "feature_dtype") if k in given}
    if "progress" in given:
        kw["progress"] = Progress(args.progress)
    if "block_size" in given:
        kw["block_bytes"] = args.block_size
    if given.get("name"):
        kw["name"] = args.name
    return kw


# --------------------------------------------------------------------------- per-format arguments
# Each format: the arguments of its subcommand, and how they become the importer's keywords.
def _generic_arguments(p: argparse.ArgumentParser) -> None:
    from ..datasets.schema import SPLIT_NAMES

    p.add_argument("out", metavar="OUT", help="dataset folder to create")
    p.add_argument("--edges", required=True, help="edge list: .csv/.tsv/.txt[.gz], .npy (E,2)/(2,E), .npz")
    p.add_argument("--features", action="append", default=[], metavar="[NAME=]PATH",
                   help="node features, one row per node: .npy, CSV, sparse .json (feature ids per node) "
                        "or scipy sparse .npz (stored dense); repeat for more (default name: feat)")
    p.add_argument("--labels", required=True,
                   help="labels: .npy, or text with one label per line or id,label (strings become classes)")
    p.add_argument("--label-col", help="label column of a text label table (name or 0-based index)")
    p.add_argument("--id-col", help="node id column of a text label table (name or 0-based index)")
    for k, what in zip(SPLIT_NAMES, ("train", "validation", "test")):
        p.add_argument(f"--{k}", action="append", metavar="PATH",
                       help=f"{what} node ids or boolean mask (.npy, FILE.npz:KEY, one id per line); "
                            f"repeat, or give an (N, k) mask, for k stored splits")
    p.add_argument("--num-nodes", type=int, help="number of nodes (default: feature rows / label count)")
    p.add_argument("--src-col", type=int, default=0,
                   help="column of the source id in a text edge list [%(default)s]")
    p.add_argument("--dst-col", type=int, default=1, help="column of the destination id [%(default)s]")
    p.add_argument("--weight-col", type=int, help="column of an edge weight in a text edge list")
    p.add_argument("--time-col", type=int, help="column of an edge timestamp in a text edge list")
    p.add_argument("--edge-key", help="edges in an .npz: one (2, E) or (E, 2) array, or SRC,DST")
    p.add_argument("--weight-key", help="edge weights in an .npz (1-D, one per edge)")
    p.add_argument("--time-key", help="edge timestamps in an .npz (1-D, one per edge)")
    p.add_argument("--node-times", metavar="PATH",
                   help="node timestamps, one per node (.npy or one per line), stored as the node "
                        "feature 'timestamp' (temporal sampling)")
    p.add_argument("--node-types", metavar="PATH",
                   help="node type of every node, a name or an id (.npy or one per line): writes a "
                        "heterogeneous dataset (ids relabelled by type; node feature orig_id keeps "
                        "the input id)")
    p.add_argument("--edge-type-col", type=int,
                   help="column of the edge type (a name or an id) in a text edge list")
    p.add_argument("--edge-type-key", help="edge types in an .npz (1-D names or ids, one per edge)")
    p.add_argument("--node-type-names", metavar="A,B,...",
                   help="the node types in order (ids index them; other names are refused)")
    p.add_argument("--edge-type-names", metavar="R,S,...",
                   help="the edge types in order (ids index them; each needs edges)")
    p.add_argument("--target-type", metavar="NAME",
                   help="the labelled node type (default: the type of the labelled nodes)")


def _generic_kwargs(args) -> dict:
    from ..datasets.schema import SPLIT_NAMES
    from ..errors import DatasetError

    files = {k: getattr(args, k) for k in SPLIT_NAMES if getattr(args, k)}
    if files and args.split:
        raise DatasetError("give either --train/--valid/--test files or --split, not both")
    return dict(
        out=Path(args.out), edges=args.edges, labels=args.labels, features=parse_features_arg(args.features),
        splits=files or _split(args.split or "0.8,0.1,0.1", args.seed),
        src_col=args.src_col, dst_col=args.dst_col, weight_col=args.weight_col, time_col=args.time_col,
        edge_key=args.edge_key, weight_key=args.weight_key, time_key=args.time_key,
        node_times=args.node_times,
        **{k: getattr(args, k) for k in ("node_types", "edge_type_col", "edge_type_key",
                                         "node_type_names", "edge_type_names", "target_type")
           if getattr(args, k) is not None},
        num_nodes=args.num_nodes, label_col=args.label_col, id_col=args.id_col,
    )


def _ogb_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC", help="OGB dataset folder (holding raw/ and split/)")
    p.add_argument("out", metavar="OUT", help="dataset folder to create")
    p.add_argument("--split-name", help="which split/<name>/ to use (default: the first)")


def _ogb_kwargs(args) -> dict:
    return dict(src=args.src, out=args.out, split_name=args.split_name, split=_split(args.split, args.seed))


def _file_arguments(p: argparse.ArgumentParser, fmt: str) -> None:
    what = "folder with the text files" if fmt == "cora-text" else ".npz file"
    p.add_argument("src", metavar="SRC", help=what)
    p.add_argument("out", metavar="OUT", help="dataset folder to create")
    p.add_argument("--normalize-features", action="store_true",
                   help="divide each feature row by its sum (GCN's preprocessing)")
    if fmt == "cora-text":
        p.add_argument("--label-col", help="label column of *_target.csv (name or 0-based index; "
                                           "default: the column named target/label/class)")


def _file_kwargs(args) -> dict:
    return dict(src=args.src, out=args.out, split=_split(args.split, args.seed),
                normalize_features=args.normalize_features)


def _cora_kwargs(args) -> dict:
    kw = _file_kwargs(args)
    if args.label_col is not None:
        kw["label_col"] = args.label_col
    return kw


def _ogbl_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC", help="OGB link-property folder (holding raw/ and split/)")
    p.add_argument("out", metavar="OUT", help="dataset folder to create")
    p.add_argument("--split-name", help="which split/<name>/ to use (default: the first)")


def _ogbl_kwargs(args) -> dict:
    kw = dict(src=args.src, out=args.out)
    if args.split_name:
        kw["split_name"] = args.split_name
    return kw


def _link_split_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC",
                   help="a prepared dataset folder or a built-in dataset name (its graph and node "
                        "features are kept)")
    p.add_argument("out", metavar="OUT", help="dataset folder to create")
    p.add_argument("--relation", action="append", metavar="REL",
                   help="heterogeneous SRC: split the edges of this relation (a name, or "
                        "src_type:relation:dst_type); repeat for several")
    p.add_argument("--data-root", default=None,
                   help="cache folder for built-in datasets [$GRAPHFEED_HOME/datasets, else "
                        "~/.cache/graphfeed/datasets]")


def _link_split_kwargs(args) -> dict:
    kw = dict(src=args.src, out=args.out, split=_split(args.split, args.seed),
              data_root=args.data_root)
    if args.relation:
        kw["relation"] = args.relation
    return kw


def _synthetic_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("builtin", metavar="NAME", help=f"a built-in dataset: {_args.builtin_datasets()}")
    p.add_argument("out", metavar="OUT", help="dataset folder to create")
    p.add_argument("--scale", type=_args.scale, default=1.0,
                   help="generate this fraction of the nodes (papers: and of the edges and splits; "
                        "0.01 is a 1.1M-node papers in seconds) [1]")
    p.add_argument("--threads", type=_args.positive_int,
                   help="threads generating papers [every core this process may use]")


def _synthetic_kwargs(args) -> dict:
    from ..datasets.synthetic import get_spec

    get_spec(args.builtin)  # an unknown name: the list of built-in datasets
    return dict(name=args.builtin, out=args.out, scale=args.scale, threads=args.threads)


def _graphbolt_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC", help="GraphBolt OnDiskDataset folder (holding metadata.yaml)")
    p.add_argument("out", metavar="OUT", help="dataset folder to create")
    p.add_argument("--task", help="the task to import, by name or position (when there are "
                                  "several) [the first]")


def _graphbolt_kwargs(args) -> dict:
    return dict(src=args.src, out=args.out, task=args.task)


class Format(NamedTuple):
    """One ``graphfeed prepare FORMAT`` subcommand: its own arguments, how the parsed arguments
    become the importer's keywords, which shared options it takes (:data:`COMMON_KINDS`) and its
    ``--help`` description (plain text: it is read in a terminal)."""

    arguments: Callable[[argparse.ArgumentParser], None]
    kwargs: Callable[..., dict]
    common: str
    description: str


#: importer name -> its subcommand
FORMATS = {
    "generic": Format(
        _generic_arguments, _generic_kwargs, "node",
        "An edge list, node features, labels, and split files or a seeded split. Edges: CSV, TSV "
        "or whitespace text (optionally gzipped; optional weight, time and edge type columns), "
        ".npy of shape (E, 2) or (2, E), or .npz (--edge-key, --weight-key, --time-key). "
        "Features: .npy, CSV, sparse JSON (feature ids per node) or a scipy sparse .npz, one row "
        "per node. Labels: .npy or text (one per line, or id,label; string labels become "
        "classes). Splits: --train/--valid/--test id files or boolean masks (repeat a flag, or "
        "give an (N, k) mask, for k stored splits), or a seeded --split 0.8,0.1,0.1. "
        "--node-types writes a heterogeneous dataset."),
    "ogb": Format(
        _ogb_arguments, _ogb_kwargs, "node",
        "The OGB node-property raw layout, as downloaded (e.g. ogbn-arxiv): SRC/raw/edge.csv.gz "
        "(one src,dst per line), raw/node-feat.csv.gz (optional), raw/node-label.csv.gz, "
        "raw/num-node-list.csv.gz (optional) and SRC/split/<name>/{train,valid,test}.csv.gz. OGB "
        "stores ogbn-arxiv's edges in one direction: --undirected adds the reverse edges, as the "
        "OGB leaderboard examples do."),
    "ogb-hetero": Format(
        _ogb_arguments, _ogb_kwargs, "node",
        "The OGB heterogeneous node-property raw layout, as ogbn-mag is downloaded: "
        "SRC/raw/num-node-dict.csv.gz, raw/relations/<src>___<rel>___<dst>/edge.csv.gz, "
        "raw/node-feat/<type>/node-feat.csv.gz, raw/node-label/<type>/node-label.csv.gz and "
        "SRC/split/<name>/<type>/{train,valid,test}.csv.gz. Built in memory. --undirected adds a "
        "reverse relation rev_<rel> for every relation."),
    "cora-text": Format(
        lambda p: _file_arguments(p, "cora-text"), _cora_kwargs, "node",
        "A folder with *_edges.csv (id_1,id_2), *_features.json ({node id: [indices of the "
        "features equal to 1]}) and *_target.csv (id,target), as Cora's text files in "
        "shared/datasets. For Cora the split is the standard Planetoid one."),
    "planetoid-npz": Format(
        lambda p: _file_arguments(p, "planetoid-npz"), _file_kwargs, "node",
        "An .npz with x, y, optional has_label, edge_index (2, E) and train_idx, val_idx, "
        "test_idx (e.g. CiteSeer's derived file in shared/datasets: Planetoid order and split)."),
    "csr-npz": Format(
        lambda p: _file_arguments(p, "csr-npz"), _file_kwargs, "node",
        "The gnn-benchmark .npz of CSR parts (adj_data, adj_indices, adj_indptr, adj_shape, "
        "attr_*, labels); edges follow the adjacency rows (row -> column). It has no standard "
        "split: the default is per-class:20,500,1000 (seeded)."),
    "ogbl": Format(
        _ogbl_arguments, _ogbl_kwargs, "ogbl",
        "The OGB link-property raw layout (e.g. ogbl-collab) -> a link-prediction dataset: "
        "SRC/raw/edge.csv.gz (the training graph, one src,dst per line), raw/num-node-list.csv.gz "
        "and raw/node-feat.csv.gz (optional), and SRC/split/<name>/{train,valid,test}.csv.gz "
        "pairs with optional {valid,test}_neg.csv.gz negatives (one line of destinations per "
        "pair). OGB ships its splits as torch pickles, which graphfeed never loads: export them "
        "to text first. The graph is the training edges plus the valid and test pairs; repeated "
        "edges are dropped; the splits are the files'."),
    "link-split": Format(
        _link_split_arguments, _link_split_kwargs, "link-split",
        "A prepared dataset (or a built-in one) -> a link-prediction dataset over the same graph "
        "and node features, with a seeded random split of its edges: 85/5/10 with seed 0 unless "
        "--split and --seed say otherwise (an undirected graph's edges are split once each). "
        "The graph is taken as stored: prepare SRC with --undirected or --dedupe first if it "
        "needs them. A typed (heterogeneous) SRC needs --relation: the pairs are then those of "
        "the given relations."),
    "synthetic": Format(
        _synthetic_arguments, _synthetic_kwargs, "synthetic",
        "A built-in dataset written into OUT (the commands that take a built-in name generate it "
        "into $GRAPHFEED_HOME instead). papers has ogbn-papers100M's sizes: 111,059,956 nodes, "
        "about 1.616 billion edges, 128 bfloat16 features (35 GB in all), generated straight into "
        "its CSC arrays on every core; --scale 0.01 makes a 1.1M-node version of it."),
    "graphbolt": Format(
        _graphbolt_arguments, _graphbolt_kwargs, "graphbolt",
        "A DGL GraphBolt OnDiskDataset folder: SRC/metadata.yaml naming the graph's nodes and "
        "edges (csv or numpy), its feature_data (numpy, or torch files read with "
        "weights_only=True) and its tasks (train_set, validation_set, test_set; node "
        "classification or link prediction), homogeneous or typed. --task picks one task when "
        "there are several. Defaults: edges are kept only in their stored direction "
        "(--undirected adds the reverse of every edge that the input does not hold already); "
        "self loops and repeated edges are kept (--drop-self-loops, --dedupe); the splits are "
        "the task's own sets (no re-split)."),
}


def _split(text: Optional[str], seed: int):
    """``--split`` as a :class:`~graphfeed.datasets.importers.SplitRule` (``None`` when not given)."""
    from ..datasets.importers import SplitRule

    return SplitRule.parse(text, seed) if text else None


def parse_features_arg(values: Sequence[str]) -> dict:
    """``["x.npy"]`` -> ``{"feat": "x.npy"}``; ``["feat=x.npy", "emb=e.csv"]`` -> by name."""
    out = {}
    for v in values or ():
        if "=" in v and not os.path.exists(v):
            k, p = v.split("=", 1)
        else:
            k, p = ("feat" if "feat" not in out else f"feat{len(out)}"), v
        out[k] = p
    return out


def add_parser(subparsers) -> argparse.ArgumentParser:
    from ..datasets.importers import IMPORTERS

    p = subparsers.add_parser(
        "prepare",
        help="convert raw graph data (edge lists, OGB, Cora/CiteSeer files) into a dataset folder",
        description="Convert raw graph data into a graphfeed dataset folder (streamed, atomic, validated). "
                    + DEFAULTS,
    )
    sub = p.add_subparsers(dest="format", metavar="FORMAT")
    sub.required = True
    assert set(FORMATS) == set(IMPORTERS.names()), "every importer needs its CLI arguments"
    for fmt in IMPORTERS.names():
        f = FORMATS[fmt]
        sp = sub.add_parser(fmt, help=IMPORTERS.entry(fmt).help,
                            description=f.description + (" " + DEFAULTS if f.common == "node" else ""))
        f.arguments(sp)
        _common(sp, f.common)
    return p


# --------------------------------------------------------------------------- errors
def run(args) -> int:
    from ..datasets.importers import IMPORTERS

    with _output.one_line_errors("prepare", args.out):
        report = IMPORTERS.get(args.format)(**FORMATS[args.format].kwargs(args),
                                            **_common_kwargs(args))
    return _output.write_stdout("prepare", report.summary() + "\n")
