"""The import graph's rules, checked on the source (every ``import`` statement, at module level
or inside a function, is an arrow):

1. the core (graph, sampling, features, loader, placement, distributed, datasets and the private
   bottom-floor modules) never imports the application (training, trainer, models, bench, cli);
2. no cycles: the modules form floors, each importing only from floors below it;
3. the bottom floor (``graphfeed._*``, ``errors``, ``cuda_alloc``) imports nothing above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import graphfeed

PKG = Path(graphfeed.__file__).parent
CORE = ("graph", "sampling", "features", "loader", "placement", "distributed", "datasets",
        "partition")
APPLICATION = ("training", "trainer", "models", "bench", "cli", "__main__")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _package_of(path: Path, name: str) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def imports(path: Path, name: str, known) -> set[str]:
    """The graphfeed modules ``path`` imports (``from pkg import sub`` counts as ``pkg.sub``
    when ``sub`` is a module)."""
    package = _package_of(path, name)
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # "graphfeed.x.y.attr" -> the module that defines it
                t = t.rpartition(".")[0]
            if t.startswith("graphfeed") and t != name:
                out.add(t)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(path, name, mods) for name, path in mods.items()}


def _in(name: str, groups) -> bool:
    return any(name == f"graphfeed.{g}" or name.startswith(f"graphfeed.{g}.") for g in groups)


def _is_bottom(name: str) -> bool:
    last = name.split(".")[1] if name.count(".") else ""
    private = last.startswith("_") and not last.startswith("__")  # not __main__
    return name.count(".") == 1 and (private or last in ("errors", "cuda_alloc"))


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_core_never_imports_the_application():
    bad = [f"{m} imports {t}" for m, ts in graph().items()
           if not _in(m, APPLICATION) and m != "graphfeed"
           for t in sorted(ts) if _in(t, APPLICATION)]
    assert bad == []


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_the_bottom_floor_imports_only_the_bottom_floor():
    bad = [f"{m} imports {t}" for m, ts in graph().items() if _is_bottom(m)
           for t in sorted(ts) if not _is_bottom(t)]
    assert bad == []


# ---------------------------------------------------------------------- the checker itself
def _tree(tmp_path, files: dict[str, str]) -> dict[str, set[str]]:
    root = tmp_path / "graphfeed"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    global PKG
    saved, PKG = PKG, root
    try:
        return graph()
    finally:
        PKG = saved


def test_the_checker_sees_relative_lazy_and_submodule_imports(tmp_path):
    g = _tree(tmp_path, {
        "__init__.py": "",
        "_units.py": "",
        "loader/__init__.py": "from . import dataloader\n",
        "loader/dataloader.py": "def f():\n    from ..training import train\n",
        "training.py": "from graphfeed import _units\nfrom .loader.dataloader import DataLoader\n",
    })
    assert g["graphfeed.loader"] == {"graphfeed.loader.dataloader"}
    assert g["graphfeed.loader.dataloader"] == {"graphfeed.training"}
    assert g["graphfeed.training"] == {"graphfeed._units", "graphfeed.loader.dataloader"}
    assert cycles(g) == [["graphfeed.loader.dataloader", "graphfeed.training"]]


@pytest.mark.parametrize("name,bottom", [("graphfeed._cuda", True), ("graphfeed.errors", True),
                                         ("graphfeed.loader", False),
                                         ("graphfeed.loader._x", False),
                                         ("graphfeed.__main__", False)])
def test_the_bottom_floor_is_the_private_top_level_modules(name, bottom):
    assert _is_bottom(name) is bottom
