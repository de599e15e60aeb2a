"""Hit rates of the GPU cache's policies on sampled batches, on any machine (no GPU needed).

    PYTHONPATH=src python benchmarks/gpu_cache_hits.py [--dataset medium] [--batches 120]

The workload of ``benchmarks/gpu_sampling.py``'s cache step: the input nodes of sampled batches
(fanouts 15,10,5, batch 1024, the numba sampler), 10% of the rows cached. The cache runs on CPU
tensors with rows of 16 bytes: hit rates and admissions do not depend on the device or the row
width, speed does (measure that on a GPU with ``gpu_sampling.py``). Reports per policy the hit
rate after ``--warmup`` batches and the rows fetched from the host per batch; CLOCK also with
every miss admitted (``admit_fraction=1``), as it was before it was bounded.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    import numpy as np
    import torch

    from graphfeed.datasets.open import open_dataset
    from graphfeed.features.gpu_cache import GPUCachedFeature
    from graphfeed.features.memory import InMemoryFeature
    from graphfeed.sampling.neighbor import NeighborSampler

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="medium")
    p.add_argument("--batches", type=int, default=120)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--fraction", type=float, default=0.10)
    a = p.parse_args(argv)

    ds = open_dataset(a.dataset)
    g = ds.graph
    sampler = NeighborSampler(g, [15, 10, 5], seed=0)
    train = np.random.default_rng(0).permutation(np.asarray(ds.train_ids))
    inputs = []
    for i in range(a.batches):
        seeds = train[(i * 1024) % train.shape[0]:][:1024]
        inputs.append(torch.as_tensor(np.asarray(sampler.sample(seeds, batch_index=i).input_nodes)))
    feature = InMemoryFeature(np.zeros((g.num_nodes, 4), np.float32))
    capacity = int(a.fraction * g.num_nodes) * feature.row_nbytes

    def run(policy, **kw):
        cache = GPUCachedFeature(feature, capacity, device="cpu", policy=policy, **kw)
        if policy == "frequency":
            cache.warm_up(inputs[:a.warmup])
        for ids in inputs[:a.warmup]:
            cache.read(ids, check=False)
        cache.reset_stats()
        for ids in inputs[a.warmup:]:
            cache.read(ids, check=False)
        st = cache.stats()
        return {"hit_rate": round(st["hit_rate"], 3),
                "rows_fetched_per_batch": round(st["bytes_moved"] / feature.row_nbytes
                                                / (a.batches - a.warmup))}

    out = {"dataset": a.dataset, "batches": a.batches, "warmup": a.warmup,
           "fraction": a.fraction,
           "input_nodes_per_batch": round(float(np.mean([x.numel() for x in inputs]))),
           "degree": run("degree", degrees=g.in_degrees), "frequency": run("frequency"),
           "clock": run("clock"), "clock_admit_every_miss": run("clock", admit_fraction=1)}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
