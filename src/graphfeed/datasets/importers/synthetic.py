"""``graphfeed prepare synthetic NAME OUT``: a built-in dataset written into any folder, at its
own size or scaled down (``--scale 0.01``), instead of the built-in cache under
``$GRAPHFEED_HOME``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from ..._memory import peak_rss_bytes
from . import PrepareReport


def prepare_synthetic(name: str, out, *, scale: float = 1.0, overwrite: bool = False,
                      progress=None, threads: Optional[int] = None) -> PrepareReport:
    """Generate built-in dataset ``name`` (``graphfeed.datasets.synthetic.SPECS``) into folder
    ``out``, ``scale`` times its size (``(0, 1]``; see ``synthetic.scaled``), atomically.
    ``threads``: how many threads generate ``papers`` (default: every core)."""
    from ..format import Dataset
    from ..synthetic import build_into

    t0 = time.perf_counter()
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} already exists (pass --overwrite to replace it)")
    build_into(name, out, scale=scale, overwrite=overwrite, progress=progress, threads=threads)
    ds = Dataset.open(out, validate="quick")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    meta = ds.metadata
    return PrepareReport(
        path=out, num_nodes=ds.num_nodes, num_edges=ds.num_edges, input_edges=0,
        num_classes=meta.task.num_classes if meta.task.type == "node_classification" else 0,
        split_sizes={k: int(s.sizes[0]) for k, s in meta.splits.items()},
        seconds=time.perf_counter() - t0, peak_rss_bytes=peak_rss_bytes(), dataset_bytes=size)
