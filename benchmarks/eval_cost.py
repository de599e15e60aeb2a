"""What evaluation costs next to a training epoch: layer-wise inference vs sampled evaluation.

In one process, on a built-in dataset and the default placement: trains one epoch of
``--model`` (default fanouts 10,10, batch 1024) and times it, then times one evaluation of the
valid and test sets each way on the trained model:

- ``layerwise``: every neighbour, each layer once per needed node (``trainer/layerwise.py``);
- ``sampled``: the model's forward on sampled blocks with the default evaluation fanouts
  (``every neighbour, capped at 10000^(1/layers)``: 100,100 for two layers).

Each evaluation runs once untimed first (thread pools, numba kernels, allocator warm), then
``--repeats`` timed times; the minimum is reported. Prints one JSON object: seconds of the epoch
and of each evaluation, their ratios to the epoch, and the largest difference between the two
methods' valid/test metrics (sampled evaluation caps the fanout, so they may differ slightly
where in-degrees exceed the cap). Wall-clock seconds (``*_s``) and the process's CPU seconds
(``*_cpu_s``, every thread; steadier than wall time when other work shares the machine) are
both reported, with the load average (1, 5, 15 min) before and after the run.

    python benchmarks/eval_cost.py [--dataset small|medium|tiny] [--model sage|gcn|gat]
        [--features ram|disk|lmdb] [--repeats 1] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def run(args) -> dict:
    import numpy as np
    import torch
    import torch.nn.functional as F

    from graphfeed.datasets.synthetic import load_builtin
    from graphfeed.models import build_model
    from graphfeed.placement.plan import DataPlan, node_loader
    from graphfeed.trainer.evaluate import Evaluator, features_as_float, plan_eval
    from graphfeed.trainer.layerwise import LayerwiseEvaluator
    from graphfeed.trainer.metrics import compute_metrics, task_for

    load_before = os.getloadavg()
    ds = load_builtin(args.dataset, verbose=True)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    plan = DataPlan.resolve(features=args.features, mode=args.mode, device=args.device)
    placed = plan.prepare(ds, fanouts, seed=args.seed)
    device = placed.device
    in_dim = int(np.prod(ds.features["feat"].row_shape))
    task = task_for(int(ds.num_classes))
    torch.manual_seed(args.seed)
    model = build_model(args.model, in_dim, args.hidden, int(ds.num_classes), len(fanouts),
                        in_degrees=ds.graph.in_degrees if args.model == "gcn" else None).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def sync():
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize(device)

    loader = node_loader(ds.train_ids, placed, batch_size=args.batch_size, shuffle=True,
                         seed=args.seed, num_threads=args.threads)
    try:
        model.train()
        loader.set_epoch(0)
        t0, c0 = time.perf_counter(), time.process_time()
        for batch in loader:
            out = model(features_as_float(batch.x), batch.blocks)
            loss = F.cross_entropy(out, batch.labels.to(torch.long).reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sync()
        epoch_s, epoch_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    finally:
        loader.close()

    sets = {"valid": ds.valid_ids, "test": ds.test_ids}
    eval_plan = plan_eval(len(fanouts), args.batch_size, int(ds.graph.in_degrees.max(initial=0)))
    evaluators = {
        "layerwise": LayerwiseEvaluator(placed, ds.graph, sets, len(fanouts),
                                        num_threads=args.threads),
        "sampled": Evaluator(placed, sets, eval_plan, seed=args.seed, num_threads=args.threads),
    }
    seconds, cpu_seconds, metrics = {}, {}, {}
    try:
        for name, ev in evaluators.items():
            got = ev.evaluate(model)  # warm-up, and the metrics
            metrics[name] = {k: compute_metrics(task, y.numpy(), lg.numpy())
                             for k, (lg, y) in got.items()}
            best = best_cpu = float("inf")
            for _ in range(args.repeats):
                sync()
                t0, c0 = time.perf_counter(), time.process_time()
                ev.evaluate(model)
                sync()
                best = min(best, time.perf_counter() - t0)
                best_cpu = min(best_cpu, time.process_time() - c0)
            seconds[name], cpu_seconds[name] = best, best_cpu
    finally:
        for ev in evaluators.values():
            ev.close()
    diff = max(abs(metrics["layerwise"][k][m] - metrics["sampled"][k][m])
               for k in sets for m in task.metrics)
    return {
        "dataset": ds.name, "nodes": int(ds.num_nodes), "edges": int(ds.num_edges),
        "model": args.model, "device": str(device), "mode": placed.mode,
        "features": args.features, "fanouts": fanouts, "sampled_eval_fanouts": list(eval_plan.fanouts),
        "sampled_eval_batch": eval_plan.batch_size,
        "valid_test_nodes": int(len(ds.valid_ids) + len(ds.test_ids)),
        "epoch_s": epoch_s, "layerwise_eval_s": seconds["layerwise"],
        "sampled_eval_s": seconds["sampled"],
        "layerwise_over_epoch": seconds["layerwise"] / epoch_s,
        "sampled_over_epoch": seconds["sampled"] / epoch_s,
        "sampled_over_layerwise": seconds["sampled"] / max(seconds["layerwise"], 1e-12),
        "epoch_cpu_s": epoch_cpu_s, "layerwise_eval_cpu_s": cpu_seconds["layerwise"],
        "sampled_eval_cpu_s": cpu_seconds["sampled"],
        "layerwise_over_epoch_cpu": cpu_seconds["layerwise"] / epoch_cpu_s,
        "sampled_over_epoch_cpu": cpu_seconds["sampled"] / epoch_cpu_s,
        "max_metric_difference": diff,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="small", help="built-in dataset: tiny, small, medium [small]")
    p.add_argument("--model", default="sage", choices=["sage", "gcn", "gat"])
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--features", default="ram", help="feature backend: ram, disk, lmdb [ram]")
    p.add_argument("--mode", default="auto")
    p.add_argument("--device", default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=1, help="timed evaluations of each kind [1]")
    p.add_argument("--json", metavar="OUT", default=None, help="also write the JSON to OUT")
    args = p.parse_args(argv)
    out = run(args)
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
