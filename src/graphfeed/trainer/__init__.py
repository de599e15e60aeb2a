"""The application behind ``graphfeed train``, one module per concern.

- ``config``: ``TrainConfig`` and its validation (bounds checked before anything is allocated);
- ``fit``: the one training loop, for every task and every kind of data (loaders built once,
  DDP, checkpoints, early stopping, epoch statistics, ``--log``, predictions, the final line);
- ``tasks``: what is learnt, one plug-in per task (``node``, ``link``; registry ``TASKS``),
  each over homogeneous, typed and (node) partitioned data;
- ``evaluate``: the run's evaluation method and ``--eval-every``; sampled evaluation (fanouts,
  batch size, loaders);
- ``layerwise``: layer-wise inference, exact evaluation over full neighbourhoods (the default);
- ``metrics``: accuracy, macro-F1, ROC-AUC (rank-based), the task's main metric;
- ``checkpoint``: atomic, pickle-free checkpoints;
- ``report``: what every trainer reports the same way (the ``--log`` lines, the final line);
- ``adapter``: ``graphfeed.models.adapter`` under its old name;
- ``result``: ``EpochStats``, ``TrainResult``, ``RunsResult``;

``graphfeed.training`` holds the entry points (``train``, ``train_runs``): ranks, preflight,
the run's ``DataPlan``; the task places its data through that plan.
The core (graph, sampling, features, loader, placement, distributed, datasets) never imports
this package.
"""
