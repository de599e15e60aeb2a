"""The core never imports the application: graph, sampling, features, loader, placement,
distributed and datasets import neither training, trainer, models, bench nor cli."""

from __future__ import annotations

import ast
from pathlib import Path

import graphfeed

PKG = Path(graphfeed.__file__).parent
CORE = ("graph", "sampling", "features", "loader", "placement", "distributed", "datasets")
APPLICATION = ("training", "trainer", "models", "bench", "cli")


def _imports(path: Path, package: str):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                yield ".".join(base + ([node.module] if node.module else []))
            else:
                yield node.module or ""


def test_core_does_not_import_the_application():
    bad = []
    for sub in CORE:
        for path in (PKG / sub).rglob("*.py"):
            package = "graphfeed." + ".".join(path.relative_to(PKG).parent.parts)
            for mod in _imports(path, package):
                if any(mod == f"graphfeed.{a}" or mod.startswith(f"graphfeed.{a}.") for a in APPLICATION):
                    bad.append(f"{path.relative_to(PKG)} imports {mod}")
    assert bad == []


def test_the_checker_resolves_relative_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from ..training import train\nfrom . import x\nimport graphfeed.cli.main\n")
    assert list(_imports(f, "graphfeed.loader")) == ["graphfeed.training", "graphfeed.loader",
                                                      "graphfeed.cli.main"]
