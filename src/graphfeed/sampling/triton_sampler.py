"""Uniform neighbour sampling on the GPU with fused Triton kernels (``TritonNeighborSampler``), and
the ``"gpu"`` registry entry that picks it where it can run (else ``TorchNeighborSampler``).

Importing this module imports neither triton nor CUDA: the kernels
(:mod:`graphfeed.sampling._triton_kernels`) load when a sampler is built.
"""

from __future__ import annotations

import copy
import os
import threading
import warnings
from concurrent.futures import Executor
from typing import Optional, Sequence

import numpy as np
import torch

from .._checks import check_int
from ..errors import GraphfeedError
from ..graph.csc import CSCGraph
from ._common import batch_key, check_batch_position, check_fanouts
from .base import Block, MiniBatch, Sampler
from .torch_sampler import TorchNeighborSampler

#: Largest fanout of the Triton kernels (``_triton_kernels.MAX_FANOUT``, repeated here so that
#: choosing a sampler does not import triton).
MAX_FANOUT = 1024
_INT64_MAX = (1 << 63) - 1


def triton_importable() -> bool:
    """Whether ``import triton`` works (it ships with torch's CUDA builds)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def method_kind(method) -> str:
    """The kind of a ``SamplingMethod`` (``None`` is uniform sampling)."""
    if method is None:
        return "uniform"
    kind = getattr(method, "kind", method)
    if not isinstance(kind, str):
        raise GraphfeedError(f"method must be a SamplingMethod or None, got {method!r}")
    return kind


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


class TritonNeighborSampler(TorchNeighborSampler):
    """Uniform neighbour sampling of CSC tensors with fused Triton kernels: the torch sampler's
    graph handling (tensor checks, device copies or UVA views of the pinned graph, seeds), its
    layers sampled and relabelled by the kernels of :mod:`._triton_kernels`.

    Same semantics and ``MiniBatch``/``Block`` contract as ``NeighborSampler`` (layer convention,
    ``replace``, fanout ``-1``, destinations first and new sources in order of first
    appearance), with its own random numbers:

    - Randomness: Triton's counter-based Philox keyed by ``batch_key(seed, epoch, batch_index,
      layer)``, counter ``destination position * fanout + draw``; a batch is identical whatever
      ``block_size`` or launch grid (and, on a GPU, whatever the scheduling).
    - ``replace=False``: Floyd's algorithm inside the kernel, every k-subset equally likely
      (exact: bounded draws use Lemire's rejection). ``replace=True``: i.i.d. uniform draws.
    - Per layer six kernel launches (two of them ``torch.cumsum``) and one host sync, the
      output sizes; fanout ``-1`` adds one sync (its edge count bounds the buffers). Per batch
      three more launches (the hash table's and the sizes' initialisation) and the copy of the
      seeds to the device. The relabel is a hash table in device memory (open addressing,
      ``atomic_cas``) sized for the batch, not for the graph. :meth:`sample_many` samples
      several batches with one sync per layer for all of them.
    - ``indptr`` int64 and ``indices`` int32/int64, on one device (CUDA memory, or CUDA views of
      pinned host memory with ``uva``; CPU tensors only under Triton's interpreter,
      ``TRITON_INTERPRET=1``, as in the tests). Fanouts up to ``MAX_FANOUT`` (1024).
    - ``method``: ``None`` or a uniform ``SamplingMethod``; other kinds are a ``GraphfeedError``
      (use the ``"torch"`` or ``"neighbor"`` sampler).
    - Seeds must be distinct ids in ``[0, num_nodes)``. A 1-D integer tensor is checked by the
      first kernel (reported after the layer's sync, ``GraphfeedError`` naming the seed and its
      position); other inputs (lists, arrays) go through the torch sampler's checks.
    - ``block_size``: lanes per program of the per-destination and per-edge kernels (a power of
      two; the sampling kernel's tile is ``block_size`` draws). A tuning knob only.
    - ``warm_up``: compile every kernel variant the sampler will launch when it is built
      (:meth:`warm_up`; ``None``, the default, does so unless the kernels are interpreted), so
      compilation happens once, in the building thread, before any timed or concurrent batch.
    """

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, fanouts: Sequence[int], *,
                 replace: bool = False, seed: int = 0, return_edge_ids: bool = False,
                 method=None, block_size: int = 1024, trusted: bool = False,
                 warm_up: Optional[bool] = None):
        kind = method_kind(method)
        if kind != "uniform":
            raise GraphfeedError(
                f"TritonNeighborSampler samples uniformly only; method kind {kind!r} needs the "
                "'torch' or 'neighbor' sampler"
            )
        super().__init__(indptr, indices, check_fanouts(fanouts, max_fanout=MAX_FANOUT),
                         replace=replace, seed=seed, return_edge_ids=return_edge_ids,
                         trusted=trusted)
        from . import _triton_kernels as K  # triton loads here, when a sampler is built

        if self.device.type != "cuda" and not K.INTERPRETED:
            raise GraphfeedError(
                f"TritonNeighborSampler runs on a CUDA device; the graph tensors are on "
                f"{self.device} (CPU tensors only under TRITON_INTERPRET=1)"
            )
        # the largest in-degree and a node that has it, computed once: the hash table of a layer
        # of fanout -1 is sized by it, and warm_up samples from that node
        if self.num_nodes:
            degrees = torch.diff(self.indptr)
            self._max_degree = int(degrees.max())
            self._hub = int(degrees.argmax())
        else:
            self._max_degree = self._hub = 0
        if self._max_degree >= 1 << 32:
            raise GraphfeedError("TritonNeighborSampler needs in-degrees below 2**32")
        self.block_size = check_int("block_size", block_size, 1)
        if self.block_size & (self.block_size - 1):
            raise GraphfeedError(f"block_size must be a power of two, got {block_size}")
        if warm_up is None:
            warm_up = not K.INTERPRETED
        if warm_up:
            self.warm_up()

    def with_fanouts(self, fanouts: Sequence[int]) -> "TritonNeighborSampler":
        other = copy.copy(self)  # the same tensors, pinned host arrays and options
        other._fanouts = check_fanouts(fanouts, max_fanout=MAX_FANOUT)
        from . import _triton_kernels as K

        if not K.INTERPRETED:
            other.warm_up()  # other fanouts: other tile shapes to compile
        return other

    def warm_up(self) -> None:
        """Compile (on a GPU; under the interpreter: run) every kernel variant this sampler
        launches, by sampling one batch of one seed, a node of the largest in-degree, with this
        sampler's fanouts: every layer then has edges, so each layer launches all of its kernels
        with the argument types and constexprs of any real batch (no argument is specialised on
        its value: ``_triton_kernels._SIZES``). Kernels already compiled in this process (or in
        Triton's disk cache) cost a cache lookup. Raises what Triton raises when a kernel does
        not compile (:class:`GPUSampler` then falls back to the torch sampler)."""
        if not self.num_nodes:
            return
        seeds = torch.tensor([self._hub], dtype=torch.int64, device=self.device)
        self.sample_many([seeds], epoch=0, first_batch_index=0)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def __repr__(self) -> str:
        return (f"TritonNeighborSampler(fanouts={self.fanouts}, replace={self.replace}, "
                f"seed={self.seed}, device={self.device})")

    # ------------------------------------------------------------------ sampling
    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0,
               executor: Optional[Executor] = None) -> MiniBatch:
        """The blocks of one batch of distinct seed ids; every output tensor is on
        ``self.device`` (``executor`` is unused: the work is a few kernels per layer)."""
        return self.sample_many([seeds], epoch=epoch, first_batch_index=batch_index,
                                executor=executor)[0]

    def _seeds_tensor(self, seeds) -> torch.Tensor:
        """Seeds as a contiguous int64 tensor on the device. A 1-D signed integer tensor is
        only moved (the first kernel checks range and duplicates, without a sync); anything
        else gets the torch sampler's complete checks."""
        if (isinstance(seeds, torch.Tensor) and seeds.dim() == 1
                and seeds.dtype in (torch.int64, torch.int32, torch.int16, torch.int8)):
            return seeds.to(device=self.device, dtype=torch.int64).contiguous()
        return self._check_seeds(seeds).contiguous()

    def _table_capacity(self, num_seeds: int) -> int:
        """A power of two >= twice the most nodes one batch can hold (load factor <= 1/2): each
        layer adds at most ``fanout`` new nodes per destination, the graph's largest in-degree
        for a fanout of -1, and never more nodes than the graph has."""
        limit = max(1, self.num_nodes)
        bound = num_seeds
        for f in self._fanouts:
            bound *= 1 + (self._max_degree if f < 0 else f)
            if bound >= limit:
                break
        return max(2, _next_pow2(2 * min(bound, limit)))

    def sample_many(self, seed_batches: Sequence, *, epoch: int = 0, first_batch_index: int = 0,
                    executor: Optional[Executor] = None) -> list[MiniBatch]:
        """Several batches in one call: ``[sample(b, epoch=epoch, batch_index=first_batch_index
        + i) for i, b in enumerate(seed_batches)]``, the same batches, with the kernels of every
        batch queued layer by layer and one host sync per layer for all of them (instead of one
        per layer and batch), so the host launches the next batch's kernels while the device
        runs the previous one's."""
        epoch, first_batch_index = check_batch_position(epoch, first_batch_index, executor)
        seeds = [self._seeds_tensor(b) for b in seed_batches]
        if not seeds:
            return []
        indices = [int(first_batch_index) + i for i in range(len(seeds))]
        if self.device.type == "cuda":
            with torch.cuda.device(self.device):
                blocks = self._sample_blocks(seeds, epoch, indices)
        else:
            blocks = self._sample_blocks(seeds, epoch, indices)
        return [MiniBatch(seeds=s, blocks=b, epoch=int(epoch), batch_index=i)
                for s, b, i in zip(seeds, blocks, indices)]

    def _sample_blocks(self, seeds: list, epoch: int, batch_indices: list) -> list:
        """The blocks of each batch (``seeds[i]`` with ``batch_indices[i]``), layer by layer:
        every batch's kernels are launched, then one host read gets every batch's sizes."""
        n_layers = len(self._fanouts)
        dev = self.device
        k = len(seeds)
        # (E, new nodes, seed error, padding): 32 bytes a batch, so every batch's slice is as
        # aligned as the first one and all launches share one compiled variant
        sizes = torch.zeros((n_layers, k, 4), dtype=torch.int64, device=dev)
        tables = [self._new_table(s.numel()) for s in seeds]
        dsts = list(seeds)
        blocks: list[list[Block]] = [[] for _ in range(k)]
        for step, layer in enumerate(range(n_layers - 1, -1, -1)):
            fanout = self._fanouts[layer]
            pending = [
                None if dsts[i].numel() == 0 else self._launch_layer(
                    dsts[i], fanout, batch_key(self.seed, epoch, batch_indices[i], layer),
                    tables[i], sizes[step, i], first=step == 0)
                for i in range(k)
            ]
            read = sizes[step].tolist()  # the layer's one host sync, for every batch
            for i in range(k):
                block = self._finish_layer(dsts[i], pending[i], read[i])
                blocks[i].append(block)
                dsts[i] = block.src_nodes
        for b in blocks:
            b.reverse()
        return blocks

    def _new_table(self, num_seeds: int) -> "_Table":
        cap = self._table_capacity(max(1, num_seeds))
        dev = self.device
        return _Table(
            keys=torch.full((cap,), -1, dtype=torch.int64, device=dev),
            vals=torch.full((cap,), _INT64_MAX, dtype=torch.int64, device=dev),
            mask_bits=cap - 1,
            shift=64 - (cap.bit_length() - 1),
        )

    def _launch_layer(self, dst: torch.Tensor, fanout: int, key: int, table: "_Table",
                      sizes: torch.Tensor, *, first: bool) -> dict:
        """Queue one layer's kernels for the destinations ``dst`` (none empty); ``sizes``
        receives ``(E, new nodes, seed error)``. Returns the output buffers."""
        from . import _triton_kernels as K

        dev = self.device
        n_dst = int(dst.numel())
        bs = self.block_size
        i64 = dict(dtype=torch.int64, device=dev)
        counts = torch.empty(n_dst, **i64)
        starts = torch.empty(n_dst, **i64)
        degs = torch.empty(n_dst, **i64)
        offsets = torch.empty(n_dst + 1, **i64)
        K.count_kernel[(_cdiv(n_dst, bs),)](
            dst, n_dst, self.indptr, self.num_nodes, fanout, counts, starts, degs, offsets,
            table.keys, table.vals, table.mask_bits, table.shift, sizes[2:],
            REPLACE=self.replace, INSERT=first, BLOCK=bs)
        torch.cumsum(counts, 0, out=offsets[1:])
        if fanout < 0:
            cap = int(offsets[n_dst])  # every neighbour: the exact edge count bounds the buffers
        else:
            cap = n_dst * fanout
        want = self.return_edge_ids
        out = {
            "cap": cap,
            "rows": torch.empty(max(1, 2 * cap), **i64),  # [sources (E) | destinations (E)]
            "eids": torch.empty(max(1, cap) if want else 1, **i64),
            "src": torch.empty(n_dst + cap, **i64),
        }
        if not cap:
            return out
        eslot = torch.empty(cap, **i64)
        if fanout < 0:
            K.sample_all_kernel[(n_dst,)](
                self.indices, starts, degs, offsets, n_dst, out["rows"], out["eids"], eslot,
                table.keys, table.vals, table.mask_bits, table.shift, WANT_EIDS=want, BLOCK=bs)
        else:
            kpad = max(2, _next_pow2(fanout))
            lanes = max(1, bs // kpad)
            K.sample_kernel[(_cdiv(n_dst, lanes),)](
                self.indices, starts, degs, counts, offsets, n_dst, fanout, *K.split_key(key),
                out["rows"], out["eids"], eslot, table.keys, table.vals, table.mask_bits,
                table.shift, REPLACE=self.replace, WANT_EIDS=want, KPAD=kpad, LANES=lanes)
        flags = torch.empty(cap, **i64)
        K.flag_kernel[(_cdiv(cap, bs),)](offsets, n_dst, cap, eslot, table.vals, flags, BLOCK=bs)
        rank = torch.cumsum(flags, 0)
        K.final_kernel[(_cdiv(max(cap, n_dst), bs),)](
            offsets, n_dst, cap, dst, out["rows"], eslot, table.vals, flags, rank, out["src"],
            sizes, BLOCK=bs)
        return out

    def _finish_layer(self, dst: torch.Tensor, out: Optional[dict], read: list) -> Block:
        """The ``Block`` of a launched layer, given its ``sizes`` as read by the host (views of
        the buffers, no copy); raises for seeds the first kernel flagged."""
        n_dst = int(dst.numel())
        num_edges, n_new, err = (0, 0, read[2]) if out is None or not out["cap"] else read[:3]
        if err:
            raise _seed_error(dst.cpu().numpy(), self.num_nodes)
        if out is None:
            empty = torch.empty(0, dtype=torch.int64, device=self.device)
            return Block(torch.empty((2, 0), dtype=torch.int64, device=self.device), dst, 0,
                         empty if self.return_edge_ids else None)
        return Block(
            edge_index=out["rows"][: 2 * num_edges].view(2, num_edges),
            src_nodes=dst if not out["cap"] else out["src"][: n_dst + n_new],
            num_dst=n_dst,
            edge_ids=out["eids"][:num_edges] if self.return_edge_ids else None,
        )


class _Table:
    """The batch's hash table: ``keys`` (node ids, -1 empty) and ``vals`` (local ids) of a
    power-of-two capacity; ``shift`` turns a 64-bit hash into a slot."""

    __slots__ = ("keys", "vals", "mask_bits", "shift")

    def __init__(self, keys, vals, mask_bits: int, shift: int):
        self.keys, self.vals, self.mask_bits, self.shift = keys, vals, mask_bits, shift


def _cdiv(a: int, b: int) -> int:
    return max(1, -(-int(a) // int(b)))


def _seed_error(seeds: np.ndarray, num_nodes: int) -> GraphfeedError:
    """The error for seeds the first kernel flagged: the first out-of-range id, else the first
    repeated one (host-side, only on this error path)."""
    bad = np.flatnonzero((seeds < 0) | (seeds >= num_nodes))
    if bad.size:
        pos = int(bad[0])
        return GraphfeedError(
            f"seed id {int(seeds[pos])} (position {pos}) is out of range [0, {num_nodes})")
    _, first = np.unique(seeds, return_index=True)
    repeated = np.setdiff1d(np.arange(seeds.size), first)
    pos = int(repeated.min())
    earlier = int(np.flatnonzero(seeds[:pos] == seeds[pos])[0])
    return GraphfeedError(
        f"seed id {int(seeds[pos])} appears twice (positions {earlier} and {pos}); "
        "seeds must be distinct")


#: Environment variable that overrides the ``"gpu"`` entry's choice (``auto`` or ``torch``).
GPU_SAMPLER_ENV = "GRAPHFEED_GPU_SAMPLER"


class GPUSampler:
    """The ``"gpu"`` registry entry (the CUDA placement modes use it): ``from_graph`` builds a
    ``TritonNeighborSampler`` where it can run (triton imports, the device is CUDA and visible,
    the method is uniform, every fanout is at most ``MAX_FANOUT``), else a
    ``TorchNeighborSampler`` with the same arguments.

    ``GRAPHFEED_GPU_SAMPLER=torch`` in the environment always picks the torch sampler (the
    escape hatch while the Triton kernels await their first GPU run; ``auto``, the default,
    chooses as above).

    The Triton sampler compiles its kernels when it is built (``warm_up``). Where they do not
    compile (a triton release or GPU the kernels were not written for), the torch sampler is
    used instead, with one warning naming the error; later samplers of this process go straight
    to torch (:func:`triton_failure` says why). Bad arguments (``GraphfeedError``) are raised,
    not fallen back from."""

    @staticmethod
    def from_graph(graph: CSCGraph, fanouts: Sequence[int], *, device="cpu", method=None,
                   **kwargs) -> Sampler:
        if GPUSampler.uses_triton(fanouts, device=device, method=method):
            sampler = _build_triton(graph, fanouts, device=device, method=method, **kwargs)
            if sampler is not None:
                return sampler
        if method is not None:
            kwargs["method"] = method
        return TorchNeighborSampler.from_graph(graph, fanouts, device=device, **kwargs)

    @staticmethod
    def uses_triton(fanouts: Sequence[int], *, device="cpu", method=None) -> bool:
        """Whether :meth:`from_graph` picks the Triton sampler for these arguments (asks about
        CUDA without initialising it)."""
        from .. import _cuda

        fanouts = check_fanouts(fanouts)
        choice = os.environ.get(GPU_SAMPLER_ENV, "auto").strip().lower() or "auto"
        if choice not in ("auto", "torch"):
            raise GraphfeedError(
                f"{GPU_SAMPLER_ENV}={os.environ[GPU_SAMPLER_ENV]!r}: use 'auto' (Triton where it "
                f"can run, else torch) or 'torch'")
        if choice == "torch" or _triton_failure:
            return False
        return (torch.device(device).type == "cuda" and method_kind(method) == "uniform"
                and max(fanouts) <= MAX_FANOUT and _cuda.cuda_available() and triton_importable())


#: Why the Triton kernels could not be used in this process ("" while they can); set once, by
#: the first failed warm-up.
_triton_failure = ""
_failure_lock = threading.Lock()


def triton_failure() -> str:
    """Why this process samples on the GPU with torch instead of Triton ("" when it does not)."""
    return _triton_failure


def _describe_failure(e: BaseException) -> str:
    """One line naming a compile failure: the exception's type and the root cause's message
    (Triton's ``CompilationError`` wraps the real error, e.g. an unknown ``tl`` function, in
    ``__cause__``/``error_message`` under lines of kernel source)."""
    root, seen = e, set()
    while root.__cause__ is not None and id(root) not in seen:
        seen.add(id(root))
        root = root.__cause__
    message = getattr(root, "error_message", None)
    if not message:
        lines = [ln.strip() for ln in str(root).splitlines() if ln.strip()]
        message = lines[-1] if lines else ""
    message = str(message)[:300]
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


def _build_triton(graph: CSCGraph, fanouts: Sequence[int], **kwargs) -> Optional[Sampler]:
    """A warmed-up ``TritonNeighborSampler``, or ``None`` (after one warning per process) when
    its kernels fail to compile or run here."""
    global _triton_failure
    try:
        return TritonNeighborSampler.from_graph(graph, fanouts, warm_up=True, **kwargs)
    except GraphfeedError:
        raise  # the arguments are wrong: the torch sampler would refuse them too
    except Exception as e:  # noqa: BLE001 - any compiler/driver failure: fall back, say which
        why = _describe_failure(e)
        with _failure_lock:
            first = not _triton_failure
            if first:
                _triton_failure = why
        if first:
            import triton

            warnings.warn(
                f"graphfeed: the Triton sampling kernels do not work here (triton "
                f"{triton.__version__}; {why}); sampling on the GPU with the torch sampler "
                f"instead. Set {GPU_SAMPLER_ENV}=torch to choose it without trying Triton.",
                RuntimeWarning, stacklevel=3)
        return None
