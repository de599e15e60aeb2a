"""Link prediction models: an encoder over the blocks and a decoder on a pair's two
embeddings (``dot``: their dot product; ``mlp``: a two-layer MLP on their elementwise product).

- :class:`LinkPredictor`: a homogeneous encoder (``--model``) and the decoder;
- :class:`TypedLinkPredictor`: the R-GCN encoder (:mod:`.rgcn`) with every endpoint type of the
  predicted relations as output types, and the same decoder.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["LinkPredictor", "TypedLinkPredictor", "build_link_model"]


class LinkPredictor(nn.Module):
    """``encoder(x, blocks)`` -> node embeddings; ``decode(h_src, h_dst)`` -> one logit per
    pair; ``forward(x, blocks, pair_index)`` scores the pairs (local ids of the blocks'
    last destinations), or returns the embeddings when ``pair_index`` is ``None``."""

    def __init__(self, encoder: nn.Module, hidden: int, decoder: str = "dot"):
        super().__init__()
        self.encoder = encoder
        self.reads_stored_rows = getattr(encoder, "reads_stored_rows", False)
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


def build_link_model(cfg, in_dim: int, *, in_degrees=None):
    """The ``LinkPredictor`` of ``cfg`` (``model``, ``hidden``, ``decoder``, ``fanouts``)."""
    from .gnn import build_model

    enc = build_model(cfg.model, in_dim, cfg.hidden, cfg.hidden, len(cfg.fanouts),
                      dropout=cfg.dropout, heads=cfg.heads, in_degrees=in_degrees,
                      norm=cfg.norm, residual=cfg.residual)
    return LinkPredictor(enc, cfg.hidden, cfg.decoder)


class TypedLinkPredictor(nn.Module):
    """``encoder(x_dict, blocks)`` -> node type -> embeddings of its seeds (a ``HeteroRGCN``
    with several output types); ``forward(x_dict, blocks, index_dict)`` -> edge type -> one
    logit per pair of ``index_dict[et]`` (batch-local ids of the seeds of its source and
    destination types), or the embeddings when ``index_dict`` is ``None``."""

    def __init__(self, encoder: nn.Module, hidden: int, decoder: str = "dot"):
        super().__init__()
        self.encoder = encoder
        self.reads_stored_rows = getattr(encoder, "reads_stored_rows", False)
        # the homogeneous predictor's decoder (its encoder slot unused)
        self.link = LinkPredictor(nn.Identity(), hidden, decoder)

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
