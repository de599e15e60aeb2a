"""bfloat16 features end to end: ``prepare --feature-dtype bfloat16`` stores the uint16 bits of
torch's own rounding with ``"bfloat16"`` in the metadata (format_version 3), every backend
reads them back as ``torch.bfloat16``, the metadata and the file are checked against each
other, and ``inspect`` / the memory estimate count 2 bytes a value."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from graphfeed.cli.main import main
from graphfeed.datasets.build import bfloat16_bits, bfloat16_values
from graphfeed.datasets.format import Dataset, write_dataset
from graphfeed.datasets.importers import prepare
from graphfeed.datasets._readers import EdgeSource
from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.graph.csc import CSCGraph

N, F = 300, 24


def _inputs(tmp_path, scale=1.0):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((N, F)) * scale).astype(np.float64)
    src, dst = rng.integers(0, N, 2000), rng.integers(0, N, 2000)
    y = rng.integers(0, 4, N)
    return x, src, dst, y


def _prepare(tmp_path, dtype="bfloat16", name="ds", scale=1.0):
    x, src, dst, y = _inputs(tmp_path, scale)
    prepare(tmp_path / name, edges=EdgeSource(arrays=(src, dst)), features={"feat": x},
            labels=y, splits={"train": np.arange(100), "valid": np.arange(100, 200),
                              "test": np.arange(200, 300)}, feature_dtype=dtype)
    return tmp_path / name, x


def test_bits_are_torchs_rounding_bit_for_bit():
    rng = np.random.default_rng(1)
    f = np.concatenate([
        (rng.standard_normal(20000) * 10.0 ** rng.integers(-40, 38, 20000)).astype(np.float32),
        np.array([0.0, -0.0, 1.0, np.inf, -np.inf, np.nan, 3.3895e38, 1e-45, -1e-42,
                  1.00390625, 1.01171875, 65504.0], dtype=np.float32),  # ties, subnormals
        rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32).view(np.float32),
    ])
    want = torch.from_numpy(f).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    got = bfloat16_bits(f)
    nan = np.isnan(f)  # a NaN stays a NaN; its payload is torch's business (vector paths differ)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.isnan(bfloat16_values(got[nan])).all()
    back = torch.from_numpy(want.view(np.int16)).view(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(bfloat16_values(want), back)


def test_prepare_stores_bits_and_every_backend_reads_bfloat16(tmp_path):
    path, x = _prepare(tmp_path)
    meta = json.loads((path / "graphfeed.json").read_text())
    assert meta["format_version"] == 3
    assert meta["node_features"]["feat"]["dtype"] == "bfloat16"
    assert np.load(path / "node_features" / "feat.npy").dtype == np.uint16
    want = torch.from_numpy(x).to(torch.bfloat16)  # float64 rounded as torch rounds it
    ds = Dataset.open(path)
    ids = np.random.default_rng(2).integers(0, N, 5000)
    for backend, cache in (("ram", 0), ("disk", 0), ("disk", "4KB"), ("lmdb", 0),
                           ("lmdb", "4KB")):
        f = ds.node_feature("feat", backend, cache_size=cache)
        assert f.dtype == torch.bfloat16 and f.nbytes == N * F * 2, backend
        for _ in range(2):  # the second read is served (partly) from a cache
            got = f.read(ids)
            assert got.dtype == torch.bfloat16
            assert torch.equal(got, want[torch.from_numpy(ids)]), (backend, cache)
        f.close()
    assert torch.equal(ds.features["feat"].read(np.arange(N)), want)
    # in_memory loads the bits too
    assert torch.equal(Dataset.open(path, in_memory=True).features["feat"].read([3]), want[[3]])


def test_the_cli_prepares_bfloat16_and_inspect_counts_two_bytes(tmp_path, capsys):
    x, src, dst, y = _inputs(tmp_path)
    np.save(tmp_path / "x.npy", x.astype(np.float32))
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "e.npy", np.stack([src, dst], 1))
    for dtype in ("float32", "bfloat16"):
        assert main(["prepare", "generic", str(tmp_path / dtype), "--edges", str(tmp_path / "e.npy"),
                     "--features", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"),
                     "--feature-dtype", dtype]) == 0
    capsys.readouterr()
    assert main(["inspect", "--json", str(tmp_path / "bfloat16")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["features"]["feat"] == {"dtype": "bfloat16", "shape": [N, F], "bytes": N * F * 2}
    assert main(["inspect", str(tmp_path / "bfloat16")]) == 0
    assert "bfloat16" in capsys.readouterr().out
    from graphfeed.placement.estimate import estimate_memory

    half = estimate_memory(tmp_path / "bfloat16").feature_bytes
    full = estimate_memory(tmp_path / "float32").feature_bytes
    assert full - half == N * F * 2  # the labels are the same int64 in both


def test_a_value_bfloat16_cannot_hold_is_refused(tmp_path):
    with pytest.raises(DatasetError, match=r"value 1e\+39 at row 5, column 3 cannot be stored "
                                           r"as bfloat16: it overflows bfloat16"):
        x, src, dst, y = _inputs(tmp_path)
        x[5, 3] = 1e39
        prepare(tmp_path / "bad", edges=EdgeSource(arrays=(src, dst)), features={"feat": x},
                labels=y, splits={"train": np.arange(10)}, feature_dtype="bfloat16")
    assert not (tmp_path / "bad").exists()


def test_write_dataset_keeps_a_bfloat16_tensor(tmp_path):
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.standard_normal((40, 6)).astype(np.float32)).to(torch.bfloat16)
    indptr = np.arange(41, dtype=np.int64)
    g = CSCGraph(indptr, np.roll(np.arange(40, dtype=np.int32), 1))
    write_dataset(tmp_path / "w", graph=g, node_features={"feat": x, "label": np.zeros(40, np.int64)},
                  splits={"train": np.arange(10)}, num_classes=1)
    ds = Dataset.open(tmp_path / "w")
    assert ds.metadata.node_features["feat"].dtype == "bfloat16"
    assert torch.equal(ds.features["feat"].read(np.arange(40)), x)


def _bf16_folder(tmp_path):
    path, _ = _prepare(tmp_path)
    return path, json.loads((path / "graphfeed.json").read_text())


def test_metadata_and_file_are_checked_against_each_other(tmp_path):
    path, meta = _bf16_folder(tmp_path)
    spec = path / "graphfeed.json"
    feat = path / "node_features" / "feat.npy"
    bits = np.load(feat)
    # bits under another dtype's name, and another dtype under bfloat16's
    for dtype in ("float16", "int16"):
        m = json.loads(json.dumps(meta))
        m["node_features"]["feat"]["dtype"] = dtype
        spec.write_text(json.dumps(m))
        with pytest.raises(DatasetError, match=f"dtype is uint16, metadata says {dtype}"):
            Dataset.open(path)
    spec.write_text(json.dumps(meta))
    np.save(feat, bits.view(np.float16))
    with pytest.raises(DatasetError, match=r"dtype is float16, metadata says bfloat16 \(held as "
                                           r"uint16 bits\)"):
        Dataset.open(path)
    np.save(feat, bits)
    m = dict(meta, format_version=2)
    spec.write_text(json.dumps(m))
    with pytest.raises(DatasetError, match="bfloat16 features need format_version 3"):
        Dataset.open(path)
    spec.write_text(json.dumps(meta))
    Dataset.open(path)  # as written: fine


def test_a_bare_file_of_bits_needs_its_dtype(tmp_path):
    from graphfeed.features.registry import open_feature

    path, _ = _bf16_folder(tmp_path)
    feat = path / "node_features" / "feat.npy"
    for backend in ("ram", "disk"):
        with pytest.raises(GraphfeedError, match="dtype='bfloat16'|pass dtype='bfloat16'"):
            open_feature(feat, backend)
        f = open_feature(feat, backend, dtype="bfloat16")
        assert f.dtype == torch.bfloat16
        with pytest.raises(DatasetError, match="holds uint16, not float16"):
            open_feature(feat, backend, dtype="float16")
    np.save(tmp_path / "f32.npy", np.zeros((3, 2), np.float32))
    with pytest.raises(DatasetError, match="holds float32, but bfloat16 rows are stored as "
                                           "uint16 bits"):
        open_feature(tmp_path / "f32.npy", "disk", dtype="bfloat16")


def test_lmdb_store_of_a_bfloat16_tensor_and_its_updates(tmp_path):
    pytest.importorskip("lmdb")
    from graphfeed.features.lmdb_store import LMDBFeature

    x = torch.randn(50, 4).to(torch.bfloat16)
    store = LMDBFeature.build(tmp_path / "s.lmdb", x, rows_per_chunk=8, readonly=False)
    assert store.dtype == torch.bfloat16 and torch.equal(store.read(np.arange(50)), x)
    new = torch.tensor([[1.5, -2.0, 3.0, 1e30]])
    store.update([7], new)  # values, converted to the store's dtype
    store.update([9], new.numpy())
    assert torch.equal(store.read([7, 9]), new.to(torch.bfloat16).repeat(2, 1))
    store.close()
    with pytest.raises(DatasetError, match="dtype='bfloat16'"):
        LMDBFeature(tmp_path / "s.lmdb")  # the store holds bits: say what they are
    assert LMDBFeature(tmp_path / "s.lmdb", dtype="bfloat16").dtype == torch.bfloat16


def test_a_bfloat16_target_is_refused(tmp_path):
    path, meta = _bf16_folder(tmp_path)
    meta["task"]["target"] = "feat"
    (path / "graphfeed.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="target must be a 1-D integer array, got bfloat16"):
        Dataset.open(path, validate="quick")


def test_typed_generic_import_stores_bfloat16_per_type(tmp_path):
    from test_generic_hetero import TYPES, _cli, _graph, _write

    ntype, rows, x, y = _graph()
    ef, nf = _write(tmp_path, ntype, rows, x, y)
    assert _cli(tmp_path, ef, nf, "--feature-dtype", "bfloat16") == 0
    ds = Dataset.open(tmp_path / "out")
    h = ds.hetero
    orig = np.asarray(ds.features["orig_id"].read(np.arange(h.num_nodes)))
    for t in TYPES:
        lo, hi = int(h.node_offsets[h.type_id(t)]), int(h.node_offsets[h.type_id(t) + 1])
        want = torch.from_numpy(x[orig[lo:hi]]).to(torch.bfloat16)
        for backend in ("ram", "disk"):
            f = ds.type_feature(t, "feat", backend)
            assert f.dtype == torch.bfloat16 and torch.equal(f.read(np.arange(hi - lo)), want)
