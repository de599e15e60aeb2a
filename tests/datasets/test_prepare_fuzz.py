"""Fuzz `graphfeed prepare`'s numeric and list flags: every outcome is a published, valid dataset
(exit 0) or a one-line error with exit status 2; never a traceback, never a half-written OUT."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from graphfeed.datasets.format import Dataset

from ds_helpers import run_cli

N = 25

numbers = st.one_of(
    st.integers(-3, 40).map(str),
    st.integers(-2**70, 2**70).map(str),
    st.sampled_from(["0", "-0", "1", "nan", "inf", "-inf", "1e9", "1.5", "", " ", "0x10", "2**8", "1_000",
                     "٣", "9" * 40]),
)
sizes = st.one_of(numbers, st.sampled_from(["8MiB", "1KiB", "1B", "0B", "2GiB", "1TiB", "-5MB", "1.5kB",
                                            "3 GB", "MiB", "1e3", "999999999999PiB"]))
fractions = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                      st.sampled_from(["0.8", "0.1", "0", "1", "-0.1", "", "x", "0.5"]))
splits = st.one_of(
    st.lists(fractions, min_size=0, max_size=5).map(",".join),
    st.lists(numbers, min_size=0, max_size=4).map(lambda v: "per-class:" + ",".join(v)),
)


def flag(plausible, hostile):
    """Mostly values a user would type (so runs get deep into prepare), sometimes hostile ones."""
    return st.one_of(plausible, plausible, plausible, hostile)


ints = lambda lo, hi: st.integers(lo, hi).map(str)  # noqa: E731
FLAGS = {
    "--block-size": flag(st.sampled_from(["1", "7", "64", "1KiB", "8MiB", "100B"]), sizes),
    "--memory-budget": flag(st.sampled_from(["1MiB", "2GiB", "1MB", "16MiB"]), sizes),
    "--seed": flag(ints(0, 2**40), numbers),
    "--num-classes": flag(ints(3, 30), numbers),
    "--num-nodes": flag(st.sampled_from(["25", "25", "24", "26", "1000"]), numbers),
    "--src-col": flag(st.sampled_from(["0", "0", "1", "4"]), numbers),
    "--dst-col": flag(st.sampled_from(["1", "1", "0", "2"]), numbers),
    "--weight-col": flag(st.sampled_from(["2", "2", "3"]), numbers),
    "--time-col": flag(st.sampled_from(["3", "3", "2"]), numbers),
    "--split": flag(st.lists(st.sampled_from(["0.5", "0.2", "0.1", "0", "0.25"]), min_size=3, max_size=3)
                    .map(",".join) | st.lists(ints(0, 12), min_size=3, max_size=3).map(
                        lambda v: "per-class:" + ",".join(v)), splits),
    "--feature-dtype": st.sampled_from(["float16", "float32", "float64", "int8", "uint8", "bool", "int64",
                                        "float17", "object", "U8", "complex64", "S3", ""]),
}

_count = itertools.count()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, N, 80), rng.integers(0, N, 80)
    (tmp / "e.csv").write_text("src,dst,w,t\n" + "".join(
        f"{s},{d},{rng.random():.3f},{i}\n" for i, (s, d) in enumerate(zip(src, dst))))
    np.save(tmp / "x.npy", rng.standard_normal((N, 3)) * 100)
    np.save(tmp / "y.npy", rng.integers(0, 3, N))
    return tmp


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flags=st.dictionaries(st.sampled_from(sorted(FLAGS)), st.just(None), max_size=5).flatmap(
    lambda d: st.fixed_dictionaries({k: FLAGS[k] for k in d})))
def test_prepare_flags_succeed_or_fail_in_one_line(inputs, capsys, flags):
    out = inputs / f"out{next(_count)}"
    argv = ["prepare", "generic", out, "--edges", inputs / "e.csv", "--features", inputs / "x.npy",
            "--labels", inputs / "y.npy", "--no-progress"]
    for k, v in flags.items():
        argv.append(f"{k}={v}")  # '=' so values like -1 stay values
    rc, stdout, err = run_cli(argv, capsys)
    event(f"exit {rc}")
    assert rc in (0, 2), (argv, rc, err)
    assert "Traceback" not in err
    if rc == 0:
        ds = Dataset.open(out)
        assert ds.num_nodes == N and "prepared" in stdout
    else:
        assert len(err.strip().splitlines()) == 1 and err.startswith(("graphfeed", "usage")), err
        assert not out.exists()
        assert not list(inputs.glob(f".{out.name}.tmp-*"))
