"""The whole GPU checklist in one command; run by ``benchmarks/gpu_check.sh OUTDIR``.

Steps (each with its log in OUTDIR, all summarised in OUTDIR/summary.json):

1. ``env``: GPUs, torch, and that asking about the GPU left the CUDA driver uninitialised.
2. ``pytest-cuda``: the tests marked ``cuda``.
3. ``pytest-all``: the rest of the suite, on a machine that has a GPU.
4. ``bench-<mode>-<alloc>``: ``graphfeed bench sample`` on ``medium`` in the three CUDA modes,
   with PyTorch's default allocator and with graphfeed's ``expandable_segments`` setting.
5. ``train-<mode>``: ``graphfeed train`` on ``medium`` in ``cpu-cpu`` (the reference) and the
   three CUDA modes; a CUDA mode passes when its test accuracy is within ``ACC_BAND`` of cpu-cpu.
6. ``alloc-fragmentation``: ``benchmarks/alloc_fragmentation.py`` (reserved / allocated, both
   allocator settings).
7. ``gpu-sampling``: ``benchmarks/gpu_sampling.py`` on ``medium``: the Triton sampler in
   cuda-cuda and pinned-cuda against the torch and numba samplers (seeds/s), kernel launches and
   host copies per batch (torch profiler; passes at <= 40 launches, issue 14's target), and the
   GPU feature cache (10% of the rows per policy: hit rate, speed-up over plain UVA reads).
   ``profile-cuda-cuda``: ``benchmarks/gpu_profile.py``: where a cuda-cuda training batch's
   time goes (loader wait, the training thread, GPU kernel time, the loader alone, the model
   step replayed alone, the Triton sampler's kernels against its wall time); reported, not
   judged.
8. ``multi-process``: with 2+ GPUs, ``train --nproc 2`` on NCCL and the same under ``torchrun``;
   with one GPU, ``--nproc 2`` must be refused in one line (exit 2), ``--dist-backend gloo`` must
   train two ranks on the one GPU, and ``torchrun --nproc-per-node 1`` must train.
9. ``methods-<mode>-<method>``: ``bench sample`` with ``--sampler weighted`` (random weights),
   ``labor`` (both variates) and ``temporal`` (random times) in cuda-cuda and pinned-cuda: the
   torch sampler's method branches on the GPU (ratio to uniform reported, not judged).
10. ``task-<dataset>-<mode>``: one epoch of ``train`` on the built-in ``hetero`` (R-GCN, node
    classification), ``link`` (GraphSAGE link prediction) and ``hetero-link`` (typed link
    prediction) in cpu-cpu (the reference) and the two GPU-sampling modes; a GPU mode passes
    when its main test metric is within ``TASK_BAND`` of cpu-cpu's (accuracy) or at least half
    of it (MRR: other samplers draw other batches).

Exit status 0 when every step passed. The step logs end up in one ``OUT/logs*.tar.gz`` per call
(beside ``summary*.json`` and the steps' JSON figures), since a device call brings back only a
few files. One device call may not run past 10 minutes, so the
checklist runs as groups, one call each (``env`` runs in every call; ``GROUPS`` below):

    benchmarks/gpu_check.sh OUT --only tests-a      # pytest-cuda + the first half of the suite
    benchmarks/gpu_check.sh OUT --only tests-b      # the second half of the suite
    benchmarks/gpu_check.sh OUT --only bench        # bench-*, alloc-fragmentation, gpu-sampling
    benchmarks/gpu_check.sh OUT --only train        # train-*, multi-process-*
    benchmarks/gpu_check.sh OUT --only methods,task # 9 and 10

``--only a,b`` takes group names or step-name prefixes, and runs the steps in that order
(``--only quick``: the steps that matter most, in one call). Each call stops starting steps once
``GRAPHFEED_GPU_CHECK_BUDGET`` seconds (default 540) have passed, and no step runs past that
budget: a step left out is recorded as failed ("out of time"), so the call still returns
within its 10 minutes. ``gpu_check.sh`` keeps the caches (generated datasets, numba, triton)
in ``.gpu-cache/`` inside the repository (ignored by git), so consecutive calls on the same
machine reuse them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ACC_BAND = 0.03  # a CUDA mode's test accuracy may differ from cpu-cpu's by this much
MAX_LAUNCHES = 40  # kernel launches per batch of the Triton sampler (fanouts 15,10,5)
# issue 14's throughput targets (seeds/s, medium, batch 1024), reported, not judged
TARGETS = {"triton_cuda_cuda": 1_500_000, "triton_pinned_cuda": 600_000}
MODES = ("cpu-cuda", "pinned-cuda", "cuda-cuda")
GPU_SAMPLING = ("cuda-cuda", "pinned-cuda")  # the torch samplers run on the GPU
TASK_BAND = 0.05  # a GPU mode's test accuracy may differ from cpu-cpu's by this much (1 epoch)
ALLOC = {"default": "expandable_segments:False", "expandable": None}  # None: graphfeed decides
#: the Triton sampler's kernels: the profiler must see each among a batch's GPU kernels, or its
#: launch count (which may miss driver-API launches) proves nothing
TRITON_KERNELS = ("count_kernel", "sample_kernel", "flag_kernel", "final_kernel")
#: groups of steps, each sized for one device call of under 10 minutes
GROUPS = {
    # what matters most, in one call (about 7.5 minutes by the H100 runs of 2026-11-27; steps
    # in this order): the GPU sampler, the profile, the CUDA tests, training in the GPU modes
    # against cpu-cpu, gloo ranks sharing the GPU, the loader's bench, typed training, the
    # method branches
    "quick": ("gpu-sampling", "profile-", "pytest-cuda", "train-cpu-cpu", "train-cuda-cuda",
              "multi-process-gloo", "train-pinned-cuda", "bench-cuda-cuda-expandable",
              "bench-pinned-cuda-expandable", "task-hetero-", "methods-cuda-cuda-"),
    "tests-a": ("pytest-cuda", "pytest-all-a"),
    "tests-b": ("pytest-all-b",),
    "bench": ("bench-", "alloc-fragmentation", "gpu-sampling", "profile-"),
    "train": ("train-", "multi-process"),
    "methods": ("methods-",),
    "task": ("task-",),
}
#: the second half of the suite (pytest-all-b); pytest-all-a runs the rest
SUITE_B = ("tests/cli", "tests/trainer", "tests/datasets", "tests/distributed",
           "tests/partition")
BUDGET_ENV = "GRAPHFEED_GPU_CHECK_BUDGET"
PYTEST_PACKAGES = ("pytest", "pytest_timeout", "hypothesis", "scipy", "yaml", "tqdm", "triton",
                   "torch_geometric", "numba", "numpy", "lmdb")


def last_json(text: str):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def pytest_counts(text: str) -> dict:
    counts = {}
    for n, what in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", text):
        counts[what.rstrip("s") if what.startswith("error") else what] = int(n)
    return counts


def pack_logs(out: Path, logs, stem: str) -> None:
    """The call's step logs as one ``OUT/<stem>.tar.gz``, the loose logs removed: the device
    tool brings back only a few files from a call, and the summary and the JSON figures should
    be among them."""
    import tarfile

    logs = [n for n in dict.fromkeys(logs) if (out / n).is_file()]
    if not logs:
        return
    tmp = out / f".{stem}.tar.gz.part"
    with tarfile.open(tmp, "w:gz") as tar:
        for n in logs:
            tar.add(out / n, arcname=n)
    tmp.replace(out / f"{stem}.tar.gz")
    for n in logs:
        (out / n).unlink()


def expand_only(items) -> tuple:
    """``--only`` items as step-name prefixes: a group name stands for its steps."""
    out = []
    for item in items:
        out.extend(GROUPS.get(item, (item,)))
    return tuple(out)


class Check:
    """Runs the steps: ``env`` at once, the others when :meth:`finish` is called, in the
    order of ``only``'s prefixes (a step matching an earlier prefix runs earlier; the checklist's
    own order otherwise), so that one call runs the most wanted steps first."""

    def __init__(self, out: Path, py: str, only=(), budget: float = 540.0):
        self.out, self.py, self.only = out, py, expand_only(only)
        self.steps = []
        self.pending = []
        self.deadline = time.monotonic() + budget

    def run(self, name, cmd, *, env=None, timeout=600, judge=None):
        if self.only and name != "env" and not name.startswith(self.only):
            return {}
        if name == "env":
            return self._run(name, cmd, env=env, timeout=timeout, judge=judge)
        self.pending.append((name, cmd, {"env": env, "timeout": timeout, "judge": judge}))
        return {}

    def finish(self) -> None:
        """Run the pending steps, in ``only``'s order."""
        def rank(item):
            name = item[0]
            return next((i for i, p in enumerate(self.only) if name.startswith(p)), 0)

        pending, self.pending = sorted(self.pending, key=rank), []  # sorted is stable
        for name, cmd, kw in pending:
            self._run(name, cmd, **kw)

    def _run(self, name, cmd, *, env=None, timeout=600, judge=None):
        left = self.deadline - time.monotonic()
        if left < 15 and name != "env":
            step = {"name": name, "cmd": shlex.join(cmd), "rc": None, "seconds": 0.0,
                    "ok": False, "skipped": "out of time: run this step in a call of its own"}
            self.steps.append(step)
            print(f"[FAIL] {name} (not started: out of time)", flush=True)
            return step
        timeout = max(15.0, min(timeout, left))
        log = self.out / f"{name}.log"
        t0 = time.monotonic()
        full_env = dict(os.environ, **(env or {}))
        for k, v in (env or {}).items():
            if v is None:
                full_env.pop(k, None)
        try:
            p = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout)
            rc, stdout, stderr = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            # the output so far comes as bytes, text=True or not
            def text(b):
                return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")

            rc, stdout = 124, text(e.stdout)
            stderr = text(e.stderr) + f"\ntimed out after {timeout:.0f}s"
        seconds = time.monotonic() - t0
        log.write_text(f"$ {shlex.join(cmd)}\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- rc {rc}\n")
        step = {"name": name, "cmd": shlex.join(cmd), "rc": rc, "seconds": round(seconds, 1),
                "log": log.name}
        try:
            ok, details = (rc == 0, {}) if judge is None else judge(rc, stdout, stderr)
        except Exception as e:  # noqa: BLE001 - a step whose output cannot be read fails, the run goes on
            ok, details = False, {"unreadable_output": repr(e)}
        step.update(ok=bool(ok), **details)
        self.steps.append(step)
        print(f"[{'PASS' if ok else 'FAIL'}] {name} ({seconds:.0f}s) {json.dumps(details)[:300]}",
              flush=True)
        return step


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    only = ()
    if len(argv) == 3 and argv[1] == "--only":
        only = tuple(p for p in argv[2].split(",") if p)
        argv = argv[:1]
    if len(argv) != 1:
        print("usage: benchmarks/gpu_check.sh OUTDIR [--only PREFIX[,PREFIX...]]",
              file=sys.stderr)
        return 2
    out = Path(argv[0]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    gf = [py, "-m", "graphfeed"]
    try:
        budget = float(os.environ.get(BUDGET_ENV, "540"))
    except ValueError:
        print(f"{BUDGET_ENV} must be a number of seconds", file=sys.stderr)
        return 2
    unknown = [p for p in only if p not in GROUPS and not any(
        g.startswith(p) or p.startswith(g) for steps in GROUPS.values() for g in steps)]
    if unknown:
        print(f"--only: unknown group or step prefix {unknown[0]!r} (groups: "
              f"{', '.join(GROUPS)})", file=sys.stderr)
        return 2
    c = Check(out, py, only, budget)
    t_start = time.monotonic()

    # which test dependencies import (without pytest-timeout the timeout marks are only
    # registered markers; without triton the Triton tests skip), then the GPU, asked first
    # without initialising CUDA
    env_code = "\n".join([
        "import importlib, importlib.metadata, json",
        "def version(name):",
        "    try:",
        "        m = importlib.import_module(name)",
        "    except Exception as e:",
        "        return 'missing (' + type(e).__name__ + ')'",
        "    dist = {'pytest_timeout': 'pytest-timeout', 'yaml': 'PyYAML'}.get(name, name)",
        "    try:",
        "        return importlib.metadata.version(dist)",
        "    except Exception:",
        "        return str(getattr(m, '__version__', 'present'))",
        # asked first, before any other import: graphfeed's own question must leave the driver
        "import torch, graphfeed._cuda as c",
        "n = c.device_count(); init = c.driver_initialized()",
        # then the test dependencies, noting the first whose import initialised the driver
        "packages, started_by = {}, None",
        f"for m in {PYTEST_PACKAGES!r}:",
        "    packages[m] = version(m)",
        "    if started_by is None and not init and c.driver_initialized():",
        "        started_by = m",
        # the fork server's preload in a fresh process: what it left out, and whether it is clean
        "import subprocess, sys",
        "pre = subprocess.run([sys.executable, '-c', 'import graphfeed.distributed._preload as p,"
        " graphfeed._cuda as c; print(p.SKIPPED_FOR_CUDA, p.CUDA_TAINTED_BY, c.driver_initialized())'],"
        " capture_output=True, text=True)",
        "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'gpus': n,"
        " 'driver_initialized_by_asking': init, 'driver_initialized_by_import': started_by,"
        " 'preload': (pre.stdout or pre.stderr).strip()[-300:], 'packages': packages,"
        " 'gpu_name': torch.cuda.get_device_name(0) if n else None}))",
    ])

    def judge_env(rc, so, se):
        info = last_json(so) or {}
        return rc == 0 and info.get("gpus", 0) > 0 and not info.get("driver_initialized_by_asking"), info

    env_step = c.run("env", [py, "-c", env_code], judge=judge_env)
    gpus = int(env_step.get("gpus") or 0)

    def judge_pytest(rc, so, se):
        counts = pytest_counts(so.strip().splitlines()[-1] if so.strip() else "")
        return rc == 0, counts

    pytest = [py, "-m", "pytest", "-q", "--maxfail=25", "-p", "no:cacheprovider"]
    c.run("pytest-cuda", pytest + ["-m", "cuda"], judge=judge_pytest)
    c.run("pytest-all-a", pytest + ["-m", "not cuda", "tests"]
          + [f"--ignore={d}" for d in SUITE_B], judge=judge_pytest)
    c.run("pytest-all-b", pytest + ["-m", "not cuda"] + list(SUITE_B), judge=judge_pytest)

    def judge_bench(rc, so, se):
        r = last_json(so) or {}
        keep = {k: r.get(k) for k in ("mode", "peak_gpu_bytes", "peak_gpu_reserved_bytes", "alloc_conf")}
        for part in ("sample", "sample_fetch"):
            if part in r:
                keep[f"{part}_seeds_per_s"] = round(r[part]["seeds_per_s"])
        return rc == 0 and bool(r), keep

    for mode in MODES:
        for alloc, conf in ALLOC.items():
            c.run(f"bench-{mode}-{alloc}",
                  gf + ["bench", "sample", "--dataset", "medium", "--mode", mode, "--device", "cuda",
                        "--batches", "60", "--json"],
                  env={"PYTORCH_ALLOC_CONF": conf, "PYTORCH_CUDA_ALLOC_CONF": None},
                  judge=judge_bench)

    accs = {}

    def judge_train(mode):
        def judge(rc, so, se):
            r = last_json(so) or {}
            acc = r.get("test_acc")
            accs[mode] = acc
            keep = {"test_acc": acc, "mode": r.get("mode")}
            epochs = r.get("epochs") or []
            if epochs:
                last = epochs[-1]
                keep.update({k: last.get(k) for k in ("seeds_per_s", "peak_gpu_bytes",
                                                      "peak_gpu_reserved_bytes") if k in last})
            ok = rc == 0 and acc is not None and r.get("mode") == mode
            if ok and mode != "cpu-cpu" and accs.get("cpu-cpu") is not None:
                keep["cpu_cpu_test_acc"] = accs["cpu-cpu"]
                ok = abs(acc - accs["cpu-cpu"]) <= ACC_BAND
            return ok, keep

        return judge

    for mode in ("cpu-cpu",) + MODES:
        device = "cpu" if mode == "cpu-cpu" else "cuda"
        c.run(f"train-{mode}", gf + ["train", "--dataset", "medium", "--mode", mode, "--device",
                                     device, "--epochs", "2", "--no-mlp", "--no-progress", "--json"],
              judge=judge_train(mode))

    def judge_frag(rc, so, se):
        path = out / "alloc_fragmentation.json"
        r = json.loads(path.read_text()) if path.exists() else {}
        return rc == 0 and bool(r), {k: {"reserved_over_allocated": round(v["reserved_over_allocated"], 2),
                                         "peak_reserved_mb": round(v["peak_reserved_bytes"] / 1e6),
                                         "peak_allocated_mb": round(v["peak_allocated_bytes"] / 1e6)}
                                     for k, v in r.items()}

    c.run("alloc-fragmentation", [py, "benchmarks/alloc_fragmentation.py", "--dataset", "medium",
                                  "--steps", "300", "--json", str(out / "alloc_fragmentation.json")],
          judge=judge_frag)

    def judge_gpu_sampling(rc, so, se):
        path = out / "gpu_sampling.json"
        r = json.loads(path.read_text()) if path.exists() else {}
        samplers = r.get("samplers", {})
        keep = {name: {k: round(v[k]) for k in ("seeds_per_s", "launches_per_batch",
                                                 "memcpy_calls_per_batch") if k in v}
                for name, v in samplers.items()}
        keep["meets_target"] = {name: samplers.get(name, {}).get("seeds_per_s", 0) >= goal
                                for name, goal in TARGETS.items()}
        keep["gpu_cache"] = {p: {k: round(v[k], 3) for k in ("hit_rate", "speedup_over_uva")}
                             for p, v in r.get("gpu_cache", {}).items() if isinstance(v, dict)}
        launches = [samplers.get(n, {}).get("launches_per_batch") for n in TARGETS]
        # the count proves something only where the profiler saw the Triton kernels themselves
        seen = {n: [k for k in TRITON_KERNELS
                    if not any(g.startswith(k) for g in samplers.get(n, {}).get("gpu_kernels", ()))]
                for n in TARGETS}
        keep["triton_kernels_missing"] = seen
        ok = (rc == 0 and all(x is not None and 0 < x <= MAX_LAUNCHES for x in launches)
              and not any(seen.values()))
        return ok, keep

    c.run("gpu-sampling", [py, "benchmarks/gpu_sampling.py", "--dataset", "medium", "--json",
                           str(out / "gpu_sampling.json")], judge=judge_gpu_sampling)

    def judge_profile(rc, so, se):
        path = out / "gpu_profile.json"
        r = json.loads(path.read_text()) if path.exists() else {}
        keep = {part: {k: v for k, v in (r.get(part) or {}).items()
                       if not isinstance(v, (list, dict))}
                for part in ("train", "loader", "step", "sampler")}
        return rc == 0 and "train" in r, keep

    c.run("profile-cuda-cuda", [py, "benchmarks/gpu_profile.py", "--dataset", "medium", "--json",
                                str(out / "gpu_profile.json")], judge=judge_profile)

    small = ["--dataset", "small", "--epochs", "2", "--no-mlp", "--no-progress"]

    def judge_trained(rc, so, se):
        r = last_json(so) or {}
        return rc == 0 and r.get("test_acc") is not None, {"test_acc": r.get("test_acc"),
                                                           "world_size": r.get("world_size")}

    torchrun = [py, "-m", "torch.distributed.run", "--standalone"]
    if gpus >= 2:
        c.run("multi-process-nccl", gf + ["train", "--nproc", "2", "--device", "cuda", "--json"] + small,
              judge=judge_trained)
        c.run("multi-process-torchrun", torchrun + ["--nproc-per-node", "2", "-m", "graphfeed", "train",
                                                    "--device", "cuda", "--json"] + small,
              judge=judge_trained)
    else:
        def judge_refused(rc, so, se):
            lines = [ln for ln in se.strip().splitlines() if "error" in ln]
            return rc == 2 and any("GPU(s) visible" in ln for ln in lines), {"stderr_tail": se.strip()[-300:]}

        c.run("multi-process-refused", gf + ["train", "--nproc", "2", "--device", "cuda"] + small,
              judge=judge_refused)
        c.run("multi-process-gloo", gf + ["train", "--nproc", "2", "--device", "cuda",
                                          "--dist-backend", "gloo", "--json"] + small,
              judge=judge_trained)
        c.run("multi-process-torchrun-1", torchrun + ["--nproc-per-node", "1", "-m", "graphfeed",
                                                      "train", "--device", "cuda", "--json"] + small,
              judge=judge_trained)

    def judge_method(rc, so, se):
        r = last_json(so) or {}
        keep = {"mode": r.get("mode"), "sampler": r.get("sampler"),
                "ratio_vs_uniform": r.get("ratio_vs_uniform")}
        if "sample" in r:
            keep["seeds_per_s"] = round(r["sample"]["seeds_per_s"])
        return rc == 0 and "sample" in r, keep

    methods = {
        "weighted": ["--sampler", "weighted", "--random-weights"],
        "labor-rotated": ["--sampler", "labor", "--labor-variates", "rotated"],
        "labor-iid": ["--sampler", "labor", "--labor-variates", "iid"],
        "temporal": ["--sampler", "temporal", "--random-times"],
    }
    for mode in GPU_SAMPLING:
        for name, opts in methods.items():
            c.run(f"methods-{mode}-{name}",
                  gf + ["bench", "sample", "--dataset", "medium", "--mode", mode, "--device",
                        "cuda", "--features", "none", "--batches", "20", "--rounds", "1",
                        "--json"] + opts, judge=judge_method)

    task_ref = {}

    def judge_task(ds, mode):
        def judge(rc, so, se):
            r = last_json(so) or {}
            test = r.get("test") or {}
            metric = r.get("main_metric")
            value = r.get("test_acc") if metric == "accuracy" else test.get(metric)
            keep = {"mode": r.get("mode"), "metric": metric, "test": value}
            ok = rc == 0 and value is not None and r.get("mode") == mode
            if mode == "cpu-cpu":
                task_ref[ds] = value
            elif ok and task_ref.get(ds) is not None:
                ref = task_ref[ds]
                keep["cpu_cpu_test"] = ref
                ok = abs(value - ref) <= TASK_BAND if metric == "accuracy" else value >= ref / 2
            return ok, keep

        return judge

    for ds, task in (("hetero", "node"), ("link", "link"), ("hetero-link", "link")):
        for mode in ("cpu-cpu",) + GPU_SAMPLING:
            device = "cpu" if mode == "cpu-cpu" else "cuda"
            c.run(f"task-{ds}-{mode}",
                  gf + ["train", "--dataset", ds, "--task", task, "--mode", mode, "--device",
                        device, "--epochs", "1", "--no-mlp", "--no-progress", "--json"],
                  judge=judge_task(ds, mode))

    c.finish()
    summary = {
        "passed": all(s["ok"] for s in c.steps),
        "seconds": round(time.monotonic() - t_start, 1),
        "gpus": gpus,
        "env": {k: env_step.get(k) for k in ("torch", "cuda", "gpu_name")},
        "steps": c.steps,
    }
    name = "summary.json" if not only else f"summary-{'-'.join(only)}.json"
    (out / name).write_text(json.dumps(summary, indent=1))
    pack_logs(out, [s["log"] for s in c.steps if s.get("log")], "logs" + name[len("summary"):-5])
    print(json.dumps({"passed": summary["passed"], "seconds": summary["seconds"],
                      "failed": [s["name"] for s in c.steps if not s["ok"]]}))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
