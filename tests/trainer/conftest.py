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


def build(tmp_path_factory, name: str, *, seed: int, labels, degree: int, same: float, features,
          num_classes: int):
    """A prepared dataset: ``labels(rng)`` -> y, a homophilous graph, ``features(rng, y)`` -> x."""
    rng = np.random.default_rng(seed)
    y = labels(rng)
    g = homophilous_graph(y, degree, same, rng)
    x = features(rng, y)
    return write(tmp_path_factory.mktemp(name) / name, g, x, y, num_classes, rng)


def _normal(dim: int):
    return lambda rng, y: rng.normal(size=(y.shape[0], dim)).astype(np.float32)


@pytest.fixture(scope="session")
def binary_dataset(tmp_path_factory):
    """2,000 nodes, 20% positive; the label is in the neighbourhood (homophily 0.9), the node's
    own features carry only a weak hint."""
    def features(rng, y):
        x = _normal(8)(rng, y)
        x[:, 0] += 0.3 * y
        return x

    return build(tmp_path_factory, "binary", seed=5, degree=6, same=0.9, num_classes=2,
                 labels=lambda rng: (rng.random(2000) < 0.2).astype(np.int64), features=features)


@pytest.fixture(scope="session")
def noise_dataset(tmp_path_factory):
    """90/10 labels, random edges, noise features: nothing to learn."""
    return build(tmp_path_factory, "noise", seed=6, degree=6, same=0.0, num_classes=2,
                 labels=lambda rng: (rng.random(2000) < 0.1).astype(np.int64), features=_normal(8))


@pytest.fixture(scope="session")
def nan_dataset(tmp_path_factory):
    def features(rng, y):
        x = _normal(4)(rng, y)
        x[::7, 1] = np.nan
        return x

    return build(tmp_path_factory, "nanfeat", seed=7, degree=4, same=0.5, num_classes=3,
                 labels=lambda rng: rng.integers(0, 3, size=500), features=features)


@pytest.fixture(scope="session")
def uint8_dataset(tmp_path_factory):
    """Bag-of-words style 0/1 uint8 features (as a text importer stores them)."""
    def features(rng, y):
        x = (rng.random((y.shape[0], 24)) < 0.1).astype(np.uint8)
        x[np.arange(y.shape[0]), y] = 1
        return x

    return build(tmp_path_factory, "uint8", seed=8, degree=5, same=0.85, num_classes=4,
                 labels=lambda rng: rng.integers(0, 4, size=1500), features=features)


@pytest.fixture(autouse=True)
def _same_run_on_every_machine(request):
    """These tests check the trainer's behaviour on CPU, also where a GPU is visible; those
    marked ``cuda`` are the exception: they run on the GPU they ask for."""
    if request.node.get_closest_marker("cuda") is None:
        request.getfixturevalue("cpu_only")


@pytest.fixture(scope="session")
def small_link_dataset(tmp_path_factory):
    """A 2,000-node version of the built-in link dataset (communities, 85/5/10 edge split):
    a few seconds an epoch, for checkpoint tests."""
    from graphfeed.datasets.link import build_synthetic
    from graphfeed.datasets.synthetic import SyntheticSpec, generate_arrays

    spec = SyntheticSpec("link-small", 2_000, 6.0, 16, 20, homophily=0.95, signal=1.0,
                         train_fraction=0.85, valid_fraction=0.05, test_fraction=0.10, seed=3,
                         task="link")
    return str(build_synthetic(spec, generate_arrays(spec),
                               tmp_path_factory.mktemp("link-small") / "link-small"))


@pytest.fixture(scope="session")
def small_hetero_dataset(tmp_path_factory):
    """A 2,040-node version of the built-in heterogeneous dataset (papers, authors, fields)."""
    from graphfeed.datasets import synthetic_hetero as sh

    spec = sh.HeteroSyntheticSpec("hetero-small", 1_500, 500, 40, 4)
    return str(sh.build(tmp_path_factory.mktemp("hetero-small") / "hetero-small", spec))
