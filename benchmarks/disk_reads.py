"""Direct reads of random rows against fio on the same file (issue 38, item 4): reads/s of
``DiskFeature(direct_io=True)`` and fio's 4 KiB random-read IOPS at the same queue depth.

    PYTHONPATH=src python benchmarks/disk_reads.py FILE.npy [--seconds 15] [--rounds 2]
        [--rows-per-batch 100000] [--queue-depth 64] [--io-engine auto] [--max-gap 8192]
        [--max-read 131072] [--dtype bfloat16] [--fio-mix] [--json [OUT]]

Each round runs, for every configuration (every combination of the comma-separated
``--rows-per-batch``, ``--queue-depth`` and ``--max-gap`` values), fio for ``--seconds``::

    fio --name=r --filename=FILE --readonly --rw=randread --bs=4k --direct=1
        --ioengine=io_uring --iodepth=QD --runtime=S --time_based --output-format=json

and DiskFeature for as long, in alternating order round by round (so a cache below the guest, a
VM host's or the disk's own, or other load favours neither). DiskFeature reads batches of
distinct random row ids, sorted (what a ``CachedFeature`` passes on its misses), drawn by a
second thread while the previous batch is read, as a loader's sampler would; the figures are its
``stats()`` over the wall time of the run:

- ``reads_per_s`` (requests the drive saw) against fio's ``iops``: ``reads_ratio``; the target is
  0.8 or more;
- ``rows_per_s`` (distinct rows read) against fio's ``iops``: ``rows_ratio`` (rows that share a
  block, or blocks merged by ``max_gap``, make it larger than ``reads_ratio``);
- ``rows_per_read``, ``bytes_per_read``, ``bytes_per_s``;
- ``cpu_us_per_read``: the process's CPU time (user and system) during the run, less the id
  thread's own, per read, and its split ``user_us_per_read`` / ``sys_us_per_read`` (our loop
  against the kernel's io_uring, filesystem, block layer and driver); fio's the same way (its
  ``usr_cpu`` and ``sys_cpu``).

Merged reads are longer than fio's 4 KiB, and each costs more: ``--fio-mix`` also runs fio with
DiskFeature's own mix of read sizes (``--bssplit``, from the plan of one batch), so
``mix_reads_ratio`` compares requests of the same sizes. Without fio (or where it fails) only
DiskFeature's figures are given. The load average
(``os.getloadavg``) is printed before and after: on a shared machine the rates are rough.
Make the file with, e.g., ``numpy.lib.format.open_memmap(path, "w+", np.uint16, (n, 128))``
filled with random values (a file of zeros may be sparse, which reads faster than a disk).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import queue
import resource
import shutil
import statistics
import subprocess
import threading
import time

import numpy as np


def _ints(text: str) -> list[int]:
    return [int(float(v)) for v in str(text).split(",") if v.strip()]


def read_size_mix(feature, rows_per_batch: int, seed: int) -> str:
    """fio's ``--bssplit`` for the sizes of the reads DiskFeature plans for one batch of
    ``rows_per_batch`` sorted distinct random rows (percentages summing to 100)."""
    from graphfeed.features.disk import DIRECT_ALIGN, coalesce_blocks

    ids = np.sort(np.random.default_rng(seed).choice(feature.num_rows,
                                                     min(rows_per_batch, feature.num_rows),
                                                     replace=False))
    m = ids.shape[0]
    start, length, off = (np.empty(m, np.int64) for _ in range(3))
    first = np.empty(m + 1, np.int64)
    nr = coalesce_blocks(ids, feature._offset, feature.row_nbytes, DIRECT_ALIGN, feature.max_gap,
                         feature.max_read, start, length, first, off)
    sizes, counts = np.unique(length[:nr], return_counts=True)
    # fio takes whole percents: sizes under 1% become one size, their mean (in blocks), so the
    # mix keeps the mean read length (a long tail of merged reads carries much of it)
    rare = counts * 100 < nr
    if rare.any():
        mean = (sizes[rare] * counts[rare]).sum() / counts[rare].sum()
        tail = int(round(mean / DIRECT_ALIGN)) * DIRECT_ALIGN
        keep = ~rare
        sizes = np.append(sizes[keep], tail)
        counts = np.append(counts[keep], counts[rare].sum())
    exact = 100.0 * counts / counts.sum()
    pct = np.floor(exact).astype(int)
    for i in np.argsort(pct - exact)[: 100 - int(pct.sum())]:  # largest remainders first
        pct[i] += 1
    return ":".join(f"{int(b)}/{int(q)}" for b, q in zip(sizes, pct) if q > 0)


def run_fio(path: str, queue_depth: int, seconds: float, bs: str = "4k") -> dict:
    """fio's random direct reads of ``bs`` (or a ``--bssplit`` mix, ``size/percent:...``) at
    ``queue_depth`` for ``seconds``: ``iops``, ``bytes_per_s``, ``cpu_us_per_read`` (split
    ``user_``/``sys_us_per_read``) and ``mean_latency_us`` (or ``error``)."""
    fio = shutil.which("fio")
    if fio is None:
        return {"error": "fio is not installed"}
    size = f"--bssplit={bs}" if "/" in bs else f"--bs={bs}"
    cmd = [fio, "--name=r", f"--filename={path}", "--readonly", "--rw=randread", size,
           "--direct=1", "--ioengine=io_uring", f"--iodepth={queue_depth}",
           f"--runtime={max(1, int(round(seconds)))}", "--time_based", "--output-format=json"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    try:
        job = json.loads(proc.stdout[proc.stdout.index("{"):])["jobs"][0]
    except (ValueError, KeyError, IndexError):
        return {"error": f"fio failed ({proc.returncode}): {proc.stderr.strip()[-300:]}"}
    r = job["read"]
    ios = max(1, int(r["total_ios"]))
    runtime_s = r["runtime"] / 1000.0
    per_read = runtime_s / ios * 1e6 / 100.0
    return {"iops": r["iops"], "bytes_per_s": r["bw_bytes"],
            "cpu_us_per_read": (job["usr_cpu"] + job["sys_cpu"]) * per_read,
            "user_us_per_read": job["usr_cpu"] * per_read,
            "sys_us_per_read": job["sys_cpu"] * per_read,
            "mean_latency_us": r["clat_ns"]["mean"] / 1000.0}


def run_ours(feature, rows_per_batch: int, seconds: float, seed: int) -> dict:
    """``feature.read`` of sorted distinct random ids for ``seconds``; its stats per second."""
    n = feature.num_rows
    k = min(rows_per_batch, n)
    batches: queue.Queue = queue.Queue(maxsize=2)
    stop = threading.Event()
    id_cpu = [0.0, 0.0]  # user, system

    def draw():  # the next batch while this one is read, as the loader's sampler would
        rng = np.random.default_rng(seed)
        r0 = resource.getrusage(resource.RUSAGE_THREAD)
        while not stop.is_set():
            ids = np.sort(rng.choice(n, k, replace=False))
            while not stop.is_set():
                try:
                    batches.put(ids, timeout=0.1)
                    break
                except queue.Full:
                    pass
        r1 = resource.getrusage(resource.RUSAGE_THREAD)
        id_cpu[:] = [r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime]

    drawer = threading.Thread(target=draw, name="disk-reads-ids")
    drawer.start()
    first = batches.get()  # not timed: the first draw
    feature.reset_stats()
    c0, t0 = os.times(), time.perf_counter()
    ids = first
    while True:
        feature.read(ids, check=False)
        if time.perf_counter() - t0 >= seconds:
            break
        ids = batches.get()
    wall = time.perf_counter() - t0
    c1 = os.times()
    stop.set()
    drawer.join()
    s = feature.stats()
    user = max(0.0, c1.user - c0.user - id_cpu[0])
    system = max(0.0, c1.system - c0.system - id_cpu[1])
    reads = max(1, s["reads"])
    return {"seconds": wall, "batches": s["batches"], "reads": s["reads"],
            "reads_per_s": s["reads"] / wall, "rows_per_s": s["rows_read"] / wall,
            "bytes_per_s": s["bytes_read"] / wall, "rows_per_read": s["rows_per_read"],
            "bytes_per_read": s["bytes_read"] / reads, "wait_fraction": s["wait_s"] / wall,
            "cpu_us_per_read": (user + system) / reads * 1e6,
            "user_us_per_read": user / reads * 1e6, "sys_us_per_read": system / reads * 1e6}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", help="a C-ordered .npy (a few GB or more, on the disk to measure)")
    p.add_argument("--seconds", type=float, default=15.0, help="per run, fio's and ours")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--rows-per-batch", default="100000", help="comma-separated")
    p.add_argument("--queue-depth", default="64", help="comma-separated (fio's iodepth too)")
    p.add_argument("--max-gap", default=None, help="comma-separated bytes (DiskFeature's default)")
    p.add_argument("--max-read", type=int, default=None)
    p.add_argument("--io-engine", default="auto", choices=("auto", "uring", "threads"))
    p.add_argument("--dtype", default=None,
                   help="the rows' dtype where the file holds its bits (bfloat16 for uint16: "
                        "the default for a uint16 file)")
    p.add_argument("--no-fio", action="store_true")
    p.add_argument("--fio-mix", action="store_true",
                   help="also run fio with DiskFeature's mix of read sizes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="OUT",
                   help="print the results as one JSON line (and write it to OUT)")
    args = p.parse_args(argv)

    from graphfeed.features.disk import (DEFAULT_MAX_GAP, DEFAULT_MAX_READ, DiskFeature,
                                         read_npy_header)

    np_dtype = read_npy_header(args.file)[0]
    dtype = args.dtype or ("bfloat16" if np_dtype == np.uint16 else None)
    gaps = _ints(args.max_gap) if args.max_gap else [DEFAULT_MAX_GAP]
    configs = list(itertools.product(_ints(args.rows_per_batch), _ints(args.queue_depth), gaps))
    load_before = os.getloadavg()
    runs: dict = {c: {"fio": [], "fio_mix": [], "ours": []} for c in configs}
    features = {}
    for rows, qd, gap in configs:
        f = DiskFeature(args.file, direct_io=True, queue_depth=qd, max_gap=gap,
                        max_read=args.max_read or DEFAULT_MAX_READ, io_engine=args.io_engine,
                        dtype=dtype)
        f.read(np.arange(min(8, f.num_rows)))  # compile or load the kernels, open the ring
        features[(rows, qd, gap)] = f
    engine = next(iter(features.values())).engine
    mixes = ({c: read_size_mix(features[c], c[0], args.seed) for c in configs}
             if args.fio_mix else {})
    for rnd in range(args.rounds):
        for c in configs:
            rows, qd, gap = c
            order = ("fio", "ours") if rnd % 2 == 0 else ("ours", "fio")
            for who in order:
                if who == "fio":
                    if not args.no_fio:
                        runs[c]["fio"].append(run_fio(args.file, qd, args.seconds))
                        if c in mixes:
                            runs[c]["fio_mix"].append(run_fio(args.file, qd, args.seconds,
                                                              mixes[c]))
                else:
                    runs[c]["ours"].append(run_ours(features[c], rows, args.seconds,
                                                    args.seed + rnd))
    for f in features.values():
        f.close()
    load_after = os.getloadavg()

    results = []
    for (rows, qd, gap), r in runs.items():
        ours = {k: statistics.median(x[k] for x in r["ours"]) for k in r["ours"][0]}
        fio_ok = [x for x in r["fio"] if "iops" in x]
        fio = ({k: statistics.median(x[k] for x in fio_ok) for k in fio_ok[0]} if fio_ok
               else {"error": r["fio"][0]["error"] if r["fio"] else "not run"})
        entry = {"rows_per_batch": rows, "queue_depth": qd, "max_gap": gap, "engine": engine,
                 "ours": ours, "fio": fio,
                 "rounds": {"ours": r["ours"], "fio": r["fio"]}}
        if fio_ok:
            entry["reads_ratio"] = ours["reads_per_s"] / fio["iops"]
            entry["rows_ratio"] = ours["rows_per_s"] / fio["iops"]
        mix_ok = [x for x in r["fio_mix"] if "iops" in x]
        if mix_ok:
            entry["fio_mix"] = {"bssplit": mixes[(rows, qd, gap)],
                                "iops": statistics.median(x["iops"] for x in mix_ok),
                                "bytes_per_read": statistics.median(
                                    x["bytes_per_s"] / x["iops"] for x in mix_ok)}
            entry["rounds"]["fio_mix"] = r["fio_mix"]
            entry["mix_reads_ratio"] = ours["reads_per_s"] / entry["fio_mix"]["iops"]
        results.append(entry)
        line = (f"rows/batch {rows:,}, queue depth {qd}, max_gap {gap}, {engine}: "
                f"{ours['reads_per_s']:,.0f} reads/s ({ours['bytes_per_read'] / 1024:.1f} KiB "
                f"each, {ours['bytes_per_s'] / 1e6:.0f} MB/s), {ours['rows_per_s']:,.0f} rows/s, "
                f"{ours['rows_per_read']:.2f} rows/read, {ours['cpu_us_per_read']:.2f} us CPU/read "
                f"({ours['user_us_per_read']:.2f} user)")
        if fio_ok:
            line += (f"; fio {fio['iops']:,.0f} IOPS ({fio['cpu_us_per_read']:.2f} us CPU/read, "
                     f"{fio['user_us_per_read']:.2f} user): "
                     f"reads {entry['reads_ratio']:.2f}x, rows {entry['rows_ratio']:.2f}x fio")
        else:
            line += f"; fio: {fio['error']}"
        if mix_ok:
            fm = entry["fio_mix"]
            line += (f"; fio with our read sizes ({fm['bytes_per_read'] / 1024:.1f} KiB each) "
                     f"{fm['iops']:,.0f} IOPS: reads {entry['mix_reads_ratio']:.2f}x")
        print(line)
    print(f"medians of {args.rounds} rounds of {args.seconds:g} s each; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after ({os.cpu_count()} CPUs)")
    out = {"file": os.path.abspath(args.file), "file_bytes": os.path.getsize(args.file),
           "seconds": args.seconds, "rounds": args.rounds, "load_before": load_before,
           "load_after": load_after, "cpus": os.cpu_count(), "results": results}
    if args.json is not None:
        line = json.dumps(out)
        if args.json != "-":
            with open(args.json, "w") as fh:
                fh.write(line + "\n")
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
