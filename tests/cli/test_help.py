"""What ``--help`` tells a user first (issue 29), on every subcommand: every option that has a
default states it, as ``[VALUE]`` or ``[VALUE: meaning]`` at the end of its help, and that VALUE,
read by the option itself, is the default; ``train``'s defaults are ``TrainConfig``'s; the
built-in datasets listed are the registered ones; no help shows Sphinx markup; ``graphfeed
--help`` does not call ``train`` node classification only."""

from __future__ import annotations

import argparse
import re

import pytest

from graphfeed.cli.main import build_parser

#: Sphinx roles and literals (``x``, :func:`y`) written for the API docs, not for a terminal
SPHINX = re.compile(r"``|:(func|class|mod|meth|attr|data|obj|ref|exc):`")
#: the stated default at the end of a help: [VALUE] or [VALUE: what it means]
STATED = re.compile(r"\[([^\[\]:]*)(?::[^\[\]]*)?\]\s*$")
#: actions whose default is not a value a user passes
FLAGS = (argparse._HelpAction, argparse._VersionAction, argparse._StoreTrueAction,
         argparse._StoreFalseAction, argparse._SubParsersAction, argparse.BooleanOptionalAction)


def all_parsers():
    """``(command words, parser)`` of graphfeed and every subcommand, at any depth."""
    todo = [((), build_parser())]
    while todo:
        words, p = todo.pop()
        yield words, p
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                todo.extend(((*words, name), sp) for name, sp in a.choices.items())


PARSERS = dict(all_parsers())
IDS = sorted(PARSERS)


def _help_of(parser, action) -> str:
    return parser._get_formatter()._expand_help(action)


def _options_with_defaults(parser):
    for a in parser._actions:
        # no default: None (off, or decided later: said in words), an empty repeatable list
        unset = a.default is None or a.default is argparse.SUPPRESS or (
            isinstance(a.default, list) and not a.default)
        if a.option_strings and not isinstance(a, FLAGS) and not unset:
            yield a


@pytest.mark.parametrize("words", IDS, ids=lambda w: " ".join(w) or "graphfeed")
def test_every_option_with_a_default_states_it(words):
    parser = PARSERS[words]
    missing = []
    for a in _options_with_defaults(parser):
        text = " ".join(_help_of(parser, a).split()) if a.help else ""
        m = STATED.search(text)
        if m is None:
            missing.append(f"{a.option_strings[0]} (default {a.default!r}): {text!r}")
            continue
        stated = m.group(1).strip()
        value = a.type(stated) if a.type is not None else stated
        if value != a.default:
            missing.append(f"{a.option_strings[0]} states [{stated}], its default is {a.default!r}")
    assert missing == [], "\n".join(missing)


def test_the_check_catches_an_unstated_default():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=5, help="passes over the data")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate [0.01]")
    p.add_argument("--seed", type=int, default=0, help="seed")
    p.add_argument("--patience", type=int, default=0, help="evaluations [0: never]")
    bad = [a for a in _options_with_defaults(p)
           if (m := STATED.search(_help_of(p, a))) is None or a.type(m.group(1)) != a.default]
    assert [a.dest for a in bad] == ["epochs", "lr", "seed"]


def test_train_defaults_are_the_train_config_defaults():
    from graphfeed.cli.train import config_from_args
    from graphfeed.training import TrainConfig

    args = build_parser().parse_args(["train"])
    got, want = config_from_args(args).to_dict(), TrainConfig().to_dict()
    assert {k: v for k, v in got.items() if want[k] != v} == {}


def test_the_dataset_helps_list_every_registered_builtin():
    from graphfeed.datasets.synthetic import SPECS, plain_node_names

    assert {"tiny", "small", "medium", "link", "hetero", "hetero-link"} <= set(SPECS)
    assert plain_node_names() == ["tiny", "small", "medium", "papers"]
    every, plain = ", ".join(SPECS), ", ".join(plain_node_names())
    for words, dest, names in ((("train",), "dataset", every),
                               (("bench", "sample"), "dataset", every),
                               (("bench", "features"), "dataset", plain),
                               (("bench", "memory"), "dataset", plain),
                               (("partition",), "dataset", plain)):
        parser = PARSERS[words]
        (a,) = [a for a in parser._actions if a.dest == dest]
        assert f"({names})" in " ".join(_help_of(parser, a).split()), words


@pytest.mark.parametrize("words", IDS, ids=lambda w: " ".join(w) or "graphfeed")
def test_no_help_shows_sphinx_markup(words):
    text = PARSERS[words].format_help()
    assert SPHINX.search(text) is None, SPHINX.search(text).group(0) + " in:\n" + text


def test_the_markup_check_catches_roles_and_literals():
    for text in ("see :func:`graphfeed.x`", "a ``literal``", ":class:`~a.B`", ":mod:`m`"):
        assert SPHINX.search(text), text
    assert SPHINX.search("plain text: a:b, `x`") is None


def test_the_top_level_help_says_what_train_does(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "node classification and link prediction" in text
    assert "typed" in text and "partitions" in text
    train = " ".join(PARSERS[("train",)].format_help().split())
    assert "link prediction" in train and "--partitions" in train


@pytest.mark.parametrize("fmt", ["link-split", "ogbl"])
def test_link_formats_offer_only_the_options_that_apply(fmt, capsys):
    """``prepare link-split`` offered node-classification options (``--num-classes``,
    ``--feature-dtype``) and build tuning that it refuses or ignores; they are gone, and a
    user who passes one gets argparse's one-line refusal naming it."""
    offered = {o for a in PARSERS[("prepare", fmt)]._actions for o in a.option_strings}
    for opt in ("--num-classes", "--feature-dtype", "--drop-self-loops", "--dedupe",
                "--memory-budget", "--block-size", "--progress"):
        assert opt not in offered, (fmt, opt)
    assert ("--undirected" in offered) == (fmt == "ogbl")
    assert ("--split" in offered) == ("--seed" in offered) == (fmt == "link-split")
    assert {"--name", "--overwrite"} <= offered
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["prepare", fmt, "src", "out", "--num-classes", "3"])
    assert e.value.code == 2
    assert "unrecognized arguments: --num-classes 3" in capsys.readouterr().err
