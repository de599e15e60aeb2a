"""Every package says once what it exports, and every exported name exists at run time.

A lazy package (``__getattr__, __dir__, __all__ = lazy_exports(__name__, {...})``) keeps two
lists of the same names: the map ``lazy_exports`` imports from at run time, and the
``if TYPE_CHECKING:`` imports that type checkers and IDEs read. They drifted once
(``graphfeed.sampling.TorchHeteroSampler`` was declared for type checkers and raised
``AttributeError``), so this file compares them for every package, on the source, and resolves
every name in ``__all__`` in a fresh interpreter without starting CUDA.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import graphfeed

PKG = Path(graphfeed.__file__).parent


@dataclass
class Exports:
    """What a package's ``__init__.py`` declares: ``lazy`` and ``typed`` map a name to the
    absolute module it comes from; ``eager`` are the names ``lazy_exports`` is told are defined
    in the package; ``bound`` every name bound at module level (imports, defs, assignments)."""

    lazy: dict = field(default_factory=dict)
    typed: dict = field(default_factory=dict)
    eager: set = field(default_factory=set)
    bound: set = field(default_factory=set)
    uses_lazy: bool = False


def _absolute(package: str, module: str | None, level: int) -> str:
    if not level:
        return module or ""
    base = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join(base + ([module] if module else []))


def _strings(node) -> list:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split()
    if isinstance(node, (ast.Tuple, ast.List)):
        return [n for e in node.elts for n in _strings(e)]
    raise AssertionError(f"not a literal list of names: {ast.dump(node)}")


def _is_type_checking(test) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def declared(source: str, package: str) -> Exports:
    out = Exports()
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for n in ast.walk(node):
                if isinstance(n, ast.ImportFrom):
                    mod = _absolute(package, n.module, n.level)
                    out.typed.update({a.asname or a.name: mod for a in n.names})
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.bound.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.bound |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            call = node.value
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                    and call.func.id == "lazy_exports"):
                out.uses_lazy = True
                table = call.args[1]
                assert isinstance(table, ast.Dict), "lazy_exports takes a literal dict"
                for key, value in zip(table.keys, table.values):
                    mod = _absolute(package, key.value.lstrip("."), len(key.value)
                                    - len(key.value.lstrip(".")))
                    out.lazy.update({name: mod for name in _strings(value)})
                for kw in call.keywords:
                    if kw.arg == "eager":
                        out.eager |= set(_strings(kw.value))
    return out


def packages() -> dict[str, Path]:
    return {".".join(p.relative_to(PKG.parent).parent.parts): p
            for p in sorted(PKG.rglob("__init__.py"))}


def disagreements(package: str, source: str) -> list[str]:
    """Where the two lists of a lazy package differ (empty for a package that is not lazy)."""
    d = declared(source, package)
    if not d.uses_lazy:
        return []
    bad = [f"{package}.{n}: lazily from {d.lazy[n]}, for type checkers from {d.typed.get(n)}"
           for n in sorted(d.lazy) if d.typed.get(n) != d.lazy[n]]
    bad += [f"{package}.{n}: only for type checkers (from {d.typed[n]})"
            for n in sorted(set(d.typed) - set(d.lazy))]
    bad += [f"{package}.{n}: eager but not bound in the package" for n in sorted(d.eager - d.bound)]
    return bad


@pytest.mark.parametrize("package", sorted(packages()))
def test_the_lazy_map_and_the_type_checking_imports_agree(package):
    assert disagreements(package, packages()[package].read_text()) == []


#: packages whose names subclass PyG's classes, so resolving them imports PyG (which imports
#: triton through torch._dynamo): resolved last, after the check that nothing else loads triton
PYG_PACKAGES = ("graphfeed.pyg",)

RESOLVE = textwrap.dedent(
    """
    import importlib, json, sys
    out = {}
    triton = None
    for package in PACKAGES:
        if package in PYG_PACKAGES and triton is None:
            triton = "triton" in sys.modules
        mod = importlib.import_module(package)
        missing = []
        for name in getattr(mod, "__all__", ()):
            try:
                getattr(mod, name)
            except Exception as e:  # an AttributeError, or a broken submodule
                missing.append(f"{name}: {type(e).__name__}: {e}")
            if name not in dir(mod):
                missing.append(f"{name}: not in dir()")
        out[package] = missing
    torch = sys.modules.get("torch")
    if triton is None:
        triton = "triton" in sys.modules
    print(json.dumps(dict(missing=out, triton=triton,
                          cuda=bool(torch is not None and torch.cuda.is_initialized()))))
    """
)


def test_every_name_in_all_resolves_without_starting_cuda():
    names = sorted(set(packages()) - set(PYG_PACKAGES)) + list(PYG_PACKAGES)
    code = RESOLVE.replace("PYG_PACKAGES", repr(PYG_PACKAGES)).replace("PACKAGES", repr(names))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {p: m for p, m in got["missing"].items() if m} == {}
    assert got["cuda"] is False
    assert got["triton"] is False


def test_every_lazy_package_declares_its_names_for_type_checkers():
    for package, path in packages().items():
        d = declared(path.read_text(), package)
        if d.uses_lazy:
            assert d.typed, f"{package} exports lazily but has no TYPE_CHECKING imports"
            assert set(importlib.import_module(package).__all__) == set(d.lazy) | d.eager


# ---------------------------------------------------------------------- the checker itself
def test_the_checker_sees_a_name_declared_only_for_type_checkers():
    source = textwrap.dedent(
        """
        from typing import TYPE_CHECKING
        from .._lazy import lazy_exports
        SAMPLERS = 1
        __getattr__, __dir__, __all__ = lazy_exports(__name__, {
            ".base": "Block Sampler",
            ".other": ("Moved",),
        }, eager=("SAMPLERS", "gone"))
        if TYPE_CHECKING:
            from .base import Block, Sampler
            from .elsewhere import Moved
            from .torch_hetero import TorchHeteroSampler
        """
    )
    assert disagreements("graphfeed.x", source) == [
        "graphfeed.x.Moved: lazily from graphfeed.x.other, for type checkers from "
        "graphfeed.x.elsewhere",
        "graphfeed.x.TorchHeteroSampler: only for type checkers "
        "(from graphfeed.x.torch_hetero)",
        "graphfeed.x.gone: eager but not bound in the package",
    ]
    assert disagreements("graphfeed", "__all__ = ['a']\n") == []
