"""Argument types shared by the subcommands (argparse turns their errors into one-line errors).

They check syntax and range, so a bad value never reaches the code that would allocate or crash
on it; the same bounds are enforced again by ``TrainConfig.validate`` for Python callers.
"""

from __future__ import annotations

import argparse
import math


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def _int_items(text: str, what: str) -> list[int]:
    """The integers of a comma-separated list; an empty item (``"1,,2"``, a trailing comma) is
    an error, never dropped."""
    items = text.replace(" ", "").split(",")
    if text.strip() == "" or any(t == "" for t in items):
        raise argparse.ArgumentTypeError(
            f"{what} must be comma-separated integers with no empty item; got {text!r}")
    try:
        return [int(t) for t in items]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be comma-separated integers, got {text!r}") from None


def positive_int_list(what: str):
    """An argparse type: comma-separated integers ``>= 1`` (``"1,2,4"``), in the order given;
    ``what`` names them in errors."""

    def parse(text: str) -> list[int]:
        vals = _int_items(text, what)
        if any(v < 1 for v in vals):
            raise argparse.ArgumentTypeError(f"{what} must be integers >= 1, got {text!r}")
        return vals

    parse.__name__ = what
    return parse


def fanouts(text: str) -> list[int]:
    """``"15,10,5"``: one integer per layer, each in ``[1, MAX_FANOUT]`` or ``-1`` (every
    neighbour). An empty item (``"15,,5"``) is an error, not a dropped layer."""
    vals = _int_items(text, "fanouts (one per layer)")
    from ..errors import GraphfeedError
    from ..trainer.config import check_fanouts

    try:
        return list(check_fanouts("fanouts", vals))
    except GraphfeedError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def int_range(lo: int, hi: int):
    """An argparse type: an integer in ``[lo, hi]``."""

    def parse(text: str) -> int:
        v = _int(text, "an integer")
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"expected an integer between {lo:,} and {hi:,}, got {text!r}")
        return v

    parse.__name__ = f"integer in [{lo}, {hi}]"
    return parse


def positive_int(text: str) -> int:
    v = _int(text, "a positive integer")
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return v


def positive_float(text: str) -> float:
    try:
        v = _float(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return v


def nonnegative_float(text: str) -> float:
    v = _float(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return v


def scale(text: str) -> float:
    """A number in ``(0, 1]`` (the fraction of a built-in dataset to generate)."""
    v = _float(text)
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return v


def fraction(text: str) -> float:
    """A number in ``[0, 1)`` (a dropout probability)."""
    v = _float(text)
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}")
    return v


#: a duration's unit suffixes, in seconds
_SECONDS = {"s": 1, "m": 60, "h": 3600}


def duration(text: str) -> float:
    """Seconds from '600', '90s', '10m', '1.5h': a positive number, seconds unless suffixed."""
    t = text.strip().lower()
    unit = _SECONDS.get(t[-1:], None)
    try:
        v = _float(t[:-1] if unit else t) * (unit or 1)
    except argparse.ArgumentTypeError:
        v = None
    if v is None or not v > 0:
        raise argparse.ArgumentTypeError(f"expected a positive duration such as 600, 90s, 10m "
                                         f"or 1.5h, got {text!r}")
    return v


def size(text: str) -> int:
    """Bytes from '0', '512MB', '2GiB', '1.5G' ..."""
    from .._units import parse_size
    from ..errors import GraphfeedError

    try:
        return parse_size(text)
    except (ValueError, GraphfeedError, OverflowError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def size_range(lo: int, hi: int, what: str, limits: str):
    """An argparse type: a size (as :func:`size`) in ``[lo, hi]`` bytes; ``limits`` says the
    bounds in words for the error."""

    def parse(text: str) -> int:
        v = size(text)
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{what} must be between {limits}, got {text!r}")
        return v

    return parse


#: how every size flag reads its value (one convention, :func:`graphfeed._units.parse_size`)
SIZE_UNITS = "kB/MB/GB are powers of 1000, KiB/MiB/GiB powers of 1024"


def builtin_datasets(*, plain_node: bool = False) -> str:
    """The built-in dataset names for a ``--dataset`` help, comma-separated, read from where they
    are registered (``graphfeed.datasets.synthetic.SPECS``); ``plain_node``: only those of one node
    type with a node-classification task."""
    from ..datasets import synthetic

    return ", ".join(synthetic.plain_node_names() if plain_node else synthetic.SPECS)


def shown(value) -> str:
    """A default as the option takes it on the command line: ``10,10`` for a list."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def feature_backends() -> list[str]:
    """``--features`` choices: the feature backend registry's names."""
    from ..features.registry import BACKENDS

    return list(BACKENDS.names())


def placement_modes() -> list[str]:
    """``--mode`` choices: ``auto`` and the placement mode registry's names."""
    from ..placement.modes import AUTO, MODES

    return [AUTO, *MODES.names()]


def cache_policies() -> list[str]:
    """``--cache-policy`` choices."""
    from ..features.registry import POLICIES
    from ..features._policies import AUTO_POLICY

    return [AUTO_POLICY, *sorted(POLICIES)]


def add_data_source(p: argparse.ArgumentParser, datasets: str, folder_files: str) -> None:
    """A bench's data: ``--dataset`` (one of ``datasets``, default medium) or ``--graph DIR``
    (a prepared dataset folder, or a folder holding ``folder_files``)."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--dataset", default=None, help=f"built-in dataset ({datasets}) [medium]")
    src.add_argument("--graph", default=None, metavar="DIR",
                     help=f"prepared dataset folder, or a folder with {folder_files}")


def add_batch_arguments(p: argparse.ArgumentParser, *, seeds: str, batches: int, timed: str,
                        warmup: str) -> None:
    """A bench's batches: ``--fanouts``, ``--batch-size`` (``seeds`` per batch), ``--batches``
    (``timed``, default ``batches``) and ``--warmup`` (``warmup``, default 5)."""
    p.add_argument("--fanouts", type=fanouts, default=[15, 10, 5],
                   help="neighbours per layer, input layer first, -1 = all [15,10,5]")
    p.add_argument("--batch-size", type=positive_int, default=1024,
                   help=f"{seeds} per batch [%(default)s]")
    p.add_argument("--batches", type=positive_int, default=batches,
                   help=f"{timed} [%(default)s]")
    p.add_argument("--warmup", type=int, default=5, help=f"{warmup} [%(default)s]")


def add_sampler_arguments(p: argparse.ArgumentParser) -> None:
    """``--sampler`` and the options of each sampling method (``graphfeed train`` and
    ``graphfeed bench sample``); :func:`sampler_options` turns them into keywords."""
    from ..sampling.method import KINDS, LABOR_VARIATES, TEMPORAL_STRATEGIES

    g = p.add_argument_group("sampling method")
    g.add_argument("--sampler", default="uniform", choices=KINDS,
                   help="how neighbours are picked: uniform, weighted (by edge weight), labor "
                        "(LABOR-0, fewer distinct nodes), temporal (only edges up to each seed's "
                        "time) [uniform]")
    g.add_argument("--weight-feature", default=None, metavar="NAME",
                   help="weighted: the edge feature holding the weights [the graph's weights]")
    g.add_argument("--layer-dependency", action="store_true",
                   help="labor: the same random variates in every layer")
    g.add_argument("--labor-variates", default="rotated", choices=LABOR_VARIATES,
                   help="labor: rotated (a fixed per-node base shifted per batch, O(log degree "
                        "+ fanout)) or iid (fresh per batch, LABOR-0, O(degree)) [rotated]")
    g.add_argument("--temporal-strategy", default="uniform", choices=TEMPORAL_STRATEGIES,
                   help="temporal: a uniform subset of the eligible edges, or the most recent [uniform]")
    g.add_argument("--strict-time", action="store_true",
                   help="temporal: only edges strictly earlier than the seed's time")
    g.add_argument("--node-times", default=None, metavar="NAME",
                   help="temporal: the node feature holding node times [timestamp, if any]")
    g.add_argument("--edge-times", default=None, metavar="NAME",
                   help="temporal: the edge feature holding edge times [timestamp, if any]")


def sampler_options(args) -> dict:
    """The ``TrainConfig`` / ``bench_sample`` keywords of :func:`add_sampler_arguments`."""
    return dict(sampler=args.sampler, weight_feature=args.weight_feature,
                layer_dependency=args.layer_dependency, labor_variates=args.labor_variates,
                temporal_strategy=args.temporal_strategy,
                strict_time=args.strict_time, node_times=args.node_times,
                edge_times=args.edge_times)
