"""Where a partitioned rank's CPU goes per batch, against one process sampling the whole graph
(issue 30, item 3).

    PYTHONPATH=src:benchmarks python benchmarks/dist_costs.py PARTS [--batches 20]

Each rank of ``bench dist``'s loop (``DistNeighborSampler.sample`` + ``DistFeature.read`` of the
input nodes into a reused buffer, as the loader reads; one process per part) accumulates CPU time
in buckets by wrapping the functions that do the work (the process's CPU time,
``time.process_time``: a rank is one thread plus gloo's I/O threads, whose work belongs to the
exchange; the one-process reference's gather runs on a thread pool):

- ``exchange``: inside ``Exchange.alltoallv`` (gloo's ``all_to_all_single``: packing, the
  socket copies, and the time it spins or waits on the CPU);
- ``serving``: sampling the requests of every rank, this one's included (``sample_keyed``) and
  reading the rows others asked for;
- ``relabel and the rest``: what is left of ``sample`` (grouping by owner, the relabel, the
  scatter of replies, allocation, Python);
- ``features, own rows``: the rest of ``DistFeature.read``.

The reference is one process: ``KeyedNeighborSampler`` on the whole graph (the same batches,
the same kernels) and a read of the same input rows from the dataset's feature, timed the same
way. Wall time is not used: with more ranks than cores a rank's wall time includes waiting for
a core.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def _timed(obj, name, bucket, spent):
    fn = getattr(obj, name)

    def run(*a, **kw):
        t0 = time.process_time()
        try:
            return fn(*a, **kw)
        finally:
            spent[bucket] += time.process_time() - t0
    setattr(obj, name, run)
    return fn


def _rank(path: str, batches: int, warmup: int, remote_cache: int = 0) -> dict:
    import numpy as np
    import torch

    from graphfeed.distributed import World, init, shutdown
    from graphfeed.partition import dist as D
    from graphfeed.partition.book import load_part, read_book

    w = init(World.from_env(), backend="gloo")
    try:
        spent = {"exchange": 0.0, "serving": 0.0}
        book = read_book(path)
        ex = D.Exchange()
        part = load_part(book, ex.rank // max(1, ex.size // book.num_parts))
        _timed(ex, "alltoallv", "exchange", spent)
        _timed(D, "sample_keyed", "serving", spent)
        sampler = D.DistNeighborSampler(part, [15, 10, 5], ex, seed=0)
        feat = D.DistFeature(part, "feat", ex)
        train = np.asarray(part.splits["train"])
        rows = {"sample": [], "features": [], "exchange": [], "exchange_sample": [],
                "serving": []}
        buf = None
        prof = None
        if os.environ.get("DIST_COSTS_PROFILE") and w.rank == 0:  # cProfile of rank 0's reads
            import cProfile

            prof = cProfile.Profile()
        for i in range(warmup + batches):
            if i == warmup and remote_cache:  # ranked by the warm-up batches' requests
                feat.build_cache(remote_cache)
            ids = train[i * 1024:(i + 1) * 1024]
            for k in spent:
                spent[k] = 0.0
            t0 = time.process_time()
            mb = sampler.sample(ids, epoch=0, batch_index=i)
            t1 = time.process_time()
            exchange_sample = spent["exchange"]
            if prof is not None and i >= warmup:
                prof.enable()
            n = int(mb.input_nodes.shape[0])  # into a reused buffer, as the loader reads
            if buf is None or buf.shape[0] < n:
                buf = torch.empty((2 * n, *feat.shape[1:]), dtype=feat.dtype)
            feat.read(mb.input_nodes, out=buf[:n], check=False)
            if prof is not None and i >= warmup:
                prof.disable()
            t2 = time.process_time()
            if i >= warmup:
                rows["sample"].append(t1 - t0)
                rows["features"].append(t2 - t1)
                rows["exchange"].append(spent["exchange"])
                rows["exchange_sample"].append(exchange_sample)
                rows["serving"].append(spent["serving"])
        if prof is not None:
            import pstats

            with open(os.environ["DIST_COSTS_PROFILE"], "w") as f:
                pstats.Stats(prof, stream=f).sort_stats("tottime").print_stats(25)
        return {"rank": w.rank, "cache_hit_rate": feat.cache_stats.hit_rate,
                **{k: 1e3 * statistics.median(v) for k, v in rows.items()}}
    finally:
        shutdown()


def _single(dataset: str, batches: int, warmup: int) -> dict:
    """Batches of 1024 training ids of the whole graph, sampled and read by one process."""
    import numpy as np
    import torch

    from graphfeed.datasets.open import open_dataset
    from graphfeed.partition.keyed import KeyedNeighborSampler

    ds = open_dataset(dataset)
    sampler = KeyedNeighborSampler(ds.graph, [15, 10, 5], seed=0)
    feat = ds.node_feature("feat")
    train = np.asarray(ds.train_ids)
    rng = np.random.default_rng(0)
    out = {"sample": [], "features": []}
    buf = torch.empty((300_000, *feat.shape[1:]), dtype=feat.dtype)
    for i in range(warmup + batches):
        ids = np.sort(rng.choice(train, 1024, replace=False))
        t0 = time.process_time()
        mb = sampler.sample(ids, epoch=0, batch_index=i)
        t1 = time.process_time()
        n = int(mb.input_nodes.shape[0])
        feat.read(torch.as_tensor(mb.input_nodes), out=buf[:n], check=False)
        t2 = time.process_time()
        if i >= warmup:
            out["sample"].append(t1 - t0)
            out["features"].append(t2 - t1)
    return {k: 1e3 * statistics.median(v) for k, v in out.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("parts", help="a 'graphfeed partition' folder")
    p.add_argument("--dataset", default="medium", help="the dataset it was partitioned from")
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--remote-cache", type=int, default=0, metavar="ROWS",
                   help="remote rows each rank caches (train's --remote-cache), ranked by the "
                        "requests of the warm-up batches")
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)

    from graphfeed.distributed import launch
    from graphfeed.partition.book import read_book

    nproc = read_book(args.parts).num_parts
    ranks = launch(_rank, nproc, args.parts, args.batches, args.warmup, args.remote_cache,
                   preload=("dist_costs",))
    single = _single(args.dataset, args.batches, args.warmup)
    keys = ("sample", "features", "exchange", "exchange_sample", "serving")
    mean = {k: statistics.mean(r[k] for r in ranks) for k in keys}
    total = mean["sample"] + mean["features"]
    one = single["sample"] + single["features"]
    print(f"{args.parts}: {nproc} ranks, CPU ms per batch (median over {args.batches} batches, "
          f"mean over ranks)")
    print(f"  rank total {total:.1f} ms = sample {mean['sample']:.1f} + features "
          f"{mean['features']:.1f}; of which exchange {mean['exchange']:.1f} ("
          f"{mean['exchange_sample']:.1f} while sampling), serving samples "
          f"{mean['serving']:.1f}, the rest {total - mean['exchange'] - mean['serving']:.1f}")
    if args.remote_cache:
        print(f"  remote cache {args.remote_cache} rows per rank: hit rate "
              f"{statistics.mean(r['cache_hit_rate'] for r in ranks):.3f}")
    print(f"  one process: {one:.1f} ms = sample {single['sample']:.1f} + features "
          f"{single['features']:.1f}; rank / one process {total / one:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ranks": ranks, "mean": mean, "single": single}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
