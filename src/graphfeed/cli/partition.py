"""``graphfeed partition DATASET OUT --parts P [--method metis|random]``: split a dataset into
parts owning contiguous id ranges, one folder per part plus a partition book (for
``graphfeed train --partitions OUT``)."""

from __future__ import annotations

import argparse
import json
import sys

from ._args import builtin_datasets, int_range, positive_int


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "partition",
        help="split a dataset into parts for training across machines (--partitions)",
        description="Relabel a dataset's nodes so each part owns a contiguous id range (METIS "
                    "with balanced train ids, or random) and write one folder per part (its "
                    "nodes' in-edges, features, labels and split ids) plus the partition book. "
                    "Reports the edge cut and the balance.",
    )
    p.add_argument("dataset", metavar="DATASET",
                   help=f"built-in name ({builtin_datasets(plain_node=True)}) or prepared dataset "
                        f"folder")
    p.add_argument("out", metavar="OUT", help="output folder (written atomically)")
    p.add_argument("--parts", type=positive_int, required=True, help="number of parts")
    p.add_argument("--method", choices=("metis", "random"), default="metis",
                   help="metis (needs pymetis: pip install 'graphfeed[partition]') or random "
                        "[%(default)s]")
    p.add_argument("--seed", type=int_range(0, 2**63 - 1), default=0,
                   help="seed of the assignment, >= 0 [%(default)s]")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it is a partition")
    p.add_argument("--data-root", default=None, help="where built-in datasets are cached")
    p.add_argument("--json", action="store_true", help="print the book as one JSON object")
    return p


def run(args) -> int:
    from ..datasets import open_dataset
    from ..partition import describe, partition_dataset
    from ._output import one_line_errors, write_stdout

    with one_line_errors("partition", args.out):
        ds = open_dataset(args.dataset, args.data_root, verbose=True)
        book = partition_dataset(
            ds, args.out, args.parts, method=args.method, seed=args.seed,
            overwrite=args.overwrite,
            log=lambda m: print(f"graphfeed partition: {m}", file=sys.stderr, flush=True),
        )
    if args.json:
        return write_stdout("partition", json.dumps(book.to_json()) + "\n")
    return write_stdout("partition", f"wrote {args.out}: {describe(book)}\n")
