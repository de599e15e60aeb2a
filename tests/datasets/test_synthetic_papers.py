"""The papers-sized generator (``graphfeed.datasets.synthetic_papers``), at small scales: the
graph law it promises (sizes, power-law degrees with in ~ out, homophily, sorted distinct
columns without self loops), the permutation it rests on, determinism across threads and
chunk sizes, and ``graphfeed prepare synthetic``."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest

from graphfeed.datasets import _papers_kernels as K
from graphfeed.datasets import synthetic_papers as P
from graphfeed.datasets.format import Dataset
from graphfeed.errors import DatasetError, GraphfeedError

SCALE = 0.0005  # 55,530 nodes, about 808k edges: well under a second


@pytest.fixture(scope="module")
def papers(tmp_path_factory):
    path = tmp_path_factory.mktemp("papers") / "p"
    P.build(path, scale=SCALE, threads=2)
    return Dataset.open(path)


def _csc(ds):
    ip = np.asarray(ds.graph.indptr)
    idx = np.asarray(ds.graph.indices).astype(np.int64)
    dst = np.repeat(np.arange(ip.shape[0] - 1), np.diff(ip))
    return ip, idx, dst


def _digest(path) -> str:
    h = hashlib.sha256()
    for rel in ("graph/indptr.npy", "graph/indices.npy", "node_features/feat.npy",
                "node_features/label.npy", "splits/train.npy", "splits/valid.npy", "splits/test.npy"):
        h.update((path / rel).read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 1000, 4097, 65536, 111_059])
def test_permutation_is_a_bijection_and_unpermute_inverts_it(n):
    spec = P.SPEC.scaled(min(1.0, max(n, 688) / P.SPEC.num_nodes))
    law = P._Law.of(spec)
    bits = max(2, int(n - 1).bit_length())
    bits += bits & 1
    half = np.uint64(bits // 2)
    mask = np.uint64((1 << (bits // 2)) - 1)
    out = np.empty(n, dtype=np.int64)
    K.permute_range(0, n, n, law.keys, half, mask, out)
    assert np.array_equal(np.sort(out), np.arange(n))
    back = [int(K.unpermute(np.uint64(v), np.uint64(n), law.keys, half, mask)) for v in out[:200]]
    assert back == list(range(min(n, 200)))
    if n >= 1000:  # a shuffle, not the identity or a near-identity
        assert np.mean(out == np.arange(n)) < 0.01


def test_sizes_follow_the_scale(papers):
    spec = P.SPEC.scaled(SCALE)
    assert papers.num_nodes == spec.num_nodes == round(P.SPEC.num_nodes * SCALE)
    assert abs(papers.num_edges / spec.num_edges - 1) < 0.01  # expected degrees, rounded by coin
    assert papers.num_classes == 172
    assert papers.features["feat"].shape == (spec.num_nodes, 128)
    assert str(papers.features["feat"].dtype) == "torch.bfloat16"
    assert [papers.split(k).shape[0] for k in ("train", "valid", "test")] == \
        [spec.num_train, spec.num_valid, spec.num_test]
    ids = np.concatenate([papers.split(k) for k in ("train", "valid", "test")])
    assert np.unique(ids).shape[0] == ids.shape[0]  # disjoint (validation checks it too)


def test_full_size_spec_is_papers100m():
    s = P.SPEC
    assert (s.num_nodes, s.num_features, s.num_classes) == (111_059_956, 128, 172)
    assert (s.num_train, s.num_valid, s.num_test) == (1_207_179, 125_265, 214_338)
    assert s.num_edges >= 1_600_000_000
    assert 36e9 < s.dataset_bytes < 37e9  # 6.5 GB of int32 indices, 28.4 GB of bfloat16 rows


def test_columns_are_sorted_distinct_and_free_of_self_loops(papers):
    ip, idx, dst = _csc(papers)
    same_col = dst[1:] == dst[:-1]
    assert np.all(idx[1:][same_col] > idx[:-1][same_col])  # strictly increasing: sorted, distinct
    assert not np.any(idx == dst)
    assert idx.min() >= 0 and idx.max() < papers.num_nodes


def test_degrees_are_heavy_tailed_and_in_follows_out(papers):
    ip, idx, _ = _csc(papers)
    indeg = np.diff(ip)
    outdeg = np.bincount(idx, minlength=indeg.shape[0])
    assert indeg.max() > 10 * np.median(indeg)  # hubs far above the typical node (more at full size)
    assert np.corrcoef(indeg, outdeg)[0, 1] > 0.9  # one popularity drives both
    # the busiest 14% of nodes are the source of most sampled edges (what a cache holds)
    top = np.argsort(-indeg)[: int(0.14 * indeg.shape[0])]
    hot = np.zeros(indeg.shape[0], bool)
    hot[top] = True
    assert hot[idx].mean() > 0.25  # uniform sources would give 0.14 (about 0.75 at full size)


def test_homophily_and_class_sizes(papers):
    _, idx, dst = _csc(papers)
    y = np.asarray(papers.labels)
    same = (y[idx] == y[dst]).mean()
    # homophily 0.6 plus the chance that a draw of any class lands in the destination's
    expected = 0.6 + 0.4 * float(((np.bincount(y) / y.shape[0]) ** 2).sum())
    assert abs(same - expected) < 0.01
    sizes = np.bincount(y, minlength=172)
    assert sizes.min() >= 2 and np.all(np.diff(sizes) <= 1)  # shares fall with the class id


def test_features_hold_the_class_centroid_under_unit_noise(papers):
    import torch

    y = np.asarray(papers.labels)
    x = papers.features["feat"].read(torch.arange(papers.num_nodes)).float().numpy()
    centroids = np.random.default_rng(P.SPEC.seed + 1).standard_normal((172, 128))
    resid = x - P.SPEC.signal * centroids[y]
    assert abs(resid.mean()) < 0.01
    assert abs(resid.std() - 1.0) < 0.02  # Irwin-Hall(4), rescaled to unit variance
    big = np.bincount(y).argmax()
    mean = x[y == big].mean(axis=0)
    assert np.corrcoef(mean, centroids[big])[0, 1] > 0.95


def test_draw_rank_follows_the_popularity_law():
    """Chi-square of 200k draws over 10 rank bins against the law's masses."""
    from scipy.stats import chisquare

    m, r0, beta = 5000, 100.0, 1.0
    g0 = float(K._g(r0, beta))
    gspan = float(K._g(m + r0, beta)) - g0
    u = (np.arange(200_000) + 0.5) / 200_000
    rng = np.random.default_rng(3)
    u = rng.random(200_000)
    ranks = np.array([K.draw_rank(x, m, r0, beta, g0, gspan) for x in u])
    edges = np.array([0, 10, 30, 100, 200, 400, 800, 1500, 2500, 3800, m])
    counts = np.histogram(ranks, bins=edges)[0]
    mass = np.array([(K._g(b + r0, beta) - K._g(a + r0, beta)) / gspan
                     for a, b in zip(edges[:-1], edges[1:])])
    assert chisquare(counts, mass * u.shape[0]).pvalue > 1e-3
    # the same for beta != 1 (the power branch of the inverse)
    beta = 0.8
    g0 = float(K._g(r0, beta))
    gspan = float(K._g(m + r0, beta)) - g0
    ranks = np.array([K.draw_rank(x, m, r0, beta, g0, gspan) for x in u])
    counts = np.histogram(ranks, bins=edges)[0]
    mass = np.array([(K._g(b + r0, beta) - K._g(a + r0, beta)) / gspan
                     for a, b in zip(edges[:-1], edges[1:])])
    assert chisquare(counts, mass * u.shape[0]).pvalue > 1e-3


def test_output_is_the_same_whatever_the_threads_and_chunk_sizes(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    P.build(a, scale=SCALE / 4, threads=1)
    monkeypatch.setattr(P, "EDGES_PER_STEP", 4099)  # many small, uneven steps
    monkeypatch.setattr(P, "ROWS_PER_STEP", 777)
    P.build(b, scale=SCALE / 4, threads=3)
    assert _digest(a) == _digest(b)


def test_refuses_a_disk_without_room_before_writing(tmp_path, monkeypatch):
    import os

    real = os.statvfs

    class Full:
        def __init__(self, st):
            self.f_bavail, self.f_frsize = 10, st.f_frsize

    monkeypatch.setattr(os, "statvfs", lambda p: Full(real(p)))
    with pytest.raises(DatasetError, match="on disk"):
        P.build(tmp_path / "p", scale=SCALE)
    assert not (tmp_path / "p").exists()


def test_scale_is_checked():
    with pytest.raises(GraphfeedError, match="scale"):
        P.SPEC.scaled(0)
    with pytest.raises(GraphfeedError, match="scale"):
        P.SPEC.scaled(1.5)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "graphfeed", *args], capture_output=True,
                          text=True, timeout=300)


def test_prepare_synthetic_cli(tmp_path):
    out = tmp_path / "p"
    r = _cli("prepare", "synthetic", "papers", str(out), "--scale", str(SCALE / 4))
    assert r.returncode == 0, r.stderr
    assert "(generated), 172 classes" in r.stdout and "peak RSS" in r.stdout
    ds = Dataset.open(out)
    assert ds.num_nodes == P.SPEC.scaled(SCALE / 4).num_nodes
    again = _cli("prepare", "synthetic", "papers", str(out), "--scale", str(SCALE / 4))
    assert again.returncode == 2 and "already exists" in again.stderr
    tiny = _cli("prepare", "synthetic", "tiny", str(tmp_path / "t"), "--scale", "0.5")
    assert tiny.returncode == 0 and Dataset.open(tmp_path / "t").num_nodes == 1500
    hetero = _cli("prepare", "synthetic", "hetero", str(tmp_path / "h"), "--scale", "0.5")
    assert hetero.returncode == 2 and "cannot be scaled" in hetero.stderr
    assert not (tmp_path / "h").exists()
    bad = _cli("prepare", "synthetic", "papers", str(tmp_path / "x"), "--scale", "0")
    assert bad.returncode == 2 and "(0, 1]" in bad.stderr
    unknown = _cli("prepare", "synthetic", "nope", str(tmp_path / "y"))
    assert unknown.returncode == 2 and "papers" in unknown.stderr


def test_inspect_takes_a_builtin_name(tmp_path):
    r = _cli("inspect", "tiny", "--data-root", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    import json

    assert json.loads(r.stdout)["num_nodes"] == 3000
