"""What ``graphfeed train`` can learn, one plug-in module per task, registered by name in
:data:`TASKS` (``--task``). Every task runs in the one loop (:func:`graphfeed.trainer.fit.fit`)
on every kind of data the plan places (homogeneous, typed, partitioned) that it supports:

- ``node`` (:mod:`.node`): node classification;
- ``link`` (:mod:`.link`): link prediction.

A task is a :class:`~graphfeed.trainer.tasks.base.Task` with a ``prepare(cfg, dataset, plan,
*, rank, world_size, say, model, pre)`` class method that checks and places its data; a new
task is one module here and one ``TASKS.add`` line below. Importing this package imports no
torch (``TrainConfig`` and the CLI's parser read the names).
"""

from __future__ import annotations

from ..._registry import Registry

__all__ = ["TASKS"]

TASKS = Registry("task")
TASKS.add("node", ".trainer.tasks.node:NodeTask", "node classification")
TASKS.add("link", ".trainer.tasks.link:LinkTask", "link prediction")
