"""The application behind ``graphfeed train``, one module per concern.

- ``config``: ``TrainConfig`` and its validation (bounds checked before anything is allocated);
- ``loop``: one run's epochs (loaders built once, checkpoints, early stopping, predictions);
- ``evaluate``: evaluation fanouts and batch size, the evaluation loaders;
- ``metrics``: accuracy, macro-F1, ROC-AUC (rank-based), the task's main metric;
- ``checkpoint``: atomic, pickle-free checkpoints;
- ``adapter``: PyG models on graphfeed mini-batches;
- ``result``: ``EpochStats``, ``TrainResult``, ``RunsResult``.

``graphfeed.training`` holds the entry points (``train``, ``train_runs``) and places the data.
The core (graph, sampling, features, loader, placement, distributed, datasets) never imports
this package.
"""
