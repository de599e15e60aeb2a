"""Issue 41 (6): features that hold only 0 and 1 (bags of words, one-hot codes) are stored as
uint8 by ``prepare`` (a quarter of float32's bytes), said in its summary, and read back as the
same 0/1 values; other floats, and an explicit ``--feature-dtype``, are kept as given."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphfeed.datasets import Dataset
from graphfeed.datasets.importers import SplitRule
from graphfeed.datasets.importers.generic import prepare_generic

N = 50


def _prep(tmp_path, name, feat, **kw):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "edges.npy", rng.integers(0, N, size=(200, 2)))
    np.save(tmp_path / f"{name}.npy", feat)
    labels = rng.integers(0, 3, N)
    np.save(tmp_path / "y.npy", labels)
    np.save(tmp_path / f"{name}2.npy", feat * 0.5)
    rep = prepare_generic(tmp_path / name, edges=tmp_path / "edges.npy", labels=tmp_path / "y.npy",
                          features={"feat": tmp_path / f"{name}.npy",
                                    "x2": tmp_path / f"{name}2.npy"},
                          splits=SplitRule.parse("0.5,0.2,0.2"), **kw)
    return rep, Dataset.open(tmp_path / name)


def test_binary_features_are_stored_as_uint8(tmp_path):
    rng = np.random.default_rng(1)
    words = (rng.random((N, 300)) < 0.05).astype(np.float32)
    rep, ds = _prep(tmp_path, "bow", words)
    assert ds.features["feat"].dtype == torch.uint8  # 0/1 only
    assert ds.features["x2"].dtype == torch.float32  # 0 and 0.5: kept
    assert "feature 'feat' holds only 0 and 1: stored as uint8, 4x smaller" in rep.summary()
    assert "'x2'" not in rep.summary()
    got = ds.features["feat"].read(torch.arange(N))
    np.testing.assert_array_equal(got.to(torch.float32).numpy(), words)
    assert not list((tmp_path / "bow").rglob("*.tmp"))


def test_an_explicit_dtype_and_other_values_are_kept(tmp_path):
    rng = np.random.default_rng(2)
    words = (rng.random((N, 20)) < 0.5).astype(np.float32)
    _, ds = _prep(tmp_path, "kept", words, feature_dtype="float32")
    assert ds.features["feat"].dtype == torch.float32
    counts = rng.integers(0, 3, (N, 20)).astype(np.float32)  # 2 occurs: not binary
    _, ds = _prep(tmp_path, "counts", counts)
    assert ds.features["feat"].dtype == torch.float32


@pytest.mark.parametrize("value", [np.nan, -0.0, 1.0 + 1e-7])
def test_only_exact_zeros_and_ones_are_binary(tmp_path, value):
    feat = np.zeros((N, 4), np.float32)
    feat[3, 2] = value
    _, ds = _prep(tmp_path, "x", feat)
    # -0.0 == 0 is binary (stored as 0, the same value to the model); NaN and 1 + eps are not
    assert (ds.features["feat"].dtype == torch.uint8) == (value == 0)
