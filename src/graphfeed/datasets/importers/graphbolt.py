"""A DGL GraphBolt ``OnDiskDataset`` folder, as GraphBolt's documentation describes it::

    SRC/metadata.yaml
      dataset_name: NAME
      graph:
        nodes: [{type: T, num: N}, ...]          # one entry without type: homogeneous
        edges: [{type: "S:R:D", format: csv|numpy, path: P}, ...]
        feature_data: [...]                      # optional, as below (sampling attributes)
      feature_data:
        - {domain: node|edge, type: T, name: NAME, format: numpy|torch, in_memory: B, path: P}
      tasks:
        - name: NAME
          num_classes: C
          train_set | validation_set | test_set:
            - type: T or "S:R:D"                 # omitted on a homogeneous graph
              data: [{name: seeds|labels|indexes|seed_nodes|node_pairs|negative_dsts,
                      format: numpy|torch, path: P}, ...]

Edges: ``csv`` is one ``src,dst`` line per edge (no header), ``numpy`` an integer ``(2, E)``
``.npy``; ids are type-local. Every path is relative to ``SRC`` and must stay inside it.
``numpy`` files open memory-mapped with ``allow_pickle=False``; ``torch`` files with
``torch.load(weights_only=True)`` and must hold one tensor: nothing is unpickled.

Tasks: a node classification task (``seeds`` node ids with their ``labels``) becomes the
dataset's labels (one per node, ``-1`` where no set gives one; a node feature named ``label``
gives them too) and its ``train``/``valid``/``test`` splits; on a typed graph its sets are of
one node type, the target type. A link prediction task (``seeds`` ``(N, 2)`` pairs; in the
validation and test sets with ``labels`` 1/0 and ``indexes`` grouping each positive with its
negatives; or the older ``node_pairs`` with ``negative_dsts``) becomes a link-prediction
dataset: positives as pairs, the negatives of each positive as its ``(P, k)`` fixed negative
destinations (they must share its source, the same ``k`` for every positive), and the graph
gets every split pair as an edge (graphfeed's link datasets hold their pairs; repeated edges
dropped). A metadata file with several tasks names one with ``task=`` (``--task``).

Node features become node features (per node type on a typed graph); edge features of a
homogeneous graph become edge features in CSC order (1-D; ``weight`` becomes the graph's
weights). A homogeneous node classification dataset is built with the streamed two-pass CSC
build (:func:`graphfeed.datasets.importers.prepare`); typed graphs and link tasks in memory,
as :mod:`.ogb_hetero` and :mod:`.link`. GraphBolt sorts node and edge types by name to number
them; so does this importer. ``undirected`` adds the reverse of every edge; on a typed graph a
relation ``(d, "rev_" + r, s)`` per relation (as :mod:`.ogb_hetero`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ..._checks import shown
from ...errors import DatasetError, MissingDependencyError
from ..schema import resolve_inside

__all__ = ["prepare_graphbolt", "read_graphbolt_metadata", "GraphBoltMetadata"]

METADATA = "metadata.yaml"
SETS = {"train_set": "train", "validation_set": "valid", "test_set": "test"}
FORMATS = ("numpy", "torch")
EDGE_FORMATS = ("csv", "numpy")
#: names of set data graphfeed reads (GraphBolt passes other names on to its mini-batches)
SET_DATA = ("seeds", "labels", "indexes", "seed_nodes", "node_pairs", "negative_dsts")
_TOP = ("dataset_name", "graph", "feature_data", "tasks")


@dataclass
class GraphBoltMetadata:
    """``metadata.yaml``, checked: ``nodes`` node type (``None`` when homogeneous) -> count, in
    GraphBolt's order (sorted by name); ``edges`` ``(edge type triple or None, format, path)``;
    ``features`` and ``tasks`` the checked entries (dicts)."""

    root: Path
    file: Path
    name: Optional[str]
    nodes: dict
    edges: list
    features: list = field(default_factory=list)
    tasks: list = field(default_factory=list)

    @property
    def hetero(self) -> bool:
        return None not in self.nodes

    def err(self, where: str, msg: str) -> DatasetError:
        return DatasetError(f"{self.file}: {where}: {msg}")


# --------------------------------------------------------------------------- metadata
#: what graphfeed reads of a metadata.yaml, checked before anything in it is built, formatted or
#: allocated: a GraphBolt metadata.yaml is a few kB (every array lives in its own file), while a
#: 1 kB file of nested YAML aliases expands to billions of values once walked
MAX_METADATA_BYTES = 1 << 20
#: values (scalars, lists, mappings) the document holds with every alias expanded
MAX_YAML_VALUES = 100_000
#: nesting depth of the document (a GraphBolt metadata.yaml nests about 6 levels)
MAX_YAML_DEPTH = 32
#: characters of one scalar (PATH_MAX), and of an integer (a node count fits in 19 digits)
MAX_SCALAR_CHARS = 4096
MAX_INT_CHARS = 40
#: node ids are int64
MAX_NODES = (1 << 63) - 1


def _load_yaml(path: Path):
    """The document of ``path``, safely: at most :data:`MAX_METADATA_BYTES` read, the node graph
    composed first and its size with aliases expanded counted (shared nodes counted once, in
    O(distinct nodes)) before any Python object is built, so an alias bomb or a merge-key
    (``<<``) bomb is refused in milliseconds, not walked."""
    try:
        import yaml
    except ImportError:
        raise MissingDependencyError("pyyaml", "graphbolt",
                                     "reading a GraphBolt metadata.yaml") from None
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_METADATA_BYTES + 1)
    except OSError as e:
        raise DatasetError(f"{path}: cannot read it: {e.strerror or e}") from None
    if len(raw) > MAX_METADATA_BYTES:
        raise DatasetError(f"{path}: larger than {MAX_METADATA_BYTES >> 20} MiB; a GraphBolt "
                           f"metadata.yaml is a few kB (its arrays live in their own files)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: not a text file") from None
    loader = _bounded_loader()(text)
    loader.name = str(path)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_size(node, path)
        return loader.construct_document(node)
    except DatasetError:
        raise
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise DatasetError(f"{path}: not valid YAML{at}: {str(problem)[:120]}") from None
    except (ValueError, OverflowError) as e:  # a scalar its constructor refuses (a bad date)
        raise DatasetError(f"{path}: not valid YAML: {str(e)[:120]}") from None
    finally:
        loader.dispose()


_LOADER = None


def _bounded_loader():
    """``yaml.SafeLoader`` that stops composing past :data:`MAX_YAML_DEPTH` levels: the composer
    recurses once a level, and PyYAML's scanner costs quadratic time in the flow nesting, so a
    20 kB ``[[[[...`` took seconds; the scanner reads at most a line ahead of the composer."""
    global _LOADER
    if _LOADER is None:
        import yaml

        class Loader(yaml.SafeLoader):
            _depth = 0

            def compose_node(self, parent, index):
                self._depth += 1
                try:
                    if self._depth > MAX_YAML_DEPTH:
                        mark = self.peek_event().start_mark
                        raise DatasetError(f"{self.name}: nested deeper than {MAX_YAML_DEPTH} "
                                           f"levels (line {mark.line + 1})")
                    return super().compose_node(parent, index)
                finally:
                    self._depth -= 1

        _LOADER = Loader
    return _LOADER


def _check_yaml_size(root, path: Path) -> None:
    """Refuse a composed YAML node graph that expands past :data:`MAX_YAML_VALUES` values or
    :data:`MAX_YAML_DEPTH` levels, refers to itself, or holds a scalar too long to be a
    metadata value. Iterative, each distinct node visited once."""
    import yaml

    def children(n):
        if isinstance(n, yaml.SequenceNode):
            return n.value
        if isinstance(n, yaml.MappingNode):
            return [x for kv in n.value for x in kv]
        return ()

    def line(n):
        return f" (line {n.start_mark.line + 1})" if n.start_mark is not None else ""

    size, depth, on_path = {}, {}, set()
    stack = [(root, False)]
    while stack:
        n, done = stack.pop()
        k = id(n)
        if done:
            on_path.discard(k)
            kids = children(n)
            size[k] = 1 + sum(size[id(c)] for c in kids)
            depth[k] = 1 + max((depth[id(c)] for c in kids), default=0)
            if size[k] > MAX_YAML_VALUES:
                raise DatasetError(f"{path}: more than {MAX_YAML_VALUES} values with its aliases "
                                   f"expanded{line(n)}; a GraphBolt metadata.yaml is small (an "
                                   f"alias bomb?)")
            if depth[k] > MAX_YAML_DEPTH:
                raise DatasetError(f"{path}: nested deeper than {MAX_YAML_DEPTH} levels{line(n)}")
            continue
        if k in size:
            continue
        if k in on_path:
            raise DatasetError(f"{path}: an alias refers to a value that holds it{line(n)}; "
                               f"a metadata.yaml is a tree")
        if isinstance(n, yaml.ScalarNode):
            cap = MAX_INT_CHARS if n.tag == "tag:yaml.org,2002:int" else MAX_SCALAR_CHARS
            if len(n.value) > cap:
                raise DatasetError(f"{path}: a value of {len(n.value)} characters{line(n)}; at "
                                   f"most {cap} " + ("for an integer" if cap == MAX_INT_CHARS
                                                     else "(a path's limit)"))
        on_path.add(k)
        stack.append((n, True))
        stack.extend((c, False) for c in children(n) if id(c) not in size)


def _locate(src) -> tuple:
    """``(folder, metadata.yaml)`` of ``src`` (the folder or the file itself)."""
    src = Path(src)
    if src.is_dir():
        f = src / METADATA
        if not f.is_file():
            raise DatasetError(f"{src}: no {METADATA}; a GraphBolt OnDiskDataset folder holds "
                               f"one")
        return src, f
    if src.is_file() and src.suffix in (".yaml", ".yml"):
        return src.parent, src
    raise DatasetError(f"{src}: neither a GraphBolt OnDiskDataset folder nor its {METADATA}")


def _text(v, where, what, file) -> str:
    if not isinstance(v, str) or not v:
        raise DatasetError(f"{file}: {where}: {what} must be a non-empty string, got "
                           f"{shown(v)}")
    return v


def _opt_text(v, where, what, file):
    """``v`` when ``None``, else :func:`_text` (a type or name is compared and printed later)."""
    return None if v is None else _text(v, where, what, file)


def _mapping(v, where, file, required=(), optional=(), extra: bool = False) -> dict:
    if not isinstance(v, dict):
        raise DatasetError(f"{file}: {where}: expected a mapping, got {shown(v)}")
    for k in required:
        if k not in v:
            raise DatasetError(f"{file}: {where}: missing {k!r}")
    if not extra:
        unknown = sorted(str(k) for k in v if k not in (*required, *optional))
        if unknown:
            raise DatasetError(f"{file}: {where}: unknown key {shown(unknown[0])} (expected "
                               f"{', '.join((*required, *optional))})")
    return v


def _list(v, where, file, nonempty: bool = True) -> list:
    if not isinstance(v, list) or (nonempty and not v):
        raise DatasetError(f"{file}: {where}: expected a{' non-empty' if nonempty else ''} list, "
                           f"got {shown(v)}")
    return v


def _names(names, k: int = 8) -> str:
    """Up to ``k`` of ``names`` (strings or ``None``), each cut, for an error message."""
    names = list(names)
    return "[" + ", ".join(shown(n) for n in names[:k]) + (", ...]" if len(names) > k else "]")


def _choice(v, choices, where, what, file) -> str:
    if v not in choices:
        raise DatasetError(f"{file}: {where}: {what} must be one of {', '.join(choices)}, got "
                           f"{shown(v)}")
    return v


def _edge_type(text, where, file, node_types) -> tuple:
    t = _text(text, where, "type", file)
    parts = t.split(":")
    if len(parts) != 3 or not all(parts):
        raise DatasetError(f"{file}: {where}: an edge type is 'src_type:relation:dst_type', got "
                           f"{shown(t)}")
    for side, nt in (("source", parts[0]), ("destination", parts[2])):
        if nt not in node_types:
            raise DatasetError(f"{file}: {where}: edge type {shown(t)} names {side} node type "
                               f"{shown(nt)}, which graph.nodes does not declare "
                               f"({_names(sorted(node_types))})")
    return tuple(parts)


def read_graphbolt_metadata(src) -> GraphBoltMetadata:
    """The checked ``metadata.yaml`` of GraphBolt folder ``src`` (or of the file itself); every
    problem is one ``DatasetError`` line naming the file and the entry."""
    root, file = _locate(src)
    raw = _load_yaml(file)
    if not isinstance(raw, dict):
        raise DatasetError(f"{file}: expected a mapping at the top, got {shown(raw)}")
    if "graph" not in raw:
        if "graph_topology" in raw:
            raise DatasetError(f"{file}: a GraphBolt-preprocessed metadata (graph_topology: a "
                               f"pickled graph graphfeed does not load); import the original "
                               f"folder, whose metadata.yaml has the graph: section")
        raise DatasetError(f"{file}: no 'graph' section (graph: nodes, edges)")
    _mapping(raw, "top level", file, optional=_TOP)
    name = raw.get("dataset_name")
    if name is not None:
        if isinstance(name, (int, float)) and not isinstance(name, bool):
            name = str(name)  # dataset_name: 2024 (ints are at most MAX_INT_CHARS digits)
        name = _text(name, "dataset_name", "the name", file)
    graph = _mapping(raw["graph"], "graph", file, required=("nodes", "edges"),
                     optional=("feature_data",))
    nodes = {}
    for i, n in enumerate(_list(graph["nodes"], "graph.nodes", file)):
        where = f"graph.nodes[{i}]"
        _mapping(n, where, file, required=("num",), optional=("type",))
        num = n["num"]
        if isinstance(num, bool) or not isinstance(num, int) or not 0 <= num <= MAX_NODES:
            raise DatasetError(f"{file}: {where}: num must be an integer >= 0 and < 2**63 (int64 "
                               f"ids), got {shown(num)}")
        t = n.get("type")
        if t is not None:
            t = _text(t, where, "type", file)
        if t in nodes:
            raise DatasetError(f"{file}: {where}: node type {shown(t)} is declared twice"
                               if t is not None else
                               f"{file}: {where}: a second node entry without type; a typed "
                               f"graph names the type of every entry")
        nodes[t] = num
    if None in nodes and len(nodes) > 1:
        raise DatasetError(f"{file}: graph.nodes: an entry without type on a graph with "
                           f"several entries; name every node type")
    edges = []
    for i, e in enumerate(_list(graph["edges"], "graph.edges", file)):
        where = f"graph.edges[{i}]"
        _mapping(e, where, file, required=("format", "path"), optional=("type",))
        fmt = _choice(e["format"], EDGE_FORMATS, where, "format", file)
        path = _text(e["path"], where, "path", file)
        if None in nodes:
            if e.get("type") is not None:
                raise DatasetError(f"{file}: {where}: a typed edge entry on a graph whose nodes "
                                   f"have no type")
            if edges:
                raise DatasetError(f"{file}: {where}: a homogeneous graph has one edge entry")
            et = None
        else:
            if e.get("type") is None:
                raise DatasetError(f"{file}: {where}: missing 'type' ('src:rel:dst'); the nodes "
                                   f"are typed")
            et = _edge_type(e["type"], where, file, nodes)
            if any(et == x[0] for x in edges):
                raise DatasetError(f"{file}: {where}: edge type {shown(e['type'])} is given "
                                   f"twice")
        edges.append((et, fmt, path))
    features = []
    for section in ("graph.feature_data", "feature_data"):
        entries = graph.get("feature_data") if section.startswith("graph") else \
            raw.get("feature_data")
        for i, f in enumerate(_list(entries or [], section, file, nonempty=False)):
            where = f"{section}[{i}]"
            # GraphBolt passes any other key on as the feature's metadata
            _mapping(f, where, file, required=("domain", "name", "format", "path"), extra=True)
            features.append(dict(
                where=where, domain=_choice(f["domain"], ("node", "edge", "graph"), where,
                                            "domain", file),
                type=_opt_text(f.get("type"), where, "type", file),
                name=_text(f["name"], where, "name", file),
                format=_choice(f["format"], FORMATS, where, "format", file),
                path=_text(f["path"], where, "path", file)))
    tasks = []
    for i, t in enumerate(_list(raw.get("tasks") or [], "tasks", file, nonempty=False)):
        where = f"tasks[{i}]"
        _mapping(t, where, file, extra=True)  # GraphBolt keeps other keys as task metadata
        sets = {}
        for key, split in SETS.items():
            for j, s in enumerate(_list(t.get(key) or [], f"{where}.{key}", file,
                                        nonempty=False)):
                w = f"{where}.{key}[{j}]"
                _mapping(s, w, file, required=("data",), optional=("type",))
                data = []
                for k, d in enumerate(_list(s["data"], f"{w}.data", file)):
                    wd = f"{w}.data[{k}]"
                    _mapping(d, wd, file, required=("format", "path"),
                             optional=("name", "in_memory"))
                    dname = d.get("name", "seeds")
                    _choice(dname, SET_DATA, wd, "name", file)
                    data.append(dict(where=wd, name=dname,
                                     format=_choice(d["format"], FORMATS, wd, "format", file),
                                     path=_text(d["path"], wd, "path", file)))
                sets.setdefault(split, []).append(
                    dict(where=w, type=_opt_text(s.get("type"), w, "type", file), data=data))
        nc = t.get("num_classes")
        if nc is not None and (isinstance(nc, bool) or not isinstance(nc, int) or nc < 1):
            raise DatasetError(f"{file}: {where}: num_classes must be an integer >= 1, got "
                               f"{shown(nc)}")
        tasks.append(dict(where=where, name=_opt_text(t.get("name"), where, "name", file),
                          num_classes=nc, sets=sets))
    order = sorted(nodes, key=lambda t: (t is not None, t or ""))  # GraphBolt numbers by name
    edges.sort(key=lambda e: ":".join(e[0]) if e[0] else "")
    return GraphBoltMetadata(root, file, name, {t: nodes[t] for t in order}, edges, features,
                             tasks)


# --------------------------------------------------------------------------- arrays
def _array(meta: GraphBoltMetadata, rel: str, fmt: str, where: str, *, feature: bool = False):
    """The array at ``rel`` (inside the folder): a memory-mapped pickle-free ``.npy``, or the one
    tensor of a ``torch.save`` file loaded with ``weights_only=True`` (:func:`_tensor_rows`).
    ``feature``: a bfloat16 tensor is returned as the tensor (the dataset stores its bits, as
    ``datasets.schema.BITS_DTYPES`` says); elsewhere (ids, labels) bfloat16 is refused."""
    from ..._io import check_regular_file, load_npy

    path = resolve_inside(meta.root, rel, f"{meta.file}: {where}")
    if fmt == "numpy":
        return load_npy(path)
    check_regular_file(path, "torch file")
    import torch

    try:
        # a sparse tensor's indices are checked as it loads: unchecked, densifying one whose
        # indices lie outside its shape writes out of bounds (a segfault, or a silent wrong value)
        with torch.sparse.check_sparse_tensor_invariants():
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many types for a bad file
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DatasetError(f"{path}: not a tensor file torch.load(weights_only=True) reads "
                           f"({first[:120]})") from None
    if not isinstance(obj, torch.Tensor):
        raise DatasetError(f"{path}: holds a {type(obj).__name__}; a torch-format entry must "
                           f"hold one tensor")
    return _tensor_rows(obj, path, feature)


def _tensor_rows(t, path: Path, feature: bool):
    """A loaded tensor as a dense numpy array (a bfloat16 feature: the dense CPU tensor). A
    sparse tensor is densified, and a broadcast view (``expand``: stride 0) made contiguous, only
    when the dense array fits the memory left (``build.check_allocation``): both are small on
    disk and may be large once dense, so the size comes from the shape before anything is
    allocated."""
    import math

    import torch

    t = t.detach()
    try:
        sparse = t.layout != torch.strided
        dense = math.prod(t.shape) * t.element_size()
        stored = None if sparse else t.untyped_storage().nbytes()
    except (RuntimeError, TypeError, NotImplementedError) as e:  # nested, meta, quantized ...
        raise DatasetError(f"{path}: a {t.dtype} tensor graphfeed cannot read "
                           f"({str(e).strip()[:120]})") from None
    if sparse or dense > stored:
        from ..build import check_allocation

        what = f"a sparse ({str(t.layout).removeprefix('torch.')}) tensor" if sparse else \
            "a broadcast (expanded) tensor"
        check_allocation(dense, f"{path}: {what} of shape {tuple(t.shape)} made dense",
                         "save it dense in numpy format")
    try:
        t = (t.to_dense() if sparse else t).resolve_conj().resolve_neg().contiguous()
        if t.dtype == torch.bfloat16:
            if not feature:
                raise DatasetError(f"{path}: a bfloat16 tensor; only features may be bfloat16 "
                                   f"(ids, labels and edges are integers)")
            return t
        return t.numpy()
    except (RuntimeError, TypeError) as e:  # quantized, complex32 ...: numpy has no such type
        raise DatasetError(f"{path}: a {str(t.dtype).removeprefix('torch.')} tensor graphfeed "
                           f"cannot read ({str(e).strip()[:120]})") from None


def _ints(a: np.ndarray, path_or_where: str, what: str) -> np.ndarray:
    if a.dtype.kind not in "iu":
        raise DatasetError(f"{path_or_where}: {what} must be integers, got {a.dtype}")
    return a.astype(np.int64, copy=False)


def _in_range(a: np.ndarray, n: int, where: str, what: str) -> None:
    if a.size and (int(a.min()) < 0 or int(a.max()) >= n):
        bad = int(a.min()) if int(a.min()) < 0 else int(a.max())
        raise DatasetError(f"{where}: {what} id {bad} is out of range [0, {n})")


def _edges(meta: GraphBoltMetadata, et, fmt: str, rel: str, i: int) -> tuple:
    """``(src, dst)`` int64 arrays of one edge entry, ids checked against their node types."""
    from .._readers import read_int_table

    where = f"graph.edges[{i}]"
    path = resolve_inside(meta.root, rel, f"{meta.file}: {where}")
    if fmt == "csv":
        e = read_int_table(path, 2)
        src, dst = e[:, 0], e[:, 1]
    else:
        a = _array(meta, rel, fmt, where)
        if a.ndim != 2 or a.shape[0] != 2:
            raise DatasetError(f"{path}: numpy edges must be (2, num_edges), got shape {a.shape}")
        a = _ints(a, str(path), "edges")
        src, dst = a[0], a[1]
    ns = meta.nodes[et[0] if et else None]
    nd = meta.nodes[et[2] if et else None]
    _in_range(src, ns, str(path), "source" + (f" ({et[0]})" if et else ""))
    _in_range(dst, nd, str(path), "destination" + (f" ({et[2]})" if et else ""))
    return src, dst


# --------------------------------------------------------------------------- tasks
def _pick_task(meta: GraphBoltMetadata, task) -> dict:
    tasks = meta.tasks
    if not tasks:
        raise DatasetError(f"{meta.file}: no tasks; a graphfeed dataset needs a node "
                           f"classification or link prediction task (train_set, ...)")
    names = [t["name"] for t in tasks]
    if task is None:
        if len(tasks) > 1:
            raise DatasetError(f"{meta.file}: {len(tasks)} tasks ({_names(names)[1:-1]}); "
                               f"choose one with --task NAME (or its position)")
        return tasks[0]
    if isinstance(task, int) or (isinstance(task, str) and task.isdigit() and task not in names):
        i = int(task)
        if not 0 <= i < len(tasks):
            raise DatasetError(f"{meta.file}: no task {i}; it has {len(tasks)}")
        return tasks[i]
    if task not in names:
        raise DatasetError(f"{meta.file}: no task named {shown(task)}; tasks: {_names(names)}")
    return tasks[names.index(task)]


def _set_arrays(meta, s) -> dict:
    """name -> array of one set entry, ``seed_nodes`` read as ``seeds``, ``node_pairs`` as
    ``(N, 2)`` ``seeds``."""
    out = {}
    for d in s["data"]:
        name = {"seed_nodes": "seeds", "node_pairs": "seeds"}.get(d["name"], d["name"])
        if name in out:
            raise meta.err(d["where"], f"{shown(d['name'])} given twice in one set")
        a = _array(meta, d["path"], d["format"], d["where"])
        if d["name"] == "node_pairs" and a.ndim == 2 and a.shape[0] == 2 and a.shape[1] != 2:
            a = a.T  # the older layout also came as (2, N)
        out[name] = a
    if "seeds" not in out:
        raise meta.err(s["where"], "no seeds (data named seeds)")
    return out


def _kind(meta, task) -> str:
    """``"link"`` or ``"node"``: link data (``node_pairs``, ``negative_dsts``, ``indexes``) in
    any set, or ``(N, 2)`` seeds in every set whose labels (if any) are 0/1 and the task's
    ``num_classes`` (if any) at most 2, make a link prediction task; anything else is node
    classification, whose checks then refuse seeds that are not 1-D ids as such."""
    for sets in task["sets"].values():
        for s in sets:
            for d in s["data"]:
                if d["name"] in ("node_pairs", "negative_dsts", "indexes"):
                    return "link"
    every = [s for sets in task["sets"].values() for s in sets]
    if not every:
        raise meta.err(task["where"], "the task has no train_set, validation_set or test_set")
    arrays = [_set_arrays(meta, s) for s in every]
    if any(a["seeds"].ndim != 2 for a in arrays):
        return "node"
    nc = task["num_classes"]
    classes = (nc is not None and nc > 2) or any(
        "labels" in a and not np.isin(np.asarray(a["labels"]), (0, 1)).all() for a in arrays)
    return "node" if classes else "link"


def _node_task(meta: GraphBoltMetadata, task, label_feature) -> tuple:
    """``(labels (N,) int64 or per-type-global, splits name -> ids, target type, num_classes)``
    of a node classification task (ids global on a typed graph)."""
    offsets, types = {}, list(meta.nodes)
    acc = 0
    for t in types:
        offsets[t] = acc
        acc += meta.nodes[t]
    target = None
    seen_types = set()
    for split, sets in task["sets"].items():
        for s in sets:
            t = s["type"]
            if meta.hetero:
                if t is None:
                    raise meta.err(s["where"], "missing 'type' (the node type of the seeds)")
                if t not in meta.nodes:
                    raise meta.err(s["where"], f"type {shown(t)} is no node type "
                                               f"({_names(sorted(meta.nodes))})")
            elif t is not None:
                raise meta.err(s["where"], f"a typed set ({shown(t)}) on a homogeneous graph")
            seen_types.add(t)
    if len(seen_types) > 1:
        raise meta.err(task["where"], f"sets of several node types {_names(sorted(seen_types))}; "
                                      f"graphfeed's typed datasets have one labelled type")
    target = next(iter(seen_types), None)
    n = meta.nodes[target]
    off = offsets[target]
    labels = np.full(acc, -1, dtype=np.int64)
    if label_feature is not None:
        a, where = label_feature
        if a.ndim != 1 or a.shape[0] != n:
            raise meta.err(where, f"node feature 'label' must hold one class per node "
                                  f"({n}), got shape {a.shape}")
        labels[off:off + n] = _ints(a, where, "labels")
    given = np.zeros(acc, dtype=bool)
    splits = {}
    for split, sets in task["sets"].items():
        for s in sets:
            arr = _set_arrays(meta, s)
            extra = sorted(set(arr) - {"seeds", "labels"})
            if extra:
                raise meta.err(s["where"], f"{shown(extra[0])} is link prediction data in a node "
                                           f"classification set")
            seeds = arr["seeds"]
            if seeds.ndim != 1:
                raise meta.err(s["where"], f"seeds must be 1-D node ids, got shape "
                                           f"{tuple(seeds.shape)}")
            seeds = _ints(seeds, s["where"], "seeds")
            _in_range(seeds, n, f"{meta.file}: {s['where']}", "seed")
            ids = seeds + off
            if "labels" in arr:
                lab = arr["labels"]
                if lab.ndim != 1 or lab.shape[0] != seeds.shape[0]:
                    raise meta.err(s["where"], f"labels must hold one class per seed "
                                               f"({seeds.shape[0]}), got shape {lab.shape}")
                lab = _ints(lab, s["where"], "labels")
                clash = given[ids] & (labels[ids] != lab)
                known = (labels[ids] >= 0) & ~given[ids] & (labels[ids] != lab)
                if clash.any() or known.any():
                    i = int(np.flatnonzero(clash | known)[0])
                    raise meta.err(s["where"], f"node {int(seeds[i])} gets label {int(lab[i])} "
                                               f"here and {int(labels[ids[i]])} elsewhere")
                labels[ids] = lab
                given[ids] = True
            elif label_feature is None:
                raise meta.err(s["where"], "no labels (data named labels, or a node feature "
                                           "named label)")
            splits[split] = np.concatenate([splits[split], ids]) if split in splits else ids
    if "train" not in splits:
        raise meta.err(task["where"], "no train_set")
    for key, split in SETS.items():  # a set given without seeds: nothing to train or evaluate on
        if split in splits and not splits[split].shape[0]:
            why = "nothing to train on" if split == "train" else "nothing to evaluate on"
            raise meta.err(task["where"], f"its {key} holds no seeds; {why}")
    nc = task["num_classes"]
    top = int(labels.max()) + 1 if labels.size else 0
    if nc is not None and top > nc:
        raise meta.err(task["where"], f"labels go up to {top - 1}, but num_classes = {nc}")
    return labels, splits, target, nc if nc is not None else max(top, 1)


def _link_task(meta: GraphBoltMetadata, task) -> tuple:
    """``(pairs, negatives)``: split -> edge type (``None`` homogeneous) -> int64 ``(2, P)``
    positives, and -> ``(P, k)`` negative destinations where the set has them."""
    pairs, negatives = {}, {}
    for split, sets in task["sets"].items():
        for s in sets:
            et = s["type"]
            if meta.hetero:
                if et is None:
                    raise meta.err(s["where"], "missing 'type' (the edge type 'src:rel:dst')")
                et = _edge_type(et, s["where"], meta.file, meta.nodes)
                if et not in [e[0] for e in meta.edges]:
                    raise meta.err(s["where"], f"edge type {shown(s['type'])} is not in "
                                               f"graph.edges")
            elif et is not None:
                raise meta.err(s["where"], f"a typed set ({shown(et)}) on a homogeneous graph")
            arr = _set_arrays(meta, s)
            seeds = arr["seeds"]
            if seeds.ndim != 2 or seeds.shape[1] != 2:
                raise meta.err(s["where"], f"link seeds must be (N, 2) pairs, got shape "
                                           f"{seeds.shape}")
            seeds = _ints(seeds, s["where"], "seeds")
            ns = meta.nodes[et[0] if et else None]
            nd = meta.nodes[et[2] if et else None]
            _in_range(seeds[:, 0], ns, f"{meta.file}: {s['where']}", "source")
            _in_range(seeds[:, 1], nd, f"{meta.file}: {s['where']}", "destination")
            pos, neg = _positives_and_negatives(meta, s, seeds, arr, nd)
            if (split, et) in pairs:
                raise meta.err(s["where"], "a second set of the same type in one split")
            pairs.setdefault(split, {})[et] = pos
            if neg is not None:
                negatives.setdefault(split, {})[et] = neg
    if "train" not in pairs:
        raise meta.err(task["where"], "no train_set")
    return pairs, negatives


def _positives_and_negatives(meta, s, seeds, arr, nd) -> tuple:
    where = s["where"]
    labels, indexes, negs = arr.get("labels"), arr.get("indexes"), arr.get("negative_dsts")
    if negs is not None:  # the older layout: node_pairs + negative_dsts (N, k)
        if labels is not None or indexes is not None:
            raise meta.err(where, "negative_dsts with labels/indexes: use one layout")
        negs = _ints(negs.reshape(seeds.shape[0], -1) if negs.ndim == 1 else negs, where,
                     "negative_dsts")
        if negs.ndim != 2 or negs.shape[0] != seeds.shape[0]:
            raise meta.err(where, f"negative_dsts must be (N, k) for the {seeds.shape[0]} "
                                  f"pairs, got shape {negs.shape}")
        _in_range(negs, nd, f"{meta.file}: {where}", "negative destination")
        return np.ascontiguousarray(seeds.T), negs
    if labels is None:
        if indexes is not None:
            raise meta.err(where, "indexes without labels")
        return np.ascontiguousarray(seeds.T), None
    labels = np.asarray(labels).reshape(-1)
    if labels.shape[0] != seeds.shape[0] or not np.isin(labels, (0, 1)).all():
        raise meta.err(where, f"link labels must be one 0 or 1 per pair ({seeds.shape[0]})")
    is_pos = labels == 1
    pos = seeds[is_pos]
    if is_pos.all():
        return np.ascontiguousarray(pos.T), None
    if indexes is None:
        raise meta.err(where, "negative pairs (label 0) without indexes to group them with "
                              "their positives")
    idx = _ints(np.asarray(indexes).reshape(-1), where, "indexes")
    if idx.shape[0] != seeds.shape[0]:
        raise meta.err(where, f"indexes must hold one group per pair ({seeds.shape[0]})")
    pos_idx = idx[is_pos]
    if np.unique(pos_idx).size != pos_idx.size:
        raise meta.err(where, "two positive pairs share an index")
    order = np.argsort(pos_idx, kind="stable")
    neg_idx = idx[~is_pos]
    slot = np.searchsorted(pos_idx[order], neg_idx).clip(max=max(pos_idx.size - 1, 0))
    if pos_idx.size == 0 or (pos_idx[order][slot] != neg_idx).any():
        raise meta.err(where, "a negative pair's index is no positive pair's")
    owner = order[slot]  # the positive of each negative
    k_per = np.bincount(owner, minlength=pos.shape[0])
    neg = seeds[~is_pos]
    if (k_per != k_per[0]).any() or (neg[:, 0] != pos[owner, 0]).any():
        raise meta.err(where, "graphfeed stores negatives as k destinations per positive "
                              "sharing its source: the negatives here differ in count or "
                              "source")
    k = int(k_per[0])
    by_pos = np.argsort(owner, kind="stable")
    return np.ascontiguousarray(pos.T), neg[by_pos, 1].reshape(pos.shape[0], k)


# --------------------------------------------------------------------------- features
def _features(meta: GraphBoltMetadata, feature_dtype=None) -> tuple:
    """``(node features, edge features, label feature)``: homogeneous: name -> array or
    ``.npy`` path; typed: type -> name -> array; edge features name -> 1-D array (homogeneous
    only); the node feature named ``label`` as ``(array, where)`` (of the target type: the
    caller checks), or ``None``. A bfloat16 node feature stays a bfloat16 tensor (the writers
    store its bits); a bfloat16 edge feature becomes float32 (exactly: bfloat16 is float32's
    upper half), as the graph's weights are float32."""
    node, edge, label = {}, {}, None
    for f in meta.features:
        where, t, name = f["where"], f["type"], f["name"]
        if f["domain"] == "graph":
            raise meta.err(where, "graph-level features have no place in a graphfeed dataset")
        if f["domain"] == "edge":
            if meta.hetero:
                raise meta.err(where, "edge features of a typed graph are not imported yet")
            if t is not None:
                raise meta.err(where, f"a typed feature ({shown(t)}) on a homogeneous graph")
            a = _array(meta, f["path"], f["format"], where, feature=True)
            if not isinstance(a, np.ndarray):  # bfloat16
                a = a.float().numpy()
            if a.ndim == 2 and a.shape[1] == 1:
                a = a[:, 0]
            if a.ndim != 1:
                raise meta.err(where, f"edge feature {shown(name)} has shape {tuple(a.shape)}; "
                                      f"graphfeed stores 1-D edge features (weights, times)")
            if name in edge:
                raise meta.err(where, f"edge feature {shown(name)} is given twice")
            edge[name] = a
            continue
        if meta.hetero:
            if t is None:
                raise meta.err(where, "missing 'type' (the node type of the feature)")
            if t not in meta.nodes:
                raise meta.err(where, f"type {shown(t)} is no node type "
                                      f"({_names(sorted(meta.nodes))})")
        elif t is not None:
            raise meta.err(where, f"a typed feature ({shown(t)}) on a homogeneous graph")
        n = meta.nodes[t]
        if name == "label":
            label = (_array(meta, f["path"], f["format"], where), where, t)
            continue
        table = node.setdefault(t, {}) if meta.hetero else node
        if name in table:
            raise meta.err(where, f"node feature {shown(name)}"
                           + (f" of type {shown(t)}" if t else "") + " is given twice")
        if f["format"] == "numpy" and not meta.hetero and feature_dtype is None:
            path = resolve_inside(meta.root, f["path"], f"{meta.file}: {where}")
            a = _array(meta, f["path"], "numpy", where)  # checks the file now
            table[name] = str(path)
        else:
            a = _array(meta, f["path"], f["format"], where, feature=True)
            table[name] = a
        if a.ndim == 0 or a.shape[0] != n:
            raise meta.err(where, f"node feature {shown(name)} has {a.shape[0] if a.ndim else 0} "
                                  f"rows; " + (f"node type {shown(t)}" if t else "the graph")
                           + f" has {n} nodes")
    return node, edge, label


# --------------------------------------------------------------------------- importer
def prepare_graphbolt(src, out, *, task=None, split=None, undirected: bool = False,
                      dedupe: bool = False, drop_self_loops: bool = False,
                      num_classes: Optional[int] = None, name: Optional[str] = None,
                      overwrite: bool = False, feature_dtype=None, **common):
    """Prepare GraphBolt ``OnDiskDataset`` folder ``src`` (layout above; or its
    ``metadata.yaml``) into dataset folder ``out``; returns the ``PrepareReport``.

    ``task``: the task to import (its name or position) when the file has several. The splits
    are the task's sets (``split``, a seeded re-split, is refused). ``num_classes`` overrides
    the task's. ``common``: ``graphfeed prepare``'s build options (``memory_budget``,
    ``progress``, ``block_bytes``), used by the streamed build of a homogeneous node
    classification dataset and without effect on the in-memory ones. Any error leaves ``out``
    untouched."""
    t0 = time.perf_counter()
    if split is not None:
        raise DatasetError("prepare graphbolt: the splits are the task's train/validation/test "
                           "sets; --split does not apply")
    meta = read_graphbolt_metadata(src)
    _check_node_memory(meta, undirected or dedupe)
    chosen = _pick_task(meta, task)
    kind = _kind(meta, chosen)
    name = name or meta.name or meta.root.name
    extra = {"source": "graphbolt", "task": chosen["name"]} if chosen["name"] else \
        {"source": "graphbolt"}
    if kind == "link":
        from .link import _link_options

        opts = {"num_classes": num_classes, "feature_dtype": feature_dtype,
                "drop_self_loops": drop_self_loops}
        _link_options("graphbolt", opts)
        return _prepare_link(meta, chosen, out, name, overwrite, undirected, extra, t0)
    node, edge, label = _features(meta, feature_dtype)
    if label is not None and not meta.hetero:
        label = label[:2]
    labels, splits, target, nc = _node_task(
        meta, chosen, None if label is None else _target_label(meta, chosen, label))
    if num_classes is not None:
        nc = num_classes
    if not meta.hetero:
        return _prepare_homogeneous(meta, out, node, edge, labels, splits, nc, name, overwrite,
                                    undirected, dedupe, drop_self_loops, feature_dtype, extra,
                                    common)
    # the typed writer stores the features as given and has no self-loop pass: refused, not
    # ignored (a float16 request silently stored float32)
    for flag, value in (("--feature-dtype", feature_dtype), ("--drop-self-loops",
                                                             drop_self_loops or None)):
        if value is not None:
            raise DatasetError(f"prepare graphbolt: {flag} does not apply to a typed graph "
                               f"(its features are stored as the files hold them, its relations "
                               f"as given)")
    return _prepare_typed(meta, out, node, labels, splits, target, nc, name, overwrite,
                          undirected, dedupe, extra, t0)


def _check_node_memory(meta: GraphBoltMetadata, compact: bool) -> None:
    """Refuse node counts whose per-node arrays cannot be held (``build.check_prepare_memory``,
    the rule every ``prepare`` applies) before any is allocated, and a sum of typed counts past
    int64 ids."""
    from ..build import check_prepare_memory

    total = sum(meta.nodes.values())
    if total > MAX_NODES:
        raise DatasetError(f"{meta.file}: graph.nodes: {total} nodes in all, more than int64 "
                           f"ids hold")
    check_prepare_memory(total, compact, f"{meta.file}: graph.nodes")


def _target_label(meta, task, label):
    if not meta.hetero:
        return label
    a, where, t = label
    targets = {s["type"] for sets in task["sets"].values() for s in sets}
    if t not in targets:
        raise meta.err(where, f"a node feature 'label' of type {shown(t)}, but the task's sets "
                              f"are of type {_names(sorted(map(str, targets)))}")
    return a, where


def _prepare_homogeneous(meta, out, node, edge, labels, splits, nc, name, overwrite,
                         undirected, dedupe, drop_self_loops, feature_dtype, extra, common):
    from .._readers import EdgeSource
    from . import prepare

    ((_, fmt, rel),) = meta.edges
    n = meta.nodes[None]
    node, feature_dtype = _streamed_features(meta, node, feature_dtype)
    block = common.pop("block_bytes", None)
    kw = {} if block is None else {"block_bytes": block}
    if fmt == "csv" and not edge:
        edges = EdgeSource(resolve_inside(meta.root, rel, f"{meta.file}: graph.edges[0]"), **kw)
    else:
        src, dst = _edges(meta, None, fmt, rel, 0)
        for fname, a in edge.items():
            if a.shape[0] != src.shape[0]:
                raise DatasetError(f"{meta.file}: edge feature {shown(fname)} has {a.shape[0]} "
                                   f"rows, the graph {src.shape[0]} edges")
        edges = EdgeSource(arrays=(src, dst), values=edge, **kw)
    return prepare(out, edges=edges, features=node, labels=labels, splits=splits,
                   num_classes=nc, num_nodes=n, undirected=undirected, dedupe=dedupe,
                   drop_self_loops=drop_self_loops, name=name, overwrite=overwrite,
                   feature_dtype=feature_dtype, extra=extra, **common)


def _streamed_features(meta, node: dict, feature_dtype) -> tuple:
    """``(features, feature_dtype)`` for the streamed build, which stores every feature as
    given or all as one ``feature_dtype``: bfloat16 tensors become their float32 values (exact)
    with ``feature_dtype`` ``"bfloat16"`` when every feature is bfloat16 (so the dataset holds
    the same bits), or the given ``--feature-dtype``. bfloat16 beside other dtypes without one
    is refused: storing all as either would change the others silently."""
    bf16 = [k for k, a in node.items() if not isinstance(a, (str, np.ndarray))]
    if not bf16:
        return node, feature_dtype
    if feature_dtype is None:
        other = next((k for k in node if k not in bf16), None)
        if other is not None:
            raise DatasetError(f"{meta.file}: node feature {shown(bf16[0])} is bfloat16 and "
                               f"{shown(other)} is not; a homogeneous dataset is prepared with "
                               f"one feature dtype: choose it with --feature-dtype")
        feature_dtype = "bfloat16"
    return {k: a.float().numpy() if k in bf16 else a for k, a in node.items()}, feature_dtype


def _typed_edges(meta, undirected: bool, add=None) -> dict:
    """edge type -> ``(src, dst)`` of every edge entry (plus ``add``: edge type -> ``(2, P)``
    pairs), and with ``undirected`` the reverse relations."""
    edges = {}
    for i, (et, fmt, rel) in enumerate(meta.edges):
        s, d = _edges(meta, et, fmt, rel, i)
        if add and et in add:
            s = np.concatenate([s] + [p[0] for p in add[et]])
            d = np.concatenate([d] + [p[1] for p in add[et]])
        edges[et] = (s, d)
    if undirected:
        for et, (s, d) in list(edges.items()):
            rev = (et[2], f"rev_{et[1]}", et[0])
            if rev in edges:
                raise DatasetError(f"{meta.file}: --undirected would add {rev}, which the "
                                   f"graph already has")
            edges[rev] = (d, s)
    return edges


def _prepare_typed(meta, out, node, labels, splits, target, nc, name, overwrite, undirected,
                   dedupe, extra, t0):
    from ..._memory import peak_rss_bytes
    from ...graph.hetero import HeteroGraph
    from ..format import write_dataset
    from ..hetero import HeteroParts
    from . import PrepareReport, check_trainable

    edges = _typed_edges(meta, undirected)
    g = HeteroGraph.from_edges(dict(meta.nodes), edges, drop_duplicates=dedupe)
    check_trainable({k: [v] for k, v in splits.items()}, labels, splits, str(meta.file))
    path = write_dataset(out, graph=g.csc, node_features={"label": labels}, splits=splits,
                         num_classes=nc, name=name, overwrite=overwrite, extra=extra,
                         hetero=HeteroParts(g, node, target_type=target))
    size = sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
    return PrepareReport(Path(path), g.num_nodes, g.num_edges,
                         sum(e[0].shape[0] for e in edges.values()), nc,
                         {k: int(v.shape[0]) for k, v in splits.items()},
                         time.perf_counter() - t0, peak_rss_bytes(), size)


def _prepare_link(meta, task, out, name, overwrite, undirected, extra, t0):
    from .link import _report

    pairs, negatives = _link_task(meta, task)
    node, edge, label = _features(meta)
    if edge:
        raise DatasetError(f"{meta.file}: edge features are not imported with a link "
                           f"prediction task (its graph gets the split pairs as edges)")
    if label is not None:
        raise meta.err(label[1], "a node feature 'label' in a link prediction dataset")
    # graphfeed's link datasets hold their pairs as edges of the graph (repeats dropped)
    if not meta.hetero:
        from ...graph.csc import CSCGraph
        from ..link import write_link_dataset

        ((_, fmt, rel),) = meta.edges
        src, dst = _edges(meta, None, fmt, rel, 0)
        every = np.concatenate([np.stack([src, dst])] + [p for sp in pairs.values()
                                                          for p in sp.values()], axis=1)
        n = meta.nodes[None]
        graph = CSCGraph.from_edges(every[0], every[1], n, add_reverse=undirected,
                                    drop_duplicates=True)
        from ..._io import load_npy

        feats = {k: (load_npy(v) if isinstance(v, str) else v) for k, v in node.items()}
        write_link_dataset(out, graph=graph, node_features=feats,
                           splits={k: v[None] for k, v in pairs.items()},
                           negatives={k: v[None] for k, v in negatives.items()}, name=name,
                           overwrite=overwrite, undirected=undirected, extra=extra)
        return _report(Path(out), t0)
    from ...graph.hetero import HeteroGraph
    from ..hetero_link import write_typed_link_dataset

    add = {}
    for sp in pairs.values():
        for et, p in sp.items():
            add.setdefault(et, []).append(p)
    g = HeteroGraph.from_edges(dict(meta.nodes), _typed_edges(meta, undirected, add),
                               drop_duplicates=True)
    write_typed_link_dataset(out, graph=g, splits=pairs, negatives=negatives,
                             type_features=node, name=name, overwrite=overwrite, extra=extra)
    return _report(Path(out), t0)
