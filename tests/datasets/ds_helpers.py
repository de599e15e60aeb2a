from __future__ import annotations

import mmap

import numpy as np

from graphfeed.graph.csc import CSCGraph


def small_arrays(n: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, 40)
    dst = rng.integers(0, n, 40)
    g = CSCGraph.from_edges(src, dst, n, add_reverse=True, drop_self_loops=True, drop_duplicates=True)
    feats = {"feat": rng.standard_normal((n, 5)).astype(np.float32), "label": rng.integers(0, 3, n)}
    perm = rng.permutation(n)
    splits = {"train": perm[:6], "valid": perm[6:8], "test": perm[8:11]}
    return g, feats, splits


def is_memory_mapped(a) -> bool:
    """True when the array's memory comes from a file mapping (walks the ``.base`` chain)."""
    if isinstance(a, np.memmap):
        return True
    b = a
    while b is not None:
        if isinstance(b, (mmap.mmap, np.memmap)):
            return True
        b = getattr(b, "base", None)
    return False


def run_cli(argv, capsys):
    """Run ``graphfeed ARGV`` in-process: ``(exit status, stdout, stderr)``; argparse's exits
    (SystemExit) count as statuses. Any other exception propagates (a traceback is a failure)."""
    from graphfeed.cli.main import main

    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 2
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc, err, *fragments):
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for f in fragments:
        assert f in lines[0], lines[0]


def typed_generic_inputs(tmp_path) -> None:
    """Inputs of a typed ``prepare generic`` in ``tmp_path``: 40 nodes alternating ``paper`` and
    ``author`` (``types.txt``), 100 random edges of relation ``r`` (``edges.csv``, the type in
    column 2) and labels 0..2 on the papers, -1 on the authors (``y.npy``)."""
    import numpy as np

    n = 40
    types = np.where(np.arange(n) % 2 == 0, "paper", "author")
    (tmp_path / "types.txt").write_text("\n".join(types) + "\n")
    rng = np.random.default_rng(1)
    (tmp_path / "edges.csv").write_text(
        "".join(f"{s},{d},r\n" for s, d in rng.integers(0, n, (100, 2))))
    np.save(tmp_path / "y.npy", np.where(types == "paper", rng.integers(0, 3, n), -1))
