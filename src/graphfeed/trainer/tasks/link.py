"""Link prediction, the ``link`` task (``--task link``), on a ``link_prediction`` dataset,
homogeneous or typed.

- **Graphs.** The dataset's graph holds every edge (split pairs included). Message passing
  runs on the graph without the valid and test pairs (and their reverses: the reverse edge of an
  undirected graph, or the relations whose edges are each other's transpose in a typed one),
  built once per process (``without_pairs`` / ``without_typed_pairs``, O(E)); each training
  batch also loses its own seed pairs (``LinkSampler``'s exclusion, per relation), so
  the model never reads the edge it is asked about.
- **Model.** ``graphfeed.models.LinkPredictor`` (a ``--model`` encoder) or
  ``TypedLinkPredictor`` (the R-GCN with every endpoint type of the predicted relations as
  output types), with the ``dot``/``mlp`` decoder. Binary cross-entropy on each seed pair and its
  ``--num-negatives`` uniform negatives (corrupted destinations, within their type).
- **Evaluation.** Every endpoint of a split (pairs and negatives) is embedded: layer-wise over
  the message-passing graph for the built-in encoders, the typed graphs' R-GCN included (exact,
  every neighbour: ``--eval auto`` or ``layerwise``), else through the evaluation sampler
  (custom encoders, ``--eval sampled``; each rank its share, gathered); then each positive is
  ranked against its ``--eval-negatives`` negatives: the dataset's fixed ones, else per-source
  uniform ones keyed by ``(seed, split)``, the same every epoch. Metrics: MRR, Hits@10/50/100
  (ties count one half, as OGB) and ROC-AUC of the positives against as many negatives (each
  one's first). The best epoch is the best valid MRR. A degree baseline (score = the destination's in-degree in
  the message-passing graph, within the relation) is scored on the same pairs.
- ``--predict``: the best epoch's test-pair scores, float32 ``(P, 1 + k)`` (column 0 each test
  pair's logit, columns ``1..k`` its evaluation negatives'); typed: one such array per relation
  in one ``.npz`` (key ``<src>.<rel>.<dst>``).
"""

from __future__ import annotations

import numpy as np

from ...errors import GraphfeedError
from ..config import TrainConfig
from ..evaluate import Evaluator, features_as_float, plan_eval, resolve_eval_method, unwrap
from ..metrics import roc_auc
from ..result import TrainResult
from .base import Task

#: the settings a resumed run must share with its checkpoint (``--resume``)
LINK_RESUME_KEYS = TrainConfig.RESUME_KEYS + ("decoder", "num_negatives", "eval_negatives")
#: typed: the model is always the R-GCN, so ``--model`` and ``--heads`` do not matter
TYPED_LINK_RESUME_KEYS = tuple(k for k in LINK_RESUME_KEYS if k not in ("model", "heads"))
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


# ---------------------------------------------------------------------------- checks
def check_link_dataset(cfg, dataset) -> int:
    """What ``--task link`` refuses on a homogeneous dataset before placing data; returns the
    input width."""
    if dataset.task_type != "link_prediction":
        raise GraphfeedError(
            f"--task link needs a link_prediction dataset (node_pairs splits); {dataset.name!r} "
            f"is a {dataset.task_type} dataset: split its edges into one with graphfeed prepare "
            f"link-split {cfg.dataset} OUT (or use the built-in 'link')")
    if "feat" not in dataset.features:
        raise GraphfeedError(f"dataset {dataset.name!r} has no node feature 'feat'")
    if dataset.link_split("train")[0].shape[1] == 0:
        raise GraphfeedError(f"dataset {dataset.name!r} has no training pairs")
    _check_predict(cfg)
    if cfg.predict and "test" not in dataset.split_names:
        raise GraphfeedError(f"--predict scores the test pairs, and dataset {dataset.name!r} has "
                             f"no test split")
    shape = dataset.features["feat"].row_shape
    return int(np.prod(shape)) if shape else 1


def _check_predict(cfg) -> None:
    if cfg.predict and cfg.predict_nodes != "test":
        raise GraphfeedError(f"--predict-nodes {cfg.predict_nodes} is for node classification; "
                             f"--task link --predict scores the test pairs")


def check_link_method(method, name: str) -> None:
    """``--task link`` with a bound ``method``: temporal sampling needs node times, since the
    batches and the evaluation sample each endpoint at its node time (pair times, each pair's
    own edge time, are ``LinkSampler(pair_times=)`` from Python, not this task yet)."""
    if method.kind == "temporal" and method.arrays.get("node_times") is None:
        raise GraphfeedError(f"--task link --sampler temporal samples each endpoint at its node "
                             f"time, and dataset {name!r} has edge times only; give it node "
                             f"times (prepare generic --node-times), or sample pairs at their "
                             f"own times from Python with LinkSampler(pair_times=...)")


def check_typed_link_dataset(cfg, dataset) -> list:
    """What ``--task link`` refuses on a typed link dataset before placing data; returns the
    edge types it trains on (those with training pairs)."""
    from ...datasets.hetero_link import typed_link_edge_types

    if dataset.task_type != "link_prediction":
        raise GraphfeedError(f"--task link needs a link_prediction dataset; {dataset.name!r} is a "
                             f"{dataset.task_type} dataset (make typed pairs with graphfeed "
                             f"prepare link-split SRC OUT --relation REL, or use the built-in "
                             f"'hetero-link')")
    if cfg.predict:
        check_typed_predict_path(cfg.predict)
    _check_predict(cfg)
    if cfg.partitions:
        raise GraphfeedError("--partitions: typed link datasets train on one graph")
    from .node import refuse_rgcn_options

    refuse_rgcn_options(cfg)
    if cfg.sampling_method().kind != "uniform":
        raise GraphfeedError(f"heterogeneous datasets are sampled uniformly; got "
                             f"{cfg.sampling_method().describe()}")
    ets = typed_link_edge_types(dataset, "train")
    if not ets:
        raise GraphfeedError(f"dataset {dataset.name!r} has no training pairs")
    if cfg.predict and not set(typed_link_edge_types(dataset, "test")) & set(ets):
        raise GraphfeedError(f"--predict scores the test pairs, and dataset {dataset.name!r} has "
                             f"no test pairs of a relation it trains on ({[list(e) for e in ets]})")
    return ets


# ---------------------------------------------------------------------------- predictions
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
    from ..._io import atomic_write

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


# ---------------------------------------------------------------------------- scoring
def _score(net, emb: dict, pairs: dict):
    """``(pos (P,), neg (P, k))`` over every relation of ``pairs`` (edge type -> ``(pairs (2,
    P), negatives (P, k))``, type-local ids) from embeddings ``emb``: node type -> ``(rows,
    nodes)``, row ``i`` the embedding of node ``nodes[i]`` (sorted ids), or of node ``i`` when
    ``nodes`` is ``None``; a homogeneous graph is the one type ``None``. In chunks of pairs."""
    import torch

    pos_all, neg_all = [], []
    dev = next(net.parameters()).device

    def rows(t, ids):
        table, nodes = emb[t]
        idx = torch.from_numpy(np.ascontiguousarray(ids))
        if nodes is not None:
            idx = torch.searchsorted(torch.from_numpy(nodes), idx)
        return table[idx].to(dev)

    with torch.no_grad():
        for (s, _, d), (p, n) in pairs.items():
            k = n.shape[1]
            step = max(1, _EVAL_PAIRS_PER_CHUNK // (k + 1))
            for a in range(0, p.shape[1], step):
                b = min(p.shape[1], a + step)
                hs = rows(s, p[0, a:b])
                pos_all.append(net.decode(hs, rows(d, p[1, a:b])).float().cpu())
                neg_all.append(net.decode(hs.unsqueeze(1).expand(-1, k, -1),
                                          rows(d, n[a:b])).float().cpu())
    if not pos_all:
        return np.zeros(0), np.zeros((0, 1))
    return torch.cat(pos_all).numpy(), torch.cat(neg_all).numpy()


#: the one edge type of a homogeneous graph, as the scoring code sees it
_HOMO = (None, None, None)


class LinkTask(Task):
    """Link prediction (module docstring). Build it with :meth:`prepare`."""

    main = "mrr"
    unit = "pairs"
    #: what the link figures (Cora ROC-AUC 0.93 in 20 epochs, hetero-link) were measured with:
    #: every training edge is a label, so link prediction needs less regularisation
    defaults = {"dropout": 0.5, "weight_decay": 0.0}

    def __init__(self, cfg, *, data, dataset, mp, train_pairs: dict, splits: dict, in_dim,
                 device: str, rank: int = 0, world_size: int = 1, say=print,
                 model_factory=None, eval_plan=None, out_types=(), exclude: str = "self"):
        super().__init__(cfg, device=device, rank=rank, world_size=world_size, say=say)
        self.data, self.dataset, self.mp = data, dataset, mp
        self.train_pairs, self.splits, self.in_dim = train_pairs, splits, in_dim
        self.factory, self.eval_plan, self.out_types = model_factory, eval_plan, out_types
        self.typed = _HOMO not in train_pairs
        self.trainer = "hetero-link" if self.typed else "link"
        self.resume_keys = TYPED_LINK_RESUME_KEYS if self.typed else LINK_RESUME_KEYS
        self.rows_per_seed = 1 + cfg.num_negatives
        self.exclude = exclude
        self.evaluator = None
        self.eval_method = "sampled"

    # ------------------------------------------------------------------ building
    @classmethod
    def check(cls, cfg, dataset, device: str) -> dict:
        """``--dry-run``: the checks :meth:`prepare` makes before placing data, and what the
        run would train."""
        out = {"decoder": cfg.decoder, "fanouts": list(cfg.fanouts)}
        if getattr(dataset, "hetero", None) is not None:
            return {"model": "rgcn", "edge_types": [list(e) for e in
                                                    check_typed_link_dataset(cfg, dataset)], **out}
        in_dim = check_link_dataset(cfg, dataset)
        method = cfg.sampling_method()
        if not method.is_uniform:
            method = method.bind(dataset)
        check_link_method(method, dataset.name)
        return {"model": cfg.model, "in_dim": in_dim, **out}

    @classmethod
    def prepare(cls, cfg, dataset, plan, *, rank: int, world_size: int, say, model=None):
        if getattr(dataset, "hetero", None) is not None:
            return cls._prepare_typed(cfg, dataset, plan, rank=rank, world_size=world_size,
                                      say=say)
        import torch

        from ...datasets.link import without_pairs
        from ...placement.apply import estimate_bytes
        from ...sampling.link import LinkSampler

        in_dim = check_link_dataset(cfg, dataset)
        undirected = bool(dataset.metadata.graph.undirected)
        train = np.asarray(dataset.link_split("train")[0], dtype=np.int64)
        held = [np.asarray(dataset.link_split(k)[0], dtype=np.int64) for k in ("valid", "test")
                if k in dataset.split_names]
        plan = plan.for_dataset(dataset, ["feat"])
        placement = plan.decide(*estimate_bytes(dataset.graph, {"feat": dataset.features["feat"]}))
        graph, feats = plan.open(dataset, ["feat"], pins_host=placement.spec.features == "pinned"
                                 or placement.spec.graph == "pinned")
        mp = (without_pairs(graph, np.concatenate(held, axis=1), reverse=undirected) if held
              else graph)
        method = cfg.sampling_method()
        if not method.is_uniform:
            method = method.bind(dataset)
        check_link_method(method, dataset.name)
        placed = plan.place(mp, {"feat": feats["feat"]}, list(cfg.fanouts), replace=cfg.replace,
                            seed=cfg.seed, placement=placement, method=method)
        if world_size > 1 or cfg.table_cache:  # the method's tables once per machine
            from ...distributed.tables import share_prepared

            share_prepared(placed.sampler, plan.world, private_copy=plan.private_copy,
                           cache_dir=cfg.table_cache)
        eval_plan = plan_eval(len(cfg.fanouts), cfg.batch_size,
                              int(mp.in_degrees.max(initial=0)), cfg.eval_fanouts,
                              in_dim=in_dim)
        drawer = LinkSampler(placed.sampler, num_negatives=cfg.eval_negatives,
                             negatives="per_source", seed=cfg.seed)
        splits = {}
        for i, k in enumerate(("valid", "test")):
            if k not in dataset.split_names:
                continue
            pairs, fixed = dataset.link_split(k)
            pairs = np.ascontiguousarray(pairs, dtype=np.int64)
            neg = (np.asarray(fixed, dtype=np.int64) if fixed is not None else  # keyed by split
                   drawer.draw_negatives(torch.from_numpy(pairs), epoch=i + 1).cpu().numpy())
            splits[k] = {_HOMO: (pairs, neg)}
        exclude = "reverse" if undirected else "self"
        say(f"graphfeed: placement {placed.placement.reason}")
        say(f"graphfeed train: link prediction on {dataset.name} ({dataset.num_nodes:,} nodes, "
            f"{mp.num_edges:,} message-passing edges of {dataset.num_edges:,}; "
            f"train/valid/test pairs {train.shape[1]:,}/"
            + "/".join(f"{s[_HOMO][0].shape[1]:,}" for s in splits.values())
            + f"); model {cfg.model} + {cfg.decoder} decoder, fanouts {list(cfg.fanouts)}, "
            f"{cfg.num_negatives} negative(s) per pair, {cfg.eval_negatives} per pair in "
            f"evaluation, exclude {exclude}, batch {cfg.batch_size}, device {placed.device}, "
            f"features {cfg.features}, seed {cfg.seed}"
            + (f", {world_size} ranks" if world_size > 1 else ""))
        return cls(cfg, data=placed, dataset=dataset, mp=mp, train_pairs={_HOMO: train},
                   splits=splits, in_dim=in_dim, device=str(placed.device), rank=rank,
                   world_size=world_size, say=say, model_factory=model, eval_plan=eval_plan,
                   exclude=exclude)

    @classmethod
    def _prepare_typed(cls, cfg, dataset, plan, *, rank, world_size, say):
        import torch

        from ...datasets.hetero_link import (reverse_edge_types, typed_link_split,
                                             without_typed_pairs)
        from ...models import typed_in_dims
        from ...placement.typed import describe
        from ...sampling.link import LinkSampler

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
        placed = plan.place_typed(dataset, list(cfg.fanouts), graph=mp, replace=cfg.replace,
                                  seed=cfg.seed, labels=False)
        drawer = LinkSampler(placed.sampler, num_negatives=cfg.eval_negatives,
                             negatives="per_source", seed=cfg.seed)
        splits = {}
        for i, name in enumerate(("valid", "test")):
            out = {}
            for et, (pairs, fixed) in typed_link_split(dataset, name).items():
                if et not in ets:
                    continue
                pairs = np.ascontiguousarray(pairs, dtype=np.int64)
                neg = (np.asarray(fixed, dtype=np.int64) if fixed is not None else
                       drawer.draw_negatives(torch.from_numpy(pairs), edge_type=et,
                                             epoch=i + 1).cpu().numpy())
                out[et] = (pairs, neg)
            splits[name] = out
        out_types = tuple(t for t in h.node_types if any(t in (et[0], et[2]) for et in ets))
        n_train = sum(int(p.shape[1]) for p in train.values())
        say(f"graphfeed: placement {describe(placed)}")
        say(f"graphfeed train: typed link prediction on {dataset.name} ({h.num_nodes:,} nodes of "
            f"{h.num_node_types} types, {mp.num_edges:,} message-passing edges of "
            f"{h.num_edges:,}; predicting {[list(e) for e in ets]}; train/valid/test pairs "
            f"{n_train:,}/" + "/".join(f"{sum(p.shape[1] for p, _ in s.values()):,}"
                                       for s in splits.values())
            + f"); model R-GCN + {cfg.decoder} decoder, fanouts {list(cfg.fanouts)} per edge "
            f"type, {cfg.num_negatives} negative(s) per pair, {cfg.eval_negatives} per pair in "
            f"evaluation, exclude {exclude} (reverse relations "
            f"{[[a[1], b[1]] for a, b in rev.items()]}), batch {cfg.batch_size}, device "
            f"{plan.device}, features {cfg.features}, seed {cfg.seed}"
            + (f", {world_size} ranks" if world_size > 1 else ""))
        task = cls(cfg, data=placed, dataset=dataset, mp=mp, train_pairs=train, splits=splits,
                   in_dim=typed_in_dims(placed.features), device=str(plan.device), rank=rank,
                   world_size=world_size, say=say, out_types=out_types, exclude=exclude)
        task.reverse = rev
        return task

    def build_model(self):
        cfg = self.cfg
        if self.typed:
            from ...models import HeteroRGCN, TypedLinkPredictor
            from ..layerwise_typed import supports_typed_layerwise

            h = self.dataset.hetero
            enc = HeteroRGCN(h.node_types, h.edge_types, self.in_dim, cfg.hidden, cfg.hidden,
                             len(cfg.fanouts), self.out_types, cfg.dropout)
            # the R-GCN encoder evaluates layer-wise over the message-passing graph
            self.eval_method = resolve_eval_method(
                cfg, supported=supports_typed_layerwise(enc),
                why_not="the typed encoder is not graphfeed's HeteroRGCN")
            return TypedLinkPredictor(enc, cfg.hidden, cfg.decoder)
        if self.factory is not None:
            net = self.factory(self.in_dim)
        else:
            from ...models import build_link_model

            net = build_link_model(cfg, self.in_dim, in_degrees=self.mp.in_degrees
                                   if cfg.model == "gcn" else None)
        # layer-wise evaluation of the encoder where it is exact (the built-in encoders)
        from ..layerwise import supports_layerwise

        enc = getattr(net, "encoder", None)
        self.eval_method = resolve_eval_method(
            cfg, supported=enc is not None and supports_layerwise(enc),
            why_not=f"the encoder of {type(net).__name__} is not a graphfeed BlockGNN whose every "
                    f"layer depends only on its destinations' in-edges")
        return net

    def result(self) -> TrainResult:
        cfg = self.cfg
        fanouts = ([-1] * len(cfg.fanouts) if self.eval_method == "layerwise"
                   else list(cfg.eval_fanouts or cfg.fanouts) if self.typed
                   else list(self.eval_plan.fanouts))
        model = f"rgcn+{cfg.decoder}" if self.typed else f"{cfg.model}+{cfg.decoder}"
        if self.typed:
            from ...placement.typed import describe

            reason = describe(self.data)
        else:
            reason = self.data.placement.reason
        return TrainResult(mode=self.data.mode, placement_reason=reason,
                           model=model, task="link", main_metric="mrr", eval_fanouts=fanouts,
                           eval_method=self.eval_method)

    def train_loader(self):
        from ...loader.item_sampler import ItemSampler

        cfg = self.cfg
        n = sum(int(p.shape[1]) for p in self.train_pairs.values())
        items = ItemSampler(n, cfg.batch_size, shuffle=True, seed=cfg.seed, rank=self.rank,
                            world_size=self.world_size)
        from ...loader.dataloader import DataLoader
        from ...sampling.link import LinkSampler

        if self.typed:
            s = LinkSampler(self.data.sampler, num_negatives=cfg.num_negatives,
                            exclude=self.exclude, reverse_edge_types=self.reverse,
                            seed=cfg.seed).with_pairs(self.train_pairs)
            return DataLoader(items, s, type_features=self.data.features,
                              num_threads=cfg.num_threads, prefetch=cfg.prefetch)

        s = LinkSampler(self.data.sampler, num_negatives=cfg.num_negatives, exclude=self.exclude,
                        seed=cfg.seed).with_pairs(self.train_pairs[_HOMO])
        return DataLoader(items, s, node_features={"feat": self.data.features["feat"]},
                          device=self.data.device, num_threads=cfg.num_threads,
                          prefetch=cfg.prefetch)

    def step(self, model, batch):
        import torch
        import torch.nn.functional as F

        if self.typed:
            batch = batch.to(self.device)
            out = model(batch.x_dict, batch.blocks, batch.edge_label_index_dict)
            logit = torch.cat([out[et] for et in out])
            y = torch.cat([batch.edge_label_dict[et] for et in out]).to(logit.device)
        else:
            logit = model(features_as_float(batch.x), batch.blocks, batch.edge_label_index)
            y = batch.edge_label.to(logit.device)
        loss = F.binary_cross_entropy_with_logits(logit, y)
        return loss, ((logit.detach() > 0) == (y > 0.5)).sum(), int(y.shape[0])

    # ------------------------------------------------------------------ evaluation
    def open_evaluation(self, net) -> None:
        cfg = self.cfg
        if self.typed:
            h = self.dataset.hetero
            ids = [np.zeros(0, np.int64)]
            for pairs in self.splits.values():
                for (s, _, d), (p, n) in pairs.items():
                    ids += [p[0] + h.node_offsets[h.type_id(s)],
                            np.concatenate([p[1], n.ravel()]) + h.node_offsets[h.type_id(d)]]
            need = np.unique(np.concatenate(ids))
            if self.eval_method == "layerwise":  # the R-GCN's layers over the message-passing
                # graph, the nodes the splits need embedded once per evaluation for both splits
                from ..layerwise_typed import TypedLayerwiseEvaluator

                self.need = need
                self.evaluator = TypedLayerwiseEvaluator(
                    self.data, self.mp, {"need": need}, unwrap(net).encoder.num_layers,
                    rank=self.rank, world_size=self.world_size, num_threads=cfg.num_threads,
                    labels=False)
                return
            # the nodes the splits need, embedded once per evaluation for both splits: this
            # rank embeds its contiguous share
            self.need = np.array_split(need, self.world_size)[self.rank]
            self.eval_sampler = self.data.sampler.with_fanouts(list(cfg.eval_fanouts
                                                                    or cfg.fanouts))
            return
        nodes = {k: np.unique(np.concatenate([p.ravel(), n.ravel()]))
                 for k, s in self.splits.items() for p, n in s.values()}
        self.nodes = nodes
        if self.eval_method == "layerwise":  # the encoder's layers over the message-passing graph
            from ..layerwise import LayerwiseEvaluator

            self.evaluator = LayerwiseEvaluator(
                self.data, self.mp, nodes, unwrap(net).encoder.num_layers, rank=self.rank,
                world_size=self.world_size, num_threads=cfg.num_threads, prefetch=cfg.prefetch,
                labels=False)
            return
        self.evaluator = Evaluator(self.data, nodes, self.eval_plan, seed=cfg.seed,
                                   rank=self.rank, world_size=self.world_size,
                                   num_threads=cfg.num_threads, prefetch=cfg.prefetch,
                                   labels=False)

    def _embeddings(self, model, names, progress: bool) -> dict:
        """Split name -> (node type -> ``(rows, nodes)``, :func:`_score`'s embeddings) for the
        splits ``names``: typed, every split's endpoints at once (layer-wise: rows of the
        sorted type-local endpoints; sampled: a table over every node of the type); homogeneous,
        each split's nodes (rows in ``self.nodes[name]`` order), layer-wise in one pass over the
        layers or sampled per split. Every rank must call it."""
        import torch

        if self.typed and self.eval_method == "layerwise":
            rows, _ = self.evaluator.evaluate(unwrap(model).encoder, ("need",),
                                              progress=progress)["need"]
            h = self.mp
            types = h.node_type_ids(self.need)
            emb = {}
            for t in self.out_types:  # type-local ids, sorted (self.need is)
                j = h.type_id(t)
                sel = np.flatnonzero(types == j)
                emb[t] = (rows[torch.from_numpy(sel)], self.need[sel] - int(h.node_offsets[j]))
            return {name: emb for name in names}
        if self.typed:
            emb = {t: (e, None) for t, e in self._typed_embeddings(unwrap(model)).items()}
            return {name: emb for name in names}
        if self.eval_method == "layerwise":
            got = self.evaluator.evaluate(unwrap(model).encoder, tuple(names), progress=progress)
        else:
            got = {n: self.evaluator.logits(model, n, progress=progress) for n in names}
        out = {}
        for name in names:
            h = got[name][0]
            if h is None:
                h = torch.zeros((0, self.cfg.hidden))
            out[name] = {None: (h, self.nodes[name])}
        return out

    def _typed_embeddings(self, net) -> dict:
        import torch

        from ...loader.dataloader import DataLoader
        from ...loader.item_sampler import ItemSampler

        cfg, h = self.cfg, self.dataset.hetero
        was = net.training
        net.eval()
        emb = {t: torch.zeros(h.num_nodes_of(t), cfg.hidden) for t in self.out_types}
        ld = DataLoader(ItemSampler(self.need, cfg.batch_size, shuffle=False, seed=cfg.seed),
                        self.eval_sampler, type_features=self.data.features,
                        num_threads=cfg.num_threads, prefetch=cfg.prefetch)
        try:
            with torch.no_grad():
                for mb in ld:
                    mb = mb.to(self.device)
                    out = net(mb.x_dict, mb.blocks)
                    for t, rows in mb.seed_dict.items():
                        if t in emb and rows.numel():
                            emb[t][rows.cpu()] = out[t].float().cpu()
        finally:
            ld.close()
            net.train(was)
        if self.world_size > 1:  # every rank embedded its share: the sum is the whole table
            import torch.distributed as dist

            from ...distributed.sharing import collective_device

            for t in self.out_types:
                red = emb[t].to(collective_device())
                dist.all_reduce(red)
                emb[t] = red.cpu()
        return emb

    def evaluate(self, model, *, progress: bool = False) -> dict:
        net = unwrap(model)
        emb = self._embeddings(model, tuple(self.splits), progress)
        return {name: link_metrics(*_score(net, emb[name], pairs))
                for name, pairs in self.splits.items()}

    def predict(self, model, path) -> str:
        net = unwrap(model)
        pairs = self.splits["test"]
        emb = self._embeddings(model, ("test",), self.cfg.progress and self.rank == 0)["test"]
        if self.rank != 0:
            return str(path)
        scores = {}
        for et, pn in pairs.items():
            pos, neg = _score(net, emb, {et: pn})
            scores[et] = np.concatenate([pos.reshape(-1, 1), neg.reshape(pos.shape[0], -1)],
                                        axis=1).astype(np.float32)
        if not self.typed:
            from .node import save_predictions

            a = scores[_HOMO]
            save_predictions(path, a)
            self.say(f"graphfeed train: wrote the scores of {a.shape[0]:,} test pairs and their "
                     f"{a.shape[1] - 1} negatives each ({a.shape[0]:,} x {a.shape[1]} logits) to "
                     f"{path}")
            return str(path)
        from ..metrics import format_metrics

        save_typed_predictions(path, scores)
        self.say(f"graphfeed train: wrote the scores of the test pairs and their negatives to "
                 f"{path}: " + ", ".join(f"{predictions_key(et)} {a.shape[0]:,} x {a.shape[1]}"
                                         for et, a in scores.items()))
        for et, a in scores.items():  # the test metrics above are over every relation's pairs
            self.say(f"  test {predictions_key(et)}: "
                     f"{format_metrics(link_metrics(a[:, 0], a[:, 1:]))}")
        return str(path)

    def close(self) -> None:
        if self.evaluator is not None:
            self.evaluator.close()
            self.evaluator = None

    def finish(self, result) -> None:
        """The degree baseline: a pair scored by its destination's in-degree (within the
        relation) in the message-passing graph."""
        deg = {}
        for et in self.train_pairs:
            if self.typed:
                _, dst = self.mp.edges_of(et)
                deg[et] = np.bincount(dst, minlength=self.mp.num_nodes_of(et[2])).astype(
                    np.float64)
            else:
                deg[et] = np.asarray(self.mp.in_degrees, dtype=np.float64)
        result.baselines = {"degree": {}}
        for name, pairs in self.splits.items():
            pos = [deg[et][p[1]] for et, (p, _) in pairs.items() if et in deg]
            neg = [deg[et][n] for et, (_, n) in pairs.items() if et in deg]
            result.baselines["degree"][name] = link_metrics(
                np.concatenate(pos) if pos else np.zeros(0),
                np.concatenate(neg) if neg else np.zeros((0, 1)))
        result.final_test_acc = float("nan")

