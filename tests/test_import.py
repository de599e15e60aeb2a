"""``import graphfeed`` is lazy and has no side effects (checked in fresh subprocesses).

It must load no numba kernels, LMDB, torch.distributed or PyG, and change no environment
variable; touching light names (``CSCGraph``, ``graphfeed.placement``) must not drag them in
either. torch.distributed is judged against what a bare ``import torch`` already loads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

HEAVY_PREFIXES = ("numba", "lmdb", "torch_geometric", "torch.distributed", "llvmlite", "matplotlib")
GRAPHFEED_HEAVY = (
    "graphfeed._numba",
    "graphfeed.graph._kernels",
    "graphfeed.sampling._kernels",
    "graphfeed.sampling.neighbor",
    "graphfeed.features.lmdb_store",
    "graphfeed.distributed",
    "graphfeed.loader.dataloader",
    "graphfeed.training",
)

PROBE = textwrap.dedent(
    """
    import json, os, sys
    env_before = dict(os.environ)
    steps = {}
    def snap(name):
        steps[name] = sorted(sys.modules)
    {pre}
    snap("baseline")
    import graphfeed
    snap("import graphfeed")
    graphfeed.CSCGraph, graphfeed.GraphfeedError, graphfeed.__version__
    snap("graphfeed.CSCGraph")
    import graphfeed.placement, graphfeed.cuda_alloc, graphfeed._units
    from graphfeed.placement import plan_placement, Hardware, num_workers_message
    snap("graphfeed.placement")
    env_after = dict(os.environ)
    print(json.dumps(dict(steps=steps, env_changed=sorted(
        k for k in set(env_before) | set(env_after) if env_before.get(k) != env_after.get(k)))))
    """
)


def probe(pre: str = "") -> dict:
    code = PROBE.replace("{pre}", pre)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr  # importing prints nothing
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def torch_baseline() -> set:
    code = "import sys, json, torch; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def heavy(mods, allowed=frozenset()):
    return sorted(
        m for m in mods
        if m not in allowed
        and (m.startswith(HEAVY_PREFIXES) or any(m == g or m.startswith(g + ".") for g in GRAPHFEED_HEAVY))
    )


@pytest.fixture(scope="module")
def fresh():
    return probe()


@pytest.mark.parametrize("step", ["import graphfeed", "graphfeed.CSCGraph", "graphfeed.placement"])
def test_nothing_heavy_is_loaded(fresh, step):
    assert heavy(fresh["steps"][step]) == []


def test_import_graphfeed_does_not_import_torch(fresh):
    mods = fresh["steps"]["graphfeed.placement"]
    assert "torch" not in mods and "numpy" not in fresh["steps"]["import graphfeed"]


def test_import_changes_no_environment_variable(fresh):
    assert fresh["env_changed"] == []


def test_nothing_heavy_beyond_torch_when_torch_is_loaded_first(torch_baseline):
    r = probe("import torch")
    for step in ("import graphfeed", "graphfeed.CSCGraph", "graphfeed.placement"):
        assert heavy(r["steps"][step], allowed=torch_baseline) == [], step
    assert r["env_changed"] == []


def test_lazy_names_resolve():
    import graphfeed

    assert graphfeed.CSCGraph.__name__ == "CSCGraph"
    with pytest.raises(AttributeError):
        graphfeed.no_such_name  # noqa: B018


def test_the_checker_flags_heavy_modules():
    mods = ["numba", "numba.core", "lmdb", "torch_geometric.data", "torch.distributed.c10d_logger",
            "graphfeed.sampling._kernels", "graphfeed.graph.csc", "torch", "numpy"]
    assert heavy(mods) == sorted(mods[:6])
    assert heavy(mods, allowed={"torch.distributed.c10d_logger"}) == sorted(mods[:4] + mods[5:6])


def test_the_cli_parser_and_the_registries_load_no_torch():
    """``graphfeed --help`` builds every subcommand's choices from the registries (feature
    backends, cache policies, placement modes, samplers, importers) without importing torch (or
    matplotlib, which only ``graphfeed report --out`` imports)."""
    code = textwrap.dedent("""
        import sys
        from graphfeed.cli.main import build_parser
        build_parser()
        from graphfeed.features import BACKENDS
        from graphfeed.features.registry import POLICIES
        from graphfeed.placement import MODES
        from graphfeed.sampling import SAMPLERS
        BACKENDS.names(), MODES.names(), SAMPLERS.names(), sorted(POLICIES)
        print(sorted(m for m in sys.modules
                     if m == "torch" or m.startswith(("numba", "lmdb", "matplotlib"))))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
