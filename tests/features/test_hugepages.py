"""Huge pages for in-memory feature tables: private anonymous memory is collapsed, file maps are
marked, shared anonymous memory is left alone, the rows never change, and an advised table
reads the same rows through ``read(ids, out=)``."""

from __future__ import annotations

import pickle
import sys
import warnings

import numpy as np
import pytest
import torch

from graphfeed.features._hugepages import (
    HUGE_PAGE_BYTES,
    _mapping_kind,
    advise_huge_pages,
    thp_mode,
)
from graphfeed.features.memory import InMemoryFeature

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc are Linux")
thp = pytest.mark.skipif(thp_mode() in (None, "never"), reason="transparent huge pages disabled")


def _table(mb: int = 12) -> torch.Tensor:
    rows = mb * (1 << 20) // 400
    return torch.arange(rows * 100, dtype=torch.float32).reshape(rows, 100)


@linux
@thp
def test_anonymous_table_is_advised_and_unchanged():
    t = _table()
    want = t.clone()
    n = advise_huge_pages(t, min_bytes=0)
    start, end = t.data_ptr(), t.data_ptr() + t.numel() * 4
    # the 2 MiB-aligned interior, nothing outside the tensor
    assert n > 0 and n % HUGE_PAGE_BYTES == 0
    assert n <= end - start and n > end - start - 2 * HUGE_PAGE_BYTES
    assert torch.equal(t, want)


@linux
def test_small_and_noncontiguous_tables_are_left_alone():
    assert advise_huge_pages(_table(1)) == 0  # under MIN_TABLE_BYTES
    assert advise_huge_pages(_table()[:, ::2], min_bytes=0) == 0  # not contiguous


@linux
@thp
def test_file_map_is_marked_not_collapsed(tmp_path):
    path = tmp_path / "f.npy"
    np.save(path, _table().numpy())
    mm = np.load(path, mmap_mode="r")
    lo = -(-mm.ctypes.data // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
    assert _mapping_kind(lo, lo + HUGE_PAGE_BYTES) == "file"
    with warnings.catch_warnings():  # torch warns (once) about the read-only map; nothing is written
        warnings.simplefilter("ignore", UserWarning)
        t = torch.from_numpy(mm)
    assert advise_huge_pages(t, min_bytes=0) > 0
    assert np.array_equal(np.asarray(mm), np.load(path))


@linux
def test_mapping_kinds():
    t = _table()
    lo = -(-t.data_ptr() // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
    assert _mapping_kind(lo, lo + HUGE_PAGE_BYTES) == "anon"
    assert _mapping_kind(0, HUGE_PAGE_BYTES) is None  # page zero is never mapped
    import mmap

    shared = mmap.mmap(-1, 8 * HUGE_PAGE_BYTES)  # MAP_SHARED anonymous: not ours to change
    addr = np.frombuffer(shared, dtype=np.uint8).ctypes.data
    slo = -(-addr // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
    assert _mapping_kind(slo, slo + HUGE_PAGE_BYTES) is None


@pytest.mark.parametrize("huge", [True, False])
def test_feature_reads_identical_rows_with_and_without_huge_pages(huge):
    t = _table(40)  # over MIN_TABLE_BYTES: advised when huge
    ref = t.clone()
    f = InMemoryFeature(t, huge_pages=huge)
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(0, t.shape[0], 20000))
    out = torch.empty((ids.shape[0], 100), dtype=torch.float32)
    assert f.read(ids, out=out) is out
    assert torch.equal(out, ref[ids])
    g = pickle.loads(pickle.dumps(f))
    assert g.huge_pages == huge
    assert torch.equal(g.read(ids), ref[ids])
    f.close()
    g.close()
