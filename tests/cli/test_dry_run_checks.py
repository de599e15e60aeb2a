"""``train --dry-run`` makes every check the run makes before its first batch (issue 29, item
12): the sampling method against the dataset's arrays, the refusals of typed and partitioned
data, every part of a partitioned dataset, and the placement decision."""

from __future__ import annotations

import numpy as np
import pytest

from graphfeed.errors import GraphfeedError
from graphfeed.training import TrainConfig, check_run

pytestmark = pytest.mark.timeout(300)


def _cfg(**kw):
    return TrainConfig(**{"progress": False, "num_threads": 1, **kw})


def test_the_method_is_checked_against_the_dataset(builtin_root):
    root = builtin_root("tiny")
    with pytest.raises(GraphfeedError, match="no edge weights"):
        check_run(_cfg(dataset="tiny", data_root=root, sampler="weighted"))
    info = check_run(_cfg(dataset="tiny", data_root=root))
    assert info["mode"] == "cpu-cpu" and info["placement"]


def test_typed_refusals_and_the_evaluation_it_will_run(builtin_root):
    root = builtin_root("hetero")
    with pytest.raises(GraphfeedError, match="sampled uniformly"):
        check_run(_cfg(dataset="hetero", data_root=root, sampler="labor"))
    info = check_run(_cfg(dataset="hetero", data_root=root, fanouts=(10, 5)))
    assert info["model"] == "rgcn" and info["eval"] == "layerwise"
    assert info["eval_fanouts"] == [-1, -1]
    info = check_run(_cfg(dataset="hetero", data_root=root, fanouts=(10, 5),
                          eval_method="sampled"))  # sampled: the training fanouts
    assert info["eval"] == "sampled" and info["eval_fanouts"] == [10, 5]


def test_every_part_is_opened_and_checked(builtin_root, tmp_path):
    from graphfeed.partition.partitioner import partition_dataset

    out = tmp_path / "parts"
    from graphfeed.training import open_dataset

    partition_dataset(open_dataset("tiny", builtin_root("tiny"), verbose=False), out, 2)
    info = check_run(_cfg(partitions=str(out), nproc=2))
    assert info["parts"] == 2 and info["mode"] == "partitioned"
    with pytest.raises(GraphfeedError, match="multiple of 2"):
        check_run(_cfg(partitions=str(out), nproc=3))
    idx = out / "part-00001" / "indices.npy"
    a = np.load(idx)
    a[: min(5, a.size)] = 10**9  # out-of-range ids: what the real run refuses when opening
    np.save(idx, a)
    with pytest.raises(GraphfeedError):
        check_run(_cfg(partitions=str(out), nproc=2))


def test_the_wrong_task_names_the_right_one(builtin_root):
    """A link dataset trained as node classification says ``--task link`` (not "0 classes"),
    and ``--task link`` on a node dataset names ``prepare link-split`` (issue 29)."""
    with pytest.raises(GraphfeedError, match="link-prediction dataset: train it with --task link"):
        check_run(_cfg(dataset="link", data_root=builtin_root("link")))
    with pytest.raises(GraphfeedError, match="graphfeed prepare link-split tiny OUT"):
        check_run(_cfg(dataset="tiny", data_root=builtin_root("tiny"), task="link"))
