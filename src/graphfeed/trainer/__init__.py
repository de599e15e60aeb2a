"""The application behind ``graphfeed train``, one module per concern.

- ``config``: ``TrainConfig`` and its validation (bounds checked before anything is allocated);
- ``loop``: one run's epochs (loaders built once, checkpoints, early stopping, predictions);
- ``evaluate``: the run's evaluation method and ``--eval-every``; sampled evaluation (fanouts,
  batch size, loaders);
- ``layerwise``: layer-wise inference, exact evaluation over full neighbourhoods (the default);
- ``metrics``: accuracy, macro-F1, ROC-AUC (rank-based), the task's main metric;
- ``checkpoint``: atomic, pickle-free checkpoints;
- ``report``: what every trainer reports the same way (the ``--log`` lines, the final line);
- ``adapter``: ``graphfeed.models.adapter`` under its old name;
- ``result``: ``EpochStats``, ``TrainResult``, ``RunsResult``;
- ``link``, ``hetero``, ``hetero_link``, ``partitioned``: the other tasks' trainers.

``graphfeed.training`` holds the entry points (``train``, ``train_runs``) and places the data.
The core (graph, sampling, features, loader, placement, distributed, datasets) never imports
this package.
"""
