"""Importers of link-prediction datasets (written with
:func:`graphfeed.datasets.link.write_link_dataset`).

- :func:`prepare_ogbl`: the OGB link-property raw layout, as users download it
  (e.g. ``ogbl-collab``), with the split files as text::

      SRC/raw/edge.csv.gz            one "src,dst" per line (the training graph)
      SRC/raw/num-node-list.csv.gz   the node count (optional)
      SRC/raw/node-feat.csv.gz       one comma-separated float row per node (optional)
      SRC/split/<name>/{train,valid,test}.csv.gz   one "src,dst" pair per line
      SRC/split/<name>/{valid,test}_neg.csv.gz     optional: k negative destinations per line,
                                                   one line per pair of the split

  OGB's ``raw/edge.csv`` holds only the training graph; the dataset's graph is its edges plus
  the valid and test pairs (a link split lies inside the edge set; the trainer takes the valid
  and test pairs out of its message-passing graph again). OGB ships its splits as torch
  pickles (``split/*/*.pt``); graphfeed never unpickles, so export them to text first (one
  ``np.savetxt(..., delimiter=",", fmt="%d")`` per array).
- :func:`split_dataset`: any prepared (node) dataset -> a link dataset over the same graph and
  node features with a seeded random edge split (Cora's 85/5/10 of the GAE papers).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import DatasetError
from .._readers import read_float_blocks, read_int_table
from ..link import LINK_SPLITS, random_edge_split, write_link_dataset
from .ogb import _find, read_num_nodes

__all__ = ["prepare_ogbl", "prepare_link_split", "split_dataset"]

#: ``graphfeed prepare`` options that shape node-classification data, refused here when set
_NODE_ONLY = {"num_classes": None, "feature_dtype": None, "drop_self_loops": False}


def _link_options(kind: str, common: dict) -> dict:
    """The ``graphfeed prepare`` common options a link importer uses (``overwrite``, ``name``);
    the node-classification ones are refused when set, the build's tuning ones ignored (link
    datasets are built in memory)."""
    for k, default in _NODE_ONLY.items():
        if common.get(k, default) != default:
            raise DatasetError(f"prepare {kind}: --{k.replace('_', '-')} does not apply to a "
                               f"link-prediction dataset")
    return {k: common[k] for k in ("overwrite", "name") if k in common}


def _report(path: Path, t0: float):
    """The ``PrepareReport`` of a written link dataset (what ``graphfeed prepare`` prints)."""
    from ..._memory import peak_rss_bytes
    from ..format import Dataset
    from . import PrepareReport

    ds = Dataset.open(path, validate="quick")
    size = sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
    return PrepareReport(path=Path(path), num_nodes=ds.num_nodes, num_edges=ds.num_edges,
                         input_edges=ds.num_edges, num_classes=0,
                         split_sizes={k: v.size for k, v in ds.metadata.splits.items()},
                         seconds=time.perf_counter() - t0, peak_rss_bytes=peak_rss_bytes(),
                         dataset_bytes=size, notes=["link_prediction"])


def prepare_ogbl(src, out, *, split_name: Optional[str] = None, undirected: bool = False,
                 name: Optional[str] = None, overwrite: bool = False, split=None,
                 dedupe: bool = True, **common):
    """Prepare the OGB link-property folder ``src`` (layout above) into ``out``; returns the
    ``PrepareReport``.

    ``split_name``: the ``split/<name>/`` folder (default: the only or first one);
    ``undirected``: store every edge both ways (``ogbl-collab``, ``ppa``, ``ddi`` are
    undirected). Repeated edges are always dropped (a pair in two splits would leak).
    ``common``: ``graphfeed prepare``'s other options (see :func:`_link_options`). Errors
    name the file and the value."""
    from ...graph.csc import CSCGraph

    t0 = time.perf_counter()
    _link_options("ogbl", common)
    if split is not None:
        raise DatasetError("prepare ogbl: the splits come from split/<name>/; --split does not "
                           "apply")
    src = Path(src)
    raw = src / "raw"
    edge_file = _find(raw, "edge") if raw.is_dir() else None
    if edge_file is None:
        raise DatasetError(f"{src}: not an OGB link-property folder (needs raw/edge.csv.gz)")
    folders = {p.name: p for p in sorted((src / "split").glob("*")) if p.is_dir()}
    if not folders:
        raise DatasetError(f"{src}: no split/<name>/ folder with train/valid/test pair files")
    folder = folders.get(split_name or next(iter(folders)))
    if folder is None:
        raise DatasetError(f"{src / 'split'}: no split named {split_name!r}; found {list(folders)}")
    edges = read_int_table(edge_file, 2).T
    splits, negatives = {}, {}
    for k in LINK_SPLITS:
        f = _find(folder, k)
        if f is None:
            raise DatasetError(f"{folder}: missing {k}.csv.gz (one 'src,dst' pair per line)")
        splits[k] = np.ascontiguousarray(read_int_table(f, 2).T)
        if k == "train" and splits[k].shape[1] == 0:
            raise DatasetError(f"{f}: no 'src,dst' pairs; the train split is empty, nothing to "
                               f"train on")
        f = _find(folder, f"{k}_neg")
        if f is not None:
            neg = np.concatenate([b for b, _ in read_float_blocks(f, dtype=np.float64)])
            if not np.array_equal(neg, np.round(neg)):
                raise DatasetError(f"{f}: negative destinations must be integer node ids")
            if neg.shape[0] != splits[k].shape[1]:
                raise DatasetError(f"{f}: {neg.shape[0]} lines of negatives for the "
                                   f"{splits[k].shape[1]} pairs of {k}: one line per pair")
            negatives[k] = neg.astype(np.int64)
    num_nodes = None
    nn_file = _find(raw, "num-node-list")
    if nn_file is not None:
        num_nodes = read_num_nodes(nn_file)
    every = np.concatenate([edges, splits["valid"], splits["test"]], axis=1)
    if num_nodes is None:
        num_nodes = int(every.max(initial=-1)) + 1
    if every.size and (every.min() < 0 or every.max() >= num_nodes):
        bad = int(every.max()) if every.max() >= num_nodes else int(every.min())
        raise DatasetError(f"{src}: node id {bad} in the edge or split files is out of range "
                           f"[0, {num_nodes}) (num-node-list)")
    graph = CSCGraph.from_edges(every[0], every[1], num_nodes, add_reverse=undirected,
                                drop_duplicates=True)
    feats = {}
    feat_file = _find(raw, "node-feat")
    if feat_file is not None:
        x = np.concatenate([b for b, _ in read_float_blocks(feat_file)])
        if x.shape[0] != num_nodes:
            raise DatasetError(f"{feat_file}: {x.shape[0]} rows, expected one per node "
                               f"({num_nodes})")
        feats["feat"] = x
    write_link_dataset(out, graph=graph, node_features=feats, splits=splits,
                       negatives=negatives, name=name or src.name, overwrite=overwrite,
                       undirected=undirected)
    return _report(Path(out), t0)


def prepare_link_split(src, out, *, split=None, undirected: bool = False, dedupe: bool = False,
                       relation=None, data_root=None, **common):
    """``graphfeed prepare link-split SRC OUT --split 0.85,0.05,0.1 --seed S``: the prepared
    dataset folder (or built-in dataset name, :func:`~graphfeed.datasets.open.open_dataset`)
    ``src`` as a link dataset with a seeded random edge split
    (:func:`split_dataset`; ``split``: a ``SplitRule`` of three fractions, default 85/5/10).
    The graph is taken as stored (``undirected``/``dedupe`` do not apply). A heterogeneous
    ``src`` needs ``relation`` (``--relation``, repeatable: a relation name or
    ``src:relation:dst``) and gives a typed link dataset of those relations' edges
    (:func:`~graphfeed.datasets.hetero_link.split_typed_dataset`). ``data_root``: where a
    built-in ``src`` is cached (``--data-root``). Returns the ``PrepareReport``."""
    from ..open import open_dataset

    t0 = time.perf_counter()
    opts = _link_options("link-split", common)
    if undirected or dedupe:
        raise DatasetError("prepare link-split: the graph is taken as stored; --undirected and "
                           "--dedupe do not apply (prepare SRC with them first)")
    fractions, seed = (0.85, 0.05, 0.10), 0
    if split is not None:
        if split.kind != "random":
            raise DatasetError(f"prepare link-split: --split takes edge fractions like "
                               f"0.85,0.05,0.1, got a {split.kind} rule")
        fractions, seed = split.sizes, split.seed
        if fractions[0] == 0:
            raise DatasetError(f"prepare link-split: --split {','.join(f'{v:g}' for v in fractions)} "
                               f"gives the train split no edges; nothing to train on")
    ds = open_dataset(str(src), data_root)
    if ds.num_edges == 0:
        raise DatasetError(f"prepare link-split: {src} has 0 edges; there are no edge pairs to "
                           f"split, nothing to train on")
    if relation or ds.hetero is not None:  # typed pairs of given relations
        from ..hetero_link import split_typed_dataset

        rels = [relation] if isinstance(relation, str) else list(relation or [])
        split_typed_dataset(ds, out, [_relation(r) for r in rels], fractions=fractions,
                            seed=seed, **opts)
    else:
        split_dataset(ds, out, fractions=fractions, seed=seed, **opts)
    return _report(Path(out), t0)


def _relation(text: str):
    """``--relation``: a relation name (``writes``) or a ``src:relation:dst`` triple."""
    parts = str(text).split(":")
    if len(parts) not in (1, 3) or not all(parts):
        raise DatasetError(f"prepare link-split: --relation takes a relation name or "
                           f"src_type:relation:dst_type, got {text!r}")
    return parts[0] if len(parts) == 1 else tuple(parts)


def split_dataset(dataset, out, *, fractions=(0.85, 0.05, 0.10), seed: int = 0,
                  name: Optional[str] = None, overwrite: bool = False) -> Path:
    """A link dataset at ``out`` from an opened ``Dataset``: the same graph and node features
    (labels kept as a plain feature), and a seeded random split of its edges
    (:func:`~graphfeed.datasets.link.random_edge_split`; an undirected graph's edges are split
    once each). Returns ``out``."""
    graph = dataset.graph
    undirected = bool(dataset.metadata.graph.undirected)
    splits = random_edge_split(graph, fractions, seed=seed, undirected=undirected)
    feats = {k: np.asarray(v) for k, v in dataset.arrays.node_features.items()}
    return write_link_dataset(out, graph=graph, node_features=feats, splits=splits,
                              name=name or f"{dataset.name}-link", overwrite=overwrite,
                              undirected=undirected,
                              extra={"link_split": {"from": dataset.name,
                                                    "fractions": [float(f) for f in fractions],
                                                    "seed": int(seed)}})
