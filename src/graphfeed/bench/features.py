"""``graphfeed bench features``: feature-read throughput of every backend on the same id batches.

Every backend reads the way the loader does, ``read(ids, out=buffer)`` into one reused buffer,
and every figure is also given as a ratio to the RAM ceiling measured in the same run and
thread budget: ``torch.index_select(rows, 0, ids, out=buffer)`` on the feature loaded into
process memory. Runs on different machines, or on a loaded machine, stay comparable.

Rows:

- ``ceiling``: the plain ``torch.index_select(..., out=)`` above (always measured).
- ``ram``: ``InMemoryFeature`` over the array loaded into RAM.
- ``ram-fresh``: the same into a new tensor per batch (what a caller without buffers pays:
  page faults on the new output, not the gather).
- ``disk-warm``: ``DiskFeature`` (memory map) after one untimed pass put the file in the page cache.
- ``disk-cold``: the same, with the file dropped from the page cache (``POSIX_FADV_DONTNEED``)
  before every batch (the drop is not timed).
- ``disk-direct``: ``DiskFeature(direct_io=True)``: ``O_DIRECT`` reads, no page cache at all.
- ``lmdb``: ``LMDBFeature`` built from the file (build time reported), warm.
- ``cache-<policy>``: ``CachedFeature`` holding ``cache_fraction`` of the rows in front of a cold
  disk store; warmed on the warm-up batches, then timed with the file dropped before every batch.
  Its hit rate is over the timed batches.

The cold variants are timed interleaved (batch by batch, rotating their order), so caches below
the guest's page cache (a VM host's page cache, the disk's own) favour none of them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import torch

from ..errors import GraphfeedError

from . import FEATURE_VARIANTS, check_feature_variants


def _timed_pass(feature, batches, *, before=None, out: Optional[torch.Tensor] = None) -> float:
    """Seconds to read ``batches`` (into ``out[:n]`` when given, as the loader reads)."""
    total = 0.0
    for b in batches:
        if before is not None:
            before()
        dst = None if out is None else out[: b.shape[0]]
        t0 = time.perf_counter()
        feature.read(b, check=False, out=dst)
        total += time.perf_counter() - t0
    return total


class _IndexSelect:
    """The ceiling as a reader: ``torch.index_select(rows, 0, ids, out=)``."""

    def __init__(self, rows: torch.Tensor):
        self.rows = rows

    def read(self, ids, *, check=False, out=None):
        return torch.index_select(self.rows, 0, ids, out=out)


def _figures(rows: int, row_nbytes: int, seconds: float) -> dict:
    seconds = max(seconds, 1e-9)
    return {
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "gb_per_s": rows * row_nbytes / seconds / 1e9,
    }


def bench_features(
    feature: Union[str, os.PathLike, np.ndarray],
    id_batches: Sequence[torch.Tensor],
    *,
    backends: Sequence[str] = FEATURE_VARIANTS,
    cache_fraction: float = 0.2,
    cache_policies: Sequence[str] = ("sieve",),
    warmup_batches: int = 1,
    repeats: int = 3,
    cold_batches: Optional[int] = None,
    num_threads: int = 2,
    rows_per_chunk: Optional[int] = None,
    workdir: Optional[str | os.PathLike] = None,
    log=None,
    dtype=None,
) -> dict:
    """Measure feature reads of ``id_batches`` (1-D int64 tensors) on each backend.

    ``feature``: a ``.npy`` path (used in place) or an array (written to ``workdir``);
    ``dtype``: the rows' dtype where the file holds the bits of one numpy lacks
    (``"bfloat16"``, from a dataset's metadata), passed to every backend; the GB/s figures
    count the bytes of the rows read (2 a bfloat16 value).
    The first ``warmup_batches`` batches are read untimed (JIT compilation, cache warm-up); the
    rest are timed. Warm backends take the best of ``repeats`` passes; cold ones run one pass over
    at most ``cold_batches`` batches. Returns a JSON-ready dict with ``results[backend]`` =
    ``{rows_per_s, gb_per_s, seconds, rows, ratio_to_ceiling[, hit_rate]}`` (``ceiling``,
    ``ram`` and ``ram-fresh`` always).
    """
    from ..features.cache import CachedFeature
    from ..features.disk import DiskFeature, drop_page_cache
    from ..features.lmdb_store import LMDBFeature
    from ..features.memory import InMemoryFeature

    say = log or (lambda msg: None)
    check_feature_variants(backends)
    if len(id_batches) <= warmup_batches:
        raise GraphfeedError(f"need more than warmup_batches={warmup_batches} batches, got {len(id_batches)}")
    own_dir = workdir is None
    work = Path(tempfile.mkdtemp(prefix="graphfeed-bench-features-")) if own_dir else Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    try:
        if isinstance(feature, np.ndarray):
            from .._io import save_npy

            path = work / "feature.npy"
            save_npy(path, feature, fsync=False)
        else:
            path = Path(feature)
        id_batches = [torch.as_tensor(b, dtype=torch.int64) for b in id_batches]
        warm, timed = id_batches[:warmup_batches], id_batches[warmup_batches:]
        cold = timed if cold_batches is None else timed[: max(1, cold_batches)]
        rows_timed = sum(int(b.shape[0]) for b in timed)
        rows_cold = sum(int(b.shape[0]) for b in cold)
        all_ids = torch.cat(id_batches)
        report: dict = {
            "batches": {
                "warmup": len(warm),
                "timed": len(timed),
                "cold_timed": len(cold),
                "mean_ids": float(np.mean([b.shape[0] for b in id_batches])),
                "distinct_fraction": float(all_ids.unique().numel() / max(1, all_ids.numel())),
            },
            "conditions": {
                "cpu_count": os.cpu_count(),
                "torch_threads": torch.get_num_threads(),
                "read_threads": num_threads,
                "repeats": repeats,
            },
            "results": {},
        }
        results = report["results"]

        # really in process memory
        ram = InMemoryFeature(np.load(path, allow_pickle=False), dtype=dtype)
        report["feature"] = {
            "path": str(path),
            "shape": list(ram.shape),
            "dtype": str(ram.dtype).replace("torch.", ""),
            "nbytes": ram.nbytes,
        }
        nb = ram.row_nbytes

        buf = torch.empty((max(int(b.shape[0]) for b in id_batches), *ram.row_shape),
                          dtype=ram.dtype)

        def warm_best(f, out=buf) -> float:
            _timed_pass(f, warm, out=out)
            return min(_timed_pass(f, timed, out=out) for _ in range(max(1, repeats)))

        say("ram ...")  # the ceiling is always measured: every ratio refers to it
        results["ceiling"] = _figures(rows_timed, nb, warm_best(_IndexSelect(ram.data)))
        ram.num_threads = num_threads
        results["ram"] = _figures(rows_timed, nb, warm_best(ram))
        results["ram-fresh"] = _figures(rows_timed, nb, warm_best(ram, out=None))
        ram.close()
        del ram

        if "disk-warm" in backends:
            say("disk-warm ...")
            f = DiskFeature(path, num_threads=num_threads, dtype=dtype)
            _timed_pass(f, timed, out=buf)  # page cache warm-up
            results["disk-warm"] = _figures(rows_timed, nb, warm_best(f))
            f.close()

        if "lmdb" in backends:
            say("lmdb (building) ...")
            store = work / "feature.lmdb"
            t0 = time.perf_counter()
            f = LMDBFeature.build(store, path, rows_per_chunk=rows_per_chunk, overwrite=True,
                                  dtype=dtype)
            build_s = time.perf_counter() - t0
            f.num_threads = num_threads
            _timed_pass(f, timed, out=buf)  # bring the store's pages into the page cache
            results["lmdb"] = _figures(rows_timed, nb, warm_best(f))
            results["lmdb"]["build_seconds"] = build_s
            results["lmdb"]["rows_per_chunk"] = f.rows_per_chunk
            f.close()
            shutil.rmtree(store, ignore_errors=True)

        # Cold variants run interleaved, batch by batch, in a rotating order, each after
        # dropping the file from the page cache: caches below the guest's page cache (a VM
        # host's, the disk's) then favour no variant, and their order cancels out.
        variants = []  # (name, feature, drop, extra)
        if "disk-cold" in backends:
            f = DiskFeature(path, num_threads=num_threads, dtype=dtype)
            variants.append(("disk-cold", f, f.drop_page_cache, None))
        if "disk-direct" in backends:
            f = DiskFeature(path, num_threads=num_threads, direct_io=True, dtype=dtype)
            variants.append(("disk-direct", f, lambda: drop_page_cache(path), None))
        if "cache" in backends:
            nrows = int(np.load(path, mmap_mode="r").shape[0])
            cap_bytes = int(cache_fraction * nrows) * nb
            for policy in cache_policies:
                backing = DiskFeature(path, num_threads=num_threads, dtype=dtype)
                f = CachedFeature(backing, cap_bytes, policy=policy)
                variants.append((f"cache-{policy}", f, backing.drop_page_cache, policy))
        if variants:
            for name, f, _, _ in variants:
                say(f"{name}: warm-up ...")
                _timed_pass(f, warm if isinstance(f, CachedFeature) else warm[:1], out=buf)
                if isinstance(f, CachedFeature):
                    f.reset_stats()
            disks = [f for _, f, _, _ in variants if isinstance(f, DiskFeature)]
            disks += [f.feature for _, f, _, _ in variants if isinstance(f, CachedFeature)]

            def drop_all() -> None:
                # The kernel keeps pages that any live mapping still maps, so every variant's
                # map of the file goes before the file is dropped.
                for d in disks:
                    d.drop_page_cache()

            say("cold runs (" + ", ".join(v[0] for v in variants) + ") ...")
            secs = {v[0]: 0.0 for v in variants}
            for i, batch in enumerate(cold):
                k = i % len(variants)
                for name, f, _, _ in variants[k:] + variants[:k]:
                    drop_all()
                    t0 = time.perf_counter()
                    f.read(batch, check=False, out=buf[: batch.shape[0]])
                    secs[name] += time.perf_counter() - t0
            for name, f, _, policy in variants:
                r = _figures(rows_cold, nb, secs[name])
                if isinstance(f, CachedFeature):
                    r.update(hit_rate=f.hit_rate, capacity_rows=f.capacity, policy=policy)
                    f.feature.close()
                else:
                    f.close()
                results[name] = r

        base = results["ceiling"]["rows_per_s"]
        for r in results.values():
            r["ratio_to_ceiling"] = r["rows_per_s"] / base
        return report
    finally:
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)


def sampled_id_batches(graph, seed_pool: np.ndarray, *, num_batches: int, batch_size: int = 1024,
                       fanouts=(15, 10, 5), seed: int = 0) -> list[torch.Tensor]:
    """Input-node ids of real sampled mini-batches (what the loader's feature stage reads)."""
    from ..sampling.neighbor import NeighborSampler

    rng = np.random.default_rng(seed)
    pool = np.asarray(seed_pool, dtype=np.int64)
    if pool.shape[0] == 0:
        raise GraphfeedError("no seed ids to sample from")
    sampler = NeighborSampler(graph, list(fanouts))
    out = []
    for i in range(num_batches):
        seeds = torch.from_numpy(rng.choice(pool, size=min(batch_size, pool.shape[0]), replace=False))
        mb = sampler.sample(seeds, epoch=0, batch_index=i)
        out.append(mb.input_nodes.to(torch.int64))
    return out


def format_report(report: dict) -> str:
    f = report["feature"]
    b = report["batches"]
    lines = [
        f"feature {f['shape']} {f['dtype']} ({f['nbytes'] / 1e9:.2f} GB); "
        f"{b['timed']} timed batches of ~{b['mean_ids']:.0f} ids "
        f"({b['distinct_fraction']:.0%} distinct overall), cold runs over {b['cold_timed']}",
        f"{'backend':<14} {'Mrows/s':>9} {'GB/s':>7} {'x ceil':>7} {'hit rate':>9}",
    ]
    for name, r in report["results"].items():
        hr = f"{r['hit_rate']:.1%}" if "hit_rate" in r else ""
        lines.append(
            f"{name:<14} {r['rows_per_s'] / 1e6:>9.2f} {r['gb_per_s']:>7.2f} "
            f"{r['ratio_to_ceiling']:>7.2f} {hr:>9}"
        )
    return "\n".join(lines)
