"""One quick end-to-end check on real data: prepare Cora from the shared text files and train
mini-batch GraphSAGE on it through graphfeed.training (the full 5-seed table is in docs/datasets.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("GRAPHFEED_SHARED_DATASETS") or (REPO / ".." / "shared" / "datasets")).resolve()


@pytest.mark.skipif(not (SHARED / "cora" / "text").is_dir(), reason="shared/datasets/cora absent")
def test_train_on_prepared_cora(tmp_path):
    training = pytest.importorskip("graphfeed.training")
    from graphfeed.datasets.importers.shared import prepare_cora_text

    prepare_cora_text(SHARED / "cora" / "text", tmp_path / "cora")
    cfg = training.TrainConfig(
        dataset=str(tmp_path / "cora"), epochs=8, batch_size=32, lr=0.01, weight_decay=5e-4,
        fanouts=(25, 10), hidden=64, dropout=0.5, seed=0, progress=False, mlp_baseline=False,
        device="cpu", num_threads=2,
    )
    result = training.train(cfg)
    # published full-graph GraphSAGE/GCN reach 81-83%; an untrained model scores about 1/7
    assert result.test_acc > 0.70, result.test_acc
