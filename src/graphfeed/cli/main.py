"""Entry point: ``graphfeed <command> ...``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Optional, Sequence

# subcommand -> module with add_parser(subparsers) and run(args) -> int
SUBCOMMANDS = {
    "train": "graphfeed.cli.train",
    "prepare": "graphfeed.cli.prepare",
    "inspect": "graphfeed.cli.inspect",
    "bench": "graphfeed.cli.bench",
    "partition": "graphfeed.cli.partition",
    "report": "graphfeed.cli.report",
}


class _Parser(argparse.ArgumentParser):
    """Bad arguments: one line on stderr and exit status 2 (the usage is in --help)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = _Parser(
        prog="graphfeed",
        description="Feed large graphs to GNN training: sampling, features, pipelines. 'train' "
                    "does node classification and link prediction, on homogeneous and typed "
                    "graphs, in one process, several, or across partitions.",
    )
    parser.add_argument("--version", action="version", version=f"graphfeed {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, modname in SUBCOMMANDS.items():
        mod = importlib.import_module(modname)
        p = mod.add_parser(sub)
        p.set_defaults(_run=mod.run, _parser=p)
    return parser


# options whose value may start with "-" ("--fanouts -1,-1"); argparse would take it for an option
_NEGATIVE_VALUED = ("--fanouts", "--eval-fanouts")


def _join_negative_values(argv: list) -> list:
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in _NEGATIVE_VALUED and i + 1 < len(argv) and argv[i + 1].startswith("-") \
                and argv[i + 1][1:2].isdigit():
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    from ..errors import USER_ERRORS

    parser = build_parser()
    args = parser.parse_args(_join_negative_values(sys.argv[1:] if argv is None else list(argv)))
    try:
        return int(args._run(args) or 0)
    except USER_ERRORS as e:
        print(f"graphfeed {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if os.environ.get("RANK", "0") == "0":  # under torchrun: one line, rank 0's
            print(f"graphfeed {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`graphfeed ... | head`): stop quietly, as a Unix tool killed by
        # SIGPIPE would; point stdout at /dev/null so the interpreter's final flush cannot raise
        from ._output import silence_stdout

        silence_stdout()
        return 141


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
