"""Where a GPU training batch's time goes: the loader, the model step, the sampler's kernels.

    python benchmarks/gpu_profile.py --dataset medium --json prof.json            # on a GPU
    python benchmarks/gpu_profile.py --dataset tiny --device cpu --mode cpu-cpu   # smoke test

Three measurements in one process, each after its own warm-up:

1. ``train``: ``graphfeed.training.train`` as ``graphfeed train`` runs it (``--mode``, default
   ``cuda-cuda``, fanouts 10,10, batch 1024, the default model), ``--batches`` steps timed after
   ``--warmup``; for each step the training thread's wait for the loader (from the end of one
   optimizer step to the next batch in hand) and its own time (from the batch in hand to the
   end of the optimizer step, host side: the GPU runs behind). The same steps under the torch
   profiler: GPU kernel time per step, the kernels and host ops that cost most, and the host
   time of torch ops per thread (the loader's threads and the training thread).
2. ``loader``: a second train loader of the same task iterated alone (no model), synchronised:
   its batches/s when nothing else runs.
3. ``step``: the model step replayed on one captured batch (forward, backward, Adam), alone and
   synchronised: with ``foreach`` Adam (the trainer's), with ``fused`` Adam, and the forward
   and backward only (also with the other choice of path for wide mean-SAGE layers:
   ``models.gnn.SPARSE_MEAN_MIN_BYTES`` set to 0, every wider-than-output layer sparse).
4. ``sampler``: ``TritonNeighborSampler`` (fanouts 15,10,5; graph in GPU memory) called back to
   back under the profiler: wall ms per batch against GPU kernel ms per batch, and the host's
   cost per kernel launch.

``--device cpu`` runs the same on the CPU (the Triton sampler under its interpreter, a few
batches): a check that the script works, not a measurement. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict

from gpu_sampling import _seed_batches, _sync, report, time_sampler  # benchmarks/ is the script's folder


class _Stop(Exception):
    """Ends the training run once the steps are measured."""


def _tables(prof, steps: int, top: int = 12) -> dict:
    """GPU kernel time per step, the top kernels and host ops, and host op time per thread."""
    events = list(prof.events())
    kernels = defaultdict(lambda: [0.0, 0])
    host = defaultdict(lambda: [0.0, 0])
    per_thread = defaultdict(float)
    gpu_us = 0.0
    for e in events:
        on_gpu = str(getattr(e, "device_type", "")).endswith("CUDA")
        if on_gpu:
            t = float(getattr(e, "device_time", 0.0) or getattr(e, "cuda_time", 0.0) or 0.0)
            kernels[e.name][0] += t
            kernels[e.name][1] += 1
            gpu_us += t
        else:
            t = float(getattr(e, "self_cpu_time_total", 0.0) or 0.0)
            host[e.name][0] += t
            host[e.name][1] += 1
            per_thread[int(getattr(e, "thread", 0) or 0)] += t

    def ranked(d):
        rows = sorted(d.items(), key=lambda kv: -kv[1][0])[:top]
        return [{"name": n[:80], "us_per_step": round(v[0] / steps, 1),
                 "calls_per_step": round(v[1] / steps, 2)} for n, v in rows]

    launches = sum(v[1] for n, v in host.items()
                   if n in ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx",
                            "cudaLaunchKernelExC"))
    return {
        "gpu_kernel_ms_per_step": round(gpu_us / steps / 1e3, 3),
        "launches_per_step": round(launches / steps, 1),
        "top_kernels": ranked(kernels),
        "top_host_ops": ranked(host),
        "host_op_ms_per_step_by_thread": sorted(
            (round(v / steps / 1e3, 3) for v in per_thread.values()), reverse=True),
    }


def _activities(device):
    from torch.profiler import ProfilerActivity

    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                     if str(device).startswith("cuda") else [])


def profile_training(a) -> dict:
    from torch.profiler import profile

    from graphfeed.trainer.tasks import node as node_task
    from graphfeed.training import TrainConfig, train

    cfg = TrainConfig(dataset=a.dataset, mode=a.mode, device=a.device, epochs=1,
                      mlp_baseline=False, progress=False, batch_size=a.batch_size,
                      num_threads=a.threads, human_output="stderr")
    out: dict = {"mode": a.mode, "batch_size": a.batch_size, "fanouts": list(cfg.fanouts)}
    marks = {"after_step": None}
    waits, busy = [], []
    state = {"n": 0, "prof": None, "t0": None}
    original_step = node_task.NodeTask.step
    total = a.warmup + a.batches

    def step(self, model, batch):
        now = time.perf_counter()
        n = state["n"]
        if n == a.warmup:
            _sync(self.device)
            state["prof"] = profile(activities=_activities(self.device))
            state["prof"].__enter__()
            state["t0"] = time.perf_counter()
            now = state["t0"]
        elif n > a.warmup and marks["after_step"] is not None:
            waits.append(now - marks["after_step"])
        if n == total:  # every timed step has ended: measure the rest, then stop the run
            node_task.NodeTask.step = original_step  # the replay below runs the real step
            _sync(self.device)
            wall = time.perf_counter() - state["t0"]
            state["prof"].__exit__(None, None, None)
            out["train"] = dict(
                _tables(state["prof"], a.batches),
                ms_per_step=round(1e3 * wall / a.batches, 3),
                seeds_per_s=round(a.batches * a.batch_size / wall),
                loader_wait_ms_per_step=round(1e3 * sum(waits) / max(1, len(waits)), 3),
                trainer_host_ms_per_step=round(1e3 * sum(busy) / max(1, len(busy)), 3))
            out["loader"] = _time_loader(self, a)
            out["step"] = _replay(self, model, batch, a)
            raise _Stop
        state["n"] = n + 1
        state["entered"] = now
        return original_step(self, model, batch)

    def on_batch(epoch, batch_index):
        marks["after_step"] = time.perf_counter()
        if state["n"] > a.warmup:
            busy.append(marks["after_step"] - state["entered"])

    node_task.NodeTask.step = step
    try:
        train(cfg, on_batch=on_batch)
    except _Stop:
        pass
    finally:
        node_task.NodeTask.step = original_step
    if "train" not in out:
        raise SystemExit(f"the epoch had fewer than {total + 1} batches: lower --batches")
    return out


def _time_loader(task, a) -> dict:
    """The task's train loader alone: batches/s over ``a.batches`` after ``a.warmup``."""
    loader = task.train_loader()
    try:
        it = iter(loader)
        for _ in range(a.warmup):
            next(it)
        _sync(task.device)
        t0 = time.perf_counter()
        for _ in range(a.batches):
            next(it)
        _sync(task.device)
        dt = time.perf_counter() - t0
    finally:
        loader.close()
    return {"ms_per_batch": round(1e3 * dt / a.batches, 3),
            "seeds_per_s": round(a.batches * a.batch_size / dt)}


def _replay(task, model, batch, a) -> dict:
    """The model step on one batch, alone and synchronised, three ways."""
    import torch

    def timed(fn, reps) -> float:
        for _ in range(3):
            fn()
        _sync(task.device)
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        _sync(task.device)
        return round(1e3 * (time.perf_counter() - t0) / reps, 3)

    def fwd_bwd():
        loss, _, _ = task.step(model, batch)
        loss.backward()

    out = {"forward_backward_ms": timed(fwd_bwd, a.batches)}
    from graphfeed.models import gnn

    if hasattr(gnn, "SPARSE_MEAN_MIN_BYTES"):  # the other choice of a wide mean-SAGE layer's path
        rule = gnn.SPARSE_MEAN_MIN_BYTES
        gnn.SPARSE_MEAN_MIN_BYTES = 0 if rule else 1 << 62
        try:
            out[f"forward_backward_ms_sparse_mean_from_{gnn.SPARSE_MEAN_MIN_BYTES}_bytes"] = (
                timed(fwd_bwd, a.batches))
        finally:
            gnn.SPARSE_MEAN_MIN_BYTES = rule
    cuda = str(task.device).startswith("cuda")
    for name, kw in (("foreach", {"foreach": True}), ("fused", {"fused": True})):
        if name == "fused" and not cuda:
            continue
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, **kw)

        def full():
            loss, _, _ = task.step(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        out[f"step_adam_{name}_ms"] = timed(full, a.batches)
    return out


def profile_sampler(a) -> dict:
    import numpy as np
    import torch
    from torch.profiler import profile

    from graphfeed.bench.sample import load_bench_data
    from graphfeed.sampling.triton_sampler import TritonNeighborSampler

    dev = torch.device(a.device)
    data = load_bench_data(a.dataset)
    batches = _seed_batches(np.asarray(data.seed_pool), a.batch_size, a.warmup + a.batches)
    sampler = TritonNeighborSampler.from_graph(data.graph, [15, 10, 5], device=dev)
    timed = time_sampler(sampler, batches, a.warmup, dev)
    with profile(activities=_activities(dev)) as prof:
        for i, s in enumerate(batches[a.warmup:]):
            sampler.sample(s, batch_index=a.warmup + i)
        _sync(dev)
    return dict(_tables(prof, a.batches), ms_per_batch=round(timed["ms_per_batch"], 3),
                seeds_per_s=round(timed["seeds_per_s"]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="medium")
    p.add_argument("--device", default="cuda")
    p.add_argument("--mode", default="cuda-cuda")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--parts", default="train,sampler",
                   help="comma-separated: train (with loader and step), sampler")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    if a.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton loads
    parts = [x for x in a.parts.split(",") if x]
    result = {"dataset": a.dataset, "device": a.device}
    if "train" in parts:
        result.update(profile_training(a))
    if "sampler" in parts:
        result["sampler"] = profile_sampler(a)
    report(result, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
