"""The typed schema of ``graphfeed.json``, the metadata file of a prepared dataset folder.

Version 1 layout (every path is relative to the dataset folder, POSIX separators)::

    {
      "format_version": 1,
      "name": "cora",
      "num_nodes": 2708,
      "graph": {"layout": "csc", "num_edges": 10556,
                "indptr": "graph/indptr.npy", "indices": "graph/indices.npy",
                "weights": null, "undirected": true},
      "node_features": {"feat":  {"path": "node_features/feat.npy",  "dtype": "float32", "shape": [2708, 1433]},
                        "label": {"path": "node_features/label.npy", "dtype": "int64",   "shape": [2708]}},
      "edge_features": {},
      "splits": {"train": {"path": "splits/train.npy", "kind": "node_ids", "size": 140}, ...},
      "task": {"type": "node_classification", "target": "label", "num_classes": 7},
      "extra": {}
    }

Parsing is strict: unknown keys and wrong types are errors naming the file and the key, so a typo
never silently drops data. Room to grow without breaking version 1 readers' files: per-edge-type
graphs and node types (heterogeneous graphs) become new optional top-level keys, ``edge_features``
already exists (one row per stored edge, in ``indices`` order), a link-prediction task is a new
``task.type`` and split ``kind`` (``"edge_ids"``/``"node_pairs"``). A reader meeting a newer
``format_version`` refuses with a clear message instead of guessing.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Optional

import numpy as np

from ..errors import DatasetError

FORMAT_VERSION = 3
#: the most classes a dataset may declare (a classifier's output layer is hidden x classes)
MAX_NUM_CLASSES = 1_000_000
METADATA_FILE = "graphfeed.json"
TASK_TYPES = ("node_classification", "link_prediction")
#: ``node_ids``: 1-D node ids (node classification); ``node_pairs``: int ``(2, P)`` edges of the
#: graph (link prediction); ``negative_dst``: int ``(P, k)`` fixed negative destinations of the
#: ``node_pairs`` split ``X`` it is named after (``X_neg``), see ``graphfeed.datasets.link``
SPLIT_KINDS = ("node_ids", "node_pairs", "negative_dst")
#: feature dtypes a dataset may hold (torch has an equivalent for each)
FEATURE_DTYPES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "bfloat16",
)
#: feature dtypes numpy has no type for, held as bits (``graphfeed._dtypes``; format_version 3)
from .._dtypes import BITS_DTYPES  # noqa: E402


def bits_dtype(spec: "ArraySpec") -> Optional[str]:
    """``spec``'s dtype when its file holds that dtype's bits (``"bfloat16"``), else ``None``:
    what a feature opened over the file must be told (the ``dtype`` option of the backends)."""
    return spec.dtype if spec.dtype in BITS_DTYPES else None


def storage_dtype(name: str) -> np.dtype:
    """The numpy dtype a feature of metadata dtype ``name`` has in its ``.npy``: the dtype
    itself, or the bits of one numpy lacks (:data:`BITS_DTYPES`)."""
    return np.dtype(BITS_DTYPES.get(name, name))
#: the splits ``Dataset.train_ids`` / ``valid_ids`` / ``test_ids`` read (a dataset may hold others)
SPLIT_NAMES = ("train", "valid", "test")


# --------------------------------------------------------------------------- names of files and roles
# One place names every array of the folder: the writers use the paths, and the role keys
# (``Metadata.paths()``, ``LoadedArrays.paths``) name the arrays in messages.
def feature_path(name: str, kind: str = "node") -> str:
    """Where feature ``name`` is written: ``node_features/<name>.npy`` (``kind="edge"``:
    ``edge_features/<name>.npy``)."""
    return f"{kind}_features/{name}.npy"


#: the node and edge feature name of times (temporal sampling; ``graphfeed prepare generic
#: --time-col/--time-key`` and ``--node-times`` write them)
TIME_FEATURE = "timestamp"


def feature_role(name: str, kind: str = "node") -> str:
    """The role key of feature ``name``: ``node_features.<name>`` / ``edge_features.<name>``."""
    return f"{kind}_features.{name}"


def split_path(name: str, index: int, num_sets: int) -> str:
    """Where set ``index`` of split ``name`` is written: ``splits/<name>.npy`` for a split of one
    set, else ``splits/<name>.<index>.npy``."""
    return f"splits/{name}.npy" if num_sets == 1 else f"splits/{name}.{index}.npy"


def split_role(name: str, index: int, num_sets: int) -> str:
    """The role key of set ``index`` of split ``name``: ``splits.<name>`` for a split of one set,
    else ``splits.<name>.<index>``."""
    return f"splits.{name}" if num_sets == 1 else f"splits.{name}.{index}"


@dataclass(frozen=True)
class ArraySpec:
    """One ``.npy`` array: where it is, and what it must hold."""

    path: str
    dtype: str
    shape: tuple[int, ...]

    def to_json(self) -> dict:
        return {"path": self.path, "dtype": self.dtype, "shape": list(self.shape)}


@dataclass(frozen=True)
class GraphSpec:
    """The graph's arrays: CSC ``indptr``/``indices`` (and optional ``weights``) paths, the edge
    count, and whether every edge is stored in both directions."""

    num_edges: int
    indptr: str
    indices: str
    weights: Optional[str] = None
    undirected: bool = False
    layout: str = "csc"

    def to_json(self) -> dict:
        return {
            "layout": self.layout,
            "num_edges": self.num_edges,
            "indptr": self.indptr,
            "indices": self.indices,
            "weights": self.weights,
            "undirected": self.undirected,
        }


@dataclass(frozen=True)
class SplitSpec:
    """One split (``train``, ``valid``, ...): one id file per split set (``paths[i]`` holds the
    ids of split index ``i``; a single path is shared by every index)."""

    paths: tuple
    sizes: tuple
    kind: str = "node_ids"

    def __post_init__(self):
        if isinstance(self.paths, str):  # SplitSpec("splits/train.npy", 140): one set
            object.__setattr__(self, "paths", (self.paths,))
        if isinstance(self.sizes, int):
            object.__setattr__(self, "sizes", (self.sizes,))
        assert len(self.paths) == len(self.sizes) >= 1, "one size per path"

    @property
    def num_sets(self) -> int:
        return len(self.paths)

    def path_of(self, index: int) -> str:
        return self.paths[index if len(self.paths) > 1 else 0]

    def size_of(self, index: int) -> int:
        return self.sizes[index if len(self.sizes) > 1 else 0]

    @property
    def path(self) -> str:
        return self.paths[0]

    @property
    def size(self) -> int:
        return self.sizes[0]

    def to_json(self) -> dict:
        if len(self.paths) == 1:
            return {"path": self.paths[0], "kind": self.kind, "size": self.sizes[0]}
        return {"paths": list(self.paths), "kind": self.kind, "sizes": list(self.sizes)}


@dataclass(frozen=True)
class TaskSpec:
    """What the dataset is for: ``type`` (``node_classification``), the ``target`` feature (the
    labels) and ``num_classes``."""

    type: str
    target: str
    num_classes: int
    #: text of each class (string labels), ``class_names[i]`` for class ``i``; format_version 2
    class_names: Optional[tuple] = None

    def to_json(self) -> dict:
        if self.type == "link_prediction":  # no target: the splits are the labelled edges
            return {"type": self.type}
        d = {"type": self.type, "target": self.target, "num_classes": self.num_classes}
        if self.class_names is not None:
            d["class_names"] = list(self.class_names)
        return d


@dataclass(frozen=True)
class Metadata:
    name: str
    num_nodes: int
    graph: GraphSpec
    node_features: dict[str, ArraySpec]
    splits: dict[str, SplitSpec]
    task: TaskSpec
    edge_features: dict[str, ArraySpec] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    #: node and edge types (``graphfeed.datasets.hetero.HeteroSpec``); None: one type
    hetero: Optional[Any] = None

    @property
    def num_split_sets(self) -> int:
        """How many split sets (split indices ``0..k-1``) the dataset holds (1 for most)."""
        return max((v.num_sets for v in self.splits.values()), default=1)

    def required_version(self) -> int:
        """The oldest format_version that can hold this metadata: 3 for features of a dtype
        numpy lacks (bfloat16), 2 for class names or several split sets, else 1 (so older
        readers keep reading what they can, and refuse what they cannot as newer)."""
        if any(s.dtype in BITS_DTYPES for s in self.feature_specs()):
            return 3
        return 2 if self.task.class_names is not None or self.num_split_sets > 1 else 1

    def feature_specs(self) -> list:
        """Every feature's :class:`ArraySpec`: node, edge and (typed datasets) per node type."""
        specs = [*self.node_features.values(), *self.edge_features.values()]
        if self.hetero is not None:
            specs += [s for fs in self.hetero.node_features.values() for s in fs.values()]
        return specs

    def to_json(self) -> dict:
        out = {
            "format_version": self.format_version,
            "name": self.name,
            "num_nodes": self.num_nodes,
            "graph": self.graph.to_json(),
            "node_features": {k: v.to_json() for k, v in self.node_features.items()},
            "edge_features": {k: v.to_json() for k, v in self.edge_features.items()},
            "splits": {k: v.to_json() for k, v in self.splits.items()},
            "task": self.task.to_json(),
            "extra": self.extra,
        }
        if self.hetero is not None:
            out["hetero"] = self.hetero.to_json()
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n"

    def paths(self) -> dict[str, str]:
        """Every array path the metadata names, keyed by a readable role."""
        out = {"graph.indptr": self.graph.indptr, "graph.indices": self.graph.indices}
        if self.graph.weights is not None:
            out["graph.weights"] = self.graph.weights
        for kind, feats in (("node", self.node_features), ("edge", self.edge_features)):
            for k, v in feats.items():
                out[feature_role(k, kind)] = v.path
        for k, v in self.splits.items():
            for i, p in enumerate(v.paths):
                out[split_role(k, i, v.num_sets)] = p
        if self.hetero is not None:
            out.update(self.hetero.paths())
        return out


# --------------------------------------------------------------------------- parsing helpers
class _Ctx:
    """Where we are in the file, for messages: ``graphfeed.json: graph.num_edges``."""

    def __init__(self, source: str, version: int = FORMAT_VERSION):
        self.source = source
        self.version = version

    def err(self, where: str, msg: str) -> DatasetError:
        return DatasetError(f"{self.source}: {where}: {msg}")

    def obj(self, value, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
        if not isinstance(value, dict):
            raise self.err(where, f"expected a JSON object, got {_short(value)}")
        unknown = sorted(set(value) - set(required) - set(optional))
        if unknown:
            raise self.err(
                where, f"unknown key(s) {unknown}; allowed: {sorted(required + optional)}"
            )
        missing = [k for k in required if k not in value]
        if missing:
            raise self.err(where, f"missing key(s) {missing}")
        return value

    def int_(self, value, where: str, *, lo: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.err(where, f"expected an integer, got {_short(value)}")
        if value < lo:
            raise self.err(where, f"must be >= {lo}, got {value}")
        return value

    def str_(self, value, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.err(where, f"expected a non-empty string, got {_short(value)}")
        return value

    def bool_(self, value, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.err(where, f"expected true or false, got {_short(value)}")
        return value

    def name(self, value, where: str) -> str:
        value = self.str_(value, where)
        if not is_valid_name(value):
            raise self.err(where, f"names may hold letters, digits, '_', '-', '.', got {value!r}")
        return value

    def path(self, value, where: str) -> str:
        value = self.str_(value, where)
        check_relative_path(value, f"{self.source}: {where}")
        return value

    def array(self, value, where: str) -> ArraySpec:
        d = self.obj(value, where, ("path", "dtype", "shape"))
        dtype = self.str_(d["dtype"], f"{where}.dtype")
        if dtype not in FEATURE_DTYPES:
            raise self.err(f"{where}.dtype", f"unsupported dtype {dtype!r}; allowed: {list(FEATURE_DTYPES)}")
        if dtype in BITS_DTYPES and self.version < 3:
            raise self.err(f"{where}.dtype", f"{dtype} features need format_version 3")
        shape = d["shape"]
        if not isinstance(shape, list) or not shape:
            raise self.err(f"{where}.shape", f"expected a non-empty list of sizes, got {_short(shape)}")
        shape = tuple(self.int_(s, f"{where}.shape[{i}]") for i, s in enumerate(shape))
        return ArraySpec(self.path(d["path"], f"{where}.path"), dtype, shape)


def _short(value) -> str:
    s = json.dumps(value) if _jsonable(value) else repr(value)
    return s if len(s) <= 60 else s[:57] + "..."


def _jsonable(value) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def is_valid_name(value) -> bool:
    """Feature and split names become file names: letters, digits, ``_ - .``, no leading dot."""
    return (
        isinstance(value, str)
        and bool(value)
        and all(c.isalnum() or c in "_-." for c in value)
        and not value.startswith(".")
    )


def check_name(value, where: str) -> str:
    """A ``DatasetError`` unless ``value`` is a valid feature or split name (checked before any
    file named after it is written)."""
    if not is_valid_name(value):
        raise DatasetError(f"{where}: names may hold letters, digits, '_', '-', '.', got {value!r}")
    return value


def check_relative_path(p: str, where: str) -> None:
    """Reject paths that could leave the dataset folder: absolute, ``..``, backslashes, drive
    letters, NUL bytes. (Symlinks are checked against the real folder when files are opened.)"""
    if "\x00" in p or "\\" in p:
        raise DatasetError(f"{where}: path {p!r} holds a NUL byte or a backslash")
    pp = PurePosixPath(p)
    if pp.is_absolute() or (len(p) > 1 and p[1] == ":"):
        raise DatasetError(f"{where}: path {p!r} is absolute; paths must be relative to the dataset folder")
    if any(part == ".." for part in pp.parts):
        raise DatasetError(f"{where}: path {p!r} contains '..'; paths must stay inside the dataset folder")
    if not pp.parts or pp.parts == (".",):
        raise DatasetError(f"{where}: empty path {p!r}")


def resolve_inside(root: Path, rel: str, where: str) -> Path:
    """``root / rel`` after following symlinks, refusing anything that ends up outside ``root``."""
    check_relative_path(rel, where)
    real_root = Path(os.path.realpath(root))
    target = Path(os.path.realpath(real_root / rel))
    try:
        target.relative_to(real_root)
    except ValueError:
        raise DatasetError(
            f"{where}: {rel!r} resolves to {target}, outside the dataset folder {real_root} "
            f"(a symbolic link leaving the folder?)"
        ) from None
    return target


def parse_metadata(raw: Any, source: str = METADATA_FILE) -> Metadata:
    """Validate a decoded ``graphfeed.json`` and return the typed :class:`Metadata`."""
    c = _Ctx(source)
    if not isinstance(raw, dict):
        raise c.err("top level", f"expected a JSON object, got {_short(raw)}")
    if "format_version" not in raw:
        raise c.err("format_version", "missing; this is not a graphfeed dataset metadata file")
    ver = raw["format_version"]
    if isinstance(ver, bool) or not isinstance(ver, int):
        raise c.err("format_version", f"expected an integer, got {_short(ver)}")
    if ver > FORMAT_VERSION:
        raise c.err(
            "format_version",
            f"{ver} was written by a newer graphfeed; this version reads format_version "
            f"{FORMAT_VERSION}. Upgrade graphfeed.",
        )
    if ver < 1:
        raise c.err("format_version", f"invalid version {ver}")
    c.version = ver
    d = c.obj(
        raw,
        "top level",
        ("format_version", "num_nodes", "graph", "node_features", "splits", "task"),
        ("name", "edge_features", "extra", "hetero"),
    )
    num_nodes = c.int_(d["num_nodes"], "num_nodes")
    name = c.str_(d.get("name", "dataset"), "name")

    g = c.obj(d["graph"], "graph", ("num_edges", "indptr", "indices"), ("layout", "weights", "undirected"))
    layout = g.get("layout", "csc")
    if layout != "csc":
        raise c.err("graph.layout", f"unsupported layout {_short(layout)}; format_version 1 has 'csc'")
    weights = g.get("weights")
    graph = GraphSpec(
        num_edges=c.int_(g["num_edges"], "graph.num_edges"),
        indptr=c.path(g["indptr"], "graph.indptr"),
        indices=c.path(g["indices"], "graph.indices"),
        weights=None if weights is None else c.path(weights, "graph.weights"),
        undirected=c.bool_(g.get("undirected", False), "graph.undirected"),
    )

    def features(value, where):
        if not isinstance(value, dict):
            raise c.err(where, f"expected a JSON object of name -> array, got {_short(value)}")
        return {c.name(k, f"{where} key"): c.array(v, f"{where}.{k}") for k, v in value.items()}

    node_features = features(d["node_features"], "node_features")
    edge_features = features(d.get("edge_features", {}), "edge_features")

    if not isinstance(d["splits"], dict):
        raise c.err("splits", f"expected a JSON object of name -> split, got {_short(d['splits'])}")
    splits = {}
    for k, v in d["splits"].items():
        where = f"splits.{k}"
        c.name(k, "splits key")
        if isinstance(v, dict) and "paths" in v:
            s = c.obj(v, where, ("paths", "sizes"), ("kind",))
            if ver < 2:
                raise c.err(where, "several split sets ('paths') need format_version 2")
            ps, ss = s["paths"], s["sizes"]
            if not isinstance(ps, list) or not isinstance(ss, list) or not ps or len(ps) != len(ss):
                raise c.err(where, "'paths' and 'sizes' must be non-empty lists of the same length")
            if len(ps) > 1000:
                raise c.err(where, f"{len(ps)} split sets; at most 1000")
            paths = tuple(c.path(x, f"{where}.paths[{i}]") for i, x in enumerate(ps))
            sizes = tuple(c.int_(x, f"{where}.sizes[{i}]") for i, x in enumerate(ss))
        else:
            s = c.obj(v, where, ("path", "size"), ("kind",))
            paths, sizes = (c.path(s["path"], f"{where}.path"),), (c.int_(s["size"], f"{where}.size"),)
        kind = s.get("kind", "node_ids")
        if kind not in SPLIT_KINDS:
            raise c.err(f"{where}.kind", f"unsupported split kind {_short(kind)}; allowed: {list(SPLIT_KINDS)}")
        splits[k] = SplitSpec(paths, sizes, kind)
    counts = {v.num_sets for v in splits.values()} - {1}
    if len(counts) > 1:
        raise c.err("splits", f"splits hold different numbers of sets {sorted(counts)}; each must hold "
                              f"the same number (or one shared set)")

    t = c.obj(d["task"], "task", ("type",), ("target", "num_classes", "class_names"))
    ttype = t["type"]
    if ttype not in TASK_TYPES:
        raise c.err("task.type", f"unsupported task type {_short(ttype)}; format_version 1 knows {list(TASK_TYPES)}")
    if ttype == "link_prediction":
        from ._link_checks import check_link_metadata

        c.obj(t, "task", ("type",))
        hetero = None
        if "hetero" in d:  # typed splits, one per (split, edge type): datasets/hetero_link.py
            from ._link_checks import check_typed_link_metadata
            from .hetero_schema import parse_hetero

            hetero = parse_hetero(d["hetero"], c, num_nodes, graph.num_edges)
            check_typed_link_metadata(splits, hetero, c.err)
        else:
            check_link_metadata(splits, c.err)
        return Metadata(name=name, num_nodes=num_nodes, graph=graph, node_features=node_features,
                        splits=splits, task=TaskSpec(ttype, "", 0), edge_features=edge_features,
                        extra=_extra(d, c), format_version=ver, hetero=hetero)
    c.obj(t, "task", ("type", "target", "num_classes"), ("class_names",))
    num_classes = c.int_(t["num_classes"], "task.num_classes", lo=1)
    if num_classes > MAX_NUM_CLASSES or num_classes > max(1, num_nodes):
        raise c.err("task.num_classes", f"{num_classes} classes is more than the {num_nodes} nodes or the "
                                        f"limit of {MAX_NUM_CLASSES:,}")
    class_names = None
    if "class_names" in t:
        if ver < 2:
            raise c.err("task.class_names", "needs format_version 2")
        names = t["class_names"]
        if not isinstance(names, list) or len(names) != num_classes or not all(isinstance(x, str) for x in names):
            raise c.err("task.class_names", f"expected a list of {num_classes} strings (one per class)")
        class_names = tuple(names)
    task = TaskSpec(ttype, c.name(t["target"], "task.target"), num_classes, class_names)
    if task.target not in node_features:
        raise c.err("task.target", f"{task.target!r} is not one of node_features {sorted(node_features)}")

    extra = _extra(d, c)
    if any(v.kind != "node_ids" for v in splits.values()):
        bad = next(k for k, v in splits.items() if v.kind != "node_ids")
        raise c.err(f"splits.{bad}.kind", f"{splits[bad].kind!r} splits belong to a "
                                          f"link_prediction task, not {ttype}")
    hetero = None
    if "hetero" in d:
        from .hetero_schema import parse_hetero

        hetero = parse_hetero(d["hetero"], c, num_nodes, graph.num_edges)
    return Metadata(
        name=name,
        num_nodes=num_nodes,
        graph=graph,
        node_features=node_features,
        splits=splits,
        task=task,
        edge_features=edge_features,
        extra=extra,
        format_version=ver,
        hetero=hetero,
    )


def _extra(d: dict, c: _Ctx) -> dict:
    extra = d.get("extra", {})
    if not isinstance(extra, dict):
        raise c.err("extra", f"expected a JSON object, got {_short(extra)}")
    return extra


def _no_constants(token: str):
    raise ValueError(f"non-standard JSON number {token}")


def read_metadata(folder: Path) -> Metadata:
    """Read and validate ``folder/graphfeed.json`` (plain JSON, never YAML tags or pickles)."""
    folder = Path(folder)
    path = folder / METADATA_FILE
    if not folder.is_dir():
        stranded = sorted(folder.parent.glob(f".{folder.name}.old-*")) if folder.name else []
        hint = (f"; an interrupted --overwrite left the previous copy at {stranded[-1]} (the next "
                f"prepare of {folder} puts it back)" if stranded else "")
        what = "does not exist" if not folder.exists() else "not a directory"
        raise DatasetError(f"{folder}: not a dataset folder ({what}){hint}")
    if not path.is_file():
        raise DatasetError(f"{path}: metadata file not found; is {folder} a prepared graphfeed dataset?")
    resolve_inside(folder, METADATA_FILE, str(path))
    try:
        with open(path, "rb") as f:
            data = f.read(16 * 1024 * 1024 + 1)
        if len(data) > 16 * 1024 * 1024:
            raise DatasetError(f"{path}: metadata file is larger than 16 MiB")
        raw = json.loads(data.decode("utf-8"), parse_constant=_no_constants)
        return parse_metadata(raw, str(path))
    except RecursionError:
        raise DatasetError(f"{path}: JSON nested too deeply") from None
    except OSError as e:
        raise DatasetError(f"{path}: cannot read ({e.strerror or e})") from None
    except (UnicodeDecodeError, ValueError) as e:
        if isinstance(e, DatasetError):
            raise
        raise DatasetError(f"{path}: malformed JSON ({e})") from None


def dtype_name(dtype) -> str:
    """Canonical dtype string for the metadata; raises for dtypes a dataset cannot hold. A
    dtype numpy lacks is given by its name (``"bfloat16"``; :data:`BITS_DTYPES`)."""
    if isinstance(dtype, str) and dtype in BITS_DTYPES:
        return dtype
    dt = np.dtype(dtype)
    name = "bool" if dt == np.bool_ else dt.name
    if name not in FEATURE_DTYPES or dt.byteorder == ">":
        raise DatasetError(f"dtype {dt} is not supported in a dataset; allowed: {list(FEATURE_DTYPES)}")
    return name


def check_json_value(value, where: str) -> None:
    """``extra`` must round-trip through JSON exactly (no NaN, no objects)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise DatasetError(f"{where}: not plain JSON ({e})") from None
    if isinstance(value, float) and not math.isfinite(value):  # pragma: no cover - caught above
        raise DatasetError(f"{where}: non-finite number")
