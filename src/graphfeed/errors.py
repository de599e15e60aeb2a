"""Errors graphfeed raises for bad input.

Every error about user input is a ``ValueError`` subclass, so ``except ValueError`` keeps working
for callers that do not know graphfeed; the subclasses let callers tell the cases apart.
"""

from __future__ import annotations

__all__ = ["GraphfeedError", "DatasetError", "MissingDependencyError", "GraphfeedWarning"]


class GraphfeedError(ValueError):
    """Base class of graphfeed's errors about user input (a ``ValueError``)."""


class DatasetError(GraphfeedError):
    """A dataset folder, metadata file or array file is missing, malformed or unsafe.

    The message names the file and the offending value.
    """


class MissingDependencyError(ImportError):
    """An optional dependency is not installed; the message says which extra provides it."""

    def __init__(self, package: str, extra: str, purpose: str):
        super().__init__(
            f"{purpose} needs the optional package '{package}', which is not installed. "
            f"Install it with: pip install 'graphfeed[{extra}]'  (or: pip install {package})"
        )
        self.package = package
        self.extra = extra


class GraphfeedWarning(UserWarning):
    """A graphfeed usage warning: the call works, but not the way the caller probably expects."""
