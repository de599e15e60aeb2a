"""THE test of issue 17: a partitioned run (1, 2 and 4 gloo processes) yields, for the same
seed, the batches of a single-process run over the whole graph: same seeds, blocks, features and
labels (``KeyedNeighborSampler``, keyed by dataset id)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from graphfeed.partition import KeyedNeighborSampler, partition_dataset

sys.path.insert(0, os.path.dirname(__file__))

FANOUTS = [4, 3]


@pytest.fixture(scope="module")
def parted(tiny_dataset, tmp_path_factory):
    root = tmp_path_factory.mktemp("parts")
    out = {}
    for parts, method in ((1, "random"), (2, "random"), (4, "metis")):
        if method == "metis" and not _has_pymetis():
            method = "random"
        out[parts] = partition_dataset(tiny_dataset, root / f"p{parts}", parts, method=method)
    return out


def _has_pymetis() -> bool:
    try:
        import pymetis  # noqa: F401
    except ImportError:
        return False
    return True


def _launch(nproc, *args):
    """``sample_partitioned(*args)`` in ``nproc`` gloo processes; no shared memory left."""
    from graphfeed.distributed import launch
    from graphfeed.distributed.shm import list_segments

    from _partition_ranks import sample_partitioned

    before = set(list_segments())
    results = launch(sample_partitioned, nproc, *args, timeout_s=120)
    assert set(list_segments()) - before == set()
    return results


def _check_equal_to_reference(ds, results, replace=False):
    ref = KeyedNeighborSampler(ds.graph, FANOUTS, replace=replace, seed=7)
    x_all = np.asarray(ds.arrays.node_features["feat"])
    y_all = np.asarray(ds.arrays.node_features["label"])
    n = 0
    for r in results:
        for bi, seeds, blocks, x, y in r["batches"]:
            mb = ref.sample(seeds, epoch=1, batch_index=bi)
            assert len(mb.blocks) == len(blocks)
            for rb, (ei, src, nd) in zip(mb.blocks, blocks):
                assert rb.num_dst == nd
                np.testing.assert_array_equal(rb.src_nodes.numpy(), src)
                np.testing.assert_array_equal(rb.edge_index.numpy(), ei)
            np.testing.assert_array_equal(x, x_all[mb.input_nodes.numpy()])
            np.testing.assert_array_equal(y, y_all[seeds])
            n += 1
    assert n > 0


def test_one_part_without_a_process_group(tiny_dataset, parted):
    from _partition_ranks import sample_partitioned

    r = sample_partitioned(str(parted[1].path), FANOUTS, 64, 3, seed=7)
    _check_equal_to_reference(tiny_dataset, [r])
    assert r["stats"]["exchange"]["bytes_sent"] == 0


@pytest.mark.parametrize("parts", [2, 4])
def test_partitioned_batches_equal_the_whole_graph(tiny_dataset, parted, parts):
    results = _launch(parts, str(parted[parts].path), FANOUTS, 64, 4, 7)
    assert [r["rank"] for r in results] == list(range(parts))
    _check_equal_to_reference(tiny_dataset, results)
    for r in results:  # something really crossed the process boundary
        assert r["stats"]["exchange"]["bytes_received"] > 0


def test_two_ranks_share_each_part(tiny_dataset, parted):
    """4 processes on 2 parts (2 GPUs per machine): rank r holds part r // 2 and exchanges
    with the ranks of the same local index."""
    results = _launch(4, str(parted[2].path), FANOUTS, 32, 3, 7)
    _check_equal_to_reference(tiny_dataset, results)
    seeds = [np.concatenate([b[1] for b in r["batches"]]) for r in results]
    assert len(set(np.concatenate(seeds).tolist())) == sum(len(s) for s in seeds)  # disjoint


def test_the_cache_changes_traffic_not_batches(tiny_dataset, parted):
    results = _launch(2, str(parted[2].path), FANOUTS, 64, 6, 7, 400)
    _check_equal_to_reference(tiny_dataset, results)
    for r in results:
        c = r["stats"]["cache"]
        assert c["lookups"] > 0 and 0 < c["hits"] <= c["lookups"]


def test_with_replacement_too(tiny_dataset, parted):
    results = _launch(2, str(parted[2].path), FANOUTS, 64, 2, 7, 0, True)
    _check_equal_to_reference(tiny_dataset, results, replace=True)
