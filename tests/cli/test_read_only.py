"""``--data-root`` and ``--table-cache`` on a read-only mount (issue 29): a one-line error naming
the flag and the folder, exit status 2, and nothing written there (they once ended in an OSError
traceback). The mount is simulated (``read_only``: EROFS from every write under the folder), so
the tests also hold when they run as root."""

from __future__ import annotations

import errno
import os

import pytest
from read_only import read_only

from graphfeed.cli.main import main

pytestmark = [pytest.mark.timeout(300)]


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_the_simulated_mount_refuses_writes_and_allows_reads(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "kept.txt").write_text("x")
    read_only(monkeypatch, ro)
    assert (ro / "kept.txt").read_text() == "x"
    for write in (lambda: (ro / "new").mkdir(), lambda: open(ro / "f", "w"),
                  lambda: os.open(ro / "g", os.O_RDWR | os.O_CREAT),
                  lambda: os.rename(ro / "kept.txt", ro / "moved.txt")):
        with pytest.raises(OSError) as e:
            write()
        assert e.value.errno == errno.EROFS
    (tmp_path / "elsewhere").mkdir()  # outside: untouched


@pytest.mark.parametrize("argv", [
    ["train", "--dataset", "tiny", "--epochs", "1", "--no-progress"],
    ["partition", "tiny", "{tmp}/parts", "--parts", "2", "--method", "random"],
    ["bench", "sample", "--dataset", "tiny", "--batches", "1"],
], ids=lambda a: " ".join(a[:2]))
def test_a_read_only_data_root_is_one_line_naming_the_flag(argv, tmp_path, monkeypatch, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    read_only(monkeypatch, ro)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    rc = main([*argv, "--data-root", str(ro)])
    line = _one_line(capsys.readouterr().err)
    assert rc == 2
    assert "--data-root" in line and str(ro) in line and "Read-only file system" in line, line
    assert list(ro.iterdir()) == []


def test_a_read_only_default_data_root_names_graphfeed_home(tmp_path, monkeypatch, capsys):
    ro = tmp_path / "home"
    ro.mkdir()
    monkeypatch.setenv("GRAPHFEED_HOME", str(ro))
    read_only(monkeypatch, ro)
    rc = main(["train", "--dataset", "tiny", "--epochs", "1", "--no-progress"])
    line = _one_line(capsys.readouterr().err)
    assert rc == 2 and "GRAPHFEED_HOME" in line and "--data-root" in line, line
    assert str(ro / "datasets") in line and list(ro.iterdir()) == []


def test_a_read_only_data_root_that_holds_the_dataset_is_fine(builtin_root, monkeypatch, capsys):
    root = builtin_root("tiny")
    before = sorted(os.listdir(root))
    read_only(monkeypatch, root)
    rc = main(["train", "--dataset", "tiny", "--data-root", root, "--epochs", "1",
               "--no-progress", "--no-mlp", "--hidden", "8", "--fanouts", "3,3"])
    assert rc == 0, capsys.readouterr().err
    assert sorted(os.listdir(root)) == before


@pytest.mark.parametrize("folder", ["ro", "ro/tables"])
def test_a_read_only_table_cache_is_one_line_naming_the_flag(folder, builtin_root, tmp_path,
                                                             monkeypatch, capsys):
    """The folder itself, or its parent when the folder does not exist yet, is read-only."""
    (tmp_path / "ro").mkdir()
    read_only(monkeypatch, tmp_path / "ro")
    cache = tmp_path / folder
    rc = main(["train", "--dataset", "tiny", "--data-root", builtin_root("tiny"), "--epochs", "1",
               "--no-progress", "--no-mlp", "--sampler", "labor", "--table-cache", str(cache)])
    line = _one_line(capsys.readouterr().err)
    assert rc == 2
    assert "--table-cache" in line and str(cache) in line and "Read-only file system" in line, line
    assert list((tmp_path / "ro").iterdir()) == []
