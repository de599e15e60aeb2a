"""Errors graphfeed raises for bad input.

Every error about user input is a ``ValueError`` subclass, so ``except ValueError`` keeps working
for callers that do not know graphfeed; the subclasses let callers tell the cases apart.
"""

from __future__ import annotations

__all__ = ["GraphfeedError", "DatasetError", "MissingDependencyError", "PeerFailedError",
           "GraphfeedWarning", "USER_ERRORS"]


class GraphfeedError(ValueError):
    """Base class of graphfeed's errors about user input (a ``ValueError``)."""


class DatasetError(GraphfeedError):
    """A dataset folder, metadata file or array file is missing, malformed or unsafe.

    The message names the file and the offending value.
    """


class PeerFailedError(GraphfeedError):
    """This rank stopped because another rank of the run failed; that rank's own error says why
    (``graphfeed.distributed.launch`` reports it first)."""


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


#: what a user can fix (bad input, a missing optional package, a path that is or is not there):
#: the command line prints these as one line (exit status 2), and a rank of
#: ``graphfeed.distributed.launch`` passes them to its parent as one line, without a traceback
USER_ERRORS = (GraphfeedError, MissingDependencyError, FileNotFoundError, FileExistsError)
