"""Rank functions of test_dist_layerwise.py (importable by name from spawned ranks)."""

from __future__ import annotations


def layerwise_logits(data_root: str, model_name: str, max_batch: int, hidden: int = 16):
    """Layer-wise logits of valid + test on the tiny dataset (32 input features: ``hidden`` 16
    projects layer 0's inputs first, 64 does not), this rank's world evaluating."""
    import torch

    from graphfeed import place
    from graphfeed.datasets.synthetic import load_builtin
    from graphfeed.distributed import World, init
    from graphfeed.models import build_model
    from graphfeed.trainer.layerwise import LayerwiseEvaluator

    w = init(World.from_env(), timeout_s=60) if World.from_env().world_size > 1 else None
    rank, world = (w.rank, w.world_size) if w is not None else (0, 1)
    ds = load_builtin("tiny", data_root)
    placed = place(ds.graph, {"feat": ds.node_feature("feat"), "label": ds.node_feature("label")},
                   [5, 5], mode="cpu-cpu", device="cpu")
    torch.manual_seed(0)
    model = build_model(model_name, 32, hidden, int(ds.num_classes), 2, heads=4,
                        in_degrees=ds.graph.in_degrees if model_name == "gcn" else None)
    ev = LayerwiseEvaluator(placed, ds.graph, {"valid": ds.valid_ids, "test": ds.test_ids}, 2,
                            rank=rank, world_size=world, num_threads=1, max_batch=max_batch)
    got = ev.evaluate(model)
    return {k: (lg.numpy(), y.numpy()) for k, (lg, y) in got.items()}
