"""Chi-square tests that both samplers draw uniformly.

Graphs here have D destinations that share the same n in-neighbours, so one batch gives D
independent draws (each destination has its own random stream). Without replacement the test is
over all C(n, k) subsets; with replacement over ordered draws or per-neighbour counts. Seeds are
fixed, so the tests are deterministic; the threshold p > 1e-4 is loose enough that a correct
sampler passes by a wide margin, while a biased one (e.g. with-replacement-then-dedupe, modulo
bias on small degrees, a stream reused between destinations) fails.
"""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest
from scipy.stats import chisquare

from graphfeed.graph.csc import CSCGraph
from graphfeed.sampling import torch_sampler
from graphfeed.sampling.neighbor import NeighborSampler
from graphfeed.sampling.torch_sampler import TorchNeighborSampler

P_MIN = 1e-4


def fan_graph(num_dst: int, n: int) -> CSCGraph:
    """Destinations 0..D-1, each with in-neighbours D..D+n-1 in that order."""
    dst = np.repeat(np.arange(num_dst), n)
    src = np.tile(np.arange(num_dst, num_dst + n), num_dst)
    return CSCGraph.from_edges(src, dst, num_dst + n)


def positions(mb, graph, k):
    """(D, k) neighbour positions (0..n-1) drawn per destination, in sampled order."""
    b = mb.blocks[-1]
    eids = b.edge_ids.cpu().numpy()
    dst = b.src_nodes.cpu().numpy()[b.edge_index[1].cpu().numpy()]
    pos = eids - graph.indptr[dst]
    order = np.argsort(b.edge_index[1].cpu().numpy(), kind="stable")
    return pos[order].reshape(-1, k)


def make(kind, graph, k, replace, seed):
    if kind == "numba":
        return NeighborSampler(graph, [k], replace=replace, seed=seed, return_edge_ids=True)
    return TorchNeighborSampler.from_graph(
        graph, [k], replace=replace, seed=seed, return_edge_ids=True
    )


def draws(kind, n, k, replace, total, seed=0):
    num_dst = min(total, 5000)
    g = fan_graph(num_dst, n)
    s = make(kind, g, k, replace, seed)
    out = []
    for bi in range(-(-total // num_dst)):
        out.append(positions(s.sample(np.arange(num_dst), batch_index=bi), g, k))
    return np.concatenate(out)[:total]


def subset_pvalue(pos, n, k):
    assert np.all(np.sort(pos, 1)[:, 1:] != np.sort(pos, 1)[:, :-1]), "repeated neighbour"
    cell = {c: i for i, c in enumerate(itertools.combinations(range(n), k))}
    idx = np.array([cell[tuple(sorted(r))] for r in pos.tolist()])
    counts = np.bincount(idx, minlength=comb(n, k))
    return chisquare(counts).pvalue


# (n, k, draws): covers the numba paths (bit-mask Floyd, its complement form, Floyd with a
# linear scan for n > 64, sparse Fisher-Yates for k > 32) and torch's vectorised Floyd.
SUBSET_CASES = [(6, 2, 3000), (6, 4, 3000), (7, 3, 7000), (65, 2, 42000), (66, 65, 3300)]


# torch has a single vectorised Floyd path, so its large-n cases add nothing but run time;
# (66, 65) goes through its complement logic and stays
_SUBSET_PARAMS = [("numba", *c) for c in SUBSET_CASES] + [
    ("torch", n, k, min(t, 10000)) for n, k, t in SUBSET_CASES if comb(n, k) <= min(t, 10000) / 5
]


@pytest.mark.parametrize("kind, n, k, total", _SUBSET_PARAMS)
def test_without_replacement_uniform_over_subsets(kind, n, k, total):
    pos = draws(kind, n, k, False, total)
    assert subset_pvalue(pos, n, k) > P_MIN


def test_torch_sort_path_uniform_over_subsets(monkeypatch):
    monkeypatch.setattr(torch_sampler, "FLOYD_MAX_K", 0)  # force the segmented-sort path
    for n, k in [(6, 2), (6, 4)]:
        assert subset_pvalue(draws("torch", n, k, False, 3000), n, k) > P_MIN


@pytest.mark.parametrize("kind", ["numba", "torch"])
def test_without_replacement_large_k_marginals(kind):
    # k > 32 and n > 64: numba's sparse Fisher-Yates, torch's segmented sort. Each neighbour
    # is included with probability k / n (inclusion counts vary less than a multinomial's, so
    # the chi-square test is conservative here).
    n, k = 200, 40
    pos = draws(kind, n, k, False, 2000)
    assert np.all(np.diff(np.sort(pos, 1), axis=1) > 0)
    assert chisquare(np.bincount(pos.ravel(), minlength=n)).pvalue > P_MIN


@pytest.mark.parametrize("kind", ["numba", "torch"])
def test_with_replacement_ordered_pairs_iid(kind):
    n, k = 6, 2
    pos = draws(kind, n, k, True, 3600)
    counts = np.bincount(pos[:, 0] * n + pos[:, 1], minlength=n * n)
    assert counts[np.arange(n) * (n + 1)].sum() > 0  # repeats happen
    assert chisquare(counts).pvalue > P_MIN


@pytest.mark.parametrize("kind", ["numba", "torch"])
@pytest.mark.parametrize("n", [3, 70, 1000])
def test_with_replacement_per_neighbour_counts(kind, n):
    k = 5
    pos = draws(kind, n, k, True, max(2000, 30 * n // k))
    assert chisquare(np.bincount(pos.ravel(), minlength=n)).pvalue > P_MIN


def test_numba_uniform_across_batches_for_one_seed():
    # One destination, the randomness coming from batch_index only.
    n, k = 6, 2
    g = fan_graph(1, n)
    s = NeighborSampler(g, [k], seed=123, return_edge_ids=True)
    pos = np.concatenate([positions(s.sample([0], batch_index=i), g, k) for i in range(1500)])
    assert subset_pvalue(pos, n, k) > P_MIN


def test_different_destinations_get_independent_draws():
    # Pairs (dest 2i, dest 2i+1) in the same batch: their joint distribution is uniform over
    # 15 x 15 cells (a stream shared or correlated between neighbours in the batch would fail).
    n, k = 6, 2
    pos = draws("numba", n, k, False, 9000)
    cell = {c: i for i, c in enumerate(itertools.combinations(range(n), k))}
    idx = np.array([cell[tuple(sorted(r))] for r in pos.tolist()])
    joint = idx[0::2] * 15 + idx[1::2]
    assert chisquare(np.bincount(joint, minlength=225)).pvalue > P_MIN
