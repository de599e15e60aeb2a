"""``--overwrite`` publishes in two renames (old -> ``.OUT.old-PID``, new -> OUT) and then removes
the old copy. A kill or an exception injected at each step (by replacing ``os.replace`` /
``shutil.rmtree`` for one call, never by timing) must leave OUT openable as the old or the new
dataset once the next writer has run, with nothing stranded."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graphfeed.datasets.format import Dataset, DatasetWriter, recover_interrupted_swap, write_dataset
from graphfeed.errors import DatasetError

from ds_helpers import small_arrays

SRC = str(Path(__file__).resolve().parents[2] / "src")

# (function, which call): the three steps of the swap, and the point after the last one
STEPS = {
    "before-rename-old": ("replace", "old"),
    "before-rename-new": ("replace", "new"),
    "before-remove-old": ("rmtree", "old"),
}


def _write(path: Path, seed: int, overwrite: bool = False) -> None:
    g, feats, splits = small_arrays(seed=seed)
    write_dataset(path, graph=g, node_features=feats, splits=splits, num_classes=3, overwrite=overwrite)


def _fingerprint(path: Path) -> list:
    return np.asarray(Dataset.open(path).graph.indices).tolist()


def _matches(step: str, fn: str, args) -> bool:
    want_fn, which = STEPS[step]
    if fn != want_fn:
        return False
    if fn == "replace":
        src, dst = (Path(a).name for a in args[:2])
        return dst.startswith(".ds.old-") if which == "old" else (src.startswith(".ds.tmp-") and dst == "ds")
    return Path(args[0]).name.startswith(".ds.old-")


def install_hook(step: str, action) -> None:
    """Make the swap's ``step`` call ``action()`` instead of running (once)."""
    real = {"replace": os.replace, "rmtree": shutil.rmtree}
    fired = []

    def make(fn):
        def hook(*args, **kw):
            if not fired and _matches(step, fn, args):
                fired.append(step)
                action()
            return real[fn](*args, **kw)
        return hook

    os.replace = make("replace")
    shutil.rmtree = make("rmtree")


@pytest.fixture
def two_versions(tmp_path):
    old = tmp_path / "ds"
    _write(old, seed=0)
    ref = tmp_path / "ref_new"
    _write(ref, seed=5)
    return tmp_path, _fingerprint(old), _fingerprint(ref)


class Injected(Exception):
    pass


@pytest.mark.parametrize("step", list(STEPS))
def test_an_exception_at_each_step_keeps_a_dataset(two_versions, step):
    tmp, old, new = two_versions
    real_replace, real_rmtree = os.replace, shutil.rmtree
    try:
        def boom():
            raise Injected(step)

        install_hook(step, boom)
        with pytest.raises(Injected):
            _write(tmp / "ds", seed=5, overwrite=True)
    finally:
        os.replace, shutil.rmtree = real_replace, real_rmtree
    # repaired when the failing writer released its lock: no second run needed. Failing after
    # the second rename, the new dataset is already published
    assert _fingerprint(tmp / "ds") == (new if step == "before-remove-old" else old)
    assert not list(tmp.glob(".ds.old-*")) and not list(tmp.glob(".ds.tmp-*"))
    _write(tmp / "ds", seed=5, overwrite=True)
    assert _fingerprint(tmp / "ds") == new


KILL_SCRIPT = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[3])
sys.path.insert(0, sys.argv[4])
from test_overwrite_swap import install_hook, _write
from pathlib import Path
install_hook(sys.argv[2], lambda: os.kill(os.getpid(), signal.SIGKILL))
_write(Path(sys.argv[1]) / "ds", seed=5, overwrite=True)
"""


@pytest.mark.parametrize("step", list(STEPS))
def test_a_kill_at_each_step_is_repaired_by_the_next_writer(two_versions, step):
    tmp, old, new = two_versions
    here = str(Path(__file__).parent)
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(tmp), step, SRC, here],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    stranded = list(tmp.glob(".ds.old-*"))
    if step == "before-rename-old":
        assert _fingerprint(tmp / "ds") == old and not stranded
    elif step == "before-rename-new":  # the window the issue found: no OUT at all
        assert not (tmp / "ds").exists() and len(stranded) == 1
        with pytest.raises(DatasetError, match=r"interrupted --overwrite left the previous copy"):
            Dataset.open(tmp / "ds")
    else:
        assert _fingerprint(tmp / "ds") == new and len(stranded) == 1
    # the next writer (here one that publishes nothing) repairs it under the lock
    with pytest.raises(RuntimeError):
        with DatasetWriter(tmp / "ds", overwrite=True):
            raise RuntimeError("abandon this write")
    assert _fingerprint(tmp / "ds") == (new if step == "before-remove-old" else old)
    assert not list(tmp.glob(".ds.old-*")) and not list(tmp.glob(".ds.tmp-*"))
    assert recover_interrupted_swap(tmp / "ds") is None
