"""Checkpoints: one file, ``DIR/checkpoint.pt``, replaced atomically after every epoch (and at a
graceful stop mid-epoch), read back with ``torch.load(weights_only=True)`` (no pickle).

Contents (tensors, numbers, strings, lists and dicts only): ``format``, ``model`` and ``optimizer``
state dicts, ``best_model`` (the state at the best epoch, for ``--predict``), ``loader``
(``{"epoch", "next_batch"}``: where the next batch comes from), ``config`` (``TrainConfig``
fields), ``epochs`` (``EpochStats`` dicts so far), ``best`` (best epoch, its main-metric value and
test metrics), ``bad_epochs`` (early-stopping count), ``rng`` (torch's CPU generator, for dropout),
``partial`` (the running loss/accuracy sums of an interrupted epoch, else ``None``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from .._io import atomic_write
from ..errors import GraphfeedError

FORMAT = 1
FILENAME = "checkpoint.pt"
KEYS = ("format", "model", "optimizer", "best_model", "loader", "config", "epochs", "best",
        "bad_epochs", "rng", "partial")


def checkpoint_path(folder) -> Path:
    return Path(folder) / FILENAME


def save_checkpoint(folder, state: Mapping) -> Path:
    """Write ``state`` to ``folder/checkpoint.pt`` via a temporary file, fsync and rename: a kill
    at any moment leaves the previous checkpoint or the new one, never a torn file."""
    import torch

    missing = [k for k in KEYS if k not in state]
    assert not missing, f"checkpoint state lacks {missing}"
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GraphfeedError(f"cannot create checkpoint folder {folder}: {e.strerror or e}") from None
    if not folder.is_dir():
        raise GraphfeedError(f"checkpoint folder {folder} is not a folder")
    final = checkpoint_path(folder)
    try:
        atomic_write(final, lambda f: torch.save(dict(state), f))
    except OSError as e:
        raise GraphfeedError(f"cannot write checkpoint {final}: {e.strerror or e}") from None
    return final


def load_checkpoint(folder) -> dict:
    """The state saved by :func:`save_checkpoint` (on CPU); errors name the file."""
    import pickle

    import torch

    path = checkpoint_path(folder)
    if not Path(folder).is_dir():
        raise GraphfeedError(f"checkpoint folder {folder} does not exist")
    if not path.is_file():
        raise GraphfeedError(f"{path}: no checkpoint there (written by 'graphfeed train --save')")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise GraphfeedError(f"{path}: not a readable graphfeed checkpoint ({first})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        got = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise GraphfeedError(f"{path}: checkpoint format {got!r}, expected {FORMAT}")
    missing = [k for k in KEYS if k not in state]
    if missing:
        raise GraphfeedError(f"{path}: checkpoint lacks {missing}")
    return state


def check_compatible(path, saved: Mapping, current: Mapping, keys) -> None:
    """Refuse to continue a run with settings that change what it computes."""
    for k in keys:
        a, b = saved.get(k), current.get(k)
        if isinstance(a, (list, tuple)):
            a = list(a)
        if isinstance(b, (list, tuple)):
            b = list(b)
        if a != b:
            raise GraphfeedError(
                f"{checkpoint_path(path)} was written with {k}={a!r}, but this run has {k}={b!r}; "
                f"resume with the same {k}"
            )
