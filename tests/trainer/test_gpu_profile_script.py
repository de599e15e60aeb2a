"""``benchmarks/gpu_profile.py`` runs end to end on ``tiny`` on the CPU (its figures are for a GPU;
here only that every part runs and reports what docs/benchmarks.md quotes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch_geometric")

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_the_gpu_profile_runs_on_tiny(tmp_path, tiny_dataset):
    out = tmp_path / "prof.json"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_profile.py"), "--dataset", "tiny",
         "--device", "cpu", "--mode", "cpu-cpu", "--batch-size", "64", "--batches", "3",
         "--warmup", "2", "--json", str(out)],
        capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(out.read_text())
    train = r["train"]
    assert train["ms_per_step"] > 0 and train["seeds_per_s"] > 0
    assert train["trainer_host_ms_per_step"] > 0 and train["top_host_ops"]
    assert r["loader"]["seeds_per_s"] > 0
    step = r["step"]
    assert step["forward_backward_ms"] > 0 and step["step_adam_foreach_ms"] > 0
    # the replay's other choice of path for wide mean-SAGE layers ran too
    assert any(k.startswith("forward_backward_ms_sparse_mean_from_") for k in step)
    sampler = r["sampler"]
    assert sampler["ms_per_batch"] > 0 and sampler["top_host_ops"]
