"""Split a dataset into parts that own contiguous id ranges, and write them (atomically).

``assign_parts`` decides which part owns each node (METIS through ``pymetis``, with the train
ids balanced as a second constraint; or uniformly at random); ``write_partition`` relabels the
nodes part by part and writes one folder per part plus the book (``book.py``). The whole output
is built in a temporary sibling folder, checked value by value, and renamed into place, as
``DatasetWriter`` does: an interrupted run leaves nothing that opens.

Memory: METIS needs the symmetrised graph in RAM (int64 CSR, ``E`` to ``2 E`` entries) plus
its own coarsened copies and workspace: about 128 B per entry and 190 B per node in all
(:func:`metis_memory`), and a partition whose estimate exceeds the available memory is refused
before any work (:func:`check_metis_memory`). Random needs O(N). The write is streamed: one
part's CSC at a time (its edges, int64), features copied in row chunks from the memory-mapped
source.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import numpy as np

from .._checks import check_int
from .._io import atomic_dir, publish_lock, save_npy
from ..errors import GraphfeedError, MissingDependencyError
from . import _kernels as K
from .book import (BOOK_FILE, BOOK_FORMAT, BOOK_VERSION, METHODS, PartitionBook, check_partition,
                   part_dir, read_book)

#: rows per chunk when features are copied into a part (bounded memory whatever the width)
_CHUNK_BYTES = 64 << 20


#: METIS's own memory (every coarsening level's graph with its edge weights, the per-node
#: arrays of matching, refinement and balance, its workspace; idx_t is 64-bit in pymetis),
#: bytes per entry of the symmetrised adjacency and per node: the upper envelope of
#: ``pymetis.part_graph``'s peak RSS on generated graphs of 62.5k-1M nodes and 1-18M entries,
#: 2 to 64 parts (measured 88-131 B per entry; docs/benchmarks.md, "Partitioner peak memory")
METIS_BYTES_PER_ENTRY = 120
METIS_BYTES_PER_NODE = 150


def metis_memory(num_nodes: int, num_edges: int, entries: Optional[int] = None, *,
                 built: bool = False) -> int:
    """Estimated peak bytes of the METIS path for a graph of ``num_nodes`` nodes and
    ``num_edges`` stored edges: the larger of building the symmetrised CSR (``symmetrised``:
    ``16 (N + 1) + 16 E``) and running METIS on it (that CSR, ``8 (N + 1) + 8 M``; the two
    vertex weights, ``16 N``; the answer, pymetis's and ours, ``16 N``; METIS's own,
    ``METIS_BYTES_PER_ENTRY * M + METIS_BYTES_PER_NODE * N``).

    ``entries`` (``M``): of the symmetrised adjacency (both directions, no self loops or
    repeats) when known. Unknown, it is ``E``: what a graph stored both ways (the usual GNN
    dataset) symmetrises to, and the fewest entries ``E`` distinct edges can give; a directed
    graph without reciprocal edges gives up to ``2 E``, hence the second check once ``M`` is
    known. ``built``: the CSR exists already, only the run is still ahead."""
    n, e = int(num_nodes), int(num_edges)
    m = e if entries is None else int(entries)
    build = 16 * (n + 1) + 16 * e
    run = (8 * (n + 1) + 8 * m + 32 * n
           + METIS_BYTES_PER_ENTRY * m + METIS_BYTES_PER_NODE * n)
    return run if built else max(build, run)


def check_metis_memory(num_nodes: int, num_edges: int, entries: Optional[int] = None, *,
                       held: int = 0, available: Optional[int] = None) -> int:
    """Refuse (``GraphfeedError``, one line) a METIS partition whose estimated peak
    (:func:`metis_memory`) exceeds the memory available to this process (``MemAvailable``, or
    the cgroup's limit less its usage: ``graphfeed._memory.host_memory``) plus ``held`` (what
    the path already holds of that peak: the CSR, once built; then only the run is checked).
    Returns the estimate."""
    need = metis_memory(num_nodes, num_edges, entries, built=held > 0)
    if available is None:
        from .. import _memory

        available = _memory.host_memory()[1]
    if need > available + held:
        from .._units import format_bytes

        what = f"{int(entries):,} symmetrised entries" if entries is not None else \
            f"{int(num_edges):,} edges"
        raise GraphfeedError(
            f"partitioning with METIS needs about {format_bytes(need)} of memory for "
            f"{int(num_nodes):,} nodes and {what}, but {format_bytes(available + held)} is "
            f"available; use --method random (memory O(nodes)) or a machine with more memory")
    return need


def symmetrised(graph) -> tuple:
    """``(xadj, adjncy)``: the CSR of ``A + A^T`` of ``graph`` (a CSC) without self loops or
    repeats, rows sorted, int64 (what METIS partitions, and what pymetis passes on without a
    copy). Built by three numba passes: degrees, both directions of every edge, then each row
    sorted and compacted in place; the tail the repeats leave is handed back to the allocator
    (``ndarray.resize``) before METIS runs. Peak: ``16 (N + 1) + 16 E`` bytes (row starts,
    cursors, two entries per edge), against at least four copies of the symmetrised edge list
    through scipy (COO index pairs included) before."""
    n = graph.num_nodes
    indptr = np.asarray(graph.indptr)
    indices = np.asarray(graph.indices)
    xadj = np.zeros(n + 1, np.int64)
    K.sym_degrees(indptr, indices, xadj)
    adjncy = np.empty(int(xadj[-1]), np.int64)
    pos = np.empty(n, np.int64)
    K.sym_fill(indptr, indices, xadj, pos, adjncy)
    del pos
    kept = int(K.sort_unique_rows(xadj, adjncy))
    if kept < adjncy.shape[0]:
        try:
            adjncy.resize(kept, refcheck=True)  # realloc: the tail goes back, no copy
        except ValueError:  # pragma: no cover - another reference to the array exists
            adjncy = adjncy[:kept].copy()
    return xadj, adjncy


def _vertex_weights(n: int, train_ids) -> np.ndarray:
    """Two weights per node for METIS's two balance constraints: 1 (nodes) and 1 if a train
    id (train ids balanced too), interleaved, int64."""
    w = np.zeros((n, 2), np.int64)
    w[:, 0] = 1
    w[np.asarray(train_ids, dtype=np.int64), 1] = 1
    return w.ravel()


def _metis_parts(dataset, parts: int, seed: int) -> np.ndarray:
    try:
        import pymetis
    except ImportError:
        raise MissingDependencyError(
            "pymetis", "partition", "partitioning with method 'metis' (or use method 'random')"
        ) from None
    g = dataset.graph
    n, e = g.num_nodes, int(g.num_edges)
    # refuse before any work what cannot fit (the fewest entries E can symmetrise to) ...
    check_metis_memory(n, e)
    xadj, adjncy = symmetrised(g)
    # ... and, with the exact entries, before METIS (the long part) starts
    check_metis_memory(n, e, adjncy.shape[0], held=xadj.nbytes + adjncy.nbytes)
    vweights = _vertex_weights(n, dataset.train_ids)
    opts = pymetis.Options(seed=seed)
    res = pymetis.part_graph(parts, pymetis.CSRAdjacency(xadj, adjncy), vweights=vweights,
                             options=opts)
    return np.asarray(res.vertex_part, dtype=np.int64)


def assign_parts(dataset, parts: int, method: str = "metis", seed: int = 0) -> np.ndarray:
    """The part of every node (int64, ``num_nodes``). ``random``: a uniformly random balanced
    assignment (each part gets ``N / parts`` nodes, +-1), from ``seed``; ``metis``: METIS k-way
    on the symmetrised graph with two balance constraints (nodes, train ids)."""
    parts = check_int("parts", parts, 1)
    seed = check_int("seed", seed, 0, 2**63 - 1)
    if method not in METHODS:
        raise GraphfeedError(f"unknown partition method {method!r}; choose one of "
                             f"{', '.join(METHODS)}")
    n = dataset.num_nodes
    if parts > n:
        raise GraphfeedError(f"parts={parts} is more than the dataset's {n} nodes")
    if parts == 1:
        return np.zeros(n, np.int64)
    if method == "random":
        rng = np.random.default_rng(seed)
        return rng.permutation(np.arange(n, dtype=np.int64) % parts)
    return _metis_parts(dataset, parts, seed)


def _copy_rows(src, members: np.ndarray, out_path: Path) -> None:
    """``src[members]`` into a new ``.npy`` at ``out_path``, in row chunks."""
    out = np.lib.format.open_memmap(out_path, mode="w+", dtype=src.dtype,
                                    shape=(members.shape[0], *src.shape[1:]))
    row = max(1, int(np.prod(src.shape[1:], dtype=np.int64)) * src.dtype.itemsize)
    step = max(1, _CHUNK_BYTES // row)
    for a in range(0, members.shape[0], step):
        out[a:a + step] = src[members[a:a + step]]
    out.flush()
    del out


def write_partition(dataset, out, part_of: np.ndarray, *, method: str, seed: int = 0,
                    overwrite: bool = False, stats: Optional[dict] = None) -> PartitionBook:
    """Write ``dataset`` split by ``part_of`` (the part of every node) to folder ``out``.

    New ids: part 0's nodes first, each part's nodes in increasing dataset id. Returns the book
    of the published folder (checked value by value before the rename)."""
    n = dataset.num_nodes
    part_of = np.asarray(part_of, dtype=np.int64)
    if part_of.shape != (n,):
        raise GraphfeedError(f"part_of must have one entry per node ({n}), got {part_of.shape}")
    parts = int(part_of.max()) + 1 if n else 1
    if part_of.size and int(part_of.min()) < 0:
        raise GraphfeedError("part_of holds a negative part")
    counts = np.bincount(part_of, minlength=parts)
    offsets = np.zeros(parts + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    orig_ids = np.argsort(part_of, kind="stable").astype(np.int64)
    new_ids = np.empty(n, np.int64)
    new_ids[orig_ids] = np.arange(n, dtype=np.int64)
    g = dataset.graph
    indptr = np.asarray(g.indptr, dtype=np.int64)
    indices = np.asarray(g.indices)
    idx_dtype = np.int32 if n < 2**31 else np.int64
    features = {name: dataset.metadata.node_features[name] for name in dataset.metadata.node_features}
    split_names = tuple(dataset.split_names)
    splits = {s: np.asarray(dataset.split(s), dtype=np.int64) for s in split_names}
    train_per_part = np.bincount(part_of[splits["train"]], minlength=parts) \
        if "train" in splits else np.zeros(parts, np.int64)
    edges_per_part = np.zeros(parts, np.int64)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    from ..datasets.build import check_disk_space

    # every part holds its nodes' rows, in-edges and ids: about the dataset again, plus the book
    need = (indptr.nbytes + np.dtype(idx_dtype).itemsize * g.num_edges + 8 * (n + parts) * 2
            + sum(int(dataset.features[f].nbytes) for f in features)
            + sum(int(a.nbytes) for a in splits.values()))
    check_disk_space(need, out.parent, f"partitioning {dataset.name!r} into {parts} parts")
    # one writer at a time (a second waits, then finds OUT there and is refused without
    # overwrite); leftovers of a killed run are cleared and an interrupted swap is undone
    with publish_lock(out, (BOOK_FILE,), wait=True, what="this partition"), \
            atomic_dir(out, overwrite=overwrite, markers=(BOOK_FILE,)) as tmp:
        (tmp / "book").mkdir()
        save_npy(tmp / "book/orig_ids.npy", orig_ids, fsync=False)
        for k in range(parts):
            lo, hi = int(offsets[k]), int(offsets[k + 1])
            members = orig_ids[lo:hi]
            root = tmp / part_dir(k)
            (root / "node_features").mkdir(parents=True)
            (root / "splits").mkdir()
            pptr = np.empty(hi - lo + 1, np.int64)
            K.part_degrees(indptr, members, pptr)
            pind = np.empty(int(pptr[-1]), idx_dtype)
            K.part_fill(indptr, indices, members, new_ids, pptr, pind)
            edges_per_part[k] = pind.shape[0]
            save_npy(root / "indptr.npy", pptr, fsync=False)
            save_npy(root / "indices.npy", pind, fsync=False)
            del pind
            save_npy(root / "orig_ids.npy", members, fsync=False)
            for name in features:
                _copy_rows(dataset.arrays.node_features[name], members,
                           root / "node_features" / f"{name}.npy")
            for s, ids in splits.items():
                mine = np.sort(new_ids[ids[part_of[ids] == k]])
                save_npy(root / "splits" / f"{s}.npy", mine, fsync=False)
        cut = int(K.cut_edges(indptr, indices, part_of))

        def imbalance(x) -> float:
            return float(x.max() / x.mean()) if x.size and x.mean() > 0 else 1.0

        book = {
            "format": BOOK_FORMAT, "version": BOOK_VERSION, "name": dataset.name,
            "num_parts": parts, "num_nodes": n, "num_edges": int(g.num_edges),
            "method": method, "seed": int(seed), "offsets": offsets.tolist(),
            "num_classes": int(dataset.num_classes), "target": dataset.target,
            "features": {name: {"dtype": spec.dtype, "row_shape": list(spec.shape[1:])}
                         for name, spec in features.items()},
            "splits": list(split_names), "edge_cut": cut,
            "stats": {
                "nodes_per_part": counts.tolist(), "edges_per_part": edges_per_part.tolist(),
                "train_per_part": train_per_part.tolist(),
                "node_imbalance": imbalance(counts), "edge_imbalance": imbalance(edges_per_part),
                "train_imbalance": imbalance(train_per_part), **(stats or {}),
            },
        }
        (tmp / BOOK_FILE).write_text(json.dumps(book, indent=1) + "\n", encoding="utf-8")
        check_partition(tmp)  # every value, before anything is published
    return read_book(out)


def partition_dataset(dataset, out, parts: int, *, method: str = "metis", seed: int = 0,
                      overwrite: bool = False, log=None) -> PartitionBook:
    """Partition ``dataset`` (a ``Dataset``) into ``parts`` and write it to ``out``; the book's
    ``stats`` hold the balance and the times. ``log(msg)``: progress lines (optional)."""
    out = Path(out)
    if dataset.hetero is not None:
        raise GraphfeedError(f"dataset {dataset.name!r} is heterogeneous (node and edge types); "
                             f"partitioning supports one node type for now")
    if getattr(dataset, "task_type", "node_classification") != "node_classification":
        raise GraphfeedError(f"dataset {dataset.name!r} is for {dataset.task_type}; partitioning "
                             f"supports node classification for now")
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} already exists (pass --overwrite to replace it)")
    t0 = time.perf_counter()
    part_of = assign_parts(dataset, parts, method, seed)
    t1 = time.perf_counter()
    if log:
        log(f"assigned {dataset.num_nodes} nodes to {parts} parts ({method}) in {t1 - t0:.1f} s")
    return write_partition(dataset, out, part_of, method=method, seed=seed, overwrite=overwrite,
                           stats={"assign_s": round(t1 - t0, 3)})


def describe(book: PartitionBook) -> str:
    s = book.stats
    return (f"{book.num_parts} parts ({book.method}) of {book.name}: edge cut {book.edge_cut} "
            f"of {book.num_edges} edges ({100 * book.edge_cut_fraction:.1f}%); imbalance "
            f"(max/mean) nodes {s.get('node_imbalance', 1):.3f}, edges "
            f"{s.get('edge_imbalance', 1):.3f}, train ids {s.get('train_imbalance', 1):.3f}")

