"""Link prediction, the ``link`` task (``--task link``), on a ``link_prediction`` dataset,
homogeneous or typed: pairs keyed as ``LinkSampler`` keys them (``None`` for an untyped graph,
an edge type for a typed one; ``datasets.link.link_pairs``), so one code path serves both.

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
from ..evaluate import resolve_eval_method, sampled_plan, unwrap
from ..metrics import roc_auc
from ..predictions import check_path, key_name, save
from ..result import TrainResult
from .base import Task, describe_dataset

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
def check_link_dataset(cfg, dataset) -> list:
    """What ``--task link`` refuses before placing data; returns the keys it trains on (the
    edge types with training pairs; ``[None]`` for an untyped dataset)."""
    from ...datasets.link import link_pairs
    from ...models import check_options, input_width
    from ...placement.plan import check_dataset

    typed = dataset.hetero is not None
    if dataset.task_type != "link_prediction":
        raise GraphfeedError(
            f"--task link needs a link_prediction dataset (node_pairs splits); {dataset.name!r} "
            f"is a {dataset.task_type} dataset: split its edges into one with graphfeed prepare "
            f"link-split {cfg.dataset} OUT" + (" --relation REL" if typed else "")
            + " (or use the built-in 'link' or 'hetero-link')")
    input_width(dataset, cfg.inputs)  # the inputs exist (or are refused by name)
    _check_predict(cfg)
    if cfg.partitions:
        raise GraphfeedError("--partitions: link datasets train on one graph")
    check_options(cfg, dataset)
    method = cfg.sampling_method()
    check_dataset(dataset, method=method, labels=False)
    if not method.is_uniform:
        check_link_method(method.bind(dataset), dataset.name)
    keys = [k for k, (p, _) in link_pairs(dataset, "train").items() if p.shape[1]]
    if not keys:
        raise GraphfeedError(f"dataset {dataset.name!r} has no training pairs")
    if cfg.predict:
        check_path(cfg.predict, keys)
    if cfg.predict and not set(link_pairs(dataset, "test")) & set(keys):
        raise GraphfeedError(f"--predict scores the test pairs, and dataset {dataset.name!r} has "
                             f"no test pairs" + (f" of a relation it trains on "
                                                 f"({[list(e) for e in keys]})" if typed else ""))
    return keys


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
        for key, (p, n) in pairs.items():
            s, d = (None, None) if key is None else (key[0], key[2])
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


#: the settings a resumed run must share with its checkpoint, and its trainer tag, by the data's
#: kind (the typed model is always the R-GCN: --model and --heads do not matter)
TRAINERS = {"plain": "link", "typed": "hetero-link"}
RESUME_KEYS = {"plain": LINK_RESUME_KEYS, "typed": TYPED_LINK_RESUME_KEYS}


def _by_type(placed, ids: np.ndarray, rows) -> dict:
    """Node type -> ``(rows, type-local ids)`` of embeddings ``rows`` of sorted global ``ids``
    (:func:`_score`'s embeddings); the one type ``None`` of untyped data."""
    import torch

    h = placed.hetero
    if h is None:
        return {None: (rows, ids)}
    types = h.node_type_ids(ids)
    out = {}
    for j, t in enumerate(h.node_types):
        sel = np.flatnonzero(types == j)
        if sel.size:
            out[t] = (rows[torch.from_numpy(sel)], ids[sel] - int(h.node_offsets[j]))
    return out


def _global(placed, key, local: np.ndarray, end: int) -> np.ndarray:
    """Global ids of the type-local ids ``local`` of endpoint ``end`` (0 source, 2
    destination) of ``key``'s pairs: themselves for untyped data."""
    h = placed.hetero
    return local if h is None else local + int(h.node_offsets[h.type_id(key[end])])


class LinkTask(Task):
    """Link prediction (module docstring). Build it with :meth:`prepare`."""

    main = "mrr"
    unit = "pairs"
    #: what the link figures (Cora ROC-AUC 0.93 in 20 epochs, hetero-link) were measured with:
    #: every training edge is a label, so link prediction needs less regularisation
    defaults = {"dropout": 0.5, "weight_decay": 0.0}

    def __init__(self, cfg, *, data, train_pairs: dict, splits: dict, reverse: dict,
                 device: str, rank: int = 0, world_size: int = 1, say=print,
                 model_factory=None, eval_plan=None, exclude: str = "self"):
        super().__init__(cfg, device=device, rank=rank, world_size=world_size, say=say)
        self.data, self.train_pairs, self.splits = data, train_pairs, splits
        self.reverse, self.exclude = reverse, exclude
        self.factory, self.eval_plan = model_factory, eval_plan
        self.trainer = TRAINERS[data.kind]
        self.resume_keys = RESUME_KEYS[data.kind]
        self.rows_per_seed = 1 + cfg.num_negatives
        self.evaluator = None
        self.eval_method = "sampled"

    # ------------------------------------------------------------------ building
    @classmethod
    def check(cls, cfg, dataset, device: str) -> dict:
        """``--dry-run``: the checks :meth:`prepare` makes before placing data, and what the
        run would train."""
        from ...models import input_width, model_name

        keys = check_link_dataset(cfg, dataset)
        return {"model": model_name(cfg, dataset.hetero is not None), "decoder": cfg.decoder,
                "fanouts": list(cfg.fanouts), "in_dim": input_width(dataset, cfg.inputs),
                "edge_types": [list(e) for e in keys if e is not None]}

    @classmethod
    def prepare(cls, cfg, dataset, plan, *, rank: int, world_size: int, say, model=None):
        import torch

        from ...datasets.link import link_pairs, reverse_keys, without_held
        from ...models import model_name
        from ...sampling.link import LinkSampler

        keys = check_link_dataset(cfg, dataset)
        train = {k: p for k, (p, _) in link_pairs(dataset, "train").items() if k in keys}
        held = {}
        for name in ("valid", "test"):
            for k, (p, _) in link_pairs(dataset, name).items():
                held.setdefault(k, []).append(p)
        held = {k: np.concatenate(v, axis=1) for k, v in held.items()}
        rev = {}

        def message_passing(graph):  # without the held-out pairs (and their reverses)
            rev.update(reverse_keys(dataset, graph))
            return without_held(graph, held, rev)

        placed = plan.place_dataset(dataset, list(cfg.fanouts), graph=message_passing,
                                    inputs=cfg.inputs, labels=False, replace=cfg.replace, seed=cfg.seed,
                                    method=cfg.sampling_method())
        if world_size > 1 or cfg.table_cache:  # the method's tables once per machine
            from ...distributed.tables import share_prepared

            share_prepared(placed.sampler, plan.world, private_copy=plan.private_copy,
                           cache_dir=cfg.table_cache)
        eval_plan = sampled_plan(cfg, placed.graph, placed.in_dims)
        drawer = LinkSampler(placed.sampler, num_negatives=cfg.eval_negatives,
                             negatives="per_source", seed=cfg.seed)
        splits, used = {}, set()  # used: how evaluation gets its negatives, for the header
        for i, name in enumerate(("valid", "test")):
            out = {}
            for k, (pairs, fixed) in link_pairs(dataset, name).items():
                if k not in keys:
                    continue
                neg = (np.asarray(fixed, dtype=np.int64) if fixed is not None else  # by split
                       drawer.draw_negatives(torch.from_numpy(pairs), edge_type=k,
                                             epoch=i + 1).cpu().numpy())
                used.add(f"the split's {neg.shape[1]} stored" if fixed is not None
                         else f"{cfg.eval_negatives} drawn")
                out[k] = (pairs, neg)
            if out:
                splits[name] = out
        exclude = "reverse" if any(k in rev for k in keys) else "self"
        say(f"graphfeed: placement {placed.describe()}")
        count = {n: f"{sum(int(p.shape[1]) for p, _ in s.values()):,}" for n, s in splits.items()}
        named = [list(k) for k in keys if k is not None]
        say(f"graphfeed train: link prediction on {describe_dataset(dataset)}"
            + (f"; predicting {named}" if named else "")
            + f"; {placed.graph.num_edges:,} message-passing edges; train/valid/test pairs "
            f"{sum(int(p.shape[1]) for p in train.values()):,}/" + "/".join(count.values())
            + f"); model {model_name(cfg, placed.hetero is not None)} + {cfg.decoder} decoder, "
            f"fanouts {placed.describe_fanouts(cfg.fanouts)}, {cfg.num_negatives} negative(s) "
            f"per pair, {' and '.join(sorted(used)) or 'no'} per pair in evaluation, exclude "
            f"{exclude}" + (f" (reverse relations {[[a[1], b[1]] for a, b in rev.items()]})"
                            if named and rev else "")
            + f", batch {cfg.batch_size}, device {placed.device}, features {cfg.features}, "
            f"seed {cfg.seed}" + (f", {world_size} ranks" if world_size > 1 else ""))
        task = cls(cfg, data=placed, train_pairs=train, splits=splits, reverse=rev,
                   device=str(placed.device), rank=rank, world_size=world_size, say=say,
                   model_factory=model, eval_plan=eval_plan, exclude=exclude)
        task.dataset = dataset
        return task

    def build_model(self):
        from ...models import link_model
        from ...models.layerwise import layerwise_refusal

        net = link_model(self.cfg, self.data, list(self.train_pairs), self.factory)
        # layer-wise evaluation of the encoder where it is exact (the built-in encoders)
        enc = getattr(net, "encoder", None)
        why = (self.data.layerwise_refusal or layerwise_refusal(enc) if enc is not None else
               f"{type(net).__name__} has no encoder to evaluate layer-wise")
        self.eval_method = resolve_eval_method(self.cfg, supported=why is None, why_not=why or "")
        self.model_name = (f"rgcn+{self.cfg.decoder}" if self.data.hetero is not None
                           else f"{self.cfg.model}+{self.cfg.decoder}")
        return net

    def result(self) -> TrainResult:
        fanouts = ([-1] * len(self.cfg.fanouts) if self.eval_method == "layerwise"
                   else list(self.eval_plan.fanouts))
        return TrainResult(mode=self.data.mode, placement_reason=self.data.describe(),
                           model=self.model_name, task="link", main_metric="mrr",
                           eval_fanouts=fanouts, eval_method=self.eval_method)

    def train_loader(self):
        from ...loader.dataloader import DataLoader
        from ...loader.item_sampler import ItemSampler
        from ...sampling.link import LinkSampler

        cfg, placed = self.cfg, self.data
        n = sum(int(p.shape[1]) for p in self.train_pairs.values())
        items = ItemSampler(n, cfg.batch_size, shuffle=True, seed=cfg.seed, rank=self.rank,
                            world_size=self.world_size)
        s = LinkSampler(placed.sampler, num_negatives=cfg.num_negatives, exclude=self.exclude,
                        reverse_edge_types=self.reverse or None,
                        seed=cfg.seed).with_pairs(self.train_pairs)
        return DataLoader(items, s, **placed.join(labels=False), num_threads=cfg.num_threads,
                          prefetch=cfg.prefetch)

    def step(self, model, batch):
        import torch
        import torch.nn.functional as F

        from ...models.layerwise import model_inputs

        batch = batch.to(self.device)
        out = model(model_inputs(model, batch), batch.blocks, batch.edge_label_index)
        y = batch.edge_label
        if isinstance(out, dict):  # typed: one logit tensor per edge type
            y = torch.cat([y[et] for et in out])
            out = torch.cat([out[et] for et in out])
        y = y.to(out.device)
        loss = F.binary_cross_entropy_with_logits(out, y)
        return loss, ((out.detach() > 0) == (y > 0.5)).sum(), int(y.shape[0])

    # ------------------------------------------------------------------ evaluation
    def open_evaluation(self, net) -> None:
        """One evaluator over every endpoint the splits score (pairs and negatives, global
        ids), embedded once per evaluation for both splits."""
        from .base import open_evaluator

        cfg = self.cfg
        ids = [np.zeros(0, np.int64)]
        for pairs in self.splits.values():
            for k, (p, n) in pairs.items():
                ids += [_global(self.data, k, p[0], 0),
                        _global(self.data, k, np.concatenate([p[1], n.ravel()]), 2)]
        self.need = np.unique(np.concatenate(ids))
        self.evaluator = open_evaluator(
            self.eval_method, self.data, {"need": self.need},
            num_layers=len(cfg.fanouts), plan=self.eval_plan, seed=cfg.seed, rank=self.rank,
            world_size=self.world_size, num_threads=cfg.num_threads, prefetch=cfg.prefetch,
            labels=False)

    def evaluates_under_autocast(self) -> bool:
        return self.eval_method != "layerwise"

    def _embeddings(self, model, progress: bool) -> dict:
        """Node type -> ``(rows, type-local ids)`` of every endpoint (:func:`_score`'s
        embeddings); every rank must call it."""
        import torch

        net = unwrap(model)
        enc = getattr(net, "encoder", net)
        rows, _ = self.evaluator.evaluate(enc, ("need",), progress=progress)["need"]
        if rows is None:
            rows = torch.zeros((0, self.cfg.hidden))
        return _by_type(self.data, self.need, rows)

    def evaluate(self, model, *, progress: bool = False) -> dict:
        net = unwrap(model)
        emb = self._embeddings(model, progress)
        return {name: link_metrics(*_score(net, emb, pairs))
                for name, pairs in self.splits.items()}

    def predict(self, model, path) -> str:
        net = unwrap(model)
        pairs = self.splits["test"]
        emb = self._embeddings(model, self.cfg.progress and self.rank == 0)
        if self.rank != 0:
            return str(path)
        scores = {}
        for k, pn in pairs.items():
            pos, neg = _score(net, emb, {k: pn})
            scores[k] = np.concatenate([pos.reshape(-1, 1), neg.reshape(pos.shape[0], -1)],
                                       axis=1).astype(np.float32)
        from ..metrics import format_metrics

        save(path, scores)
        self.say(f"graphfeed train: wrote the scores of the test pairs (row i: pair i's logit, "
                 f"then its negatives') to {path}: "
                 + ", ".join(f"{'' if k is None else key_name(k) + ' '}{a.shape[0]:,} x "
                             f"{a.shape[1]}" for k, a in scores.items()))
        if len(scores) > 1:  # the test metrics above are over every relation's pairs
            for k, a in scores.items():
                self.say(f"  test {key_name(k)}: "
                         f"{format_metrics(link_metrics(a[:, 0], a[:, 1:]))}")
        return str(path)

    def finish(self, result) -> None:
        """The degree baseline: a pair scored by its destination's in-degree (within the
        relation) in the message-passing graph."""
        from ...graph.hetero import relation_in_degrees

        deg = {k: relation_in_degrees(self.data.graph, k).astype(np.float64)
               for k in self.train_pairs}
        result.baselines = {"degree": {}}
        for name, pairs in self.splits.items():
            pos = [deg[k][p[1]] for k, (p, _) in pairs.items() if k in deg]
            neg = [deg[k][n] for k, (_, n) in pairs.items() if k in deg]
            result.baselines["degree"][name] = link_metrics(
                np.concatenate(pos) if pos else np.zeros(0),
                np.concatenate(neg) if neg else np.zeros((0, 1)))
        result.final_test_acc = float("nan")

