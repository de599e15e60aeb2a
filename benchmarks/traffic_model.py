"""Input nodes and feature bytes per batch against graph size (issue 30, item 1).

Generates graphs of N nodes with the degree distribution of the built-in ``medium`` (the
generator of ``graphfeed.datasets.synthetic``: degree-corrected block model, Pareto(1)
popularity capped at N^0.75, 16 classes, homophily 0.8, D undirected edges drawn per node,
stored both ways, repeats and self-loops dropped; "gen:N:D" in docs/benchmarks.md), without
features, then samples batches of 1,024 seeds with ``graphfeed.NeighborSampler`` (uniform and
LABOR with rotated variates) and counts, per batch: input nodes (``blocks[0].src_nodes``),
sampled edges, and for a random partition (owner = id mod P) the remote input rows and a
remote-row cache's hit rate. All figures are counts, deterministic for a given seed, so the load
of the machine does not change them (only the times printed alongside).

The edge draws are the generator's own (same formulas), in chunks of ``--chunk`` edges so a
10M-node graph fits in a few GB: the graphs have the generator's distribution but not the
identical edges ``generate_arrays`` would draw (its single draw of all E edges at once is the
memory peak we avoid). ``--medium`` also measures the cached built-in ``medium`` itself.

Seeds: uniform without replacement over the nodes with ``id % 16 == 0`` (rank 0's part for
P = 16, and inside rank 0's part for P = 4), so one set of batches serves P = 1, 4 and 16; node
ids are independent of degree and class in this generator, so these are uniform random seeds.

Cache: rank 0 keeps the C remote rows requested most often in the first ``--learn`` batches
(ties: higher in-degree first), and its hit rate is measured on the next ``--batches`` batches
(new batches, not a replay). ``degree`` policy: the C remote rows of highest in-degree (no
learning). C = 1%, 5%, 10% of N.

    python benchmarks/traffic_model.py --sizes 250000,1000000,4000000,10000000 \\
        --json traffic.json [--medium]
    python benchmarks/traffic_model.py --fit traffic.json      # the model, the extrapolation
    python benchmarks/traffic_model.py --table traffic.json    # docs/benchmarks.md's tables
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np

FANOUT_SETS = {"15,10,5": [15, 10, 5], "10,10": [10, 10], "25,10": [25, 10]}
WIDTHS = (64, 100, 128)
PARTS = (4, 16)
CACHE_FRACTIONS = (0.01, 0.05, 0.10)
BATCH = 1024


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def generate_graph(n: int, edges_per_node: float, *, seed: int = 13, num_classes: int = 16,
                   homophily: float = 0.8, alpha: float = 1.0, chunk: int = 1 << 24):
    """The synthetic generator's edges (graphfeed.datasets.synthetic.generate_arrays), drawn in
    chunks, as a CSCGraph stored both ways without repeats or self-loops."""
    from graphfeed.graph.csc import CSCGraph

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, size=n, dtype=np.int64)
    theta = rng.pareto(alpha, size=n) + 1.0
    np.minimum(theta, n ** 0.75, out=theta)
    num_edges = int(n * edges_per_node)
    order = np.argsort(labels, kind="stable")
    cum = np.cumsum(theta[order])
    del theta
    total = cum[-1]
    class_end = np.searchsorted(labels[order], np.arange(num_classes), side="right")
    class_start = np.concatenate(([0], class_end[:-1]))
    lo = np.where(class_start > 0, cum[np.maximum(class_start - 1, 0)], 0.0)
    hi = cum[class_end - 1]
    src = np.empty(num_edges, np.int64)
    dst = np.empty(num_edges, np.int64)
    for a in range(0, num_edges, chunk):
        b = min(num_edges, a + chunk)
        m = b - a
        pos = np.searchsorted(cum, rng.random(m) * total, side="right")
        s = order[np.minimum(pos, n - 1)]
        same = rng.random(m) < homophily
        cls = labels[s]
        dlo = np.where(same, lo[cls], 0.0)
        dhi = np.where(same, hi[cls], total)
        pos = np.searchsorted(cum, dlo + rng.random(m) * (dhi - dlo), side="right")
        src[a:b] = s
        dst[a:b] = order[np.minimum(pos, n - 1)]
        del pos, s, same, cls, dlo, dhi
    del cum, order, labels
    g = CSCGraph.from_edges(src, dst, n, add_reverse=True, drop_self_loops=True,
                            drop_duplicates=True)
    del src, dst
    return g


def load_medium():
    from graphfeed.datasets.synthetic import builtin_path
    from graphfeed.graph.csc import CSCGraph

    p = builtin_path("medium")
    g = CSCGraph(np.load(p / "graph" / "indptr.npy"), np.load(p / "graph" / "indices.npy"), None,
                 trusted=True)
    return g, np.load(p / "splits" / "train.npy")


def degree_ceiling(deg: np.ndarray, fanouts) -> dict:
    """Input nodes of a batch with no overlap at all (a graph too large for two sampled paths to
    meet): seeds x (1 + m(f_L) + m(f_L) m'(f_{L-1}) + ...), m(f) = E[min(f, deg)] over uniform
    nodes (the seeds), m'(f) the same over nodes reached by an edge (weighted by degree: the
    graph is symmetric, so a node is a neighbour in proportion to its degree). The flat bound
    (every node has >= fanout neighbours) is seeds x (1 + f_L + f_L f_{L-1} + ...)."""
    d = deg.astype(np.float64)
    sd = d.sum()
    layers = list(reversed(fanouts))  # the seeds' fanout first
    level, tree, flat_level, flat = 1.0, 1.0, 1.0, 1.0
    for i, f in enumerate(layers):
        mf = np.minimum(d, f)
        m = mf.mean() if i == 0 else float((d * mf).sum() / sd)
        level *= m
        tree += level
        flat_level *= f
        flat += flat_level
    return {"ceiling": BATCH * tree, "flat_bound": BATCH * flat}


def measure_size(name, g, seed_pool, args, out):
    import graphfeed
    from graphfeed.sampling.method import SamplingMethod

    n = g.num_nodes
    deg = np.diff(g.indptr)
    rec = {"name": name, "nodes": int(n), "edges": int(g.indptr[-1]),
           "mean_degree": float(deg.mean()), "median_degree": float(np.median(deg)),
           "max_degree": int(deg.max()), "zero_degree_share": float((deg == 0).mean()),
           "runs": {}}
    rng_master = np.random.default_rng(args.seed)
    total_batches = args.learn + args.batches
    seed_batches = [np.sort(rng_master.choice(seed_pool, BATCH, replace=False))
                    for _ in range(total_batches)]
    for fname, fan in FANOUT_SETS.items():
        rec.setdefault("ceiling", {})[fname] = degree_ceiling(deg, fan)
        for meth in ("uniform", "labor"):
            method = SamplingMethod("labor") if meth == "labor" else None
            s = graphfeed.NeighborSampler(g, fan, method=method, seed=args.seed)
            counts = {P: np.zeros(n, np.int32) for P in PARTS}
            inputs, edges, remote = [], [], {P: [] for P in PARTS}
            hits = {}
            t0 = time.perf_counter()
            caches = None
            for b, seeds in enumerate(seed_batches):
                if b == args.learn:  # build the caches from the learning batches
                    caches = {}
                    for P in PARTS:
                        owned = (np.arange(n) % P) == 0
                        for pol in ("learned", "degree"):
                            if pol == "learned":
                                key = counts[P].astype(np.int64) * (int(deg.max()) + 1) + deg
                            else:
                                key = deg.astype(np.int64).copy()
                            key[owned] = -1
                            for frac in CACHE_FRACTIONS:
                                c = int(frac * n)
                                top = np.argpartition(-key, c - 1)[:c]
                                mask = np.zeros(n, bool)
                                mask[top] = True
                                caches[(P, pol, frac)] = mask
                        del owned
                    hits = {k: [0, 0] for k in caches}
                mb = s.sample(seeds, epoch=0, batch_index=b)
                src = mb.blocks[0].src_nodes.numpy()
                ne = sum(bl.num_edges for bl in mb.blocks)
                for P in PARTS:
                    rem = src[(src % P) != 0]
                    if b < args.learn:
                        counts[P][rem] += 1  # src is unique within a batch
                    else:
                        remote[P].append(int(rem.shape[0]))
                        for (PP, pol, frac), mask in caches.items():
                            if PP == P:
                                h = hits[(PP, pol, frac)]
                                h[0] += int(mask[rem].sum())
                                h[1] += int(rem.shape[0])
                if b >= args.learn:
                    inputs.append(int(src.shape[0]))
                    edges.append(int(ne))
            dt = time.perf_counter() - t0
            inp = np.array(inputs, np.float64)
            run = {"input_nodes_mean": float(inp.mean()), "input_nodes_std": float(inp.std()),
                   "input_nodes_min": int(inp.min()), "input_nodes_max": int(inp.max()),
                   "sampled_edges_mean": float(np.mean(edges)),
                   "mb_per_batch": {str(w): float(inp.mean() * w * 4 / 1e6) for w in WIDTHS},
                   "remote_share": {str(P): float(np.sum(remote[P]) / inp.sum()) for P in PARTS},
                   "cache_hit": {f"P{P}-{pol}-{int(frac * 100)}%": hits[(P, pol, frac)][0]
                                 / max(1, hits[(P, pol, frac)][1])
                                 for (P, pol, frac) in hits},
                   "seconds": dt, "batches": total_batches}
            rec["runs"][f"{meth} {fname}"] = run
            print(f"  {name} {meth:7s} {fname:8s} input {run['input_nodes_mean']:>10,.0f} "
                  f"(+-{run['input_nodes_std']:,.0f}) edges {run['sampled_edges_mean']:>10,.0f} "
                  f"remote@4 {run['remote_share']['4']:.3f} "
                  f"hit P4 learned 10% {run['cache_hit']['P4-learned-10%']:.3f} "
                  f"deg 10% {run['cache_hit']['P4-degree-10%']:.3f}  {dt:.1f}s "
                  f"rss {peak_rss_gb():.2f} GB", flush=True)
            s.close()
            del counts
    out.append(rec)


def measure_dedup(name, g, seed_pool, args, out, *, ranks=10, groups=4):
    """Rows a machine of ``ranks`` ranks requests once its ranks' requests are deduplicated:
    distinct input nodes of ``ranks`` batches (one per rank, seeds from the same part) over the
    sum of their input nodes, fanouts 15,10,5, uniform and LABOR."""
    import graphfeed
    from graphfeed.sampling.method import SamplingMethod

    rng = np.random.default_rng(args.seed + 1)
    rec = {"name": name, "nodes": int(g.num_nodes), "ranks": ranks, "groups": groups}
    for meth in ("uniform", "labor"):
        method = SamplingMethod("labor") if meth == "labor" else None
        s = graphfeed.NeighborSampler(g, [15, 10, 5], method=method, seed=args.seed)
        ratios = []
        for grp in range(groups):
            ids = []
            for r in range(ranks):
                seeds = np.sort(rng.choice(seed_pool, BATCH, replace=False))
                ids.append(s.sample(seeds, batch_index=grp * ranks + r).blocks[0].src_nodes.numpy())
            total = sum(a.shape[0] for a in ids)
            ratios.append(np.unique(np.concatenate(ids)).shape[0] / total)
        s.close()
        rec[meth] = float(np.mean(ratios))
        print(f"  {name} {meth}: distinct / requested over {ranks} ranks' batches "
              f"{rec[meth]:.3f} (groups: {[round(x, 3) for x in ratios]})", flush=True)
    out.append(rec)


def run_measure(args):
    out = []
    if args.json and os.path.exists(args.json) and args.append:
        out = json.load(open(args.json))["sizes"]
    meta = {"uptime": os.popen("uptime").read().strip(), "edges_per_node": args.edges_per_node,
            "batches": args.batches, "learn": args.learn, "seed": args.seed, "batch": BATCH}
    todo = []
    if args.medium:
        todo.append(("medium", None))
    todo += [(f"gen:{n}:{args.edges_per_node:g}", n) for n in args.sizes]
    for name, n in todo:
        t0 = time.perf_counter()
        if n is None:
            g, train = load_medium()
            pool = train[train % 16 == 0]
        else:
            g = generate_graph(n, args.edges_per_node, seed=args.seed_graph, chunk=args.chunk)
            pool = np.arange(0, n, 16)
        tg = time.perf_counter() - t0
        print(f"{name}: {g.num_nodes:,} nodes, {int(g.indptr[-1]):,} stored edges, built in "
              f"{tg:.1f}s, rss {peak_rss_gb():.2f} GB; {os.popen('uptime').read().strip()}",
              flush=True)
        if args.dedup:
            measure_dedup(name, g, pool, args, out)
        else:
            measure_size(name, g, pool, args, out)
        out[-1]["build_seconds"] = tg
        out[-1]["uptime"] = os.popen("uptime").read().strip()
        del g
        if args.json:
            json.dump({"meta": meta, "sizes": out}, open(args.json, "w"), indent=1)


# ---------------------------------------------------------------------------------- the model
def _fit(xs, ys, model):
    from scipy.optimize import curve_fit

    if model == "power":
        p, _ = curve_fit(lambda x, a, b: a * x ** b, xs, ys, p0=(ys[0], 0.3), maxfev=20000)
        return p, lambda x: p[0] * x ** p[1]
    if model == "saturating":
        p, _ = curve_fit(lambda x, a, n0: a * (1 - np.exp(-x / n0)), xs, ys,
                         p0=(2 * ys[-1], xs[-1]), maxfev=20000)
        return p, lambda x: p[0] * (1 - np.exp(-x / p[1]))
    raise ValueError(model)


def model_ceiling(n: float, fanouts, edges_per_node: float = 13.0, alpha_cap: float = 0.75):
    """The no-overlap ceiling of a generated graph of n nodes from the generator's degree law,
    without building it: a node of popularity t has Poisson(2 D t / E[t]) neighbours (ignoring
    repeats dropped), t ~ Pareto(1) capped at n^0.75, so E[t] = 1 + ln(cap)."""
    from scipy.stats import poisson

    cap = n ** alpha_cap
    mean_t = 1.0 + math.log(cap)
    # t on a log grid over [1, cap) with density 1/t^2, plus the mass 1/cap at the cap
    edges_t = np.exp(np.linspace(0.0, math.log(cap), 4001))
    mid = np.sqrt(edges_t[:-1] * edges_t[1:])
    w = 1.0 / edges_t[:-1] - 1.0 / edges_t[1:]
    mid = np.append(mid, cap)
    w = np.append(w, 1.0 / cap)
    lam = 2 * edges_per_node * mid / mean_t
    layers = list(reversed(fanouts))
    level, tree = 1.0, 1.0
    for i, f in enumerate(layers):
        k = np.arange(f)
        # E[min(f, X)] = sum_{k<f} P(X > k)
        emin = poisson.sf(k[None, :], lam[:, None]).sum(axis=1)
        # E[X min(f, X)] = lam E[min(f, X + 1)]  (size-biased Poisson is 1 + Poisson)
        emin1 = poisson.sf(k[None, :] - 1, lam[:, None]).sum(axis=1)
        if i == 0:
            m = float((w * emin).sum() / w.sum())
        else:
            m = float((w * lam * emin1).sum() / (w * lam).sum())
        level *= m
        tree += level
    return BATCH * tree


def run_fit(args):
    data = json.load(open(args.fit))
    sizes = [s for s in data["sizes"] if s["name"].startswith("gen:")]
    sizes.sort(key=lambda s: s["nodes"])
    ns = np.array([s["nodes"] for s in sizes], np.float64)
    res = {}
    targets = [1e8, 5e8]
    for key in sizes[0]["runs"]:
        meth, fname = key.split(" ")
        fan = FANOUT_SETS[fname]
        ys = np.array([s["runs"][key]["input_nodes_mean"] for s in sizes])
        ceil_meas = np.array([s["ceiling"][fname]["ceiling"] for s in sizes])
        ceil_model = np.array([model_ceiling(n, fan, data["meta"]["edges_per_node"]) for n in ns])
        corr = float(np.mean(ceil_meas / ceil_model))  # the model against the built graphs
        flat = sizes[0]["ceiling"][fname]["flat_bound"]
        r = {"ceiling_measured": ceil_meas.tolist(), "ceiling_model": ceil_model.tolist(),
             "ceiling_model_correction": corr, "flat_bound": flat, "measured": ys.tolist()}
        for model in ("power", "saturating"):
            try:
                p, f = _fit(ns, ys, model)
            except Exception as e:  # noqa: BLE001 - a fit that fails is reported, not fatal
                r[model] = {"error": str(e)}
                continue
            # capped by the no-overlap ceiling of the degree law at that size
            ceil_t = {t: model_ceiling(t, fan, data["meta"]["edges_per_node"]) * corr
                      for t in targets}
            r[model] = {"params": [float(x) for x in p],
                        "residuals_pct": [float(x) for x in 100 * (f(ns) - ys) / ys],
                        "extrapolated": {f"{t:.0e}": float(min(f(t), ceil_t[t]))
                                         for t in targets},
                        "uncapped": {f"{t:.0e}": float(f(t)) for t in targets}}
        # overlap model: share lost to overlap, 1 - I/ceiling, a power of N (log-log line)
        lost = 1 - ys / ceil_meas
        ok = lost > 0
        if ok.sum() >= 2:
            g, c = np.polyfit(np.log(ns[ok]), np.log(lost[ok]), 1)
            pred = ceil_meas * (1 - np.exp(c) * ns ** g)
            ext = {}
            for t in targets:
                ceil_t = model_ceiling(t, fan, data["meta"]["edges_per_node"]) * corr
                ext[f"{t:.0e}"] = float(ceil_t * (1 - min(1.0, np.exp(c) * t ** g)))
                ext[f"ceiling {t:.0e}"] = float(ceil_t)
            r["overlap"] = {"lost_share": lost.tolist(), "exponent": float(g),
                            "coef": float(np.exp(c)),
                            "residuals_pct": [float(x) for x in 100 * (pred - ys) / ys],
                            "extrapolated": ext}
        res[key] = r
        print(f"{key}: measured {np.round(ys).astype(int).tolist()} ceiling(built) "
              f"{np.round(ceil_meas).astype(int).tolist()} ceiling(model x{corr:.3f}) "
              f"flat {flat:,.0f}")
        for model in ("power", "saturating", "overlap"):
            m = r.get(model, {})
            if "error" in m or not m:
                print(f"   {model}: {m}")
                continue
            par = m.get("params", [m.get("coef"), m.get("exponent")])
            print(f"   {model:10s} params {[f'{x:.4g}' for x in par]} residuals % "
                  f"{[round(x, 1) for x in m['residuals_pct']]} -> "
                  + ", ".join(f"{k}: {v:,.0f}" for k, v in m["extrapolated"].items()))
    traffic_table(data, sizes, res)
    if args.json:
        json.dump(res, open(args.json, "w"), indent=1)


def traffic_table(data, sizes, res, *, ranks=1000, per_machine=10, bws=(12.5, 25.0)):
    """Feature bytes per rank and batch and per step, 1,000 ranks on 100 machines, one part per
    machine (P = 100, random: a non-seed input row is remote with probability 99/100; the seeds
    are the rank's own), a cache hit rate taken from the largest measured graph (P = 16, 10% of
    the nodes, learned and degree policies)."""
    big = sizes[-1]
    P = ranks // per_machine
    print(f"\ntraffic at P = {P} parts (random), {ranks} ranks, {per_machine} per machine; "
          f"cache hit rates from {big['name']} (P = 16, 10% of the nodes)")
    for key, r in res.items():
        hit = big["runs"][key]["cache_hit"]
        rows = []
        for model in ("overlap", "power"):
            ext = r.get(model, {}).get("extrapolated")
            if ext:
                rows += [(model, t, ext[t]) for t in ("1e+08", "5e+08")]
        ov = r.get("overlap", {}).get("extrapolated", {})
        rows += [("ceiling", t, ov[f"ceiling {t}"]) for t in ("1e+08", "5e+08")
                 if f"ceiling {t}" in ov]
        rows.append(("flat", "any", r["flat_bound"]))
        for model, t, inp in rows:
            rem = (inp - BATCH) * (P - 1) / P
            line = []
            for w in (64, 100):
                mb = rem * w * 4 / 1e6
                ms = [1e3 * mb * per_machine / 1e3 / bw for bw in bws]
                mbc = mb * (1 - hit["P16-learned-10%"])
                line.append(f"{w}d {mb:6.0f} MB/rank ({ms[0]:4.0f}/{ms[1]:4.0f} ms; cache "
                            f"{mbc:5.0f} MB)")
            print(f"  {key:16s} {model:8s} N={t}: input {inp:9,.0f}  " + "  ".join(line))


def run_table(args):
    """The measured figures as the markdown tables of docs/benchmarks.md."""
    data = json.load(open(args.table))
    print("| graph | nodes | stored edges | mean / median / max degree | fanouts | method | "
          "input nodes per batch (+-sd) | sampled edges | no-overlap ceiling | MB at 64 / 100 "
          "dims |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in data["sizes"]:
        for key, r in s["runs"].items():
            meth, fname = key.split(" ")
            print(f"| {s['name']} | {s['nodes']:,} | {s['edges']:,} | {s['mean_degree']:.1f} / "
                  f"{s['median_degree']:.0f} / {s['max_degree']:,} | {fname} | {meth} | "
                  f"{r['input_nodes_mean']:,.0f} (+-{r['input_nodes_std']:,.0f}) | "
                  f"{r['sampled_edges_mean']:,.0f} | {s['ceiling'][fname]['ceiling']:,.0f} | "
                  f"{r['mb_per_batch']['64']:.1f} / {r['mb_per_batch']['100']:.1f} |")
    print()
    print("| graph | fanouts | method | remote share P=4 / 16 | hit, learned 1% / 5% / 10%, "
          "P=4 | P=16 | hit, degree 1% / 5% / 10%, P=4 | P=16 |")
    print("|---|---|---|---|---|---|---|---|")
    for s in data["sizes"]:
        for key, r in s["runs"].items():
            meth, fname = key.split(" ")
            h = r["cache_hit"]
            cell = lambda P, pol: " / ".join(f"{100 * h[f'P{P}-{pol}-{c}%']:.0f}%"
                                             for c in (1, 5, 10))
            print(f"| {s['name']} | {fname} | {meth} | {100 * r['remote_share']['4']:.1f}% / "
                  f"{100 * r['remote_share']['16']:.1f}% | {cell(4, 'learned')} | "
                  f"{cell(16, 'learned')} | {cell(4, 'degree')} | {cell(16, 'degree')} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="250000,1000000,4000000,10000000",
                    type=lambda s: [int(float(x)) for x in s.split(",") if x])
    ap.add_argument("--edges-per-node", type=float, default=13.0)  # medium's
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--learn", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seed-graph", type=int, default=13)  # medium's spec seed
    ap.add_argument("--chunk", type=int, default=1 << 24)
    ap.add_argument("--medium", action="store_true")
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--dedup", action="store_true",
                    help="only the per-machine deduplication of 10 ranks' requests (15,10,5)")
    ap.add_argument("--json")
    ap.add_argument("--fit", help="a JSON written by a measuring run: fit and extrapolate")
    ap.add_argument("--table", help="a JSON written by a measuring run: markdown tables")
    args = ap.parse_args(argv)
    if args.table:
        run_table(args)
    elif args.fit:
        run_fit(args)
    else:
        run_measure(args)


if __name__ == "__main__":
    sys.exit(main())
