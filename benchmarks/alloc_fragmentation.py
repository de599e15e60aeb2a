"""What PyTorch's ``expandable_segments`` allocator does for sampled mini-batches (needs a GPU).

Runs the same workload twice, each in a fresh process so the allocator setting takes effect:
once with PyTorch's default allocator (``PYTORCH_ALLOC_CONF=expandable_segments:False``) and once
with the setting graphfeed applies (``expandable_segments:True``). The workload: ``--steps``
training steps of a two-layer mean-aggregation GNN on GPU-sampled batches (``cuda-cuda``
placement) whose seed count varies uniformly in ``[--min-batch, --max-batch]``, the irregular
sizes that fragment a caching allocator. Reported per setting: peak allocated, peak reserved and
their ratio (reserved / allocated; 1.0 means no memory held beyond what tensors use).

    python benchmarks/alloc_fragmentation.py --dataset medium --steps 300 [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

SETTINGS = {"default": "expandable_segments:False", "expandable": "expandable_segments:True"}


def workload(args) -> dict:
    import numpy as np
    import torch

    from graphfeed import _cuda
    from graphfeed.datasets.synthetic import load_builtin
    from graphfeed import place

    if not _cuda.cuda_available():
        raise SystemExit("alloc_fragmentation: needs a CUDA device")
    ds = load_builtin(args.dataset)
    feat = ds.node_feature("feat", backend="ram")
    labels = ds.node_feature(getattr(ds, "target", "label"), backend="ram")
    fanouts = [int(f) for f in args.fanouts.split(",")]
    placed = place(ds.graph, {"feat": feat, "label": labels}, fanouts, mode="cuda-cuda",
                   device="cuda", seed=args.seed)
    dev = placed.device
    feat, labels = placed.features["feat"], placed.features["label"]
    in_dim = int(np.prod(feat.row_shape))
    classes = int(ds.num_classes)
    hidden = args.hidden

    class MeanSAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            dims = [in_dim] + [hidden] * (len(fanouts) - 1) + [classes]
            self.self_lin = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
            self.nbr_lin = torch.nn.ModuleList(torch.nn.Linear(a, b, bias=False) for a, b in zip(dims, dims[1:]))

        def forward(self, x, blocks):
            for i, b in enumerate(blocks):
                src, dst = b.edge_index[0], b.edge_index[1]
                agg = torch.zeros(b.num_dst, x.shape[1], device=x.device, dtype=x.dtype)
                agg.index_add_(0, dst, x[src])
                deg = torch.bincount(dst, minlength=b.num_dst).clamp_(min=1).unsqueeze(1)
                x = self.self_lin[i](x[: b.num_dst]) + self.nbr_lin[i](agg / deg)
                if i < len(blocks) - 1:
                    x = torch.relu(x)
            return x

    model = MeanSAGE().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    train = torch.as_tensor(np.asarray(ds.train_ids), dtype=torch.int64, device=dev)
    rng = np.random.default_rng(args.seed)
    sizes = rng.integers(args.min_batch, args.max_batch + 1, size=args.steps)
    torch.cuda.reset_peak_memory_stats(dev)
    for step, n in enumerate(sizes):
        g = torch.Generator(device=dev).manual_seed(args.seed + step)
        seeds = train[torch.randint(0, train.shape[0], (int(n),), device=dev, generator=g)].unique()
        mb = placed.sampler.sample(seeds, epoch=0, batch_index=step)
        x = feat.read(mb.input_nodes, check=False).to(torch.float32).reshape(mb.input_nodes.shape[0], -1)
        y = labels.read(mb.seeds, check=False).to(torch.long).reshape(-1)
        loss = torch.nn.functional.cross_entropy(model(x, mb.blocks), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize(dev)
    alloc = int(torch.cuda.max_memory_allocated(dev))
    reserved = int(torch.cuda.max_memory_reserved(dev))
    return {"alloc_conf": os.environ.get("PYTORCH_ALLOC_CONF"), "steps": int(args.steps),
            "peak_allocated_bytes": alloc, "peak_reserved_bytes": reserved,
            "reserved_over_allocated": reserved / max(alloc, 1), "gpu": torch.cuda.get_device_name(dev)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="medium")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--min-batch", type=int, default=256)
    p.add_argument("--max-batch", type=int, default=4096)
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the comparison here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(workload(args)))
        return 0
    results = {}
    for name, conf in SETTINGS.items():
        env = dict(os.environ, PYTORCH_ALLOC_CONF=conf)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        cmd = [sys.executable, os.path.abspath(__file__), "--child"] + (argv if argv is not None else sys.argv[1:])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return proc.returncode
        results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        r = results[name]
        print(f"{name:>10} ({conf}): peak allocated {r['peak_allocated_bytes'] / 1e6:,.0f} MB, "
              f"peak reserved {r['peak_reserved_bytes'] / 1e6:,.0f} MB "
              f"({r['reserved_over_allocated']:.2f}x)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
