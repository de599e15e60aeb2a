"""The built-in typed link-prediction dataset ``hetero-link``: predict which papers an author
writes, on the graph of the built-in ``hetero`` dataset (:mod:`.synthetic_hetero`).

Same generator (authors, fields, papers; ``writes``/``written_by``, ``cites``, ``topic_of``),
with authors who mostly write papers of their own class. The ``author writes paper`` edges
are split 85/5/10 into train/valid/test pairs (``written_by`` holds their reverses, which the
trainer and the sampler remove with them). A paper's class shows in its field and its other
authors, an author's in its own features and papers: a GNN ranks an author's held-out paper
above random papers of other classes, while a degree baseline (how many authors a paper has)
hardly can. Deterministic, generated in about two seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .synthetic_hetero import HeteroSyntheticSpec

GENERATOR_VERSION = 1


@dataclass(frozen=True)
class HeteroLinkSpec:
    name: str
    graph: HeteroSyntheticSpec
    edge_type: tuple = ("author", "writes", "paper")
    fractions: tuple = (0.85, 0.05, 0.10)
    seed: int = 31
    extra: dict = field(default_factory=dict)


SPEC = HeteroLinkSpec("hetero-link", HeteroSyntheticSpec(
    "hetero-link", 12_000, 4_000, 60, 6, author_homophily=0.9, author_signal=1.0,
    paper_signal=0.3, seed=23))


def build(path, spec: HeteroLinkSpec = SPEC, *, overwrite: bool = False, name=None):
    """Write the dataset to folder ``path`` (atomically)."""
    from ..graph.hetero import HeteroGraph
    from . import synthetic_hetero
    from .hetero_link import random_relation_split, write_typed_link_dataset

    num, edges, x, _, _ = synthetic_hetero.generate(spec.graph)
    g = HeteroGraph.from_edges(num, edges, drop_duplicates=True)
    splits = random_relation_split(g, [spec.edge_type], spec.fractions, seed=spec.seed)
    gspec = {k: (list(v) if isinstance(v, tuple) else v) for k, v in spec.graph.__dict__.items()}
    return write_typed_link_dataset(
        path, graph=g, splits=splits, type_features={t: {"feat": a} for t, a in x.items()},
        name=name or f"synthetic-{spec.name}", overwrite=overwrite,
        extra={"generator": __name__, "generator_version": GENERATOR_VERSION,
               "spec": {"edge_type": list(spec.edge_type), "fractions": list(spec.fractions),
                        "seed": spec.seed, "graph": gspec}})
