"""Two gloo ranks train typed link prediction on the built-in ``hetero-link`` dataset: each
rank its share of the training pairs and of the evaluation embeddings, and the ranking still
beats the degree baseline clearly."""

import pytest

pytestmark = [pytest.mark.dist, pytest.mark.timeout(600)]


def test_two_gloo_ranks_on_hetero_link(tmp_path_factory, no_leftover_segments):
    from graphfeed.datasets.synthetic import load_builtin
    from graphfeed.training import TrainConfig, train

    root = tmp_path_factory.mktemp("gfhetlink")
    load_builtin("hetero-link", root)
    two = train(TrainConfig(dataset="hetero-link", task="link", epochs=2, batch_size=1024,
                            hidden=64, fanouts=(10, 5), eval_negatives=100, device="cpu",
                            seed=0, num_threads=1, dist_timeout=120, progress=False,
                            data_root=str(root), nproc=2))
    assert two.world_size == 2 and len(two.epochs) == 2
    base = two.baselines["degree"]["test"]
    assert two.test["mrr"] >= 0.12 and two.test["mrr"] > 3 * base["mrr"], (two.test, base)
    assert two.test["roc_auc"] >= 0.8, two.test
