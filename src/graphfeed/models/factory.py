"""The model a task trains on placed data: the one place that knows typed graphs train the R-GCN.

- :func:`input_width`: a dataset's input width, before anything is placed (typed: the widest
  per-type feature);
- :func:`check_options`: the ``TrainConfig`` options the data's model cannot honour, refused by
  name (typed graphs train the R-GCN, which has no ``--norm`` or ``--residual``);
- :func:`node_model` / :func:`link_model`: the model of node classification / the encoder and
  decoder of link prediction over ``graphfeed.placement.Placed`` data: the R-GCN where the data
  is typed (its ``hetero`` graph, its per-type input widths), else ``--model`` (or the caller's
  factory) over the untyped input width;
- :func:`model_name`: what the run reports as its model.
"""

from __future__ import annotations

import numpy as np

from ..errors import GraphfeedError

__all__ = ["check_options", "input_width", "link_model", "model_name", "node_model"]


def input_width(dataset, inputs=("feat",)) -> int:
    """The model's input width on ``dataset``: the sum of its ``inputs`` features' row widths
    (``--inputs``; default its ``"feat"``), or for a typed dataset the widest per-type
    ``"feat"`` (1 when no type has one); a ``GraphfeedError`` naming a missing input."""
    if dataset.hetero is not None:
        if tuple(inputs) != ("feat",):
            raise GraphfeedError("--inputs chooses an untyped dataset's input features; a typed "
                                 "dataset's are its per-type 'feat' features")
        from .rgcn import hetero_in_dim

        return hetero_in_dim(dataset)
    missing = [n for n in inputs if n not in dataset.features]
    if missing:
        raise GraphfeedError(f"dataset {dataset.name!r} has no node feature "
                             f"{', '.join(map(repr, missing))} (its features: "
                             f"{sorted(set(dataset.features) - {dataset.target})}; choose "
                             f"with --inputs)")
    return sum(int(np.prod(dataset.features[n].row_shape) or 1) for n in inputs)


def check_options(cfg, dataset) -> None:
    """Refuse, by name, the options of the homogeneous models on a typed dataset (its model is
    the R-GCN, which has no norm or residual options)."""
    if dataset.hetero is None:
        return
    if cfg.norm != "auto" or cfg.residual:
        flag = f"--norm {cfg.norm}" if cfg.norm != "auto" else "--residual"
        raise GraphfeedError(f"{flag}: typed (heterogeneous) datasets train the R-GCN, which has "
                             f"no norm or residual options; drop {flag}")


def model_name(cfg, typed: bool) -> str:
    """The ``--model`` a run on data of this kind trains (``rgcn`` for typed data)."""
    return "rgcn" if typed else cfg.model


def node_model(cfg, placed, num_classes: int, factory=None):
    """Node classification's model on ``placed``: ``HeteroRGCN`` to ``placed.target_type``
    for typed data; else ``factory(in_dim, num_classes)`` or ``--model`` (GCN normalised by the
    placed graph's in-degrees)."""
    h = placed.hetero
    if h is not None:
        from .rgcn import HeteroRGCN

        return HeteroRGCN(h.node_types, h.edge_types, placed.in_dims, cfg.hidden, num_classes,
                          len(cfg.fanouts), placed.target_type, cfg.dropout)
    if factory is not None:
        return factory(placed.in_dims, num_classes)
    from .gnn import build_model

    return build_model(cfg.model, placed.in_dims, cfg.hidden, num_classes, len(cfg.fanouts),
                       dropout=cfg.dropout, heads=cfg.heads, in_degrees=_degrees(cfg, placed),
                       norm=cfg.norm, residual=cfg.residual)


def link_model(cfg, placed, keys, factory=None):
    """Link prediction's model on ``placed`` for pairs of ``keys`` (edge types; ``None`` for
    untyped data): ``TypedLinkPredictor`` (the R-GCN with every endpoint type of ``keys`` as an
    output type) for typed data; else ``factory(in_dim)`` or ``LinkPredictor`` over
    ``--model``, with the ``--decoder``."""
    h = placed.hetero
    if h is not None:
        from .link import TypedLinkPredictor
        from .rgcn import HeteroRGCN

        out = tuple(t for t in h.node_types if any(t in (k[0], k[2]) for k in keys))
        enc = HeteroRGCN(h.node_types, h.edge_types, placed.in_dims, cfg.hidden, cfg.hidden,
                         len(cfg.fanouts), out, cfg.dropout)
        return TypedLinkPredictor(enc, cfg.hidden, cfg.decoder)
    if factory is not None:
        return factory(placed.in_dims)
    from .link import build_link_model

    return build_link_model(cfg, placed.in_dims, in_degrees=_degrees(cfg, placed))


def _degrees(cfg, placed):
    """GCN's normalisation: the in-degrees of the graph the sampler samples."""
    return placed.graph.in_degrees if cfg.model == "gcn" and placed.graph is not None else None
