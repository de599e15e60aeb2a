"""Bytes ``graphfeed prepare generic`` writes against the size of what it prepares (issue 30, item 7).

Usage::

    python benchmarks/prepare_writes.py WORKDIR [--nodes 1000000] [--edges-per-node 13]
        [--features 100] [--memory-budget 2GiB] [--sha256] [--json OUT]

Writes a synthetic graph (the built-in medium by default) as an edge-list CSV plus .npy
features, labels and splits into WORKDIR (once; reused when present), then runs

    graphfeed prepare generic --edges edges.csv --features feat=feat.npy --labels label.npy
        --train train.npy --valid valid.npy --test test.npy
        --undirected --drop-self-loops --dedupe --num-classes C WORKDIR/out

in this process and reads ``/proc/self/io`` before and after: ``write_bytes`` (bytes this
process sent towards the disk: a page counts each time it is dirtied, so a memory-mapped page
written back and dirtied again counts again) and ``cancelled_write_bytes`` (dirty bytes of
files removed before they reached the disk). Linux only; ``WORKDIR`` must be on a disk-backed
file system (tmpfs accounts no writes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path


def proc_io() -> dict:
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(":") for line in f)}


def make_inputs(work: Path, nodes: int, epn: float, feats: int) -> int:
    import numpy as np

    from graphfeed.datasets.synthetic import SPECS, SyntheticSpec, generate_arrays

    stamp = work / "inputs.json"
    want = {"nodes": nodes, "edges_per_node": epn, "features": feats}
    if stamp.is_file() and json.loads(stamp.read_text()).get("spec") == want:
        return json.loads(stamp.read_text())["classes"]
    medium = SPECS["medium"]
    spec = medium if (nodes, epn, feats) == (medium.num_nodes, medium.edges_per_node,
                                             medium.num_features) else \
        SyntheticSpec("writes", nodes, epn, feats, 16, seed=13)
    a = generate_arrays(spec)
    work.mkdir(parents=True, exist_ok=True)
    np.savetxt(work / "edges.csv", np.stack([a.src, a.dst], 1), fmt="%d", delimiter=",",
               header="src,dst", comments="")
    np.save(work / "feat.npy", a.features)
    np.save(work / "label.npy", a.labels)
    for k, v in a.splits.items():
        np.save(work / f"{k}.npy", v)
    stamp.write_text(json.dumps({"spec": want, "classes": spec.num_classes,
                                 "one_way_edges": int(a.src.shape[0])}))
    return spec.num_classes


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("work", type=Path)
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--edges-per-node", type=float, default=13.0)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--memory-budget", default=None)
    p.add_argument("--sha256", action="store_true", help="print the sha256 of every output file")
    p.add_argument("--slow-pass2", type=float, default=0.0, metavar="SECONDS",
                   help="sleep this long before placing each chunk of edges (pass 2), so the "
                        "pass outlasts the kernel's dirty-page expiry (vm.dirty_expire_centisecs, "
                        "30 s by default), as a long pass 2 on a big graph does")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    classes = make_inputs(a.work, a.nodes, a.edges_per_node, a.features)
    w = a.work
    out = w / "out"
    argv = ["prepare", "generic", "--edges", str(w / "edges.csv"), "--features",
            f"feat={w / 'feat.npy'}", "--labels", str(w / "label.npy"),
            "--train", str(w / "train.npy"), "--valid", str(w / "valid.npy"),
            "--test", str(w / "test.npy"), "--undirected", "--drop-self-loops", "--dedupe",
            "--num-classes", str(classes), "--overwrite", "--no-progress", str(out)]
    if a.memory_budget:
        argv[2:2] = ["--memory-budget", a.memory_budget]
    from graphfeed.cli.main import main as cli

    if a.slow_pass2:  # patched here, as tests/datasets/slow_prepare.py does: no hook in the product
        import time

        from graphfeed.graph import _kernels

        kernel = _kernels.scatter_window

        def slowed(*args):
            time.sleep(a.slow_pass2)
            return kernel(*args)

        _kernels.scatter_window = slowed

    before = proc_io()
    rc = cli(argv)
    after = proc_io()
    if rc:
        return rc
    files = sorted(q for q in out.rglob("*") if q.is_file())
    size = sum(q.stat().st_size for q in files)
    d = {k: after[k] - before[k] for k in after}
    res = {
        "dataset_bytes": size,
        "input_bytes": sum((w / n).stat().st_size for n in ("edges.csv", "feat.npy")),
        "write_bytes": d["write_bytes"],
        "cancelled_write_bytes": d["cancelled_write_bytes"],
        "net_write_bytes": d["write_bytes"] - d["cancelled_write_bytes"],
        "wchar": d["wchar"],
        "write_ratio": round(d["write_bytes"] / size, 3),
    }
    if a.sha256:
        res["sha256"] = {str(q.relative_to(out)): hashlib.sha256(q.read_bytes()).hexdigest()
                         for q in files}
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        a.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
