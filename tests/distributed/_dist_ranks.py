"""Functions run inside ranks spawned by graphfeed.distributed.launch (importable by name)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np


def report_world():
    from graphfeed.distributed import World, init

    w = init(World.from_env(), timeout_s=60)
    import torch
    import torch.distributed as dist

    t = torch.tensor([w.rank + 1])
    dist.all_reduce(t)
    return {"world": w, "sum": int(t.item()), "pid": os.getpid()}


def share_and_measure(nbytes: int, private_copy: bool):
    """Share one array; touch all of it; report the bytes seen and how much PSS it added."""
    from graphfeed.distributed import World, init, list_segments, share_arrays
    from graphfeed.distributed.pss import memory_breakdown

    w = init(World.from_env(), timeout_s=30)
    n = nbytes // 8
    before = memory_breakdown()["Pss"]
    arrays = share_arrays("x", lambda: {"a": np.arange(n, dtype=np.int64)}, w, private_copy=private_copy)
    a = arrays["a"]
    checksum = int(a[:: 4096 // 8].sum())  # touch every page
    from graphfeed.distributed import barrier

    barrier()  # every rank has touched every page before anyone measures
    after = memory_breakdown()["Pss"]
    barrier()  # nobody unmaps before everyone measured
    return {
        "rank": w.rank,
        "checksum": checksum,
        "first_last": (int(a[0]), int(a[-1])),
        "writeable": bool(a.flags.writeable),
        "pss_added": after - before,
        "segments_during": [p.name for p in list_segments()],
    }


def fail_on_rank(bad_rank: int):
    """Every rank creates a shared segment, then ``bad_rank`` raises while others wait in a
    collective."""
    from graphfeed.distributed import World, init, share_arrays

    w = init(World.from_env(), timeout_s=60)
    share_arrays("x", lambda: {"a": np.ones(1 << 16)}, w)
    if w.rank == bad_rank:
        raise ValueError(f"boom on rank {w.rank}")
    import torch
    import torch.distributed as dist

    dist.all_reduce(torch.ones(1))  # the peer never joins: must fail, not hang
    return "unreachable"


def user_error_on_rank(bad_rank: int):
    """As :func:`fail_on_rank`, with a user error (a ``GraphfeedError``) instead of a bug."""
    from graphfeed.distributed import World, init, share_arrays
    from graphfeed.errors import GraphfeedError

    w = init(World.from_env(), timeout_s=60)
    share_arrays("x", lambda: {"a": np.ones(1 << 16)}, w)
    if w.rank == bad_rank:
        raise GraphfeedError(f"part {w.rank}: bad input (a user error)")
    import torch
    import torch.distributed as dist

    dist.all_reduce(torch.ones(1))  # the peer never joins: must fail, not hang
    return "unreachable"


def first_rank_cannot_share():
    """The first rank's data cannot be produced (a user error); the other rank learns it through
    the collective and raises ``PeerFailedError``: the launcher must report the cause."""
    from graphfeed.distributed import World, init, share_arrays
    from graphfeed.errors import GraphfeedError

    w = init(World.from_env(), timeout_s=60)

    def produce():
        raise GraphfeedError("dataset x: no such array (a user error)")

    share_arrays("x", produce, w)
    return "unreachable"


def kill_in_window(victim: int):
    """The first rank creates a segment, and ``victim`` is SIGKILLed before it is unlinked:
    only the launcher can remove it."""
    from graphfeed.distributed import World, init
    from graphfeed.distributed.shm import SharedArrays, segment_path
    from graphfeed.distributed.sharing import run_id

    w = init(World.from_env(), timeout_s=60)
    if w.rank == 0:
        SharedArrays.create(segment_path(run_id(w), "orphan"), {"a": np.ones(1 << 16)})
    from graphfeed.distributed import barrier

    barrier()
    if w.rank == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    import torch
    import torch.distributed as dist

    dist.all_reduce(torch.ones(1))
    return "unreachable"


def hang_on_rank(bad_rank: int, timeout_s: float):
    """``bad_rank`` stays alive but never joins the collective: the others must raise on the
    collective timeout by themselves."""
    from graphfeed.distributed import World, init

    w = init(World.from_env(), timeout_s=timeout_s)
    import torch
    import torch.distributed as dist

    if w.rank == bad_rank:
        time.sleep(600)
        return "slept"
    t0 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1))
    except Exception as e:
        raise RuntimeError(f"collective failed after {time.monotonic() - t0:.1f}s: {e}") from e
    return "unreachable"


def share_then_private(nbytes: int):
    """PSS added by a 2-rank shared array, then by a private copy of the same size."""
    import gc

    out = report_world()
    out["shared"] = share_and_measure(nbytes, private_copy=False)
    gc.collect()
    out["private"] = share_and_measure(nbytes, private_copy=True)
    return out


def _mapping_names(a) -> list:
    """Paths of the mappings that hold ``a`` (from /proc/self/maps)."""
    ptr = int(a.ctypes.data)
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= ptr < hi:
                out.append(parts[5].strip() if len(parts) > 5 else "")
    return out


def share_dataset_everywhere(path: str):
    """share_dataset on a memory-mapped and an in-memory copy of the same dataset, and with
    private copies; report where things live and checksums."""
    from graphfeed.datasets.format import Dataset
    from graphfeed.distributed import World, init, list_segments, share_dataset
    from load_scale import scaled  # the parent test's factor (its environment)

    w = init(World.from_env(), timeout_s=scaled(60))
    out = {"rank": w.rank}
    for label, kw, sd_kw in (
        ("mapped", {}, {}),
        ("in_memory", {"in_memory": True}, {}),
        ("private", {}, {"private_copy": True}),
        ("disk", {}, {"features": "disk"}),
    ):
        ds = Dataset.open(path, validate="quick", **kw)
        s = share_dataset(ds, w, **sd_kw)
        feat = s.features["feat"]
        rec = {"placement": dict(s.placement), "segments": [p.name for p in list_segments()]}
        import torch

        ids = torch.arange(feat.num_rows)
        rec["feat_sum"] = float(feat.read(ids).double().sum())
        rec["label_sum"] = int(s.features[ds.target].read(ids).long().sum())
        rec["graph"] = (int(s.graph.indptr.sum()), int(s.graph.indices.astype(np.int64).sum()))
        data = getattr(feat, "data", None)
        if data is not None:
            arr = data.numpy()
            rec["feat_maps"] = _mapping_names(arr)
            rec["feat_writeable"] = bool(arr.flags.writeable)
        rec["graph_maps"] = _mapping_names(s.graph.indices)
        out[label] = rec
    return out


def place_typed_everywhere(path: str, free_gpu_bytes: list):
    """A typed dataset placed by ``DataPlan.place_dataset`` with ``--mode auto`` on ranks that
    each see their own (faked) free GPU memory: report the mode each would choose alone, the
    one placed, where the per-type features live and the shared memory (PSS) they added."""
    import warnings

    import torch

    from graphfeed.datasets.format import Dataset
    from graphfeed.distributed import World, barrier, init
    from graphfeed.distributed.pss import memory_breakdown
    from graphfeed.placement import Hardware, hardware, plan, plan_placement
    from load_scale import scaled

    w = init(World.from_env(), timeout_s=scaled(60))
    ds = Dataset.open(path)
    gb = 10**9
    hw = Hardware(host_total_bytes=64 * gb, host_free_bytes=60 * gb, gpu_name="fake",
                  gpu_total_bytes=80 * gb, gpu_free_bytes=free_gpu_bytes[w.rank], gpu_count=2,
                  ranks_per_machine=2, cuda_available=True, supports_uva=True, device="cuda:0")
    own = plan_placement(*plan.DataPlan.data_bytes(ds, [ds.target]), hw).mode
    # the decision on this rank's fake hardware; the CPU device keeps the GPU mode's logic
    p = plan.DataPlan(features="ram", mode="auto", device="cpu", world=w)
    before = memory_breakdown()["Pss_Shmem"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        placed = p.place_dataset(ds, [5, 5], hw=hw)
    feats = placed.input_features
    sums = {t: float(f.read(torch.arange(f.num_rows)).double().sum())  # every page touched
            for t, f in feats.items()}
    barrier()
    after = memory_breakdown()["Pss_Shmem"]
    maps = {t: _mapping_names(f.data.numpy()) for t, f in feats.items()}
    barrier()  # nobody unmaps before everyone measured
    return {"own": own, "mode": placed.mode, "reason": placed.placement.reason, "sums": sums,
            "maps": maps, "shmem_added": after - before,
            "bytes": sum(int(f.nbytes) for f in feats.values())}


def pin_shared_in_place():
    """CUDA: each rank page-locks the one shared copy in place (no pinned copy per rank)."""
    import torch

    from graphfeed.distributed import World, init, register_pinned, share_arrays
    from graphfeed.features.pinned import pin_tensor

    w = init(World.from_env(), backend="gloo", timeout_s=60)
    a = share_arrays("p", lambda: {"a": np.arange(1 << 20, dtype=np.float32)}, w, pinnable=True)["a"]
    t = torch.from_numpy(a)
    pinned = pin_tensor(t)
    same = pinned.data_ptr() == t.data_ptr()
    gpu_sum = float(pinned.to("cuda", non_blocking=True).double().sum())
    ro = share_arrays("q", lambda: {"a": np.ones(1 << 16, dtype=np.float32)}, w)["a"]
    try:
        with register_pinned(ro) as region:
            ro_pinned = bool(region.tensor.is_pinned())
    except Exception as e:  # a device without read-only registration: reported, not hidden
        ro_pinned = f"{type(e).__name__}: {e}"
    return {"in_place": same, "is_pinned": bool(pinned.is_pinned()), "gpu_sum": gpu_sum,
            "read_only": ro_pinned}


def run_until_killed(outdir: str):
    """Rank 0 creates a shared segment it never unlinks; every rank writes
    ``<rank>.json`` (pid, parent pid, run id) and then sleeps until something kills it."""
    import json

    from graphfeed.distributed.shm import RUN_ID_ENV, SharedArrays, segment_path

    rank = int(os.environ["RANK"])
    run = os.environ[RUN_ID_ENV]
    if rank == 0:
        SharedArrays.create(segment_path(run, "lifeline"), {"a": np.ones(1 << 12)})
    info = {"pid": os.getpid(), "ppid": os.getppid(), "run_id": run}
    tmp = os.path.join(outdir, f".{rank}.json")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.rename(tmp, os.path.join(outdir, f"{rank}.json"))
    while True:
        time.sleep(0.1)


def decide_with_rank_hardware(free_gpu_bytes: list):
    """Each rank sees its own free GPU memory (faked); DataPlan.decide must agree on rank 0's
    automatic mode anyway. Returns ``(own choice, agreed mode, reason)``."""
    import warnings

    from graphfeed.distributed import World, init
    from graphfeed.placement import Hardware, hardware, plan, plan_placement

    w = init(World.from_env(), timeout_s=60)
    gb = 10**9
    hw = Hardware(host_total_bytes=64 * gb, host_free_bytes=60 * gb, gpu_name="fake",
                  gpu_total_bytes=80 * gb, gpu_free_bytes=free_gpu_bytes[w.rank], gpu_count=2,
                  ranks_per_machine=2, cuda_available=True, supports_uva=True, device="cuda:0")
    hardware.detect_hardware = lambda **kw: hw  # this rank's machine, as the plan will ask
    own = plan_placement(4 * gb, 4 * gb, hw).mode
    p = plan.DataPlan(device="cuda:0", world=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        placed = p.decide(4 * gb, 4 * gb)
    return own, placed.mode, placed.reason


def die_before_all_reduce():
    """Rank 1 ends without a word after the group is up; rank 0's all-reduce then breaks."""
    import torch
    import torch.distributed as dist

    from graphfeed.distributed import World, init

    init(World.from_env(), timeout_s=60)
    if dist.get_rank() == 1:
        os._exit(3)
    time.sleep(0.5)
    dist.all_reduce(torch.ones(3))
    return "unreachable"
