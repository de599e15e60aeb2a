"""``graphfeed train --task link`` on a typed link dataset (a ``link_prediction`` dataset with
node and edge types, :mod:`graphfeed.datasets.hetero_link`).

- **Graphs.** Message passing runs on the graph without the valid and test edges and their
  reverse edges (the relations whose edges are each other's transpose, read off the graph),
  built once per process (``without_typed_pairs``); each training batch also loses its own
  seed edges and their reverse edges (``HeteroLinkSampler``, ``exclude="reverse"``).
- **Model.** :class:`TypedLinkPredictor`: the R-GCN encoder of :mod:`.hetero` with every
  endpoint type of the predicted relations as output types, and the ``dot``/``mlp`` decoder of
  :mod:`.link` on a pair's two embeddings. Binary cross-entropy on each seed pair and its
  ``--num-negatives`` negatives (the destination corrupted within its type).
- **Evaluation.** Every endpoint of a split (pairs and negatives) is embedded through the
  heterogeneous sampler with the evaluation fanouts (each rank its share; the per-type
  embedding tables are summed across ranks), then each positive is ranked against its
  ``--eval-negatives`` negatives (the dataset's fixed ones, else per-source ones keyed by
  ``(seed, split)``): MRR, Hits@10/50/100 and ROC-AUC over the pairs of every predicted
  relation (:func:`~graphfeed.trainer.link.link_metrics`). A degree baseline scores a pair by
  its destination's in-degree within the relation in the message-passing graph.
- Sampling on the CPU (``HeteroNeighborSampler``) or, in ``--mode cuda-cuda``/``pinned-cuda``,
  the torch heterogeneous sampler with every type's features on the GPU or in pinned host
  memory read through UVA (as node classification on heterogeneous datasets:
  :func:`~graphfeed.trainer.hetero.type_placement`, the message-passing graph's bytes and the
  features' decide whether the mode fits).
- ``--save``/``--resume`` through :class:`~graphfeed.trainer.checkpoint.RunState` (trainer
  ``"hetero-link"``, resume keys :data:`TYPED_LINK_RESUME_KEYS`), as the other trainers.
  Refused: sampling methods other than uniform, partitions.
- ``--predict FILE.npz`` writes the best epoch's test-pair scores, one array per predicted
  relation (:func:`save_typed_predictions`): key ``<src>.<rel>.<dst>``, float32 ``(P_r, 1 + k)``,
  row ``i`` the relation's test pair ``i`` (the dataset's split order), column 0 its logit,
  columns ``1..k`` its ``k`` evaluation negatives' (the layout the homogeneous trainer writes
  for its one relation); saved without pickles, atomically.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import GraphfeedError

__all__ = ["TypedLinkPredictor", "check_typed_link_dataset", "train_typed_link",
           "TYPED_LINK_RESUME_KEYS", "save_typed_predictions", "predictions_key"]


def _resume_keys() -> tuple:
    from .link import LINK_RESUME_KEYS

    # the model is always the R-GCN: --model and --heads do not apply
    return tuple(k for k in LINK_RESUME_KEYS if k not in ("model", "heads"))


#: the settings a resumed run must share with its checkpoint (``--resume``)
TYPED_LINK_RESUME_KEYS = _resume_keys()

#: pairs scored at once in evaluation
_EVAL_PAIRS_PER_CHUNK = 1 << 16


class TypedLinkPredictor(nn.Module):
    """``encoder(x_dict, blocks)`` -> node type -> embeddings of its seeds (a ``HeteroRGCN``
    with several output types); ``forward(x_dict, blocks, index_dict)`` -> edge type -> one
    logit per pair of ``index_dict[et]`` (batch-local ids of the seeds of its source and
    destination types), or the embeddings when ``index_dict`` is ``None``."""

    def __init__(self, encoder: nn.Module, hidden: int, decoder: str = "dot"):
        from .link import _link_predictor_class

        super().__init__()
        self.encoder = encoder
        # the homogeneous predictor's decoder (its encoder slot unused)
        self.link = _link_predictor_class()(nn.Identity(), hidden, decoder)

    def decode(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        return self.link.decode(h_src, h_dst)

    def forward(self, x_dict, blocks, index_dict=None):
        h = self.encoder(x_dict, blocks)
        if index_dict is None:
            return h
        # index_select, not h[...][ei]: the backward of advanced indexing accumulates with
        # atomic adds across torch's CPU threads (a different sum order every run)
        return {et: self.decode(h[et[0]].index_select(0, ei[0]),
                                h[et[2]].index_select(0, ei[1]))
                for et, ei in index_dict.items()}


def check_typed_link_dataset(cfg, dataset) -> list:
    """What ``--task link`` refuses on a typed link dataset before placing data; returns the
    edge types it trains on (those with training pairs)."""
    from ..datasets.hetero_link import typed_link_edge_types

    if dataset.task_type != "link_prediction":
        raise GraphfeedError(f"--task link needs a link_prediction dataset; {dataset.name!r} is a "
                             f"{dataset.task_type} dataset (make typed pairs with graphfeed "
                             f"prepare link-split SRC OUT --relation REL, or use the built-in "
                             f"'hetero-link')")
    if cfg.predict:
        check_typed_predict_path(cfg.predict)
        if cfg.predict_nodes != "test":
            raise GraphfeedError(f"--predict-nodes {cfg.predict_nodes} is for node "
                                 f"classification; --task link --predict scores the test pairs")
    if cfg.partitions:
        raise GraphfeedError("--partitions: typed link datasets train on one graph")
    from .hetero import _check_cfg

    _check_cfg(cfg)  # the heterogeneous trainer's sampling method and modes
    ets = typed_link_edge_types(dataset, "train")
    if not ets:
        raise GraphfeedError(f"dataset {dataset.name!r} has no training pairs")
    if cfg.predict and not set(typed_link_edge_types(dataset, "test")) & set(ets):
        raise GraphfeedError(f"--predict scores the test pairs, and dataset {dataset.name!r} has "
                             f"no test pairs of a relation it trains on ({[list(e) for e in ets]})")
    return ets


def predictions_key(et) -> str:
    """The ``--predict`` ``.npz`` key of edge type ``et``: ``"<src>.<rel>.<dst>"`` (the suffix
    of the dataset's split names)."""
    return ".".join(et)


def check_typed_predict_path(path) -> None:
    """``--predict`` of typed link prediction writes one ``.npz`` (an array per relation)."""
    if not str(path).endswith(".npz"):
        raise GraphfeedError(f"--predict {path}: typed link prediction writes one .npz (an array "
                             f"per relation, keys <src>.<rel>.<dst>); give a path ending in .npz")


def save_typed_predictions(path, scores: dict) -> str:
    """Write ``scores`` (edge type -> float32 ``(P_r, 1 + k)``) to ``.npz`` file ``path``
    atomically (temp file, fsync, rename), without pickles: key :func:`predictions_key`, row
    ``i`` the relation's test pair ``i`` (the dataset's split order), column 0 its logit, columns
    ``1..k`` its evaluation negatives'. Read back with ``np.load(path, allow_pickle=False)``."""
    from .._io import atomic_write

    check_typed_predict_path(path)
    arrays = {predictions_key(et): np.ascontiguousarray(a, dtype=np.float32)
              for et, a in scores.items()}
    try:
        # float32 arrays: nothing to pickle (older numpy's np.savez has no allow_pickle keyword
        # and would store it as one more array)
        atomic_write(path, lambda f: np.savez(f, **arrays))
    except OSError as e:
        raise GraphfeedError(f"cannot write predictions to {path}: {e.strerror or e}") from None
    return str(path)


def _eval_pairs(dataset, name, ets, k, drawer, index) -> dict:
    """Edge type -> ``(pairs (2, P), negatives (P, k))`` of split ``name`` (type-local)."""
    from ..datasets.hetero_link import typed_link_split

    out = {}
    for et, (pairs, fixed) in typed_link_split(dataset, name).items():
        if et not in ets:
            continue
        pairs = np.ascontiguousarray(pairs, dtype=np.int64)
        if fixed is not None:
            neg = np.asarray(fixed, dtype=np.int64)
        else:
            neg = drawer.draw_negatives(et, torch.from_numpy(pairs), epoch=index).cpu().numpy()
        out[et] = (pairs, neg)
    return out


def _score(net, emb: dict, pairs: dict):
    """``(pos (P,), neg (P, k))`` over every edge type of ``pairs``, from per-type embedding
    tables ``emb`` (rows = type-local ids)."""
    pos_all, neg_all = [], []
    dev = next(net.parameters()).device
    emb = {t: e.to(dev) for t, e in emb.items()}
    with torch.no_grad():
        for (s, _, d), (p, n) in pairs.items():
            k = n.shape[1]
            step = max(1, _EVAL_PAIRS_PER_CHUNK // (k + 1))
            for a in range(0, p.shape[1], step):
                b = min(p.shape[1], a + step)
                hs = emb[s][torch.from_numpy(p[0, a:b]).to(dev)]
                pos_all.append(net.decode(hs, emb[d][torch.from_numpy(p[1, a:b]).to(dev)])
                               .float().cpu())
                neg_all.append(net.decode(hs.unsqueeze(1).expand(-1, k, -1),
                                          emb[d][torch.from_numpy(n[a:b]).to(dev)]).float().cpu())
    if not pos_all:
        return np.zeros(0), np.zeros((0, 1))
    return torch.cat(pos_all).numpy(), torch.cat(neg_all).numpy()


def _write_typed_pair_scores(path, net, emb: dict, pairs: dict, say) -> str:
    """``--predict``: per relation of the test split, float32 ``(P_r, 1 + k)`` (column 0 each
    test pair's logit, columns ``1..k`` its evaluation negatives'), one ``.npz``."""
    scores = {}
    for et, pn in pairs.items():
        pos, neg = _score(net, emb, {et: pn})
        scores[et] = np.concatenate([pos.reshape(-1, 1), neg.reshape(pos.shape[0], -1)],
                                    axis=1).astype(np.float32)
    from .link import link_metrics
    from .metrics import format_metrics

    save_typed_predictions(path, scores)
    say(f"graphfeed train: wrote the scores of the test pairs and their negatives to {path}: "
        + ", ".join(f"{predictions_key(et)} {a.shape[0]:,} x {a.shape[1]}"
                    for et, a in scores.items()))
    for et, a in scores.items():  # the test metrics above are over every relation's pairs
        say(f"  test {predictions_key(et)}: "
            f"{format_metrics(link_metrics(a[:, 0], a[:, 1:]))}")
    return str(path)


def _epoch_line(es) -> str:
    from .metrics import format_metrics

    scores = ([f"valid {format_metrics(es.valid)}", f"test {format_metrics(es.test)}"]
              if es.evaluated else ["(not evaluated)"])
    return "  ".join([f"epoch {es.epoch:2d}", f"loss {es.loss:.4f}",
                      f"train acc {es.train_acc:.4f}", *scores, f"{es.seeds_per_s:,.0f} pairs/s",
                      f"{es.seconds:.1f}s + eval {es.eval_seconds:.1f}s"])


def train_typed_link(cfg, dataset, device: str, *, rank: int = 0, world_size: int = 1,
                     say: Callable[[str], None] = print, on_batch=None, on_epoch=None):
    """One typed link-prediction run of ``cfg`` on ``dataset`` (see the module docstring)."""
    from .._memory import current_rss_bytes, peak_rss_bytes
    from ..datasets.hetero_link import (reverse_edge_types, typed_link_split,
                                        without_typed_pairs)
    from ..loader.hetero import HeteroDataLoader
    from ..loader.hetero_link import HeteroLinkDataLoader
    from ..loader.item_sampler import ItemSampler
    from ..sampling.hetero_link import HeteroLinkSampler
    from .checkpoint import RunState
    from .evaluate import unwrap
    from .hetero import (HeteroRGCN, _open_type_features, hetero_sampler, place_type_features,
                         type_placement)
    from .link import link_metrics
    from .loop import _all_reduce
    from .report import final_line, log_epoch
    from .result import EpochStats, TrainResult

    ets = check_typed_link_dataset(cfg, dataset)
    h = dataset.hetero
    rev = reverse_edge_types(h)
    train = {et: np.asarray(p, dtype=np.int64)
             for et, (p, _) in typed_link_split(dataset, "train").items() if et in ets}
    held = {}
    for name in ("valid", "test"):
        for et, (p, _) in typed_link_split(dataset, name).items():
            held.setdefault(et, []).append(np.asarray(p, dtype=np.int64))
    mp = without_typed_pairs(h, {et: np.concatenate(v, axis=1) for et, v in held.items()},
                             reverse=rev)
    exclude = "reverse" if any(et in rev for et in ets) else "self"
    tfeats = _open_type_features(dataset, cfg.features, cfg.cache_size, cfg.cache_policy)
    # in --mode cuda-cuda/pinned-cuda each type's features sit beside the sampled ids (the
    # homogeneous modes' placing), decided before the sampler copies the graph; else read by
    # the CPU
    where = type_placement(cfg, mp, tfeats, device)
    node_sampler = hetero_sampler(cfg, mp, device)
    placed = place_type_features(where, tfeats, device)
    sampler = HeteroLinkSampler(node_sampler, num_negatives=cfg.num_negatives, exclude=exclude,
                                reverse_edge_types=rev, seed=cfg.seed).with_pairs(train)
    drawer = HeteroLinkSampler(node_sampler, num_negatives=cfg.eval_negatives,
                               negatives="per_source", seed=cfg.seed)
    splits = {name: _eval_pairs(dataset, name, ets, cfg.eval_negatives, drawer, i + 1)
              for i, name in enumerate(("valid", "test"))}
    eval_fanouts = list(cfg.eval_fanouts or cfg.fanouts)
    eval_sampler = node_sampler.with_fanouts(eval_fanouts)
    in_dims = {t: int(np.prod(f["feat"].row_shape) or 1) for t, f in tfeats.items() if "feat" in f}
    out_types = tuple(t for t in h.node_types if any(t in (et[0], et[2]) for et in ets))
    n_train = sum(int(p.shape[1]) for p in train.values())
    say(f"graphfeed train: typed link prediction on {dataset.name} ({h.num_nodes:,} nodes of "
        f"{h.num_node_types} types, {mp.num_edges:,} message-passing edges of {h.num_edges:,}; "
        f"predicting {[list(e) for e in ets]}; train/valid/test pairs {n_train:,}/"
        + "/".join(f"{sum(p.shape[1] for p, _ in s.values()):,}" for s in splits.values())
        + f"); model R-GCN + {cfg.decoder} decoder, fanouts {list(cfg.fanouts)} per edge type, "
        f"{cfg.num_negatives} negative(s) per pair, {cfg.eval_negatives} per pair in "
        f"evaluation, exclude {exclude} (reverse relations {[[a[1], b[1]] for a, b in rev.items()]}), "
        f"batch {cfg.batch_size}, device {device}, features {cfg.features}, seed {cfg.seed}"
        + (f", {world_size} ranks" if world_size > 1 else ""))

    torch.manual_seed(cfg.seed)
    encoder = HeteroRGCN(h.node_types, h.edge_types, in_dims, cfg.hidden, cfg.hidden,
                         len(cfg.fanouts), out_types, cfg.dropout)
    net = TypedLinkPredictor(encoder, cfg.hidden, cfg.decoder).to(device)
    ddp = net
    if world_size > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        ddp = DDP(net, device_ids=[torch.device(device).index] if device.startswith("cuda")
                  else None)
    opt = torch.optim.Adam(ddp.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    gpu_sampling = device.startswith("cuda") and cfg.mode in ("cuda-cuda", "pinned-cuda")
    result = TrainResult(mode=cfg.mode if gpu_sampling else
                         ("cpu-cpu" if device == "cpu" else "cpu-cuda"),
                         placement_reason="typed link datasets sample the heterogeneous graph"
                         + (" on the GPU" if gpu_sampling else " on the CPU")
                         + (f", per-type features {placed.where} ({where.reason})"
                            if where is not None else ", per-type features read by the CPU"),
                         world_size=world_size, model=f"rgcn+{cfg.decoder}", seed=cfg.seed,
                         task="link", main_metric="mrr", eval_fanouts=eval_fanouts)
    if gpu_sampling:
        say(f"graphfeed: placement {result.placement_reason}")
    loader = HeteroLinkDataLoader(
        ItemSampler(n_train, cfg.batch_size, shuffle=True, seed=cfg.seed, rank=rank,
                    world_size=world_size),
        sampler, type_features=placed.features, num_threads=cfg.num_threads,
        prefetch=cfg.prefetch)
    # the nodes the splits need embedded (global ids, embedded once per epoch for both
    # splits): this rank embeds its contiguous share
    ids = [np.zeros(0, np.int64)]
    for pairs in splits.values():
        for (s, _, d), (p, n) in pairs.items():
            ids += [p[0] + h.node_offsets[h.type_id(s)],
                    np.concatenate([p[1], n.ravel()]) + h.node_offsets[h.type_id(d)]]
    need = np.array_split(np.unique(np.concatenate(ids)), world_size)[rank]

    def embed() -> dict:
        net.eval()
        emb = {t: torch.zeros(h.num_nodes_of(t), cfg.hidden) for t in out_types}
        ld = HeteroDataLoader(ItemSampler(need, cfg.batch_size, shuffle=False, seed=cfg.seed),
                              eval_sampler, type_features=placed.features,
                              num_threads=cfg.num_threads, prefetch=cfg.prefetch)
        try:
            with torch.no_grad():
                for mb in ld:
                    mb = mb.to(device)
                    out = net(mb.x_dict, mb.blocks)
                    for t, rows in mb.seed_dict.items():
                        if t in emb and rows.numel():
                            emb[t][rows.cpu()] = out[t].float().cpu()
        finally:
            ld.close()
        if world_size > 1:  # every rank embedded its share: the sum is the whole table
            import torch.distributed as dist

            from ..distributed.sharing import collective_device

            for t in out_types:
                red = emb[t].to(collective_device())
                dist.all_reduce(red)
                emb[t] = red.cpu()
        return emb

    state = RunState(cfg, net, opt, result, trainer="hetero-link", keys=TYPED_LINK_RESUME_KEYS,
                     rank=rank, world_size=world_size, say=say)
    try:
        for epoch, sums, seconds0 in state.epochs(loader):
            ddp.train()
            t0 = time.perf_counter()
            for mb in loader:
                mb = mb.to(device)
                out = ddp({t: v for t, v in mb.x_dict.items()}, mb.blocks,
                          mb.edge_label_index_dict)
                labels = mb.edge_label_dict
                logit = torch.cat([out[et] for et in out])
                y = torch.cat([labels[et] for et in out]).to(logit.device)
                loss = F.binary_cross_entropy_with_logits(logit, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sums[0] += float(loss.detach()) * len(y)
                sums[1] += float(((logit.detach() > 0) == (y > 0.5)).sum())
                sums[2] += len(y)
                if on_batch is not None:
                    on_batch(epoch, mb.batch_index)
                if state.stop_requested():
                    state.stop_mid_epoch(loader, sums, seconds0 + time.perf_counter() - t0)
            seconds = seconds0 + time.perf_counter() - t0
            tot = _all_reduce(sums) if world_size > 1 else sums
            loss_avg = tot[0] / max(tot[2], 1)
            if not math.isfinite(loss_avg):
                raise GraphfeedError(f"the training loss became {loss_avg} in epoch {epoch}: "
                                     f"check the input features, or lower --lr (now "
                                     f"{cfg.lr:g})")
            t1 = time.perf_counter()
            evaluated = state.evaluates(epoch)
            emb = embed() if evaluated else None
            metrics = {name: link_metrics(*_score(unwrap(ddp), emb, pairs)) if evaluated else {}
                       for name, pairs in splits.items()}
            es = EpochStats(
                epoch=epoch, loss=loss_avg, train_acc=tot[1] / max(tot[2], 1),
                valid_acc=float("nan"), test_acc=float("nan"),
                seeds_per_s=tot[2] / (1 + cfg.num_negatives) / max(seconds, 1e-9),
                batches_per_s=len(loader) / max(seconds, 1e-9), seconds=seconds,
                peak_rss_bytes=peak_rss_bytes(), valid=metrics["valid"],
                test=metrics["test"], eval_seconds=time.perf_counter() - t1,
                rss_bytes=current_rss_bytes())
            if not evaluated:
                es.skip_evaluation()
            state.end_epoch(es, es.valid["mrr"] if evaluated else float("nan"))
            say(_epoch_line(es))
            log_epoch(cfg, es, rank)
            if state.finish_epoch(loader, es, on_epoch):
                break
        if not result.epochs:
            raise GraphfeedError("no epoch was run")
        if cfg.predict:  # the best epoch's weights; every rank embeds its share, rank 0 writes
            state.load_best()
            emb = embed()
            if rank == 0:
                result.predictions = _write_typed_pair_scores(cfg.predict, net, emb,
                                                              splits["test"], say)
    finally:
        loader.close()
    result.checkpoint = state.checkpoint
    # degree baseline: the destination's in-degree within the relation (message-passing graph)
    deg = {}
    for et in ets:
        _, dst = mp.edges_of(et)
        deg[et] = torch.from_numpy(np.bincount(dst, minlength=mp.num_nodes_of(et[2])).astype(
            np.float64))
    result.baselines = {"degree": {}}
    for name, pairs in splits.items():
        pos = [deg[et][torch.from_numpy(p[1])].numpy() for et, (p, _) in pairs.items()]
        neg = [deg[et][torch.from_numpy(n)].numpy() for et, (_, n) in pairs.items()]
        result.baselines["degree"][name] = link_metrics(
            np.concatenate(pos) if pos else np.zeros(0),
            np.concatenate(neg) if neg else np.zeros((0, 1)))
    result.final_test_acc = float("nan")
    say(final_line(result))
    return result
