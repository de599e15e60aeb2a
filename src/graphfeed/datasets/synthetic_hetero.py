"""The built-in heterogeneous dataset ``hetero``: three node types, four relations, labels that
only the neighbours of the right types reveal.

Node types ``author``, ``field``, ``paper`` (the labelled type); relations ``author writes
paper``, ``paper written_by author``, ``paper cites paper``, ``field topic_of paper``. Every
author and every field has a hidden class, shown by its own features (fields clearly, authors
through noise). A paper of class ``y`` is about a field of class ``y`` (most of the time),
written by authors mostly of class ``y`` and cites papers mostly of class ``y``; its own
features are noise with a faint trace of ``y``. An MLP on paper features is therefore near
chance, a GNN that reads its field and authors (typed neighbours, with features of their own
sizes) recovers the class. Deterministic (fixed seed), generated in about a second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GENERATOR_VERSION = 1


@dataclass(frozen=True)
class HeteroSyntheticSpec:
    name: str
    num_papers: int
    num_authors: int
    num_fields: int
    num_classes: int
    authors_per_paper: int = 3
    cites_per_paper: int = 4
    topic_homophily: float = 0.7  # a paper's field has its class with this probability
    author_homophily: float = 0.6
    cite_homophily: float = 0.5
    paper_signal: float = 0.15  # centroid scale of a paper's own features (unit noise)
    author_signal: float = 0.6
    field_signal: float = 2.0
    dims: tuple = (16, 8, 32)  # author, field, paper feature sizes
    seed: int = 21


SPEC = HeteroSyntheticSpec("hetero", 12_000, 4_000, 60, 6)
NODE_TYPES = ("author", "field", "paper")
EDGE_TYPES = (("author", "writes", "paper"), ("paper", "written_by", "author"),
              ("paper", "cites", "paper"), ("field", "topic_of", "paper"))


def _pick(rng, cls_of, want, same, homophily):
    """For each wanted class, a node of that class with probability ``homophily`` (``same``:
    per class, its members), else any node."""
    n = cls_of.shape[0]
    out = rng.integers(0, n, want.shape[0])
    hit = rng.random(want.shape[0]) < homophily
    for c, members in enumerate(same):
        sel = np.flatnonzero(hit & (want == c))
        if members.size and sel.size:
            out[sel] = members[rng.integers(0, members.size, sel.size)]
    return out


def generate(spec: HeteroSyntheticSpec = SPEC):
    """``(num_nodes dict, edges dict in type-local ids, features dict, paper labels, splits of
    paper local ids)``."""
    rng = np.random.default_rng(spec.seed)
    c = spec.num_classes
    P, A, F = spec.num_papers, spec.num_authors, spec.num_fields
    y = rng.integers(0, c, P)
    a_cls = rng.integers(0, c, A)
    f_cls = np.arange(F) % c
    a_by = [np.flatnonzero(a_cls == k) for k in range(c)]
    f_by = [np.flatnonzero(f_cls == k) for k in range(c)]
    p_by = [np.flatnonzero(y == k) for k in range(c)]

    topic = _pick(rng, f_cls, y, f_by, spec.topic_homophily)
    k = spec.authors_per_paper
    wp = np.repeat(np.arange(P), k)
    wa = _pick(rng, a_cls, np.repeat(y, k), a_by, spec.author_homophily)
    k = spec.cites_per_paper
    cd = np.repeat(np.arange(P), k)
    cs = _pick(rng, y, np.repeat(y, k), p_by, spec.cite_homophily)
    keep = cs != cd
    edges = {
        EDGE_TYPES[0]: (wa, wp),
        EDGE_TYPES[1]: (wp, wa),
        EDGE_TYPES[2]: (cs[keep], cd[keep]),
        EDGE_TYPES[3]: (topic, np.arange(P)),
    }

    def feats(cls, n, dim, signal):
        cent = rng.standard_normal((c, dim)).astype(np.float32) * signal
        return rng.standard_normal((n, dim), dtype=np.float32) + cent[cls]

    da, df, dp = spec.dims
    x = {"author": feats(a_cls, A, da, spec.author_signal),
         "field": feats(f_cls, F, df, spec.field_signal),
         "paper": feats(y, P, dp, spec.paper_signal)}
    perm = rng.permutation(P)
    n_tr, n_va = int(P * 0.3), int(P * 0.1)
    splits = {"train": np.sort(perm[:n_tr]), "valid": np.sort(perm[n_tr:n_tr + n_va]),
              "test": np.sort(perm[n_tr + n_va:n_tr + n_va + int(P * 0.3)])}
    return {"author": A, "field": F, "paper": P}, edges, x, y, splits


def build(path, spec: HeteroSyntheticSpec = SPEC, *, overwrite: bool = False, name=None):
    """Write the dataset to folder ``path`` (atomically)."""
    from ..graph.hetero import HeteroGraph
    from .format import write_dataset
    from .hetero import HeteroParts

    num, edges, x, y, splits = generate(spec)
    g = HeteroGraph.from_edges(num, edges, drop_duplicates=True)
    off = int(g.node_offsets[g.type_id("paper")])
    labels = np.full(g.num_nodes, -1, dtype=np.int64)
    labels[off:off + num["paper"]] = y
    write_dataset(
        path, graph=g.csc, node_features={"label": labels},
        splits={k: v + off for k, v in splits.items()}, num_classes=spec.num_classes,
        target="label", name=name or f"synthetic-{spec.name}", overwrite=overwrite,
        extra={"generator": __name__, "generator_version": GENERATOR_VERSION,
               "spec": {k: (list(v) if isinstance(v, tuple) else v)
                        for k, v in spec.__dict__.items()}},
        hetero=HeteroParts(g, {t: {"feat": a} for t, a in x.items()}, target_type="paper"),
    )
    return path
