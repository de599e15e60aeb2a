"""Regressions of issue 12 on the dataset side: no silent data loss, clear one-line errors,
messages that name the real culprit, umask-honouring output."""

from __future__ import annotations

import errno
import gzip
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graphfeed.datasets.format import Dataset, write_dataset
from graphfeed.datasets.importers import SplitRule
from graphfeed.datasets.importers.generic import prepare_generic
from graphfeed.errors import DatasetError, GraphfeedError

from ds_helpers import assert_one_line_error, run_cli, small_arrays

N = 40


@pytest.fixture
def inputs(tmp_path):
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, N, 300), rng.integers(0, N, 300)
    (tmp_path / "edges.csv").write_text("src,dst\n" + "".join(f"{s},{d}\n" for s, d in zip(src, dst)))
    (tmp_path / "edges.csv.gz").write_bytes(gzip.compress((tmp_path / "edges.csv").read_bytes()))
    np.save(tmp_path / "x.npy", rng.standard_normal((N, 3)).astype(np.float32))
    np.save(tmp_path / "y.npy", rng.integers(0, 4, N))
    return tmp_path, src, dst


def _generic(tmp, *extra, edges="edges.csv", out="out"):
    return ["prepare", "generic", tmp / out, "--edges", tmp / edges, "--features", tmp / "x.npy",
            "--labels", tmp / "y.npy", "--no-progress", *extra]


# --------------------------------------------------------------------------- 1: block size
@pytest.mark.parametrize("edges", ["edges.csv", "edges.csv.gz"])
def test_block_size_zero_is_refused_and_tiny_blocks_read_every_edge(inputs, capsys, edges):
    tmp, src, dst = inputs
    rc, out, err = run_cli(_generic(tmp, "--block-size", "0", edges=edges), capsys)
    assert_one_line_error(rc, err, "--block-size")
    assert not (tmp / "out").exists()
    with pytest.raises(GraphfeedError, match="block size"):  # an argument, not a dataset file: GraphfeedError
        prepare_generic(tmp / "lib", edges=tmp / edges, labels=tmp / "y.npy", block_bytes=0)
    for block in ("1", "7", "8MiB"):
        rc, out, err = run_cli(_generic(tmp, "--block-size", block, "--overwrite", edges=edges), capsys)
        assert rc == 0, err
        assert Dataset.open(tmp / "out").num_edges == 300 and "from 300 input edges" in out


# --------------------------------------------------------------------------- 4: label column, class counts
def _page_graph(tmp: Path) -> Path:
    d = tmp / "pages"
    d.mkdir()
    (d / "musae_edges.csv").write_text("id_1,id_2\n0,1\n1,2\n2,3\n3,0\n")
    (d / "musae_features.json").write_text('{"0": [0, 2], "1": [1], "2": [2], "3": [0]}')
    (d / "musae_target.csv").write_text(
        "id,facebook_id,page_name,page_type\n0,10150155272765161,A,tvshow\n1,145647315578475,B,company\n"
        "2,1002291599816912,C,tvshow\n3,1466540716988468,D,politician\n")
    return d


def test_cora_text_never_guesses_the_label_column(tmp_path, capsys):
    d = _page_graph(tmp_path)
    rc, _, err = run_cli(["prepare", "cora-text", d, tmp_path / "o", "--split", "0.5,0.25,0.25"], capsys)
    assert_one_line_error(rc, err, "musae_target.csv", "4 columns", "page_type", "--label-col")
    assert not (tmp_path / "o").exists()
    rc, out, err = run_cli(["prepare", "cora-text", d, tmp_path / "o", "--split", "0.5,0.25,0.25",
                            "--label-col", "page_type"], capsys)
    assert rc == 0, err
    ds = Dataset.open(tmp_path / "o")
    assert ds.class_names == ("company", "politician", "tvshow")
    assert ds.labels.tolist() == [2, 0, 2, 1] and ds.num_classes == 3


def test_absurd_class_counts_are_refused_before_anything_is_written(inputs, capsys):
    tmp, _, _ = inputs
    rc, _, err = run_cli(_generic(tmp, "--num-classes", "1000000000000"), capsys)
    assert_one_line_error(rc, err, "--num-classes")
    rc, _, err = run_cli(_generic(tmp, "--num-classes", str(N + 1)), capsys)
    assert_one_line_error(rc, err, f"more than the {N} nodes")
    np.save(tmp / "y_big.npy", np.where(np.arange(N) == 3, 10150155272765160, 1))
    with pytest.raises(DatasetError, match="largest label \\+ 1 .* above the limit"):
        prepare_generic(tmp / "o2", edges=tmp / "edges.csv", labels=tmp / "y_big.npy")
    # a hand-edited graphfeed.json cannot declare them either
    ds = write_dataset(tmp / "ok", **_arrays())
    meta = (ds / "graphfeed.json").read_text().replace('"num_classes": 3', '"num_classes": 1000000000000')
    (ds / "graphfeed.json").write_text(meta)
    with pytest.raises(DatasetError, match="task.num_classes"):
        Dataset.open(ds)
    assert not (tmp / "out").exists() and not (tmp / "o2").exists()


def _arrays():
    g, feats, splits = small_arrays()
    return dict(graph=g, node_features=feats, splits=splits, num_classes=3)


# --------------------------------------------------------------------------- 7: umask
@pytest.mark.parametrize("mask,dmode,fmode", [(0o022, 0o755, 0o644), (0o002, 0o775, 0o664), (0o077, 0o700, 0o600)])
def test_prepared_dataset_honours_the_umask(inputs, mask, dmode, fmode):
    tmp, _, _ = inputs
    old = os.umask(mask)
    try:
        prepare_generic(tmp / "out", edges=tmp / "edges.csv", labels=tmp / "y.npy",
                        features={"feat": tmp / "x.npy"}, splits=SplitRule.parse("0.5,0.2,0.2"))
        write_dataset(tmp / "w", **_arrays())
    finally:
        os.umask(old)
    for root in (tmp / "out", tmp / "w"):
        items = [root, *root.rglob("*")]
        assert len(items) > 8
        for p in items:
            want = dmode if p.is_dir() else fmode
            assert stat.S_IMODE(p.stat().st_mode) == want, (p, oct(p.stat().st_mode))


# --------------------------------------------------------------------------- 10: silently wrong input
def test_source_and_destination_columns_must_be_distinct_and_non_negative(inputs, capsys):
    tmp, _, _ = inputs
    for cols in (["--src-col", "-1"], ["--src-col", "0", "--dst-col", "0"], ["--dst-col", "5000"]):
        rc, _, err = run_cli(_generic(tmp, *cols), capsys)
        assert_one_line_error(rc, err, "column")
    assert not (tmp / "out").exists()
    # swapped columns are honoured (not silently re-ordered)
    rc, _, err = run_cli(_generic(tmp, "--src-col", "1", "--dst-col", "0"), capsys)
    assert rc == 0, err
    from graphfeed.graph.csc import CSCGraph

    _, src, dst = inputs
    rev = CSCGraph.from_edges(dst, src, N)
    np.testing.assert_array_equal(Dataset.open(tmp / "out").graph.indices, rev.indices)


def test_a_malformed_first_line_is_an_error_not_a_header(inputs):
    tmp, _, _ = inputs
    (tmp / "bad.csv").write_text("1,2x\n3,4\n5,6\n")
    with pytest.raises(DatasetError, match=r"bad.csv: line 1: .*'1,2x'"):
        prepare_generic(tmp / "o", edges=tmp / "bad.csv", labels=tmp / "y.npy")
    (tmp / "hdr.csv").write_text("# comment\nsource,target\n1,2\n3,4\n")
    rep = prepare_generic(tmp / "o", edges=tmp / "hdr.csv", labels=tmp / "y.npy")
    assert rep.input_edges == 2
    (tmp / "cr.csv").write_text("1,2\r3,4\r5,6\r")  # old-Mac line ends would glue the lines
    with pytest.raises(DatasetError, match="carriage return"):
        prepare_generic(tmp / "o3", edges=tmp / "cr.csv", labels=tmp / "y.npy")



@pytest.mark.parametrize("first", ["1:2", "1|2", "1-2", "src", "a b c", "nan,inf", "1,2x"])
def test_only_a_header_naming_every_column_is_skipped(inputs, capsys, first):
    """Issue 29: a malformed first edge line was skipped as if it were a header whenever it
    held no number (``1:2``, one field for two columns). Only names, one per column of the
    data lines, are a header; anything else is data, and bad data is an error naming line 1."""
    tmp, _, _ = inputs
    (tmp / "e.txt").write_text(f"{first}\n0 1\n1 2\n2 3\n")
    rc, _, err = run_cli(_generic(tmp, edges="e.txt"), capsys)
    assert_one_line_error(rc, err, "e.txt: line 1: ", repr(first))
    assert not (tmp / "out").exists()


@pytest.mark.parametrize("header,extra", [
    ("src,dst", ()), ("src dst", ()), ('"src","dst"', ()), ("id_1\tid_2", ()),
    ("src,dst,weight", ("--weight-col", "2")), ("# a comment\nsource;target", ()),
])
def test_a_header_naming_every_column_is_skipped(inputs, header, extra):
    from graphfeed.datasets._readers import TextBlocks

    tmp, _, _ = inputs
    delim = "," if "," in header else ";" if ";" in header else "\t" if "\t" in header else " "
    cols = 3 if extra else 2
    rows = "".join(delim.join(str(v) for v in (i, (i + 1) % 4, 1.5)[:cols]) + "\n"
                   for i in range(4))
    (tmp / "e.txt").write_text(f"{header}\n{rows}")
    rep = prepare_generic(tmp / "o", edges=tmp / "e.txt", labels=tmp / "y.npy", num_nodes=N,
                          **({"weight_col": 2} if extra else {}))
    assert rep.input_edges == 4
    # a block that ends after the header (the data line not in view): still a header
    tb = TextBlocks(tmp / "e.txt", block_bytes=len(header) + 1, columns=cols)
    assert sum(len(bytes(b).split()) for b, _ in tb) >= 4 and tb.header == header.splitlines()[-1]


def test_looks_like_header():
    from graphfeed.datasets._readers import looks_like_header

    assert looks_like_header("src,dst", 2) and looks_like_header("src,dst,w", 2)
    assert looks_like_header("src,dst", 2, 2) and not looks_like_header("src,dst,w", 2, 2)
    for line in ("1:2", "src", "1,2", "nan,inf", "1,2x", "#src,dst", "", "-,-"):
        assert not looks_like_header(line, 2), line


def test_duplicate_labels_are_an_error_naming_both_lines(inputs):
    tmp, _, _ = inputs
    (tmp / "y.csv").write_text("id,label\n0,1\n1,2\n2,0\n1,3\n")
    with pytest.raises(DatasetError, match=r"y.csv: node 1 is listed twice \(lines 3 and 5\)"):
        prepare_generic(tmp / "o", edges=tmp / "edges.csv", labels=tmp / "y.csv", num_nodes=N)


@pytest.mark.parametrize("kind", ["npy", "csv", "array", "npy-int8"])
def test_feature_dtype_never_turns_values_into_inf_silently(inputs, kind):
    tmp, _, _ = inputs
    x = np.ones((N, 3))
    x[7, 2] = 1e300 if kind != "npy-int8" else 300.0
    if kind in ("npy", "npy-int8"):
        np.save(tmp / "big.npy", x)
        src = tmp / "big.npy"
    elif kind == "csv":
        (tmp / "big.csv").write_text("\n".join(",".join(repr(float(v)) for v in row) for row in x) + "\n")
        src = tmp / "big.csv"
    else:
        src = x
    dt = "int8" if kind == "npy-int8" else "float16"
    with pytest.raises(DatasetError, match=rf"value .* at row 7, column 2 cannot be stored as {dt}"):
        prepare_generic(tmp / "o", edges=tmp / "edges.csv", labels=tmp / "y.npy", features={"feat": src},
                        feature_dtype=dt)
    x[7, 2] = 3.0
    np.save(tmp / "ok.npy", x)
    prepare_generic(tmp / "o", edges=tmp / "edges.csv", labels=tmp / "y.npy", features={"feat": tmp / "ok.npy"},
                    feature_dtype=dt)
    assert Dataset.open(tmp / "o").features["feat"].dtype == getattr(__import__("torch"), dt)


# --------------------------------------------------------------------------- 11: one-line errors
def test_one_line_errors_for_bad_input_and_bad_disks(inputs, capsys, monkeypatch):
    tmp, _, _ = inputs
    body = gzip.compress(b"1,2\n" * 5000)
    (tmp / "corrupt.csv.gz").write_bytes(body[:20] + bytes(b ^ 0x5A for b in body[20:60]) + body[60:])
    rc, _, err = run_cli(_generic(tmp, edges="corrupt.csv.gz"), capsys)
    assert_one_line_error(rc, err, "corrupt.csv.gz")
    rc, _, err = run_cli(_generic(tmp, "--feature-dtype", "float17"), capsys)
    assert_one_line_error(rc, err, "float17")
    for bad in ("nan,0.1,0.1", "inf,0,0", "0.8,0.1", "per-class:2.5,1,1", "-0.1,0.5,0.5"):
        rc, _, err = run_cli(_generic(tmp, "--split", bad), capsys)
        assert_one_line_error(rc, err, "split")
    rc, _, err = run_cli(_generic(tmp, "--seed", "-1"), capsys)
    assert_one_line_error(rc, err, "--seed")
    import shutil
    import tempfile

    def read_only(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp / "out"))

    with monkeypatch.context() as m:
        m.setattr(tempfile, "mkdtemp", read_only)
        rc, _, err = run_cli(_generic(tmp), capsys)
    assert_one_line_error(rc, err, "Read-only file system")

    def full(src, dst, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))

    with monkeypatch.context() as m:
        m.setattr(shutil, "copyfile", full)
        rc, _, err = run_cli(_generic(tmp), capsys)
    assert_one_line_error(rc, err, "No space left on device")
    assert not (tmp / "out").exists() and not list(tmp.glob(".out.tmp-*"))


def test_inspect_deeply_nested_metadata_and_closed_pipe(tmp_path, capsys):
    ds = write_dataset(tmp_path / "ds", **_arrays())
    rc, out, err = run_cli(["inspect", ds], capsys)
    assert rc == 0 and "nodes 12" in out
    bad = tmp_path / "deep"
    bad.mkdir()
    (bad / "graphfeed.json").write_text('{"format_version": 1, "extra": ' + "[" * 100_000 + "]" * 100_000 + "}")
    rc, _, err = run_cli(["inspect", bad], capsys)
    assert_one_line_error(rc, err, "nested too deeply")
    # `graphfeed inspect DIR | head -3`: the reader is gone before we write
    proc = subprocess.Popen([sys.executable, "-m", "graphfeed", "inspect", str(ds)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2] / "src")))
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 2, err
    assert_one_line_error(2, err, "broken pipe")


# --------------------------------------------------------------------------- 12: messages
def test_messages_name_the_real_culprit(inputs, tmp_path):
    tmp, _, _ = inputs
    np.save(tmp / "x_short.npy", np.zeros((N - 2, 3), np.float32))
    with pytest.raises(DatasetError, match=rf"y.npy has {N} labels but .*x_short.npy has {N - 2} rows"):
        prepare_generic(tmp / "o", edges=tmp / "edges.csv", labels=tmp / "y.npy",
                        features={"feat": tmp / "x_short.npy"})
    np.save(tmp / "e64.npy", np.array([[0, 1], [2**63 + 5, 3]], dtype=np.uint64))
    with pytest.raises(DatasetError, match=r"id 9223372036854775813 is too large"):
        prepare_generic(tmp / "o", edges=tmp / "e64.npy", labels=tmp / "y.npy")
    (tmp / "e_txt.csv").write_text("0,1\n9223372036854775813,3\n")
    with pytest.raises(DatasetError, match=r"line 2: .*too large"):
        prepare_generic(tmp / "o", edges=tmp / "e_txt.csv", labels=tmp / "y.npy")
    os.mkfifo(tmp / "fifo.csv")
    (tmp / "adir.csv").mkdir()
    for path, what in ((tmp / "fifo.csv", "FIFO"), (tmp / "adir.csv", "folder"), (Path("/dev/zero"), "device"),
                       (tmp / "missing.csv", "not found")):
        with pytest.raises(DatasetError, match=what):
            prepare_generic(tmp / "o", edges=path, labels=tmp / "y.npy")
    with pytest.raises(DatasetError, match=r"edges.csv: not an .npz archive .*text"):
        from graphfeed.datasets.importers.shared import prepare_csr_npz

        prepare_csr_npz(tmp / "edges.csv", tmp / "o")
    rows = ["1.0,2.0"] * 10 + ["1.0,oops"] + ["3.0,4.0"] * 30
    (tmp / "feat.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(DatasetError, match=r"feat.csv: line 11: cannot parse 'oops'"):
        prepare_generic(tmp / "o", edges=tmp / "edges.csv", labels=tmp / "y.npy",
                        features={"feat": tmp / "feat.csv"})
    assert not (tmp / "o").exists()


def test_a_fifo_inside_a_dataset_is_named(tmp_path):
    ds = write_dataset(tmp_path / "ds", **_arrays())
    (ds / "splits" / "test.npy").unlink()
    os.mkfifo(ds / "splits" / "test.npy")
    with pytest.raises(DatasetError, match="test.npy: is a FIFO"):
        Dataset.open(ds)


def test_prepare_help_states_the_defaults(capsys):
    for argv in (["prepare", "--help"], ["prepare", "generic", "--help"]):
        rc, out, _ = run_cli(argv, capsys)
        text = " ".join(out.split())
        assert rc == 0
        assert "80/10/10" in text and "only in their stored direction" in text and "--undirected" in text
