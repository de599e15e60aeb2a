"""bfloat16 features through a partition: ``partition_dataset`` keeps their bits (the book says
``"bfloat16"``, each part holds uint16 bits as a dataset does) and ``DistFeature`` reads them
back as ``torch.bfloat16``, equal to the dataset's own rows. It once assigned every node to a
part, wrote every part and then refused the book it had written."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphfeed.datasets._readers import EdgeSource
from graphfeed.datasets.format import Dataset
from graphfeed.datasets.importers import prepare
from graphfeed.errors import DatasetError
from graphfeed.partition import partition_dataset
from graphfeed.partition.book import load_part
from graphfeed.partition.dist import DistFeature, Exchange

N = 400


@pytest.fixture(scope="module")
def bf16(tmp_path_factory):
    d = tmp_path_factory.mktemp("bf16")
    rng = np.random.default_rng(0)
    prepare(d / "ds", edges=EdgeSource(arrays=(rng.integers(0, N, 3000),
                                               rng.integers(0, N, 3000))),
            features={"feat": rng.standard_normal((N, 6))}, labels=rng.integers(0, 3, N),
            splits={"train": np.arange(200), "valid": np.arange(200, 300),
                    "test": np.arange(300, 400)},
            feature_dtype="bfloat16")
    return Dataset.open(d / "ds"), d


def test_each_part_holds_the_datasets_bfloat16_bits(bf16):
    ds, d = bf16
    book = partition_dataset(ds, d / "two", 2, method="random", seed=1)
    assert book.features["feat"]["dtype"] == "bfloat16"
    bits = np.asarray(ds.arrays.node_features["feat"])
    assert bits.dtype == np.uint16
    orig = book.orig_ids()
    for k in range(2):
        part = load_part(book, k)
        rows = part.features["feat"]
        assert rows.dtype == np.uint16
        np.testing.assert_array_equal(rows, bits[orig[part.lo:part.hi]])


def test_dist_feature_reads_bfloat16_rows(bf16):
    ds, d = bf16
    book = partition_dataset(ds, d / "one", 1, method="random")
    f = DistFeature(load_part(book, 0), "feat", Exchange())
    assert f.dtype == torch.bfloat16
    want = ds.node_feature("feat").read(torch.arange(N))
    assert want.dtype == torch.bfloat16
    ids = torch.from_numpy(np.random.default_rng(2).integers(0, N, 150))
    new = torch.from_numpy(np.argsort(book.orig_ids()))  # dataset id -> the partition's id
    got = f.read(new[ids])
    assert got.dtype == torch.bfloat16 and torch.equal(got.view(torch.int16),
                                                      want[ids].view(torch.int16))
    out = torch.empty((150, 6), dtype=torch.bfloat16)
    assert f.read(new[ids], out=out).data_ptr() == out.data_ptr()
    assert torch.equal(out.view(torch.int16), want[ids].view(torch.int16))


def test_two_gloo_ranks_exchange_bfloat16_rows(bf16):
    """Remote rows cross gloo, which has no 16-bit integers: the exchange carries the rows'
    bytes as wider words (``dist._on_the_wire``)."""
    from _partition_ranks import read_feature_bits

    from graphfeed.distributed import launch

    ds, d = bf16
    book = partition_dataset(ds, d / "gloo", 2, method="random", seed=3)
    ids = np.random.default_rng(4).integers(0, N, 120)  # rows of both parts on each rank
    got = launch(read_feature_bits, 2, str(book.path), ids, timeout_s=120)
    want = np.asarray(ds.arrays.node_features["feat"])[book.orig_ids()[ids]].view(np.int16)
    for dtype, bits in got:
        assert dtype == "torch.bfloat16"
        np.testing.assert_array_equal(bits, want)


def test_exchange_views_keep_rows_and_memory():
    from graphfeed.partition.dist import _on_the_wire

    for a, wire in ((np.zeros((5, 6), np.uint16), np.int32),  # 12-byte rows: 3 int32 words
                    (np.zeros((5, 4), np.uint16), np.int64),
                    (np.zeros((5, 3), np.uint16), np.uint8),
                    (np.zeros(7, np.bool_), np.uint8), (np.zeros((0, 6), np.uint16), np.int32)):
        w = _on_the_wire(a)
        assert w.dtype == wire and w.shape[0] == a.shape[0] and w.nbytes == a.nbytes
        if a.size:
            w[-1] = 1  # a view: what arrives in it lands in the array
            assert a.view(np.uint8)[-1].any()
    f = np.zeros((4, 2), np.float32)
    assert _on_the_wire(f) is f


def test_a_part_whose_bits_are_not_uint16_is_refused(bf16, tmp_path):
    ds, d = bf16
    book = partition_dataset(ds, tmp_path / "p", 1, method="random")
    path = book.path / "part-00000" / "node_features" / "feat.npy"
    np.save(path, np.load(path).astype(np.int32))
    with pytest.raises(DatasetError, match="the book says bfloat16"):
        load_part(book, 0)
