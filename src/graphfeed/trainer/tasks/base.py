"""The task interface: what :func:`graphfeed.trainer.fit.fit` asks of a task.

The loop (model to device, DDP, optimiser, resume/save/stop, progress, loss checks, epoch
statistics, ``--log``, early stopping, the final line) is the same for every task; a task
says what it trains on and how it is scored:

- ``trainer`` (the tag a checkpoint records; a resume by another task is refused), ``resume_keys``,
  ``main`` (the metric that picks the best epoch), ``unit`` (what ``seeds/s`` counts) and
  ``rows_per_seed`` (loss rows per seed: ``1 + negatives`` for link prediction);
- :meth:`build_model` (on the CPU; ``fit`` moves it), :meth:`train_loader`, :meth:`step` (one
  batch's loss, correct predictions and rows);
- :meth:`open_evaluation` / :meth:`evaluate` (split name -> metrics, every rank the same),
  :meth:`predict` (every rank takes part, rank 0 writes), :meth:`finish` (baselines, warnings),
  :meth:`close`;
- :meth:`result` (a ``TrainResult`` with the run's mode, placement and model);
- two class methods: ``check(cfg, dataset, device) -> dict`` (``--dry-run``: every refusal
  before data is placed, and what would be trained) and ``prepare(cfg, dataset, plan, *, rank,
  world_size, say, model)`` (the same checks, then the data placed through ``plan``: the task,
  ready for ``fit``).

A new task is one module beside ``node.py`` and ``link.py`` and one ``TASKS.add`` line in
``tasks/__init__.py``.
"""

from __future__ import annotations

from typing import Callable


class Task:
    trainer: str = "node"
    resume_keys: tuple = ()
    main: str = "accuracy"
    unit: str = "seeds"
    rows_per_seed: int = 1
    #: the values of ``TrainConfig`` fields left ``None`` (``dropout``, ``weight_decay``): the
    #: regularisation chosen on this task's own benchmarks (``TrainConfig.validate`` fills them)
    defaults: dict = {"dropout": 0.5, "weight_decay": 0.0}
    #: the opened ``Dataset`` it trains on (``prepare`` sets it; ``None`` on partitions): a
    #: checkpoint records its name, folder and fingerprint
    dataset = None
    #: what scores its sets (``open_evaluator``), opened by ``open_evaluation``
    evaluator = None

    def __init__(self, cfg, *, device: str, rank: int = 0, world_size: int = 1,
                 say: Callable[[str], None] = print):
        self.cfg, self.device, self.rank, self.world_size, self.say = (cfg, device, rank,
                                                                       world_size, say)

    # ------------------------------------------------------------------ training
    def build_model(self):
        raise NotImplementedError

    def result(self):
        """A ``TrainResult`` naming the run's mode, placement, model, task and metric."""
        raise NotImplementedError

    def train_loader(self):
        raise NotImplementedError

    def step(self, model, batch):
        """``(loss, correct, rows)`` of one training batch: the mean loss (a tensor with a
        gradient), the number of correct predictions (a tensor) and the rows the loss averages
        over (an int)."""
        raise NotImplementedError

    def before_epoch(self, epoch: int) -> None:
        """Before an epoch's training (counters that the epoch line reports start here)."""

    def after_epoch(self, epoch: int) -> str:
        """After an epoch's training (before evaluation); what it returns ends the epoch line."""
        return ""

    # ------------------------------------------------------------------ scoring
    def open_evaluation(self, net) -> None:
        """Build what evaluation needs (loaders), once per run."""

    def evaluate(self, model, *, progress: bool = False) -> dict:
        """``{"valid": metrics, "test": metrics}`` over every rank's share."""
        raise NotImplementedError

    def predict(self, model, path) -> str:
        """Write ``--predict`` with the best weights loaded; every rank calls it."""
        raise NotImplementedError

    def evaluates_under_autocast(self) -> bool:
        """Whether :meth:`evaluate` and :meth:`predict` run under ``--precision``'s autocast
        (``fit`` asks). Sampled evaluation does: it is the model's own forward pass. Layer-wise
        evaluation stays float32: its direct layers accumulate in place into float32 tables
        (``trainer/layerwise.py``), which autocast's low-precision results cannot join, and
        computing every node's layers once in float32 costs little next to training."""
        return getattr(self, "eval_method", "sampled") != "layerwise"

    def finish(self, result) -> None:
        """After the last epoch: baselines and warnings into ``result``."""

    def close(self) -> None:
        """Release the evaluator (the run's end, however it ends); idempotent."""
        if self.evaluator is not None:
            self.evaluator.close()
            self.evaluator = None


def open_evaluator(method: str, placed, sets: dict, *, num_layers: int, plan,
                   seed: int, rank: int = 0, world_size: int = 1, num_threads: int = 2,
                   prefetch: int = 2, labels: bool = True):
    """The one way a task scores node sets: the evaluator of ``method`` (``"layerwise"``, over
    ``placed.graph``, typed or not; ``"sampled"``, ``trainer.evaluate.Evaluator`` with ``plan``) for the
    sets (name -> node ids, every rank the same, or each rank its part's). Every evaluator
    has ``evaluate(model, names, progress=, argmax=)`` -> name -> ``(rows, labels)`` in the
    order of its ``ids[name]``, ``logits(model, name)``, ``under_autocast`` and ``close()``."""
    from ..evaluate import Evaluator
    from ..layerwise import LayerwiseEvaluator

    if method != "layerwise":
        return Evaluator(placed, sets, plan, seed=seed, rank=rank, world_size=world_size,
                         num_threads=num_threads, prefetch=prefetch, labels=labels)
    return LayerwiseEvaluator(placed, placed.graph, sets, num_layers, rank=rank,
                              world_size=world_size, num_threads=num_threads,
                              prefetch=prefetch, labels=labels)


def describe_dataset(dataset) -> str:
    """The data part of the first line: the dataset's name, nodes and edges (of how many
    types)."""
    h = dataset.hetero
    if h is None:
        return f"dataset {dataset.name} ({dataset.num_nodes:,} nodes, {dataset.num_edges:,} edges"
    target = dataset.metadata.hetero.target_type
    return (f"heterogeneous dataset {dataset.name} ({h.num_nodes:,} nodes of {h.num_node_types} "
            f"types, {h.num_edges:,} edges of {h.num_edge_types} types"
            + (f"; target {target!r}" if target is not None else ""))
