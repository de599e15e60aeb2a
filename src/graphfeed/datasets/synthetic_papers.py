"""The built-in papers-sized dataset ``papers``: ogbn-papers100M's sizes, generated in minutes.

111,059,956 nodes, about 1.616 billion stored edges (ogbn-papers100M's 1,615,685,872 is the
target), 128 features stored as bfloat16 (28 GB), 172 classes, train/valid/test of 1,207,179 /
125,265 / 214,338 nodes. ``scale`` shrinks nodes, edges and splits together (``0.01``: 1.1M
nodes and 16M edges in a few seconds) and keeps the rest.

The graph is a degree-corrected block model written straight into its CSC arrays
(:mod:`._papers_kernels`): class sizes fall off as ``1 / (c + 3)``; inside a class, node
popularity follows a Zipf law over ranks with an offset (``(r + 100) ** -1``), so in- and
out-degrees have the same power-law tail, with hubs of 10^4-10^5 in-edges at full size and a
median in-degree of 2-3. 60% of a node's in-neighbours are of its own class (homophily), drawn
by popularity like the rest. Features are a class centroid under unit Gaussian noise, weak
enough that a model reading only a node's own row (an MLP) does far worse than one that also
averages its neighbours'.

Every array is a pure function of ``(seed, node id)``: nodes are generated in ranges, on all
cores (nogil numba kernels on threads), and written front to back; nothing of the size of the
edge list, and no sort of it, ever exists. Memory: the in-degrees and labels (16 bytes a node,
1.8 GB at full size) plus one range of edges and rows (about 400 MB).
"""

from __future__ import annotations

import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from .._checks import check_float
from ..errors import GraphfeedError

#: bump when the generator's output changes, so stale caches are not reused
GENERATOR_VERSION = 1
#: edges generated and written per step (int32: 128 MiB), rows of features per step (32 MiB)
EDGES_PER_STEP = 1 << 25
ROWS_PER_STEP = 1 << 17


@dataclass(frozen=True)
class PapersSpec:
    name: str = "papers"
    num_nodes: int = 111_059_956
    num_edges: int = 1_615_685_872  # the expected stored edge count (the generator lands within 0.01%)
    num_features: int = 128
    num_classes: int = 172
    num_train: int = 1_207_179
    num_valid: int = 125_265
    num_test: int = 214_338
    homophily: float = 0.6  # share of a node's in-neighbours drawn from its own class
    popularity_exponent: float = 1.0  # beta: rank r of a class drawn with weight (r + r0) ** -beta
    popularity_offset: float = 100.0  # r0: caps the hubs (about 1.1e5 in-edges at full size)
    class_exponent: float = 1.0  # class c holds a share (c + class_offset) ** -class_exponent
    class_offset: float = 3.0
    signal: float = 0.28  # centroid scale against unit noise: an MLP 43%, 2-layer SAGE 84% at scale 0.01
    seed: int = 15
    task: str = "node"

    def scaled(self, scale: float) -> "PapersSpec":
        """The same graph law with ``scale`` times the nodes, edges and split sizes."""
        scale = check_float("scale", scale, 0.0, 1.0, lo_open=True)
        if scale == 1.0:
            return self
        n = max(self.num_classes * 4, round(self.num_nodes * scale))
        k = n / self.num_nodes
        return dataclasses.replace(
            self, num_nodes=n, num_edges=round(self.num_edges * k),
            num_train=max(1, round(self.num_train * k)), num_valid=max(1, round(self.num_valid * k)),
            num_test=max(1, round(self.num_test * k)))

    @property
    def dataset_bytes(self) -> int:
        """What the dataset takes on disk: indptr, int32/int64 indices, labels, features, splits."""
        idx = 4 if self.num_nodes <= np.iinfo(np.int32).max else 8
        splits = 8 * (self.num_train + self.num_valid + self.num_test)
        return (8 * (self.num_nodes + 1) + idx * self.num_edges + 8 * self.num_nodes
                + 2 * self.num_features * self.num_nodes + splits)


SPEC = PapersSpec()


@dataclass(frozen=True)
class _Law:
    """The derived constants every kernel call takes."""

    n: int
    keys: np.ndarray  # uint64[4]: the node permutation's round keys
    split_keys: np.ndarray  # uint64[4]: the split permutation's
    half: np.uint64
    mask: np.uint64
    class_start: np.ndarray  # int64[C + 1]: position ranges of the classes
    gspan: np.ndarray  # float64[C]
    g0: float
    caps: np.ndarray  # int64[C]: largest in-degree of a class's nodes
    mean_degree: float

    @classmethod
    def of(cls, spec: PapersSpec) -> "_Law":
        from ._papers_kernels import _g

        n, c = spec.num_nodes, spec.num_classes
        if n < 2 * c:
            raise GraphfeedError(f"papers: {n} nodes cannot hold {c} classes of at least 2 nodes")
        bits = max(2, int(n - 1).bit_length())
        bits += bits & 1  # a balanced Feistel network: two halves of equal width
        half = bits // 2
        rng = np.random.default_rng(spec.seed)
        keys = rng.integers(0, 2**63, size=8, dtype=np.uint64)
        share = (np.arange(c) + spec.class_offset) ** -spec.class_exponent
        sizes = np.maximum(2, np.floor(n * share / share.sum()).astype(np.int64))
        sizes[0] += n - int(sizes.sum())  # the largest class takes the rounding
        assert sizes.min() >= 2 and int(sizes.sum()) == n
        start = np.zeros(c + 1, dtype=np.int64)
        np.cumsum(sizes, out=start[1:])
        beta, r0 = float(spec.popularity_exponent), float(spec.popularity_offset)
        g0 = float(_g(r0, beta))
        gspan = np.array([_g(m + r0, beta) - g0 for m in sizes], dtype=np.float64)
        # a column draws distinct sources, most from its class: at most half of it
        caps = np.maximum(1, np.minimum(sizes // 2, n // 4)).astype(np.int64)
        return cls(n, keys[:4].copy(), keys[4:].copy(), np.uint64(half),
                   np.uint64((1 << half) - 1), start, gspan, g0, caps, spec.num_edges / n)


def _threads(threads: Optional[int]) -> int:
    if threads is not None:
        return max(1, int(threads))
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def _ranges_by_weight(indptr: np.ndarray, lo: int, hi: int, parts: int) -> list:
    """``[lo, hi)`` in at most ``parts`` node ranges holding about equal numbers of edges."""
    base, total = int(indptr[lo]), int(indptr[hi] - indptr[lo])
    cuts = [lo]
    for k in range(1, parts):
        at = int(np.searchsorted(indptr, base + total * k // parts, side="left"))
        cuts.append(min(hi, max(cuts[-1], at)))
    cuts.append(hi)
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def build(path, spec: PapersSpec = SPEC, *, scale: float = 1.0, overwrite: bool = False,
          threads: Optional[int] = None, progress=None) -> Path:
    """Generate ``spec`` (times ``scale``) into dataset folder ``path``, atomically.

    ``threads``: how many nodes' ranges are generated at once (default: every core this process
    may use). Refuses, before writing anything, when the file system has less free space than
    the dataset needs (:attr:`PapersSpec.dataset_bytes`)."""
    from .._io import save_npy  # noqa: F401  (DatasetWriter.save_array uses it)
    from .._progress import Progress
    from . import _papers_kernels as K
    from .build import NpyAppender, check_disk_space
    from .format import DatasetWriter, _metadata
    from .schema import ArraySpec, GraphSpec, TaskSpec

    spec = spec.scaled(scale)
    path = Path(path)
    progress = progress or Progress(False)
    law = _Law.of(spec)
    n, f, nt = spec.num_nodes, spec.num_features, _threads(threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    check_disk_space(spec.dataset_bytes, path.parent, f"the built-in dataset {spec.name!r}")
    t0 = time.perf_counter()
    keys, half, mask = law.keys, law.half, law.mask
    idx_dtype = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    seed = np.uint64(spec.seed)
    with ThreadPoolExecutor(nt, thread_name_prefix="gf-papers") as pool, \
            DatasetWriter(path, overwrite=overwrite) as w:

        def parallel(fn, ranges):
            for fut in [pool.submit(fn, a, b) for a, b in ranges]:
                fut.result()

        # 1. in-degrees (into indptr[1:]) and labels, then indptr by a prefix sum
        indptr = np.zeros(n + 1, dtype=np.int64)
        labels = np.empty(n, dtype=np.int64)
        step = -(-n // (nt * 8))
        parallel(lambda a, b: K.nodes_degrees_labels(
            a, b, n, keys, half, mask, law.class_start, law.gspan, law.g0,
            spec.popularity_offset, spec.popularity_exponent, law.mean_degree, law.caps,
            seed ^ np.uint64(1), indptr[1 + a : 1 + b], labels[a:b]),
            [(a, min(n, a + step)) for a in range(0, n, step)])
        np.cumsum(indptr, out=indptr)
        num_edges = int(indptr[-1])
        w.save_array("graph/indptr.npy", indptr)
        w.save_array("node_features/label.npy", labels)

        # 2. the columns, a range of destinations at a time, written front to back
        progress.start("papers: edges", num_edges, unit="edge")
        with NpyAppender(w.path_for("graph/indices.npy"), idx_dtype, rows_bound=num_edges) as out:
            buf = np.empty(min(num_edges, EDGES_PER_STEP) or 1, dtype=idx_dtype)
            v = 0
            while v < n:
                hi = int(np.searchsorted(indptr, indptr[v] + EDGES_PER_STEP, side="right")) - 1
                hi = min(n, max(hi, v + 1))
                width = int(indptr[hi] - indptr[v])
                chunk = buf if width <= buf.shape[0] else np.empty(width, dtype=idx_dtype)
                base = int(indptr[v])

                def fill(a, b, chunk=chunk, base=base):
                    off = int(indptr[a]) - base
                    K.fill_columns(a, b, indptr, chunk[off : off + int(indptr[b] - indptr[a])], n,
                                   keys, half, mask, law.class_start, law.gspan, law.g0,
                                   spec.popularity_offset, spec.popularity_exponent,
                                   spec.homophily, seed ^ np.uint64(2))

                parallel(fill, _ranges_by_weight(indptr, v, hi, nt))
                out.write(chunk[:width])
                progress.update(int(indptr[hi]))
                v = hi
        progress.done()
        del indptr

        # 3. features: bfloat16 bits of centroid + noise, a range of rows at a time
        rng = np.random.default_rng(spec.seed + 1)
        centroids = rng.standard_normal((spec.num_classes, f)).astype(np.float64)
        progress.start("papers: features", n, unit="row")
        with NpyAppender(w.path_for("node_features/feat.npy"), np.uint16, row_shape=(f,),
                         rows_bound=n) as out:
            rows = np.empty((min(n, ROWS_PER_STEP), f), dtype=np.uint16)
            for a in range(0, n, ROWS_PER_STEP):
                b = min(n, a + ROWS_PER_STEP)
                part = -(-(b - a) // nt)
                parallel(lambda x, y, a=a: K.fill_features(
                    x, y, labels[x:y], centroids, spec.signal, seed ^ np.uint64(3),
                    rows[x - a : y - a]), [(x, min(b, x + part)) for x in range(a, b, part)])
                out.write(rows[: b - a])
                progress.update(b)
        progress.done()
        del labels

        # 4. splits: the first positions of a second permutation, so disjoint by construction
        k = spec.num_train + spec.num_valid + spec.num_test
        if k > n:
            raise GraphfeedError(f"papers: splits of {k} nodes do not fit {n} nodes")
        ids = np.empty(k, dtype=np.int64)
        K.permute_range(0, k, n, law.split_keys, half, mask, ids)
        cut = np.cumsum([0, spec.num_train, spec.num_valid, spec.num_test])
        split_specs = {name: w.save_split(name, [np.sort(ids[cut[i] : cut[i + 1]])])
                       for i, name in enumerate(("train", "valid", "test"))}
        extra = {"generator": "graphfeed.datasets.synthetic_papers",
                 "generator_version": GENERATOR_VERSION, "scale": float(scale),
                 "spec": dataclasses.asdict(spec), "seconds": round(time.perf_counter() - t0, 1)}
        meta = _metadata(
            f"synthetic-{spec.name}" + ("" if scale == 1.0 else f"-x{scale:g}"), n,
            GraphSpec(num_edges, "graph/indptr.npy", "graph/indices.npy", None, False),
            {"feat": ArraySpec("node_features/feat.npy", "bfloat16", (n, f)),
             "label": ArraySpec("node_features/label.npy", "int64", (n,))},
            split_specs, TaskSpec("node_classification", "label", spec.num_classes, None), {}, extra)
        progress.note("papers: validating ...")
        w.finish(meta)
    return path
