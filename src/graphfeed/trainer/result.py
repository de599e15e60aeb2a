"""What a training run reports: one ``EpochStats`` per epoch, a ``TrainResult`` per run and a
``RunsResult`` over ``--runs K`` seeds. All are plain dataclasses; ``to_dict()`` gives strict JSON
(non-finite floats become ``null``)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Optional


def json_safe(obj):
    """``obj`` with every non-finite float replaced by ``None`` (``json.dumps`` would write
    ``NaN``, which is not JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


@dataclass
class EpochStats:
    """One epoch. ``valid`` / ``test``: the task's metrics (``accuracy`` and ``macro_f1``, or
    ``roc_auc`` and ``accuracy``); ``valid_acc`` / ``test_acc`` repeat their accuracy. An epoch
    that ``--eval-every`` skips has ``valid`` and ``test`` ``None`` (``null`` in JSON), its
    accuracies NaN (``null``) and ``eval_seconds`` 0 (:meth:`evaluated` is False).
    ``rss_bytes``: resident memory after the epoch (``peak_rss_bytes``: the peak so far).
    ``peak_gpu_bytes`` / ``peak_gpu_reserved_bytes``: ``torch.cuda.max_memory_allocated`` /
    ``max_memory_reserved`` on CUDA, else ``None``."""

    epoch: int
    loss: float
    train_acc: float
    valid_acc: float
    test_acc: float
    seeds_per_s: float
    batches_per_s: float
    seconds: float
    peak_rss_bytes: int
    peak_gpu_bytes: Optional[int] = None
    valid: Optional[dict] = field(default_factory=dict)
    test: Optional[dict] = field(default_factory=dict)
    eval_seconds: float = 0.0
    rss_bytes: int = 0
    peak_gpu_reserved_bytes: Optional[int] = None

    @property
    def evaluated(self) -> bool:
        return self.valid is not None

    def skip_evaluation(self) -> "EpochStats":
        """Mark the epoch as not evaluated (see the class docstring); returns ``self``."""
        self.valid = self.test = None
        self.valid_acc = self.test_acc = float("nan")
        self.eval_seconds = 0.0
        return self

    def to_dict(self) -> dict:
        return json_safe(dataclasses.asdict(self))


@dataclass
class TrainResult:
    """One run. ``main_metric`` picked ``best_epoch`` (on validation); ``best_valid`` is its
    value there and ``test`` the test metrics of that epoch (``test_acc`` their accuracy).
    ``majority``: what always answering the most frequent training class scores
    (``{"class", "valid_acc", "test_acc"}``); ``warnings``: e.g. a model no better than that."""

    epochs: list = field(default_factory=list)
    best_epoch: int = -1
    best_valid_acc: float = float("nan")
    test_acc: float = float("nan")  # at the best validation epoch
    final_test_acc: float = float("nan")
    mlp_test_acc: Optional[float] = None
    mode: str = "cpu-cpu"
    placement_reason: str = ""
    world_size: int = 1
    model: str = "sage"
    seed: int = 0
    task: str = "multiclass"
    main_metric: str = "accuracy"
    best_valid: float = float("nan")
    test: dict = field(default_factory=dict)
    mlp_test: Optional[dict] = None
    majority: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    stopped_early: bool = False
    resumed_from_epoch: Optional[int] = None
    eval_fanouts: list = field(default_factory=list)
    eval_method: str = "sampled"  # layerwise or sampled (TrainConfig.eval_method resolved)
    checkpoint: Optional[str] = None
    predictions: Optional[str] = None
    #: link prediction: baseline name -> split -> metrics (e.g. the degree baseline)
    baselines: dict = field(default_factory=dict)
    precision: str = "32"  # --precision: 32, bf16-mixed or fp16-mixed
    #: a run cut short (Ctrl-C, SIGTERM) after an evaluated epoch: where it stopped ("in epoch
    #: 7", "during the baselines"); the figures are those of the best epoch so far
    interrupted: Optional[str] = None
    #: ``--tune``: one ``trainer.tune.TuneRow`` (as a dict) per candidate run; this run is the
    #: winner's, run again as asked
    tune: Optional[list] = None

    def to_dict(self) -> dict:
        return json_safe(dataclasses.asdict(self))


@dataclass
class RunsResult:
    """``--runs K``: every run, and ``summary`` metric -> ``{"mean", "std", "values"}`` (sample
    standard deviation) of ``test_<metric>`` at each run's best epoch and of ``best_valid``."""

    runs: list = field(default_factory=list)
    main_metric: str = "accuracy"
    summary: dict = field(default_factory=dict)
    tune: Optional[list] = None  # --tune: the candidates' table, as TrainResult.tune

    def to_dict(self) -> dict:
        return json_safe(dataclasses.asdict(self))
