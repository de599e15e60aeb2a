"""Layer-wise evaluation under 2 gloo ranks: each rank computes a share of every layer, the
shares are gathered, and every rank gets exactly the single-process logits; --eval-every in a
2-rank run."""

import json

import numpy as np
import pytest

pytestmark = [pytest.mark.dist, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    from graphfeed.datasets.synthetic import load_builtin

    root = tmp_path_factory.mktemp("gfroot")
    load_builtin("tiny", root)
    return str(root)


@pytest.mark.parametrize("model, hidden", [("sage", 16), ("gcn", 16), ("gat", 16), ("sage", 64)])
def test_two_ranks_compute_the_single_process_logits(data_root, model, hidden,
                                                     no_leftover_segments):
    """Each rank builds a share of every source table (projected first when ``hidden`` < 32
    input features) and of every layer's outputs; the gathered logits are the single-process
    ones."""
    from graphfeed.distributed import launch

    import _layerwise_ranks as ranks

    one = ranks.layerwise_logits(data_root, model, 97, hidden)
    two = launch(ranks.layerwise_logits, 2, data_root, model, 97, hidden, timeout_s=120)
    for got in two:  # every rank holds every row
        for k in ("valid", "test"):
            np.testing.assert_allclose(got[k][0], one[k][0], atol=1e-5, rtol=1e-5)
            np.testing.assert_array_equal(got[k][1], one[k][1])


def test_two_ranks_evaluate_every_second_epoch(data_root, tmp_path, no_leftover_segments):
    from graphfeed.training import TrainConfig, train

    log = tmp_path / "log.jsonl"
    r = train(TrainConfig(dataset="tiny", epochs=3, eval_every=2, batch_size=256, fanouts=(5, 5),
                          device="cpu", num_threads=1, nproc=2, dist_timeout=60,
                          mlp_baseline=False, progress=False, data_root=data_root, log=str(log)))
    lines = [json.loads(s) for s in log.read_text().splitlines()]
    assert [e["valid"] is not None for e in lines] == [False, True, True]
    assert r.eval_method == "layerwise" and r.best_epoch in (1, 2)
    assert r.test_acc > 0.3
