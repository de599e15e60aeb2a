"""``graphfeed train --task link``: link prediction on a ``link_prediction`` dataset.

- **Graphs.** The dataset's graph holds every edge (split pairs included). Message passing
  runs on the graph without the valid and test pairs (and their reverses when the graph is
  undirected), built once per process (``graphfeed.datasets.link.without_pairs``, O(E));
  each training batch also loses its own seed pairs (``LinkSampler`` exclusion), so the model
  never reads the edge it is asked about.
- **Model.** :class:`LinkPredictor`: a GNN encoder over the blocks (``--model``, GraphSAGE by
  default, ``hidden`` outputs) and a decoder on the pair's two embeddings: ``dot`` (their dot
  product) or ``mlp`` (a two-layer MLP on their elementwise product). Binary cross-entropy on
  each seed pair and its ``--num-negatives`` uniform negatives (corrupted destinations).
- **Evaluation.** Every node of a split (pairs and negatives) is embedded through the
  evaluation loaders (``Evaluator``, split across ranks and gathered), then each positive is
  ranked against its ``--eval-negatives`` negatives: the dataset's fixed ones, else
  per-source uniform ones keyed by ``(seed, split)``, the same every epoch. Metrics: MRR,
  Hits@10/50/100 (ties count one half, as OGB) and ROC-AUC of the positives against as many
  negatives (each one's first).
  The best epoch is the best valid MRR. A degree baseline (score = the destination's degree in
  the message-passing graph) is scored on the same pairs.
- DDP (``--nproc``), placement modes and feature backends as for node classification: the
  training batches are ``LinkMiniBatch`` es through the same ``DataLoader`` (features of
  ``input_nodes``, no labels).
- ``--save``/``--resume`` through :class:`~graphfeed.trainer.checkpoint.RunState` (resume keys
  :data:`LINK_RESUME_KEYS`); ``--predict`` writes the best epoch's test-pair scores, float32
  ``(P, 1 + k)``: column 0 each test pair's logit, columns ``1..k`` its evaluation negatives'.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .._memory import current_rss_bytes, peak_rss_bytes
from ..errors import GraphfeedError
from .evaluate import Evaluator, features_as_float, plan_eval
from .checkpoint import RunState
from .config import TrainConfig
from .metrics import format_metrics, roc_auc
from .report import final_line, log_epoch
from .result import EpochStats, TrainResult

#: the settings a resumed run must share with its checkpoint (``--resume``)
LINK_RESUME_KEYS = TrainConfig.RESUME_KEYS + ("decoder", "num_negatives", "eval_negatives")
#: Hits@K reported
HITS_AT = (10, 50, 100)
#: pair scores computed at once in evaluation (bounds the MLP decoder's activations)
_EVAL_PAIRS_PER_CHUNK = 1 << 17


def link_metrics(pos, neg) -> dict:
    """``pos`` float ``(P,)`` scores of the positives, ``neg`` ``(P, k)`` of their negatives:
    MRR, Hits@K (rank of each positive among its negatives, ties counted one half) and ROC-AUC
    (the positives against each one's first negative)."""
    pos = np.asarray(pos, dtype=np.float64)
    neg = np.asarray(neg, dtype=np.float64)
    if pos.size == 0:
        return {m: float("nan") for m in ("mrr", *(f"hits@{k}" for k in HITS_AT), "roc_auc")}
    p = pos[:, None]
    rank = 1.0 + (neg > p).sum(1) + 0.5 * (neg == p).sum(1)
    out = {"mrr": float(np.mean(1.0 / rank))}
    for k in HITS_AT:
        out[f"hits@{k}"] = float(np.mean(rank <= k))
    # as GAE reports it: as many negatives as positives (each positive's first negative)
    y = np.concatenate([np.ones(pos.size, np.int64), np.zeros(pos.size, np.int64)])
    out["roc_auc"] = roc_auc(y, np.concatenate([pos, neg[:, 0]]))
    return out


def _link_predictor_class():
    import torch
    from torch import nn

    class LinkPredictor(nn.Module):
        """``encoder(x, blocks)`` -> node embeddings; ``decode(h_src, h_dst)`` -> one logit per
        pair; ``forward(x, blocks, pair_index)`` scores the pairs (local ids of the blocks'
        last destinations), or returns the embeddings when ``pair_index`` is ``None``."""

        def __init__(self, encoder: nn.Module, hidden: int, decoder: str = "dot"):
            super().__init__()
            self.encoder = encoder
            self.decoder = decoder
            self.mlp = (nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
                        if decoder == "mlp" else None)

        def decode(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
            if self.mlp is None:
                return (h_src * h_dst).sum(-1)
            return self.mlp(h_src * h_dst).squeeze(-1)

        def forward(self, x, blocks, pair_index=None):
            h = self.encoder(x, blocks)
            if pair_index is None:
                return h
            # index_select, not h[pair_index[0]]: the backward of advanced indexing
            # accumulates with atomic adds across torch's CPU threads (run-to-run differences)
            return self.decode(h.index_select(0, pair_index[0]),
                               h.index_select(0, pair_index[1]))

    return LinkPredictor


def build_link_model(cfg, in_dim: int, *, in_degrees=None):
    """The ``LinkPredictor`` of ``cfg`` (``model``, ``hidden``, ``decoder``, ``fanouts``)."""
    from ..models import build_model

    enc = build_model(cfg.model, in_dim, cfg.hidden, cfg.hidden, len(cfg.fanouts),
                      dropout=cfg.dropout, heads=cfg.heads, in_degrees=in_degrees)
    return _link_predictor_class()(enc, cfg.hidden, cfg.decoder)


@dataclass
class _Split:
    pairs: np.ndarray  # (2, P)
    negatives: np.ndarray  # (P, k)
    nodes: np.ndarray  # sorted distinct endpoints


def _eval_split(dataset, name: str, k: int, drawer, index: int) -> _Split:
    import torch

    pairs, fixed = dataset.link_split(name)
    pairs = np.ascontiguousarray(pairs, dtype=np.int64)
    if fixed is not None:
        neg = np.asarray(fixed, dtype=np.int64)
    else:  # per-source candidates keyed by (seed, split): the same every epoch
        neg = drawer.draw_negatives(torch.from_numpy(pairs), epoch=index).cpu().numpy()
    nodes = np.unique(np.concatenate([pairs.ravel(), neg.ravel()]))
    return _Split(pairs, neg, nodes)


def _score(net, h, split: _Split):
    """``(pos (P,), neg (P, k))`` scores of a split's pairs from embeddings ``h`` of
    ``split.nodes`` (rows in their order), in chunks of pairs."""
    import torch

    nodes = torch.from_numpy(split.nodes)
    src = torch.searchsorted(nodes, torch.from_numpy(split.pairs[0]))
    dst = torch.searchsorted(nodes, torch.from_numpy(split.pairs[1]))
    negs = torch.searchsorted(nodes, torch.from_numpy(split.negatives))
    p, k = negs.shape
    pos = torch.empty(p)
    neg = torch.empty(p, k)
    step = max(1, _EVAL_PAIRS_PER_CHUNK // max(1, k + 1))
    with torch.no_grad():
        for a in range(0, p, step):
            b = min(p, a + step)
            hs = h[src[a:b]]
            pos[a:b] = net.decode(hs, h[dst[a:b]]).float()
            neg[a:b] = net.decode(hs.unsqueeze(1).expand(-1, k, -1), h[negs[a:b]]).float()
    return pos.numpy(), neg.numpy()


def _train_epoch(cfg, ddp, opt, loader, state, epoch: int, start, seconds0: float, device: str,
                 rank: int, world_size: int, on_batch):
    """One training epoch (or the rest of an interrupted one, from its sums ``start`` and
    ``seconds0``) -> its ``EpochStats`` without evaluation metrics (``valid``/``test`` filled
    with NaN, for the caller to update)."""
    import torch
    import torch.nn.functional as F

    from .._progress import bar

    ddp.train()
    t0 = time.perf_counter()
    sums = torch.tensor(start, dtype=torch.float64, device=device)  # loss, correct, pairs
    with bar(len(loader), f"epoch {epoch}", enabled=cfg.progress and rank == 0) as pbar:
        pbar.update(int(loader.state_dict()["next_batch"]))
        for batch in loader:
            out = ddp(features_as_float(batch.x), batch.blocks, batch.edge_label_index)
            y = batch.edge_label.to(out.device)
            loss = F.binary_cross_entropy_with_logits(out, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            n = y.shape[0]
            sums += torch.stack([loss.detach().double() * n,
                                 ((out.detach() > 0) == (y > 0.5)).sum().double(),
                                 torch.tensor(float(n), dtype=torch.float64, device=out.device)])
            pbar.update(1)
            if on_batch is not None:
                on_batch(epoch, batch.batch_index)
            if state.stop_requested():
                state.stop_mid_epoch(loader, sums.cpu().tolist(),
                                     seconds0 + time.perf_counter() - t0)
    seconds = seconds0 + time.perf_counter() - t0
    if world_size > 1:
        import torch.distributed as dist

        from ..distributed.sharing import collective_device

        red = sums.to(collective_device())
        dist.all_reduce(red)
        sums = red
    tot = sums.cpu().tolist()
    loss_avg = tot[0] / max(tot[2], 1)
    if not math.isfinite(loss_avg):
        raise GraphfeedError(f"the training loss became {loss_avg} in epoch {epoch}: check "
                             f"the input features, or lower --lr (now {cfg.lr:g})")
    nan = link_metrics(np.zeros(0), np.zeros((0, 1)))
    return EpochStats(epoch=epoch, loss=loss_avg, train_acc=tot[1] / max(tot[2], 1),
                      valid_acc=float("nan"), test_acc=float("nan"),
                      seeds_per_s=tot[2] / (1 + cfg.num_negatives) / max(seconds, 1e-9),
                      batches_per_s=len(loader) / max(seconds, 1e-9), seconds=seconds,
                      peak_rss_bytes=0, valid=dict(nan), test=dict(nan))


def _write_pair_scores(path, net, h, split: _Split, say) -> str:
    """``--predict`` of link prediction: float32 ``(P, 1 + k)``, row ``i`` the test pair ``i``
    (the dataset's test split order): column 0 the pair's score, columns ``1..k`` its ``k``
    evaluation negatives' (the same source, the destinations of ``split.negatives``)."""
    from .loop import save_predictions

    pos, neg = _score(net, h, split)
    scores = np.concatenate([pos[:, None], neg], axis=1).astype(np.float32)
    save_predictions(path, scores)
    say(f"graphfeed train: wrote the scores of {scores.shape[0]:,} test pairs and their "
        f"{scores.shape[1] - 1} negatives each ({scores.shape[0]:,} x {scores.shape[1]} logits) "
        f"to {path}")
    return str(path)


def check_link_dataset(cfg, dataset) -> int:
    """What ``--task link`` refuses before placing data; returns the input width."""
    if dataset.task_type != "link_prediction":
        raise GraphfeedError(
            f"--task link needs a link_prediction dataset (node_pairs splits); {dataset.name!r} "
            f"is a {dataset.task_type} dataset (make one with "
            f"graphfeed.datasets.importers.link.split_dataset, or use the built-in 'link')")
    if "feat" not in dataset.features:
        raise GraphfeedError(f"dataset {dataset.name!r} has no node feature 'feat'")
    if dataset.link_split("train")[0].shape[1] == 0:
        raise GraphfeedError(f"dataset {dataset.name!r} has no training pairs")
    if cfg.predict and cfg.predict_nodes != "test":
        raise GraphfeedError(f"--predict-nodes {cfg.predict_nodes} is for node classification; "
                             f"--task link --predict scores the test pairs")
    if cfg.predict and "test" not in dataset.split_names:
        raise GraphfeedError(f"--predict scores the test pairs, and dataset {dataset.name!r} has "
                             f"no test split")
    shape = dataset.features["feat"].row_shape
    return int(np.prod(shape)) if shape else 1


def check_link_method(method, name: str) -> None:
    """``--task link`` with a bound ``method``: temporal sampling needs node times, since the
    batches and the evaluation sample each endpoint at its node time (pair times, each pair's
    own edge time, are ``LinkSampler(pair_times=)`` from Python, not this trainer yet)."""
    if method.kind == "temporal" and method.arrays.get("node_times") is None:
        raise GraphfeedError(f"--task link --sampler temporal samples each endpoint at its node "
                             f"time, and dataset {name!r} has edge times only; give it node "
                             f"times (prepare generic --node-times), or sample pairs at their "
                             f"own times from Python with LinkSampler(pair_times=...)")


def train_link(cfg, dataset, plan, *, rank: int = 0, world_size: int = 1,
               say: Callable[[str], None] = print, model=None, on_batch=None,
               on_epoch=None) -> TrainResult:
    """One link-prediction run of ``cfg`` on ``dataset`` placed by ``plan`` (a
    ``DataPlan``); see the module docstring. ``model``: ``factory(in_dim) -> LinkPredictor``
    like module (``forward(x, blocks, pair_index)`` and ``decode``), default
    :func:`build_link_model`. ``on_batch(epoch, batch_index)`` after each optimizer step,
    ``on_epoch(stats)`` after each epoch (its checkpoint written), as in
    ``graphfeed.training.train``."""
    import torch

    from ..datasets.link import without_pairs
    from ..loader.dataloader import DataLoader
    from ..loader.item_sampler import ItemSampler
    from ..placement.apply import estimate_bytes
    from ..sampling.link import LinkSampler

    in_dim = check_link_dataset(cfg, dataset)
    undirected = bool(dataset.metadata.graph.undirected)
    train_pairs = np.asarray(dataset.link_split("train")[0], dtype=np.int64)
    held = [np.asarray(dataset.link_split(k)[0], dtype=np.int64) for k in ("valid", "test")
            if k in dataset.split_names]
    placement = plan.decide(*estimate_bytes(dataset.graph, {"feat": dataset.features["feat"]}))
    graph, feats = plan.open(dataset, ["feat"], pins_host=placement.spec.features == "pinned"
                             or placement.spec.graph == "pinned")
    mp_graph = without_pairs(graph, np.concatenate(held, axis=1), reverse=undirected) if held \
        else graph
    method = cfg.sampling_method()
    if not method.is_uniform:
        method = method.bind(dataset)
    check_link_method(method, dataset.name)
    placed = plan.place(mp_graph, {"feat": feats["feat"]}, list(cfg.fanouts),
                        replace=cfg.replace, seed=cfg.seed, placement=placement, method=method)
    # the method's tables: once per machine under several ranks (or mapped from --table-cache),
    # before any loader thread samples
    if world_size > 1 or cfg.table_cache:
        from ..distributed.tables import share_prepared

        share_prepared(placed.sampler, plan.world, private_copy=plan.private_copy,
                       cache_dir=cfg.table_cache)
    device = str(placed.device)
    eval_plan = plan_eval(len(cfg.fanouts), cfg.batch_size,
                          int(mp_graph.in_degrees.max(initial=0)), cfg.eval_fanouts)
    exclude = "reverse" if undirected else "self"
    sampler = LinkSampler(placed.sampler, num_negatives=cfg.num_negatives, exclude=exclude,
                          seed=cfg.seed).with_pairs(train_pairs)
    drawer = LinkSampler(placed.sampler, num_negatives=cfg.eval_negatives,
                         negatives="per_source", seed=cfg.seed)
    splits = {k: _eval_split(dataset, k, cfg.eval_negatives, drawer, i + 1)
              for i, k in enumerate(("valid", "test")) if k in dataset.split_names}
    say(f"graphfeed: placement {placed.placement.reason}")
    say(f"graphfeed train: link prediction on {dataset.name} ({dataset.num_nodes:,} nodes, "
        f"{mp_graph.num_edges:,} message-passing edges of {dataset.num_edges:,}; "
        f"train/valid/test pairs {train_pairs.shape[1]:,}/"
        + "/".join(f"{s.pairs.shape[1]:,}" for s in splits.values())
        + f"); model {cfg.model} + {cfg.decoder} decoder, fanouts {list(cfg.fanouts)}, "
        f"{cfg.num_negatives} negative(s) per pair, {cfg.eval_negatives} per pair in "
        f"evaluation, exclude {exclude}, batch {cfg.batch_size}, device {device}, features "
        f"{cfg.features}, seed {cfg.seed}" + (f", {world_size} ranks" if world_size > 1 else ""))

    torch.manual_seed(cfg.seed)
    if model is None:
        net = build_link_model(cfg, in_dim, in_degrees=mp_graph.in_degrees
                               if cfg.model == "gcn" else None)
    else:
        net = model(in_dim)
    net = net.to(device)
    ddp = net
    if world_size > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        ddp = DDP(net, device_ids=[torch.device(device).index] if device.startswith("cuda")
                  else None)
    opt = torch.optim.Adam(ddp.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    result = TrainResult(mode=placed.mode, placement_reason=placed.placement.reason,
                         world_size=world_size, model=f"{cfg.model}+{cfg.decoder}",
                         seed=cfg.seed, task="link", main_metric="mrr",
                         eval_fanouts=list(eval_plan.fanouts))
    loader = DataLoader(ItemSampler(train_pairs.shape[1], cfg.batch_size, shuffle=True,
                                    seed=cfg.seed, rank=rank, world_size=world_size),
                        sampler, node_features={"feat": placed.features["feat"]},
                        device=placed.device, num_threads=cfg.num_threads,
                        prefetch=cfg.prefetch)
    state = RunState(cfg, net, opt, result, trainer="link", keys=LINK_RESUME_KEYS, rank=rank,
                     world_size=world_size, say=say)
    evaluator = None
    try:
        evaluator = Evaluator(placed, {k: s.nodes for k, s in splits.items()}, eval_plan,
                              seed=cfg.seed, rank=rank, world_size=world_size,
                              num_threads=cfg.num_threads, prefetch=cfg.prefetch, labels=False)
        for epoch, sums, seconds0 in state.epochs(loader):
            es = _train_epoch(cfg, ddp, opt, loader, state, epoch, sums, seconds0, device, rank,
                              world_size, on_batch)
            t1 = time.perf_counter()
            if state.evaluates(epoch):
                for name, split in splits.items():
                    h, _ = evaluator.logits(ddp, name, progress=cfg.progress and rank == 0)
                    getattr(es, name).update(link_metrics(*_score(net, h, split)))
                es.eval_seconds = time.perf_counter() - t1
            else:
                es.skip_evaluation()
            es.peak_rss_bytes, es.rss_bytes = peak_rss_bytes(), current_rss_bytes()
            state.end_epoch(es, es.valid["mrr"] if es.evaluated else float("nan"))
            scores = (f"valid {format_metrics(es.valid)}  test {format_metrics(es.test)}"
                      if es.evaluated else "(not evaluated)")
            say(f"epoch {epoch:2d}  loss {es.loss:.4f}  train acc {es.train_acc:.4f}  {scores}  "
                f"{es.seeds_per_s:,.0f} pairs/s  {es.seconds:.1f}s + eval "
                f"{es.eval_seconds:.1f}s")
            log_epoch(cfg, es, rank)
            if state.finish_epoch(loader, es, on_epoch):
                break
        if not result.epochs:
            raise GraphfeedError("no epoch was run")
        if cfg.predict:
            state.load_best()
            h, _ = evaluator.logits(ddp, "test", progress=cfg.progress and rank == 0)
            if rank == 0:
                result.predictions = _write_pair_scores(cfg.predict, net, h, splits["test"], say)
    finally:
        loader.close()
        if evaluator is not None:
            evaluator.close()
    result.checkpoint = state.checkpoint
    deg = np.asarray(mp_graph.in_degrees, dtype=np.float64)
    result.baselines = {"degree": {name: link_metrics(deg[s.pairs[1]], deg[s.negatives])
                                   for name, s in splits.items()}}
    result.final_test_acc = float("nan")
    say(final_line(result))
    return result
