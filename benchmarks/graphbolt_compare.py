"""graphfeed's CPU sampling against DGL GraphBolt's, on the same graph and seeds, in one run
(issue 31).

GraphBolt needs a torch that DGL supports (DGL 2.1-2.2: torch <= 2.3), so it runs in its own
virtual environment, as a child process of this script; graphfeed runs in this one. The two
alternate for ``--rounds`` rounds and the report gives each figure's median and the ratio
graphfeed / GraphBolt of the same round.

    # once: a virtual environment with GraphBolt (DGL 2.1.0 on torch 2.2.0, from the package index)
    python3.11 -m venv /tmp/gbvenv
    /tmp/gbvenv/bin/pip install torch==2.2.0 dgl==2.1.0 'numpy<2' torchdata==0.7.1 'pandas<2.3' \\
        pydantic pyyaml psutil requests tqdm scipy networkx
    # once: the anchor graph (R-MAT, 2^20 nodes, 16 edges per node, Graph500's a, b, c) as
    # indptr.npy / indices.npy / feat.npy in a folder
    python benchmarks/graphbolt_compare.py make-rmat /tmp/rmat20
    # the comparison
    python benchmarks/graphbolt_compare.py compare /tmp/rmat20 --graphbolt-python /tmp/gbvenv/bin/python

What each side runs, per batch of ``--batch-size`` seeds (drawn once, the same for both; fanouts
15,10,5, without replacement):

- GraphBolt: per layer, ``FusedCSCSamplingGraph.sample_neighbors`` (``sample_layer_neighbors``
  for LABOR, ``temporal_sample_neighbors`` for temporal, ``probs_name=`` for weighted) then
  ``unique_and_compact_csc_formats``, as its ``NeighborSampler`` does; the fetch is
  ``torch.index_select`` of the input nodes' rows (its in-memory ``TorchBasedFeature``).
- graphfeed: ``NeighborSampler.sample`` (the method's kernels, relabel included); the fetch is
  ``InMemoryFeature.read`` (the prefetching gather) into an output buffer each thread reuses,
  as graphfeed's loader does (GraphBolt's feature fetch allocates its output per batch).

Figures:

- ``cpu_ms_1t``: CPU milliseconds per batch on one thread (``time.thread_time``, torch at one
  intra-op thread), median over the batches;
- ``seeds_per_s_2t``: seeds per second with two Python threads each taking whole batches (torch
  at one intra-op thread each; GraphBolt's ops release the GIL as numba's kernels do), and for
  GraphBolt also one thread with two intra-op threads: the better of the two is its figure;
- the same with ``--fetch`` (sample, then gather the input nodes' features).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

FANOUTS = (15, 10, 5)  # input layer first (graphfeed's order); GraphBolt samples the seeds' 5 first


# ----------------------------------------------------------------------------- the graph
def make_rmat(out: str, scale: int, edge_factor: int, dim: int, seed: int) -> None:
    """R-MAT edges (a, b, c = 0.57, 0.19, 0.19, Graph500's), node ids randomly permuted, self
    loops and duplicates dropped, stored both ways as CSC (``indptr`` int64, ``indices`` int32);
    ``feat.npy`` random float32 rows; ``weights.npy`` per edge in (0, 1]; ``times.npy`` per node."""
    rng = np.random.default_rng(seed)
    n = 1 << scale
    m = n * edge_factor // 2  # one-way edges; stored both ways below
    src = np.zeros(m, np.int64)
    dst = np.zeros(m, np.int64)
    a, b, c = 0.57, 0.19, 0.19
    for level in range(scale):
        r = rng.random(m, dtype=np.float32)
        down = r >= a + b  # quadrants c, d: source bit set
        right = ((r >= a) & (r < a + b)) | (r >= a + b + c)  # quadrants b, d: destination bit
        src |= down.astype(np.int64) << level
        dst |= right.astype(np.int64) << level
    perm = rng.permutation(n)
    src, dst = perm[src], perm[dst]
    keep = src != dst
    src, dst = src[keep], dst[keep]
    s2 = np.concatenate([src, dst])
    d2 = np.concatenate([dst, src])
    key = np.unique(d2 * n + s2)  # sorted by destination, then source; duplicates dropped
    d2, s2 = key // n, key % n
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(d2, minlength=n), out=indptr[1:])
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "indptr.npy"), indptr)
    np.save(os.path.join(out, "indices.npy"), s2.astype(np.int32))
    np.save(os.path.join(out, "feat.npy"), rng.random((n, dim), dtype=np.float32))
    np.save(os.path.join(out, "weights.npy"),
            (1.0 - rng.random(s2.size, dtype=np.float32)).astype(np.float32))
    np.save(os.path.join(out, "times.npy"), rng.integers(0, 1_000_000, n).astype(np.int64))
    deg = np.diff(indptr)
    print(f"{out}: {n:,} nodes, {s2.size:,} edges (both ways), in-degree median "
          f"{int(np.median(deg))}, mean {deg.mean():.1f}, max {deg.max():,}")


def _seed_batches(folder: str, batch_size: int, count: int, seed: int) -> list[np.ndarray]:
    indptr = np.load(os.path.join(folder, "indptr.npy"), mmap_mode="r")
    n = indptr.shape[0] - 1
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n)[: batch_size * count]
    return [np.sort(ids[i * batch_size:(i + 1) * batch_size]) for i in range(count)]


# ----------------------------------------------------------------------------- one side
def _graphbolt_side(folder, method, batches, fetch):
    import torch
    import dgl.graphbolt as gb

    torch.set_num_threads(1)
    indptr = torch.from_numpy(np.load(os.path.join(folder, "indptr.npy")))
    indices = torch.from_numpy(np.load(os.path.join(folder, "indices.npy")))
    edge_attrs, node_attrs = {}, {}
    if method == "weighted":
        edge_attrs["w"] = torch.from_numpy(np.load(os.path.join(folder, "weights.npy")))
    times = None
    if method == "temporal":  # its temporal kernel takes int64 node ids only (DGL 2.1)
        indices = indices.long()
        times = torch.from_numpy(np.load(os.path.join(folder, "times.npy")))
        node_attrs["t"] = times
    g = gb.fused_csc_sampling_graph(indptr, indices, edge_attributes=edge_attrs or None,
                                    node_attributes=node_attrs or None)
    feat = torch.from_numpy(np.load(os.path.join(folder, "feat.npy"))) if fetch else None
    fanouts = [torch.tensor([f]) for f in reversed(FANOUTS)]  # the seeds' layer first

    def one(seeds_np):
        seeds = torch.from_numpy(seeds_np).to(indices.dtype)
        seed_t = times[seeds] if times is not None else None
        edges = 0
        for f in fanouts:
            if method == "uniform":
                sub = g.sample_neighbors(seeds, f)
            elif method == "weighted":
                sub = g.sample_neighbors(seeds, f, probs_name="w")
            elif method == "labor":
                sub = g.sample_layer_neighbors(seeds, f)
            else:
                sub = g.temporal_sample_neighbors(seeds, seed_t, f,
                                                  node_timestamp_attr_name="t")
            csc = sub.sampled_csc if hasattr(sub, "sampled_csc") else sub
            if method == "temporal":  # as its TemporalNeighborSampler: no deduplication,
                # each sampled source carries its destination's time
                uniq, compacted, seed_t = gb.internal.compact_csc_format(csc, seeds, seed_t)
            else:
                uniq, compacted = gb.unique_and_compact_csc_formats(csc, seeds)
            seeds = uniq
            edges += int(csc.indices.numel())
        if feat is not None:
            torch.index_select(feat, 0, seeds)
        return int(seeds.numel()), edges

    def set_threads(k):
        torch.set_num_threads(k)

    return one, set_threads


def _graphfeed_side(folder, method, batches, fetch):
    import torch

    import graphfeed as gf
    from graphfeed.features.memory import InMemoryFeature

    indptr = np.load(os.path.join(folder, "indptr.npy"))
    indices = np.load(os.path.join(folder, "indices.npy"))
    graph = gf.CSCGraph(indptr, indices)
    from graphfeed.sampling.method import SamplingMethod

    kw = {}
    if method == "weighted":
        kw = {"method": SamplingMethod("weighted", arrays={
            "weights": np.load(os.path.join(folder, "weights.npy"))})}
    elif method == "labor":  # the default variates ("rotated")
        kw = {"method": SamplingMethod("labor")}
    elif method == "temporal":
        kw = {"method": SamplingMethod("temporal", arrays={
            "node_times": np.load(os.path.join(folder, "times.npy"))})}
    sampler = gf.NeighborSampler(graph, list(FANOUTS), seed=0, num_threads=1, **kw)
    feat = (InMemoryFeature(np.load(os.path.join(folder, "feat.npy")), num_threads=1)
            if fetch else None)

    local = threading.local()  # each thread's output rows, reused as the loader reuses them

    def one(seeds_np, _i=[0]):
        _i[0] += 1
        mb = sampler.sample(seeds_np, epoch=0, batch_index=_i[0])
        inp = mb.blocks[0].src_nodes
        if feat is not None:
            buf = getattr(local, "buf", None)
            if buf is None or buf.shape[0] < inp.shape[0]:
                buf = local.buf = torch.empty((2 * inp.shape[0], feat.shape[1]), dtype=feat.dtype)
            feat.read(inp, out=buf[: inp.shape[0]])
        return int(inp.numel()), mb.num_sampled_edges

    return one, lambda k: None


def side_main(args) -> int:
    batches = _seed_batches(args.folder, args.batch_size, args.batches + args.warmup, args.seed)
    make = _graphbolt_side if args.library == "graphbolt" else _graphfeed_side
    one, set_threads = make(args.folder, args.method, batches, args.fetch)
    for b in batches[: args.warmup]:
        one(b)
    timed = batches[args.warmup:]
    cpu, inputs, edges = [], [], []
    for b in timed:
        t0 = time.thread_time()
        n, e = one(b)
        cpu.append(time.thread_time() - t0)
        inputs.append(n)
        edges.append(e)
    out = {"library": args.library, "method": args.method, "fetch": args.fetch,
           "cpu_ms_1t": 1e3 * statistics.median(cpu),
           "input_nodes_per_batch": statistics.mean(inputs),
           "edges_per_batch": statistics.mean(edges)}

    def two_threads():
        nxt = [0]
        lock = threading.Lock()

        def work():
            while True:
                with lock:
                    k = nxt[0]
                    nxt[0] += 1
                if k >= len(timed):
                    return
                one(timed[k])

        ts = [threading.Thread(target=work) for _ in range(2)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return len(timed) * args.batch_size / (time.perf_counter() - t0)

    out["seeds_per_s_2t_threads"] = two_threads()
    if args.library == "graphbolt":  # one Python thread, two intra-op threads
        set_threads(2)
        t0 = time.perf_counter()
        for b in timed:
            one(b)
        out["seeds_per_s_2t_intraop"] = len(timed) * args.batch_size / (time.perf_counter() - t0)
        set_threads(1)
    out["seeds_per_s_2t"] = max(v for k, v in out.items() if k.startswith("seeds_per_s_2t_"))
    print(json.dumps(out))
    return 0


# ----------------------------------------------------------------------------- the driver
def compare_main(args) -> int:
    here = os.path.abspath(__file__)
    src = os.path.join(os.path.dirname(os.path.dirname(here)), "src")
    rows = []
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for method in args.methods.split(","):
            for fetch in ([False, True] if args.fetch else [False]):
                got = {}
                sides = [("graphbolt", args.graphbolt_python, None), ("graphfeed", sys.executable, src)]
                if args.before_src:
                    sides.append(("before", sys.executable, args.before_src))
                for lib, py, path in sides:
                    cmd = [py, here, "side", args.folder, "--library",
                           "graphbolt" if lib == "graphbolt" else "graphfeed", "--method", method,
                           "--batches", str(args.batches), "--warmup", str(args.warmup),
                           "--batch-size", str(args.batch_size), "--seed", str(args.seed)]
                    if fetch:
                        cmd.append("--fetch")
                    env = None
                    if path is not None:
                        env = dict(os.environ)
                        env["PYTHONPATH"] = path + os.pathsep + env.get("PYTHONPATH", "")
                    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
                    if res.returncode != 0:
                        sys.stderr.write(res.stderr)
                        raise SystemExit(f"{lib} side failed ({method}, fetch={fetch})")
                    got[lib] = json.loads(res.stdout.strip().splitlines()[-1])
                rows.append({"round": r, "method": method, "fetch": fetch, **{
                    f"{lib}_{k}": v for lib, d in got.items() for k, v in d.items()
                    if k not in ("library", "method", "fetch")}})
                g, f = got["graphbolt"], got["graphfeed"]
                print(f"round {r} {method:>8} fetch={fetch!s:5}: 1 thread {g['cpu_ms_1t']:.1f} -> "
                      f"{f['cpu_ms_1t']:.1f} CPU ms/batch ({g['cpu_ms_1t'] / f['cpu_ms_1t']:.2f}x); "
                      f"2 threads {g['seeds_per_s_2t']:,.0f} -> {f['seeds_per_s_2t']:,.0f} seeds/s "
                      f"({f['seeds_per_s_2t'] / g['seeds_per_s_2t']:.2f}x)"
                      + (f"; before: {got['before']['cpu_ms_1t']:.1f} ms, "
                         f"{got['before']['seeds_per_s_2t']:,.0f} seeds/s" if "before" in got
                         else ""), flush=True)
                load.append(os.getloadavg()[0])
    summary = {}
    for method in args.methods.split(","):
        for fetch in ([False, True] if args.fetch else [False]):
            rs = [x for x in rows if x["method"] == method and x["fetch"] == fetch]
            summary[f"{method}{'+fetch' if fetch else ''}"] = {
                "ratio_1t_cpu": statistics.median(x["graphbolt_cpu_ms_1t"] / x["graphfeed_cpu_ms_1t"]
                                                  for x in rs),
                "ratio_2t_seeds_per_s": statistics.median(
                    x["graphfeed_seeds_per_s_2t"] / x["graphbolt_seeds_per_s_2t"] for x in rs),
                "graphbolt_cpu_ms_1t": statistics.median(x["graphbolt_cpu_ms_1t"] for x in rs),
                "graphfeed_cpu_ms_1t": statistics.median(x["graphfeed_cpu_ms_1t"] for x in rs),
                "graphbolt_seeds_per_s_2t": statistics.median(x["graphbolt_seeds_per_s_2t"] for x in rs),
                "graphfeed_seeds_per_s_2t": statistics.median(x["graphfeed_seeds_per_s_2t"] for x in rs),
                "input_nodes_per_batch": {
                    "graphbolt": statistics.mean(x["graphbolt_input_nodes_per_batch"] for x in rs),
                    "graphfeed": statistics.mean(x["graphfeed_input_nodes_per_batch"] for x in rs)},
                "edges_per_batch": {
                    "graphbolt": statistics.mean(x["graphbolt_edges_per_batch"] for x in rs),
                    "graphfeed": statistics.mean(x["graphfeed_edges_per_batch"] for x in rs)},
            }
            if args.before_src:
                summary[f"{method}{'+fetch' if fetch else ''}"]["before"] = {
                    "cpu_ms_1t": statistics.median(x["before_cpu_ms_1t"] for x in rs),
                    "seeds_per_s_2t": statistics.median(x["before_seeds_per_s_2t"] for x in rs),
                    "ratio_1t_cpu": statistics.median(
                        x["graphbolt_cpu_ms_1t"] / x["before_cpu_ms_1t"] for x in rs),
                    "ratio_2t_seeds_per_s": statistics.median(
                        x["before_seeds_per_s_2t"] / x["graphbolt_seeds_per_s_2t"] for x in rs),
                    "speedup_1t_cpu": statistics.median(
                        x["before_cpu_ms_1t"] / x["graphfeed_cpu_ms_1t"] for x in rs),
                    "speedup_2t": statistics.median(
                        x["graphfeed_seeds_per_s_2t"] / x["before_seeds_per_s_2t"] for x in rs)}
            e = summary[f"{method}{'+fetch' if fetch else ''}"]["edges_per_batch"]
            summary[f"{method}{'+fetch' if fetch else ''}"]["ratio_1t_cpu_per_edge"] = (
                summary[f"{method}{'+fetch' if fetch else ''}"]["ratio_1t_cpu"]
                * e["graphfeed"] / e["graphbolt"])
    print("\nmedian over rounds (graphfeed / GraphBolt; load average "
          f"{min(load):.2f}-{max(load):.2f}):")
    for k, s in summary.items():
        print(f"  {k:>16}: 1 thread {s['ratio_1t_cpu']:.2f}x less CPU per batch "
              f"({s['graphbolt_cpu_ms_1t']:.1f} vs {s['graphfeed_cpu_ms_1t']:.1f} ms); 2 threads "
              f"{s['ratio_2t_seeds_per_s']:.2f}x the seeds/s ({s['graphbolt_seeds_per_s_2t']:,.0f} vs "
              f"{s['graphfeed_seeds_per_s_2t']:,.0f}); input nodes per batch "
              f"{s['input_nodes_per_batch']['graphbolt']:,.0f} vs "
              f"{s['input_nodes_per_batch']['graphfeed']:,.0f}, sampled edges "
              f"{s['edges_per_batch']['graphbolt']:,.0f} vs {s['edges_per_batch']['graphfeed']:,.0f} "
              f"({s['ratio_1t_cpu_per_edge']:.2f}x less CPU per sampled edge)")
        if "before" in s:
            b = s["before"]
            print(f"  {'':>16}  before ({args.before_src}): 1 thread {b['ratio_1t_cpu']:.2f}x, "
                  f"2 threads {b['ratio_2t_seeds_per_s']:.2f}x GraphBolt; now/before "
                  f"{b['speedup_1t_cpu']:.2f}x (1 thread CPU), {b['speedup_2t']:.2f}x (2 threads)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rounds": rows, "summary": summary, "load_average": load}, fh, indent=2)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make-rmat", help="write the anchor graph")
    m.add_argument("folder")
    m.add_argument("--scale", type=int, default=20)
    m.add_argument("--edge-factor", type=int, default=16)
    m.add_argument("--dim", type=int, default=100)
    m.add_argument("--seed", type=int, default=0)
    for name in ("side", "compare"):
        s = sub.add_parser(name)
        s.add_argument("folder")
        s.add_argument("--batches", type=int, default=40)
        s.add_argument("--warmup", type=int, default=3)
        s.add_argument("--batch-size", type=int, default=1024)
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--fetch", action="store_true", help="also gather the input rows")
    side = sub.choices["side"]
    side.add_argument("--library", choices=("graphbolt", "graphfeed"), required=True)
    side.add_argument("--method", default="uniform",
                      choices=("uniform", "weighted", "labor", "temporal"))
    comp = sub.choices["compare"]
    comp.add_argument("--graphbolt-python", required=True,
                      help="the python of a virtual environment with DGL GraphBolt")
    comp.add_argument("--methods", default="uniform")
    comp.add_argument("--rounds", type=int, default=3)
    comp.add_argument("--before-src", metavar="DIR",
                      help="also time graphfeed from this src folder (an older checkout's src/)")
    comp.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)
    if args.cmd == "make-rmat":
        make_rmat(args.folder, args.scale, args.edge_factor, args.dim, args.seed)
        return 0
    return side_main(args) if args.cmd == "side" else compare_main(args)


if __name__ == "__main__":
    sys.exit(main())
