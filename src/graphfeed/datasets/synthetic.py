"""The built-in synthetic datasets: node classification ``tiny``, ``small``, ``medium`` and the
papers100M-sized ``papers`` (:mod:`.synthetic_papers`), link prediction ``link``, and the
heterogeneous ``hetero`` and ``hetero-link`` (:mod:`.synthetic_hetero`).

A degree-corrected stochastic block model: every node has a class (its community) and a
power-law "popularity" weight; edge endpoints are drawn in proportion to popularity, and with
probability ``homophily`` both ends share a class. Features are a class centroid buried in strong
Gaussian noise, so a model that looks only at a node's own features (an MLP) does poorly while a
GNN that averages over same-class neighbours recovers the class.

Generation is vectorised numpy plus the O(E) numba CSC build, deterministic for a given size
(fixed seed), and cached on disk as a prepared dataset folder under
``$GRAPHFEED_HOME/datasets`` (default ``~/.cache/graphfeed/datasets``).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..errors import GraphfeedError
from . import synthetic_hetero as _hetero
from . import synthetic_hetero_link as _hetero_link
from . import synthetic_papers as _papers

#: bump when the generator changes, so stale caches are not reused
GENERATOR_VERSION = 2


@dataclass(frozen=True)
class SyntheticSpec:
    name: str
    num_nodes: int
    edges_per_node: float  # undirected edges drawn per node before dedupe (x2 stored)
    num_features: int
    num_classes: int
    homophily: float = 0.8
    power_law_alpha: float = 1.0  # Pareto tail of node popularity: median degree well below the mean
    signal: float = 0.4  # centroid scale relative to unit noise (tuned: MLP ~55%, GNN ~85%)
    train_fraction: float = 0.2
    valid_fraction: float = 0.1
    test_fraction: float = 0.2
    seed: int = 0
    task: str = "node"  # "link": a link-prediction dataset (graphfeed.datasets.link)


SPECS = {
    "tiny": SyntheticSpec("tiny", 3_000, 6.0, 32, 5, seed=11),
    "small": SyntheticSpec("small", 60_000, 8.0, 64, 10, seed=12),
    "medium": SyntheticSpec("medium", 1_000_000, 13.0, 100, 16, seed=13),
    # edge fractions: 85/5/10 of the edges for train/valid/test pairs
    "link": SyntheticSpec("link", 20_000, 8.0, 32, 100, homophily=0.95, signal=1.0,
                          train_fraction=0.85, valid_fraction=0.05, test_fraction=0.10,
                          seed=14, task="link"),
}
# the heterogeneous one (three node types, four relations): graphfeed.datasets.synthetic_hetero
SPECS["hetero"] = _hetero.SPEC
# typed link prediction (author writes paper) on that graph: graphfeed.datasets.synthetic_hetero_link
SPECS["hetero-link"] = _hetero_link.SPEC
# ogbn-papers100M's sizes (111M nodes, 1.6B edges, 28 GB of bfloat16 features), generated straight
# into its CSC arrays: graphfeed.datasets.synthetic_papers
SPECS["papers"] = _papers.SPEC


def plain_node_names() -> list[str]:
    """The built-in datasets of one node type with a node-classification task (the ones
    ``graphfeed partition`` and the feature and memory benchmarks take), in ``SPECS`` order."""
    return [n for n, s in SPECS.items()
            if isinstance(s, (SyntheticSpec, _papers.PapersSpec)) and s.task == "node"]


@dataclass
class SyntheticArrays:
    src: np.ndarray
    dst: np.ndarray
    num_nodes: int
    features: np.ndarray
    labels: np.ndarray
    splits: dict


def default_root() -> Path:
    home = os.environ.get("GRAPHFEED_HOME")
    base = Path(home) if home else Path.home() / ".cache" / "graphfeed"
    return base / "datasets"


def get_spec(name: str) -> SyntheticSpec:
    try:
        return SPECS[name]
    except KeyError:
        raise GraphfeedError(
            f"unknown built-in dataset {name!r}; choose one of {sorted(SPECS)} or pass a "
            f"prepared dataset folder"
        ) from None


def generate_arrays(spec: SyntheticSpec) -> SyntheticArrays:
    """Raw COO edges (one direction), features, labels and splits for ``spec``."""
    rng = np.random.default_rng(spec.seed)
    n, c = spec.num_nodes, spec.num_classes
    labels = rng.integers(0, c, size=n, dtype=np.int64)
    # power-law popularity, capped so a single hub does not swallow the graph
    theta = rng.pareto(spec.power_law_alpha, size=n) + 1.0
    np.minimum(theta, n ** 0.75, out=theta)

    num_edges = int(n * spec.edges_per_node)
    # nodes grouped by class: a class's popularity mass is one contiguous range of the cumsum
    order = np.argsort(labels, kind="stable")
    cum = np.cumsum(theta[order])
    total = cum[-1]
    class_end = np.searchsorted(labels[order], np.arange(c), side="right")
    class_start = np.concatenate(([0], class_end[:-1]))
    lo = np.where(class_start > 0, cum[np.maximum(class_start - 1, 0)], 0.0)
    hi = cum[class_end - 1]

    def draw(lo_mass, hi_mass):
        u = rng.random(lo_mass.shape[0] if np.ndim(lo_mass) else num_edges)
        target = lo_mass + u * (hi_mass - lo_mass)
        pos = np.searchsorted(cum, target, side="right")
        return order[np.minimum(pos, n - 1)]

    src = draw(np.zeros(num_edges), np.full(num_edges, total))
    same = rng.random(num_edges) < spec.homophily
    src_cls = labels[src]
    dst_lo = np.where(same, lo[src_cls], 0.0)
    dst_hi = np.where(same, hi[src_cls], total)
    dst = draw(dst_lo, dst_hi)
    del same, src_cls, dst_lo, dst_hi

    centroids = rng.standard_normal((c, spec.num_features)).astype(np.float32)
    centroids *= spec.signal / np.sqrt(spec.num_features / 16.0)
    features = rng.standard_normal((n, spec.num_features), dtype=np.float32)
    features += centroids[labels]

    perm = rng.permutation(n)
    n_tr = int(n * spec.train_fraction)
    n_va = int(n * spec.valid_fraction)
    n_te = int(n * spec.test_fraction)
    splits = {
        "train": np.sort(perm[:n_tr]),
        "valid": np.sort(perm[n_tr : n_tr + n_va]),
        "test": np.sort(perm[n_tr + n_va : n_tr + n_va + n_te]),
    }
    return SyntheticArrays(src, dst, n, features, labels, splits)


def scaled(spec, scale: float):
    """``spec`` with ``scale`` (in ``(0, 1]``) times its nodes (and, for ``papers``, its edges and
    splits); the typed datasets have no size to scale."""
    from .._checks import check_float

    scale = check_float("scale", scale, 0.0, 1.0, lo_open=True)
    if scale == 1.0:
        return spec
    if isinstance(spec, _papers.PapersSpec):
        return spec.scaled(scale)
    if isinstance(spec, SyntheticSpec):
        from dataclasses import replace

        return replace(spec, num_nodes=max(4 * spec.num_classes, round(spec.num_nodes * scale)))
    raise GraphfeedError(f"built-in dataset {spec.name!r} cannot be scaled (it has no single node "
                         f"count); --scale works for {', '.join(scalable_names())}")


def scalable_names() -> list[str]:
    return [n for n, s in SPECS.items() if isinstance(s, (SyntheticSpec, _papers.PapersSpec))]


def build(name: str, root: Optional[Path] = None, *, overwrite: bool = False) -> Path:
    """Generate built-in dataset ``name`` into its cache folder under ``root`` and return it."""
    return build_into(name, builtin_path(name, root), overwrite=overwrite)


def build_into(name: str, path, *, scale: float = 1.0, overwrite: bool = False,
               progress=None, threads: Optional[int] = None) -> Path:
    """Generate built-in dataset ``name`` (``scale`` times its size, see :func:`scaled`) into
    folder ``path``, atomically, and return ``path``. ``progress``/``threads``: for ``papers``
    (a progress bar; threads generating at once, default every core)."""
    from ..graph.csc import CSCGraph
    from .format import write_dataset

    base = get_spec(name)
    spec = scaled(base, scale)
    path = Path(path)
    if isinstance(spec, _papers.PapersSpec):
        return _papers.build(path, base, scale=scale, overwrite=overwrite, threads=threads,
                             progress=progress)
    if isinstance(spec, _hetero.HeteroSyntheticSpec):
        return _hetero.build(path, spec, overwrite=overwrite)
    if isinstance(spec, _hetero_link.HeteroLinkSpec):
        return _hetero_link.build(path, spec, overwrite=overwrite)
    a = generate_arrays(spec)
    suffix = "" if scale == 1.0 else f"-x{scale:g}"
    if spec.task == "link":
        from .link import build_synthetic

        return build_synthetic(spec, a, path, overwrite=overwrite, extra={
            "generator": "graphfeed.datasets.link", "generator_version": GENERATOR_VERSION,
            "spec": dict(spec.__dict__)})
    graph = CSCGraph.from_edges(
        a.src, a.dst, a.num_nodes, add_reverse=True, drop_self_loops=True, drop_duplicates=True
    )
    del a.src, a.dst
    write_dataset(
        path,
        graph=graph,
        node_features={"feat": a.features, "label": a.labels},
        splits=a.splits,
        num_classes=spec.num_classes,
        target="label",
        name=f"synthetic-{name}{suffix}",
        overwrite=overwrite,
        extra={"generator": "graphfeed.datasets.synthetic", "generator_version": GENERATOR_VERSION,
               "spec": {k: v for k, v in spec.__dict__.items()}},
    )
    return path


def builtin_path(name: str, root: Optional[Path] = None) -> Path:
    spec = get_spec(name)
    root = Path(root) if root is not None else default_root()
    version = _papers.GENERATOR_VERSION if isinstance(spec, _papers.PapersSpec) else GENERATOR_VERSION
    return root / f"synthetic-{name}-v{version}"


def load_builtin(name: str = "small", root: Optional[Path] = None, *, verbose: bool = False, **open_kw):
    """Open built-in dataset ``name``, generating and caching it on first use.

    A cache folder that cannot be written (a read-only mount, no permission, a full disk) is a
    ``GraphfeedError`` naming it and the option that chose it (``--data-root``, or
    ``GRAPHFEED_HOME`` for the default); a read-only folder that already holds the dataset is
    fine (nothing is written then)."""
    from .format import Dataset

    from .._io import file_lock, writing_to

    path = builtin_path(name, root)
    where = (("--data-root", None) if root is not None else
             ("built-in dataset cache", "set GRAPHFEED_HOME or pass --data-root a writable folder"))
    if not (path / "graphfeed.json").exists():
        # ranks started together (torchrun, --nproc) on a cold cache: one generates, the others
        # wait for it and then open the result
        with writing_to(path.parent, *where), \
                file_lock(path.with_name(f".{path.name}.build-lock")):
            if not (path / "graphfeed.json").exists():
                t0 = time.perf_counter()
                progress = None
                if verbose:
                    spec = get_spec(name)
                    size = ""
                    if isinstance(spec, _papers.PapersSpec):
                        from .._progress import Progress
                        from .._units import format_bytes

                        size = (f" ({format_bytes(spec.dataset_bytes)} on disk; a few minutes "
                                f"per core)")
                        progress = Progress()
                    print(f"graphfeed: generating built-in dataset '{name}' into {path}{size} ...",
                          file=sys.stderr, flush=True)
                # replaces a stale partial folder
                build_into(name, path, overwrite=path.exists(), progress=progress)
                if verbose:
                    print(f"graphfeed: generated '{name}' in {time.perf_counter() - t0:.1f} s",
                          file=sys.stderr, flush=True)
    return Dataset.open(path, **open_kw)
