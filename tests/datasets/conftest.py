from __future__ import annotations

import pytest
from ds_helpers import small_arrays


@pytest.fixture
def dataset_dir(tmp_path):
    from graphfeed.datasets.format import write_dataset

    g, feats, splits = small_arrays()
    return write_dataset(tmp_path / "ds", graph=g, node_features=feats, splits=splits, num_classes=3)
