"""``graphfeed inspect PATH``: counts, degree statistics, class balance, feature sizes and a memory
estimate."""

from __future__ import annotations

import argparse
import json

from ._args import SIZE_UNITS, positive_int, size


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "inspect",
        help="describe a prepared dataset: counts, degrees, class balance, features, memory per placement",
        description="Describe a prepared dataset folder and estimate its memory per placement.",
    )
    p.add_argument("path", metavar="PATH",
                   help="prepared dataset folder, or a built-in dataset name (generated on first "
                        "use, as train does)")
    p.add_argument("--data-root", default=None,
                   help="cache folder for built-in datasets [$GRAPHFEED_HOME/datasets, else "
                        "~/.cache/graphfeed/datasets]")
    p.add_argument("--nproc", type=positive_int, default=None,
                   help="processes per machine for the second estimate (default: CPU count, at least 2)")
    p.add_argument("--cache-size", default=0, type=size,
                   help=f"feature cache per process for the disk placement, e.g. 2GB ({SIZE_UNITS}) "
                        f"[%(default)s]")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--no-validate", action="store_true", help="skip the O(N + E) content checks")
    return p


def describe(path, *, nproc: int, cache_bytes: int, validate=True) -> dict:
    """The facts ``inspect`` prints, as a dict (also used by tests)."""
    return _describe(path, nproc=nproc, cache_bytes=cache_bytes, validate=validate)[0]


def _describe(path, *, nproc: int, cache_bytes: int, validate=True) -> tuple:
    """``(facts, memory estimates for 1 and nproc processes)``; the folder is opened once (its
    arrays memory-mapped, without torch) and every fact is read from that one opening."""
    import numpy as np

    from ..datasets.estimate import class_balance
    from ..placement.estimate import estimate_memory
    from ..datasets.schema import split_role
    from ..datasets.validate import load_folder
    from ..errors import DatasetError, GraphfeedError

    arrays = load_folder(path, mmap=True, full=validate)
    meta = arrays.metadata
    deg = np.diff(arrays.indptr)
    if deg.size:
        stats = {
            "min": int(deg.min()), "mean": float(deg.mean()), "median": float(np.median(deg)),
            "p99": float(np.percentile(deg, 99)), "max": int(deg.max()),
            "isolated": int(np.count_nonzero(deg == 0)),
        }
    else:
        stats = {}
    task = meta.task
    balance = {}
    if task.type == "link_prediction":  # no labels: the splits are the labelled edges
        task_info = {"type": task.type, "target": None, "num_classes": None, "labelled": None,
                     **link_summary(arrays)}
    else:
        y = arrays.node_features[task.target]  # a memory map: counted block by block
        if "train" in arrays.splits:
            try:
                balance["train"] = class_balance(y, task.num_classes,
                                                 ids=arrays.splits["train"][0],
                                                 class_names=task.class_names)
            except GraphfeedError as e:  # ids out of range: only when the content checks were skipped
                where = arrays.paths[split_role("train", 0, meta.splits["train"].num_sets)]
                raise DatasetError(f"{where}: {e}") from None
        balance["labelled"] = class_balance(y, task.num_classes, class_names=task.class_names)
        task_info = {"type": task.type, "target": task.target, "num_classes": task.num_classes,
                     "labelled": balance["labelled"].labelled}
    estimates = [estimate_memory(arrays, nproc=k, cache_bytes=cache_bytes) for k in sorted({1, nproc})]
    info = {
        "path": str(path), "name": meta.name, "format_version": meta.format_version,
        "num_nodes": meta.num_nodes, "num_edges": meta.graph.num_edges,
        "undirected": meta.graph.undirected, "index_dtype": str(arrays.indices.dtype),
        "in_degree": stats,
        "types": types_summary(arrays),
        "task": task_info,
        "splits": {k: v.size for k, v in meta.splits.items()},
        "split_sets": meta.num_split_sets,
        "class_names": list(meta.task.class_names) if meta.task.class_names is not None else None,
        "features": estimates[0].feature_sizes,
        "class_balance": {k: b.to_json() for k, b in balance.items()},
        "warnings": balance_warnings(balance) if balance else [],
        "estimates": [e.to_json() for e in estimates],
    }
    return info, estimates


def _relation_name(edge_type) -> str:
    return ".".join(edge_type)


def types_summary(arrays) -> "dict | None":
    """Node and edge types of a dataset with a ``hetero`` section (``None`` without one): nodes
    per type, edges per relation (one O(E) pass over the relation ids; ``None`` when they hold
    ids outside the relations, which only a folder opened without the content checks can) and
    the target type of node classification."""
    import numpy as np

    h = arrays.metadata.hetero
    if h is None:
        return None
    et = arrays.hetero["edge_type"]
    r = len(h.edge_types)
    counts = None
    if et.size == 0 or (int(et.min()) >= 0 and int(et.max()) < r):
        counts = np.bincount(et, minlength=r).tolist() if et.size else [0] * r
    return {"node_types": dict(zip(h.node_types, (int(c) for c in h.node_counts))),
            "edge_types": {_relation_name(e): (None if counts is None else int(counts[i]))
                           for i, e in enumerate(h.edge_types)},
            "target_type": h.target_type}


def link_summary(arrays) -> dict:
    """A link-prediction task's pairs per split (``pairs``), fixed negatives per pair of the
    splits that have them (``negatives_per_pair``; the others draw negatives while training)
    and, for typed splits, the same per predicted relation (``relations``; else ``None``).
    Read from the metadata and the ``.npy`` headers only."""
    from ..datasets._link_checks import NEG_SUFFIX, parse_typed_split_name

    meta = arrays.metadata
    ets = meta.hetero.edge_types if meta.hetero is not None else None
    pairs: dict = {}
    negatives: dict = {}
    relations: dict = {}
    for name, spec in meta.splits.items():
        split, rel = name, None
        if ets is not None:
            split, et = parse_typed_split_name(name, ets)  # the metadata check made it one
            rel = relations.setdefault(_relation_name(et),
                                       {"pairs": {}, "negatives_per_pair": {}})
        if spec.kind == "negative_dst":
            k = int(arrays.splits[name][0].shape[1])
            negatives[split[: -len(NEG_SUFFIX)]] = k
            if rel is not None:
                rel["negatives_per_pair"][split[: -len(NEG_SUFFIX)]] = k
        else:
            pairs[split] = pairs.get(split, 0) + spec.size
            if rel is not None:
                rel["pairs"][split] = spec.size
    return {"pairs": pairs, "negatives_per_pair": negatives,
            "relations": relations if ets is not None else None}


_POPULATION = {"train": "training split", "labelled": "labelled nodes"}


def balance_warnings(balance: dict) -> list:
    """One line per problem: a majority class above ``IMBALANCE_WARN_SHARE`` (where plain accuracy
    misleads), labels outside ``0..num_classes-1`` (seen only with ``--no-validate``)."""
    from ..datasets.estimate import IMBALANCE_WARN_SHARE

    out = []
    worst = max(balance, key=lambda k: balance[k].majority_share)
    b = balance[worst]
    if b.imbalanced():
        out.append(
            f"class {b.name(b.majority_class)!r} holds {b.majority_share:.1%} of the {_POPULATION[worst]} "
            f"(more than {IMBALANCE_WARN_SHARE:.0%}): always answering it scores that accuracy, so watch "
            f"ROC-AUC (binary) or macro-F1 instead of plain accuracy"
        )
    every = balance["labelled"]
    if every.out_of_range:
        out.append(f"{every.out_of_range:,} labels are >= num_classes ({len(every.counts)}); "
                   f"run without --no-validate for details")
    return out


def _balance_lines(info: dict) -> list:
    """The class balance as table rows: every class when there are at most 10, else the 10
    largest among the labelled nodes."""
    bal = info["class_balance"]
    pops = list(bal)
    counts_all = bal["labelled"]["counts"]
    k = len(counts_all)
    order = range(k) if k <= 10 else sorted(range(k), key=lambda c: -counts_all[c])[:10]
    names = info["class_names"]
    label = [(names[c] if names else str(c)) for c in order]
    label = [x if len(x) <= 24 else x[:23] + "~" for x in label]
    heads = [f"{_POPULATION[p]} ({bal[p]['labelled']:,})" for p in pops]
    rows = [[f"{bal[p]['counts'][c]:,} {bal[p]['shares'][c]:>6.1%}" for p in pops] for c in order]
    widths = [max(len(x) for x in col) for col in zip(heads, *rows)]
    w = max(len(x) for x in label + ["class"])
    lines = ["  class balance"]
    for name, row in zip(["class", *label], [heads, *rows]):
        lines.append(f"    {name:<{w}}" + "".join(f"  {x:>{cw}}" for x, cw in zip(row, widths)))
    if k > 10:
        lines.append(f"    ... and {k - 10:,} smaller classes")
    return lines


def _types_lines(types) -> list:
    if types is None:
        return []
    nodes = ", ".join(f"{t} {c:,}" for t, c in types["node_types"].items())
    edges = ", ".join(f"{r} {c:,}" if c is not None else r for r, c in types["edge_types"].items())
    target = f" (target type {types['target_type']!r})" if types["target_type"] else ""
    return [f"  node types {nodes}{target}", f"  edge types {edges}"]


def _pairs_text(pairs: dict, negatives: dict) -> str:
    out = ", ".join(f"{s} {p:,}" for s, p in pairs.items())
    neg = ", ".join(f"{s} {k}" for s, k in negatives.items())
    return out + (f"; fixed negatives per pair: {neg}" if neg else "; negatives drawn while "
                  "training")


def _link_lines(task: dict) -> list:
    rels = task["relations"]
    if rels is None:
        return [f"  task link_prediction: pairs "
                f"{_pairs_text(task['pairs'], task['negatives_per_pair'])}"]
    lines = [f"  task link_prediction over {len(rels)} relation{'s' if len(rels) != 1 else ''}"]
    for r, v in rels.items():
        lines.append(f"    {r}: pairs {_pairs_text(v['pairs'], v['negatives_per_pair'])}")
    return lines


def run(args) -> int:
    import io
    import os

    from .._units import format_bytes
    from ._output import one_line_errors, write_stdout

    nproc = args.nproc if args.nproc is not None else max(2, os.cpu_count() or 2)
    cache = args.cache_size
    with one_line_errors("inspect", args.path):
        from ..datasets.open import dataset_path

        path = dataset_path(args.path, args.data_root, verbose=True)
        info, estimates = _describe(path, nproc=nproc, cache_bytes=cache, validate=not args.no_validate)
        if args.json:
            return write_stdout("inspect", json.dumps(info, indent=2) + "\n")
        out = io.StringIO()
        d = info["in_degree"]
        out.write(f"{info['name']}  ({info['path']}, format_version {info['format_version']})\n")
        out.write(f"  nodes {info['num_nodes']:,}   edges {info['num_edges']:,}   "
                  f"({'undirected' if info['undirected'] else 'directed'}, {info['index_dtype']} indices)\n")
        if d:
            out.write(f"  in-degree  min {d['min']}  mean {d['mean']:.2f}  median {d['median']:.0f}  "
                      f"p99 {d['p99']:.0f}  max {d['max']}  isolated {d['isolated']:,}\n")
        out.write("".join(line + "\n" for line in _types_lines(info["types"])))
        t = info["task"]
        if t["type"] == "link_prediction":
            out.write("".join(line + "\n" for line in _link_lines(t)))
        else:
            out.write(f"  task {t['type']}: target {t['target']!r}, {t['num_classes']} classes, "
                      f"{t['labelled']:,} labelled nodes\n")
            if info["class_names"] and len(info["class_names"]) > 10:  # else the balance table names them
                names = info["class_names"]
                out.write(f"  class names {', '.join(names[:8])}{', ...' if len(names) > 8 else ''}\n")
            out.write("".join(line + "\n" for line in _balance_lines(info)))
            out.write("".join(f"  warning: {w}\n" for w in info["warnings"]))
            sets = f" (split set 0 of {info['split_sets']})" if info["split_sets"] > 1 else ""
            out.write("  splits " + ", ".join(f"{k} {v:,}" for k, v in info["splits"].items())
                      + sets + "\n")
        out.write("  node features\n")
        for k, f in info["features"].items():
            out.write(f"    {k:<12} {f['dtype']:<8} {str(tuple(f['shape'])):<20} {format_bytes(f['bytes'])}\n")
        for est in estimates:
            k = est.nproc
            out.write(f"\n  memory estimate, {k} process{'es' if k > 1 else ''} per machine "
                      f"(graph {format_bytes(est.graph_bytes)}, features {format_bytes(est.feature_bytes)}):\n")
            out.write("".join("    " + line + "\n" for line in est.table().splitlines()))
    return write_stdout("inspect", out.getvalue())
