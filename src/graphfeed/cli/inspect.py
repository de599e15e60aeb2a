"""``graphfeed inspect PATH``: counts, degree statistics, feature sizes and a memory estimate."""

from __future__ import annotations

import argparse
import json
import sys

from ._args import positive_int, size


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "inspect",
        help="describe a prepared dataset: counts, degrees, features, memory per placement",
        description="Describe a prepared dataset folder and estimate its memory per placement.",
    )
    p.add_argument("path", metavar="PATH", help="prepared dataset folder")
    p.add_argument("--nproc", type=positive_int, default=None,
                   help="processes per machine for the second estimate (default: CPU count, at least 2)")
    p.add_argument("--cache-size", default=0, type=size,
                   help="feature cache per process for the disk placement (e.g. 2GB)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--no-validate", action="store_true", help="skip the O(N + E) content checks")
    return p


def describe(path, *, nproc: int, cache_bytes: int, validate=True) -> dict:
    """The facts ``inspect`` prints, as a dict (also used by tests)."""
    import numpy as np

    from ..datasets.estimate import estimate_memory
    from ..datasets.validate import load_folder

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
    y = np.asarray(arrays.node_features[meta.task.target])
    est = [estimate_memory(path, nproc=k, cache_bytes=cache_bytes).to_json() for k in sorted({1, nproc})]
    return {
        "path": str(path), "name": meta.name, "format_version": meta.format_version,
        "num_nodes": meta.num_nodes, "num_edges": meta.graph.num_edges,
        "undirected": meta.graph.undirected, "index_dtype": str(arrays.indices.dtype),
        "in_degree": stats,
        "task": {"type": meta.task.type, "target": meta.task.target, "num_classes": meta.task.num_classes,
                 "labelled": int(np.count_nonzero(y >= 0))},
        "splits": {k: v.size for k, v in meta.splits.items()},
        "split_sets": meta.num_split_sets,
        "class_names": list(meta.task.class_names) if meta.task.class_names is not None else None,
        "features": {k: {"dtype": str(a.dtype), "shape": list(a.shape), "bytes": int(a.nbytes)}
                     for k, a in arrays.node_features.items()},
        "estimates": est,
    }


def run(args) -> int:
    import io
    import os

    from .._units import format_bytes
    from ..datasets.estimate import estimate_memory
    from .prepare import one_line_errors, write_stdout

    nproc = args.nproc if args.nproc is not None else max(2, os.cpu_count() or 2)
    cache = args.cache_size
    with one_line_errors("inspect", args.path):
        info = describe(args.path, nproc=nproc, cache_bytes=cache, validate=not args.no_validate)
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
        t = info["task"]
        out.write(f"  task {t['type']}: target {t['target']!r}, {t['num_classes']} classes, "
                  f"{t['labelled']:,} labelled nodes\n")
        if info["class_names"]:
            names = info["class_names"]
            out.write(f"  class names {', '.join(names[:8])}{', ...' if len(names) > 8 else ''}\n")
        sets = f" (split set 0 of {info['split_sets']})" if info["split_sets"] > 1 else ""
        out.write("  splits " + ", ".join(f"{k} {v:,}" for k, v in info["splits"].items()) + sets + "\n")
        out.write("  node features\n")
        for k, f in info["features"].items():
            out.write(f"    {k:<12} {f['dtype']:<8} {str(tuple(f['shape'])):<20} {format_bytes(f['bytes'])}\n")
        for k in sorted({1, nproc}):
            est = estimate_memory(args.path, nproc=k, cache_bytes=cache)
            out.write(f"\n  memory estimate, {k} process{'es' if k > 1 else ''} per machine "
                      f"(graph {format_bytes(est.graph_bytes)}, features {format_bytes(est.feature_bytes)}):\n")
            out.write("".join("    " + line + "\n" for line in est.table().splitlines()))
    return write_stdout("inspect", out.getvalue())
