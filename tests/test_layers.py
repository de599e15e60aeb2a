"""The import graph's rules, checked on the source (every ``import`` statement, at module level
or inside a function, is an arrow):

1. the packages stand on floors (:data:`FLOORS`, top down; ``docs/architecture.md``, "Layout",
   shows the same): a package imports only packages on floors below its own, and the packages
   of one floor import neither each other;
2. so the core (placement and every floor below it) never imports the application (the floors
   above placement);
3. no cycles, between modules either;
4. the bottom floor (``graphfeed._*``, ``errors``, ``cuda_alloc``) imports nothing above it;
5. ``graphfeed/__init__.py``, the front door, stands above every floor: it names public objects
   lazily, and the modules below read nothing from it but ``__version__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import graphfeed

PKG = Path(graphfeed.__file__).parent
#: the bottom floor, in FLOORS: the private top-level modules (``_is_bottom``)
BOTTOM = "the private top-level modules"
#: The floors of the import graph, from the top down: a package (a top-level module or
#: subpackage of graphfeed) imports only from floors after its own. The one statement of the
#: order; ``docs/architecture.md``'s layout lists the same floors.
FLOORS = (
    ("__main__",),
    ("cli",),
    ("training",),
    ("trainer",),
    ("models", "bench"),
    # PyG's interfaces over the core (graphfeed.pyg): below the application, above the core
    ("pyg",),
    # the core: it never imports a floor above this line
    ("placement",),
    ("partition",),
    ("loader", "distributed"),
    ("sampling",),
    ("datasets",),
    ("features", "graph"),
    (BOTTOM,),
)
CORE_TOP = FLOORS.index(("placement",))
APPLICATION = tuple(p for floor in FLOORS[:CORE_TOP] for p in floor)
CORE = tuple(p for floor in FLOORS[CORE_TOP:] for p in floor if p != BOTTOM)


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


def package_of(name: str) -> str:
    """The FLOORS entry of module ``name``: its top-level package or module under graphfeed,
    ``BOTTOM`` for the private top-level modules, ``""`` for the front door."""
    if name == "graphfeed":
        return ""
    return BOTTOM if _is_bottom(name) else name.split(".")[1]


def floor_of(package: str) -> int:
    for i, floor in enumerate(FLOORS):
        if package in floor:
            return i
    raise KeyError(package)


def floor_violations(g: dict[str, set[str]]) -> list[str]:
    """Every arrow from a module to a package on its own floor or above (the front door aside),
    and every package that is on no floor."""
    bad = []
    for m, ts in sorted(g.items()):
        pm = package_of(m)
        if not pm:
            continue
        try:
            fm = floor_of(pm)
        except KeyError:
            bad.append(f"{m} is on no floor: add {pm!r} to FLOORS (and docs/architecture.md)")
            continue
        for t in sorted(ts):
            pt = package_of(t)
            if not pt or pt == pm or pt not in {p for f in FLOORS for p in f}:
                continue  # the front door; the same package; an unlisted one is reported above
            ft = floor_of(pt)
            if ft < fm:
                bad.append(f"{m} imports {t}: {pt} is above {pm}")
            elif ft == fm and pt != BOTTOM:
                bad.append(f"{m} imports {t}: {pt} and {pm} share a floor")
    return bad


def front_door_reads(root: Path = None) -> list[str]:
    """``from graphfeed import X`` (or a relative form) below the front door, X not a module."""
    root = root or PKG
    mods = {_module_name(p) for p in root.rglob("*.py")}
    out = []
    for path in sorted(root.rglob("*.py")):
        name = _module_name(path)
        if name == "graphfeed":
            continue
        package = _package_of(path, name)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod == "graphfeed":
                out += [f"{name} reads graphfeed.{a.name}" for a in node.names
                        if f"graphfeed.{a.name}" not in mods and a.name != "__version__"]
    return out


def test_every_package_imports_only_floors_below_its_own():
    assert floor_violations(graph()) == []


def test_every_package_is_on_a_floor():
    listed = {p for floor in FLOORS for p in floor}
    packages = {package_of(m) for m in modules()} - {""}
    assert sorted(packages - listed) == []
    assert sorted(listed - packages) == []


def test_the_architecture_document_lists_the_floors_in_this_order():
    """docs/architecture.md's layout names each package at the start of a line, top down."""
    text = (PKG.parent.parent / "docs" / "architecture.md").read_text()
    layout = text[text.index("## Layout"):text.index("\n## ", text.index("## Layout") + 1)]
    firsts = []
    for line in layout.splitlines():
        word = line.strip().split(" ")[0].rstrip("/")
        if line.startswith("  ") and not line.startswith("   ") and word.removesuffix(".py"):
            firsts.append(word.removesuffix(".py"))
    named = [p for floor in FLOORS for p in floor if p not in (BOTTOM, "__main__")]
    assert [w for w in firsts if w in named] == named


def test_the_front_door_is_read_only_for_its_version():
    assert front_door_reads() == []


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


def test_the_checker_sees_a_lower_floor_importing_a_higher_one(tmp_path):
    g = _tree(tmp_path, {
        "__init__.py": "from .training import train\n",
        "_units.py": "",
        "models/__init__.py": "",
        "models/gnn.py": "def f():\n    from ..trainer.config import MODELS\n",
        "trainer/__init__.py": "",
        "trainer/config.py": "from .._units import parse_size\n",
        "bench/x.py": "from ..models import gnn\n",
        "sampling/base.py": "from ..datasets.schema import TIME_FEATURE\n",
        "datasets/schema.py": "",
        "newpkg/x.py": "",
    })
    assert floor_violations(g) == [
        "graphfeed.bench.x imports graphfeed.models.gnn: models and bench share a floor",
        "graphfeed.models.gnn imports graphfeed.trainer.config: trainer is above models",
        "graphfeed.newpkg.x is on no floor: add 'newpkg' to FLOORS (and docs/architecture.md)",
    ]


def test_the_checker_sees_reads_from_the_front_door(tmp_path):
    root = tmp_path / "graphfeed"
    (root / "cli").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "errors.py").write_text("")
    (root / "cli" / "main.py").write_text("from .. import __version__, errors\n"
                                          "from graphfeed import train\n")
    global PKG
    saved, PKG = PKG, root
    try:
        assert front_door_reads(root) == ["graphfeed.cli.main reads graphfeed.train"]
    finally:
        PKG = saved


@pytest.mark.parametrize("name,bottom", [("graphfeed._cuda", True), ("graphfeed.errors", True),
                                         ("graphfeed.loader", False),
                                         ("graphfeed.loader._x", False),
                                         ("graphfeed.__main__", False)])
def test_the_bottom_floor_is_the_private_top_level_modules(name, bottom):
    assert _is_bottom(name) is bottom
