"""Memory stays flat over many epochs: the trainer builds its loaders once and reuses them
(measured RSS per epoch, no timing)."""

from __future__ import annotations

import numpy as np
import pytest

from graphfeed.training import TrainConfig, train

pytest.importorskip("torch_geometric")

EPOCHS = 32
#: allowed growth of resident memory per epoch after the first 5 (the issue saw 5-8 MB/epoch)
MAX_GROWTH_PER_EPOCH = 1.5e6


@pytest.fixture(scope="module")
def small_dataset(_graphfeed_home):
    from graphfeed.datasets.synthetic import load_builtin

    return load_builtin("small")


@pytest.mark.slow
@pytest.mark.parametrize("features", ["ram", "disk", "lmdb"])
def test_rss_is_flat_over_many_epochs(small_dataset, features):
    if features == "lmdb":
        pytest.importorskip("lmdb")
    rss = []
    r = train(TrainConfig(dataset="small", epochs=EPOCHS, fanouts=(3, 3), eval_fanouts=(3, 3),
                          batch_size=4096, hidden=16, features=features, num_threads=1,
                          progress=False, mlp_baseline=False),
              dataset=small_dataset, on_epoch=lambda es: rss.append(es.rss_bytes))
    assert len(rss) == EPOCHS and all(v > 0 for v in rss)
    assert [e.rss_bytes for e in r.epochs] == rss
    early, late = np.median(rss[5:10]), np.median(rss[-5:])
    growth = (late - early) / (EPOCHS - 10)
    assert growth < MAX_GROWTH_PER_EPOCH, (features, [round(v / 1e6) for v in rss])
