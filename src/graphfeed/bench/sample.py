"""``graphfeed bench sample``: sampling alone, and sampling + feature fetch, through the loader.

Figures are wall-clock throughput over ``num_batches`` batches after ``warmup`` batches (which
also compile the numba kernels). Baselines measured in the same run put them in context: a
vectorised pure-torch sampler and the numba kernel with a single thread and one batch in flight.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .._memory import peak_rss_bytes
from ..errors import DatasetError, GraphfeedError


@dataclass
class BenchData:
    """What the benchmark runs on: a graph, a seed pool and optionally the input feature."""

    name: str
    graph: object
    seed_pool: np.ndarray
    feature_path: Optional[Path] = None
    dataset: object = None

    def feature(self, backend: str = "ram", cache_size: int = 0, cache_policy: str = "auto"):
        if self.dataset is not None:
            return self.dataset.node_feature("feat", backend=backend, cache_size=cache_size,
                                             cache_policy=cache_policy)
        if self.feature_path is None:
            return None
        from ..features.registry import open_feature

        return open_feature(self.feature_path, backend, cache_size=cache_size, cache_policy=cache_policy)


def load_bench_data(dataset: Optional[str] = None, graph_dir: Optional[str] = None,
                    data_root: Optional[str] = None) -> BenchData:
    """A built-in dataset name, a prepared dataset folder, or a plain folder of CSC arrays
    (``indptr.npy``, ``indices.npy``; optional ``features.npy`` and ``train_ids.npy``)."""
    from .._io import load_npy
    from ..graph.csc import CSCGraph

    if graph_dir is not None:
        d = Path(graph_dir)
        if not d.is_dir():
            raise GraphfeedError(f"--graph {d}: not a folder")
        if (d / "graphfeed.json").exists():
            from ..datasets.format import Dataset

            ds = Dataset.open(d)
            return BenchData(ds.name, ds.graph, np.asarray(ds.train_ids), dataset=ds)
        graph = CSCGraph.load(d, mmap=True, validate=True)
        pool_path = d / "train_ids.npy"
        if pool_path.exists():
            pool = np.asarray(load_npy(pool_path, mmap=False))
            if pool.ndim != 1 or pool.dtype.kind not in "iu":
                raise DatasetError(f"{pool_path}: expected 1-D integer ids, got {pool.dtype} {pool.shape}")
            if pool.size and (pool.min() < 0 or pool.max() >= graph.num_nodes):
                bad = pool.min() if pool.min() < 0 else pool.max()
                raise DatasetError(f"{pool_path}: id {bad} out of range [0, {graph.num_nodes})")
        else:
            pool = np.arange(graph.num_nodes, dtype=np.int64)
        fpath = d / "features.npy"
        if fpath.exists():
            f = load_npy(fpath, mmap=True)
            if f.shape[0] != graph.num_nodes:
                raise DatasetError(f"{fpath}: {f.shape[0]} rows, but the graph has {graph.num_nodes} nodes")
        return BenchData(d.name, graph, pool.astype(np.int64), fpath if fpath.exists() else None)
    from ..datasets.open import open_dataset

    ds = open_dataset(dataset or "medium", data_root, verbose=True)
    return BenchData(ds.name, ds.graph, np.asarray(ds.train_ids), dataset=ds)


def _seed_batches(pool: np.ndarray, batch_size: int, count: int, seed: int) -> np.ndarray:
    """``count`` batches of ``batch_size`` ids from ``pool``, concatenated: shuffled passes over
    the pool, each cut into whole batches (the remainder of a pass is dropped), so no batch
    holds an id twice (the samplers refuse duplicate seeds) unless the pool is smaller than a
    batch, when passes are simply repeated."""
    rng = np.random.default_rng(seed)
    need = batch_size * count
    n = int(pool.shape[0])
    if n == 0:
        raise GraphfeedError("no seed ids to sample from")
    per_pass = (n // batch_size) * batch_size or n
    reps = -(-need // per_pass)
    ids = np.concatenate([rng.permutation(pool)[:per_pass] for _ in range(reps)])[:need]
    return ids.astype(np.int64)


def _run_loader(sampler, ids, batch_size, warmup, *, feature=None, num_threads=2, prefetch=2,
                device="cpu") -> dict:
    from ..loader import DataLoader, ItemSampler

    items = ItemSampler(ids, batch_size, shuffle=False, drop_last=True, seed=0)
    loader = DataLoader(items, sampler, node_features=None if feature is None else {"feat": feature},
                        num_threads=num_threads, prefetch=prefetch, device=device)
    seeds = edges = batches = inputs = 0
    nbytes = 0
    t0 = c0 = None
    for i, mb in enumerate(loader):
        if i == warmup:
            if feature is not None:  # the timed batches' reads (and the few prefetched ahead)
                feature.reset_counters()
            t0, c0 = time.perf_counter(), time.process_time()
        if i >= warmup:
            seeds += int(mb.seeds.shape[0])
            edges += mb.num_sampled_edges
            inputs += int(mb.input_nodes.shape[0])
            batches += 1
            for v in mb.node_features.values():
                nbytes += v.numel() * v.element_size()
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    loader.close()
    out = _figures(seeds, edges, batches, dt, nbytes)
    if feature is not None:
        disk = disk_figures(feature.counters(), dt)
        if disk is not None:
            out["disk"] = disk
    out["input_nodes_per_batch"] = inputs / max(batches, 1)
    # CPU seconds of the whole process per batch: what a batch costs whatever else the machine
    # runs (wall-clock figures on a shared machine also measure the other processes)
    out["cpu_ms_per_batch"] = cpu / max(batches, 1) * 1e3
    return out


def _run_serial(sampler, ids, batch_size, warmup) -> dict:
    import torch

    seeds = edges = batches = 0
    t0 = None
    n = ids.shape[0] // batch_size
    for i in range(n):
        if i == warmup:
            t0 = time.perf_counter()
        mb = sampler.sample(torch.from_numpy(ids[i * batch_size:(i + 1) * batch_size]), epoch=0, batch_index=i)
        if i >= warmup:
            seeds += int(mb.seeds.shape[0])
            edges += mb.num_sampled_edges
            batches += 1
    return _figures(seeds, edges, batches, time.perf_counter() - t0, 0)


def _fetch_ratios(result: dict, runs: list, fruns: list) -> None:
    """``sample`` / ``sample_fetch`` (the round with the median ratio) and the ratios of
    sampling + fetch to sampling alone: ``fetch_ratio`` (seeds/s, median over rounds) with every
    round's in ``fetch_ratios``, and ``fetch_cpu_ratio`` (CPU per batch of sampling alone over
    that of sampling + fetch, median): the throughput ratio a machine with every core free
    would show when both are CPU-bound."""
    ratios = [f["seeds_per_s"] / r["seeds_per_s"] for r, f in zip(runs, fruns)]
    cpu = [r["cpu_ms_per_batch"] / max(f["cpu_ms_per_batch"], 1e-9) for r, f in zip(runs, fruns)]
    mid = int(np.argsort(ratios)[len(ratios) // 2])
    result["sample"], result["sample_fetch"] = runs[mid], fruns[mid]
    result["fetch_ratio"] = float(np.median(ratios))
    result["fetch_ratios"] = ratios
    result["fetch_cpu_ratio"] = float(np.median(cpu))


def disk_figures(counters: dict, seconds: float) -> Optional[dict]:
    """What the drive did for features read from disk with direct reads (``None`` otherwise),
    from a feature's :meth:`~graphfeed.features.base.Feature.counters` over ``seconds``:
    ``reads_per_s`` (requests), ``bytes_per_s``, ``rows_per_read`` (distinct rows a request
    brought), ``cache_hit_rate`` (of the row cache in front, 0 without one), ``rows_per_s``
    (distinct rows read) and ``wait_share`` (the readers' time in the drive over ``seconds``:
    above 1 when several threads read at once)."""
    disk = counters.get("disk")
    if not disk or not disk.get("batches"):
        return None
    s = max(seconds, 1e-9)
    return {"reads_per_s": disk["reads"] / s, "bytes_per_s": disk["bytes_read"] / s,
            "rows_per_read": disk["rows_per_read"],
            "cache_hit_rate": counters.get("cached", {}).get("hit_rate", 0.0),
            "rows_per_s": disk["rows_read"] / s, "wait_share": disk["wait_s"] / s}


def _figures(seeds, edges, batches, dt, nbytes) -> dict:
    out = {
        "seconds": dt,
        "batches": batches,
        "seeds_per_s": seeds / dt,
        "edges_per_s": edges / dt,
        "batches_per_s": batches / dt,
        "edges_per_batch": edges / max(batches, 1),
    }
    if nbytes:
        out["feature_gb_per_s"] = nbytes / dt / 1e9
        out["feature_mb_per_batch"] = nbytes / max(batches, 1) / 1e6
    return out


def bench_sample(
    data: BenchData,
    *,
    fanouts: Sequence[int] = (15, 10, 5),
    batch_size: int = 1024,
    num_batches: int = 100,
    warmup: int = 5,
    replace: bool = False,
    num_threads: int = 2,
    prefetch: int = 2,
    features: Optional[str] = "ram",
    cache_size: int = 0,
    cache_policy: str = "auto",
    baselines: bool = False,
    seed: int = 0,
    mode: str = "cpu-cpu",
    device: str = "auto",
    method=None,
    random_weights: bool = False,
    random_times: bool = False,
    rounds: int = 1,
) -> dict:
    """Throughput of sampling alone and of sampling + feature fetch; a dict of figures.

    ``mode`` places the data as training would (``graphfeed.place``): ``cpu-cpu`` (default),
    ``cpu-cuda``, ``pinned-cuda``, ``cuda-cuda`` or ``auto``; CUDA modes also report the peak
    GPU memory (with whatever allocator setting is in force: compare runs with
    ``PYTORCH_ALLOC_CONF=expandable_segments:False`` and without).

    With uniform sampling and ``features``, sampling alone and sampling + fetch alternate
    ``rounds`` times (``fetch_ratio``: the median of the per-round seeds/s ratios,
    ``fetch_ratios``: each round's, ``fetch_cpu_ratio``: the same from CPU time per batch, which
    other processes on a shared machine disturb less); ``sample`` and ``sample_fetch`` are the
    round with the median ratio. Every run reports ``cpu_ms_per_batch`` (the whole process).

    ``method``: a ``graphfeed.sampling.SamplingMethod`` (or kind name; bound to the dataset's
    weights and times). A non-uniform method is timed next to uniform sampling in the same run,
    alternating ``rounds`` times (``uniform_sample``, ``ratio_vs_uniform``: the median of the
    per-round seeds/s ratios; ``input_nodes_ratio``: distinct input nodes per batch against
    uniform's). ``random_weights``: replace the graph's weights by seeded uniform weights in
    ``(0, 1]`` (for weighted sampling on a graph without weights); ``random_times``: seeded
    random integer node times in ``[0, 10**6)`` (temporal sampling; each seed's time is its
    node time).
    """
    import torch

    from ..placement.plan import place
    from ..sampling.neighbor import NeighborSampler

    from ..sampling.method import resolve_method

    pool = int(data.seed_pool.shape[0])
    if 0 < pool < batch_size:  # a batch holds distinct seeds: at most the whole pool
        batch_size = pool
    ids = _seed_batches(data.seed_pool, batch_size, num_batches + warmup, seed)
    storage = None
    if features == "auto":  # as training chooses: DataPlan's storage rule on this dataset
        from ..placement.plan import DataPlan

        if data.dataset is None:
            raise GraphfeedError("--features auto needs a dataset (a built-in name or a "
                                 "prepared folder), not a folder of bare arrays")
        plan = DataPlan.resolve(features="auto", cache_size=cache_size,
                                cache_policy=cache_policy).for_dataset(data.dataset, ["feat"])
        features, cache_size, storage = plan.features, plan.cache_size, plan.storage_reason
    feature = data.feature(features, cache_size, cache_policy) if features else None
    warm_s = None
    if feature is not None:  # a static cache is filled before timing, as training fills it
        t0 = time.perf_counter()
        warm_s = time.perf_counter() - t0 if feature.warm() else None
    graph = data.graph
    if random_weights:
        from ..graph.csc import CSCGraph

        w = np.random.default_rng(seed).random(graph.num_edges, dtype=np.float32)
        graph = CSCGraph(graph.indptr, graph.indices, 1.0 - w, trusted=True)  # (0, 1]
    method = resolve_method(method)
    if random_times and method.kind == "temporal":
        rng = np.random.default_rng(seed + 1)
        method = method.bind({"node_times": rng.integers(0, 10**6, graph.num_nodes)})
    elif not method.is_uniform and data.dataset is not None and not (
            method.kind == "weighted" and method.weights == "graph" and graph.weights is not None):
        method = method.bind(data.dataset)
    placed = place(graph, {"feat": feature} if feature is not None else {}, list(fanouts),
                   mode=mode, device=device, replace=replace, seed=seed, method=method)
    sampler = placed.sampler
    dev = placed.device
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    result = {
        "dataset": data.name,
        "num_nodes": data.graph.num_nodes,
        "num_edges": data.graph.num_edges,
        "fanouts": list(fanouts),
        "batch_size": batch_size,
        "num_batches": num_batches,
        "replace": replace,
        "sampler": method.describe(),
        "num_threads": num_threads,
        "prefetch": prefetch,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "mode": placed.mode,
        "placement_reason": (placed.placement.reason
                             + (f"; {storage}" if storage else "")),
        "device": str(dev),
    }
    if method.is_uniform and feature is not None:
        # sampling alone and sampling + fetch alternate ``rounds`` times: on a shared machine
        # both halves of a ratio then see the same load
        fetched = placed.features["feat"]
        runs, fruns = [], []
        for _ in range(max(1, int(rounds))):
            runs.append(_run_loader(sampler, ids, batch_size, warmup, num_threads=num_threads,
                                    prefetch=prefetch, device=dev))
            fruns.append(_run_loader(sampler, ids, batch_size, warmup, feature=fetched,
                                     num_threads=num_threads, prefetch=prefetch, device=dev))
        _fetch_ratios(result, runs, fruns)
    elif method.is_uniform:
        result["sample"] = _run_loader(sampler, ids, batch_size, warmup, num_threads=num_threads,
                                       prefetch=prefetch, device=dev)
    else:  # next to uniform sampling of the same placement, alternating, in this run
        uniform = place(graph, {}, list(fanouts), mode=mode, device=device, replace=replace,
                        seed=seed).sampler
        runs, uruns = [], []
        for _ in range(max(1, int(rounds))):
            uruns.append(_run_loader(uniform, ids, batch_size, warmup, num_threads=num_threads,
                                     prefetch=prefetch, device=dev))
            runs.append(_run_loader(sampler, ids, batch_size, warmup, num_threads=num_threads,
                                    prefetch=prefetch, device=dev))
        ratios = [r["seeds_per_s"] / u["seeds_per_s"] for r, u in zip(runs, uruns)]
        best = int(np.argsort(ratios)[len(ratios) // 2])
        result["sample"], result["uniform_sample"] = runs[best], uruns[best]
        result["ratio_vs_uniform"] = float(np.median(ratios))
        result["ratios_vs_uniform"] = ratios
        result["input_nodes_ratio"] = (runs[best]["input_nodes_per_batch"]
                                       / uruns[best]["input_nodes_per_batch"])
    if feature is not None:
        feature = placed.features["feat"]
        result["features"] = features
        result["cache_bytes"] = int(cache_size) if features != "ram" else 0
        if warm_s is not None:
            result["cache_warm_s"] = warm_s
        result["feature_shape"] = list(feature.shape)
        result["feature_dtype"] = str(feature.dtype).replace("torch.", "")
        if "sample_fetch" not in result:  # a non-uniform method: one run after its rounds
            fetched = _run_loader(sampler, ids, batch_size, warmup, feature=feature,
                                  num_threads=num_threads, prefetch=prefetch, device=dev)
            _fetch_ratios(result, [result["sample"]], [fetched])
    if cuda:
        result["peak_gpu_bytes"] = int(torch.cuda.max_memory_allocated(dev))
        result["peak_gpu_reserved_bytes"] = int(torch.cuda.max_memory_reserved(dev))
        result["alloc_conf"] = os.environ.get("PYTORCH_ALLOC_CONF") or os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    if baselines:
        from ..sampling.torch_sampler import TorchNeighborSampler

        single = NeighborSampler(data.graph, list(fanouts), replace=replace, seed=seed)
        result["baseline_numba_1thread"] = _run_serial(single, ids, batch_size, warmup)
        tsampler = TorchNeighborSampler.from_graph(data.graph, list(fanouts), device="cpu",
                                                   replace=replace, seed=seed)
        result["baseline_torch_vectorised"] = _run_serial(tsampler, ids, batch_size, min(warmup, 2))
        base = result["sample"]["seeds_per_s"]
        result["speedup_vs_numba_1thread"] = base / result["baseline_numba_1thread"]["seeds_per_s"]
        result["speedup_vs_torch_vectorised"] = base / result["baseline_torch_vectorised"]["seeds_per_s"]
    fetch = result.get("sample_fetch") or result["sample"]
    result["seeds_per_s"] = fetch["seeds_per_s"]  # with the feature fetch when there is one
    if "disk" in fetch:
        result["disk"] = fetch["disk"]
    result["peak_rss_bytes"] = peak_rss_bytes()
    return result


def format_report(r: dict) -> str:
    from .._units import format_bytes

    lines = [
        f"dataset {r['dataset']}: {r['num_nodes']:,} nodes, {r['num_edges']:,} edges; fanouts {r['fanouts']}, "
        f"batch {r['batch_size']}, {r['num_batches']} batches, replace={r['replace']}, "
        f"sampler {r.get('sampler', 'uniform')}, "
        f"{r['num_threads']} loader threads, {r['cpu_count']} CPUs",
        f"placement {r['mode']} on {r['device']}: {r['placement_reason']}",
    ]

    def row(label, f):
        extra = f"  {f['feature_gb_per_s']:.2f} GB/s features" if "feature_gb_per_s" in f else ""
        return (f"  {label:<28} {f['seeds_per_s']:>12,.0f} seeds/s  {f['edges_per_s']:>14,.0f} edges/s  "
                f"{f['batches_per_s']:>7.1f} batches/s{extra}")

    lines.append(row("sampling", r["sample"]))
    if "uniform_sample" in r:
        lines.append(row("uniform sampling (same run)", r["uniform_sample"]))
        lines.append(f"  {r['sampler']}: {r['ratio_vs_uniform']:.2f}x uniform's seeds/s (median of "
                     f"{len(r['ratios_vs_uniform'])} alternating rounds: "
                     f"{', '.join(f'{x:.2f}' for x in r['ratios_vs_uniform'])}); "
                     f"{r['sample']['input_nodes_per_batch']:,.0f} input nodes per batch, "
                     f"{r['input_nodes_ratio']:.2f}x uniform's")
    if "sample_fetch" in r:
        lines.append(row(f"sampling + fetch ({r['features']})", r["sample_fetch"]))
        if "fetch_ratio" in r:
            rs = r["fetch_ratios"]
            lines.append(
                f"  sampling + fetch: {r['fetch_ratio']:.2f}x sampling alone's seeds/s"
                + (f" (median of {len(rs)} alternating rounds: {', '.join(f'{x:.2f}' for x in rs)})"
                   if len(rs) > 1 else "")
                + f"; CPU per batch {r['sample']['cpu_ms_per_batch']:.1f} ms alone, "
                f"{r['sample_fetch']['cpu_ms_per_batch']:.1f} ms with the fetch "
                f"({r['fetch_cpu_ratio']:.2f}x)")
    if "disk" in r:
        d = r["disk"]
        lines.append(f"  disk: {d['reads_per_s']:,.0f} reads/s, {format_bytes(d['bytes_per_s'])}/s, "
                     f"{d['rows_per_read']:.2f} rows per read, cache hit rate "
                     f"{d['cache_hit_rate']:.1%}, {d['rows_per_s']:,.0f} rows/s read")
    if "baseline_numba_1thread" in r:
        lines.append(row("numba, 1 thread (baseline)", r["baseline_numba_1thread"]))
        lines.append(row("torch vectorised (baseline)", r["baseline_torch_vectorised"]))
        lines.append(f"  speed-up: {r['speedup_vs_numba_1thread']:.2f}x numba 1-thread, "
                     f"{r['speedup_vs_torch_vectorised']:.2f}x torch vectorised (same run)")
    lines.append(f"  peak RSS {format_bytes(r['peak_rss_bytes'])}"
                 + (f", peak GPU memory {format_bytes(r['peak_gpu_bytes'])} allocated, "
                    f"{format_bytes(r['peak_gpu_reserved_bytes'])} reserved "
                    f"({r['peak_gpu_reserved_bytes'] / max(r['peak_gpu_bytes'], 1):.2f}x; allocator: "
                    f"{r.get('alloc_conf') or 'default'})" if "peak_gpu_bytes" in r else ""))
    return "\n".join(lines)
