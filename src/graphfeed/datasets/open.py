"""``open_dataset``: one name for a dataset anywhere in graphfeed, a built-in synthetic one
(``tiny``, ``small``, ``medium``, ``link``, ``hetero``, ``hetero-link``: ``synthetic.SPECS``) or a
prepared dataset folder."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..errors import GraphfeedError

__all__ = ["open_dataset", "dataset_path"]


def dataset_path(spec: str, data_root: Optional[str] = None, *, verbose: bool = False) -> Path:
    """The folder of dataset ``spec``: a built-in name's cache folder (generated on first use, as
    :func:`open_dataset` does) or ``spec`` itself when it is a folder."""
    from . import synthetic

    if spec in synthetic.SPECS and not Path(spec).is_dir():
        root = Path(data_root) if data_root else None
        path = synthetic.builtin_path(spec, root)
        if not (path / "graphfeed.json").exists():
            synthetic.load_builtin(spec, root, verbose=verbose, validate="quick")
        return path
    path = Path(spec)
    if path.is_dir():
        return path
    raise GraphfeedError(
        f"dataset {spec!r} is neither a built-in dataset ({', '.join(synthetic.SPECS)}) nor a "
        f"folder; prepare one with 'graphfeed prepare'"
    )


def open_dataset(spec: str, data_root: Optional[str] = None, *, verbose: bool = False):
    """A built-in name (a key of ``synthetic.SPECS``: ``tiny``, ``small``, ``medium``; ``link``
    for link prediction; ``hetero`` and ``hetero-link``, typed) or a prepared dataset folder,
    opened as a
    :class:`~graphfeed.datasets.format.Dataset`.

    A built-in dataset is generated on first use and cached under ``data_root`` (default
    ``$GRAPHFEED_HOME/datasets``); ``verbose`` reports its generation on stderr. Anything else
    must be a folder written by ``graphfeed prepare`` (opened with the full validation).
    """
    from . import synthetic

    if spec in synthetic.SPECS:
        return synthetic.load_builtin(spec, Path(data_root) if data_root else None, verbose=verbose)
    path = Path(spec)
    if path.is_dir():
        from .format import Dataset

        return Dataset.open(path)
    raise GraphfeedError(
        f"dataset {spec!r} is neither a built-in dataset ({', '.join(synthetic.SPECS)}) nor a "
        f"folder; prepare one with 'graphfeed prepare'"
    )
