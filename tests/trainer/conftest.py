"""Small prepared datasets built for one property each (imbalanced binary, no signal, NaN, uint8)."""

from __future__ import annotations

import numpy as np
import pytest


def homophilous_graph(labels: np.ndarray, degree: int, same: float, rng):
    """Each node gets ``degree`` in-neighbours, of its own class with probability ``same``."""
    from graphfeed.graph.csc import CSCGraph

    n = labels.shape[0]
    by_class = {c: np.flatnonzero(labels == c) for c in np.unique(labels)}
    dst = np.repeat(np.arange(n), degree)
    src = rng.integers(0, n, size=dst.shape[0])
    keep = rng.random(dst.shape[0]) < same
    for c, members in by_class.items():
        m = keep & (labels[dst] == c)
        src[m] = members[rng.integers(0, members.shape[0], size=int(m.sum()))]
    return CSCGraph.from_edges(src, dst, n, add_reverse=True, drop_self_loops=True, drop_duplicates=True)


def write(path, graph, feat, labels, num_classes, rng):
    from graphfeed.datasets import write_dataset

    n = labels.shape[0]
    perm = rng.permutation(n)
    a, b = int(0.5 * n), int(0.7 * n)
    return write_dataset(path, graph=graph, node_features={"feat": feat, "label": labels},
                         splits={"train": perm[:a], "valid": perm[a:b], "test": perm[b:]},
                         num_classes=num_classes)


@pytest.fixture(scope="session")
def binary_dataset(tmp_path_factory):
    """2,000 nodes, 20% positive; the label is in the neighbourhood (homophily 0.9), the node's
    own features carry only a weak hint."""
    rng = np.random.default_rng(5)
    n = 2000
    y = (rng.random(n) < 0.2).astype(np.int64)
    g = homophilous_graph(y, 6, 0.9, rng)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    x[:, 0] += 0.3 * y
    return write(tmp_path_factory.mktemp("bin") / "binary", g, x, y, 2, rng)


@pytest.fixture(scope="session")
def noise_dataset(tmp_path_factory):
    """90/10 labels, random edges, noise features: nothing to learn."""
    rng = np.random.default_rng(6)
    n = 2000
    y = (rng.random(n) < 0.1).astype(np.int64)
    g = homophilous_graph(y, 6, 0.0, rng)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    return write(tmp_path_factory.mktemp("noise") / "noise", g, x, y, 2, rng)


@pytest.fixture(scope="session")
def nan_dataset(tmp_path_factory):
    rng = np.random.default_rng(7)
    n = 500
    y = rng.integers(0, 3, size=n)
    g = homophilous_graph(y, 4, 0.5, rng)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    x[::7, 1] = np.nan
    return write(tmp_path_factory.mktemp("nan") / "nanfeat", g, x, y, 3, rng)


@pytest.fixture(scope="session")
def uint8_dataset(tmp_path_factory):
    """Bag-of-words style 0/1 uint8 features (as a text importer stores them)."""
    rng = np.random.default_rng(8)
    n = 1500
    y = rng.integers(0, 4, size=n)
    g = homophilous_graph(y, 5, 0.85, rng)
    x = (rng.random((n, 24)) < 0.1).astype(np.uint8)
    x[np.arange(n), y] = 1
    return write(tmp_path_factory.mktemp("u8") / "uint8", g, x, y, 4, rng)


@pytest.fixture(autouse=True)
def _same_run_on_every_machine(cpu_only):
    """These tests check the trainer's behaviour on CPU, also where a GPU is visible."""
