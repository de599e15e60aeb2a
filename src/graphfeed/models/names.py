"""The ``--model`` names (``build_model``'s), in a module without torch: ``TrainConfig`` and the
CLI's parser read them before anything heavy is imported."""

MODEL_NAMES = ("sage", "gcn", "gat")
