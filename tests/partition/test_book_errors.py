"""Issue 29: bad input to ``graphfeed partition`` / a bad partition book gives one error line,
never a traceback."""

from __future__ import annotations

import pytest

from graphfeed.errors import GraphfeedError
from graphfeed.partition import assign_parts


def test_cli_refuses_a_negative_seed(tiny_dataset, tmp_path, capsys):
    from graphfeed.cli.main import main

    out = tmp_path / "p"
    with pytest.raises(SystemExit) as e:
        main(["partition", str(tiny_dataset.path), str(out), "--parts", "2", "--method",
              "random", "--seed=-1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--seed" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("seed", [-1, 1.5, "3"])
def test_assign_parts_refuses_a_bad_seed(tiny_dataset, seed):
    with pytest.raises(GraphfeedError, match="seed"):
        assign_parts(tiny_dataset, 2, "random", seed=seed)


# ---------------------------------------------------------------- a bad partition.json (item 1)
@pytest.fixture(scope="module")
def good_book(tiny_dataset, tmp_path_factory):
    import json

    from graphfeed.partition import partition_dataset

    out = tmp_path_factory.mktemp("book") / "p"
    partition_dataset(tiny_dataset, out, 2, method="random")
    return json.loads((out / "partition.json").read_text())


def _edit(**changes):
    def f(raw):
        raw = dict(raw)
        for k, v in changes.items():
            if v is _DROP:
                raw.pop(k)
            else:
                raw[k] = v
        return raw
    return f


_DROP = object()

BAD_BOOKS = {
    "list": "[1,2]",
    "string": '"hello"',
    "number": "3",
    "null": "null",
    "deep": "[" * 100000,
    "deep-object": '{"a":' * 100000,
    "not-json": "{",
    "not-utf8": b"\xff\xfe{}",
}
BAD_FIELDS = {
    "offsets-string": _edit(offsets="0,1500,3000"),
    "offsets-floats": _edit(offsets=[0, 1500.5, 3000]),
    "offsets-nested": _edit(offsets=[[0, 1500], [3000]]),
    "offsets-huge": _edit(offsets=[0, 2**70, 3000]),
    "num-parts-string": _edit(num_parts="2"),
    "num-parts-bool": _edit(num_parts=True),
    "num-nodes-negative": _edit(num_nodes=-3000),
    "seed-float": _edit(seed=0.5),
    "name-list": _edit(name=["x"]),
    "method-dict": _edit(method={}),
    "features-list": _edit(features=["feat", "label"]),
    "feature-spec-string": _edit(features={"feat": "float32", "label": {"dtype": "int64", "row_shape": []}}),
    "feature-bad-dtype": _edit(features={"feat": {"dtype": "nonsense", "row_shape": [32]},
                                         "label": {"dtype": "int64", "row_shape": []}}),
    "feature-object-dtype": _edit(features={"feat": {"dtype": "O", "row_shape": [32]},
                                            "label": {"dtype": "int64", "row_shape": []}}),
    "feature-row-shape": _edit(features={"feat": {"dtype": "float32", "row_shape": "32"},
                                         "label": {"dtype": "int64", "row_shape": []}}),
    "feature-name-escapes": _edit(features={"../../x": {"dtype": "float32", "row_shape": [32]},
                                            "label": {"dtype": "int64", "row_shape": []}}),
    "splits-string": _edit(splits="train"),
    "splits-numbers": _edit(splits=[1, 2]),
    "splits-escape": _edit(splits=["../train"]),
    "stats-list": _edit(stats=[1]),
    "missing-offsets": _edit(offsets=_DROP),
    "missing-features": _edit(features=_DROP),
    "target-number": _edit(target=3),
}


def _write_book(root, content):
    root.mkdir(parents=True, exist_ok=True)
    f = root / "partition.json"
    if isinstance(content, bytes):
        f.write_bytes(content)
    else:
        f.write_text(content)
    return f


@pytest.mark.parametrize("key", list(BAD_BOOKS))
def test_read_book_refuses_a_malformed_file(tmp_path, key):
    from graphfeed.errors import DatasetError
    from graphfeed.partition import read_book

    f = _write_book(tmp_path / "p", BAD_BOOKS[key])
    with pytest.raises(DatasetError, match="partition.json"):
        read_book(tmp_path / "p")
    assert str(f) in str(pytest.raises(DatasetError, read_book, tmp_path / "p").value)


@pytest.mark.parametrize("key", list(BAD_FIELDS))
def test_read_book_refuses_a_bad_field(tmp_path, good_book, key):
    import json

    from graphfeed.errors import DatasetError
    from graphfeed.partition import read_book

    _write_book(tmp_path / "p", json.dumps(BAD_FIELDS[key](good_book)))
    with pytest.raises(DatasetError, match="partition.json"):
        read_book(tmp_path / "p")


def test_read_book_still_reads_a_good_file(tmp_path, good_book):
    import json

    from graphfeed.partition import read_book

    _write_book(tmp_path / "p", json.dumps(good_book))
    assert read_book(tmp_path / "p").num_parts == 2


@pytest.mark.parametrize("key", ["list", "string", "deep"])
def test_bench_dist_prints_one_line(tmp_path, capsys, key):
    from graphfeed.cli.main import main

    _write_book(tmp_path / "p", BAD_BOOKS[key])
    assert main(["bench", "dist", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err and "partition.json" in err
