"""Neighbour sampling on CPU with numba kernels (``NeighborSampler``): uniform, and the
weighted, LABOR and temporal methods of ``SamplingMethod``."""

from __future__ import annotations

import threading
import types
from concurrent.futures import Executor
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from .._checks import check_int
from .._threads import ChunkPool, run_chunks
from ..errors import GraphfeedError
from ..graph.csc import CSCGraph
from ._common import (batch_key, check_batch_position, check_draws, check_fanouts, check_flag,
                      check_method, check_seed, kernel_fanouts, labor_key, labor_rotation,
                      resolve_fanouts)
from ._cpu_common import (DENSE_MAP_MAX_BYTES, MapPool,  # noqa: F401 (named in the docstring)
                          choose_node_map, readonly_view, seeds_to_numpy)
from .base import Block, MiniBatch, Sampler
from .method import ARRAY_KEYS, SamplingMethod, method_arrays, resolve_method

# Below this many destinations a layer is sampled on the calling thread even when
# num_threads > 1: handing work to a pool costs more than it saves.
_MIN_DST_PER_CHUNK = 2048


class NeighborSampler(Sampler):
    """Uniform neighbour sampling of a ``CSCGraph`` (in-neighbours), on CPU.

    Layer convention (as DGL/GraphBolt): ``fanouts[i]`` is the fanout of ``blocks[i]``. The
    seeds are the destinations of ``blocks[-1]`` and get ``fanouts[-1]`` neighbours each; the
    sources of ``blocks[-1]`` are the destinations of ``blocks[-2]``, sampled with
    ``fanouts[-2]``; and so on down to ``blocks[0]``, whose sources are ``input_nodes``.

    - ``fanouts``: ints ``>= 1``, or ``-1`` for every neighbour. ``num_neighbors=`` instead:
      the same list in PyG's order (the seeds' hop first, as ``NeighborLoader`` takes it),
      reversed here; giving both is an error.
    - ``replace=False``: each destination gets ``min(fanout, in_degree)`` distinct in-edges, every
      subset of that size equally likely. ``replace=True``: exactly ``fanout`` i.i.d. uniform
      in-edges per destination with ``in_degree > 0`` (none otherwise); a fanout of ``-1`` takes
      every in-edge once in both modes.
    - Randomness derives only from ``(seed, epoch, batch_index, layer, destination position)``
      (splitmix64 counters, no RNG state), so a batch is identical whatever ``num_threads``, the
      Python thread that samples it, or the order batches are sampled in.
    - ``num_threads > 1`` splits a layer's destinations (layers of >= 2048 of them) into up to
      ``num_threads`` chunks (kernels release the GIL; the relabel pass stays on one thread).
      The chunks run on the ``executor`` passed to :meth:`sample` (a ``DataLoader`` passes its
      own, shared with feature reads), else on a pool of ``num_threads`` threads the sampler
      starts on first use and :meth:`close` stops. It helps a single sampling thread use idle
      cores; when the loader already samples several batches at once on as many Python threads
      as cores, keep ``num_threads=1``. Several Python threads may call :meth:`sample`
      concurrently on one sampler.
    - ``return_edge_ids``: fill ``Block.edge_ids`` with positions in ``graph.indices``.
    - ``method``: a :class:`~graphfeed.sampling.SamplingMethod` (``None``: uniform): weighted
      (with or without replacement), LABOR (``Block.edge_weight`` holds its importance
      weights; no replacement) or temporal (``sample(..., seed_times=)``; ``strategy="last"``
      has no replacement). Its arrays (weights, times) are checked once here, O(E). The
      uniform path is the same kernels as without a method.

    - ``node_map``: how global ids become local ones. ``"dense"``: an int32 array of
      ``num_nodes`` entries per batch in flight (pooled, reused; only touched entries are
      reset). ``"hash"``: an open-addressing hash table sized by the batch (16 bytes a slot, at
      least 2 slots per node of the batch; nothing of size ``num_nodes``). ``"auto"`` (default):
      dense while the array takes at most ``DENSE_MAP_MAX_BYTES`` (128 MiB, 32M nodes), hash
      above (:func:`choose_node_map`). Both give identical batches; :attr:`node_map` says which
      one is used.

    Cost: O(sum of sampled edges + destinations) per batch, no sorting.
    Seeds must be distinct node ids in ``[0, num_nodes)`` (a duplicate is an error: it would
    make the destination ids, hence the source ids, non-unique).
    """

    def __init__(
        self,
        graph: CSCGraph,
        fanouts: Optional[Sequence[int]] = None,
        *,
        replace: bool = False,
        seed: int = 0,
        num_threads: int = 1,
        return_edge_ids: bool = False,
        method: Optional[SamplingMethod] = None,
        num_neighbors: Optional[Sequence[int]] = None,
        node_map: str = "auto",
    ):
        if not isinstance(graph, CSCGraph):
            raise GraphfeedError(f"graph must be a CSCGraph, got {type(graph).__name__}")
        self.graph = graph
        self._fanouts = check_fanouts(resolve_fanouts(fanouts, num_neighbors, "NeighborSampler"))
        self.replace = check_flag("replace", replace)
        self.seed = check_seed(seed)
        self.num_threads = check_int("num_threads", num_threads, 1)
        self.return_edge_ids = check_flag("return_edge_ids", return_edge_ids)
        from .._memory import host_memory

        self._memory = host_memory()[0]  # what a layer's draws with replacement may take
        check_draws(self._fanouts, 1, self.replace, self._memory)
        self._kfanouts = kernel_fanouts(self._fanouts, graph, self.replace)
        self.method = check_method(resolve_method(method), self.replace, "NeighborSampler")
        self._arrays = method_arrays(self.method, graph, "NeighborSampler")
        self._prep: Optional[dict] = None
        self._prep_lock = threading.Lock()
        self._indptr = readonly_view(graph.indptr)
        self._indices = readonly_view(graph.indices)
        self._num_nodes = graph.num_nodes
        self.node_map = choose_node_map(self._num_nodes, node_map)
        self._maps = MapPool(self._num_nodes, self.node_map)
        self._pool = ChunkPool(self.num_threads, "graphfeed-sample")

    @classmethod
    def _from_graph(cls, graph: CSCGraph, fanouts: Sequence[int], device: torch.device,
                    uva: bool, **kwargs) -> "NeighborSampler":
        # the numba kernels read the host arrays: nothing to place on a device
        if device.type != "cpu" or uva:
            raise GraphfeedError(
                f"NeighborSampler samples on the CPU (numba kernels); got device={device}, "
                f"uva={uva}: use the 'torch' sampler for a GPU"
            )
        return cls(graph, fanouts, **kwargs)

    def __repr__(self) -> str:
        return (
            f"NeighborSampler(fanouts={self.fanouts}, replace={self.replace}, seed={self.seed}, "
            f"num_threads={self.num_threads}, method={self.method.describe()!r})"
        )

    # ------------------------------------------------------------------ public
    @property
    def num_nodes(self) -> int:
        return self._num_nodes

    @property
    def fanouts(self) -> tuple[int, ...]:
        return self._fanouts

    def with_fanouts(self, fanouts: Sequence[int]) -> "NeighborSampler":
        other = NeighborSampler(self.graph, fanouts, replace=self.replace, seed=self.seed,
                                num_threads=self.num_threads, return_edge_ids=self.return_edge_ids,
                                node_map=self.node_map)
        # the same method and arrays, checked and prepared already: no O(E) pass
        other.method, other._arrays = self.method, self._arrays
        other._prep, other._prep_lock = self._prepared(), threading.Lock()
        return other

    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0,
               executor: Optional[Executor] = None, seed_times=None) -> MiniBatch:
        """Sample the blocks of one batch of seed node ids (1-D ints, distinct, in range);
        ``executor`` runs the chunks of large layers (see the class docstring).
        ``seed_times`` (temporal method only): one time per seed; default the seeds' node
        times."""
        epoch, batch_index = check_batch_position(epoch, batch_index, executor)
        seeds_np = seeds_to_numpy(seeds, self._num_nodes)
        times = None
        if self.method.kind == "temporal":
            times = seed_times_array(self._arrays, seeds_np, seed_times, "NeighborSampler")
        elif seed_times is not None:
            raise GraphfeedError(f"seed_times is for temporal sampling; this sampler's method is "
                                 f"{self.method.describe()}")
        with self._maps.lease() as box:  # box[0]: the node map (a grown hash table replaces it)
            code, pos = self._maps.insert_seeds(box, seeds_np)
            if code == 1:
                raise GraphfeedError(
                    f"seed id {int(seeds_np[pos])} (position {pos}) is out of range "
                    f"[0, {self._num_nodes})"
                )
            if code == 2:
                first = int(np.flatnonzero(seeds_np[:pos] == seeds_np[pos])[0])
                raise GraphfeedError(
                    f"seed id {int(seeds_np[pos])} appears twice (positions {first} and {pos}); "
                    "seeds must be distinct"
                )
            box.clean = False  # the map holds the seeds from here
            blocks = []
            dst = seeds_np
            for layer in range(len(self._fanouts) - 1, -1, -1):
                fanout = self._kfanouts[layer]
                check_draws((fanout,), int(dst.shape[0]), self.replace, self._memory)
                key = np.uint64(batch_key(self.seed, epoch, batch_index, layer))
                ew = None
                if self.method.is_uniform:
                    edge_index, eids, src = self._sample_layer(dst, fanout, key, box, executor)
                else:
                    nkey = np.uint64(labor_key(self.seed, epoch, batch_index, layer, self.method))
                    edge_index, eids, src, ew, times = self._sample_layer_method(
                        dst, fanout, key, nkey, times, box, executor)
                blocks.append(
                    Block(
                        edge_index=torch.from_numpy(edge_index),
                        src_nodes=torch.from_numpy(src),
                        num_dst=int(dst.shape[0]),
                        edge_ids=torch.from_numpy(eids) if self.return_edge_ids else None,
                        edge_weight=None if ew is None else torch.from_numpy(ew),
                    )
                )
                dst = src
            self._maps.reset(box, dst)  # the last layer's sources hold every touched node
        blocks.reverse()
        return MiniBatch(
            seeds=torch.from_numpy(seeds_np),
            blocks=blocks,
            epoch=int(epoch),
            batch_index=int(batch_index),
        )

    def close(self) -> None:
        """Stop the sampler's own chunk pool (if one was started); a later :meth:`sample`
        starts it again."""
        self._pool.close()

    # ------------------------------------------------------------------ internals
    def _sample_layer(self, dst: np.ndarray, fanout: int, key, box: list,
                      executor: Optional[Executor]):
        from . import _kernels as K

        n_dst = int(dst.shape[0])
        want = self.return_edge_ids
        parts = min(self.num_threads, n_dst // _MIN_DST_PER_CHUNK)
        if parts <= 1:
            if self.node_map == "hash":
                edge_index, eids, src, box[0] = K.sample_layer_hash(
                    self._indptr, self._indices, dst, fanout, self.replace, key, box[0], want)
                return edge_index, eids, src
            return K.sample_layer(
                self._indptr, self._indices, dst, fanout, self.replace, key, box[0], want
            )
        if executor is None:
            executor = self._pool.get()
        # two passes over the same chunks: count each destination's edges, then fill them in
        # at the prefix-summed offsets (every destination's draws derive from its position)
        offsets = np.zeros(n_dst + 1, dtype=np.int64)
        starts = np.empty(n_dst, dtype=np.int64)
        degs = np.empty(n_dst, dtype=np.int64)
        indptr, indices, replace = self._indptr, self._indices, self.replace

        def count(a: int, b: int) -> None:
            K.count_layer(indptr, dst, a, b, fanout, replace, offsets, starts, degs)

        run_chunks(count, n_dst, parts, executor)
        np.cumsum(offsets, out=offsets)
        num_edges = int(offsets[-1])
        edge_index = np.empty((2, num_edges), dtype=np.int64)
        eids = np.empty(num_edges if want else 0, dtype=np.int64)

        def fill(a: int, b: int) -> None:
            K.fill_layer(indices, starts, degs, a, b, fanout, replace, key, offsets, edge_index,
                         eids, want)

        run_chunks(fill, n_dst, parts, executor)
        src = np.empty(n_dst + num_edges, dtype=np.int64)
        src[:n_dst] = dst
        n_src = self._maps.relabel(box, edge_index, src, n_dst)
        return edge_index, eids, src[:n_src]


    def _sample_layer_method(self, dst: np.ndarray, fanout: int, key, node_key, dst_times,
                             box: list, executor: Optional[Executor]):
        """One layer of a weighted, LABOR or temporal method over chunks of destinations (as
        ``_sample_layer``), then the relabel pass; temporal layers also return the sources'
        times."""
        from . import _kernels as K
        from . import _method_kernels as MK

        kind = self.method.kind
        pre = self._prepared()
        n_dst = int(dst.shape[0])
        want = self.return_edge_ids
        replace = self.replace
        indptr, indices = self._indptr, self._indices
        parts = min(self.num_threads, n_dst // _MIN_DST_PER_CHUNK)
        if parts > 1 and executor is None:
            executor = self._pool.get()
        ew = None
        rotated = kind == "labor" and self.method.variates == "rotated"
        if kind == "labor" and not rotated:  # one pass per chunk, grown as needed, then joined
            outs = {}

            def labor(a: int, b: int) -> None:
                outs[a] = MK.sample_labor(indptr, indices, dst, a, b, fanout, node_key, want)

            run_chunks(labor, n_dst, parts, executor)
            parts_out = [outs[a] for a in sorted(outs)]
            if len(parts_out) == 1:
                edge_index, eids, ew = parts_out[0]
            else:
                edge_index = np.concatenate([o[0] for o in parts_out], axis=1)
                eids = np.concatenate([o[1] for o in parts_out])
                ew = np.concatenate([o[2] for o in parts_out])
        else:
            offsets = np.zeros(n_dst + 1, dtype=np.int64)
            starts = np.empty(n_dst, dtype=np.int64)
            degs = np.empty(n_dst, dtype=np.int64)
            strict = self.method.strict
            if rotated:
                shift = np.uint64(labor_rotation(self.seed, node_key)[1])
                first = np.empty(n_dst, dtype=np.int64)

            def count(a: int, b: int) -> None:
                if rotated:
                    MK.count_labor_rotated(indptr, pre["lbase"], dst, a, b, fanout, shift,
                                           offsets, starts, degs, first)
                elif kind == "weighted":
                    MK.count_weighted(indptr, pre["npos"], dst, a, b, fanout, replace, offsets,
                                      starts, degs, pre["all_positive"])
                else:
                    MK.count_temporal(indptr, pre["tkey"], dst, dst_times, strict, a, b, fanout,
                                      replace, offsets, starts, degs)

            run_chunks(count, n_dst, parts, executor)
            np.cumsum(offsets, out=offsets)
            num_edges = int(offsets[-1])
            edge_index = np.empty((2, num_edges), dtype=np.int64)
            eids = np.empty(num_edges if want else 0, dtype=np.int64)
            last = self.method.strategy == "last"
            if rotated:
                ew = np.empty(num_edges, dtype=np.float32)

            def fill(a: int, b: int) -> None:
                if rotated:
                    MK.fill_labor_rotated(pre["lsrc"], pre["lpos"], starts, degs, first, a, b,
                                          fanout, offsets, edge_index, ew, eids, want)
                elif kind == "weighted":
                    MK.fill_weighted(indices, pre["weights"], pre["table"], pre["totals"],
                                     dst, starts, degs, a, b, fanout, replace, key,
                                     offsets, edge_index, eids, want, MK.WEIGHTED_SCAN_MAX_DEG,
                                     MK.WEIGHTED_KEYS_MAX_DEG, MK.WEIGHTED_DRAW_AHEAD)
                elif last:
                    MK.fill_last(pre["tsrc"], starts, degs, a, b, offsets, edge_index, eids, want)
                else:  # uniform sampling of each eligible prefix of the time-sorted columns
                    K.fill_layer(pre["tsrc"], starts, degs, a, b, fanout, replace, key, offsets,
                                 edge_index, eids, want)

            run_chunks(fill, n_dst, parts, executor)
            if want and kind == "temporal":
                eids = pre["tpos"][eids]  # time-sorted positions -> positions in indices
        src = np.empty(n_dst + edge_index.shape[1], dtype=np.int64)
        src[:n_dst] = dst
        n_src = self._maps.relabel(box, edge_index, src, n_dst)
        src_times = None
        if kind == "temporal":
            src_times = np.empty(n_src, dtype=dst_times.dtype)
            src_times[:n_dst] = dst_times
            src_times[n_dst:] = _latest(dst_times.dtype)
            MK.propagate_times(edge_index, n_dst, dst_times, src_times)
        return edge_index, eids, src[:n_src], ew, src_times

    @property
    def needs_tables(self) -> bool:
        """Whether the method samples from per-graph tables built in O(E) (weighted, LABOR with
        rotated variates, temporal; see :meth:`prepare`)."""
        return _has_tables(self.method)

    def prepare(self, share: Optional[Callable[[Callable[[], dict], dict], dict]] = None):
        """Build the method's per-graph tables now rather than on the first batch; returns them
        (a read-only name -> array mapping; the names are internal). Idempotent; a no-op (empty
        mapping) for methods without tables. Single process: not needed (the first batch builds
        them, privately).

        ``share(build, inputs) -> tables`` takes the build over, e.g. to hold one copy per
        machine (:func:`graphfeed.distributed.share_prepared` passes one). ``build()`` returns
        the tables (this sampler's own when it has them already, else built now, O(E));
        ``inputs`` names the sampler's input arrays (``indptr``, ``indices``, and the method's
        ``weights`` / ``node_times`` / ``edge_times``) that the tables may hold by reference.
        With ``share``, the tables are replaced by what it returns even when they exist, so
        that every rank runs the same collectives. Copies made by :meth:`with_fanouts`
        afterwards hold the same tables."""
        if share is not None and not callable(share):
            raise GraphfeedError(f"share must be a callable share(build, inputs) -> tables or "
                                 f"None, got {type(share).__name__}")
        if not self.needs_tables:
            return types.MappingProxyType({})
        return types.MappingProxyType(self._prepared(share))

    def _prepared(self, share=None) -> dict:
        """The per-graph arrays of the method, built once (O(E)) on first use and shared with
        :meth:`with_fanouts` copies: weighted, the alias records (8 B per edge) and per-node
        weight sums and positive counts; LABOR with rotated variates, the columns sorted by
        base variate (source, relative position and base per edge);
        temporal, the columns sorted by time (time, source
        and position per edge). ``share``: see :meth:`prepare`."""
        with self._prep_lock:
            if self._prep is None or share is not None:
                have = self._prep
                build = self._build_tables if have is None else (lambda: have)
                self._prep = build() if share is None else share(build, self._table_inputs())
            return self._prep

    def _build_tables(self) -> dict:
        tables = _prepare(self.method, self._indptr, self._indices, self._arrays, self.seed)
        for a in tables.values():
            # read-only like the shared tables (graphfeed.distributed.share_prepared): the
            # kernels only read them, and numba compiles one variant for both
            if isinstance(a, np.ndarray):
                a.flags.writeable = False
        return tables

    def check_tables(self, tables) -> None:
        """Raise ``GraphfeedError`` unless ``tables`` (a name -> array mapping, e.g. read back
        from files by :class:`graphfeed.distributed.TableCache`) is what :meth:`prepare` builds
        for this sampler, as far as the kernels rely on it: the same names, shapes and dtypes,
        positions and source ids within each node's in-edges, the values derived from the inputs
        (bases, times, weight sums and counts) equal to them, and each column's order. The
        kernels index with these tables unchecked, so tables from outside must pass this first.
        O(E) reads, no O(E) allocation; far cheaper than a build."""
        from collections.abc import Mapping

        if not isinstance(tables, Mapping):
            raise GraphfeedError(f"tables must be a mapping of name -> array, got "
                                 f"{type(tables).__name__}")
        _check_tables(self.method, self._indptr, self._indices, self._arrays, self.seed, tables)

    def _table_inputs(self) -> dict:
        """The arrays the sampler was built on, by name (what a table may alias, not copy)."""
        out = {"indptr": self._indptr, "indices": self._indices}
        for name in ARRAY_KEYS:
            a = getattr(self._arrays, name)
            if a is not None:
                out[name] = a
        return out


def _has_tables(method: SamplingMethod) -> bool:
    """Whether :func:`_prepare` builds anything for ``method``."""
    return method.kind in ("weighted", "temporal") or (
        method.kind == "labor" and method.variates == "rotated")


def _prepare(method: SamplingMethod, indptr: np.ndarray, indices: np.ndarray, arr,
             seed: int) -> dict:
    """The method's tables (see :meth:`NeighborSampler._prepared`). They are also stored
    between runs (``graphfeed.distributed.TableCache``): a change to what this returns, or to
    how the kernels read it, must bump ``graphfeed.distributed.tables.TABLES_FORMAT``."""
    from . import _method_kernels as MK

    kind = method.kind
    layout = _table_layout(method, indptr, indices, arr)
    _check_table_memory(method, layout, indices.shape[0])
    t = {name: np.empty(shape, dtype) for name, (shape, dtype) in layout.items()}
    if kind == "labor" and method.variates == "rotated":
        bkey = np.uint64(labor_rotation(seed, 0)[0])
        bad = MK.build_base_order(indptr, indices, bkey, t["lsrc"], t["lpos"], t["lbase"])
        if bad >= 0:
            raise GraphfeedError(f"LABOR (rotated): node {bad} has more than 2**31 - 1 in-edges")
        return {**t, "bkey": bkey}
    if kind == "weighted":
        # table: threshold | alias offset << 32
        bad = MK.build_alias(indptr, arr.weights, t["table"], t["totals"], t["npos"])
        if bad >= 0:
            raise GraphfeedError(f"weighted sampling: node {bad} has more than 2**31 - 1 in-edges")
        all_positive = bool(np.array_equal(t["npos"], np.diff(indptr)))
        return {"weights": arr.weights, **t, "all_positive": all_positive}
    if kind == "temporal":
        nt, et, has_nt, has_et = _time_args(arr)
        MK.build_time_order(indptr, indices, nt, et, has_nt, has_et, t["tkey"], t["tsrc"],
                            t["tpos"])
        return t
    return {}


#: what to do when a method's tables do not fit, by kind
_TABLE_HINTS = {"labor": "use --labor-variates iid (no tables, O(degree) a destination)",
                "weighted": "give the process more memory", "temporal": "give the process more memory"}


def _check_table_memory(method: SamplingMethod, layout: dict, num_edges: int) -> None:
    """Refuse, before allocating, tables larger than the memory this process may still use
    (``graphfeed._memory.reclaimable_memory``, a memory cgroup included): at 1.6 billion edges
    they are 13 to 32 GB, more than many machines hold, and an allocation that big is killed,
    not refused."""
    from .._memory import reclaimable_memory
    from .._units import format_bytes

    need = sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for shape, dtype in layout.values())
    avail = reclaimable_memory()
    if avail is None or need <= avail:
        return
    per_edge = need / max(1, num_edges)
    raise GraphfeedError(
        f"sampler {method.describe()} builds {format_bytes(need)} of tables for {num_edges:,} "
        f"edges (about {per_edge:.0f} B per edge), but this process may use only "
        f"{format_bytes(avail)} more; {_TABLE_HINTS.get(method.kind, 'give it more memory')}")


def _table_layout(method: SamplingMethod, indptr: np.ndarray, indices: np.ndarray,
                  arr) -> dict:
    """``{name: (shape, dtype)}`` of the arrays :func:`_prepare` builds for ``method`` (its
    scalars and the inputs it hands on are not in it): what the build allocates and what
    :func:`_check_tables` expects of tables from elsewhere."""
    n = indptr.shape[0] - 1
    e = indices.shape[0]
    if method.kind == "labor" and method.variates == "rotated":
        return {"lsrc": ((e,), indices.dtype), "lpos": ((e,), np.dtype(np.int32)),
                "lbase": ((e,), np.dtype(np.uint32))}
    if method.kind == "weighted":
        return {"table": ((e,), np.dtype(np.uint64)), "totals": ((n,), np.dtype(np.float64)),
                "npos": ((n,), np.dtype(np.int64))}
    if method.kind == "temporal":
        return {"tkey": ((e,), arr.time_dtype), "tsrc": ((e,), indices.dtype),
                "tpos": ((e,), np.dtype(np.int64))}
    return {}


_TABLE_PROBLEMS = {
    "labor": ("lpos", "a position outside its node's in-edges", "lsrc", "not the edge's source",
              "lbase", "not the source's base variate", "lbase", "out of order in its column"),
    "weighted": ("table", "an alias offset outside its node's in-edges", "totals",
                 "not the node's weight sum", "npos", "not the node's count of positive weights"),
    "temporal": ("tpos", "a position outside its node's in-edges", "tsrc", "not the edge's source",
                 "tkey", "not the edge's time", "tkey", "out of order in its column"),
}


def _check_tables(method: SamplingMethod, indptr: np.ndarray, indices: np.ndarray, arr,
                  seed: int, tables) -> None:
    """Raise ``GraphfeedError`` naming the table and the problem unless ``tables`` is what
    :func:`_prepare` returns for these inputs, as far as the kernels rely on it (see
    :meth:`NeighborSampler.check_tables`). ``indptr``/``indices`` are the checked graph's."""
    from . import _method_kernels as MK

    kind = method.kind
    layout = _table_layout(method, indptr, indices, arr)
    want = set(layout)
    if kind == "labor" and layout:  # rotated variates
        want.add("bkey")
    elif kind == "weighted":
        want |= {"weights", "all_positive"}
    got = set(tables)
    if got != want:
        raise GraphfeedError(f"the {kind} tables are {sorted(got)}, expected {sorted(want)}")
    for name, (shape, dtype) in layout.items():
        a = tables[name]
        if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != dtype:
            what = (f"shape {a.shape}, dtype {a.dtype}" if isinstance(a, np.ndarray)
                    else type(a).__name__)
            raise GraphfeedError(f"table {name!r} has {what}; expected shape {shape}, dtype "
                                 f"{np.dtype(dtype)}")
    if not want:
        return
    if kind == "labor":
        bkey = tables["bkey"]
        if not isinstance(bkey, np.uint64) or bkey != np.uint64(labor_rotation(seed, 0)[0]):
            raise GraphfeedError(f"table 'bkey' is {bkey!r}, not the base key of seed {seed}")
        at, problem = MK.check_base_order(indptr, indices, bkey, tables["lsrc"], tables["lpos"],
                                          tables["lbase"])
        where = "edge"
    elif kind == "weighted":
        if tables["weights"] is not arr.weights:
            raise GraphfeedError("table 'weights' is not the sampler's weights")
        at, problem = MK.check_alias(indptr, arr.weights, tables["table"], tables["totals"],
                                     tables["npos"])
        where = "node"
    else:
        nt, et, has_nt, has_et = _time_args(arr)
        at, problem = MK.check_time_order(indptr, indices, nt, et, has_nt, has_et,
                                          tables["tkey"], tables["tsrc"], tables["tpos"])
        where = "edge"
    if at >= 0:
        names = _TABLE_PROBLEMS[kind]
        raise GraphfeedError(f"table {names[2 * problem - 2]!r}: {where} {at}: "
                             f"{names[2 * problem - 1]}")
    if kind == "weighted":
        all_positive = bool(np.array_equal(tables["npos"], np.diff(indptr)))
        if tables["all_positive"] is not all_positive:
            raise GraphfeedError(f"table 'all_positive' is {tables['all_positive']!r}, not "
                                 f"{all_positive}")


def _latest(dtype) -> object:
    return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


def _time_args(arr):
    """``(node_times, edge_times, has_node, has_edge)`` for the temporal kernels: an absent
    array is a 1-entry placeholder of the other's dtype (one compiled variant per dtype)."""
    dt = arr.time_dtype
    nt = arr.node_times if arr.node_times is not None else np.zeros(1, dt)
    et = arr.edge_times if arr.edge_times is not None else np.zeros(1, dt)
    return nt, et, arr.node_times is not None, arr.edge_times is not None


def seed_times_array(arr, seeds_np: np.ndarray, seed_times, sampler: str) -> np.ndarray:
    """The seeds' times as a numpy array of the method's time dtype: ``seed_times`` (one per
    seed) or, by default, the seeds' node times."""
    dt = arr.time_dtype
    if seed_times is None:
        if arr.node_times is None:
            raise GraphfeedError(
                f"{sampler}: temporal sampling over edge times only needs seed_times= (one time "
                f"per seed); the graph has no node times to default to")
        return np.ascontiguousarray(arr.node_times[seeds_np])
    if isinstance(seed_times, torch.Tensor):
        seed_times = seed_times.detach().cpu().numpy()
    t = np.asarray(seed_times)
    if t.shape != seeds_np.shape:
        raise GraphfeedError(f"seed_times must hold one time per seed: shape {t.shape} != "
                             f"{seeds_np.shape}")
    if t.dtype.kind not in "fiu":
        raise GraphfeedError(f"seed_times must be numbers, got dtype {t.dtype}")
    if t.dtype.kind == "f" and not np.isfinite(t).all():
        raise GraphfeedError("seed_times must be finite")
    if dt.kind != "f" and t.dtype.kind == "f":
        raise GraphfeedError(f"seed_times are floats but the graph's times are {dt}: pass "
                             f"integer times")
    return np.ascontiguousarray(t, dtype=dt)
