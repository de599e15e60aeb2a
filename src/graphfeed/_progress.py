"""Progress bars, one kind for the whole package: ``tqdm`` on stderr, shown only when stderr is
a terminal (``enabled=None``) so logs and ``--json`` output stay clean.

- :func:`bar`: a context-managed bar counting steps (batches, epochs), for loops that add 1.
- :class:`Progress`: a bar over a byte (or row) count that long jobs report as "done so far"
  (``prepare``'s passes over an edge file): ``start(label, total)``, ``update(done)``, ``done()``.
"""

from __future__ import annotations

import sys
from typing import Optional

__all__ = ["bar", "Progress"]


def bar(total: int, desc: str, *, enabled: bool = True, unit: str = "batch", stream=None):
    """A ``tqdm`` bar; ``enabled=False`` hides it, else it shows when the stream is a terminal."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=stream or sys.stderr, leave=False,
                dynamic_ncols=True, disable=None if enabled else True)


class Progress:
    """A bar over a running total of bytes; ``enabled=None`` shows it only on a terminal."""

    def __init__(self, enabled: Optional[bool] = None, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else bool(enabled)
        self._bar = None

    def start(self, label: str, total: int, *, unit: str = "B") -> None:
        self.done()
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=int(total) or None, desc=label, unit=unit,
                             unit_scale=unit == "B", file=self.stream, mininterval=0.2,
                             dynamic_ncols=True)

    def update(self, done: int, *, force: bool = False) -> None:
        if self._bar is not None:
            self._bar.update(int(done) - self._bar.n)
            if force:
                self._bar.refresh()

    def done(self, done: Optional[int] = None) -> None:
        if self._bar is not None:
            self.update(self._bar.total or self._bar.n if done is None else done)
            self._bar.close()
            self._bar = None

    def note(self, text: str) -> None:
        if self.enabled:
            self.stream.write(text + "\n")
            self.stream.flush()
