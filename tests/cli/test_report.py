"""``graphfeed report LOG [LOG ...]`` (issue 29: ``--log`` wrote JSON lines that nothing turned
into a picture): the summary numbers of a handcrafted log, several runs per file and resumed
epochs, the PNG (valid, of the asked size), the refusals of bad logs (one line naming the file
and the line) and of a missing matplotlib (naming the extra)."""

from __future__ import annotations

import json
import struct
import sys

import pytest

from graphfeed.cli.main import main

pytestmark = [pytest.mark.timeout(300)]


def _epoch(epoch, loss, valid, test, seconds=1.0, **extra):
    """A line as ``graphfeed train --log`` writes it (EpochStats.to_dict())."""
    rec = {"epoch": epoch, "loss": loss, "train_acc": 0.5,
           "valid_acc": (valid or {}).get("accuracy"), "test_acc": (test or {}).get("accuracy"),
           "seeds_per_s": 1000.0, "batches_per_s": 10.0, "seconds": seconds,
           "peak_rss_bytes": 1 << 30, "peak_gpu_bytes": None, "valid": valid, "test": test,
           "eval_seconds": 0.1, "rss_bytes": 1 << 29, "peak_gpu_reserved_bytes": None}
    rec.update(extra)
    return rec


def _m(acc, f1):
    return {"accuracy": acc, "macro_f1": f1}


#: epoch 2 skipped evaluation (--eval-every); epochs 1 and 3 tie on accuracy: the first wins
HANDCRAFTED = [
    _epoch(0, 2.0, _m(0.50, 0.40), _m(0.48, 0.41), seconds=4.0),
    _epoch(1, 1.5, _m(0.70, 0.60), _m(0.66, 0.59), seconds=1.0),
    _epoch(2, 1.2, None, None, seconds=1.0),
    _epoch(3, 1.0, _m(0.70, 0.65), _m(0.69, 0.62), seconds=2.0),
]


def _write(path, records, extra_lines=()):
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "".join(extra_lines))
    return str(path)


def _report_json(capsys, *argv):
    assert main(["report", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_summary_of_a_handcrafted_log(tmp_path, capsys):
    log = _write(tmp_path / "a.jsonl", HANDCRAFTED)
    (row,) = _report_json(capsys, log)["runs"]
    assert row == {"log": log, "run": 1, "epochs": 4, "metric": "accuracy", "best_epoch": 1,
                   "best_valid": 0.70, "test_at_best": 0.66, "final_loss": 1.0,
                   "mean_seconds": 2.0}
    (row,) = _report_json(capsys, log, "--metric", "macro_f1")["runs"]
    assert (row["metric"], row["best_epoch"], row["best_valid"], row["test_at_best"]) == (
        "macro_f1", 3, 0.65, 0.62)
    assert main(["report", log]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["log", "epochs", "best", "epoch", "metric", "best", "valid", "test",
                              "there", "final", "loss", "s/epoch"]
    assert out[1].split() == [log, "4", "1", "accuracy", "0.7000", "0.6600", "1.0000", "2.00"]


def test_runs_in_one_file_and_a_resumed_run_that_redid_epochs(tmp_path, capsys):
    """--runs K (or two runs) append to one log, each from epoch 0; a resumed run appends the
    epochs it redoes again: the later lines hold."""
    a = [_epoch(0, 2.0, _m(0.5, 0.5), _m(0.5, 0.5)), _epoch(1, 1.9, _m(0.6, 0.5), _m(0.6, 0.5)),
         _epoch(2, 1.8, _m(0.9, 0.5), _m(0.9, 0.5)),
         _epoch(2, 1.7, _m(0.7, 0.5), _m(0.65, 0.5)), _epoch(3, 1.6, _m(0.8, 0.5), _m(0.75, 0.5))]
    b = [_epoch(0, 3.0, _m(0.4, 0.3), _m(0.45, 0.3)), _epoch(1, 2.5, _m(0.3, 0.3), _m(0.2, 0.3))]
    log = _write(tmp_path / "runs.jsonl", a + b, extra_lines=["\n"])  # a blank line at the end
    rows = _report_json(capsys, log)["runs"]
    assert [(r["run"], r["epochs"], r["best_epoch"], r["best_valid"], r["test_at_best"],
             r["final_loss"]) for r in rows] == [(1, 4, 3, 0.8, 0.75, 1.6),
                                                 (2, 2, 0, 0.4, 0.45, 2.5)]
    assert main(["report", log]) == 0
    assert [line.split()[:2] for line in capsys.readouterr().out.splitlines()[1:]] == [
        [log, "#1"], [log, "#2"]]


def test_a_link_log_ranks_by_mrr_and_nulls_are_shown_as_dashes(tmp_path, capsys):
    link = {"mrr": 0.2, "hits@10": 0.4, "roc_auc": 0.8}
    log = _write(tmp_path / "link.jsonl", [_epoch(0, None, link, None, seconds=None)])
    (row,) = _report_json(capsys, log)["runs"]
    assert (row["metric"], row["best_valid"], row["test_at_best"], row["final_loss"],
            row["mean_seconds"]) == ("mrr", 0.2, None, None, None)
    assert main(["report", log]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-5:] == [
        "mrr", "0.2000", "-", "-", "-"]


def _png_size(path) -> tuple:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:16]
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("size", [(640, 480), (1234, 567)])
def test_the_curves_are_a_png_of_the_asked_size(size, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    a = _write(tmp_path / "a.jsonl", HANDCRAFTED)
    b = _write(tmp_path / "b.jsonl", HANDCRAFTED[:2] + HANDCRAFTED[:3])
    out = tmp_path / "curves.png"
    assert main(["report", a, b, "--out", str(out), "--size", f"{size[0]}x{size[1]}"]) == 0
    assert f"learning curves: {out}" in capsys.readouterr().out
    assert _png_size(out) == size
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left


def test_the_default_size(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "c.png"
    assert main(["report", _write(tmp_path / "a.jsonl", HANDCRAFTED), "--out", str(out)]) == 0
    assert _png_size(out) == (1500, 450)


BAD = {
    "not JSON": ('{"epoch": 0,', ":2: not JSON"),
    "a list": ("[1, 2]", ":2: expected a JSON object"),
    "no loss": (json.dumps({k: v for k, v in HANDCRAFTED[0].items() if k != "loss"}),
                ":2: missing field 'loss'"),
    "epoch text": (json.dumps({**HANDCRAFTED[0], "epoch": "1"}),
                   ":2: field 'epoch' must be an integer >= 0, got '1'"),
    "valid list": (json.dumps({**HANDCRAFTED[0], "valid": [0.5]}),
                   ":2: field 'valid' must be an object of metrics or null"),
    "metric text": (json.dumps({**HANDCRAFTED[0], "test": {"accuracy": "high"}}),
                    ":2: metric test.accuracy must be a number or null, got 'high'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_line_is_one_line_naming_the_file_and_the_line(case, tmp_path, capsys):
    line, want = BAD[case]
    log = _write(tmp_path / "bad.jsonl", HANDCRAFTED[:1], extra_lines=[line + "\n"])
    out = tmp_path / "c.png"
    assert main(["report", log, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [f"graphfeed report: error: {log}{want}"] or \
        captured.err.startswith(f"graphfeed report: error: {log}{want}"), captured.err
    assert len(captured.err.splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_an_empty_log_is_refused(content, tmp_path, capsys):
    log = tmp_path / "empty.jsonl"
    log.write_text(content)
    assert main(["report", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"graphfeed report: error: {log}: empty: no epoch lines"), err
    assert len(err.splitlines()) == 1


def test_other_refusals(tmp_path, capsys):
    log = _write(tmp_path / "a.jsonl", HANDCRAFTED)
    for argv, want in (
        ([str(tmp_path / "missing.jsonl")], f"{tmp_path / 'missing.jsonl'}: no such file"),
        ([str(tmp_path)], f"{tmp_path}: a folder, not a log file"),
        ([log, "--metric", "mrr"], f"{log}: no validation metric 'mrr'; it has accuracy, "
                                   f"macro_f1"),
        ([log, "--out", str(tmp_path / "c.svg")], "the curves are written as PNG"),
        ([log, "--out", str(tmp_path / "no" / "c.png")], f"folder {tmp_path / 'no'} does not exist"),
    ):
        assert main(["report", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and want in err, (argv, err)
    with pytest.raises(SystemExit) as e:
        main(["report", log, "--size", "10x10"])
    assert e.value.code == 2 and "200 to 10000 pixels" in capsys.readouterr().err


def test_without_matplotlib_drawing_is_refused_naming_the_extra(tmp_path, capsys, monkeypatch):
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    log = _write(tmp_path / "a.jsonl", HANDCRAFTED)
    out = tmp_path / "c.png"
    assert main(["report", log, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "pip install 'graphfeed[report]'" in captured.err and len(captured.err.splitlines()) == 1
    assert captured.out == "" and not out.exists()
    assert main(["report", log]) == 0  # the table needs no matplotlib


def test_building_the_parser_does_not_import_matplotlib():
    import subprocess

    code = ("import sys; from graphfeed.cli.main import build_parser; build_parser(); "
            "print(any(m == 'matplotlib' or m.startswith('matplotlib.') for m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr


def test_a_log_written_by_train(builtin_root, tmp_path, capsys):
    """The format contract with trainer/report.py: what train writes, report reads, and its best
    epoch and test figures are the ones train printed."""
    log = tmp_path / "train.jsonl"
    assert main(["train", "--dataset", "tiny", "--data-root", builtin_root("tiny"), "--epochs", "3",
                 "--fanouts", "5,5", "--hidden", "16", "--no-progress", "--no-mlp", "--json",
                 "--log", str(log)]) == 0
    result = json.loads(capsys.readouterr().out)
    (row,) = _report_json(capsys, str(log))["runs"]
    assert (row["epochs"], row["metric"], row["best_epoch"]) == (3, result["main_metric"],
                                                                 result["best_epoch"])
    assert row["best_valid"] == pytest.approx(result["best_valid"])
    assert row["test_at_best"] == pytest.approx(result["test"][result["main_metric"]])
    assert row["final_loss"] == pytest.approx(result["epochs"][-1]["loss"])
