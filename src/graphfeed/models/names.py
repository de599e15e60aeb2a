"""The ``--model`` names (``build_model``'s), in a module without torch: ``TrainConfig`` and the
CLI's parser read them before anything heavy is imported."""

MODEL_NAMES = ("sage", "gcn", "gat")
#: ``--norm`` between layers: ``auto`` (the model's own: LayerNorm for sage, none for gcn and
#: gat), ``none``, ``layer`` (LayerNorm), ``batch`` (BatchNorm)
NORMS = ("auto", "none", "layer", "batch")
