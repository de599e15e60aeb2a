"""One size convention on every command: ``2GB`` is 2*10**9 bytes and ``2GiB`` 2*2**30, whichever
command reads it, and the help says so (``train --cache-size 2GB`` and ``inspect --cache-size 2GB``
once meant different sizes)."""

from __future__ import annotations

import pytest

from graphfeed.cli.main import build_parser

COMMANDS = [
    ["train", "--cache-size"],
    ["inspect", "some/folder", "--cache-size"],
    ["bench", "sample", "--cache-size"],
    ["bench", "memory", "--cache-size"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("text,expected", [("2GB", 2 * 10**9), ("2GiB", 2 * 2**30),
                                           ("512MB", 512 * 10**6), ("1.5 kB", 1500)])
def test_every_command_reads_a_size_the_same_way(argv, text, expected):
    args = build_parser().parse_args([*argv, text])
    assert args.cache_size == expected


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_the_help_says_which_unit_is_which(argv, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*[a for a in argv if not a.startswith("--")], "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "powers of 1000" in out and "powers of 1024" in out


def test_choices_come_from_the_registries():
    from graphfeed.features.registry import BACKENDS
    from graphfeed.placement.modes import MODES

    p = build_parser()
    for backend in BACKENDS.names():
        assert p.parse_args(["train", "--features", backend]).features == backend
    for mode in ("auto", *MODES.names()):
        assert p.parse_args(["train", "--mode", mode]).mode == mode
        assert p.parse_args(["bench", "sample", "--mode", mode]).mode == mode
    with pytest.raises(SystemExit):
        p.parse_args(["train", "--features", "s3"])
