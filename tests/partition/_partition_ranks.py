"""Functions run inside ranks started by graphfeed.distributed.launch (importable by name)."""

from __future__ import annotations

import numpy as np


def sample_partitioned(path: str, fanouts, batch_size: int, steps: int, seed: int,
                       cache_rows: int = 0, replace: bool = False):
    """Sample ``steps`` batches of this rank's train ids on the partition at ``path`` and
    return them in DATASET ids: per step ``(seeds, [(edge_index, src_nodes, num_dst)],
    feat, label)``, plus exchange and cache stats. With ``cache_rows``, the cache is built
    after the first half of the steps."""
    from graphfeed.distributed import World, init, shutdown
    from graphfeed.partition import load_part, read_book
    from graphfeed.partition.dist import DistFeature, DistNeighborSampler, Exchange

    w = init(World.from_env(), backend="gloo", timeout_s=60)
    book = read_book(path)
    g = w.world_size // book.num_parts  # ranks sharing a part (a machine's GPUs)
    part = load_part(book, w.rank // g)
    ex = Exchange()
    sampler = DistNeighborSampler(part, fanouts, ex, replace=replace, seed=seed)
    feat = DistFeature(part, "feat", ex)
    label = DistFeature(part, "label", ex)
    orig = np.asarray(book.orig_ids())
    train = np.asarray(part.splits["train"])[w.rank % g::g]
    out = []
    for step in range(steps):
        if cache_rows and step == steps // 2:
            feat.build_cache(cache_rows)
        seeds = train[step * batch_size:(step + 1) * batch_size]
        bi = step * w.world_size + w.rank
        mb = sampler.sample(seeds, epoch=1, batch_index=step)
        x = feat.read(mb.input_nodes).numpy().copy()
        y = label.read(mb.seeds).numpy().copy()
        blocks = [(b.edge_index.numpy().copy(), orig[b.src_nodes.numpy()], b.num_dst)
                  for b in mb.blocks]
        out.append((bi, orig[mb.seeds.numpy()], blocks, x, y))
    stats = {"exchange": ex.stats.to_json(), "cache": feat.cache_stats.to_json()}
    shutdown()
    return {"rank": w.rank, "batches": out, "stats": stats}


def model_killed_on_rank_1(in_dim: int, num_classes: int):
    """A GraphSAGE whose rank 1 is SIGKILLed at its third forward (mid-epoch)."""
    import os
    import signal

    import torch

    from graphfeed.models import build_model

    class Killed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = build_model("sage", in_dim, 16, num_classes, 2)
            self.calls = 0

        def forward(self, x, blocks):
            self.calls += 1
            if self.calls == 3 and os.environ.get("RANK") == "1":
                os.kill(os.getpid(), signal.SIGKILL)
            return self.inner(x, blocks)

    return Killed()


def exchange_roundtrip(device, backend=None, staged=False):
    """An ``Exchange`` for ranks on ``device``: its group's backend and tensor device, and what
    each rank receives of rows made from (sender, receiver, row) in every dtype the
    partitioned path sends (int64 ids and counts, float32 2-D rows), empty segments included.
    A one-rank world starts its own process group (``init`` leaves one rank without one).
    ``staged``: CPU ranks take the path of GPU ranks (tensors allocated on the exchange's
    device and copied back into the arrays) instead of wrapping the arrays."""
    import torch.distributed as dist

    from graphfeed.distributed import World, init, shutdown
    from graphfeed.partition.dist import Exchange

    w = World.from_env()
    if w.world_size > 1:
        init(w, backend=backend, device=device, timeout_s=60)
    else:
        dist.init_process_group(backend or "gloo", store=dist.HashStore(), rank=0, world_size=1)
    ex = Exchange(device=device, backend=backend)
    ex._staged = ex._staged or staged
    r, size = ex.rank, ex.size
    counts = np.array([(r + j) % 3 for j in range(size)], np.int64)  # some segments empty
    ids = np.concatenate([np.full(c, 100 * r + j, np.int64) for j, c in enumerate(counts)])
    got_ids, got_counts = ex.alltoallv(ids, counts)
    rows = np.repeat(ids[:, None], 4, axis=1).astype(np.float32)
    got_rows, _ = ex.alltoallv(rows, counts, recv_counts=got_counts)
    out = {"backend": dist.get_backend(ex.group), "device": str(ex.device),
           "ids": got_ids.tolist(), "counts": got_counts.tolist(), "rows": got_rows.tolist(),
           "calls": ex.stats.calls}
    shutdown()
    return out


def read_feature_bits(path: str, ids):
    """Read rows ``ids`` (the partition's ids, any part) of ``feat`` through ``DistFeature`` on
    this rank; returns the tensor's dtype and its bits as int16 (bfloat16 has no numpy dtype)."""
    import torch

    from graphfeed.distributed import World, init, shutdown
    from graphfeed.partition import load_part, read_book
    from graphfeed.partition.dist import DistFeature, Exchange

    w = init(World.from_env(), backend="gloo", timeout_s=60)
    book = read_book(path)
    f = DistFeature(load_part(book, w.rank), "feat", Exchange())
    got = f.read(torch.as_tensor(np.asarray(ids, dtype=np.int64)))
    shutdown()
    return str(got.dtype), got.view(torch.int16).numpy().copy()
