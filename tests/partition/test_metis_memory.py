"""Issue 30, item 2: the METIS path's memory. The symmetrised CSR is built without scipy's
copies (the same graph as ``A + A^T`` without the diagonal), and a partition whose estimated
peak exceeds the available memory is refused in one line before any work (and again, with the
exact entries, before METIS runs)."""

from __future__ import annotations

import numpy as np
import pytest

from graphfeed.errors import GraphfeedError
from graphfeed.graph.csc import CSCGraph
from graphfeed.partition import partitioner as P


def _scipy_reference(g):
    """What the METIS path built before: ``A + A^T`` through scipy, diagonal dropped, rows
    sorted."""
    import scipy.sparse as sp

    n = g.num_nodes
    indices = np.asarray(g.indices)
    a = sp.csr_matrix((np.ones(indices.shape[0], np.int8), indices,
                       np.asarray(g.indptr, np.int64)), shape=(n, n))
    a = (a + a.T).tocsr()
    a.setdiag(0)
    a.eliminate_zeros()
    a.sort_indices()
    return a.indptr.astype(np.int64), a.indices.astype(np.int64)


def _csc(indptr, indices):
    return CSCGraph(np.asarray(indptr, np.int64), np.asarray(indices, np.int32))


def _cases(tiny_dataset):
    rng = np.random.default_rng(5)
    n = 40
    dst = np.sort(rng.integers(0, n, 300))
    src = rng.integers(0, n, 300)  # self loops, repeats, one direction only, isolated nodes
    src[:20] = dst[:20]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
    return {
        "tiny": tiny_dataset.graph,
        "messy": _csc(indptr, src),
        "no edges": _csc(np.zeros(6), np.empty(0)),
        "self loops only": _csc([0, 1, 3, 3], [0, 1, 1]),
    }


def test_symmetrised_is_a_plus_a_transpose_without_the_diagonal(tiny_dataset):
    pytest.importorskip("scipy")
    for name, g in _cases(tiny_dataset).items():
        xadj, adjncy = P.symmetrised(g)
        want_ptr, want_ind = _scipy_reference(g)
        np.testing.assert_array_equal(xadj, want_ptr, err_msg=name)
        np.testing.assert_array_equal(adjncy, want_ind, err_msg=name)
        assert xadj.dtype == adjncy.dtype == np.int64
        assert adjncy.flags.c_contiguous and adjncy.flags.owndata  # pymetis takes it as is


def test_the_estimate_takes_the_larger_phase():
    n, e = 1_000, 100_000
    build = 16 * (n + 1) + 16 * e
    run = 8 * (n + 1) + 8 * e + 32 * n + P.METIS_BYTES_PER_ENTRY * e + P.METIS_BYTES_PER_NODE * n
    assert P.metis_memory(n, e) == max(build, run)
    # entries unknown: E, the fewest; a graph stored one way only symmetrises to 2 E
    assert P.metis_memory(n, e, 2 * e) > P.metis_memory(n, e)
    # no edges: METIS's per-node share and the arrays of N
    assert P.metis_memory(n, 0) >= 32 * n
    # once the CSR is built, only the run is ahead (many repeats: the build was the larger)
    assert P.metis_memory(n, e, 10, built=True) == 8 * (n + 1) + 8 * 10 + 32 * n \
        + P.METIS_BYTES_PER_ENTRY * 10 + P.METIS_BYTES_PER_NODE * n < P.metis_memory(n, e, 10)


def test_the_refusal_says_the_estimate_what_is_available_and_the_ways_out():
    need = P.metis_memory(10**8, 2 * 10**9)
    with pytest.raises(GraphfeedError) as e:
        P.check_metis_memory(10**8, 2 * 10**9, available=7 * 10**9)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"{need / 1e9:.0f} GB" in msg and "7.0 GB is available" in msg
    assert "--method random" in msg and "more memory" in msg
    assert P.check_metis_memory(10, 20, available=10**9) == P.metis_memory(10, 20)
    # what the path already holds counts as available to it
    n, e = 1_000, 10_000
    need = P.metis_memory(n, e, 2 * e, built=True)
    P.check_metis_memory(n, e, 2 * e, held=need - 1, available=1)
    with pytest.raises(GraphfeedError):
        P.check_metis_memory(n, e, 2 * e, held=need - 2, available=1)


def _no_work(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("work started")

    monkeypatch.setattr(P, "symmetrised", boom)


def test_assign_parts_refuses_before_any_work(tiny_dataset, monkeypatch):
    pytest.importorskip("pymetis")
    import graphfeed._memory as H

    need = P.metis_memory(tiny_dataset.num_nodes, tiny_dataset.num_edges)
    monkeypatch.setattr(H, "host_memory", lambda: (need, need - 1))
    _no_work(monkeypatch)
    with pytest.raises(GraphfeedError, match="needs about .* --method random"):
        P.assign_parts(tiny_dataset, 2, "metis")
    P.assign_parts(tiny_dataset, 2, "random")  # random never asks


def test_the_exact_entries_are_checked_before_metis_runs(monkeypatch):
    """A graph stored one way only symmetrises to 2 E entries: the check before any work
    passes (it assumes E), the one with the exact entries refuses, METIS is not called."""
    pymetis = pytest.importorskip("pymetis")
    import graphfeed._memory as H

    n = 2_000
    dst = np.arange(1, n)
    g = _csc(np.concatenate([[0, 0], np.cumsum(np.ones(n - 1, np.int64))]), dst - 1)  # a path
    e = g.num_edges

    class D:
        graph, num_nodes, train_ids = g, n, np.arange(10)

    low, exact = P.metis_memory(n, e), P.metis_memory(n, e, 2 * e)
    assert low < exact
    held = 8 * (n + 1) + 8 * 2 * e
    monkeypatch.setattr(H, "host_memory", lambda: (exact, exact - held - 1))
    monkeypatch.setattr(pymetis, "part_graph", lambda *a, **k: pytest.fail("METIS ran"))
    with pytest.raises(GraphfeedError, match=f"{2 * e:,} symmetrised entries"):
        P.assign_parts(D(), 2, "metis")


def test_the_cli_refuses_in_one_line_and_writes_nothing(tiny_dataset, tmp_path, capsys,
                                                        monkeypatch):
    pytest.importorskip("pymetis")
    import graphfeed._memory as H
    from graphfeed.cli.main import main

    monkeypatch.setattr(H, "host_memory", lambda: (10**6, 10**5))
    _no_work(monkeypatch)
    out = tmp_path / "p"
    assert main(["partition", str(tiny_dataset.path), str(out), "--parts", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "needs about" in err and "100 kB is available" in err and "--method random" in err
    assert not out.exists()


def test_metis_still_partitions(tiny_dataset):
    pytest.importorskip("pymetis")
    part_of = P.assign_parts(tiny_dataset, 4, "metis", seed=3)
    assert part_of.shape == (tiny_dataset.num_nodes,)
    assert np.bincount(part_of).max() / np.bincount(part_of).mean() < 1.1
    np.testing.assert_array_equal(part_of, P.assign_parts(tiny_dataset, 4, "metis", seed=3))
