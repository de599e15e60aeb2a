"""What the typed link sampler returns: a :class:`HeteroLinkMiniBatch`, a ``HeteroMiniBatch``
over the endpoints of the batch's typed pairs, plus the pairs per edge type.

Three id spaces: *global* ids of the fused graph (``seeds``), *type-local* ids (``global -
offset[type]``, rows of per-type features; the pairs as the dataset stores them), and the
*batch-local* ids of the pair indices: positions among ``blocks[-1].dst_nodes[type]`` (the
encoder's per-type outputs), which is what a decoder indexes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from .hetero_batch import HeteroMiniBatch, _to

__all__ = ["HeteroLinkMiniBatch"]


@dataclass
class HeteroLinkMiniBatch(HeteroMiniBatch):
    """A typed link-prediction batch (edge type ``(s, rel, d)`` keys every dict).

    - ``seeds``: the distinct endpoints of every positive and negative pair, global ids,
      sorted (so grouped by type); ``seed_dict[t]`` their type-local ids, sorted.
    - ``pairs``: edge type -> int64 ``(2, P_r)`` the seed pairs in type-local ids (row 0 of
      type ``s``, row 1 of type ``d``); ``pair_index``: the same in batch-local ids (row 0 a
      position in ``seed_dict[s]``, row 1 in ``seed_dict[d]``).
    - ``pair_labels``: edge type -> float32 ``(P_r,)`` (1 unless given).
    - ``neg_index``: edge type -> int64 ``(2, P_r * k)`` the negatives in batch-local ids; the
      negatives of pair ``i`` are columns ``i * k .. i * k + k - 1``, share its source and have
      a destination of type ``d``.
    - ``num_negatives``: ``k``.

    Only the edge types that have pairs in the batch are keys of these dicts.
    """

    pairs: dict = field(default_factory=dict)
    pair_index: dict = field(default_factory=dict)
    pair_labels: dict = field(default_factory=dict)
    neg_index: dict = field(default_factory=dict)
    num_negatives: int = 0

    @property
    def num_pairs_dict(self) -> dict:
        return {et: int(v.shape[1]) for et, v in self.pair_index.items()}

    @property
    def num_pairs(self) -> int:
        return sum(self.num_pairs_dict.values())

    @property
    def edge_label_index_dict(self) -> dict:
        """Edge type -> int64 ``(2, P_r + P_r * k)``: the pairs, then their negatives
        (batch-local ids)."""
        return {et: torch.cat([pi, self.neg_index[et]], dim=1)
                for et, pi in self.pair_index.items()}

    @property
    def edge_label_dict(self) -> dict:
        """Edge type -> float32 ``(P_r + P_r * k,)``: the pair labels, then 0 per negative."""
        return {et: torch.cat([lab, lab.new_zeros(self.neg_index[et].shape[1])])
                for et, lab in self.pair_labels.items()}

    def to(self, device, non_blocking: bool = False) -> "HeteroLinkMiniBatch":
        out = super().to(device, non_blocking)
        return replace(out, pairs=_to(self.pairs, device, non_blocking),
                       pair_index=_to(self.pair_index, device, non_blocking),
                       pair_labels=_to(self.pair_labels, device, non_blocking),
                       neg_index=_to(self.neg_index, device, non_blocking))

    def __repr__(self) -> str:
        return (f"HeteroLinkMiniBatch(pairs={self.num_pairs_dict}, negatives="
                f"{self.num_negatives} each, seeds={self.num_seeds_dict}, blocks={self.blocks}, "
                f"epoch={self.epoch}, batch_index={self.batch_index})")
