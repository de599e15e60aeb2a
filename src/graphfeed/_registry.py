"""Name registries: the one list of valid names for feature backends, samplers and placement
modes. The CLI builds its ``choices=`` from them and errors list their names, so a new entry is
one line in the registry and nothing else.

>>> BACKENDS = Registry("feature backend")
>>> BACKENDS.add("ram", ".memory:open_ram", "a .npy loaded into memory")
>>> BACKENDS.names()
('ram',)

An entry's target is ``"relative.module:attribute"`` resolved on first use (importing the
registry stays cheap: numba, lmdb and CUDA code load only when an entry is used), or, for plain
data such as the placement modes, the object itself.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Iterator

from .errors import GraphfeedError

__all__ = ["Registry", "Entry"]


@dataclass(frozen=True)
class Entry:
    name: str
    target: Any  # "module:attribute", the module relative to the registry's package; or the object
    help: str = ""


class Registry:
    """Ordered ``name -> "module:attribute"`` entries of one kind (``"feature backend"``)."""

    def __init__(self, kind: str, package: str = "graphfeed"):
        self.kind = kind
        self.package = package
        self._entries: dict[str, Entry] = {}

    def add(self, name: str, target: Any, help: str = "") -> None:
        assert name not in self._entries, f"{self.kind} {name!r} registered twice"
        assert not isinstance(target, str) or ":" in target, target
        self._entries[name] = Entry(name, target, help)

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def check(self, name: Any) -> str:
        """``name`` if registered, else ``GraphfeedError`` listing the valid names."""
        if not isinstance(name, str) or name not in self._entries:
            raise GraphfeedError(
                f"unknown {self.kind} {name!r}; valid: {', '.join(self._entries)}")
        return name

    def entry(self, name: str) -> Entry:
        return self._entries[self.check(name)]

    def get(self, name: str) -> Any:
        """The registered object (its module imported on first use)."""
        target = self.entry(name).target
        if not isinstance(target, str):
            return target
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module, self.package), attr)

    def help(self) -> str:
        """``"ram (a .npy loaded into memory), disk (...)"`` for ``--help`` texts."""
        return ", ".join(f"{e.name} ({e.help})" if e.help else e.name
                         for e in self._entries.values())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"
