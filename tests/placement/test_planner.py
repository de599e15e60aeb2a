"""The placement planner's decisions over synthetic hardware and dataset sizes."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

from graphfeed._units import format_bytes, parse_size
from graphfeed.errors import GraphfeedError
from graphfeed.placement import (
    MODES,
    Hardware,
    Placement,
    PlacementWarning,
    plan_placement,
    validate_mode,
)

GB = 10**9
WS = 1 << 30  # the default sampling workspace


def cpu_box(free=100 * GB, ranks=1):
    return Hardware(host_total_bytes=128 * GB, host_free_bytes=free, ranks_per_machine=ranks)


def gpu_box(gpu_free=22 * GB, host_free=171 * GB, ranks=1, gpus=1, uva=True):
    return Hardware(
        host_total_bytes=256 * GB,
        host_free_bytes=host_free,
        gpu_name="Synthetic GPU",
        gpu_total_bytes=80 * GB,
        gpu_free_bytes=gpu_free,
        gpu_count=gpus,
        ranks_per_machine=ranks,
        cuda_available=True,
        supports_uva=uva,
    )


# (hardware, graph bytes, feature bytes, expected mode): the auto rules, boundaries included.
TABLE = [
    # no CUDA: always cpu-cpu, whatever the size
    (cpu_box(), 1 * GB, 1 * GB, "cpu-cpu"),
    (cpu_box(free=1 * GB), 50 * GB, 500 * GB, "cpu-cpu"),
    # small data on a big GPU
    (gpu_box(), 1 * GB, 3 * GB, "cuda-cuda"),
    (gpu_box(gpu_free=80 * GB), 2 * GB, 50 * GB, "cuda-cuda"),
    # exactly at the GPU budget (0.7 x 20 GB = 14 GB, minus the workspace) still fits ...
    (gpu_box(gpu_free=20 * GB), 4 * GB, 10 * GB - WS, "cuda-cuda"),
    # ... one byte more does not, and the host holds it: pinned-cuda
    (gpu_box(gpu_free=20 * GB), 4 * GB, 10 * GB - WS + 1, "pinned-cuda"),
    # the issue's example: features 38 GB on a GPU with 22 GB free, plenty of host RAM
    (gpu_box(gpu_free=22 * GB, host_free=171 * GB), 1 * GB, 38 * GB, "pinned-cuda"),
    # too big for 70% of host RAM too: cpu-cuda (features stay on disk)
    (gpu_box(gpu_free=22 * GB, host_free=171 * GB), 1 * GB, 200 * GB, "cpu-cuda"),
    # host boundary: 0.7 x 100 GB = 70 GB
    (gpu_box(gpu_free=10 * GB, host_free=100 * GB), 10 * GB, 60 * GB, "pinned-cuda"),
    (gpu_box(gpu_free=10 * GB, host_free=100 * GB), 10 * GB, 60 * GB + 1, "cpu-cuda"),
    # no UVA: pinned-cuda is impossible, fall back to cpu-cuda
    (gpu_box(gpu_free=22 * GB, uva=False), 1 * GB, 38 * GB, "cpu-cuda"),
    # 8 ranks on 4 GPUs: two copies per GPU. 2 x (4 GB + 1 GiB) = 10.1 GB <= 15.4 GB fits ...
    (gpu_box(gpu_free=22 * GB, ranks=8, gpus=4), 1 * GB, 3 * GB, "cuda-cuda"),
    # ... 2 x (8 GB + 1 GiB) = 18.1 GB does not, though one rank alone would (9.1 <= 15.4)
    (gpu_box(gpu_free=22 * GB, ranks=8, gpus=4), 2 * GB, 6 * GB, "pinned-cuda"),
    # 8 ranks on 8 GPUs: one copy per GPU, and the host copy is counted once per machine
    (gpu_box(gpu_free=22 * GB, host_free=100 * GB, ranks=8, gpus=8), 2 * GB, 6 * GB, "cuda-cuda"),
    (gpu_box(gpu_free=22 * GB, host_free=100 * GB, ranks=8, gpus=8), 10 * GB, 55 * GB, "pinned-cuda"),
    # empty dataset: fits anywhere
    (gpu_box(), 0, 0, "cuda-cuda"),
    # a GPU almost full: even the workspace does not fit
    (gpu_box(gpu_free=1 * GB), 0, 1, "pinned-cuda"),
]


@pytest.mark.parametrize("hw,graph,feat,mode", TABLE)
def test_auto_decisions(hw, graph, feat, mode):
    p = plan_placement(graph, feat, hw)
    assert isinstance(p, Placement)
    assert p.mode == mode, p.reason
    assert p.reason.endswith(mode) or f": {mode} (" in p.reason
    assert p.device == ("cpu" if mode == "cpu-cpu" else "cuda:0")
    assert p.details["graph_bytes"] == graph and p.details["feature_bytes"] == feat
    assert p.details["requested"] == "auto"


def test_reason_of_the_issue_example_has_the_numbers():
    p = plan_placement(1 * GB, 38 * GB, gpu_box(gpu_free=22 * GB, host_free=171 * GB))
    assert p.mode == "pinned-cuda"
    for text in ("features 38.0 GB", "70% of free GPU memory 22.0 GB", "(15.4 GB)",
                 "free host memory 171 GB", "(120 GB)", "one copy per machine"):
        assert text in p.reason, (text, p.reason)
    assert p.reason.endswith(": pinned-cuda")
    assert " > " in p.reason


def test_no_cuda_reason():
    p = plan_placement(GB, GB, cpu_box())
    assert p.reason == "no CUDA device: cpu-cpu"
    assert not p.uses_cuda and p.sampling_device == "cpu" and p.spec.features == "host"


def test_reason_counts_ranks_sharing_a_gpu():
    p = plan_placement(2 * GB, 6 * GB, gpu_box(ranks=8, gpus=4))
    assert "2 ranks per GPU x (" in p.reason
    assert p.details["gpu_need_bytes"] == 2 * (8 * GB + WS)


def test_headroom_and_workspace_are_used():
    hw = gpu_box(gpu_free=10 * GB)
    assert plan_placement(GB, 5 * GB, hw, sampling_workspace_bytes=0).mode == "cuda-cuda"
    assert plan_placement(GB, 5 * GB, hw, sampling_workspace_bytes=2 * GB).mode == "pinned-cuda"
    assert plan_placement(GB, 7 * GB, hw, sampling_workspace_bytes=0).mode == "pinned-cuda"
    assert plan_placement(GB, 7 * GB, hw, sampling_workspace_bytes=0, headroom=0.9).mode == "cuda-cuda"
    assert "90% of free GPU memory" in plan_placement(GB, 7 * GB, hw, headroom=0.9).reason


def test_properties_per_mode():
    hw = gpu_box()
    p = plan_placement(GB, 3 * GB, hw)
    assert (p.mode, p.sampling_device, p.spec.features) == ("cuda-cuda", "cuda:0", "device")
    p = plan_placement(GB, 38 * GB, hw)
    assert (p.mode, p.sampling_device, p.spec.features) == ("pinned-cuda", "cuda:0", "pinned")
    p = plan_placement(GB, 200 * GB, hw)
    assert (p.mode, p.sampling_device, p.spec.features) == ("cpu-cuda", "cpu", "host")
    assert p.uses_cuda
    assert str(p).startswith("cpu-cuda on cuda:0: ")


def test_logs_the_choice(caplog):
    with caplog.at_level(logging.INFO, logger="graphfeed.placement"):
        p = plan_placement(GB, 38 * GB, gpu_box())
    assert any(p.reason in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------------- explicit modes
def test_unknown_mode_lists_valid_ones():
    with pytest.raises(GraphfeedError) as e:
        plan_placement(GB, GB, gpu_box(), requested="gpu")
    msg = str(e.value)
    assert "'gpu'" in msg
    for m in ("auto",) + MODES.names():
        assert m in msg


def test_placement_rejects_unknown_modes():
    with pytest.raises(GraphfeedError, match="cpu-cpu"):
        Placement("auto", "not a concrete mode")


def test_mode_names_are_normalised():
    assert validate_mode(" CUDA_cuda ") == "cuda-cuda"
    assert validate_mode("auto") == "auto"
    with pytest.raises(GraphfeedError):
        validate_mode(3)


@pytest.mark.parametrize("mode", ["cpu-cuda", "pinned-cuda", "cuda-cuda"])
def test_cuda_modes_without_cuda_raise(mode):
    with pytest.raises(GraphfeedError, match="needs a CUDA device"):
        plan_placement(GB, GB, cpu_box(), requested=mode)


@pytest.mark.parametrize("hw", [cpu_box(), gpu_box()])
def test_cpu_cpu_always_allowed(hw):
    p = plan_placement(500 * GB, 500 * GB, hw, requested="cpu-cpu")
    assert (p.mode, p.device, p.reason) == ("cpu-cpu", "cpu", "requested cpu-cpu")
    assert p.details["requested"] == "cpu-cpu"


def test_explicit_mode_overrides_auto():
    hw = gpu_box()
    assert plan_placement(GB, GB, hw, requested="cpu-cuda").mode == "cpu-cuda"
    assert plan_placement(GB, GB, hw, requested="pinned-cuda").mode == "pinned-cuda"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # fits the headroom: no warning
        assert plan_placement(GB, GB, hw, requested="cuda-cuda").mode == "cuda-cuda"


def test_cuda_cuda_that_cannot_fit_raises_with_numbers():
    with pytest.raises(GraphfeedError) as e:
        plan_placement(1 * GB, 38 * GB, gpu_box(gpu_free=22 * GB), requested="cuda-cuda")
    msg = str(e.value)
    assert "cannot fit" in msg and "39.0 GB" in msg and "22.0 GB" in msg and "cuda:0" in msg


def test_cuda_cuda_above_headroom_warns_but_is_honoured():
    # 18 GB fits in 22 GB free but not in 70% of it
    with pytest.warns(PlacementWarning, match="15.4 GB"):
        p = plan_placement(2 * GB, 16 * GB, gpu_box(gpu_free=22 * GB), requested="cuda-cuda")
    assert p.mode == "cuda-cuda" and "= 19.1 GB > 70%" in p.reason


def test_cuda_cuda_counts_ranks_sharing_a_gpu():
    # one copy of 12 GB fits in 22 GB free; two ranks on the GPU need 24 GB
    with pytest.raises(GraphfeedError, match="2 ranks per GPU"):
        plan_placement(2 * GB, 10 * GB, gpu_box(ranks=2, gpus=1), requested="cuda-cuda")


def test_pinned_cuda_validation():
    with pytest.raises(GraphfeedError, match="UVA"):
        plan_placement(GB, GB, gpu_box(uva=False), requested="pinned-cuda")
    with pytest.raises(GraphfeedError, match="cannot fit.*101 GB.*100 GB"):
        plan_placement(GB, 100 * GB, gpu_box(host_free=100 * GB), requested="pinned-cuda")
    with pytest.warns(PlacementWarning, match="70% of free host memory"):
        p = plan_placement(GB, 80 * GB, gpu_box(host_free=100 * GB), requested="pinned-cuda")
    assert p.mode == "pinned-cuda"


@pytest.mark.parametrize(
    "kw",
    [dict(graph_bytes=-1), dict(feature_bytes=1.5), dict(feature_bytes=True),
     dict(headroom=0), dict(headroom=1.5), dict(sampling_workspace_bytes=-5)],
)
def test_bad_arguments(kw):
    args = dict(graph_bytes=GB, feature_bytes=GB)
    args.update(kw)
    extra = {k: args.pop(k) for k in ("headroom", "sampling_workspace_bytes") if k in args}
    with pytest.raises(GraphfeedError):
        plan_placement(args["graph_bytes"], args["feature_bytes"], gpu_box(), **extra)


def test_numpy_sizes_accepted():
    p = plan_placement(np.int64(GB), np.uint64(3 * GB), gpu_box())
    assert p.mode == "cuda-cuda"


def test_hardware_validation():
    with pytest.raises(GraphfeedError):
        Hardware(host_total_bytes=1, host_free_bytes=1, ranks_per_machine=0)
    with pytest.raises(GraphfeedError):
        Hardware(host_total_bytes=1, host_free_bytes=1, cuda_available=True)
    hw = gpu_box(ranks=3, gpus=2)
    assert hw.ranks_per_gpu == 2 and cpu_box().ranks_per_gpu == 0
    assert "Synthetic GPU" in hw.describe() and "3 rank(s)" in hw.describe()


# ---------------------------------------------------------------------- units
@pytest.mark.parametrize(
    "n,text",
    [(0, "0 B"), (999, "999 B"), (1500, "1.5 kB"), (38.2e9, "38.2 GB"), (22 * GB, "22.0 GB"),
     (171 * GB, "171 GB"), (99.96e9, "100 GB"), (2.5e12, "2.5 TB"), (-3e9, "-3.0 GB")],
)
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize(
    "text,n",
    [("512", 512), (512, 512), ("64MB", 64 * 10**6), ("1.5 GB", 15 * 10**8), ("2GiB", 2 << 30),
     ("10g", 10 * GB), (".5k", 500), ("3 bytes", 3), ("1 TiB", 1 << 40)],
)
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("bad", ["", "GB", "1.2.3GB", "-1", "5 XB", -1, True, float("nan")])
def test_parse_size_rejects(bad):
    with pytest.raises(GraphfeedError):
        parse_size(bad)


# ---------------------------------------------------------------------- features="auto"

@pytest.mark.parametrize("free, ranks, cache, want, want_cache", [
    (24 * GB, 1, 0, "ram", 0),            # 7 + 5 GB fit 70% of 24 GB
    (11 * GB, 1, 0, "disk", 0),           # papers in a 12 GB cgroup: 7 + 28 GB do not
    (11 * GB, 1, 4 * GB, "disk", 4 * GB),  # an explicit --cache-size is kept
    (40 * GB, 1, 0, "disk", 0),           # 35 GB of data exceed 70% of 40 GB
])
def test_plan_storage_table(free, ranks, cache, want, want_cache):
    from graphfeed.placement.planner import CACHE_BYTES_PER_NODE, plan_storage

    graph, n, row = 7 * GB, 111_000_000, 256
    feat = 5 * GB if free == 24 * GB else 28 * GB
    st = plan_storage(graph, feat, n, row, Hardware(32 * GB, free, ranks_per_machine=ranks),
                      cache_bytes=cache)
    assert st.features == want
    if want == "ram":
        assert "fits in 70%" in st.reason and "memory-mapped" in st.reason
        return
    assert "features read from disk (O_DIRECT)" in st.reason
    if want_cache:
        assert st.cache_bytes == want_cache and "--cache-size" in st.reason
    else:  # what is left after the graph, 15% working memory and the bookkeeping, in MB
        left = int(0.85 * free) - graph - CACHE_BYTES_PER_NODE * n
        assert 0 < st.cache_bytes <= left and st.cache_bytes > 0.9 * left
        assert st.cache_bytes % 10**6 == 0 and "working memory" in st.reason


def test_plan_storage_splits_the_cache_between_ranks_and_says_when_the_graph_does_not_fit():
    from graphfeed.placement.planner import plan_storage

    one = plan_storage(2 * GB, 30 * GB, 10**7, 512, Hardware(32 * GB, 20 * GB))
    four = plan_storage(2 * GB, 30 * GB, 10**7, 512, Hardware(32 * GB, 20 * GB,
                                                             ranks_per_machine=4))
    assert four.cache_bytes < one.cache_bytes / 3.5 and "split by 4 ranks" in four.reason
    tight = plan_storage(9 * GB, 30 * GB, 10**7, 512, Hardware(32 * GB, 10 * GB))
    assert tight.features == "disk" and tight.cache_bytes == 0
    assert "no room left for a cache" in tight.reason and "pages the graph in" in tight.reason
