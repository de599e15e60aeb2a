"""Issue 29 (7): ``graphfeed partition`` is crash-safe like ``prepare``. The states a kill
leaves are made by hand (a ``.OUT.tmp-*`` folder; the old partition renamed to
``.OUT.old-PID`` between the two renames of ``--overwrite``; both the new OUT and the old copy
after the second rename), then a later run must clean them up or put the old partition back.
Two runs without ``--overwrite`` never replace each other's result: the second is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from graphfeed._io import atomic_dir, publish_lock
from graphfeed.partition import partition_dataset
from graphfeed.partition.book import BOOK_FILE, read_book

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _orig_ids(path):
    return np.load(Path(path) / "book" / "orig_ids.npy").tolist()


def _leftovers(root: Path, name: str = "p"):
    return sorted(p.name for p in root.iterdir()
                  if p.name.startswith(f".{name}.tmp-") or p.name.startswith(f".{name}.old-"))


def test_a_killed_run_leaves_a_tmp_folder_that_the_next_run_removes(tiny_dataset, tmp_path):
    stale = tmp_path / ".p.tmp-killed1"
    (stale / "part-00000").mkdir(parents=True)
    (stale / "part-00000" / "indptr.npy").write_bytes(b"half written")
    partition_dataset(tiny_dataset, tmp_path / "p", 2, method="random")
    assert _leftovers(tmp_path) == []
    read_book(tmp_path / "p")


def test_an_interrupted_overwrite_is_put_back(tiny_dataset, tmp_path, capsys):
    from graphfeed.cli.main import main

    out = tmp_path / "p"
    partition_dataset(tiny_dataset, out, 2, method="random", seed=1)
    first = _orig_ids(out)
    # killed between the renames: OUT gone, the old partition under .p.old-PID, the new one
    # half written under .p.tmp-*
    os.rename(out, tmp_path / ".p.old-4242")
    (tmp_path / ".p.tmp-new").mkdir()
    (tmp_path / ".p.tmp-new" / BOOK_FILE).write_text("{")
    # the next run without --overwrite restores the old partition and is refused: OUT exists
    rc = main(["partition", str(tiny_dataset.path), str(out), "--parts", "2", "--method",
               "random", "--seed", "2"])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # after the progress lines: one error line
    assert rc == 2 and "already exists" in last and "--overwrite" in last, err
    assert _orig_ids(out) == first and _leftovers(tmp_path) == []
    read_book(out)
    # killed after the second rename: the new OUT is whole, the old copy is garbage
    shutil.copytree(out, tmp_path / ".p.old-4343")
    assert main(["partition", str(tiny_dataset.path), str(out), "--parts", "2", "--method",
                 "random", "--seed", "2", "--overwrite"]) == 0
    assert _orig_ids(out) != first and _leftovers(tmp_path) == []


def test_a_partition_published_meanwhile_is_not_replaced(tmp_path):
    """The check and the rename do not race: another writer's result published while this one
    was building makes this one fail (FileExistsError), with that result intact."""
    final = tmp_path / "p"
    with pytest.raises(FileExistsError, match="already exists"):
        with atomic_dir(final, markers=(BOOK_FILE,)) as tmp:
            (tmp / BOOK_FILE).write_text("mine")
            final.mkdir()
            (final / BOOK_FILE).write_text("theirs")
    assert (final / BOOK_FILE).read_text() == "theirs"
    assert _leftovers(tmp_path) == []


def test_a_second_concurrent_run_waits_then_is_refused(tiny_dataset, tmp_path):
    """Two ``partition tiny OUT`` at once: the second waits for the first's lock, then finds
    OUT and is refused (exit 2) instead of replacing it. The first run is played by this test
    holding the lock and publishing a partition made beforehand."""
    made = tmp_path / "made"
    partition_dataset(tiny_dataset, made, 2, method="random", seed=5)
    out = tmp_path / "p"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with publish_lock(out, (BOOK_FILE,)):
        proc = subprocess.Popen(
            [sys.executable, "-m", "graphfeed", "partition", str(tiny_dataset.path), str(out), "--parts", "2",
             "--method", "random"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        lock_wait = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < lock_wait and not _waiting(proc):
            time.sleep(0.2)
        shutil.copytree(made, out)  # the "first" run publishes
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    assert "already exists" in err and "Traceback" not in err
    assert _orig_ids(out) == _orig_ids(made) and _leftovers(tmp_path) == []


def _waiting(proc) -> bool:
    """True once ``proc`` blocks in ``flock`` (its wait channel), so the test does not publish
    before the second run has checked that OUT is absent; best effort where /proc lacks it."""
    try:
        return "flock" in Path(f"/proc/{proc.pid}/wchan").read_text()
    except OSError:
        return False
