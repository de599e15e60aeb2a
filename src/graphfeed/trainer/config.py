"""``TrainConfig``: everything ``graphfeed train`` can be told, validated before any data is
touched or memory allocated (bad values raise ``GraphfeedError`` naming the field and the value)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Sequence

from .._checks import check_float as _float
from .._checks import check_int as _int
from .._checks import shown
from ..errors import GraphfeedError
from ..models.names import MODEL_NAMES as MODELS  # the --model names
from ..models.names import NORMS  # the --norm names

#: a fanout above this is refused (``-1`` takes every neighbour; no GNN samples more per node)
MAX_FANOUT = 100_000
#: widest hidden layer accepted; a model that would not fit in memory is refused separately
MAX_HIDDEN = 65_536
MAX_HEADS = 64
MAX_THREADS = 256
MAX_PREFETCH = 1024
MAX_NPROC = 1024
MAX_RUNS = 1000
#: seconds; datetime.timedelta overflows far above this
MAX_DIST_TIMEOUT = 10_000_000.0
MAX_SEED = 2**63 - 1
#: seconds of a --tune budget: 30 days
MAX_TUNE = 30 * 86400.0
#: process-group backends: auto is NCCL when the ranks train on GPUs, gloo otherwise
DIST_BACKENDS = ("auto", "gloo", "nccl")
#: ``--runs`` derives run k's seed as ``seed + k``; keep it in range
PREDICT_NODES = ("test", "all")
HUMAN_OUTPUTS = ("stdout", "stderr")
#: ``--task``: the registered tasks (``graphfeed.trainer.tasks``: node, link)
from .tasks import TASKS  # noqa: E402
#: ``--decoder`` of link prediction
DECODERS = ("dot", "mlp")
MAX_NEGATIVES = 100_000
#: ``--eval``: layer-wise inference where supported (auto), or forced layer-wise / sampled
EVAL_METHODS = ("auto", "layerwise", "sampled")


def check_fanouts(name: str, fanouts) -> tuple[int, ...]:
    """A non-empty sequence of ints in ``[1, MAX_FANOUT]`` or ``-1`` (every neighbour): the
    samplers' own check (:func:`graphfeed.sampling._common.check_fanouts`) with the CLI's bound."""
    from ..sampling._common import check_fanouts as check

    return check(fanouts, name=name, max_fanout=MAX_FANOUT)


@dataclass
class TrainConfig:
    """A training run. Sizes in bytes; ``fanouts[i]`` is the fanout of GNN layer ``i`` (input
    layer first). ``validate()`` checks every field and returns ``self``."""

    dataset: str = "small"  # a built-in name (tiny, small, medium) or a prepared dataset folder
    # sage, gcn, gat (PyG layers over sampled blocks); None: by the data (validate() makes it
    # sage and sets model_by_data; the run then trains gcn for node classification where under
    # 10% of the nodes are training labels and the features are 0/1: graphfeed.training.by_data)
    model: Optional[str] = None
    fanouts: Sequence[int] = (10, 10)
    eval_fanouts: Optional[Sequence[int]] = None  # sampled: None = every neighbour, capped
    eval_method: str = "auto"  # auto (layerwise where supported), layerwise, sampled (evaluate.py)
    eval_every: int = 1  # evaluate every N epochs and at the last; patience counts evaluations
    batch_size: int = 1024
    epochs: int = 200  # at most; patience ends the run earlier (docs/training.md, "defaults")
    steps_per_epoch: Optional[int] = None  # at most this many training batches an epoch; None: all
    hidden: int = 128
    heads: int = 8  # GAT attention heads (hidden is split across them)
    norm: str = "auto"  # between layers: auto (the model's own), none, layer, batch
    residual: bool = False  # add each layer's input to its output (a linear map where widths differ)
    lr: float = 3e-3
    # None: the task's default (node 0.7 and 5e-3, link 0.5 and 0: tasks/*.py ``defaults``)
    dropout: Optional[float] = None  # between layers (and on wide input features)
    weight_decay: Optional[float] = None
    patience: int = 20  # stop after this many evaluations without a better main metric; 0: never
    device: str = "auto"  # auto, cpu, cuda, cuda:N
    mode: str = "auto"  # auto, cpu-cpu, cpu-cuda, pinned-cuda, cuda-cuda
    seed: int = 0
    runs: int = 1  # independent runs, seeds seed .. seed + runs - 1 (train_runs)
    features: str = "auto"  # auto (ram when the data fits the memory, else disk + cache), ram, disk, lmdb
    cache_size: int = 0  # bytes of CPU cache in front of disk/lmdb features
    cache_policy: str = "auto"  # auto: degree (a static cache of the hubs) for a dataset's features
    replace: bool = False
    # the sampling method (graphfeed.sampling.SamplingMethod; sampling_method() builds it)
    sampler: str = "uniform"  # uniform, weighted, labor, temporal
    weight_feature: Optional[str] = None  # weighted: an edge feature; None: the graph's weights
    layer_dependency: bool = False  # labor
    labor_variates: str = "rotated"  # labor: rotated (fixed base, per-batch shift) or iid
    temporal_strategy: str = "uniform"  # temporal: uniform or last
    strict_time: bool = False  # temporal: strictly earlier edges only
    node_times: Optional[str] = None  # temporal: node feature of node times (None: "timestamp")
    edge_times: Optional[str] = None  # temporal: edge feature of edge times (None: "timestamp")
    num_threads: int = 2
    prefetch: int = 2
    nproc: int = 1
    dist_timeout: float = 300.0
    dist_backend: str = "auto"  # auto (nccl on GPUs, gloo on CPUs), gloo or nccl
    split: Optional[int] = None  # stored split set to train on; None: 0, or one per run (--runs)
    private_copy: bool = False  # for memory comparisons: each rank loads its own copy
    table_cache: Optional[str] = None  # folder keeping the sampling method's tables between runs
    mlp_baseline: bool = True
    progress: bool = True  # tqdm bars on stderr (shown when stderr is a terminal)
    data_root: Optional[str] = None  # where built-in datasets are cached
    save: Optional[str] = None  # checkpoint folder, written after every epoch
    resume: Optional[str] = None  # checkpoint folder to continue from
    predict: Optional[str] = None  # .npy file for the best model's predicted classes
    predict_nodes: str = "test"  # test or all
    log: Optional[str] = None  # JSON-lines file, one object per epoch (appended)
    human_output: str = "stdout"  # where the per-epoch lines go (stderr for --json)
    partitions: Optional[str] = None  # a `graphfeed partition` folder: train across its parts
    remote_cache: int = 0  # --partitions: remote feature rows cached per rank (after epoch 0)
    task: str = "node"  # node or link (link prediction on a link_prediction dataset)
    decoder: str = "dot"  # link: dot or mlp
    num_negatives: int = 1  # link: uniform negatives per training pair
    eval_negatives: int = 1000  # link: negatives per pair for MRR / Hits@K in evaluation
    precision: str = "32"  # 32, bf16-mixed or fp16-mixed (autocast; PRECISIONS)
    #: the node features layer 0 reads, side by side (an untyped dataset's; default its "feat")
    inputs: tuple = ("feat",)
    #: seconds: search a few settings on the validation set within this budget and keep the
    #: winner (``trainer.tune``); None: train as configured
    tune: Optional[float] = None
    #: set by validate() when model was left None: the run may choose it from the dataset
    model_by_data: bool = False

    def validate(self) -> "TrainConfig":
        if self.task not in TASKS:
            raise GraphfeedError(f"task must be one of {', '.join(TASKS.names())}, got "
                                 f"{self.task!r}")
        for name, value in TASKS.get(self.task).defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if not isinstance(self.dataset, str) or not self.dataset:
            raise GraphfeedError(f"dataset must be a built-in name or a folder, got {self.dataset!r}")
        if self.model is None:
            self.model, self.model_by_data = "sage", True
        if self.model not in MODELS:
            raise GraphfeedError(f"unknown model {self.model!r}; choose one of {', '.join(MODELS)}")
        self.fanouts = check_fanouts("fanouts", self.fanouts)
        if self.eval_fanouts is not None:
            self.eval_fanouts = check_fanouts("eval_fanouts", self.eval_fanouts)
            if len(self.eval_fanouts) != len(self.fanouts):
                raise GraphfeedError(
                    f"eval_fanouts {list(self.eval_fanouts)} must have one entry per layer, like "
                    f"fanouts {list(self.fanouts)}"
                )
        if self.eval_method not in EVAL_METHODS:
            raise GraphfeedError(f"eval_method must be one of {', '.join(EVAL_METHODS)}, got "
                                 f"{self.eval_method!r}")
        if self.eval_method == "layerwise" and self.eval_fanouts is not None:
            raise GraphfeedError(
                f"eval_fanouts {list(self.eval_fanouts)} apply to sampled evaluation; layerwise "
                f"evaluation takes every neighbour: drop --eval-fanouts or use --eval sampled")
        if self.eval_method == "layerwise" and self.sampler == "temporal":
            raise GraphfeedError("eval_method layerwise: sampler temporal bounds each seed's "
                                 "neighbours by its time; use --eval sampled (or leave --eval out)")
        if self.eval_method == "layerwise" and self.partitions:
            raise GraphfeedError("eval_method layerwise: partitions evaluate with sampled "
                                 "neighbourhoods only; use --eval sampled (or leave --eval out)")
        self.eval_every = _int("eval_every", self.eval_every, 1, 10**9)
        self.batch_size = _int("batch_size", self.batch_size, 1, 2**31 - 1)
        self.epochs = _int("epochs", self.epochs, 1, 10**9)
        if self.steps_per_epoch is not None:
            self.steps_per_epoch = _int("steps_per_epoch", self.steps_per_epoch, 1, 10**9)
        self.hidden = _int("hidden", self.hidden, 1, MAX_HIDDEN)
        self.heads = _int("heads", self.heads, 1, MAX_HEADS)
        if self.norm not in NORMS:
            raise GraphfeedError(f"norm must be one of {', '.join(NORMS)}, got {self.norm!r}")
        self.residual = bool(self.residual)
        if self.model == "gat" and self.hidden % self.heads:
            raise GraphfeedError(
                f"model gat splits hidden={self.hidden} across heads={self.heads}: hidden must be "
                f"a multiple of heads"
            )
        self.num_threads = _int("num_threads", self.num_threads, 1, MAX_THREADS)
        self.prefetch = _int("prefetch", self.prefetch, 1, MAX_PREFETCH)
        self.nproc = _int("nproc", self.nproc, 1, MAX_NPROC)
        self.patience = _int("patience", self.patience, 0, 10**9)
        self.runs = _int("runs", self.runs, 1, MAX_RUNS)
        self.seed = _int("seed", self.seed, 0, MAX_SEED - self.runs + 1)
        self.lr = _float("lr", self.lr, 0.0, 1e6, lo_open=True)
        self.dropout = _float("dropout", self.dropout, 0.0, 1.0, hi_open=True)
        self.weight_decay = _float("weight_decay", self.weight_decay, 0.0, 1e6)
        self.dist_timeout = _float("dist_timeout", self.dist_timeout, 0.0, MAX_DIST_TIMEOUT, lo_open=True)
        if self.dist_backend not in DIST_BACKENDS:
            raise GraphfeedError(
                f"dist_backend must be one of {', '.join(DIST_BACKENDS)}, got {self.dist_backend!r}")
        if self.split is not None:
            self.split = _int("split", self.split, 0, 10**6)
        from ..features.registry import BACKENDS

        if self.features != "auto":
            BACKENDS.check(self.features)
        self.cache_size = _int("cache_size", self.cache_size, 0)
        if self.cache_size and self.features == "ram":
            raise GraphfeedError(
                "cache_size applies to features on disk or in LMDB; with features 'ram' every row "
                "is already in memory (drop --cache-size or use --features disk/lmdb)"
            )
        self.remote_cache = _int("remote_cache", self.remote_cache, 0)
        if self.remote_cache and not self.partitions:
            raise GraphfeedError("remote_cache caches rows of other parts: it needs partitions")
        if self.predict_nodes not in PREDICT_NODES:
            raise GraphfeedError(f"predict_nodes must be test or all, got {self.predict_nodes!r}")
        if self.human_output not in HUMAN_OUTPUTS:
            raise GraphfeedError(f"human_output must be stdout or stderr, got {self.human_output!r}")
        if self.runs > 1 and (self.save or self.resume or self.predict):
            raise GraphfeedError(
                "save, resume and predict keep one run: use them with runs=1 (run the seeds one "
                "at a time with --seed S)"
            )
        if self.table_cache is not None and (not isinstance(self.table_cache, str)
                                             or not self.table_cache):
            raise GraphfeedError(f"table_cache must be a folder or None, got {self.table_cache!r}")
        if self.decoder not in DECODERS:
            raise GraphfeedError(f"decoder must be one of {', '.join(DECODERS)}, got {self.decoder!r}")
        self.num_negatives = _int("num_negatives", self.num_negatives, 1, MAX_NEGATIVES)
        self.eval_negatives = _int("eval_negatives", self.eval_negatives, 1, MAX_NEGATIVES)
        if isinstance(self.inputs, str) or not isinstance(self.inputs, (list, tuple)) \
                or not self.inputs or not all(isinstance(n, str) and n for n in self.inputs) \
                or len(set(self.inputs)) != len(self.inputs):
            raise GraphfeedError(f"inputs must be distinct node feature names, at least one, got "
                                 f"{shown(self.inputs)}")
        self.inputs = tuple(self.inputs)
        if self.inputs != ("feat",) and self.partitions:
            raise GraphfeedError("inputs: a partitioned dataset's input is its 'feat'; drop "
                                 "--inputs (or --partitions)")
        if self.task == "link" and self.partitions:
            raise GraphfeedError("task link does not train over partitions yet: drop partitions "
                                 "(or train --task node)")
        from ..placement import validate_mode

        validate_mode(self.mode)
        method = self.sampling_method()
        if self.replace and method.kind == "labor":
            raise GraphfeedError("sampler labor samples without replacement: drop replace")
        if self.replace and method.kind == "temporal" and method.strategy == "last":
            raise GraphfeedError("temporal strategy last takes each recent edge once: drop replace")
        if self.tune is not None:
            self.tune = _float("tune", self.tune, 0.0, MAX_TUNE, lo_open=True)
            for name, given in (("resume", self.resume), ("partitions", self.partitions),
                                ("nproc", self.nproc > 1)):
                if given:
                    raise GraphfeedError(f"tune runs every setting from scratch in one process: "
                                         f"drop {name} (--{name}) or tune (--tune)")
        if self.precision not in PRECISIONS:
            raise GraphfeedError(f"precision must be one of {', '.join(PRECISIONS)}, got "
                                 f"{self.precision!r}")
        return self

    def sampling_method(self):
        """The ``graphfeed.sampling.SamplingMethod`` of the sampler fields (unbound: the
        dataset's arrays are attached when the data is placed)."""
        from ..sampling.method import SamplingMethod

        return SamplingMethod(
            kind=self.sampler, weights=self.weight_feature or "graph",
            layer_dependency=bool(self.layer_dependency), variates=self.labor_variates,
            strategy=self.temporal_strategy,
            strict=bool(self.strict_time), node_times=self.node_times, edge_times=self.edge_times)

    # the fields a checkpoint must agree on to continue a run (the rest may change on resume)
    RESUME_KEYS = ("model", "fanouts", "batch_size", "steps_per_epoch", "hidden", "heads", "norm", "residual",
                   "dropout", "lr",
                   "weight_decay", "seed", "replace", "eval_fanouts", "eval_method", "sampler",
                   "layer_dependency", "labor_variates", "temporal_strategy", "strict_time",
                   "precision", "inputs")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("fanouts", "eval_fanouts"):
            if d[k] is not None:
                d[k] = [int(v) for v in d[k]]
        return d


#: ``--precision``: float32 everywhere ("32"), or the forward pass, the loss and evaluation
#: under autocast in bfloat16 or float16 (weights, gradients and the optimiser stay float32;
#: fp16 adds a gradient scaler). What each means for the loop: ``trainer.fit.autocast_for``
PRECISIONS = ("32", "bf16-mixed", "fp16-mixed")
