"""Where a sample + fetch batch spends its CPU: the stages timed one at a time on one thread.

    PYTHONPATH=src python benchmarks/pipeline_costs.py [--dataset medium] [--batches 10] [--repeats 3]

For each of ``--batches`` real batches (fanouts 15,10,5, 1024 seeds), repeated ``--repeats``
times, every variant below runs back to back on the SAME ids (interleaved, so load from other
processes hits them alike), timed in this thread's CPU time (``time.thread_time``: on a shared
machine, time spent descheduled does not count; cache and memory-bandwidth contention still
does). Figures are medians over all batches and repeats, and each variant's median per-batch
ratio to ``gather`` (what the loader does):

- ``sample``: ``sampler.sample`` of the batch (uniform, one thread).
- ``gather``: the prefetching kernel (``features/_gather.py``) reading the batch's input rows from
  the dataset's feature as the loader gets it (a memory map of the page cache) into a reused
  buffer.
- ``gather-uniform``: the same number of uniformly random ids (not the sampled ones).
- ``gather-anon-4k`` / ``gather-anon-huge``: the table copied into anonymous memory with 4 KiB
  pages / with transparent huge pages (``features/_hugepages.py``).
- ``read-only``: the same kernel, 1024 rows at a time into one buffer that stays in L2: the
  read half of the gather (the prefetch restarts every 1024 rows, so slightly pessimistic).
- ``gather-fresh``: into a new tensor per batch (page faults on the output).
- ``index-select-1t`` / ``index-select-2t``: ``torch.index_select(out=)`` with 1 and 2 intra-op
  threads; for 2 threads the wall time is printed too (the issue quoted a 2-thread figure).

Then the bound: with both cores busy sampling whole batches (the loader's 2 threads), adding a
fetch of ``G`` CPU-ms to a batch that samples in ``S`` CPU-ms gives at most ``S / (S + G)`` of
sampling alone's throughput.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="medium")
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args(argv)

    from graphfeed.datasets.open import open_dataset
    from graphfeed.features._gather import gather_rows
    from graphfeed.features._hugepages import advise_huge_pages
    from graphfeed.features._rows import word_view
    from graphfeed.sampling.neighbor import NeighborSampler

    sink = None

    def read_only(src, ids):
        # the same kernel, 1024 rows at a time into one 400 KB buffer that stays in L2: the
        # writes cost next to nothing, what remains is the read half of the gather
        nonlocal sink
        if sink is None:
            sink = np.zeros((1024, src.shape[1]), src.dtype)
        for s in range(0, ids.shape[0], 1024):
            part = ids[s:s + 1024]
            gather_rows(src, part, sink, 0, part.shape[0])

    ds = open_dataset(args.dataset, None)
    table = ds.node_feature("feat", "ram").data  # as the loader reads it (a memory map)
    n_rows = table.shape[0]
    mapped = word_view(table, np.dtype(np.uint64)) if table.element_size() * table[0].numel() % 8 == 0 \
        else None
    if mapped is None:
        print("row size is not a multiple of 8 bytes; this script assumes it is", file=sys.stderr)
        return 2
    anon4k = torch.empty_like(table)  # torch's allocator: 4 KiB pages (no MADV_HUGEPAGE)
    anon4k.copy_(table)
    huge = torch.empty_like(table)
    huge.copy_(table)
    advised = advise_huge_pages(huge)
    w4k, whuge = word_view(anon4k, mapped.dtype), word_view(huge, mapped.dtype)

    sampler = NeighborSampler(ds.graph, [15, 10, 5], seed=0)
    rng = np.random.default_rng(0)
    pool = np.asarray(ds.train_ids)
    seeds = [torch.from_numpy(rng.permutation(pool)[:1024].astype(np.int64)) for _ in range(args.batches)]
    inputs = [sampler.sample(s, batch_index=i).input_nodes for i, s in enumerate(seeds)]
    most = max(int(x.shape[0]) for x in inputs)
    buf = torch.empty((most, *table.shape[1:]), dtype=table.dtype)
    buf.zero_()  # fault it in once, as a pooled loader buffer is
    dst = word_view(buf, mapped.dtype)

    def timed(fn):
        t = time.thread_time()
        fn()
        return time.thread_time() - t

    variants = {
        "sample": lambda i, ids, u: sampler.sample(seeds[i], batch_index=i),
        "gather": lambda i, ids, u: gather_rows(mapped, ids, dst, 0, ids.shape[0]),
        "gather-uniform": lambda i, ids, u: gather_rows(mapped, u, dst, 0, u.shape[0]),
        "gather-anon-4k": lambda i, ids, u: gather_rows(w4k, ids, dst, 0, ids.shape[0]),
        "gather-anon-huge": lambda i, ids, u: gather_rows(whuge, ids, dst, 0, ids.shape[0]),
        "read-only": lambda i, ids, u: read_only(mapped, ids),
        "gather-fresh": lambda i, ids, u: gather_rows(
            mapped, ids, word_view(torch.empty((ids.shape[0], *table.shape[1:]), dtype=table.dtype),
                                   mapped.dtype), 0, ids.shape[0]),
        "index-select-1t": None,
    }
    first = inputs[0].numpy()
    for name, fn in variants.items():  # compile, fault in
        if fn is not None:
            fn(0, first, first)
    read_only(mapped, first)
    res = {k: [] for k in variants}
    res["index-select-2t"] = []
    wall2 = []
    threads = torch.get_num_threads()
    for _ in range(args.repeats):
        for i, t_ids in enumerate(inputs):
            ids = t_ids.numpy()
            u = rng.integers(0, n_rows, ids.shape[0])
            for name, fn in variants.items():
                if name == "index-select-1t":
                    torch.set_num_threads(1)
                    res[name].append(timed(lambda: torch.index_select(table, 0, t_ids,
                                                                      out=buf[: ids.shape[0]])))
                    torch.set_num_threads(2)
                    c0, w0 = time.process_time(), time.perf_counter()
                    torch.index_select(table, 0, t_ids, out=buf[: ids.shape[0]])
                    wall2.append(time.perf_counter() - w0)
                    res["index-select-2t"].append(time.process_time() - c0)
                else:
                    res[name].append(timed(lambda: fn(i, ids, u)))
    torch.set_num_threads(threads)

    rows = float(np.mean([int(x.shape[0]) for x in inputs]))
    base = np.array(res["gather"])
    out = {"dataset": ds.name, "rows_per_batch": rows, "row_bytes": int(table[0].numel() * table.element_size()),
           "huge_page_bytes_advised": int(advised), "batches": args.batches, "repeats": args.repeats,
           "cpu_ms": {}, "x_gather": {}}
    print(f"{ds.name}: {rows:,.0f} input rows per batch of {out['row_bytes']} bytes; "
          f"{args.batches} batches x {args.repeats} repeats; CPU ms per batch (one thread)")
    for name, v in res.items():
        v = np.array(v)
        out["cpu_ms"][name] = float(np.median(v) * 1e3)
        out["x_gather"][name] = float(np.median(v / base))
        extra = f"   wall {np.median(wall2) * 1e3:6.2f} ms" if name == "index-select-2t" else ""
        mrows = "" if name == "sample" else f"  {rows / np.median(v) / 1e6:5.2f} M rows/s of CPU"
        print(f"  {name:<18} {np.median(v) * 1e3:7.2f} ms  (min {v.min() * 1e3:6.2f})  "
              f"x gather {np.median(v / base):5.2f}{mrows}{extra}")
    s = out["cpu_ms"]["sample"]
    out["bound"] = {k: s / (s + out["cpu_ms"][k]) for k in
                    ("gather", "gather-anon-4k", "gather-anon-huge", "read-only", "index-select-2t")}
    print("bound S / (S + G) on 2 cores with 2 batch threads: " + ", ".join(
        f"{k} {v:.2f}" for k, v in out["bound"].items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
